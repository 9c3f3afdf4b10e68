"""``bexdb gen --profile rich``: ad-targeting rules over nested events, every form of the
language (beside BEGen's int ranges in :mod:`tools.bench.gen`).

Why: BEGen has int attributes and order predicates only, so it never exercises the atoms
matching tests directly (lists, suffixes, substrings, patterns, geo, segments, frequency
caps) nor ``or``/``not``; a store tuned on it can be 100x slower on rules like these.

What is generated: a schema of nested attributes (``user.age``, ``device.ip``, ...: dotted
paths, events nest), subscriptions and events drawn around *base profiles* as BEGen does
(a subscription's predicates all hold on its base; an event is a base with each attribute
re-drawn with probability ``mutate`` or dropped with probability ``drop``).  A subscription
holds ``preds`` (default 3..7) predicates of these forms, each true on its base:

- int ranges (``user.age between``, ``>=``) and float ranges (``bid.floor <``,
  ``user.income between``); ``hour`` ranges; ``user.premium`` / ``not user.premium``;
- fold_case strings (``user.country``, ``device.os``) with ``=`` or ``in`` of 1-100 values
  (log-uniform), in random letter case;
- string lists (``user.interests``, fold_case) with ``one of``/``none of``/``all of``; int
  lists (``user.audiences``) with ``v in a``/``v not in a``/``one of``;
- ``device.model like "Pixel*"`` / ``matches "SM-G[0-9]+( Pro)?"``; ``starts_with``,
  ``ends_with`` (``page.domain``: a tld or the whole domain), ``contains`` (``page.url``:
  a section);
- ``device.ip in cidr(...)`` (/8../24 blocks, some ``not in cidr``);
- ``geo_within_radius`` (5-300 km; some bases near the poles and the ±180 meridian);
- ``page.category`` (``int_enum``) ``=``/``in``/``!=``;
- ``segment_within``/``segment_before`` on the base's segments, ``within_frequency_cap``;
- ``(P or Q)`` (P true on the base), ``not (Q)`` (Q false on it), ``a is null`` / ``is not
  null`` on an attribute most events lack (``user.coupon``).

**Calibration.**  The match rate is about ``P(match | same base) / bases``; the former is
measured with the reference evaluator on a fixed sample (one base per subscription drawn
from 25, events from the same), and ``bases`` set to reach ``target_rate`` (default 0.1%).
The summary then reports the rate measured by the reference evaluator on the workload
itself.  Knobs: ``target_rate``, ``mutate``, ``drop``, ``min_preds``/``max_preds``,
``geo_share`` (share of subscriptions with a geo predicate).

**Determinism.**  Output depends only on the parameters; subscription ``i`` and event
``j`` each come from their own random stream, and base ``b`` from its own: the first 20K
subscriptions of a 100K workload are the 20K workload.

Cost: about 15 µs a subscription and 30 µs an event (Python); calibration about 2 s.
"""

from __future__ import annotations

import json
import math
import os
import random
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from betree.lang import special
from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema

NOW = 1_700_000_000
T = "string"
SCHEMA: dict[str, Any] = {
    "attributes": {
        "user.age": {"type": "int", "min": 13, "max": 90},
        "user.income": {"type": "float", "min": 0, "max": 500000},
        "user.premium": {"type": "bool"},
        "user.country": {"type": T, "fold_case": True},
        "user.interests": {"type": "string_list", "fold_case": True},
        "user.audiences": {"type": "int_list"},
        "user.coupon": {"type": T},
        "device.os": {"type": T, "fold_case": True},
        "device.model": {"type": T},
        "device.ip": {"type": "ip"},
        "page.url": {"type": T},
        "page.domain": {"type": T},
        "page.category": {"type": "int_enum"},
        "bid.floor": {"type": "float", "min": 0, "max": 50},
        "hour": {"type": "int", "min": 0, "max": 23},
        "latitude": {"type": "float", "min": -90, "max": 90},
        "longitude": {"type": "float", "min": -180, "max": 180},
        "now": {"type": "int"},
        "segments_with_timestamp": {"type": "segments"},
        "frequency_caps": {"type": "frequency_caps"},
    }
}
DEFAULTS: dict[str, Any] = {
    "target_rate": 0.001,
    "mutate": 0.25,
    "drop": 0.05,
    "min_preds": 3,
    "max_preds": 7,
    "geo_share": 0.3,
}

