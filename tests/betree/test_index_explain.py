"""``Index.explain`` agrees with matching and shows the index path."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from betree.disk import grid
from betree.index import Index
from storage.errors import InvalidInput
from tests.support.workload import SCHEMA, event, expression


def test_explain_agrees_with_match(tmp_path: Path) -> None:
    rng = random.Random(11)
    with Index.open(tmp_path / "s", schema=SCHEMA, settings={"max_cap": 3, "min_size": 2}) as idx:
        subs = {i: expression(rng) for i in range(150)}
        idx.subscribe_many(list(subs.items()))
        for _ in range(40):
            ev = event(rng)
            matched = set(idx.match(ev))
            for ident in rng.sample(sorted(subs), 10):
                why = idx.explain(ident, ev)
                assert why["matches"] == (ident in matched)
                assert why["expression"] == subs[ident]
                for clause in why["clauses"]:
                    # a clause that holds is always reached by the traversal
                    if clause["holds"]:
                        assert clause["reached"]
                    for step in clause["path"]:
                        assert step["reached"] == (step["pruned"] is None)


def test_explain_names_values_and_pruning(tmp_path: Path) -> None:
    schema = {"attributes": {"price": {"type": "int", "min": 0, "max": 100}}}
    with Index.open(tmp_path / "s", schema=schema, settings={"max_cap": 1, "min_size": 1}) as idx:
        idx.subscribe_many([(i, f"price between {i} and {i + 1}") for i in range(0, 100, 10)])
        why = idx.explain(60, {"price": 7})
        atoms = why["clauses"][0]["atoms"]
        assert {a["atom"] for a in atoms} == {"price >= 60", "price <= 61"}
        assert all(a["value"] == 7 for a in atoms)
        assert not why["matches"]
        path = why["clauses"][0]["path"]
        assert path[0]["bucket"] == "top" and path[0]["reached"]
        assert any(step["pruned"] == "value outside bucket" for step in path)
        for step in path[1:]:  # buckets as prices, each enclosing the clause's 60..61
            lo, hi = step["bucket"]
            assert 0 <= lo <= 60 and 61 <= hi <= 100, step
            assert step["grid"] == [grid.coord("int", lo), grid.coord("int", hi)]
        assert path[-1]["bucket"][1] - path[-1]["bucket"][0] < 100
        assert idx.explain(60, {})["clauses"][0]["path"][0]["pruned"] == "undefined"
        with pytest.raises(InvalidInput, match="no subscription"):
            idx.explain("nope", {})


@given(
    st.one_of(
        st.tuples(st.just("int"), st.integers(-(1 << 63), (1 << 63) - 1)),
        st.tuples(st.just("float"), st.floats(allow_nan=False)),
        st.tuples(st.just("bool"), st.booleans()),
        st.tuples(st.just("string"), st.text(max_size=3)),
    )
)
def test_grid_values_invert_coordinates(case: tuple[str, object]) -> None:
    """What explain shows a bucket bound as: the value at that grid coordinate."""
    kind, x = case
    c = grid.coord(kind, x)
    shown = grid.value(kind, c)
    if kind == "string":
        if len(str(x).encode()) <= 8:  # (the grid keeps 8 bytes, "\0"-padded)
            assert shown == str(x).rstrip("\0")
            assert grid.coord(kind, shown) == c
    else:
        assert grid.coord(kind, shown) == c
        assert shown == x  # (-0.0 == 0.0: the grid has one zero)


def test_explain_shows_nested_sent_values_addresses_and_geo_distance(tmp_path: Path) -> None:
    """Issue 28, item 6: a nested event's ``sent``; ``ip`` atoms as addresses and CIDR
    blocks (they showed the index's keys); ``geo_within_radius`` with the distance and the
    radius (it showed only the latitude)."""
    schema = {
        "attributes": {
            "user.city": {"type": "string", "fold_case": True},
            "src": {"type": "ip"},
            "latitude": {"type": "float"},
            "longitude": {"type": "float"},
            "user.geo.lat": {"type": "float"},
            "user.geo.lon": {"type": "float"},
        }
    }
    with Index.open(tmp_path / "s", schema=schema) as idx:
        idx.subscribe("named", "geo_within_radius(user.geo.lat, user.geo.lon, 52.52, 13.40, 10)")
        why = idx.explain("named", {"user": {"geo": {"lat": 52.53, "lon": 13.41}}})
        geo = [a for c in why["clauses"] for a in c["atoms"] if a["atom"].startswith("geo_")]
        assert why["matches"] and geo, why
        assert all(a["attribute"] == ["user.geo.lat", "user.geo.lon"] for a in geo), geo
        assert all(a["value"] == [52.53, 13.41] and a["distance_km"] < 10 for a in geo), geo
        idx.subscribe("city", 'user.city = "Berlin"')
        idx.subscribe("net", 'src in cidr("172.16.0.0/12") and not src in cidr("172.16.1.0/24")')
        idx.subscribe("near", "geo_within_radius(52.52, 13.40, 10)")
        (atom,) = idx.explain("city", {"user": {"city": "BERLIN"}})["clauses"][0]["atoms"]
        assert atom["sent"] == "BERLIN" and atom["value"] == "berlin" and atom["holds"]
        why = idx.explain("net", {"src": "172.16.1.9"})
        atoms = why["clauses"][0]["atoms"]
        shown = {a["atom"] for a in atoms}
        assert 'src not in cidr("172.16.1.0/24")' in shown, shown
        assert 'src >= "172.16.0.0"' in shown and 'src <= "172.31.255.255"' in shown, shown
        assert all(a["value"] == "172.16.1.9" for a in atoms) and not why["matches"]
        for point, inside in (((52.53, 13.41), True), ((52.70, 13.40), False)):
            event = {"latitude": point[0], "longitude": point[1]}
            why = idx.explain("near", event)
            assert why["matches"] == inside == bool(idx.match(event))
            geo = [a for c in why["clauses"] for a in c["atoms"] if a["atom"].startswith("geo_")]
            assert geo and all(a["radius_km"] == 10 for a in geo)
            assert all(a["value"] == list(point) for a in geo)
            assert all((a["distance_km"] <= 10) == inside for a in geo), geo
            assert 1 < geo[0]["distance_km"] < 25
