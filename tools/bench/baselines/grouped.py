"""The Grouped Filter: the in-memory baseline of ``bexdb bench pbtree``.

The comparator the PB+tree's paper measures against (its section 5, reference [16]): one
attribute's predicates ``(op, constant, id)`` searched for an event value in memory, the
question a PB+tree search (:meth:`pbtree.PBTree.search_array`) answers from disk.  Unlike
the baselines beside it, it works on predicates, not on compiled subscriptions.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

import numpy as np
from sortedcontainers import SortedList

_EMPTY = np.zeros(0, dtype=np.uint32)


class GroupedFilter:
    """The in-memory Grouped Filter (seed paper section 5, its ref. [16]).

    Built dynamically (``SortedList`` per ordered operator, dicts for ``=`` / ``!=``, each
    insert O(log n)), then :meth:`freeze` turns every structure into parallel arrays for
    searching: ``>``/``>=`` hold for the prefix of constants below / up to the value,
    ``<``/``<=`` for the suffix above / from it, ``!=`` for all but the value's own run.

    Cost per search: four ``bisect`` calls and two dict lookups on Python lists, then at
    most seven numpy slices concatenated (a memcpy of the L + |=| result ids).
    """

    ORDERED = (">", ">=", "<", "<=")

    def __init__(self) -> None:
        self._sorted: dict[str, SortedList] = {op: SortedList() for op in (*self.ORDERED, "!=")}
        self._eq_lists: dict[float, list[int]] = {}
        self.keys: dict[str, list[int]] = {}
        self.ids: dict[str, np.ndarray] = {}
        self.eq: dict[float, np.ndarray] = {}  # int constants; float lookups compare by value
        self.ne_span: dict[float, tuple[int, int]] = {}

    def insert(self, op: str, key: int, ident: int) -> None:
        if op == "=":
            self._eq_lists.setdefault(key, []).append(ident)
        else:
            self._sorted[op].add((key, ident))

    def freeze(self) -> None:
        """Parallel arrays per structure; the dynamic structures are dropped."""
        for op, items in self._sorted.items():
            self.keys[op] = [key for key, _ in items]
            self.ids[op] = np.fromiter((i for _, i in items), dtype=np.uint32, count=len(items))
        ne_keys = self.keys["!="]
        for key in set(ne_keys):
            self.ne_span[key] = (bisect_left(ne_keys, key), bisect_right(ne_keys, key))
        self.eq = {key: np.array(ids, dtype=np.uint32) for key, ids in self._eq_lists.items()}
        self._sorted.clear()
        self._eq_lists.clear()

    def chunks(self, value: int | float) -> list[np.ndarray]:
        """The satisfied id runs: ``[=, >, >=, <, <=, != ...]`` (empty runs left out)."""
        keys, ids = self.keys, self.ids
        out: list[np.ndarray] = []
        eq = self.eq.get(value)
        if eq is not None:
            out.append(eq)
        k = bisect_left(keys[">"], value)  # value > c  <=>  c < value
        if k:
            out.append(ids[">"][:k])
        k = bisect_right(keys[">="], value)  # c <= value
        if k:
            out.append(ids[">="][:k])
        k = bisect_right(keys["<"], value)  # c > value
        if k < len(keys["<"]):
            out.append(ids["<"][k:])
        k = bisect_left(keys["<="], value)  # c >= value
        if k < len(keys["<="]):
            out.append(ids["<="][k:])
        ne = ids["!="]
        span = self.ne_span.get(value)
        if span is None:
            if len(ne):
                out.append(ne)
        else:
            out.append(ne[: span[0]])
            out.append(ne[span[1] :])
        return out

    def search(self, value: int | float) -> np.ndarray:
        """Ids of every predicate that holds for ``value`` as one uint32 array."""
        out = self.chunks(value)
        if not out:
            return _EMPTY
        return out[0] if len(out) == 1 else np.concatenate(out)

    def satisfied_list_items(self, value: int | float) -> int:
        """L: satisfied ``< <= > >= !=`` predicates (what the PB+tree finds in its lists)."""
        eq = self.eq.get(value)
        return sum(len(c) for c in self.chunks(value)) - (0 if eq is None else len(eq))
