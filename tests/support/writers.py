"""The batches of the writers the reliability tests run in child processes and kill.

Reproducible from a seed, so that the test and the child (which imports this module in its
``python -c`` program) build the same batches.
"""

from __future__ import annotations

import random
from typing import Any

from tests.support.workload import expression

BATCH = 300


def batches(seed: int, n: int) -> list[list[tuple[str, str]]]:
    """The writer's batches, reproducible here and in the child process."""
    rng = random.Random(seed)
    return [[(f"b{k}-{j}", expression(rng)) for j in range(BATCH)] for k in range(n)]


def small_batch(k: int) -> list[tuple[str, str]]:
    """Batch ``k`` of the writer beside the compactions (10 subscriptions)."""
    rng = random.Random(k)
    return [(f"w{k}-{j}", expression(rng)) for j in range(10)]


def writer_batches(seed: int, n: int) -> list[tuple[list[tuple[Any, str]], list[Any]]]:
    """The writer's batches (reproducible in both processes): 12 subscriptions, some
    replacing earlier ones, then the ids it unsubscribes after that batch."""
    rng = random.Random(seed)
    out: list[tuple[list[tuple[Any, str]], list[Any]]] = []
    for k in range(n):
        batch = [(f"w{k}-{j}", expression(rng)) for j in range(10)]
        batch += [
            (f"w{rng.randrange(k)}-{rng.randrange(10)}", expression(rng))
            for _ in range(2 * (k > 0))
        ]
        gone = [f"w{k - 1}-{j}" for j in range(3, 5)] if k else []
        out.append((list(dict(batch).items()), gone))
    return out
