"""A left word's cached byte set a few groups short, extended by
``WordOverlapSearch._core_words`` itself (``knobs._LEFT_EXTEND``) against the path before
it (through ``add_word``, ``MatchFinder.match_steps`` and ``_extend``): the same
retrieves (top-k, scores, ties), the same cache entries in the same order, and the
from-scratch reference's scores; and the scratch pool's lean take
(``scoring._LEAN_TAKE``): the same spares, zeroed alike."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import scoring
from actormem._index.scoring import ScratchPool, drain
from actormem._index.wordoverlap import ccore, word_overlap_score
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.matchsets import MatchFinder

from .strategies import run_machine
from .test_wordoverlap_bits import CountsOldAndNew

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")


class LeftExtendInBytes(CountsOldAndNew):
    """The state machine of ``test_wordoverlap_bits``, two memories with every query
    knob at its default counting in bytes, one extending the left words' cached byte
    sets itself, one through ``match_steps``."""

    KNOBS = {True: (True, 1 << 15, 0), False: (False, 1 << 15, 0)}
    NAMES = ("_LEFT_EXTEND", "_BITS_MIN", "_BITS_MIN_WORDS")


class DirectStepsInBytes(CountsOldAndNew):
    """The same machine, one memory stepping the search's generator itself
    (``knobs._DIRECT_STEPS``), one through the index's generator of its own."""

    KNOBS = {True: (True, 1 << 15, 0), False: (False, 1 << 15, 0)}
    NAMES = ("_DIRECT_STEPS", "_BITS_MIN", "_BITS_MIN_WORDS")


def test_left_extend_on_and_off_agree() -> None:
    assert wo_knobs._LEFT_EXTEND
    run_machine(LeftExtendInBytes, 30, 25)


def test_direct_steps_on_and_off_agree() -> None:
    assert wo_knobs._DIRECT_STEPS
    run_machine(DirectStepsInBytes, 20, 25)


@pytest.mark.parametrize("direct", [True, False])
def test_direct_steps_is_the_search_generator(
    monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    monkeypatch.setattr(wo_knobs, "_DIRECT_STEPS", direct)
    state = _state(30)
    steps = state.index.top_k_steps(state.view(), "the cat", 3, None)  # type: ignore[attr-defined]
    assert (steps.gi_code.co_name == "top_k_steps") is direct
    hits = drain(steps)
    assert [rec.seq for _, rec in hits] == [
        rec.seq
        for _, rec in state.index.top_k(state.view(), "the cat", 3, None)  # type: ignore[attr-defined]
    ]


BASE = datetime(2026, 1, 1, tzinfo=UTC)
TEXTS = [
    "the deploy of the cat went fine",
    "what is the status of the build",
    "the cat sat on the mat",
    "deploy failed: see the log for what happened",
    "a note about nothing in particular",
    "the the the",
    "thematic status: deployed, catalogued",
]
QUERIES = [
    "the cat",
    "what the deploy did to the cat the log",
    "the status of the build the the",
    "zz the mat what",
    "the a is of status",
]


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=f"{TEXTS[i % len(TEXTS)]} item{i}",
        relevance=(i % 5) / 4,
        created_at=BASE + timedelta(seconds=i),
        id=uuid.UUID(int=i + 1),
    )


def _state(count: int) -> MemoryState:
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=2)
    )
    for i in range(count):
        state.store(_entry(i))
    state.publish()
    return state


def checked_hits(state: MemoryState, query: str, limit: int) -> list[tuple[float, int]]:
    """``(score, seq)`` of a drained retrieve of ``query`` over ``state``'s view, each
    score checked against the from-scratch reference."""
    hits = drain(state.index.top_k_steps(state.view(), query, limit, None))  # type: ignore[attr-defined]
    for score, rec in hits:
        assert score == word_overlap_score(
            rec.entry.memory, rec.entry.tags, rec.entry.relevance, query
        )
    return [(score, rec.seq) for score, rec in hits]


def count_match_steps(
    monkeypatch: pytest.MonkeyPatch, calls: dict[Any, int], side: list[Any]
) -> None:
    """``MatchFinder.match_steps`` counting its calls into ``calls[side[0]]``."""
    real = MatchFinder.match_steps

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[side[0]] += 1
        return (yield from real(self, *args, **kwargs))

    monkeypatch.setattr(MatchFinder, "match_steps", counted)


def _cache(state: MemoryState) -> list[tuple[str, int, bool, bytes]]:
    entries = state.index._e.cache.entries  # type: ignore[attr-defined]
    # A dense set's bytes below the groups it covers (beyond them: room, unread).
    return [(w, upto, dense, data[:upto].tobytes()) for w, (upto, dense, data) in entries.items()]


