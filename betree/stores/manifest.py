"""A sharded store's manifest and routing: which shards it holds and where an id lives.

``TARGET/manifest.json`` (written last by a load, synced; the format a sharded store is
recognised by)::

    {"format": "bexdb-shards", "version": 1,
     "shards": [{"path": "shard-0000", "subscriptions": N}, ...],
     "subscriptions": total, "partitioning": {"by": "id", "hash": HASH, "shards": K}}

``partitioning.hash`` names the hash that routes an id to its shard (:data:`HASH`:
:func:`shard_of` of the id key of :func:`storage.codec.encode_id`): the Spark load, the
python load and every writer route by it.  Cost: reading it is one small JSON file and a
stat per shard.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path
from typing import Any

from storage.errors import StoreDamaged, StoreError, VersionMismatch
from storage.lmdbfile import data_file
from storage.store import SHARD_MANIFEST

MANIFEST = SHARD_MANIFEST
FORMAT = "bexdb-shards"
VERSION = 1
#: The manifest's ``partitioning.hash`` of stores whose ids sit where :func:`shard_of` says.
HASH = "crc32(storage.codec.encode_id(id)) mod shards"


def shard_name(i: int) -> str:
    """The directory of shard ``i`` inside a sharded store."""
    return f"shard-{i:04d}"


def shard_of(key: bytes | None, shards: int) -> int:
    """The shard of a record by its id key: ``crc32(key) mod shards`` (0 for no key).

    Stable across processes and runs (unlike Python's ``hash``), so every occurrence of
    an id meets in one shard task, where duplicates are found.
    """
    return zlib.crc32(key) % shards if key is not None and shards > 1 else 0


def is_routed(manifest: dict[str, Any]) -> bool:
    """Whether the store's ids are partitioned by :data:`HASH` (so it takes writes)."""
    return bool(manifest.get("partitioning", {}).get("hash") == HASH)


def is_sharded(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / MANIFEST).is_file()


def write_manifest(
    root: str | os.PathLike[str], shards: list[dict[str, Any]], partitioning: dict[str, Any]
) -> None:
    """Write ``manifest.json`` into ``root`` (the shard directories must be there), synced."""
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "shards": shards,
        "subscriptions": sum(int(s["subscriptions"]) for s in shards),
        "partitioning": partitioning,
    }
    path = Path(root) / MANIFEST
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())


def read_manifest(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The manifest of a sharded store; raises StoreError if it is not one this code reads."""
    path = Path(root) / MANIFEST
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise StoreError(f"{path}: cannot read the shard manifest ({exc})") from exc
    except ValueError as exc:  # not JSON, not UTF-8: the file bexdb wrote was damaged
        raise StoreDamaged(f"{path}: the shard manifest is not JSON ({exc})") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise StoreDamaged(f"{path} is not a bexdb shard manifest")
    if doc.get("version") != VERSION:
        raise VersionMismatch(
            f"{path}: shard manifest version {doc.get('version')!r}, this bexdb reads {VERSION}",
            "rebuild the store with this version's `bexdb load`",
        )
    shards = doc.get("shards")
    if (
        not isinstance(shards, list)
        or not shards
        or not all(isinstance(s, dict) and isinstance(s.get("path"), str) for s in shards)
    ):
        raise StoreDamaged(f"{path}: the manifest lists no shards")
    for s in shards:
        rel = Path(s["path"])
        if rel.is_absolute() or ".." in rel.parts:
            raise StoreDamaged(f"{path}: shard path {s['path']!r} leaves the store directory")
        if not data_file(Path(root) / rel).is_file():
            raise StoreDamaged(f"{path}: shard {s['path']!r} it lists holds no store")
    return doc


def store_paths(path: str | os.PathLike[str]) -> list[tuple[str | None, Path]]:
    """The plain stores that make up ``path``: itself, or each shard with its name."""
    if not is_sharded(path):
        return [(None, Path(path))]
    return [(s["path"], Path(path) / s["path"]) for s in read_manifest(path)["shards"]]
