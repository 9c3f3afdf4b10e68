"""Operations subcommands: ``explain``, ``inspect``, ``compact`` and ``adjust``.

Thin wrappers: the figures come from :meth:`betree.index.Index.explain`,
:meth:`~betree.index.Index.stats`, :meth:`storage.store.Store.copy_compact` and
:meth:`~betree.index.Index.set_adjust`; this module only formats them and swaps a compacted
store into place.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path
from typing import Any

from betree.bulk import Batch
from betree.index import Index, gc_paused
from loaders.records import loads_line
from loaders.shards import store_paths
from storage.errors import CheckFailed, InvalidInput, StoreDamaged, StoreError
from storage.lmdbfile import damage as file_damage
from storage.staging import found as staging_found
from storage.staging import staging
from storage.swap import swap_in
from storage.txn import ReadTxn
from tools.args import parse_id


def add_arguments(sub: Any) -> None:
    """Register the three subcommands on the CLI's subparsers."""
    p = sub.add_parser("explain", help="why a subscription does or does not match an event")
    p.add_argument("store")
    p.add_argument("id", help="subscription id: a JSON integer or string, else the text")
    p.add_argument("event", help="the event as a JSON object")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("inspect", help="counts, tree shapes, pages, fill and size on disk")
    p.add_argument("store")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("compact", help="reclaim free pages (and --rebuild the index) atomically")
    p.add_argument("store")
    p.add_argument("--rebuild", action="store_true", help="rebuild the index in one batch")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("adjust", help="self-adjustment: show or change its settings, or run it now")
    p.add_argument("store")
    on = p.add_mutually_exclusive_group()
    on.add_argument("--on", dest="enabled", action="store_const", const=True, default=None)
    on.add_argument("--off", dest="enabled", action="store_const", const=False)
    p.add_argument("--window", type=int, help="matched events per node window")
    p.add_argument("--theta", type=int, help="rank below which a node is recycled")
    p.add_argument("--now", action="store_true", help="rank the nodes whose window ended")
    p.set_defaults(func=cmd_adjust)


def cmd_explain(args: argparse.Namespace) -> int:
    try:
        event = loads_line(args.event)
    except InvalidInput as exc:
        raise InvalidInput(f"the event: {exc.message}") from None
    if not isinstance(event, dict):
        raise InvalidInput("the event must be a JSON object")
    ident = parse_id(args.id)
    paths = store_paths(args.store)
    for shard, path in paths:  # the shard that holds the id (a plain store: the store)
        with Index.open(path, readonly=True) as idx:
            if shard is None or idx.expression(ident) is not None:
                why = idx.explain(ident, event)
                break
    else:
        raise InvalidInput(f"no subscription {ident!r} in any of {len(paths)} shards")
    if shard is not None:
        why["shard"] = shard
    if args.json:
        print(json.dumps(why, indent=2))
        return 0
    verdict = "matches" if why["matches"] else "does not match"
    print(f"subscription {_shown(why['id'])} {verdict}: {why['expression']}")
    if shard is not None:
        print(f"(in shard {shard})")
    for k, clause in enumerate(why["clauses"]):
        print(f"clause {k + 1}: {'true' if clause['holds'] else 'false'}")
        for atom in clause["atoms"]:
            seen = f" (saw {_shown(atom['value'])})" if "value" in atom else ""
            print(f"  {'true ' if atom['holds'] else 'false'}  {atom['atom']}{seen}")
        where = " -> ".join(
            f"{s['attribute']}:{s['bucket'] if s['bucket'] == 'top' else tuple(s['bucket'])}"
            for s in clause["path"]
        )
        print(f"  index path: root{' -> ' + where if where else ''} (c-node {clause['home']})")
        pruned = next((s for s in clause["path"] if not s["reached"]), None)
        if pruned is None:
            print("  reached by this event's traversal")
        else:
            print(f"  pruned at p-node {pruned['attribute']!r}: {pruned['pruned']}")
    return 0


