"""review19c: the WAL estimate (``sqlite.frames_of`` over ``SqliteStore.prepare``'s
batch) is never below the frames SQLite appends, for rows long enough to spill into
overflow pages: an access update that changes a long row's record size (its first
access sets ``last_accessed``, the count's integer widens) makes SQLite build the row
anew, a new overflow chain beside the old one, which it frees (zeroed: secure delete);
an entry stored again under its id (death and birth of one seq) frees the old row's
chain the same way. Both counted the new row's pages only."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch

from .test_durable10 import _wal_frames


def _entry(i: int, text: str) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i), category=MemoryCategory.FACT, memory=f"word{i} " + text
    )


@pytest.mark.parametrize("page", [4096, 8192])
def test_estimate_covers_long_rows_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    monkeypatch.setattr(sqlite_store, "_PAGE_SIZE", page)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 10**9)  # none: the WAL grows
    path = tmp_path / "m.db"
    seen: list[tuple[str, int, int]] = []

    async def main() -> None:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            write_inline, write = store.write_inline, store.write
            before = [_wal_frames(path)]

            def record(batch: Batch) -> None:
                now = _wal_frames(path)
                seen.append((step, now - before[0], sqlite_store.frames_of(batch, page)))
                before[0] = now

            def inline(batch: Batch) -> bool:
                done = write_inline(batch)
                if done:
                    record(batch)
                return done

            def threaded(batch: Batch) -> None:
                write(batch)
                record(batch)

            store.write_inline = inline  # type: ignore[method-assign]
            store.write = threaded  # type: ignore[method-assign]
            step = "store"
            for i in range(1, 4):
                await memory.store(_entry(i, "x" * 40000))
            step = "access"
            for _ in range(3):  # first access, count 1 -> 2, 2 -> 3
                await memory.retrieve("word2", 1)
            step = "store again, shorter"
            await memory.store(_entry(3, "y" * 5000))
            step = "store again, longer"
            await memory.store(_entry(1, "é" * 30000))

    trio.run(main)
    assert [s for s in seen if s[1] > s[2]] == []
