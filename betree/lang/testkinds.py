"""The kinds of test atom, declared once: each kind's name (as stored), argument, text form,
negation on a defined value, truth function and the direct index that serves it.

Why one place: a test kind used to be listed in the atoms (its argument kind, its
negation, its text), in the truth functions and in the direct indexes' dispatch, each in
its own order.  Here each is one :class:`TestKind` row; :mod:`betree.lang.atoms`,
:mod:`betree.matching.direct` and the checks read the rows (``tests/test_architecture.py`` refuses
another table keyed by test names).  The order operators (``<`` … ``>``) are not test kinds:
they go to the PB+trees and are declared in :mod:`pbtree.operators`.

The rows' order is the order atoms rank tests by (a stored clause's atoms are sorted by
it), so a new kind goes at the end (``tests/betree/lang/test_lang_testkinds.py`` pins the order).

How to add a test kind: docs/ARCHITECTURE.md, "How to add an operator or a test".

Cost: none per call; the table is built once at import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from betree.lang import holds, special
from betree.lang.lexicon import LIST_ELEMENT, literal

Event = Mapping[str, object]
#: The attribute types of the list tests and of the string tests.
LISTS = frozenset(LIST_ELEMENT)
STRINGS = frozenset(("string",))

#: What each kind of argument is (``TestKind.arg``).
ARG_KINDS = {
    "none": "no argument",
    "value": "a number or a string",
    "list": "a sorted tuple of two or more numbers or strings",
    "string": "a non-empty string",
    "pattern": "a pattern string (may be empty)",
    "special": "the function's constants, a tuple",
    "elements": "the inner expression's clauses, each a tuple of atom tuples",
}


@dataclass(frozen=True, slots=True)
class TestKind:
    """One kind of test atom."""

    #: the name stored in an atom's tuple (``("test", attr, name, arg)``)
    name: str
    #: its argument, one of :data:`ARG_KINDS`
    arg: str
    #: the kind that holds exactly where this one fails on a *defined* value (``None``:
    #: everywhere it fails, the attribute is undefined: ``defined`` and the geo test's
    #: out-of-range points, which are never negated)
    negation: str | None
    #: ``(attr, arg) -> holds(event)``, on validated events (``elements``: ``arg`` is the
    #: inner clauses' atoms)
    holds: Callable[[str, Any], Callable[[Event], bool]]
    #: ``(attr, arg) -> text`` in the language; ``None``: the negation's text, as
    #: ``(a is not null and not (…))``
    text: Callable[[str, Any], str] | None
    #: the kind of direct index that finds it per event (:mod:`betree.matching.direct`)
    direct: str
    #: the attribute types the parser lets it test (``None``: its syntax checks them, as
    #: the functions' :mod:`betree.lang.calls`, or any type: ``is null``)
    types: frozenset[str] | None = None
    #: the word that introduces it, where the parser reads it from here (``one of``)
    keyword: str | None = None

    __test__: ClassVar[bool] = False  # not a pytest test class


def clauses_text(clauses: Sequence[Sequence[Any]]) -> str:
    """Clauses of atoms as an expression (``false`` for none, ``true`` for an empty one)."""
    if not clauses:
        return "false"
    texts = [" and ".join(a.to_expr() for a in c) if c else "true" for c in clauses]
    if len(texts) == 1:
        return texts[0]
    return " or ".join(f"({t})" for t in texts)


def _values(xs: Sequence[object]) -> str:
    return ", ".join(literal(v) for v in xs)  # type: ignore[arg-type]


def _pair(
    name: str,
    arg: str,
    direct: str,
    positive: Callable[[str, Any], Callable[[Event], bool]],
    negative: Callable[[str, Any], Callable[[Event], bool]],
    text: Callable[[str, Any], str] | None,
    neg_name: str | None = None,
    neg_text: Callable[[str, Any], str] | None = None,
    types: frozenset[str] | None = None,
    keywords: tuple[str | None, str | None] = (None, None),
) -> tuple[TestKind, TestKind]:
    """A kind and its negation on a defined value (``not_`` the name unless given)."""
    neg = neg_name or "not_" + name
    return (
        TestKind(name, arg, neg, positive, text, direct, types, keywords[0]),
        TestKind(neg, arg, name, negative, neg_text, direct, types, keywords[1]),
    )


def _special(func: str, direct: str) -> tuple[TestKind, TestKind]:
    def text(a: str, args: Any) -> str:
        return special.call_text(func, a, args, literal)

    return _pair(
        func,
        "special",
        direct,
        partial(special.holds_factory, func),
        partial(special.holds_factory, "not_" + func),
        text,
    )


def _pattern(kind: str) -> tuple[TestKind, TestKind]:
    def text(a: str, p: Any) -> str:
        return f"{a} {kind} {literal(p)}"

    def neg_text(a: str, p: Any) -> str:
        return f"{a} not {kind} {literal(p)}"

    return _pair(
        kind,
        "pattern",
        "pattern",
        holds.pattern(kind, True),
        holds.pattern(kind, False),
        text,
        neg_text=neg_text,
        types=STRINGS,
    )


#: Every kind, in rank order (new kinds at the end: see the module's docstring).
TEST_KINDS: tuple[TestKind, ...] = (
    TestKind(
        "undefined", "none", "defined", holds.undefined, lambda a, _: f"{a} is null", "presence"
    ),
    TestKind("defined", "none", None, holds.defined, lambda a, _: f"{a} is not null", "presence"),
    *_pair(
        "bool_true", "none", "presence", holds.bool_true, holds.bool_false,
        lambda a, _: a, "bool_false", lambda a, _: f"{a} = false",
    ),
    *_pair(
        "empty", "none", "presence", holds.empty, holds.not_empty, lambda a, _: f"{a} is empty",
        types=LISTS,
    ),
    *_pair(
        "has", "value", "list", holds.has, holds.lacks,
        lambda a, x: f"{literal(x)} in {a}", "lacks", lambda a, x: f"{literal(x)} not in {a}",
        types=LISTS,
    ),
    *_pair(
        "one_of", "list", "list", holds.one_of, holds.none_of,
        lambda a, xs: f"{a} one of ({_values(xs)})", "none_of",
        lambda a, xs: f"{a} none of ({_values(xs)})", LISTS, ("one", "none"),
    ),
    *_pair(
        "all_of", "list", "list", holds.all_of, holds.not_all_of,
        lambda a, xs: f"{a} all of ({_values(xs)})", types=LISTS, keywords=("all", None),
    ),
    *_pair(
        "ends_with", "string", "suffix", holds.ends_with, holds.not_ends_with,
        lambda a, x: f"ends_with({a}, {literal(x)})", types=STRINGS,
    ),
    *_pair(
        "contains", "string", "contains", holds.contains, holds.not_contains,
        lambda a, x: f"contains({a}, {literal(x)})", types=STRINGS,
    ),
    *_special("segment_within", "segment"),
    *_special("segment_before", "segment"),
    *_special("within_frequency_cap", "cap"),
    *_special("geo_within_radius", "geo"),
    # beside geo_within_radius only (points beyond the coordinate ranges): never negated
    TestKind(
        special.OUT_OF_RANGE, "special", None,
        partial(special.holds_factory, special.OUT_OF_RANGE),
        lambda a, args: special.call_text(special.OUT_OF_RANGE, a, args, literal),
        "presence",
    ),
    *_pattern("like"),
    *_pattern("matches"),
    *_pair(
        "any", "elements", "any", holds.elements(True), holds.elements(False),
        lambda a, inner: f"any {a} ({clauses_text(inner)})",
    ),
)  # fmt: skip
#: Each kind by name.
KINDS = {kind.name: kind for kind in TEST_KINDS}
#: Each kind's rank (its row's position).
RANK = {kind.name: i for i, kind in enumerate(TEST_KINDS)}
