"""Review of the small-memory word-overlap paths (session 13, ``revwo``).

The short words' cache (``knobs._CACHE_SHORT_WORDS``) keeps a one- or two-character
query word's match set however small: its bound (``knobs._CACHE_BYTES``) must hold for
what the entries really cost, not only their sets' bytes.
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index.scoring import drain
from actormem._index.wordoverlap import knobs as wo_knobs

BASE = datetime(2024, 1, 1, tzinfo=UTC)


def _entry(i: int, text: str) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=text,
        relevance=0.5,
        created_at=BASE + timedelta(seconds=i),
        id=uuid.UUID(int=i + 1),
    )


def test_the_short_words_cache_is_bounded_by_what_its_entries_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Thousands of distinct two-character words (CJK pairs), each in one text: every
    # retrieve of one caches a set of a single group number (4 bytes), and the cache
    # must not keep thousands of them past its byte bound (each costs a tuple, an
    # array object and a dict slot, ~50-200 times its set's bytes).
    budget = 64 << 10
    monkeypatch.setattr(wo_knobs, "_CACHE_BYTES", budget)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    words = [chr(0x4E00 + 2 * i) + chr(0x4E01 + 2 * i) for i in range(3000)]
    for i, w in enumerate(words):
        state.store(_entry(i, f"{w} filler"))
    state.publish()
    for w in words:
        got = drain(state.index.top_k_steps(state.view(), w, 1, None))  # type: ignore[attr-defined]
        assert got[0][1].entry.memory == f"{w} filler"
    cache = state.index._e.cache  # type: ignore[attr-defined]
    held = sum(sys.getsizeof(item[2]) + sys.getsizeof(item) for item in cache.entries.values())
    assert len(cache.entries) > 1
    assert held <= budget, (len(cache.entries), held)
    state._check()
