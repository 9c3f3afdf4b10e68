"""Every byte layout bexdb writes: LMDB keys, the page envelope, packed arrays.

This is the one serialization seam of the project (as diskcache's ``Disk``): structures
above ``storage`` hand over Python values (ints, strings, lists, ``bytes`` of packed
arrays) and get the same values back; they never see msgpack.

Page value layout (LMDB value in the ``pages`` table)::

    offset 0   u64 big-endian  gen      generation (commit number) that wrote the page
    offset 8   u32 big-endian  crc      CRC-32 of bytes 0-7 and 12-end (zlib.crc32)
    offset 12  msgpack array   [kind, kind_version, field, field, ...]

``gen`` sits in a fixed-width header so that a reader can tell whether its decoded copy
of a page is current by reading 8 bytes, without decoding anything (see
:mod:`storage.cache`).  ``crc`` is checked before every decode: LMDB keeps no checksum,
and a flipped bit inside a page's fields would otherwise decode into a valid page with
other ids or constants, that is, wrong matches and no error.  It costs about 1 µs per
4 KB decoded (decoding itself costs 40-60 µs), nothing on a cache hit, and 4 bytes a
page; a mismatch is :class:`~storage.errors.CorruptPage`.  ``kind`` and ``kind_version``
say which structure owns the page and which revision of its layout; a page of an unknown
kind or version is refused with :class:`~storage.errors.CorruptPage` /
:class:`~storage.errors.VersionMismatch`.

Page key layout (LMDB key in the ``pages`` table)::

    offset 0  u32 big-endian  space    the structure that owns the page
    offset 4  u64 big-endian  page id  unique in the whole store, never reused

Keys sort by space then page id, so one structure's pages are one contiguous key range:
its ``check()`` accounts for every page it owns with one cursor walk over keys.

Keys of user-visible tables (subscription ids) are order-preserving bytes: ints are tagged
``0x01`` followed by the value with its sign bit flipped, big-endian; strings are tagged
``0x02`` followed by UTF-8 (which sorts by code point).  ``5`` and ``"5"`` stay distinct.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Any, cast

import msgpack
import numpy as np

from storage.errors import CorruptPage, InvalidInput, StoreDamaged, VersionMismatch

#: Page kinds and the layout revision this code reads and writes.  A structure's module
#: documents the fields of its kinds; bump the version there and here together.
PAGE_KINDS: dict[int, tuple[str, int]] = {
    1: ("pbtree.internal", 1),
    2: ("pbtree.leaf", 1),
    3: ("pbtree.list", 1),
    4: ("betree.lnode", 2),
    6: ("betree.cnode", 1),
}

_GEN = struct.Struct(">Q")
_CRC = struct.Struct(">I")
_HEADER = _GEN.size + _CRC.size
_PAGE_KEY = struct.Struct(">IQ")
#: Bytes of a page key (:func:`page_key`).
PAGE_KEY_SIZE = _PAGE_KEY.size
_SPACE = struct.Struct(">I")
_INT_KEY = struct.Struct(">Q")
_SIGN = 1 << 63
_MAX_U64 = (1 << 64) - 1

_packer = msgpack.Packer(use_bin_type=True)
_packb = _packer.pack


def page_key(space: int, page: int) -> bytes:
    """The LMDB key of ``page`` in ``space``."""
    return _PAGE_KEY.pack(space, page)


def split_page_key(key: bytes) -> tuple[int, int]:
    """``(space, page)`` of a page key."""
    space, page = _PAGE_KEY.unpack(key)
    return space, page


def space_prefix(space: int) -> bytes:
    """The key prefix shared by every page of ``space``."""
    return _SPACE.pack(space)


def encode_page(gen: int, kind: int, fields: list[Any]) -> bytes:
    """Header plus envelope; ``fields`` hold only ints, floats, strings, bytes, lists."""
    head = _GEN.pack(gen)
    envelope = _packb([kind, PAGE_KINDS[kind][1], *fields])
    return head + _CRC.pack(zlib.crc32(envelope, zlib.crc32(head))) + envelope


def page_damage(value: bytes | memoryview) -> str | None:
    """Why a stored page value is not one :func:`encode_page` wrote, or None if its
    header and checksum hold (the envelope is not decoded)."""
    if len(value) <= _HEADER:
        return f"{len(value)} bytes, shorter than a page header"
    found = _CRC.unpack_from(value, _GEN.size)[0]
    if zlib.crc32(value[_HEADER:], zlib.crc32(value[: _GEN.size])) != found:
        return "checksum mismatch"
    return None


def page_gen(value: bytes | memoryview) -> int:
    """The generation in a page's header, read without decoding the envelope (~0.2 µs)."""
    if len(value) < _HEADER:
        raise StoreDamaged(f"a page value of {len(value)} bytes, shorter than a page header")
    return int(_GEN.unpack_from(value)[0])


