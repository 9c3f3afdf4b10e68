"""``bexdb load --memory-budget`` (python engine): the build committed in pieces
(:mod:`betree.disk.pieces`) and the compiler's caches let go in chunks.  The smaller the
budget, the more pieces and chunks; the store answers as an unbudgeted load's does and as
the brute-force evaluator does (``match`` and ``match_many``, reopened, after deletes),
``check()`` is clean; a load failing between two pieces publishes nothing; no piece holds
much more than its limit.  Dense int and
float workloads with extreme constants and other atom forms (``!=``, ``=``, a list
membership, ``or``), so that every part of the build (catalog, PB+trees, direct lists,
BE-Tree) is cut.  No timing or memory figure is asserted.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from betree.checking import check as check_module
from betree.disk import pieces
from betree.disk.bulk import Batch
from betree.disk.catalog import root_record
from betree.disk.nodes import LNodePage
from betree.index import Index
from betree.lang.schema import Schema
from loaders import python_load
from loaders.records import read_jsonl
from storage import codec
from storage.errors import CheckFailed, InvalidInput
from storage.store import open_store
from storage.txn import WriteTxn
from tests.support import workload
from tests.support.brute import brute_answers
from tools.bench import gen_dense
from tools.cli import main

SETTINGS = {"max_cap": 8, "min_size": 2}


def _workload(domain: str, seed: int) -> tuple[dict[str, Any], list[tuple[Any, str]], list[Any]]:
    _, schema, subs, events, _ = gen_dense.make_workload(
        300, 60, seed=seed, attributes=6, preds=3, width=0.5, domain=domain, card=1000, check=False
    )
    rng = random.Random(seed)
    names = sorted(schema["attributes"])
    big: list[Any] = [-(2**63), 2**63 - 1, 0, 1, 999]
    if domain == "float":
        big += [-0.0, 1.7e308, -1.7e308, 2.5]
    extra = []
    for i in range(60):
        a, b = rng.sample(names, 2)
        c, d = rng.choice(big), rng.choice(big)
        form = i % 4
        if form == 0:
            extra.append(f"{a} != {c!r} and {b} >= {d!r}")
        elif form == 1:
            extra.append(f"{a} = {c!r} or {b} < {d!r}")
        elif form == 2:
            extra.append(f"{a} in ({c!r}, {d!r}, 5) or not {b} > {d!r}")
        else:
            lo, hi = sorted([c, d])
            extra.append(f"{a} between {lo!r} and {hi!r}")
    subs += [(len(subs) + i, e) for i, e in enumerate(extra)]
    mixed: list[tuple[Any, str]] = [(i if i % 3 else f"s{i}", e) for i, e in subs]
    edges = [{a: rng.choice(big) for a in names} for _ in range(6)]
    return schema, mixed, events + edges


def _answers(reader: Any, events: list[Any]) -> list[list[str]]:
    one = [sorted(json.dumps(m) for m in reader.match(ev)) for ev in events]
    many = [sorted(json.dumps(m) for m in ms) for ms in reader.match_many(events)]
    assert one == many
    return one


def _write(tmp_path: Path, doc: dict[str, Any], subs: list[tuple[Any, str]]) -> str:
    path = tmp_path / "subs.jsonl"
    path.write_text("".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs))
    return str(path)


@pytest.mark.parametrize(("domain", "seed"), [("int", 3), ("float", 4)])
def test_smaller_budget_more_pieces_same_answers(tmp_path: Path, domain: str, seed: int) -> None:
    doc, subs, events = _workload(domain, seed)
    path = _write(tmp_path, doc, subs)
    expected = brute_answers(doc, subs, events)
    assert sum(map(len, expected)) > 0
    commits, chunks = [], []
    for budget in (None, 64, 1):
        target = tmp_path / f"store-{budget}"
        summary = python_load.load(
            target, read_jsonl(path), doc, settings=SETTINGS, memory_budget=budget
        )
        assert summary["loaded"] == len(subs) and summary["rejected"] == 0
        commits.append(summary["commits"])
        chunks.append(summary["compile_chunks"])
        with Index.open(target) as idx:  # reopened
            idx.check()
            assert _answers(idx, events) == expected
            gone = [i for i, _ in subs[::5]]
            assert all(idx.unsubscribe_many(gone))
            idx.check()
            left = [(i, e) for i, e in subs if i not in set(gone)]
            assert _answers(idx, events) == brute_answers(doc, left, events)
    assert commits[0] == 1 and chunks[0] == 1  # unbudgeted: one commit, caches kept
    assert commits[1] <= commits[2] and commits[2] > 1
    assert chunks[2] > chunks[1] >= 1


def test_byte_limit_cuts_every_part(tmp_path: Path) -> None:
    """The build's own limit (bytes): commits grow as it shrinks; the stores hold the same
    records and pages' contents (same answers, same counts), each checked clean."""
    doc, subs, events = _workload("int", 5)
    schema = Schema.from_json(doc)
    expected = brute_answers(doc, subs, events)
    commits = []
    for limit in (None, 1 << 16, 1 << 12, 256):
        with Index.open(tmp_path / f"s-{limit}", schema=schema, settings=SETTINGS) as idx:
            batch = Batch(idx)
            for ident, expr in subs:
                batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
            counts = batch.build(limit)
            commits.append(counts["commits"])
        with Index.open(tmp_path / f"s-{limit}") as idx:
            idx.check()
            assert _answers(idx, events) == expected
            assert len(idx) == len(subs)
    assert commits[0] == 1
    assert commits == sorted(commits) and commits[-1] > commits[1] > 1
    assert pieces.piece_limit(None) is None and pieces.piece_limit(32 << 20) == 1 << 20


