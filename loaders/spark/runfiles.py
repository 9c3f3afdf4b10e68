"""Run files: the compiled records on their way from the compile job to the build job.

The compile tasks (:mod:`loaders.spark.compile`) write them straight into the staging
directory and the shard tasks (:mod:`loaders.spark.build`) read them, rather than the
records going through a Spark shuffle, which made the JVM convert every compiled row from
Arrow and back, sort, compress and spill it (its cost: docs/bench/load/README.md).  On a
cluster the target must therefore be on a file system the executors share.

Layout, under ``STAGING/runs/`` (removed by the driver once the build job is done)::

    shard-XXXX/<attempt>.arrow   one Arrow IPC stream per (shard, compile task attempt):
                                 that attempt's records of that shard, rows RUN
    atoms/<attempt>.arrow        that attempt's atoms, rows ATOMS; written after its run
                                 files are complete, only if it wrote one

``<attempt>`` is Spark's task attempt id, so a retried task never writes into a failed
attempt's files, and the build job reads only the run files the driver names to it: those
that attempts which succeeded reported (:data:`loaders.spark.results.RUNS` rows).

:data:`RUN` rows are records in the order the task read them: the record's place (input
argument, file id, split start, row in the split: its line number, later), its id key
(:func:`storage.codec.encode_id`) by which :func:`betree.stores.sharded.shard_of` routed it and
duplicates are found, its id, expression and metadata text, and its extract or compile
error (data, not an exception), or its clauses in transport form: atom ids local to the
task (0 is the true atom, the only one of a clause without atoms; id i + 1 is row i of
the task's atoms file, whose ``key`` is the atom's store key
``codec.encode_value(atom.as_tuple())``).  The two list columns (:data:`LISTS`) hold a
record's clauses concatenated: ``lens`` one entry per clause (its atoms), ``atoms`` the
atoms of every clause in turn.  A record with an error
has empty lists.  The clauses' places are not sent: the build computes them from the
atoms (:meth:`betree.disk.atomspans.AtomSpans.places`).

Cost on disk: less than 1.4 times the JSON input (measured with places in them), while
the load runs.  Reading them
(:func:`read_runs`) makes the atom ids global to the shard with one Arrow dictionary
encoding of every task's atom keys, then numpy (no work per record).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from betree.stores import sharded as sharding

#: A run file's rows: one shard's compiled records from one compile task.
RUN = pa.schema(
    [
        ("arg", pa.int32()),  # which input argument
        ("fid", pa.int64()),  # the file (hash of its path)
        ("block", pa.int64()),  # start of the file split
        ("pos", pa.int64()),  # row within the split
        ("key", pa.binary()),  # codec.encode_id(id); null if the record is unusable
        ("id", pa.string()),  # the record's id as JSON (for rejects and the store)
        ("expr", pa.string()),
        ("meta", pa.string()),  # the metadata's JSON text (betree.disk.metadata), null if none
        ("error", pa.string()),  # extract error: malformed JSON, bad id, missing column
        ("cerror", pa.string()),  # compile error: syntax, types
        # the clauses (empty lists for a record with an error):
        ("atoms", pa.list_(pa.int32())),  # atom ids of every clause, concatenated (see ATOMS)
        ("lens", pa.list_(pa.int32())),  # per clause: its atoms
    ]
)
LISTS = ("atoms", "lens")
_RUN_SCALARS = pa.schema(list(RUN)[: -len(LISTS)])  # the columns before them
#: A compile task's atoms: the store key of atom id i + 1 is row i (0 is the true atom).
ATOMS = pa.schema([("key", pa.binary())])


class RunPart:
    """One shard's records of one input batch, as :data:`RUN` columns: the scalar ones
    as row tuples, the list ones flat with their offsets (no list object per record)."""

    __slots__ = ("atom_end", "atoms", "clause_end", "lens", "rows")

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []
        self.atoms, self.lens = array("i"), array("i")
        self.atom_end, self.clause_end = array("i", [0]), array("i", [0])

    def close_record(self) -> None:
        self.atom_end.append(len(self.atoms))
        self.clause_end.append(len(self.lens))

    def batch(self) -> pa.RecordBatch:
        scalars = _batch(self.rows, _RUN_SCALARS)
        lists = []
        for values, ends, field in (
            (self.atoms, self.atom_end, "atoms"),
            (self.lens, self.clause_end, "lens"),
        ):
            typ = RUN.field(field).type
            lists.append(
                pa.ListArray.from_arrays(
                    pa.array(np.frombuffer(ends, dtype=np.int32)),
                    pa.array(np.frombuffer(values, dtype=typ.value_type.to_pandas_dtype())),
                    type=typ,
                )
            )
        return pa.RecordBatch.from_arrays([*scalars.columns, *lists], schema=RUN)


def atoms_file(run_file: str) -> str:
    """The atoms file of the task that wrote ``run_file``: ``runs/atoms/<attempt>.arrow``."""
    path = Path(run_file)
    return str(path.parent.parent / "atoms" / path.name)


class RunWriter:
    """One compile task attempt's run files: a stream per shard it has records for, opened
    at the first of them, and at the end (:meth:`write_atoms`) its atoms file."""

    def __init__(self, runs: str, shards: int, attempt: int) -> None:
        self.runs, self.attempt = runs, attempt
        self.writers: dict[int, tuple[str, pa.RecordBatchStreamWriter]] = {}
        self.written = [0] * shards

    def write(self, parts: list[RunPart]) -> None:
        """Append each shard's part of one input batch to that shard's run file."""
        for shard, part in enumerate(parts):
            if not part.rows:
                continue
            entry = self.writers.get(shard)
            if entry is None:
                name = str(Path(self.runs) / sharding.shard_name(shard) / f"{self.attempt}.arrow")
                entry = self.writers[shard] = (name, pa.ipc.new_stream(name, RUN))
            entry[1].write_batch(part.batch())
            self.written[shard] += len(part.rows)

    def close(self) -> None:
        """Close the run files (also after a failure: the driver never names them then)."""
        for _, writer in self.writers.values():
            writer.close()

    def write_atoms(self, keys: list[bytes]) -> None:
        """Write the atoms file (the store key of atom id i + 1 is ``keys[i]``) once the run
        files are complete; none if the task wrote no run file."""
        if self.writers:
            with pa.ipc.new_stream(atoms_file(next(iter(self.writers.values()))[0]), ATOMS) as out:
                out.write_batch(pa.record_batch([pa.array(keys, pa.binary())], schema=ATOMS))

    def files(self) -> list[tuple[int, str, int]]:
        """``(shard, run file, rows)`` of each run file written, by shard."""
        return [
            (shard, name, self.written[shard]) for shard, (name, _) in sorted(self.writers.items())
        ]


def read_runs(paths: Iterable[str]) -> tuple[pa.Table, pa.Array]:
    """The rows of run files (:data:`RUN`) in the order given, their atom ids made global:
    the store key of atom id i + 1 is the i-th of the keys returned (0: the true atom), an
    Arrow array: a shard reads every task's atoms, and takes Python bytes of its own only
    (a dense workload's 1M subscriptions have ~20M atoms, ~2 GB as a list of bytes).

    Cost: one Arrow ``dictionary_encode`` of every task's atom keys (global ids in order
    of first use, as a dict would number them; ~0.1 µs a key, where a dict lookup per key
    took ~0.35 µs, and each shard reads every task's atoms), then numpy per run file.
    """
    paths = list(paths)
    local_keys = []
    for path in paths:
        with pa.ipc.open_stream(atoms_file(path)) as reader:
            local_keys.append(reader.read_all()["key"].cast(pa.large_binary()).combine_chunks())
    encoded = pc.dictionary_encode(
        pa.concat_arrays(local_keys or [pa.array([], pa.large_binary())])
    )
    glob = np.asarray(encoded.indices).astype(np.int32) + 1
    tables, start = [], 0
    for path, keys in zip(paths, local_keys, strict=True):
        glob_ids = np.zeros(len(keys) + 1, dtype=np.int32)
        glob_ids[1:] = glob[start : start + len(keys)]
        start += len(keys)
        with pa.ipc.open_stream(path) as reader:
            table = reader.read_all().combine_chunks()
        atoms = table["atoms"].chunk(0) if table.num_rows else pa.array([], RUN.field("atoms").type)
        local = np.asarray(atoms.values)
        renamed = pa.ListArray.from_arrays(atoms.offsets, pa.array(glob_ids[local]))
        tables.append(table.set_column(table.schema.get_field_index("atoms"), "atoms", renamed))
    table = pa.concat_tables(tables) if tables else RUN.empty_table()
    return table, encoded.dictionary


def _batch(rows: list[tuple[Any, ...]], schema: pa.Schema) -> pa.RecordBatch:
    """Rows (tuples in ``schema``'s column order) as one Arrow batch."""
    columns = list(zip(*rows, strict=True)) or [()] * len(schema)
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
