"""The ad-tech functions of the C be-tree library: segments, frequency caps, geo radius.

Why a module of their own: their meaning (README: Language, "Functions of the be-tree
library") is the same for the parser (which function takes which arguments), the schema
(what a ``segments`` or ``frequency_caps`` event value looks like), the brute-force
evaluator and the index's per-event tests; kept here, each of those imports one function
instead of repeating the arithmetic.  The semantics mirror FrankBro/be-tree's
``src/special.c`` (read, not copied):

- ``segment_within([attr,] id, seconds)``: the event's segment ``id`` (in ``attr``, default
  ``segments_with_timestamp``) was entered at most ``seconds`` before the event's ``now``
  (``now - seconds <= timestamp_us / 1e6``, the division truncating like C's);
  ``segment_before`` is the opposite (``now - seconds > timestamp_us / 1e6``).  False when
  the segment is absent, or ``now`` or the attribute is undefined.
- ``within_frequency_cap(type, namespace, value, length)``: the first cap of the event's
  ``frequency_caps`` with that type and namespace (and id, in the five-argument form
  ``within_frequency_cap(type, id, namespace, value, length)``) is not yet reached: with
  ``length <= 0``, ``value > count``; else true when the cap has no timestamp, or its
  timestamp is more than ``length`` seconds before ``now``, or ``value > count``.  True when
  no cap applies or the list is empty; false when the attribute is undefined, or (for a
  non-empty list) ``now`` is.
- ``geo_within_radius([lat_attr, lon_attr,] lat, lon, km)``: the haversine distance from
  the event's point (``latitude`` and ``longitude`` unless two float attributes are named) to
  (lat, lon) is at most ``km`` (Earth radius 6372.8 km, the library's constant for pi).
  False when either attribute is undefined.  Its node and atoms read the latitude from their
  ``attr`` and the longitude from :func:`longitude_attr` of their constants (a fourth
  constant when it is not ``longitude``).

:func:`geo_box` gives the latitude/longitude box that encloses a radius, so that the index
prunes through the two attributes' PB+trees and c-directories before the exact test.

Cost: each test is a few float operations (geo) or one scan of the event's list.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Mapping
from itertools import chain
from operator import itemgetter
from typing import Any

from storage.errors import InvalidInput

#: The functions, each with the number(s) of arguments it takes.
FUNCTIONS = {
    "segment_within": (2, 3),
    "segment_before": (2, 3),
    "within_frequency_cap": (4, 5),
    "geo_within_radius": (3, 5),
}
#: The index's test beside ``geo_within_radius`` for points beyond the coordinate ranges
#: (which its box leaves out): ``latitude`` beyond ±90 or ``longitude`` beyond ±180.
OUT_OF_RANGE = "coordinates_out_of_range"
#: The attribute ``segment_within(id, seconds)`` reads when none is named.
DEFAULT_SEGMENTS = "segments_with_timestamp"
#: The attribute ``within_frequency_cap`` reads.
FREQUENCY_CAPS = "frequency_caps"
#: The attribute holding the event's current time (seconds), read by the time functions.
NOW = "now"
LATITUDE = "latitude"
LONGITUDE = "longitude"
#: The cap types of ``within_frequency_cap`` and of a ``frequency_caps`` event value.
CAP_TYPES = frozenset(
    f"{kind}{suffix}"
    for kind in ("advertiser", "campaign", "campaign_group", "flight", "product")
    for suffix in ("", ":ip")
)
EARTH_RADIUS_KM = 6372.8
TO_RAD = 3.1415926536 / 180  # the library's constant, kept so that distances agree
_TO_RAD = TO_RAD
#: Slack (degrees) added around a radius's box: far above the rounding of the formulas.
_BOX_SLACK = 1e-6

Event = Mapping[str, object]


def seconds(timestamp_us: int) -> int:
    """``timestamp_us / 1000000`` truncated toward zero (C integer division)."""
    q = abs(timestamp_us) // 1_000_000
    return q if timestamp_us >= 0 else -q


def _segment_time(segments: Any, segment_id: int) -> int | None:
    """The timestamp (µs) of ``segment_id`` in a validated segments value (sorted by id)."""
    for sid, ts in segments:
        if sid == segment_id:
            return int(ts)
        if sid > segment_id:
            return None
    return None


def _now(event: Event) -> int | None:
    now = event.get(NOW)
    return now if isinstance(now, int) and not isinstance(now, bool) else None


def longitude_attr(args: tuple[Any, ...]) -> str:
    """The longitude attribute of a geo test's constants ``(lat, lon, km[, lon_attr])``."""
    return args[3] if len(args) > 3 else LONGITUDE  # type: ignore[no-any-return]


