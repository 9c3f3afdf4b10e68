"""The ``bexdb`` command: ``main(argv)`` plus one function per subcommand (as lmdb.tool).

Exit codes (SPEC section 6): 0 success; 1 runtime failure; 2 usage error; 3 invalid input
(some records or events rejected); 4 store check failed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from storage.errors import BexdbError, CheckFailed, InvalidInput

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INVALID, EXIT_CHECK = 0, 1, 2, 3, 4

Command = Callable[[argparse.Namespace], int]


def _bench(args: argparse.Namespace) -> int:
    from tools import bench_pbtree

    runners: dict[str, Command] = {"pbtree": bench_pbtree.main}
    return runners[args.benchmark](args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bexdb", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    bench = sub.add_parser("bench", help="run a benchmark: table, JSON results and plots")
    bench_sub = bench.add_subparsers(dest="benchmark", required=True, metavar="BENCHMARK")
    from tools import bench_pbtree

    bench_pbtree.add_arguments(
        bench_sub.add_parser("pbtree", help="PB+tree search and insert against Grouped Filter")
    )
    bench.set_defaults(func=_bench)
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
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
