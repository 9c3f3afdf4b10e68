"""``like`` and ``matches`` (betree.lang.patterns) through the whole index, against the
brute-force evaluator (whose ``like`` is its own definition, not RE2), with undefined
attributes, negations, reopening, batches and a bulk load; pattern edge cases: the empty
pattern, only wildcards, escapes, code points beyond the BMP; errors with columns."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.expr import ExpressionError, evaluate, like_holds
from betree.lang.parser import compile_expr
from betree.lang.patterns import (
    MAX_LITERALS,
    PatternSet,
    like_regex,
    literal_prefix,
    literals,
    matcher,
    problem,
)
from betree.lang.schema import Schema
from tools.cli import main

SCHEMA = {
    "attributes": {
        "s": {"type": "string"},
        "f": {"type": "string", "fold_case": True},
        "n": {"type": "int"},
    }
}
VALUES = ["", "a", "ab", "abc", "abd", "b", "a*", "a?", "a\\", "x𝄞y", "𝄞", "AB", "aXb", "zzz"]
LIKES = ["", "*", "**", "?", "??", "a*", "*b", "a?", "a*c", "\\*", "a\\*", "a\\?", "a\\\\",
         "*𝄞*", "x?y", "?𝄞", "ab", "A*", "*c*", "a**d"]  # fmt: skip
REGEXES = [
    "",
    ".*",
    "a.*",
    "a+b?",
    "[a-c]+",
    "(ab|zz)z?",
    "x.y",
    "\\pL+",
    "a\\*",
    "(?i)ab",
    "ab(c|d)",
    "a(b|bc)",
    "(?:ab|a)|zzz",
    "a\\*|b",
    "abc",
    "ab|",
    "a(b|)",
    "ab.*",
]


def lit(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def expression(rng: random.Random) -> str:
    attr = rng.choice(["s", "f"])
    if rng.random() < 0.6:
        atom = f"{attr} {rng.choice(['like', 'not like'])} {lit(rng.choice(LIKES))}"
    else:
        atom = f"{attr} {rng.choice(['matches', 'not matches'])} {lit(rng.choice(REGEXES))}"
    if rng.random() < 0.25:
        atom = f"not ({atom})"
    if rng.random() < 0.3:
        atom += f" {rng.choice(['and', 'or'])} n > {rng.randint(0, 2)}"
    return atom


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    for attr in ("s", "f"):
        if rng.random() < 0.8:
            ev[attr] = rng.choice(VALUES)
    if rng.random() < 0.5:
        ev["n"] = rng.randint(0, 3)
    return ev


def brute(subs: dict[Any, str], schema: Schema, ev: dict[str, Any]) -> set[Any]:
    values = schema.validate_event(ev)
    return {i for i, t in subs.items() if evaluate(compile_expr(t, schema), values)}


@pytest.mark.parametrize(("seed", "chunk", "memory"), [(1, 1000, 64 << 20), (2, 3, 1 << 12)])
def test_patterns_agree_with_brute_force(
    tmp_path: Path, seed: int, chunk: int, memory: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second run matches an attribute's patterns in RE2 sets of 3 and gives RE2 too
    little memory to compile them: every set falls back to one test per pattern."""
    monkeypatch.setattr(PatternSet, "CHUNK", chunk)
    monkeypatch.setattr(PatternSet, "MEMORY", memory)
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs: dict[Any, str] = {}
    for phase in range(2):
        with Index.open(tmp_path / "s", schema=SCHEMA if phase == 0 else None) as idx:
            for k in range(150):
                subs[phase * 1000 + k] = expression(rng)
                idx.subscribe(phase * 1000 + k, subs[phase * 1000 + k])
            for gone in rng.sample(sorted(subs), 15):
                idx.unsubscribe(gone)
                del subs[gone]
            idx.check()
            events = [event(rng) for _ in range(120)]
            for ev, batched in zip(events, idx.match_many(events), strict=True):
                expected = brute(subs, schema, ev)
                assert set(idx.match(ev)) == expected, ev
                assert isinstance(batched, list) and set(batched) == expected, ev
    lines = "".join(json.dumps({"id": i, "expr": t}) + "\n" for i, t in subs.items())
    (tmp_path / "subs.jsonl").write_text(lines)
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    load = ["load", str(tmp_path / "b"), str(tmp_path / "subs.jsonl")]
    assert main([*load, "--schema", str(tmp_path / "schema.json"), "--engine", "python"]) == 0
    with Index.open(tmp_path / "b", readonly=True) as bulk:
        bulk.check()
        for ev in events[:60]:
            assert set(bulk.match(ev)) == brute(subs, schema, ev), ev


