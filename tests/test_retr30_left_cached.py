"""A query word ``count_words`` leaves to Python whose match set is cached dense and up
to date, taken from the cache by ``WordOverlapSearch._core_words`` itself
(``knobs._LEFT_CACHED``) against the path before it (every left word through the
``add_word`` and ``MatchFinder.match_steps`` generators): the same retrieves (top-k,
scores, ties) in byte counts and bit planes, the same cache order, and the same scores
as the from-scratch reference."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import run_machine
from .test_p99_52_left_extend import checked_hits, count_match_steps
from .test_wordoverlap_bits import CountsOldAndNew

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")


class LeftCachedInBytes(CountsOldAndNew):
    """The state machine of ``test_wordoverlap_bits``, two memories with every query
    knob at its default counting in bytes (``_BITS_MIN`` 1 << 15, ``_BITS_MIN_WORDS``
    0), one taking the left words' cached dense sets itself, one through
    ``match_steps``."""

    KNOBS = {True: (True, 1 << 15, 0), False: (False, 1 << 15, 0)}
    NAMES = ("_LEFT_CACHED", "_BITS_MIN", "_BITS_MIN_WORDS")


class LeftCachedInBits(CountsOldAndNew):
    """:class:`LeftCachedInBytes` counting in bit planes (``_BITS_MIN`` 0)."""

    KNOBS = {True: (True, 0), False: (False, 0)}
    NAMES = ("_LEFT_CACHED", "_BITS_MIN")


@pytest.mark.parametrize("machine", [LeftCachedInBytes, LeftCachedInBits])
def test_left_cached_on_and_off_agree(machine: type[CountsOldAndNew]) -> None:
    assert wo_knobs._LEFT_CACHED
    run_machine(machine, 30, 25)


BASE = datetime(2026, 1, 1, tzinfo=UTC)
TEXTS = [
    "the deploy of the cat went fine",
    "what is the status of the build",
    "the cat sat on the mat",
    "deploy failed: see the log for what happened",
    "a note about nothing in particular",
    "the the the",
]
QUERIES = [
    "the cat",
    "what the deploy did to the cat the log",
    "the status of the build the the",
    "zz the mat what",
    "the a is of",
]


def _state() -> MemoryState:
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=2)
    )
    for i in range(60):
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"{TEXTS[i % len(TEXTS)]} item{i % 7}",
                relevance=(i % 5) / 4,
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
            )
        )
    state.publish()
    return state


@pytest.mark.parametrize("bits_min", [1 << 15, 0])
def test_left_cached_skips_match_steps_and_keeps_the_cache(
    monkeypatch: pytest.MonkeyPatch, bits_min: int
) -> None:
    # Repeated queries with common words (cached from the second): the same results,
    # the same cache (its order too), fewer match_steps calls with the knob on; and the
    # scores are the reference's.
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", bits_min)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN_WORDS", 0 if bits_min else 32)
    calls = {True: 0, False: 0}
    side = [True]
    count_match_steps(monkeypatch, calls, side)
    states = {on: _state() for on in (True, False)}
    for _ in range(3):
        for query in QUERIES:
            got = {}
            for on, state in states.items():
                side[0] = on
                monkeypatch.setattr(wo_knobs, "_LEFT_CACHED", on)
                got[on] = checked_hits(state, query, 4)
            assert got[True] == got[False], query
    caches = {on: state.index._e.cache.entries for on, state in states.items()}  # type: ignore[attr-defined]
    assert list(caches[True]) == list(caches[False])
    assert calls[True] < calls[False]
    for state in states.values():
        state._check()
