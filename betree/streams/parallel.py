"""Matching a stream of events in several processes, the results in input order
(``bexdb match --jobs N``).

The parent reads the events in batches of :data:`betree.streams.stream.BATCH` lines and hands
whole batches to N worker processes; each worker opens the store read-only once (plain
or sharded: :func:`betree.stores.sharded.open_index`) and matches a batch as ``bexdb match``
does in one process (:func:`betree.streams.stream.match_lines`: one read snapshot and one
``match_many`` per batch, the same error texts), so the output is byte-identical to one
process's.  At most ``2 * N`` batches are in flight: memory is bounded by that many
batches of lines and results, and by each worker's page cache.

Workers are started with ``forkserver`` (``spawn`` where that is missing): an LMDB
environment must not cross a ``fork``, and neither may the parent's page cache.  The server
imports this module (and so bexdb) once, before it forks any worker, and opens no store.
Until a full batch arrives the parent matches alone, starting no worker: a short stream, or
a live one whose events trickle in (:func:`betree.streams.stream.ready_batches` ends a batch
where the input pauses, and a short batch has all results before it written first).  A
worker that dies (killed, out of memory) ends the stream with
:class:`~storage.errors.BexdbError` naming what happened, never a hang.

Cost: starting the workers (the server's interpreter and bexdb's imports, ~0.5 s, once a
process; then a fork and the store's open a worker), and per batch pickling its lines to a
worker and its output lines back (a few µs per event: workers write the JSON, so the parent
only reads and writes bytes).  What it buys: the matching of N batches at once, on N cores.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain

from betree.formats.jsonl import dump_results
from betree.packed.heap import keep_freed_memory
from betree.stores.sharded import AnyIndex, open_index
from betree.streams.stream import BATCH, Result, match_lines
from storage.errors import BexdbError

#: The store a worker process opened (:func:`_open`), kept for its life.
_worker_store: AnyIndex | None = None


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: One batch's output: its result lines (:func:`betree.formats.jsonl.dump_results`) and how many
#: of them are errors.
Output = tuple[bytes, int]


def match_lines_parallel(
    store: AnyIndex,
    path: str | os.PathLike[str],
    batches: Iterable[list[bytes]],
    jobs: int,
    cache_bytes: int,
    meta: bool = False,
) -> Iterator[Output]:
    """The results of batches of JSON Lines events (as :func:`betree.streams.stream.ready_batches`
    gives them), written as JSON Lines (one :data:`Output` per batch, in order).

    Batches are matched by ``store`` in this process until a full one (:data:`BATCH`
    events) shows the input is bulk; then, with ``jobs`` > 1, that batch and the rest by
    ``jobs`` worker processes that each open the store at ``path`` with a page cache of
    ``cache_bytes`` (the parent only reads and writes).  A short batch (the input paused)
    has every result before it written before more input is read.  ``meta``: each
    match with its subscription's metadata (:func:`betree.streams.stream.match_lines`).
    """
    batches = iter(batches)
    for batch in batches:
        if jobs > 1 and len(batch) >= BATCH:
            yield from _pooled(chain([batch], batches), path, jobs, cache_bytes, meta)
            return
        yield _output(_matched(store, batch, meta))


def _pooled(
    batches: Iterator[list[bytes]],
    path: str | os.PathLike[str],
    jobs: int,
    cache_bytes: int,
    meta: bool,
) -> Iterator[Output]:
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if "forkserver" in methods:  # bexdb imported once, by the server (before any store opens)
        context.set_forkserver_preload([__name__])
    pool = ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_open, initargs=(str(path), cache_bytes)
    )
    pending: deque[Future[Output]] = deque()
    try:
        for batch in batches:
            try:
                pending.append(pool.submit(_match, batch, meta))
            except BrokenProcessPool as exc:  # a worker died before this batch went out
                raise _died() from exc
            while pending and (len(pending) >= 2 * jobs or pending[0].done()):
                yield _result(pending.popleft())
            if len(batch) < BATCH:  # the input paused: what was read is written first
                while pending:
                    yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _result(future: Future[Output]) -> Output:
    try:
        return future.result()
    except BrokenProcessPool as exc:
        raise _died() from exc


def _died() -> BexdbError:
    return BexdbError(
        "a matching process died (killed, or out of memory); no result after the last one written",
        "run again, with fewer --jobs if memory is short",
    )


def _open(path: str, cache_bytes: int) -> None:
    global _worker_store
    keep_freed_memory()
    _worker_store = open_index(path, cache_bytes=cache_bytes)


def _match(lines: list[bytes], meta: bool) -> Output:
    assert _worker_store is not None, "the worker's initializer opens the store"
    return _output(_matched(_worker_store, lines, meta))


def _matched(store: AnyIndex, lines: list[bytes], meta: bool) -> list[Result]:
    return [result for chunk in match_lines(store, lines, meta) for result in chunk]


def _output(results: list[Result]) -> Output:
    return dump_results(results), sum("error" in r for r in results)
