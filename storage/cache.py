"""A bounded cache of decoded pages that stays correct across commits and processes.

Decoding, not LMDB, is what a page visit costs (MEASURED.md: a get is 1–2 µs, decoding
a leaf 40–60 µs), so readers keep decoded pages.  An entry remembers the generation in
the page's header (:func:`storage.codec.page_gen`) and the last snapshot generation it
was validated for:

* same snapshot as the last validation: the page cannot have changed — no LMDB access;
* newer snapshot: one LMDB get and an 8-byte header compare; decode only if the page
  was rewritten since.

Page ids are never reused, so an id can never name two different pages.  Entries are
never mutated after publication; writers decode private copies (see
:class:`storage.store.WriteTxn`).  Eviction is least-recently-used by page count.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any


class PageCache:
    """LRU map page id -> ``[node, page_gen, validated_gen]``.

    Cost: a hit is a dict lookup plus ``move_to_end`` (~0.1 µs).  Safe to share between
    threads under the GIL: a lost race costs a redundant decode, never a wrong page.
    """

    __slots__ = ("_entries", "capacity", "hits", "misses")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("cache capacity must be at least 1 page")
        self.capacity = capacity
        self._entries: OrderedDict[int, list[Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, page: int) -> list[Any] | None:
        """The entry of ``page`` (marked recently used) or None."""
        entry = self._entries.get(page)
        if entry is not None:
            # not contextlib.suppress: this is the hottest line of a warm search (1.7x)
            try:  # noqa: SIM105
                self._entries.move_to_end(page)
            except KeyError:  # evicted by another thread in between
                pass
        return entry

    def publish(self, page: int, node: Any, page_gen: int, validated_gen: int) -> None:
        """Insert or replace ``page``, evicting the least recently used beyond capacity."""
        entries = self._entries
        entries[page] = [node, page_gen, validated_gen]
        entries.move_to_end(page)
        while len(entries) > self.capacity:
            try:
                entries.popitem(last=False)
            except KeyError:
                break

    def clear(self) -> None:
        """Forget everything (tests and memory pressure)."""
        self._entries.clear()
