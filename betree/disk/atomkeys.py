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
:func:`storage.codec.encode_value` writes.  A test atom's attribute is read from its key's
bytes the same way (:func:`attr_of_test_key`), so that the batch build writes its key into
the direct record without decoding it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pbtree.operators import SLOT
from storage import codec


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


def _groups(values: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Each distinct value of an int array, with the positions holding it (ascending)."""
    if not len(values):
        return []
    order = np.argsort(values, kind="stable")
    ranked = values[order]
    cuts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
    starts = np.concatenate(([0], cuts)).tolist()
    ends = [*starts[1:], len(values)]
    return [(int(ranked[a]), order[a:b]) for a, b in zip(starts, ends, strict=True)]


def _rows(flat: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` bytes at each of ``starts`` in ``flat``, as a ``len x size`` matrix (one
    gather of rows over a strided view: no index array of every byte)."""
    if len(flat) < size:
        return np.zeros((0, size), dtype=np.uint8)
    windows = np.lib.stride_tricks.sliding_window_view(flat, size)
    return windows[starts]


def crc32_rows(mat: np.ndarray, prior: int = 0) -> np.ndarray:
    """zlib's CRC-32 of each row of a ``uint8`` matrix (``zlib.crc32(row, prior)``: with
    ``prior`` the CRC-32 of bytes every row follows, their CRC with those bytes first, so
    a shared prefix costs no step): one table step a column over all rows, or zlib a row
    where the rows are fewer than their bytes (a long key's column loop costs a numpy step
    a byte: seconds for a megabyte)."""
    if len(mat) < mat.shape[1]:
        return np.fromiter((zlib.crc32(row.tobytes(), prior) for row in mat), np.uint32, len(mat))
    crc = np.full(len(mat), prior ^ 0xFFFFFFFF, dtype=np.uint32)
    for j in range(mat.shape[1]):
        crc = _TABLE[(crc ^ mat[:, j]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


class FlatKeys(Sequence[bytes]):
    """Byte strings held end to end in one array, with their lengths and starts: ~8 bytes
    an item beside its bytes, where a list of two million keys costs ~60 bytes an item
    more; compared with other keys in numpy (:meth:`equal`)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        self.lens = np.fromiter(map(len, keys), dtype=np.int64, count=len(keys))
        self.starts = np.cumsum(self.lens) - self.lens
        self.flat = np.frombuffer(b"".join(keys), dtype=np.uint8)

    @classmethod
    def joined(cls, parts: Sequence[FlatKeys]) -> FlatKeys:
        """The keys of ``parts``, one after another (read in chunks, held as one)."""
        out = cls([])
        if parts:
            out.lens = np.concatenate([p.lens for p in parts])
            out.starts = np.cumsum(out.lens) - out.lens
            out.flat = np.concatenate([p.flat for p in parts])
        return out

    def __len__(self) -> int:
        return len(self.lens)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        start = int(self.starts[i])
        return self.flat[start : start + int(self.lens[i])].tobytes()

    def take(self, rows: Sequence[int] | np.ndarray) -> list[bytes]:
        """``[self[i] for i in rows]`` (``rows`` in range), as slices of one buffer: ~0.3 µs
        a key, against ~2 for the numpy scalars of each ``self[i]``."""
        buf = self.flat.data
        at = np.asarray(rows, dtype=np.int64)
        starts, ends = self.starts[at].tolist(), (self.starts[at] + self.lens[at]).tolist()
        return [bytes(buf[s:e]) for s, e in zip(starts, ends, strict=True)]

    def equal(self, at: np.ndarray, keys: FlatKeys) -> np.ndarray:
        """Per key of ``keys``: whether it is this sequence's key ``at[j]`` (``at`` in
        range), byte for byte: one comparison of rows a distinct length."""
        same = self.lens[at] == keys.lens
        rows = np.flatnonzero(same & (keys.lens > 0))
        for size, where in _groups(keys.lens[rows]):
            sel = rows[where]
            mine = _rows(self.flat, self.starts[at[sel]], size)
            theirs = _rows(keys.flat, keys.starts[sel], size)
            same[sel] = np.all(mine == theirs, axis=1)
        return same


def parse(keys: Sequence[bytes]) -> OrderKeys:
    """The one-comparison order atoms among ``keys`` (store keys, any shape), as columns."""
    n = len(keys)
    if isinstance(keys, FlatKeys):  # (already end to end)
        lens, flat, starts = keys.lens, keys.flat, keys.starts
    else:
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
    names: dict[bytes, int] = {}
    for kind, at in _groups(group):
        rows = long[at]
        size, a = divmod(kind, 32)
        if size < shortest + a:
            continue
        mat = _rows(flat, starts[rows], size)
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


def column_keys(
    names: Sequence[str],
    keys: Sequence[bytes],
    rest: np.ndarray,
    at: np.ndarray,
    attr: np.ndarray,
    code: np.ndarray,
    ints: np.ndarray,
    floats: tuple[np.ndarray, np.ndarray],
) -> OrderKeys:
    """What :func:`parse` reads from ``keys`` as far as the callers use it, when the keys
    at positions ``at`` are one-comparison order atoms the caller holds as columns
    (attribute ``names[attr]``, operator code, int64 constant or, where ``floats[0]``,
    float64 ``floats[1]``: what :func:`encode_order` made their keys of): only the keys at
    ``rest`` are parsed.  A batch build's column
    atoms (two a ``between``) are then not read back from the keys just made of them
    (~0.7 µs an atom).  Those rows are ``ok`` whatever their attribute's name (``parse``
    leaves names of 32 bytes or more to be decoded, to the same entries)."""
    sub = parse([keys[i] for i in rest.tolist()])
    merged = list(names)
    number = {name: i for i, name in enumerate(merged)}
    remap = []
    for name in sub.names:
        if name not in number:
            number[name] = len(merged)
            merged.append(name)
        remap.append(number[name])
    n = len(keys)
    out = OrderKeys(
        ok=np.zeros(n, dtype=bool),
        attr=np.full(n, -1, dtype=np.int64),
        names=merged,
        code=np.zeros(n, dtype=np.int8),
        is_float=np.zeros(n, dtype=bool),
        ints=np.zeros(n, dtype=np.int64),
        floats=np.zeros(n, dtype=np.float64),
    )
    out.ok[at], out.attr[at], out.code[at], out.ints[at] = True, attr, code, ints
    out.is_float[at], out.floats[at] = floats
    if len(rest):
        out.ok[rest], out.code[rest], out.is_float[rest] = sub.ok, sub.code, sub.is_float
        out.attr[rest] = np.array([*remap, -1], dtype=np.int64)[sub.attr]  # (-1: not read)
        out.ints[rest], out.floats[rest] = sub.ints, sub.floats
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
    if not a:
        attr = np.full(len(rows), names.setdefault(b"", len(names)), dtype=np.int64)
    else:
        raw_names = mat[:, 8 : 8 + a]
        if a <= 8:  # (as one uint64 each: sorted as ints, not as void, ~5x faster)
            packed = np.zeros((len(rows), 8), dtype=np.uint8)
            packed[:, :a] = raw_names
            as_int = packed.view(">u8").ravel()
            groups = [(mat[int(w[0]), 8 : 8 + a].tobytes(), w) for _, w in _groups(as_int)]
        else:
            distinct, inverse = np.unique(
                np.ascontiguousarray(raw_names).view(f"V{a}").ravel(), return_inverse=True
            )
            groups = [
                (name, np.flatnonzero(inverse.ravel() == i))
                for i, name in enumerate(distinct.tolist())
            ]
        attr = np.empty(len(rows), dtype=np.int64)
        for name_bytes, where in groups:
            try:
                name_bytes.decode("utf-8")
            except UnicodeDecodeError:
                attr[where] = -1
                continue
            attr[where] = names.setdefault(name_bytes, len(names))
    keep = attr >= 0
    rows = rows[keep]
    out.ok[rows] = True
    out.attr[rows] = attr[keep]
    out.code[rows] = code[good][keep]
    out.is_float[rows] = is_float[good][keep]
    out.ints[rows] = ints[good][keep]
    out.floats[rows] = floats[good][keep]


def _int_forms(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per int64: its msgpack tag (the value itself for a fixint) and its payload width,
    as msgpack writes it (the shortest form; non-negative ints unsigned)."""
    v = values
    tag = np.select(
        [
            (v >= 0) & (v < 128),
            (v < 0) & (v >= -32),
            (v >= 0) & (v < 1 << 8),
            (v >= 0) & (v < 1 << 16),
            (v >= 0) & (v < 1 << 32),
            v >= 0,
            v >= -(1 << 7),
            v >= -(1 << 15),
            v >= -(1 << 31),
        ],
        [v, v & 0xFF, 0xCC, 0xCD, 0xCE, 0xCF, 0xD0, 0xD1, 0xD2],
        0xD3,
    )
    width = np.select(
        [(v >= -32) & (v < 128), (tag == 0xCC) | (tag == 0xD0), (tag == 0xCD) | (tag == 0xD1)],
        [0, 1, 2],
        np.where((tag == 0xCE) | (tag == 0xD2), 4, 8),
    )
    return tag, width


def _int_bytes(values: np.ndarray, tag: np.ndarray, width: int) -> np.ndarray:
    """The msgpack bytes of ints of one payload width: ``len x (1 + width)`` uint8."""
    head = (tag & 0xFF).astype(np.uint8)[:, None]
    if not width:
        return head
    signed = tag >= 0xD0
    body = np.where(signed[:, None], _be(values, width, "i"), _be(values, width, "u"))
    return np.hstack((head, body))


def _be(values: np.ndarray, width: int, sign: str) -> np.ndarray:
    """Big-endian bytes of each value in ``width`` bytes (two's complement)."""
    as_type = values.astype(np.int64).view(np.uint64) if sign == "u" else values
    raw = as_type.astype(f"{'>'}{sign}{width}", casting="unsafe")
    return raw.view(np.uint8).reshape(len(values), width)


def _keyed(n: int, parts: list[tuple[np.ndarray, bytes, np.ndarray, np.ndarray]]) -> list[bytes]:
    """``n`` byte strings from groups of rows: per group its rows (positions in the
    result), the bytes every one starts with, then each row's bytes (a ``uint8`` matrix)
    and each row's CRC-32 (four bytes, big-endian, last).  The groups are laid end to end
    in one buffer in the result's order and cut into one ``bytes`` a row: no Python loop
    a group (~0.1 µs a row)."""
    sizes = np.zeros(n, dtype=np.int64)
    for rows, head, body, _ in parts:
        sizes[rows] = len(head) + body.shape[1] + 4
    ends = np.cumsum(sizes)
    starts = ends - sizes
    flat = np.empty(int(ends[-1]) if n else 0, dtype=np.uint8)
    for rows, head, body, crc in parts:
        width = len(head) + body.shape[1]
        mat = np.empty((len(rows), width + 4), dtype=np.uint8)
        mat[:, : len(head)] = np.frombuffer(head, dtype=np.uint8)
        mat[:, len(head) : width] = body
        mat[:, width:] = crc.astype(">u4").view(np.uint8).reshape(len(rows), 4)
        flat[starts[rows][:, None] + np.arange(width + 4)] = mat
    buf = flat.tobytes()
    return [buf[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


#: msgpack's float64 tag, and the width :func:`encode_order` groups its constants under
#: (past an int's widest, 8)
_DOUBLE, _DOUBLE_WIDTH = 0xCB, 9


def encode_order(
    names: Sequence[str],
    attr: np.ndarray,
    code: np.ndarray,
    ints: np.ndarray,
    lead: bytes = b"",
    floats: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[bytes]:
    """The store keys of one-comparison order atoms with int64 constants (attribute
    ``names[attr]``, operator code, constant), or with float64 ones where ``floats``
    (``(is_float, values)``, as :class:`OrderKeys` holds them) says so:
    :func:`storage.codec.encode_value` of ``("order", name, ((op, c),))`` each, byte for
    byte, each after ``lead`` (a record's namespace, ``ns + b"\\0"``: the LMDB key
    :meth:`storage.txn.WriteTxn.put_many` takes ``prefixed``; not in the CRC), made per
    group of one attribute, operator and constant width; a group's CRC-32 runs from its
    fixed prefix's over the constants' bytes only (~0.2 µs an atom against ~1.5 one by one)."""
    tag, width = _int_forms(ints)
    if floats is not None and floats[0].any():
        tag = np.where(floats[0], _DOUBLE, tag)
        width = np.where(floats[0], _DOUBLE_WIDTH, width)
    symbols = {c: s.encode() for s, c in SLOT.items()}
    group = (attr.astype(np.int64) * 8 + code) * 16 + width
    parts: list[tuple[np.ndarray, bytes, np.ndarray, np.ndarray]] = []
    slow: list[tuple[int, bytes]] = []
    for kind, rows in _groups(group):
        rest, w = divmod(kind, 16)
        a, op = divmod(rest, 8)
        name, symbol = names[a].encode(), symbols[op]
        values = floats[1] if w == _DOUBLE_WIDTH and floats is not None else ints
        if len(name) >= 32:  # (not a fixstr: encoded one by one; a name that long is rare)
            for i, c in zip(rows.tolist(), values[rows].tolist(), strict=True):
                key = codec.encode_value(("order", names[a], ((symbol.decode(), c),)))
                slow.append((i, lead + key))
            continue
        prefix = (
            b"\x93\xa5order"
            + bytes([0xA0 | len(name)])
            + name
            + b"\x91\x92"
            + bytes([0xA0 | len(symbol)])
            + symbol
        )
        if w == _DOUBLE_WIDTH:
            body = np.empty((len(rows), 9), dtype=np.uint8)
            body[:, 0] = _DOUBLE
            body[:, 1:] = values[rows].astype(">f8").view(np.uint8).reshape(len(rows), 8)
        else:
            body = _int_bytes(ints[rows], tag[rows], w)
        parts.append((rows, lead + prefix, body, crc32_rows(body, zlib.crc32(prefix))))
    out = _keyed(len(ints), parts)
    for i, key in slow:
        out[i] = key
    return out


def encode_int_pairs(first: np.ndarray, second: np.ndarray) -> list[bytes]:
    """:func:`storage.codec.encode_value` of ``[first[i], second[i]]`` (int64s) each, byte
    for byte (the ``atom`` records' ``[atom id, refcount]``)."""
    tag1, w1 = _int_forms(first)
    tag2, w2 = _int_forms(second)
    parts: list[tuple[np.ndarray, bytes, np.ndarray, np.ndarray]] = []
    prior = zlib.crc32(b"\x92")
    for kind, rows in _groups(w1 * 16 + w2):
        a, b = divmod(kind, 16)
        body = np.hstack(
            (_int_bytes(first[rows], tag1[rows], a), _int_bytes(second[rows], tag2[rows], b))
        )
        parts.append((rows, b"\x92", body, crc32_rows(body, prior)))
    return _keyed(len(first), parts)


def key_order(cols: OrderKeys) -> np.ndarray | None:
    """The order of the keys ``cols`` was read from, ascending as bytes (LMDB's order),
    when every one is ``ok`` (a dense build's every atom key); else None (the caller sorts
    the keys).  Such a key is its attribute and operator's fixed prefix, then the
    constant's msgpack tag and big-endian payload, the tag giving the width: so the bytes
    order is the prefixes' order, then the tag's, then the constant's (a float64's bytes
    in order are its bits' as a uint64).  ~0.2 µs a key where sorting 2M keys of ~30 bytes
    as bytes took ~1 µs."""
    n = len(cols.ok)
    if not n or not cols.ok.all():
        return None
    symbols = {c: s for s, c in SLOT.items()}
    ops = max(symbols) + 1
    pair = cols.attr * ops + cols.code
    used = np.unique(pair)
    prefixes = [  # (a constant of 0: one byte, then the CRC's four)
        codec.encode_value(("order", cols.names[p // ops], ((symbols[p % ops], 0),)))[:-5]
        for p in used.tolist()
    ]
    rank = np.zeros(int(used[-1]) + 1, dtype=np.int64)
    rank[used[sorted(range(len(used)), key=prefixes.__getitem__)]] = np.arange(len(used))
    tag, _ = _int_forms(cols.ints)
    if cols.is_float.any():
        head = rank[pair] * 256 + np.where(cols.is_float, _DOUBLE, tag & 0xFF)
        bits = np.where(cols.is_float, cols.floats.view(np.uint64), np.uint64(0))
        return np.lexsort((cols.ints, bits, head))
    head = rank[pair] * 256 + (tag & 0xFF)
    low, high = int(cols.ints.min()), int(cols.ints.max())
    if (int(head.max()) + 1) * (high - low + 1) < 1 << 63:  # (one int64 key: ~3x faster)
        return np.argsort(head * (high - low + 1) + (cols.ints - low), kind="stable")
    return np.lexsort((cols.ints, head))


class AtomKeys(Mapping[int, bytes]):
    """Atom ids -> their store keys, held as a list or :class:`FlatKeys` (a dict of two
    million atoms costs ~200 MB more): ids 1..n, or the ascending ``ids`` given (found by
    binary search)."""

    def __init__(self, keys: Sequence[bytes], ids: np.ndarray | None = None) -> None:
        self.held = keys
        self.ids = ids

    def __getitem__(self, aid: int) -> bytes:
        if self.ids is None:
            if not 0 < aid <= len(self.held):
                raise KeyError(aid)
            return self.held[aid - 1]
        at = int(np.searchsorted(self.ids, aid))
        if at == len(self.ids) or self.ids[at] != aid:
            raise KeyError(aid)
        return self.held[at]

    def __iter__(self) -> Iterator[int]:
        if self.ids is None:
            return iter(range(1, len(self.held) + 1))
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return len(self.held)

    def spend(self) -> None:
        """Let the keys go (a build done with them; the mapping is empty after)."""
        self.held, self.ids = [], None


class ColumnKeys(Sequence[bytes]):
    """The store keys of one-comparison order atoms with int64 or float64 constants, made
    from their columns when asked for (:func:`encode_order`, a caller's step at a time),
    not held: ``cols`` every row ``ok`` (a dense batch's atoms, ids 1..n in order).  Held
    as Python bytes, 1M dense's 20M keys were ~1.4 GB through the build (docs/bench/
    dense-load, dense1m44); each key asked for is encoded again (~0.3 µs)."""

    def __init__(self, cols: OrderKeys) -> None:
        self.cols = cols

    def __len__(self) -> int:
        return len(self.cols.ints)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return self.take(range(*i.indices(len(self))))
        j = int(i) + (len(self) if i < 0 else 0)
        if not 0 <= j < len(self):
            raise IndexError(i)
        return self.take([j])[0]

    def take(self, rows: Sequence[int] | np.ndarray, lead: bytes = b"") -> list[bytes]:
        """``[lead + self[i] for i in rows]``, encoded together."""
        at = np.asarray(rows, dtype=np.int64)
        c = self.cols
        code = c.code[at].astype(np.int64)
        floats = (c.is_float[at], c.floats[at])
        return encode_order(c.names, c.attr[at], code, c.ints[at], lead, floats)


def take_keys(keys: Sequence[bytes], rows: list[int]) -> list[bytes]:
    """``[keys[i] for i in rows]``, by the keys' own ``take`` where they have one
    (:class:`FlatKeys`, the check's chunks of them: not a numpy scalar a key)."""
    take = getattr(keys, "take", None)
    return list(take(rows)) if take is not None else [keys[i] for i in rows]


def key_columns(atoms: Mapping[int, bytes]) -> tuple[np.ndarray, Sequence[bytes]]:
    """Atom ids ascending and their keys, without a Python loop for :class:`AtomKeys`."""
    if isinstance(atoms, AtomKeys):
        if atoms.ids is not None:
            return atoms.ids, atoms.held
        return np.arange(1, len(atoms) + 1, dtype=np.int64), atoms.held
    ordered = sorted(atoms.items())
    ids = np.fromiter((aid for aid, _ in ordered), dtype=np.int64, count=len(ordered))
    return ids, [key for _, key in ordered]


def parse_int_pairs(values: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``[a, b]`` records of two int64s (:func:`encode_int_pairs`' records) as an ``n x 2``
    int64 array, and per record whether it was read here (its bytes that shape, its CRC
    good); the rest are the caller's to decode."""
    n = len(values)
    lens = np.fromiter(map(len, values), dtype=np.int64, count=n)
    flat = np.frombuffer(b"".join(values), dtype=np.uint8)
    starts = np.cumsum(lens) - lens
    out = np.zeros((n, 2), dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    long = np.flatnonzero(lens >= 7)  # 92, two fixints, the crc
    tag = flat[starts[long] + 1].astype(np.int64)
    width = _tag_width(tag)
    long, width = long[width >= 0], width[width >= 0]
    for kind, at in _groups(lens[long] * 16 + width):
        rows = long[at]
        size, w1 = divmod(kind, 16)
        w2 = size - 4 - 3 - w1
        if w2 not in (0, *_WIDTHS):
            continue
        mat = _rows(flat, starts[rows], size)
        good = (mat[:, 0] == 0x92) & (_tag_width(mat[:, 2 + w1].astype(np.int64)) == w2)
        stored = np.ascontiguousarray(mat[:, size - 4 :]).view(">u4").ravel()
        good &= crc32_rows(mat[:, : size - 4]) == stored
        for col, pos, w in ((0, 1, w1), (1, 2 + w1, w2)):
            fits, ints = _read_int(mat, pos, w)
            good &= fits
            out[rows, col] = ints
        ok[rows[good]] = True
    out[~ok] = 0
    return out, ok


def _tag_width(tag: np.ndarray) -> np.ndarray:
    """Payload width of a msgpack int's tag (-1: not an int tag)."""
    width = np.full(len(tag), -1, dtype=np.int64)
    width[(tag < 0x80) | (tag >= 0xE0)] = 0
    for w, (unsigned, signed, _) in _WIDTHS.items():
        width[(tag == unsigned) | (tag == signed)] = w
    return width


def _read_int(mat: np.ndarray, at: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The msgpack ints whose tag is at column ``at`` with payload ``width``: whether
    each fits an int64 (and its tag is an int's of that width), and its value."""
    tag = mat[:, at].astype(np.int64)
    if not width:
        return (tag < 0x80) | (tag >= 0xE0), np.where(tag < 0x80, tag, tag - 0x100)
    unsigned, signed, _ = _WIDTHS[width]
    raw = np.ascontiguousarray(mat[:, at + 1 : at + 1 + width])
    as_u = raw.view(f">u{width}").ravel().astype(np.uint64)
    as_i = raw.view(f">i{width}").ravel().astype(np.int64)
    fits = ((tag == unsigned) & (as_u < np.uint64(1 << 63))) | (tag == signed)
    return fits, np.where(tag == unsigned, as_u.astype(np.int64), as_i)


#: a test atom's key (``encode_value(("test", attr, test, arg))``) up to its attribute's
#: name, and the msgpack string headers that name may have (fixstr, str8, str16)
_TEST_HEAD = b"\x94\xa4test"
_ORDER_HEAD = b"\x93\xa5order"
_STR_HEADS = {0xD9: 1, 0xDA: 2}


def attr_of_test_key(key: bytes) -> str | None:
    """The attribute of a test atom's store key, read from its bytes (no decoding: the
    batch build writes the key's bytes into the attribute's direct record); None for
    another key (an order atom's, or a name past str16: the caller decodes it)."""
    return _name_after(key, _TEST_HEAD)


def attr_of_order_key(key: bytes) -> str | None:
    """The attribute of an order atom's store key (``encode_value(("order", attr,
    entries))``), read from its bytes; None for another key (or a name past str16)."""
    return _name_after(key, _ORDER_HEAD)


def test_of_key(key: bytes) -> tuple[str, str] | None:
    """A test atom's attribute and test name, read from its store key's bytes (no
    decoding: its argument, a list of values, is not built); None for another key (or a
    name past str16).  For keys this process encoded: the checksum is not looked at."""
    if not key.startswith(_TEST_HEAD):
        return None
    attr = _string_at(key, len(_TEST_HEAD))
    if attr is None:
        return None
    test = _string_at(key, attr[1])
    return None if test is None else (attr[0], test[0])


def _name_after(key: bytes, head: bytes) -> str | None:
    """The msgpack string right after ``head`` in ``key`` (None: not so)."""
    if not key.startswith(head) or len(key) <= len(head):
        return None
    name = _string_at(key, len(head))
    return None if name is None else name[0]


def _string_at(key: bytes, at: int) -> tuple[str, int] | None:
    """The msgpack string at ``at`` in ``key`` and where it ends (None: not a string)."""
    if at >= len(key):
        return None
    tag = key[at]
    if 0xA0 <= tag <= 0xBF:
        start, size = at + 1, tag & 0x1F
    elif tag in _STR_HEADS:
        width = _STR_HEADS[tag]
        start, size = at + 1 + width, int.from_bytes(key[at + 1 : at + 1 + width], "big")
    else:
        return None
    return key[start : start + size].decode(), start + size
