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

Cost: one RE2 compilation per distinct pattern (kept, up to
:data:`KEPT_PATTERNS`), then one RE2 full match per test.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import re2

#: Compiled patterns kept (each a few KB in RE2).
KEPT_PATTERNS = 4096
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


@lru_cache(maxsize=KEPT_PATTERNS)
def matcher(kind: str, pattern: str) -> Callable[[str], bool]:
    """A test of whole values against the pattern."""
    regex = like_regex(pattern) if kind == "like" else pattern
    try:
        compiled = re2.compile(regex, _options())
    except re2.error as exc:
        reason = exc.args[0].decode() if isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(f"the regular expression is not valid RE2: {reason}", 0) from None
    full = compiled.fullmatch
    return lambda value: full(value) is not None


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
