"""The fast paths of compilation agree exactly with the general paths they shortcut.

- normalization: ``_conjunction_clauses`` (a conjunction of atoms: one clause, no product)
  gives the very clauses of ``_dnf_clauses`` (the general multiplication): same atoms, same
  constants (``1`` and never ``1.0``), same order, same errors;
- tokenizing: ``_tokens`` (``str.split`` on a plain text) gives ``TOKEN_RE.findall``;
- parsing: the inline ``name op 12`` conjunct and the ``between``/list shortcuts build the
  nodes of the general path, and leave every error to it;
- remembered conjuncts: ``ConjunctMemo`` (a plain conjunction joined from its pieces, each
  compiled once) gives ``to_clauses(compile_expr(...))`` or declines, never anything else;
- simple pieces: ``read_simple`` (one regular expression for ``a op 12``, ``a between 1
  and 5``, ``a in (1, 2)``) gives the attribute and atoms of the parser's node, or declines;
- interning: an interned order atom is the atom the constructor builds (also when read back
  by ``atom_from_tuple``); places: the grid span of an ``=``-only atom (its hull) is the
  one of the per-entry rule.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
import random
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from betree.disk import grid
from betree.index import Index
from betree.lang.atoms import Clause, OrderAtom, atom_from_tuple
from betree.lang.atoms import order_atom as _order_atom
from betree.lang.bounded import forget_older_half
from betree.lang.conjuncts import ConjunctMemo, read_simple
from betree.lang.dnf import (
    _TRUE,
    MAX_CLAUSES,
    _conjunction_clauses,
    _dnf_clauses,
    _Normalizer,
    _size,
    to_clauses,
)
from betree.lang.expr import (
    And,
    Between,
    Compare,
    Const,
    InList,
    IsNull,
    ListItem,
    Node,
    Not,
    StrFunc,
)
from betree.lang.forms import order_atoms
from betree.lang.parser import compile_expr, parse
from betree.lang.schema import Schema
from betree.lang.tokens import PLAIN_MATCH, TOKEN_RE, tokens
from storage.errors import InvalidInput
from tests.support import random_schemas, workload
from tests.support.schemas import EVERY_TYPE_R_REQUIRED
from tools.bench import gen_rich

SCHEMA = Schema.from_json(EVERY_TYPE_R_REQUIRED)
ALWAYS_DEFINED = [(), ("r",), tuple(SCHEMA.attributes)]
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NUMBERS = ["-1", "0", "1", "2", "3", "1.0", "2.5", "-0.5", "3.0", "9007199254740993", "1e2"]
INTS = ["-1", "0", "1", "2", "3", "9223372036854775807"]
STRINGS = ['""', '"a"', '"ab"', '"b"', "'abc'", '"\\u00e9"', '"\\udbff\\udfff"']
OPS = ["<", "<=", ">", ">=", "=", "<>", "!="]


def _list(lit: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(lit, max_size=4).map(lambda xs: "(" + ", ".join(xs) + ")")


def _scalar_atoms(attr: str, lit: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    negation = st.sampled_from(["", "not "])
    forms = [
        st.builds(lambda o, v: f"{attr} {o} {v}", st.sampled_from(OPS), lit),
        st.builds(lambda o, v: f"{v} {o} {attr}", st.sampled_from(OPS), lit),
        st.builds(lambda n, lo, hi: f"{attr} {n}between {lo} and {hi}", negation, lit, lit),
        st.builds(lambda n, vs: f"{attr} {n}in {vs}", negation, _list(lit)),
    ]
    if attr != "r":
        forms.append(st.sampled_from([f"{attr} is null", f"{attr} is not null"]))
    return st.one_of(forms)


_numbers = st.sampled_from(NUMBERS)
_ints = st.sampled_from(INTS)
_strings = st.sampled_from(STRINGS)
_atoms = st.one_of(
    _scalar_atoms("i", _numbers),
    _scalar_atoms("f", _numbers),
    _scalar_atoms("r", _numbers),
    _scalar_atoms("s", _strings),
    st.builds(
        lambda fn, v: f"{fn}(s, {v})",
        st.sampled_from(["starts_with", "ends_with", "contains"]),
        _strings,
    ),
    st.sampled_from(["b", "b = true", "b = false", "b <> true", "true = b", "b is null"]),
    st.builds(lambda v, n: f"{v} {n}in il", _ints, st.sampled_from(["", "not "])),
    st.builds(
        lambda k, vs: f"il {k} of {vs}", st.sampled_from(["one", "none", "all"]), _list(_ints)
    ),
    st.builds(lambda v: f"{v} in sl", _strings),
    st.sampled_from(
        ["il is empty", "sl is empty", "il is null", "sl is not null", "true", "false"]
    ),
)
# Conjunctions, sometimes with a parenthesized conjunction inside (the parser flattens it).
_conjunctions = st.lists(
    st.one_of(
        _atoms, st.lists(_atoms, min_size=2, max_size=3).map(" and ".join).map("({})".format)
    ),
    min_size=1,
    max_size=6,
).map(" and ".join)


def _outcome(fn: Callable[[], object]) -> object:
    """``repr`` of the result (exact: tells ``1`` from ``1.0``), or the error's type and text."""
    try:
        return repr(fn())
    except Exception as exc:  # both paths must fail alike
        return (type(exc), str(exc))


