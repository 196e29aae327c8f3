"""The dense and hybrid scorers: exact cosine top-k against a brute force, MVCC through
the engine's state (snapshots, deletes, vacuum, compaction), vectors embedded ahead of
the owner's apply, weighted rank fusion."""

from __future__ import annotations

import logging
import os
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import (
    BM25Scorer,
    DenseScorer,
    EmbeddingError,
    FunctionEmbedder,
    HybridScorer,
    InvalidQueryError,
    MemoryCategory,
    MemoryEntry,
    open_memory,
)
from actormem._engine.state import MemoryState
from actormem._index import dense as dense_module
from actormem._index.dense import DenseIndex
from actormem._index.hybrid import HybridIndex, fuse_ranks
from actormem._record import Record

from .strategies import examples

DIM = 8


def hashed(texts: Sequence[str]) -> Any:
    """A tiny deterministic embedder: word counts hashed into 8 buckets."""
    out = np.zeros((len(texts), DIM), np.float32)
    for i, text in enumerate(texts):
        for word in text.lower().split():
            out[i, zlib.crc32(word.encode()) % DIM] += 1.0
    return out


FAKE = FunctionEmbedder(fn=hashed, name="hashed-8", dim=DIM)
WORDS = ["red", "blue", "green", "fox", "dog", "cat", "runs", "sleeps"]


def entry(text: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text)


def brute(state: MemoryState, query: str, limit: int) -> list[tuple[float, Record]]:
    view = state.view()
    q = hashed([query])[0]
    q = q / (np.linalg.norm(q) or 1.0)
    scored = []
    for rec in view.records():
        v = hashed([rec.entry.memory])[0]
        v = v / (np.linalg.norm(v) or 1.0)
        scored.append((float(np.float32(v) @ np.float32(q)), rec))
    scored.sort(key=lambda item: (-item[0], item[1].seq))
    return scored[:limit]


def assert_same(got: list[tuple[float, Record]], want: list[tuple[float, Record]]) -> None:
    assert len(got) == len(want)
    assert [s for s, _ in got] == pytest.approx([s for s, _ in want], abs=1e-5)
    # Each record returned has the score the brute force gives it (ties may reorder).
    exact = {rec: s for s, rec in want}
    for s, rec in got:
        if rec in exact:
            assert s == pytest.approx(exact[rec], abs=1e-5)


texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("store"), texts),
        st.tuples(st.just("delete"), st.integers(0, 40)),
        st.tuples(st.just("snapshot"), st.just("")),
        st.tuples(st.just("vacuum"), st.just("")),
    ),
    max_size=40,
)


@settings(max_examples=examples(60), deadline=None)
@given(ops=ops, query=texts, limit=st.integers(0, 6))
def test_dense_top_k_matches_a_brute_force(
    ops: list[tuple[str, Any]], query: str, limit: int
) -> None:
    old = dense_module._COMPACT_MIN
    dense_module._COMPACT_MIN = 2  # compact often
    try:
        state = MemoryState(capacity=8, half_life=3600.0, scorer=DenseScorer(embedder=FAKE))
        stored: list[MemoryEntry] = []
        held: list[tuple[Any, list[tuple[float, Record]]]] = []
        for op, arg in ops:
            if op == "store":
                e = entry(arg)
                stored.append(e)
                state.store(e)
            elif op == "delete" and stored:
                state.delete(stored[arg % len(stored)].id)
            elif op == "snapshot":
                held.append((state.view(), brute(state, query, max(limit, 1))))
            elif op == "vacuum":
                horizon = min([v.version for v, _ in held] + [state.published])
                state.vacuum(horizon)
            state.publish()
            state._check()
        index = state.index
        assert isinstance(index, DenseIndex)
        assert_same(index.top_k(state.view(), query, limit, None), brute(state, query, limit))
        for view, want in held:  # old snapshots still see their own version
            assert_same(index.top_k(view, query, max(limit, 1), None), want)
    finally:
        dense_module._COMPACT_MIN = old


