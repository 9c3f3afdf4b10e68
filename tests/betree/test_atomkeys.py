"""``betree.disk.atomkeys``: order atoms' store keys read as columns in numpy must give what
decoding each key gives (``codec.decode_value``), read every key of the one-comparison shape
whose constant numpy holds, and leave every other key (other shapes, bools, strings, ints
past int64, damaged keys) to the caller."""

from __future__ import annotations

import random
import zlib
from typing import Any

import numpy as np
import pytest

from betree.checking.atomrecords import ChunkedKeys
from betree.disk import atomkeys
from pbtree.operators import OPERATORS, SLOT
from storage import codec
from storage.errors import StoreDamaged

EDGES: list[Any] = [
    0, 1, -1, 127, 128, -32, -33, 255, 256, -128, -129, 65535, 65536, -32768, -32769,
    2**32 - 1, 2**32, -(2**31), -(2**31) - 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1,
    1.5, -0.0, 0.0, 1.8e308, -1.8e308, float("inf"), 5e-324, True, False, "x", "", None,
]  # fmt: skip
NAMES = ["a0", "a13", "ü", "", "x" * 31, "y" * 32, "日本語"]


def decoded(key: bytes) -> Any:
    try:
        return codec.decode_value(key)
    except StoreDamaged:
        return None


