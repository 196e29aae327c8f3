"""Opening fast: a state loaded in bulk equals one rebuilt by replaying its rows.

``MemoryState.load`` takes the bulk path (``_load_bulk``: the sorted orders sorted once)
when the rows only insert; otherwise it restores them one by one. Both must give the same
state: same records, same orders, same retrieve results, and ``_check()`` holds. The
collector pause around loading (``_util.gc_paused``) must restore the collector's state
whatever happens.
"""

from __future__ import annotations

import gc
import random
import threading
import uuid
from datetime import UTC, datetime, timedelta

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.snapshot import run_retrieve
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.scoring import Scorer
from actormem._util import gc_paused

from .strategies import examples

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = "apple garden rain tool result error search file open close red blue".split()
QUERIES = ["apple garden", "tool error result", "blue rain", "open the file", "nothing"]


def _rows(seed: int, n: int, keys: bool = True) -> list[tuple[int, MemoryEntry]]:
    rng = random.Random(seed)
    rows: list[tuple[int, MemoryEntry]] = []
    seq = 0
    for i in range(n):
        seq += rng.choice((1, 1, 2, 7))  # gaps, as deletes leave in a file
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.2 and rows:
            text = rows[rng.randrange(len(rows))][1].memory.upper()  # a duplicate text
        created = T0 + timedelta(seconds=rng.randint(0, 10**6))
        rows.append(
            (
                seq,
                MemoryEntry(
                    id=uuid.UUID(int=rng.getrandbits(64) << 8 | i),
                    category=rng.choice(list(MemoryCategory)),
                    memory=text,
                    namespace=rng.choice([(), ("a",), ("a", "b"), ("c",)]),
                    tags=rng.choice([(), ("x",), ("x", "y")]),
                    relevance=rng.choice([0.0, 0.25, 0.5, 1.0]),
                    validated=rng.random() < 0.3,
                    access_count=rng.randint(0, 3),
                    created_at=created,
                    key=f"k{i}" if keys and rng.random() < 0.3 else None,
                    expires_at=created + timedelta(days=9) if rng.random() < 0.2 else None,
                ),
            )
        )
    return rows


def _state(scorer: Scorer, capacity: int | None) -> MemoryState:
    return MemoryState(capacity=capacity, half_life=DEFAULT_HALF_LIFE, scorer=scorer)


def _replayed(
    scorer: Scorer, capacity: int | None, rows: list[tuple[int, MemoryEntry]]
) -> MemoryState:
    state = _state(scorer, capacity)
    state.journal = []
    for seq, entry in rows:
        state.restore(entry, seq)
    state.take_journal()
    state.stores = state.upserts = 0
    state.publish()
    return state


def _assert_same(a: MemoryState, b: MemoryState) -> None:
    a._check()
    b._check()
    assert len(a) == len(b)
    assert a.version == b.version
    assert a._seq == b._seq
    va, vb = a.view(), b.view()
    ra, rb = va.records(), vb.records()
    assert [(r.seq, r.born, r.entry) for r in ra] == [(r.seq, r.born, r.entry) for r in rb]
    assert [r.seq for r in va.by_relevance()] == [r.seq for r in vb.by_relevance()]
    assert sorted(a._dups) == sorted(b._dups)
    assert a._dup_keys == b._dup_keys
    assert list(a._ns_sorted) == list(b._ns_sorted)
    assert [k[1].seq for k in a._expiry] == [k[1].seq for k in b._expiry]
    if a._evict is not None and b._evict is not None:
        for x, y in zip(a._evict, b._evict, strict=True):
            assert [k[1].seq for k in x] == [k[1].seq for k in y]
    for query in QUERIES:
        for limit in (1, 5, 50):
            hits_a = run_retrieve(a, va, query, limit, None)
            hits_b = run_retrieve(b, vb, query, limit, None)
            assert [(s, r.seq) for s, r in hits_a] == [(s, r.seq) for s, r in hits_b]


