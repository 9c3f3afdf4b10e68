"""Literals of the expression language: a number or string token decoded to its value.

Why apart from the grammar (:mod:`betree.lang.parser`): what a literal may be (signed
64-bit integers, finite doubles, strings with their escapes, valid Unicode only) is one set
of rules whatever the form it appears in.  A malformed literal raises
:class:`LiteralError` with the reason and where in the token it is; the parser reports it
at the token's column.  Cost: one ``int``/``float`` call or one slice a literal, one regex
substitution for a string with escapes.
"""

from __future__ import annotations

import math
import re

from betree.lang.lexicon import INT64_MAX, INT64_MIN

_FLOAT_RE = re.compile(r"-?[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?|[eE][+-]?[0-9]+)\Z")
_NUMBER_START = frozenset("-0123456789")
_ESCAPES = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r"}
_ESCAPE_RE = re.compile(r"\\(u[0-9A-Fa-f]{4}|.)", re.DOTALL)
_SURROGATE = "string literal holds a lone surrogate (not valid Unicode)"


class LiteralError(Exception):
    """Why a literal token is malformed, with a hint, ``offset`` code points into it."""

    def __init__(self, reason: str, hint: str | None = None, offset: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.offset = offset


def clip(s: str, width: int = 24) -> str:
    """``s`` shortened to ``width`` code points for an error message."""
    return s if len(s) <= width else s[: width - 1] + "…"


def literal(s: str) -> tuple[int | float | str, str]:
    """The value of the token ``s``, a number or a string, and its kind (``int``, ``float``
    or ``str``); raises :class:`LiteralError` on a malformed one."""
    c = s[0]
    if c in _NUMBER_START:
        if s.isdigit() or (c == "-" and s[1:].isdigit()):  # ASCII digits only, see regex
            v = int(s)
            if v < INT64_MIN or v > INT64_MAX:
                raise LiteralError(f"integer literal {clip(s)} is outside the signed 64-bit range")
            return v, "int"
        if _FLOAT_RE.match(s):
            f = float(s)
            if math.isinf(f):
                raise LiteralError(f"float literal {clip(s)} overflows a double")
            return f, "float"
        if s == "-":
            raise LiteralError('a minus sign must be followed directly by digits ("-1", not "- 1")')
        raise LiteralError(f'malformed number "{clip(s)}"')
    if c == '"' or c == "'":
        if len(s) == 1:
            raise LiteralError("unterminated string literal")
        body = s[1:-1]
        if "\\" in body:
            return _unescape(body), "str"
        if not body.isascii():
            _check_unicode(body, 1)
        return body, "str"
    if c == "." and len(s) > 1:
        raise LiteralError("a number must start with a digit", hint=f'write "0{s}"')
    shown = f'"{c}"' if c.isprintable() else f"U+{ord(c):04X}"
    raise LiteralError(f"unexpected character {shown}")


def _unescape(body: str) -> str:
    def replace(m: re.Match[str]) -> str:
        esc = m.group(1)
        if len(esc) == 5:
            return chr(int(esc[1:], 16))
        ch = _ESCAPES.get(esc)
        if ch is None:
            if esc == "u":
                raise LiteralError(r"\u must be followed by four hex digits", offset=1 + m.start())
            raise LiteralError(f"invalid escape \\{esc} in string literal", offset=1 + m.start())
        return ch

    out = _ESCAPE_RE.sub(replace, body)
    if not out.isascii():
        try:
            out.encode("utf-8")
        except UnicodeEncodeError:  # \uD83D\uDE00-style pairs: join them
            try:
                out = out.encode("utf-16", "surrogatepass").decode("utf-16")
            except UnicodeDecodeError:
                raise LiteralError(_SURROGATE) from None
    return out


def _check_unicode(body: str, offset: int) -> None:
    try:
        body.encode("utf-8")
    except UnicodeEncodeError as e:
        raise LiteralError(_SURROGATE, offset=offset + e.start) from None
