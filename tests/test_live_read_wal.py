"""A live read (``open_live_copy``: a file a running memory holds, read without its lock)
when the running memory's write-ahead log is still empty. ``immutable=1`` tells SQLite
that nobody changes the file, so the reader takes no lock; but the running memory may
commit and checkpoint into the main file while the read is under way, and the read then
mixes two states of the file. A live read must therefore use a plain read-only
connection (whose read mark keeps a checkpoint off the pages it still reads) whenever a
``-wal`` file exists, empty or not."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine.live import open_live_copy
from actormem._storage import sqlite_format


async def _fill(path: str, n: int) -> None:
    async with open_memory(path=path) as memory:
        await memory.store_many(
            [MemoryEntry.new(MemoryCategory.FACT, f"original {i} " + "x" * 4000) for i in range(n)]
        )


async def _live_texts(path: str) -> list[str]:
    async with open_live_copy(path) as copy:
        entries = await copy.list_entries((), limit=100_000)
        return [e.memory for e in entries]


def test_live_read_with_an_empty_wal_is_one_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "m.sqlite")
    trio.run(_fill, path, 800)  # 3.2 MB: more than SQLite's page cache (2 MB)
    # The running memory's connection: it has read the file, so its -wal exists, empty.
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        writer.execute("SELECT count(*) FROM entries").fetchone()
        assert os.path.getsize(path + "-wal") == 0
        # Read in Python, 50 rows a batch; after the first batch the writer commits a
        # change to every row and checkpoints it into the main file.
        monkeypatch.setattr(sqlite_format, "_C_ROWS", False)
        monkeypatch.setattr(sqlite_format, "_FETCH_ROWS", 50)
        decode = sqlite_format.decode_rows
        calls = []

        def decode_then_write(*args: Any) -> Any:
            if not calls:
                writer.execute("UPDATE entries SET memory = 'changed ' || seq")
                writer.execute("PRAGMA wal_checkpoint(PASSIVE)")
            calls.append(1)
            return decode(*args)

        monkeypatch.setattr(sqlite_format, "decode_rows", decode_then_write)
        texts = trio.run(_live_texts, path)
    finally:
        writer.close()
    assert len(texts) == 800
    assert all(t.startswith("original") for t in texts), sorted({t.split()[0] for t in texts})
