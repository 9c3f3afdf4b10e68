"""The registry of test kinds (:mod:`betree.lang.testkinds`): every kind is complete (text,
negation, truth function, a direct index), the parser and the atoms cover exactly the
registry, and what atoms store is what it was before the registry.

The rank order is pinned literally (stored clauses are sorted by it) and the stored form of
a corpus covering every order operator and every test kind, with its negations, is pinned
by a digest taken from the code before the registry (main at a05deb3)."""

from __future__ import annotations

import hashlib
import random

from betree.lang import special, testkinds
from betree.lang.atoms import Atom, OrderAtom, TestAtom
from betree.lang.dnf import to_clauses
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.matching.direct import DirectAtoms
from pbtree.operators import OPS
from storage import codec
from tests.support.direct import held

SCHEMA = Schema.from_json(
    {
        "attributes": {
            "i": {"type": "int"},
            "f": {"type": "float"},
            "s": {"type": "string"},
            "b": {"type": "bool"},
            "il": {"type": "int_list"},
            "sl": {"type": "string_list"},
            "latitude": {"type": "float"},
            "longitude": {"type": "float"},
            "now": {"type": "int"},
            "segments_with_timestamp": {"type": "segments"},
            "frequency_caps": {"type": "frequency_caps"},
            "items.sku": {"type": "string_list"},
            "items.price": {"type": "float_list"},
        }
    }
)
#: Every order operator and every test kind, positive; each is also compiled negated.
CORPUS = [
    *(f"i {op} 3" for op in OPS),
    *(f's {op} "k"' for op in OPS),
    "f between 1.5 and 2.5",
    "i not between 1 and 4",
    "i in (1, 2, 3)",
    "s not in ('a', 'b')",
    'starts_with(s, "ab")',
    "i is null",
    "b",
    "b = false",
    "il is empty",
    "3 in il",
    "il one of (1, 2)",
    "il none of (1, 2)",
    "sl all of ('x', 'y')",
    'ends_with(s, "z")',
    'contains(s, "mid")',
    "segment_within(1, 30)",
    "segment_before(2, 40)",
    'within_frequency_cap("flight", 1, "ns", 2, 30)',
    "geo_within_radius(45.5, -73.6, 50)",
    's like "*b?"',
    's matches ".*q"',
    "any items (sku = 'a' and price > 2)",
]
#: sha256 of the corpus's stored clauses (positive and negated), from main before the registry
DIGEST = "ae92137c8833793e38752c8cedbed48f1bf74a170402c2f2fa44dfc15260fabb"


def _clauses(text: str) -> list[tuple[Atom, ...]]:
    return to_clauses(compile_expr(text, SCHEMA))


def _stored(text: str) -> bytes:
    return codec.encode_value([[a.as_tuple() for a in c] for c in _clauses(text)])


def test_the_rank_order_is_the_stored_one() -> None:
    assert list(testkinds.KINDS) == [
        "undefined", "defined", "bool_true", "bool_false", "empty", "not_empty", "has",
        "lacks", "one_of", "none_of", "all_of", "not_all_of", "ends_with", "not_ends_with",
        "contains", "not_contains", "segment_within", "not_segment_within", "segment_before",
        "not_segment_before", "within_frequency_cap", "not_within_frequency_cap",
        "geo_within_radius", "not_geo_within_radius", "coordinates_out_of_range", "like",
        "not_like", "matches", "not_matches", "any", "not_any",
    ]  # fmt: skip


def test_atoms_are_stored_as_before() -> None:
    h = hashlib.sha256()
    for text in CORPUS:
        for form in (text, f"not ({text})"):
            h.update(_stored(form))
    assert h.hexdigest() == DIGEST


def test_every_kind_is_complete() -> None:
    """A text form or a negation to write it by; a negation that is a kind and leads back;
    a truth function; the arguments' kinds known; every function of special registered."""
    for kind in testkinds.TEST_KINDS:
        assert kind.arg in testkinds.ARG_KINDS
        assert callable(kind.holds)
        assert kind.text is not None or kind.negation is not None, kind.name
        if kind.negation is not None:
            neg = testkinds.KINDS[kind.negation]
            assert neg.negation == kind.name or kind.name == "undefined", kind.name
            assert neg.text is not None or kind.text is not None, kind.name
    functions = {k.name for k in testkinds.TEST_KINDS if k.arg == "special"}
    assert functions == {
        *special.FUNCTIONS,
        *("not_" + f for f in special.FUNCTIONS),
        special.OUT_OF_RANGE,
    }