def _shown(value: Any) -> str:
    """A value as the user wrote it: JSON (``null`` for undefined, lists as arrays)."""
    return json.dumps(value, ensure_ascii=False, default=sorted)


def cmd_inspect(args: argparse.Namespace) -> int:
    """Figures of a plain store, or of each shard of a sharded one (and their totals)."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for shard, path in store_paths(args.store):
        with Index.open(path, readonly=True) as idx:
            found.append((shard, idx.stats()))
    notes = staging_notes(args.store)
    if args.json:
        doc: Any = found[0][1]
        if found[0][0] is not None:
            doc = {
                "subscriptions": sum(stats["subscriptions"] for _, stats in found),
                "file_bytes": sum(stats["store"]["file_bytes"] for _, stats in found),
                "shards": [{"shard": shard, **stats} for shard, stats in found],
            }
        doc["staging"] = notes
        print(json.dumps(doc, indent=2))
        return 0
    for note in notes:
        print(f"note: {note}")
    for shard, stats in found:
        if shard is not None:
            print(f"== shard {shard}")
        _print_stats(stats)
    if len(found) > 1:
        subs = sum(stats["subscriptions"] for _, stats in found)
        size = sum(stats["store"]["file_bytes"] for _, stats in found)
        print(f"== {len(found)} shards: subscriptions {subs:,}  bytes on disk {size:,}")
    return 0


def staging_notes(store: str | os.PathLike[str]) -> list[str]:
    """Staging directories beside ``store`` (and beside each shard): a load or compaction
    in progress, or stale ones that a killed one left (removed by the next load or
    compaction of the same store: :mod:`storage.staging`)."""
    root = Path(store)
    try:
        paths = [root] + [path for shard, path in store_paths(root) if shard is not None]
    except StoreError:  # a damaged manifest: verify reports it, the notes make do without
        paths = [root]
    notes = []
    for path in paths:
        for found in staging_found(path):
            what = f"staging directory {found.describe()}"
            if not found.live:
                what += f"; the next `bexdb load` or `bexdb compact` of {path.name} removes it"
            notes.append(what)
    return notes


def _print_stats(stats: dict[str, Any]) -> None:
    store = stats["store"]
    tree = stats["betree"]
    print(
        f"subscriptions {stats['subscriptions']:,}  clauses {stats['clauses']:,}  "
        f"distinct predicates {stats['predicates']:,}"
    )
    print(
        f"bytes on disk {store['file_bytes']:,}  pages used {store['used_pages']:,}  "
        f"free {store['free_pages']:,} (of {store['psize']} bytes)"
    )
    print(
        f"BE-Tree: depth {tree['depth']}, p-nodes {tree['p_nodes']:,}, "
        f"c-nodes {tree['c_nodes']:,}, spilled l-nodes {tree['spilled_l_nodes']:,}, "
        f"extended l-nodes {tree['extended_l_nodes']:,}"
    )
    print("  l-node sizes: " + ", ".join(f"{k}: {v:,}" for k, v in tree["l_node_sizes"].items()))
    print(
        "pages by kind: "
        + ", ".join(
            f"{k} {v['pages']:,} ({v['bytes']:,} B)" for k, v in sorted(stats["pages"].items())
        )
    )
    print("PB+trees (attribute: predicates, height, leaves, leaf fill, GT/LT/NE list nodes):")
    for name, t in sorted(stats["pbtrees"].items()):
        lists = t["lists"]
        print(
            f"  {name}: {t['predicates']:,}, h{t['height']}, {t['leaves']:,} leaves, "
            f"fill {t['leaf_fill']:.2f}, lists {lists['greater_than']['nodes']}/"
            f"{lists['less_than']['nodes']}/{lists['inequality']['nodes']}"
        )


def cmd_compact(args: argparse.Namespace) -> int:
    """Compact a plain store, or each shard of a sharded one in turn (each swap atomic).

    Safe beside live writers (see :func:`_compact`): they wait while a store is copied,
    and one that had the old store open reopens it (or reports that it must).
    """
    for shard, path in store_paths(args.store):
        before, after = _compact(path.absolute(), args.rebuild)
        name = f"shard {shard}" if shard is not None else str(path.absolute())
        print(f"compacted {name}: {before:,} -> {after:,} bytes ({after / max(before, 1):.0%})")
    return 0


def _compact(target: Path, rebuild: bool) -> tuple[int, int]:
    """A compacting copy (optionally rebuilt) beside the store, then an atomic swap.

    Everything from reading the store to the swap runs under the store's writer lock
    (:meth:`storage.store.Store.replacing`): a write committed before it is in the copy,
    and none can be committed after it into the old store, which is left marked retired.
    A writer blocked on the lock meanwhile, or holding the old store open, gets
    ``StoreReplaced`` at its next write, having written nothing, and reopens the path
    (``bexdb serve`` does so itself).  The cost: writers wait for the copy, its check
    and (with ``rebuild``) the batch build, instead of losing what they commit meanwhile.
    """
    if not (target / "data.mdb").exists():  # opened writable below, which would create it
        raise StoreError(
            f"no store at {target}", "create it with `bexdb load` or `bexdb subscribe`"
        )
    damage = file_damage(target, walk=True)  # also a large file, before LMDB reads it
    if damage is not None:
        raise StoreDamaged(f"{target}/data.mdb: {damage}")
    with Index.open(target) as idx:
        found = idx.store.damage()
        if found:  # copied, it would fail later with a less telling error, or be kept
            more = f" (and {len(found) - 1} more: run `bexdb verify`)" if len(found) > 1 else ""
            raise StoreDamaged(f"{target}: {found[0]}{more}")
        before = idx.store.size_on_disk()
        old: Path | None = None
        try:  # a compaction killed here leaves its staging; the next one removes it
            with (
                staging(target, "compact") as scratch,
                idx.store.replacing("compacted") as view,
            ):
                if rebuild:
                    _rebuild(idx, view, scratch / "raw")
                    with Index.open(scratch / "raw") as fresh:
                        fresh.store.copy_compact(scratch / "store")
                else:
                    idx.store.copy_compact(scratch / "store", txn=view)
                with Index.open(scratch / "store", readonly=True) as fresh:
                    try:
                        fresh.check()
                    except CheckFailed as exc:  # what was read is not what was written
                        raise StoreDamaged(
                            f"{target}: its compacted copy fails the index check "
                            f"({exc.violations[0]}; {len(exc.violations)} in all): "
                            "run `bexdb verify` on it"
                        ) from exc
                old = swap_in(scratch / "store", target, keep_old=True)
        finally:  # the old store is removed once marked retired (the blocks above ended)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    return before, os.path.getsize(target / "data.mdb")


def _rebuild(idx: Index, view: ReadTxn, path: Path) -> None:
    """A fresh batch-built index (BE-B) from the subscriptions of ``view``."""
    with gc_paused():
        subs = idx.subscriptions(view)
        with Index.open(path, schema=idx.schema, settings=idx.settings(view)) as fresh:
            batch = Batch(fresh)
            for ident, expr in subs:
                batch.add(ident, expr, fresh.compile(ident, expr))
            batch.build()


def cmd_adjust(args: argparse.Namespace) -> int:
    """Change the self-adjustment settings of a store (each shard), then print them as JSON.

    With ``--on``, whatever matches through a writable store (``bexdb serve``, the Python
    API) collects statistics and adjusts the tree every ``--window`` events; ``--now``
    ranks and recycles the nodes whose window has ended, here.
    """
    found = []
    for shard, path in store_paths(args.store):
        with Index.open(path) as idx:
            idx.set_adjust(args.enabled, args.window, args.theta)
            done = idx.adjust() if args.now else None
            if done is not None:
                done["seconds"] = round(done["seconds"], 3)
            summary = idx.adjust_summary()
        if done is not None:
            summary["ran"] = done
        found.append(summary if shard is None else {"shard": shard, **summary})
    print(json.dumps(found[0] if len(found) == 1 else found, indent=2))
    return 0
