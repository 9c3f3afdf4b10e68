"""``bexdb bench hem WORKLOAD --hem-src DIR``: HEM (Shi et al., DASFAA 2022) on a dense
workload of ``bexdb gen --profile dense``, one core against one core, beside bexdb on a
store loaded from the same subscriptions (``--store``).

HEM is not part of bexdb: its public source (github.com/shiwanghua/HEM) is compiled here,
only to measure it, with our own driver (``tools/bench/hem_driver.cpp``: reads the
workload, builds ``HEM5`` in its ``HEM5_DD`` configuration, the paper's HEM, times each
event's ``match`` and reports the match count).  The build copies HEM's ``.cpp``/``.h``
files into ``--out``/build and sets two things there: ``const int subs`` in ``constant.h``
to the workload's size (HEM sizes its bitsets at compile time) and no ``#define DEBUG``
(its per-phase timers inside ``match``); then ``g++ -std=c++14 -O3 -march=native``.  HEM's
other knobs stay at the repository's defaults (1,000 buckets an attribute, bit exponent 7).

The workload is written in the driver's text format: per subscription its ``between``
ranges as ``(attribute number, lo, hi)`` (values shifted by the schema's ``min``; only
dense workloads, plain conjunctions of ``between`` on int attributes, are accepted), per
event one value per attribute.  With ``--store``, bexdb matches the same events on that
store in this process (one pass to warm, then each event timed; then ``match_many`` in
batches of ``--batch``) and every event's match count must equal HEM's.  bexdb's times are
also taken on its thread's CPU clock (:class:`tools.bench.harness.Laps`); HEM's driver
reports wall times only, so HEM's CPU cells are empty.

Output: a table on stdout and ``results.json`` in ``--out``.  Nothing here runs in the
tests unless a HEM source is given.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from betree.formats.jsonl import input_lines, loads_line
from betree.stores.sharded import open_index
from storage.errors import InvalidInput
from tools.args import positive
from tools.bench.harness import Laps, logger, machine, markdown_table, proc_status_kb, stats

_log = logger("bench hem")
DRIVER = Path(__file__).with_name("hem_driver.cpp")
#: HEM's sources the driver needs (HEM5 and what its headers pull in)
SOURCES = ("HEM5.cpp", "Util.cpp", "constant.cpp", "generator.cpp", "printer.cpp")
_RANGE = re.compile(r"\s*(\w+) between (-?\d+) and (-?\d+)\s*")


def convert(workload: Path, out: Path, events: int) -> dict[str, int]:
    """Write ``hem_subs.txt`` and ``hem_events.txt`` in ``out`` from a dense workload
    directory (``schema.json``, ``subs.jsonl``, ``events.jsonl``); one line at a time."""
    schema = json.loads((workload / "schema.json").read_text())["attributes"]
    names = sorted(schema, key=lambda a: int(a[1:]) if a[1:].isdigit() else a)
    if any(schema[a].get("type") != "int" or "min" not in schema[a] for a in names):
        raise InvalidInput("bench hem: every attribute must be an int with min and max")
    base = {a: int(schema[a]["min"]) for a in names}
    domain = max(int(schema[a]["max"]) - base[a] + 1 for a in names)
    number = {a: i for i, a in enumerate(names)}
    lines = []
    with open(workload / "subs.jsonl", "rb") as fh:
        for raw in input_lines(fh):
            record = loads_line(raw)
            parts = record["expr"].split(" and ")
            ranges = [
                _RANGE.fullmatch(" and ".join(parts[i : i + 2])) for i in range(0, len(parts), 2)
            ]
            if not parts or len(parts) % 2 or not all(ranges):
                raise InvalidInput(
                    f"bench hem: subscription {record['id']!r} is not between ranges"
                )
            cells = [str(len(ranges))]
            for m in ranges:
                assert m is not None
                a = m.group(1)
                cells += [
                    str(number[a]),
                    str(int(m.group(2)) - base[a]),
                    str(int(m.group(3)) - base[a]),
                ]
            lines.append(" ".join(cells))
    (out / "hem_subs.txt").write_text(
        f"{len(lines)} {len(names)} {domain}\n" + "\n".join(lines) + "\n"
    )
    n = len(lines)
    del lines
    rows: list[str] = []
    with open(workload / "events.jsonl", "rb") as fh:
        for raw in input_lines(fh):
            if len(rows) == events:
                break
            event = loads_line(raw)
            rows.append(" ".join(str(int(event[a]) - base[a]) for a in names))
    (out / "hem_events.txt").write_text(f"{len(rows)} {len(names)}\n" + "\n".join(rows) + "\n")
    return {"subscriptions": n, "events": len(rows), "attributes": len(names), "domain": domain}


def build(src: Path, out: Path, subs: int) -> Path:
    """Compile the driver against HEM's sources in ``src`` for ``subs`` subscriptions."""
    where = out / "build"
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    for f in [*src.glob("*.cpp"), *src.glob("*.h")]:
        shutil.copy(f, where / f.name)
    header = (where / "constant.h").read_text(errors="replace")
    header, n = re.subn(r"const int subs = \d+;", f"const int subs = {subs};", header)
    if n != 1:
        raise InvalidInput(f"bench hem: no 'const int subs' in {src / 'constant.h'}")
    (where / "constant.h").write_text(header.replace("#define DEBUG", "// #define DEBUG"))
    shutil.copy(DRIVER, where / DRIVER.name)
    binary = where / "hem_driver"
    command = ["g++", "-std=c++14", "-O3", "-march=native", "-pthread", "-w", "-o", str(binary)]
    _log(f"compiling HEM for {subs:,} subscriptions")
    subprocess.run([*command, DRIVER.name, *SOURCES], cwd=where, check=True)
    return binary


