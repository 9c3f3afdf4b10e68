"""What a PB+tree takes: its operators (:mod:`pbtree.operators`), its constants (one domain
per tree) and its ids.

Checked at the tree's edge (:class:`pbtree.tree.PBTree`), so that nothing malformed ever
reaches a page.  Cost: a few type tests per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from pbtree.operators import OPS, PLACE
from storage.errors import InvalidInput

_INT64 = (-(1 << 63), 1 << 63)
_INT = frozenset((int,))


def int64_array(values: Sequence[Any]) -> np.ndarray | None:
    """``values`` as an int64 array when every one is an int (not a bool) of int64, else
    None: such constants compare in numpy exactly as in Python.  The types are tested
    first, so that strings (a megabyte one among them) are never copied into a numpy
    array as wide as the longest."""
    if not _INT.issuperset(map(type, values)):
        return None
    array = np.array(values) if len(values) else np.zeros(0, dtype=np.int64)
    return array if array.dtype == np.int64 else None  # (past int64: object or float)


def key_domain(key: Any) -> str:
    """``"num"`` or ``"str"`` for a legal key; :class:`InvalidInput` otherwise."""
    if isinstance(key, bool):
        raise InvalidInput("a predicate constant cannot be a bool")
    if isinstance(key, int):
        if not _INT64[0] <= key < _INT64[1]:
            raise InvalidInput(f"integer constant {key} is outside the signed 64-bit range")
        return "num"
    if isinstance(key, float):
        if math.isnan(key):
            raise InvalidInput("NaN cannot be a predicate constant")
        return "num"
    if isinstance(key, str):
        try:
            key.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput(f"string constant is not valid Unicode: {exc.reason}") from exc
        return "str"
    raise InvalidInput(f"a predicate constant must be a number or a string, not {type(key)}")


def check_op(op: str) -> tuple[int | None, int]:
    """Where an operator's predicates live: ``(list kind or None, part)``."""
    try:
        return PLACE[op]
    except (KeyError, TypeError):
        raise InvalidInput(f"unknown operator {op!r}; expected one of {' '.join(OPS)}") from None


def check_id(ident: int) -> None:
    """Refuse a predicate id outside ``[0, 2**32)`` (the lists store u32 ids)."""
    if isinstance(ident, bool) or not isinstance(ident, int) or not 0 <= ident < 1 << 32:
        raise InvalidInput(f"predicate id {ident!r} must be an integer in [0, 2**32)")
