"""Matching a stream of events, each judged on its own: the one place that says what a
bad event is called (``bexdb match`` reads them as JSON Lines, ``bexdb serve`` as JSON).

A bad event (not JSON, not an object, not fitting the schema) gets ``{"error": REASON}``
in its place and the rest are matched; a good one gets ``{"matches": IDS}``, its ids as
one numpy array (:meth:`Index.match_many_arrays`: written as JSON by
:func:`betree.formats.jsonl.dump_results` without a Python object per id).  Events
are matched in batches of :data:`BATCH`, each batch in one read snapshot: later batches
see newer commits, and no snapshot is held for the whole of a long stream.

A batch also ends where the input pauses (:func:`ready_batches`): events written to a
live pipe get their results as they come, not :data:`BATCH` at a time.
"""

from __future__ import annotations

import os
import select
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, BinaryIO

from betree.formats.jsonl import input_lines, loads_line, meta_matches
from betree.stores.sharded import AnyIndex
from storage.errors import InvalidInput

BATCH = 1024  # events matched per read snapshot (docs/matching.md: Batches)

Result = dict[str, Any]  # {"matches": ids (an array)} or {"error": "..."}


def match_lines(
    store: AnyIndex, lines: Iterable[bytes], meta: bool = False
) -> Iterator[list[Result]]:
    """The results of JSON Lines events, one batch of :data:`BATCH` at a time, in order.

    ``lines`` as :func:`betree.formats.jsonl.input_lines` gives them; blank lines are skipped
    (they get no result).  Cost: one ``match_many`` per batch (one read snapshot, one pass
    over the index: :mod:`betree.matching.batch`).  With ``meta`` (``bexdb match --with-meta``),
    each
    result's matches are ``{"id", "meta"}`` (:func:`betree.formats.jsonl.meta_matches`), the
    metadata read in the batch's snapshot: one get more per matched id.
    """
    events = (line for line in lines if line.strip())
    while batch := list(islice(events, BATCH)):
        results: list[Result | None] = []
        decoded: list[object] = []
        for line in batch:
            try:
                decoded.append(loads_line(line))
                results.append(None)
            except InvalidInput as exc:
                results.append({"error": exc.message})
        found = iter(store.match_many_meta(decoded) if meta else store.match_many_arrays(decoded))
        shown: dict[Any, str] = {}  # (the batch's matches with metadata, as written)
        out: list[Result] = []
        for result in results:
            if result is None:
                ids = next(found)
                if isinstance(ids, InvalidInput):
                    result = {"error": ids.message}
                else:
                    result = {"matches": meta_matches(ids, shown) if meta else ids}
            out.append(result)
        yield out


def ready_batches(fh: BinaryIO, size: int = BATCH) -> Iterator[list[bytes]]:
    """The non-blank event lines of ``fh`` (as :func:`betree.formats.jsonl.input_lines` gives them)
    in batches of at most ``size``, a batch also ending where no more input is ready (a
    pipe whose writer paused), so that a live stream's results are not held back.

    Cost: for an OS file, reads of up to 1 MB and one ``select`` per read (a regular file
    is always ready: full batches); a file object without a descriptor is batched as it
    fills.
    """
    try:
        fd = fh.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        events = (line for line in input_lines(fh) if line.strip())
        while full := list(islice(events, size)):
            yield full
        return
    batch: list[bytes] = []
    for line in input_lines(_os_lines(fd)):
        if line.strip():
            batch.append(line)
            if len(batch) == size:
                yield batch
                batch = []
        elif not line and batch and not _ready(fd):  # (also after a real empty line: harmless)
            yield batch
            batch = []
    if batch:
        yield batch


def _os_lines(fd: int) -> Iterator[bytes]:
    """The lines of ``fd`` without their ``\n``, each read's complete lines followed by
    ``b""`` (where :func:`ready_batches` asks whether more input is ready)."""
    pending: list[bytes] = []  # a line's start, read without its end (lines may be long)
    while chunk := os.read(fd, 1 << 20):
        if b"\n" not in chunk:
            pending.append(chunk)
            continue
        lines = chunk.split(b"\n")
        lines[0] = b"".join([*pending, lines[0]])
        pending = [lines.pop()]
        yield from lines
        yield b""
    if last := b"".join(pending):
        yield last


def _ready(fd: int) -> bool:
    """Whether reading ``fd`` would not block (true at its end, and where select cannot
    tell)."""
    try:
        return bool(select.select([fd], [], [], 0)[0])
    except (OSError, ValueError):
        return True
