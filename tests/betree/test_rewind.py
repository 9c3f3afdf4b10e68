"""Answers rewound to a pinned state (:mod:`betree.streams.rewind`), without Spark.

Against the brute-force evaluator on the pinned state's subscriptions: random
interleavings of commits (new subscriptions, replacements, deletions, ids deleted and
subscribed again, a subscription added and removed or replaced twice within one commit)
before and after the snapshot the events are matched in, on plain and sharded stores,
with the workload's expressions and with literals and events at the ends of every domain.
The pin file agreed on by racing writers; a pin that cannot be reached (schema changed,
store compacted, the log past KEEP, entries written before the log kept expressions).
"""

from __future__ import annotations

import json
import random
import threading
from pathlib import Path
from typing import Any

import pytest

from betree.disk import changelog
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores import maintain
from betree.stores.live import LiveIndex
from betree.stores.sharded import HASH, shard_name, shard_of, write_manifest
from betree.streams.rewind import Pin, Rewinder, agree, take_pin
from betree.streams.stream import match_lines
from storage import codec
from tests.support.brute import brute
from tests.support.edges import EDGE_SCHEMA, EVENTS, I64_MAX, I64_MIN, edge_atoms
from tests.support.workload import SCHEMA, event, expression

IDS: list[Any] = [I64_MIN, I64_MAX, -1, 0, "", "é\U0010ffff", "x" * 300]


