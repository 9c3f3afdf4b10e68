"""The DNF bound follows the clauses produced (issue 28, item 5).

``(x0 = 1 or x1 = 1) and ...`` with nine two-way ``or`` (512 clauses) was refused as "too
costly to put in disjunctive normal form" while ``[4, 4, 4, 4, 2]`` (also 512) was
accepted: every product of disjunctions giving at most ``MAX_CLAUSES`` clauses is accepted
with exactly those clauses, and one more clause is refused as more than 512 clauses.
"""

from __future__ import annotations

import math
import random

import pytest

from betree.lang.dnf import MAX_CLAUSES, clauses_hold, to_clauses
from betree.lang.parser import parse
from storage.errors import InvalidInput


def product(shape: list[int], inner: int = 1) -> tuple[str, list[list[list[str]]]]:
    """``shape[i]``-way disjunctions joined by ``and``; each disjunct after the first is
    a conjunction of ``inner`` atoms.  Also the groups (disjuncts as attribute lists)."""
    parts, groups, n = [], [], 0
    for k in shape:
        group = [[f"x{n}"]] + [[f"x{n + i}_{j}" for j in range(inner)] for i in range(1, k)]
        n += k
        groups.append(group)
        parts.append("(" + " or ".join(" and ".join(f"{a} = 1" for a in d) for d in group) + ")")
    return " and ".join(parts), groups


SHAPES = [
    [2] * 9,
    [2] * 7 + [3],
    [4, 4, 4, 4, 2],
    [8, 8, 8],
    [2, 2, 2, 64],
    [3] * 5,
    [512],
]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("inner", [1, 2, 3])
def test_products_up_to_the_bound_are_accepted(shape: list[int], inner: int) -> None:
    expr, groups = product(shape, inner)
    clauses = to_clauses(parse(expr))
    assert len(clauses) == math.prod(shape)
    rng = random.Random(len(expr))
    atoms = sorted({a for g in groups for d in g for a in d})
    for _ in range(200):  # against the expression evaluated by hand
        event = {a: rng.choice([0, 1, 1]) for a in atoms if rng.random() < 0.9}
        want = all(any(all(event.get(a) == 1 for a in d) for d in g) for g in groups)
        assert clauses_hold(clauses, event) == want


@pytest.mark.parametrize(
    "shape", [[2] * 10, [2] * 8 + [3], [4, 4, 4, 4, 3], [513]], ids=lambda s: "x".join(map(str, s))
)
@pytest.mark.parametrize("inner", [1, 2])
def test_one_clause_more_is_refused_as_too_many_clauses(shape: list[int], inner: int) -> None:
    assert math.prod(shape) > MAX_CLAUSES
    with pytest.raises(InvalidInput, match=f"more than {MAX_CLAUSES} clauses"):
        to_clauses(parse(product(shape, inner)[0]))
