"""Scratch arrays of the scoring indexes: paged in by steps, borrowed and given back."""

from __future__ import annotations

import numpy as np
import pytest

from actormem._index.scoring import ScratchPool, drain, zeroed_steps


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float64, np.bool_])
@pytest.mark.parametrize("size", [0, 1, 1000, 300_000, 1 << 22])
def test_zeroed_steps_is_all_zeros_and_yields_per_256_kib(dtype: type, size: int) -> None:
    steps = zeroed_steps(size, dtype)
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            arr = stop.value
            break
        yields += 1
    assert arr.dtype == np.dtype(dtype)
    assert arr.shape == (size,)
    assert not arr.any()
    assert arr.flags.writeable
    nbytes = size * np.dtype(dtype).itemsize
    assert yields == -(-nbytes // (256 << 10))  # one per 256 KiB started
    arr[:] = 1  # writable memory of its own
    assert arr.sum() == size


def test_pool_reuses_a_given_array_and_zeroes_its_prefix() -> None:
    pool = ScratchPool(most=2)
    first = drain(pool.take_steps(np.uint16, 100, 1000))
    assert len(first) == 1000
    assert not first.any()
    first[:] = 7
    pool.give(first, 1000)
    again = drain(pool.take_steps(np.uint16, 100, 1000))
    assert again is first
    assert not again[:100].any()  # the prefix a caller reads is zero again
    other = drain(pool.take_steps(np.uint16, 100, 1000))  # pool empty now: a new one
    assert other is not first
    assert not other.any()


def test_pool_drops_other_capacities_short_arrays_and_overflow() -> None:
    pool = ScratchPool(most=1)
    a = drain(pool.take_steps(np.float64, 10, 64))
    b = drain(pool.take_steps(np.float64, 10, 64))
    pool.give(a, 128)  # capacity changed since: dropped
    assert drain(pool.take_steps(np.float64, 10, 64)) is not a
    pool.give(a, 64)
    pool.give(b, 64)  # over `most`: dropped
    assert drain(pool.take_steps(np.float64, 10, 64)) is a
    pool.give(a, 64)
    bigger = drain(pool.take_steps(np.float64, 100, 128))  # the spare is too short
    assert bigger is not a
    assert len(bigger) == 128
    pool.give(b, 64)
    pool.clear()
    assert drain(pool.take_steps(np.float64, 10, 64)) is not b


def test_pool_keeps_dtypes_apart() -> None:
    pool = ScratchPool()
    counts = drain(pool.take_steps(np.uint8, 10, 64))
    pool.give(counts, 64)
    scores = drain(pool.take_steps(np.float64, 10, 64))
    assert scores is not counts
    assert scores.dtype == np.float64
    assert drain(pool.take_steps(np.uint8, 10, 64)) is counts


def test_pool_keeps_at_most_its_byte_budget() -> None:
    pool = ScratchPool(most=10, most_bytes=3 * 800)  # three float64 arrays of 100
    arrays = [drain(pool.take_steps(np.float64, 100, 100)) for _ in range(5)]
    for arr in arrays:
        pool.give(arr, 100)
    assert pool.nbytes == 3 * 800
    kept = [drain(pool.take_steps(np.float64, 100, 100)) for _ in range(3)]
    assert {id(a) for a in kept} <= {id(a) for a in arrays[:3]}
    assert pool.nbytes == 0
    fresh = drain(pool.take_steps(np.float64, 100, 100))  # the pool is empty again
    assert all(fresh is not a for a in arrays)
    pool.give(kept[0], 100)
    pool.clear()
    assert pool.nbytes == 0


def test_word_overlap_reads_no_pooled_garbage_past_its_groups(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pooled count array is zeroed only to the borrower's group count (rounded up to
    a step); a retrieve that started with fewer groups than the array's last user must
    not read that user's counts past its own. With a 1-byte zeroing step, reader A
    (100 groups) took B's array (120 groups) dirty up to 120."""
    from datetime import UTC, datetime, timedelta

    from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
    from actormem._engine.state import MemoryState
    from actormem._index import scoring as _scoring

    monkeypatch.setattr(_scoring, "_ZERO_STEP_BYTES", 1)
    base = datetime(2026, 1, 1, tzinfo=UTC)

    def entry(text: str, i: int, tags: tuple[str, ...] = ()) -> MemoryEntry:
        return MemoryEntry(category=MemoryCategory.FACT, memory=text, tags=list(tags),
                           created_at=base + timedelta(seconds=i))

    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    for i in range(100):
        state.store(entry(f"x{i}", i, ("cat",)))
    state.publish()
    a = state.index.top_k_steps(state.view(), "cat", 3, None)
    next(a)  # A has its 100 groups and is in the tag lookup
    for i in range(100, 120):
        state.store(entry(f"cat {i}", i))
    state.publish()
    b = drain(state.index.top_k_steps(state.view(), "cat", 3, None))
    assert [(s, r.entry.memory) for s, r in b] == [(1.0, f"cat {i}") for i in (100, 101, 102)]
    got = drain(a)  # only the tag matches existed at A's version: 0.5 + 0.3 + 0.1
    assert [(s, r.entry.memory) for s, r in got] == [(0.9, f"x{i}") for i in range(3)]


def test_bm25_gives_back_no_array_of_a_capacity_it_has_grown_past() -> None:
    """A retrieve that started before the index's arrays grew gives its scratch back at
    the capacity of the end, so the old-size arrays are dropped, not kept."""
    from datetime import UTC, datetime, timedelta

    from actormem import BM25Scorer, MemoryCategory, MemoryEntry
    from actormem._engine.state import MemoryState

    base = datetime(2026, 1, 1, tzinfo=UTC)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=BM25Scorer())

    def store(i: int) -> None:
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=f"deploy step {i}",
                                created_at=base + timedelta(seconds=i)))

    for i in range(4050):
        store(i)
    state.publish()
    index = state.index
    before = len(index._lengths)
    steps = index.top_k_steps(state.view(), "deploy step", 5, None)
    next(steps)
    for i in range(4050, 4250):  # past the first capacity: the arrays are replaced
        store(i)
    state.publish()
    assert len(index._lengths) > before
    hits = drain(steps)
    assert len(hits) == 5
    kept = [len(a) for spares in index._scratch._spares.values() for a in spares]
    assert before not in kept
