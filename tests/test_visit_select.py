"""A visit's first batch selected from its groups left in no order
(``knobs._VISIT_SELECT``: ``ccore.visit_heap(..., order=False)``, ``visit_select``,
``visit_order``) against the heap of the whole set (``visit_heap``, ``visit_pop``): the
same groups in the same order of (bound, seq), and the same retrieves from two memories
driven alike with the knob on and off."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import knobs_set
from .strategies import examples, run_machine
from .test_wordoverlap_bits import CountsOldAndNew

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")


def _groups(
    rels: list[float], seqs: list[int], pick: list[int], own_parts: bool
) -> tuple[np.ndarray[Any, Any], ...]:
    maxrel = np.array(rels, np.float64)
    minseq = np.array(seqs[: len(rels)], np.int64)
    idx = np.array([g % len(rels) for g in pick], np.int64)
    parts = (np.arange(len(idx)) % 3) * np.float64(0.4 / 7) if own_parts else None
    return maxrel, minseq, idx, parts  # type: ignore[return-value]


@settings(max_examples=examples(150), deadline=None)
@given(
    rels=st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.7, 1.0, 1e-300]), min_size=1, max_size=60),
    seqs=st.lists(st.integers(-5, 40), min_size=60, max_size=60),
    pick=st.lists(st.integers(0, 59), max_size=120),
    part=st.sampled_from([0.0, 0.1, 0.4 / 3, 0.4]),
    own_parts=st.booleans(),
    kth=st.one_of(
        st.none(), st.tuples(st.sampled_from([0.1, 0.35, 0.5, 0.6, 2.0]), st.integers(-5, 40))
    ),
    first=st.integers(0, 70),
    batches=st.lists(st.integers(0, 40), max_size=6),
)
def test_select_then_heap_reads_as_the_heap(
    rels: list[float],
    seqs: list[int],
    pick: list[int],
    part: float,
    own_parts: bool,
    kth: tuple[float, int] | None,
    first: int,
    batches: list[int],
) -> None:
    # The first batch by visit_select, the rest by visit_order and visit_pop, against
    # the heap of the whole set read in the same batches. Group numbers repeat (pick),
    # so groups of the same bound and seq come often: those may come in either order,
    # (bound, seq) may not.
    maxrel, minseq, idx, parts = _groups(rels, seqs, pick, own_parts)
    old_heap = np.full(4 * len(idx) + 3, -1, np.int64)
    new_heap = old_heap.copy()
    m_old = ccore.visit_heap(idx, maxrel, minseq, part, parts, kth, old_heap)
    m_new = ccore.visit_heap(idx, maxrel, minseq, part, parts, kth, new_heap, False)
    assert m_old == m_new
    old: list[tuple[Any, ...]] = []
    new: list[tuple[Any, ...]] = []
    picked, left = ccore.visit_pop(old_heap, m_old, first)
    old += picked
    picked, left_new = ccore.visit_select(new_heap, m_new, first)
    assert len(picked) == min(first, m_new)
    assert left_new == left == m_new - len(picked)
    new += picked
    m_old, m_new = left, left_new
    ccore.visit_order(new_heap, m_new)
    for k in [*batches, m_old]:
        picked, m_old = ccore.visit_pop(old_heap, m_old, k)
        old += picked
        picked, m_new = ccore.visit_pop(new_heap, m_new, k)
        new += picked
        assert m_old == m_new
    assert m_old == 0
    assert [(b, s) for _, b, s, _ in new] == [(b, s) for _, b, s, _ in old]
    assert sorted(new, key=repr) == sorted(old, key=repr)
    for t in new:
        assert [type(x) for x in t] == [int, float, int, float]


def test_select_refuses_bad_arguments() -> None:
    # ccore's wrappers refuse before C; the C functions check m and k themselves.
    from actormem._index import _cwordoverlap as c

    idx, rel, seq = np.array([0, 2, 1], np.int64), np.array([0.0, 1.0, 0.5]), np.arange(3)
    heap = np.zeros(12, np.int64)
    with pytest.raises(ValueError, match="order"):
        ccore.visit_heap(idx, rel, seq, 0.1, None, None, heap, 1)  # type: ignore[arg-type]
    assert ccore.visit_heap(idx, rel, seq, 0.1, None, None, heap, False) == 3
    for m, k in ((4, 1), (-1, 1), (1, -1), (1 << 70, 1), (1, 1 << 70)):
        with pytest.raises(ValueError, match="m"):
            ccore.visit_select(heap, m, k)
    for m, k in ((4, 1), (-1, 1), (1, -1)):
        with pytest.raises(ValueError, match="out of range"):
            c.visit_select(heap, m, k)
    for m in (4, -1, 1 << 70):
        with pytest.raises(ValueError, match="m"):
            ccore.visit_order(heap, m)
    for m in (4, -1):
        with pytest.raises(ValueError, match="out of range"):
            c.visit_order(heap, m)
    with pytest.raises(ValueError, match="heap"):
        ccore.visit_select(heap.astype(np.int32), 1, 1)
    with pytest.raises(ValueError, match="ints"):
        ccore.visit_select(heap, 1.0, 1)  # type: ignore[arg-type]
    assert ccore.visit_select(heap, 3, 1) == ([(1, 0.5 + 0.1 + 0.1, 1, 0.1)], 2)
    ccore.visit_order(heap, 2)
    assert [g for g, *_ in ccore.visit_pop(heap, 2, 2)[0]] == [2, 0]


class SelectOnAndOff(CountsOldAndNew):
    """The state machine of ``test_wordoverlap_bits``, two memories with every query
    knob at its default, one visiting with ``_VISIT_SELECT`` and one without, first
    batches of ``_VISIT_BATCH`` 2 (many groups left after the first batch, second
    batches read), counting in bit planes (``_BITS_MIN`` 0) or bytes with the flat
    ranking (``_BITS_MIN`` 1 << 15)."""

    KNOBS = {True: (True, 2), False: (False, 2)}
    NAMES = ("_VISIT_SELECT", "_VISIT_BATCH")


class SelectOnAndOffInBytes(SelectOnAndOff):
    KNOBS = {True: (True, 2, 1 << 15, 0), False: (False, 2, 1 << 15, 0)}
    NAMES = ("_VISIT_SELECT", "_VISIT_BATCH", "_BITS_MIN", "_BITS_MIN_WORDS")


@pytest.fixture
def visit_small() -> Iterator[None]:
    """Small visit parts and steps: sets in several visits, yields inside batches."""
    with knobs_set(wo_knobs, _VISIT=16, _STEP=3):
        yield


@pytest.mark.parametrize("machine", [SelectOnAndOff, SelectOnAndOffInBytes])
def test_select_on_and_off_agree(machine: type[CountsOldAndNew]) -> None:
    assert wo_knobs._VISIT_C
    run_machine(machine, 12, 20)


@pytest.mark.usefixtures("visit_small")
def test_select_on_and_off_agree_in_small_parts() -> None:
    run_machine(SelectOnAndOffInBytes, 8, 20)
