"""A batch's truth matrix kept between batches: zeroed in place, not allocated afresh.

A batch's ``words x atoms`` truths (:func:`betree.packed.flatbatch.satisfied`) are up to
:data:`betree.packed.flatbatch.SAT_BYTES` of fresh memory each batch (rich 100K, 1,024
events: 16 words of 423K atoms, 54 MB), whose pages the kernel maps and zeroes at their
first write: measured in a matching process ~15-30 ms a batch (15-30 µs an event), where
zeroing resident memory takes ~5.  So the matrices are lent from a few kept buffers
(:data:`KEEP`, each at most ``limit`` bytes: bounded memory), one a batch being matched,
and given back after it.  Cost: the kept buffers' memory (rich 100K: one of 54 MB).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

#: the buffers kept for the next batches (one a batch matched at the same time)
KEEP = 2
#: matrices smaller than this are allocated afresh (the kernel's cost is small there)
SMALL = 1 << 20

_free: list[np.ndarray] = []
_lock = threading.Lock()


@contextmanager
def zeroed(rows: int, columns: int, limit: int) -> Iterator[np.ndarray]:
    """A zeroed ``rows x columns`` uint64 matrix for the block's duration: a kept
    buffer's first cells where one is large enough and the matrix within ``limit`` bytes
    (the buffer kept again after), else a fresh one."""
    size = rows * columns
    if not SMALL <= 8 * size <= limit:
        yield np.zeros((rows, columns), dtype=np.uint64)
        return
    with _lock:
        fits = [k for k, buf in enumerate(_free) if len(buf) >= size]
        buf = _free.pop(fits[-1]) if fits else None  # (the smallest fitting)
    if buf is None:
        buf = np.zeros(size, dtype=np.uint64)  # (fresh: zero already)
    else:
        buf[:size] = 0
    try:
        yield buf[:size].reshape(rows, columns)
    finally:
        with _lock:
            _free.append(buf)
            _free.sort(key=len, reverse=True)  # (the largest kept first)
            del _free[KEEP:]
