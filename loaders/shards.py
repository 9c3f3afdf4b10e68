"""Sharded stores, and one reader for plain and sharded stores alike.

A sharded store (``bexdb load --shards K``) is a directory of K independent, complete stores
(each with its own copy of the schema) plus a manifest::

    TARGET/manifest.json   {"format": "bexdb-shards", "version": 1,
                            "shards": [{"path": "shard-0000", "subscriptions": N}, ...],
                            "subscriptions": total, "partitioning": {...}}
    TARGET/shard-0000/     a store (SPEC section 9), as `bexdb load` would build alone
    TARGET/shard-0001/     ...

Subscriptions are split by a stable hash of their id, so each id lives in exactly one shard
and a match is the union of the shards' matches.  ``partitioning`` records the hash
(``crc32(key) mod K`` over the id key of :func:`storage.codec.encode_id`:
:func:`loaders.spark_job.shard_of`), so that a later writer can route an id to its shard.
Why shards rather than one big store: the K stores are built by K Spark tasks at once (the
batch build of one store is single-threaded), and can sit on different disks.

Readers use :func:`open_any`, which returns the same interface for both kinds, and
:func:`verify`, which checks every shard and the manifest and reports all violations once.

>>> with open_any("store/") as reader:  # doctest: +SKIP
...     reader.match({"price": 26})
[5, 's1']
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Protocol

from betree.index import Index, SubId
from betree.lang.schema import Schema
from storage.errors import BexdbError, CheckFailed, StoreDamaged, StoreError, VersionMismatch
from storage.lmdbfile import damage as file_damage
from storage.store import SHARD_MANIFEST

MANIFEST = SHARD_MANIFEST
FORMAT = "bexdb-shards"
VERSION = 1

Matcher = Callable[[Mapping[str, object]], list[SubId]]


def shard_name(i: int) -> str:
    """The directory of shard ``i`` inside a sharded store."""
    return f"shard-{i:04d}"


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
        if not (Path(root) / rel / "data.mdb").is_file():
            raise StoreDamaged(f"{path}: shard {s['path']!r} it lists holds no store")
    return doc


def store_paths(path: str | os.PathLike[str]) -> list[tuple[str | None, Path]]:
    """The plain stores that make up ``path``: itself, or each shard with its name."""
    if not is_sharded(path):
        return [(None, Path(path))]
    return [(s["path"], Path(path) / s["path"]) for s in read_manifest(path)["shards"]]


class Reader(Protocol):
    """What ``bexdb match`` and the other readers need from a store, plain or sharded."""

    schema: Schema

    def snapshot(self) -> Any:
        """A context manager giving a :data:`Matcher` over one consistent read snapshot."""
        ...

    def match(self, event: Mapping[str, object]) -> list[SubId]: ...

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)`` as given (``bexdb export``)."""
        ...

    def check(self) -> None: ...

    def close(self) -> None: ...

    def __len__(self) -> int: ...

    def __enter__(self) -> Reader: ...

    def __exit__(self, *exc: object) -> None: ...


