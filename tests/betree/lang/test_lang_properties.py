"""Property tests: normalization agrees with the reference evaluator on random expressions and
events (every form, nested not/and/or, lists, missing and null attributes), renders back to
itself, and interns equal meanings to equal atoms."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from betree.lang.dnf import clauses_hold, clauses_to_expr, to_clauses
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr, parse
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tests.support.schemas import EVERY_TYPE_R_REQUIRED

SCHEMA = Schema.from_json(EVERY_TYPE_R_REQUIRED)

BIG = 2**53
INTS = [-2, -1, 0, 1, 2, 3, BIG + 1]
FLOATS = [-1.5, 0.0, 0.5, 1.0, 2.5, float(BIG)]
STRINGS = ["", "a", "ab", "abc", "b", "ba", "é", "\U0010ffff", "a\U0010ffff", 'q"\\']
SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def quote(s: str, ascii_only: bool) -> str:
    return json.dumps(s, ensure_ascii=ascii_only)  # the language takes JSON's escapes but \b \f


ints = st.sampled_from(INTS).map(str)
numbers = st.one_of(ints, st.sampled_from(FLOATS).map(repr))
strings = st.builds(quote, st.sampled_from(STRINGS), st.booleans())
ops = st.sampled_from(["<", "<=", ">", ">=", "=", "<>", "!="])


def lit_list(lit: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(lit, max_size=3).map(lambda xs: "(" + ", ".join(xs) + ")")


def scalar_atoms(attr: str, lit: st.SearchStrategy[str], nullable: bool) -> st.SearchStrategy[str]:
    forms = [
        st.builds(lambda o, v: f"{attr} {o} {v}", ops, lit),
        st.builds(lambda o, v: f"{v} {o} {attr}", ops, lit),
        st.builds(
            lambda n, lo, hi: f"{attr} {n}between {lo} and {hi}",
            st.sampled_from(["", "not "]),
            lit,
            lit,
        ),
        st.builds(lambda n, vs: f"{attr} {n}in {vs}", st.sampled_from(["", "not "]), lit_list(lit)),
    ]
    if nullable:
        forms.append(st.sampled_from([f"{attr} is null", f"{attr} is not null"]))
    return st.one_of(forms)


def string_functions() -> st.SearchStrategy[str]:
    return st.builds(
        lambda fn, v: f"{fn}(s, {v})",
        st.sampled_from(["starts_with", "ends_with", "contains"]),
        strings,
    )


def list_atoms(attr: str, lit: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(lambda v, n: f"{v} {n}in {attr}", lit, st.sampled_from(["", "not "])),
        st.builds(
            lambda k, vs: f"{attr} {k} of {vs}",
            st.sampled_from(["one", "none", "all"]),
            lit_list(lit),
        ),
        st.sampled_from([f"{attr} is empty", f"{attr} is null", f"{attr} is not null"]),
    )


bool_atoms = st.sampled_from(
    ["b", "b = true", "b = false", "b <> true", "b != false", "true = b", "b is null"]
)

atoms = st.one_of(
    scalar_atoms("i", numbers, True),
    scalar_atoms("f", numbers, True),
    scalar_atoms("r", numbers, False),
    scalar_atoms("s", strings, True),
    string_functions(),
    bool_atoms,
    list_atoms("il", ints),
    list_atoms("sl", strings),
    st.sampled_from(["true", "false"]),
)


def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        children.map(lambda x: f"not ({x})"),
        children.map(lambda x: f"not {x}"),
        st.builds(
            lambda xs, op: "(" + f" {op} ".join(xs) + ")",
            st.lists(children, min_size=2, max_size=3),
            st.sampled_from(["and", "or", "&&", "||", "AND", "Or"]),
        ),
    )


expressions = st.recursive(atoms, extend, max_leaves=8)


def maybe(values: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    # "absent" is a marker for a missing key; None is JSON null: both mean undefined
    return st.one_of(st.just("absent"), st.none(), values)


raw_events = st.fixed_dictionaries(
    {
        "i": maybe(st.sampled_from([*INTS, BIG, -(2**63), 2**63 - 1, 4])),
        "f": maybe(st.sampled_from([*FLOATS, *INTS, 2.0, -0.0, 0.25])),
        "s": maybe(st.sampled_from([*STRINGS, "abd", "a\U0010ffffz", "c", "aab"])),
        "b": maybe(st.booleans()),
        "il": maybe(st.lists(st.sampled_from([-1, 0, 1, 2, 3]), max_size=3)),
        "sl": maybe(st.lists(st.sampled_from(["", "a", "ab", "b", "é"]), max_size=3)),
        "r": st.sampled_from([-1, 0, 1, 2, 3]),
    }
)


def validated(raw: dict[str, object]) -> dict[str, object]:
    return SCHEMA.validate_event({k: v for k, v in raw.items() if v != "absent"})


@SETTINGS
@given(expressions, st.lists(raw_events, min_size=1, max_size=6))
def test_clauses_agree_with_evaluator(text: str, raws: list[dict[str, object]]) -> None:
    node = compile_expr(text, SCHEMA)
    try:
        clauses = to_clauses(node, max_clauses=4096)
        assumed = to_clauses(node, max_clauses=4096, always_defined={"r"})
    except InvalidInput:
        assume(False)
        return
    for raw in raws:
        event = validated(raw)
        expected = evaluate(node, event)
        assert clauses_hold(clauses, event) == expected, (text, event, clauses)
        assert clauses_hold(assumed, event) == expected, (text, event, assumed)


@SETTINGS
@given(expressions, st.lists(raw_events, min_size=1, max_size=4))
def test_rendering_is_equivalent_and_normalizes_back(
    text: str, raws: list[dict[str, object]]
) -> None:
    try:
        clauses = to_clauses(compile_expr(text, SCHEMA), max_clauses=4096)
    except InvalidInput:
        assume(False)
        return
    rendered = clauses_to_expr(clauses)
    again = parse(rendered)
    assert to_clauses(again, max_clauses=4096) == clauses, rendered
    node = parse(text)
    for raw in raws:
        event = validated(raw)
        assert evaluate(again, event) == evaluate(node, event), rendered


# Pairs of spellings with one meaning: their clauses must be identical (interned atoms).
def _same_meaning() -> st.SearchStrategy[tuple[str, str]]:
    int_lit = st.sampled_from(INTS)
    str_lit = st.sampled_from(STRINGS)
    return st.one_of(
        st.builds(lambda v: (f"i = {v}", f"i = {float(v)!r}"), st.sampled_from([-2, 0, 3])),
        st.builds(lambda v, o: (f"i {o} {v}", f"{v} {_flip(o)} i"), int_lit, ops),
        st.builds(
            lambda vs: (
                f"i in ({', '.join(map(str, vs))})",
                f"i in ({', '.join(map(str, sorted(set(vs), reverse=True)))})",
            ),
            st.lists(int_lit, min_size=1, max_size=4),
        ),
        st.builds(lambda v: (f"il one of ({v})", f"{v} in il"), int_lit),
        st.builds(lambda v: (f"il all of ({v}, {v})", f"{v} in il"), int_lit),
        st.builds(lambda v: (f"il none of ({v})", f"{v} not in il"), int_lit),
        st.builds(lambda v: (f"i between {v} and {v}", f"i = {v}"), int_lit),
        st.builds(lambda v: (f"not (i not in ({v}))", f"i is null or i = {v}"), int_lit),
        st.builds(
            lambda v: (f"not (s = {quote(v, True)})", f"s is null or s != {quote(v, False)}"),
            str_lit,
        ),
        st.builds(lambda v: (f"not not (s > {quote(v, True)})", f"s > {quote(v, False)}"), str_lit),
        st.just(('ends_with(s, "")', "s is not null")),
        st.just(("il none of ()", "il is not null")),
        st.just(("b <> false", "b")),
        st.just(("not (b = true)", "b is null or b = false")),
        st.just(("i in ()", "false")),
        st.just(("not (i in ())", "true")),
    )


def _flip(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "=", "<>": "<>", "!=": "!="}[op]


@SETTINGS
@given(_same_meaning(), expressions)
def test_equal_meaning_gives_equal_clauses(pair: tuple[str, str], context: str) -> None:
    left, right = pair
    assert to_clauses(parse(left)) == to_clauses(parse(right)), pair
    for op in ("and", "or"):  # and inside a larger expression, with duplicates merged
        a = to_clauses(parse(f"({left}) {op} ({context})"), max_clauses=4096)
        b = to_clauses(parse(f"({context}) {op} ({right}) {op} ({right})"), max_clauses=4096)
        assert a == b, (pair, context)
