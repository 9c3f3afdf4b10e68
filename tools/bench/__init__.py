"""The benchmarks: ``bexdb bench NAME`` runs ``tools/bench/NAME.py``.

Each benchmark module is one experiment (``add_arguments(parser)``, ``main(args)``, a
docstring saying what it measures and what it costs) and also runs as a script
(``python -m tools.bench.match``).  Beside them:

* :mod:`tools.bench.harness` -- what they share: progress, statistics, machine facts,
  agreement checks, tables and plots;
* :mod:`tools.bench.baselines` -- the in-memory indexes bexdb is measured against;
* :mod:`tools.bench.gen` -- BEGen, the synthetic workload generator, and
  :mod:`tools.bench.gen_cli` its command line (``bexdb gen``).

The plots need matplotlib, an optional extra: ``pip install 'bexdb[bench]'``.  Nothing
outside this package imports it, and ``bexdb`` imports a benchmark only when one is run.
"""
