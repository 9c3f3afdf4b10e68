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
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, set[tuple[int, str]]]:
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


@pytest.mark.parametrize(("flags", "keys"), [(P_BRANCH, 2), (P_LEAF, 2)])
def test_every_flipped_key_bit_ends_and_is_reported(
    built: tuple[Path, bytes, set[tuple[int, str]]], flags: int, keys: int, tmp_path: Path
) -> None:
    store, original, subs = built
    offsets = key_offsets(original, flags, keys)
    failures: list[str] = []
    out = tmp_path / "backup.jsonl"
    for offset in offsets:
        for bit in range(8):
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
