"""What a PB+tree takes: its operators (:mod:`pbtree.operators`), its constants (one domain
per tree) and its ids.

Checked at the tree's edge (:class:`pbtree.tree.PBTree`), so that nothing malformed ever
reaches a page.  Cost: a few type tests per call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import compress
from operator import not_
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


@dataclass(frozen=True)
class Numbers:
    """Number constants (ints of int64 and floats, as a float domain's tree and atoms hold
    them) as two columns: whether each is a float, and its value (an int) or its float64
    bits (a float).  Equal columns mean the same constants, types and bits alike (``-0.0``
    is not ``0.0`` here, nor ``1.0`` ``1``: a caller that finds columns unequal decides with
    Python's equality).  Compared in numpy at ~0.01 µs a constant, where tuples of Python
    floats took ~1 µs."""

    is_float: np.ndarray
    bits: np.ndarray

    def __len__(self) -> int:
        return len(self.bits)

    def __getitem__(self, rows: Any) -> Numbers:
        return Numbers(self.is_float[rows], self.bits[rows])

    @staticmethod
    def of_ints(ints: np.ndarray) -> Numbers:
        return Numbers(np.zeros(len(ints), dtype=bool), ints.astype(np.int64, copy=False))

    @staticmethod
    def of_columns(is_float: np.ndarray, ints: np.ndarray, floats: np.ndarray) -> Numbers:
        """From an int column and a float column, ``is_float`` choosing between them."""
        bits = np.where(is_float, floats.astype(np.float64).view(np.int64), ints)
        return Numbers(is_float.astype(bool), bits.astype(np.int64, copy=False))

    @staticmethod
    def joined(parts: Sequence[Numbers]) -> Numbers:
        none = np.zeros(0, dtype=np.int64)
        return Numbers(
            np.concatenate([none.astype(bool), *(p.is_float for p in parts)]),
            np.concatenate([none, *(p.bits for p in parts)]),
        )

    def tolist(self) -> list[Any]:
        """The constants as Python ints and floats."""
        floats = self.bits.view(np.float64).tolist()
        ints = self.bits.tolist()
        return [f if x else i for f, x, i in zip(floats, self.is_float.tolist(), ints, strict=True)]


def numbers(values: Sequence[Any]) -> Numbers | None:
    """``values`` as :class:`Numbers` when every one is an int of int64 (not a bool) or a
    float, else None."""
    types = set(map(type, values))
    if not types <= _NUMBER:
        return None
    if float not in types:
        ints = int64_array(values)
        return Numbers.of_ints(ints) if ints is not None else None
    flags = list(map(_FLOAT.__contains__, map(type, values)))
    is_float = np.array(flags, dtype=bool)
    floats = np.fromiter(compress(values, flags), dtype=np.float64, count=int(is_float.sum()))
    ints = int64_array(list(compress(values, map(not_, flags))))
    if ints is None:
        return None
    bits = np.zeros(len(values), dtype=np.int64)
    bits[is_float] = floats.view(np.int64)
    bits[~is_float] = ints
    return Numbers(is_float, bits)


_NUMBER = frozenset((int, float))
_FLOAT = frozenset((float,))
