"""Every scan over a damaged store ends and reports the damage; a backup is whole or fails.

A store of 2,000 subscriptions ``x = i % 50`` (the python bulk load) is damaged one bit
at a time in the keys of the LMDB pages holding its subscription records: every bit of
some keys of a branch page (a flipped bit there once made ``bexdb verify`` spin forever
in ``ReadTxn.check_records``) and of a leaf page (one there made ``bexdb export`` exit 0
with a truncated backup).  For each flip, under a timer that fails the test instead of
hanging it:

* ``verify`` ends with exit 0 or 4;
* ``export`` ends with exit 0 and every subscription, each once, or exit 1 and
  ``bexdb: store damaged: ...``.

Each page kind's bits are swept in two halves, one drawn a run (``--full``: both).
"""

from __future__ import annotations

import contextlib
import io
import json
import signal
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.cli import main

PSIZE = 4096
SUBS = 2000
GUARD_SECONDS = 20  # far above one case (~0.1 s); a loop that does not end fails here
P_BRANCH, P_LEAF = 1, 2
KEY = b"sub\0"


Built = tuple[Path, bytes, set[tuple[int, str]]]  # the store, its file, its subscriptions


class Hung(Exception):
    pass


@contextlib.contextmanager
def guard(seconds: int) -> Iterator[None]:
    """Raise :class:`Hung` in this thread if the block runs longer than ``seconds``."""

    def _alarm(signum: int, frame: object) -> None:
        raise Hung(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with (
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
        guard(GUARD_SECONDS),
    ):
        code = main(list(argv))
    return code, err.getvalue()


def key_offsets(data: bytes, flags: int, keys: int) -> list[int]:
    """File offsets of the bytes of the first ``keys`` subscription-record keys (``sub\\0``
    and an 8-byte id) in the first page of kind ``flags`` that has as many."""
    for page in range(len(data) // PSIZE):
        head = page * PSIZE
        if not struct.unpack_from("<H", data, head + 10)[0] & flags:
            continue
        starts, at = [], data.find(KEY, head, head + PSIZE)
        while at >= 0:
            starts.append(at)
            at = data.find(KEY, at + 1, head + PSIZE)
        if len(starts) >= keys:
            return [s + i for s in starts[:keys] for i in range(len(KEY) + 8)]
    raise AssertionError(f"no page of kind {flags} with {keys} subscription keys")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("scans")
    subs = [(i, f"x = {i % 50}") for i in range(SUBS)]
    (root / "subs.jsonl").write_text(
        "".join(json.dumps({"id": i, "expr": e}) + "\n" for i, e in subs)
    )
    (root / "schema.json").write_text(json.dumps({"attributes": {"x": {"type": "int"}}}))
    store = root / "store"
    argv = ["load", str(store), str(root / "subs.jsonl"), "--engine", "python"]
    assert run(*argv, "--schema", str(root / "schema.json"))[0] == 0
    return store, (store / "data.mdb").read_bytes(), set(subs)


def check_flips(built: Built, flags: int, keys: int, half: int, tmp_path: Path) -> None:
    """Every other bit (``half``: which) of the first ``keys`` subscription keys of a page
    of kind ``flags`` flipped alone: each scan ends, reporting the damage or whole."""
    store, original, subs = built
    flips = [(o, b) for o in key_offsets(original, flags, keys) for b in range(8)]
    failures: list[str] = []
    out = tmp_path / "backup.jsonl"
    for offset, bit in flips[half::2]:
        damaged = bytearray(original)
        damaged[offset] ^= 1 << bit
        (store / "data.mdb").write_bytes(damaged)
        case = f"byte {offset} bit {bit}"
        try:
            code, err = run("verify", str(store))
            if code not in (0, 4):
                failures.append(f"{case}: verify exit {code}: {err[-200:]}")
            out.unlink(missing_ok=True)
            code, err = run("export", str(store), str(out))
        except Hung as exc:
            failures.append(f"{case}: {exc}")
            continue
        if code == 0:
            lines = out.read_text().splitlines()
            got = [(r["id"], r["expr"]) for r in map(json.loads, lines) if "id" in r]
            if len(got) != len(subs) or set(got) != subs:
                failures.append(f"{case}: export exit 0 with {len(got)} of {len(subs)}")
        elif code != 1 or "store damaged" not in err:
            failures.append(f"{case}: export exit {code}: {err[-200:]}")
    (store / "data.mdb").write_bytes(original)
    assert not failures, "\n".join(failures[:20])


# each a half of the bits a run, drawn by the sample seed (every bit with --full)
@pytest.mark.sampled(1)
@pytest.mark.parametrize("half", [0, 1])
def test_every_flipped_key_bit_of_a_branch_page_ends_and_is_reported(
    built: Built, half: int, tmp_path: Path
) -> None:
    check_flips(built, P_BRANCH, 2, half, tmp_path)


@pytest.mark.sampled(1)
@pytest.mark.parametrize("half", [0, 1])
def test_every_flipped_key_bit_of_a_leaf_page_ends_and_is_reported(
    built: Built, half: int, tmp_path: Path
) -> None:
    check_flips(built, P_LEAF, 2, half, tmp_path)
