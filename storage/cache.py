"""A bounded cache of decoded pages that stays correct across commits and processes.

Decoding, not LMDB, is what a page visit costs: a get is one lookup in the memory map,
while decoding builds a Python object per field, tens of times the get for a leaf page
(docs/bench/README.md, "Building blocks"), so readers keep decoded pages.  An entry
remembers the generation in the page's header (:func:`storage.codec.page_gen`) and the last
snapshot generation it was validated for:

* same snapshot as the last validation: the page cannot have changed — no LMDB access;
* newer snapshot: one LMDB get and an 8-byte header compare; decode only if the page
  was rewritten since.

Page ids are never reused, so an id can never name two different pages.  Entries are
never mutated after publication; writers decode private copies (see
:class:`storage.txn.WriteTxn`).

Bounds: an estimate of the decoded bytes (``max_bytes``; each entry weighs twice its
stored size plus 512 bytes, which tracks the measured memory of decoded pages within
about 20%) and optionally a page count; least recently used entries go first.  Memory a
reader holds beside the cache for the same store (a matching view, :mod:`betree.packed.flat`)
is reserved from the same budget, up to three quarters of it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

#: What one cached page is assumed to cost beyond twice its stored bytes.
ENTRY_OVERHEAD = 512


def weight(stored_bytes: int) -> int:
    """Estimated memory of a decoded page of ``stored_bytes``."""
    return 2 * stored_bytes + ENTRY_OVERHEAD


class PageCache:
    """LRU map page id -> ``[node, page_gen, validated_gen, weight]``.

    Cost: a hit is O(1), a dict lookup plus ``move_to_end``.  Safe to share between
    threads under the GIL: a lost race costs a redundant decode, never a wrong page.
    """

    __slots__ = ("_entries", "budget", "bytes", "hits", "max_bytes", "max_pages", "misses")

    def __init__(self, max_bytes: int, max_pages: int | None = None) -> None:
        if max_bytes < 1 or (max_pages is not None and max_pages < 1):
            raise ValueError("cache bounds must be positive")
        self.budget = max_bytes  # max_bytes, plus what is reserved
        self.max_bytes = max_bytes
        self.max_pages = max_pages
        self._entries: OrderedDict[int, list[Any]] = OrderedDict()
        self.bytes = 0
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

    def publish(self, page: int, node: Any, page_gen: int, validated_gen: int, size: int) -> None:
        """Insert or replace ``page`` (``size``: its stored bytes), evicting beyond the bounds."""
        entries = self._entries
        old = entries.get(page)
        if old is not None:
            self.bytes -= old[3]
        cost = weight(size)
        entries[page] = [node, page_gen, validated_gen, cost]
        entries.move_to_end(page)
        self.bytes += cost
        self._evict()

    def reserve(self, nbytes: int) -> bool:
        """Take ``nbytes`` from the pages' budget for memory held beside the cache
        (evicting pages to fit), unless that would leave the pages under a quarter of
        the budget.  Returns whether it was taken; :meth:`release` gives it back."""
        if self.max_bytes - nbytes < self.budget // 4:
            return False
        self.max_bytes -= nbytes
        self._evict()
        return True

    def release(self, nbytes: int) -> None:
        """Give back bytes taken by :meth:`reserve`."""
        self.max_bytes = min(self.budget, self.max_bytes + nbytes)

    def _evict(self) -> None:
        entries = self._entries
        max_pages = self.max_pages if self.max_pages is not None else len(entries)
        while entries and (self.bytes > self.max_bytes or len(entries) > max_pages):
            try:
                _, evicted = entries.popitem(last=False)
            except KeyError:
                break
            self.bytes -= evicted[3]

    def clear(self) -> None:
        """Forget everything (tests and memory pressure)."""
        self._entries.clear()
        self.bytes = 0
