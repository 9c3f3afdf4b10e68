"""Matching a stream of events in several processes, the results in input order
(``bexdb match --jobs N``).

The parent reads the events in batches of :data:`betree.stream.BATCH` lines and hands
whole batches to N worker processes; each worker opens the store read-only once (plain
or sharded: :func:`betree.sharded.open_index`) and matches a batch as ``bexdb match``
does in one process (:func:`betree.stream.match_lines`: one read snapshot and one
``match_many`` per batch, the same error texts), so the output is byte-identical to one
process's.  At most ``2 * N`` batches are in flight: memory is bounded by that many
batches of lines and results, and by each worker's page cache.

Workers are started with ``forkserver`` (``spawn`` where that is missing): an LMDB
environment must not cross a ``fork``, and neither may the parent's page cache.  A stream
no longer than one batch is matched in the parent without starting any worker.  A worker
that dies (killed, out of memory) ends the stream with :class:`~storage.errors.BexdbError`
naming what happened, never a hang.

Cost: starting the workers (about 0.5 s each: the interpreter and bexdb's imports, then
the store's open), and per batch pickling its lines to a worker and its output lines back
(a few µs per event: workers write the JSON, so the parent only reads and writes
bytes).  What it buys: the matching of N batches at once, on N cores.
"""

from __future__ import annotations

import multiprocessing
import os
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from itertools import chain, islice

from betree.heap import keep_freed_memory
from betree.jsonl import dump_results
from betree.sharded import AnyIndex, open_index
from betree.stream import BATCH, Result, match_lines
from storage.errors import BexdbError

#: The store a worker process opened (:func:`_open`), kept for its life.
_worker_store: AnyIndex | None = None


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


#: One batch's output: its result lines (:func:`betree.jsonl.dump_results`) and how many
#: of them are errors.
Output = tuple[bytes, int]


def match_lines_parallel(
    store: AnyIndex,
    path: str | os.PathLike[str],
    lines: Iterable[bytes],
    jobs: int,
    cache_bytes: int,
) -> Iterator[Output]:
    """The results of JSON Lines events as :func:`betree.stream.match_lines` gives them,
    written as JSON Lines (one :data:`Output` per batch, in order), matched and written by
    ``jobs`` worker processes that each open the store at ``path`` with a page cache of
    ``cache_bytes`` (the parent only reads and writes); ``store`` itself matches a stream
    of one batch.
    """
    events = (line for line in lines if line.strip())
    first = list(islice(events, BATCH))
    more = list(islice(events, BATCH))
    if jobs <= 1 or not more:
        for results in chain(match_lines(store, first + more), match_lines(store, events)):
            yield _output(results)
        return
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    pool = ProcessPoolExecutor(
        jobs, mp_context=context, initializer=_open, initargs=(str(path), cache_bytes)
    )
    pending: deque[Future[Output]] = deque()
    try:
        for batch in _batches([first, more], events):
            try:
                pending.append(pool.submit(_match, batch))
            except BrokenProcessPool as exc:  # a worker died before this batch went out
                raise _died() from exc
            if len(pending) >= 2 * jobs:
                yield _result(pending.popleft())
        while pending:
            yield _result(pending.popleft())
    finally:
        for future in pending:
            future.cancel()
        pool.shutdown(wait=True, cancel_futures=True)


def _batches(head: list[list[bytes]], events: Iterator[bytes]) -> Iterator[list[bytes]]:
    yield from head
    while batch := list(islice(events, BATCH)):
        yield batch


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


def _match(lines: list[bytes]) -> Output:
    assert _worker_store is not None, "the worker's initializer opens the store"
    return _output([result for chunk in match_lines(_worker_store, lines) for result in chunk])


def _output(results: list[Result]) -> Output:
    return dump_results(results), sum("error" in r for r in results)
