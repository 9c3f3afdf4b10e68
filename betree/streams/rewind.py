"""Answers as of one pinned state of a store, from matches made in later snapshots.

Why: a Spark micro-batch is matched by several tasks in separate processes, each taking
the latest commit of every shard when it starts (LMDB gives a reader nothing older), so a
write committed meanwhile would be seen by some of its events and not by others.  Instead
the batch's first task records a state of the store (:class:`Pin`, in a file every task
of the batch, and a re-run of it, reads: :func:`agree`), and each task rewinds the answers
it matched in its own snapshot to that state through the change log
(:mod:`betree.disk.changelog`).

A pin names, for the store's identity (the inode of its data file or manifest, and of each
shard's data file: a store put in its place by ``load --replace`` or ``compact`` is
another), each shard's change log position (the root record's ``log_next``), schema
version and generation, read in one snapshot of every shard begun while no sharded batch
is being applied (as a sharded match begins its own).

The rewind (:meth:`Rewinder.rewind`): after matching a batch of events in snapshot ``S``
(the pin ``P`` <= ``S``), read the entries ``[P, E)`` in a snapshot ``E`` >= ``S``.  A
subscription no entry names was the same at ``P``, ``S`` and ``E``: its answer stands.
Every id an entry names (added, removed, replaced) is dropped from the answers; then each
subscription that existed at ``P`` and was removed (or replaced) since — a ``removed`` item
whose internal id no entry of the range added (internal ids are never reused) — is put
back where its expression, compiled against the pinned schema
(:class:`betree.compiler.Compiler`), holds for the event (each clause's atoms'
truth functions, ``Atom.holds``).  The ids answered are then exactly those of the
pinned state's subscriptions that hold, whichever ``S`` the match took.

The pin cannot be reached (:meth:`Rewinder.changes` returns None; the answers stay as
matched, and the caller reports it) when the store's identity changed, a shard's schema
version changed, its log no longer holds entry ``P`` (:data:`betree.disk.changelog.KEEP`
commits later) or holds entries written before the log kept removed expressions.

Cost: nothing per event when nothing was written since the pin, else a set test per id
answered and, for each subscription to put back, its compile once and its clauses'
truth functions per event (the event decoded and validated again); one read transaction
per shard per batch, each log entry read once (kept by the :class:`Rewinder`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from betree.compiler import Compiler
from betree.disk import catalog, changelog
from betree.disk.nodes import id_array
from betree.formats.jsonl import loads_line
from betree.index import event_values
from betree.lang.atoms import Clause
from betree.lang.schema import Schema
from betree.stores import shardwrite
from betree.stores.sharded import AnyIndex, ShardedIndex
from storage.errors import InvalidInput

Ident = Any  # a store's identity as JSON: [root (dev, inode), [each shard's (dev, inode)]]
Result = dict[str, Any]  # {"matches": ids} or {"error": "..."} (betree.streams.stream)
I64 = (-(2**63), 2**63 - 1)


def store_ident(index: AnyIndex, root: tuple[int, int] | None) -> Ident | None:
    """The identity of the store ``index`` holds open: ``root`` (the inode its path named
    when opened: :class:`betree.stores.live.LiveIndex`) and, for a sharded store, each
    shard's data file's as opened; None if one is unknown (a swap half-way)."""
    shards = list(index.idents) if isinstance(index, ShardedIndex) else []
    if root is None or any(s is None for s in shards):
        return None
    return json.loads(json.dumps([root, shards]))  # (the form it has read back from a pin)


@dataclass(frozen=True)
class Pin:
    """One state of a store: its identity, and per shard ``(log_next, schema_version,
    generation)``."""

    ident: Ident
    shards: tuple[tuple[int, int, int], ...]

    @property
    def generations(self) -> tuple[int, ...]:
        return tuple(gen for _, _, gen in self.shards)

    def to_json(self) -> str:
        return json.dumps({"store": self.ident, "shards": [list(s) for s in self.shards]})

    @classmethod
    def from_json(cls, text: str) -> Pin:
        doc = json.loads(text)
        shards = doc["shards"]
        if not all(len(s) == 3 and all(type(v) is int for v in s) for s in shards):
            raise ValueError("a pin's shard is not [log_next, schema_version, generation]")
        return cls(doc["store"], tuple((s[0], s[1], s[2]) for s in shards))


def take_pin(index: AnyIndex, root: tuple[int, int] | None) -> Pin | None:
    """The state of the store now (a sharded store's compacted shards reopened first);
    None if its identity is unknown."""
    index.generations()  # (reopens compacted shards, as a match would)
    ident = store_ident(index, root)
    if ident is None:
        return None
    routed = isinstance(index, ShardedIndex) and index.routed
    with ExitStack() as stack:
        # (begun while no sharded batch is being applied, as a sharded match)
        with shardwrite.reading(index.root) if routed else nullcontext():  # type: ignore[attr-defined]
            txns = [stack.enter_context(i.store.read()) for i in index.indexes]
        shards = []
        for txn in txns:
            rec = catalog.root_record(txn)
            shards.append((int(rec.get("log_next", 0)), int(rec.get("schema_version", 0)), txn.gen))
    return Pin(ident, tuple(shards))


def agree(path: Path, make: Callable[[], Pin | None]) -> Pin | None:
    """The pin at ``path`` if there is one, else ``make()``'s, written there unless
    another process wrote its own first (then that one): a temporary file, synced, then
    ``os.link``\\ ed to ``path``, which fails if it exists.  None: ``make()`` gave none,
    the file holds no pin (it is left for a person to see), or it cannot be written."""
    try:
        return Pin.from_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (ValueError, KeyError, TypeError, OSError):
        return None
    pin = make()
    if pin is None:
        return None
    temp = path.parent / f".{path.name}.{uuid.uuid4().hex}.tmp"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(pin.to_json())
            fh.flush()
            os.fsync(fh.fileno())
        os.link(temp, path)
    except FileExistsError:
        return agree(path, lambda: None)
    except OSError:  # (a directory this process cannot write: no pin, reported by the caller)
        return None
    finally:
        with suppress(OSError):
            temp.unlink(missing_ok=True)
    return pin


@dataclass
class Changes:
    """What was written since a pin: every id named (``touched``), and the subscriptions of
    the pinned state removed since, compiled (``restore``)."""

    schema: Schema
    touched: set[Any] = field(default_factory=set)
    restore: list[tuple[Any, list[Clause]]] = field(default_factory=list)


class Rewinder:
    """Rewinds one task's answers to ``pin`` (module docstring); keeps the log entries
    and compiled expressions it read, for the task's next batches."""

    def __init__(self, pin: Pin) -> None:
        self.pin = pin
        self.entries: dict[tuple[int, int], changelog.Entry] = {}  # (shard, seq) -> entry
        self.compiled: dict[tuple[int, int], list[Clause]] = {}  # (shard, sid) -> clauses

    def changes(self, index: AnyIndex, root: tuple[int, int] | None) -> Changes | None:
        """What was written since the pin in the store ``index`` holds, read now; None if
        the pin cannot be reached from it."""
        try:
            return self._changes(index, root)
        except InvalidInput:  # a removed expression the pinned schema refuses: not expected
            return None

    def _changes(self, index: AnyIndex, root: tuple[int, int] | None) -> Changes | None:
        if store_ident(index, root) != self.pin.ident or len(index.indexes) != len(self.pin.shards):
            return None
        found: Changes | None = None
        for k, (shard, (start, version, _)) in enumerate(
            zip(index.indexes, self.pin.shards, strict=True)
        ):
            with shard.store.read() as txn:
                rec = catalog.root_record(txn)
                end = int(rec.get("log_next", 0))
                if int(rec.get("schema_version", 0)) != version or end < start:
                    return None
                entries = []
                for seq in range(start, end):
                    entry = self.entries.get((k, seq))
                    if entry is None:
                        entry = changelog.read(txn, seq)
                        if entry is None or entry.expressions is None:
                            return None
                        self.entries[(k, seq)] = entry
                    entries.append(entry)
                schema = shard.engine.schema_in(txn)
                if found is None:
                    found = Changes(schema)
                if entries:
                    compiler = Compiler(schema, int(rec["max_clauses"]))
                    self._gather(k, entries, compiler, found)
        return found

    def _gather(
        self, shard: int, entries: list[changelog.Entry], compiler: Compiler, out: Changes
    ) -> None:
        added = {sid for entry in entries for sid, _, _ in entry.added}
        for entry in entries:
            out.touched.update(ident for _, ident, _ in entry.added)
            for (sid, ident), expr in zip(entry.removed, entry.expressions or (), strict=True):
                out.touched.add(ident)
                if sid in added:  # (not in the pinned state: added since)
                    continue
                clauses = self.compiled.get((shard, sid))
                if clauses is None:
                    clauses = self.compiled[(shard, sid)] = compiler.compile(ident, expr)
                out.restore.append((ident, clauses))

    def rewind(
        self, changes: Changes, lines: Sequence[bytes], results: Iterable[Result]
    ) -> list[Result]:
        """``results`` (of the event ``lines``, in order, matched in a snapshot between the
        pin and the one ``changes`` was read in) as of the pin."""
        out = list(results)
        if not changes.touched:
            return out
        touched = changes.touched
        ints = np.array([i for i in touched if type(i) is int and I64[0] <= i <= I64[1]], np.int64)
        for k, result in enumerate(out):
            ids = result.get("matches")
            if ids is None:
                continue
            if isinstance(ids, np.ndarray) and ids.dtype == np.int64:  # (every id an int)
                kept = ids[~np.isin(ids, ints)]
            else:
                kept = id_array([i for i in list(ids) if i not in touched])
            extra = held(changes.schema, lines[k], changes.restore) if changes.restore else []
            out[k] = {**result, "matches": id_array([*kept.tolist(), *extra]) if extra else kept}
        return out


def held(schema: Schema, line: bytes, subs: list[tuple[Any, list[Clause]]]) -> list[Any]:
    """The ids of ``subs`` (compiled) whose clauses hold for the event ``line`` (valid in
    ``schema``: it was matched), by their atoms' truth functions."""
    try:
        values = event_values(schema, loads_line(line))
    except InvalidInput:  # (not for an event that was matched)
        return []
    return [
        ident
        for ident, clauses in subs
        if any(all(atom.holds(values) for atom in clause) for clause in clauses)
    ]