@SETTINGS
@given(_conjunctions, st.sampled_from(ALWAYS_DEFINED))
def test_conjunction_fast_path_matches_general_path(text: str, always: tuple[str, ...]) -> None:
    node = compile_expr(text, SCHEMA)
    fast = _conjunction_clauses(node, always)
    assert fast is not None, text
    general = _dnf_clauses(node, MAX_CLAUSES, always)
    assert repr(fast) == repr(general), text
    assert to_clauses(node, always_defined=always) == general


def test_conjunction_fast_path_matches_general_path_seeded() -> None:
    """The same on a fixed sample of random conjunctions (run on every test run)."""
    rng = random.Random(2024)
    fast_count = 0
    for _ in range(3000):
        text = " and ".join(_random_atom(rng) for _ in range(rng.randrange(1, 7)))
        node = compile_expr(text, SCHEMA)
        always = rng.choice(ALWAYS_DEFINED)
        fast = _conjunction_clauses(node, always)
        assert fast is not None, text
        assert repr(fast) == repr(_dnf_clauses(node, MAX_CLAUSES, always)), text
        fast_count += bool(fast)
    assert fast_count > 500  # satisfiable ones too, not only contradictions


def _random_atom(rng: random.Random) -> str:
    attr = rng.choice(["i", "i", "f", "r", "s"])
    lits = STRINGS if attr == "s" else NUMBERS
    v, w = rng.choice(lits), rng.choice(lits)
    form = rng.randrange(6)
    if form < 3:
        return f"{attr} {rng.choice(OPS)} {v}"
    if form == 3:
        return f"{attr} {rng.choice(['', 'not '])}between {v} and {w}"
    if form == 4:
        values = ", ".join(rng.choice(lits) for _ in range(rng.randrange(4)))
        return f"{attr} {rng.choice(['', 'not '])}in ({values})"
    return rng.choice(["b", "b = false", "il is empty", "3 in il", 'starts_with(s, "ab")'])


HAND_BUILT: list[Node] = [
    # Trees compile_expr never makes, or makes only through other spellings.
    And((Compare("i", "=", 1.0), Compare("f", "<", 2.5))),
    And((Compare("i", ">=", 1.0), Compare("i", "<=", 1))),
    And((Between("f", 1.0, 2), Between("f", 0.5, 1.5))),
    And((Between("f", 2.0, 2), Compare("f", "!=", 2))),
    And((Between("i", 3, 1), Compare("i", "=", 2))),
    And((InList("i", (1, 1.0, 2)), InList("i", (2.0, 3)))),
    And((InList("i", ()), Compare("i", "=", 1))),
    And((InList("s", ("b", "a", "b")), Compare("s", ">", "a"))),
    And((Const(True), Compare("i", "=", 1))),
    And((Const(True), Const(True))),
    And((Const(False), Compare("i", "=", 1))),
    And((Compare("i", "=", 1),)),
    And((Between("i", 1, 5),)),
    And((Between("i", 1, 5), IsNull("i", negated=True))),
    And((StrFunc("starts_with", "s", "ab"), Between("s", "a", "b"))),
    Between("i", 1, 1),
    Between("s", "a", "b"),
    InList("i", (3, 1, 2)),
    Const(True),
    Const(False),
    # Invalid trees: both paths must raise the same error.
    Compare("i", "~", 1),
    And((Compare("f", "=", 1), Compare("i", "~", 1))),
    And((Compare("i", "=", None), Compare("i", "~", 1))),  # type: ignore[arg-type]
    And((Between("i", True, 2), Compare("i", "=", 1))),
    And((Between("i", 1, "a"), Compare("i", "=", 1))),
    And((InList("i", (1, "a")), Compare("i", "=", 1))),
    And((InList("i", (1, True)), Compare("i", "=", 1))),
]
NOT_CONJUNCTIONS: list[Node] = [  # the fast path declines them
    And((And((Compare("i", "=", 1), Compare("f", "=", 2))), Compare("s", "=", "x"))),
    And((Not(Compare("i", "=", 1)), Compare("f", "=", 2))),
    Not(Compare("i", "=", 1)),
]


