"""Subscription records checked against a store's schema, writing nothing.

``bexdb validate STORE INPUT``, ``POST /validate`` and ``POST /subscriptions`` (which writes
the records found valid) give one result per record, in input order::

    {"line": 1, "id": "s1", "ok": true}
    {"line": 2, "id": "s2", "error": "subscription 's2': ...", "column": 7}

``column`` is the 1-based column of the fault in the expression, or, for a line that is
not JSON, in the line; null where neither applies (a missing ``expr``, a duplicate id).
``id`` is there whenever the line has one JSON can show.  A record is valid when the line
is a record (:func:`loaders.records.parse_line`), its id appears once in the input (as
``bexdb load`` rejects every occurrence of a repeated id), and its expression compiles
against the store's schema (:meth:`betree.engine.Engine.compiler`: parsing, types, the
clause bound), which is everything a write checks before it writes.

Cost: one parse and one compile per record (~35 µs for 8 predicates); the records are held
in memory, for the duplicate check.
"""

from __future__ import annotations

import io
import json
from typing import Any

from betree.formats.jsonl import input_lines, loads_line
from betree.stores.sharded import AnyIndex
from loaders.records import Record, mark_duplicates, parse_lines
from storage.errors import InvalidInput

Result = dict[str, Any]


def check(store: AnyIndex, lines: list[bytes]) -> tuple[list[Result], list[Record]]:
    """The result of each record of ``lines``, and the valid records, in input order."""
    records = list(parse_lines(lines))
    mark_duplicates(records)
    # the schema as committed now (betree.disk.schemaedit changes it)
    store.indexes[0].engine.refresh_schema()
    compile_ = store.indexes[0].engine.compiler().compile  # every shard has the store's one schema
    results: list[Result] = []
    valid: list[Record] = []
    for record in records:
        result: Result = {"line": record.line}
        if record.id is not None:
            result["id"] = record.id
        column = None
        if record.error is None:
            try:
                compile_(record.id, record.expr)
            except InvalidInput as exc:
                record.error, column = exc.message, exc.column
        elif record.error.startswith("malformed JSON"):
            column = _json_column(lines, record.line)
        if record.error is None:
            result["ok"] = True
            valid.append(record)
        else:
            result.update(error=record.error, column=column)
        results.append(result)
    return results, valid


def body_lines(body: bytes) -> list[bytes]:
    """A request body's records as lines: one JSON object (which may span lines), else
    JSON Lines."""
    try:
        whole = loads_line(body)
    except InvalidInput:
        whole = None
    if isinstance(whole, dict):
        return [json.dumps(whole).encode()]
    return list(input_lines(io.BytesIO(body)))


def _json_column(lines: list[bytes], line: int) -> int | None:
    """Where line ``line`` stops being JSON (only asked for lines that are not)."""
    try:
        json.loads(lines[line - 1])
    except json.JSONDecodeError as exc:
        return exc.colno
    except (ValueError, RecursionError):  # not UTF-8, nested too deeply, ...: no column
        return None
    return None
