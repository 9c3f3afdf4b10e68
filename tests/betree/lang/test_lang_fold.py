"""Case folding (``"fold_case": true``, betree.lang.fold) through the whole index.

The oracle does not use the module under test: it writes each subscription a second time
with its string literals case-folded, and evaluates that text against the same schema
without ``fold_case`` on an event whose strings it folded itself.  Case variants include
``ß``/``SS``/``ss``, Turkish ``İ``/``ı``, final sigma and titlecase digraphs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.cli import main

FOLDED = {
    "attributes": {
        "city": {"type": "string", "fold_case": True},
        "tags": {"type": "string_list", "fold_case": True},
        "raw": {"type": "string"},
        "n": {"type": "int"},
    }
}
PLAIN = {"attributes": {k: {"type": v["type"]} for k, v in FOLDED["attributes"].items()}}
WORDS = [
    "Straße", "STRASSE", "strasse", "StraSSe", "İstanbul", "istanbul", "ISTANBUL", "ıstanbul",
    "ΣΊΣΥΦΟΣ", "σίσυφος", "σίσυφοσ", "ǅemal", "ǆemal", "DŽEMAL", "Ab", "aB", "", "z", "Z",
    "ﬁre", "FIRE", "𐐀", "𐐨",
]  # fmt: skip


FUNCS = ["starts_with", "ends_with", "contains"]


def lit(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def predicate(rng: random.Random, fold: bool) -> str:
    """One random predicate; with ``fold``, its literals case-folded (the oracle's text)."""
    attr = rng.choice(["city", "raw"])
    f = (lambda s: s.casefold()) if fold and attr == "city" else (lambda s: s)
    w = lambda: f(rng.choice(WORDS))  # noqa: E731
    t = lambda: rng.choice(WORDS).casefold() if fold else rng.choice(WORDS)  # noqa: E731
    forms = [
        lambda: f"{attr} {rng.choice(['=', '!=', '<', '<=', '>', '>='])} {lit(w())}",
        lambda: f"{attr} between {lit(w())} and {lit(w())}",
        lambda: f"{attr} {rng.choice(['in', 'not in'])} ({lit(w())}, {lit(w())})",
        lambda: f"{rng.choice(FUNCS)}({attr}, {lit(f(rng.choice(WORDS)[:3]))})",  # cut, folded
        lambda: f"tags {rng.choice(['one of', 'none of', 'all of'])} ({lit(t())}, {lit(t())})",
        lambda: f"{lit(t())} {rng.choice(['in', 'not in'])} tags",
        lambda: f"{attr} is null",
        lambda: f"n > {rng.randint(0, 3)}",
    ]
    return rng.choice(forms)()


def expression_pair(rng: random.Random) -> tuple[str, str]:
    state = rng.getstate()
    parts = []
    texts = []
    for fold in (False, True):
        rng.setstate(state)
        k = rng.randint(1, 3)
        parts = [predicate(rng, fold) for _ in range(k)]
        joiner = rng.choice([" and ", " or "])
        text = joiner.join(parts)
        texts.append(f"not ({text})" if rng.random() < 0.2 else text)
    return texts[0], texts[1]


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if rng.random() < 0.85:
        ev["city"] = rng.choice(WORDS)
    if rng.random() < 0.85:
        ev["raw"] = rng.choice(WORDS)
    if rng.random() < 0.8:
        ev["tags"] = rng.sample(WORDS, rng.randint(0, 3))
    if rng.random() < 0.5:
        ev["n"] = rng.randint(0, 4)
    return ev


def oracle(folded_texts: dict[Any, str], ev: dict[str, Any]) -> set[Any]:
    plain = Schema.from_json(PLAIN)
    values = plain.validate_event(ev)
    for name in ("city", "tags"):  # folded by hand, not by betree.lang.fold
        if name in values:
            v = values[name]
            values[name] = v.casefold() if isinstance(v, str) else tuple(x.casefold() for x in v)
    return {i for i, t in folded_texts.items() if evaluate(compile_expr(t, plain), values)}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_folded_matching_agrees_with_an_oracle(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    given: dict[Any, str] = {}
    folded: dict[Any, str] = {}
    for phase in range(2):  # written, then reopened and written again
        with Index.open(tmp_path / "s", schema=FOLDED if phase == 0 else None) as idx:
            for k in range(120):
                ident = phase * 1000 + k
                given[ident], folded[ident] = expression_pair(rng)
                idx.subscribe(ident, given[ident])
            for gone in rng.sample(sorted(given), 20):  # deletes too
                idx.unsubscribe(gone)
                del given[gone], folded[gone]
            idx.check()
            events = [event(rng) for _ in range(150)]
            answers = idx.match_many(events)
            for ev, batched in zip(events, answers, strict=True):
                expected = oracle(folded, ev)
                assert set(idx.match(ev)) == expected, (ev, expected)
                assert isinstance(batched, list) and set(batched) == expected
            assert dict(idx.subscriptions()) == given  # the texts as given


def test_case_variants_meet() -> None:
    schema = Schema.from_json(FOLDED)
    assert schema.validate_event({"city": "Straße", "raw": "Straße", "tags": ["ΣΊΣΥΦΟΣ"]}) == {
        "city": "strasse",
        "raw": "Straße",
        "tags": ("σίσυφοσ",),
    }
    node = compile_expr('city in ("İ", "SS") and raw = "SS" and starts_with(city, "Ǆ")', schema)
    assert "'i̇', 'ss'" in repr(node) and "'SS'" in repr(node) and "'ǆ'" in repr(node)


def test_fold_case_in_the_schema() -> None:
    assert Schema.from_json(FOLDED).to_json() == FOLDED
    for spec, words in (
        ({"type": "int", "fold_case": True}, "string and string_list"),
        ({"type": "string", "fold_case": "yes"}, "true or false"),
    ):
        with pytest.raises(InvalidInput) as err:
            Schema.from_json({"attributes": {"a": spec}})
        assert '"a"' in err.value.message and words in err.value.message


def test_load_explain_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    subs = tmp_path / "subs.jsonl"
    subs.write_text(
        json.dumps({"id": 1, "expr": 'city = "STRASSE"'}) + "\n"
        + json.dumps({"id": 2, "expr": '"rock" in tags'}) + "\n"
    )  # fmt: skip
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(FOLDED))
    store = str(tmp_path / "s")
    args = ["load", store, str(subs), "--schema", str(schema), "--engine", "python"]
    assert main(args) == 0
    events = tmp_path / "e.jsonl"
    events.write_text('{"city": "Straße", "tags": ["ROCK"]}\n{"city": "strase"}\n')
    capsys.readouterr()
    assert main(["match", store, str(events)]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(out[0]["matches"]) == [1, 2] and out[1]["matches"] == []
    assert main(["explain", store, "1", '{"city": "Straße"}']) == 0
    assert 'saw "strasse", sent "Straße"' in capsys.readouterr().out
    assert main(["export", store]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert json.loads(header)["schema"]["attributes"]["city"]["fold_case"] is True
    exported = {json.loads(line)["expr"] for line in lines}
    assert exported == {'city = "STRASSE"', '"rock" in tags'}
    assert main(["verify", store]) == 0
