"""Reading subscription records and publishing a store atomically — shared by the loaders.

A load never publishes a half-built store: it builds in a temporary directory beside the
target (same file system, so the final ``rename`` is atomic), syncs and checks it, and
only then moves it into place.  An existing target is replaced only when asked to, by
renaming it aside first and removing it after the new store is in place.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from storage.errors import BexdbError, InvalidInput
from storage.staging import staging
from storage.swap import swap_in


@dataclass
class Record:
    """One input record: its 1-based line, id and expression (or why it is unusable)."""

    line: int
    id: Any
    expr: Any
    error: str | None = None


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Subscription records from a JSON Lines file (SPEC section 5); blank lines skipped."""
    with open(path, encoding="utf-8") as fh:
        yield from parse_lines(fh)


def parse_lines(lines: Iterable[str], first: int = 1) -> Iterator[Record]:
    """The records of JSON Lines (numbered from ``first``); blank lines skipped."""
    for n, text in enumerate(lines, first):
        record = parse_line(text, n)
        if record is not None:
            yield record


def parse_line(text: str, n: int = 1) -> Record | None:
    """The record of line ``n`` (its error, if it is not usable), or None if it is blank."""
    if not text or text.isspace():
        return None
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        return Record(n, None, None, f"malformed JSON: {exc.msg} at column {exc.colno}")
    if type(doc) is not dict or "id" not in doc or "expr" not in doc:
        return Record(
            n,
            doc.get("id") if isinstance(doc, dict) else None,
            None,
            'a record must be an object with "id" and "expr"',
        )
    ident, expr = doc["id"], doc["expr"]
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return Record(n, ident, expr, "id must be a string or an integer")
    if isinstance(ident, int) and not -(1 << 63) <= ident < 1 << 63:
        return Record(n, ident, expr, "integer id outside the signed 64-bit range")
    if not isinstance(expr, str):
        return Record(n, ident, expr, "expr must be a string")
    return Record(n, ident, expr)


def mark_duplicates(records: list[Record]) -> None:
    """Reject every occurrence of an id that appears more than once (SPEC section 5)."""
    counts = Counter((type(r.id), r.id) for r in records if r.error is None)
    for record in records:
        if record.error is None and counts[(type(record.id), record.id)] > 1:
            record.error = f"duplicate id {record.id!r} (every occurrence is rejected)"


def write_rejects(out: TextIO, records: Iterable[Record]) -> int:
    """Write ``{"line", "id", "error"}`` lines for rejected records; return how many."""
    n = 0
    for record in records:
        if record.error is not None:
            out.write(json.dumps({"line": record.line, "id": record.id, "error": record.error}))
            out.write("\n")
            n += 1
    return n


@contextmanager
def publishing(target: str | os.PathLike[str], replace: bool) -> Iterator[Path]:
    """Yield a staging directory; on success move its ``store`` to ``target`` atomically.

    The caller builds the finished store in ``staging / "store"`` (and may use the rest of
    the staging directory for scratch).  On any exception the staging directory is removed
    and the target is untouched.  A process killed meanwhile leaves it behind, owned by
    no live process: the next load of ``target`` removes it (:mod:`storage.staging`).
    """
    target = Path(target).absolute()
    if target.exists() and not replace:
        raise BexdbError(f"{target} already exists", "pass --replace to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    with staging(target, "building") as path:  # and stale ones of killed loads go first
        yield path
        swap_in(path / "store", target)


def check_rejects(rejected: int, max_rejects: int | None) -> None:
    if max_rejects is not None and rejected > max_rejects:
        raise InvalidInput(
            f"{rejected} records rejected, more than --max-rejects {max_rejects}; nothing published"
        )
