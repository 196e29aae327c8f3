"""Branch durable11: a durable ``normal`` memory's checkpoints on a second connection,
in a worker thread the owner does not wait for (``sqlite._CHECKPOINT_BESIDE``); 8 KiB
pages for a new file (``sqlite._PAGE_SIZE``); ``_entry_frames`` in one frame
and texts that are not ASCII counted by their UTF-8 bytes
(``sqlite._FLAT_FRAMES``).

* Checkpoints beside: with a small ``CHECKPOINT_FRAMES`` they happen, never on the
  writer's connection after a commit (``_checkpoint`` is not called), every small batch
  is committed on the loop (none goes to the thread because one is due), the estimate
  of the WAL's frames never falls below SQLite's count and the WAL stays bounded; the
  file then holds every entry, field by field.
* A checkpoint parked in its thread: stores keep being acknowledged meanwhile (the
  batch that set it off was answered before it ran), no second one starts, and closing
  the memory waits for it, then closes both connections (a checkpoint function run
  after the close does nothing).
* A failing checkpoint leaves the count, is retried after the next commit, and breaks
  nothing; the knob off: no second connection, the checkpoint after the thread's
  commit and ``inline_ok``'s refusal, as before.
* A SIGKILL amid commits and checkpoints beside them (a checkpoint every few commits)
  loses no acknowledged store.
* Pages: a new file has 8 KiB pages; a file of 16 KiB pages (the path before) opens and
  grows as it is, with the same rows as one written with 8 KiB pages.
* ``_entry_frames`` gives the same number either way for ASCII texts, and for the others
  the number of their UTF-8 bytes, never more than before (Hypothesis).
"""

from __future__ import annotations

import sqlite3
import threading
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch, Durability, SqliteStore

from .crash_child import run_trial
from .strategies import examples
from .test_durable10 import _wal_frames

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _entry(i: int, big: bool = False) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i + 1),
        category=list(MemoryCategory)[i % len(MemoryCategory)],
        memory=f"disk pager deploy #{i}" + (" y" * 3000 if big else ""),
        tags=["t"] if i % 3 == 0 else [],
        namespace=("a",) if i % 2 else (),
        created_at=T0 + timedelta(seconds=i),
        key=f"k{i}" if i % 4 == 0 else None,
        value={"i": i} if i % 5 == 0 else None,
    )


def _rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("SELECT * FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        return int(size)
    finally:
        conn.close()


async def _read_back(path: Path) -> dict[uuid.UUID, MemoryEntry]:
    async with open_memory(path=path) as memory:
        return {e.id: e for e in memory.snapshot()}


def test_checkpoints_beside_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 60)
    path = tmp_path / "m.db"
    seen: list[tuple[int, int]] = []
    where: list[str] = []
    stored: list[MemoryEntry] = []

    async def main() -> tuple[int, int]:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            assert store._beside is not None
            write_inline, write, beside = store.write_inline, store.write, store.checkpoint_beside

            def inline(batch: Batch) -> bool:
                done = write_inline(batch)
                where.append("inline")
                seen.append((_wal_frames(path), store.wal_frames))
                return done

            def threaded(batch: Batch) -> None:
                write(batch)
                where.append("thread")

            def started() -> Any:
                where.append("checkpoint")
                return beside()

            def never(conn: sqlite3.Connection) -> None:
                raise AssertionError("a checkpoint on the writer's connection")

            store.write_inline = inline  # type: ignore[method-assign]
            store.write = threaded  # type: ignore[method-assign]
            store.checkpoint_beside = started  # type: ignore[method-assign]
            store._checkpoint = never  # type: ignore[method-assign]
            for i in range(400):
                entry = _entry(i, big=i % 50 == 7)
                await memory.store(entry)
                stored.append(entry)
                if i % 3 == 0:
                    await memory.retrieve("disk pager", 8)
            await memory.store(_entry(400))  # takes the last hits
            stored.append(_entry(400))
            return store.checkpoints, store.commits

    checkpoints, commits = trio.run(main)
    assert checkpoints >= 3
    assert where.count("checkpoint") >= checkpoints
    assert "thread" not in where  # no batch handed to the thread for a checkpoint
    assert commits >= 401
    assert all(actual <= estimate for actual, estimate in seen), seen
    assert max(actual for actual, _ in seen) < 60 + 60  # bounded
    back = trio.run(_read_back, path)
    for entry in stored:
        got = back[entry.id]
        assert (got.memory, got.tags, got.key, got.value) == (
            entry.memory,
            entry.tags,
            entry.key,
            entry.value,
        )
    assert sum(e.access_count for e in back.values()) > 0


