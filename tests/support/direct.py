"""One attribute's direct atoms that hold on an event, as the matchers set them
(:func:`betree.matching.direct.mark`: the defaults less the failures, and the other hits), and
on a batch of events at once (:func:`betree.matching.direct.found_batch`; and
:meth:`betree.matching.direct.DirectAtoms.found_words`, list postings as rows over words),
for tests to compare with every atom's own test; and random list atoms to compare them on."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from betree.lang.atoms import Atom, make_test
from betree.lang.schema import Schema
from betree.matching import directmany, geomany
from betree.matching.direct import DirectAtoms, found_batch, mark
from betree.packed import flatbatch
from tests.support.brute import brute
from tools.bench import gen_rich

#: The list tests: ``has``/``lacks`` take one value, the others a tuple.
LIST_TESTS = ("has", "lacks", "one_of", "none_of", "all_of", "not_all_of")


def list_atoms(
    rng: random.Random, attr: str, pool: Sequence[object], n: int, most: int
) -> list[tuple[int, Atom]]:
    """Atoms ``0 .. n-1`` on the list attribute ``attr``: a random list test over 1 to
    ``most`` distinct values of ``pool`` (those ``make_test`` folds to a constant left out)."""
    atoms: list[tuple[int, Atom]] = []
    for aid in range(n):
        test = rng.choice(LIST_TESTS)
        values = tuple(rng.sample(pool, rng.randint(1, most)))
        atom = make_test(attr, test, values[0] if test in ("has", "lacks") else values)
        if atom is not None:
            atoms.append((aid, atom))
    return atoms


def held(group: DirectAtoms, attr: str, event: Mapping[str, object], size: int) -> list[int]:
    """The ids, ascending, of ``group``'s atoms on ``attr`` (ids under ``size``) that hold
    on ``event``."""
    sat = np.zeros(size, dtype=bool)
    mark(sat, {attr: group}, event)
    return np.flatnonzero(sat).tolist()  # type: ignore[no-any-return]


def held_many(
    group: DirectAtoms, attr: str, events: Sequence[Mapping[str, object]], size: int
) -> list[list[int]]:
    """:func:`held` of each event, from one batch of them all (as the batch matchers set
    the truths: the defaults and ``undefined`` atoms by the events defining the attribute,
    then the hits, then the failures cleared)."""
    sat = np.zeros((len(events), size), dtype=bool)
    [(_, defining)], (on, on_at, off, off_at) = found_batch({attr: group}, events)
    others = np.setdiff1d(np.arange(len(events)), defining)
    sat[np.ix_(defining, group.default.ids)] = True
    sat[np.ix_(others, np.array(group.undefined, dtype=np.int64))] = True
    sat[on_at, on] = True
    sat[off_at, off] = False
    return [np.flatnonzero(row).tolist() for row in sat]


@contextlib.contextmanager
def forced_rows(on: bool) -> Iterator[None]:
    """The list, segment and geo indexes answering by rows over words always (``on``:
    their thresholds 0) or never (infinite) within the block."""
    names = [
        (directmany, n) for n in ("PAIRS_A_CELL", "SEGMENT_PAIRS_A_CELL", "SEGMENT_PAIRS_LEAST")
    ]
    names.append((geomany, "GEO_PAIRS_LEAST"))
    saved = [getattr(module, name) for module, name in names]
    for module, name in names:
        setattr(module, name, 0.0 if on else float("inf"))
    try:
        yield
    finally:
        for (module, name), value in zip(names, saved, strict=True):
            setattr(module, name, value)


def held_words(
    group: DirectAtoms, attr: str, events: Sequence[Mapping[str, object]], size: int
) -> list[list[int]]:
    """:func:`held_many` through :meth:`DirectAtoms.found_words`, the events at slots
    ``0 ..`` of words of 64, every list and segment index answering by rows over words
    where it can (the thresholds :data:`betree.matching.directmany.PAIRS_A_CELL` and
    :data:`~betree.matching.directmany.SEGMENT_PAIRS_A_CELL` lowered to 0 for the call,
    :func:`forced_rows`): the
    defaults and ``undefined`` atoms, the held rows ORed, the failing rows cleared, then
    the (atom, event) hits set and failures cleared."""
    sat = np.zeros((len(events), size), dtype=bool)
    defining = np.array([k for k, ev in enumerate(events) if attr in ev], dtype=np.int64)
    others = np.setdiff1d(np.arange(len(events)), defining)
    words = np.unique(defining >> 6)
    rows = np.zeros((len(defining), len(words)), dtype=np.uint64)
    rows[np.arange(len(defining)), np.searchsorted(words, defining >> 6)] = np.left_shift(
        np.uint64(1), (defining & 63).astype(np.uint64)
    )
    with forced_rows(True):
        (on, on_at, off, off_at), planes = group.found_words(
            [events[k][attr] for k in defining], [events[k] for k in defining.tolist()], rows
        )
    sat[np.ix_(defining, group.default.ids)] = True
    sat[np.ix_(others, np.array(group.undefined, dtype=np.int64))] = True
    for hit in (True, False):
        for ids, bits, on_ in planes:
            if on_ != hit:
                continue
            octets = np.ascontiguousarray(bits, dtype="<u8").view(np.uint8)
            octets = octets.reshape(len(words), len(ids), 8)
            each = np.unpackbits(octets, axis=2, bitorder="little").astype(bool)
            slot = (words[:, None] * 64 + np.arange(64)[None, :]).ravel()  # (word, bit)
            each = each.transpose(0, 2, 1).reshape(-1, len(ids))
            live = slot < len(events)
            slot, each = slot[live], each[live]
            assert not each[~np.isin(slot, defining)].any()  # (only events defining attr)
            cell = np.ix_(slot, ids)
            sat[cell] = sat[cell] | each if hit else sat[cell] & ~each
    sat[defining[on_at], on] = True
    sat[defining[off_at], off] = False
    return [np.flatnonzero(row).tolist() for row in sat]


def agree(atoms: list[tuple[int, Atom]], events: Sequence[Mapping[str, Any]], attr: str) -> int:
    """Assert the group's hits are exactly the atoms that hold, event by event
    (:func:`held`) and in batches (:func:`held_many`: all the events, and a random third
    of them); returns the hits seen."""
    group = DirectAtoms(atoms)
    size = max((aid for aid, _ in atoms), default=0) + 1
    seen = 0
    wants = []
    for ev in events:
        got = held(group, attr, ev, size)  # one event's truths, defaults and their failures
        want = sorted(aid for aid, atom in atoms if atom.holds(ev))
        assert got == want, (ev, [a for a in atoms if (a[0] in got) != (a[0] in want)][:3])
        wants.append(want)
        seen += len(want)
    rng = random.Random(len(events))
    third = sorted(rng.sample(range(len(events)), len(events) // 3))
    for part in (list(range(len(events))), third):
        batch = [events[k] for k in part]
        for k, got in zip(part, held_many(group, attr, batch, size), strict=True):
            assert got == wants[k], (events[k], set(got) ^ set(wants[k]))
        for k, got in zip(part, held_words(group, attr, batch, size), strict=True):
            assert got == wants[k], (events[k], set(got) ^ set(wants[k]))
    return seen


def batch_cases(rng: random.Random, events: list[Any]) -> list[list[Any]]:
    """Batches of ``events`` for a batch path's tests: the events; 150 of them twice,
    shuffled; each attribute left out of about half; one event 140 times; one among empty
    events (every ``undefined`` atom holds)."""
    twice = events[:150] * 2
    rng.shuffle(twice)
    halves = [{k: v for k, v in ev.items() if rng.random() < 0.5} for ev in events]
    return [events, twice, halves, [events[5]] * 140, [events[9]] + [{}] * flatbatch.LEAST]


def both_ways(
    force: Callable[[bool], None],
    match_many: Any,
    subs: dict[Any, str],
    schema: Schema,
    batches: list[Any],
    ordered: bool = True,
) -> int:
    """Each batch matched with a path forced off then on (``force(False)``, ``force(True)``):
    the same ids (in the same order where ``ordered``: a sharded store's order may change
    as its views are built), and the brute force's; the matches."""
    total = 0
    for batch in batches:
        force(False)
        off = match_many(batch)
        force(True)
        on = match_many(batch)
        for ev, a, b in zip(batch, off, on, strict=True):
            assert list(a) == list(b) if ordered else sorted(a) == sorted(b), ev
            want = brute(subs, schema, ev)
            assert len(b) == len(set(b)) and set(b) == want, ev
            total += len(want)
    return total


def churn(idx: Any, subs: dict[Any, str], seed: int) -> None:
    """Every fourth subscription of ``idx`` (and ``subs``) deleted, then 40 of the others
    again under new ids and 25 new rich ones added (the view's delta), and ``idx`` checked."""
    items = list(subs.items())
    for ident, _ in items[::4]:
        assert idx.unsubscribe(ident)
        del subs[ident]
    added = {f"a{k}": e for k, e in items[2::4][:40]}
    added.update({f"n{k}": e for k, e in gen_rich.make(25, 1, check=False, seed=seed)[1]})
    idx.subscribe_many(added.items())
    subs.update(added)
    idx.check()
