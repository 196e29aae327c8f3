"""BM25's short path in slices (``knobs._SLICED_FAST``: ``MaxScoreSearch._fast_steps``,
``kernels.bm25_query_steps``) and the slice's end sent to a sliced computation
(``snapshot._SEND_SLICE_END``; ``bm25_daat``'s ``seconds``).

The kernel: lists of 0.1-30% of up to 12,000 groups, a table of records, a filter or
none, first seqs or none, the codes and dense arrays or not: ``bm25_query_steps`` driven
with any mix of sent values (None: a step a call; a time already past: one step a call;
a time far off: to the end in one call) gives ``bm25_query``'s heap, scores as bytes,
seqs and records. ``bm25_daat`` refuses a negative ``seconds``, and with a tiny one stops
after a step of its walk, not done, the next call going on to the same heap. Through the
index, a sliced query with the owner writing between its steps (stores, deletes, purges
that compact the lists), driven with sent values, gives the brute force's top-k at the
reader's version. Through ``Memory.retrieve`` the knobs on and off give the same
results, the short path in slices taken by default, each step after the first sent the
slice's end. stress/asan_kernels.sh may run this file.
"""

from __future__ import annotations

import random
import time
from collections.abc import Generator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer, open_memory
from actormem._engine import memory as memory_mod
from actormem._engine import snapshot
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._record import Record

from .bm25_cases import DAAT_FLAGS, by_query, daat_case, group_table, heap, walk_lists
from .strategies import examples
from .test_bm25 import brute_force
from .test_bm25_steps import WORDS, _entry, _live, _round, _text, _write
from .test_mainjob12_paths import TEXTS, _Clock, _state
from .test_mainjob12_paths import _entry as entry12

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

#: What a driver sends at a yield: None (next), a time past (one step), one far off.
_SENDS = ("none", "past", "far")


def _value(kind: str) -> float | None:
    if kind == "none":
        return None
    return time.perf_counter() + (-1.0 if kind == "past" else 60.0)


def _drive(steps: Generator[None, Any, Any], rng: random.Random, kinds: tuple[str, ...]) -> Any:
    """Run ``steps`` to its end, sending one of ``kinds`` (picked by ``rng``) at each
    yield after the first; its return value."""
    value = None
    while True:
        try:
            steps.send(value)
        except StopIteration as stop:
            return stop.value
        value = _value(rng.choice(kinds))


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 6),
    top_length=st.sampled_from([128, 40_000]),
    limit=st.sampled_from([1, 3, 10, 100, 200]),
    budget=st.sampled_from([1, 100, 16_384]),
    version=st.integers(1, 3),
    filtered=st.booleans(),
    ties=st.booleans(),
    coded=st.booleans(),
    kinds=st.sampled_from([("none",), ("past",), ("far",), _SENDS]),
)
@settings(max_examples=examples(60), deadline=None)
def test_query_steps_same_as_query(
    seed: int, nlen: int, nterms: int, top_length: int, limit: int, budget: int,
    version: int, filtered: bool, ties: bool, coded: bool, kinds: tuple[str, ...],
) -> None:  # fmt: skip
    """``bm25_query_steps`` with any values sent: ``bm25_query``'s heap."""
    case = daat_case(
        seed, nlen, nterms, top_length, codes=coded, dense=coded, ties=ties, filtered=filtered
    )
    want, _ = by_query(case, limit, budget, version, scratch=True)
    prefetch, more = kernels.daat_flags(
        False, True, True, True, False, True, *DAAT_FLAGS.values()
    )  # fmt: skip
    steps = kernels.bm25_query_steps(
        case.terms, case.lengths, case.parts, max(limit, 4096),
        (prefetch, more | kernels.CALL_SCRATCH), 0.8, case.codes,
        (case.table, version, case.accept, limit, True), lambda: case.first, [case.start],
        max(limit, 128), budget, time.perf_counter,
    )  # fmt: skip
    got = _drive(steps, random.Random(seed + 1), kinds)
    assert heap(got) == want