@pytest.mark.parametrize("step", [1, 3, 200])
def test_left_extend_skips_match_steps_and_keeps_the_cache(
    monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    # Queries with common words (cached from the first), a few stores between them (the
    # cached sets a few groups short): the same results and cache (order too), fewer
    # match_steps calls with the knob on, the reference's scores. `step` texts stored
    # between two rounds: over _STEP new groups the word goes through match_steps.
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 1 << 15)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN_WORDS", 0)
    if step > wo_knobs._STEP:
        monkeypatch.setattr(wo_knobs, "_STEP", 128)
    calls = {True: 0, False: 0}
    side = [True]
    count_match_steps(monkeypatch, calls, side)
    states = {on: _state(60) for on in (True, False)}
    stored = 60
    for _ in range(4):
        for query in QUERIES:
            got = {}
            for on, state in states.items():
                side[0] = on
                monkeypatch.setattr(wo_knobs, "_LEFT_EXTEND", on)
                got[on] = checked_hits(state, query, 4)
            assert got[True] == got[False], query
            assert _cache(states[True]) == _cache(states[False])
        for state in states.values():
            for i in range(stored, stored + step):
                state.store(_entry(i))
            state.publish()
        stored += step
    if step <= wo_knobs._STEP:
        assert calls[True] < calls[False]
    else:
        assert calls[True] == calls[False]  # never a single step short
    for state in states.values():
        state._check()


def test_left_extend_is_one_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # A set exactly _STEP groups short is extended in place; one more goes through
    # match_steps (whose _extend takes several steps).
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 1 << 15)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN_WORDS", 0)
    monkeypatch.setattr(wo_knobs, "_STEP", 4)
    calls = {0: 0}
    real = MatchFinder.match_steps
    for short, expect_calls in ((4, 0), (5, 1)):
        calls[0] = 0
        state = _state(200)
        drain(state.index.top_k_steps(state.view(), "the", 4, None))  # type: ignore[attr-defined]
        assert "the" in state.index._e.cache.entries  # type: ignore[attr-defined]
        for i in range(200, 200 + short):
            state.store(_entry(i))
        state.publish()
        count_match_steps(monkeypatch, calls, [0])
        hits = drain(state.index.top_k_steps(state.view(), "the", 4, None))  # type: ignore[attr-defined]
        monkeypatch.setattr(MatchFinder, "match_steps", real)
        assert calls[0] == expect_calls
        n = state.index._e.n  # type: ignore[attr-defined]
        upto, dense, data = state.index._e.cache.entries["the"]  # type: ignore[attr-defined]
        assert upto == n
        assert dense
        recent = state.index._e.recent  # type: ignore[attr-defined]
        for g in range(n - short, n):
            assert data[g] == ("the" in recent[g % wo_knobs._SCAN_NEW])
        for score, rec in hits:
            assert score == word_overlap_score(
                rec.entry.memory, rec.entry.tags, rec.entry.relevance, "the"
            )


def _run(steps: Any) -> tuple[int, Any]:
    """(yields, value) of a generator run to its end."""
    yields = 0
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return yields, stop.value
        yields += 1


@pytest.mark.parametrize("lean", [True, False])
def test_lean_take_same_spares_zeroed(monkeypatch: pytest.MonkeyPatch, lean: bool) -> None:
    monkeypatch.setattr(scoring, "_LEAN_TAKE", lean)
    pool = ScratchPool()
    for dtype in (np.uint8, np.dtype(np.uint16), np.int64, np.dtype(np.float64), np.bool_):
        first = drain(pool.take_steps(dtype, 100, 1000))
        assert first.dtype == np.dtype(dtype)
        assert len(first) == 1000
        first[:] = 1
        pool.give(first, 1000)
        for key in (dtype, np.dtype(dtype)):  # by type or by dtype: the same spare
            yields, again = _run(pool.take_steps(key, 100, 1000))
            assert again is first
            assert yields == 1
            assert not again.any()  # zeroed up to its end (one step covers it)
            again[:] = 1
            pool.give(again, 1000)
        # n = 0: nothing zeroed, no step.
        yields, again = _run(pool.take_steps(dtype, 0, 1000))
        assert again is first
        assert yields == 0
        assert first.all()
    wide = np.ones(300_000, np.uint8)
    pool.give(wide, 300_000)
    # Beyond one step: zeroed in steps, one yield each.
    yields, again = _run(pool.take_steps(np.uint8, 300_000, 300_000))
    assert again is wide
    assert yields == 2
    assert not wide.any()
