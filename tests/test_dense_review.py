"""Fixes from the review of the dense and hybrid scorers (issue #18)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from actormem import (
    DenseScorer,
    FunctionEmbedder,
    HybridScorer,
    open_memory,
)
from actormem.cli._main import main
from tests.setups import fact


def other_model(texts: Sequence[str]) -> Any:
    out = np.zeros((len(texts), 8), np.float32)
    out[:, 0] = 1.0
    out[:, 1] = [len(t) % 7 for t in texts]
    return out


def sha256_of(*paths: Path) -> list[str | None]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths]


def make_file(path: Path, scorer: Any) -> None:
    async def run() -> None:
        async with open_memory(path=path, scorer=scorer) as memory:
            await memory.store_many(
                [fact("deploys go to the blue cluster"), fact("cats are nice").with_tag("pets")]
            )

    trio.run(run)


@pytest.mark.parametrize("made_with", ["other-model", "no-vectors"])
@pytest.mark.parametrize("scorer", ["dense", "hybrid"])
def test_query_leaves_the_file_byte_identical(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, made_with: str, scorer: str
) -> None:
    db = tmp_path / "m.sqlite"
    if made_with == "other-model":
        emb = FunctionEmbedder(fn=other_model, name="other", dim=8)
        make_file(db, DenseScorer(embedder=emb))
    else:
        make_file(db, None)
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
    before = sha256_of(*files)
    assert main(["query", str(db), "the blue cluster", "--scorer", scorer]) == 0
    out, _ = capsys.readouterr()
    assert "deploys go to the blue cluster" in out
    assert sha256_of(*files) == before


def thread_recording(threads: list[int]) -> FunctionEmbedder:
    import threading

    def fn(texts: Sequence[str]) -> Any:
        threads.append(threading.get_ident())
        return other_model(texts)

    return FunctionEmbedder(fn=fn, name="recording", dim=8)


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_a_custom_embedder_never_runs_on_the_event_loop(kind: str) -> None:
    import threading

    threads: list[int] = []
    dense = DenseScorer(embedder=thread_recording(threads))
    scorer = dense if kind == "dense" else HybridScorer(dense=dense)

    async def run() -> None:
        async with open_memory(scorer=scorer) as memory:
            await memory.store(fact("short text"))
            await memory.store_many([fact("one"), fact("two")])
            assert [e.memory for e in await memory.retrieve("short", 1)] == ["short text"]
            await memory.retrieve_scored("one", 2, min_score=-1.0)

    trio.run(run)
    assert len(threads) == 4
    assert threading.get_ident() not in threads


def test_the_builtin_model_embeds_short_texts_inline_only() -> None:
    from actormem._index.dense import DenseIndex, wordllama_embedder

    index = DenseIndex(wordllama_embedder(), 2048)
    assert index.builtin
    assert index.inline_ok(["short", "texts"])
    assert not index.inline_ok(["x" * 2048])
    custom = DenseIndex(FunctionEmbedder(fn=other_model, name="x", dim=8), 2048)
    assert not custom.builtin
    assert not custom.inline_ok(["short"])


def test_a_long_query_is_embedded_in_a_worker_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from actormem._index.dense import DenseIndex

    where: list[tuple[int, int]] = []
    embed = DenseIndex.embed

    def recording(self: DenseIndex, texts: Sequence[str]) -> Any:
        where.append((threading.get_ident(), sum(map(len, texts))))
        return embed(self, texts)

    monkeypatch.setattr(DenseIndex, "embed", recording)

    async def run() -> None:
        async with open_memory(scorer=HybridScorer()) as memory:
            await memory.store(fact("deploys go to the blue cluster"))
            where.clear()
            await memory.retrieve("blue " * 1000, 1)
            await memory.retrieve("blue", 1)

    trio.run(run)
    main_thread = threading.get_ident()
    assert [(t != main_thread, n) for t, n in where] == [(True, 5000), (False, 4)]


def test_mentioned_dates_are_read_from_a_bounded_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    from actormem._index import dates

    filler = "word " * (dates.MENTION_CHARS // 5)
    assert dates.mentioned_periods("on 8 May, 2023 " + filler) == (dates.Period(2023, 5, 8),)
    assert dates.mentioned_periods(filler + " on 8 May, 2023") == ()
    scanned: list[int] = []
    pattern = dates._DATE

    class Counting:
        def finditer(self, text: str) -> Any:
            scanned.append(len(text))
            return pattern.finditer(text)

    monkeypatch.setattr(dates, "_DATE", Counting())
    for size in (10_000, 100_000, 1_000_000):
        dates.mentioned_periods("2023 " * (size // 5))
    assert scanned == [dates.MENTION_CHARS] * 3


def test_an_entry_with_dates_past_the_bound_gets_no_bonus_for_them() -> None:
    from actormem._index.dates import MENTION_CHARS, Period
    from actormem._index.hybrid import _entry_mentions
    from actormem._record import Record

    text = "x " * MENTION_CHARS + "on 8 May, 2023"
    entry = fact(text).with_tag("seen 9 May, 2023")
    rec = Record(entry, 1, 1)
    assert _entry_mentions(rec) == (Period(2023, 5, 9),)


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_a_larger_hybrid_limit_only_appends(fusion: str) -> None:
    import random

    rnd = random.Random(7)
    words = "blue green red cluster deploy cat dog sofa May 2023 June lunch plan trip".split()
    texts = [" ".join(rnd.choices(words, k=rnd.randint(1, 6))) + f" n{i}" for i in range(300)]
    queries = [" ".join(rnd.choices(words, k=rnd.randint(1, 4))) for _ in range(25)]
    scorer = HybridScorer(fusion=fusion, depth=6)

    async def run() -> None:
        async with open_memory(scorer=scorer) as memory:
            await memory.store_many([fact(t) for t in texts])
            for q in queries:
                runs = [await memory.retrieve_scored(q, k) for k in (3, 6, 7, 20, 80, 400)]
                assert len(runs[-1]) > 80
                for small, large in zip(runs, runs[1:], strict=False):
                    assert [(h.entry.id, h.score) for h in small] == [
                        (h.entry.id, h.score) for h in large[: len(small)]
                    ], q
                scores = [h.score for h in runs[-1]]
                assert scores == sorted(scores, reverse=True)

    trio.run(run)


def test_the_langgraph_adapter_embeds_only_the_indexed_text() -> None:
    pytest.importorskip("langgraph")
    from actormem.integrations.langgraph import ActormemStore

    store = ActormemStore(index={"fields": ["text"]})
    try:
        value = {"text": "the cat is sleeping on the sofa"}
        store.put(("u",), "default", value)
        store.put(("u",), "explicit", value, index=["text"])
        for query in ["a feline resting", "index", "langgraph"]:
            scores = {i.key: i.score for i in store.search(("u",), query=query)}
            assert scores["default"] == pytest.approx(scores["explicit"], abs=1e-6), query
    finally:
        store.close()


def test_bookkeeping_tags_are_not_part_of_the_dense_document() -> None:
    from actormem._index.dense import entry_document

    assert entry_document(fact("text").with_tag("langgraph:index:text")) == "text"
    assert entry_document(fact("text").with_tag("pets").with_tag("langgraph:noindex")) == (
        "text pets"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_hooks_refuse_a_min_score_that_is_not_finite(bad: float) -> None:
    from actormem import MemoryHooks

    async def run() -> None:
        async with open_memory() as memory:
            with pytest.raises(ValueError, match="min_score must be finite"):
                MemoryHooks(memory, min_score=bad)

    trio.run(run)


def test_hooks_refuse_min_matched_with_a_dense_memory() -> None:
    from actormem import MemoryHooks

    emb = FunctionEmbedder(fn=other_model, name="other", dim=8)

    async def run() -> None:
        async with open_memory(scorer=DenseScorer(embedder=emb)) as memory:
            with pytest.raises(ValueError, match="min_matched needs a scorer"):
                MemoryHooks(memory, min_matched=1)
            MemoryHooks(memory, min_score=0.5)
        async with open_memory(scorer=HybridScorer(dense=DenseScorer(embedder=emb))) as memory:
            MemoryHooks(memory, min_matched=1)

    trio.run(run)


@pytest.mark.parametrize("dims", [256.0, True, "256", 100])
def test_langgraph_store_refuses_bad_dims(dims: Any) -> None:
    pytest.importorskip("langgraph")
    from actormem.integrations.langgraph import ActormemStore

    with pytest.raises(ValueError, match="'dims' must be one of those"):
        ActormemStore(index={"dims": dims, "fields": ["text"]})


def test_hybrid_scorer_checks_its_parts_and_depth() -> None:
    from actormem import BM25Scorer

    with pytest.raises(TypeError):
        HybridScorer(bm25=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        HybridScorer(dense=BM25Scorer())  # type: ignore[arg-type]
    for bad in (0.5, 200.0, True, "3"):
        with pytest.raises(TypeError, match="depth must be an int"):
            HybridScorer(depth=bad)  # type: ignore[arg-type]
    for bad in (0, -1, 2**70, 1_000_001):
        with pytest.raises(ValueError, match="depth must be in"):
            HybridScorer(depth=bad)
    assert HybridScorer(depth=1_000_000).depth == 1_000_000
