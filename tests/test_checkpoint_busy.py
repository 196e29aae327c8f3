"""A PASSIVE checkpoint that could not run (another connection was checkpointing: SQLite
answers ``(1, -1, -1)``) leaves the WAL's frame count as it was, beside the writer and
after a commit alike, and a checkpoint whose thread could not be started is not left
marked as running (both found by review19c)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Durability, SqliteStore


class _Busy:
    """A connection whose checkpoint finds another one running."""

    def execute(self, sql: str) -> Any:
        assert sql == "PRAGMA wal_checkpoint(PASSIVE)"
        return self

    def fetchone(self) -> tuple[int, int, int]:
        return (1, -1, -1)

    def close(self) -> None:
        pass


def test_a_busy_checkpoint_beside_keeps_the_count(tmp_path: Path) -> None:
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        real = store._beside
        store._beside = _Busy()  # type: ignore[assignment]
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES + 5
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert store.checkpoint_due()  # not run: due again, the count kept
        assert store.wal_frames == sqlite_store.CHECKPOINT_FRAMES + 5
        assert store.checkpoints == 0
        store._beside = real
    finally:
        store.close()


def test_a_busy_checkpoint_after_a_commit_keeps_the_count(tmp_path: Path) -> None:
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.wal_frames = 1234
        store._checkpoint(_Busy())  # type: ignore[arg-type]
        assert (store.wal_frames, store.checkpoints) == (1234, 0)
    finally:
        store.close()


def test_left_after_reads_the_pragma() -> None:
    assert sqlite_store._left_after(-1, -1) is None
    assert sqlite_store._left_after(10, -1) is None
    assert sqlite_store._left_after(10, 4) == 6
    assert sqlite_store._left_after(10, 10) == 0
    assert sqlite_store._left_after(3, 10) == 0


def test_a_checkpoint_thread_that_cannot_start_is_not_left_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 4)
    starts: list[int] = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        starts.append(1)
        raise RuntimeError("can't start new thread")

    async def main() -> list[bool]:
        running = []
        async with open_memory(path=tmp_path / "m.db") as memory:
            store = memory._storage
            assert store is not None
            monkeypatch.setattr(trio.lowlevel, "start_thread_soon", refuse)
            for i in range(30):  # every store acknowledged, though no thread starts
                entry = MemoryEntry(category=MemoryCategory.FACT, memory=f"m{i} " * 200)
                await memory.store(entry)
                running.append(store._beside_running)
            monkeypatch.undo()
            assert sum(1 for _ in memory.snapshot()) == 30
        return running

    running = trio.run(main)
    assert len(starts) > 1  # tried again after the first failure
    assert not any(running)
