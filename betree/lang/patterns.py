"""``a like "p"`` and ``a matches "re"``: whole-value patterns on string attributes.

``like``: ``*`` any run of code points (empty too), ``?`` exactly one, ``\\*`` ``\\?``
``\\\\`` the literal characters; a backslash before anything else is an error.  ``matches``:
RE2 syntax.  Both must match the whole value, and both run on RE2 (the ``google-re2``
package): matching takes time linear in the value whatever the pattern, so no
subscription can stall the matcher or the service (Python's ``re`` backtracks, and
``a*a*a*a*b``-style patterns take exponential time in it).  A ``like`` pattern is
translated to an RE2 expression.

The index uses the pattern's literal prefix as a range on the attribute (as
``starts_with`` does): for ``like`` the characters before the first wildcard; for
``matches`` the common prefix of RE2's possible-match range (every match lies between its
two ends, so every match starts with their common prefix), none when RE2 cannot bound it.

On an attribute declared ``fold_case`` a ``like`` pattern is case-folded as any constant,
and a ``matches`` pattern runs in RE2's case-insensitive mode (``(?i:…)``: RE2 folds case
character by character, so ``ß`` does not match ``ss`` there) on the folded value.

A pattern that spells out its values -- a ``like`` without wildcards, a ``matches`` of
literal text, groups and ``|`` only (``"(red|green|blue)"``), at most
:data:`MAX_LITERALS` values -- is indexed as the ``in`` list of those values
(:func:`literals`): no RE2 at match time, and the PB+tree finds it by value.

Matching runs every pattern of an attribute in one pass (:class:`PatternSet`, an RE2 set):
one call per event and attribute, where one call per pattern costs about 2-5 µs each
through the Python binding.

Cost: one RE2 compilation per distinct pattern (kept, up to
:data:`KEPT_PATTERNS`), then one RE2 full match per test.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import re2

#: Compiled patterns kept (each a few KB in RE2).
KEPT_PATTERNS = 4096
#: The most values a pattern may spell out to be indexed as an ``in`` list.
MAX_LITERALS = 256
#: Characters RE2 reads as other than themselves (``{`` and ``}`` included, though RE2
#: reads some of their uses literally: such patterns are simply left to RE2).
_RE2_SPECIAL = frozenset(".[]{}()*+?^$|\\")
_LIKE_SPECIAL = {"*": "(?s:.*)", "?": "(?s:.)"}


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every rejected pattern on stderr
    return options


def like_regex(pattern: str) -> str:
    """The RE2 expression of a ``like`` pattern; ``ValueError`` with the reason (and the
    0-based offset as ``args[1]``) for a bad escape."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            if i + 1 == len(pattern) or pattern[i + 1] not in "*?\\":
                raise ValueError("in a like pattern \\ escapes only *, ? and \\", i)
            out.append(re2.escape(pattern[i + 1]))
            i += 2
            continue
        out.append(_LIKE_SPECIAL.get(c) or re2.escape(c))
        i += 1
    return "".join(out)


def problem(kind: str, pattern: str) -> tuple[str, int] | None:
    """Why ``pattern`` is not a valid ``kind`` (``like``/``matches``) pattern, and where
    (0-based offset into it), or None."""
    try:
        matcher(kind, pattern)
    except ValueError as exc:
        return str(exc.args[0]), int(exc.args[1]) if len(exc.args) > 1 else 0
    return None


def regex(kind: str, pattern: str) -> str:
    """The RE2 expression of a valid ``kind`` pattern."""
    return like_regex(pattern) if kind == "like" else pattern


@lru_cache(maxsize=KEPT_PATTERNS)
def matcher(kind: str, pattern: str) -> Callable[[str], bool]:
    """A test of whole values against the pattern."""
    try:
        compiled = re2.compile(regex(kind, pattern), _options())
    except re2.error as exc:
        reason = exc.args[0].decode() if isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"the regular expression is not valid RE2: {reason}", 0) from None
    full = compiled.fullmatch
    return lambda value: full(value) is not None


