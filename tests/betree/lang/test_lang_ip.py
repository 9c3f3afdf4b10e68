"""The ``ip`` type (betree.lang.ipaddr) through the whole index, against an oracle written
with the standard library's :mod:`ipaddress` alone (not the keys under test): equality,
lists, CIDR blocks and their negations, IPv4 beside its IPv4-mapped IPv6 form, the ends of
both spaces, undefined attributes, reopening and batches; errors with columns."""

from __future__ import annotations

import ipaddress
import json
import random
from pathlib import Path
from typing import Any

import pytest

from betree.index import Index
from betree.lang.expr import ExpressionError
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.cli import main

SCHEMA = {"attributes": {"src": {"type": "ip"}, "n": {"type": "int"}}}
ADDRESSES = [
    "0.0.0.0", "0.0.0.1", "10.0.0.0", "10.255.255.255", "11.0.0.0", "192.168.1.1",
    "255.255.255.255", "::", "::1", "::fffe:ffff:ffff", "::ffff:10.1.2.3", "::ffff:0.0.0.0",
    "::1:0:0:0", "2001:db8::", "2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
    "fe80::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "10.1.2.3", "172.16.5.4",
]  # fmt: skip
BLOCKS = [
    "0.0.0.0/0", "10.0.0.0/8", "10.1.2.3/32", "192.168.0.0/16", "172.16.0.0/12", "::/0",
    "::/127", "::ffff:0:0/96", "::ffff:10.0.0.0/104", "2001:db8::/32", "2001:db8::1/128",
    "fe80::/10", "8000::/1",
]  # fmt: skip


def as6(text: str) -> int:
    """The address as an IPv6 number (IPv4 as IPv4-mapped)."""
    a = ipaddress.ip_address(text)
    return int(a) + (0xFFFF_0000_0000 if a.version == 4 else 0)


def in_block(address: str, block: str) -> bool:
    net = ipaddress.ip_network(block)
    base = 0xFFFF_0000_0000 if net.version == 4 else 0
    lo, hi = int(net.network_address) + base, int(net.broadcast_address) + base
    return lo <= as6(address) <= hi


def atom(rng: random.Random) -> tuple[str, Any]:
    """An atom's text, and its oracle (address or None -> bool)."""
    a, b = rng.sample(ADDRESSES, 2)
    blocks = rng.sample(BLOCKS, rng.randint(1, 3))
    text = ", ".join(json.dumps(x) for x in blocks)
    forms = [
        (f'src = "{a}"', lambda v: v is not None and as6(v) == as6(a)),
        (f'src != "{a}"', lambda v: v is not None and as6(v) != as6(a)),
        (f'src in ("{a}", "{b}")', lambda v: v is not None and as6(v) in (as6(a), as6(b))),
        (f'src not in ("{a}")', lambda v: v is not None and as6(v) != as6(a)),
        (f"src in cidr({text})", lambda v: v is not None and any(in_block(v, x) for x in blocks)),
        (
            f"src not in cidr({text})",
            lambda v: v is not None and not any(in_block(v, x) for x in blocks),
        ),
        ("src is null", lambda v: v is None),
    ]
    return rng.choice(forms)


def subscription(rng: random.Random) -> tuple[str, Any]:
    text, holds = atom(rng)
    if rng.random() < 0.25:
        return f"not ({text})", lambda v, n: not holds(v)
    if rng.random() < 0.3:
        k = rng.randint(0, 2)
        return f"{text} and n > {k}", lambda v, n: holds(v) and n is not None and n > k
    return text, lambda v, n: holds(v)


