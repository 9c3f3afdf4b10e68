"""A batch's texts (:class:`betree.disk.batchtexts.Texts`): read back exactly and in order,
whatever spilled, with no more than the limit held (plus the text that reached it)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from betree.disk.batchtexts import Texts

ODD = ["", "a", "é", "Ünï café", "\ud800", "x\udfffy", "😀" * 3, "\x00", "line\nbreak"]


@pytest.mark.parametrize("limit", [None, 1, 7, 64, 1 << 20])
def test_texts_come_back_in_order(tmp_path: Path, limit: int | None) -> None:
    rng = random.Random(limit)
    texts = [rng.choice(ODD) * rng.randrange(4) + str(i) for i in range(500)] + ODD
    scratch = tmp_path / "texts"
    held = Texts(limit, scratch)
    for text in texts:
        held.append(text)
    assert len(held) == len(texts)
    longest = max(len(t.encode("utf-8", "surrogatepass")) for t in texts)
    if limit is not None and limit < 1 << 20:
        assert held.spilled > 0 and scratch.exists()
        assert len(held.buffer) < limit  # (every time it reached the limit it was spilled)
    assert list(held) == texts
    if limit is not None:
        assert held.most < limit + longest
    assert not scratch.exists() and not held.buffer
    with pytest.raises(RuntimeError, match="read already"):
        list(held)


def test_no_scratch_never_spills(tmp_path: Path) -> None:
    held = Texts(1)
    for text in ODD:
        held.append(text)
    assert held.spilled == 0 and list(held) == ODD
