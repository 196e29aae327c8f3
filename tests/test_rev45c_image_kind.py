"""Review rev45c: ``sqlite_format.image_kind`` on a WAL-mode file and on forged headers.

- A closed WAL-mode file (no ``-wal``): the read left a ``-wal`` and a ``-shm`` beside it
  (a plain ``mode=ro`` open); now nothing is created.
- A header stored as an INTEGER: ``bytes(n)`` allocated n bytes (MemoryError from 2**40);
  a too deeply nested JSON header raised RecursionError. Both are None now.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import trio

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, open_memory
from actormem._storage.sqlite_format import image_kind


def test_a_closed_wal_file_gets_no_side_file(tmp_path: Path) -> None:
    path = tmp_path / "m ?#.db"

    async def run() -> None:
        async with open_memory(path=path, scorer=BM25Scorer()) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploy blue"))

    trio.run(run)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert image_kind(path) == "bm25"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    raw = tmp_path / "raw.db"
    with sqlite3.connect(raw) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
        conn.execute("INSERT INTO index_image VALUES ('header', ?)", (b'{"kind": "bm25"}',))
    conn.close()
    before = sorted(p.name for p in tmp_path.iterdir())
    assert image_kind(raw) == "bm25"
    assert sorted(p.name for p in tmp_path.iterdir()) == before


@pytest.mark.parametrize("data", [2**40, 2**62, b"[" * 100_000, b'{"kind": ' * 50_000])
def test_forged_headers_are_none(tmp_path: Path, data: object) -> None:
    path = tmp_path / "forged.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
        conn.execute("INSERT INTO index_image VALUES ('header', ?)", (data,))
    conn.close()
    assert image_kind(path) is None


def test_a_symlink_reads_the_wal_beside_its_target(tmp_path: Path) -> None:
    """SQLite keeps the -wal beside the link's target; ``read_only_uri`` looked for one
    beside the link, found none and read the file ``immutable`` (the WAL ignored)."""
    target = tmp_path / "m.db"
    writer = sqlite3.connect(target, isolation_level=None)
    try:
        writer.execute("PRAGMA journal_mode=WAL")
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
        writer.execute("INSERT INTO index_image VALUES ('header', ?)", (b'{"kind": "bm25"}',))
        assert (tmp_path / "m.db-wal").stat().st_size > 0  # the header is in the WAL only
        link = tmp_path / "link.db"
        link.symlink_to(target.name)
        assert image_kind(target) == "bm25"
        assert image_kind(link) == "bm25"
    finally:
        writer.close()
