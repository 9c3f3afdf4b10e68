"""``bexdb bench forms``: matching with 20% of the predicates in the new language forms,
against the BEGen default, in one run (issue 15's target: within 2x).

The same BEGen workload (:mod:`tools.bench.gen` defaults) is indexed twice.  In the *forms*
store a share (``--share``, default 0.2) of all predicates is rewritten into an equivalent
predicate in one of the forms added to the language, on a mirror of its attribute:
attribute ``aK`` has one mirror, chosen by ``K mod 5`` --

=====  ==================  ===========================  ===============================
K % 5  mirror              ``aK = v``                   ``aK in (v, w)``
=====  ==================  ===========================  ===============================
0      ``eK`` int_enum     ``eK = v``                   ``eK in (v, w)``
1      ``pK`` ip           ``pK = "10.0.0.v"``          ``pK in cidr("10.0.0.v/32", …)``
2      ``sK`` fold_case    ``sK = "V<v>"``              ``sK in ("V<v>", "V<w>")``
3      ``sK`` string       ``sK like "v<v>:*"``         ``sK matches "v(<v>|<w>):.*"``
4      ``n.aK`` nested     ``n.aK = v``                 ``n.aK in (v, w)``
=====  ==================  ===========================  ===============================

-- and every event carries each of its attributes' mirrors (``{"n": {"aK": v}}`` for the
nested one, ``"v<v>:x"`` for the patterns, which must run RE2: a pattern that spells out
its values is indexed as an ``in`` list), so each subscription matches exactly the events
it matched before.  Only
``=`` and ``in`` predicates are rewritten (about 40% of BEGen's), as many as the share asks.
Both stores must answer every event identically (checked before anything is reported);
the forms store's events define twice as many attributes, which is part of the cost.

Each store is matched twice in this process, the second (warm) pass timed per event.
Output: a table on stdout and ``results.json`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from betree.disk.bulk import Batch
from betree.disk.writer import gc_paused
from betree.index import Index
from tools.args import positive, sizes
from tools.bench import gen
from tools.bench.harness import check_agreement, logger, machine, markdown_table, stats

_log = logger("bench forms")
_PRED = re.compile(r"a(\d+) (=|in) (\d+|\([^)]*\))")


def mirror(k: int, op: str, values: list[int]) -> str:
    """The predicate ``aK op values`` in its mirror's form (module docstring)."""
    form = k % 5
    one = op == "="
    if form == 0:
        return f"e{k} = {values[0]}" if one else f"e{k} in ({_join(values, '{}')})"
    if form == 1:
        if one:
            return f'p{k} = "10.0.0.{values[0]}"'
        return f"p{k} in cidr({_join(values, chr(34) + '10.0.0.{}/32' + chr(34))})"
    if form == 2:
        if one:
            return f's{k} = "V{values[0]}"'
        return f"s{k} in ({_join(values, chr(34) + 'V{}' + chr(34))})"
    if form == 3:
        return (
            f's{k} like "v{values[0]}:*"'
            if one
            else f's{k} matches "v({"|".join(map(str, values))}):.*"'
        )
    return f"n.a{k} = {values[0]}" if one else f"n.a{k} in ({_join(values, '{}')})"


def _join(values: list[int], shape: str) -> str:
    return ", ".join(shape.format(v) for v in values)


def rewrite(text: str, rng: random.Random, share: float) -> str:
    """``text`` with each ``=``/``in`` predicate rewritten with probability ``share``."""

    def one(m: re.Match[str]) -> str:
        if rng.random() >= share:
            return m.group(0)
        values = [int(v) for v in re.findall(r"\d+", m.group(3))]
        return mirror(int(m.group(1)), m.group(2), values)

    return _PRED.sub(one, text)


def forms_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The BEGen schema and every attribute's mirror."""
    attrs = dict(schema["attributes"])
    for name in list(attrs):
        k = int(name[1:])
        attrs[_mirror_name(k)] = {
            0: {"type": "int_enum"},
            1: {"type": "ip"},
            2: {"type": "string", "fold_case": True},
            3: {"type": "string"},
            4: {"type": "int"},
        }[k % 5]
    return {"attributes": attrs}


def _mirror_name(k: int) -> str:
    return ("e", "p", "s", "s", "n.a")[k % 5] + str(k)


