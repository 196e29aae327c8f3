"""HostedMemory: a memory in a thread of its own, used from asyncio, trio and plain threads."""

from __future__ import annotations

import asyncio
import sys
import threading
import uuid
from pathlib import Path

import pytest
import trio

from actormem import (
    ConsolidationStats,
    MemoryCategory,
    MemoryEntry,
    MemoryStatistics,
    ScoredEntry,
    StorageError,
    open_memory,
)
from actormem.client import HostedMemory, SyncHostedMemory

durable = pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl")


def fact(text: str, *tags: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_tags(*tags)


async def exercise(memory: HostedMemory) -> None:
    """Every async method once, checked against what was stored."""
    a, b = fact("deploys go to the blue cluster", "infra"), fact("lunch is at noon")
    await memory.store(a)
    await memory.store_many([b, fact("deploys go to the blue cluster")])
    assert len(memory) == 3
    assert await memory.get(a.id) == a
    assert await memory.get(uuid.uuid4()) is None
    hits = await memory.retrieve_scored("blue cluster deploys", 2, tags=["infra"])
    assert [type(h) for h in hits] == [ScoredEntry]
    assert hits[0].entry.id == a.id
    assert [e.id for e in await memory.retrieve("lunch noon", 1)] == [b.id]
    stats = await memory.consolidate()
    assert isinstance(stats, ConsolidationStats)
    assert stats.merged == 1
    assert await memory.delete(b.id)
    assert not await memory.delete(b.id)
    statistics = memory.statistics()
    assert isinstance(statistics, MemoryStatistics)
    assert statistics.entries == len(memory) == 1
    await memory.store(fact("in a namespace").with_namespace("team", "a"))
    assert [e.memory for e in await memory.list_entries(["team"])] == ["in a namespace"]
    assert await memory.list_namespaces(prefix=["team"]) == [("team", "a")]


def test_under_asyncio() -> None:
    async def main() -> None:
        async with HostedMemory() as memory:
            await exercise(memory)
            before = len(memory)
            # Many asyncio tasks at once: every store applied.
            await asyncio.gather(*(memory.store(fact(f"t{i}")) for i in range(100)))
            assert len(memory) == before + 100

    asyncio.run(main())


async def test_under_trio() -> None:
    async with HostedMemory() as memory:
        await exercise(memory)


def test_sync_face_from_many_threads() -> None:
    with HostedMemory(capacity=1000) as memory:
        sync = memory.sync
        assert isinstance(sync, SyncHostedMemory)
        errors: list[BaseException] = []

        def worker(k: int) -> None:
            try:
                for i in range(50):
                    sync.store(fact(f"w{k}-{i}"))
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(sync) == 200
        e = fact("sync path")
        sync.store_many([e])
        assert sync.get(e.id) == e
        assert sync.retrieve("sync path", 1)[0].id == e.id
        assert sync.retrieve_scored("sync path", 1)[0].entry.id == e.id
        assert sync.consolidate().pruned == 0
        assert sync.delete(e.id)
        assert sync.statistics().entries == 200
        with pytest.raises(TypeError, match="store_many"):
            sync.store_many([e, "not an entry"])  # type: ignore[list-item]
    with pytest.raises(trio.ClosedResourceError):
        sync.store(fact("after close"))
    assert len(memory) == 200  # as on a closed Memory: the last published count


def test_not_started_and_double_start() -> None:
    memory = HostedMemory()
    assert "not started" in repr(memory)
    with pytest.raises(trio.ClosedResourceError, match="not open"):
        memory.sync.store(fact("x"))
    memory.close()  # closing a never-started memory is harmless
    with pytest.raises(RuntimeError, match="already started"):
        memory.start()
    with HostedMemory() as other:
        assert "open" in repr(other)
        with pytest.raises(RuntimeError, match="already started"):
            other.start()
    other.close()  # idempotent


@durable
def test_durable_close_commits_and_joins(tmp_path: Path) -> None:
    db = tmp_path / "hosted.db"
    entries = [fact(f"d{i}") for i in range(30)]

    async def main() -> None:
        async with HostedMemory(path=db) as memory:
            await memory.store_many(entries[:20])
            for e in entries[20:]:
                await memory.store(e)

    asyncio.run(main())
    assert not [t for t in threading.enumerate() if t.name == "actormem hosted memory"]

    async def reopen() -> list[str]:
        async with open_memory(path=db) as memory:
            return [e.memory for e in memory.snapshot()]

    assert trio.run(reopen) == [e.memory for e in entries]


@durable
def test_open_errors_reach_the_caller(tmp_path: Path) -> None:
    db = tmp_path / "held.db"
    with HostedMemory(path=db), pytest.raises(StorageError, match="held"):
        HostedMemory(path=db).start()
    with pytest.raises(TypeError, match="capacity"):
        HostedMemory(capacity="ten").start()  # type: ignore[arg-type]