def test_daat_seconds_refused_or_one_step() -> None:
    """A negative ``seconds`` is refused before any work; a tiny one stops the walk to
    the end after one step, not done, and calls after it reach the heap of one call."""
    from actormem._index import _cbm25

    lengths, terms, parts = walk_lists(11, 12_000, 4, 40_000)
    slots, first = group_table(random.Random(11), 12_000)
    q = len(terms)
    prefetch, more = kernels.daat_flags(
        False, True, True, True, False, True, *DAAT_FLAGS.values()
    )  # fmt: skip

    def run(seconds: float) -> tuple[list[Any], int]:
        cursors = np.zeros(q, np.int64)
        nums, scores = np.empty(4096, np.int64), np.empty(4096, np.float64)
        sticky = np.zeros(q, np.uint8)
        hs, hq, hr = np.empty(10, np.float64), np.empty(10, np.int64), [None] * 10
        hn = np.zeros(2, np.int64)
        seen = np.empty(128, np.int64)
        calls = 0
        done = False
        remember = True
        while not done:
            offer = (slots, 3, None, hs, hq, hr, hn, seen, remember, first, True)
            _, done = _cbm25.bm25_daat(
                terms, cursors, lengths, *parts, -np.inf, 100, -1 if calls else 0, nums,
                scores, sticky, offer, prefetch, 0.8, None,
                more | 2048 | (0 if calls else 4096), 128, seconds,
            )  # fmt: skip
            remember = False
            calls += 1
        n = int(hn[0])
        return sorted(zip(hs[:n].tolist(), hq[:n].tolist(), strict=True)), calls

    whole, one = run(0.0)
    assert one == 1
    sliced, calls = run(1e-9)
    assert calls > 1
    assert sliced == whole
    cursors = np.zeros(q, np.int64)
    with pytest.raises(ValueError, match="seconds"):
        _cbm25.bm25_daat(
            terms, cursors, lengths, *parts, -np.inf, 100, -1, np.empty(64, np.int64),
            np.empty(64, np.float64), None, None, 0, 1.0, None, 0, 0, -1.0,
        )  # fmt: skip
    assert not cursors.any()


def _count_query_steps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets a 1 at each call of ``kernels.bm25_query_steps`` (the short path
    in slices taken), for the rest of the test."""
    taken: list[int] = []
    real = kernels.bm25_query_steps

    def counted(*args: Any) -> Any:
        taken.append(1)
        return real(*args)

    monkeypatch.setattr(kernels, "bm25_query_steps", counted)
    return taken


@pytest.mark.parametrize("seed", range(4))
def test_index_steps_with_sent_values_and_writes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The short path in slices with the owner writing between steps (purges compact
    the lists under the reader) and any values sent: the brute force's top-k at the
    reader's version, and the knob off's."""
    monkeypatch.setattr(bm25_knobs, "_CHUNK", 3)  # many steps: writes land everywhere
    monkeypatch.setattr(bm25_knobs, "_BOUND_CHUNK", 3)  # bounds in slices too
    rng = random.Random(seed)
    scorer = BM25Scorer()
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer)
    texts = [_text(rng) for _ in range(25)]
    for _ in range(150):
        state.store(_entry(rng, texts))
    state.publish()
    taken = _count_query_steps(monkeypatch)
    for round_ in range(8):
        view, index, records, query, limit = _round(state, rng, texts, 20)
        acc = (lambda rec: hash(rec) % 3 != 0) if round_ % 3 == 2 else None
        want = brute_force(scorer, records, view.version, query, limit, acc, now=scorer.clock())
        steps = index.top_k_steps(view, query, limit, acc)
        value = None
        yields = 0
        while True:
            try:
                steps.send(value)
            except StopIteration as stop:
                got = stop.value
                break
            yields += 1
            value = _value(rng.choice(_SENDS))
            if yields <= 25 or rng.random() < 0.1:
                _write(state, rng, texts, view.version)
        assert got == want, (seed, round_, query, limit)
        monkeypatch.setattr(bm25_knobs, "_SLICED_FAST", False)
        assert [(s, r.seq) for s, r in _run(index.top_k_steps(view, query, limit, acc))] == [
            (s, r.seq) for s, r in want
        ]
        monkeypatch.setattr(bm25_knobs, "_SLICED_FAST", True)
        index._check(_live(state))
        state.vacuum(state.published)
    assert taken  # the short path in slices was taken


