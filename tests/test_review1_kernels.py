"""Review (review1) of open8/durable8: the compiled row decoders refuse an entry type
whose "slots" are member descriptors of another class (offsets into that class's
layout: writing there corrupted the object), the compiled reader keeps away from
files that take locks when it runs another copy of SQLite than Python's sqlite3, and
the collector's pause is counted across threads and errors."""

from __future__ import annotations

import gc
import os
import sqlite3
import threading
import warnings
from array import array
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._entry import _ENTRY_FIELDS, MAX_KEY_CHARS, MAX_MEMORY_CHARS, MAX_TTL
from actormem._index import kernels
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import MAX_SEQ, encode_record
from actormem._util import gc_paused


class _Foreign(Exception):
    """A GC'd slots class large enough for MemoryEntry's offsets, whose class attributes
    are MemoryEntry's member descriptors (they land on BaseException's own fields)."""

    __slots__ = tuple(f"p{i}" for i in range(40))


for _name in _ENTRY_FIELDS:
    setattr(_Foreign, _name, MemoryEntry.__dict__[_name])


def _row() -> tuple[Any, ...]:
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="hello")
    return tuple(encode_record(Record(entry, 1, 1)))


def _tail() -> list[Any]:
    return [
        sqlite_format._tags_of, sqlite_format._namespace_of, sqlite_format._json_object,
        1.0, MAX_MEMORY_CHARS, MAX_KEY_CHARS, MAX_TTL, MAX_SEQ,
    ]  # fmt: skip


@pytest.mark.skipif(sqlite_format._decode_rows_c is None, reason="no compiled core")
def test_decode_rows_refuses_another_class_s_descriptors() -> None:
    decode = sqlite_format._decode_rows_c
    assert decode is not None
    out: list[Any] = []
    args = [_ENTRY_FIELDS, sqlite_format._CATEGORIES, *_tail()]
    with pytest.raises(TypeError):
        decode([_row()], 0, out, _Foreign, *args)
    assert out == []
    assert decode([_row()], 0, out, MemoryEntry, *args) == 1  # its own class: decoded


@pytest.mark.skipif(sqlite_format._crows is None, reason="no compiled row reader")
def test_the_reader_refuses_another_class_s_descriptors(tmp_path: Path) -> None:
    crows = sqlite_format._crows
    assert crows is not None
    uri = sqlite_format.file_uri(str(tmp_path / "none.db")) + "?mode=ro"
    args = [_ENTRY_FIELDS, sqlite_format._CATEGORY_VALUES, *_tail()]
    with pytest.raises(TypeError):
        crows.read_entries(uri, sqlite_format.SELECT_ENTRIES, _Foreign, *args)


def _wal_file(path: str) -> sqlite3.Connection:
    """A file with rows in a WAL that its open writer keeps (not checkpointed)."""
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    rows = []
    for i in range(1, 6):
        entry = MemoryEntry(category=MemoryCategory.FACT, memory=f"text {i}")
        rows.append(tuple(encode_record(Record(entry, i, i))))
    conn.executemany(sqlite_format.INSERT_ENTRY, rows)
    return conn


@pytest.mark.skipif(sqlite_format._crows is None, reason="no compiled row reader")
def test_another_sqlite_copy_reads_only_files_without_locks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    real = sqlite_format._crows.read_entries  # type: ignore[union-attr]

    def counted(uri: str, *args: Any) -> Any:
        calls.append(uri)
        return real(uri, *args)

    monkeypatch.setattr(sqlite_format._crows, "read_entries", counted)
    path = str(tmp_path / "m.db")
    writer = _wal_file(path)
    try:
        monkeypatch.setattr(sqlite_format, "_SAME_SQLITE", True)
        same, _ = sqlite_format.read_file(path)
        assert len(calls) == 1
        assert "immutable" not in calls[0]
        monkeypatch.setattr(sqlite_format, "_SAME_SQLITE", False)
        other, _ = sqlite_format.read_file(path)  # a WAL: locks taken; Python reads it
        assert len(calls) == 1
    finally:
        writer.close()  # checkpointed, the WAL removed
    again, _ = sqlite_format.read_file(path)  # immutable: read in C even so
    assert len(calls) == 2
    assert "immutable=1" in calls[1]
    assert [(s, e.id, e.memory) for s, e in same] == [(s, e.id, e.memory) for s, e in other]
    assert [(s, e.id, e.memory) for s, e in again] == [(s, e.id, e.memory) for s, e in other]
    assert len(other) == 5


def _pausing_thread() -> tuple[threading.Thread, threading.Event, threading.Event]:
    """A thread (not started) that holds a ``gc_paused`` block from setting ``inside``
    until ``leave`` is set."""
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            inside.set()
            leave.wait(10)

    return threading.Thread(target=other), inside, leave


def test_gc_pauses_nest_across_threads_and_errors() -> None:
    assert gc.isenabled()
    thread, inside, leave = _pausing_thread()

    def pause_and_raise() -> None:
        with gc_paused():
            thread.start()
            assert inside.wait(10)
            raise RuntimeError("inside a pause")

    with pytest.raises(RuntimeError):
        pause_and_raise()
    assert not gc.isenabled()  # the other thread's pause still holds
    leave.set()
    thread.join(10)
    assert gc.isenabled()


_AHEADS = [-5, 0, 3, 17, 3074457345618258603, 6148914691236517205, 2**63 - 1]


@pytest.mark.skipif(kernels._wo is None, reason="no compiled core")
@pytest.mark.parametrize("ahead", _AHEADS)
def test_lists_of_ids_any_ahead(ahead: int) -> None:
    # An `ahead` whose 2x or 3x overflowed indexed the id list out of bounds (a crash).
    core: Any = kernels._wo
    a, b = array("i", [1, 2]), array("i", [3])
    lists: list[Any] = []
    lens: list[int] = []
    got = core.lists_of_ids([0, 1, 2, 7], 0, 4, [a, None, a], {1: "x", 7: "y"},
                            {"x": b, "y": a}, lists, lens, ahead)  # fmt: skip
    assert got == 7
    assert lens == [2, 1, 2, 2]
    assert lists == [a, b, a, a]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork on this platform")
def test_a_child_forked_during_another_thread_s_pause_collects_again() -> None:
    """The thread that holds a pause does not exist in a forked child: the child must not
    stay without a collector forever (nor deadlock on the pause's lock), while a pause of
    the forking thread itself still holds in the child until that block ends."""
    assert gc.isenabled()
    thread, inside, leave = _pausing_thread()
    thread.start()
    try:
        assert inside.wait(10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads
            with gc_paused():
                pid = os.fork()
                if pid == 0 and gc.isenabled():  # the child: our own pause must hold
                    os._exit(3)
            if pid == 0:  # our block ended; the other thread's pause died with the fork
                os._exit(0 if gc.isenabled() else 4)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        leave.set()
        thread.join(10)
    assert gc.isenabled()
