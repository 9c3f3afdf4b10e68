"""The compile transform, in the executors: extracted rows -> compiled records in run files.

:func:`compile_partition` parses each record and compiles it with the compiler of online
``subscribe`` (:class:`betree.compiler.Compiler`, which the Python worker keeps across its
tasks: :func:`compiler`), and writes the record's extract or compile error, or
its clauses in transport form (per clause the canonical atom keys,
``codec.encode_value(atom.as_tuple())``, the key the store interns atoms by) to the run
file of the record's shard (:mod:`loaders.spark.runfiles`).  Records are routed by
:func:`~betree.stores.sharded.shard_of`, ``crc32`` of the id key of
:func:`storage.codec.encode_id`, so all occurrences of an id land in one shard, where
duplicate ids are found (every occurrence rejected, as
:func:`loaders.records.mark_duplicates`).  The task returns only the names of the files it
wrote and its split counts (:mod:`loaders.spark.results`).

The compile transform is most of a Spark load's CPU (docs/bench/load/README.md): per record
it parses the record, compiles it (conjuncts the worker's compiler has seen are remembered)
and packs its clauses into Arrow columns.  The clauses' places (the
BE-Tree's per-attribute grid spans) are the build's work, from each shard's atoms
(:func:`betree.disk.bulk.build_from_parts`): computed here they cost ~8 µs a record of few
repeated predicates (``bexdb gen --profile wide``), a fifth of the transform.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from betree.compiler import Compiler
from betree.disk.writer import gc_paused
from betree.lang.atoms import Atom, forget_interned
from betree.lang.bounded import forget_older_half
from betree.stores.sharded import shard_of
from loaders.records import Record
from loaders.spark.extract import SplitRows, batch_rows, file_id, parse_record
from loaders.spark.results import BLOCK, RESULT, RUNS, append_row
from loaders.spark.runfiles import RunPart, RunWriter
from storage import codec
from storage.errors import InvalidInput

#: Bound on the atoms whose store key a compile worker remembers (the older half is
#: forgotten when full): a workload of few repeated predicates has ~200K distinct atoms
#: per 100K subscriptions.  ~150 bytes each.
_KEYS_MAX = 1 << 18


def compile_partition(
    batches: Iterable[pa.RecordBatch],
    schema_doc: dict[str, Any],
    settings: dict[str, int] | None = None,
    counter: Any = None,
    *,
    runs: str,
    shards: int = 1,
) -> Iterator[pa.RecordBatch]:
    """Extracted rows -> compiled records in run files; emits the files and the splits.

    Each record goes to the run file of its shard (:func:`shard_of`) in ``runs``: one
    Arrow stream per (shard, task attempt), ``runs/shard-XXXX/<attempt>.arrow``, rows
    :data:`RUN`: the record, its error (malformed JSON, bad id, missing column; syntax and
    type errors of its expression: data, not exceptions), or its clauses as atom ids
    local to the task.  The task's atoms go
    to ``runs/atoms/<attempt>.arrow`` (:data:`ATOMS`: each one's store key, made once per
    atom in the worker).  What this yields (:data:`RESULT`) is small: one ``RUNS`` row
    per record file (its shard in ``pos``, its rows in ``block``) and one ``BLOCK`` row per
    file split read.  ``counter`` (an accumulator) counts records.

    The steps: :meth:`_Task.compile_batch` (per record: :func:`parse_record`,
    :func:`_compile_record`, :meth:`_Task.pack`), :meth:`RunWriter.write` per input batch,
    then the atoms file and :meth:`_Task.result`.  Cost: CPU per record (the compile is
    most of it); memory: one input batch's records at a time, and the task's atoms.

    The collector is paused while the task compiles, and what the worker's caches gained
    meanwhile (~1M objects a task on a workload of few repeated predicates) is then frozen
    (:func:`gc.freeze`): else the collector's first passes after the task would walk all
    of it, about a second a task.  Nothing here makes reference cycles, and frozen objects
    are still freed by their reference counts when the caches forget them.
    """
    from pyspark import TaskContext

    context = TaskContext.get()
    attempt = context.taskAttemptId() if context is not None else os.getpid()
    task = _Task(schema_doc, runs, shards, attempt)
    try:
        with gc_paused():
            compile = compiler(schema_doc, settings).compile
            for batch in batches:
                task.out.write(task.compile_batch(batch, compile))
            gc.freeze()  # (see the docstring)
    finally:
        task.out.close()
        if counter is not None:
            counter.add(task.seen)
    task.out.write_atoms(task.local_keys)
    yield task.result()


class _Task:
    """One compile task: the rows it has read per split, its atoms and its run files."""

    def __init__(self, schema_doc: dict[str, Any], runs: str, shards: int, attempt: int) -> None:
        self.shards = shards
        self.splits = SplitRows()
        self.fids: dict[str, int] = {}
        self.local: dict[Atom, int] = {}  # atom -> its id in this task
        self.local_keys: list[bytes] = []  # the store key of atom id i + 1 is local_keys[i]
        self.out = RunWriter(runs, shards, attempt)
        self.seen = 0

    def compile_batch(self, batch: pa.RecordBatch, compile: Callable[..., Any]) -> list[RunPart]:
        """One batch of extracted rows -> its records, compiled, in one part per shard."""
        parts = [RunPart() for _ in range(self.shards)]
        for arg, path, block, kind, text in batch_rows(
            batch, "arg", "path", "block", "kind", "text"
        ):
            pos = self.splits.position(arg, path, block)
            record = parse_record(kind, text)
            if record is None:
                continue
            self.seen += 1
            fid = self.fids.get(path)
            if fid is None:
                fid = self.fids[path] = file_id(path)
            key, expr, cerror, clauses = _compile_record(record, compile)
            ident = record.id
            shown = str(ident) if type(ident) is int else json.dumps(ident)
            part = parts[shard_of(key, self.shards)]
            meta = record.meta if expr is not None else None
            part.rows.append((arg, fid, block, pos, key, shown, expr, meta, record.error, cerror))
            self.pack(part, clauses)
            part.close_record()
        return parts

    def pack(self, part: RunPart, clauses: list[Any]) -> None:
        """A record's clauses into ``part``'s list columns: atom ids local to the task (0,
        the true atom, for a clause without atoms)."""
        local = self.local
        for clause in clauses:
            ids: list[Any] = list(map(local.get, clause))
            if None in ids:  # atoms new to the task
                ids = [
                    self.new_atom(a) if i is None else i for a, i in zip(clause, ids, strict=True)
                ]
            part.atoms.extend(ids or (0,))
            part.lens.append(len(ids) or 1)

    def new_atom(self, atom: Atom) -> int:
        """The next atom id of the task for ``atom``, its store key made once per atom in the
        worker, which remembers recent ones (atoms repeat across records and tasks)."""
        keys = _KEYS
        k = keys.get(atom)
        if k is None:
            if len(keys) >= _KEYS_MAX:
                forget_older_half(keys)
            k = keys[atom] = codec.encode_value(atom.as_tuple())
        self.local_keys.append(k)
        aid = self.local[atom] = len(self.local_keys)
        return aid

    def result(self) -> pa.RecordBatch:
        """What the task returns (:data:`RESULT`): its splits' row counts, its run files."""
        done: dict[str, list[Any]] = {name: [] for name in RESULT.names}
        for (arg, path, block), count in self.splits.counts.items():
            append_row(
                done, kind=BLOCK, arg=arg, fid=file_id(path), block=block, pos=count, path=path
            )
        for shard, name, rows in self.out.files():
            append_row(done, kind=RUNS, pos=shard, block=rows, path=name)
        return pa.RecordBatch.from_pydict(done, schema=RESULT)