def test_failure_between_pieces_publishes_nothing(tmp_path: Path) -> None:
    """A load that dies after some pieces were committed leaves no store at the target
    (the build is in a staging directory, renamed only at the end); a child process
    killed hard (os._exit) between two pieces, then the same load completes."""
    doc, subs, events = _workload("int", 6)
    path = _write(tmp_path, doc, subs)
    target = tmp_path / "store"
    script = f"""
import json, os
from betree.checking import check as check_module
from betree.disk import pieces
from betree.disk.catalog import root_record
from loaders import python_load
from loaders.records import read_jsonl
real = pieces.Pieces.wrote
def wrote(self, n):
    real(self, n)
    if self.commits >= 3:
        os._exit(9)  # killed mid-build, pieces committed
pieces.Pieces.wrote = wrote
python_load.piece_limit = lambda budget: 512  # (bytes: many pieces for a small load)
python_load.load({str(target)!r}, read_jsonl({path!r}), json.loads({json.dumps(doc)!r}),
                 memory_budget=1)
"""
    done = subprocess.run([sys.executable, "-c", script], check=False)
    assert done.returncode == 9
    assert not target.exists()
    summary = python_load.load(target, read_jsonl(path), doc, memory_budget=1)
    assert summary["commits"] >= 1
    with Index.open(target) as idx:
        idx.check()
        assert _answers(idx, events) == brute_answers(doc, subs, events)


def test_budget_below_one_mb_refused(tmp_path: Path) -> None:
    doc, subs, _ = _workload("int", 7)
    with pytest.raises(InvalidInput, match="memory-budget"):
        python_load.load(
            tmp_path / "s", read_jsonl(_write(tmp_path, doc, subs)), doc, memory_budget=0
        )
    assert not (tmp_path / "s").exists()


