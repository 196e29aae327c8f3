"""An embedder that fails never kills the memory's owner: the stores that needed its
vectors get EmbeddingError, nothing acknowledged is lost, the memory stays usable, and a
later store calls the embedder again."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from actormem import (
    ActorMemError,
    DenseScorer,
    EmbeddingError,
    FunctionEmbedder,
    HostedMemory,
    HybridScorer,
    MemoryCategory,
    MemoryEntry,
    open_memory,
)
from actormem._index import dense as dense_module
from actormem._index.dense import DenseIndex

from .test_dense import DIM, hashed


class Flaky:
    """Fails (as ``mode`` says) on any batch with a text containing "boom" while
    ``broken``; counts its calls."""

    def __init__(self, mode: str = "raise") -> None:
        self.broken = True
        self.mode = mode
        self.calls = 0

    def __call__(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.broken and any("boom" in t for t in texts):
            if self.mode == "raise":
                raise RuntimeError("model crashed")
            if self.mode == "cancelled":
                raise asyncio.CancelledError
            if self.mode == "shape":
                return np.zeros((len(texts), DIM + 1), np.float32)
            return np.full((len(texts), DIM), np.nan, np.float32)
        return hashed(texts)


def entry(text: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text)


def test_embedding_error_is_public_and_a_runtime_error() -> None:
    assert issubclass(EmbeddingError, ActorMemError)
    assert issubclass(EmbeddingError, RuntimeError)


@pytest.mark.parametrize("mode", ["raise", "cancelled", "shape", "nan"])
@pytest.mark.parametrize("inline_chars", [0, 1_000_000])  # worker thread / on the owner
async def test_failed_stores_get_embedding_error_and_the_memory_goes_on(
    mode: str, inline_chars: int
) -> None:
    flaky = Flaky(mode)
    scorer = HybridScorer(
        dense=DenseScorer(
            embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM),
            inline_chars=inline_chars,
        )
    )
    async with open_memory(scorer=scorer) as memory:
        await memory.store(entry("red fox"))
        with pytest.raises(EmbeddingError, match="nothing stored") as info:
            await memory.store(entry("boom goes the model"))
        assert info.value.__cause__ is not None or mode in ("shape", "nan")
        with pytest.raises(EmbeddingError):
            await memory.store_many([entry("blue dog"), entry("boom again")])
        assert len(memory) == 1  # the store_many stored nothing, not even "blue dog"
        await memory.store(entry("green cat"))  # the memory is fine
        assert [e.memory for e in await memory.retrieve("red fox", 1)] == ["red fox"]
        with pytest.raises(EmbeddingError):
            await memory.retrieve("boom", 1)  # the query's embedding, in the caller
        flaky.broken = False  # the model recovered: a later store embeds again
        await memory.store(entry("boom goes the model"))
        assert sorted(e.memory for e in memory.snapshot()) == [
            "boom goes the model",
            "green cat",
            "red fox",
        ]
        index = memory._state.index
        assert index.dense.inline == 0
        index._check(memory._state.view().records())


async def test_a_failed_embedding_fails_only_the_stores_that_needed_it() -> None:
    """One batch: a good store, a store whose text is already indexed, a failing store
    and a delete, queued together; only the failing store is refused."""
    flaky = Flaky()
    scorer = DenseScorer(embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM))
    async with open_memory(scorer=scorer) as memory:
        first = entry("known text")
        doomed = entry("doomed")
        await memory.store_many([first, doomed])
        outcomes: dict[str, BaseException | None] = {}

        async def run(name: str, coro: Any) -> None:
            try:
                await coro
                outcomes[name] = None
            except EmbeddingError as exc:
                outcomes[name] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "boom", memory.store(entry("boom")))
            nursery.start_soon(run, "known", memory.store(entry("known text")))
            nursery.start_soon(run, "delete", memory.delete(doomed.id))
            memory.store_nowait(entry("boom nowait"))  # dropped: nobody waits for it
        assert outcomes["known"] is None
        assert outcomes["delete"] is None
        assert isinstance(outcomes["boom"], EmbeddingError)
        assert sorted(e.memory for e in memory.snapshot()) == ["known text", "known text"]


async def test_acknowledged_stores_survive_a_failing_embedder(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    flaky = Flaky()
    scorer = DenseScorer(embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM))
    async with open_memory(path=db, scorer=scorer) as memory:
        await memory.store(entry("kept one"))
        with pytest.raises(EmbeddingError):
            await memory.store(entry("boom"))
        await memory.store(entry("kept two"))
    async with open_memory(path=db, scorer=scorer) as memory:
        assert sorted(e.memory for e in memory.snapshot()) == ["kept one", "kept two"]


async def test_a_file_whose_vectors_cannot_be_made_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    async with open_memory(path=db) as memory:
        await memory.store(entry("boom in the file"))
    flaky = Flaky()
    scorer = DenseScorer(embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM))
    with pytest.raises(EmbeddingError):
        async with open_memory(path=db, scorer=scorer):
            pass  # pragma: no cover
    flaky.broken = False
    async with open_memory(path=db, scorer=scorer) as memory:
        assert [e.memory for e in memory.snapshot()] == ["boom in the file"]


async def test_a_batch_of_more_texts_than_the_cache_holds_is_embedded_ahead(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """More new texts in one store_many than ``_OFFER_MAX``: every vector is still made
    ahead of time (none inline on the owner), in calls of ``_EMBED_CHUNK`` texts."""
    monkeypatch.setattr(dense_module, "_OFFER_MAX", 8)
    monkeypatch.setattr(dense_module, "_EMBED_CHUNK", 16)
    sizes: list[int] = []

    def counting(texts: Sequence[str]) -> Any:
        sizes.append(len(texts))
        return hashed(texts)

    scorer = DenseScorer(embedder=FunctionEmbedder(fn=counting, name="c", dim=DIM))
    async with open_memory(scorer=scorer) as memory:
        await memory.store_many([entry(f"text number {i}") for i in range(50)])
        index = memory._state.index
        assert isinstance(index, DenseIndex)
        assert index.inline == 0
        assert sizes == [16, 16, 16, 2]
        assert index.statistics()["offered"] == 0
        index._check(memory._state.view().records())
        assert len(memory) == 50


async def test_cancelling_the_owner_does_not_wait_for_a_slow_embedder() -> None:
    entered = threading.Event()
    release = threading.Event()
    finished = threading.Event()

    def slow(texts: Sequence[str]) -> Any:
        entered.set()
        release.wait(30)
        finished.set()
        return hashed(texts)

    scorer = DenseScorer(embedder=FunctionEmbedder(fn=slow, name="slow", dim=DIM), inline_chars=0)
    try:
        with trio.CancelScope() as scope:
            async with open_memory(scorer=scorer) as memory, trio.open_nursery() as nursery:
                nursery.start_soon(memory.store, entry("a long text"))
                await trio.to_thread.run_sync(entered.wait, 30)
                scope.cancel()
        assert not finished.is_set()  # out while the embedder still runs (abandoned)
        assert memory._closed
        assert memory._broken is None
    finally:
        release.set()


def test_hosted_memory_reports_embedding_errors_to_asyncio_callers() -> None:
    flaky = Flaky("cancelled")  # asyncio.CancelledError from the embedder's own loop
    scorer = DenseScorer(embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM))

    async def main() -> list[str]:
        async with HostedMemory(scorer=scorer) as memory:
            await memory.store(entry("red fox"))
            with pytest.raises(EmbeddingError):
                await memory.store(entry("boom"))
            await memory.store(entry("blue dog"))
            return sorted(e.memory for e in await memory.retrieve("fox dog", 5))

    assert asyncio.run(main()) == ["blue dog", "red fox"]


async def test_the_server_answers_503_when_the_embedder_fails() -> None:
    import httpx

    from actormem.server import create_app

    flaky = Flaky()
    scorer = DenseScorer(embedder=FunctionEmbedder(fn=flaky, name="flaky", dim=DIM))
    async with open_memory(scorer=scorer) as memory:
        transport = httpx.ASGITransport(app=create_app(memory))
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            response = await http.post("/v1/entries", json={"category": "fact", "memory": "boom"})
            assert response.status_code == 503
            assert response.headers["content-type"] == "application/problem+json"
            detail = response.json()["detail"]
            assert detail.startswith("the embedder failed, nothing was stored: the embedder")
            assert detail.count("nothing") == 1
            ok = await http.post("/v1/entries", json={"category": "fact", "memory": "fine"})
            assert ok.status_code < 300
            response = await http.post("/v1/retrieve", json={"query": "boom", "limit": 3})
            assert response.status_code == 503
            detail = response.json()["detail"]
            assert detail.startswith("the embedder failed on the query: the embedder")
            assert "stored" not in detail
        assert [e.memory for e in memory.snapshot()] == ["fine"]


async def test_replica_nodes_survive_a_failing_embedder(pg_dsn: str) -> None:
    """Replication: a node's own store whose text cannot be embedded fails before it
    reaches the log; a node that cannot embed another node's record lags, stays usable,
    and applies it once its embedder works again."""
    from actormem._engine.replica import ReplicaOptions

    fast = ReplicaOptions(
        log_timeout=2.0, poll_interval=0.05, access_interval=0.1, heartbeat_interval=0.1
    )
    good = FunctionEmbedder(fn=hashed, name="h", dim=DIM)
    flaky = Flaky()
    bad = FunctionEmbedder(fn=flaky, name="h", dim=DIM)
    async with (
        open_memory(log=pg_dsn, name="m", log_options=fast, scorer=DenseScorer(embedder=good)) as a,
        open_memory(log=pg_dsn, name="m", log_options=fast, scorer=DenseScorer(embedder=bad)) as b,
    ):
        with pytest.raises(EmbeddingError):
            await b.store(entry("boom from b"))
        seq = await b.store(entry("fine from b"))
        assert isinstance(seq, int)
        await a.wait_applied(seq)
        assert [e.memory for e in a.snapshot()] == ["fine from b"]  # nothing of "boom"
        seq = await a.store(entry("boom from a"))  # a embeds it; b cannot
        assert isinstance(seq, int)
        with trio.move_on_after(0.5):
            await b.wait_applied(seq)
        assert (b.statistics().log_applied_seq or 0) < seq  # b lags, but lives
        assert [e.memory for e in await b.retrieve("fine", 5)] == ["fine from b"]
        flaky.broken = False
        await b.wait_applied(seq)  # the next poll embeds and applies it
        assert sorted(e.memory for e in b.snapshot()) == ["boom from a", "fine from b"]
        assert b._state.index.inline == 0
