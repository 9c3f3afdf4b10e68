"""Lexer and recursive-descent parser for bexdb's expression language (README: Language).

Why hand-written: every subscription of a bulk load goes through here, so the parser must be
fast, and its errors must point at the offending token: every
:class:`~betree.lang.expr.ExpressionError` carries a 1-based column counted in Unicode code points
and a reason such as ``unexpected ")"``.

How it is fast: one compiled regex splits the text into token strings with ``findall`` (a
single C call; on a *plain* text, with no string, float or tab, one ``fullmatch`` and
``str.split`` do it in about half the time), and one ``map`` of a dict lookup gives every
keyword and operator its kind (all case variants of the keywords are in the dict, so
identifiers never need lowering). Numbers and strings are decoded
(:mod:`betree.lang.literals`) only when the parser reaches them, so a malformed literal is
reported in left-to-right order with the other errors. The most frequent atoms, ``a op 12``,
``a between 1 and 9``, lists of small naturals and lists of plain strings (one step for the
whole list: :meth:`_Parser._plain_strings`), are checked and built by short paths that
fall back to the general code on anything else. Token positions are not kept: only when an
error is raised does the same regex run again with ``finditer`` to find the column of token
*i* (Python ``str`` indices are code points, so the column is the index plus one).

Two entry points:

- :func:`parse` checks syntax only (``Schema.infer`` uses it: it has no schema yet);
- :func:`compile_expr` also type-checks every atom against a schema, inline while parsing,
  so that the error points at the attribute, operator or literal at fault.

Cost: about 0.4 µs per token (~13 µs for a 30-token conjunction of comparisons), more for
strings and floats; see ``tests/betree/lang/test_lang_parser.py::test_parse_speed``.

>>> parse("price between 20 and 40 and not (genre = 'x')")  # doctest: +NORMALIZE_WHITESPACE
And(children=(Between(attr='price', lo=20, hi=40, negated=False),
              Not(child=Compare(attr='genre', op='=', value='x'))))
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NoReturn

from betree.lang import ipaddr, patterns, special
from betree.lang.arrays import ElementAttrs
from betree.lang.calls import Arg, special_call
from betree.lang.expr import (
    And,
    AnyOf,
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
    Node,
    Not,
    Or,
    Pattern,
    Scalar,
    StrFunc,
)
from betree.lang.fold import fold_constants
from betree.lang.lexicon import (
    KEYWORDS,
    MAX_NESTING,
    OBJECTS,
)
from betree.lang.literals import LiteralError, clip, literal
from betree.lang.testkinds import KINDS, STRINGS, TEST_KINDS
from betree.lang.tokens import KIND_GET, token_columns, tokens
from pbtree.operators import BY_SYMBOL, OPS, ORDER_OPS

if TYPE_CHECKING:  # for annotations only: schema imports this module (Schema.infer parses)
    from betree.lang.schema import AttrSpec, Schema


_IDENT_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_QUOTES = frozenset("\"'")
_COMPARE_KINDS = frozenset(OPS)
_EQUALITY_OPS = frozenset(op.symbol for op in ORDER_OPS if op.equality)  # "=", "!="
_LIST_OPS = {k.keyword: k.name for k in TEST_KINDS if k.arg == "list" and k.keyword}
_STR_FUNCS = frozenset(("starts_with", "ends_with", "contains"))
#: the attribute types each test kind applies to (betree.lang.testkinds)
_TYPES = {name: kind.types for name, kind in KINDS.items() if kind.types is not None}
# After a reserved word, these tokens show that it was meant as an attribute name.
_AFTER_ATTR = _COMPARE_KINDS | {"in", "is", "between", "one", "none", "all", "like", "matches"}
_AFTER_NOT = frozenset(("in", "between", "like", "matches"))  # "a not …"
_AFTER_NOT_ATTR = _COMPARE_KINDS | {"is", "between"}  # "not" may precede "in" legally
_AFTER_TRUE_LITERAL = _COMPARE_KINDS | {"in", "not"}  # "true = b", "true in a" (rejected)


# Literal kinds an attribute of each type takes (README: Language).
_NUMERIC = frozenset(("int", "float"))
_SCALAR_LITERALS = {
    "int": _NUMERIC,
    "float": _NUMERIC,
    "string": frozenset(("str",)),
    "bool": frozenset(("bool",)),
    "int_enum": frozenset(("int",)),
    "ip": frozenset(("str",)),
}
_ELEMENT_LITERALS = {
    "int_list": frozenset(("int",)),
    "string_list": frozenset(("str",)),
    "float_list": _NUMERIC,
}
_ORDERED_TYPES = frozenset(("int", "float", "string"))
_EQUALITY_TYPES = frozenset(("int", "float", "string", "bool", "int_enum", "ip"))
_IN_TYPES = _ORDERED_TYPES | {"int_enum", "ip"}  # the types "a in (…)" applies to
_ENUM_HINT = 'an int_enum attribute takes only "=", "<>"/"!=", "in" and "not in"'
_LIST_TYPES = frozenset(("int_list", "string_list", "float_list"))
#: the types an int literal always fits
_INT_TAKING_TYPES = frozenset(("int", "float", "int_list", "float_list"))
_KIND_NAMES = {"int": "int", "float": "float", "str": "string", "bool": "bool"}


def parse(text: str) -> Node:
    """Parse ``text`` (syntax only, no schema) into a tree; raise ``ExpressionError``.

    Cost: linear in the text, about 0.4 µs per token.
    """
    return _Parser(text, None).parse()


def compile_expr(text: str, schema: Schema) -> Node:
    """Parse ``text`` and type-check it against ``schema``; raise ``ExpressionError``.

    Checks that every attribute exists, every operator applies to the attribute's type (the
    README's table of forms), every literal has a type the attribute takes (numbers for int
    and float, integers only for ``int_list``, strings for strings and ``string_list``,
    ``true``/``false`` for bool), and that ``is null``/``is not null`` are not used on an
    attribute declared ``allow_undefined: false``.  String constants on an attribute
    declared ``fold_case`` come back case-folded (:mod:`betree.lang.fold`).
    """
    node = _Parser(text, schema.attributes).parse()
    return fold_constants(node, schema.folded) if schema.folded else node


class _Parser:
    """One parse: token strings, their kinds (None for identifiers and literals), a cursor,
    and the schema's attributes when compiling."""

    __slots__ = ("attrs", "depth", "i", "inside", "kinds", "text", "toks")

    def __init__(self, text: str, attrs: Mapping[str, AttrSpec] | None) -> None:
        if not isinstance(text, str):
            raise ExpressionError(f"an expression must be a string, not {type(text).__name__}", 1)
        self.text = text
        toks: list[str] = tokens(text)
        kinds: list[str | None] = list(map(KIND_GET, toks))
        toks.append("")
        kinds.append("eof")
        self.toks = toks
        self.kinds = kinds
        self.i = 0
        self.depth = 0
        self.attrs = attrs
        self.inside = False  # within "any PATH (…)": attrs are then the elements'

    # -- errors ---------------------------------------------------------------------------------

    def _fail(self, i: int, reason: str, hint: str | None = None, offset: int = 0) -> NoReturn:
        """Raise ``reason`` at token ``i`` (``offset`` code points into it)."""
        if i >= len(self.toks) - 1:
            col = len(self.text) + 1
        else:
            col = token_columns(self.text)[i] + offset
        raise ExpressionError(reason, col, hint)

    def _unexpected(self, i: int, expected: str | None = None, hint: str | None = None) -> NoReturn:
        kind = self.kinds[i]
        if kind == "eof":
            reason = "unexpected end of expression"
        else:
            s = self.toks[i]
            if kind is None and s[0] not in _IDENT_START:
                self._scalar(i, s)  # a malformed literal is reported as such
            reason = f'unexpected "{clip(s)}"'
        if expected:
            reason += f", expected {expected}"
        self._fail(i, reason, hint)

    def _reserved(self, i: int) -> NoReturn:
        self._fail(i, f'"{self.toks[i]}" is a reserved word and cannot name an attribute')

    # -- grammar: or > and > not > atom -------------------------------------------------------

    def parse(self) -> Node:
        node = self._or()
        i = self.i
        if self.kinds[i] != "eof":
            if self.kinds[i] == ")":
                self._unexpected(i, hint='there is no "(" to close')
            self._unexpected(i, '"and", "or" or the end of the expression')
        return node

    def _or(self) -> Node:
        node = self._and()
        kinds = self.kinds
        if kinds[self.i] != "or":
            return node
        children = list(node.children) if type(node) is Or else [node]
        while kinds[self.i] == "or":
            self.i += 1
            child = self._and()
            if type(child) is Or:
                children.extend(child.children)
            else:
                children.append(child)
        return Or(tuple(children))

    def _and(self) -> Node:
        """Conjuncts up to the next "or", ")" or the end.

        The most frequent atom, ``name op 12`` (a small natural; a numeric attribute when
        compiling), is checked and built right here, in about half the time of the general
        path (``_unary``, ``_after_attr``, ``_literal``, the type checks).  That path takes
        every other atom and anything wrong, so errors come in their usual order.
        """
        kinds = self.kinds
        toks = self.toks
        attrs = self.attrs
        children: list[Node] = []
        i = self.i
        while True:
            if (
                kinds[i] is None
                and kinds[i + 1] in _COMPARE_KINDS
                and (name := toks[i])[0] in _IDENT_START
                and (lit := toks[i + 2]).isdigit()
                and lit.isascii()
                and len(lit) < 19
                and (
                    attrs is None
                    or ((spec := attrs.get(name)) is not None and spec.type in _NUMERIC)
                )
            ):
                child: Node = Compare(name, kinds[i + 1], int(lit))  # type: ignore[arg-type]
                i += 3
            else:
                self.i = i
                child = self._unary()
                i = self.i
            if not children and kinds[i] != "and":
                self.i = i
                return child  # a single conjunct
            if type(child) is And:
                children.extend(child.children)
            else:
                children.append(child)
            if kinds[i] != "and":
                self.i = i
                return And(tuple(children))
            i += 1

    def _unary(self) -> Node:
        i = self.i
        kinds = self.kinds
        kind = kinds[i]
        if kind is None:
            s = self.toks[i]
            if s[0] in _IDENT_START:
                self.i = i + 1
                return self._after_attr(s, i)
            return self._after_literal()
        if kind == "not":
            if kinds[i + 1] in _AFTER_NOT_ATTR:
                self._reserved(i)
            self.i = i + 1
            self._nest(i)
            child = self._unary()
            self.depth -= 1
            return Not(child)
        if kind == "(":
            self.i = i + 1
            self._nest(i)
            node = self._or()
            self.depth -= 1
            j = self.i
            if kinds[j] != ")":
                if kinds[j] == "eof":
                    self._fail(i, '"(" is never closed')
                self._unexpected(j, '")"')
            self.i = j + 1
            return node
        if kind == "true" or kind == "false":
            if kinds[i + 1] in _AFTER_TRUE_LITERAL:
                return self._after_literal()
            self.i = i + 1
            return Const(kind == "true")
        if kind in _STR_FUNCS and kinds[i + 1] == "(":
            return self._str_func()
        if kind == "any" and kinds[i + 1] not in _AFTER_ATTR:
            return self._any(i)
        if kind in KEYWORDS and kinds[i + 1] in _AFTER_ATTR:
            self._reserved(i)
        self._unexpected(i, 'an attribute, a literal, "not" or "("')

    def _any(self, i: int) -> Node:
        """``any PATH (EXPR)``; token ``i`` is "any".  Inside, identifiers are paths in an
        element of PATH, typed by the schema's lists under PATH (:class:`ElementAttrs`)."""
        kinds, toks = self.kinds, self.toks
        if self.inside:
            self._fail(i, '"any" cannot nest inside "any"')
        j = i + 1
        path = toks[j]
        if kinds[j] is not None or path[0] not in _IDENT_START:
            if kinds[j] in KEYWORDS:
                self._reserved(j)
            self._unexpected(j, 'the path of an array of objects after "any"')
        if kinds[j + 1] != "(":
            self._unexpected(j + 1, f'"(" after "any {clip(path)}"')
        outer = self.attrs
        if outer is not None:
            spec = outer.get(path)
            if spec is None or spec.type != OBJECTS:
                self._fail(
                    j,
                    f'"{path}" is not an array of objects of the schema',
                    hint=f'declare the attributes of its elements as lists ("{path}.x": '
                    "string_list, int_list or float_list)",
                )
            self.attrs = ElementAttrs(outer, path)
        self.i = j + 2
        self._nest(i)
        self.inside = True
        child = self._or()
        self.inside = False
        self.depth -= 1
        self.attrs = outer
        k = self.i
        if kinds[k] != ")":
            if kinds[k] == "eof":
                self._fail(j + 1, '"(" is never closed')
            self._unexpected(k, '")"')
        self.i = k + 1
        return AnyOf(path, child)

    def _nest(self, i: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            self._fail(i, f"the expression nests deeper than {MAX_NESTING} levels")

    def _after_attr(self, name: str, ai: int) -> Node:
        """The rest of an atom that starts with attribute ``name`` (token ``ai``)."""
        kinds = self.kinds
        i = self.i
        kind = kinds[i]
        if kind == "(":
            if name.lower() in special.FUNCTIONS:
                return self._special(name.lower(), ai)
            self._fail(
                ai,
                f'unknown function "{name}"',
                hint="the functions are starts_with, ends_with, contains, segment_within, "
                "segment_before, within_frequency_cap and geo_within_radius",
            )
        spec = self._lookup(name, ai) if self.attrs is not None else None
        if kind in _COMPARE_KINDS:
            self.i = i + 1
            value, lkind = self._literal()
            if spec is not None:
                self._check_compare(spec, i, lkind, i + 1)
                value = self._ip(spec, value, i + 1)
            return Compare(name, kind, value)
        negated = False
        if kind == "not":
            kind = kinds[i + 1]
            if kind not in _AFTER_NOT:
                self._unexpected(i + 1, '"in", "between", "like" or "matches" after "not"')
            negated = True
            i += 1
            self.i = i
        if kind == "in":
            if self.toks[i + 1].lower() == "cidr" and kinds[i + 2] == "(":
                return self._cidr(name, spec, i, negated)
            self.i = i + 1
            if spec is not None and spec.type not in _IN_TYPES:
                hint = None
                if spec.type in _LIST_TYPES:
                    hint = f'use "{name} one of (…)", or "v in {name}" for one value'
                self._type_error(spec, i, '"in (…)"', hint)
            return InList(name, self._list(spec), negated)
        if kind == "between":
            return self._between(name, spec, i, negated)
        if kind == "like" or kind == "matches":
            return self._pattern(name, spec, i, kind, negated)
        if kind in _LIST_OPS:
            if kinds[i + 1] != "of":
                self._unexpected(i + 1, '"of"')
            self.i = i + 2
            if spec is not None and spec.type not in _TYPES[_LIST_OPS[kind]]:
                self._type_error(spec, i, f'"{self.toks[i]} of"')
            return ListOp(name, _LIST_OPS[kind], self._list(spec))
        if kind == "is":
            return self._is(name, spec, i)
        # A bare attribute: a bool test (what may follow is checked by the caller).
        if kind is None:
            self._unexpected(i, "an operator")
        if spec is not None and spec.type != "bool":
            self._fail(
                ai,
                f'{spec.type} attribute "{name}" cannot stand alone as a condition '
                "(only bool attributes can)",
            )
        return BoolAttr(name)

    def _ip(self, spec: AttrSpec, value: Any, i: int) -> Any:
        """An ``ip`` attribute's literal (token ``i``) as its key; others as they are."""
        if spec.type != "ip":
            return value
        try:
            return ipaddr.key(value)
        except ValueError as exc:
            self._fail(i, str(exc))

    def _cidr(self, name: str, spec: AttrSpec | None, i: int, negated: bool) -> Node:
        """``name [not] in cidr("a/n", …)``: one key range per block; token ``i`` is "in"."""
        if spec is not None and spec.type != "ip":
            self._type_error(spec, i, '"in cidr(…)"')
        kinds, toks = self.kinds, self.toks
        ranges: list[Node] = []
        j = i + 3
        while True:
            s = toks[j]
            if kinds[j] is not None or s[0] not in "\"'":
                self._unexpected(j, "a CIDR block in quotes")
            try:
                lo, hi = ipaddr.cidr_range(self._scalar(j, s)[0])  # type: ignore[arg-type]
            except ValueError as exc:
                self._fail(j, str(exc))
            ranges.append(Between(name, lo, hi, negated))
            if kinds[j + 1] == ")":
                break
            if kinds[j + 1] != ",":
                self._unexpected(j + 1, '"," or ")"')
            j += 2
        self.i = j + 2
        if len(ranges) == 1:
            return ranges[0]
        return And(tuple(ranges)) if negated else Or(tuple(ranges))

    def _pattern(self, name: str, spec: AttrSpec | None, i: int, kind: str, negated: bool) -> Node:
        """``name [not] like "p"`` / ``matches "re"``; token ``i`` is the operator."""
        if spec is not None and spec.type not in _TYPES[kind]:
            self._type_error(spec, i, f'"{kind}"')
        self.i = i + 1
        value, lkind = self._literal()
        if lkind != "str":
            self._fail(i + 1, f'"{kind}" takes a string pattern')
        found = patterns.problem(kind, str(value))
        if found is not None:
            self._fail(i + 1, found[0], offset=found[1] + 1)
        return Pattern(name, kind, str(value), negated)

    def _between(self, name: str, spec: AttrSpec | None, i: int, negated: bool) -> Node:
        """``name [not] between lo and hi``; token ``i`` is "between"."""
        if spec is not None and spec.type not in _ORDERED_TYPES:
            hint = _ENUM_HINT if spec.type == "int_enum" else None
            self._type_error(spec, i, '"between"', hint)
        toks = self.toks
        lo_s = toks[i + 1]
        if (  # fast path: two small naturals (on a numeric attribute)
            lo_s.isdigit()
            and lo_s.isascii()
            and len(lo_s) < 19
            and self.kinds[i + 2] == "and"
            and toks[i + 2] != "&&"
            and (hi_s := toks[i + 3]).isdigit()
            and hi_s.isascii()
            and len(hi_s) < 19
            and (spec is None or spec.type in _NUMERIC)
        ):
            self.i = i + 4
            return Between(name, int(lo_s), int(hi_s), negated)
        self.i = i + 1
        lo, lkind = self._literal()
        if spec is not None:
            self._check_scalar_literal(spec, lkind, i + 1)
        j = self.i
        if self.kinds[j] != "and" or self.toks[j] == "&&":
            if self.kinds[j] == "and":
                self._fail(j, '"between" takes the word "and", not "&&"')
            self._unexpected(j, '"and"')
        self.i = j + 1
        hi, hkind = self._literal()
        if spec is not None:
            self._check_scalar_literal(spec, hkind, j + 1)
        if lkind == "bool":
            self._fail(i + 1, '"between" needs two numbers or two strings')
        if hkind == "bool" or (lkind == "str") != (hkind == "str"):
            self._fail(j + 1, '"between" needs two numbers or two strings')
        return Between(name, lo, hi, negated)

    def _is(self, name: str, spec: AttrSpec | None, i: int) -> Node:
        """``name is [not] null`` / ``name is empty``; token ``i`` is "is"."""
        kinds = self.kinds
        kind = kinds[i + 1]
        if kind == "null" or (kind == "not" and kinds[i + 2] == "null"):
            negated = kind == "not"
            if spec is not None and not spec.allow_undefined:
                what = "is not null" if negated else "is null"
                self._fail(
                    i,
                    f'"{what}" is invalid on attribute "{name}", which cannot be undefined '
                    "(allow_undefined is false)",
                )
            self.i = i + 3 if negated else i + 2
            return IsNull(name, negated)
        if kind == "empty":
            if spec is not None and spec.type not in _TYPES["empty"]:
                self._type_error(spec, i, '"is empty"')
            self.i = i + 2
            return IsEmpty(name)
        if kind == "not":
            self._unexpected(i + 2, '"null"')
        self._unexpected(i + 1, '"null", "not null" or "empty"')

    def _after_literal(self) -> Node:
        """The rest of an atom that starts with a literal: ``v op a``, ``v [not] in a``."""
        li = self.i
        value, lkind = self._literal()
        kinds = self.kinds
        i = self.i
        kind = kinds[i]
        if kind in _COMPARE_KINDS:
            self.i = i + 1
            name = self._attr_name()
            spec = self._lookup(name, i + 1) if self.attrs is not None else None
            if spec is not None:
                self._check_compare(spec, i, lkind, li)
                value = self._ip(spec, value, li)
            return Compare(name, BY_SYMBOL[kind].flip, value)
        negated = kind == "not"
        if negated:
            if kinds[i + 1] != "in":
                self._unexpected(i + 1, '"in"')
            i += 1
        elif kind != "in":
            self._unexpected(i, 'a comparison operator or "in" after a literal')
        self.i = i + 1
        name = self._attr_name()
        spec = self._lookup(name, i + 1) if self.attrs is not None else None
        if lkind == "bool":
            self._fail(li, '"in" needs a number or a string before it')
        if spec is not None:
            if spec.type not in _TYPES["has"]:
                hint = f'use "{name} in (…)"' if spec.type in _ORDERED_TYPES else None
                self._type_error(spec, i, '"v in a"', hint)
            self._check_element(spec, lkind, li)
        return Contains(name, value, negated)

    def _str_func(self) -> Node:
        fi = self.i
        func = str(self.kinds[fi])
        self.i = fi + 2  # the function name and "("
        ai = self.i
        name = self._attr_name()
        spec = self._lookup(name, ai) if self.attrs is not None else None
        if spec is not None and spec.type not in _TYPES.get(func, STRINGS):  # (starts_with: ranges)
            self._type_error(spec, fi, f'"{self.toks[fi]}"')
        i = self.i
        if self.kinds[i] != ",":
            self._unexpected(i, '","')
        i += 1
        s = self.toks[i]
        if self.kinds[i] is not None or s[0] not in "\"'":
            self._unexpected(i, "a string literal")
        arg = self._scalar(i, s)[0]
        if self.kinds[i + 1] != ")":
            self._unexpected(i + 1, '")"')
        self.i = i + 2
        return StrFunc(func, name, arg)  # type: ignore[arg-type]

    def _special(self, func: str, fi: int) -> Node:
        """A function of the be-tree library (:mod:`betree.lang.special`); token ``fi`` is
        its name, the cursor is on "(".  Arguments: literals and attribute names, shaped and
        checked by :func:`betree.lang.calls.special_call`."""
        kinds = self.kinds
        i = self.i + 1
        args: list[Arg] = []
        if kinds[i] != ")":
            while True:
                s = self.toks[i]
                if kinds[i] is None and s[0] in _IDENT_START:
                    args.append((s, "ident", i))
                    i += 1
                else:
                    self.i = i
                    value, lkind = self._literal()
                    args.append((value, lkind, i))
                    i = self.i
                if kinds[i] == ")":
                    break
                if kinds[i] != ",":
                    self._unexpected(i, '"," or ")"')
                i += 1
        self.i = i + 1
        return special_call(func, fi, args, self.attrs, self._fail)

    def _attr_name(self) -> str:
        i = self.i
        kind = self.kinds[i]
        s = self.toks[i]
        if kind is None and s[0] in _IDENT_START:
            self.i = i + 1
            return s
        if kind in KEYWORDS:
            self._reserved(i)
        self._unexpected(i, "an attribute name")

    def _literal(self) -> tuple[Scalar, str]:
        """A scalar literal at the cursor: (value, kind in int/float/str/bool)."""
        i = self.i
        kind = self.kinds[i]
        if kind is None:
            s = self.toks[i]
            self.i = i + 1
            if s.isdigit() and s.isascii() and len(s) < 19:  # fast path: a small natural
                return int(s), "int"
            if s[0] in _IDENT_START:
                self._unexpected(i, "a literal (comparing two attributes is not supported)")
            return self._scalar(i, s)
        if kind == "true" or kind == "false":
            self.i = i + 1
            return kind == "true", "bool"
        hint = 'test for undefined with "is null"' if kind == "null" else None
        self._unexpected(i, "a literal", hint)

    def _scalar(self, i: int, s: str) -> tuple[ListItem, str]:
        """Decode token ``i`` (text ``s``), a number or string; raise on a malformed one."""
        try:
            return literal(s)
        except LiteralError as e:
            self._fail(i, e.reason, e.hint, e.offset)

    def _list(self, spec: AttrSpec | None) -> tuple[ListItem, ...]:
        """``( v, … )`` at the cursor: all numbers or all strings; type-checked if ``spec``."""
        kinds = self.kinds
        toks = self.toks
        i = self.i
        if kinds[i] != "(":
            self._unexpected(i, '"(" to open a list')
        i += 1
        if kinds[i] == ")":
            self.i = i + 1
            return ()
        strings = self._plain_strings(i) if spec is None or spec.type != "ip" else None
        if strings is not None:
            if spec is not None:
                self._check_kind(spec, "str", i)  # (the loop's check of the first element)
            self.i = i + 2 * len(strings)
            return strings
        values: list[ListItem] = []
        first = ""
        # The type checks depend on the spec and the literal's kind only: each kind is
        # checked once, at its first element (where a failing check would fail first).
        checked: set[str] = set() if spec is not None else {"int", "float", "str", "bool"}
        if spec is not None and spec.type in _INT_TAKING_TYPES:
            checked.add("int")
        ip = spec if spec is not None and spec.type == "ip" else None
        while True:
            s = toks[i]
            if kinds[i] is not None or s[0] in _IDENT_START:
                self._unexpected(i, "a number or a string in the list")
            if s[0] in _QUOTES and len(s) > 1 and "\\" not in s and s.isascii():
                value: ListItem = s[1:-1]  # fast path: a plain string (what literal() gives)
                kind = "str"
            elif s.isdigit() and s.isascii() and len(s) < 19:  # fast path: a small natural
                value = int(s)
                kind = "int"
            else:
                value, kind = self._scalar(i, s)
            if kind not in checked:
                assert spec is not None  # (with no spec, every kind counts as checked)
                self._check_kind(spec, kind, i)
                checked.add(kind)
            if not first:
                first = kind
            elif (kind == "str") != (first == "str"):
                self._fail(i, "a list mixes strings and numbers")
            values.append(self._ip(ip, value, i) if ip is not None else value)
            sep = kinds[i + 1]
            i += 2
            if sep == ")":
                self.i = i
                return tuple(values)
            if sep != ",":
                self._unexpected(i - 1, '"," or ")"')

    def _plain_strings(self, i: int) -> tuple[str, ...] | None:
        """The values of a list whose elements, from token ``i`` to its ``)``, are all plain
        string literals (quoted, no backslash, no lone surrogate: what :func:`literal` gives
        as the text between the quotes), else ``None``.  Rich rules' in-lists of a dozen
        names or more are read here in a few calls, not a dozen steps of :meth:`_list`'s
        loop each."""
        kinds = self.kinds
        try:
            end = kinds.index(")", i)
        except ValueError:
            return None
        if not (end - i) % 2 or kinds[i + 1 : end : 2].count(",") != (end - i) // 2:
            return None  # (not "v , v , … v )")
        values = self.toks[i:end:2]
        if kinds[i:end:2].count(None) != len(values):
            return None
        text = "".join(values)
        if "\\" in text:
            return None
        if not text.isascii():
            try:
                text.encode("utf-8")  # (what literal() checks of a non-ASCII string)
            except UnicodeEncodeError:
                return None  # (a lone surrogate: the loop reports it where it stands)
        for v in values:
            if v[0] not in _QUOTES or len(v) < 2:
                return None
        return tuple([v[1:-1] for v in values])

    def _check_kind(self, spec: AttrSpec, kind: str, i: int) -> None:
        """:meth:`_list`'s type check of a literal of ``kind`` at token ``i``."""
        if spec.type in _LIST_TYPES:
            self._check_element(spec, kind, i)
        else:
            self._check_scalar_literal(spec, kind, i)

    # -- type checks (compile_expr only) -------------------------------------------------------

    def _lookup(self, name: str, i: int) -> AttrSpec:
        attrs = self.attrs
        spec = attrs.get(name) if attrs is not None else None
        if spec is None:
            close = difflib.get_close_matches(name, list(attrs or ()), n=1)
            hint = f'did you mean "{close[0]}"?' if close else None
            self._fail(i, f'unknown attribute "{name}"', hint)
        return spec

    def _type_error(self, spec: AttrSpec, i: int, what: str, hint: str | None = None) -> NoReturn:
        self._fail(i, f'{what} does not apply to {spec.type} attribute "{spec.name}"', hint)

    def _check_compare(self, spec: AttrSpec, op_i: int, lkind: str, lit_i: int) -> None:
        op = self.kinds[op_i]
        equality = op in _EQUALITY_OPS
        allowed = _EQUALITY_TYPES if equality else _ORDERED_TYPES
        if spec.type not in allowed:
            hint = None
            if spec.type in _LIST_TYPES and equality:
                hint = f'use "v in {spec.name}" or "{spec.name} one of (…)"'
            elif spec.type == "int_enum":
                hint = _ENUM_HINT
            self._type_error(spec, op_i, f'operator "{self.toks[op_i]}"', hint)
        self._check_scalar_literal(spec, lkind, lit_i)

    def _check_scalar_literal(self, spec: AttrSpec, lkind: str, i: int) -> None:
        if lkind not in _SCALAR_LITERALS[spec.type]:
            self._fail(
                i, f'{_KIND_NAMES[lkind]} literal compared to {spec.type} attribute "{spec.name}"'
            )

    def _check_element(self, spec: AttrSpec, lkind: str, i: int) -> None:
        if lkind not in _ELEMENT_LITERALS[spec.type]:
            hint = None
            if lkind == "float":
                hint = "int_list attributes take integer literals only (float_list takes both)"
            self._fail(
                i,
                f'{_KIND_NAMES[lkind]} literal compared to {spec.type} attribute "{spec.name}"',
                hint,
            )
