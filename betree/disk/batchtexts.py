"""A batch build's subscription texts, held in memory up to a byte limit, then spilled.

Why: a bulk load keeps every subscription's text from its compile to its build, where it
is written into the subscription's record in internal-id order (the order the texts came
in).  Rich rules are ~450 bytes of text each (1M: ~450 MB of it, plus a Python object
each, ~50 bytes), so the batch grew with the count whatever the load's budget
(docs/bench/load-rich, richmem48).  :class:`Texts` keeps them as UTF-8 bytes in one
buffer; once the buffer reaches ``limit`` bytes it is appended to a scratch file (in the
load's staging directory, removed with it) and emptied, so at most ``limit`` bytes of
text are held, whatever the count.  The build reads them back once, in order.

Exact: every text is encoded with ``surrogatepass`` (a lone surrogate, which JSON can
carry, comes back as it went), and each text's length in bytes is kept (8 bytes a text).

Cost: one encode and one decode a text, one sequential write and read of the spilled
bytes (~0.5 µs a text each at 450 bytes); memory: ``limit`` bytes plus 8 a text.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO


class Texts:
    """Texts appended in order and read back in the same order, once (:meth:`__iter__`).

    ``limit`` (bytes; None: never spilled) bounds the buffer; ``scratch`` is the file the
    buffer is appended to once it is reached (made when first needed; None: never
    spilled)."""

    def __init__(self, limit: int | None = None, scratch: Path | None = None) -> None:
        self.limit = limit if scratch is not None else None
        self.scratch = scratch
        self.sizes: array[int] = array("q")  # bytes a text
        self.buffer = bytearray()
        self.spilled = 0  # texts in the scratch file
        self.most = 0  # the most bytes the buffer held (for tests and reports)
        self._out: BinaryIO | None = None
        self._read = False

    def __len__(self) -> int:
        return len(self.sizes)

    def append(self, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.sizes.append(len(data))
        self.buffer += data
        if self.limit is not None and len(self.buffer) >= self.limit:
            self._spill()

    def _spill(self) -> None:
        self.most = max(self.most, len(self.buffer))
        if self._out is None:
            assert self.scratch is not None
            self._out = open(self.scratch, "wb")  # noqa: SIM115 (closed by __iter__)
        self._out.write(self.buffer)
        self.spilled = len(self.sizes)
        self.buffer = bytearray()

    def __iter__(self) -> Iterator[str]:
        """Every text in order, once: the buffer and the scratch file are let go as read."""
        if self._read:
            raise RuntimeError("the batch's texts were read already")
        self._read = True
        self.most = max(self.most, len(self.buffer))
        sizes = self.sizes.tolist()
        if self._out is not None:
            self._out.close()
            self._out = None
            assert self.scratch is not None
            with open(self.scratch, "rb") as fh:
                read = fh.read
                for n in sizes[: self.spilled]:
                    yield read(n).decode("utf-8", "surrogatepass")
            self.scratch.unlink()
        buffer, self.buffer = memoryview(self.buffer), bytearray()
        at = 0
        for n in sizes[self.spilled :]:
            yield str(buffer[at : at + n], "utf-8", "surrogatepass")
            at += n
        buffer.release()