def run_hem(binary: Path, out: Path) -> dict[str, Any]:
    """One run of the driver (one thread); its JSON line, with per-event figures."""
    done = subprocess.run(
        [str(binary), str(out / "hem_subs.txt"), str(out / "hem_events.txt")],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run_bexdb(
    store: str, workload: Path, count: int, batch: int, cache_mb: int = 256
) -> dict[str, Any]:
    """bexdb on ``store`` (a page cache of ``cache_mb``, which also bounds the packed view)
    over the first ``count`` events: the first pass's time, warm per-event times, counts,
    batched rate, private memory."""
    with open(workload / "events.jsonl", "rb") as fh:
        events: list[Any] = []
        for raw in input_lines(fh):
            if len(events) == count:
                break
            events.append(loads_line(raw))
    with open_index(store, cache_bytes=cache_mb << 20) as index:
        t = time.perf_counter()
        for event in events:  # the first pass: pages read, caches filled
            index.match(event)
        first_s = time.perf_counter() - t
        laps, counts = Laps(), []
        for event in events:
            with laps:
                counts.append(len(index.match(event)))
        batched: list[int] = []
        with Laps() as lap:
            for at in range(0, len(events), batch):
                for ids in index.match_many(events[at : at + batch]):
                    if isinstance(ids, InvalidInput):
                        raise ids
                    batched.append(len(ids))
        status = proc_status_kb()
    if batched != counts:
        raise SystemExit("bench hem: bexdb's batched answers differ from its per-event ones")
    return {
        "first_pass_ms_per_event": round(first_s * 1e3 / max(len(events), 1), 3),
        "warm_ms": stats(laps.wall_ms),
        "warm_cpu_ms": stats(laps.cpu_ms),
        "matches": counts,
        "batched_events_per_s": round(len(events) / lap.wall_ms[0] * 1e3, 1),
        "batched_events_per_cpu_s": round(len(events) / lap.cpu_ms[0] * 1e3, 1),
        "private_mb": round(status.get("RssAnon", 0) / 1024, 1),
        "peak_rss_mb": round(status.get("VmHWM", 0) / 1024, 1),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("workload", help="a bexdb gen --profile dense directory")
    parser.add_argument("--hem-src", required=True, help="a checkout of HEM's source")
    parser.add_argument("--store", help="a bexdb store of the same subscriptions, to compare")
    parser.add_argument("--events", type=positive, default=1000, help="events timed (1000)")
    parser.add_argument("--batch", type=positive, default=1024, help="match_many batch (1024)")
    parser.add_argument(
        "--cache-mb",
        type=positive,
        default=256,
        help="bexdb's page cache (256); a packed view is held only if it fits in 3/4 of it",
    )
    parser.add_argument("--out", default="bench-results/hem", help="results directory")


def main(args: argparse.Namespace) -> int:
    """Convert, build, run HEM (and bexdb with ``--store``); table and ``results.json``."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    workload = Path(args.workload)
    shape = convert(workload, out, args.events)
    binary = build(Path(args.hem_src), out, shape["subscriptions"])
    _log("running HEM")
    hem = run_hem(binary, out)
    hem_ms = stats([s * 1e3 for s in hem.pop("match_s")])
    doc: dict[str, Any] = {
        "benchmark": "bexdb bench hem",
        "machine": machine(),
        "workload": str(workload),
        "shape": shape,
        "hem": {**hem, "match_ms": hem_ms},
    }
    rows = [
        [
            "HEM (HEM5_DD)",
            f"{hem['build_s']:.2f}",
            f"{hem_ms['mean']:.3f} / {hem_ms['p50']:.3f}",
            "",
            f"{1e3 / hem_ms['mean']:,.0f}",
            "",
            "",
            f"{hem['hwm_kb'] / 1024:,.0f} (peak RSS)",
        ]
    ]
    if args.store:
        _log("running bexdb")
        ours = run_bexdb(args.store, workload, args.events, args.batch, args.cache_mb)
        differ = sum(a != b for a, b in zip(ours["matches"], hem["matches"], strict=True))
        doc["bexdb"] = ours
        doc["differing_events"] = differ
        rows.append(
            [
                "bexdb",
                "",
                f"{ours['warm_ms']['mean']:.3f} / {ours['warm_ms']['p50']:.3f}",
                f"{ours['warm_cpu_ms']['mean']:.3f} / {ours['warm_cpu_ms']['p50']:.3f}",
                f"{1e3 / ours['warm_ms']['mean']:,.0f}",
                f"{ours['batched_events_per_s']:,.0f}",
                f"{ours['batched_events_per_cpu_s']:,.0f}",
                f"{ours['private_mb']:,.0f} (private)",
            ]
        )
    (out / "results.json").write_text(json.dumps(doc, indent=2) + "\n")
    heads = ["engine", "build s", "ms/event mean / p50", "CPU ms mean / p50", "ev/s"]
    heads += ["batched ev/s", "batched ev/CPU-s", "memory MB"]
    print(markdown_table(heads, rows))
    matches = sum(hem["matches"]) / max(1, len(hem["matches"]))
    print(
        f"\n{shape['subscriptions']:,} subscriptions, {len(hem['matches']):,} events, "
        f"{matches:,.1f} matches an event"
    )
    if args.store:
        first = doc["bexdb"]["first_pass_ms_per_event"]
        print(f"bexdb's first pass (pages read, views built): {first:,.3f} ms an event")
        print(f"events whose match count differs between HEM and bexdb: {doc['differing_events']}")
        return 1 if doc["differing_events"] else 0
    return 0


if __name__ == "__main__":
    from tools.bench.harness import script

    script("bexdb bench hem", __doc__, add_arguments, main)
