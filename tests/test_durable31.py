"""Branch durable31: a checkpoint beside the writer lets SQLite start the WAL over
(``sqlite._CHECKPOINT_RESTARTS``), and a commit on the loop that finds the write lock
held by the store's own checkpoint waits for it on the loop instead of in a thread.

* A transaction begun before the PASSIVE checkpoint's copy and committed after it (a
  commit that landed while it copied): with the knob on, the next commit starts the
  WAL over (its frames since the last start, ``mxFrame`` of the WAL index, fall to a
  few); off (PASSIVE only, the path before), the frames go on after the others, since
  SQLite starts over only at a commit that finds every frame copied.
* Several writers storing without a pause, checkpoints beside (each made 5 ms longer,
  as a copy of hundreds of frames with its fsyncs is): the WAL's extent and the
  ``-wal`` file stay within a few checkpoints' worth (the main job's WAL, knob off,
  held every frame of the run), and every store is in the file.
* The checkpoint's second step is a FULL checkpoint with ``busy_timeout`` 0 after a
  PASSIVE one that copied every frame it found; the knob off runs only the PASSIVE one.
* A FULL step that fails leaves the PASSIVE step's copy counted (the checkpoint is
  not due again at once).
* A checkpoint beside that holds the write lock: a store committed meanwhile is not
  acknowledged before the checkpoint ended, is then committed on the loop (no batch is
  handed to the worker thread; with the knob off, the thread waits for the lock, as
  before), and is in the file.
"""

from __future__ import annotations

import mmap
import os
import sqlite3
import struct
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch, Durability, SqliteStore

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i + 1),
        category=list(MemoryCategory)[i % len(MemoryCategory)],
        memory=f"disk pager deploy #{i} " + "word " * (i % 40),
        created_at=T0 + timedelta(seconds=i),
    )


def _wal_extent(path: Path) -> int:
    """Frames in the WAL since SQLite last started it over: ``mxFrame`` of the WAL
    index header (https://sqlite.org/walformat.html, 2.1)."""
    with (
        open(str(path) + "-shm", "rb") as f,
        mmap.mmap(f.fileno(), 136, access=mmap.ACCESS_READ) as m,
    ):
        (mx,) = struct.unpack_from("=I", m, 16)
    return int(mx)


def _ids(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()


class _Slow:
    """The beside connection, whose PASSIVE checkpoint takes 5 ms more (as the main
    job's copies of hundreds of frames and their fsyncs do): commits land meanwhile."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str) -> Any:
        cursor = self._conn.execute(sql)
        if "PASSIVE" in sql:
            row = cursor.fetchone()
            time.sleep(0.005)
            return _Row(row)
        return cursor

    def close(self) -> None:
        self._conn.close()


class _Row:
    def __init__(self, row: Any) -> None:
        self._row = row

    def fetchone(self) -> Any:
        return self._row


def _run_writers(path: Path, writers: int, each: int) -> tuple[int, int, int, int]:
    """Store ``writers * each`` entries from ``writers`` tasks at once, checkpoints
    beside by :class:`_Slow`; the largest WAL extent seen after a commit, the ``-wal``
    file's size before the close, the checkpoints and the commits."""
    extents: list[int] = []
    sizes: list[int] = []

    async def main() -> tuple[int, int]:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            assert store._beside is not None
            store._beside = _Slow(store._beside)  # type: ignore[assignment]
            write_inline = store.write_inline

            def inline(batch: Batch) -> bool:
                done = write_inline(batch)
                extents.append(_wal_extent(path))
                return done

            store.write_inline = inline  # type: ignore[method-assign]

            async def writer(w: int) -> None:
                for i in range(each):
                    await memory.store(_entry(w * each + i))

            async with trio.open_nursery() as nursery:
                for w in range(writers):
                    nursery.start_soon(writer, w)
            sizes.append(os.stat(str(path) + "-wal").st_size)
            return store.checkpoints, store.commits

    checkpoints, commits = trio.run(main)
    return max(extents), sizes[0], checkpoints, commits


def test_the_wal_starts_over_under_writers_that_never_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 40)
    path = tmp_path / "m.db"
    writers, each = 4, 400
    extent, size, checkpoints, commits = _run_writers(path, writers, each)
    assert checkpoints >= 3
    assert commits >= 200
    page = 8192 + 24  # a frame: its header and an 8 KiB page
    assert extent <= 8 * 40, extent  # a few checkpoints' worth of frames
    assert size <= 8 * 40 * page + 32, size
    assert _ids(path) == {str(uuid.UUID(int=i + 1)) for i in range(writers * each)}


class _CommitDuringCopy:
    """The beside connection, with another connection's transaction begun before its
    PASSIVE checkpoint and committed right after it: a commit that landed while the
    checkpoint copied (its snapshot older than the copy's end)."""

    def __init__(self, conn: sqlite3.Connection, other: sqlite3.Connection) -> None:
        self._conn = conn
        self._other = other

    def execute(self, sql: str) -> Any:
        if "PASSIVE" not in sql:
            return self._conn.execute(sql)
        row = self._conn.execute(sql).fetchone()
        self._other.execute("COMMIT")
        return _Row(row)

    def close(self) -> None:
        self._conn.close()


def _row(seq: int) -> tuple[Any, ...]:
    row = (seq, str(uuid.UUID(int=seq)), "fact", "m", "[]", "[]", "2026-01-01T00:00:00+00:00")
    return row + (1.0, 0, None, 0, None, None, "2026-01-01T00:00:00+00:00", None, None)


