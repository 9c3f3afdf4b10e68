"""The clauses of the forms whose atoms reach past one attribute's value: the be-tree
library's functions (the geo test's box on its two attributes) and ``any PATH (EXPR)``
(one test over the inner expression's clauses).

Why apart from :mod:`betree.lang.atoms`: these build on its atoms (order atoms beside a
test, a test holding clauses of atoms) rather than define atoms; :mod:`betree.lang.dnf`
calls them for their nodes.  Cost: one atom or a few per call; ``any`` adds the inner
clauses' tuples.
"""

from __future__ import annotations

from betree.lang import special
from betree.lang.atoms import Clause, OrderAtom, TestAtom
from betree.lang.expr import Special


def special_clauses(node: Special, pos: bool) -> list[Clause]:
    """A be-tree library function: one test atom, and for ``geo_within_radius`` the box
    around the radius as range atoms on ``latitude`` and ``longitude`` beside it (so that
    the PB+trees and c-directories prune; the two attributes it names, or ``latitude`` and
    ``longitude``), with the points beyond the coordinate ranges
    (which the formula accepts too) in a second clause; one clause when the box is the
    whole range."""
    t = TestAtom(node.attr, node.func, node.args)
    if not pos:
        return t.negate()
    if node.func != "geo_within_radius":
        return [(t,)]
    lat0, lon0, radius = node.args[:3]
    box = special.geo_box(lat0, lon0, radius)  # type: ignore[arg-type]
    if box is None:
        return []
    (lat_lo, lat_hi), (lon_lo, lon_hi) = box
    if box == ((-90.0, 90.0), (-180.0, 180.0)):
        return [(t,)]
    lat, lon = node.attr, special.longitude_attr(node.args)
    inside: Clause = (
        t,
        OrderAtom(lat, ((">=", lat_lo),)),
        OrderAtom(lat, (("<=", lat_hi),)),
        OrderAtom(lon, ((">=", lon_lo),)),
        OrderAtom(lon, (("<=", lon_hi),)),
    )
    beyond = TestAtom(lat, special.OUT_OF_RANGE, () if lon == special.LONGITUDE else (lon,))
    return [inside, (t, beyond)]


def any_clauses(attr: str, inner: list[Clause], pos: bool) -> list[Clause]:
    """The clauses of ``any attr (…)`` (``pos``) or of its negation, from the inner
    expression's clauses over an element's paths."""
    t = TestAtom(attr, "any", tuple(tuple(a.as_tuple() for a in c) for c in inner))
    if pos:
        return [(t,)] if inner else []
    return [()] if not inner else t.negate()  # (never true: its negation always is)
