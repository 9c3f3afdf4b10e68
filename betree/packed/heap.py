"""The C heap of a process that matches in batches: freed large blocks kept for the next.

A batch of 1,024 events against 1M subscriptions allocates a few dozen arrays of 10–80 MB
(:mod:`betree.matching.batch`: the bit matrix, the unpacked hits, the gathered ids).  glibc serves
each block that large from a fresh ``mmap`` and unmaps it when freed, so the kernel zeroes
every page again for the next batch: measured, 1.3 s of system time in a 9.2 s ``bexdb
match --jobs 1`` of 8,000 events at 1M.  :func:`keep_freed_memory` sets glibc's mmap and
trim thresholds so that such blocks come from the heap and stay there once freed: 0.6 s
of system time, 8.6 s in all, 40 MB more peak RSS (the heap keeps its high-water mark).

Called by the processes that match batches (``bexdb match`` and its workers, the Spark
matching tasks); elsewhere than glibc (musl, macOS) it does nothing.
"""

from __future__ import annotations

import ctypes
import gc
import platform

#: mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
#: blocks up to this size come from the heap, not from their own mmap
MMAP_THRESHOLD = 1 << 30
#: free memory at the heap's top is returned to the kernel only past this
TRIM_THRESHOLD = (1 << 31) - 1
#: the heap grows by at least this much (fewer brk calls)
TOP_PAD = 64 << 20

_done = False


def keep_freed_memory() -> bool:
    """Set the thresholds, once per process; whether glibc took them."""
    global _done
    if _done:
        return True
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt  # this process's own C library
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    _done = all(
        mallopt(param, value) == 1
        for param, value in (
            (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
            (_M_TRIM_THRESHOLD, TRIM_THRESHOLD),
            (_M_TOP_PAD, TOP_PAD),
        )
    )
    return _done


def return_freed_memory(cycles: bool = False) -> None:
    """Hand the heap's free memory back to the kernel (glibc's ``malloc_trim``): after a
    one-off burst of temporaries, such as building a packed view (:mod:`betree.packed.flat`:
    ~150 MB of them for a 625K-subscription shard), which would otherwise stay counted in
    the process's private memory.  Costs a few ms; elsewhere than glibc, nothing.
    ``cycles``: unreachable cycles collected first (``gc.collect``, ~0.1-0.5 s on a big
    heap): the decoded pages a cleared page cache let go hold some (dense 1M, 2 shards:
    ~110 MB of 270 MB; built on top of them, a view left ~160 MB it could not return)."""
    if cycles:
        gc.collect()
    if platform.libc_ver()[0] == "glibc":
        ctypes.CDLL(None).malloc_trim(0)
