"""Branch ckpt31: while another connection holds a read transaction on a durable
memory's file, its checkpoints beside the writer back off (``SqliteStore.
checkpoint_due``): a PASSIVE checkpoint cannot copy the frames the reader's snapshot
pins, left ``CHECKPOINT_FRAMES`` frames or more, and the next commit found it due
again, so the memory started a checkpoint thread on every commit (6,742 in 25 s,
found by a reviewer). With the back-off, one that left that many is due again only
after ``CHECKPOINT_FRAMES // 4`` more frames, far fewer than the commits; once the
reader leaves, the next one (within those frames) copies the WAL, its FULL step
(``sqlite._CHECKPOINT_RESTARTS``) lets the WAL start over, the count falls under the
threshold and the back-off ends. Every store is in the file."""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Durability, SqliteStore

from .setups import count_checkpoints_beside
from .test_durable31 import _ids, _row, _wal_extent

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FRAMES = 200


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i + 1),
        category=MemoryCategory.FACT,
        memory=f"pinned wal entry #{i}",
        created_at=T0 + timedelta(seconds=i),
    )


def test_a_reader_pinning_the_wal_does_not_start_a_checkpoint_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", FRAMES)
    step = FRAMES // 4
    path = tmp_path / "m.db"
    pinned, after = 600, 60

    async def main() -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with open_memory(path=path) as memory:
            store = memory._storage
            assert store is not None
            assert store._beside is not None
            started, ended = count_checkpoints_beside(store)

            async def store_one(i: int) -> None:
                await memory.store(_entry(i))
                # Let a started checkpoint finish before the next commit, so that each
                # commit may start one (the worst case, deterministic).
                if ended:
                    await ended[-1].wait()

            reader = sqlite3.connect(str(path), isolation_level=None)
            try:
                reader.execute("BEGIN")
                reader.execute("SELECT count(*) FROM entries").fetchone()
                commits0 = store.commits
                for i in range(pinned):
                    await store_one(i)
                got["pinned_commits"] = store.commits - commits0
                got["pinned_started"] = len(started)
                got["pinned_frames"] = store.wal_frames
            finally:
                reader.execute("COMMIT")
                reader.close()
            commits1, started1 = store.commits, len(started)
            for i in range(pinned, pinned + after):
                await store_one(i)
                if len(started) > started1 and "first" not in got:
                    got["first"] = store.commits - commits1
            store.checkpoint_due()  # takes the last one's result
            got["after_frames"] = store.wal_frames
            got["after_started"] = len(started) - started1
            got["extent"] = _wal_extent(path)
            got["due_after"] = store._due_after
        return got

    got = trio.run(main)
    # Before the back-off: a checkpoint started on each commit once the WAL held
    # FRAMES frames (~420 of 600 commits); now one every `step` estimated frames (at
    # least 3 a commit, ~4-5 here): ~45.
    assert got["pinned_commits"] == pinned
    assert got["pinned_frames"] >= pinned  # the reader kept them in the WAL
    assert got["pinned_started"] * 10 < got["pinned_commits"]
    # The reader gone: the next checkpoint starts within `step` frames (at least 3 a
    # commit estimated; at least 1 written, as the compiled writer counts them:
    # sqlite._REAL_FRAMES), copies every frame, and the back-off ends.
    per_commit = 1 if sqlite_store._REAL_FRAMES and sqlite_store._C_COMMIT else 3
    assert got["first"] <= step // per_commit + 1
    assert got["after_started"] >= 1
    assert got["after_frames"] < FRAMES
    assert got["due_after"] == 0
    assert got["extent"] < FRAMES  # the FULL step let the WAL start over
    assert _ids(path) == {str(uuid.UUID(int=i + 1)) for i in range(pinned + after)}


def test_the_back_off_is_set_and_reset_by_a_checkpoint_beside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 40)
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        store.take_checkpoints()
        store.wal_frames = 40
        assert store.checkpoint_due()
        run = store.checkpoint_beside()
        run()  # a real one, on an idle file: nothing left
        assert store._beside_done is not None
        store._beside_done = (40, 45)  # as if it had left 45 frames (a reader's)
        store.wal_frames = 41  # one frame committed meanwhile
        assert not store.checkpoint_due()
        assert store.wal_frames == 46
        assert store._due_after == 46 + 10
        store.wal_frames = 55
        assert not store.checkpoint_due()
        store.wal_frames = 56
        assert store.checkpoint_due()
        store.checkpoint_beside()
        store._beside_done = (56, 3)  # the reader left: under the threshold
        assert not store.checkpoint_due()
        assert (store.wal_frames, store._due_after) == (3, 0)
        store.wal_frames = 40
        assert store.checkpoint_due()  # the plain threshold again
    finally:
        store.close()


def test_the_back_off_after_a_commit_without_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path without a connection beside (``_beside`` None: a checkpoint after a
    commit of ``write``) backs off the same way: a reader pinning the WAL no longer
    costs a checkpoint after every commit."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", FRAMES)
    path = tmp_path / "m.db"
    store, _ = SqliteStore.open(str(path), Durability.NORMAL)
    reader = sqlite3.connect(str(path), isolation_level=None)
    try:
        store.take_checkpoints()
        beside = store._beside
        store._beside = None
        if beside is not None:
            beside.close()
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM entries").fetchone()
        for seq in range(1, 601):
            store.write(sqlite_store.Batch([], [_row(seq)], []))
        pinned = store.checkpoints
        assert pinned * 8 < 600  # before: one after each commit past FRAMES (~420)
        reader.execute("COMMIT")
        for seq in range(601, 601 + FRAMES // 4 // 3 + 1):  # `step` frames at least
            store.write(sqlite_store.Batch([], [_row(seq)], []))
        assert store.checkpoints > pinned
        assert store.wal_frames < FRAMES
        assert store._due_after == 0
    finally:
        reader.close()
        store.close()
