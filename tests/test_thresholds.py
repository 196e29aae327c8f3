"""Retrieve thresholds (min_score, min_matched) and time-range filters: each is the
unthresholded ranking, filtered, then cut to the limit; the default stays unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import (
    BM25Scorer,
    InvalidQueryError,
    MemoryCategory,
    MemoryEntry,
    WordOverlapScorer,
    open_memory,
)
from actormem._engine.snapshot import run_retrieve
from actormem._engine.state import MemoryState
from actormem._index.scoring import Scorer

from .strategies import examples

WORDS = ["red", "blue", "fox", "dog", "runs", "re", "do"]
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def entry(text: str, minutes: int = 0, relevance: float = 1.0) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=text,
        created_at=T0 + timedelta(minutes=minutes),
        relevance=relevance,
    )


def word_matches(text: str, query: str) -> int:
    low = text.lower()
    return sum(1 for w in query.lower().split() if w in low)


def term_matches(scorer: BM25Scorer, text: str, query: str) -> int:
    have = set(scorer.tokenizer(text))
    return sum(1 for t in set(scorer.tokenizer(query)) if t in have)


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)


@settings(max_examples=examples(60), deadline=None)
@given(
    docs=st.lists(st.tuples(texts, st.sampled_from([0.2, 0.5, 1.0])), max_size=25),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    limit=st.integers(0, 6),
    min_matched=st.integers(0, 4),
    min_score=st.one_of(st.none(), st.sampled_from([0.0, 0.55, 0.7, 1.0, 2.0])),
    bm25=st.booleans(),
)
def test_thresholds_filter_the_full_ranking(
    docs: list[tuple[str, float]],
    query: str,
    limit: int,
    min_matched: int,
    min_score: float | None,
    bm25: bool,
) -> None:
    scorer: Scorer = BM25Scorer() if bm25 else WordOverlapScorer()
    state = MemoryState(capacity=None, half_life=3600.0, scorer=scorer)
    for text, rel in docs:
        state.store(entry(text, relevance=rel))
    state.publish()

    def matched(text: str) -> int:
        if isinstance(scorer, BM25Scorer):
            return term_matches(scorer, text, query)
        return word_matches(text, query)

    view = state.view()
    full = run_retrieve(state, view, query, len(docs) + 1, None)
    want = [
        (s, r)
        for s, r in full
        if matched(r.entry.memory) >= min_matched and (min_score is None or s >= min_score)
    ][:limit]
    got = run_retrieve(state, view, query, limit, None, min_score, min_matched)
    assert got == want


async def test_default_word_overlap_returns_non_matching_entries_and_thresholds_do_not() -> None:
    async with open_memory() as memory:
        await memory.store(entry("deploy the blue service"))
        await memory.store(entry("lunch is at noon"))
        default = await memory.retrieve_scored("blue deploy", 5)
        assert [s.entry.memory for s in default] == ["deploy the blue service", "lunch is at noon"]
        assert default[1].score == pytest.approx(0.6)  # relevance 1, nothing matched
        only = ["deploy the blue service"]
        got = await memory.retrieve("blue deploy", 5, min_matched=1)
        assert [e.memory for e in got] == only
        got = await memory.retrieve("blue deploy", 5, min_score=0.61)
        assert [e.memory for e in got] == only
        got = memory.snapshot().retrieve("blue deploy", 5, min_matched=2)
        assert [e.memory for e in got] == only
        assert memory.snapshot().retrieve("blue deploy", 5, min_matched=3) == []


async def test_time_range_is_half_open() -> None:
    async with open_memory() as memory:
        for minutes in (0, 10, 20):
            await memory.store(entry(f"note {minutes}", minutes))
        got = await memory.retrieve(
            "note",
            10,
            created_after=T0 + timedelta(minutes=10),
            created_before=T0 + timedelta(minutes=20),
        )
        assert [e.memory for e in got] == ["note 10"]
        got = memory.snapshot().retrieve("note", 10, created_before=T0 + timedelta(minutes=10))
        assert [e.memory for e in got] == ["note 0"]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"min_score": "0.5"}, TypeError),
        ({"min_score": float("nan")}, InvalidQueryError),
        ({"min_matched": 1.5}, TypeError),
        ({"min_matched": True}, TypeError),
        ({"min_matched": -1}, InvalidQueryError),
        ({"created_after": "2025-01-01"}, TypeError),
        ({"created_before": datetime(2025, 1, 1)}, InvalidQueryError),
    ],
)
async def test_bad_thresholds_name_the_argument(kwargs: dict[str, Any], error: type) -> None:
    async with open_memory() as memory:
        name = next(iter(kwargs))
        with pytest.raises(error, match=name):
            await memory.retrieve("x", **kwargs)
        with pytest.raises(error, match=name):
            memory.snapshot().retrieve("x", **kwargs)


async def test_hooks_pass_thresholds_to_retrieve() -> None:
    from actormem import MemoryHooks

    async with open_memory() as memory:
        await memory.store(entry("deploy the blue service"))
        await memory.store(entry("lunch is at noon"))
        plain = await MemoryHooks(memory, top_k=3).before_turn("blue deploy")
        assert plain is not None
        assert "lunch" in plain  # the seed's contract: the top k, matching or not
        strict = await MemoryHooks(memory, top_k=3, min_matched=1).before_turn("blue deploy")
        assert strict is not None
        assert "lunch" not in strict
        assert "deploy the blue service" in strict
        assert await MemoryHooks(memory, min_score=5.0).before_turn("blue deploy") is None
        with pytest.raises(ValueError, match="min_matched"):
            MemoryHooks(memory, min_matched=-1)
        with pytest.raises(TypeError, match="min_score"):
            MemoryHooks(memory, min_score="high")  # type: ignore[arg-type]


def test_server_retrieve_body_carries_the_thresholds() -> None:
    import inspect

    from actormem import Memory
    from actormem.server._app import _retrieve_filters
    from actormem.server._models import RetrieveIn

    body = RetrieveIn.model_validate(
        {
            "query": "x",
            "min_score": 0.5,
            "min_matched": 2.0,
            "created_after": "2025-01-01T00:00:00Z",
            "created_before": "2025-02-01T00:00:00+01:00",
        }
    )
    filters = _retrieve_filters(body)
    assert filters["min_matched"] == 2
    assert filters["created_after"] == T0
    assert set(filters) <= set(inspect.signature(Memory.retrieve_scored).parameters)
    for bad in ({"min_matched": -1}, {"min_score": "1"}, {"created_after": 5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            RetrieveIn.model_validate({"query": "x", **bad})


async def test_hybrid_min_matched_one_drops_entries_without_a_query_term() -> None:
    """The dense half ranks every entry: min_matched=1 must still keep only entries with
    a query term (a reviewer saw all three entries come back, one sharing no word)."""
    from actormem._index.dense import DenseScorer, FunctionEmbedder
    from actormem._index.hybrid import HybridScorer

    def constant(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0] for _ in texts]

    fake = FunctionEmbedder(fn=constant, name="constant-2", dim=2)
    async with open_memory(scorer=HybridScorer(dense=DenseScorer(embedder=fake))) as memory:
        for text in ("deploys go to the blue cluster", "lunch is at noon", "a database"):
            await memory.store(entry(text))
        everything = await memory.retrieve("deploy the blue service", 5)
        assert len(everything) == 3  # without a threshold the dense side admits all
        got = await memory.retrieve("deploy the blue service", 5, min_matched=1)
        assert [e.memory for e in got] == ["deploys go to the blue cluster"]
        assert await memory.retrieve("ДЕПЛОЙ 🚀", 5, min_matched=1) == []
