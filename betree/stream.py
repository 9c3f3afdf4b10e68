"""Matching a stream of events, each judged on its own: the one place that says what a
bad event is called (``bexdb match`` reads them as JSON Lines, ``bexdb serve`` as JSON).

A bad event (not JSON, not an object, not fitting the schema) gets ``{"error": REASON}``
in its place and the rest are matched; a good one gets ``{"matches": IDS}``, its ids as
one numpy array (:meth:`Index.match_many_arrays`: written as JSON by
:func:`betree.jsonl.dump_results` without a Python object per id).  Events
are matched in batches of :data:`BATCH`, each batch in one read snapshot: later batches
see newer commits, and no snapshot is held for the whole of a long stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any

from betree.jsonl import loads_line
from betree.sharded import AnyIndex
from storage.errors import InvalidInput

BATCH = 1024  # events matched per read snapshot (README: Batches)

Result = dict[str, Any]  # {"matches": ids (an array)} or {"error": "..."}


def match_lines(store: AnyIndex, lines: Iterable[bytes]) -> Iterator[list[Result]]:
    """The results of JSON Lines events, one batch of :data:`BATCH` at a time, in order.

    ``lines`` as :func:`betree.jsonl.input_lines` gives them; blank lines are skipped
    (they get no result).  Cost: one ``match_many`` per batch (one read snapshot, one pass
    over the index: :mod:`betree.batch`).
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
        found = iter(store.match_many_arrays(decoded))
        out: list[Result] = []
        for result in results:
            if result is None:
                ids = next(found)
                if isinstance(ids, InvalidInput):
                    result = {"error": ids.message}
                else:
                    result = {"matches": ids}
            out.append(result)
        yield out