def test_fuse_ranks_weights_and_ties() -> None:
    a, b, c = (Record(entry(t), 1, i) for i, t in enumerate("abc"))
    lexical = [(9.0, a), (5.0, b)]
    semantic = [(0.9, c), (0.8, b)]
    fused = fuse_ranks((lexical, semantic), (0.8, 0.2), 30.0)
    # b is in both lists: 0.8 / 32 + 0.2 / 32 beats a's 0.8 / 31 and c's 0.2 / 31.
    assert [rec for _, rec in fused] == [b, a, c]
    assert [s for s, _ in fused] == pytest.approx([1 / 32, 0.8 / 31, 0.2 / 31])
    # Equal fused scores keep insertion order.
    tie = fuse_ranks(([(1.0, b)], [(1.0, a)]), (0.5, 0.5), 1.0)
    assert [rec for _, rec in tie] == [a, b]


def test_hybrid_weight_zero_is_bm25_order() -> None:
    state = MemoryState(
        capacity=None,
        half_life=3600.0,
        scorer=HybridScorer(dense=DenseScorer(embedder=FAKE), dense_weight=0.0),
    )
    for t in ["red fox runs", "blue dog", "red red cat", "green fox"]:
        state.store(entry(t))
    state.publish()
    state._check()
    index = state.index
    assert isinstance(index, HybridIndex)
    view = state.view()
    lexical = index.bm25.top_k(view, "red fox", 10, None)
    assert [r for _, r in index.top_k(view, "red fox", 10, None)] == [r for _, r in lexical]


@pytest.mark.parametrize("inline_chars", [0, 1 << 20])
async def test_owner_embeds_ahead_of_the_apply(inline_chars: int) -> None:
    calls: list[int] = []

    def counting(batch: Sequence[str]) -> Any:
        calls.append(len(batch))
        return hashed(batch)

    embedder = FunctionEmbedder(fn=counting, name="counting", dim=DIM)
    scorer = HybridScorer(dense=DenseScorer(embedder=embedder, inline_chars=inline_chars))
    async with open_memory(scorer=scorer) as memory:
        for t in ["red fox runs", "blue dog", "red fox runs"]:
            memory.store_nowait(entry(t))
        await memory.store(entry("green cat sleeps"))
        index = memory._state.index
        assert isinstance(index, HybridIndex)
        assert index.dense.inline == 0  # every vector came from the owner's batch
        assert sum(calls) == 3  # distinct texts only, none twice
        got = await memory.retrieve("fox", 2)
        assert got[0].memory == "red fox runs"
        with pytest.raises(InvalidQueryError):
            await memory.retrieve("fox", min_matched=-1)
        memory._state._check()


async def test_dense_refuses_min_matched_and_keeps_min_score() -> None:
    async with open_memory(scorer=DenseScorer(embedder=FAKE)) as memory:
        for t in ["red fox", "blue dog", ""]:
            await memory.store(entry(t))
        with pytest.raises(InvalidQueryError, match="min_matched"):
            await memory.retrieve("fox", min_matched=1)
        everything = await memory.retrieve_scored("red fox", 10)
        assert len(everything) == 3  # dense scores every entry
        close = await memory.retrieve_scored("red fox", 10, min_score=0.5)
        assert [s.entry.memory for s in close] == ["red fox"]


def test_embedder_output_is_checked() -> None:
    bad = FunctionEmbedder(fn=lambda texts: np.zeros((len(texts), 3)), name="bad", dim=DIM)
    index = DenseScorer(embedder=bad).make_index()
    with pytest.raises(EmbeddingError, match="shape"):
        index.embed(["x"])
    nan = FunctionEmbedder(fn=lambda texts: np.full((len(texts), 2), np.nan), name="nan", dim=2)
    with pytest.raises(EmbeddingError, match="NaN"):
        DenseScorer(embedder=nan).make_index().embed(["x"])
    with pytest.raises(ValueError, match="dim"):
        FunctionEmbedder(fn=hashed, name="x", dim=0)
    with pytest.raises(ValueError, match="dense_weight"):
        HybridScorer(bm25=BM25Scorer(), dense=DenseScorer(embedder=FAKE), dense_weight=1.5)


def test_wordllama_loads_offline_and_ranks_paraphrases() -> None:
    pytest.importorskip("wordllama")
    scorer = DenseScorer()  # the default model, from the files in the wheel
    near = scorer.score_entry("the cat is sleeping on the sofa", (), 1.0, "a kitten naps")
    far = scorer.score_entry("quarterly tax filing deadline", (), 1.0, "a kitten naps")
    assert near > far