@pytest.mark.parametrize("node", HAND_BUILT + NOT_CONJUNCTIONS, ids=repr)
@pytest.mark.parametrize("max_clauses", [MAX_CLAUSES, 1, 0])
@pytest.mark.parametrize("always", ALWAYS_DEFINED[:2])
def test_hand_built_trees_take_either_path_alike(
    node: Node, max_clauses: int, always: tuple[str, ...]
) -> None:
    expected = _outcome(lambda: _dnf_clauses(node, max_clauses, always))
    assert _outcome(lambda: to_clauses(node, max_clauses, always_defined=always)) == expected
    fast = _outcome(lambda: _conjunction_clauses(node, always))
    if node in NOT_CONJUNCTIONS:
        assert fast == "None"
    elif max_clauses >= 1:  # (to_clauses takes the general path when max_clauses < 1)
        assert fast == expected


def test_max_clauses_zero_is_honoured() -> None:
    with pytest.raises(InvalidInput, match="more than 0 clauses"):
        to_clauses(parse("i = 1 and f = 2"), 0)
    assert to_clauses(parse("i = 1"), 0) == _dnf_clauses(parse("i = 1"), 0, ())


def test_interned_order_atoms_are_the_constructors() -> None:
    first = to_clauses(parse("i = 2 and s < 'x' and f > 2.5"))
    again = to_clauses(parse("i = 2.0 and s < 'x' and f > 2.5"))
    for a, b in zip(first[0], again[0], strict=True):
        assert repr(a) == repr(b) and a == b
        assert repr(a) == repr(OrderAtom(a.attr, a.entries))
    assert [a is b for a, b in zip(first[0], again[0], strict=True)] == [False, True, True]
    # (2.5 is not interned; "i = 2" is, and 2.0 is canonically 2)
    assert _order_atom("i", "=", 2) is _order_atom("i", "=", 2)
    assert _order_atom("i", "=", 2.5) is not _order_atom("i", "=", 2.5)


@pytest.mark.parametrize("kind", ["int", "float", "string"])
def test_equality_atoms_span_their_hull(kind: str) -> None:
    values: list[list[ListItem]] = (
        [["a", "ab", "b\u00e9"], ["", "zzzzzzzzzz"], ["x"]]
        if kind == "string"
        else [
            [-3, 0, 2.5, 7],
            [1.5, 2.5],
            [4],
            [-(2**63), 2**63 - 1],
            [0.25],
            [-5, 3],
            [9],
            [-(2**63) - 1, 2**63],
            [-(2**70)],
            [2**70, 2**71],
            [0, 2**64],
            [-(2**64), 1],
        ]  # fmt: skip  (ints of the int fast path, inside and beyond int64)
    )
    for vs in values:
        atom = OrderAtom("a", [("=", v) for v in vs])
        spans = [grid.interval(kind, c, True, c, True) for _, c in atom.entries]
        assert grid.atom_span(kind, atom) == grid.hull(spans), vs  # (an empty one: grid.EMPTY)


# -- tokenizing ------------------------------------------------------------------------------------

