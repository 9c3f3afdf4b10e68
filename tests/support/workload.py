"""Random expressions and events over a schema with every attribute type (for tests)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

SCHEMA = {
    "attributes": {
        "i": {"type": "int", "min": 0, "max": 20},
        "j": {"type": "int"},
        "f": {"type": "float", "min": -5, "max": 5},
        "s": {"type": "string"},
        "b": {"type": "bool"},
        "il": {"type": "int_list"},
        "sl": {"type": "string_list"},
    }
}
WORDS = ["", "a", "ab", "abc", "b", "ba", "\u00e9t\u00e9", "z"]


def _num(rng: random.Random, attr: str) -> str:
    if attr == "f":
        return rng.choice(["-2.5", "0", "1", "3.0", "4.75", "-5", "1e0"])
    return str(rng.randint(-2, 22))


def _str(rng: random.Random) -> str:
    return '"' + rng.choice(WORDS) + '"'


def atom(rng: random.Random) -> str:
    """One atomic form of SPEC section 3, on a random attribute."""
    attr = rng.choice(["i", "j", "f", "s", "b", "il", "sl"])
    op = rng.choice(["<", "<=", "=", "<>", "!=", ">=", ">"])
    if attr in ("i", "j", "f"):
        lit = lambda: _num(rng, attr)  # noqa: E731
    elif attr == "s":
        lit = lambda: _str(rng)  # noqa: E731
    else:
        lit = None
    if lit is not None:
        form = rng.randrange(9)
        if form == 0:
            return f"{attr} {op} {lit()}"
        if form == 1:
            return f"{lit()} {op} {attr}"
        if form == 2:
            return f"{attr} {'not ' if rng.random() < 0.3 else ''}between {lit()} and {lit()}"
        if form == 3:
            values = ", ".join(lit() for _ in range(rng.randint(0, 3)))
            return f"{attr} {'not ' if rng.random() < 0.4 else ''}in ({values})"
        if form == 4:
            return f"{attr} is {'not ' if rng.random() < 0.5 else ''}null"
        if form == 5 and attr == "s":
            fn = rng.choice(["starts_with", "ends_with", "contains"])
            return f"{fn}(s, {_str(rng)})"
        return f"{attr} {rng.choice(['<', '>=', '='])} {lit()}"
    if attr == "b":
        return rng.choice(["b", "not b", "b = true", "b <> false", "b = false", "b is null"])
    elem = (lambda: str(rng.randint(0, 5))) if attr == "il" else (lambda: _str(rng))
    form = rng.randrange(5)
    if form == 0:
        return f"{elem()} {'not ' if rng.random() < 0.3 else ''}in {attr}"
    if form == 1:
        kind = rng.choice(["one of", "none of", "all of"])
        values = ", ".join(elem() for _ in range(rng.randint(0, 3)))
        return f"{attr} {kind} ({values})"
    if form == 2:
        return f"{attr} is empty"
    if form == 3:
        return f"{attr} is {'not ' if rng.random() < 0.5 else ''}null"
    return f"{elem()} in {attr}"


def expression(rng: random.Random, depth: int = 0) -> str:
    """A random expression: atoms under and / or / not, parentheses, constants."""
    r = rng.random()
    if depth >= 3 or r < 0.35:
        return atom(rng) if rng.random() > 0.02 else rng.choice(["true", "false"])
    if r < 0.75:
        parts = [expression(rng, depth + 1) for _ in range(rng.randint(2, 4))]
        return "(" + rng.choice([" and ", " && "]).join(parts) + ")"
    if r < 0.92:
        parts = [expression(rng, depth + 1) for _ in range(2)]
        return "(" + rng.choice([" or ", " || "]).join(parts) + ")"
    return "not " + expression(rng, depth + 1)


def event(rng: random.Random) -> dict[str, Any]:
    """A random event: some attributes missing or null."""
    ev: dict[str, Any] = {}
    if rng.random() < 0.8:
        ev["i"] = rng.randint(-2, 22)
    if rng.random() < 0.6:
        ev["j"] = rng.randint(-2, 22)
    if rng.random() < 0.7:
        ev["f"] = rng.choice([-2.5, 0, 1, 3.0, 4.75, -5, 0.5, 100])
    if rng.random() < 0.7:
        ev["s"] = rng.choice([*WORDS, "abd", "aa"])
    if rng.random() < 0.6:
        ev["b"] = rng.random() < 0.5
    if rng.random() < 0.6:
        ev["il"] = [rng.randint(0, 5) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.6:
        ev["sl"] = [rng.choice(WORDS) for _ in range(rng.randint(0, 3))]
    for attr in list(ev):
        if rng.random() < 0.05:
            ev[attr] = None
    return ev


def build_sharded(root: Path, subs: dict[int, str]) -> str:
    """A sharded store written by hand (the Spark job's layout), integer ids split by parity.

    Each shard commits in many small batches, leaving free pages for compaction.
    """
    from betree.index import Index
    from betree.stores.sharded import shard_name, write_manifest

    entries = []
    for k in range(2):
        part = [(i, e) for i, e in subs.items() if i % 2 == k]
        with Index.open(root / shard_name(k), schema=SCHEMA) as idx:
            for start in range(0, len(part), 20):
                idx.subscribe_many(part[start : start + 20])
        entries.append({"path": shard_name(k), "subscriptions": len(part)})
    write_manifest(root, entries, {"by": "parity (test)"})
    return str(root)


def build_hashed(
    root: Path, subs: dict[Any, str], shards: int = 3, schema: dict[str, Any] | None = None
) -> str:
    """A sharded store written by hand as the Spark load writes one: each id in the shard
    ``shard_of(encode_id(id), shards)`` names, and the manifest's partitioning that hash,
    so that it takes writes (:mod:`betree.stores.shardwrite`); ``schema``: the schema
    document (default :data:`SCHEMA`)."""
    from betree.index import Index
    from betree.stores.sharded import HASH, shard_name, shard_of, write_manifest
    from storage.codec import encode_id

    parts: list[list[tuple[Any, str]]] = [[] for _ in range(shards)]
    for ident, expr in subs.items():
        parts[shard_of(encode_id(ident), shards)].append((ident, expr))
    for k, part in enumerate(parts):
        with Index.open(root / shard_name(k), schema=schema or SCHEMA) as idx:
            idx.subscribe_many(part)
    entries = [{"path": shard_name(k), "subscriptions": len(p)} for k, p in enumerate(parts)]
    write_manifest(root, entries, {"by": "id", "hash": HASH, "shards": shards})
    return str(root)