@pytest.mark.parametrize("make_scorer", [WordOverlapScorer, BM25Scorer])
@pytest.mark.parametrize("capacity", [None, 10_000])
@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 120))
def test_bulk_load_equals_replay(
    make_scorer: type[Scorer], capacity: int | None, seed: int, n: int
) -> None:
    rows = _rows(seed, n)
    loaded = _state(make_scorer(), capacity)
    assert loaded._bulk_loadable(rows)
    assert loaded.load(rows) == []
    _assert_same(loaded, _replayed(make_scorer(), capacity, rows))
    if capacity is None:
        return
    # Full after loading: later stores evict and upsert alike on both.
    cap = max(len(rows), 1)
    loaded = _state(make_scorer(), cap)
    loaded.load(rows)
    replayed = _replayed(make_scorer(), cap, rows)
    for _, entry in _rows(seed + 1, 30):
        a = loaded.store(entry, T0)
        b = replayed.store(entry, T0)
        assert (a.evicted and a.evicted.seq) == (b.evicted and b.evicted.seq)
    loaded.publish()
    replayed.publish()
    _assert_same(loaded, replayed)


def test_rows_that_do_not_only_insert_take_the_slow_path() -> None:
    rows = _rows(3, 40, keys=False)
    # Two rows under one (namespace, key): the second store is an upsert of the first.
    seq, first = rows[0]
    rows[0] = (seq, attrs.evolve(first, key="same"))
    clash = attrs.evolve(rows[-1][1], id=uuid.uuid4(), namespace=first.namespace, key="same")
    rows.append((rows[-1][0] + 1, clash))
    state = _state(WordOverlapScorer(), None)
    assert not state._bulk_loadable(rows)
    state.load(rows)
    _assert_same(state, _replayed(WordOverlapScorer(), None, rows))
    # More rows than the capacity: evictions while loading, as replay.
    rows = _rows(4, 50)
    small = _state(WordOverlapScorer(), 20)
    assert not small._bulk_loadable(rows)
    dropped = small.load(rows)
    assert len(dropped) == 30
    _assert_same(small, _replayed(WordOverlapScorer(), 20, rows))


def test_bulk_load_refuses_bad_rows_as_restore_does() -> None:
    rows = _rows(5, 10, keys=False)
    with pytest.raises(ValueError, match="not above"):
        _state(WordOverlapScorer(), None).load([rows[1], rows[0]])
    with pytest.raises(ValueError, match="stored already"):
        _state(WordOverlapScorer(), None).load([rows[0], (rows[1][0], rows[0][1])])


async def test_a_reopened_file_equals_the_memory_that_wrote_it(tmp_path: object) -> None:
    path = f"{tmp_path}/m.db"
    rows = _rows(7, 300)
    async with open_memory(path=path) as memory:
        await memory.store_many([entry for _, entry in rows])
        for _, entry in rows[::7]:
            await memory.delete(entry.id)  # gaps in the file's seqs
        written = memory._state
        before = {q: await memory.retrieve_scored(q, 20) for q in QUERIES}
    async with open_memory(path=path) as memory:
        state = memory._state
        state._check()
        view, old = state.view(), written.view()
        assert [view.entry(r) for r in view.records()] == [old.entry(r) for r in old.records()]
        for query, hits in before.items():
            again = await memory.retrieve_scored(query, 20)
            assert [(h.entry.id, h.score) for h in again] == [(h.entry.id, h.score) for h in hits]


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()

    def fails() -> None:
        with gc_paused():
            assert not gc.isenabled()
            raise RuntimeError

    with pytest.raises(RuntimeError):
        fails()
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()  # the outer block still holds it
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_gc_paused_in_two_threads_turns_it_back_on_after_the_last() -> None:
    inside = threading.Barrier(2)
    leave = threading.Event()

    def hold() -> None:
        with gc_paused():
            inside.wait()
            leave.wait()

    thread = threading.Thread(target=hold)
    thread.start()
    with gc_paused():
        inside.wait()
    assert not gc.isenabled()  # the other thread's block is still open
    leave.set()
    thread.join()
    assert gc.isenabled()