_TOKEN_PIECES = [
    "a", "a1", "_x", "a-b", "a-", "and", "AND", "between", "in", "not", "0", "12", "-3", "-",
    "1x", "5-3", "1e5", "1e-5", "1.5", ".5", "<", "<=", ">", ">=", "=", "==", "<>", "<>=", "!=",
    "!", "&&", "||", "(", ")", ",", '"a b"', "'c'", '"x\\"y"', "é", "\t", "\n", "\x1c", "\xa0",
]  # fmt: skip


@SETTINGS
@given(
    st.one_of(
        st.text(alphabet=" ()<>=!-.,_aAe19\"'\t&|é\x1c\xa0", max_size=30),
        st.lists(
            st.tuples(st.sampled_from(_TOKEN_PIECES), st.sampled_from(["", " ", "  ", "\t"])),
            max_size=12,
        ).map(lambda ps: "".join(p + sep for p, sep in ps)),
    )
)
def test_tokens_match_the_token_regex(text: str) -> None:
    assert tokens(text) == TOKEN_RE.findall(text)


def test_plain_texts_take_the_split_path() -> None:
    for text in (
        "a278 = 37 and a389 > 31 and a109 in (9, 12) and a116 between 8 and 9",
        "x >= -1 AND (y <> 2 or z != 3)",
        "",
    ):
        assert PLAIN_MATCH(text), text
        assert tokens(text) == TOKEN_RE.findall(text)
    for text in ('s = "a b"', "f < 1.5", "a<3", "5-3", "a\t= 1"):
        assert not PLAIN_MATCH(text), text


# -- parsing ---------------------------------------------------------------------------------------


def test_inline_conjuncts_match_the_general_path() -> None:
    """``not X`` parses X through ``_unary`` alone, never through the ``_and`` shortcut."""
    rng = random.Random(7)
    for _ in range(500):
        attr = rng.choice(["i", "f", "r"])
        lit = rng.choice(["0", "7", "42", "9223372036854775807", "-1", "2.5"])
        atom = rng.choice(
            [
                f"{attr} {rng.choice(OPS)} {lit}",
                f"{attr} between {lit} and {rng.choice(['3', '10', '1.5'])}",
                f"{attr} not between 1 and {lit}",
                f"{attr} in ({lit}, 3, {lit})",
            ]
        )
        for compile_ in (parse, lambda t: compile_expr(t, SCHEMA)):
            tree = compile_(atom)
            assert compile_(f"not {atom}") == Not(tree), atom
            assert compile_(f"i = 1 and {atom}") == And((Compare("i", "=", 1), tree)), atom


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("i = 1 and zz = 2", 'column 11: unknown attribute "zz"'),
        ("i = 1 and s = 2", 'column 15: int literal compared to string attribute "s"'),
        ("i = 1 and b = 1", 'column 15: int literal compared to bool attribute "b"'),
        ("i = 1 and il = 1", 'column 14: operator "=" does not apply to int_list attribute "il"'),
        ("i = 99999999999999999999", "column 5: integer literal 99999999999999999999 is outside"),
        ("i = 1 and i < 1x", 'column 15: malformed number "1x"'),
        ("i = 1 and i <", "column 14: unexpected end of expression, expected a literal"),
        ("i = 1 and i = 1 = 2", 'column 17: unexpected "=", expected "and", "or" or the end'),
        ("i between 1 && 2", 'column 13: "between" takes the word "and", not "&&"'),
        ("i between 1 and", "column 16: unexpected end of expression, expected a literal"),
        ("s between 1 and 2", 'column 11: int literal compared to string attribute "s"'),
        ("b between 1 and 2", 'column 3: "between" does not apply to bool attribute "b"'),
        ("i between 1 and 2.5x", 'column 17: malformed number "2.5x"'),
        ('i between 1 and "a"', 'column 17: string literal compared to int attribute "i"'),
        ("i in (1, 2", 'column 11: unexpected end of expression, expected "," or ")"'),
        ('i in (1, "a")', 'column 10: string literal compared to int attribute "i"'),
        ("s in (1)", 'column 7: int literal compared to string attribute "s"'),
        ("il one of (1, 2.5)", 'column 15: float literal compared to int_list attribute "il"'),
        ("i = 1 and", "column 10: unexpected end of expression, expected an attribute, a literal"),
        ("i = 1 and 1 = 2", 'column 15: unexpected "2", expected an attribute name'),
        ("i=1and i=2", 'column 3: malformed number "1and"'),
        ("i = 1 and (i = 2", 'column 11: "(" is never closed'),
        ("i in (1,, 2)", 'column 9: unexpected ",", expected a number or a string in the list'),
        ("i between -1 and 1e99999", "column 18: float literal 1e99999 overflows a double"),
        ("i > 1 and f < 2 and s = 3", 'column 25: int literal compared to string attribute "s"'),
    ],
)
def test_errors_near_the_shortcuts(text: str, error: str) -> None:
    with pytest.raises(InvalidInput) as info:
        compile_expr(text, SCHEMA)
    assert str(info.value).startswith(error)


