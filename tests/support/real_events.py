"""A seeded workload of the language for real events (SPEC section 11): ``float_list``,
``geo_within_radius`` over named attributes, and ``any PATH (EXPR)`` over arrays of objects;
and the paths every such store is checked through against the brute-force evaluator
(``betree.lang.expr.evaluate``): online subscribe with deletes and reopening, ``match``,
``match_many``, the python load, a sharded store taking writes, and (in the Spark tests) the
Spark load.

Events nest (``user.geo``, ``items`` as an array of objects) or not, leave attributes
undefined, give empty arrays, elements missing an attribute and nested nulls; the numbers
hold the edges (``-0.0``, 2**53 + 1 against its nearest double, the largest doubles, 2**63 - 1).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from betree.index import Index
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.stores.sharded import HASH, open_index, shard_name, shard_of, write_manifest
from storage.codec import encode_id
from storage.errors import InvalidInput
from tests.support import differential
from tests.support.brute import brute

SCHEMA: dict[str, Any] = {
    "attributes": {
        "p": {"type": "float_list"},
        "n": {"type": "int"},
        "items.price": {"type": "float_list"},
        "items.sku": {"type": "string_list"},
        "items.qty": {"type": "int_list"},
        "items.tags": {"type": "string_list"},
        "latitude": {"type": "float"},
        "longitude": {"type": "float"},
        "user.geo.lat": {"type": "float"},
        "user.geo.lon": {"type": "float"},
        "home_lat": {"type": "float"},
    }
}
SETTINGS = {"max_cap": 4, "min_size": 2}  # small l-nodes: a deep tree from few subscriptions

BIG = 9007199254740993  # 2**53 + 1: no double equals it
MAX = 1.7976931348623157e308  # the largest double
NUMBERS = [0, -0.0, 2.5, 1, 1.0, -3, BIG, 9007199254740992.0, MAX, -MAX, 2**63 - 1, 7.25]
SKUS = ["a1", "b2", "c3", "é"]
CENTRES = [(52.52, 13.40), (0.0, 0.0), (89.9, 10.0), (-33.9, 179.95)]


def _num(rng: random.Random) -> str:
    v = rng.choice(NUMBERS)
    return repr(v) if isinstance(v, float) else str(v)


def _nums(rng: random.Random) -> str:
    return ", ".join(_num(rng) for _ in range(rng.randint(0, 3)))


def float_list_atom(rng: random.Random) -> str:
    attr = rng.choice(["p", "items.price"])
    form = rng.randrange(7)
    if form == 0:
        return f"{_num(rng)} in {attr}"
    if form == 1:
        return f"{_num(rng)} not in {attr}"
    if form == 2:
        return f"{attr} {rng.choice(['one', 'none', 'all'])} of ({_nums(rng)})"
    if form == 3:
        return f"{attr} is empty"
    if form == 4:
        return f"{attr} is {rng.choice(['', 'not '])}null"
    if form == 5:
        return f'"{rng.choice(SKUS)}" in items.sku'
    return f"n {rng.choice(['<', '=', '>='])} {rng.randint(0, 5)}"


def geo_atom(rng: random.Random) -> str:
    lat, lon = rng.choice(CENTRES)
    km = rng.choice(["0", "10", "300.5", "5000", "25000", "-1"])
    pair = rng.choice(
        ["", "latitude, longitude, ", "user.geo.lat, user.geo.lon, ", "home_lat, longitude, "]
    )
    return f"geo_within_radius({pair}{lat}, {lon}, {km})"


def _inner_atom(rng: random.Random) -> str:
    form = rng.randrange(8)
    if form == 0:
        return f'sku = "{rng.choice(SKUS)}"'
    if form == 1:
        return f"price {rng.choice(['<', '>', '=', '!=', '>='])} {_num(rng)}"
    if form == 2:
        return f"qty between {rng.randint(0, 2)} and {rng.randint(1, 4)}"
    if form == 3:
        return f'sku in ("{rng.choice(SKUS)}", "{rng.choice(SKUS)}")'
    if form == 4:
        return f"{rng.choice(['sku', 'price', 'qty'])} is {rng.choice(['', 'not '])}null"
    if form == 5:
        return f'starts_with(sku, "{rng.choice(["a", "b", ""])}")'
    if form == 6:
        return f"price in ({_nums(rng)})"
    return f"qty {rng.choice(['<', '>', '='])} {rng.randint(0, 4)}"


def any_atom(rng: random.Random) -> str:
    parts = [_inner_atom(rng) for _ in range(rng.randint(1, 3))]
    inner = rng.choice([" and ", " or "]).join(parts)
    if rng.random() < 0.15:
        inner = f"not ({inner})"
    return f"{rng.choice(['', 'not '])}any items ({inner})"


def expression(rng: random.Random, forms: tuple[Any, ...], depth: int = 0) -> str:
    r = rng.random()
    if depth >= 2 or r < 0.45:
        return rng.choice(forms)(rng)
    if r < 0.75:
        parts = [expression(rng, forms, depth + 1) for _ in range(rng.randint(2, 3))]
        return "(" + " and ".join(parts) + ")"
    if r < 0.9:
        return "(" + " or ".join(expression(rng, forms, depth + 1) for _ in range(2)) + ")"
    return "not " + expression(rng, forms, depth + 1)


def _item(rng: random.Random) -> dict[str, Any]:
    item: dict[str, Any] = {}
    if rng.random() < 0.8:
        item["sku"] = rng.choice(SKUS)
    if rng.random() < 0.8:
        item["price"] = rng.choice(NUMBERS)
    elif rng.random() < 0.3:
        item["price"] = None  # a nested null: undefined in this element
    if rng.random() < 0.7:
        item["qty"] = rng.randint(0, 4)
    if rng.random() < 0.2:
        item["tags"] = [rng.choice(SKUS) for _ in range(rng.randint(0, 2))]
    return item


def _point(rng: random.Random) -> tuple[float, float]:
    lat, lon = rng.choice(CENTRES)
    if rng.random() < 0.2:
        return rng.uniform(-95, 95), rng.uniform(-190, 190)
    return lat + rng.uniform(-1, 1), lon + rng.uniform(-1, 1)


def event(rng: random.Random) -> dict[str, Any]:
    ev: dict[str, Any] = {}
    if rng.random() < 0.8:
        ev["p"] = [rng.choice(NUMBERS) for _ in range(rng.randint(0, 4))]
    if rng.random() < 0.5:
        ev["n"] = rng.randint(0, 5)
    r = rng.random()
    if r < 0.7:
        ev["items"] = [_item(rng) for _ in range(rng.randint(1, 4))]
    elif r < 0.8:
        ev["items"] = []  # an empty array: any is false
    if rng.random() < 0.8:
        ev["latitude"], ev["longitude"] = _point(rng)
        if rng.random() < 0.1:
            del ev[rng.choice(["latitude", "longitude"])]
    if rng.random() < 0.7:
        lat, lon = _point(rng)
        geo: dict[str, Any] = {"lat": lat, "lon": lon}
        if rng.random() < 0.15:
            geo[rng.choice(["lat", "lon"])] = None
        if rng.random() < 0.5:
            ev["user"] = {"geo": geo}
        else:
            ev.update({f"user.geo.{k}": v for k, v in geo.items()})
    if rng.random() < 0.4:
        ev["home_lat"] = _point(rng)[0]
    return ev


def workload(seed: int, n: int, forms: tuple[Any, ...]) -> dict[Any, str]:
    rng = random.Random(seed)
    return {(i if i % 2 else f"s{i}"): expression(rng, forms) for i in range(n)}


def write_jsonl(path: Path, docs: list[Any]) -> str:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return str(path)


def online_differential(path: Path, seed: int, forms: tuple[Any, ...]) -> int:
    """:func:`tests.support.differential.online_differential` on this workload."""
    return differential.online_differential(
        path, SCHEMA, SETTINGS, lambda rng: expression(rng, forms), event, seed
    )


def sharded_differential(
    root: Path, subs: dict[Any, str], seed: int, forms: tuple[Any, ...], shards: int = 3
) -> None:
    """A sharded store (each id in the shard its hash names) answers as the brute force,
    also after writes through it."""
    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, text in subs.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, text))
    for k, part in enumerate(parts):
        with Index.open(root / shard_name(k), schema=SCHEMA, settings=SETTINGS) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(root, entries, {"by": "id", "hash": HASH, "shards": shards})
    rng = random.Random(seed)
    schema = Schema.from_json(SCHEMA)
    live = dict(subs)
    with open_index(root, readonly=False) as idx:
        for ident in list(live)[::7]:
            assert idx.unsubscribe(ident)
            del live[ident]
        extra = {f"x{k}": v for k, v in workload(seed + 1, 20, forms).items()}
        idx.subscribe_many(list(extra.items()))
        live.update(extra)
        events = [event(rng) for _ in range(120)]
        for ev, res in zip(events, idx.match_many(events), strict=True):
            want = brute(live, schema, ev)
            assert set(idx.match(ev)) == want, ev
            assert set(res) == want, ev  # type: ignore[arg-type]


def accepted(subs: dict[Any, str]) -> dict[Any, str]:
    """The subscriptions the schema accepts (a random one may compare a float list with an
    out-of-range literal and be rejected as a single-process load would)."""
    schema = Schema.from_json(SCHEMA)
    out = {}
    for ident, text in subs.items():
        try:
            compile_expr(text, schema)
        except InvalidInput:
            continue
        out[ident] = text
    return out
