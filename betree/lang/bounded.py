"""Bounded memos: a dict that, when full, forgets the first-inserted half of its entries.

Why: the compile caches (interned atoms, remembered conjuncts, grid spans, store keys)
keep what recent input used; clearing a full cache instead made a workload of few repeated
predicates rebuild most of it every few tens of thousands of records.
"""

from __future__ import annotations

import itertools
from typing import Any


def forget_older_half(memo: dict[Any, Any]) -> None:
    """Drop the first-inserted half of ``memo`` (dicts keep insertion order).  Amortised
    O(1) per insertion."""
    for key in list(itertools.islice(memo, len(memo) // 2)):
        del memo[key]
