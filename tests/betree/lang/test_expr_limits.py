"""Expensive expressions are accepted or rejected in time linear in their length (SPEC
section 10; issue 13, item 8).

20,000 ``price = i`` joined by ``or`` (329 KB) were rejected for exceeding 512 DNF clauses
only after 10 s of CPU (every clause compared with every other); deep nesting, long chains
and long lists must end in an answer or a clear ``InvalidInput``, never a
``RecursionError``.  A long chain's rejection is checked by the work it does (terms made
into clauses: the union stops at the bound), not timed (a 0.1 s bound failed under load);
the other times are CPU seconds of this process (``time.process_time``), the best of a few
runs; their bounds are generous, as the issue asks.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from betree.index import Index
from betree.lang import dnf
from storage.errors import InvalidInput
from tools.serve import spawn

SCHEMA = {
    "attributes": {
        "price": {"type": "int"},
        "a": {"type": "int"},
        "b": {"type": "bool"},
        "s": {"type": "string"},
    }
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    with Index.open(tmp_path_factory.mktemp("limits") / "s", schema=SCHEMA) as idx:
        yield idx


def ors(n: int) -> str:
    return " or ".join(f"price = {i}" for i in range(n))


def cpu(run: Callable[[], object], repeat: int = 3) -> float:
    """The least CPU time of ``repeat`` runs of ``run``."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run()
        best = min(best, time.process_time() - start)
    return best


def rejected(index: Index, expr: str, reason: str) -> InvalidInput:
    """What ``subscribe`` says of ``expr`` before it stores anything (its error)."""
    with pytest.raises(InvalidInput, match=reason) as info:
        index.engine.compiler().compile("x", expr)
    return info.value


def atoms_made(monkeypatch: pytest.MonkeyPatch, index: Index, expr: str, reason: str) -> int:
    """How many terms the normalization turned into clauses before rejecting ``expr``
    (work counted, not timed: the count does not move with the machine's load)."""
    made = 0
    real = dnf.atom_clauses

    def counting(node: object, pos: bool) -> object:
        nonlocal made
        made += 1
        return real(node, pos)  # type: ignore[arg-type]

    with monkeypatch.context() as patch:
        patch.setattr(dnf, "atom_clauses", counting)
        rejected(index, expr, reason)
    return made


def test_long_or_chain_is_rejected_at_once(index: Index, monkeypatch: pytest.MonkeyPatch) -> None:
    expr = ors(20_000)
    assert len(expr) > 320_000
    # the union stops at its 513th minimal clause: 20,000 terms, ~513 made into clauses
    assert atoms_made(monkeypatch, index, expr, "more than 512 clauses") <= 520
    with pytest.raises(InvalidInput, match=r"subscription 'x': .*more than 512 clauses"):
        index.subscribe("x", expr)
    assert index.match({"price": 1}) == []


def test_rejection_work_does_not_grow_with_the_chain(
    index: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    small = atoms_made(monkeypatch, index, ors(20_000), "more than 512 clauses")
    large = atoms_made(monkeypatch, index, ors(40_000), "more than 512 clauses")
    assert large == small


def test_many_clauses_absorbed_are_accepted(index: Index) -> None:
    """The bound counts clauses left after absorption, however many were written."""
    expr = "b or " + " or ".join(f"(price = {i} and b)" for i in range(20_000))
    index.subscribe("absorbed", expr)
    assert index.match({"b": True}) == ["absorbed"] and index.match({"price": 3}) == []
    index.unsubscribe("absorbed")
    assert index.engine.compiler().compile("t", ors(20_000) + " or true") == [
        ()
    ]  # true, whatever its place
    assert index.engine.compiler().compile("t", "true or " + ors(20_000)) == [()]


def test_products_that_simplify_again_and_again_are_bounded(index: Index) -> None:
    """Each factor makes the clause longer and the whole is simplified again: past a work
    budget proportional to the expression, it is rejected (it was quadratic)."""
    expr = " and ".join(f"(price <> {i} or b)" for i in range(10_000))
    assert cpu(lambda: rejected(index, expr, "too costly"), repeat=1) < 5
    small = " and ".join(f"(price <> {i} or b)" for i in range(100))
    index.subscribe("small", small)  # the ordinary sizes are untouched
    assert index.match({"price": 100}) == ["small"] and index.match({"price": 5}) == []
    index.unsubscribe("small")


@pytest.mark.parametrize(
    ("expr", "column"),
    [
        ("(" * 10_000 + "price = 1" + ")" * 10_000, 101),
        ("not " * 100_000 + "price = 1", 401),
        ("not (" * 100_000 + "price = 1" + ")" * 100_000, 251),
        ("(" * 10_000 + "price = 1", 101),
    ],
    ids=["parentheses", "not", "not-parentheses", "unclosed"],
)
def test_deep_nesting_is_a_clear_error(index: Index, expr: str, column: int) -> None:
    error = rejected(index, expr, "nests deeper than 100 levels")
    assert error.column == column


@pytest.mark.parametrize(
    "expr",
    [
        " and ".join(f"price <> {i}" for i in range(20_000)),
        "a in (" + ", ".join(map(str, range(100_000))) + ")",
        "a not in (" + ", ".join(map(str, range(100_000))) + ")",
        " and ".join(f"a not in ({i}, {i + 1})" for i in range(0, 20_000, 2)),
        "not (" + " and ".join(f"price = {i}" for i in range(20_000)) + ")",
    ],
    ids=["and-chain", "in-list", "not-in-list", "and-of-not-in", "not-and"],
)
def test_long_expressions_end_in_linear_time(index: Index, expr: str) -> None:
    """Accepted or rejected with a reason, in well under a second per 100K terms."""

    def run() -> None:
        try:
            index.engine.compiler().compile("long", expr)
        except InvalidInput as exc:
            assert "more than 512 clauses" in exc.message or "too costly" in exc.message

    assert cpu(run, repeat=1) < 5


def test_put_of_a_long_or_chain_is_a_400_in_time(tmp_path: Path) -> None:
    """What the issue saw through the service (10 s of a worker): now a 400 at once."""
    with Index.open(tmp_path / "s", schema=SCHEMA):
        pass
    proc, url = spawn(tmp_path / "s", "--workers", "1")
    try:
        where = urlsplit(url)
        conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
        body = json.dumps({"expr": ors(20_000)})
        start = time.monotonic()
        conn.request("PUT", "/subscriptions/x", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        answer = response.read().decode()
        elapsed = time.monotonic() - start
        assert response.status == 400 and "more than 512 clauses" in answer
        assert elapsed < 2, f"answered in {elapsed:.2f} s"
    finally:
        proc.terminate()
        proc.wait(60)
