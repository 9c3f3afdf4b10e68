"""The pure compiler (betree/compiler.py): no store, the same clauses as the index."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from betree import Index
from betree.compiler import Compiler
from storage.errors import InvalidInput
from tests.support.workload import SCHEMA, expression


def test_the_compiler_gives_the_index_clauses(tmp_path: Path) -> None:
    rng = random.Random(11)
    texts = [expression(rng) for _ in range(300)]
    pure = Compiler.of(SCHEMA, None)
    with Index.open(tmp_path / "s", schema=SCHEMA) as idx:
        for k, text in enumerate(texts):
            try:
                want = idx.engine.compiler().compile(k, text)
            except InvalidInput as exc:
                with pytest.raises(InvalidInput) as got:
                    pure.compile(k, text)
                assert (got.value.message, got.value.column) == (exc.message, exc.column)
                continue
            assert pure.compile(k, text) == want, text
    assert not list(Path(tmp_path).glob("bexdb-compile-*"))


def test_the_clause_limit_and_bad_records_are_errors() -> None:
    tight = Compiler.of(SCHEMA, {"max_clauses": 2})
    wide = "(i = 1 or j = 2) and (f > 0 or s = 'x')"  # four clauses
    assert len(Compiler.of(SCHEMA, None).compile("s", wide)) == 4
    with pytest.raises(InvalidInput, match="subscription 's'"):
        tight.compile("s", wide)
    with pytest.raises(InvalidInput, match="must be a string"):
        tight.compile("s", 3)
    with pytest.raises(InvalidInput):
        tight.compile(2**64, "i is null")  # an id outside int64
