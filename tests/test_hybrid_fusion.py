"""HybridScorer's fusions (convex by default, RRF on request), its date bonus, its
validation, and the retrieve thresholds over its fused scores."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import (
    BM25Scorer,
    DenseScorer,
    HybridScorer,
    MemoryCategory,
    MemoryEntry,
)
from actormem._engine.snapshot import run_retrieve
from actormem._engine.state import MemoryState
from actormem._index.dates import Period
from actormem._index.hybrid import (
    HybridIndex,
    _normalised,
    fuse_ranks,
    fuse_scores,
    lift_dated,
)
from actormem._record import Record

from .strategies import examples
from .test_dense import FAKE  # word counts hashed into 8 buckets: no model

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def entry(text: str, when: datetime = T0, tags: tuple[str, ...] = ()) -> MemoryEntry:
    return MemoryEntry(category=MemoryCategory.FACT, memory=text, created_at=when, tags=tags)


def rec(i: int, text: str = "x") -> Record:
    return Record(entry(text), 1, i)


def state_of(scorer: HybridScorer, entries: Sequence[MemoryEntry]) -> MemoryState:
    state = MemoryState(capacity=None, half_life=3600.0, scorer=scorer)
    for e in entries:
        state.store(e)
    state.publish()
    state._check()
    return state


def test_defaults_and_validation() -> None:
    s = HybridScorer(dense=DenseScorer(embedder=FAKE))
    assert (s.fusion, s.dense_w, s.date_w) == ("convex", 0.3, 0.75)
    r = HybridScorer(dense=DenseScorer(embedder=FAKE), fusion="rrf")
    assert (r.dense_w, r.date_w) == (0.2, 0.0)
    given_w = HybridScorer(dense=DenseScorer(embedder=FAKE), dense_weight=0.0, date_weight=2)
    assert (given_w.dense_w, given_w.date_w) == (0.0, 2.0)
    for bad in ("RRF", "linear", "", None, 1):
        with pytest.raises(ValueError, match="fusion must be one of 'convex', 'rrf'"):
            HybridScorer(dense=DenseScorer(embedder=FAKE), fusion=bad)  # type: ignore[arg-type]
    for value, error in ((-0.1, ValueError), (float("nan"), ValueError), (float("inf"),
                         ValueError), ("0.5", TypeError), (True, TypeError)):  # fmt: skip
        with pytest.raises(error, match="date_weight"):
            HybridScorer(dense=DenseScorer(embedder=FAKE), date_weight=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dense_weight"):
        HybridScorer(dense=DenseScorer(embedder=FAKE), dense_weight=1.5)


def test_normalisation() -> None:
    a, b, c = rec(0), rec(1), rec(2)
    assert _normalised([], "max") == {}
    assert _normalised([(4.0, a), (2.0, b), (1.0, c)], "max") == {a: 1.0, b: 0.5, c: 0.25}
    assert _normalised([(4.0, a), (2.0, b), (1.0, c)], "minmax") == {
        a: 1.0, b: pytest.approx(1 / 3), c: 0.0,
    }  # fmt: skip
    # Negative cosines: "max" falls back to min-max when the best is not positive.
    assert _normalised([(-0.1, a), (-0.3, b)], "max") == {a: 1.0, b: 0.0}
    assert _normalised([(0.5, a), (0.5, b)], "minmax") == {a: 1.0, b: 1.0}


def test_convex_fusion_scores_and_order() -> None:
    a, b, c, d = rec(0), rec(1), rec(2), rec(3)
    lexical = [(8.0, a), (6.0, b), (2.0, c)]  # / 8: 1, 0.75, 0.25
    semantic = [(0.9, c), (0.5, d), (0.1, b)]  # min-max: 1, 0.5, 0
    fused = fuse_scores((lexical, semantic), (0.7, 0.3), ("max", "minmax"))
    want = {a: 0.7, b: 0.7 * 0.75, c: 0.7 * 0.25 + 0.3, d: 0.3 * 0.5}
    assert [r for _, r in fused] == sorted(want, key=lambda r: -want[r])
    assert [s for s, _ in fused] == pytest.approx(sorted(want.values(), reverse=True))
    assert all(0.0 <= s <= 1.0 for s, _ in fused)
    # A zero weight drops its list entirely (as RRF does), ties keep seq order.
    only = fuse_scores((lexical, semantic), (1.0, 0.0), ("max", "minmax"))
    assert [r for _, r in only] == [a, b, c]
    tie = fuse_scores(([(1.0, b)], [(1.0, a)]), (0.5, 0.5), ("max", "max"))
    assert [r for _, r in tie] == [a, b]


def test_lift_dated() -> None:
    a, b, c = rec(0), rec(1), rec(2)
    fused = [(1.0, a), (0.8, b), (0.3, c)]
    assert lift_dated(fused, lambda r: r is c, 0.0) == fused
    assert lift_dated([], lambda r: True, 0.5) == []
    # The bonus is weight x the best fused score (2.0 here), so its scale follows the
    # fusion's (convex scores near 1, RRF's near 1/31).
    scaled = [(2 * s, r) for s, r in fused]
    lifted = lift_dated(scaled, lambda r: r is c, 0.2)  # 0.6 + 0.4 = 1.0
    assert [r for _, r in lifted] == [a, b, c]
    assert [s for s, _ in lifted] == pytest.approx([2.0, 1.6, 1.0])
    lifted = lift_dated(scaled, lambda r: r is not a, 0.3)  # b 2.2, c 1.2
    assert [r for _, r in lifted] == [b, a, c]
    # Equal scores after the bonus: by seq.
    tie = lift_dated([(1.0, c), (0.5, b)], lambda r: r is b, 0.5)
    assert [r for _, r in tie] == [b, c]


def test_rrf_fusion_keeps_the_old_ranking() -> None:
    texts = ["red fox runs", "blue dog", "red red cat", "green fox", "fox"]
    state = state_of(
        HybridScorer(dense=DenseScorer(embedder=FAKE), fusion="rrf"), [entry(t) for t in texts]
    )
    index = state.index
    assert isinstance(index, HybridIndex)
    view = state.view()
    lexical = index.bm25.top_k(view, "red fox", 200, None)
    semantic = index.dense.top_k(view, "red fox", 200, None)
    want = fuse_ranks((lexical, semantic), (0.8, 0.2), 30.0)
    assert index.top_k(view, "red fox", 10, None) == want[:10]


def test_convex_fusion_through_the_index() -> None:
    texts = ["red fox runs", "blue dog", "red red cat", "green fox", "fox"]
    state = state_of(HybridScorer(dense=DenseScorer(embedder=FAKE)), [entry(t) for t in texts])
    index = state.index
    assert isinstance(index, HybridIndex)
    view = state.view()
    lexical = index.bm25.top_k(view, "red fox", 200, None)
    semantic = index.dense.top_k(view, "red fox", 200, None)
    want = fuse_scores((lexical, semantic), (0.7, 0.3), ("max", "minmax"))
    got = index.top_k(view, "red fox", 3, None)
    assert got == want[:3]
    assert got[0][1].entry.memory == "red fox runs"


def test_date_bonus_reads_created_at_and_mentioned_dates() -> None:
    june = datetime(2024, 6, 14, 9, 0, tzinfo=UTC)
    entries = [
        entry("went camping with the kids", T0),
        entry("we all went out camping at the big lake with friends", june),
        entry("camping gear is in the garage", T0, tags=("2023-08-02",)),
        entry("went camping on 3 May, 2022", T0),
    ]
    # date_weight 1: a dated candidate gains the best fused score, so it passes every
    # undated one (scores are >= 0); the default 0.75 lifts it three quarters of the way.
    state = state_of(HybridScorer(dense=DenseScorer(embedder=FAKE), date_weight=1.0), entries)
    index = state.index
    assert isinstance(index, HybridIndex)
    view = state.view()

    def first(query: str) -> str:
        return index.top_k(view, query, 1, None)[0][1].entry.memory

    lake = "we all went out camping at the big lake with friends"
    assert first("when did they go camping in June?") == lake
    assert first("camping in August 2023") == "camping gear is in the garage"
    assert first("camping, May 2022") == "went camping on 3 May, 2022"
    # No period in the query, or a period nothing is in: the fusion alone decides.
    for q in ("went camping", "went camping in 1999"):
        lists = (index.bm25.top_k(view, q, 200, None), index.dense.top_k(view, q, 200, None))
        plain = fuse_scores(lists, (0.7, 0.3), ("max", "minmax"))
        assert index.top_k(view, q, 4, None) == plain
    assert index.dated(plain[0][1], Period(2025, 1, 1))  # created_at is T0
    # date_weight=0: the convex fusion alone, even for a query naming a period.
    flat = state_of(HybridScorer(dense=DenseScorer(embedder=FAKE), date_weight=0), entries)
    flat_index = flat.index
    assert isinstance(flat_index, HybridIndex)
    q = "when did they go camping in June?"
    assert flat_index.top_k(flat.view(), q, 1, None)[0][1].entry.memory != lake
    lists = (
        flat_index.bm25.top_k(flat.view(), q, 200, None),
        flat_index.dense.top_k(flat.view(), q, 200, None),
    )
    want = fuse_scores(lists, (0.7, 0.3), ("max", "minmax"))
    assert flat_index.top_k(flat.view(), q, 4, None) == want[:4]


def test_mentions_follow_purges() -> None:
    scorer = HybridScorer(dense=DenseScorer(embedder=FAKE))
    state = MemoryState(capacity=2, half_life=3600.0, scorer=scorer)
    for i in range(6):
        state.store(entry(f"note {i} from 1 March, 2024"))
        state.publish()
        state.vacuum(state.published)
        state._check()
    index = state.index
    assert isinstance(index, HybridIndex)
    assert len(index._mentions) <= 2 + 1  # evicted records' mentions go with them


words = ["red", "blue", "fox", "dog", "runs", "May", "2024", "June"]
texts = st.lists(st.sampled_from(words), min_size=0, max_size=4).map(" ".join)


@settings(max_examples=examples(40), deadline=None)
@given(
    docs=st.lists(st.tuples(texts, st.integers(0, 400)), max_size=20),
    query=st.lists(st.sampled_from(words), min_size=1, max_size=4).map(" ".join),
    limit=st.integers(0, 6),
    min_score=st.one_of(st.none(), st.sampled_from([0.0, 0.2, 0.5, 0.8, 1.2])),
    min_matched=st.integers(0, 3),
    fusion=st.sampled_from(["convex", "rrf"]),
)
def test_thresholds_with_the_hybrid(
    docs: list[tuple[str, int]],
    query: str,
    limit: int,
    min_score: float | None,
    min_matched: int,
    fusion: str,
) -> None:
    """``min_score`` cuts the full fused ranking; ``min_matched`` keeps only entries with
    that many query terms, best first, as many as pass (up to ``limit``)."""
    scorer = HybridScorer(dense=DenseScorer(embedder=FAKE), fusion=fusion)
    state = state_of(scorer, [entry(t, T0 + timedelta(days=d)) for t, d in docs])
    view = state.view()
    full = run_retrieve(state, view, query, len(docs) + 1, None)
    assert len(full) == len(docs)  # the dense side lists every entry
    if min_matched == 0:
        want = [(s, r) for s, r in full if min_score is None or s >= min_score][:limit]
        assert run_retrieve(state, view, query, limit, None, min_score, 0) == want
        return
    bm25: BM25Scorer = scorer.bm25
    terms = set(bm25.tokenizer(query))

    def matched(r: Record) -> int:
        return len(terms & set(bm25.tokenizer(r.entry.memory)))

    got = run_retrieve(state, view, query, limit, None, min_score, min_matched)
    assert all(matched(r) >= min_matched for _, r in got)
    assert all(min_score is None or s >= min_score for s, _ in got)
    assert [s for s, _ in got] == sorted((s for s, _ in got), reverse=True)
    if min_score is None:
        passing = sum(1 for _, r in full if matched(r) >= min_matched)
        assert len(got) == min(limit, passing)