@pytest.mark.parametrize("restarts", [True, False])
def test_a_commit_during_the_copy_no_longer_keeps_the_wal_from_starting_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restarts: bool
) -> None:
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_RESTARTS", restarts)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 5)  # a FULL step from 10 frames
    path = tmp_path / "m.db"
    store, _ = SqliteStore.open(str(path), Durability.NORMAL)
    other = sqlite3.connect(str(path), isolation_level=None)
    try:
        store.take_checkpoints()
        real = store._beside
        assert real is not None
        for seq in range(1, 21):
            assert store.write_inline(Batch([], [_row(seq)], []))
        written = _wal_extent(path)
        assert written >= 20
        other.execute("BEGIN IMMEDIATE")
        other.execute("INSERT INTO meta VALUES ('durable31', 'x')")
        store._beside = _CommitDuringCopy(real, other)  # type: ignore[assignment]
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        store.checkpoint_due()
        assert store.checkpoints == 1
        for seq in range(21, 24):
            assert store.write_inline(Batch([], [_row(seq)], []))
        extent = _wal_extent(path)
        if restarts:
            assert extent < 10, (written, extent)  # started over at seq 21's commit
        else:  # the path before: frames appended after the ones of seqs 1-20
            assert extent > written, (written, extent)
    finally:
        other.close()
        store.close()
    assert _ids(path) == {str(uuid.UUID(int=seq)) for seq in range(1, 24)}


class _Recording:
    """The beside connection, recording its statements."""

    def __init__(self, conn: sqlite3.Connection, seen: list[str]) -> None:
        self._conn = conn
        self._seen = seen

    def execute(self, sql: str) -> Any:
        self._seen.append(sql)
        return self._conn.execute(sql)

    def close(self) -> None:
        self._conn.close()


@pytest.mark.parametrize("restarts", [True, False])
def test_the_second_step_is_a_full_checkpoint_that_waits_for_nobody(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restarts: bool
) -> None:
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_RESTARTS", restarts)
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 4)  # a FULL step from 8 frames
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        real = store._beside
        assert real is not None
        assert real.execute("PRAGMA busy_timeout").fetchone()[0] == 0
        seen: list[str] = []
        store._beside = _Recording(real, seen)  # type: ignore[assignment]
        assert store.write_inline(Batch([], [_row(seq) for seq in range(1, 4)], []))
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert not store.checkpoint_due()
        assert seen == ["PRAGMA wal_checkpoint(PASSIVE)"]  # under RESTART_AFTER's frames
        seen.clear()
        for seq in range(4, 40):
            assert store.write_inline(Batch([], [_row(seq)], []))
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert not store.checkpoint_due()
        assert store.checkpoints == 2
        assert store.wal_frames == 0
        want = ["PRAGMA wal_checkpoint(PASSIVE)"]
        if restarts:
            want.append("PRAGMA wal_checkpoint(FULL)")
        assert seen == want
    finally:
        store.close()


@pytest.mark.parametrize("restarts", [True, False])
def test_a_commit_waits_on_the_loop_for_its_own_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restarts: bool
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 20)
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_RESTARTS", restarts)
    path = tmp_path / "m.db"
    locked = threading.Event()
    release = threading.Event()
    where: list[str] = []

    async def main() -> None:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            beside = store.checkpoint_beside
            write, write_inline = store.write, store.write_inline

            def holding() -> Any:
                # The checkpoint's thread holds the write lock (as its FULL step does)
                # until the test releases it, then checkpoints.
                run = beside()

                def hold_then_run() -> None:
                    conn = sqlite3.connect(str(path), isolation_level=None)
                    try:
                        conn.execute("BEGIN IMMEDIATE")
                        locked.set()
                        release.wait(10)
                        conn.execute("ROLLBACK")
                    finally:
                        conn.close()
                    run()

                store.checkpoint_beside = beside  # type: ignore[method-assign]
                return hold_then_run

            def threaded(batch: Batch) -> None:
                where.append("thread")
                write(batch)

            def inline(batch: Batch) -> bool:
                done = write_inline(batch)
                where.append("inline" if done else "locked")
                return done

            store.checkpoint_beside = holding  # type: ignore[method-assign]
            store.write = threaded  # type: ignore[method-assign]
            store.write_inline = inline  # type: ignore[method-assign]
            i = 0
            while not locked.is_set():
                await memory.store(_entry(i))
                i += 1
                if store.checkpoint_beside is beside:  # the holding one started
                    await trio.to_thread.run_sync(locked.wait, 10)
            acked = trio.Event()

            async def late() -> None:
                await memory.store(_entry(10_000))
                acked.set()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(late)
                with trio.move_on_after(0.2):
                    await acked.wait()
                assert not acked.is_set()  # not acknowledged while the lock is held
                assert where[-1] == ("locked" if restarts else "thread")
                release.set()
            assert acked.is_set()

    trio.run(main)
    if restarts:
        assert "thread" not in where
        assert where[-2:] == ["locked", "inline"]
    else:  # the path before: the thread waits for the lock
        assert where[-2:] == ["locked", "thread"]
    assert str(uuid.UUID(int=10_001)) in _ids(path)


class _FullFails:
    """The beside connection, whose FULL checkpoint fails."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str) -> Any:
        if "FULL" in sql:
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql)

    def close(self) -> None:
        self._conn.close()


def test_a_failed_second_step_keeps_the_first_ones_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 1)  # a FULL step from 2 frames
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        real = store._beside
        assert real is not None
        for seq in range(1, 6):
            assert store.write_inline(Batch([], [_row(seq)], []))
        store._beside = _FullFails(real)  # type: ignore[assignment]
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert not store.checkpoint_due()  # the PASSIVE copy counted: not due again
        assert store.checkpoints == 1
        assert store.wal_frames == 0
    finally:
        store.close()
    assert _ids(tmp_path / "m.db") == {str(uuid.UUID(int=seq)) for seq in range(1, 6)}
