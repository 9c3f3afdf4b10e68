"""Lexer and recursive-descent parser for bexdb's expression language (SPEC section 3).

Why hand-written: every subscription of a bulk load goes through here, so the parser must be
fast (one compiled regex walked with ``match`` tokenizes a whole expression; the parser is a
few method calls per atom) and its errors must point at the offending token: every
:class:`~betree.expr.ExpressionError` carries a 1-based column counted in Unicode code points
(Python ``str`` indices are code points, so the column is the index plus one) and a reason
such as ``unexpected ")"``.

Two entry points:

- :func:`parse` checks syntax only (used by ``Schema.infer``, which has no schema yet);
- :func:`compile_expr` also type-checks every atom against a schema, inline while parsing,
  so that the error points at the attribute, operator or literal at fault.

Cost: about one regex step per token plus ~1 µs of Python per token; see
``tests/test_lang_parser.py::test_parse_speed`` for the measured rate.

>>> parse("price between 20 and 40 and not (genre = 'x')")  # doctest: +NORMALIZE_WHITESPACE
And(children=(Between(attr='price', lo=20, hi=40, negated=False),
              Not(child=Compare(attr='genre', op='=', value='x'))))
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, NoReturn

from betree.expr import (
    FLIP,
    And,
    Between,
    BoolAttr,
    Compare,
    Const,
    Contains,
    ExpressionError,
    InList,
    IsEmpty,
    IsNull,
    ListItem,
    ListOp,
    Literal,
    Node,
    Not,
    Or,
    StrFunc,
)

if TYPE_CHECKING:  # imported for annotations only: schema imports this module
    from betree.schema import AttrSpec, Schema

#: Reserved words (case-insensitive); none of them can name an attribute.
KEYWORDS = frozenset(
    "and or not in between one none all of is null empty true false "
    "starts_with ends_with contains".split()
)

#: What an attribute name looks like.
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*\Z")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

# One alternation, tried in order at each position; ``lastgroup`` names the token kind.
# Numbers must not run into letters, digits or dots ("12abc", "1.5.3", "1e"): the lookahead
# makes such a run fall through to ``badnum`` instead of splitting into two tokens.
_TOKEN_RE = re.compile(
    r"""
    (?P<ws>[ \t\r\n\f\v]+)
  | (?P<float>-?[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)(?![A-Za-z0-9_.]))
  | (?P<int>-?[0-9]+(?![A-Za-z0-9_.]))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_-]*)
  | (?P<op><=|>=|<>|!=|&&|\|\||[(),<>=])
  | (?P<str>"[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')
  | (?P<badnum>-?[0-9][A-Za-z0-9_.]*)
  | (?P<dot>\.[0-9])
  | (?P<minus>-)
  | (?P<quote>["'])
  | (?P<err>.)
    """,
    re.VERBOSE | re.DOTALL,
)

_OP_KIND = {
    "<": "<", "<=": "<=", ">": ">", ">=": ">=", "=": "=", "!=": "!=", "<>": "!=",
    "&&": "and", "||": "or", "(": "(", ")": ")", ",": ",",
}  # fmt: skip

_COMPARE_KINDS = frozenset(("<", "<=", "=", "!=", ">=", ">"))
_LITERAL_KINDS = frozenset(("int", "float", "str", "true", "false"))
_LIST_OPS = {"one": "one_of", "none": "none_of", "all": "all_of"}
_STR_FUNCS = frozenset(("starts_with", "ends_with", "contains"))
# After a reserved word, these tokens show it was meant as an attribute name.
_AFTER_ATTR = _COMPARE_KINDS | {"in", "is", "between", "one", "none", "all"}
_RESERVED_TELL = _COMPARE_KINDS | {"is", "between"}  # after "not", which can precede "in"

_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.DOTALL)

# Kinds a literal must have for an attribute of each type (SPEC section 3).
_NUMERIC = frozenset(("int", "float"))
_SCALAR_LITERALS = {
    "int": _NUMERIC,
    "float": _NUMERIC,
    "string": frozenset(("str",)),
    "bool": frozenset(("bool",)),
}
_ELEMENT_LITERALS = {"int_list": frozenset(("int",)), "string_list": frozenset(("str",))}
_ORDERED_TYPES = frozenset(("int", "float", "string"))
_EQUALITY_TYPES = frozenset(("int", "float", "string", "bool"))
_LIST_TYPES = frozenset(("int_list", "string_list"))
_KIND_NAMES = {"int": "int", "float": "float", "str": "string", "bool": "bool"}

# A token: (kind, value, start index).  ``value`` is the decoded literal for literals and the
# source text for everything else.
_Token = tuple[str, object, int]


def parse(text: str) -> Node:
    """Parse ``text`` (syntax only, no schema) into a tree; raise ``ExpressionError``.

    Cost: linear in the text, about 1-2 µs per token.
    """
    return _Parser(text, None).parse()


def compile_expr(text: str, schema: Schema) -> Node:
    """Parse ``text`` and type-check it against ``schema``; raise ``ExpressionError``.

    Checks every attribute exists, every operator applies to the attribute's type (the table
    of SPEC section 3), every literal has a type the attribute takes (numbers for int and
    float, integers only in ``int_list`` tests, strings for strings, ``true``/``false`` for
    bool), and that ``is null``/``is not null`` are not used on an attribute with
    ``allow_undefined: false``.
    """
    return _Parser(text, schema.attributes).parse()


def tokenize(text: str) -> list[_Token]:
    """The tokens of ``text``, ending with an ``("eof", "", len(text))`` token."""
    tokens: list[_Token] = []
    append = tokens.append
    match = _TOKEN_RE.match
    keywords = KEYWORDS
    pos = 0
    end = len(text)
    while pos < end:
        m = match(text, pos)
        if m is None:  # cannot happen: ``err`` matches any character
            raise ExpressionError("unexpected character", pos + 1)
        kind = m.lastgroup
        s = m.group()
        if kind == "ws":
            pass
        elif kind == "ident":
            low = s.lower()
            append((low if low in keywords else "ident", s, pos))
        elif kind == "op":
            append((_OP_KIND[s], s, pos))
        elif kind == "int":
            v = int(s)
            if v < INT64_MIN or v > INT64_MAX:
                raise ExpressionError(
                    f"integer literal {s} is outside the signed 64-bit range", pos + 1
                )
            append(("int", v, pos))
        elif kind == "float":
            f = float(s)
            if math.isinf(f):
                raise ExpressionError(f"float literal {s} overflows a double", pos + 1)
            append(("float", f, pos))
        elif kind == "str":
            append(("str", _decode_string(s, pos), pos))
        else:
            _lex_error(kind, s, text, pos)
        pos = m.end()
    append(("eof", "", end))
    return tokens


def _lex_error(kind: str | None, s: str, text: str, pos: int) -> NoReturn:
    col = pos + 1
    if kind == "badnum":
        raise ExpressionError(f'malformed number "{_clip(s)}"', col)
    if kind == "dot":
        raise ExpressionError(
            "a number must start with a digit", col, hint=f'write "0{text[pos : pos + 2]}…"'
        )
    if kind == "minus":
        raise ExpressionError(
            'a minus sign must be followed directly by digits ("-1", not "- 1")', col
        )
    if kind == "quote":
        raise ExpressionError("unterminated string literal", col)
    raise ExpressionError(f"unexpected character {_show_char(s)}", col)


def _show_char(c: str) -> str:
    if c.isprintable() and c not in "\"'":
        return f'"{c}"'
    return f"U+{ord(c):04X}"


def _clip(s: str, width: int = 24) -> str:
    return s if len(s) <= width else s[: width - 1] + "…"


def _decode_string(s: str, pos: int) -> str:
    """The value of the string token ``s`` (quotes included) that starts at index ``pos``."""
    body = s[1:-1]
    if "\\" in body:

        def replace(m: re.Match[str]) -> str:
            esc = m.group(1)
            if len(esc) == 5:
                return chr(int(esc[1:], 16))
            ch = _ESCAPES.get(esc)
            if ch is None:
                col = pos + 2 + m.start()
                if esc == "u":
                    raise ExpressionError(r"\u must be followed by four hex digits", col)
                raise ExpressionError(f"invalid escape \\{esc} in string literal", col)
            return ch

        body = _ESCAPE_RE.sub(replace, body)
        body = _join_surrogates(body, pos)
    elif not body.isascii():
        _check_encodable(body, pos)
    return body


def _join_surrogates(body: str, pos: int) -> str:
    """Combine ``\\uD83D\\uDE00``-style pairs; a lone surrogate is an error."""
    if body.isascii():
        return body
    try:
        body.encode("utf-8")
        return body
    except UnicodeEncodeError:
        pass
    try:
        return body.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise ExpressionError(
            "string literal holds a lone surrogate (not valid Unicode)", pos + 1
        ) from None


def _check_encodable(body: str, pos: int) -> None:
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ExpressionError(
            "string literal holds a lone surrogate (not valid Unicode)", pos + 2 + e.start
        ) from None


class _Parser:
    """One parse: the token list, a cursor, and (for compile) the schema's attributes."""

    __slots__ = ("text", "toks", "i", "attrs")

    def __init__(self, text: str, attrs: Mapping[str, AttrSpec] | None) -> None:
        if not isinstance(text, str):
            raise ExpressionError(f"an expression must be a string, not {type(text).__name__}", 1)
        self.text = text
        self.toks = tokenize(text)
        self.i = 0
        self.attrs = attrs

    # -- helpers ------------------------------------------------------------------------

    def _error(
        self, tok: _Token, expected: str | None = None, hint: str | None = None
    ) -> NoReturn:
        kind, value, pos = tok
        if kind == "eof":
            reason = "unexpected end of expression"
        else:
            reason = f'unexpected "{_clip(self._source(tok))}"'
        if expected:
            reason += f", expected {expected}"
        raise ExpressionError(reason, pos + 1, hint)

    def _source(self, tok: _Token) -> str:
        kind, value, pos = tok
        if kind in ("int", "float", "str"):
            m = _TOKEN_RE.match(self.text, pos)
            return m.group() if m else str(value)
        return str(value)

    def _expect(self, kind: str, what: str) -> _Token:
        tok = self.toks[self.i]
        if tok[0] != kind:
            self._error(tok, what)
        self.i += 1
        return tok

    # -- grammar ------------------------------------------------------------------------

    def parse(self) -> Node:
        node = self._or()
        tok = self.toks[self.i]
        if tok[0] != "eof":
            if tok[0] == ")":
                self._error(tok, hint='there is no "(" to close')
            self._error(tok, '"and", "or" or the end of the expression')
        return node

    def _or(self) -> Node:
        node = self._and()
        if self.toks[self.i][0] != "or":
            return node
        children = _flatten(Or, node)
        while self.toks[self.i][0] == "or":
            self.i += 1
            children.extend(_flatten(Or, self._and()))
        return Or(tuple(children))

    def _and(self) -> Node:
        node = self._unary()
        if self.toks[self.i][0] != "and":
            return node
        children = _flatten(And, node)
        while self.toks[self.i][0] == "and":
            self.i += 1
            children.extend(_flatten(And, self._unary()))
        return And(tuple(children))

    def _unary(self) -> Node:
        tok = self.toks[self.i]
        if tok[0] == "not":
            if self.toks[self.i + 1][0] in _RESERVED_TELL:
                raise ExpressionError(
                    f'"{tok[1]}" is a reserved word and cannot name an attribute', tok[2] + 1
                )
            self.i += 1
            return Not(self._unary())
        return self._primary()

    def _primary(self) -> Node:
        tok = self.toks[self.i]
        kind = tok[0]
        if kind == "ident":
            self.i += 1
            return self._after_attr(tok)
        if kind == "(":
            self.i += 1
            node = self._or()
            close = self.toks[self.i]
            if close[0] != ")":
                if close[0] == "eof":
                    raise ExpressionError('"(" is never closed', tok[2] + 1)
                self._error(close, '")"')
            self.i += 1
            return node
        if kind in _LITERAL_KINDS:
            nxt = self.toks[self.i + 1][0]
            if kind in ("true", "false") and nxt not in _COMPARE_KINDS and nxt not in ("in", "not"):
                self.i += 1
                return Const(kind == "true")
            return self._after_literal()
        if kind in _STR_FUNCS and self.toks[self.i + 1][0] == "(":
            return self._str_func()
        if kind in KEYWORDS and self.toks[self.i + 1][0] in _AFTER_ATTR:
            raise ExpressionError(
                f'"{tok[1]}" is a reserved word and cannot name an attribute', tok[2] + 1
            )
        self._error(tok, 'an attribute, a literal, "not" or "("')

    def _after_attr(self, attr_tok: _Token) -> Node:
        """The rest of an atom that starts with an attribute name."""
        name = str(attr_tok[1])
        spec = self._lookup(attr_tok)
        tok = self.toks[self.i]
        kind = tok[0]
        if kind in _COMPARE_KINDS:
            self.i += 1
            value, lkind, lpos = self._literal()
            if spec is not None:
                self._check_compare(spec, tok, lkind, lpos)
            return Compare(name, kind, value)
        negated = False
        if kind == "not":
            nxt = self.toks[self.i + 1]
            if nxt[0] not in ("in", "between"):
                self._error(nxt, '"in" or "between" after "not"')
            negated = True
            self.i += 1
            tok = nxt
            kind = nxt[0]
        if kind == "between":
            self.i += 1
            if spec is not None and spec.type not in _ORDERED_TYPES:
                self._type_error(spec, tok, '"between"')
            lo, lkind, lpos = self._literal()
            if spec is not None:
                self._check_scalar_literal(spec, lkind, lpos)
            and_tok = self.toks[self.i]
            if and_tok[0] != "and" or and_tok[1] == "&&":
                if and_tok[0] == "and":
                    raise ExpressionError('"between" takes the word "and", not "&&"', and_tok[2] + 1)
                self._error(and_tok, '"and"')
            self.i += 1
            hi, hkind, hpos = self._literal()
            if spec is not None:
                self._check_scalar_literal(spec, hkind, hpos)
            if lkind == "bool" or hkind == "bool" or (lkind == "str") != (hkind == "str"):
                bad = lpos if lkind == "bool" else hpos
                raise ExpressionError('"between" needs two numbers or two strings', bad + 1)
            return Between(name, lo, hi, negated)  # type: ignore[arg-type]
        if kind == "in":
            self.i += 1
            if spec is not None and spec.type not in _ORDERED_TYPES:
                hint = None
                if spec.type in _LIST_TYPES:
                    hint = f'use "{name} one of (…)", or "v in {name}" for one value'
                self._type_error(spec, tok, '"in (…)"', hint)
            values = self._list(spec)
            return InList(name, values, negated)
        if kind in _LIST_OPS:
            of = self.toks[self.i + 1]
            if of[0] != "of":
                self._error(of, '"of"')
            self.i += 2
            if spec is not None and spec.type not in _LIST_TYPES:
                self._type_error(spec, tok, f'"{kind} of"')
            values = self._list(spec)
            return ListOp(name, _LIST_OPS[kind], values)
        if kind == "is":
            self.i += 1
            nxt = self.toks[self.i]
            if nxt[0] == "not":
                self.i += 1
                self._expect("null", '"null"')
                self._check_nullable(spec, tok, "is not null")
                return IsNull(name, True)
            if nxt[0] == "null":
                self.i += 1
                self._check_nullable(spec, tok, "is null")
                return IsNull(name, False)
            if nxt[0] == "empty":
                self.i += 1
                if spec is not None and spec.type not in _LIST_TYPES:
                    self._type_error(spec, tok, '"is empty"')
                return IsEmpty(name)
            self._error(nxt, '"null", "not null" or "empty"')
        # A bare attribute: a bool test.  What follows is checked by the caller.
        if kind in _LITERAL_KINDS or kind == "ident":
            self._error(tok, "an operator")
        if spec is not None and spec.type != "bool":
            raise ExpressionError(
                f'{spec.type} attribute "{name}" cannot stand alone as a condition '
                "(only bool attributes can)",
                attr_tok[2] + 1,
            )
        return BoolAttr(name)

    def _after_literal(self) -> Node:
        """The rest of an atom that starts with a literal: ``v op a``, ``v [not] in a``."""
        value, lkind, lpos = self._literal()
        tok = self.toks[self.i]
        kind = tok[0]
        if kind in _COMPARE_KINDS:
            self.i += 1
            attr_tok = self._expect_attr()
            spec = self._lookup(attr_tok)
            if spec is not None:
                self._check_compare(spec, tok, lkind, lpos)
            return Compare(str(attr_tok[1]), FLIP[kind], value)
        negated = False
        if kind == "not":
            self.i += 1
            tok = self._expect("in", '"in"')
            kind = "in"
            negated = True
        if kind == "in":
            self.i += 1
            attr_tok = self._expect_attr()
            spec = self._lookup(attr_tok)
            name = str(attr_tok[1])
            if lkind == "bool":
                raise ExpressionError('"in" needs a number or a string before it', lpos + 1)
            if spec is not None:
                if spec.type not in _LIST_TYPES:
                    hint = f'use "{name} in (…)"' if spec.type in _ORDERED_TYPES else None
                    self._type_error(spec, tok, '"v in a"', hint)
                self._check_element(spec, lkind, lpos)
            return Contains(name, value, negated)  # type: ignore[arg-type]
        self._error(tok, 'a comparison operator or "in" after a literal')

    def _str_func(self) -> Node:
        func_tok = self.toks[self.i]
        self.i += 2  # the function name and "("
        attr_tok = self._expect_attr()
        spec = self._lookup(attr_tok)
        if spec is not None and spec.type != "string":
            self._type_error(spec, func_tok, f'"{func_tok[0]}"')
        self._expect(",", '","')
        arg_tok = self.toks[self.i]
        if arg_tok[0] != "str":
            self._error(arg_tok, "a string literal")
        self.i += 1
        self._expect(")", '")"')
        return StrFunc(func_tok[0], str(attr_tok[1]), str(arg_tok[1]))

    def _expect_attr(self) -> _Token:
        tok = self.toks[self.i]
        if tok[0] != "ident":
            if tok[0] in KEYWORDS:
                raise ExpressionError(
                    f'"{tok[1]}" is a reserved word and cannot name an attribute', tok[2] + 1
                )
            self._error(tok, "an attribute name")
        self.i += 1
        return tok

    def _literal(self) -> tuple[Literal, str, int]:
        """A scalar literal: (value, kind in int/float/str/bool, start index)."""
        tok = self.toks[self.i]
        kind = tok[0]
        if kind in ("int", "float", "str"):
            self.i += 1
            return tok[1], kind, tok[2]  # type: ignore[return-value]
        if kind == "true" or kind == "false":
            self.i += 1
            return kind == "true", "bool", tok[2]
        hint = 'test for undefined with "is null"' if kind == "null" else None
        if kind == "ident":
            self._error(tok, "a literal (comparing two attributes is not supported)", hint)
        self._error(tok, "a literal", hint)

    def _list(self, spec: AttrSpec | None) -> tuple[ListItem, ...]:
        """``( v, … )``: all numbers or all strings; type-checked when ``spec`` is known."""
        self._expect("(", '"(" to open a list')
        values: list[ListItem] = []
        toks = self.toks
        first_kind = ""
        if toks[self.i][0] == ")":
            self.i += 1
            return ()
        while True:
            tok = toks[self.i]
            kind = tok[0]
            if kind not in ("int", "float", "str"):
                self._error(tok, "a number or a string in the list")
            if first_kind == "":
                first_kind = kind
            elif (kind == "str") != (first_kind == "str"):
                raise ExpressionError("a list mixes strings and numbers", tok[2] + 1)
            if spec is not None:
                if spec.type in _LIST_TYPES:
                    self._check_element(spec, kind, tok[2])
                else:
                    self._check_scalar_literal(spec, kind, tok[2])
            values.append(tok[1])  # type: ignore[arg-type]
            self.i += 1
            sep = toks[self.i][0]
            if sep == ",":
                self.i += 1
            elif sep == ")":
                self.i += 1
                return tuple(values)
            else:
                self._error(toks[self.i], '"," or ")"')

    # -- type checks (compile_expr only) ---------------------------------------------------

    def _lookup(self, tok: _Token) -> AttrSpec | None:
        if self.attrs is None:
            return None
        name = str(tok[1])
        spec = self.attrs.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, list(self.attrs), n=1)
            hint = f'did you mean "{close[0]}"?' if close else None
            raise ExpressionError(f'unknown attribute "{name}"', tok[2] + 1, hint)
        return spec

    def _type_error(
        self, spec: AttrSpec, op_tok: _Token, what: str, hint: str | None = None
    ) -> NoReturn:
        raise ExpressionError(
            f'{what} does not apply to {spec.type} attribute "{spec.name}"', op_tok[2] + 1, hint
        )

    def _check_compare(self, spec: AttrSpec, op_tok: _Token, lkind: str, lpos: int) -> None:
        op = op_tok[0]
        allowed = _EQUALITY_TYPES if op in ("=", "!=") else _ORDERED_TYPES
        if spec.type not in allowed:
            hint = None
            if spec.type in _LIST_TYPES and op in ("=", "!="):
                hint = f'use "v in {spec.name}" or "{spec.name} one of (…)"'
            self._type_error(spec, op_tok, f'operator "{op_tok[1]}"', hint)
        self._check_scalar_literal(spec, lkind, lpos)

    def _check_scalar_literal(self, spec: AttrSpec, lkind: str, lpos: int) -> None:
        if lkind not in _SCALAR_LITERALS[spec.type]:
            raise ExpressionError(
                f'{_KIND_NAMES[lkind]} literal compared to {spec.type} attribute "{spec.name}"',
                lpos + 1,
            )

    def _check_element(self, spec: AttrSpec, lkind: str, lpos: int) -> None:
        if lkind not in _ELEMENT_LITERALS[spec.type]:
            hint = "int_list attributes take integer literals only" if lkind == "float" else None
            raise ExpressionError(
                f'{_KIND_NAMES[lkind]} literal compared to {spec.type} attribute "{spec.name}"',
                lpos + 1,
                hint,
            )

    def _check_nullable(self, spec: AttrSpec | None, is_tok: _Token, what: str) -> None:
        if spec is not None and not spec.allow_undefined:
            raise ExpressionError(
                f'"{what}" is invalid on attribute "{spec.name}", which cannot be undefined '
                "(allow_undefined is false)",
                is_tok[2] + 1,
            )


def _flatten(cls: type[And] | type[Or], node: Node) -> list[Node]:
    return list(node.children) if isinstance(node, cls) else [node]
