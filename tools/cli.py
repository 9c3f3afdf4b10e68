"""The ``bexdb`` command: ``main(argv)`` plus one function per subcommand (as lmdb.tool).

Exit codes: 0 success; 1 runtime failure; 2 usage error; 3 invalid input
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
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from storage.errors import BexdbError, CheckFailed, InvalidInput
from tools.args import (
    STORE_HELP,
    HelpFormatter,
    LazyCommands,
    non_negative,
    parse_id,
    positive,
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INVALID, EXIT_CHECK = 0, 1, 2, 3, 4

Command = Callable[[argparse.Namespace], int]
BENCHMARKS = (  # `bexdb bench NAME` runs tools/bench/NAME.py
    ("pbtree", "PB+tree search and insert against Grouped Filter"),
    ("match", "BE-Tree matching against SCAN and counting"),
    ("adapt", "matching while the workload changes, self-adjustment off/on"),
    ("compare", "bexdb against SCAN, counting, OpIndex, PSTBloom, PSTHash"),
    ("serve", "bexdb serve under concurrent load, beside the in-process matcher"),
    ("load", "bulk loads of BEGen: Spark, sharded Spark, the python engine"),
    ("forms", "matching with a fifth of the predicates in the new language forms, against BEGen"),
    ("store", "matching on an existing store: first pass, warm, batched, memory, --jobs"),
    ("stream", "bexdb stream fed files at a fixed rate: events/s and latency, beside match --jobs"),
    ("live", "matching while subscriptions change: 1 write to R matches, batches, serve"),
    ("hem", "HEM (DASFAA 2022), built from its source, on a dense workload beside bexdb"),
)
DESCRIPTION = (
    "bexdb: a disk-backed Boolean-expression index for publish/subscribe. Register "
    "subscriptions (expressions over event attributes), then match events against them."
)
EPILOG = (
    "exit codes: 0 success, 1 runtime failure, 2 usage error, 3 invalid input (some records "
    "or events rejected), 4 store check failed.  `bexdb COMMAND --help` for a command's options."
)
RECORDS_HELP = (
    'INPUT holds JSON Lines, one subscription record a line: {"id": ID, "expr": "EXPRESSION"}, '
    'ID a JSON integer or string; e.g. {"id": "s1", "expr": "price < 10 and genre = '
    '\\"classics\\""}. A record may hold "meta": any JSON object (at most 64 KiB as JSON), '
    "stored with the subscription (docs/meta.md). Blank lines are skipped."
)


def schema_file(path: str) -> Any:
    """``--schema FILE``: the schema document (README: Language), validated while the
    arguments are parsed, so that a bad file is a usage error (exit 2) naming the file and
    the reason, before anything is read or written.  A BOM at its start is ignored."""
    from betree.formats.jsonl import BOM, loads_line
    from betree.lang.schema import Schema

    try:
        with open(path, "rb") as fh:
            raw = fh.read().removeprefix(BOM)
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"{path}: cannot read it: {exc.strerror}") from None
    try:
        doc = loads_line(raw)
        Schema.from_json(doc)
    except InvalidInput as exc:
        raise argparse.ArgumentTypeError(f"{path}: {exc.message}") from None
    return doc


# -- subcommands ---------------------------------------------------------------------------


def cmd_subscribe(args: argparse.Namespace) -> int:
    """Insert or replace the subscriptions of a JSON Lines file, all in one transaction.

    A store it creates takes ``--schema``, else the schema header of an export
    (:mod:`loaders.header`), else one inferred from the records."""
    from betree.formats.jsonl import input_lines
    from betree.stores.live import write_subscriptions
    from loaders.header import input_schema
    from loaders.records import mark_duplicates, parse_lines

    with _binary_input(args.input) as fh:
        records = list(parse_lines(input_lines(fh)))
    mark_duplicates(records)
    bad = [r for r in records if r.error is not None]
    if bad:
        for r in bad:
            print(f"bexdb: line {r.line}: {r.error}", file=sys.stderr)
        print("bexdb: nothing was subscribed", file=sys.stderr)
        return EXIT_INVALID
    schema = args.schema
    if schema is None and args.input not in (None, "-") and not os.path.exists(args.store):
        schema = input_schema([args.input])
    created = write_subscriptions(args.store, [r.item() for r in records], schema)
    new = sum(created)
    print(f"subscribed {len(created)} ({new} new, {len(created) - new} replaced)")
    return EXIT_OK


def cmd_unsubscribe(args: argparse.Namespace) -> int:
    """Delete subscriptions by id, all or nothing (like ``subscribe``): if one is absent,
    none is deleted and the absent ones are named (exit 3)."""
    from betree.stores.live import delete_subscriptions

    ids = [parse_id(text) for text in args.ids]
    delete_subscriptions(args.store, ids)
    print(f"unsubscribed {len(ids)}")
    return EXIT_OK


def cmd_match(args: argparse.Namespace) -> int:
    """Match JSON Lines events; one output line per input line, errors in their own line.

    A sharded store (``bexdb load --shards``) answers with the union of its shards.  With
    ``--engine spark`` the events (files or directories, as ``load`` reads them) are
    matched on Spark into ``--out`` (:mod:`loaders.spark.match`).
    """
    if args.engine == "spark":
        if args.with_meta:
            print("bexdb: --with-meta is for --engine python", file=sys.stderr)
            return EXIT_USAGE
        if args.jobs is not None:
            print("bexdb: --jobs is for --engine python (Spark has its tasks)", file=sys.stderr)
            return EXIT_USAGE
        return _match_on_spark(args)
    if args.out is not None or args.master is not None:
        print("bexdb: --out and --master need --engine spark", file=sys.stderr)
        return EXIT_USAGE
    if len(args.events) > 1:
        print("bexdb: several EVENTS inputs need --engine spark", file=sys.stderr)
        return EXIT_USAGE
    from betree.packed.heap import keep_freed_memory
    from betree.stores.sharded import open_index
    from betree.streams.parallel import default_jobs, match_lines_parallel
    from betree.streams.stream import ready_batches

    rejected = 0
    events = args.events[0] if args.events else None
    jobs = default_jobs() if args.jobs is None else args.jobs
    if jobs <= 1:
        keep_freed_memory()  # this process matches the batches
    sys.stdout.flush()
    binary = getattr(sys.stdout, "buffer", None)  # (a caller may have put a StringIO there)
    cache = args.cache_mb << 20
    with open_index(args.store, cache_bytes=cache) as store, _binary_input(events) as fh:
        for lines, errors in match_lines_parallel(
            store, args.store, ready_batches(fh), jobs, cache, args.with_meta
        ):
            rejected += errors
            if binary is None:
                sys.stdout.write(lines.decode())
            else:
                binary.write(lines)
                binary.flush()
    return EXIT_INVALID if rejected else EXIT_OK


def _match_on_spark(args: argparse.Namespace) -> int:
    if args.out is None or not args.events:
        print("bexdb: --engine spark needs EVENTS files and --out OUT_DIR", file=sys.stderr)
        return EXIT_USAGE
    from loaders.spark.match import match_events

    with _terminate_as_interrupt():  # a killed run cleans up: cancel, remove staging
        summary = match_events(
            args.store, args.events, args.out, master=args.master, progress=sys.stderr
        )
    print(json.dumps(summary))
    return EXIT_INVALID if summary["rejected"] else EXIT_OK


@contextmanager
def _binary_input(path: str | None) -> Iterator[BinaryIO]:
    """Input as bytes: a line that is not UTF-8 is one bad line, not the end of the input."""
    if path is None or path == "-":
        yield sys.stdin.buffer
    else:
        with open(path, "rb") as fh:
            yield fh


def cmd_export(args: argparse.Namespace) -> int:
    """Write every subscription of a store (plain or sharded) as JSON Lines records.

    First the schema header ``{"schema": DOC}`` (:mod:`loaders.header`), then
    ``{"id": ID, "expr": TEXT}`` per line, ids and texts as given, with ``"meta": OBJECT``
    (the metadata's JSON text as stored: :mod:`betree.disk.metadata`) for a subscription that
    has it, so that ``bexdb load`` reads the file back into an equal store without
    ``--schema``.  A file is written beside
    ``OUT`` and renamed into place when complete (a failed export leaves no partial file).
    """
    from betree.stores.sharded import open_index
    from loaders.header import schema_header

    with open_index(args.store) as store, _output(args.out) as out:
        count = 0
        out.write(schema_header(store.schema.to_json()) + "\n")
        for ident, expr, meta in store.records():
            line = json.dumps({"id": ident, "expr": expr}, ensure_ascii=False)
            out.write(line if meta is None else f'{line[:-1]}, "meta": {meta}}}')
            out.write("\n")
            count += 1
    print(f"exported {count:,} subscriptions", file=sys.stderr)
    return EXIT_OK


@contextmanager
def _output(path: str | None) -> Iterator[TextIO]:
    """``path`` written whole or not at all (stdout for None or ``-``)."""
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    partial = target.with_name(f".{target.name}.partial-{os.getpid()}")
    try:
        with open(partial, "w", encoding="utf-8") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def cmd_schema(args: argparse.Namespace) -> int:
    """Print the store's schema document (what ``--schema`` takes; an export's header).

    With ``--add FILE``, first add attributes or change hints (:mod:`betree.disk.schemaedit`), all
    shards or none; a change that would alter what a stored subscription means is refused:
    exit 2, nothing changed.
    """
    from betree.stores.sharded import open_index

    with open_index(args.store, readonly=args.add is None) as store:
        if args.add is not None:
            try:
                done = store.add_to_schema(args.add)
            except InvalidInput as exc:
                print(f"bexdb: {exc}", file=sys.stderr)
                print("bexdb: the schema was not changed", file=sys.stderr)
                return EXIT_USAGE
            added, hints = ", ".join(done["added"]) or "none", ", ".join(done["hints"]) or "none"
            print(f"schema: added {added}; hints changed: {hints}", file=sys.stderr)
        print(json.dumps(store.schema.to_json(), indent=2, ensure_ascii=False))
    return EXIT_OK


def cmd_load(args: argparse.Namespace) -> int:
    """Offline bulk load into a new store (published atomically).

    Exit 3 when it published a store and rejected some records; 1 when it published
    nothing (``--max-rejects`` passed, or a failure: SPEC section 11).  Without
    ``--schema``, the schema header of an export (:mod:`loaders.header`) is used.  With
    ``--replace``, an existing store is not replaced by one that rejected records unless
    ``--allow-rejects`` or ``--max-rejects`` says how many may be.
    """
    from loaders.header import input_schema
    from loaders.records import TooManyRejects

    if args.master is not None and args.engine == "python":
        print("bexdb: --master needs --engine spark", file=sys.stderr)
        return EXIT_USAGE
    if args.memory_budget is not None and args.engine == "spark":
        print("bexdb: --memory-budget is for --engine python", file=sys.stderr)
        return EXIT_USAGE
    guarded = args.replace and args.max_rejects is None and not args.allow_rejects
    guarded = guarded and os.path.exists(args.store)
    try:
        schema = args.schema if args.schema is not None else input_schema(args.inputs)
        summary = _load(args, schema, 0 if guarded else args.max_rejects)
    except TooManyRejects as exc:
        if guarded:
            print(
                f"bexdb: {exc.rejected} records rejected; --replace keeps {args.store} as it "
                "is (hint: pass --allow-rejects, or --max-rejects N, to replace it anyway)",
                file=sys.stderr,
            )
        else:
            print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except InvalidInput as exc:  # nothing published: 1, not 3 (SPEC section 11)
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    print(json.dumps(summary))
    return EXIT_INVALID if summary["rejected"] else EXIT_OK


def _load(args: argparse.Namespace, schema: Any, max_rejects: int | None) -> dict[str, Any]:
    rejects = open(args.rejects, "w", encoding="utf-8") if args.rejects else None  # noqa: SIM115
    try:
        if args.engine == "spark":
            from loaders.spark.driver import load as spark_load

            with _terminate_as_interrupt():  # a killed load cleans up: cancel, remove staging
                summary = spark_load(
                    args.store,
                    args.inputs,
                    schema,
                    master=args.master,
                    shards=args.shards,
                    replace=args.replace,
                    rejects=rejects,
                    max_rejects=max_rejects,
                    progress=sys.stderr,
                    verbose=args.verbose,
                )
        else:
            from loaders import python_load
            from loaders.records import read_jsonl

            summary = python_load.load(
                args.store,
                # (read by the load into its own list, which it lets go after the compile)
                chain.from_iterable(map(read_jsonl, args.inputs)),
                schema,
                replace=args.replace,
                rejects=rejects,
                max_rejects=max_rejects,
                progress=sys.stderr,
                shards=args.shards,
                memory_budget=args.memory_budget or python_load.DEFAULT_BUDGET_MB,
            )
    finally:
        if rejects is not None:
            rejects.close()
    return summary


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
    from betree.stores.maintain import staging_notes
    from betree.stores.sharded import verify

    for note in staging_notes(args.store):  # not a violation: the store itself is intact
        print(f"note: {note}")
    found = verify(args.store)
    print(f"ok ({found['shards']} shards)" if found["shards"] else "ok")
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """Check subscription records against a store's schema, writing nothing: one JSON
    line a record on stdout (:mod:`tools.validate`); exit 3 if any is invalid."""
    from betree.formats.jsonl import input_lines
    from betree.stores.sharded import open_index
    from tools import validate

    with _binary_input(args.input) as fh:
        lines = list(input_lines(fh))
    with open_index(args.store) as store:
        results, valid = validate.check(store, lines)
    for result in results:
        print(json.dumps(result, ensure_ascii=False))
    invalid = len(results) - len(valid)
    print(f"validated {len(results):,} records: {invalid:,} invalid", file=sys.stderr)
    return EXIT_INVALID if invalid else EXIT_OK


def cmd_stream(args: argparse.Namespace) -> int:
    """Match the events of files dropped into ``--source`` (or a Kafka topic) on Spark
    Structured Streaming, exactly once into ``--out`` (:mod:`loaders.spark.stream`).

    SIGTERM stops the query after the micro-batch in hand (exit 0; a second one stops it
    at once); a restart from the same ``--checkpoint`` carries on where it stopped.
    """
    from loaders.spark.stream import endpoint, stream

    try:
        source, out = endpoint(args.source, "--source"), endpoint(args.out, "--out")
    except InvalidInput as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    stop = threading.Event()

    def finish(signum: int, frame: Any) -> None:
        if stop.is_set():
            raise KeyboardInterrupt(f"signal {signum}")
        stop.set()
        print("bexdb: stopping after the micro-batch in hand", file=sys.stderr)

    previous = signal.signal(signal.SIGTERM, finish)
    try:
        summary = stream(
            args.store,
            source,
            out,
            args.checkpoint,
            fmt=args.format,
            trigger=args.trigger,
            max_files=args.max_files_per_trigger,
            available_now=args.available_now,
            master=args.master,
            progress=sys.stderr,
            progress_json=sys.stdout if args.progress_json else None,
            stop=stop,
        )
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(json.dumps(summary))
    return EXIT_OK


def _bench(args: argparse.Namespace) -> int:
    return int(args.bench_main(args))


def _serve(args: argparse.Namespace) -> int:
    from tools import serve

    return serve.main(args)


# -- the parser ------------------------------------------------------------------------------


class _Version(argparse.Action):
    """``bexdb --version``, looked up only when asked: the package metadata costs tens to
    hundreds of milliseconds to find, which every other command would pay."""

    def __init__(self, option_strings: list[str], dest: str, **options: Any) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version and the store format it writes, then exit",
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    """The package's version and the store format it writes."""
    from importlib.metadata import PackageNotFoundError, version

    from storage.store import FORMAT_VERSION

    try:
        found = version("bexdb")
    except PackageNotFoundError:  # run from a source tree that was never installed
        found = "(not installed)"
    return f"bexdb {found} (store format {FORMAT_VERSION})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bexdb", description=DESCRIPTION, epilog=EPILOG, formatter_class=HelpFormatter
    )
    parser.add_argument("--version", action=_Version)
    sub = LazyCommands.attach(parser, dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "subscribe", help="insert or replace subscriptions (JSON Lines)", description=RECORDS_HELP
    )
    p.add_argument("store", help="the store (created if missing; plain or sharded)")
    p.add_argument("input", nargs="?", help="JSON Lines file (default: stdin)")
    p.add_argument("--schema", type=schema_file, help="schema JSON for a new store (else inferred)")
    p.set_defaults(func=cmd_subscribe)

    p = sub.add_parser("unsubscribe", help="delete subscriptions by id")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("ids", nargs="+", metavar="ID", help="a JSON integer or string, or text")
    p.set_defaults(func=cmd_unsubscribe)

    p = sub.add_parser("match", help="match JSON Lines events from a file or stdin")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument(
        "events",
        nargs="*",
        metavar="EVENTS",
        help="JSON Lines file (default: stdin); with --engine spark: JSON Lines, Parquet or "
        "CSV files or directories",
    )
    p.add_argument(
        "--engine",
        choices=["python", "spark"],
        default="python",
        help="python: this process, results on stdout; spark: on Spark, into --out",
    )
    p.add_argument(
        "--out", metavar="OUT_DIR", help="--engine spark: a new directory for the results"
    )
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument(
        "--jobs",
        type=positive,
        metavar="N",
        help="processes matching at once, output still in input order (default: the cores; "
        "1: this process only)",
    )
    p.add_argument(
        "--cache-mb",
        type=positive,
        default=256,
        help="decoded-page cache of each matching process, for the whole store (a sharded "
        "store's shards share it): more is faster on large stores, bounded memory",
    )
    p.add_argument(
        "--with-meta",
        action="store_true",
        help='each match as {"id": ID, "meta": OBJECT}, the subscription\'s metadata (null '
        "where it has none) beside its id (--engine python)",
    )
    p.set_defaults(func=cmd_match)

    p = sub.add_parser(
        "stream", help="match events dropped into a directory on Spark Streaming, exactly once"
    )
    p.add_argument("store", help=STORE_HELP)
    p.add_argument(
        "--source",
        required=True,
        help="directory watched for event files, or kafka://HOST:PORT/TOPIC",
    )
    p.add_argument(
        "--out",
        "--sink",
        required=True,
        help="directory of JSON Lines result parts (read through its _spark_metadata log), "
        "or kafka://HOST:PORT/TOPIC",
    )
    p.add_argument("--checkpoint", required=True, help="the query's checkpoint directory")
    p.add_argument(
        "--format",
        choices=["json", "parquet", "csv"],
        default="json",
        help="the event files' format (json: JSON Lines)",
    )
    p.add_argument(
        "--trigger", type=float, default=1.0, metavar="SECONDS", help="micro-batch interval"
    )
    p.add_argument(
        "--max-files-per-trigger",
        type=positive,
        metavar="N",
        help="the most files a micro-batch reads (default: all that arrived)",
    )
    p.add_argument(
        "--available-now", action="store_true", help="match the files there now, then stop"
    )
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument(
        "--progress-json", action="store_true", help="a JSON line per micro-batch on stdout"
    )
    p.set_defaults(func=cmd_stream)

    p = sub.add_parser("export", help="write every subscription as JSON Lines (backup, re-shard)")
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("out", nargs="?", help="output file (default: stdout)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("load", help="offline bulk load into a new store")
    p.add_argument("store", help="the store to build (a directory; see --replace)")
    p.add_argument(
        "inputs",
        nargs="+",
        metavar="INPUT",
        help="subscription records: JSON Lines, Parquet or CSV (columns id, expr, optionally "
        "meta: JSON text), files or directories",
    )
    p.add_argument("--schema", type=schema_file, help="schema JSON (else inferred)")
    p.add_argument(
        "--engine",
        choices=["spark", "python"],
        default="spark",
        help="spark: a Spark job (local unless --master); python: this process, JSON Lines only",
    )
    p.add_argument("--master", help="Spark master URL (default local[*])")
    p.add_argument(
        "--shards",
        type=positive,
        help="build K independent stores (Spark: in parallel), plus a manifest",
    )
    p.add_argument("--verbose", action="store_true", help="keep Spark's own logging")
    p.add_argument(
        "--memory-budget",
        type=positive,
        metavar="MB",
        help="--engine python: bound the compile caches and the build's write transactions "
        "(committed in pieces) by this budget; check() is not bounded (default 1024)",
    )
    p.add_argument("--rejects", help="write rejected records here (JSON Lines)")
    p.add_argument("--max-rejects", type=non_negative, help="fail (publish nothing) past N rejects")
    p.add_argument("--replace", action="store_true", help="replace an existing store")
    p.add_argument(
        "--allow-rejects",
        action="store_true",
        help="with --replace: replace the store even if some records are rejected",
    )
    p.set_defaults(func=cmd_load)

    p = sub.add_parser(
        "schema",
        help="print the store's schema; --add FILE adds attributes or changes min/max hints",
        description="Prints the schema document (JSON): what --schema takes, an export's "
        "header. --add FILE (a schema document) adds its new attributes and takes its min/max "
        "for existing ones, on a live store (every reader sees it from its next snapshot); "
        "another type, fold_case or allow_undefined for an existing attribute is refused "
        "(exit 2, nothing changed).",
    )
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("--add", metavar="FILE", type=schema_file, help="the schema change (JSON)")
    p.set_defaults(func=cmd_schema)

    from tools import ops

    ops.add_arguments(sub)

    p = sub.add_parser(
        "verify", help="run every invariant check, of every shard too (exit 4 on violations)"
    )
    p.add_argument("store", help=STORE_HELP)
    p.set_defaults(func=cmd_verify)

    p = sub.add_parser(
        "validate",
        help="check subscription records against a store's schema, writing nothing",
        description=RECORDS_HELP + ' Prints one JSON line a record: {"line", "id", '
        '"ok": true} or {"line", "id", "error", "column"}; exit 3 if any is invalid.',
    )
    p.add_argument("store", help=STORE_HELP)
    p.add_argument("input", nargs="?", help="JSON Lines file (default: stdin)")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("serve", help="the matcher service: JSON over HTTP")
    from tools import serve

    serve.add_arguments(p)
    p.set_defaults(func=_serve)
    # the workload generator, the demo and the benchmarks (numpy, matplotlib) are imported
    # only when chosen: see LazyCommands
    sub.add_lazy(
        "gen", "tools.bench.gen_cli", "write a synthetic workload (schema, subscriptions, events)"
    )
    sub.add_lazy("demo", "tools.demo", "the main job end to end: generate, load, match, summarize")
    bench = sub.add_parser("bench", help="run a benchmark: table, JSON results and plots")
    benchmarks = LazyCommands.attach(bench, dest="benchmark", required=True, metavar="BENCHMARK")
    for name, text in BENCHMARKS:
        q = benchmarks.add_lazy(name, f"tools.bench.{name}", text, entry="bench_main")
        q.set_defaults(func=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one subcommand; errors become a message on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Command = args.func
    try:
        try:
            return func(args)
        finally:
            sys.stdout.flush()  # a closed pipe shows here, inside the handler below
    except BrokenPipeError:
        # The reader went away (`bexdb inspect S | head -1`): it has what it wanted.  Point
        # stdout at /dev/null so that the interpreter's own flush at exit stays quiet.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
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
