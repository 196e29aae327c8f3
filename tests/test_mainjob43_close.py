"""mainjob43: a swarm's temporary memory file is closed without SQLite's final checkpoint.

* ``SqliteStore.checkpoint_on_close`` False (with the compiled writer open): the close
  leaves the WAL holding the commits (not copied into the database, not deleted), and
  a later open still finds every acknowledged store in it; True (every other file):
  the close checkpoints and the WAL is gone, as before;
* ``actormem swarm`` on its temporary file sets it (``_main._NO_CHECKPOINT_FOR_TEMPORARY``);
  with ``--path`` or ``--verify``, or the knob off, the file is checkpointed as before;
  the same accounting and operations either way.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import SqliteStore
from actormem.cli import _main

from .test_startup24 import _calls_file, _swarm, reports_agree


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT, memory=f"note {i} about the disk and its pages"
    )


async def _fill(path: Path, n: int, *, checkpoint: bool | None) -> tuple[bool, list[str]]:
    """Store ``n`` entries and close; whether the compiled writer was open, the ids."""
    async with open_memory(path=path) as memory:
        store = memory._storage
        assert store is not None
        assert store.checkpoint_on_close is True  # every file's default
        if checkpoint is not None:
            store.checkpoint_on_close = checkpoint
        ids = []
        for i in range(n):
            entry = _entry(i)
            await memory.store(entry)
            ids.append(entry.id)
            await memory.retrieve("disk pages", 3)
        return store._cwriter is not None, ids


async def _reopen(path: Path) -> list[str]:
    async with open_memory(path=path) as memory:
        return sorted(e.id for e in memory.snapshot())


def test_a_close_without_checkpoint_leaves_the_wal_and_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    writer, ids = trio.run(lambda: _fill(path, 40, checkpoint=False))
    assert writer  # the compiled writer is built and linked here
    wal = Path(f"{path}-wal")
    assert wal.exists()
    assert wal.stat().st_size > 0
    assert trio.run(_reopen, path) == sorted(ids)  # recovered from the WAL


def test_every_other_close_checkpoints(tmp_path: Path) -> None:
    for checkpoint in (None, True):
        path = tmp_path / f"{checkpoint}.db"
        writer, ids = trio.run(partial(_fill, path, 40, checkpoint=checkpoint))
        assert writer
        assert not Path(f"{path}-wal").exists()  # copied into the file and deleted
        assert trio.run(_reopen, path) == sorted(ids)


def test_without_the_compiled_writer_the_close_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_C_COMMIT", False)
    path = tmp_path / "m.db"
    writer, ids = trio.run(lambda: _fill(path, 20, checkpoint=False))
    assert not writer
    assert not Path(f"{path}-wal").exists()
    assert trio.run(_reopen, path) == sorted(ids)


def _spy_close(monkeypatch: pytest.MonkeyPatch) -> list[tuple[bool, bool]]:
    """Record, per store close: whether it was asked to checkpoint, and whether the WAL
    was gone right after it (before the swarm's folder is removed)."""
    seen: list[tuple[bool, bool]] = []
    real = SqliteStore.close

    def close(self: SqliteStore, **kwargs: Any) -> None:
        asked, path = self.checkpoint_on_close, self.path
        real(self, **kwargs)
        seen.append((asked, not os.path.exists(f"{path}-wal")))

    monkeypatch.setattr(SqliteStore, "close", close)
    return seen


def test_a_swarm_closes_its_temporary_file_without_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _calls_file(tmp_path)
    seen = _spy_close(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert _swarm(["--json", "on.json"], calls) == 0
    assert seen == [(False, False)]  # the WAL left for the folder's removal
    monkeypatch.setattr(_main, "_NO_CHECKPOINT_FOR_TEMPORARY", False)
    assert _swarm(["--json", "off.json"], calls) == 0
    assert seen[1:] == [(True, True)]
    reports_agree(tmp_path / "on.json", tmp_path / "off.json")
    capsys.readouterr()


def test_a_swarm_on_a_path_or_verified_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _calls_file(tmp_path)
    seen = _spy_close(monkeypatch)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "kept.db"
    assert _swarm(["--path", str(db)], calls) == 0
    assert seen == [(True, True)]
    assert _swarm(["--verify"], calls) == 0
    assert seen[1:]
    assert all(s == (True, True) for s in seen[1:])
    capsys.readouterr()
    assert trio.run(_reopen, db)  # the kept file holds the run's entries


def test_the_writers_close_without_checkpoint_is_idempotent(tmp_path: Path) -> None:
    async def main() -> Any:
        async with open_memory(path=tmp_path / "m.db") as memory:
            store = memory._storage
            assert store is not None
            assert store._cwriter is not None
            await memory.store(_entry(0))
            writer, store._cwriter = store._cwriter, None
            writer.close_uncheckpointed()  # not the file's last: the store's is open
            assert writer.closed
            writer.close_uncheckpointed()
            writer.close()
            return [e.id for e in memory.snapshot()]

    ids = trio.run(main)
    assert not Path(f"{tmp_path / 'm.db'}-wal").exists()  # the store's close checkpointed
    assert trio.run(_reopen, tmp_path / "m.db") == ids
