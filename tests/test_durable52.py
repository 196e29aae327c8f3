"""Branch durable52: a commit of the compiled writer counts the WAL frames it appended
as SQLite tells them (``Writer.frames``: the pages its pager wrote,
``SQLITE_DBSTATUS_CACHE_WRITE``), not by ``frames_of``' estimate
(``sqlite._REAL_FRAMES``).

* ``Writer.frames`` after each commit equals the frames the WAL grew by (its
  ``-shm`` header's ``mxFrame``), for batches of puts (short and overflowing rows),
  upserts, access updates, deletes and vectors; ``wal_frames`` is their sum. Knob off:
  the sum of ``frames_of``, as before.
* In a memory, the checkpoints beside come once ``CHECKPOINT_FRAMES`` frames are
  written (one-frame commits: about that many commits), not every ~1/4 of them.
* The Python path (a batch the writer does not take) keeps the estimate.
"""

from __future__ import annotations

import os
import struct
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch, SqliteStore, frames_of

from .setups import count_checkpoints_beside, knobs_set
from .test_durable12 import _batches, _entry, _open, _rows_of

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock"),
    pytest.mark.skipif(
        not sqlite_store._c_writer_usable(), reason="the compiled writer is not built here"
    ),
]

T0 = datetime(2026, 12, 8, tzinfo=UTC)


def _mx_frame(path: Path) -> int:
    """The WAL's frames as SQLite counts them: ``mxFrame`` of the ``-shm`` file's
    wal-index header (offset 16, a native 32-bit unsigned int)."""
    with open(f"{path}-shm", "rb") as f:
        f.seek(16)
        (frames,) = struct.unpack("=I", f.read(4))
    return int(frames)


def _replay(path: Path) -> tuple[SqliteStore, list[tuple[int, int]]]:
    store = _open(path)
    writer = store._cwriter
    assert writer is not None
    assert writer.frames == 0  # before any commit
    seen = []
    for batch in _batches():
        before = _mx_frame(path)
        assert store.inline_ok(batch, 64)
        assert store.write_inline(batch) is True
        seen.append((writer.frames, _mx_frame(path) - before))
    return store, seen


def test_the_writer_counts_the_frames_sqlite_appended(tmp_path: Path) -> None:
    store, seen = _replay(tmp_path / "m.db")
    try:
        told = [frames for frames, _ in seen]
        grown = [frames for _, frames in seen]
        assert told == grown
        assert min(told) >= 1
        assert max(told) > 3  # overflowing rows: several pages in one commit
        assert store.wal_frames == sum(told)
        assert store.commits == len(seen)
    finally:
        store.close()


def test_knob_off_keeps_the_estimate(tmp_path: Path) -> None:
    with knobs_set(sqlite_store, _REAL_FRAMES=False):
        store, seen = _replay(tmp_path / "m.db")
        try:
            page = store._page_size
            want = sum(frames_of(batch, page) for batch in _batches())
            assert store.wal_frames == want
            assert want > sum(frames for frames, _ in seen)  # the estimate is above
        finally:
            store.close()


def test_the_python_path_keeps_the_estimate(tmp_path: Path) -> None:
    store = _open(tmp_path / "m.db")
    try:
        batch = Batch([], _rows_of([(1, _entry(1))]), [])
        store.write(batch)  # the thread's path: Python's sqlite3, which does not tell
        assert store.wal_frames == frames_of(batch, store._page_size)
        before = store.wal_frames
        batch = Batch([], _rows_of([(2, _entry(2))]), [])
        assert store.write_inline(batch) is True
        assert store.wal_frames == before + store._cwriter.frames
    finally:
        store.close()


def _fact(i: int) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=5200 + i),
        category=MemoryCategory.FACT,
        memory=f"wal frame count #{i}",
        created_at=T0 + timedelta(seconds=i),
    )


def _checkpoint_commits(path: Path, real: bool, stores: int) -> list[int]:
    """Store ``stores`` facts one at a time into a memory whose checkpoints are due
    every 40 frames; the commit counts at which checkpoints beside started."""

    async def main() -> list[int]:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            assert store._beside is not None
            started, ended = count_checkpoints_beside(store)
            for i in range(stores):
                await memory.store(_fact(i))
                if ended:  # each checkpoint done before the next commit: deterministic
                    await ended[-1].wait()
        return started

    with knobs_set(sqlite_store, _REAL_FRAMES=real, CHECKPOINT_FRAMES=40):
        return trio.run(main)


def test_checkpoints_come_every_checkpoint_frames_written(tmp_path: Path) -> None:
    real = _checkpoint_commits(tmp_path / "real.db", True, 200)
    estimated = _checkpoint_commits(tmp_path / "est.db", False, 200)
    # One-frame commits (each checkpoint done before the next commit): a checkpoint
    # every ~40 commits written (5 here), against every 10 estimated (4 frames a
    # one-put commit: a leaf's split counted in each).
    assert 4 <= len(real) <= 6
    assert len(estimated) >= 3 * len(real)
    assert real[0] >= 30
    assert os.path.getsize(tmp_path / "real.db") > 0