def test_defined_negation_is_the_constructors() -> None:
    """A test's negation, made without the constructor, is the atom it would make: the same
    key, hash, argument and text (every kind of the corpus, and its negation's)."""
    tests = [a for a in _corpus_atoms() if isinstance(a, TestAtom)]
    assert {a.test for a in tests} >= {k.name for k in testkinds.TEST_KINDS if k.negation} - {
        "undefined"
    }
    for atom in tests:
        neg = atom.defined_negation()
        name = testkinds.KINDS[atom.test].negation
        if name is None:
            assert neg is None
            continue
        made = TestAtom(atom.attr, name, atom.arg)
        assert neg == made and hash(neg) == hash(made) and repr(neg) == repr(made)
        assert (neg.attr, neg.test, neg.arg, neg.to_expr()) == (
            made.attr,
            made.test,
            made.arg,
            made.to_expr(),
        )


def _corpus_atoms() -> list[Atom]:
    seen: dict[Atom, None] = {}
    for text in CORPUS:
        for form in (text, f"not ({text})"):
            for clause in _clauses(form):
                for atom in clause:
                    seen[atom] = None
                    if isinstance(atom, TestAtom) and atom.test in ("any", "not_any"):
                        seen.update(dict.fromkeys(a for c in atom.inner() for a in c))
    return list(seen)


def test_parser_and_atoms_cover_exactly_the_registry() -> None:
    """The corpus reaches every kind and every operator, and each atom's text parses back
    to clauses holding it: the parser reads what the registry writes.  (The geo test's
    out-of-range points have no syntax of their own: their text is an equal expression of
    order atoms, which the next test evaluates.)"""
    atoms = _corpus_atoms()
    kinds = {a.test for a in atoms if isinstance(a, TestAtom)}
    assert kinds == set(testkinds.KINDS)
    ops = {op for a in atoms if isinstance(a, OrderAtom) for op, _ in a.entries}
    assert ops == set(OPS)
    for atom in atoms:
        if atom.attr in ("sku", "price"):  # inside an element: any's own text reads them
            continue
        if isinstance(atom, TestAtom) and atom.test == special.OUT_OF_RANGE:
            continue
        back = {a for c in _clauses(atom.to_expr()) for a in c}
        assert atom in back, (atom, atom.to_expr())


def test_truth_functions_and_direct_indexes_agree_with_the_evaluator() -> None:
    """Each kind's truth function (through its atom) and its direct index answer as the
    brute-force evaluator of the atom's text, on random events."""
    rng = random.Random(5)
    seen: dict[str, set[bool]] = {}
    atoms = [
        a for a in _corpus_atoms() if isinstance(a, TestAtom) and a.attr not in ("sku", "price")
    ]
    for atom in atoms:
        index = DirectAtoms([(1, atom)])
        assert [kind for kind, _ in index.indexes] == [testkinds.KINDS[atom.test].direct]
        text = atom.to_expr()
        if atom.test == special.OUT_OF_RANGE:  # stands beside geo, which defines both
            text = f"latitude is not null and longitude is not null and {text}"
        node = compile_expr(text, SCHEMA)
        for _ in range(40):
            event = SCHEMA.validate_event(_event(rng))
            want = evaluate(node, event)
            assert atom.holds(event) == want, (atom, event)
            seen.setdefault(atom.test, set()).add(want)
            assert (held(index, atom.attr, event, 2) == [1]) == want, (atom, event)
    assert {kind: outcomes for kind, outcomes in seen.items() if outcomes != {True, False}} == {}


def _event(rng: random.Random) -> dict[str, object]:
    maybe = lambda v: v if rng.random() < 0.8 else None  # noqa: E731
    event: dict[str, object] = {
        "i": maybe(rng.randint(0, 5)),
        "f": maybe(rng.choice([1.0, 2.0, 3.0])),
        "s": maybe(rng.choice(["", "ab", "abz", "k", "xmidy", "xbq", "q"])),
        "b": maybe(rng.random() < 0.5),
        "il": maybe([rng.randint(0, 4) for _ in range(rng.randint(0, 3))]),
        "sl": maybe(rng.sample(["x", "y", "z"], rng.randint(0, 3))),
        "latitude": maybe(rng.choice([45.5, 46.0, 0.0, 95.0])),
        "longitude": maybe(rng.choice([-73.6, -73.0, 0.0])),
        "now": maybe(rng.randint(0, 60)),
        "segments_with_timestamp": maybe([[rng.randint(1, 2), rng.randint(0, 60) * 1_000_000]]),
        "frequency_caps": maybe([[["flight", 1, "ns"], rng.randint(0, 4), None]]),
        "items": maybe([{"sku": rng.choice("ab"), "price": rng.choice([1.0, 3.0])}]),
    }
    return {k: v for k, v in event.items() if v is not None}