def forms_event(event: dict[str, int]) -> dict[str, Any]:
    """The event with each attribute's mirror beside it."""
    out: dict[str, Any] = dict(event)
    nested: dict[str, int] = {}
    for name, v in event.items():
        k = int(name[1:])
        form = k % 5
        if form == 0:
            out[f"e{k}"] = v
        elif form == 1:
            out[f"p{k}"] = f"10.0.0.{v}"
        elif form == 2:
            out[f"s{k}"] = f"v{v}"  # folded against "V<v>"
        elif form == 3:
            out[f"s{k}"] = f"v{v}:x"
        else:
            nested[name] = v
    if nested:
        out["n"] = nested
    return out


def _store(path: Path, schema: dict[str, Any], subs: list[tuple[int, str]]) -> Index:
    with gc_paused(), Index.open(path / "raw", schema=schema) as idx:
        batch = Batch(idx)
        for ident, expr in subs:
            batch.add(ident, expr, idx.engine.compiler().compile(ident, expr))
        batch.build()
        idx.store.copy_compact(path / "store")
    return Index.open(path / "store", readonly=True)


def _timed(idx: Index, events: list[dict[str, Any]]) -> tuple[list[list[Any]], list[float]]:
    for e in events:  # the first pass warms the page cache
        idx.match(e)
    found, ms = [], []
    for e in events:
        t = time.perf_counter()
        found.append(idx.match(e))
        ms.append((time.perf_counter() - t) * 1e3)
    return found, ms


def run(n: int, events: int, share: float, seed: int) -> dict[str, Any]:
    w = gen.make_workload(subs=n, events=events, seed=seed, check=False)
    rng = random.Random(seed)
    rewritten = [(i, rewrite(t, rng, share)) for i, t in w.subs]
    preds = sum(t.count(" and ") + 1 for _, t in w.subs)
    new = sum(
        len(re.findall(r"\b(?:e|p|s|n\.a)\d+ ", t)) for _, t in rewritten
    )  # predicates on mirrors
    with tempfile.TemporaryDirectory(prefix="bexdb-bench-forms-") as tmp:
        _log(f"n={n:,}: building the BEGen store and the forms store")
        plain = _store(Path(tmp) / "plain", w.schema, w.subs)
        forms = _store(Path(tmp) / "forms", forms_schema(w.schema), rewritten)
        try:
            _log(f"n={n:,}: matching {events:,} events on each, twice")
            got_plain, ms_plain = _timed(plain, w.events)
            got_forms, ms_forms = _timed(forms, [forms_event(e) for e in w.events])
        finally:
            plain.close()
            forms.close()
    checked = check_agreement(
        f"n={n}", w.events, {"begen": got_plain, "forms": got_forms}
    )  # every event: the rewriting keeps each subscription's meaning
    a, b = stats(ms_plain), stats(ms_forms)
    return {
        "n": n,
        "events": events,
        "predicates": preds,
        "in_new_forms": new,
        "share_in_new_forms": round(new / preds, 4),
        "agreement_events": checked,
        "begen_ms": a,
        "forms_ms": b,
        "ratio_mean": round(b["mean"] / a["mean"], 3),
        "matches_per_event": sum(map(len, got_plain)) / max(1, len(got_plain)),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--sizes", type=sizes, default=[20_000], help="subscriptions (20000)")
    parser.add_argument("--events", type=positive, default=500, help="events (500)")
    parser.add_argument(
        "--share", type=float, default=0.2, help="share of all predicates rewritten (0.2)"
    )
    parser.add_argument("--seed", type=int, default=1, help="workload seed")
    parser.add_argument("--out", default="bench-results/forms", help="results directory")


def main(args: argparse.Namespace) -> int:
    """Run it; the table on stdout, ``results.json`` in ``--out``."""
    rate = min(1.0, args.share / 0.4)  # about 40% of BEGen's predicates are = or in
    rows = [run(n, args.events, rate, args.seed) for n in args.sizes]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    doc = {"benchmark": "bexdb bench forms", "machine": machine(), "rows": rows}
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    cells = [
        [
            f"{r['n']:,}",
            f"{r['share_in_new_forms']:.0%}",
            f"{r['begen_ms']['mean']:.3f}",
            f"{r['forms_ms']['mean']:.3f}",
            f"{r['ratio_mean']:.2f}x",
            f"{r['agreement_events']:,}",
        ]
        for r in rows
    ]
    heads = ["subs", "in new forms", "BEGen ms", "forms ms", "ratio", "events agreeing"]
    print(markdown_table(heads, cells))
    return 0
