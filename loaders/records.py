"""Reading subscription records and publishing a store atomically — shared by the loaders.

A load never publishes a half-built store: it builds in a temporary directory beside the
target (same file system, so the final ``rename`` is atomic), syncs and checks it, and
only then moves it into place.  An existing target is replaced only when asked to, by
renaming it aside first and removing it after the new store is in place.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from betree.disk.metadata import Meta, meta_text
from betree.formats.jsonl import input_lines, loads_line
from betree.stores.maintain import retiring
from loaders.header import is_header
from storage.errors import BexdbError, InvalidInput
from storage.staging import staging
from storage.swap import swap_in


@dataclass(slots=True)
class Record:
    """One input record: its 1-based line, id, expression and metadata (its JSON text,
    validated: :mod:`betree.disk.metadata`), or why it is unusable.  Slotted: a load holds
    every record to its build (with its line and int id, 144 bytes a record against 184
    with a ``__dict__``; its text is let go once compiled: :mod:`loaders.python_load`)."""

    line: int
    id: Any
    expr: Any
    error: str | None = None
    meta: Meta | None = None

    def item(self) -> tuple[Any, str, Meta | None]:
        """What a write takes: ``(id, expr, meta)``."""
        return self.id, self.expr, self.meta


_SURROGATE = re.compile("[\ud800-\udfff]")


def read_jsonl(path: str | os.PathLike[str]) -> Iterator[Record]:
    """Subscription records (``{"id": ID, "expr": "..."}``, one per line) from a JSON Lines
    file; blank lines skipped."""
    with open(path, "rb") as fh:
        yield from parse_lines(input_lines(fh))


def parse_lines(lines: Iterable[bytes | str], first: int = 1) -> Iterator[Record]:
    """The records of JSON Lines (numbered from ``first``); blank lines skipped."""
    for n, text in enumerate(lines, first):
        record = parse_line(text, n)
        if record is not None:
            yield record


def parse_line(text: bytes | str, n: int = 1, meta_column: bool = False) -> Record | None:
    """The record of line ``n`` (its error, if it is not usable), or None if it is blank
    or a schema header (:mod:`loaders.header`).

    ``"meta"``, if present and not null, must be an object within the bound of
    :func:`betree.disk.metadata.meta_text`; with ``meta_column`` (a Parquet or CSV row) a
    string there is the column's JSON text, decoded first.

    Every error is the record's own, whatever the bytes.  The record's ``id`` is what
    the rejects file shows: an id that JSON cannot show (NaN, infinities, a lone
    surrogate) or that is an object or array becomes None, and the error says what it was.
    """
    if not text or text.isspace():
        return None
    try:
        doc = loads_line(text)
    except InvalidInput as exc:
        return Record(n, None, None, exc.message)
    if is_header(doc):
        return None  # an export's schema header (loaders.header), not a record
    if type(doc) is not dict or "id" not in doc or "expr" not in doc:
        shown, _ = shown_id(doc.get("id") if isinstance(doc, dict) else None)
        return Record(n, shown, None, 'a record must be an object with "id" and "expr"')
    ident, expr = doc["id"], doc["expr"]
    shown, problem = shown_id(ident)
    if problem is not None:
        return Record(n, shown, None, problem)
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return Record(n, ident, None, "id must be a string or an integer")
    if isinstance(ident, int) and not -(1 << 63) <= ident < 1 << 63:
        return Record(n, ident, None, "integer id outside the signed 64-bit range")
    if not isinstance(expr, str):
        return Record(n, ident, None, "expr must be a string")
    where = _lone_surrogate(expr)
    if where is not None:
        return Record(n, ident, None, f"expr holds {where} (not valid Unicode)")
    meta = doc.get("meta")
    if meta is None:
        return Record(n, ident, expr)
    try:
        if meta_column and isinstance(meta, str):
            try:
                meta = loads_line(meta)
            except InvalidInput as exc:
                raise InvalidInput(f'column "meta": {exc.message}') from None
        return Record(n, ident, expr, meta=meta_text(meta))
    except InvalidInput as exc:
        return Record(n, ident, None, exc.message)


def shown_id(ident: Any) -> tuple[Any, str | None]:
    """The id as a rejects line shows it (strict JSON: None if it cannot), and why it is
    not an id if the rejects line cannot show it (else None)."""
    if isinstance(ident, str):
        where = _lone_surrogate(ident)
        return (ident, None) if where is None else (None, f"id holds {where} (not valid Unicode)")
    if isinstance(ident, float) and not math.isfinite(ident):
        what = "NaN" if math.isnan(ident) else "an infinite number"
        return None, f"id must be a string or an integer, not {what}"
    if isinstance(ident, dict | list):
        what = "an object" if isinstance(ident, dict) else "an array"
        return None, f"id must be a string or an integer, not {what}"
    return ident, None


def _lone_surrogate(text: str) -> str | None:
    """Where ``text`` holds a lone surrogate (a JSON ``\\ud800`` escape decodes to one,
    and UTF-8 cannot encode it), or None.  Cost: nothing for ASCII text."""
    if text.isascii():
        return None
    found = _SURROGATE.search(text)
    if found is None:
        return None
    return f"a lone surrogate \\u{ord(found.group()):04x} at character {found.start() + 1}"


def mark_duplicates(records: list[Record]) -> None:
    """Reject every occurrence of an id that appears more than once: which occurrence was
    meant cannot be known, so the rejects file lists them all (both load engines)."""
    counts = Counter((type(r.id), r.id) for r in records if r.error is None)
    for record in records:
        if record.error is None and counts[(type(record.id), record.id)] > 1:
            record.error = f"duplicate id {record.id!r} (every occurrence is rejected)"


def write_rejects(out: TextIO, records: Iterable[Record]) -> int:
    """Write ``{"line", "id", "error"}`` lines for rejected records; return how many.

    Strict JSON (no NaN, ASCII with ``\\u`` escapes): :func:`parse_line` leaves in a
    record only ids that JSON can show.
    """
    n = 0
    for record in records:
        if record.error is not None:
            doc = {"line": record.line, "id": record.id, "error": record.error}
            out.write(json.dumps(doc, allow_nan=False))
            out.write("\n")
            n += 1
    return n


@contextmanager
def publishing(
    target: str | os.PathLike[str], replace: bool, kind: str = "building"
) -> Iterator[Path]:
    """Yield a staging directory; on success move its ``store`` to ``target`` atomically.

    The caller builds the finished store in ``staging / "store"`` (and may use the rest of
    the staging directory for scratch).  On any exception the staging directory is removed
    and the target is untouched.  A process killed meanwhile leaves it behind, owned by
    no live process: the next load of ``target`` removes it (:mod:`storage.staging`).
    ``kind`` names the staging directory (a key of :data:`storage.staging.KINDS`).
    """
    target = Path(target).absolute()
    if target.exists() and not replace:
        raise BexdbError(f"{target} already exists", "pass --replace to replace it")
    target.parent.mkdir(parents=True, exist_ok=True)
    with staging(target, kind) as path:  # and stale ones of killed runs go first
        yield path
        old = None
        try:
            with retiring(target, "replaced by a load"):
                old = swap_in(path / "store", target, keep_old=True)
        finally:  # removed once its writers are turned away (the block above ended)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)


class TooManyRejects(BexdbError):
    """A load rejected more records than allowed and published nothing (exit 1, SPEC
    section 11: not 3, which says that a store was published with rejects)."""

    def __init__(self, rejected: int, limit: int) -> None:
        super().__init__(
            f"{rejected} records rejected, more than --max-rejects {limit}; nothing published"
        )
        self.rejected = rejected


def check_rejects(rejected: int, max_rejects: int | None) -> None:
    if max_rejects is not None and rejected > max_rejects:
        raise TooManyRejects(rejected, max_rejects)