def test_workload_like_expressions_round_trip() -> None:
    """A BEGen-style conjunction: every shortcut taken, the same tree as spelled out."""
    text = "a = 37 and b > 31 and c <= 12 and d in (9, 12, 9) and e between 8 and 9 and f > -1"
    schema = Schema.from_json({"attributes": {k: {"type": "int"} for k in "abcdef"}})
    assert compile_expr(text, schema) == And(
        (
            Compare("a", "=", 37),
            Compare("b", ">", 31),
            Compare("c", "<=", 12),
            InList("d", (9, 12, 9)),
            Between("e", 8, 9),
            Compare("f", ">", -1),
        )
    )
    assert [tuple(map(str, c)) for c in to_clauses(compile_expr(text, schema))] == [
        ("a = 37", "b > 31", "c <= 12", "d in (9, 12)", "e >= 8", "e <= 9", "f > -1")
    ]


def test_nodes_with_their_own_init_behave_as_dataclasses() -> None:
    """``Compare``, ``Between``, ``InList`` and ``And`` set their slots directly."""
    nodes: list[Node] = [
        Compare("a", "<", 3),
        Compare(attr="a", op="<", value=3),
        Between("a", 1, 2),
        Between("a", 1, 2, negated=True),
        InList("a", (1, 2)),
        InList("a", (1, 2), True),
        And((Compare("a", "<", 3), Between("a", 1, 2))),
    ]
    for node in nodes:
        assert copy.deepcopy(node) == node
        assert pickle.loads(pickle.dumps(node)) == node
        assert dataclasses.replace(node) == node
        assert hash(dataclasses.replace(node)) == hash(node)
        assert eval(repr(node)) == node
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(node, dataclasses.fields(node)[0].name, "b")
    assert nodes[0] == nodes[1]
    assert repr(nodes[2]) == "Between(attr='a', lo=1, hi=2, negated=False)"
    assert dataclasses.replace(InList("a", (1, 2)), negated=True) == nodes[5]
    with pytest.raises(TypeError):
        Compare("a", "<")  # type: ignore[call-arg]


# Texts for the conjunct memo: mostly conjunctions of predicates on distinct attributes (what
# it answers), joined in every spelling, with pieces it must decline: non-order atoms,
# an "or", a repeated attribute, strings holding what it cuts at (" and " before a letter).
MEMO_SCHEMA = Schema.from_json(
    {
        "attributes": {
            **{f"i{k}": {"type": "int"} for k in range(4)},
            **{f"f{k}": {"type": "float"} for k in range(2)},
            **{f"s{k}": {"type": "string"} for k in range(3)},
            **SCHEMA.to_json()["attributes"],  # those of _atoms
        }
    }
)
_TRICKY = ['"x and i0 = 1"', '"a AND b"', "'q and s1 = \\'t'", '"p or q"', '"and "', '" and i"']