class SingleReader:
    """A plain store behind the :class:`Reader` interface."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self.schema = index.schema

    @contextmanager
    def snapshot(self) -> Iterator[Matcher]:
        index = self.index
        with index.store.read() as txn:
            yield lambda values: index.match_validated(txn, values)
        index.adjust_if_due()  # self-adjustment, when the store has it on (a write)

    def match(self, event: Mapping[str, object]) -> list[SubId]:
        return self.index.match(event)

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        return self.index.iter_subscriptions()

    def check(self) -> None:
        self.index.check()

    def close(self) -> None:
        self.index.close()

    def __len__(self) -> int:
        return len(self.index)

    def __enter__(self) -> SingleReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ShardedReader:
    """Every shard of a sharded store, matched as one: the union of the shards' answers.

    Cost of a match: one match per shard (each over a K-th of the subscriptions), plus
    building the union; the shards hold disjoint ids, so the union is a concatenation.
    """

    def __init__(self, root: Path, manifest: dict[str, Any], shards: list[Index]) -> None:
        self.root = root
        self.manifest = manifest
        self.shards = shards
        self.schema = shards[0].schema

    @classmethod
    def open(cls, root: str | os.PathLike[str], **options: Any) -> ShardedReader:
        base = Path(root)
        manifest = read_manifest(base)
        shards: list[Index] = []
        try:
            for entry in manifest["shards"]:
                shards.append(Index.open(base / entry["path"], readonly=True, **options))
            first = shards[0].schema
            for entry, index in zip(manifest["shards"], shards, strict=True):
                if index.schema != first:
                    raise StoreError(
                        f"{base}: shard {entry['path']} has another schema than the first",
                        "run `bexdb verify`; rebuild the store with `bexdb load`",
                    )
        except BaseException:
            for index in shards:
                index.close()
            raise
        return cls(base, manifest, shards)

    @contextmanager
    def snapshot(self) -> Iterator[Matcher]:
        with ExitStack() as stack:
            txns = [(index, stack.enter_context(index.store.read())) for index in self.shards]

            def match(values: Mapping[str, object]) -> list[SubId]:
                out: list[SubId] = []
                for index, txn in txns:
                    out.extend(index.match_validated(txn, values))
                return out

            yield match

    def match(self, event: Mapping[str, object]) -> list[SubId]:
        values = self.schema.validate_event(event)
        with self.snapshot() as match:
            return match(values)

    def subscriptions(self) -> Iterator[tuple[SubId, str]]:
        """Every ``(id, expression)``, shard after shard (each shard in one snapshot)."""
        for index in self.shards:
            yield from index.iter_subscriptions()

    def check(self) -> None:
        violations = _shard_violations(self.root, self.manifest)
        if violations:
            raise CheckFailed(f"sharded store {self.root}", violations)

    def close(self) -> None:
        for index in self.shards:
            index.close()

    def __len__(self) -> int:
        return sum(len(index) for index in self.shards)

    def __enter__(self) -> ShardedReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_any(path: str | os.PathLike[str], **options: Any) -> SingleReader | ShardedReader:
    """Open a plain or a sharded store read-only (``options`` go to :meth:`Index.open`)."""
    if is_sharded(path):
        return ShardedReader.open(path, **options)
    return SingleReader(Index.open(path, readonly=True, **options))


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
    violations = _shard_violations(Path(path), manifest)
    if violations:
        raise CheckFailed(f"sharded store {path}", violations)
    return {"shards": len(manifest["shards"]), "subscriptions": int(manifest["subscriptions"])}


def _store_violations(path: Path) -> tuple[list[str], int | None]:
    """Damage found reading every table of a plain store, else its index's own check
    failures; and its subscription count (None when damage hides it).  Damage that stops
    the check (a page or record that cannot be decoded) is one violation, not an error:
    ``verify`` reports it."""
    damage = file_damage(path, walk=True) if (path / "data.mdb").exists() else None
    if damage is not None:
        return [f"data.mdb: {damage}"], None
    try:
        with Index.open(path, readonly=True) as index:
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


def _shard_violations(root: Path, manifest: dict[str, Any]) -> list[str]:
    violations: list[str] = []
    schema: Schema | None = None
    total = 0
    for entry in manifest["shards"]:
        name = entry["path"]
        try:
            found, count = _store_violations(root / name)
            violations.extend(f"{name}: {v}" for v in found)
            if count is None:
                continue
            total += count
            if count != entry.get("subscriptions"):
                violations.append(
                    f"{name}: holds {count} subscriptions, the manifest says "
                    f"{entry.get('subscriptions')}"
                )
            with Index.open(root / name, readonly=True) as index:
                if schema is None:
                    schema = index.schema
                elif index.schema != schema:
                    violations.append(f"{name}: its schema differs from the first shard's")
        except BexdbError as exc:
            violations.append(f"{name}: cannot be opened ({exc})")
    if total != manifest.get("subscriptions") and not violations:
        violations.append(
            f"the shards hold {total} subscriptions, the manifest says "
            f"{manifest.get('subscriptions')}"
        )
    return violations
