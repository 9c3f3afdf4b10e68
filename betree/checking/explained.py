"""How ``explain`` shows one atom: in the user's terms, not the index's.

The index stores some atoms in forms the user never wrote: ``ip`` values as
order-preserving keys (:mod:`betree.lang.ipaddr`), strings of a ``fold_case`` attribute
folded, ``geo_within_radius`` beside the box that lets the index prune.  So ``explain``
shows, per atom: its text (an ``ip`` atom with addresses and CIDR blocks instead of keys),
the value it saw (as matched) and, on such attributes, the value as the event sent it (from
the flattened event, so that a nested event's ``user.city`` shows too); on
``geo_within_radius``, the event's point, its distance from the centre and the radius.

Cost: per atom, one text rewrite for ``ip``, one haversine for geo (explain only).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from betree.disk import grid
from betree.disk.tree import BETree
from betree.lang import ipaddr, special
from betree.lang.atoms import Atom, TestAtom
from betree.lang.paths import flatten, is_nested


def sent_values(event: Mapping[str, object]) -> Mapping[str, object]:
    """The event's values by attribute as sent: nested objects flattened to dotted paths
    (:func:`betree.lang.paths.flatten`), nothing converted."""
    if any(map(is_nested, event.values())):
        return flatten(event)
    return event


def shown_atom(
    atom: Atom,
    values: Mapping[str, object],
    sent: Mapping[str, object],
    keyed: Collection[str],
    ips: Collection[str],
) -> dict[str, Any]:
    """One atom as ``explain`` shows it (module docstring).  ``values``: the validated
    event; ``sent``: :func:`sent_values`; ``keyed``: attributes whose values are converted
    before matching (``fold_case`` and ``ip``); ``ips``: those of type ``ip``."""
    attr = atom.attr
    shown: dict[str, Any] = {
        "atom": ipaddr.readable(atom.to_expr()) if attr in ips else atom.to_expr(),
        "attribute": attr,
        "value": values.get(attr),
        "holds": atom.holds(values),
    }
    if attr in keyed and sent.get(attr) is not None:
        shown["sent"] = sent[attr]  # as sent; "value": as matched
    if attr in ips and isinstance(shown["value"], str):
        shown["value"] = ipaddr.address_of_key(shown["value"])
    if isinstance(atom, TestAtom) and atom.test == "geo_within_radius":
        args: tuple[Any, ...] = atom.arg  # type: ignore[assignment]
        lat0, lon0, radius = args[:3]
        lon_attr = special.longitude_attr(args)  # the five-argument form names its own
        lat, lon = values.get(atom.attr), values.get(lon_attr)
        shown["attribute"] = [atom.attr, lon_attr]
        shown["value"] = [lat, lon]
        shown["radius_km"] = radius
        if isinstance(lat, float) and isinstance(lon, float):
            shown["distance_km"] = special.geo_distance(lat0, lon0, lat, lon)
    return shown


def bucket_path(
    tree: BETree, home: int, values: Mapping[str, object], kinds: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The c-directory buckets from the root down to ``home`` (an l-node), each reached
    by the event ``values`` or not, and why not (``kinds``: each attribute's grid kind)."""
    steps = []
    page = home
    while True:
        node = tree.node(page)
        if node.attr is None:
            break
        kind = kinds[node.attr]
        defined = node.attr in values
        x = grid.event_coord(kind, values[node.attr]) if defined else None
        reached = defined and (node.top or node.lo <= x <= node.hi)  # type: ignore[operator]
        why = None if reached else ("undefined" if not defined else "value outside bucket")
        steps.append(
            {
                "attribute": node.attr,
                # the bucket as values (an attribute's values from lo to hi), and on the
                # grid (betree.disk.grid: where the c-directory halves it)
                "bucket": "top"
                if node.top
                else [grid.shown(kind, node.lo), grid.shown(kind, node.hi)],
                "grid": None if node.top else [node.lo, node.hi],
                "c_node": node.page,
                "reached": reached,
                "pruned": why,
            }
        )
        page = node.parent
    steps.reverse()
    return steps
