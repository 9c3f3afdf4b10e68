"""The damage sweep: flipped bytes, zeroed ranges and truncated files in a real store.

Each case damages a copy of a small store (a few hundred subscriptions, built by the
python bulk load) and runs the real commands on it.  Every outcome must be one of:

* the answer is still right: ``match`` prints what the undamaged store prints for a fixed
  set of events, other commands succeed;
* the typed error: exit 1 and ``bexdb: store damaged: <what was found>`` with the hint to
  restore or rebuild;
* ``bexdb verify`` exits 0, or 4 with a report of what it found.  ``match`` may answer
  wrong only where verify reports the damage: values carry checksums, keys do not, and
  a damaged key the checks below miss could hide a record from a scan (none left in
  2,500 cases of the long sweep; the one found before is now refused:
  :func:`test_a_record_moved_by_a_damaged_key_is_missed_by_no_match`);

never a traceback, never a signal.  Most cases run ``tools.cli.main`` in-process (fast);
truncations (which were SIGBUS deaths before the data file was checked at open) and a
sample of the others run in subprocesses to prove that no case kills the process.

Short under pytest (``CASES`` cases); the long sweep runs from the command line::

    PYTHONPATH=. python -m tests.storage.test_damage ITER SEED
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import shutil
import struct
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from storage import lmdbfile
from tests.support.workload import SCHEMA, build_sharded, event, expression
from tools.cli import main

CASES = 200  # in two halves, one a run (test_damage_sweep)
FIXED = 7  # the fixed truncations cases() begins with
SUBPROCESS_EVERY = 20  # every 20th case runs in the child process instead
HINT = "restore the store from a copy, or rebuild it from its input with `bexdb load --replace`"
PSIZE = 4096
Outcome = tuple[int, str, str]  # exit code, stdout, stderr


@dataclass
class Source:
    """An undamaged store and what the commands answer on it."""

    store: Path
    events: str
    new: str
    ident: str  # a subscription id, as given on the command line
    expected: list[list[str]] = field(default_factory=list)


def _normal(out: str) -> list[list[str]]:
    """Match output with each line's ids sorted (SPEC: no promised order)."""
    lines = [json.loads(line) for line in out.splitlines()]
    return [sorted(map(json.dumps, line["matches"])) for line in lines]


def build_source(root: Path, subs: int = 300, seed: int = 13) -> Source:
    """A plain store of ``subs`` random subscriptions (ints and strings as ids)."""
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"id": i if i % 3 else f"s{i}", "expr": expression(rng)}) for i in range(subs)
    ]
    (root / "subs.jsonl").write_text("\n".join(lines) + "\n")
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    (root / "events.jsonl").write_text("".join(json.dumps(event(rng)) + "\n" for _ in range(30)))
    (root / "new.jsonl").write_text(json.dumps({"id": "fresh", "expr": "i > 3"}) + "\n")
    store = root / "store"
    argv = ["load", str(store), str(root / "subs.jsonl"), "--engine", "python"]
    code, _, err = run_inproc([*argv, "--schema", str(root / "schema.json")])
    assert code == 0, err
    source = Source(store, str(root / "events.jsonl"), str(root / "new.jsonl"), "1")
    code, out, err = run_inproc(["match", str(store), source.events])
    assert code == 0, err
    source.expected = _normal(out)
    return source


def run_inproc(argv: list[str]) -> Outcome:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def judge_in_subprocess(
    source: Source, stores: list[Path], writes: bool = True
) -> list[dict[str, str]]:
    """:func:`judge` of each of ``stores`` in one child process: a signal death (SIGBUS
    on a file cut short, SIGSEGV in LMDB) kills the child, not the test run, and is
    reported with the store it was judging (the child names each before it starts)."""
    code = (
        "import json, sys; from pathlib import Path; "
        "from tests.storage.test_damage import Source, judge, run_inproc; "
        "doc = json.loads(sys.argv[1]); doc['store'] = Path(doc['store']); "
        "source = Source(**doc)\n"
        "for store in sys.argv[2:]:\n"
        "    print('judging', store, flush=True)\n"
        f"    print(json.dumps(judge(source, Path(store), run_inproc, {writes})), flush=True)"
    )
    doc = {**source.__dict__, "store": str(source.store)}
    proc = subprocess.run(
        [sys.executable, "-c", code, json.dumps(doc), *map(str, stores)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=Path(__file__).resolve().parents[2],
    )
    lines = proc.stdout.splitlines()
    judging = next((line for line in reversed(lines) if line.startswith("judging")), "")
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode} {judging}"
    assert proc.returncode == 0, f"{judging}: {proc.stderr[-3000:]}"
    return [json.loads(line) for line in lines if not line.startswith("judging")]