def _run(steps: Generator[None, Any, Any]) -> Any:
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


async def test_run_sliced_sends_the_slice_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_run_sliced`` sends nothing at the first step and the slice's end (a time
    after the step's start, by ``time.perf_counter``) at each later one; None with
    ``_SEND_SLICE_END`` off."""
    got: list[Any] = []

    def steps(n: int) -> Generator[None, Any, int]:
        for _ in range(n):
            got.append((time.perf_counter(), (yield)))
        return n

    assert await snapshot._run_sliced(steps(5)) == 5
    assert len(got) == 5
    for at, value in got[:-1]:
        assert value is not None
        assert value > at - snapshot.RETRIEVE_SLICE
    del got[:]
    monkeypatch.setattr(snapshot, "_SEND_SLICE_END", False)
    assert await snapshot._run_sliced(steps(3)) == 3
    assert [value for _, value in got] == [None, None, None]


async def test_retrieve_same_with_knobs_on_and_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """``Memory.retrieve`` on a BM25 memory, sliced at every yield or not at all: the
    same entries and scores with either knob on or off; by default the short path in
    slices is taken (one call of ``bm25_query_steps`` a retrieve)."""
    rng = random.Random(3)
    texts = [_text(rng) for _ in range(40)]
    taken = _count_query_steps(monkeypatch)
    monkeypatch.setattr(bm25_knobs, "_CHUNK", 3)
    async with open_memory(scorer=BM25Scorer()) as memory:
        await memory.store_many([_entry(rng, texts) for _ in range(3000)])
        queries = [" ".join(rng.sample(WORDS[:12], rng.randint(1, 6))) for _ in range(20)]
        results: dict[tuple[Any, ...], list[Any]] = {}
        for slice_ in (0, 1e-4, float("inf")):
            monkeypatch.setattr(snapshot, "RETRIEVE_SLICE", slice_)
            for fast in (True, False):
                for ends in (True, False):
                    monkeypatch.setattr(bm25_knobs, "_SLICED_FAST", fast)
                    monkeypatch.setattr(snapshot, "_SEND_SLICE_END", ends)
                    del taken[:]
                    out = []
                    for query in queries:
                        hits = await memory.retrieve_scored(query, 10)
                        out.append([(h.entry.id, h.score) for h in hits])
                    assert len(taken) == (len(queries) if fast else 0)
                    results[slice_, fast, ends] = out
        first = results[0, False, False]
        assert all(len(hits) == 10 for hits in first)
        for key, out in results.items():
            assert out == first, key


# -- hits noted by record (memory._ACCESS_BY_REC) ----------------------------------------


def _access_state() -> MemoryState:
    state = _state(WordOverlapScorer())
    for i, text in enumerate(TEXTS[:5]):
        state.store(entry12(i, text))
    state.publish()
    return state


def test_apply_access_takes_records_as_their_ids() -> None:
    """Hits keyed by records, some upserted or deleted since (two records of one id,
    a record whose id is gone): the same counts, times, version, journal order and
    ``access_updates`` as the same hits by the ids' ints."""
    when = datetime(2026, 2, 1, tzinfo=UTC)
    by_rec, by_int = _access_state(), _access_state()
    journals = []
    for state in (by_rec, by_int):
        state.journal = []
        old = {i: state.current(entry12(i, "").id) for i in range(5)}
        state.store(entry12(1, "upserted text"))  # 1: a new record, the old one dead
        state.delete(entry12(4, "").id)  # 4: gone
        state.publish()
        new1 = state.current(entry12(1, "").id)
        recs = [old[2], old[1], old[4], new1, old[0], old[3]]
        hits: dict[Any, tuple[int, datetime]] = {
            rec: (k + 1, when + timedelta(minutes=(7 * k) % 5)) for k, rec in enumerate(recs)
        }
        if state is by_int:
            merged: dict[Any, tuple[int, datetime]] = {}
            for rec, (times, at) in hits.items():
                prev = merged.get(rec.entry._id)
                merged[rec.entry._id] = (
                    (times, at) if prev is None else (prev[0] + times, max(at, prev[1]))
                )
            hits = merged
        state.journal.clear()
        assert state.apply_access(hits, 0) == 4
        journals.append([rec.entry.id for _, rec in state.journal])
    assert journals[0] == journals[1]
    for i in range(4):
        a = by_rec.current(entry12(i, "").id)
        b = by_int.current(entry12(i, "").id)
        assert a is not None
        assert b is not None
        assert a.current_access() == b.current_access()
        assert a.current_expires() == b.current_expires()
    assert by_rec.version == by_int.version
    assert by_rec.access_updates == by_int.access_updates


