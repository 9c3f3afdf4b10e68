"""What every benchmark shares: progress, figures, the machine, agreement, tables, plots.

A benchmark module (:mod:`tools.bench.match` and its siblings) measures; this module holds
the rest, so that each benchmark reads as its experiment alone:

* :func:`logger` -- progress lines on stderr, prefixed with the benchmark's name;
* :func:`stats` -- mean and percentiles of a series of timings;
* :class:`Laps` -- wall and CPU time of each timed call, side by side;
* :func:`machine`, :func:`git_head`, :func:`source_digests` -- what a result was measured
  on, recorded in every ``results.json``;
* :class:`AgreementError`, :func:`check_agreement` -- a benchmark times only what answers
  alike: before any figure is written, every method must return the same ids;
* :func:`proc_status_kb`, :func:`proc_cpu_s` -- memory and CPU of a process, from ``/proc``;
* :func:`markdown_table`, :func:`column_table` -- the table printed on stdout;
* :func:`figure`, :func:`plot_means` -- the plots, with matplotlib, an optional extra
  (``pip install 'bexdb[bench]'``) imported only when a plot is drawn;
* :func:`script` -- ``python -m tools.bench.NAME``, with the options and exit codes of
  ``bexdb bench NAME``.

Nothing here imports matplotlib, or a benchmark, at import time.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import numpy as np

from storage.errors import BexdbError

ROOT = Path(__file__).resolve().parents[2]  # the checkout: tools/bench/harness.py
VERSIONS = ("numpy", "lmdb", "msgpack", "sortedcontainers", "pyroaring")
SOURCES = ("betree", "pbtree", "storage")  # what a matcher process runs
TICK = os.sysconf("SC_CLK_TCK")
EXTRA_HINT = "install the benchmarks' extra: pip install 'bexdb[bench]'"

Row = Mapping[str, Any]


# -- progress and figures ---------------------------------------------------------------------


def logger(name: str) -> Callable[[str], None]:
    """A function printing ``[name] message`` on stderr, flushed (stdout is the table)."""

    def log(message: str) -> None:
        print(f"[{name}] {message}", file=sys.stderr, flush=True)

    return log


def stats(
    values: Sequence[float] | np.ndarray, quantiles: Sequence[int] = (50, 99), median: str = "p50"
) -> dict[str, float]:
    """``mean`` and ``pQ`` of each quantile (the 50th named ``median``); NaN when empty."""
    data = np.asarray(values, dtype=float)
    keys = ["mean", *(median if q == 50 else f"p{q}" for q in quantiles)]
    if not len(data):
        return dict.fromkeys(keys, float("nan"))
    figures = [float(data.mean()), *(float(np.percentile(data, q)) for q in quantiles)]
    return dict(zip(keys, figures, strict=True))


class Laps:
    """Wall and CPU milliseconds of each block timed with ``with laps:``, side by side.

    On a shared machine a wall time also counts the time the scheduler gave to other
    processes; the CPU time of the timing thread (``time.thread_time_ns``) does not, so
    the two apart say how much of a figure is the machine's load.  CPU time misses what
    the block hands to other threads or processes and what it waits for (I/O, page
    faults served from disk): compare the two, do not take either alone.  Cost: four clock
    reads a block (~1 µs: the thread CPU clock is a system call, not the vDSO).

    >>> laps = Laps()
    >>> with laps:
    ...     _ = sum(range(1000))
    >>> len(laps.wall_ms) == len(laps.cpu_ms) == 1
    True
    """

    def __init__(self) -> None:
        self.wall_ms: list[float] = []
        self.cpu_ms: list[float] = []
        self._started = (0, 0)

    def __enter__(self) -> Laps:
        self._started = (time.perf_counter_ns(), time.thread_time_ns())
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        cpu, wall = time.thread_time_ns(), time.perf_counter_ns()
        self.wall_ms.append((wall - self._started[0]) / 1e6)
        self.cpu_ms.append((cpu - self._started[1]) / 1e6)


# -- what a result was measured on --------------------------------------------------------------


def machine() -> dict[str, Any]:
    """The platform, the Python and the versions of the libraries the figures depend on."""
    versions: dict[str, str | None] = {}
    for dist in VERSIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "versions": versions,
    }


def git_head() -> str | None:
    """The commit checked out, or None outside a git checkout (an installed copy).

    Asks git (one short process) rather than reading ``.git/HEAD``: a worktree's ``.git``
    is a file, and a branch's ref may be packed.
    """
    try:
        done = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (done.stdout.strip() or None) if done.returncode == 0 else None


def source_digests() -> dict[str, str]:
    """SHA-1 of each source file of betree, pbtree and storage (path -> digest).

    A matcher process imports them afresh: if they changed since the store was built
    (another checkout, a commit mid-run), its figures belong to other code, and after an
    unversioned page-format change it could misread the store.  A benchmark reports a
    change with the files (``sources_changed``) rather than failing: most edits do not
    touch matching, and a misread store fails the agreement check anyway.
    """
    out = {}
    for pkg in SOURCES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            key = path.relative_to(ROOT).as_posix()
            out[key] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def changed_sources(ours: Mapping[str, str], theirs: Mapping[str, str]) -> list[str]:
    """The files whose digests differ between two :func:`source_digests` (sorted)."""
    return sorted(f for f in ours.keys() | theirs.keys() if ours.get(f) != theirs.get(f))


# -- agreement ----------------------------------------------------------------------------------


class AgreementError(BexdbError):
    """Two methods (an index and a baseline, two stores, ...) returned different answers.

    The benchmark stops there and writes no figure for what disagreed: a time measured
    on a wrong answer means nothing.
    """


def check_agreement(where: str, events: Sequence[Any], got: Mapping[str, Sequence[Any]]) -> int:
    """Every method of ``got`` (name -> the ids of each event, in order) returned the same
    id set on each of the first events; returns how many were compared.

    The first method is the reference; a repeated id counts as a disagreement too.
    Cost: one set per method and event.
    """
    names = list(got)
    k = min(len(v) for v in got.values())
    for i in range(k):
        ref = set(got[names[0]][i])
        if len(ref) != len(got[names[0]][i]):
            raise AgreementError(f"{where}, event {i}: {names[0]} repeats an id")
        for name in names[1:]:
            other = got[name][i]
            if set(other) != ref or len(set(other)) != len(other):
                missing = sorted(ref - set(other))[:10]
                extra = sorted(set(other) - ref)[:10]
                raise AgreementError(
                    f"{where}, event {i} {json.dumps(events[i])}: {name} returned "
                    f"{len(other)} ids, {names[0]} {len(ref)}; missing {missing}, extra {extra} "
                    "(first 10)",
                    "run the differential tests: pytest tests/betree/test_index_differential.py",
                )
    return k


# -- processes ----------------------------------------------------------------------------------


def proc_status_kb(pid: int | str = "self") -> dict[str, int]:
    """The kB fields of ``/proc/PID/status`` (``VmRSS``, ``VmHWM``, ``RssAnon``, ...).

    Empty if the process is gone or this is not Linux.
    """
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[key] = int(parts[0])
    return out


def proc_cpu_s(pid: int | str = "self") -> float | None:
    """CPU seconds (user + system, ``/proc/PID/stat``) process ``pid`` has used; None if
    it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces and ")"
    return (int(fields[11]) + int(fields[12])) / TICK  # fields 14 and 15 of proc(5)


