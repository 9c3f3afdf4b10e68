"""Subscription metadata (SPEC section 11, "Metadata"): an opaque JSON object that a
subscription may carry, stored beside it and returned with it, never read by matching.

What is stored (:mod:`betree.disk.catalog`, namespace :data:`betree.disk.catalog.META`): the
subscription's id key (:func:`storage.codec.encode_id`) -> the object as compact JSON
text (``json.dumps(meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``,
a string under the record's checksum), only for subscriptions that have one.  Keyed by
the id key so that a match's ids find their objects with one get each; JSON text so that
integers past 64 bits and nesting come back exactly as sent, and what is returned is the
text stored.  A subscription replaced without metadata loses the old one (the record is
replaced whole); a deleted one loses it too.

Bound, per subscription and enforced per record (a reject naming the record, exit 3,
HTTP 400): :data:`MAX_BYTES` (64 KiB) of that text as UTF-8, nested at most
:data:`MAX_NESTING` deep (so that the record line holding it stays within
:data:`betree.formats.jsonl.MAX_DEPTH`); numbers JSON can show (no NaN or infinities) and
valid Unicode (no lone surrogates).  ``null`` is the same as no metadata.

Cost: one ``json.dumps`` and a walk of the object per write; one get per id read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from betree.disk import catalog
from betree.disk.catalog import SubId
from betree.formats.jsonl import MAX_DEPTH
from storage import codec
from storage.errors import InvalidInput, StoreDamaged
from storage.txn import ReadTxn

#: The most bytes a subscription's metadata may take, as compact UTF-8 JSON.
MAX_BYTES = 64 * 1024
#: The deepest nesting of arrays and objects in metadata (the object itself is 1).
MAX_NESTING = MAX_DEPTH - 1


class Meta(str):
    """Metadata validated and encoded (:func:`meta_text`): its compact JSON text."""

    __slots__ = ()


def meta_text(meta: object) -> Meta:
    """``meta`` validated against the bound and encoded; :class:`InvalidInput` saying why
    it cannot be stored.  Text already encoded (a :class:`Meta`) is returned as it is."""
    if isinstance(meta, Meta):
        return meta
    if not isinstance(meta, Mapping):
        raise InvalidInput(f"meta must be a JSON object, not {_kind(meta)}")
    depth = _nesting(meta)
    if depth > MAX_NESTING:
        raise InvalidInput(f"meta is nested deeper than {MAX_NESTING} levels")
    try:
        text = json.dumps(meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:  # NaN, infinities, an integer past Python's digit limit
        raise InvalidInput(f"meta holds a value JSON cannot show ({exc})") from None
    except TypeError as exc:  # (from the Python API: a set, bytes, ...)
        raise InvalidInput(f"meta holds a value that is not JSON ({exc})") from None
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(
            f"meta holds a lone surrogate \\u{ord(text[exc.start]):04x} (not valid Unicode)"
        ) from None
    if size > MAX_BYTES:
        raise InvalidInput(
            f"meta is {size:,} bytes of JSON, more than the {MAX_BYTES:,} allowed (docs/meta.md)"
        )
    return Meta(text)


def item_meta(item: Sequence[Any]) -> Meta | None:
    """The metadata of a write's item ``(id, expr)`` or ``(id, expr, meta)``, encoded; an
    error names the subscription."""
    if len(item) < 3 or item[2] is None:
        return None
    try:
        return meta_text(item[2])
    except InvalidInput as exc:
        raise InvalidInput(f"subscription {item[0]!r}: {exc.message}") from None


def loads(text: str | None) -> Any:
    """Stored metadata text as its JSON value (None for none)."""
    return None if text is None else json.loads(text)


def _nesting(value: object) -> int:
    """How deeply ``value`` nests arrays and objects (iterative: any depth is measured)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            inner: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            inner = item
        else:
            continue
        deepest = max(deepest, depth)
        if depth <= MAX_NESTING:
            stack.extend((v, depth + 1) for v in inner)
    return deepest


def _kind(value: object) -> str:
    if value is None:
        return "null"
    kinds = {list: "an array", tuple: "an array", str: "a string", bool: "a boolean"}
    return kinds.get(type(value), "a number" if isinstance(value, int | float) else "a value")


# -- reading -----------------------------------------------------------------------------------


def with_metas(
    txns: Sequence[ReadTxn], route: Callable[[SubId], int] | None, results: Sequence[Any]
) -> list[Any]:
    """Each matched result (a list of ids; an error is kept) as ``(id, metadata text or
    None)`` pairs, read in ``txns`` (one per shard: ``route`` names an id's, None: any
    may hold it).  Cost: one get per distinct id of the batch (none when no store holds
    metadata): events of a batch often match the same subscriptions."""
    held = any(map(catalog.has_metas, txns))
    found: dict[SubId, str | None] = {}  # (ids are never bools: 1 and "1" are two keys)
    out: list[Any] = []
    for ids in results:
        if not isinstance(ids, list):
            out.append(ids)
            continue
        pairs = []
        for ident in ids:
            if ident in found:
                pairs.append((ident, found[ident]))
                continue
            text = None
            for txn in (txns if route is None else [txns[route(ident)]]) if held else ():
                text = catalog.load_meta(txn, ident)
                if text is not None:
                    break
            found[ident] = text
            pairs.append((ident, text))
        out.append(pairs)
    return out


def check_metas(txn: ReadTxn) -> list[str]:
    """Violations of the ``meta`` records: each keyed by the id of a subscription (an
    ``ext`` record), holding JSON text of an object within :data:`MAX_BYTES`."""
    errors = []
    for key, value in txn.scan(catalog.META):
        try:
            shown = repr(codec.decode_id(key))
        except StoreDamaged:
            shown = f"key {key[:40]!r}"
        where = f"metadata of {shown}"
        if txn.get(catalog.EXT, key) is None:
            errors.append(f"{where}: no such subscription (a record left behind, or a damaged key)")
        try:
            text = codec.decode_value(value)
            doc = json.loads(text) if isinstance(text, str) else None
        except (StoreDamaged, ValueError) as exc:
            errors.append(f"{where}: unreadable ({exc})")
            continue
        if not isinstance(doc, dict):
            errors.append(f"{where}: not the JSON text of an object")
        elif len(text.encode("utf-8", "replace")) > MAX_BYTES:
            errors.append(f"{where}: larger than the bound of {MAX_BYTES:,} bytes")
    return errors