def _memo_piece(attr: str) -> st.SearchStrategy[str]:
    if attr[0] == "s":
        lit = st.sampled_from(STRINGS + _TRICKY)
    else:
        lit = st.sampled_from(NUMBERS if attr[0] in "fr" else INTS)
    plain = st.one_of(
        st.builds(lambda o, v: f"{attr} {o} {v}", st.sampled_from(OPS), lit),
        st.builds(lambda o, v: f"{v} {o} {attr}", st.sampled_from(OPS), lit),
        st.builds(lambda lo, hi: f"{attr} between {lo} and {hi}", lit, lit),
        st.builds(lambda vs: f"{attr} in {vs}", _list(lit)),
        st.builds(lambda v: f"({attr} = {v})", lit),
    )
    odd = st.one_of(
        st.builds(lambda v: f"{attr} not in ({v})", lit),
        st.builds(lambda v: f"not {attr} = {v}", lit),
        st.builds(lambda a, b: f"{attr} = {a} or {attr} = {b}", lit, lit),
        st.just(f"{attr} is null"),
        _atoms,
    )
    return st.one_of(*[plain] * 9, odd)


_memo_texts = st.lists(
    st.sampled_from([a for a in sorted(MEMO_SCHEMA.attributes) if a not in ("b", "il", "sl")]),
    min_size=1,
    max_size=6,
    unique=True,
).flatmap(
    lambda attrs: st.tuples(
        st.tuples(*map(_memo_piece, attrs)),
        st.lists(
            st.sampled_from([" and "] * 20 + [" AND ", "  and  ", " && ", " or "]),
            min_size=len(attrs) - 1,
            max_size=len(attrs) - 1,
        ),
    ).map(lambda pj: pj[0][0] + "".join(j + p for j, p in zip(pj[1], pj[0][1:], strict=True)))
)
_MEMO = ConjunctMemo(MEMO_SCHEMA)  # shared by the examples: pieces are found remembered too


@SETTINGS
@given(_memo_texts, st.sampled_from(ALWAYS_DEFINED))
def test_conjunct_memo_gives_the_general_clauses_or_declines(
    text: str, always: tuple[str, ...]
) -> None:
    general = _outcome(lambda: to_clauses(compile_expr(text, MEMO_SCHEMA), always_defined=always))
    for _ in range(2):  # the first time pieces are learned, the second they are remembered
        found = _MEMO.clauses(text)
        if found is not None:
            assert repr(found) == general, text


def test_conjunct_memo_answers_plain_conjunctions(tmp_path: Path) -> None:
    """It is taken where it should be (else the test above could pass by declining), and
    the index compiles through it."""
    memo = ConjunctMemo(SCHEMA, limit=3)  # halved often: still right
    idx = Index.open(tmp_path / "s", schema=SCHEMA.to_json())
    rng = random.Random(7)
    answered = 0
    for _ in range(500):
        attrs = rng.sample(["i", "f", "s", "r"], rng.randint(1, 4))
        parts = []
        for a in attrs:
            lit = (lambda: rng.choice(STRINGS)) if a == "s" else (lambda: rng.choice(NUMBERS))
            parts.append(
                rng.choice(
                    [
                        f"{a} {rng.choice(OPS)} {lit()}",
                        f"{a} between {lit()} and {lit()}",
                        f"{a} in ({lit()}, {lit()})",
                        f"({a} = {lit()})",
                    ]
                )
            )
        text = " and ".join(parts)
        found = memo.clauses(text)
        if found is not None:
            answered += 1
            assert found == to_clauses(compile_expr(text, SCHEMA)), text
            assert idx.engine.compiler().compile(1, text) == found
    assert answered == 500
    with pytest.raises(InvalidInput):
        idx.engine.compiler().compile(1.5, "i = 1")  # type: ignore[arg-type]
    idx.close()


@pytest.mark.parametrize(
    "text",
    [
        "i = 1 and i = 2",  # two atoms on one attribute: merged by the general path
        "i > 1 and i < 5",
        "i = 1 or i = 1",  # one predicate's worth, but an "or"
        "not i = 1 and f = 2",
        's = "x and i = 1"',  # the cut falls inside the string
        "i between 1 and 3 and",
        "i = 1 and nope = 2",  # an unknown attribute: the general path names it
        "i = 1 and b",  # not an order atom
    ],
)
def test_conjunct_memo_declines(text: str) -> None:
    assert ConjunctMemo(SCHEMA).clauses(text) is None


def test_index_compile_errors_are_unchanged_by_the_memo(tmp_path: Path) -> None:
    with Index.open(tmp_path / "s", schema=SCHEMA.to_json()) as idx:
        assert idx.engine.compiler().compile(1, "i = 1 and f = 2") == to_clauses(
            compile_expr("i = 1 and f = 2", SCHEMA)
        )
        with pytest.raises(InvalidInput) as info:
            idx.engine.compiler().compile(2, "i = 1 and nope = 2")
        assert info.value.column == 11 and "nope" in info.value.message


