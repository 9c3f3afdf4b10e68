"""``bexdb stream``'s pins (``loaders.spark.stream``, :mod:`betree.streams.rewind`) on the
shared local Spark session: a micro-batch answered as of one state of the store.

Writes (new subscriptions, replacements, deletions) committed every few milliseconds while
a micro-batch of two tasks runs: every event answered exactly as the brute-force evaluator
answers on the subscriptions of the micro-batch's pin, on plain and sharded stores.  A
micro-batch run again (its commit and its sink log entry gone, as after a crash) after
more writes: the same pin, the same answers; after a ``load --replace``: answered in the
new store, reported.
"""

from __future__ import annotations

import io
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from betree.lang.expr import evaluate
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from betree.stores.live import LiveIndex
from betree.streams.rewind import Pin
from loaders.spark.stream import PINS, PINS_KEPT, Endpoint, Watch, stream
from tests.support.spark import drop, per_file, plain_store, sharded_store, subscriptions
from tests.support.workload import SCHEMA, event, expression
from tools import cli

pytestmark = pytest.mark.spark
SCHEMA_ = Schema.from_json(SCHEMA)
EVERY = "i < 3 or not (i < 3)"  # every event


class Brute:
    """The brute-force evaluator with each expression parsed once."""

    def __init__(self) -> None:
        self.nodes: dict[str, Any] = {}

    def __call__(self, subs: dict[Any, str], ev: dict[str, Any]) -> set[Any]:
        values = SCHEMA_.validate_event(ev)
        out = set()
        for ident, expr in subs.items():
            node = self.nodes.get(expr)
            if node is None:
                node = self.nodes[expr] = compile_expr(expr, SCHEMA_)
            if evaluate(node, values):
                out.add(ident)
        return out


def _events(src: Path, rng: random.Random, files: int, n: int) -> dict[str, list[Any]]:
    out = {}
    for f in range(files):
        docs = [event(rng) for _ in range(n)]
        path = drop(src, f"e{f}.jsonl", "".join(json.dumps(e) + "\n" for e in docs).encode())
        out[str(path)] = docs
    return out


def _sets(found: dict[int, dict[str, Any]]) -> dict[int, list[str]]:
    """Each line's ids (in no promised order) as sorted texts."""
    return {n: sorted(map(repr, doc["matches"])) for n, doc in found.items()}


def _run(store: str, tmp: Path, **kw: Any) -> tuple[list[dict[str, Any]], str]:
    reports, said = io.StringIO(), io.StringIO()
    stream(
        store, Endpoint(path=str(tmp / "src")), Endpoint(path=str(tmp / "out")), tmp / "ck",
        available_now=True, progress_json=reports, progress=said, **kw,
    )  # fmt: skip
    return [json.loads(line) for line in reports.getvalue().splitlines()], said.getvalue()


@pytest.mark.parametrize("shards", [0, 2])
def test_writes_during_a_micro_batch_are_rewound_to_its_pin(
    spark: Any, tmp_path: Path, shards: int
) -> None:
    subs = subscriptions(81 + shards, 100)
    store = (
        sharded_store(tmp_path / "store", subs, shards)
        if shards
        else plain_store(tmp_path / "store", subs)
    )
    (tmp_path / "src").mkdir()
    rng = random.Random(82)
    events = _events(tmp_path / "src", rng, 2, 6000)
    done = threading.Event()
    ck = tmp_path / "ck"
    states: list[tuple[tuple[int, ...], dict[Any, str]]] = []  # (generations, model) a commit
    failed: list[BaseException] = []

    def write() -> None:  # while the micro-batch is in hand: planned, not committed
        try:
            model = dict(subs)
            wrng = random.Random(83)
            while not done.is_set() and not (ck / "offsets" / "0").exists():
                time.sleep(0.005)  # (the driver has closed the store it checked)
            with LiveIndex(store) as live:
                states.append((live.current().generations(), dict(model)))
                k = 0
                while not done.is_set() and not (ck / "commits" / "0").exists() and k < 600:
                    r, k = wrng.random(), k + 1
                    if r < 0.35:
                        items = [(f"w{k}", EVERY if wrng.random() < 0.5 else expression(wrng))]
                        live.current().subscribe_many(items)
                        model.update(items)
                    elif r < 0.7 and model:
                        ident, expr = wrng.choice(sorted(model, key=repr)), expression(wrng)
                        live.current().subscribe_many([(ident, expr)])
                        model[ident] = expr
                    elif model:
                        ident = wrng.choice(sorted(model, key=repr))
                        live.current().unsubscribe_many([ident])
                        del model[ident]
                    states.append((live.current().generations(), dict(model)))
                    time.sleep(0.01)
        except BaseException as exc:  # shown by the main thread
            failed.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        (batch,), said = _run(store, tmp_path, spark=spark)
    finally:
        done.set()
        writer.join()
    assert not failed
    pin = Pin.from_json((ck / PINS / "0").read_text())
    assert batch["snapshots"] == 1 and batch["unpinned_tasks"] == 0, batch
    assert batch["events"] == 12000 and tuple(batch["generations"]) == pin.generations
    assert "states of the store" not in said
    (pinned,) = [model for gens, model in states if gens == pin.generations]
    final = states[-1][1]
    assert len(states) > 20 and final != pinned  # writes after the pin
    brute = Brute()
    changed = 0
    for name, found in per_file(tmp_path / "out").items():
        for n, ev in enumerate(events[name], 1):
            if n % 8:  # (the evaluator is slow)
                continue
            want = brute(pinned, ev)
            assert sorted(map(repr, found[n]["matches"])) == sorted(map(repr, want)), (name, n)
            changed += brute(final, ev) != want
    assert changed  # the writes after the pin changed answers, which the pin kept out