def geo_constants(
    lat_attr: str, lon_attr: str, lat: float, lon: float, km: float
) -> tuple[float | str, ...]:
    """The canonical constants of a geo test: the three-argument form's when it reads
    ``latitude`` and ``longitude`` (one atom for both spellings), else with ``lon_attr``."""
    if lat_attr == LATITUDE and lon_attr == LONGITUDE:
        return (lat, lon, km)
    return (lat, lon, km, lon_attr)


def truth(func: str, attr: str, args: tuple[Any, ...], event: Event) -> bool:
    """Whether ``func(args)`` on attribute ``attr`` holds for the validated ``event``."""
    if func == "geo_within_radius":
        lat, lon = event.get(attr), event.get(longitude_attr(args))
        if lat is None or lon is None:
            return False
        return geo_within(args[0], args[1], lat, lon, args[2])  # type: ignore[arg-type]
    value = event.get(attr)
    if value is None:
        return False
    if func == "within_frequency_cap":
        if not value:  # type: ignore[attr-defined]
            return True
        now = _now(event)
        if now is None:
            return False
        kind, cap_id, namespace, limit, length = args
        for c_kind, c_id, c_ns, c_ts, c_count in value:  # type: ignore[attr-defined]
            if c_kind == kind and c_ns == namespace and (cap_id is None or c_id == cap_id):
                if length <= 0:
                    return bool(limit > c_count)
                if c_ts is None or now - seconds(c_ts) > length:
                    return True
                return bool(limit > c_count)
        return True
    now = _now(event)
    if now is None:
        return False
    ts = _segment_time(value, args[0])
    if ts is None:
        return False
    if func == "segment_within":
        return now - args[1] <= seconds(ts)
    if func == "segment_before":
        return now - args[1] > seconds(ts)
    raise ValueError(f"unknown function {func!r}")


def holds_factory(test: str, attr: str, arg: object) -> Callable[[Event], bool]:
    """``holds(event)`` of the index's test ``test`` (a function name, or ``not_`` one: the
    attribute defined and the function false), for validated events.

    The same results as :func:`truth` (the differential tests compare them), faster: a
    segment is found by bisection in the sorted list, and the geo test keeps the sine and
    cosine of its centre's latitude (the same floats the formula computes).
    """
    args: tuple[Any, ...] = arg  # type: ignore[assignment]
    if test.startswith("not_"):
        holds = holds_factory(test[4:], attr, arg)
        return lambda e: e.get(attr) is not None and not holds(e)
    if test == OUT_OF_RANGE:
        return _out_of_range(attr, args[0] if args else LONGITUDE)
    if test.startswith("segment_"):
        return _segment_holds(test == "segment_within", attr, args[0], args[1])
    if test == "geo_within_radius":
        return _geo_holds(attr, longitude_attr(args), *args[:3])
    return lambda e: truth(test, attr, args, e)


def _out_of_range(lat_attr: str, lon_attr: str) -> Callable[[Event], bool]:
    def holds(e: Event) -> bool:
        lat: Any = e.get(lat_attr)
        lon: Any = e.get(lon_attr)
        if lat is None or lon is None:
            return False
        return not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0)

    return holds


def _segment_holds(within: bool, attr: str, sid: int, secs: int) -> Callable[[Event], bool]:
    key = (sid, -(2**63) - 1)  # before every pair of this id

    def holds(e: Event) -> bool:
        segments: Any = e.get(attr)
        now: Any = e.get(NOW)
        if segments is None or now is None:
            return False
        i = bisect_left(segments, key)
        if i == len(segments) or segments[i][0] != sid:
            return False
        ts = segments[i][1]
        q = ts // 1_000_000 if ts >= 0 else -(-ts // 1_000_000)
        return (now - secs <= q) if within else (now - secs > q)

    return holds


