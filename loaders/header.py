"""The schema header of an export: what lets ``bexdb load`` restore a store faithfully.

``bexdb export`` writes, as its first line, ``{"schema": DOC}`` (the store's schema
document, as ``bexdb schema STORE`` prints it), then one ``{"id", "expr"}`` record a line.
A line that is an object with ``"schema"`` and neither ``"id"`` nor ``"expr"`` is a
header, never a record: the record readers skip it wherever it is (as a blank line, its
line still counted), and ``bexdb load`` without ``--schema`` uses the header of its JSON
Lines inputs (the first non-blank line of each local file) instead of inferring one.
Without the header, ``export`` -> ``load --replace`` re-inferred the schema: ``ip``
subscriptions were rejected, ``fold_case`` dropped, answers changed.

Why a header line rather than a file beside the export (``OUT.schema.json``): an export
to stdout, a copy or a pipe carries it too, and one file is one backup.

Cost: :func:`input_schema` reads the first line of each input file (Parquet and CSV
files give no header; their first line is not a JSON object).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Sequence
from typing import Any

from betree.formats.jsonl import BOM, loads_line
from storage.errors import InvalidInput

SCHEMA_KEY = "schema"
_FIRST_LINE = 1 << 24  # a schema header is far shorter; a longer first line is no header


def schema_header(doc: dict[str, Any]) -> str:
    """The header line (without its newline) carrying the schema document ``doc``."""
    return json.dumps({SCHEMA_KEY: doc}, ensure_ascii=False)


def is_header(doc: Any) -> bool:
    """Whether a parsed line is a schema header (not a record)."""
    return type(doc) is dict and SCHEMA_KEY in doc and "id" not in doc and "expr" not in doc


def input_schema(inputs: Sequence[str]) -> dict[str, Any] | None:
    """The schema document the inputs' headers carry, or None when none has one.

    Raises :class:`InvalidInput` if two inputs carry different schemas (pass ``--schema``
    to choose).  Remote inputs (``scheme://``) are not read here.
    """
    found: dict[str, Any] | None = None
    where = ""
    for path in _local_files(inputs):
        doc = _header(path)
        if doc is None:
            continue
        if found is not None and doc != found:
            raise InvalidInput(
                f"{path} carries another schema than {where}",
                hint="pass --schema FILE to choose the schema",
            )
        found, where = doc, path
    return found


def _local_files(inputs: Sequence[str]) -> list[str]:
    files: list[str] = []
    for path in inputs:
        if "://" in path:
            continue
        for p in sorted(glob.glob(path)) if glob.has_magic(path) else [path]:
            if os.path.isdir(p):
                files.extend(
                    os.path.join(d, f)
                    for d, _, names in sorted(os.walk(p))
                    for f in sorted(names)
                    if not f.startswith((".", "_"))
                )
            elif os.path.isfile(p):
                files.append(p)
    return files


def _header(path: str) -> dict[str, Any] | None:
    """The schema document of ``path``'s header (its first non-blank line), or None."""
    try:
        with open(path, "rb") as fh:
            line = fh.readline(_FIRST_LINE).removeprefix(BOM)
            while line and line.isspace():
                line = fh.readline(_FIRST_LINE)
    except OSError:
        return None  # the loader reports an unreadable input
    try:
        doc = loads_line(line)
    except InvalidInput:
        return None
    if not is_header(doc):
        return None
    schema = doc[SCHEMA_KEY]
    if type(schema) is not dict:
        raise InvalidInput(f'{path}: its header\'s "schema" is not a schema document')
    return schema
