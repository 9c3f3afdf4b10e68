"""The checker tests' index and the violations its ``check()`` reports.

A tiny BE-Tree (``max_cap`` 2, ``min_size`` 1: many nodes and pages from 120 subscriptions)
for tests that damage it on purpose and assert the checker's message.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from betree.index import Index
from storage import CheckFailed

SCHEMA = {"attributes": {"x": {"type": "int", "min": 0, "max": 63}, "y": {"type": "int"}}}
#: ``y`` a float domain: every damage test runs on its atoms' float constants too
FLOAT_SCHEMA = {"attributes": {**SCHEMA["attributes"], "y": {"type": "float"}}}
#: float constants at the edges (signed zero, subnormals, the largest doubles), then halves
FLOATS = [
    "-0.0",
    "5e-324",
    "-5e-324",
    "2.2250738585072014e-308",
    "1.7976931348623157e308",
    "-1.7976931348623157e308",
]


@pytest.fixture(params=["int", "float"])
def idx(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Index]:
    """120 subscriptions on ``x`` and ``y`` in a tiny-capacity tree, checked; ``y`` an int
    attribute, or a float one (constants :data:`FLOATS`, then ``i + 0.5``)."""
    schema = SCHEMA if request.param == "int" else FLOAT_SCHEMA
    ys = [str(i) for i in range(120)]
    if request.param == "float":
        ys = FLOATS + [f"{i}.5" for i in range(len(FLOATS), 120)]
    with Index.open(tmp_path / "s", schema=schema, settings={"max_cap": 2, "min_size": 1}) as idx:
        idx.subscribe_many([(i, f"x = {i % 64} and y > {ys[i]}") for i in range(120)])
        idx.check()
        yield idx


def violations(idx: Index) -> list[str]:
    """The violations ``idx.check()`` raises; it must raise."""
    with pytest.raises(CheckFailed) as failed:
        idx.check()
    return failed.value.violations