def _store(path: Path, schema: dict[str, Any], subs: dict[Any, str], shards: int) -> str:
    """A plain store (``shards`` 0) or a sharded one routed by :data:`HASH`."""
    if not shards:
        with Index.open(path, schema=schema) as idx:
            idx.subscribe_many(list(subs.items()))
        return str(path)
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in subs.items():
        parts[shard_of(codec.encode_id(ident), shards)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(path / shard_name(k), schema=schema) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(path, entries, {"by": "id", "hash": HASH, "shards": shards})
    return str(path)


class Workload:
    def __init__(self, edges: bool, seed: int) -> None:
        self.rng = random.Random(seed)
        self.edges = edges
        self.doc = EDGE_SCHEMA if edges else SCHEMA
        self.schema = Schema.from_json(self.doc)
        self.atoms = edge_atoms() if edges else []

    def expr(self) -> str:
        if not self.edges:
            return expression(self.rng)
        parts = [self.rng.choice(self.atoms) for _ in range(self.rng.randint(1, 3))]
        return f" {self.rng.choice(['and', 'or'])} ".join(f"({p})" for p in parts)

    def events(self, n: int) -> list[dict[str, Any]]:
        if self.edges:
            return [self.rng.choice(EVENTS) for _ in range(n)]
        return [event(self.rng) for _ in range(n)]


def _commit(live: LiveIndex, subs: dict[Any, str], gone: list[Any], w: Workload) -> None:
    """One random commit, applied to the model ``subs`` too."""
    rng = w.rng
    index = live.current()
    kind = rng.random()
    if kind < 0.3 and subs:  # deletions
        idents = rng.sample(sorted(subs, key=repr), min(len(subs), rng.randint(1, 4)))
        index.unsubscribe_many(idents)
        for ident in idents:
            del subs[ident]
        gone.extend(idents)
        return
    if kind < 0.45 and live.current().writable and len(index.indexes) == 1:
        # within one commit: one added then removed, one replaced twice
        idx = index.indexes[0]
        fleeting, twice = f"fleeting{rng.random()}", rng.choice(sorted(subs, key=repr))
        last = w.expr()
        with idx.store.write() as txn, idx.engine.writer(txn) as wr:
            wr.insert(fleeting, (e := w.expr()), idx.engine.compiler().compile(fleeting, e))
            wr.delete(fleeting)
            wr.insert(twice, (e := w.expr()), idx.engine.compiler().compile(twice, e))
            wr.insert(twice, last, idx.engine.compiler().compile(twice, last))
        subs[twice] = last
        return
    items = []
    for _ in range(rng.randint(1, 5)):
        r = rng.random()
        if r < 0.4 and subs:
            ident = rng.choice(sorted(subs, key=repr))  # replaced
        elif r < 0.6 and gone:
            ident = gone.pop(rng.randrange(len(gone)))  # subscribed again
        else:
            ident = rng.choice([*IDS, rng.randrange(10**6), f"n{rng.random()}"])
        items.append((ident, w.expr()))
    index.subscribe_many(items)
    subs.update(dict(items))


def _lines(events: list[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(e).encode() for e in events]


@pytest.mark.parametrize("shards", [0, 3])
@pytest.mark.parametrize("edges", [False, True])
def test_rewind_equals_brute_force_on_the_pinned_state(
    tmp_path: Path, shards: int, edges: bool
) -> None:
    w = Workload(edges, 291 + shards + 7 * edges)
    subs = {k: w.expr() for k in range(60)}
    store = _store(tmp_path / "store", w.doc, subs, shards)
    gone: list[Any] = []
    differed = rewound_any = 0
    with LiveIndex(store) as live:
        for _ in range(8):
            index = live.current()
            pin = take_pin(index, live.ident)
            assert pin is not None
            pinned = dict(subs)
            rewinder = Rewinder(pin)
            for _ in range(w.rng.randint(0, 4)):  # before the snapshot matched
                _commit(live, subs, gone, w)
            events = w.events(40)
            lines = _lines(events)
            found = [r for chunk in match_lines(index, lines) for r in chunk]
            for _ in range(w.rng.randint(0, 4)):  # after it, before the log is read
                _commit(live, subs, gone, w)
            changes = rewinder.changes(index, live.ident)
            assert changes is not None
            rewound = rewinder.rewind(changes, lines, found)
            rewound_any += bool(changes.restore)
            for ev, raw, result in zip(events, found, rewound, strict=True):
                want = brute(pinned, w.schema, ev)
                ids = result["matches"].tolist()
                assert sorted(map(repr, ids)) == sorted(map(repr, want)), ev
                assert len(ids) == len(want)  # each once
                differed += set(raw["matches"].tolist()) != want
        index.check()
    assert differed and rewound_any  # the writes changed answers, and the rewind undid it


def test_nothing_written_since_the_pin_leaves_the_answers(tmp_path: Path) -> None:
    w = Workload(False, 5)
    store = _store(tmp_path / "s", w.doc, {k: w.expr() for k in range(30)}, 0)
    with LiveIndex(store) as live:
        index = live.current()
        rewinder = Rewinder(take_pin(index, live.ident))  # type: ignore[arg-type]
        lines = _lines(w.events(10))
        found = [r for chunk in match_lines(index, [*lines, b"[1]"]) for r in chunk]
        changes = rewinder.changes(index, live.ident)
        assert changes is not None and not changes.touched and not changes.restore
        assert rewinder.rewind(changes, [*lines, b"[1]"], found) == found
        assert "error" in found[-1]


def test_a_pin_out_of_reach(tmp_path: Path) -> None:
    """None (answers left as matched) after a schema change, a compaction (another data
    file), more than KEEP commits, or an entry written before the log kept expressions."""
    w = Workload(False, 6)
    store = _store(tmp_path / "s", w.doc, {k: w.expr() for k in range(20)}, 0)
    with LiveIndex(store) as live:
        pin = take_pin(live.current(), live.ident)
        assert pin is not None
        live.current().subscribe(100, "i > 3")
        assert Rewinder(pin).changes(live.current(), live.ident) is not None
        live.current().add_to_schema({"attributes": {"new": {"type": "int"}}})
        assert Rewinder(pin).changes(live.current(), live.ident) is None  # schema version

        pin = take_pin(live.current(), live.ident)
        assert pin is not None
        live.close()  # (one environment of a path per process)
        list(maintain.compact(store))
        assert Rewinder(pin).changes(live.current(), live.ident) is None  # another store

        pin = take_pin(live.current(), live.ident)
        assert pin is not None
        for k in range(changelog.KEEP):
            live.current().subscribe(200 + k, "i > 3")
        assert Rewinder(pin).changes(live.current(), live.ident) is not None  # entry P kept
        live.current().subscribe(-5, "i > 3")
        assert Rewinder(pin).changes(live.current(), live.ident) is None  # dropped

        pin = take_pin(live.current(), live.ident)
        assert pin is not None
        live.current().unsubscribe(-5)
        idx = live.current().indexes[0]
        with idx.store.write() as txn:  # the entry as a store written before rewrites it
            seq = pin.shards[0][0]
            removed, added = changelog.entry(txn, seq)  # type: ignore[misc]
            txn.put_obj(changelog.LOG, codec.encode_u64(seq), [removed, added])
        idx.check()  # an entry of the old format is well formed
        with idx.store.read() as txn:
            assert changelog.entry(txn, seq) == (removed, added)
            assert changelog.read(txn, seq) == (removed, added, None)
        assert Rewinder(pin).changes(live.current(), live.ident) is None


def test_the_log_keeps_removed_expressions_and_check_reads_them(tmp_path: Path) -> None:
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe_many([(1, "i > 3"), ("a", 's = "é"'), (2, "b")])
        idx.subscribe_many([(1, "i < 2")])  # replaced
        idx.unsubscribe_many(["a", 2])
        idx.check()
        with idx.store.read() as txn:
            replaced = changelog.read(txn, 1)
            deleted = changelog.read(txn, 2)
        assert replaced is not None and deleted is not None
        assert [i for _, i in replaced.removed] == [1] and replaced.expressions == ["i > 3"]
        assert [i for _, i in deleted.removed] == ["a", 2]
        assert deleted.expressions == ['s = "é"', "b"]
        for bad in (["i > 3", "x"], [7], None):
            with idx.store.write() as txn:
                txn.put_obj(changelog.LOG, codec.encode_u64(1), [*replaced[:2], bad])
            with idx.store.read() as txn:
                assert changelog.read(txn, 1) is None
            with pytest.raises(Exception, match="change log entry 1 is malformed"):
                idx.check()
        with (
            pytest.raises(ValueError, match="one expression per removed"),
            idx.store.write() as txn,
        ):
            changelog.append(txn, {}, [[9, 9]], [], [])


def test_racing_tasks_agree_on_one_pin(tmp_path: Path) -> None:
    path = tmp_path / "pins" / "7"
    got: list[Pin | None] = []
    start = threading.Barrier(8)

    def task(k: int) -> None:
        start.wait()
        got.append(agree(path, lambda: Pin([[1, k], []], ((k, 0, k),))))

    threads = [threading.Thread(target=task, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and got[0] is not None
    assert len({p.to_json() for p in got if p is not None}) == 1
    assert agree(path, lambda: None) == got[0]  # a re-run reads it
    assert sorted(p.name for p in path.parent.iterdir()) == ["7"]  # no temporary left
    (tmp_path / "pins" / "8").write_text("{not json")
    assert agree(tmp_path / "pins" / "8", lambda: got[0]) is None  # unreadable: no pin
    (tmp_path / "file").write_text("")  # a pin that cannot be written: none, no error
    assert agree(tmp_path / "file" / "9", lambda: got[0]) is None
