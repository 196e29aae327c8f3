"""A closed durable memory is freed by reference counting (review32a).

Before, the commit path's closures and the memory referred to each other (the memory
held ``_commit``, the closures the memory), so every closed durable memory, with its
state, indexes and entries, stayed until a full collection; after the load of a file of
10,000 entries or more, ``gc.freeze()`` put it in the oldest generation, which no
collection reached: +12.6 MB a reopen of a 20k-entry file, without bound.
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import trio

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store


def _entries(n: int, tag: str) -> list[MemoryEntry]:
    return [MemoryEntry.new(MemoryCategory.FACT, f"{tag} entry {k} about words") for k in range(n)]


@pytest.mark.parametrize("scorer", [None, "bm25"])
@pytest.mark.parametrize("durability", ["normal", "full"])
def test_closed_durable_memory_is_freed_without_a_collection(
    tmp_path: Path, scorer: str | None, durability: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Checkpoints beside the writer after every few frames: their threads' callbacks
    # (the idle checkpoints' start) run too.
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 4, raising=False)
    # The access updates' timer (a system task) holds the memory until they are due,
    # ACCESS_DELAY after the retrieve: a hold of a second, not a cycle.
    monkeypatch.setattr(sqlite_store, "ACCESS_DELAY", 0.01)
    path = tmp_path / "m.db"

    def make() -> BM25Scorer | None:
        return BM25Scorer() if scorer else None

    async def main() -> None:
        async with open_memory(path=path, scorer=make(), durability=durability) as m:
            await m.store_many(_entries(300, "first"))
        gc.collect()
        gc.disable()
        try:
            async with open_memory(path=path, scorer=make(), durability=durability) as m:
                for k in range(20):
                    await m.store(MemoryEntry.new(MemoryCategory.FACT, f"later {k}"))
                assert len(await m.retrieve("entry words", 5)) == 5
            ref = weakref.ref(m)
            del m
            await trio.sleep(0.2)  # the checkpoint threads' callbacks and the access timer ran
            assert ref() is None, [type(r).__name__ for r in gc.get_referrers(ref())]
        finally:
            gc.enable()

    trio.run(main)


def test_closed_memory_in_memory_is_freed_without_a_collection() -> None:
    async def main() -> None:
        gc.collect()
        gc.disable()
        try:
            async with open_memory() as m:
                await m.store_many(_entries(50, "mem"))
            ref = weakref.ref(m)
            del m
            await trio.lowlevel.checkpoint()
            assert ref() is None
        finally:
            gc.enable()

    trio.run(main)
