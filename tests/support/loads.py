"""Stores bulk-built by the python engine (``bexdb load --engine python``'s code), for the
tests of what a bulk build leaves (views, slots, numberings) against the brute force."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loaders import python_load
from loaders.records import parse_lines


def python_loaded(
    path: Path, subs: Mapping[Any, str], schema_doc: dict[str, Any], max_cap: int = 8
) -> Path:
    """``subs`` (id to expression) loaded into a new store at ``path``, l-nodes of
    ``max_cap`` clauses (small: a tree of some depth from a few hundred subscriptions)."""
    lines = [json.dumps({"id": i, "expr": e}) for i, e in subs.items()]
    python_load.load(path, parse_lines(lines), schema_doc, settings={"max_cap": max_cap})
    return path
