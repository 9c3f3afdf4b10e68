"""Verifying a store, plain or sharded, as ``bexdb verify`` does: the files read for damage,
then each index's own ``check()``, and for a sharded store the manifest against its shards
(counts, one schema, every id in the shard its hash names).

Cost: one walk of every data file, one ``check()`` per shard (see :meth:`Index.check`),
and for hash-partitioned stores one scan of each shard's id map.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

from betree.disk.catalog import EXT
from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.manifest import is_routed, is_sharded, read_manifest, shard_of
from storage.errors import BexdbError, CheckFailed, StoreDamaged, StoreError
from storage.lmdbfile import damage as file_damage
from storage.lmdbfile import data_file


def verify(path: str | os.PathLike[str]) -> dict[str, int]:
    """Every check of a plain store, or of every shard and the manifest of a sharded one.

    Raises :class:`CheckFailed` listing all violations (damage found reading the files:
    a data file shorter than its header says, pages or records failing their checksums,
    LMDB errors; a missing or unreadable shard or manifest, a shard whose subscription
    count or schema disagrees with the manifest and the first shard, and each shard's own
    check failures, prefixed with its name).  Returns counts.
    """
    if not is_sharded(path):
        violations, count = _store_violations(Path(path))
        if violations or count is None:
            raise CheckFailed(f"store {path}", violations)
        return {"shards": 0, "subscriptions": count}
    try:
        manifest = read_manifest(path)
    except StoreError as exc:
        raise CheckFailed(f"sharded store {path}", [exc.message]) from exc
    violations, total = shard_violations(Path(path), manifest)
    if violations:
        raise CheckFailed(f"sharded store {path}", violations)
    return {"shards": len(manifest["shards"]), "subscriptions": total}


def _misrouted(index: Index, shard: int, names: list[str], limit: int = 20) -> list[str]:
    """Ids in ``index`` (shard ``shard``) that :func:`shard_of` puts in another shard
    (``names``: the manifest's shard directories, in its order)."""
    with index.store.read() as txn:
        keys, _ = txn.scan_all(EXT)
    wrong = [key for key in keys if shard_of(key, len(names)) != shard]
    out = [
        f"id key {key[:40]!r} belongs in {names[shard_of(key, len(names))]} by the manifest's hash"
        for key in wrong[:limit]
    ]
    if len(wrong) > limit:
        out.append(f"... and {len(wrong) - limit} more ids in the wrong shard")
    return out


def misplaced(indexes: list[Index], names: list[str]) -> str | None:
    """A shard holding another shard's ids, found from each shard's first id: the
    manifest's shards out of order (directories swapped or renamed by hand), which would
    send writes and lookups by id to the wrong shard.  Cost: one cursor seek a shard."""
    for i, index in enumerate(indexes):
        with index.store.read() as txn:
            first = next(txn.scan(EXT), None)
        if first is not None and shard_of(first[0], len(names)) != i:
            return (
                f"shard {names[i]} holds ids that belong in "
                f"{names[shard_of(first[0], len(names))]} by the manifest's hash: "
                "the manifest lists its shards out of order"
            )
    return None


def _opened(path: Path, index: Index | None) -> AbstractContextManager[Index]:
    """``index`` (open already: LMDB opens an environment once per process), else ``path``
    opened read-only for the block."""
    return nullcontext(index) if index is not None else Index.open(path, readonly=True)


def _store_violations(path: Path, open_: Index | None = None) -> tuple[list[str], int | None]:
    """Damage found reading every table of a plain store, else its index's own check
    failures; and its subscription count (None when damage hides it).  Damage that stops
    the check (a page or record that cannot be decoded) is one violation, not an error:
    ``verify`` reports it."""
    damage = file_damage(path, walk=True) if data_file(path).exists() else None
    if damage is not None:
        return [f"{data_file(path).name}: {damage}"], None
    try:
        with _opened(path, open_) as index:
            found = index.store.damage()
            if found:
                return found, None
            try:
                index.check()
            except CheckFailed as exc:
                return exc.violations, len(index)
            return [], len(index)
    except StoreDamaged as exc:
        return [exc.what], None


def shard_violations(
    root: Path, manifest: dict[str, Any], indexes: list[Index] | None = None
) -> tuple[list[str], int]:
    """Every shard's violations.  With :data:`HASH` partitioning, every id in the shard
    its hash names (one scan of each id map); else each shard's count against the
    manifest's (writes, which only such stores take, leave the manifest's counts as the
    load wrote them).  Also the subscriptions the shards hold."""
    violations: list[str] = []
    schema: Schema | None = None
    total = 0
    routed = is_routed(manifest)
    names = [entry["path"] for entry in manifest["shards"]]
    for i, entry in enumerate(manifest["shards"]):
        name = entry["path"]
        try:
            index_i = indexes[i] if indexes is not None else None
            found, count = _store_violations(root / name, index_i)
            violations.extend(f"{name}: {v}" for v in found)
            if count is None:
                continue
            total += count
            with _opened(root / name, index_i) as index:
                if count != entry.get("subscriptions") and not routed:
                    violations.append(
                        f"{name}: holds {count} subscriptions, the manifest says "
                        f"{entry.get('subscriptions')}"
                    )
                if schema is None:
                    schema = index.schema
                elif index.schema != schema:
                    violations.append(f"{name}: its schema differs from the first shard's")
                if routed:
                    violations.extend(f"{name}: {v}" for v in _misrouted(index, i, names))
        except BexdbError as exc:
            violations.append(f"{name}: cannot be opened ({exc})")
    if total != manifest.get("subscriptions") and not violations and not routed:
        violations.append(
            f"the shards hold {total} subscriptions, the manifest says "
            f"{manifest.get('subscriptions')}"
        )
    return violations, total
