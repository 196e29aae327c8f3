"""Review of the small-memory word-overlap paths (session 13, ``revwo``).

The short words' cache (``knobs._CACHE_SHORT_WORDS``) keeps a one- or two-character
query word's match set however small: its bound (``knobs._CACHE_BYTES``) must hold for
what the entries really cost, not only their sets' bytes.
"""

from __future__ import annotations

import sys
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index.scoring import drain
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap import word_overlap_score

from .strategies import examples

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


# Hostile words: JSON punctuation, one- and two-character words outside the masks'
# table, non-ASCII whose lower case changes length (İ) or form (Σ, ǅ), ligatures.
HOSTILE = [
    "0,", "10,", '"4', '{"a":', "}", "{", ":", "null,", "é", "É", "İ", "i", "ß", "ss",
    "日本", "本", "ǅ", "ǆ", "ﬁ", "fi", "ΣΑΣ", "σας", "ς", "a", "ab", "aa", "a,", "x",
    "deploy", "the",
]  # fmt: skip


@settings(max_examples=examples(25), deadline=None)
@given(
    texts=st.lists(
        st.lists(st.sampled_from(HOSTILE), min_size=1, max_size=6), min_size=1, max_size=120
    ),
    rounds=st.lists(
        st.tuples(
            st.lists(st.sampled_from([*HOSTILE, "zz", "İi", "\u00e9"]), max_size=70),
            st.sampled_from([1, 3, 10]),  # limit
            st.sampled_from([0, 0, 1, 2]),  # min_matched
            st.booleans(),  # a namespace filter
            st.integers(0, 40),  # texts stored after this round (the cache extended)
            st.integers(0, 10),  # texts deleted after it
        ),
        min_size=1,
        max_size=8,
    ),
)
def test_small_memories_rank_hostile_text_as_the_reference(
    texts: list[list[str]], rounds: list[tuple[list[str], int, int, bool, int, int]]
) -> None:
    # The default small-memory path (byte counts for queries of 32 words or more, the
    # flat ranking, the short words' cache) against word_overlap_score from scratch:
    # the same top-k, scores bit for bit and ties by seq, round after round while texts
    # are added (cached sets extended) and deleted.
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    live: list[uuid.UUID] = []
    made = 0

    def add(words: list[str]) -> None:
        nonlocal made
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join(words) + (f" u{made}" if made % 2 else ""),
            relevance=(made % 5) / 4,
            created_at=BASE + timedelta(seconds=made),
            id=uuid.UUID(int=made + 1),
            namespace=("a",) if made % 3 else ("b",),
        )
        made += 1
        state.store(entry)
        live.append(entry.id)

    for words in texts:
        add(words)
    state.publish()
    for query_words, limit, min_matched, by_ns, more, gone in rounds:
        query = " ".join(query_words)
        view = state.view()

        def accept(rec: Any) -> bool:
            return bool(rec.entry.namespace == ("a",))

        chosen = accept if by_ns else None
        got = drain(
            state.index.top_k_steps(  # type: ignore[attr-defined]
                view, query, limit, chosen, min_matched=min_matched
            )
        )
        want = []
        words = query.lower().split()
        for rec in view.records():
            if chosen is not None and not chosen(rec):
                continue
            low = rec.entry.memory.lower()
            if min_matched and sum(1 for w in words if w in low) < min_matched:
                continue
            score = word_overlap_score(rec.entry.memory, rec.entry.tags, rec.entry.relevance, query)
            want.append((score, rec.seq))
        want.sort(key=lambda item: (-item[0], item[1]))
        assert [(s, r.seq) for s, r in got] == want[:limit], query
        for k in range(more):
            add(texts[k % len(texts)])
        for _ in range(min(gone, len(live))):
            state.delete(live.pop(0))
        state.publish()
        state.vacuum(state.published)
    state._check()


def test_around_the_small_memory_thresholds() -> None:
    # Retrieves over 32,767, 32,768 and 32,769 groups (knobs._BITS_MIN, _RANK_FLAT) with
    # queries of 31, 32 and 33 words (knobs._BITS_MIN_WORDS): whichever path each takes,
    # the reference's top-k, scores and ties; a view taken at 32,767 groups read last.
    assert wo_knobs._BITS_MIN == wo_knobs._RANK_FLAT == 1 << 15
    assert wo_knobs._BITS_MIN_WORDS == 32
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    queries = [
        " ".join(HOSTILE[(k * 7 + j) % len(HOSTILE)] for j in range(size)) + " u1"
        for k, size in enumerate((30, 31, 32, 4))
    ]

    def check(view: Any) -> None:
        for query in queries:
            got = drain(state.index.top_k_steps(view, query, 5, None))  # type: ignore[attr-defined]
            scored = sorted(
                (-word_overlap_score(rec.entry.memory, [], rec.entry.relevance, query), rec.seq)
                for rec in view.records()
            )
            assert [(s, r.seq) for s, r in got] == [(-s, q) for s, q in scored[:5]], query

    old = None
    for i in range((1 << 15) + 1):
        text = f"{HOSTILE[i % len(HOSTILE)]} {HOSTILE[(i // 7) % len(HOSTILE)]} u{i}"
        state.store(_entry(i, text))
        if i + 1 >= (1 << 15) - 1:
            state.publish()
            if old is None:
                old = state.view()
            check(state.view())
    assert old is not None
    check(old)
