"""Branch tidy23's fixes to opening a durable file:

* a text that is not UTF-8 in the file (written there by another program) is refused
  like any other corruption, ``<path>: corrupted: ...``, not with Python's sqlite3's
  bare decode error; the file is left unchanged;
* an interrupt (``KeyboardInterrupt``, the second Ctrl-C) arriving just after the file
  was opened for reading, before the code that closes it on an error, leaves nothing
  held: the lock is released and the file opens again.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine import lifecycle
from actormem._errors import StorageError
from actormem._storage import sqlite_format
from actormem._storage.sqlite import SqliteStore


async def _make(path: Path) -> None:
    async with open_memory(path=path) as memory:
        await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploys go to the blue cluster"))
        entry = MemoryEntry.new(MemoryCategory.FACT, "the key's entry").with_tag("infra")
        await memory.store(
            attrs.evolve(entry, namespace=("ns",), key="k", value={"a": 1}, ttl=3600.0)
        )
        await memory.retrieve("blue cluster")


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "m.db"
    trio.run(_make, path)
    return path


#: Every TEXT column of the entries table that holds a text in the file made above.
_TEXT_COLUMNS = [
    "id", "category", "memory", "tags", "namespace", "created_at", "last_accessed", "key",
    "value", "updated_at", "expires_at",
]  # fmt: skip


async def _open(path: Path) -> None:
    async with open_memory(path=path):
        pass


@pytest.mark.parametrize("c_rows", [True, False])
@pytest.mark.parametrize("column", _TEXT_COLUMNS)
def test_a_text_that_is_not_utf8_is_a_corruption(
    tmp_path: Path, column: str, c_rows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix: ``<path>: Could not decode to UTF-8 column ...`` (sqlite3's own
    words, where every other damage to the rows says ``corrupted:``)."""
    monkeypatch.setattr(sqlite_format, "_C_ROWS", c_rows)
    path = _file(tmp_path)
    with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
        done = conn.execute(
            f"UPDATE entries SET {column} = CAST(X'6162FF80C3' AS TEXT) "
            "WHERE seq = (SELECT max(seq) FROM entries)"
        )
        assert done.rowcount == 1
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StorageError) as caught:
        trio.run(_open, path)
    message = str(caught.value)
    assert message.startswith(f"{path}: corrupted: a text that is not UTF-8 ("), message
    assert f"column '{column}'" in message
    assert path.read_bytes() == before


def test_a_meta_text_that_is_not_utf8_is_a_corruption(tmp_path: Path) -> None:
    path = _file(tmp_path)
    with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
        conn.execute("UPDATE meta SET value = CAST(X'FF' AS TEXT) WHERE key = 'schema_version'")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StorageError, match="^.*: corrupted: a text that is not UTF-8"):
        trio.run(_open, path)
    assert path.read_bytes() == before


def test_sqlite_reason_leaves_other_operational_errors_alone() -> None:
    exc = sqlite3.OperationalError("no such table: entries")
    assert sqlite_format.sqlite_reason(exc) == "no such table: entries"
    exc = sqlite3.OperationalError("Could not decode to UTF-8 column 'memory' with text 'a'")
    assert sqlite_format.sqlite_reason(exc).startswith("corrupted: a text that is not UTF-8")


def _interrupt_after(target: Any, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``trio.to_thread.run_sync`` raising ``KeyboardInterrupt`` once the thread that ran
    ``target`` (called directly, or through a helper that takes it as an argument) has
    finished: as a Ctrl-C that lands on the event loop just after the await returned,
    before the caller's next statement. Returns the list of those threads' results."""
    real = trio.to_thread.run_sync
    seen: list[Any] = []

    async def run_sync(fn: Any, *args: Any, **kwargs: Any) -> Any:
        got = await real(fn, *args, **kwargs)
        # (A classmethod is a new bound method at each attribute read: compared by its
        # function.)
        if any(getattr(a, "__func__", None) is target.__func__ for a in (fn, *args)):
            seen.append(got)
            raise KeyboardInterrupt
        return got

    monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)
    return seen


@pytest.mark.parametrize("check_first", [False, True])
def test_an_interrupt_right_after_the_open_leaves_nothing_held(
    tmp_path: Path, check_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both paths of ``lifecycle._LOAD_BEFORE_CHECK`` (``SqliteStore.open_read`` then
    the load; ``SqliteStore.open`` then the load). Before the fix the opening's lock (and
    a ``quick_check`` left running beside) stayed held: the next open of the file said
    "held by another memory"."""
    monkeypatch.setattr(lifecycle, "_LOAD_BEFORE_CHECK", not check_first)
    path = _file(tmp_path)
    target = SqliteStore.open if check_first else SqliteStore.open_read
    seen = _interrupt_after(target, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        trio.run(_open, path)
    assert len(seen) == 1
    # No quick_check left running beside (an Opening's LateCheck is stopped by abort).
    assert not [t for t in threading.enumerate() if t.name == "actormem open check"]
    monkeypatch.undo()
    trio.run(_open, path)  # the lock was released

    async def count() -> int:
        async with open_memory(path=path) as memory:
            return len(memory.snapshot())

    assert trio.run(count) == 2
