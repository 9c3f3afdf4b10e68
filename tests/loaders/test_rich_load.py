"""``bexdb load --engine python`` of rich ad-targeting rules (``bexdb gen --profile rich``:
fold_case strings and in-lists, ``one of``/``none of``/``all of``, patterns, ip, geo,
segments, frequency caps, ``or``/``not``): the batch interns its atoms by their store
keys, so what compiling keeps is bytes, not atom objects.  Each store answers ``match``
and ``match_many`` as the brute-force evaluator does, reopened, after deletes and a new
subscription, under several memory budgets; a Spark load (sharded) too; ``check()`` is
clean.  No timing asserted.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from betree import compiler as compiler_module
from betree.checking import atomrecords
from betree.checking import check as check_module
from betree.disk import bulk, bulkrecords, catalog
from betree.disk.batchtexts import Texts
from betree.disk.bulk import Batch
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from loaders import python_load
from loaders.records import read_jsonl
from loaders.spark import driver
from storage import codec
from tests.support.brute import brute_answers
from tools.bench import gen_rich

SETTINGS = {"max_cap": 8, "min_size": 2}

Rich = tuple[dict[str, Any], list[tuple[Any, str]], list[Any]]


@pytest.fixture(scope="module")
def rich() -> Rich:
    doc, subs, events, _ = gen_rich.make(700, 120, check=False, seed=38, target_rate=0.02)
    mixed: list[tuple[Any, str]] = [(i if i % 4 else f"r{i}", e) for i, e in subs]
    return doc, mixed, events


def _answers(reader: Any, events: list[Any]) -> list[list[str]]:
    one = [sorted(json.dumps(m) for m in reader.match(ev)) for ev in events]
    many = [sorted(json.dumps(m) for m in ms) for ms in reader.match_many(events)]
    assert one == many
    return one


@pytest.mark.parametrize("budget", [None, 1])
def test_rich_python_load_answers_as_brute_force(tmp_path: Path, rich: Rich, budget: Any) -> None:
    doc, subs, events = rich
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    expected = brute_answers(doc, subs, events)
    assert sum(map(len, expected)) > 20
    target = tmp_path / "store"
    summary = python_load.load(
        target, read_jsonl(path), doc, settings=SETTINGS, memory_budget=budget
    )
    assert summary["loaded"] == len(subs) and summary["rejected"] == 0
    assert (summary["compile_chunks"] > 1) == (budget is not None)
    with Index.open(target) as idx:  # reopened
        idx.check()
        assert _answers(idx, events) == expected
        gone = [i for i, _ in subs[::3]]
        assert all(idx.unsubscribe_many(gone))
        new = ("n1", 'user.interests one of ("x", "Topic-1-news") or hour < 3')
        idx.subscribe(*new)
        idx.check()
        left = [(i, e) for i, e in subs if i not in set(gone)] + [new]
        assert _answers(idx, events) == brute_answers(doc, left, events)


def test_batch_keeps_store_keys_not_atoms(tmp_path: Path, rich: Rich) -> None:
    """What a batch keeps a subscription compiled: each distinct atom (but the int
    comparisons held as columns) once, as its store key (bytes); the build writes exactly
    those keys to the atom catalog, and the stored clauses are the compiler's."""
    doc, subs, _ = rich
    schema = Schema.from_json(doc)
    with Index.open(tmp_path / "s", schema=schema, settings=SETTINGS) as idx:
        batch = Batch(idx)
        compiler = idx.engine.compiler()
        expected: set[bytes] = set()
        for ident, expr in subs:
            batch.add_text(ident, expr)
            for clause in compiler.compile(ident, expr):
                expected.update(codec.encode_value(a.as_tuple()) for a in clause)
        held = list(batch.atoms)
        assert held and all(type(key) is bytes for key in held)
        assert len(set(held)) == len(held) and set(held) <= expected
        columns = len(batch.col_const)
        assert len(held) + columns >= len(expected)
        batch.build()
        with idx.store.read() as txn:
            stored = set(txn.scan_all(catalog.ATOM)[0])
            aids, keys = txn.scan_all(catalog.AID)
            key_of = dict(zip(codec.decode_u64s(aids).tolist(), keys, strict=True))
            records = list(map(codec.decode_value, txn.scan_all(catalog.SUB)[1]))
        assert stored == expected
        for (ident, expr), (stored_id, text, clauses) in zip(subs, records, strict=True):
            assert (stored_id, text) == (ident, expr)
            got = sorted(sorted(key_of[a] for a in c if a) for c in clauses)
            want = [
                sorted(codec.encode_value(a.as_tuple()) for a in c)
                for c in compiler.compile(ident, expr)
            ]
            assert got == sorted(want), ident


@pytest.mark.spark
def test_rich_spark_load_answers_as_brute_force(spark: Any, tmp_path: Path) -> None:
    """A Spark load (two shards, one compile task a file, so that a compiler sees more
    expressions than the memo's window and leaves it) answers as brute force does."""
    n = compiler_module.MEMO_WINDOW + 300
    doc, subs, events, _ = gen_rich.make(n, 60, check=False, seed=39, target_rate=0.02)
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    summary = driver.load(
        tmp_path / "spark",
        [str(path)],
        doc,
        spark=spark,
        shards=2,
        settings=SETTINGS,
        split_bytes=1 << 30,
        progress=None,
    )
    assert summary["loaded"] == n
    expected = brute_answers(doc, subs, events)
    assert sum(map(len, expected)) > 20
    with open_index(tmp_path / "spark") as idx:
        idx.check()
        assert _answers(idx, events) == expected


