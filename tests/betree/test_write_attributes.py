"""The root record's per-attribute lists kept up by each write from what it touched
(:func:`betree.disk.catalog.attributes_after`), not by a scan of every record."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from betree.disk.catalog import put_root, record_attributes, root_record
from betree.index import Index
from betree.lang.schema import Schema
from tests.support.brute import brute

DOC = {
    "attributes": {
        **{f"n{k}": {"type": "int"} for k in range(6)},
        **{f"s{k}": {"type": "string"} for k in range(4)},
        **{f"t{k}": {"type": "string_list"} for k in range(3)},
        "flag": {"type": "bool"},
        "A_up": {"type": "int"},  # (upper case and "-": the lists are in key order)
        "b-c": {"type": "int"},
        "z": {"type": "int"},
    }
}
SCHEMA = Schema.from_json(DOC)
INTS = [f"n{k}" for k in range(6)] + ["A_up", "b-c", "z"]


def atom(rng: random.Random) -> str:
    kind = rng.randrange(6)
    if kind == 0:
        op = rng.choice(["<", "<=", ">", ">=", "=", "!="])
        return f"{rng.choice(INTS)} {op} {rng.randint(-3, 3)}"
    if kind == 1:
        return f'{rng.choice(["s0", "s1", "s2", "s3"])} = "{rng.choice("abc")}"'
    if kind == 2:
        return f'"{rng.choice("abcd")}" in {rng.choice(["t0", "t1", "t2"])}'
    if kind == 3:
        return f"flag = {rng.choice(['true', 'false'])}"
    if kind == 4:
        return f"{rng.choice(INTS)} between {rng.randint(-3, 0)} and {rng.randint(0, 3)}"
    return f"not ({rng.choice(INTS)} = {rng.randint(-2, 2)})"


def expression(rng: random.Random) -> str:
    parts = [atom(rng) for _ in range(rng.randint(1, 3))]
    return (" or " if rng.random() < 0.3 else " and ").join(parts)


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    for name in INTS:
        if rng.random() < 0.6:
            ev[name] = rng.randint(-4, 4)
    for k in range(4):
        if rng.random() < 0.6:
            ev[f"s{k}"] = rng.choice("abcd")
    for k in range(3):
        if rng.random() < 0.6:
            ev[f"t{k}"] = rng.sample("abcd", rng.randint(0, 3))
    if rng.random() < 0.7:
        ev["flag"] = rng.random() < 0.5
    return ev


def lists_as_scanned(idx: Index) -> tuple[Any, Any]:
    with idx.store.read() as txn:
        return root_record(txn)["attributes"], record_attributes(txn)


def test_lists_follow_records_that_come_and_go(tmp_path: Path) -> None:
    rng = random.Random(38)
    subs: dict[int, str] = {}
    changed = 0
    with Index.open(tmp_path / "s", schema=DOC) as idx:
        before = lists_as_scanned(idx)[1]
        for step in range(160):
            roll = rng.random()
            if subs and roll < 0.35:  # removals: a direct record goes with its last atom
                gone = rng.sample(sorted(subs), min(len(subs), rng.randint(1, 3)))
                if rng.random() < 0.5:
                    idx.unsubscribe_many(gone)
                else:
                    for ident in gone:
                        idx.unsubscribe(ident)
                for ident in gone:
                    del subs[ident]
            elif subs and roll < 0.5:  # a replacement
                ident = rng.choice(sorted(subs))
                subs[ident] = expression(rng)
                idx.subscribe(ident, subs[ident])
            else:
                items = [(rng.randrange(10**6), expression(rng)) for _ in range(rng.randint(1, 4))]
                idx.subscribe_many(items) if len(items) > 1 else idx.subscribe(*items[0])
                subs.update(items)
            listed, scanned = lists_as_scanned(idx)
            assert listed == scanned, step
            changed += listed != before
            before = scanned
            if step % 8 == 0:
                idx.check()
                for _ in range(4):
                    ev = event(rng)
                    assert set(idx.match(ev)) == brute(subs, SCHEMA, ev), (step, ev)
        # the lists changed in both directions many times, direct ones emptied too
        assert changed >= 10
        assert {"A_up", "b-c", "z"} <= set(before["pbtrees"])
        assert before["direct"]
        idx.check()
    with Index.open(tmp_path / "s") as idx:  # reopened: the same, and the same answers
        listed, scanned = lists_as_scanned(idx)
        assert listed == scanned
        for _ in range(20):
            ev = event(rng)
            assert set(idx.match(ev)) == brute(subs, SCHEMA, ev)


def test_a_direct_record_emptied_leaves_the_list(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=DOC) as idx:
        idx.subscribe(1, '"a" in t0')
        idx.subscribe(2, "n0 > 1")
        assert lists_as_scanned(idx)[0] == {"pbtrees": ["n0"], "direct": ["t0"]}
        idx.subscribe(3, 's1 = "b" and "c" in t0 and flag = true')
        idx.unsubscribe(1)
        assert lists_as_scanned(idx)[0] == {"pbtrees": ["n0", "s1"], "direct": ["flag", "t0"]}
        idx.unsubscribe(3)  # (a PB+tree emptied stays: its record is kept)
        listed, scanned = lists_as_scanned(idx)
        assert listed == scanned == {"pbtrees": ["n0", "s1"], "direct": []}
        assert idx.match({"n0": 2, "t0": ["a", "c"], "s1": "b", "flag": True}) == [2]
        idx.check()


def test_lists_of_another_shape_are_scanned_again(tmp_path: Path) -> None:
    with Index.open(tmp_path, schema=DOC) as idx:
        idx.subscribe_many([(1, '"a" in t0'), (2, "n0 > 1 and z < 0")])
        for odd in (None, {"pbtrees": ["n0"]}, {"pbtrees": [1, [2]], "direct": []}, [1]):
            with idx.store.write() as txn:
                rec = root_record(txn)
                rec["attributes"] = odd
                put_root(txn, rec)
            idx.subscribe(3, "flag = true")
            listed, scanned = lists_as_scanned(idx)
            assert listed == scanned == {"pbtrees": ["n0", "z"], "direct": ["flag", "t0"]}
            idx.unsubscribe(3)
        idx.check()
        assert sorted(idx.match({"n0": 2, "z": -1, "t0": ["a"]})) == [1, 2]