# -- tables -------------------------------------------------------------------------------------


def markdown_table(heads: Sequence[str], cells: Sequence[Sequence[str]]) -> str:
    """A markdown table, cells right-aligned and the columns lined up for a terminal."""
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(heads)]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(x.rjust(w) for x, w in zip(row, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"
    return "\n".join([line(heads), rule, *(line(c) for c in cells)])


Column = tuple[str, str, Callable[[Any], Any]]  # heading, format, the value of a row


def column_table(columns: Sequence[Column], rows: Sequence[Row]) -> str:
    """A markdown table with a row per result: ``format.format(value(row))`` in each cell."""
    cells = [[fmt.format(get(r)) for _, fmt, get in columns] for r in rows]
    return markdown_table([head for head, _, _ in columns], cells)


# -- plots --------------------------------------------------------------------------------------


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the file-only Agg backend, or a clear error without it.

    matplotlib is an optional extra (the product does not need it); every benchmark calls
    this before measuring, so that a long run does not end in an import error.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise BexdbError(
            f"the benchmarks draw their plots with matplotlib: {exc}", EXTRA_HINT
        ) from None
    return plt


@contextmanager
def figure(path: Path, *grid: int, dpi: int = 120, **options: Any) -> Iterator[tuple[Any, Any]]:
    """``(fig, axes)`` of ``plt.subplots(*grid, **options)``, written to ``path`` (PNG) on
    leaving and closed either way."""
    plt = pyplot()
    fig, axes = plt.subplots(*grid, **options)
    try:
        yield fig, axes
        fig.tight_layout()
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)


def plot_means(
    ax: Any,
    xs: Sequence[float],
    rows: Sequence[Row],
    series: Sequence[tuple[str, str, str]],
    labels: tuple[str, str, str],
) -> None:
    """Log-log lines of ``row[key]["mean"]`` against ``xs`` for each ``(key, label, style)``,
    each with its ``p99`` dotted in the same colour; ``labels``: the x axis's, the y
    axis's and the title."""
    for key, label, style in series:
        (line,) = ax.plot(xs, [r[key]["mean"] for r in rows], style, label=label)
        ax.plot(xs, [r[key]["p99"] for r in rows], ":", color=line.get_color(), alpha=0.6)
    ax.set_xscale("log")
    ax.set_yscale("log")
    xlabel, ylabel, title = labels
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


# -- running ------------------------------------------------------------------------------------


def script(
    prog: str,
    doc: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    main: Callable[[argparse.Namespace], int],
) -> NoReturn:
    """A module run as a script (``python -m tools.bench.match``) as ``prog``
    (``bexdb bench match``) runs: the same options, a BexdbError a message on stderr and
    exit 1.  Built here rather than by calling ``tools.cli``, which imports this package."""
    title = (doc or prog).strip().splitlines()[0]
    parser = argparse.ArgumentParser(prog=prog, description=title)
    add_arguments(parser)
    args = parser.parse_args()
    try:
        sys.exit(main(args))
    except BexdbError as exc:
        print(f"bexdb: {exc}", file=sys.stderr)
        sys.exit(1)
