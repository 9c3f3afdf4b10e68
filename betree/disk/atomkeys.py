"""Order atoms' store keys read as columns, in numpy: no Python object per atom.

A dense workload's every atom is one comparison with a number (two a ``between``, none
shared: ~2M atoms at 100K subscriptions), and the build, its places and the check each read
every atom's key.  Decoded one by one (:func:`storage.codec.decode_value`: a CRC, a msgpack
unpack and nested lists) that was ~4 µs and ~300 bytes an atom, three times a load.  Here
the keys of that one shape are parsed together; any other key (another shape, a constant
numpy cannot hold, a failing checksum) is left to the caller (``ok`` False), which decodes
it as before, so the answers are the same as decoding every key.

The shape (:func:`storage.codec.encode_value` of ``("order", attr, ((op, c),))``)::

    93 a5 'order'  (a0|n) attr(n bytes)  91 92  (a0|m) op(m bytes)  constant  crc32(u32 BE)

the constant a msgpack int (fixint, ``cc cd ce cf d0 d1 d2 d3``) or a float64 (``cb``).
Keys are grouped by length, attribute-name length and operator length (the same byte
positions within a group); each group is checked byte by byte (its fixed bytes, the
operator, the constant's tag against its width, the CRC-32 computed over the columns)
and its constants read by tag.  Cost: ~30 numpy passes a group, a few groups an attribute;
~0.3 µs an atom, against ~4 decoded.  The format is unchanged: these are the keys
:func:`storage.codec.encode_value` writes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pbtree.operators import SLOT


@dataclass
class OrderKeys:
    """Per key: whether it was read here (``ok``), its attribute (an index into ``names``),
    its operator's code (:data:`pbtree.operators.SLOT`), whether its constant is a float,
    and the constant as ``ints`` (int64) or ``floats`` (float64).  Rows not ``ok`` hold
    zeros and attribute -1."""

    ok: np.ndarray
    attr: np.ndarray
    names: list[str]
    code: np.ndarray
    is_float: np.ndarray
    ints: np.ndarray
    floats: np.ndarray


_HEAD = np.frombuffer(b"\x93\xa5order", dtype=np.uint8)


def _crc_table() -> np.ndarray:
    table = np.zeros(256, dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0xEDB88320 if c & 1 else c >> 1
        table[n] = c
    return table


_TABLE = _crc_table()
assert int(_TABLE[1]) == 0x77073096 and zlib.crc32(b"") == 0  # zlib's CRC-32

#: operator bytes (one or two, as ``b0 << 8 | b1``) -> code; -1 elsewhere
_OPS = np.full(1 << 16, -1, dtype=np.int8)
for _symbol, _code in SLOT.items():
    _raw = _symbol.encode()
    _OPS[(_raw[0] << 8 | _raw[1]) if len(_raw) == 2 else _raw[0]] = _code

#: constant width after its tag -> (tags of unsigned ints, of signed ints, of a float64)
_WIDTHS = {1: (0xCC, 0xD0, -1), 2: (0xCD, 0xD1, -1), 4: (0xCE, 0xD2, -1), 8: (0xCF, 0xD3, 0xCB)}


def crc32_rows(mat: np.ndarray) -> np.ndarray:
    """zlib's CRC-32 of each row of a ``uint8`` matrix (one table step a column)."""
    crc = np.full(len(mat), 0xFFFFFFFF, dtype=np.uint32)
    for j in range(mat.shape[1]):
        crc = _TABLE[(crc ^ mat[:, j]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def parse(keys: Sequence[bytes]) -> OrderKeys:
    """The one-comparison order atoms among ``keys`` (store keys, any shape), as columns."""
    n = len(keys)
    lens = np.fromiter(map(len, keys), dtype=np.int64, count=n)
    flat = np.frombuffer(b"".join(keys), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    out = OrderKeys(
        ok=np.zeros(n, dtype=bool),
        attr=np.full(n, -1, dtype=np.int64),
        names=[],
        code=np.zeros(n, dtype=np.int8),
        is_float=np.zeros(n, dtype=bool),
        ints=np.zeros(n, dtype=np.int64),
        floats=np.zeros(n, dtype=np.float64),
    )
    shortest = 7 + 1 + 2 + 2 + 1 + 4  # head, attr header, 91 92, op header and byte, tag, crc
    long = np.flatnonzero(lens >= shortest)
    alen = flat[starts[long] + 7].astype(np.int64) - 0xA0
    long, alen = long[(alen >= 0) & (alen < 32)], alen[(alen >= 0) & (alen < 32)]
    group = lens[long] * 32 + alen
    kinds, which = np.unique(group, return_inverse=True)
    names: dict[bytes, int] = {}
    for g, kind in enumerate(kinds.tolist()):
        rows = long[which == g]
        size, a = divmod(kind, 32)
        if size < shortest + a:
            continue
        mat = flat[starts[rows, None] + np.arange(size)]
        good = np.all(mat[:, :7] == _HEAD, axis=1)
        p = 8 + a
        good &= (mat[:, p] == 0x91) & (mat[:, p + 1] == 0x92)
        mlen = mat[:, p + 2].astype(np.int64) - 0xA0
        for m in (1, 2):
            sel = good & (mlen == m)
            if sel.any():
                _read_group(out, rows[sel], mat[sel], a, m, names)
    out.names = [raw.decode("utf-8") for raw in names]
    return out


def _read_group(
    out: OrderKeys, rows: np.ndarray, mat: np.ndarray, a: int, m: int, names: dict[bytes, int]
) -> None:
    """Rows of one length, attribute-name length ``a`` and operator length ``m``."""
    size = mat.shape[1]
    body = size - 4
    p = 8 + a + 3  # the operator's first byte
    q = p + m  # the constant's tag
    width = body - q - 1
    op = mat[:, p].astype(np.int64)
    if m == 2:
        op = op << 8 | mat[:, p + 1]
    code = _OPS[op]
    tag = mat[:, q].astype(np.int64)
    stored = np.ascontiguousarray(mat[:, body:]).view(">u4").ravel()
    good = (code >= 0) & (crc32_rows(mat[:, :body]) == stored)
    ints = np.zeros(len(rows), dtype=np.int64)
    floats = np.zeros(len(rows), dtype=np.float64)
    is_float = np.zeros(len(rows), dtype=bool)
    if width == 0:
        good &= (tag < 0x80) | (tag >= 0xE0)
        ints = np.where(tag < 0x80, tag, tag - 0x100)
    elif width in _WIDTHS:
        unsigned, signed, double = _WIDTHS[width]
        raw = np.ascontiguousarray(mat[:, q + 1 : body])
        as_u = raw.view(f">u{width}").ravel().astype(np.uint64)
        as_i = raw.view(f">i{width}").ravel().astype(np.int64)
        fits = (tag != unsigned) | (as_u < np.uint64(1 << 63))  # (else: not an int64)
        good &= ((tag == unsigned) | (tag == signed) | (tag == double)) & fits
        ints = np.where(tag == unsigned, as_u.astype(np.int64), as_i)
        if double >= 0:
            is_float = tag == double
            floats = np.where(is_float, raw.view(">f8").ravel(), 0.0)
            ints = np.where(is_float, 0, ints)
    else:
        return
    if not good.any():
        return
    rows, mat = rows[good], mat[good]
    raw_names = np.ascontiguousarray(mat[:, 8 : 8 + a]).view(f"V{a}").ravel() if a else None
    if raw_names is None:
        attr = np.full(len(rows), names.setdefault(b"", len(names)), dtype=np.int64)
    else:
        distinct, inverse = np.unique(raw_names, return_inverse=True)
        numbers = []
        for raw in distinct.tolist():
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError:
                numbers.append(-1)
                continue
            numbers.append(names.setdefault(raw, len(names)))
        attr = np.array(numbers, dtype=np.int64)[inverse.ravel()]
    keep = attr >= 0
    rows = rows[keep]
    out.ok[rows] = True
    out.attr[rows] = attr[keep]
    out.code[rows] = code[good][keep]
    out.is_float[rows] = is_float[good][keep]
    out.ints[rows] = ints[good][keep]
    out.floats[rows] = floats[good][keep]