# -- damage -------------------------------------------------------------------------------


def cases(n: int, seed: int, size: int) -> Iterator[tuple[str, int, int]]:
    """``n`` seeded cases ``(kind, offset, length)`` over a data file of ``size`` bytes:
    mostly single-byte flips, then zeroed ranges of 64 bytes and a page, and truncations
    (to 0 bytes, one byte, half, one page short, one byte short, random lengths)."""
    rng = random.Random(seed)
    fixed = [0, 1, size // 2, size - PSIZE, size - 1, 2 * PSIZE, PSIZE + 100][:FIXED]
    for k in range(n):
        roll = rng.random()
        if k < len(fixed):
            yield "truncate", fixed[k], 0
        elif roll < 0.65:
            yield "flip", rng.randrange(size), rng.randrange(1, 256)
        elif roll < 0.8:
            yield "zero", rng.randrange(size), 64
        elif roll < 0.96:
            yield "zero", rng.randrange(size // PSIZE) * PSIZE, PSIZE
        else:
            yield "truncate", rng.randrange(size), 0


def damage(data_file: Path, kind: str, offset: int, arg: int) -> None:
    data = bytearray(data_file.read_bytes())
    if kind == "flip":
        data[offset] ^= arg
    elif kind == "zero":
        data[offset : offset + arg] = bytes(len(data[offset : offset + arg]))
    else:
        del data[offset:]
    data_file.write_bytes(bytes(data))


# -- outcomes -----------------------------------------------------------------------------


def typed(code: int, err: str) -> bool:
    """The typed error: exit 1, one ``store damaged`` line with the hint, no traceback."""
    return code == 1 and err.startswith("bexdb: store damaged: ") and HINT in err


def judge(
    source: Source, store: Path, run: Callable[[list[str]], Outcome], writes: bool = True
) -> dict[str, str]:
    """Run the commands on a damaged ``store``; return per command what happened, or
    raise AssertionError naming the command and its output if the outcome is not allowed.
    Read-only commands first, then (with ``writes``) the writes, on the same copy."""
    found: dict[str, str] = {}
    target = str(store)

    def call(name: str, *argv: str) -> Outcome:
        code, out, err = run(list(argv))
        assert "Traceback" not in err, f"{name}: traceback\n{err}"
        return code, out, err

    code, out, err = call("verify", "verify", target)
    assert code == 0 or (code == 4 and "violation" in err), f"verify: {code} {out} {err}"
    found["verify"] = "ok" if code == 0 else "reported"

    code, out, err = call("match", "match", target, source.events)
    if code == 0 and _normal(out) != source.expected:
        # a damaged key (keys carry no checksum) can hide a record from a range scan:
        # allowed only where verify finds the damage (exit 4)
        assert found["verify"] == "reported", "match: a wrong answer, verify finds nothing"
        found["match"] = "wrong"
    elif code == 0:
        found["match"] = "right"
    else:
        assert typed(code, err), f"match: {code} {err}"
        found["match"] = "damaged"

    event_doc = json.dumps({"i": 4, "s": "ab", "il": [1]})
    commands = [
        ("inspect", ["inspect", target]),
        ("explain", ["explain", target, source.ident, event_doc]),
    ]
    if writes:
        commands += [
            ("subscribe", ["subscribe", target, source.new]),
            ("unsubscribe", ["unsubscribe", target, source.ident]),
        ]
    for name, argv in [*commands, ("compact", ["compact", target])]:
        code, out, err = call(name, *argv)
        assert code == 0 or typed(code, err), f"{name}: {code} {err}"
        found[name] = "right" if code == 0 else "damaged"
    return found


def sweep(
    source: Source, work: Path, n: int, seed: int, every: int, part: tuple[int, int] = (0, 1)
) -> Counter[str]:
    """Run ``n`` cases: in-process, but truncations and every ``every``-th other case in
    one child process (:func:`judge_in_subprocess`).  ``part`` ``(i, parts)`` runs the
    fixed truncations and, of the others, the cases ``k`` with ``k % parts == i``."""
    size = (source.store / "data.mdb").stat().st_size
    tally: Counter[str] = Counter()
    apart: dict[Path, str] = {}
    picked = 0
    for k, (kind, offset, arg) in enumerate(cases(n, seed, size)):
        if k >= FIXED and k % part[1] != part[0]:
            continue
        picked, j = picked + 1, picked
        copy = work / f"case-{k}"
        copy.mkdir(parents=True)
        shutil.copyfile(source.store / "data.mdb", copy / "data.mdb")
        damage(copy / "data.mdb", kind, offset, arg)
        name = f"case {k} ({kind} at {offset}, {arg})"
        if kind == "truncate" or (every and j % every == 0):
            apart[copy] = name
            continue
        try:
            found = judge(source, copy, run_inproc)
        except AssertionError as exc:
            raise AssertionError(f"{name}, in-process: {exc}") from exc
        tally[f"{kind}: verify {found['verify']}, match {found['match']}"] += 1
        shutil.rmtree(copy)
    try:
        results = judge_in_subprocess(source, list(apart))
    except AssertionError as exc:
        names = {str(path): name for path, name in apart.items()}
        raise AssertionError(f"in a subprocess: {exc} ({names})") from exc
    for (copy, name), found in zip(apart.items(), results, strict=True):
        tally[f"{name.split()[2][1:]}: verify {found['verify']}, match {found['match']}"] += 1
        shutil.rmtree(copy)
    return tally


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Source:
    return build_source(tmp_path_factory.mktemp("damage-source"))


@pytest.mark.sampled(1)
@pytest.mark.parametrize("half", [0, 1])
def test_damage_sweep(source: Source, tmp_path: Path, half: int) -> None:
    """The ``CASES`` cases of seed 1 in two halves (every kind of damage in each), one
    drawn a run (docs/testing.md "Bounded samples"), both with ``--full``."""
    tally = sweep(source, tmp_path, CASES, seed=1, every=SUBPROCESS_EVERY, part=(half, 2))
    assert sum(tally.values()) >= CASES // 2
    assert {k.split(":")[0] for k in tally} == {"flip", "zero", "truncate"}
    # the sweep reaches live data, not only free space: some damage is found and refused
    assert any("reported" in k for k in tally)
    assert any("match damaged" in k for k in tally)


def test_a_wild_node_offset_is_refused_before_lmdb_follows_it(
    source: Source, tmp_path: Path
) -> None:
    """The first node offset of LMDB's main table root (which names the tables, read by
    every open) pointed 60 KB further, past the end of the file: without the walk of
    :mod:`storage.lmdbfile`, every command died with SIGBUS (exit 135)."""
    copy = tmp_path / "wild"
    copy.mkdir()
    data = bytearray((source.store / "data.mdb").read_bytes())
    txnids = [struct.unpack_from("<Q", data, p * PSIZE + 144)[0] for p in (0, 1)]
    newer = txnids.index(max(txnids))  # LMDB's current meta page
    root = struct.unpack_from("<Q", data, newer * PSIZE + 128)[0]  # the main table's root
    data[root * PSIZE + 17] ^= 0xF0  # the high byte of its mp_ptrs[0]
    (copy / "data.mdb").write_bytes(bytes(data))
    code, _, err = run_subprocess(["match", str(copy), source.events])
    assert typed(code, err) and f"page {root}: a node offset outside the page" in err, err
    code, _, err = run_subprocess(["verify", str(copy)])
    assert code == 4 and "a node offset outside the page" in err, (code, err)
    assert lmdbfile.damage(copy, walk=False) is None  # the meta checks alone pass it
    assert lmdbfile.damage(copy, walk=True) == f"page {root}: a node offset outside the page"


def test_a_file_ending_before_its_last_page_number_is_sound_unless_a_page_is_cut(
    source: Source, tmp_path: Path
) -> None:
    """LMDB counts pages a transaction took and freed again without writing them, so a
    sound data file can end before the last page its meta page records (CI met one:
    long keys across commits and map growth).  Refusing that as a truncation refused a
    sound store; a cut that loses a reachable page is still found, at any size."""
    sound = tmp_path / "sound"
    sound.mkdir()
    data = bytearray((source.store / "data.mdb").read_bytes())
    for meta in (0, 1):
        last = struct.unpack_from("<Q", data, meta * PSIZE + 136)[0]
        struct.pack_into("<Q", data, meta * PSIZE + 136, last + 40)  # mm_last_pg
    (sound / "data.mdb").write_bytes(bytes(data))
    assert lmdbfile.damage(sound, walk=False) is None
    assert lmdbfile.damage(sound, walk=True) is None
    assert run_inproc(["match", str(sound), source.events]) == run_inproc(
        ["match", str(source.store), source.events]
    )
    txnids = [struct.unpack_from("<Q", data, p * PSIZE + 144)[0] for p in (0, 1)]
    root = struct.unpack_from("<Q", data, txnids.index(max(txnids)) * PSIZE + 128)[0]
    cut = tmp_path / "cut"
    cut.mkdir()
    (cut / "data.mdb").write_bytes(bytes(data[: len(data) // PSIZE // 2 * PSIZE]))
    found = lmdbfile.damage(cut, walk=False)  # a cut is walked whatever the file's size
    assert found is not None and found.endswith("truncated?)"), found
    (cut / "data.mdb").write_bytes(bytes(data[: root * PSIZE]))
    found = lmdbfile.damage(cut, walk=False)
    assert found is not None and f"lies outside pages 2..{root - 1} (" in found, found
    code, _, err = run_subprocess(["verify", str(cut)])
    assert code == 4 and "truncated?" in err, (code, err)


def test_a_record_moved_by_a_damaged_key_is_missed_by_no_match(
    source: Source, tmp_path: Path
) -> None:
    """Checksums cover values, not keys: a flipped first byte moves a PB+tree's record
    out of the range that matching scans.  The root record lists the attributes that
    have one, so matching refuses instead of answering without the tree."""
    from betree.disk.catalog import NS, ROOT
    from betree.index import Index
    from pbtree.tree import NS as PBTREE_NS

    copy = tmp_path / "moved"
    shutil.copytree(source.store, copy)
    with Index.open(copy) as idx, idx.store.write() as txn:
        name = txn.get_obj(NS, ROOT)["attributes"]["pbtrees"][-1].encode()
        value = txn.get(PBTREE_NS, name)
        assert value is not None
        txn.delete(PBTREE_NS, name)
        txn.put(bytes([PBTREE_NS[0] ^ 0x8D]) + PBTREE_NS[1:], name, value)
    code, _, err = run_inproc(["match", str(copy), source.events])
    assert typed(code, err) and "not those the root record lists" in err, err
    code, _, err = run_inproc(["verify", str(copy)])
    assert code == 4 and "root record lists per-attribute records" in err, err


def test_a_damaged_id_pointer_deletes_no_other_subscription(source: Source, tmp_path: Path) -> None:
    """The ``ext`` record of id 1 pointing at id 2's subscription (u64 values carry no
    checksum): unsubscribe and explain refuse; id 2 stays."""
    from betree.index import Index
    from storage import codec

    copy = tmp_path / "pointer"
    shutil.copytree(source.store, copy)
    with Index.open(copy) as idx, idx.store.write() as txn:
        txn.put(b"ext", codec.encode_id(1), txn.get(b"ext", codec.encode_id(2)))
    code, _, err = run_inproc(["unsubscribe", str(copy), "1"])
    assert typed(code, err) and "the id record of 1 points at 2's subscription" in err, err
    code, _, err = run_inproc(["explain", str(copy), "1", "{}"])
    assert typed(code, err), err
    with Index.open(copy, readonly=True) as idx:
        assert idx.expression(2) is not None


def test_no_damage_seen_in_a_store_written_meanwhile(source: Source, tmp_path: Path) -> None:
    """Opening walks LMDB's pages without a reader slot while another process commits
    (and reuses freed pages): a walk that a commit overlapped is redone, so a sound
    store is never refused as damaged."""
    store = tmp_path / "busy"
    shutil.copytree(source.store, store)
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from betree.index import Index\n"
            "with Index.open(sys.argv[1]) as idx:\n"
            "    end = time.monotonic() + 2\n"
            "    k = 0\n"
            "    while time.monotonic() < end:\n"
            "        idx.subscribe_many([(f'w{k}-{j}', f'i > {j}') for j in range(20)])\n"
            "        idx.unsubscribe_many([f'w{k - 1}-{j}' for j in range(20)])\n"
            "        k += 1\n"
            "    print(k)",
            str(store),
        ],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
        text=True,
    )
    opened = 0
    try:
        while writer.poll() is None:
            assert lmdbfile.damage(store, walk=True) is None
            code, _, err = run_inproc(["match", str(store), source.events])
            assert code == 0, err
            opened += 1
    finally:
        writer.kill()
        out, _ = writer.communicate()
    assert writer.returncode == 0 and int(out) > 10 and opened > 5


def test_damaged_sharded_store(source: Source, tmp_path: Path) -> None:
    """A sharded store: its manifest cut, emptied, flipped, naming a missing shard; one
    shard's data file flipped, zeroed and cut.  Writes are left out (sharded stores
    refuse them: another item of issue 13); compaction runs shard by shard."""
    rng = random.Random(5)
    lines = (Path(source.events).parent / "subs.jsonl").read_text().splitlines()
    subs = {i: json.loads(line)["expr"] for i, line in enumerate(lines[:120])}
    pristine = tmp_path / "pristine"
    build_sharded(pristine, subs)
    sharded = Source(pristine, source.events, source.new, "1")
    code, out, err = run_inproc(["match", str(pristine), source.events])
    assert code == 0, err
    sharded.expected = _normal(out)
    manifest = (pristine / "manifest.json").read_bytes()
    shard = (pristine / "shard-0001" / "data.mdb").stat().st_size
    damages: list[tuple[str, str, int, int]] = [
        ("manifest.json", "truncate", len(manifest) // 2, 0),
        ("manifest.json", "truncate", 0, 0),
        ("manifest.json", "zero", 0, 64),
        ("shard-0001/data.mdb", "truncate", shard // 2, 0),
        ("shard-0001/data.mdb", "truncate", shard - PSIZE, 0),
    ]
    damages += [("manifest.json", "flip", rng.randrange(len(manifest)), 0x20) for _ in range(4)]
    damages += [
        ("shard-0001/data.mdb", "flip", rng.randrange(shard), rng.randrange(1, 256))
        for _ in range(6)
    ]
    damages += [("shard-0001/data.mdb", "zero", rng.randrange(shard // PSIZE) * PSIZE, PSIZE)]
    copies = []
    for k, (name, kind, offset, arg) in enumerate(damages):
        copy = tmp_path / f"case-{k}"
        shutil.copytree(pristine, copy)
        damage(copy / name, kind, offset, arg)
        copies.append(copy)
    gone = tmp_path / "missing-shard"
    shutil.copytree(pristine, gone)
    shutil.rmtree(gone / "shard-0000")
    copies.append(gone)
    for copy in copies[:-4]:
        judge(sharded, copy, run_inproc, writes=False)
    judge_in_subprocess(sharded, copies[-4:], writes=False)  # the cut data file, a sample


def test_serve_refuses_a_cut_store_and_answers_damage_without_dying(
    source: Source, tmp_path: Path
) -> None:
    from storage import open_store
    from tests.support.http import call
    from tools.serve import spawn

    cut = tmp_path / "cut"
    cut.mkdir()
    shutil.copyfile(source.store / "data.mdb", cut / "data.mdb")
    damage(cut / "data.mdb", "truncate", (cut / "data.mdb").stat().st_size // 2, 0)
    code, _, err = run_subprocess(["serve", str(cut), "--port", "0"])
    assert typed(code, err), err

    flipped = tmp_path / "flipped"
    shutil.copytree(source.store, flipped)
    with open_store(flipped) as store, store.env.begin(write=True, db=store.pages_db) as txn:
        for key, value in list(txn.cursor().iternext()):  # every page fails its checksum
            txn.put(key, value[:-1] + bytes([value[-1] ^ 1]))
    proc, url = spawn(flipped, "--workers", "1")
    try:
        status, body, _ = call(url, "POST", "/match", {"i": 4})
        assert status == 500
        assert body["error"].startswith("store damaged: page ") and body["hint"] == HINT
        assert call(url, "GET", "/healthz")[0] == 200  # the worker lives on
        assert call(url, "POST", "/match", {"i": 5})[0] == 500
    finally:
        proc.terminate()
        proc.wait(60)


def run_subprocess(argv: list[str]) -> Outcome:
    proc = subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    return proc.returncode, proc.stdout, proc.stderr


if __name__ == "__main__":  # the long sweep: python -m tests.storage.test_damage ITER SEED
    import tempfile
    import time

    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    first_seed = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    with tempfile.TemporaryDirectory() as scratch:
        began = time.monotonic()
        src = build_source(Path(scratch) / "source")
        result = sweep(src, Path(scratch) / "work", iterations, first_seed, SUBPROCESS_EVERY)
        for outcome, count in sorted(result.items()):
            print(f"{count:6d}  {outcome}")
        print(f"{sum(result.values())} cases in {time.monotonic() - began:.1f} s")