def _geo_holds(
    lat_attr: str, lon_attr: str, lat0: float, lon0: float, radius: float
) -> Callable[[Event], bool]:
    la2 = lat0 * _TO_RAD
    sin2, cos2 = math.sin(la2), math.cos(la2)
    sin, cos, sqrt, asin = math.sin, math.cos, math.sqrt, math.asin

    def holds(e: Event) -> bool:
        lat: Any = e.get(lat_attr)
        lon: Any = e.get(lon_attr)
        if lat is None or lon is None:
            return False
        dlon = (lon - lon0) * _TO_RAD
        la1 = lat * _TO_RAD
        cos1 = cos(la1)
        dz = sin(la1) - sin2
        dx = cos(dlon) * cos1 - cos2
        dy = sin(dlon) * cos1
        half_chord = sqrt(dx * dx + dy * dy + dz * dz) / 2
        return half_chord <= 1.0 and asin(half_chord) * 2 * EARTH_RADIUS_KM <= radius

    return holds


def call_text(func: str, attr: str, args: tuple[Any, ...], lit: Callable[[Any], str]) -> str:
    """The call in the expression language (``lit`` writes a literal)."""
    if func == OUT_OF_RANGE:
        lon = args[0] if args else LONGITUDE
        return f"({attr} not between -90 and 90 or {lon} not between -180 and 180)"
    if func.startswith("segment_"):
        shown = [attr, *map(lit, args)] if attr != DEFAULT_SEGMENTS else list(map(lit, args))
    elif func == "within_frequency_cap":
        kind, cap_id, namespace, limit, length = args
        parts = [kind] if cap_id is None else [kind, cap_id]
        shown = [lit(v) for v in (*parts, namespace, limit, length)]
    else:  # geo: the attributes named unless they are latitude and longitude
        lon = longitude_attr(args)
        named = [attr, lon] if (attr, lon) != (LATITUDE, LONGITUDE) else []
        shown = [*named, *(lit(v) for v in args[:3])]
    return f"{func}({', '.join(shown)})"


# -- geo ------------------------------------------------------------------------------------------


def geo_within(lat0: float, lon0: float, lat: float, lon: float, radius: float) -> bool:
    """The library's haversine test: the point (lat, lon) is within ``radius`` km."""
    distance = geo_distance(lat0, lon0, lat, lon)
    return distance is not None and distance <= radius


def geo_distance(lat0: float, lon0: float, lat: float, lon: float) -> float | None:
    """The library's haversine distance (km) between two points; None where it has none
    (coordinates beyond their ranges: asin is NaN in C, every comparison false)."""
    dlon = (lon - lon0) * _TO_RAD
    la1, la2 = lat * _TO_RAD, lat0 * _TO_RAD
    dz = math.sin(la1) - math.sin(la2)
    dx = math.cos(dlon) * math.cos(la1) - math.cos(la2)
    dy = math.sin(dlon) * math.cos(la1)
    half_chord = math.sqrt(dx * dx + dy * dy + dz * dz) / 2
    if half_chord > 1.0:
        return None
    return math.asin(half_chord) * 2 * EARTH_RADIUS_KM


def geo_box(
    lat0: float, lon0: float, radius: float
) -> tuple[tuple[float, float], tuple[float, float]] | None:
    """((lat_lo, lat_hi), (lon_lo, lon_hi)) in degrees enclosing every point with a latitude
    in [-90, 90] and a longitude in [-180, 180] within ``radius`` km of (lat0, lon0);
    ``None`` when the radius is negative (no point is within it).  A side that cannot be
    bounded is the whole range ([-90, 90] or [-180, 180])."""
    if radius < 0:
        return None
    whole = ((-90.0, 90.0), (-180.0, 180.0))
    theta = radius / EARTH_RADIUS_KM  # the angle (radians) the radius spans
    if theta >= math.pi / 2:
        return whole
    # The centre as a point of the sphere, back in canonical degrees (its arguments may be
    # beyond the ranges: the formula is periodic).
    la, lo = lat0 * _TO_RAD, lon0 * _TO_RAD
    x, y, z = math.cos(la) * math.cos(lo), math.cos(la) * math.sin(lo), math.sin(la)
    clat = math.asin(max(-1.0, min(1.0, z))) / _TO_RAD
    clon = math.atan2(y, x) / _TO_RAD
    span = theta / _TO_RAD + _BOX_SLACK
    lat_lo, lat_hi = clat - span, clat + span
    if lat_lo <= -90.0 or lat_hi >= 90.0:  # a pole is within: every longitude may be
        return (max(lat_lo, -90.0), min(lat_hi, 90.0)), (-180.0, 180.0)
    ratio = math.sin(theta) / math.cos(clat * _TO_RAD)
    if ratio >= 1.0:
        return (lat_lo, lat_hi), (-180.0, 180.0)
    half = math.asin(ratio) / _TO_RAD + _BOX_SLACK
    lon_lo, lon_hi = clon - half, clon + half
    if lon_lo <= -180.0 or lon_hi >= 180.0:  # the box wraps: not bounded on longitude
        return (lat_lo, lat_hi), (-180.0, 180.0)
    return (lat_lo, lat_hi), (lon_lo, lon_hi)


