"""The compiler's memo of conjunctions (:class:`betree.compiler.Compiler`) is asked only
while it answers: on rich rules (``bexdb gen --profile rich``, which it rarely answers)
it is left after a window, on plain conjunctions of repeated pieces it is kept; either
way every expression compiles to what parsing and normalizing it gives, and errors are
the same.  No timing asserted."""

from __future__ import annotations

import random

import pytest

from betree import compiler as compiler_module
from betree.compiler import Compiler
from betree.lang.atoms import Clause
from betree.lang.dnf import to_clauses
from betree.lang.parser import compile_expr
from betree.lang.schema import Schema
from storage.errors import InvalidInput
from tools.bench import gen_rich


def _reference(schema: Schema, expr: str) -> list[Clause]:
    defined = tuple(n for n, spec in schema.attributes.items() if not spec.allow_undefined)
    return to_clauses(compile_expr(expr, schema), always_defined=defined)


def test_left_on_rich_rules_same_clauses() -> None:
    n = compiler_module.MEMO_WINDOW * 2 + 100
    doc, subs, _, _ = gen_rich.make(n, 1, check=False, seed=26, target_rate=0.01)
    schema = Schema.from_json(doc)
    comp = Compiler(schema)
    asked = 0
    memo = comp._conjuncts

    class Counted:
        def clauses(self, expr: str) -> object:
            nonlocal asked
            asked += 1
            return memo.clauses(expr)

    comp._conjuncts = Counted()  # type: ignore[assignment]
    for ident, expr in subs:
        assert comp.compile(ident, expr) == _reference(schema, expr), expr
    assert comp._memo_left
    # the first window asked every expression, the rest one in MEMO_SAMPLE
    window, sample = compiler_module.MEMO_WINDOW, compiler_module.MEMO_SAMPLE
    assert asked == window + (n - window) // sample


def test_kept_on_repeated_conjunctions_same_clauses() -> None:
    doc = {"attributes": {f"a{i}": {"type": "string"} for i in range(6)}}
    doc["attributes"]["n"] = {"type": "int"}
    schema = Schema.from_json(doc)
    comp = Compiler(schema)
    rng = random.Random(5)
    pieces = [f'a{i} = "v{j}"' for i in range(6) for j in range(4)] + ["n < 3", "n in (1, 2)"]
    for k in range(compiler_module.MEMO_WINDOW * 2 + 10):
        expr = " and ".join(rng.sample(pieces, 3))
        assert comp.compile(k, expr) == _reference(schema, expr), expr
    assert not comp._memo_left
    with pytest.raises(InvalidInput, match="subscription 'bad'"):
        comp.compile("bad", 'a0 = "x" and zz > 1')