_V = random.Random(20260101)  # the vocabularies: fixed
COUNTRIES = [f"C{_V.choice('ABCDEFGHIJKLMNOPQRSTUVWXYZ')}{i}" for i in range(1000)]
OSES = [f"{_V.choice(['Android', 'iOS', 'Windows', 'Tizen', 'KaiOS'])}-{i}" for i in range(600)]
TOPICS = [f"Topic-{i}-{_V.choice(['Café', 'Sport', 'Auto', 'Ünï', 'News'])}" for i in range(3000)]
BRANDS = ["Pixel", "SM-G", "iPhone", "Moto", "Redmi", "OnePlus", "Xperia", "Nokia"]
TLDS = ["com", "net", "org", "co.uk", "de", "io", "fr", "jp"]
DOMAINS = [f"site{i}.{_V.choice(TLDS)}" for i in range(4000)]
SECTIONS = ["news", "sports", "tech", "auto", "food", "travel", "money", "games", "music"]
SECTIONS += [f"sec{i}" for i in range(200)]
CITIES = [(_V.uniform(-55, 70), _V.uniform(-180, 180)) for _ in range(600)]
CITIES += [(_V.uniform(80, 89.99), _V.uniform(-180, 180)) for _ in range(10)]  # near a pole
CITIES += [(_V.uniform(-60, 60), _V.choice([-1, 1]) * _V.uniform(179, 180)) for _ in range(10)]
CAP_TYPES = sorted(special.CAP_TYPES)
NAMESPACES = ["ad", "line", "creative"]

Base = dict[str, Any]
#: Profiles beyond the bases that mutations and ``or``/``not`` draw from.
FOREIGN = 2000


def _case(rng: random.Random, s: str) -> str:
    r = rng.random()
    return s.upper() if r < 0.2 else s.lower() if r < 0.4 else s


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _count(rng: random.Random, most: int) -> int:
    """1..most, log-uniform (mostly short lists, some long)."""
    return min(most, int(math.exp(rng.uniform(0, math.log(most + 1)))))


def _ip(rng: random.Random) -> str:
    return ".".join(str(rng.randrange(1, 255)) for _ in range(4))


@lru_cache(maxsize=8192)
def make_base(seed: int, b: int) -> Base:
    """Base profile ``b``: flat attribute -> value (the event form; shared: not to be
    changed)."""
    rng = random.Random(f"rich-base-{seed}-{b}")
    lat, lon = rng.choice(CITIES)
    now = NOW + rng.randrange(86_400)
    brand = rng.choice(BRANDS)
    domain = rng.choice(DOMAINS)
    base: Base = {
        "user.age": rng.randint(13, 90),
        "user.income": round(rng.uniform(0, 200_000), 2),
        "user.premium": rng.random() < 0.3,
        "user.country": rng.choice(COUNTRIES),
        "user.interests": rng.sample(TOPICS, rng.randint(2, 15)),
        "user.audiences": rng.sample(range(50_000), rng.randint(3, 40)),
        "device.os": rng.choice(OSES),
        "device.model": f"{brand}{rng.randint(1, 99)}{rng.choice(['', ' Pro', ' Max'])}",
        "device.ip": _ip(rng),
        "page.url": f"https://www.{domain}/{rng.choice(SECTIONS)}/{rng.randrange(10**6)}",
        "page.domain": domain,
        "page.category": rng.randrange(400),
        "bid.floor": round(rng.uniform(0.01, 20), 3),
        "hour": rng.randrange(24),
        "latitude": lat + rng.uniform(-0.3, 0.3),
        "longitude": max(-180.0, min(180.0, lon + rng.uniform(-0.3, 0.3))),
        "now": now,
        "segments_with_timestamp": [
            [sid, (now - rng.randrange(30 * 86_400)) * 1_000_000 + rng.randrange(10**6)]
            for sid in rng.sample(range(20_000), rng.randint(3, 25))
        ],
        "frequency_caps": [
            [rng.choice(CAP_TYPES), rng.randrange(1000), rng.choice(NAMESPACES),
             rng.randrange(8), (now - rng.randrange(86_400)) * 1_000_000]
            for _ in range(rng.randint(0, 4))
        ],
    }  # fmt: skip
    if rng.random() < 0.1:
        base["user.coupon"] = f"CP{rng.randrange(100)}"
    return base


