"""The in-memory indexes bexdb is measured against (``bexdb bench match``, ``compare``
and ``pbtree``).

Every baseline is built from :class:`~tools.bench.baselines.scan.Compiled` (the subscriptions'
clauses, the normal form bexdb indexes) and answers ``match(values) -> list of ids`` for an
event validated by ``Schema.validate_event``, over the whole language:

* :mod:`~tools.bench.baselines.scan` -- SCAN, every clause evaluated;
* :mod:`~tools.bench.baselines.counting` -- two-phase counting (the BE-Tree paper's baseline);
* :mod:`~tools.bench.baselines.opindex` -- OpIndex (docs/REFERENCES.md);
* :mod:`~tools.bench.baselines.pstree` -- PS-Tree, PSTBloom and PSTHash (docs/REFERENCES.md).

The Grouped Filter (:mod:`~tools.bench.baselines.grouped`), the PB+tree's comparator in
``bexdb bench pbtree``, works on one attribute's predicates instead.

Test atoms (lists, ``ends_with``, ``contains``, ``is null``, booleans) are evaluated
directly by counting, OpIndex and the PS-Tree variants (see :mod:`~tools.bench.baselines.flat`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Baseline(Protocol):
    """What every baseline offers once built."""

    name: str

    def match(self, values: Mapping[str, object]) -> list[Any]: ...
