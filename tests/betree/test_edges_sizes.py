"""Records and events at the ends of every size (issue 13): ids at the ends of the int range
and from every Unicode plane, 10 KB and 1 MB ids and strings, 10,000-element lists in
expressions and events, nesting at the parser's limit — through online ``subscribe``, both
load engines, ``verify``, ``match`` (the command, a real stream) and ``export``, each
answer compared with the brute-force evaluator.

The scalar ends of each domain (±2**63, ±max double, subnormals, -0.0, every plane's first
and last code point) are in :mod:`tests.support.edges`; here they meet the lists and sizes.
"""

from __future__ import annotations

import functools
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from betree.index import Index
from betree.lang.expr import Node, evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from tests.support.cli import run
from tests.support.edges import (
    FLOAT_VALUES,
    I64_MAX,
    I64_MIN,
    INT_VALUES,
    STRING_VALUES,
    string_literal,
)

SIZE_SCHEMA: dict[str, Any] = {
    "attributes": {
        "x": {"type": "int"},
        "f": {"type": "float"},
        "s": {"type": "string"},
        "b": {"type": "bool"},
        "il": {"type": "int_list"},
        "sl": {"type": "string_list"},
    }
}
SCHEMA = Schema.from_json(SIZE_SCHEMA)
SETTINGS = {"max_cap": 3, "min_size": 2}
MB = "\U0001f600" * (1 << 18)  # 1 MiB of UTF-8 (4-byte code points)
KB10 = "k" * 10_000
PLANES = [chr(plane << 16 | 0xFFFD) for plane in range(17) if plane not in (0xD,)]
TEN_K = list(range(-5_000, 5_000))


def _ints(values: list[int]) -> str:
    return "(" + ", ".join(map(str, values)) + ")"


def _strs(values: list[str]) -> str:
    return "(" + ", ".join(map(string_literal, values)) + ")"


def records() -> list[tuple[Any, str]]:
    """Ids at every end, each with an expression at some end of size or domain."""
    exprs = [
        f"s = {string_literal(MB)}",
        f"s > {string_literal(MB)}",
        f"starts_with(s, {string_literal(MB[:1000])})",
        f"s in {_strs([KB10, MB, '', *PLANES])}",
        f"x in {_ints(TEN_K)}",
        f"x not in {_ints(TEN_K)}",
        f"il one of {_ints(TEN_K)}",
        f"il all of {_ints(TEN_K[:50])}",
        f"il none of {_ints(TEN_K)}",
        f"sl one of {_strs(PLANES)}",
        f"sl all of {_strs(['', MB])}",
        f"{I64_MAX} in il",
        f"{I64_MIN} not in il",
        f"{string_literal(KB10)} in sl",
        "il is empty",
        "sl is not null and not (sl is empty)",
        "(" * 99 + "x = 1" + ")" * 99,
        "not " * 60 + "b",
        " or ".join(f"x = {v}" for v in INT_VALUES) + f" or f = {FLOAT_VALUES[-1]!r}",
    ]
    ids: list[Any] = [I64_MIN, I64_MAX, 0, -1, "", "\x00", KB10, MB[:2500], *PLANES]
    return [(ident, exprs[k % len(exprs)]) for k, ident in enumerate(ids)]


def events() -> list[dict[str, Any]]:
    return [
        {},
        {"s": MB},
        {"s": MB + "\x00"},
        {"s": MB[:1000]},
        {"s": KB10, "il": [], "sl": []},
        {"x": 1, "il": TEN_K, "sl": [*PLANES, "", MB]},
        {"x": -5_000, "il": [I64_MIN, I64_MAX], "sl": [KB10] * 3},
        {"x": I64_MAX, "f": FLOAT_VALUES[-1], "b": False, "il": list(range(10_000, 20_000))},
        {"x": I64_MIN, "il": TEN_K[:50], "sl": [""]},
        *({"s": s, "sl": [s]} for s in STRING_VALUES[::4]),
    ]


@functools.lru_cache(maxsize=256)
def _compiled(expr: str) -> Node:
    return compile_expr(expr, SCHEMA)


def brute(subs: list[tuple[Any, str]], event: dict[str, Any]) -> list[str]:
    values = SCHEMA.validate_event(event)
    return sorted(json.dumps(i) for i, e in subs if evaluate(_compiled(e), values))


EVENTS = events()


@functools.cache
def _holds(expr: str, k: int) -> bool:
    """Whether ``EVENTS[k]`` satisfies ``expr``, evaluated once a run: the brute force takes
    seconds on a 10,000-element list against another, and every store here is asked."""
    return evaluate(_compiled(expr), SCHEMA.validate_event(EVENTS[k]))


def brute_at(subs: list[tuple[Any, str]], k: int) -> list[str]:
    """:func:`brute` of ``EVENTS[k]``."""
    return sorted(json.dumps(i) for i, e in subs if _holds(e, k))


def keyed(matches: list[Any]) -> list[str]:
    return sorted(json.dumps(i) for i in matches)