# -- event values ---------------------------------------------------------------------------------


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int64(v: object) -> bool:
    return _is_int(v) and -(2**63) <= v <= 2**63 - 1  # type: ignore[operator]


_SEQUENCES = frozenset((list, tuple))
_PAIR = frozenset((2,))
_INT = frozenset((int,))


def check_segments(name: str, v: object) -> tuple[tuple[int, int], ...]:
    """A ``segments`` event value: a list of ``[segment_id, timestamp_microseconds]`` pairs
    of integers, returned sorted by segment id (the library's search expects that order)."""
    if not isinstance(v, (list, tuple)):
        raise InvalidInput(f'attribute "{name}": expected a list of [segment_id, timestamp] pairs')
    if _SEQUENCES.issuperset(map(type, v)):  # (at once where plain: by type sets, ~2x)
        out = list(map(tuple, v))
        if _PAIR.issuperset(map(len, out)):
            ints = list(chain.from_iterable(out))
            if _INT.issuperset(map(type, ints)) and (
                not ints or (min(ints) >= -(2**63) and max(ints) <= 2**63 - 1)
            ):
                out.sort(key=itemgetter(0))
                return tuple(out)
    out = []
    for i, pair in enumerate(v):
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or not _int64(pair[0])
            or not _int64(pair[1])
        ):
            raise InvalidInput(
                f'attribute "{name}": list element {i} is not a [segment_id, timestamp] pair '
                "of signed 64-bit integers"
            )
        out.append((int(pair[0]), int(pair[1])))
    out.sort(key=lambda p: p[0])
    return tuple(out)


def check_frequency_caps(name: str, v: object) -> tuple[tuple[Any, ...], ...]:
    """A ``frequency_caps`` event value: a list of caps, each ``[type, id, namespace, count,
    timestamp_microseconds]`` or ``[[type, id, namespace], count, timestamp]`` (the
    library's two forms); a null timestamp means none.  Returned as tuples
    ``(type, id, namespace, timestamp, count)``."""
    if not isinstance(v, (list, tuple)):
        raise InvalidInput(f'attribute "{name}": expected a list of frequency caps')
    out = []
    for i, cap in enumerate(v):
        where = f'attribute "{name}": list element {i}'
        if isinstance(cap, (list, tuple)) and len(cap) == 3 and isinstance(cap[0], (list, tuple)):
            key, count, ts = cap
            flat = [*key, count, ts] if len(key) == 3 else None
        elif isinstance(cap, (list, tuple)) and len(cap) == 5:
            flat = list(cap)
        else:
            flat = None
        if flat is None:
            raise InvalidInput(
                f"{where} is not [type, id, namespace, count, timestamp] or "
                "[[type, id, namespace], count, timestamp]"
            )
        kind, cap_id, namespace, count, ts = flat
        if kind not in CAP_TYPES:
            raise InvalidInput(
                f"{where}: unknown cap type {kind!r}",
                hint="the types are " + ", ".join(sorted(CAP_TYPES)),
            )
        if not _int64(cap_id) or not _int64(count):
            raise InvalidInput(f"{where}: the id and the count must be signed 64-bit integers")
        if not isinstance(namespace, str):
            raise InvalidInput(f"{where}: the namespace must be a string")
        if ts is not None and not _int64(ts):
            raise InvalidInput(f"{where}: the timestamp must be a signed 64-bit integer or null")
        out.append((kind, int(cap_id), namespace, None if ts is None else int(ts), int(count)))
    return tuple(out)
