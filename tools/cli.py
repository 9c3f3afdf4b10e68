"""The ``bexdb`` command: ``main(argv)`` plus one function per subcommand (as lmdb.tool).

Exit codes (SPEC section 6): 0 success; 1 runtime failure; 2 usage error; 3 invalid input
(some records or events rejected); 4 store check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO, TextIO

from storage.errors import BexdbError, CheckFailed, InvalidInput
from tools.args import positive

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INVALID, EXIT_CHECK = 0, 1, 2, 3, 4
MATCH_BATCH = 256  # events matched per read snapshot: later batches see newer commits

Command = Callable[[argparse.Namespace], int]


def _read_json(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


@contextmanager
def _input(path: str | None) -> Iterator[TextIO]:
    if path is None or path == "-":
        yield sys.stdin
    else:
        with open(path, encoding="utf-8") as fh:
            yield fh


def parse_id(text: str) -> int | str:
    """A subscription id from the command line: a JSON integer or string, else the text."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return text
    return value if isinstance(value, int | str) and not isinstance(value, bool) else text


# -- subcommands ---------------------------------------------------------------------------


def _write_reopening(path: str, write: Callable[[Any], Any], **options: Any) -> Any:
    """``write(index)`` in the store at ``path``, redone once in the reopened store if a
    ``bexdb compact`` replaced it meanwhile (``StoreReplaced``: nothing was written).

    A second replacement within one write is reported (exit 1, SPEC section 6).
    """
    from betree.index import Index
    from storage.errors import StoreReplaced

    with Index.open(path, **options) as idx:
        try:
            return write(idx)
        except StoreReplaced:
            pass
    with Index.open(path, **options) as idx:
        return write(idx)


def cmd_subscribe(args: argparse.Namespace) -> int:
    """Insert or replace the subscriptions of a JSON Lines file, all in one transaction."""
    from betree.schema import Schema
    from loaders.records import mark_duplicates, parse_lines

    with _input(args.input) as fh:
        records = list(parse_lines(fh))
    mark_duplicates(records)
    bad = [r for r in records if r.error is not None]
    if bad:
        for r in bad:
            print(f"bexdb: line {r.line}: {r.error}", file=sys.stderr)
        print("bexdb: nothing was subscribed", file=sys.stderr)
        return EXIT_INVALID
    schema = _read_json(args.schema) if args.schema else None
    if schema is None and not os.path.exists(os.path.join(args.store, "data.mdb")):
        schema = Schema.infer((r.id, r.expr) for r in records)  # a new store: infer it
    items = [(r.id, r.expr) for r in records]
    created = _write_reopening(args.store, lambda idx: idx.subscribe_many(items), schema=schema)
    new = sum(created)
    print(f"subscribed {len(created)} ({new} new, {len(created) - new} replaced)")
    return EXIT_OK


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    """Delete subscriptions by id, in one transaction; exit 3 if some were absent."""
    ids = [parse_id(text) for text in args.ids]
    found = _write_reopening(args.store, lambda idx: idx.unsubscribe_many(ids))
    missing = [ident for ident, ok in zip(ids, found, strict=True) if not ok]
    for ident in missing:
        print(f"bexdb: no subscription {ident!r}", file=sys.stderr)
    return EXIT_INVALID if missing else EXIT_OK


def cmd_match(args: argparse.Namespace) -> int:
    """Match JSON Lines events; one output line per input line, errors in their own line.

    A sharded store (``bexdb load --shards``) answers with the union of its shards.
    """
    from loaders.shards import open_any

    rejected = 0
    out = sys.stdout
    with open_any(args.store) as reader, _binary_input(args.events) as fh:
        batch: list[bytes] = []
        for line in _lines(fh):
            batch.append(line)
            if len(batch) == MATCH_BATCH:
                rejected += _match_batch(reader, batch, out)
                batch = []
        rejected += _match_batch(reader, batch, out)
    return EXIT_INVALID if rejected else EXIT_OK


@contextmanager
def _binary_input(path: str | None) -> Iterator[BinaryIO]:
    """Events as bytes: a line that is not UTF-8 is one bad event, not the end of the input."""
    if path is None or path == "-":
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as fh:
            yield fh


def _lines(fh: BinaryIO) -> Iterator[bytes]:
    for line in fh:
        if line.strip():
            yield line


def _match_batch(reader: Any, lines: list[bytes], out: TextIO) -> int:
    if not lines:
        return 0
    rejected = 0
    results = []
    with reader.snapshot() as match:
        for line in lines:
            try:
                event = json.loads(line.decode("utf-8"))
                if not isinstance(event, dict):
                    raise InvalidInput("an event must be a JSON object")
                values = reader.schema.validate_event(event)
                results.append({"matches": match(values)})
            except json.JSONDecodeError as exc:
                rejected += 1
                results.append({"error": f"malformed JSON: {exc.msg} at column {exc.colno}"})
            except UnicodeDecodeError as exc:
                rejected += 1
                results.append({"error": f"not UTF-8: {exc.reason} at byte {exc.start}"})
            except RecursionError:
                rejected += 1
                results.append({"error": "malformed JSON: nested too deeply"})
            except InvalidInput as exc:
                rejected += 1
                results.append({"error": exc.message})
    out.write("".join(json.dumps(r) + "\n" for r in results))
    out.flush()
    return rejected


