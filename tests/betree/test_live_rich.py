"""Writes on the rich workload (long direct-atom lists): the writer's direct records kept
across transactions (:class:`betree.disk.writer.Memo`), under random interleavings of
writes, matches and reopens, in plain and sharded stores, against the brute force; and
a memo that no longer describes the stored record (another process wrote it, or a
transaction aborted after writing it) is not taken."""

from __future__ import annotations

import gc
import json
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from betree.disk import catalog, changelog
from betree.index import Index
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.matching.direct import mark
from betree.matching.snapshot import Records
from betree.packed import delta
from betree.stores.live import LiveIndex
from betree.stores.sharded import (
    HASH,
    ShardedIndex,
    open_index,
    shard_name,
    shard_of,
    write_manifest,
)
from storage import codec
from storage.codec import encode_id
from tools.bench import gen_rich


def _rich(n: int, seed: int) -> tuple[dict[str, Any], list[tuple[str, str]], list[Any]]:
    schema, subs, evs, _ = gen_rich.make(n, 60, check=False, seed=seed, target_rate=0.02)
    return schema, [(f"r{seed}-{k}", expr) for k, (_, expr) in enumerate(subs)], evs


def _build(path: Path, schema: dict[str, Any], subs: dict[Any, str], shards: int) -> None:
    if shards == 1:
        with Index.open(path, schema=schema, settings={"max_cap": 8}) as idx:
            idx.subscribe_many(subs.items())
        return
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(path / shard_name(k), schema=schema, settings={"max_cap": 8}) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(path, entries, {"by": "id", "hash": HASH, "shards": shards})


def _indexes(store: Any) -> list[Index]:
    return store.indexes if isinstance(store, ShardedIndex) else [store.index]


def _kept_as_stored(store: Any) -> int:
    """Assert every direct record the writers' memos keep is the stored one's bytes
    element by element; returns how many records were compared."""
    seen = 0
    for idx in _indexes(store):
        with idx.store.read() as txn:
            for attr, (stored, parts) in idx.engine.memo.direct.items():
                now = txn.get(catalog.DIRECT, attr.encode()) or b""
                if stored != now:
                    continue  # stale (another writer): compared again before use
                listed = codec.decode_value(now) if now else []
                assert [int(e[0]) for e in listed] == list(parts), attr
                assert [codec.pack_part(e) for e in listed] == list(parts.values()), attr
                seen += 1
    return seen