def test_a_full_memo_forgets_its_older_half() -> None:
    memo: dict[int, int] = {}
    for k in range(10):
        if len(memo) >= 4:
            forget_older_half(memo)
        memo[k] = k
        assert len(memo) <= 4 and k in memo
    assert list(memo) == [6, 7, 8, 9]  # the most recent kept, in order


# Pieces for read_simple: its forms in many spellings, on every type of attribute, with the
# integers at its edges (18 and 19 digits, leading zeros, -0) and near-misses it must decline.
_EDGE_INTS = [
    "0", "-0", "1", "-1", "7", "00", "007", "-007", "10", "479",
    "999999999999999999", "-999999999999999999", "1000000000000000000",
    "9223372036854775807", "-9223372036854775808", "9223372036854775808", "1.0", "1e2", "0x1",
]  # fmt: skip
_SP = st.sampled_from([" ", " ", " ", "", "  ", "\t"])
_SIMPLE_ATTRS = ["i", "f", "r", "s", "b", "il", "nope", "I", "i0", "f1", "s0"]


def _simple_piece() -> st.SearchStrategy[str]:
    attr = st.sampled_from(_SIMPLE_ATTRS)
    num = st.sampled_from(_EDGE_INTS)
    kw = lambda w: st.sampled_from([w, w.upper(), w.title()])  # noqa: E731
    compare = st.builds(
        lambda a, s1, o, s2, v: f"{a}{s1}{o}{s2}{v}", attr, _SP, st.sampled_from(OPS), _SP, num
    )
    between = st.builds(
        lambda a, b, lo, n, hi, s: f"{a}{s}{b}{s}{lo}{s}{n}{s}{hi}",
        attr, kw("between"), num, kw("and"), num, _SP,
    )  # fmt: skip
    in_list = st.builds(
        lambda a, i, s, vs: f"{a} {i}{s}(" + f"{s},{s}".join(vs) + ")",
        attr, kw("in"), _SP, st.lists(num, min_size=0, max_size=5),
    )  # fmt: skip
    return st.one_of(compare, between, in_list)


def _parsed(piece: str) -> object:
    """What the memo learns from ``piece`` by the parser: (attribute, atoms) or None."""
    try:
        node = compile_expr(piece, MEMO_SCHEMA)
    except InvalidInput:
        return None
    if isinstance(node, (Compare, Between, InList)):
        found = order_atoms(node)
        if found is not None:
            return node.attr, found
    return None


@SETTINGS
@given(_simple_piece())
def test_simple_pieces_read_as_the_parser_reads_them(piece: str) -> None:
    found = read_simple(piece, MEMO_SCHEMA)
    if found is not None:
        assert repr(found) == repr(_parsed(piece)), piece


def test_simple_pieces_are_read_where_they_should_be() -> None:
    """The common spellings are answered (else the test above could pass by declining),
    and what they give is the parser's, atoms interned."""
    answered = [
        "i = 5", "i=5", "i <> 5", "i != -3", "f >= 0", "i <= 999999999999999999",
        "i between 1 and 5", "i BETWEEN 5 AND 1", "i between 3 and 3", "f between -2 and 2",
        "i in (1, 2, 2)", "i In(1,2)", "i in ( 7 )", "i0 > 479",
    ]  # fmt: skip
    for piece in answered:
        found = read_simple(piece, MEMO_SCHEMA)
        assert found is not None, piece
        assert repr(found) == repr(_parsed(piece)), piece
    declined = [
        "i = 007", "i = 1000000000000000000", "i = 1.0", "s = 5", "b = 1", "il = 1",
        "nope = 1", "I = 1", "i = 1 and f = 2", "i in ()", "i not in (1)", "i = 5x",
        "i == 5", "i\t= 5", " i = 5", "i between 1 and", "i = -0 or i = 1", "5 = i",
    ]  # fmt: skip
    for piece in declined:
        assert read_simple(piece, MEMO_SCHEMA) is None, piece
    (a,) = read_simple("i = 5", MEMO_SCHEMA)[1]  # type: ignore[index]
    assert a is _order_atom("i", "=", 5) is atom_from_tuple(a.as_tuple())


