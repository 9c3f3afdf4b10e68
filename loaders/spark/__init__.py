"""``bexdb load`` on Spark: extract -> pure transforms -> load, in two Spark jobs.

The path for large subscription sets (the single-process engine is
:mod:`loaders.python_load`; both build the same stores: same rejects, same answers).
One module per stage, in the order a load runs them:

* :mod:`.driver`: :func:`~loaders.spark.driver.load`, the entry point: the jobs, the
  rejects, ``--max-rejects``, the manifest of a sharded store and the publication.
* :mod:`.session`: the SparkSession (the workers' Python, the local JIT, a quiet log).
* :mod:`.extract`: the inputs (JSON Lines, Parquet, CSV) as one DataFrame of raw records,
  each with its file and split, from which rejects get their line numbers.
* :mod:`.infer`: without a schema, the types from the records' typing evidence.
* :mod:`.compile` (executors): records -> compiled clauses in the run files of their shards.
* :mod:`.runfiles`: the run-file format (one Arrow stream per shard and task attempt).
* :mod:`.build` (executors, one task per shard): run files -> a checked, compacted store.
* :mod:`.results`: the small rows tasks return to the driver.
* :mod:`.jobs`: running a Spark job from the driver: progress, cancellation, signals.

:mod:`.match` is ``bexdb match --engine spark``: events read by :mod:`.extract`, matched
by tasks that open the store read-only, written as JSON Lines parts.  :mod:`.stream` is
``bexdb stream``: the same reading and matching in a Structured Streaming query, written
exactly once by Spark's file sink, whose log :mod:`.streamlog` reads.

Transforms take Arrow batches in and out (``mapInArrow``; never Rows), and compiled
records go from the compile tasks to the shard tasks through run files rather than a
Spark shuffle (:mod:`.runfiles` says why).  Measured costs: docs/bench/load/README.md.
"""
