"""Memory.store_many: one request, applied in order in one batch, checked before queueing."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import attrs
import pytest
import trio

from actormem import InvalidEntryError, Memory, open_memory
from tests.setups import fact


async def test_stores_in_order_as_one_request() -> None:
    entries = [fact(f"e{i}") for i in range(50)]
    async with open_memory() as memory:
        await memory.store_many(entries)
        assert [e.memory for e in memory.snapshot()] == [f"e{i}" for i in range(50)]
        assert memory.statistics().stores == 50
        memory._state._check()


async def test_nothing_is_applied_in_the_middle_of_a_list() -> None:
    lists = [[fact(f"l{k}-{i}") for i in range(30)] for k in range(4)]
    async with open_memory() as memory:
        async with trio.open_nursery() as nursery:
            for k in range(4):
                nursery.start_soon(memory.store_many, lists[k])
                for j in range(5):
                    nursery.start_soon(memory.store, fact(f"single{k}-{j}"))
        texts = [e.memory for e in memory.snapshot()]
    assert len(texts) == 4 * 30 + 4 * 5
    for k in range(4):
        start = texts.index(f"l{k}-0")
        assert texts[start : start + 30] == [f"l{k}-{i}" for i in range(30)]


async def test_equals_the_same_stores_one_by_one() -> None:
    base = [fact(f"x{i}") for i in range(6)]
    again = base[2].with_tags("upserted")  # same id later in the list: an upsert
    listing = [*base, again, fact("new")]
    async with open_memory(capacity=5) as one, open_memory(capacity=5) as many:
        for e in listing:
            await one.store(e)
        await many.store_many(iter(listing))  # any iterable, read once
        assert list(one.snapshot()) == list(many.snapshot())
        assert one.statistics().evictions == many.statistics().evictions
        assert one.statistics().upserts == many.statistics().upserts == 1
        many._state._check()


async def test_empty_list_is_answered() -> None:
    async with open_memory() as memory:
        await memory.store_many([])
        assert len(memory) == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (fact("one"), "not one MemoryEntry"),
        ("text", "not one str"),
        (42, "not int"),
        ([fact("ok"), "no"], r"entries\[1\] is a str"),
    ],
)
async def test_bad_input_stores_nothing(bad: object, message: str) -> None:
    async with open_memory() as memory:
        with pytest.raises(TypeError, match=message):
            await memory.store_many(bad)  # type: ignore[arg-type]
        assert len(memory) == 0
        assert memory.statistics().snapshot_version == 0


async def test_closed_memory_refuses() -> None:
    async with open_memory() as memory:
        pass
    with pytest.raises(trio.ClosedResourceError):
        await memory.store_many([fact("late")])


@pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock")
async def test_durable_list_is_one_commit_and_checked_first(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    entries = [fact(f"d{i}") for i in range(40)]
    async with open_memory(path=db) as memory:
        await memory.store_many(entries)
        assert memory._storage is not None
        assert memory._storage.commits == 1
        too_big = attrs.evolve(entries[0], access_count=2**63)
        with pytest.raises(InvalidEntryError):
            await memory.store_many([fact("fine"), too_big])
        assert len(memory) == 40
    async with open_memory(path=db) as memory:
        assert [e.memory for e in memory.snapshot()] == [f"d{i}" for i in range(40)]
        assert isinstance(memory, Memory)
        assert await memory.get(uuid.uuid4()) is None