def _compile_record(
    record: Record, compile: Callable[..., Any]
) -> tuple[bytes | None, str | None, str | None, list[Any]]:
    """A record's id key, expression, compile error and clauses: no key for a record with
    an extract error, no clauses for one that does not compile."""
    if record.error is not None:
        return None, None, None, []
    ident = record.id
    key = codec.encode_id(ident)
    expr = record.expr
    try:
        clauses = compile(ident, expr)
    except InvalidInput as exc:
        # as python_load: the reason without "subscription ID: "
        return key, expr, exc.message.split(": ", 1)[-1], []
    return key, expr, None, clauses


#: Per Python worker, kept across its tasks (Spark reuses workers): the compiler of the last
#: (schema, settings), whose remembered conjuncts then start warm, and the store keys of
#: recent atoms.
_COMPILER: dict[str, Compiler] = {}
_KEYS: dict[Atom, bytes] = {}


def drop_caches() -> None:
    """Let go of this worker's compile caches (the compiler and its conjunct memo, the atom
    keys, the atom intern table): the build stage runs in the same Python workers, and on
    a dense workload those caches are full (~1 KB an atom) when it starts."""
    _COMPILER.clear()
    _KEYS.clear()
    forget_interned()


def compiler(schema_doc: dict[str, Any], settings: dict[str, int] | None) -> Compiler:
    """The worker's compiler of ``schema_doc`` under ``settings`` (no store: it is pure)."""
    key = json.dumps([schema_doc, settings], sort_keys=True)
    found = _COMPILER.get(key)
    if found is None:
        _COMPILER.clear()
        _KEYS.clear()
        found = _COMPILER[key] = Compiler.of(schema_doc, settings)
    return found
