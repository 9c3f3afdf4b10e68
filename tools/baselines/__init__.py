"""The in-memory indexes bexdb is measured against (``bexdb bench match`` and ``compare``).

Every baseline is built from :class:`~tools.baselines.scan.Compiled` (the subscriptions'
clauses, the normal form bexdb indexes) and answers ``match(values) -> list of ids`` for an
event validated by ``Schema.validate_event``, over the whole language:

* :mod:`~tools.baselines.scan` -- SCAN, every clause evaluated;
* :mod:`~tools.baselines.counting` -- two-phase counting (the BE-Tree paper's baseline);
* :mod:`~tools.baselines.opindex` -- OpIndex (seed 002);
* :mod:`~tools.baselines.pstree` -- PS-Tree, PSTBloom and PSTHash (seed 003).

Test atoms (lists, ``ends_with``, ``contains``, ``is null``, booleans) are evaluated
directly by counting, OpIndex and the PS-Tree variants (see :mod:`~tools.baselines.flat`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Baseline(Protocol):
    """What every baseline offers once built."""

    name: str

    def match(self, values: Mapping[str, object]) -> list[Any]: ...
