"""betree.packed.heap: glibc's thresholds set in a fresh process, and harmless to repeat."""

from __future__ import annotations

import platform
import subprocess
import sys


def test_keep_freed_memory_in_a_fresh_process() -> None:
    code = (
        "from betree.packed.heap import keep_freed_memory\n"
        "import numpy as np\n"
        "first = keep_freed_memory()\n"
        "assert keep_freed_memory() == first\n"
        "for _ in range(3):\n"
        "    a = np.ones(20_000_000)\n"  # 160 MB: from the heap now, and freed into it
        "    assert a.sum() == 20_000_000\n"
        "    del a\n"
        "print(first)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(platform.libc_ver()[0] == "glibc")
