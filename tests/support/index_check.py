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


@pytest.fixture
def idx(tmp_path: Path) -> Iterator[Index]:
    """120 subscriptions on ``x`` and ``y`` in a tiny-capacity tree, checked."""
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 2, "min_size": 1}) as idx:
        idx.subscribe_many([(i, f"x = {i % 64} and y > {i}") for i in range(120)])
        idx.check()
        yield idx


def violations(idx: Index) -> list[str]:
    """The violations ``idx.check()`` raises; it must raise."""
    with pytest.raises(CheckFailed) as failed:
        idx.check()
    return failed.value.violations