def decode_page(page: int, value: bytes | memoryview, kind: int) -> tuple[Any, ...]:
    """The fields of a page that must be of ``kind``; refuses anything else.

    Arrays come back as tuples, not lists: the page cache holds decoded pages for the
    life of a process, and CPython's garbage collector stops tracking a tuple of atomic
    values after one collection, never a list (a rich 50K store's cache is mostly
    c-node p-directories: a list a p-node).  Writers copy a page before changing it.

    Cost: the checksum (about 1 µs per 4 KB), then msgpack decodes one Python object per
    field and per key; packed arrays come back as one ``bytes`` each (see
    :func:`unpack_u32`).
    """
    damage = page_damage(value)
    if damage is not None:
        raise CorruptPage(page, damage)
    try:
        envelope = msgpack.unpackb(value[_HEADER:], raw=False, strict_map_key=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise CorruptPage(page, f"undecodable envelope ({exc.__class__.__name__})") from exc
    if not isinstance(envelope, tuple) or len(envelope) < 2:
        raise CorruptPage(page, "envelope is not [kind, version, ...]")
    found_kind, found_version = envelope[0], envelope[1]
    if found_kind != kind:
        want = PAGE_KINDS.get(kind, ("?",))[0]
        got = PAGE_KINDS.get(found_kind, (f"unknown kind {found_kind!r}",))[0]
        raise CorruptPage(page, f"expected a {want} page, found {got}")
    expected = PAGE_KINDS[kind][1]
    if found_version != expected:
        raise VersionMismatch(
            f"page {page}: {PAGE_KINDS[kind][0]} layout version {found_version!r}, "
            f"this bexdb reads version {expected}",
            "open the store with the bexdb release that wrote it, or rebuild it",
        )
    return envelope[2:]


def page_kind_name(value: bytes | memoryview) -> str:
    """The kind of a stored page, reading only the start of its envelope."""
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(bytes(value[_HEADER : _HEADER + 16]))
    try:
        unpacker.read_array_header()
        kind = unpacker.unpack()
    except Exception:  # msgpack raises several unrelated types on garbage
        return "undecodable"
    return PAGE_KINDS.get(kind, (f"unknown kind {kind!r}",))[0]


def pack_u32(values: Any) -> bytes:
    """Native-order uint32 array bytes from any int sequence or numpy array."""
    return np.asarray(values, dtype=np.uint32).tobytes()


def unpack_u32(data: bytes) -> np.ndarray:
    """A read-only uint32 array over ``data``, zero-copy."""
    return np.frombuffer(data, dtype=np.uint32)


def pack_u64(values: Any) -> bytes:
    """Native-order uint64 array bytes (page ids, internal ids)."""
    return np.asarray(values, dtype=np.uint64).tobytes()


def unpack_u64(data: bytes) -> np.ndarray:
    """A read-only uint64 array over ``data``, zero-copy."""
    return np.frombuffer(data, dtype=np.uint64)


def encode_value(value: Any) -> bytes:
    """A small record (root, subscription, atom) as msgpack followed by the CRC-32 of the
    msgpack (u32 big-endian), as pages carry one: a flipped bit in a record otherwise
    decodes into another valid value (an atom's constant, a tree's root page).  Cost:
    about 0.2 µs and 4 bytes a record.  The same bytes serve as keys (atoms are interned
    by theirs): deterministic, so equal values give equal keys."""
    data = _packb(value)
    return data + _CRC.pack(zlib.crc32(data))


def decode_value(data: bytes | memoryview) -> Any:
    """Inverse of :func:`encode_value`; bytes it did not write are :class:`StoreDamaged`."""
    body = data[: -_CRC.size]
    if len(data) <= _CRC.size or _CRC.unpack_from(data, len(body))[0] != zlib.crc32(body):
        raise StoreDamaged(f"a record of {len(data)} bytes fails its checksum")
    try:
        return msgpack.unpackb(body, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise StoreDamaged(f"an undecodable record ({exc.__class__.__name__})") from exc


def pack_part(value: Any) -> bytes:
    """One element of a list record packed alone, for :func:`encode_parts`."""
    return _packb(value)


def pack_pair(first: Any, encoded: bytes) -> bytes:
    """:func:`pack_part` of ``[first, value]`` for the ``value`` that :func:`encode_value`
    encoded as ``encoded``: its msgpack bytes reused, not decoded and packed again (msgpack
    packs canonically, so the bytes are the same); its checksum is checked as
    :func:`decode_value` checks it."""
    body = encoded[: -_CRC.size]
    if len(encoded) <= _CRC.size or _CRC.unpack_from(encoded, len(body))[0] != zlib.crc32(body):
        raise StoreDamaged(f"a record of {len(encoded)} bytes fails its checksum")
    return _packer.pack_array_header(2) + _packb(first) + body


def encode_parts(parts: Sequence[bytes]) -> bytes:
    """:func:`encode_value` of the list whose elements :func:`pack_part` packed, from their
    bytes (msgpack packs a list as a header and its elements): a long list record changed
    in one element costs a join and a checksum, no object an element (4 MB: ~5 ms)."""
    data = _packer.pack_array_header(len(parts)) + b"".join(parts)
    return data + _CRC.pack(zlib.crc32(data))


def encode_values(values: Iterable[Any]) -> list[bytes]:
    """:func:`encode_value` of each of many records."""
    return list(map(encode_value, values))


def encode_format(value: Any) -> bytes:
    """The store's ``format`` meta record: plain msgpack, without the checksum of
    :func:`encode_value`, in every format version, so that any release can read which
    version wrote a store and refuse it by name (VersionMismatch), not as damage."""
    return _packb(value)


def decode_format(data: bytes | memoryview) -> Any:
    """Inverse of :func:`encode_format`."""
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise StoreDamaged(f"an undecodable format record ({exc.__class__.__name__})") from exc


def encode_u64(value: int) -> bytes:
    """Big-endian u64: order-preserving for non-negative ints (counters, internal ids)."""
    return _INT_KEY.pack(value)


def decode_u64(data: bytes | memoryview) -> int:
    """Inverse of :func:`encode_u64`."""
    if len(data) != _INT_KEY.size:
        raise StoreDamaged(f"a u64 key or value of {len(data)} bytes, not 8")
    return int(_INT_KEY.unpack(data)[0])


def encode_u64s(values: Iterable[int]) -> list[bytes]:
    """:func:`encode_u64` of each of many ints."""
    return list(map(_INT_KEY.pack, values))


def decode_u64s(data: Sequence[bytes]) -> np.ndarray:
    """:func:`decode_u64` of each of many 8-byte strings, as one uint64 array."""
    joined = b"".join(data)
    if len(joined) != 8 * len(data):
        raise StoreDamaged("a u64 key or value is not 8 bytes long")
    return np.frombuffer(joined, dtype=">u8").astype(np.uint64)


def encode_id(value: int | str) -> bytes:
    """Order-preserving key for an external id (signed 64-bit int or string)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidInput(f"id must be a string or an integer, not {type(value).__name__}")
    if isinstance(value, str):
        try:
            return b"\x02" + value.encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 (nor JSON) shows it
            raise InvalidInput(
                f"id holds a lone surrogate \\u{ord(value[exc.start]):04x} at character "
                f"{exc.start + 1} (not valid Unicode)"
            ) from None
    if not -_SIGN <= value < _SIGN:
        raise InvalidInput(f"integer id {value} is outside the signed 64-bit range")
    return b"\x01" + _INT_KEY.pack((value + _SIGN) & _MAX_U64)


def int_ids(values: Sequence[int | str]) -> np.ndarray | None:
    """Many ids as one int64 array when all are ints that :func:`encode_id` takes."""
    ints = cast("Sequence[int]", values) if set(map(type, values)) == {int} else []
    if not ints or not -_SIGN <= min(ints) <= max(ints) < _SIGN:
        return None
    return np.array(ints, dtype=np.int64)


def encode_ids(values: Sequence[int | str]) -> list[bytes]:
    """:func:`encode_id` of each of many ids; when all are ints, with numpy (a quarter of
    the time of :func:`encode_id` one by one)."""
    ids = int_ids(values)
    if ids is None:
        return list(map(encode_id, values))
    n = len(ids)
    keys = np.empty((n, 9), dtype=np.uint8)
    keys[:, 0] = 1
    flipped = ids.view(np.uint64) ^ np.uint64(_SIGN)
    keys[:, 1:] = flipped.astype(">u8").view(np.uint8).reshape(n, 8)
    data = keys.tobytes()
    return [data[i : i + 9] for i in range(0, len(data), 9)]


def decode_int_ids(data: Sequence[bytes]) -> np.ndarray | None:
    """:func:`decode_id` of many keys as one int64 array, when all are int ids' keys."""
    joined = b"".join(data)
    if len(joined) != 9 * len(data):
        return None
    rows = np.frombuffer(joined, dtype=np.uint8).reshape(len(data), 9)
    if not np.all(rows[:, 0] == 1):
        return None
    flipped = np.ascontiguousarray(rows[:, 1:]).view(">u8").ravel().astype(np.uint64)
    return (flipped ^ np.uint64(_SIGN)).view(np.int64)


def decode_id(data: bytes | memoryview) -> int | str:
    """Inverse of :func:`encode_id`."""
    raw = bytes(data)
    if raw[:1] == b"\x02":
        try:
            return raw[1:].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise StoreDamaged(f"an id key that is not UTF-8 ({exc.reason})") from exc
    if raw[:1] == b"\x01" and len(raw) == 9:
        return int(_INT_KEY.unpack(raw[1:])[0]) - _SIGN
    raise StoreDamaged(f"undecodable id key {raw[:40]!r}")