def _other_process_writes(path: Path, ident: str, expr: str) -> None:
    """A ``bexdb subscribe`` in a process of its own (its own writer, no memo of ours)."""
    run = [sys.executable, "-c", "import sys; from tools.cli import main; sys.exit(main())"]
    line = json.dumps({"id": ident, "expr": expr}) + "\n"
    argv = [*run, "subscribe", str(path)]
    done = subprocess.run(argv, input=line, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("shards", [1, 2], ids=["plain", "sharded"])
def test_rich_writes_under_random_interleavings(
    tmp_path: Path, shards: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema_doc, pool, events = _rich(900, seed=20 + shards)
    schema = Schema.from_json(schema_doc)
    compiled: dict[str, Any] = {}

    def truth(subs: dict[Any, str], ev: dict[str, Any]) -> set[Any]:
        values = schema.validate_event(ev)
        for expr in subs.values():
            if expr not in compiled:
                compiled[expr] = compile_expr(expr, schema)
        return {i for i, e in subs.items() if evaluate(compiled[e], values)}

    rng = random.Random(shards)
    subs = dict(pool[:300])
    spare = pool[300:]
    path = tmp_path / "store"
    _build(path, schema_doc, subs, shards)
    store = open_index(path, readonly=False)
    aborted = external = compared = 0
    try:
        for idx in _indexes(store):
            idx.engine.flat.after = 0  # views from the first event: matches use base + delta
        for step in range(90):
            r = rng.random()
            where = f"step {step}"
            if r < 0.25:
                ident = rng.choice([spare[step][0], *subs])  # new or a replacement
                subs[ident] = rng.choice(spare)[1]
                store.subscribe(ident, subs[ident])
            elif r < 0.35:
                ids = [rng.choice([spare[-k][0], *subs]) for k in range(12)]
                batch = [(ident, rng.choice(spare)[1]) for ident in ids]
                store.subscribe_many(batch)
                subs.update(batch)
            elif r < 0.47 and subs:
                ident = rng.choice(sorted(subs))
                assert store.unsubscribe(ident)
                del subs[ident]
            elif r < 0.52:  # an aborted commit after the direct records were written

                def fail(*args: Any) -> None:
                    raise RuntimeError("aborted")

                with monkeypatch.context() as m:
                    m.setattr(changelog, "append", fail)
                    with pytest.raises(RuntimeError):  # a new direct atom, and another
                        store.subscribe_many([(f"x{step}", f'contains(page.url, "/x{step}/")')])
                aborted += 1
            elif r < 0.57:  # another process's write, this one open: its memos stale
                ident, expr = f"o{step}", f'contains(page.url, "/o{step}/")'
                if rng.random() < 0.5:
                    expr += f" or {rng.choice(spare)[1]}"
                _other_process_writes(path, ident, expr)
                subs[ident] = expr
                external += 1
            elif r < 0.85:
                ev = rng.choice(events)
                got = store.match(ev)
                assert len(got) == len(set(got)) and set(got) == truth(subs, ev), where
            else:
                evs = rng.sample(events, 20)
                for got, ev in zip(store.match_many(evs), evs, strict=True):
                    assert set(got) == truth(subs, ev), where  # type: ignore[arg-type]
            compared += _kept_as_stored(store)
            if step % 15 == 14:
                store.check()
        store.check()
        assert aborted and external and compared, (aborted, external, compared)
    finally:
        store.close()
    with open_index(path) as fresh:  # reopened: the stored answer is the brute force's
        for ev in events[:20]:
            assert set(fresh.match(ev)) == truth(subs, ev)


def test_a_direct_record_is_written_from_kept_parts(tmp_path: Path) -> None:
    """The second write to an attribute's direct atoms takes the memo's parts (no decode
    of the record), and the bytes are exactly ``encode_value`` of the list."""
    schema = {"attributes": {"tags": {"type": "string_list"}, "n": {"type": "int"}}}
    with Index.open(tmp_path, schema=schema) as idx:
        idx.subscribe_many([(k, f'"t{k}" in tags') for k in range(50)])
        decoded: list[int] = []
        real = codec.decode_value

        def counting(data: Any) -> Any:
            decoded.append(len(data))
            return real(data)

        with pytest.MonkeyPatch.context() as m:
            m.setattr(codec, "decode_value", counting)
            idx.subscribe(100, '"new" in tags')
            idx.unsubscribe(3)
        with idx.store.read() as txn:
            stored = txn.get(catalog.DIRECT, b"tags")
        assert stored is not None
        assert max(decoded, default=0) < len(stored) // 2  # the list was not decoded
        listed = real(stored)
        assert codec.encode_value(listed) == stored
        aids = [int(e[0]) for e in listed]
        assert len(aids) == 50 and aids == list(idx.engine.memo.direct["tags"][1])
        assert sorted(idx.match({"tags": ["new", "t3", "t4"]})) == [4, 100]
        idx.check()


def test_a_changed_direct_record_makes_only_its_new_atoms(tmp_path: Path) -> None:
    """Records take back the atoms whose id's stored tuple is unchanged, and make again
    one whose id now holds another tuple (the same Records reading another store)."""
    schema = {"attributes": {"tags": {"type": "string_list"}, "n": {"type": "int"}}}
    with (
        Index.open(tmp_path / "a", schema=schema) as a,
        Index.open(tmp_path / "b", schema=schema) as b,
    ):
        a.subscribe_many([(k, f'"t{k}" in tags') for k in range(20)])
        b.subscribe_many([(k, f'"u{k}" in tags') for k in range(20)])  # the same atom ids
        records = Records(a.engine._attribute)
        with a.store.read() as txn:
            records.read(txn)
        first = dict(records._atoms["tags"])
        a.subscribe(20, '"t20" in tags')
        with a.store.read() as txn:
            grouped = records.read(txn)[1]
        again = records._atoms["tags"]
        assert len(again) == 21 and all(again[aid][1] is first[aid][1] for aid in first)
        with b.store.read() as txn:
            grouped = records.read(txn)[1]
        other = records._atoms["tags"]
        assert all(other[aid][1] is not first[aid][1] for aid in first if aid in other)
        held = np.zeros(100, dtype=bool)
        mark(held, grouped, {"tags": ["u3", "t4"]})
        want = {aid for aid, (_, atom) in other.items() if atom.holds({"tags": ["u3", "t4"]})}
        assert set(np.flatnonzero(held).tolist()) == want and len(want) == 1


def test_reading_the_records_runs_no_collector_pass_inside(tmp_path: Path) -> None:
    """Records decode a snapshot's per-attribute records with the cyclic collector paused
    (its young passes over the growing heap were half of a rich store's first read):
    one pass of the young generations at the end, none inside, and the collector's state
    as it was (off stays off)."""
    schema = {"attributes": {"tags": {"type": "string_list"}, "n": {"type": "int"}}}
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe_many([(k, f'"t{k}" in tags or n = {k}') for k in range(600)])
        passes: list[int] = []

        def count(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                passes.append(info["generation"])

        gc.callbacks.append(count)
        try:
            for enabled in (True, False):
                (gc.enable if enabled else gc.disable)()
                passes.clear()
                records = Records(idx.engine._attribute)
                with idx.store.read() as txn:
                    trees, grouped = records.read(txn)
                assert set(trees) == {"n"} and set(grouped) == {"tags"}
                assert len(records._atoms["tags"]) == 600
                assert passes == ([1] if enabled else [])
                assert gc.isenabled() is enabled
        finally:
            gc.callbacks.remove(count)
            gc.enable()


def test_a_fold_shares_the_records_and_none_goes_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One decoded copy of the per-attribute records a process: a background fold takes
    back the very atoms and direct-atom tables the view it replaces was built from (main:
    a second copy, the folds' own), and the records it read are not trusted when stale:
    another process's writes, matches on the pages (the matching thread reading the same
    records), folds, a compaction and a reopen between matches, every answer the brute
    force's."""
    monkeypatch.setattr(delta, "FOLD_CLAUSES", 8)
    monkeypatch.setattr(delta, "FOLD_ATOMS", 12)
    schema_doc, pool, events = _rich(700, seed=36)
    schema = Schema.from_json(schema_doc)
    compiled: dict[str, Any] = {}

    def check(store: Any, ev: dict[str, Any], where: str) -> None:
        values = schema.validate_event(ev)
        for expr in subs.values():
            if expr not in compiled:
                compiled[expr] = compile_expr(expr, schema)
        want = {i for i, e in subs.items() if evaluate(compiled[e], values)}
        got = store.match(ev)
        assert len(got) == len(set(got)) and set(got) == want, where

    subs = dict(pool[:250])
    spare = pool[250:]
    path = tmp_path / "store"
    _build(path, schema_doc, subs, 1)
    live = LiveIndex(path, readonly=False)
    try:
        idx = live.current()
        assert isinstance(idx, Index)
        idx.engine.flat.after = 0
        check(idx, events[0], "built")
        records = idx.engine._records
        first = {attr: dict(atoms) for attr, atoms in records._atoms.items()}
        slot = idx.engine.flat
        gate = threading.Event()  # (the fold held until it is seen running)
        build = slot.background
        assert build is not None

        def gated() -> Any:
            gate.wait()
            return build()

        slot.background = gated
        for ident, expr in spare[:12]:  # until due: a fold in the background
            live.write(lambda ix: ix.subscribe(ident, expr))  # noqa: B023
            subs[ident] = expr
            if slot._folding is not None:
                break
        assert slot._folding is not None and slot.builds == 1
        gate.set()
        slot.wait()
        assert slot.builds == 2 and slot.describe()["added"] == 0
        held = slot.held(slot.held_gen())
        assert held is not None and idx.engine._records is records
        for attr, atoms in first.items():  # taken back, not made again
            now = records._atoms[attr]
            assert all(now[aid][1] is atom for aid, (_, atom) in atoms.items()), attr
        assert held.grouped == {attr: grouped for attr, (_, grouped) in records._direct.items()}
        rng = random.Random(36)
        done: set[str] = set()
        for step in range(40):
            r, where = rng.random(), f"step {step}"
            store = live.current()
            assert isinstance(store, Index)
            store.engine.flat.after = 0
            if r < 0.2:
                ident = f"o{step}"
                expr = f'contains(page.url, "/o{step}/") or {rng.choice(spare)[1]}'
                _other_process_writes(path, ident, expr)  # a new direct atom, and more
                subs[ident] = expr
                done.add("other")
            elif r < 0.4:
                ids = [rng.choice([f"w{step}-{k}", *subs]) for k in range(9)]
                more = [(ident, rng.choice(spare)[1]) for ident in ids]
                live.write(lambda ix: ix.subscribe_many(more))  # noqa: B023
                subs.update(more)
                done.add("batch")
            elif r < 0.5:
                gone = rng.choice(sorted(subs))
                assert live.write(lambda ix: ix.unsubscribe(gone))  # noqa: B023
                del subs[gone]
            elif r < 0.6:  # on the pages: the snapshot's records, read by this thread
                store.engine.collecting = True
                check(store, rng.choice(events), where)
                store.engine.collecting = False
                store.engine.take_statistics()
                done.add("pages")
            elif r < 0.65:
                run = [sys.executable, "-c", "import sys; from tools.cli import main; main()"]
                subprocess.run([*run, "compact", str(path)], check=True, capture_output=True)
                done.add("compact")
            elif r < 0.7:
                live.close()
                live = LiveIndex(path, readonly=False)
                done.add("reopen")
            else:
                store.engine.flat.wait()
                check(store, rng.choice(events), where)
        assert done >= {"other", "batch", "pages", "compact", "reopen"}, done
        live.current().check()
    finally:
        live.close()