# -- predicates true on a base ----------------------------------------------------------------

Pred = Callable[[random.Random, Base, Base], str | None]


def _in_list(rng: random.Random, attr: str, v: str, vocab: list[str]) -> str:
    n = _count(rng, 100)
    values = {v, *rng.sample(vocab, min(len(vocab), n - 1))} if n > 1 else {v}
    if len(values) == 1:
        return f"{attr} = {_q(_case(rng, v))}"
    return f"{attr} in ({', '.join(_q(_case(rng, x)) for x in sorted(values))})"


def _p_age(rng: random.Random, b: Base, o: Base) -> str:
    v = b["user.age"]
    if rng.random() < 0.5:
        return f"user.age between {v - rng.randint(0, 10)} and {v + rng.randint(0, 10)}"
    return f"user.age >= {v - rng.randint(0, 20)}"


def _p_money(rng: random.Random, b: Base, o: Base) -> str:
    if rng.random() < 0.5:
        return f"bid.floor < {b['bid.floor'] + rng.uniform(0.001, 5):.3f}"
    v = b["user.income"]
    return (
        f"user.income between {v - rng.uniform(0, 30000):.2f} and {v + rng.uniform(0, 30000):.2f}"
    )


def _p_hour(rng: random.Random, b: Base, o: Base) -> str:
    h = b["hour"]
    return f"hour between {max(0, h - rng.randint(0, 6))} and {min(23, h + rng.randint(0, 6))}"


def _p_strings(rng: random.Random, b: Base, o: Base) -> str:
    if rng.random() < 0.6:
        return _in_list(rng, "user.country", b["user.country"], COUNTRIES)
    return _in_list(rng, "device.os", b["device.os"], OSES)


def _p_interests(rng: random.Random, b: Base, o: Base) -> str:
    mine = b["user.interests"]
    r = rng.random()
    if r < 0.5:
        values = {rng.choice(mine), *rng.sample(TOPICS, _count(rng, 30))}
        return f"user.interests one of ({', '.join(_q(_case(rng, x)) for x in sorted(values))})"
    if r < 0.8:
        values = set(rng.sample(TOPICS, _count(rng, 20) + 1)) - set(mine)
        return f"user.interests none of ({', '.join(_q(x) for x in sorted(values))})"
    values = set(rng.sample(mine, min(len(mine), rng.randint(2, 3))))
    return f"user.interests all of ({', '.join(_q(x) for x in sorted(values))})"


def _p_audiences(rng: random.Random, b: Base, o: Base) -> str:
    mine = b["user.audiences"]
    r = rng.random()
    if r < 0.4:
        return f"{rng.choice(mine)} in user.audiences"
    if r < 0.6:
        x = rng.randrange(50_000)
        return f"{x} not in user.audiences" if x not in mine else f"{x} in user.audiences"
    values = {rng.choice(mine), *rng.sample(range(50_000), _count(rng, 50))}
    return f"user.audiences one of ({', '.join(map(str, sorted(values)))})"


def _p_model(rng: random.Random, b: Base, o: Base) -> str:
    m = b["device.model"]
    brand = next(x for x in BRANDS if m.startswith(x))
    r = rng.random()
    if r < 0.4:
        return f"device.model like {_q(brand + '*')}"
    if r < 0.7:
        return f"device.model like {_q(m[:-1] + '?')}"
    return f"device.model matches {_q(brand + '[0-9]+( Pro| Max)?')}"


def _p_page(rng: random.Random, b: Base, o: Base) -> str:
    url, domain = b["page.url"], b["page.domain"]
    r = rng.random()
    if r < 0.25:
        return f"starts_with(page.url, {_q('https://www.' + domain + '/')})"
    if r < 0.45:
        return f"ends_with(page.domain, {_q('.' + domain.split('.', 1)[1])})"
    if r < 0.7:
        return f"ends_with(page.domain, {_q(domain)})"
    return f"contains(page.url, {_q('/' + url.split('/')[3] + '/')})"