def test_the_builtin_model_pools_as_wordllama_does() -> None:
    """The built-in embedder's vectors are WordLlama's own average pooling (its
    ``embed(norm=False)``), for a batch with empty, short, repeated and
    very long texts; a text's vector does not depend on its batch."""
    pytest.importorskip("wordllama")
    import wordllama

    embedder = dense_module.wordllama_embedder(256)
    model = wordllama.WordLlama.load(
        cache_dir=os.path.dirname(wordllama.__file__), disable_download=True, dim=256
    )
    long = " ".join(
        f'{{"tool": "grep", "hit": {i}, "path": "src/mod{i % 97}.py"}}' for i in range(3000)
    )
    batch = ["deploys go to blue", "", "a kitten naps", "a kitten naps", "x", long, "é ü 日本"]
    got = np.asarray(embedder(batch))
    assert got.shape == (len(batch), 256)
    assert not got[1].any()  # no tokens: the zero vector
    present = [i for i, t in enumerate(batch) if t]
    # WordLlama sums in float32 too, in another order: equal to float32 rounding.
    want = model.embed([batch[i] for i in present], norm=False)
    np.testing.assert_allclose(got[present], want, rtol=1e-3, atol=1e-4)
    for i in present:  # and close to the exact (float64) mean of the token rows
        ids = model.tokenizer.encode(batch[i], add_special_tokens=False).ids
        exact = model.embedding[ids].astype(np.float64).mean(axis=0)
        np.testing.assert_allclose(got[i], exact, rtol=1e-5, atol=1e-6)
    for i, text in enumerate(batch):
        np.testing.assert_allclose(np.asarray(embedder([text]))[0], got[i], rtol=1e-5, atol=1e-7)


@settings(max_examples=examples(25), deadline=None)
@given(
    docs=st.lists(texts, min_size=65, max_size=200),
    query=texts,
    limit=st.integers(1, 8),
    keep=st.integers(1, 7),
)
def test_dense_filters_past_the_kept_rows_stay_exact(
    docs: list[str], query: str, limit: int, keep: int
) -> None:
    """More rows than phase 1 keeps, small chunks, a filter rejecting most records:
    phase 2 must find the rest exactly."""
    old = dense_module._CHUNK
    dense_module._CHUNK = 16
    try:
        state = MemoryState(capacity=None, half_life=3600.0, scorer=DenseScorer(embedder=FAKE))
        for i, text in enumerate(docs):
            state.store(entry(f"{text} n{i % keep}"))
        state.publish()

        def accept(rec: Record) -> bool:
            return rec.entry.memory.endswith(" n0")

        index = state.index
        assert isinstance(index, DenseIndex)
        got = index.top_k(state.view(), query, limit, accept)
        want = [(s, r) for s, r in brute(state, query, len(docs)) if accept(r)][:limit]
        assert_same(got, want)
    finally:
        dense_module._CHUNK = old


async def test_hybrid_min_matched_filters_both_lists() -> None:
    scorer = HybridScorer(dense=DenseScorer(embedder=FAKE))
    async with open_memory(scorer=scorer) as memory:
        for t in ["red fox runs", "red dog", "blue cat sleeps", "red fox"]:
            await memory.store(entry(t))
        got = await memory.retrieve("red fox", 10, min_matched=2)
        assert sorted(e.memory for e in got) == ["red fox", "red fox runs"]
        everything = await memory.retrieve("red fox", 10)
        assert len(everything) == 4  # the dense list brings in every entry


async def test_store_many_is_embedded_ahead_in_one_call() -> None:
    calls: list[int] = []

    def counting(batch: Sequence[str]) -> Any:
        calls.append(len(batch))
        return hashed(batch)

    embedder = FunctionEmbedder(fn=counting, name="counting", dim=DIM)
    async with open_memory(scorer=DenseScorer(embedder=embedder)) as memory:
        await memory.store_many([entry(t) for t in ["red fox", "blue dog", "red fox", "cat"]])
        index = memory._state.index
        assert isinstance(index, DenseIndex)
        assert index.inline == 0
        assert calls == [3]


def test_loading_wordllama_leaves_the_root_logger_alone() -> None:
    """Importing wordllama adds a stderr handler to the root logger; `serve --scorer
    dense` then printed its log lines in another format (a reviewer's finding)."""
    import subprocess
    import sys

    pytest.importorskip("wordllama", reason="the dense extra is not installed")
    code = (
        "import logging\n"
        "from actormem._index.dense import wordllama_embedder\n"
        "wordllama_embedder()\n"
        "print(logging.getLogger().handlers, logging.getLogger().level)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"[] {logging.WARNING}"
