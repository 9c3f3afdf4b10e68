"""The service verbs of SPEC section 11 over real sockets, on a plain and a sharded store.

``GET /subscriptions?after=ID&limit=N`` pages through the store in id order (checked
against the model sorted by id key, ids at the ends of int64, Unicode, empty and long
strings included); ``POST /subscriptions`` writes JSON Lines records with a result per
line, all or nothing with ``?atomic=true``; ``POST /validate`` and ``bexdb validate``
answer the same per record and write nothing; ``POST /explain`` answers what ``bexdb
explain --json`` prints.  After the writes, matching agrees with the brute-force evaluator
and the store passes its checks.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from betree.index import Index
from betree.lang.schema import Schema
from betree.stores.sharded import open_index
from storage.codec import encode_id
from tests.support.brute import brute
from tests.support.http import request as call
from tests.support.workload import SCHEMA, build_hashed, event, expression
from tools.serve import PAGE_MAX, spawn

LONG = "long-" + "é" * 700  # a long key: stored apart from the short ones (storage.txn)
EDGE_IDS: list[Any] = [-(2**63), 2**63 - 1, 0, -1, "", "5", "Ünï", "😀", "a b/c?d", LONG]


def jsonl(*records: Any) -> bytes:
    return b"".join(
        (r if isinstance(r, bytes) else json.dumps(r).encode()) + b"\n" for r in records
    )


def bexdb(*argv: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tools.cli", *argv], input=stdin, capture_output=True, timeout=120
    )


@pytest.fixture(params=["plain", "sharded"])
def served(request: Any, tmp_path: Path) -> Iterator[tuple[str, str, dict[Any, str]]]:
    """A service (one worker) on a store of 150 random subscriptions and the edge ids;
    its path, URL and the model."""
    rng = random.Random(28)
    subs: dict[Any, str] = {(i if i % 3 else f"s{i}"): expression(rng) for i in range(150)}
    subs.update((ident, expression(rng)) for ident in EDGE_IDS)
    if request.param == "plain":
        path = str(tmp_path / "store")
        with Index.open(path, schema=SCHEMA) as idx:
            idx.subscribe_many(subs.items())
    else:
        path = build_hashed(tmp_path / "sharded", subs, 3)
    proc, url = spawn(path, "--workers", "1")
    try:
        yield path, url, subs
    finally:
        proc.terminate()
        proc.wait(60)
    with open_index(path) as store:
        store.check()
        assert dict(store.subscriptions()) == subs  # the model kept up with every write


def listing(url: str, limit: int) -> list[dict[str, Any]]:
    """Every page of ``GET /subscriptions``, following ``next``."""
    out: list[dict[str, Any]] = []
    after = ""
    while True:
        status, page = call(url, "GET", f"/subscriptions?limit={limit}{after}")
        assert status == 200, page
        assert len(page["subscriptions"]) <= limit
        out.extend(page["subscriptions"])
        if page["next"] is None:
            return out
        assert page["next"] == page["subscriptions"][-1]["id"]
        after = "&after=" + quote(json.dumps(page["next"]))


def in_id_order(subs: dict[Any, str]) -> list[dict[str, Any]]:
    return [{"id": i, "expr": subs[i]} for i in sorted(subs, key=encode_id)]


def test_listing_pages_in_id_order(served: tuple[str, str, dict[Any, str]]) -> None:
    _, url, subs = served
    assert listing(url, 7) == in_id_order(subs)
    assert listing(url, PAGE_MAX) == in_id_order(subs)
    status, page = call(url, "GET", "/subscriptions")  # 100 a page unless told
    assert status == 200 and len(page["subscriptions"]) == 100
    # from after an id, present or not; ints sort before strings, strings by UTF-8 bytes
    ordered = in_id_order(subs)
    for after in [-(2**63), 41, 42, "", "s", "zzz", 2**63 - 1]:
        status, page = call(url, "GET", f"/subscriptions?limit=5&after={quote(json.dumps(after))}")
        key = encode_id(after)
        expected = [r for r in ordered if encode_id(r["id"]) > key][:5]
        assert (status, page["subscriptions"]) == (200, expected), after
    # the path rule for after: bare text is the string, a bare number the integer
    assert (
        call(url, "GET", "/subscriptions?after=s&limit=1")[1]["subscriptions"]
        == [r for r in ordered if encode_id(r["id"]) > encode_id("s")][:1]
    )
    # writes are seen at once
    assert call(url, "PUT", "/subscriptions/41", {"expr": "i = 4"})[0] in (200, 201)
    subs[41] = "i = 4"
    assert call(url, "DELETE", "/subscriptions/%22%22")[0] == 204
    del subs[""]
    assert listing(url, 11) == in_id_order(subs)
    # the client's faults
    for query, word in [
        ("limit=0", "limit"),
        (f"limit={PAGE_MAX + 1}", "limit"),
        ("limit=x", "limit"),
        ("limit=-1", "limit"),
        ("limit=%C2%B2", "limit"),  # "²": a digit to str.isdigit, not to int()
        ("limit=" + "9" * 5000, "limit"),  # past int()'s digit limit
        ("after=", "empty"),
        ("after=1&after=2", "twice"),
        ("from=3", "unknown query parameter 'from'"),
        ("after=" + "9" * 30, "64-bit"),
        ("after=%ff", "UTF-8"),
    ]:
        status, answer = call(url, "GET", f"/subscriptions?{query}")
        assert status == 400 and word in answer["error"], (query, answer)
    status, answer = call(url, "PUT", "/subscriptions", {"expr": "i = 1"})
    assert status == 405


def test_bulk_writes_a_result_a_line(served: tuple[str, str, dict[Any, str]]) -> None:
    _, url, subs = served
    schema = Schema.from_json(SCHEMA)
    rng = random.Random(5)
    body = jsonl(
        {"id": "new1", "expr": "i = 3"},
        {"id": 7, "expr": "j > 2"},  # replaces
        {"id": "bad", "expr": 'i = "x"'},  # wrong type: column 5
        b"",  # blank: skipped, counted
        b'{"id": "cut", ',
        {"id": "twice", "expr": "i = 1"},
        {"id": "twice", "expr": "i = 2"},
        {"id": 2**63, "expr": "i = 1"},
        {"expr": "i = 1"},
        {"id": "ü", "expr": 's = "ü" or il one of (1, 2)'},
    )
    status, answer = call(url, "POST", "/subscriptions", body)
    assert status == 200, answer
    assert answer["written"] == 3 and answer["rejected"] == 6
    results = answer["results"]
    assert [r["line"] for r in results] == [1, 2, 3, 5, 6, 7, 8, 9, 10]
    assert results[0] == {"line": 1, "id": "new1", "ok": True, "created": True}
    assert results[1] == {"line": 2, "id": 7, "ok": True, "created": False}
    assert results[2]["column"] == 5 and "string" in results[2]["error"]
    assert results[3]["column"] == 15 and "malformed JSON" in results[3]["error"]
    assert "duplicate" in results[4]["error"] and "duplicate" in results[5]["error"]
    assert "64-bit" in results[6]["error"] and results[7]["column"] is None
    assert results[8] == {"line": 10, "id": "ü", "ok": True, "created": True}
    subs.update({"new1": "i = 3", 7: "j > 2", "ü": 's = "ü" or il one of (1, 2)'})
    assert call(url, "GET", "/subscriptions/%22bad%22")[0] == 404
    assert call(url, "GET", "/subscriptions/twice")[0] == 404
    # atomic: one bad record and nothing is written
    body = jsonl({"id": "a1", "expr": "i = 5"}, {"id": "s3", "expr": "i ="})
    status, answer = call(url, "POST", "/subscriptions?atomic=true", body)
    assert status == 400 and "nothing was written" in answer["error"] and answer["written"] == 0
    assert answer["results"][1]["column"] == 4
    assert call(url, "GET", "/subscriptions/a1")[0] == 404
    assert call(url, "GET", "/subscriptions/s3")[1]["expr"] == subs["s3"]
    # atomic and all valid: all written; one record alone, even over several lines
    items = {f"b{k}": expression(rng) for k in range(40)}
    body = jsonl(*({"id": i, "expr": e} for i, e in items.items()))
    status, answer = call(url, "POST", "/subscriptions?atomic=true", body)
    assert status == 200 and answer["written"] == 40
    subs.update(items)
    one = json.dumps({"id": "pretty", "expr": "b = true"}, indent=2).encode()
    assert call(url, "POST", "/subscriptions", one)[1]["results"] == [
        {"line": 1, "id": "pretty", "ok": True, "created": True}
    ]
    subs["pretty"] = "b = true"
    for ev in [event(rng) for _ in range(40)]:
        assert set(call(url, "POST", "/match", ev)[1]["matches"]) == brute(subs, schema, ev), ev
    # the client's faults
    for query, raw, word in [
        ("", b"", "no records"),
        ("", b"\n \n", "no records"),
        ("?atomic=yes", jsonl({"id": "x", "expr": "i = 1"}), "true or false"),
        ("?atomic=true&limit=3", jsonl({"id": "x", "expr": "i = 1"}), "unknown"),
    ]:
        status, answer = call(url, "POST", "/subscriptions" + query, raw)
        assert status == 400 and word in answer["error"], (query, answer)
    status, answer = call(url, "POST", "/subscriptions", b"\xff\xfe\n[1]\n")
    assert status == 200 and answer["written"] == 0
    assert "UTF-8" in answer["results"][0]["error"] and "object" in answer["results"][1]["error"]
    assert len(listing(url, PAGE_MAX)) == len(subs)


def test_validate_writes_nothing(served: tuple[str, str, dict[Any, str]]) -> None:
    path, url, subs = served
    records = jsonl(
        {"id": "v1", "expr": 'f between -1 and 2.5 and s like "a*"'},
        {"id": 4, "expr": 'sl all of ("x", "y")'},
        {"id": "v2", "expr": "nope = 1"},
        {"id": "v3", "expr": "(i = 1"},
        b"{]",
        {"id": "v1", "expr": "i = 1"},
    )
    status, answer = call(url, "POST", "/validate", records)
    assert status == 200
    results = answer["results"]
    assert answer["invalid"] == 5 and results[1] == {"line": 2, "id": 4, "ok": True}
    assert "unknown attribute" in results[2]["error"] and results[2]["column"] == 1
    assert results[3]["column"] == 1 and "never closed" in results[3]["error"]
    assert results[4]["column"] == 2 and "malformed JSON" in results[4]["error"]
    assert "duplicate" in results[0]["error"] and "duplicate" in results[5]["error"]
    assert call(url, "GET", "/subscriptions/v1")[0] == 404
    assert call(url, "GET", "/subscriptions/4")[1]["expr"] == subs[4]  # not replaced
    # the command line answers the same, line for line, and exits 3
    done = bexdb("validate", path, "-", stdin=records)
    assert done.returncode == 3, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == results
    assert b"6 records: 5 invalid" in done.stderr
    good = jsonl({"id": "v1", "expr": "i = 1"}, {"id": "v2", "expr": "not b"})
    done = bexdb("validate", path, "-", stdin=good)
    assert done.returncode == 0 and done.stdout.count(b'"ok": true') == 2
    assert call(url, "POST", "/validate", good)[1]["invalid"] == 0
    assert bexdb("validate", path + "-missing", "-", stdin=good).returncode == 1
    status, answer = call(url, "POST", "/validate", b"")
    assert status == 400 and "no records" in answer["error"]


def test_explain_answers_as_the_command_line(served: tuple[str, str, dict[Any, str]]) -> None:
    path, url, subs = served
    rng = random.Random(8)
    for ident in ["s3", 4, LONG, -(2**63)]:
        ev = event(rng)
        status, answer = call(url, "POST", "/explain", {"id": ident, "event": ev})
        assert status == 200, answer
        shown = bexdb("explain", path, json.dumps(ident), json.dumps(ev), "--json")
        assert shown.returncode == 0, shown.stderr
        assert answer == json.loads(shown.stdout)
        assert answer["expression"] == subs[ident]
        schema = Schema.from_json(SCHEMA)
        assert answer["matches"] == (ident in brute({ident: subs[ident]}, schema, ev))
    for body, status, word in [
        ({"id": "nosuch", "event": {}}, 404, "nosuch"),
        ({"id": 4}, 400, '"event"'),
        ({"id": 4, "event": {}, "x": 1}, 400, '"event"'),
        ({"id": True, "event": {}}, 400, "integer or string"),
        ({"id": 4, "event": [1]}, 400, "object"),
        ({"id": 4, "event": {"i": "three"}}, 400, '"i"'),
        ([4, {}], 400, "object"),
    ]:
        got, answer = call(url, "POST", "/explain", body)
        assert got == status and word in answer["error"], (body, answer)
    assert call(url, "POST", "/explain", b'{"id": 4,')[1]["column"] == 10
    assert call(url, "GET", "/explain")[0] == 405