def one_comparison(t: Any) -> bool:
    """Whether a decoded key is of the shape the columns read."""
    if t is None or t[0] != "order" or len(t[2]) != 1 or len(t[1].encode()) >= 32:
        return False
    if t[2][0][0] not in SLOT:
        return False
    c = t[2][0][1]
    return type(c) is float or (type(c) is int and -(2**63) <= c < 2**63)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_parse_agrees_with_decoding(seed: int) -> None:
    rng = random.Random(seed)
    tuples: list[Any] = []
    for _ in range(3000):
        c = rng.choice(EDGES) if rng.random() < 0.5 else rng.randint(-(10**15), 10**15)
        if rng.random() < 0.1:
            c = rng.uniform(-1e9, 1e9)
        tuples.append(("order", rng.choice(NAMES), ((rng.choice(list(SLOT)), c),)))
    tuples += [
        ("order", "a", (("<", 1), (">", 0))),
        ("order", "a", (("=", 1), ("=", 2))),
        ("test", "a", "x"),
        ("order", "a", ()),
        ["order", "a", [["~", 1]]],
    ]
    keys = [codec.encode_value(t) for t in tuples]
    damaged = [k[:-1] + bytes([k[-1] ^ 1]) for k in keys[:50]]
    damaged += [k[: len(k) // 2] for k in keys[50:100]] + [b"", b"\x93"]
    keys += damaged
    rng.shuffle(keys)
    cols = atomkeys.parse(keys)
    for i, key in enumerate(keys):
        t = decoded(key)
        if cols.ok[i]:
            c = float(cols.floats[i]) if cols.is_float[i] else int(cols.ints[i])
            op = OPERATORS[int(cols.code[i])]
            assert [t[0], t[1], t[2]] == ["order", cols.names[cols.attr[i]], [[op, c]]]
            assert type(t[2][0][1]) is type(c) and str(t[2][0][1]) == str(c)  # -0.0, ints
        else:
            assert not one_comparison(t), t
            assert cols.attr[i] == -1
    assert cols.ok.sum() > 1000


def test_crc_rows_is_zlibs() -> None:
    rng = np.random.default_rng(5)
    for shape in [(200, 37), (3, 5000), (0, 9), (1, 1)]:  # the column loop, then zlib's
        mat = rng.integers(0, 256, size=shape, dtype=np.uint8)
        want = [zlib.crc32(row.tobytes()) for row in mat]
        assert atomkeys.crc32_rows(mat).tolist() == want
        assert atomkeys.crc32_rows(mat[:, ::-1]).tolist() == [  # a strided view
            zlib.crc32(row[::-1].tobytes()) for row in mat
        ]
        prior = zlib.crc32(b"\x93\xa5order")  # (the CRC of bytes before every row)
        assert atomkeys.crc32_rows(mat, prior).tolist() == [
            zlib.crc32(b"\x93\xa5order" + row.tobytes()) for row in mat
        ]


def test_parse_of_nothing() -> None:
    cols = atomkeys.parse([])
    assert len(cols.ok) == 0 and cols.names == []


def test_flat_keys_compare_byte_for_byte() -> None:
    """``FlatKeys.equal``: a key equals another only byte for byte, whatever its length (empty,
    one byte, a megabyte), a byte changed anywhere (first, middle, last) or a length that
    differs; ``parse`` of a ``FlatKeys`` reads what it reads of the list; ``take`` of rows
    gives the keys at them, whole or in chunks."""
    rng = random.Random(7)
    keys = [b"", b"a", b"ab", bytes(range(256)), b"x" * (1 << 20)]
    keys += [codec.encode_value(("order", f"a{i % 7}", ((">=", rng.randrange(-(2**40), 2**40)),)))
             for i in range(300)]  # fmt: skip
    table = atomkeys.FlatKeys(keys)
    assert len(table) == len(keys) and table[3] == keys[3] and table[1:3] == keys[1:3]
    at = np.array([rng.randrange(len(keys)) for _ in range(2000)], dtype=np.int64)
    others = []
    for i in at.tolist():
        key, how = keys[i], rng.randrange(5)
        if how == 1 and key:  # a byte changed: first, last or anywhere
            j = rng.choice([0, len(key) - 1, rng.randrange(len(key))])
            key = key[:j] + bytes([key[j] ^ (1 << rng.randrange(8))]) + key[j + 1 :]
        elif how == 2:
            key = key + b"\0"
        elif how == 3 and key:
            key = key[:-1]
        others.append(key)
    got = table.equal(at, atomkeys.FlatKeys(others))
    want = [keys[i] == o for i, o in zip(at.tolist(), others, strict=True)]
    assert got.tolist() == want and 0 < sum(want) < len(want)
    parts = [atomkeys.FlatKeys(keys[a:b]) for a, b in ((0, 2), (2, 2), (2, 100), (100, None))]
    joined = atomkeys.FlatKeys.joined(parts)  # (read in chunks: the same keys)
    assert list(joined) == keys and joined.equal(at, atomkeys.FlatKeys(others)).tolist() == want
    assert len(atomkeys.FlatKeys.joined([])) == 0
    rows = at.tolist()
    taken = [keys[i] for i in rows]  # (taking by rows: whole, in chunks, from a list)
    assert table.take(at) == taken and table.take([]) == [] and joined.take(rows) == taken
    assert ChunkedKeys(parts).take(rows) == taken == atomkeys.take_keys(keys, rows)
    assert atomkeys.take_keys(ChunkedKeys(parts), rows[::-1]) == taken[::-1]
    a, b = atomkeys.parse(keys[5:]), atomkeys.parse(atomkeys.FlatKeys(keys[5:]))
    assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("ok", "attr", "code", "ints"))
    assert a.names == b.names and a.ok.all()


@pytest.mark.parametrize("seed", range(4))
def test_key_order_is_the_bytes_order(seed: int) -> None:
    """``key_order`` sorts one-comparison int and float keys as bytes (LMDB's order):
    constants of every msgpack form (fixints of both signs, each width, int64's ends,
    float64s of both signs, subnormal and huge), attribute names
    of different lengths and scripts, every operator; any other key leaves it to the
    caller (None)."""
    rng = random.Random(seed)
    ints = [v for v in EDGES if type(v) is int and -(2**63) <= v < 2**63]
    ints += [
        rng.randint(-(2 ** rng.randint(1, 63)), 2 ** rng.randint(1, 63) - 1) for _ in range(300)
    ]
    names = [n for n in NAMES if len(n.encode()) < 32]
    made = {
        codec.encode_value(
            ("order", rng.choice(names), ((rng.choice(list(SLOT)), rng.choice(ints)),))
        )
        for _ in range(2000)
    }
    keys = list(made)
    rng.shuffle(keys)
    order = atomkeys.key_order(atomkeys.parse(keys))
    assert order is not None
    assert [keys[i] for i in order.tolist()] == sorted(keys)
    # constants of a narrower range (one int64 sort key, not the two-key sort): the same
    narrow = [k for k in keys if abs(int(atomkeys.parse([k]).ints[0])) < 2**40]
    assert len(narrow) > 500
    order = atomkeys.key_order(atomkeys.parse(narrow))
    assert order is not None and [narrow[i] for i in order.tolist()] == sorted(narrow)
    # float64 constants beside the ints (one attribute's both kinds: by tag, then bits)
    reals = [0.5, -0.5, 5e-324, -5e-324, 1.8e308, -1.8e308, 2.0**63, -(2.0**63)]
    reals += [rng.uniform(-1e9, 1e9) for _ in range(300)]
    mixed = list(
        made
        | {
            codec.encode_value(("order", rng.choice(names), ((rng.choice(list(SLOT)), c),)))
            for c in reals
        }
    )
    rng.shuffle(mixed)
    order = atomkeys.key_order(atomkeys.parse(mixed))
    assert order is not None and [mixed[i] for i in order.tolist()] == sorted(mixed)
    other = ("order", "a0", ((">", 1), ("<", 3)))
    assert atomkeys.key_order(atomkeys.parse([*keys, codec.encode_value(other)])) is None
    assert atomkeys.key_order(atomkeys.parse([])) is None


def test_test_of_key_agrees_with_decoding() -> None:
    """A test atom's attribute and test name read from its key's bytes are the decoded
    key's, for names of the msgpack string headers it reads (fixstr, str8, str16, non-ASCII)
    and arguments of every shape; a name past str16 and any other key (order atoms, other
    arrays) give None (the caller decodes them)."""
    rng = random.Random(5)
    names = [*NAMES, "z" * 255, "w" * 256, "v" * 70000]
    args: list[Any] = [None, "abc", ["a", "b"], [1.5, -2.0, 30.0], 7, {"k": 1}, ""]
    tests = ["one_of", "geo_within_radius", "segment_within", "bool_true", "x" * 40, "日"]
    seen = 0
    for attr in names:
        for test in tests:
            key = codec.encode_value(["test", attr, test, rng.choice(args)])
            long = len(attr.encode()) >= 1 << 16
            assert atomkeys.test_of_key(key) == (None if long else (attr, test))
            seen += not long
    for key in (
        codec.encode_value(["order", "a", [["=", "x"]]]),
        codec.encode_value(["test", "a", "one_of"]),  # (three elements: not a test's)
        codec.encode_value(["test", 3, "one_of", None]),
        codec.encode_value(["test", "a", 4, None]),
        codec.encode_value(["tests", "a", "one_of", None]),
        b"",
        b"\x94\xa4test",
    ):
        assert atomkeys.test_of_key(key) is None, key
    assert seen == (len(names) - 1) * len(tests)
