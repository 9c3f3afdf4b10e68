"""List-valued events: set-based list tests and the per-event element limit (issue 28,
item 4; :mod:`betree.lang.elements`).

Every list test (``v in a``, ``one of``, ``none of``, ``all of`` and their negations) is
checked against the brute-force evaluator on seeded random workloads, short and long lists
(up to 20,000 elements), repeats, undefined attributes and case-folded strings; an event
whose lists hold more than ``MAX_EVENT_ELEMENTS`` elements in all is an error for that
event alone (it was matched, list length x list atoms).
"""

from __future__ import annotations

import pickle
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.elements import MAX_EVENT_ELEMENTS, Elements
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput

SCHEMA = {
    "attributes": {
        "nums": {"type": "int_list"},
        "tags": {"type": "string_list", "fold_case": True},
        "n": {"type": "int"},
    }
}
WORDS = ["a", "B", "c", "Straße", "STRASSE", "x", ""]


def expression(rng: random.Random) -> str:
    def consts(kind: str) -> str:
        k = rng.randint(0, 4)
        if kind == "nums":
            return ", ".join(str(rng.randrange(-3, 40)) for _ in range(k))
        return ", ".join(f'"{rng.choice(WORDS)}"' for _ in range(k))

    attr = rng.choice(["nums", "tags"])
    one = str(rng.randrange(-3, 40)) if attr == "nums" else f'"{rng.choice(WORDS)}"'
    form = rng.choice(
        [
            f"{one} in {attr}",
            f"{one} not in {attr}",
            f"{attr} one of ({consts(attr)})",
            f"{attr} none of ({consts(attr)})",
            f"{attr} all of ({consts(attr)})",
            f"not {attr} all of ({consts(attr)})",
            f"not {attr} one of ({consts(attr)})",
        ]
    )
    if rng.random() < 0.3:
        form = f"{form} and n > {rng.randrange(5)}"
    if rng.random() < 0.2:
        form = f"({form}) or {expression(rng)}"
    return form


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if rng.random() < 0.8:
        size = rng.choice([0, 1, 3, 10, 1000, 20_000])
        ev["nums"] = [rng.randrange(-3, 40 if size < 100 else 20_000) for _ in range(size)]
    if rng.random() < 0.8:
        ev["tags"] = [rng.choice(WORDS) for _ in range(rng.choice([0, 1, 4, 500]))]
    if rng.random() < 0.7:
        ev["n"] = rng.randrange(6)
    return ev


@pytest.mark.parametrize("seed", [1, 2])
def test_list_tests_against_brute_force(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    subs = {i: expression(rng) for i in range(300)}
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe_many(list(subs.items()))
        for i in rng.sample(sorted(subs), 30):  # deletes
            idx.unsubscribe(i)
            del subs[i]
        idx.check()
        trees = {i: compile_expr(e, schema) for i, e in subs.items()}
        events = [event(rng) for _ in range(40)]
        batched = idx.match_many(events)
        for ev, many in zip(events, batched, strict=True):
            values = schema.validate_event(ev)
            want = {i for i, t in trees.items() if evaluate(t, values)}
            assert set(idx.match(ev)) == want, ev.keys()
            assert set(many) == want  # type: ignore[arg-type]
    with Index.open(tmp_path / "s") as idx:  # reopened
        ev = event(rng)
        values = schema.validate_event(ev)
        assert set(idx.match(ev)) == {i for i, t in trees.items() if evaluate(t, values)}


def test_a_list_value_builds_its_set_once_and_keeps_the_list() -> None:
    schema = Schema.from_json(SCHEMA)
    values = schema.validate_event({"nums": [3, 1, 3], "tags": ["B", "b", "Straße"]})
    nums, tags = values["nums"], values["tags"]
    assert type(nums) is Elements and type(tags) is Elements
    assert tuple(nums) == (3, 1, 3) and tuple(tags) == ("b", "b", "strasse")  # as sent, folded
    assert "members" not in vars(nums)  # built on first use only
    assert 3 in nums and 2 not in nums and nums.members == {1, 3}
    assert vars(nums)["members"] is nums.members  # the same set for every later test
    assert pickle.loads(pickle.dumps(nums)) == nums


def test_the_element_limit_is_a_per_event_error(tmp_path: Path) -> None:
    schema = Schema.from_json(SCHEMA)
    half = MAX_EVENT_ELEMENTS // 2
    assert len(schema.validate_event({"nums": [0] * MAX_EVENT_ELEMENTS})["nums"]) > half
    for ev, what in (
        ({"nums": [0] * (MAX_EVENT_ELEMENTS + 1)}, 'attribute "nums"'),
        ({"nums": [0] * half, "tags": ["a"] * (half + 1)}, "the event's lists"),
    ):
        with pytest.raises(InvalidInput, match="more than the 1,048,576") as err:
            schema.validate_event(ev)
        assert what in err.value.message
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe("one", "1 in nums")
        big = {"nums": [1] * (MAX_EVENT_ELEMENTS + 1)}
        ok, bad, fine = idx.match_many([{"nums": [1]}, big, {"nums": [2, 1]}])
        assert ok == ["one"] and isinstance(bad, InvalidInput) and fine == ["one"]
