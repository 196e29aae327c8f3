"""Review 18c of branch durable10: the WAL estimate (``frames_of``) that decides when a
store taking its own checkpoints checkpoints must not fall short of the frames SQLite
writes, whatever the rows hold, or the WAL grows far past ``CHECKPOINT_FRAMES``."""

from __future__ import annotations

import threading
from itertools import pairwise
from pathlib import Path

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage.sqlite import Batch

from .test_durable10 import _wal_frames


def _watch(path: Path, store: object, seen: list[tuple[int, int]]) -> None:
    """Record (frames SQLite wrote since the last checkpoint, the store's estimate)
    after each commit, on the loop or in the thread."""
    write_inline, write = store.write_inline, store.write  # type: ignore[attr-defined]
    lock = threading.Lock()

    def inline(batch: Batch) -> bool:
        done = write_inline(batch)
        seen.append((_wal_frames(path), store.wal_frames))  # type: ignore[attr-defined]
        return bool(done)

    def threaded(batch: Batch) -> None:
        write(batch)
        with lock:
            seen.append((_wal_frames(path), store.wal_frames))  # type: ignore[attr-defined]

    store.write_inline = inline  # type: ignore[attr-defined]
    store.write = threaded  # type: ignore[attr-defined]


def test_estimate_covers_non_ascii_texts_values_and_first_accesses(tmp_path: Path) -> None:
    # Texts of 3-byte characters (CJK), JSON values of 40 KB, then each row's first
    # access (its size changes, so SQLite rewrites its overflow pages), then deletes of
    # such rows: the estimate counted characters, not bytes, nothing of the value, one
    # page an access or a delete, and a long row's bytes as if packed with the others.
    path = tmp_path / "m.db"
    seen: list[tuple[int, int]] = []

    async def main() -> None:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            _watch(path, store, seen)
            for at in range(0, 24, 8):
                await memory.store_many(
                    [
                        MemoryEntry(
                            memory=f"alpha{i} beta " + "中" * 12_000,
                            category=MemoryCategory.FACT,
                            value={"blob": "x" * 40_000},
                        )
                        for i in range(at, at + 8)
                    ]
                )
            for _ in range(4):
                await memory.retrieve("beta", 24)
            for hit in await memory.retrieve("beta", 6):
                await memory.delete(hit.id)  # SECURE_DELETE (Debian's SQLite) zeroes its pages

    trio.run(main)
    assert len(seen) >= 4
    assert all(actual <= estimate for actual, estimate in seen), seen
    # And commit by commit (between checkpoints): each batch's own frames are covered.
    steps = [(a1 - a0, e1 - e0) for (a0, e0), (a1, e1) in pairwise(seen) if e1 >= e0]
    assert all(actual <= estimate for actual, estimate in steps), steps