def test_a_parked_checkpoint_holds_back_no_store_and_close_waits_for_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 20)
    path = tmp_path / "m.db"
    release = threading.Event()
    running = threading.Event()
    ran: list[tuple[int, int | None] | None] = []
    late: list[Any] = []
    holding = threading.Event()  # the parked checkpoint holds the store's lock
    finished = threading.Event()
    checkpointer: list[int] = []

    class _Signalling:
        # The store's lock, telling the test when the checkpoint's thread has it (the
        # close may only be started then: a close that takes the lock first leaves the
        # checkpoint nothing to do, which the end of this test covers).
        def __init__(self, lock: Any) -> None:
            self._lock = lock

        def __enter__(self) -> None:
            self._lock.acquire()
            if checkpointer and threading.get_ident() == checkpointer[0]:
                holding.set()

        def __exit__(self, *exc: object) -> None:
            self._lock.release()

    async def main() -> None:
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            beside = store.checkpoint_beside
            store._beside_lock = _Signalling(store._beside_lock)  # type: ignore[assignment]
            starts: list[int] = []

            def parked() -> Any:
                run = beside()
                starts.append(store.commits)

                def wait_then_run() -> None:
                    checkpointer.append(threading.get_ident())
                    running.set()
                    release.wait(10)
                    run()
                    ran.append(store._beside_done)
                    finished.set()

                late.append(run)
                return wait_then_run

            store.checkpoint_beside = parked  # type: ignore[method-assign]
            i = 0
            while not starts:
                await memory.store(_entry(i))
                i += 1
            await trio.to_thread.run_sync(running.wait, 10)
            commits = store.commits
            for j in range(i, i + 40):  # acknowledged while the checkpoint is parked
                await memory.store(_entry(j))
            assert store.commits >= commits + 40
            assert len(starts) == 1  # no second one while it runs
            assert not ran
            release.set()
            await trio.to_thread.run_sync(holding.wait, 10)  # running: the close waits for it

    trio.run(main)
    assert finished.wait(10)
    assert len(ran) == 1
    assert ran[0] is not None
    assert ran[0][1] is not None
    back = trio.run(_read_back, path)
    assert len(back) >= 41
    # The function of a checkpoint run after the close does nothing.
    store, _ = SqliteStore.open(str(path), Durability.NORMAL)
    store.take_checkpoints()
    run = store.checkpoint_beside()
    store.close()
    run()
    assert store._beside_done is not None
    assert store._beside_done[1] is None


class _Failing:
    def execute(self, sql: str) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    def close(self) -> None:
        pass


def test_a_failed_checkpoint_is_retried_and_breaks_nothing(tmp_path: Path) -> None:
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        real = store._beside
        assert real is not None
        store._beside = _Failing()  # type: ignore[assignment]
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert store.checkpoint_due()  # taken: failed, due again (the next commit retries)
        assert store.checkpoints == 0
        assert store.wal_frames == sqlite_store.CHECKPOINT_FRAMES
        assert not store._beside_running
        store._beside = real
        row = (1, str(uuid.UUID(int=1)), "fact", "m", "[]", "[]", "2026-01-01T00:00:00+00:00")
        row += (1.0, 0, None, 0, None, None, "2026-01-01T00:00:00+00:00", None, None)
        assert store.write_inline(Batch([], [row], []))
        assert store.checkpoint_due()
        store.checkpoint_beside()()
        assert not store.checkpoint_due()
        assert store.checkpoints == 1
        assert store.wal_frames == 0
    finally:
        store.close()
    assert [r[0] for r in _rows(tmp_path / "m.db")] == [1]


