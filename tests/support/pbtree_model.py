"""A trivially correct model of a PB+tree: a set of (operator, constant, id) triples; and the
random keys and probes the PB+tree tests draw (ints, floats with -0.0 and infinity, Unicode)."""

from __future__ import annotations

import operator
import random
from collections.abc import Callable
from typing import Any

CMP = {
    "<": operator.lt,
    "<=": operator.le,
    "=": operator.eq,
    "!=": operator.ne,
    ">=": operator.ge,
    ">": operator.gt,
}


def brute_search(model: set[tuple[str, Any, int]], value: Any) -> set[int]:
    """Ids of the triples whose predicate `value op constant` holds."""
    return {ident for op, const, ident in model if CMP[op](value, const)}


OPS = list(CMP)


def int_key(rng: random.Random) -> Any:
    return rng.randint(-30, 30)


def float_key(rng: random.Random) -> Any:
    # ints and floats mix on numeric trees and compare exactly by value
    return rng.choice([rng.randint(-10, 10), rng.randint(-20, 20) / 2, -0.0, float("inf")])


def str_key(rng: random.Random) -> Any:
    return "".join(rng.choice("ab\u00e9\U0001f600") for _ in range(rng.randint(0, 3)))


def probe(rng: random.Random, make: Callable[[random.Random], Any]) -> Any:
    value = make(rng)
    if isinstance(value, int | float) and rng.random() < 0.3:
        value += 0.25  # between keys
    return value