class PatternSet:
    """Many RE2 expressions matched against a whole value in one pass (``RE2::Set``), in
    sets of up to :attr:`CHUNK` expressions, each compiled on first use.

    RE2 may fail to compile a set in :attr:`MEMORY`, and a set whose DFA runs out of memory
    while matching reports no match at all rather than an error; a first member that
    matches everything tells that apart from no match.  Either way the expressions of that
    set are tested one by one, so the answer is always exact.
    """

    CHUNK = 1000
    MEMORY = 64 << 20  # RE2's default is 8 MB

    __slots__ = ("_sets", "regexes")

    def __init__(self, regexes: list[str]) -> None:
        self.regexes = regexes
        self._sets: list[tuple[int, re2.Set | None]] | None = None

    def match(self, value: str) -> list[int]:
        """The indices of the expressions matching the whole ``value``."""
        sets = self._sets if self._sets is not None else self.compile()
        out: list[int] = []
        for at, chunk in sets:
            found = chunk.Match(value) if chunk is not None else None
            if found:
                out.extend(at + k - 1 for k in found if k)
            else:  # no answer (not even the first member): one test per expression
                regexes = self.regexes[at : at + self.CHUNK]
                out.extend(
                    at + k for k, expr in enumerate(regexes) if matcher("matches", expr)(value)
                )
        return out

    def compile(self) -> list[tuple[int, re2.Set | None]]:
        """The sets, compiled now if not yet (else at the first :meth:`match`; a fold's
        thread does: rich 50K, ~7 ms out of the first match after the fold)."""
        if self._sets is None:
            self._sets = [(at, self._compile(at)) for at in range(0, len(self.regexes), self.CHUNK)]
        return self._sets

    def _compile(self, at: int) -> re2.Set | None:
        options = _options()
        options.max_mem = self.MEMORY
        chunk = re2.Set.FullMatchSet(options)
        try:
            for expr in ["(?s:.*)", *self.regexes[at : at + self.CHUNK]]:
                chunk.Add(expr)
            chunk.Compile()
        except re2.error:
            return None
        return chunk


def literal_prefix(kind: str, pattern: str) -> str:
    """A prefix every value the pattern matches starts with ("" when none is known)."""
    if kind == "like":
        out = []
        i = 0
        while i < len(pattern) and pattern[i] not in "*?":
            if pattern[i] == "\\":
                i += 1
            out.append(pattern[i])
            i += 1
        return "".join(out)
    try:
        lo, hi = re2.compile(pattern, _options()).possiblematchrange(64)
    except re2.error:
        return ""
    n = 0
    while n < min(len(lo), len(hi)) and lo[n] == hi[n]:
        n += 1
    return lo[:n].decode("utf-8", errors="ignore")  # whole characters only


@lru_cache(maxsize=KEPT_PATTERNS)
def literals(kind: str, pattern: str) -> tuple[str, ...] | None:
    """Every value the (valid) pattern matches, when it spells them out: a ``like``
    without ``*`` or ``?``; a ``matches`` of literal characters, ``\\`` before punctuation,
    ``(…)`` and ``(?:…)`` groups and ``|``.  None for any other pattern, or one of more
    than :data:`MAX_LITERALS` values."""
    if kind == "like":
        prefix = literal_prefix(kind, pattern)
        return (prefix,) if like_regex(pattern) == re2.escape(prefix) else None
    values, end = _alternation(pattern, 0)
    return None if values is None or end != len(pattern) else tuple(sorted(values))


def _alternation(text: str, i: int) -> tuple[set[str] | None, int]:
    """The values of ``seq | seq | …`` from ``text[i:]`` (to a ``)`` or the end), and where
    it stopped; None when something other than literals appears or there are too many."""
    out: set[str] = set()
    while True:
        values, i = _sequence(text, i)
        if values is None:
            return None, i
        out |= values
        if len(out) > MAX_LITERALS:
            return None, i
        if i == len(text) or text[i] != "|":
            return out, i
        i += 1


def _sequence(text: str, i: int) -> tuple[set[str] | None, int]:
    values = {""}
    while i < len(text) and text[i] not in "|)":
        c = text[i]
        if c == "(":
            i += 3 if text.startswith("(?:", i) else 1
            inner, i = _alternation(text, i)
            if inner is None or i == len(text) or text[i] != ")":
                return None, i
            i += 1
        elif c == "\\" and i + 1 < len(text) and not text[i + 1].isalnum():
            inner, i = {text[i + 1]}, i + 2
        elif c in _RE2_SPECIAL:
            return None, i
        else:
            inner, i = {c}, i + 1
        values = {v + w for v in values for w in inner}
        if len(values) > MAX_LITERALS:
            return None, i
    return values, i