def write_records(path: Path, subs: list[tuple[Any, str]]) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        for ident, expr in subs:
            fh.write(json.dumps({"id": ident, "expr": expr}, ensure_ascii=False) + "\n")
    return str(path)


def test_sizes_online_and_after_reopen(tmp_path: Path) -> None:
    subs = records()
    with Index.open(tmp_path / "s", schema=SIZE_SCHEMA, settings=SETTINGS) as idx:
        idx.subscribe_many(subs[:10])
        for ident, expr in subs[10:]:
            idx.subscribe(ident, expr)
        idx.check()
    with Index.open(tmp_path / "s") as idx:
        for k, event in enumerate(EVENTS):
            assert keyed(idx.match(event)) == brute_at(subs, k), list(event)
        gone = [ident for ident, _ in subs[::2]]
        idx.unsubscribe_many(gone, strict=True)
        idx.check()
        left = subs[1::2]
        for k, event in enumerate(EVENTS):
            assert keyed(idx.match(event)) == brute_at(left, k), list(event)


def test_sizes_through_the_python_load_match_verify_and_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    subs = records()
    path = write_records(tmp_path / "subs.jsonl", subs)
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SIZE_SCHEMA))
    store = str(tmp_path / "store")
    load = ["load", store, path, "--engine", "python", "--schema", str(schema)]
    code, _, err = run(capsys, *load)
    assert code == 0, err
    assert run(capsys, "verify", store)[0] == 0
    lines = tmp_path / "events.jsonl"
    lines.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in EVENTS))
    code, out, _ = run(capsys, "match", store, str(lines))
    assert code == 0
    got = [keyed(json.loads(line)["matches"]) for line in out.splitlines()]
    assert got == [brute_at(subs, k) for k in range(len(EVENTS))]
    code, out, _ = run(capsys, "export", store)
    assert code == 0
    exported = sorted(out.splitlines()[1:])  # after the schema header
    assert exported == sorted(Path(path).read_text(encoding="utf-8").splitlines())


@pytest.mark.spark
def test_sizes_through_the_spark_load(spark: Any, tmp_path: Path) -> None:
    from loaders.spark.driver import load

    subs = records()
    path = write_records(tmp_path / "subs.jsonl", subs)
    rejects = io.StringIO()
    summary = load(
        tmp_path / "spark", [path], SIZE_SCHEMA, spark=spark, rejects=rejects, progress=None
    )
    assert (summary["loaded"], summary["rejected"]) == (len(subs), 0), rejects.getvalue()
    with Index.open(tmp_path / "spark", readonly=True) as idx:
        idx.check()
        for k, event in enumerate(EVENTS):
            assert keyed(idx.match(event)) == brute_at(subs, k), list(event)


_SAMPLES = {
    "int": st.sampled_from(INT_VALUES) | st.integers(I64_MIN, I64_MAX),
    "float": st.sampled_from(FLOAT_VALUES) | st.floats(allow_nan=False, allow_infinity=False),
    "string": st.sampled_from([*STRING_VALUES, KB10, MB]) | st.text(max_size=8),
}


@st.composite
def list_atoms(draw: st.DrawFn) -> str:
    """An atom over a list attribute, with elements at the ends and lists up to 10,000 long."""
    attr = draw(st.sampled_from(["il", "sl"]))
    kind = "int" if attr == "il" else "string"
    value = _SAMPLES[kind]
    text = str if kind == "int" else string_literal
    if draw(st.integers(0, 9)) == 0:  # now and then a long list
        values = TEN_K if kind == "int" else [KB10, MB, *PLANES]
    else:
        values = draw(st.lists(value, max_size=4))
    form = draw(st.sampled_from(["one of", "none of", "all of", "in", "not in", "empty"]))
    if form == "empty":
        return f"{attr} is empty"
    if form in ("in", "not in"):
        return f"{text(draw(value))} {form} {attr}"  # type: ignore[operator]
    return f"{attr} {form} ({', '.join(map(text, values))})"  # type: ignore[arg-type]


@st.composite
def list_events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {}
    for attr, kind in (("il", "int"), ("sl", "string")):
        pick = draw(st.integers(0, 9))
        if pick == 0:
            continue  # undefined
        if pick == 1:
            event[attr] = TEN_K if kind == "int" else [MB, KB10, *PLANES]
        else:
            event[attr] = draw(st.lists(_SAMPLES[kind], max_size=5))
    return event


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(st.tuples(list_atoms(), list_atoms(), st.booleans()), min_size=1, max_size=6),
    st.lists(list_events(), min_size=1, max_size=6),
)
def test_list_ends_against_the_brute_force(
    tmp_path: Path, atoms: list[tuple[str, str, bool]], evs: list[dict[str, Any]]
) -> None:
    subs = [
        (k, f"({a}) {'or' if either else 'and'} not ({b})")
        for k, (a, b, either) in enumerate(atoms)
    ]
    with Index.open(tmp_path / f"s{len(list(tmp_path.iterdir()))}", schema=SIZE_SCHEMA) as idx:
        idx.subscribe_many(subs)
        idx.check()
        for event in evs:
            assert keyed(idx.match(event)) == brute(subs, event)