def test_check_reads_the_atom_records_in_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check() over the atom records a few at a time (chunk of 3, the last one partial):
    clean on a budgeted load; a wrong count, a reverse record leading elsewhere, a missing
    record and an id beyond the counter are each named, in whichever chunk they fall."""
    monkeypatch.setattr(check_module, "CHUNK", 3)
    doc, subs, _ = _workload("int", 8)
    target = tmp_path / "store"
    python_load.load(
        target, read_jsonl(_write(tmp_path, doc, subs)), doc, settings=SETTINGS, memory_budget=1
    )
    with Index.open(target) as idx:
        idx.check()
        with idx.store.read() as txn:
            records = [(k, codec.decode_value(v)) for k, v in txn.scan(b"atom")]
            next_atom = root_record(txn)["next_atom"]
        assert len(records) > 10
        (k1, (a1, r1)), (_, (a2, _)), (k3, (a3, _)) = records[4], records[7], records[-1]
        k5, (_, r5) = records[5]
        with idx.store.write() as txn:
            txn.put(b"atom", k1, codec.encode_value([a1, r1 + 2]))
            txn.put(b"aid", codec.encode_u64(a2), k3)
            txn.delete(b"atom", k3)
            txn.put(b"atom", k5, codec.encode_value([next_atom + 5, r5]))
        with pytest.raises(CheckFailed) as caught:
            idx.check()
    found = caught.value.violations
    assert any(v.startswith(f"atom {a1} (") and f"counts {r1 + 2} uses" in v for v in found)
    assert f"atom {a2}: reverse record missing or wrong" in found
    assert f"atom {a3} is used but not in the catalog" in found
    assert f"atom {next_atom + 5} beyond the counter" in found


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000])
def test_scan_chunks_is_scan_all_in_pieces(tmp_path: Path, n: int) -> None:
    """Chunks of at most n records, in key order, together every record of the namespace
    and no other (neighbouring namespaces, long keys merged in order, an empty one)."""
    with open_store(tmp_path / "s") as store:
        with store.write() as txn:
            txn.put_many(b"a", [b"k%03d" % i for i in range(10)], [b"v%d" % i for i in range(10)])
            txn.put_many(b"ab", [b"x"], [b"y"])
            txn.put_many(b"b", [b"k1", b"k3"], [b"1", b"3"])
            txn.put(b"b", b"k2" + b"z" * 600, b"long")  # a long key, stored apart
        with store.read() as txn:
            for ns in (b"a", b"ab", b"b", b"c"):
                chunks = list(txn.scan_chunks(ns, n))
                assert all(0 < len(k) == len(v) <= n for k, v in chunks)
                keys = [key for k, _ in chunks for key in k]
                values = [value for _, v in chunks for value in v]
                assert (keys, values) == txn.scan_all(ns)


def test_pieces_on_every_atom_form(tmp_path: Path) -> None:
    """The rich test workload (every attribute type and atom form: strings, lists, bools,
    or/not, direct atoms) built in one commit and in many tiny pieces: both check clean,
    answer as brute force does, and keep working online (deletes, a new subscription)."""
    rng = random.Random(11)
    subs: dict[Any, str] = {rng.choice([i, f"s{i}"]): workload.expression(rng) for i in range(300)}
    events = [workload.event(rng) for _ in range(60)]
    doc = workload.SCHEMA
    expected = brute_answers(doc, list(subs.items()), events)
    assert sum(map(len, expected)) > 0
    commits = []
    for limit in (None, 256):
        with Index.open(tmp_path / f"s-{limit}", schema=Schema.from_json(doc)) as idx:
            batch = Batch(idx)
            for ident, expr in subs.items():
                batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
            commits.append(batch.build(limit)["commits"])
        with Index.open(tmp_path / f"s-{limit}") as idx:
            idx.check()
            assert _answers(idx, events) == expected
            gone = sorted(subs, key=str)[::3]
            idx.unsubscribe_many(gone)
            idx.subscribe("new", "i > 3")
            idx.check()
            left = [(i, e) for i, e in subs.items() if i not in set(gone)] + [("new", "i > 3")]
            assert _answers(idx, events) == brute_answers(doc, left, events)
    assert commits[0] == 1 and commits[1] > 10


def test_cli_memory_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``bexdb load --memory-budget MB``: the summary counts the pieces; refused with the
    Spark engine (exit 2) and below 1 (argparse, exit 2); nothing written then."""
    doc, subs, events = _workload("int", 9)
    path = _write(tmp_path, doc, subs)
    (tmp_path / "schema.json").write_text(json.dumps(doc))
    schema = str(tmp_path / "schema.json")
    base = ["load", "--engine", "python", "--schema", schema]
    assert main([*base, "--memory-budget", "1", str(tmp_path / "a"), path]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["loaded"] == len(subs) and summary["commits"] >= 1
    assert summary["compile_chunks"] > 1  # (every 64 records at 1 MB)
    with Index.open(tmp_path / "a") as idx:
        idx.check()
        assert _answers(idx, events) == brute_answers(doc, subs, events)
    spark = ["load", "--engine", "spark", "--memory-budget", "64", str(tmp_path / "b"), path]
    assert main(spark) == 2
    assert "--memory-budget is for --engine python" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exited:
        main([*base, "--memory-budget", "0", str(tmp_path / "c"), path])
    assert exited.value.code == 2
    assert not (tmp_path / "b").exists() and not (tmp_path / "c").exists()


@pytest.mark.parametrize("limit", [1 << 10, 1 << 12])
def test_no_piece_holds_more_than_its_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int
) -> None:
    """Every write transaction of a build under a byte ``limit`` holds about that much at
    its commit, whatever the part: the records it wrote (catalog, PB+tree records, id map,
    homes, subscriptions) are at most twice the limit, its l-node pages at most what the
    limit pays for (the BE-Tree's l-nodes span several pieces).  Not bounded by the
    limit: a PB+tree's pages (a tree a piece) and the c-nodes (one pass that revisits
    them, one piece).  (Counted, not timed: the
    records' bytes given to LMDB and the pages the transaction holds.)"""
    doc, subs, events = _workload("int", 9)
    held: list[tuple[int, int]] = []
    tally: dict[int, int] = {}
    real_put_many, real_commit = WriteTxn.put_many, WriteTxn.commit

    def put_many(self: WriteTxn, ns: bytes, keys: Any, values: Any, prefixed: bool = False) -> None:
        values = list(values)
        tally[id(self)] = tally.get(id(self), 0) + sum(map(len, keys)) + sum(map(len, values))
        real_put_many(self, ns, keys, values, prefixed)

    def commit(self: WriteTxn) -> None:
        lnodes = sum(isinstance(node, LNodePage) for _, node in self._dirty.values())
        held.append((tally.pop(id(self), 0), lnodes))
        real_commit(self)

    monkeypatch.setattr(WriteTxn, "put_many", put_many)
    monkeypatch.setattr(WriteTxn, "commit", commit)
    with Index.open(tmp_path / "s", schema=Schema.from_json(doc), settings=SETTINGS) as idx:
        batch = Batch(idx)
        for ident, expr in subs:
            batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
        held.clear()
        counts = batch.build(limit)
    monkeypatch.undo()
    assert len(held) == counts["commits"] > 3
    assert max(records for records, _ in held) <= 2 * limit
    lnodes = [n for _, n in held]
    assert max(lnodes) <= limit // 64 + 1 and sum(lnodes) > 2 * max(lnodes)
    with Index.open(tmp_path / "s") as idx:
        idx.check()
        assert _answers(idx, events) == brute_answers(doc, subs, events)
