"""Operations subcommands: ``explain``, ``inspect``, ``compact`` and ``adjust``.

Thin wrappers: the figures come from :func:`betree.stores.sharded.open_index` (``explain``,
``stats``) and :mod:`betree.stores.maintain` (``compact``, ``adjust_store``); this module only
parses the arguments and formats what they return.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from betree.formats.jsonl import loads_line
from betree.stores.maintain import adjust_store, compact, staging_notes
from betree.stores.sharded import open_index
from storage.errors import InvalidInput
from tools.args import STORE_HELP, parse_id


def add_arguments(sub: Any) -> None:
    """Register the four subcommands on the CLI's subparsers."""
    p = sub.add_parser("explain", help="why a subscription does or does not match an event")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("id", help="subscription id: a JSON integer or string, else the text")
    p.add_argument("event", help="the event as a JSON object")
    p.add_argument("--json", action="store_true", help="print the explanation as JSON")
    p.set_defaults(func=cmd_explain)

    p = sub.add_parser("inspect", help="counts, tree shapes, pages, fill and size on disk")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("compact", help="reclaim free pages (and --rebuild the index) atomically")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("--rebuild", action="store_true", help="rebuild the index in one batch")
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("adjust", help="self-adjustment: show or change its settings, or run it now")
    p.add_argument("store", help=STORE_HELP)
    on = p.add_mutually_exclusive_group()
    on.add_argument(
        "--on",
        dest="enabled",
        action="store_const",
        const=True,
        default=None,
        help="turn self-adjustment on (statistics while matching, the tree adjusted)",
    )
    on.add_argument("--off", dest="enabled", action="store_const", const=False, help="turn it off")
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
    with open_index(args.store) as store:  # the shard holding the id, if sharded
        why = store.explain(ident, event)
    shard = why.get("shard")
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
            if "sent" in atom:
                seen = f" (saw {_shown(atom['value'])}, sent {_shown(atom['sent'])})"
            if "radius_km" in atom:  # geo_within_radius (betree.checking.explained)
                away = atom.get("distance_km")
                far = "no distance" if away is None else f"{away:.3f} km away"
                seen = f" (saw {_shown(atom['value'])}: {far}, radius {atom['radius_km']} km)"
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
    with open_index(args.store) as store:
        found = store.stats()
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


def _print_stats(stats: dict[str, Any]) -> None:
    store = stats["store"]
    tree = stats["betree"]
    print(
        f"subscriptions {stats['subscriptions']:,}  clauses {stats['clauses']:,}  "
        f"distinct predicates {stats['predicates']:,}  with metadata {stats['with_meta']:,}"
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

    Safe beside live writers (see :func:`betree.stores.maintain.compact_store`): they wait while
    a store is copied, and one that had the old store open reopens it.
    """
    for shard, path, before, after in compact(args.store, args.rebuild):
        name = f"shard {shard}" if shard is not None else str(path)
        print(f"compacted {name}: {before:,} -> {after:,} bytes ({after / max(before, 1):.0%})")
    return 0


def cmd_adjust(args: argparse.Namespace) -> int:
    """Change the self-adjustment settings of a store (each shard), then print them as JSON.

    With ``--on``, whatever matches through a writable store (``bexdb serve``, the Python
    API) collects statistics and adjusts the tree every ``--window`` events; ``--now``
    ranks and recycles the nodes whose window has ended, here.
    """
    found = adjust_store(args.store, args.enabled, args.window, args.theta, args.now)
    print(json.dumps(found[0] if len(found) == 1 else found, indent=2))
    return 0