async def test_hits_of_records_upserted_since_match_by_int(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hits noted for records upserted or deleted since their retrieve's view (noted
    before and after, two records of one id pending at once): the same final access
    counts, times and ``access_updates`` with hits noted by record as by the ids'
    ints; the pending keys are the records."""
    results = []
    for by_rec in (True, False):
        monkeypatch.setattr(memory_mod, "_ACCESS_BY_REC", by_rec)
        async with open_memory(clock=_Clock()) as memory:
            for i, text in enumerate(TEXTS):
                await memory.store(entry12(i, text))
            view = memory.snapshot()._view  # type: ignore[attr-defined]
            old = {i: view.get(entry12(i, "").id) for i in range(len(TEXTS))}
            memory._note_access([(1.0, old[0]), (1.0, old[1])])
            await trio.testing.wait_all_tasks_blocked()
            await memory.store(entry12(1, "upserted"))
            await memory.delete(entry12(4, "").id)
            new = memory.snapshot()._view.get(entry12(1, "").id)  # type: ignore[attr-defined]
            memory._note_access([(1.0, old[1]), (1.0, old[2]), (1.0, old[4])])
            memory._note_access([(1.0, new), (1.0, old[1]), (1.0, old[3])])
            kind = Record if by_rec else int
            assert all(type(key) is kind for key in memory._pending_access)
            await trio.testing.wait_all_tasks_blocked()
            final = sorted(
                (str(e.id), e.access_count, e.last_accessed) for e in memory.snapshot()
            )
            results.append((final, memory.statistics().access_updates))
    assert results[0] == results[1]
    counts = {id: count for id, count, _ in results[0][0]}
    assert counts[str(entry12(1, "").id)] == 3  # the upserted entry's 0, then 3 hits
    assert results[0][1] == 2 + 3  # one update for id 1's two records, none for id 4


async def test_knob_switched_with_hits_pending(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hits noted by int and then by record for the same ids before the owner runs (the
    knob switched meanwhile): one update an id, the counts summed, as by int alone."""
    results = []
    for switch in (True, False):
        async with open_memory(clock=_Clock()) as memory:
            for i, text in enumerate(TEXTS):
                await memory.store(entry12(i, text))
            view = memory.snapshot()._view  # type: ignore[attr-defined]
            recs = [view.get(entry12(i, "").id) for i in range(3)]
            monkeypatch.setattr(memory_mod, "_ACCESS_BY_REC", False)
            memory._note_access([(1.0, recs[0]), (1.0, recs[1])])
            monkeypatch.setattr(memory_mod, "_ACCESS_BY_REC", switch)
            memory._note_access([(1.0, recs[1]), (1.0, recs[2])])
            await trio.testing.wait_all_tasks_blocked()
            final = sorted((str(e.id), e.access_count) for e in memory.snapshot())
            results.append((final, memory.statistics().access_updates))
    assert results[0] == results[1]
    assert results[0][1] == 3
