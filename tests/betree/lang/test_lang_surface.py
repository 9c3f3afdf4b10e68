"""The language package's boundaries: it loads nothing of the index, and the inference
pieces a distributed loader uses (``type_evidence``, ``settled_type``) give what
``Schema.infer`` gives."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from betree.lang.expr import ExpressionError
from betree.lang.parser import parse
from betree.lang.schema import AttrSpec, InferenceError, Schema, settled_type, type_evidence

ROOT = Path(__file__).resolve().parents[3]


def test_language_loads_nothing_of_the_index() -> None:
    """Importing every module of betree.lang loads no other module of betree (the index,
    the BE-Tree, the grid) and of the PB+tree only its operator table."""
    code = (
        "import sys\n"
        "import betree.lang.conjuncts, betree.lang.dnf, betree.lang.schema\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('betree', 'pbtree') and "
        "m not in ('betree', 'betree.lang', 'pbtree', 'pbtree.operators') "
        "and not m.startswith('betree.lang.'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == ""


def _pieces_schema(records: list[tuple[int, str]]) -> Schema | None:
    """Schema.infer's result rebuilt from the pieces, as the Spark loader does; None when an
    attribute settles no type."""
    kinds: dict[str, set[str]] = {}
    for _, text in records:
        try:
            node = parse(text)
        except ExpressionError:  # skipped by Schema.infer too
            continue
        for attr, kind in type_evidence(node):
            kinds.setdefault(attr, set()).add(kind)
    specs = []
    for attr in sorted(kinds):
        typ = settled_type(kinds[attr])
        if typ is None:
            return None
        specs.append(AttrSpec(attr, typ))
    return Schema(specs)


CASES = [
    [(1, "a = 1 and b = 2.5"), (2, "a = 3.0 or c"), (3, "'x' in tags and s = 'y'")],
    [(1, "a = 1"), (2, "a = 'x'")],  # conflict
    [(1, "a is null")],  # nothing reveals a's type
    [(1, "t one of (1, 2) and not u"), (2, "u"), (3, "t is empty"), (4, "a = (")],
    [(1, "x between 1 and 2.5 and y in ('p', 'q')"), (2, "1.5 in z")],  # float list element
    [(1, "starts_with(s, 'a') and n in ()"), (2, "n > 3")],
]


@pytest.mark.parametrize("records", CASES)
def test_settled_type_agrees_with_infer(records: list[tuple[int, str]]) -> None:
    try:
        expected: Schema | None = Schema.infer(records)
    except InferenceError:
        expected = None
    assert _pieces_schema(records) == expected
