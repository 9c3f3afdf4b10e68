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
from betree.lang.patterns import like_regex, literal_prefix, matcher
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
REGEXES = ["", ".*", "a.*", "a+b?", "[a-c]+", "(ab|zz)z?", "x.y", "\\pL+", "a\\*", "(?i)ab"]


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


@pytest.mark.parametrize("seed", [1, 2])
def test_patterns_agree_with_brute_force(tmp_path: Path, seed: int) -> None:
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