def test_like_is_the_definition_under_re2() -> None:
    """RE2 on the translated pattern answers as the evaluator's own definition."""
    for pattern in LIKES:
        full = matcher("like", pattern)
        for value in [*VALUES, "a**d", "aXXd", "abcd"]:
            assert full(value) == like_holds(pattern, value), (pattern, value)
            prefix = literal_prefix("like", pattern)
            if full(value):
                assert value.startswith(prefix), (pattern, value, prefix)
    for regex in REGEXES:
        prefix = literal_prefix("matches", regex)
        for value in [*VALUES, "abz", "zzz"]:
            if matcher("matches", regex)(value):
                assert value.startswith(prefix), (regex, value, prefix)
    assert literal_prefix("matches", "/api/v[0-9]+/.*") == "/api/v"
    assert literal_prefix("like", "ab\\*c*d") == "ab*c"
    assert like_regex("a*") == "a(?s:.*)"


def test_bad_patterns_name_their_column() -> None:
    schema = Schema.from_json(SCHEMA)
    for text, column, words in (
        ('s matches "a("', 12, "not valid RE2"),
        ('s like "ab\\\\c"', 11, "escapes only"),
        ('n like "a"', 3, '"like" does not apply to int'),
        ("s like 3", 8, "takes a string pattern"),
        ('s not near "a"', 7, '"like" or "matches"'),
    ):
        with pytest.raises(ExpressionError) as err:
            compile_expr(text, schema)
        assert err.value.column == column and words in str(err.value), (text, str(err.value))


def test_a_pathological_regex_is_linear() -> None:
    """``(a*)*b`` against 100,000 a's: exponential in a backtracking engine, instant here."""
    assert not matcher("matches", "(a*)*b")("a" * 100_000)
    assert matcher("like", "*a*a*a*a*a*a*b")("a" * 100_000 + "b")


def test_a_spelled_out_pattern_is_exactly_its_values() -> None:
    """:func:`literals` (which indexes a pattern as an ``in`` list) against RE2 itself:
    on random patterns over literal characters, escapes, groups, ``|`` and wildcards,
    the values it gives are exactly the strings RE2 matches (all strings over the
    alphabet up to 4 characters, and the values themselves)."""
    import itertools

    alphabet = "ab."
    universe = ["".join(t) for n in range(5) for t in itertools.product(alphabet, repeat=n)]
    pieces = ["a", "b", "\\.", ".", "|", "(", ")", "(?:", "*", "?", "\\d", "(?i)", "{2}"]
    rng = random.Random(5)
    spelled = 0
    for _ in range(3000):
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        for kind in ("matches", "like"):
            if problem(kind, pattern) is not None:
                continue
            values = literals(kind, pattern)
            if values is None:
                continue
            spelled += 1
            full = matcher(kind, pattern)
            assert all(full(v) for v in values), (kind, pattern, values)
            assert {v for v in universe if full(v)} <= set(values), (kind, pattern, values)
    assert spelled > 500
    assert literals("matches", "v(1|2)(3|4)") == ("v13", "v14", "v23", "v24")
    assert literals("matches", "a.b") is None and literals("like", "a?") is None
    assert literals("matches", "(?i:ab)") is None  # fold_case: left to RE2
    wide = "(" + "|".join(f"x{k}" for k in range(MAX_LITERALS + 1)) + ")"
    assert literals("matches", wide) is None


@pytest.mark.parametrize(("chunk", "memory"), [(1000, 64 << 20), (7, 64 << 20), (50, 1 << 15)])
def test_a_pattern_set_answers_as_each_pattern(
    chunk: int, memory: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """:class:`PatternSet` (one RE2 pass for all of an attribute's patterns) against each
    pattern's own full match: in one set, in sets of 7, and in sets RE2 cannot compile in
    the memory given (tested one by one)."""
    monkeypatch.setattr(PatternSet, "CHUNK", chunk)
    monkeypatch.setattr(PatternSet, "MEMORY", memory)
    regexes = [like_regex(p) for p in LIKES] + REGEXES
    regexes += [f"(?s:.*)x{k}(?s:.*)" for k in range(40)]
    found = PatternSet(regexes)
    for value in [*VALUES, "abz", "ax3b", "x39", "y" * 10_000 + "x7", ""]:
        expected = [k for k, r in enumerate(regexes) if matcher("matches", r)(value)]
        assert sorted(found.match(value)) == expected, value