def _p_ip(rng: random.Random, b: Base, o: Base) -> str:
    parts = b["device.ip"].split(".")
    n = rng.choice([8, 16, 16, 24])
    block = ".".join(parts[: n // 8] + ["0"] * (4 - n // 8)) + f"/{n}"
    blocks = {block, *(f"{_ip(rng).rsplit('.', 1)[0]}.0/24" for _ in range(rng.randint(0, 4)))}
    if rng.random() < 0.2:
        other = f"{(int(parts[0]) % 254) + 1}.0.0.0/8"
        return f"device.ip not in cidr({_q(other)})"
    return f"device.ip in cidr({', '.join(_q(x) for x in sorted(blocks))})"


def _p_geo(rng: random.Random, b: Base, o: Base) -> str:
    lat, lon = b["latitude"], b["longitude"]
    radius = round(rng.uniform(5, 300), 1)
    for _ in range(20):
        c_lat = max(-90.0, min(90.0, lat + rng.uniform(-1, 1) * radius / 222))
        c_lon = max(-180.0, min(180.0, lon + rng.uniform(-1, 1) * radius / 222))
        c_lat, c_lon = round(c_lat, 4), round(c_lon, 4)
        if special.geo_within(c_lat, c_lon, lat, lon, radius):
            return f"geo_within_radius({c_lat}, {c_lon}, {radius})"
    return f"geo_within_radius({lat!r}, {lon!r}, {radius})"


def _p_category(rng: random.Random, b: Base, o: Base) -> str:
    c = b["page.category"]
    r = rng.random()
    if r < 0.4:
        return f"page.category = {c}"
    if r < 0.8:
        values = {c, *rng.sample(range(400), _count(rng, 30))}
        return f"page.category in ({', '.join(map(str, sorted(values)))})"
    x = rng.randrange(400)
    return f"page.category != {x}" if x != c else f"page.category = {c}"


def _p_segment(rng: random.Random, b: Base, o: Base) -> str:
    sid, ts = rng.choice(b["segments_with_timestamp"])
    age = b["now"] - ts // 1_000_000  # seconds since the segment was entered
    if rng.random() < 0.7:
        return f"segment_within({sid}, {age + rng.randrange(7 * 86_400)})"
    return f"segment_before({sid}, {max(0, age - 1 - rng.randrange(86_400))})"


def _p_cap(rng: random.Random, b: Base, o: Base) -> str:
    caps = b["frequency_caps"]
    if caps and rng.random() < 0.7:
        kind, ident, ns, count, _ = rng.choice(caps)
        limit = count + 1 + rng.randrange(5)
        return f"within_frequency_cap({_q(kind)}, {ident}, {_q(ns)}, {limit}, 0)"
    kind, ns = rng.choice(CAP_TYPES), rng.choice(NAMESPACES)
    return f"within_frequency_cap({_q(kind)}, {_q(ns)}, {rng.randint(1, 10)}, 3600)"


def _p_bool(rng: random.Random, b: Base, o: Base) -> str:
    return "user.premium" if b["user.premium"] else "not user.premium"


def _p_absent(rng: random.Random, b: Base, o: Base) -> str:
    return "user.coupon is not null" if "user.coupon" in b else "user.coupon is null"


def _s_lists(rng: random.Random, b: Base, o: Base) -> str:
    if rng.random() < 0.5:
        return f"{rng.choice(b['user.audiences'])} in user.audiences"
    values = {rng.choice(b["user.interests"]), *rng.sample(TOPICS, rng.randint(1, 4))}
    return f"user.interests one of ({', '.join(_q(_case(rng, x)) for x in sorted(values))})"


def _s_place(rng: random.Random, b: Base, o: Base) -> str:
    r = rng.random()
    if r < 0.3:
        return f"ends_with(page.domain, {_q(b['page.domain'])})"
    if r < 0.6:
        return f"page.category = {b['page.category']}"
    if r < 0.8:
        return f"device.ip in cidr({_q(b['device.ip'].rsplit('.', 2)[0] + '.0.0/16')})"
    sid, ts = rng.choice(b["segments_with_timestamp"])
    return f"segment_within({sid}, {b['now'] - ts // 1_000_000 + rng.randrange(86_400)})"


#: Forms that few profiles satisfy: each subscription has two of them.
SELECTIVE: list[tuple[Pred, float]] = [
    (_p_strings, 1.5), (_s_lists, 1.5), (_s_place, 1.5), (_p_model, 0.3),
]  # fmt: skip
FORMS: list[tuple[Pred, float]] = [
    (_p_age, 1.0), (_p_money, 1.0), (_p_hour, 0.5), (_p_strings, 1.5), (_p_interests, 1.5),
    (_p_audiences, 1.0), (_p_model, 0.7), (_p_page, 1.0), (_p_ip, 0.6), (_p_category, 1.0),
    (_p_segment, 0.7), (_p_cap, 0.5), (_p_bool, 0.3), (_p_absent, 0.2),
]  # fmt: skip


def _false_on(rng: random.Random, b: Base, o: Base) -> str | None:
    """A predicate of the other base ``o`` that fails on ``b`` (checked), for ``not``."""
    for _ in range(4):
        form = rng.choices([f for f, _ in FORMS], [w for _, w in FORMS])[0]
        text = form(rng, o, b)
        if text is not None and not evaluate(compile_expr(text, _schema()), _validated(b)):
            return text
    return None


_SCHEMA_CACHE: list[Schema] = []


def _schema() -> Schema:
    if not _SCHEMA_CACHE:
        _SCHEMA_CACHE.append(Schema.from_json(SCHEMA))
    return _SCHEMA_CACHE[0]


def _validated(flat: Base) -> dict[str, object]:
    return _schema().validate_event(flat)


def subscription(p: dict[str, Any], i: int, bases: int) -> str:
    """Subscription ``i`` of a workload of ``bases`` base profiles."""
    rng = random.Random(f"rich-sub-{p['seed']}-{i}")
    b = make_base(p["seed"], rng.randrange(bases))
    o = make_base(p["seed"], bases + rng.randrange(FOREIGN))  # a foreign profile
    k = rng.randint(p["min_preds"], p["max_preds"])
    forms = [f for f, _ in FORMS]
    picked = rng.choices([f for f, _ in SELECTIVE], [w for _, w in SELECTIVE], k=2)
    picked += rng.choices(forms, [w for _, w in FORMS], k=max(0, k - 2))
    picked = list(dict.fromkeys(picked))
    parts = [f(rng, b, o) for f in picked]
    if rng.random() < p["geo_share"]:
        parts.append(_p_geo(rng, b, o))
    texts = [t for t in parts if t is not None]
    r = rng.random()
    if r < 0.15 and len(texts) > 1:  # (P or Q): P holds on the base
        q = rng.choices(forms, [w for _, w in FORMS])[0](rng, o, b)
        texts[0] = f"({texts[0]} or {q})"
    elif r < 0.25:
        q = _false_on(rng, b, o)
        if q is not None:
            texts.append(f"not ({q})")
    return " and ".join(texts)


def event(p: dict[str, Any], j: int, bases: int, stream: str = "ev") -> dict[str, Any]:
    """Event ``j``: a base with attributes re-drawn (from another base) or dropped; nested."""
    rng = random.Random(f"rich-{stream}-{p['seed']}-{j}")
    b = make_base(p["seed"], rng.randrange(bases))
    flat: Base = {}
    for attr, v in b.items():
        r = rng.random()
        if r < p["drop"] and attr != "now":
            continue
        if r < p["drop"] + p["mutate"]:
            other = make_base(p["seed"], bases + rng.randrange(FOREIGN))
            v = other.get(attr, v)
            if attr in ("latitude", "longitude"):
                v = b[attr] + rng.uniform(-1, 1)
                v = max(-90.0, min(90.0, v)) if attr == "latitude" else max(-180.0, min(180.0, v))
        flat[attr] = v
    return _nest(flat)


def _nest(flat: Base) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr, v in flat.items():
        head, _, tail = attr.partition(".")
        if tail:
            out.setdefault(head, {})[tail] = v
        else:
            out[attr] = v
    return out


def _rate(p: dict[str, Any], subs: list[str], events: list[dict[str, Any]]) -> float:
    schema = _schema()
    nodes = [compile_expr(t, schema) for t in subs]
    values = [schema.validate_event(e) for e in events]
    hits = sum(evaluate(n, v) for v in values for n in nodes)
    return hits / max(1, len(nodes) * len(values))


def calibrate(p: dict[str, Any], n_subs: int = 300, n_events: int = 150) -> tuple[int, float]:
    """(bases, P(match | same base)): the latter measured over one base (the workload's
    subscriptions and events of base 0 alone), the former ``round(P / target_rate)``."""
    subs = [subscription(p, i, 1) for i in range(n_subs)]
    events = [event(p, j, 1, "calib") for j in range(n_events)]
    same = _rate(p, subs, events)
    return max(1, round(same / p["target_rate"])), same


def params(**given: Any) -> dict[str, Any]:
    """The parameters: ``seed``, and :data:`DEFAULTS` unless given (BEGen's own, such as
    ``dims``, are ignored)."""
    known = {k: v for k, v in given.items() if v is not None and (k in DEFAULTS or k == "seed")}
    p = {"seed": 1, **DEFAULTS, **known}
    if not 0 < p["target_rate"] < 1 or not 0 <= p["mutate"] + p["drop"] <= 1:
        raise ValueError("rich: target_rate in (0, 1), mutate + drop in [0, 1]")
    if not 1 <= p["min_preds"] <= p["max_preds"]:
        raise ValueError("rich: 1 <= min_preds <= max_preds")
    return p


def make(
    subs: int, events: int, *, check: bool = True, **given: Any
) -> tuple[dict[str, Any], list[tuple[int, str]], list[dict[str, Any]], dict[str, Any]]:
    """(schema, ``(id, expr)`` subscriptions, events, summary) in memory."""
    p = params(**given)
    t0 = time.perf_counter()
    bases, same = calibrate(p)
    t1 = time.perf_counter()
    sub_list = [(i, subscription(p, i, bases)) for i in range(subs)]
    t2 = time.perf_counter()
    ev_list = [event(p, j, bases) for j in range(events)]
    t3 = time.perf_counter()
    summary = _summary(p, subs, events, bases, same)
    summary["seconds"] = {"calibrate": t1 - t0, "subs": t2 - t1, "events": t3 - t2}
    if check:
        summary.update(_check(p, [t for _, t in sub_list], ev_list))
        summary["seconds"]["check"] = time.perf_counter() - t3
    return SCHEMA, sub_list, ev_list, summary


def _summary(p: dict[str, Any], subs: int, events: int, bases: int, same: float) -> dict[str, Any]:
    return {
        "profile": "rich",
        "params": {**p, "bases": bases},
        "subs": subs,
        "events": events,
        "attributes": len(SCHEMA["attributes"]),
        "target_rate": p["target_rate"],
        "calibration_rate": same / bases,
        "same_base_rate": same,
    }


def _check(p: dict[str, Any], subs: list[str], events: list[dict[str, Any]]) -> dict[str, Any]:
    a, b = min(len(subs), 2000), min(len(events), 100)
    if not a or not b:
        return {}
    return {"sample_rate": _rate(p, subs[:a], events[:b]), "sample": [a, b]}


def generate(
    out_dir: str | os.PathLike[str], subs: int, events: int, *, check: bool = True, **given: Any
) -> dict[str, Any]:
    """Write ``schema.json``, ``subs.jsonl`` and ``events.jsonl`` to ``out_dir``; returns the
    summary (with the files)."""
    schema, sub_list, ev_list, summary = make(subs, events, check=check, **given)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "schema.json").write_text(json.dumps(schema, indent=1) + "\n")
    with open(out / "subs.jsonl", "w", encoding="utf-8") as f:
        f.writelines(
            json.dumps({"id": i, "expr": t}, ensure_ascii=False) + "\n" for i, t in sub_list
        )
    with open(out / "events.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(e, ensure_ascii=False) + "\n" for e in ev_list)
    summary["files"] = {
        k: str(out / f"{k}.{x}")
        for k, x in (("schema", "json"), ("subs", "jsonl"), ("events", "jsonl"))
    }
    return summary


def format_summary(s: dict[str, Any]) -> str:
    """The summary as text, for ``bexdb gen``."""
    p = s["params"]
    lines = [
        f"profile rich: {s['subs']:,} subscriptions, {s['events']:,} nested events over "
        f"{s['attributes']} attributes, {p['bases']} base profiles, seed {p['seed']}",
        f"match rate on one base {s['same_base_rate']:.2%}: {p['bases']} bases for the target "
        f"{s['target_rate']:.2%}",
    ]
    if "sample_rate" in s:
        a, b = s["sample"]
        lines.append(
            f"measured match rate (reference evaluator): {s['sample_rate']:.3%} ({a:,} subs x "
            f"{b:,} events)"
        )
    lines.append("time: " + ", ".join(f"{k} {v:.1f}s" for k, v in s["seconds"].items()))
    if "files" in s:
        lines.append("wrote " + ", ".join(s["files"].values()))
    return "\n".join(lines)