@pytest.mark.parametrize("seed", [1, 2])
def test_ip_matching_agrees_with_an_ipaddress_oracle(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    subs: dict[int, tuple[str, Any]] = {}
    for phase in range(2):
        with Index.open(tmp_path / "s", schema=SCHEMA if phase == 0 else None) as idx:
            for k in range(150):
                subs[phase * 1000 + k] = subscription(rng)
                idx.subscribe(phase * 1000 + k, subs[phase * 1000 + k][0])
            for gone in rng.sample(sorted(subs), 15):
                idx.unsubscribe(gone)
                del subs[gone]
            idx.check()
            events = []
            for _ in range(80):
                ev: dict[str, Any] = {}
                if rng.random() < 0.85:
                    ev["src"] = rng.choice(ADDRESSES)
                if rng.random() < 0.5:
                    ev["n"] = rng.randint(0, 3)
                events.append(ev)
            for ev, batched in zip(events, idx.match_many(events), strict=True):
                expected = {i for i, (_, f) in subs.items() if f(ev.get("src"), ev.get("n"))}
                assert set(idx.match(ev)) == expected, ev
                assert isinstance(batched, list) and set(batched) == expected, ev


def test_ip_errors_name_their_column_and_events_their_attribute() -> None:
    schema = Schema.from_json(SCHEMA)
    for text, column, words in (
        ('src < "1.2.3.4"', 5, 'operator "<" does not apply to ip'),
        ('src = "1.2.3"', 7, "not an IPv4 or IPv6 address"),
        ('src in cidr("10.0.0.1/8")', 13, "host bits set"),
        ("src in cidr(3)", 13, "a CIDR block in quotes"),
        ('src between "1.1.1.1" and "2.2.2.2"', 5, "between"),
        ('n in cidr("10.0.0.0/8")', 3, "does not apply to int"),
    ):
        with pytest.raises(ExpressionError) as err:
            compile_expr(text, schema)
        assert err.value.column == column and words in str(err.value), (text, str(err.value))
    for bad in ("nope", "1.2.3.4.5", 17, "010.1.2.3"):
        with pytest.raises(InvalidInput) as found:
            schema.validate_event({"src": bad})
        assert '"src"' in found.value.message
    with pytest.raises(InvalidInput):
        Schema.from_json({"attributes": {"src": {"type": "ip", "min": "0.0.0.0"}}})


def test_ip_through_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    lines = [
        {"id": "lan", "expr": 'src in cidr("10.0.0.0/8", "192.168.0.0/16")'},
        {"id": "v6", "expr": 'src in cidr("2001:db8::/32")'},
    ]
    (tmp_path / "subs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in lines))
    store = str(tmp_path / "s")
    load = ["load", store, str(tmp_path / "subs.jsonl"), "--schema", str(tmp_path / "schema.json")]
    assert main([*load, "--engine", "python"]) == 0
    (tmp_path / "e.jsonl").write_text(
        '{"src": "::ffff:10.1.2.3"}\n{"src": "2001:db8::7"}\n{"src": "x"}\n'
    )
    capsys.readouterr()
    assert main(["match", store, str(tmp_path / "e.jsonl")]) == 3
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0] == {"matches": ["lan"]} and out[1] == {"matches": ["v6"]} and "error" in out[2]
    assert main(["explain", store, '"lan"', '{"src": "10.1.2.3"}']) == 0
    assert 'sent "10.1.2.3"' in capsys.readouterr().out
    assert main(["verify", store]) == 0


def test_zone_ids_are_refused_in_literals_and_events(tmp_path: Path) -> None:
    """``fe80::1%eth0`` equalled ``fe80::1`` (ipaddress ignores the zone in comparisons):
    now an error with the column in an expression, a per-event error naming the attribute."""
    schema = Schema.from_json(SCHEMA)
    for text, column in (
        ('src = "fe80::1%eth0"', 7),
        ('src in ("::1", "fe80::1%1")', 16),
        ('src in cidr("fe80::%eth0/64")', 13),
        ('src not in cidr("fe80::/64%eth0")', 17),
    ):
        with pytest.raises(ExpressionError) as err:
            compile_expr(text, schema)
        assert err.value.column == column and "zone id" in str(err.value), text
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        idx.subscribe("one", 'src = "fe80::1"')
        assert idx.match({"src": "fe80::1"}) == ["one"]
        for event in ({"src": "fe80::1%eth0"}, {"src": "fe80::1%0", "n": 1}):
            with pytest.raises(InvalidInput) as found:
                idx.match(event)
            assert '"src"' in found.value.message and "zone id" in found.value.message
            (result,) = idx.match_many([event])
            assert isinstance(result, InvalidInput) and "zone id" in str(result)