def test_a_micro_batch_run_again_reads_its_pin(spark: Any, tmp_path: Path) -> None:
    """Run again after writes: the first run's answers (the pin's subscriptions); after a
    ``load --replace``: the new store's, with the pin out of reach reported."""
    subs = subscriptions(91, 80)
    store = plain_store(tmp_path / "store", subs)
    (tmp_path / "src").mkdir()
    events = _events(tmp_path / "src", random.Random(92), 1, 300)
    (docs,) = events.values()
    brute = Brute()
    (first,), _ = _run(store, tmp_path, spark=spark)
    answers = per_file(tmp_path / "out")
    (found,) = answers.values()
    assert all(set(found[n]["matches"]) == brute(subs, ev) for n, ev in enumerate(docs, 1))

    def again() -> tuple[dict[str, Any], str, dict[int, dict[str, Any]]]:
        # as after a crash before the micro-batch's results were logged: it runs again
        for log in (tmp_path / "ck" / "commits", tmp_path / "out" / "_spark_metadata"):
            (log / "0").unlink()
            (log / ".0.crc").unlink(missing_ok=True)  # (Hadoop's checksum beside it)
        (batch,), said = _run(store, tmp_path, spark=spark)
        (found,) = per_file(tmp_path / "out").values()
        return batch, said, found

    now = dict(subs)
    with LiveIndex(store) as live:
        live.current().subscribe_many([("new", EVERY), (1, EVERY)])
        live.current().unsubscribe_many([2, "s3"])
    now.update({"new": EVERY, 1: EVERY})
    del now[2], now["s3"]
    batch, said, found = again()
    assert batch["batch"] == 0 and batch["snapshots"] == 1 and batch["unpinned_tasks"] == 0
    assert batch["generations"] == first["generations"]
    assert _sets(found) == _sets(next(iter(answers.values())))  # the same answers
    assert any(brute(now, ev) != brute(subs, ev) for ev in docs)  # (which the writes changed)

    records = tmp_path / "new.jsonl"
    records.write_text("".join(json.dumps({"id": k, "expr": e}) + "\n" for k, e in now.items()))
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    argv = ["load", store, str(records), "--schema", str(schema), "--engine", "python"]
    assert cli.main([*argv, "--replace"]) == 0
    batch, said, found = again()
    assert batch["unpinned_tasks"] == 1 and batch["snapshots"] == 2, batch
    assert "could not answer as of the micro-batch's pin" in said
    assert all(set(found[n]["matches"]) == brute(now, ev) for n, ev in enumerate(docs, 1))


def test_the_driver_drops_old_pins(tmp_path: Path) -> None:
    """Pins of micro-batches completed PINS_KEPT batches ago are removed; others stay."""
    pins = tmp_path / "ck" / PINS
    pins.mkdir(parents=True)
    for n in range(16):
        (pins / str(n)).write_text("{}")
    (pins / ".3.tmp").write_text("")  # (not a pin: left alone)
    watch = Watch(Endpoint(path=str(tmp_path)), tmp_path / "ck", None, None, None)  # type: ignore[arg-type]
    watch.last = 15
    watch._drop_pins()
    kept = sorted(int(p.name) for p in pins.iterdir() if p.name.isdigit())
    assert kept == list(range(15 - PINS_KEPT + 1, 16)) and (pins / ".3.tmp").exists()
