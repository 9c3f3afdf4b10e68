"""The check's pass over the atom catalog: the reverse (``aid``) records read a chunk at a
time, and every atom record compared with its reverse record and its reference count.

Why its own pass: at 100K dense subscriptions the catalog holds ~2M atoms; read whole, its
keys as Python bytes and their parse's temporaries were ~400 MB of the check's heap.  Here
each chunk of reverse records is parsed into columns (:func:`parse`) and hashed as it is
read, so the parse's temporaries are a chunk's; every atom record is compared with its
reverse record by those hashes (8 bytes an atom).  The keys themselves are held end to end
(:class:`FlatKeys`, ~50 bytes an atom) only when some do not read as columns, for the
spans (a dense store's: none held, boundload46; 1M dense, ~0.9 GB).  After
the pass an atom's key is read from the store when a message needs it (:class:`AidReader`).
The atoms not read as columns (rich rules' strings, lists, tests) are held as an attribute
number and an order flag each (:class:`OtherAtoms`, from their keys' bytes); the check
decodes their entries again one attribute at a time, when it compares that attribute's
PB+tree (held all at once through the check, rich 200K's were ~320 MB).

Cost: one scan of each namespace; numpy per chunk (~0.5 µs a record for the scan).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from betree.disk import catalog, grid
from betree.disk.atomkeys import (
    AtomKeys,
    FlatKeys,
    OrderKeys,
    attr_of_order_key,
    attr_of_test_key,
    parse,
    parse_int_pairs,
    take_keys,
)
from betree.disk.atomspans import held_entries
from betree.lang.atoms import Atom, atom_from_tuple
from betree.lang.schema import Schema
from storage import codec
from storage.txn import ReadTxn

#: records read (and parsed) at once (a chunk's Python bytes and parse are the pass's
#: temporaries: 256K records left ~70 MB more of the C heap at 100K dense than 64K)
CHUNK = 1 << 16
_I64 = 1 << 63


def aid_records(
    txn: ReadTxn, *, hold: bool = False
) -> tuple[AtomKeys, OrderKeys | None, np.ndarray]:
    """The reverse records: atom ids ascending with their keys, the keys read as columns
    (None when the ids were not ascending, which LMDB's order rules out unless keys are
    damaged: the caller parses them whole, in id order) and a hash of each key (what the
    atom records' pass compares, :func:`scan_atoms`).

    The keys are held end to end (~46 bytes an atom) only when some key does not read as
    columns (rich rules' atoms, whose spans decode them) or ``hold``; a store's whose every
    key does (a dense store's) are read from the store when asked (:class:`StoredKeys`:
    ~0.9 GB not held at 1M dense).  A chunk all of whose keys read as columns is let go
    as read; if a later one does not, the keys are read again, once."""
    ids: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    flats: list[FlatKeys] = []
    cols: list[OrderKeys] = []
    hashes: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    dropped = False
    for keys, values in txn.scan_chunks(catalog.AID, CHUNK):
        ids.append(codec.decode_u64s(keys).astype(np.int64))
        hashes.append(key_hashes(values))
        flat = FlatKeys(values)
        cols.append(parse(flat))
        if hold or flats or not bool(cols[-1].ok.all()):
            flats.append(flat)
        else:
            dropped = True
        del keys, values, flat
        txn.store.release_mapped_pages()  # (the chunk's pages, read once)
    aids = np.concatenate(ids)
    if flats and dropped:  # (a mixed store: its keys read again, every one held)
        flats = [FlatKeys(values) for _, values in txn.scan_chunks(catalog.AID, CHUNK)]
    held: Sequence[bytes] = ChunkedKeys(flats) if flats else StoredKeys(txn, aids)
    hashed = np.concatenate(hashes)
    if len(aids) and not bool(np.all(aids[1:] > aids[:-1])):
        order = np.argsort(aids, kind="stable")
        ordered = FlatKeys([held[i] for i in order.tolist()])
        return AtomKeys(ordered, aids[order]), None, hashed[order]
    return AtomKeys(held, aids), _joined(cols), hashed


def key_hashes(keys: Sequence[bytes]) -> np.ndarray:
    """Python's hash of each key, as int64 (equal keys, equal hashes; two keys that differ
    share one with odds of ~2**-64: the atom records' pass compares these, not the keys)."""
    return np.fromiter(map(hash, keys), dtype=np.int64, count=len(keys))


class ChunkedKeys(Sequence[bytes]):
    """Keys held as the chunks they were read in (:class:`FlatKeys` each): joining them
    would hold every key twice for a moment (~100 MB at 2M atoms)."""

    def __init__(self, parts: list[FlatKeys]) -> None:
        self.parts = parts
        self.firsts = np.cumsum([0, *map(len, parts)])  # each chunk's first key's position

    def __len__(self) -> int:
        return int(self.firsts[-1])

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i) + (len(self) if i < 0 else 0)
        if not 0 <= i < len(self):
            raise IndexError(i)
        part = int(np.searchsorted(self.firsts, i, side="right")) - 1
        return self.parts[part][i - int(self.firsts[part])]

    def take(self, rows: Sequence[int]) -> list[bytes]:
        """:meth:`FlatKeys.take`, chunk by chunk (``rows`` in range)."""
        at = np.asarray(rows, dtype=np.int64)
        part = np.searchsorted(self.firsts, at, side="right") - 1
        out: list[bytes] = [b""] * len(at)
        for c in np.unique(part).tolist():
            sel = np.flatnonzero(part == c)
            keys = self.parts[c].take(at[sel] - self.firsts[c])
            for j, key in zip(sel.tolist(), keys, strict=True):
                out[j] = key
        return out

    def equal(self, at: np.ndarray, keys: FlatKeys) -> np.ndarray:
        """:meth:`FlatKeys.equal`, chunk by chunk."""
        part = np.searchsorted(self.firsts, at, side="right") - 1
        same = np.zeros(len(at), dtype=bool)
        for c in np.unique(part).tolist():
            rows = np.flatnonzero(part == c)
            these = FlatKeys([])  # (a view of the rows of ``keys``: their bytes not copied)
            these.lens, these.starts, these.flat = keys.lens[rows], keys.starts[rows], keys.flat
            same[rows] = self.parts[c].equal(at[rows] - self.firsts[c], these)
        return same


def _joined(parts: list[OrderKeys]) -> OrderKeys:
    """Chunks' columns as one, their attributes renumbered into one list of names."""
    names: dict[str, int] = {}
    attrs = [np.zeros(0, dtype=np.int64)]
    for part in parts:
        renumber = [names.setdefault(name, len(names)) for name in part.names]
        attrs.append(np.array([*renumber, -1], dtype=np.int64)[part.attr])

    def column(name: str, dtype: Any) -> np.ndarray:
        return np.concatenate([np.zeros(0, dtype=dtype), *(getattr(p, name) for p in parts)])

    return OrderKeys(
        ok=column("ok", bool),
        attr=np.concatenate(attrs),
        names=list(names),
        code=column("code", np.int8),
        is_float=column("is_float", bool),
        ints=column("ints", np.int64),
        floats=(  # (no float constant: zeros left untouched, not resident: 160 MB at 1M dense)
            column("floats", np.float64)
            if any(bool(p.is_float.any()) for p in parts)
            else np.zeros(sum(len(p.ok) for p in parts), dtype=np.float64)
        ),
    )


class AidReader(Mapping[int, bytes]):
    """Atom ids -> their keys, read from the reverse records when asked (for messages):
    nothing held."""

    def __init__(self, txn: ReadTxn) -> None:
        self.txn = txn

    def __getitem__(self, aid: int) -> bytes:
        key = self.txn.get(catalog.AID, codec.encode_u64(aid)) if 0 <= aid < 1 << 64 else None
        if key is None:
            raise KeyError(aid)
        return key

    def __iter__(self) -> Iterator[int]:
        return (codec.decode_u64(key) for key, _ in self.txn.scan(catalog.AID))

    def __len__(self) -> int:
        return sum(1 for _ in self.txn.scan(catalog.AID))


class StoredKeys(Sequence[bytes]):
    """The keys of the reverse records of ascending ids ``ids``, read from the store when
    asked (``keys[i]``: atom ``ids[i]``'s): for the spans of a store whose every key was
    read as columns, which read none of them, after the keys held were compared."""

    def __init__(self, txn: ReadTxn, ids: np.ndarray) -> None:
        self.reader = AidReader(txn)
        self.ids = ids

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return self.reader[int(self.ids[i])]


@dataclass
class Scanned:
    """What the atom records' pass found: its messages, the atoms whose reverse record does
    not lead back (by id, rebuilt from their keys), the ``(id, count)`` of records whose
    count or id is wrong, and the live atom ids (ascending, unique)."""

    errors: list[str] = field(default_factory=list)
    stray: dict[int, Atom] = field(default_factory=dict)
    wrong: list[tuple[Any, Any]] = field(default_factory=list)
    live: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def scan_atoms(
    txn: ReadTxn, rec: dict[str, Any], aids: AtomKeys, found: np.ndarray, hashes: np.ndarray
) -> Scanned:
    """Every atom record, a chunk at a time: its reverse record leads back to it (its key's
    hash is the reverse record's key's, ``hashes`` by position in ``aids``), its count is
    its uses ``found`` per atom id, its id below the counter."""
    out = Scanned()
    known = aids.ids if aids.ids is not None else np.arange(1, len(aids) + 1, dtype=np.int64)
    locate = _locator(known)
    parts: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
    for atom_keys, atom_values in txn.scan_chunks(catalog.ATOM, CHUNK):
        pairs: Any
        pairs, read = parse_int_pairs(atom_values)
        if not read.all():  # damage: decoded one by one, as found
            pairs = list(map(codec.decode_value, atom_values))
            named = [aid for aid, _ in pairs]
            ids = np.array(
                [a if type(a) is int and -_I64 <= a < _I64 else -1 for a in named], dtype=np.int64
            )
        else:
            ids = pairs[:, 0]
            named = ids.tolist()
        # the aid record leads back to this one: the common case, found in one pass
        at, back = locate(ids)
        if back.any():
            back &= hashes[at] == key_hashes(atom_keys)
        for j in np.flatnonzero(~back).tolist():
            aid = named[j]
            out.stray[aid] = atom_from_tuple(codec.decode_value(atom_keys[j]))
            out.errors.append(f"atom {aid}: reverse record missing or wrong")
        wrong = _wrong_counts(pairs, found, rec["next_atom"])
        out.wrong.extend((named[j], pairs[j][1]) for j in wrong)
        parts.append(ids)
        del atom_keys, atom_values, pairs, named
        txn.store.release_mapped_pages()
    live = np.concatenate(parts)
    del parts
    live = np.sort(live[live >= 0])  # (np.unique hashes: 3 s for 2M ints)
    out.live = live[np.concatenate(([True], live[1:] != live[:-1]))] if len(live) else live
    return out


def _locator(ids: np.ndarray) -> Any:
    """A function of atom ids to their places among ``ids`` (ascending) and whether each is
    there: a table of places when the ids are dense (a bulk-built store's 1..n: no binary
    search of two million ids in random order, ~1 s), else ``searchsorted``."""
    if not len(ids):
        return lambda aids: (np.zeros(len(aids), np.int64), np.zeros(len(aids), dtype=bool))
    top = int(ids[-1])
    if int(ids[0]) >= 0 and top < 4 * len(ids) + 1024:
        table = np.full(top + 1, -1, dtype=np.int64)
        table[ids] = np.arange(len(ids), dtype=np.int64)

        def dense(aids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            inside = (aids >= 0) & (aids <= top)
            at = table[np.where(inside, aids, 0)]
            found = inside & (at >= 0)
            return np.where(found, at, 0), found

        return dense

    def sparse(aids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        at = np.minimum(np.searchsorted(ids, aids), len(ids) - 1)
        return at, ids[at] == aids

    return sparse


def _wrong_counts(pairs: list[Any], found: np.ndarray, next_atom: int) -> list[int]:
    """Positions of the ``(atom id, reference count)`` records whose count is not the
    uses ``found`` per atom id or whose id is not below ``next_atom``: with numpy when the
    records hold plain ints (always, unless damaged), else every position (checked one
    by one by the caller)."""
    try:
        table = np.asarray(pairs, dtype=np.int64).reshape(len(pairs), 2)
    except (TypeError, ValueError, OverflowError):
        return list(range(len(pairs)))
    aid, refs = table[:, 0], table[:, 1]
    uses = np.zeros(len(aid), dtype=np.int64)
    known = (aid >= 0) & (aid < len(found))
    uses[known] = found[aid[known]]
    wrong = (aid < 0) | (aid >= next_atom) | (refs != uses)
    return np.flatnonzero(wrong).tolist()


@dataclass
class OtherAtoms:
    """The atoms not read as columns (rich rules' in-lists, strings, tests), ascending ids:
    per atom its attribute's number in ``names`` and whether its key holds entries (an
    order atom's), read from the key's bytes (decoded only when the bytes do not say):
    ~17 bytes an atom, where their attributes and decoded entries, held through the
    check, were ~320 MB at rich 200K.  The entries are decoded again an attribute at a
    time (:meth:`entries`)."""

    ids: np.ndarray
    attr: np.ndarray
    order: np.ndarray
    names: list[str]
    kinds: dict[str, str]

    def attr_of(self, aid: int) -> str | None:
        """Atom ``aid``'s attribute (None: not one of these)."""
        at = int(np.searchsorted(self.ids, aid))
        if at == len(self.ids) or int(self.ids[at]) != aid:
            return None
        return self.names[int(self.attr[at])]

    def among(self, aids: np.ndarray) -> np.ndarray:
        """Where those of ``aids`` (ascending) that are these are, in these."""
        at = np.searchsorted(self.ids, aids)
        inside = at < len(self.ids)
        at = at[inside]
        return at[self.ids[at] == aids[inside]]

    def entries(self, keys: Mapping[int, bytes], rows: np.ndarray) -> Iterator[tuple[int, Any]]:
        """``(id, entries)`` of the atoms at ``rows``, each key read from ``keys`` and
        decoded (entries None: not an order atom)."""
        for aid in self.ids[rows].tolist():
            yield aid, held_entries(self.kinds, codec.decode_value(keys[aid]))


def other_atoms(schema: Schema, keys: AtomKeys, skip: np.ndarray) -> OtherAtoms:
    """:class:`OtherAtoms` of the atoms of ``keys`` whose ids are not in ``skip``."""
    n = len(keys.held)
    ids = keys.ids if keys.ids is not None else np.arange(1, n + 1, dtype=np.int64)
    rows = np.searchsorted(ids, absent(ids, skip))  # (ids ascending, unique; no isin temporaries)
    kinds = {name: grid.kind_of(spec.type) for name, spec in schema.attributes.items()}
    names: dict[str, int] = {}
    number = names.setdefault
    attr = np.empty(len(rows), dtype=np.int64)
    order = np.zeros(len(rows), dtype=bool)
    for j, key in enumerate(take_keys(keys.held, rows.tolist())):
        name = attr_of_test_key(key)
        if name is None:
            name = attr_of_order_key(key)
            if name is not None:
                order[j] = True
            else:  # (another kind of key, or a long name: decoded)
                t = codec.decode_value(key)
                name, order[j] = t[1], held_entries(kinds, t) is not None
        attr[j] = number(name, len(names))
    return OtherAtoms(ids[rows], attr, order, list(names), kinds)


def absent(values: np.ndarray, among: np.ndarray) -> np.ndarray:
    """``np.setdiff1d(values, among, assume_unique=True)`` of unique ``values``, by binary
    search in ``among`` a chunk of ``values`` at a time when ``among`` is ascending (the
    check's atom ids): ``setdiff1d`` sorts both together, ~50 bytes of temporaries an
    element (~1 GB for 1M dense's 20M atoms); here a chunk's."""
    if len(among) > 1 and not bool(np.all(among[1:] > among[:-1])):
        return np.setdiff1d(values, among, assume_unique=True)
    parts = [values[:0]]
    for start in range(0, len(values), CHUNK):
        part = values[start : start + CHUNK]
        at = np.minimum(np.searchsorted(among, part), max(len(among) - 1, 0))
        inside = among[at] == part if len(among) else np.zeros(len(part), dtype=bool)
        parts.append(part[~inside])
    return np.concatenate(parts)