def test_knob_off_keeps_the_checkpoint_after_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_BESIDE", False)
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        assert store._beside is None
        access = Batch([], [], [(1, None, None, 1)])
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES - 1
        assert not store.inline_ok(access, 64)  # a checkpoint due after it
        assert not store.checkpoint_due()
        store.write(access)
        assert store.checkpoints == 1
    finally:
        store.close()
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_BESIDE", True)
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES - 1
        assert store.inline_ok(access, 64)  # the checkpoint comes beside
        store.write(access)
        assert store.checkpoints == 0
        assert store.checkpoint_due()
    finally:
        store.close()
    full, _ = SqliteStore.open(str(tmp_path / "f.db"), Durability.FULL)
    try:  # full: SQLite's own checkpoint, no second connection
        assert full._beside is None
        assert not full.checkpoint_due()
    finally:
        full.close()


def test_sigkill_amid_checkpoints_beside_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACTORMEM_TEST_CHECKPOINT_FRAMES", "30")
    report = run_trial(str(tmp_path / "c.db"), seed=11, rounds=2, max_acks=200)
    assert report["lost"] == []
    assert report["acked"] > 0 or all(k["early"] for k in report["kills"])


def test_new_files_in_8k_pages_and_16k_files_still_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def fill(path: Path, start: int, stop: int) -> None:
        async with open_memory(path=path) as memory:
            for i in range(start, stop):
                await memory.store(_entry(i, big=i % 20 == 3))
            await memory.delete(uuid.UUID(int=start + 2))

    new = tmp_path / "new.db"
    trio.run(fill, new, 0, 30)
    trio.run(fill, new, 30, 60)
    monkeypatch.setattr(sqlite_store, "_PAGE_SIZE", 16384)
    old = tmp_path / "old.db"
    trio.run(fill, old, 0, 30)
    monkeypatch.setattr(sqlite_store, "_PAGE_SIZE", 8192)
    trio.run(fill, old, 30, 60)  # opened and grown with the new default
    assert (_page_size(new), _page_size(old)) == (8192, 16384)
    assert _rows(new) == _rows(old)
    assert trio.run(_read_back, new) == trio.run(_read_back, old)


_tag = st.text(min_size=1, max_size=30)
_text = st.text(max_size=3000) | st.text(alphabet="ab ", max_size=40000)


@settings(max_examples=examples(120), deadline=None)
@given(
    memory=_text,
    key=st.none() | st.text(min_size=1, max_size=300),
    value=st.none() | st.dictionaries(st.text(max_size=20), st.text(max_size=2000), max_size=3),
    tags=st.lists(_tag, max_size=6),
    page=st.sampled_from([4096, 8192, 16384, 65536]),
)
def test_entry_frames_flat_equals_the_path_before(
    memory: str, key: str | None, value: dict[str, str] | None, tags: list[str], page: int
) -> None:
    entry = MemoryEntry(
        category=MemoryCategory.FACT, memory=memory, key=key, value=value, tags=tags
    )
    try:
        sqlite_store._FLAT_FRAMES = False
        before = sqlite_store._entry_frames(entry, page)
    finally:
        sqlite_store._FLAT_FRAMES = True
    now = sqlite_store._entry_frames(entry, page)
    # The path before with each text's UTF-8 length instead of 4 bytes a character.
    size = sqlite_store._ROW_BYTES + len(memory.encode())
    size += len(key.encode()) if key is not None else 0
    size += len(entry.value._canonical().encode()) if entry.value is not None else 0
    kept = entry.tags  # the entry keeps each tag once, in order
    size += 12 * sum(map(len, kept)) + 3 * len(kept) + 2 if kept else 0
    assert now == (size // (page - 4) + 1 if size > page // 4 else 0)
    assert now <= before  # tighter, never above
    if all(t.isascii() for t in [memory, key or "", entry.value._canonical() if value else ""]):
        assert now == before
    if len(memory.encode()) > page:  # a row past a page always counts its pages
        assert now >= len(memory.encode()) // (page - 4)
