"""The generators' check against the reference evaluator: a workload's vectorised match
matrix must agree, pair for pair, with :func:`betree.lang.expr.evaluate` on a sample.

Cost: one parse per sampled subscription and one evaluation per sampled pair
(subscriptions x events), kept small by the callers' sample bounds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import BexdbError


class GeneratorError(BexdbError):
    """The generator's own brute-force checks disagree (a bug, never a user error)."""


def agree(
    schema_doc: Mapping[str, Any],
    subs: Sequence[tuple[Any, str]],
    events: Sequence[Mapping[str, object]],
    mm: np.ndarray,
) -> dict[str, Any]:
    """``brute_rate`` and ``brute_sample`` of ``subs`` x ``events`` by the evaluator, after
    checking them against ``mm`` (events x subscriptions); :class:`GeneratorError` names
    the first pair that disagrees."""
    schema = Schema.from_json(schema_doc)
    nodes = [compile_expr(text, schema) for _, text in subs]
    evs = [schema.validate_event(e) for e in events]
    brute = np.array([[evaluate(node, e) for node in nodes] for e in evs], dtype=bool)
    wrong = np.argwhere(brute != mm[: len(evs), : len(nodes)])
    if len(wrong):
        i, j = wrong[0].tolist()
        raise GeneratorError(
            f"event {i} vs subscription {j} ({subs[j][1]!r}): the reference evaluator "
            f"says {bool(brute[i, j])}, the vectorised model {bool(mm[i, j])}"
        )
    return {"brute_rate": float(brute.mean()), "brute_sample": [len(nodes), len(evs)]}