def cmd_load(args: argparse.Namespace) -> int:
    """Offline bulk load into a new store (published atomically)."""
    if args.engine == "python" and (args.shards is not None or args.master is not None):
        print("bexdb: --shards and --master need --engine spark", file=sys.stderr)
        return EXIT_USAGE
    schema = _read_json(args.schema) if args.schema else None
    rejects = open(args.rejects, "w", encoding="utf-8") if args.rejects else None  # noqa: SIM115
    try:
        if args.engine == "spark":
            from loaders import spark_job

            with _terminate_as_interrupt():  # a killed load cleans up: cancel, remove staging
                summary = spark_job.load(
                    args.store,
                    args.inputs,
                    schema,
                    master=args.master,
                    shards=args.shards,
                    replace=args.replace,
                    rejects=rejects,
                    max_rejects=args.max_rejects,
                    progress=sys.stderr,
                    verbose=args.verbose,
                )
        else:
            from loaders import python_load
            from loaders.records import Record, read_jsonl

            records: list[Record] = []
            for path in args.inputs:
                records.extend(read_jsonl(path))
            summary = python_load.load(
                args.store,
                records,
                schema,
                replace=args.replace,
                rejects=rejects,
                max_rejects=args.max_rejects,
                progress=sys.stderr,
            )
    finally:
        if rejects is not None:
            rejects.close()
    print(json.dumps(summary))
    return EXIT_INVALID if summary["rejected"] else EXIT_OK


@contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """Turn SIGTERM into KeyboardInterrupt meanwhile, so that clean-up code runs.

    Only the main thread may set signal handlers; elsewhere this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_verify(args: argparse.Namespace) -> int:
    """Run every invariant check (of every shard of a sharded store); exit 4 on violations."""
    from loaders.shards import verify
    from tools.ops import staging_notes

    for note in staging_notes(args.store):  # not a violation: the store itself is intact
        print(f"note: {note}")
    found = verify(args.store)
    print(f"ok ({found['shards']} shards)" if found["shards"] else "ok")
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    return int(args.bench_main(args))


def _gen(args: argparse.Namespace) -> int:
    from loaders import gen

    return int(gen.main(args))


def _serve(args: argparse.Namespace) -> int:
    from tools import serve

    return serve.main(args)


def _demo(args: argparse.Namespace) -> int:
    from tools import demo

    return demo.main(args)


# -- the parser ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bexdb", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("subscribe", help="insert or replace subscriptions (JSON Lines)")
    p.add_argument("store")
    p.add_argument("input", nargs="?", help="JSON Lines file (default: stdin)")
    p.add_argument("--schema", help="schema JSON for a new store (else inferred)")
    p.set_defaults(func=cmd_subscribe)

    p = sub.add_parser("unsubscribe", help="delete subscriptions by id")
    p.add_argument("store")
    p.add_argument("ids", nargs="+", metavar="ID", help="a JSON integer or string, or text")
    p.set_defaults(func=cmd_unsubscribe)

    p = sub.add_parser("match", help="match JSON Lines events from a file or stdin")
    p.add_argument("store")
    p.add_argument("events", nargs="?", help="JSON Lines file (default: stdin)")
    p.set_defaults(func=cmd_match)

    p = sub.add_parser("load", help="offline bulk load into a new store")
    p.add_argument("store")
    p.add_argument("inputs", nargs="+", metavar="INPUT")
    p.add_argument("--schema")
    p.add_argument("--engine", choices=["spark", "python"], default="spark")
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument(
        "--shards", type=positive, help="build K independent stores in parallel, plus a manifest"
    )
    p.add_argument("--verbose", action="store_true", help="keep Spark's own logging")
    p.add_argument("--rejects", help="write rejected records here (JSON Lines)")
    p.add_argument("--max-rejects", type=int)
    p.add_argument("--replace", action="store_true", help="replace an existing store")
    p.set_defaults(func=cmd_load)

    from tools import ops

    ops.add_arguments(sub)

    p = sub.add_parser(
        "verify", help="run every invariant check, of every shard too (exit 4 on violations)"
    )
    p.add_argument("store")
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser("serve", help="the matcher service: JSON over HTTP (SPEC section 7)")
    from tools import serve

    serve.add_arguments(p)
    p.set_defaults(func=_serve)
    p = sub.add_parser("gen", help="write a synthetic workload (schema, subscriptions, events)")
    from loaders import gen

    gen.add_arguments(p)
    p.set_defaults(func=_gen)

    p = sub.add_parser("demo", help="the main job end to end: generate, load, match, summarize")
    from tools import demo

    demo.add_arguments(p)
    p.set_defaults(func=_demo)

    bench = sub.add_parser("bench", help="run a benchmark: table, JSON results and plots")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    from tools import bench_adapt, bench_compare, bench_load, bench_match, bench_pbtree, bench_serve

    for name, module, text in (
        ("pbtree", bench_pbtree, "PB+tree search and insert against Grouped Filter"),
        ("match", bench_match, "BE-Tree matching against SCAN and counting"),
        ("adapt", bench_adapt, "matching while the workload changes, self-adjustment off/on"),
        ("compare", bench_compare, "bexdb against SCAN, counting, OpIndex, PSTBloom, PSTHash"),
        ("serve", bench_serve, "bexdb serve under concurrent load, beside the in-process matcher"),
        ("load", bench_load, "bulk loads of BEGen: Spark, sharded Spark, the python engine"),
    ):
        q = bench_sub.add_parser(name, help=text)
        module.add_arguments(q)
        q.set_defaults(func=_bench, bench_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; errors become a message on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command = args.func
    try:
        return func(args)
    except CheckFailed as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_CHECK
    except InvalidInput as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_INVALID
    except BexdbError as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except OSError as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