_CONSTS = st.one_of(
    st.integers(-(2**64), 2**64),
    st.sampled_from([0, 1, -1, 2**63 - 1, -(2**63), True, False, 1.0, 2.5, -0.0, "", "a", "é"]),
)
_ENTRY = st.one_of(
    st.tuples(st.sampled_from(["=", "=", "=", "<", "!=", ">=", "~"]), _CONSTS).map(list),
    st.lists(_CONSTS, max_size=3),  # malformed: not a pair
)


@SETTINGS
@given(st.lists(_ENTRY, min_size=1, max_size=6), st.sampled_from(["a", "b"]))
def test_atoms_read_back_are_the_constructors(entries: list[list[object]], attr: str) -> None:
    """``atom_from_tuple`` of a stored tuple (lists, as msgpack gives them) builds what the
    constructor builds from the same entries, or fails as it does; its fast paths (one
    interned entry, an ``in`` list of ints or strings) included."""
    general = _outcome(lambda: OrderAtom(attr, [(str(op), c) for op, c in entries]))  # type: ignore[misc]
    assert _outcome(lambda: atom_from_tuple(["order", attr, entries])) == general
    try:
        atom = OrderAtom(attr, [(str(op), c) for op, c in entries])  # type: ignore[misc]
    except (TypeError, ValueError):
        return
    again = atom_from_tuple(["order", attr, [list(e) for e in atom.entries]])
    assert again == atom and again._key == atom._key and hash(again) == hash(atom)


def _general_product(node: Node, max_clauses: int, always: tuple[str, ...]) -> list[Clause]:
    """:func:`_dnf_clauses` as it was before :func:`betree.lang.dnf._small_product`: every
    product through :class:`_Normalizer` and its minimal passes."""
    normalizer = _Normalizer(max_clauses, frozenset(always), _size(node))
    dnf = normalizer.dnf(node, True)
    if _TRUE in dnf:
        return [()]
    return sorted(tuple(sorted(c)) for c in normalizer.minimal(dnf, bounded=False))


def _workload_texts() -> list[tuple[Schema, str]]:
    """Random expressions of tests/support/workload.py and random_schemas.py, rich
    ad-targeting rules (``bexdb gen --profile rich``), and products past the small ones."""
    rng = random.Random(41)
    out: list[tuple[Schema, str]] = []
    flat = Schema.from_json(workload.SCHEMA)
    for _ in range(1500):
        parts = [workload.expression(rng) for _ in range(rng.randint(1, 4))]
        out.append((flat, " and ".join(parts)))
    for _ in range(40):
        draw = random_schemas.Draw(rng, random_schemas.draw_schema(rng))
        drawn = Schema.from_json({"attributes": draw.attrs})
        out.extend((drawn, draw.expression()) for _ in range(25))
    p = gen_rich.params(seed=41)
    rich = Schema.from_json(gen_rich.SCHEMA)
    out.extend((rich, gen_rich.subscription(p, i, 20)) for i in range(1500))
    for n in (5, 6, 7, 9):  # 2**n clauses: below, at and past SMALL_PRODUCT and max_clauses
        out.append((flat, " and ".join(f"(i = {k} or j = {k})" for k in range(n))))
    return out


def test_small_products_match_the_general_product() -> None:
    """The product of few clauses formed directly (``_small_product``) gives the clauses,
    and the refusals, of the general path, at the default and at small ``max_clauses``."""
    small = 0
    for schema, text in _workload_texts():
        try:
            node = compile_expr(text, schema)
        except InvalidInput:
            continue
        always = tuple(a for a, spec in schema.attributes.items() if not spec.allow_undefined)
        for limit in (MAX_CLAUSES, 4, 1):
            new = _outcome(lambda: _dnf_clauses(node, limit, always))  # noqa: B023
            old = _outcome(lambda: _general_product(node, limit, always))  # noqa: B023
            assert new == old, (text, limit)
        small += isinstance(node, And)
    assert small > 1000  # products formed, not only single nodes
