"""Fixtures and options shared by several test files.

Bounded samples (docs/testing.md): a parametrized test marked ``sampled(k)`` runs ``k`` of
its cases, drawn from the run's sample seed (printed in the header; ``--sample-seed N``
draws the same cases again), and all of them under ``--full`` or ``BEXDB_FULL_TESTS=1``.
The heaviest files are handed out first so that ``--dist loadfile`` leaves no worker alone
with a long file at the end, and the files that use the run's local Spark session go to one
worker as one unit (:class:`OneSparkSession`): one session's JVM a run, not one a worker.
"""

from __future__ import annotations

import compileall
import os
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

from tests.support import jvm_cds

#: The files whose tests run Spark in the test process (the ``spark`` fixture, or a
#: ``--engine spark`` command run in-process, which takes the process's active session):
#: run by one xdist worker, one after the other, on its one local session (a session is a
#: JVM: ~5 CPU s to start and its own JIT warm-up). Every test asking for ``spark`` must be
#: in one of them (checked at collection).
SHARED_SPARK = [
    "tests/loaders/test_spark_stream_kill.py",
    "tests/betree/lang/test_lang_real_events.py",
    "tests/betree/test_meta.py",
    "tests/betree/test_edges_sizes.py",
    "tests/loaders/test_spark_load.py",
    "tests/loaders/test_spark_stream_pin.py",
    "tests/loaders/test_inputs.py",
    "tests/loaders/test_spark_match.py",
    "tests/loaders/test_spark_stream.py",
    "tests/storage/test_long_keys.py",
    "tests/loaders/test_dense_load.py",
    "tests/loaders/test_rich_load.py",
    "tests/tools/test_restore.py",
]

#: Files, longest first (CPU seconds of their worker's process tree, children and orphaned
#: JVMs included, measured at stop 29: docs/testing.md), files of one or two long tests
#: ahead of the rest: handed out first under xdist, so that no worker is left alone with a
#: long file at the end.
HEAVY = [
    *SHARED_SPARK,  # one unit (OneSparkSession), the longest
    "tests/loaders/test_spark_cluster.py",
    "tests/tools/test_bench_load.py",
    "tests/loaders/test_spark_submit.py",
    "tests/betree/test_direct_many.py",
    "tests/betree/test_reliability.py",
    "tests/betree/test_live.py",
    "tests/betree/test_flatbatch.py",
    "tests/storage/test_damage.py",
    "tests/pbtree/test_pbtree_stress.py",
    "tests/tools/test_serve.py",
    "tests/betree/test_direct_index.py",
    "tests/betree/test_parallel.py",
    "tests/tools/test_bench_gen.py",
    "tests/betree/test_flat_keys.py",
    "tests/betree/test_sharded_write.py",
    "tests/storage/test_damage_scans.py",
    "tests/betree/test_schema_evolution.py",
    "tests/betree/test_adjust.py",
    "tests/betree/test_write_grouped.py",
    "tests/tools/test_bench_stream.py",
    "tests/betree/test_index_differential.py",
]

#: The project's modules, compiled once by the process that starts the run (the controller):
#: with ``PYTHONDONTWRITEBYTECODE=1`` in the environment and no ``__pycache__`` yet (a fresh
#: clone), every Python the run starts (xdist workers, ``bexdb`` subprocesses, gunicorn
#: masters, Spark's Python workers, ``--jobs`` pools) compiled them from source again:
#: ``import tools.cli`` 0.45 -> 0.2 CPU s with them compiled. (Test modules are pytest's:
#: it rewrites their asserts.)
COMPILED = ["storage", "pbtree", "betree", "loaders", "tools", "tests/support"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bexdb")
    group.addoption("--full", action="store_true", help="run every case of the sampled tests")
    group.addoption(
        "--sample-seed", type=int, default=None, help="the seed that draws the sampled cases"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "sampled(k): run k of this test's cases unless --full (docs/testing.md)"
    )
    # Drawn once, by the controller, and handed to the xdist workers (pytest_configure_node)
    # so that every worker collects the same cases.
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        config.option.sample_seed = worker["bexdb_sample_seed"]
    else:
        root = Path(__file__).resolve().parents[1]
        for name in COMPILED:  # (skips what is up to date; written whatever the environment)
            compileall.compile_dir(root / name, quiet=1)
        if config.option.sample_seed is None:
            config.option.sample_seed = int(time.time()) % 100_000
    # xdist sorts files by their number of tests unless told not to: keep HEAVY's order.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if os.environ.get("BEXDB_FULL_TESTS") == "1":
        config.option.full = True
    jvm_cds.use()  # Spark's classes from one archive (tests/support/jvm_cds.py)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["bexdb_sample_seed"] = node.config.option.sample_seed


def pytest_report_header(config: pytest.Config) -> str:
    if config.option.full:
        return "bexdb: every sampled case (--full)"
    return f"bexdb: sampled cases drawn with --sample-seed {config.option.sample_seed}"


class OneSparkSession(LoadFileScheduling):
    """``--dist loadfile``, but the :data:`SHARED_SPARK` files are one unit of work."""

    def _split_scope(self, nodeid: str) -> str:
        path = nodeid.split("::")[0]
        return SHARED_SPARK[0] if path in SHARED_SPARK else super()._split_scope(nodeid)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return OneSparkSession(config, log) if config.getvalue("dist") == "loadfile" else None


def _rank(item: pytest.Item) -> int:
    path = item.nodeid.split("::")[0]
    return HEAVY.index(path) if path in HEAVY else len(HEAVY)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_rank)  # stable: the others keep their order
    strays = {
        item.nodeid.split("::")[0]
        for item in items
        if "spark" in getattr(item, "fixturenames", ())
        and item.nodeid.split("::")[0] not in SHARED_SPARK
    }
    if strays:
        raise pytest.UsageError(f"tests/conftest.py: add to SHARED_SPARK: {sorted(strays)}")
    if config.option.full:
        return
    groups: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        if item.get_closest_marker("sampled") is not None:
            groups[item.nodeid.split("[")[0]].append(item)
    dropped: list[pytest.Item] = []
    for name, cases in groups.items():
        k = cases[0].get_closest_marker("sampled").args[0]  # type: ignore[union-attr]
        rng = random.Random(f"{config.option.sample_seed}:{name}")
        keep = set(rng.sample(range(len(cases)), min(k, len(cases))))
        dropped += [c for i, c in enumerate(cases) if i not in keep]
    if dropped:
        gone = set(map(id, dropped))
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if id(i) not in gone]


@pytest.fixture(scope="session")
def full(request: pytest.FixtureRequest) -> bool:
    """Whether this run is ``--full``: for a sweep sampled by its size rather than by
    its cases (docs/testing.md)."""
    return bool(request.config.option.full)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The one local Spark session of the test run (two cores, as CI), started by the
    first test that asks for it."""
    from loaders.spark.session import spark_session

    session = spark_session(
        "local[2]", driver_memory="1g", log_dir=tmp_path_factory.mktemp("spark-log")
    )
    yield session
    session.stop()