def test_atoms_held_one_attribute_at_a_time(
    tmp_path: Path, rich: Rich, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build writes the atoms not read as columns one attribute at a time, and the
    check compares their entries so: an order atom's key is decoded just before its
    attribute's PB+tree is written, a direct atom's part packed just before its
    attribute's record, a checked atom's entries decoded just before its attribute's
    tree is compared.  So what is held at once is one attribute's, not every one's (rich
    200K: ~380 MB in the build, ~320 MB in the check: docs/bench/load-rich, richmem45)."""
    doc, subs, _ = rich
    events: list[tuple[str, str]] = []  # (what, attribute), in order
    writing = [False]
    decode, pack_pair = codec.decode_value, codec.pack_pair

    def decoded(data: bytes) -> Any:
        t = decode(data)
        if writing[0] and type(t) is list and t and t[0] == "order":
            events.append(("decoded", t[1]))
        return t

    def packed(aid: int, key: bytes) -> bytes:
        events.append(("packed", decode(key)[1]))
        return pack_pair(aid, key)

    def wrap(name: str, what: str, obj: Any = bulkrecords, at: int = 1) -> None:
        real = getattr(obj, name)  # (its attribute's name: argument ``at``)

        def call(*args: Any, **kwargs: Any) -> Any:
            events.append((what, args[at]))
            return real(*args, **kwargs)

        monkeypatch.setattr(obj, name, call)

    real_write = bulk.write_atoms

    def write_atoms(*args: Any) -> None:
        writing[0] = True
        real_write(*args)
        writing[0] = False

    monkeypatch.setattr(bulk, "write_atoms", write_atoms)
    monkeypatch.setattr(codec, "decode_value", decoded)
    monkeypatch.setattr(codec, "pack_pair", packed)
    wrap("build_columns", "tree")
    wrap("build_pbtree", "tree")
    wrap("put_direct", "direct", catalog)
    with Index.open(tmp_path / "s", schema=Schema.from_json(doc), settings=SETTINGS) as idx:
        batch = Batch(idx)
        for ident, expr in subs:
            batch.add_text(ident, expr)
        batch.build(1 << 12)
    built = list(events)
    for k, (what, attr) in enumerate(built):
        after = next(e for e in built[k:] if e[0] in ("tree", "direct"))
        if what == "decoded":
            assert after == ("tree", attr), (k, after)
        elif what == "packed":
            assert after == ("direct", attr), (k, after)
    written = [e for e in built if e[0] in ("tree", "direct")]
    assert len(written) == len(set(written))  # each attribute's tree and record once
    for what in ("decoded", "packed"):  # several attributes: one at a time is less than all
        assert len({attr for w, attr in built if w == what}) > 1

    events.clear()
    real_entries = atomrecords.OtherAtoms.entries

    def entries(self: Any, keys: Any, rows: Any) -> Any:
        for aid, held in real_entries(self, keys, rows):
            events.append(("entries", self.attr_of(aid)))
            yield aid, held

    monkeypatch.setattr(atomrecords.OtherAtoms, "entries", entries)
    wrap("check_predicates", "compared", check_module, 0)
    with Index.open(tmp_path / "s") as idx:
        idx.check()
    for k, (what, attr) in enumerate(events):
        if what == "entries":
            assert next(e for e in events[k:] if e[0] == "compared") == ("compared", attr)
    assert len({attr for w, attr in events if w == "entries"}) > 1


def test_texts_held_within_a_small_budget(
    tmp_path: Path, rich: Rich, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under a 1 MB budget a rich load's batch holds at most a sixteenth of it of texts
    (plus the text that reached it) and spills the rest to the staging directory; the
    store's records are those of a load holding every text."""
    doc, subs, _ = rich
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    made: list[Texts] = []

    def texts(limit: int | None, scratch: Path) -> Texts:
        made.append(Texts(limit, scratch))
        return made[-1]

    monkeypatch.setattr(python_load, "Texts", texts)
    stores = {}
    for budget in (1, None):
        made.clear()
        stores[budget] = tmp_path / f"s{budget}"
        python_load.load(
            stores[budget], read_jsonl(path), doc, settings=SETTINGS, memory_budget=budget
        )
        (held,) = made
        longest = max(len(e.encode()) for _, e in subs)
        if budget is None:
            assert held.spilled == 0 and held.most > sum(len(e.encode()) for _, e in subs) // 2
        else:
            limit = (budget << 20) // python_load.TEXT_SHARE
            assert sum(len(e.encode()) for _, e in subs) > 2 * limit
            assert 0 < held.spilled < len(subs) and held.most < limit + longest
        assert held.scratch is not None and not held.scratch.exists()
    dumps = []
    for store in stores.values():
        with Index.open(store) as idx, idx.store.read() as txn:
            idx.check()
            dumps.append([txn.scan_all(ns) for ns in (catalog.SUB, catalog.EXT, catalog.AID)])
    assert dumps[0] == dumps[1]
    records = list(map(codec.decode_value, dumps[0][0][1]))
    assert [(i, e) for i, e, _ in records] == subs
