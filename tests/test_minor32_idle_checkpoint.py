"""minor32: an idle durable memory copies the WAL a reader had pinned.

A PASSIVE checkpoint beside the writer cannot copy the frames another connection's
read transaction pins; the next one was due only after ``CHECKPOINT_FRAMES //
_BACKOFF_SHARE`` more frames (the back-off), so once the reader left, a memory that got
no more writes kept those frames in the WAL, uncopied, for as long as it stayed open.
Now, once no commit came for ``sqlite.IDLE_CHECKPOINT`` seconds after a checkpoint
that left frames, the memory runs another PASSIVE checkpoint in a thread (and again,
each time after twice as long, up to ``IDLE_CHECKPOINT_MAX``, while a reader still pins
them). trio's MockClock, jumped by hand, stands in for the seconds."""

from __future__ import annotations

import mmap
import shutil
import sqlite3
import struct
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from actormem import open_memory
from actormem._storage import sqlite as sqlite_store

from .test_checkpoint_backoff import _entry

FRAMES = 60


def _wal_copied(path: Path) -> tuple[int, int]:
    """``(mxFrame, nBackfill)`` of the WAL index (https://sqlite.org/walformat.html,
    2.1): the frames in the WAL and those a checkpoint copied into the database."""
    with (
        open(str(path) + "-shm", "rb") as f,
        mmap.mmap(f.fileno(), 136, access=mmap.ACCESS_READ) as m,
    ):
        mx, backfill = struct.unpack_from("=I", m, 16)[0], struct.unpack_from("=I", m, 96)[0]
    return int(mx), int(backfill)


def _ids_in_database_file(path: Path, tmp_path: Path) -> set[str]:
    """The ids in the database file alone (a copy without its WAL): what checkpoints
    copied there."""
    copy = tmp_path / "copy.db"
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True)
    try:
        return {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()
        copy.unlink()


async def _until(check: Any) -> None:
    """Wait, in real time for the worker threads (virtual time stands still), until
    ``check()``: a bound against a hang, not a measurement."""
    for _ in range(5000):
        await trio.testing.wait_all_tasks_blocked()
        if check():
            return
        await trio.to_thread.run_sync(time.sleep, 0.002)
    raise AssertionError("still not so after 10 s")


@pytest.mark.parametrize("reader_leaves", ["before", "later"])
async def test_an_idle_memory_copies_the_frames_a_reader_had_pinned(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mock_clock: trio.testing.MockClock,
    reader_leaves: str,
) -> None:
    """``before``: the reader leaves before the first idle checkpoint; ``later``: it
    stays through the first one (which copies nothing) and leaves before the next."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", FRAMES)
    idle = sqlite_store.IDLE_CHECKPOINT
    path = tmp_path / "m.db"
    n = 0
    async with open_memory(path=path) as memory:
        store = memory._storage
        assert store is not None
        assert store._beside is not None
        started: list[float] = []  # the trio times checkpoints beside started
        beside = store.checkpoint_beside

        def counted() -> Any:
            started.append(trio.current_time())
            return beside()

        store.checkpoint_beside = counted  # type: ignore[method-assign]
        reader = sqlite3.connect(str(path), isolation_level=None)
        try:
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM entries").fetchone()
            while store._due_after == 0:  # until a checkpoint left FRAMES frames or more
                await memory.store(_entry(n))
                n += 1
                await _until(lambda: not store._beside_running or store._beside_done)
                store.checkpoint_due()  # takes a finished one's result, as a commit does
            mx, backfill = _wal_copied(path)
            assert backfill < mx  # the reader's frames
            await _until(lambda: True)
            before = len(started)
            if reader_leaves == "later":
                mock_clock.jump(idle)  # the first idle checkpoint ...
                await _until(lambda: len(started) > before and store.checkpoint_left_frames())
                await _until(lambda: not store._beside_running or store._beside_done)
                mx, backfill = _wal_copied(path)
                assert backfill < mx  # ... copied nothing: the reader is still there
                mock_clock.jump(idle)  # the next one waits twice as long
                await _until(lambda: True)
                assert len(started) == before + 1
        finally:
            reader.execute("COMMIT")
            reader.close()
        # No more writes: within the idle delays (virtual seconds) every frame is copied.
        mock_clock.jump(idle)
        await _until(lambda: _wal_copied(path)[1] == _wal_copied(path)[0])
        assert _ids_in_database_file(path, tmp_path) == {
            str(uuid.UUID(int=i + 1)) for i in range(n)
        }
        await _until(lambda: memory._idle_scope is None)  # nothing left: they ended
        assert len(started) == before + (2 if reader_leaves == "later" else 1)
        mock_clock.jump(10 * sqlite_store.IDLE_CHECKPOINT_MAX)
        await _until(lambda: True)
        assert len(started) == before + (2 if reader_leaves == "later" else 1)


class _Slow:
    """The beside connection, whose checkpoint takes 0.3 s more (real time): the close
    comes while it runs, and waits for it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str) -> Any:
        time.sleep(0.3)
        return self._conn.execute(sql)

    def close(self) -> None:
        self._conn.close()


@pytest.mark.parametrize("when", ["waiting", "copying"])
async def test_closing_ends_the_idle_checkpoints(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    mock_clock: trio.testing.MockClock,
    when: str,
) -> None:
    """The memory closes while its idle checkpoints wait for a quiet spell, or while
    one they started copies: they end with it (no task left, no error), the close
    copies the WAL and every store is in the file."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", FRAMES)
    path = tmp_path / "m.db"
    n = 0
    async with open_memory(path=path):
        pass  # the file made, for the reader's connection
    reader = sqlite3.connect(str(path), isolation_level=None)
    try:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            reader.execute("BEGIN")
            reader.execute("SELECT count(*) FROM entries").fetchone()
            while store._due_after == 0:
                await memory.store(_entry(n))
                n += 1
                await _until(lambda: not store._beside_running or store._beside_done)
                store.checkpoint_due()
            reader.execute("COMMIT")
            await _until(lambda: memory._idle_scope is not None)
            scope = memory._idle_scope
            if when == "copying":
                store._beside = _Slow(store._beside)  # type: ignore[assignment]
                mock_clock.jump(sqlite_store.IDLE_CHECKPOINT)
                await _until(lambda: store._beside_running)
                assert store._beside_done is None  # still copying as the block ends
        assert scope is not None
        assert scope.cancel_called
        assert memory._idle_scope is None
        assert store._beside is None  # closed
    finally:
        reader.close()
    assert not await trio.Path(str(path) + "-wal").exists()  # the close copied, removed it
    conn = sqlite3.connect(str(path))
    try:
        ids = {row[0] for row in conn.execute("SELECT id FROM entries")}
    finally:
        conn.close()
    assert ids == {str(uuid.UUID(int=i + 1)) for i in range(n)}
