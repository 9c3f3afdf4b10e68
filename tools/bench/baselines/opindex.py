"""OpIndex (Zhang, Chan & Tan, VLDB 2014, sec. 4), in memory.

Level 1: every clause gets one *pivot attribute*, the one of its attributes that events
define least often (frequencies counted on a sample of events given at build time; ties go
to the attribute fewer clauses use, then the name), and lives only in that pivot's list:
an event reaches only the lists of the attributes it defines (Lemma 1).  Level 2: each
pivot's order atoms are split by operator into predicate lists sorted by (attribute,
constant); each list is cut into ``B`` = 32 *segments* by attribute (``attr_id % B``, the
segment directory: O(1) to find an attribute's run) and each segment carries a 64-bit
*signature* (bit ``h(attr, constant)`` for ``=``, ``h(attr)`` for the others) that skips a
probe before the binary search.  Per event: for each pivot it defines, for each of its
(attribute, value) pairs and each operator list, signature test, binary search, and the
matching run of entries decrements the clause counters; a clause whose counter reaches 0
matches (two-phase: counters, then residual atoms).

Scan directions are the correct ones, not those of the paper's sec. 4.2 sentence (see the
digest): ``a <= c`` holds for value x iff c >= x, so the ``<=`` list is scanned over
constants in [x, +inf) and the ``>=`` list over (-inf, x].  ``in`` lists are one counter
unit stored as several ``=`` entries (sec. 4.2's rewrite); other multi-entry atoms (``not
between``) are one unit too, their units deduplicated per event.  ``!=``, ``<`` and ``>``
get lists of their own.  Residual atoms (lists, ``ends_with``, ``contains``, ``is null``,
booleans) are evaluated directly on clauses whose counters reach 0, and a clause made only
of them counts 0 and is a candidate whenever its pivot is defined.

Python notes: the sorted segments are lists of ``(attr_id, constant)`` tuples searched with
``bisect`` (C, exact across int/float and strings); the entries' unit ids are numpy arrays
and the counter arrays are one ``bincount`` per visited pivot (O(pivot's clauses), the
paper's "reset only the arrays of the pivots present").  Cost per event:
O(pivots x pairs x operators) signature tests and bisects (m^2 of the paper's Lemma 8) plus
the matched entries; build O(atoms log atoms).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from pbtree.operators import OPS
from tools.bench.baselines.flat import Flat
from tools.bench.baselines.scan import Compiled

Event = Mapping[str, object]
B = 32  # segments per predicate list (the paper's b)
W = 64  # signature bits per segment (a machine word)


class _Segment:
    """One attribute-range of a predicate list: sorted keys, their unit ids, a signature."""

    __slots__ = ("keys", "sig", "units")

    def __init__(self, op: str, pairs: list[tuple[tuple[int, Any], int]]) -> None:
        pairs.sort(key=lambda p: p[0])
        self.keys = [k for k, _ in pairs]
        self.units = np.array([u for _, u in pairs], dtype=np.int64)
        sig = 0
        for a, c in self.keys:
            sig |= 1 << (hash((a, c)) % W if op == "=" else (a // B) % W)
        self.sig = sig


class _Pivot:
    """The clauses whose pivot is one attribute: predicate lists and a counter array."""

    __slots__ = ("clauses", "dedupe", "lists", "sizes", "unit_clause")

    def __init__(self, b: _PivotBuild) -> None:
        self.clauses = np.array(b.clauses, dtype=np.int64)
        self.sizes = np.array(b.sizes, dtype=np.int64)  # the counter array's initial values
        self.unit_clause = np.array(b.unit_clause, dtype=np.int64)
        self.lists = [
            (op, [_Segment(op, pairs) if pairs else None for pairs in b.lists[op]])
            for op in OPS
            if op in b.lists
        ]
        self.dedupe = b.dedupe


class _PivotBuild:
    __slots__ = ("clauses", "dedupe", "lists", "sizes", "unit_clause")

    def __init__(self) -> None:
        self.clauses: list[int] = []
        self.sizes: list[int] = []
        self.unit_clause: list[int] = []
        self.lists: dict[str, list[list[tuple[tuple[int, Any], int]]]] = {}
        self.dedupe = False


class OpIndex:
    """OpIndex over the first n subscriptions of ``compiled``; see the module docstring.

    ``sample``: events whose attribute frequencies choose the pivots (none: the
    subscriptions' own attribute frequencies, the paper's fallback).
    """

    name = "OpIndex"

    def __init__(
        self, compiled: Compiled, n: int | None = None, sample: Sequence[Event] = ()
    ) -> None:
        flat = self.flat = Flat(compiled, n)
        self.aid = flat.attr_ids()
        ev_freq = Counter(a for e in sample for a in e)
        sub_freq = Counter(a for anchors in flat.anchors for a in anchors)
        raw: dict[str, _PivotBuild] = {}
        for c, anchors in enumerate(flat.anchors):
            if not anchors:
                continue  # a free clause
            pivot = min(anchors, key=lambda a: (ev_freq[a], sub_freq[a], a))
            piv = raw.get(pivot) or raw.setdefault(pivot, _PivotBuild())
            local = len(piv.sizes)
            piv.clauses.append(c)
            size = 0
            for attr, atoms in flat.orders[c].items():
                a = self.aid[attr]
                for atom in atoms:
                    unit = len(piv.unit_clause)
                    piv.unit_clause.append(local)
                    size += 1
                    if len(atom.entries) > 1 and any(op != "=" for op, _ in atom.entries):
                        piv.dedupe = True
                    for op, const in atom.entries:
                        segs = piv.lists.setdefault(op, [[] for _ in range(B)])
                        segs[a % B].append(((a, const), unit))
            piv.sizes.append(size)
        self.pivots = {attr: _Pivot(b) for attr, b in raw.items()}
        self.has_residual = np.array([bool(r) for r in flat.residual], dtype=bool)
        flat.drop_build_state()

    def match(self, values: Event) -> list[Any]:
        aid = self.aid
        pairs = []
        for attr, x in values.items():
            a = aid.get(attr)
            if a is not None:
                pairs.append((a, x, a % B, 1 << (hash((a, x)) % W), 1 << ((a // B) % W)))
        found: list[np.ndarray] = []
        for attr in values:
            piv = self.pivots.get(attr)
            if piv is None:
                continue
            parts: list[np.ndarray] = []
            for op, segs in piv.lists:
                eq = op == "="
                for a, x, si, eq_bit, attr_bit in pairs:
                    seg = segs[si]
                    if seg is None or not seg.sig & (eq_bit if eq else attr_bit):
                        continue
                    keys = seg.keys
                    first = bisect_left(keys, (a,))  # the attribute's run: [first, end)
                    end = bisect_left(keys, (a + 1,), first)
                    if first == end:
                        continue
                    units = seg.units
                    if op == "=":
                        lo = bisect_left(keys, (a, x), first, end)
                        hi = bisect_right(keys, (a, x), lo, end)
                        if hi > lo:
                            parts.append(units[lo:hi])
                    elif op == "<=":  # x <= c: constants in [x, +inf)
                        parts.append(units[bisect_left(keys, (a, x), first, end) : end])
                    elif op == "<":  # x < c: constants in (x, +inf)
                        parts.append(units[bisect_right(keys, (a, x), first, end) : end])
                    elif op == ">=":  # x >= c: constants in (-inf, x]
                        parts.append(units[first : bisect_right(keys, (a, x), first, end)])
                    elif op == ">":  # x > c: constants in (-inf, x)
                        parts.append(units[first : bisect_left(keys, (a, x), first, end)])
                    else:  # "!="
                        lo = bisect_left(keys, (a, x), first, end)
                        hi = bisect_right(keys, (a, x), lo, end)
                        parts.append(units[first:lo])
                        parts.append(units[hi:end])
            sizes = piv.sizes
            if parts:
                got = np.concatenate(parts)
                if piv.dedupe:
                    got = np.unique(got)
                counts = np.bincount(piv.unit_clause[got], minlength=len(sizes))
                local = np.flatnonzero(counts == sizes)
            else:
                local = np.flatnonzero(sizes == 0)
            if len(local):
                found.append(piv.clauses[local])
        hits = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        rest = self.has_residual[hits]
        flat = self.flat
        clauses = hits[~rest].tolist() + flat.verify(hits[rest].tolist(), values, flat.residual)
        return flat.subs_of(clauses, values)
