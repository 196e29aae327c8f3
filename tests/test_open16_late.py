"""Branch open16: ``quick_check`` left running while the state loads, and the load's
objects moved to the collector's oldest generation.

``read_file(..., late=[])`` hands the running check over as a ``LateCheck``;
``SqliteStore.open_read`` / ``Opening.finish`` join it before the file is opened for
writing; ``open_memory`` loads the state between the two (``lifecycle._LOAD_BEFORE_CHECK``)
and then promotes what the load made (``lifecycle._PROMOTE_LOADED``). Both sides of every
knob give the same state, answers, refusals and errors, and a refused file is left
unchanged.
"""

from __future__ import annotations

import gc
import sqlite3
import sys
import threading
import weakref
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import WordOverlapScorer, open_memory
from actormem._engine import lifecycle
from actormem._engine.state import MemoryState
from actormem._errors import StorageError
from actormem._storage import sqlite as sqlite_module
from actormem._storage import sqlite_format
from actormem._storage.sqlite import Durability, SqliteStore

from .setups import change_file, change_first_text, with_warnings
from .test_open13_split import needs_reader
from .test_open_beside import _made, _no_threads_left
from .test_open_fast import _assert_same

QUERIES = ("What did Caroline research?", "tool result json", "alpha")


async def _imaged(path: Path, n: int = 300) -> None:
    await _made(path, n)
    async with open_memory(path=path):  # closed cleanly: now with its image
        pass


def _open_either(path: Path, late: bool) -> Any:
    """``SqliteStore.open`` (late False) or ``open_read`` then ``finish``: the store's
    entries, image and counters, or the error's text; the store closed."""
    try:
        if late:
            opening, entries = SqliteStore.open_read(str(path), Durability.NORMAL)
            try:
                store = opening.finish()
            except BaseException:
                opening.abort()
                raise
        else:
            store, entries = SqliteStore.open(str(path), Durability.NORMAL)
    except StorageError as exc:
        return ("error", str(exc))
    try:
        return (list(entries), store.image, store.saved_counters)
    finally:
        store.close()


@needs_reader
def test_read_file_hands_the_check_over_and_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db)
    plain = sqlite_format.read_file(str(db))
    late: list[Any] = []
    got = sqlite_format.read_file(str(db), late=late)
    assert got == plain
    assert plain[1] is not None
    assert len(late) == 1
    assert isinstance(late[0], sqlite_format.LateCheck)
    late[0].result()
    late[0].result()  # idempotent
    late[0].stop()
    _no_threads_left()
    monkeypatch.setattr(sqlite_format, "_CHECK_LATE", False)
    off: list[Any] = []
    assert sqlite_format.read_file(str(db), late=off) == plain
    assert off == []
    monkeypatch.setattr(sqlite_format, "_CHECK_LATE", True)
    # stopped without its result: the thread ends, nothing raised
    late = []
    sqlite_format.read_file(str(db), late=late)
    late[0].stop()
    late[0].stop()
    _no_threads_left()
    assert _open_either(db, True) == _open_either(db, False)
    _no_threads_left()


def _variants(pristine: bytes) -> dict[str, bytes]:
    page = int.from_bytes(pristine[16:18], "big")
    out: dict[str, bytes] = {}
    data = bytearray(pristine)
    for start in range(page, len(data), page):  # every page after the first scribbled
        data[start + 8 : start + page - 8] = bytes(range(256)) * ((page - 16) // 256) + bytes(
            (page - 16) % 256
        )
    out["scribbled"] = bytes(data)
    data = bytearray(pristine)
    data[-page // 2 : -page // 2 + 64] = b"\xee" * 64  # one page's cells
    out["one page"] = bytes(data)
    out["truncated"] = pristine[: len(pristine) // 2]
    return out


def test_refused_files_give_the_same_error_and_stay_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 200)
    pristine = db.read_bytes()
    cases = dict(_variants(pristine))
    for name, statement in (
        (
            "bad row",
            "UPDATE entries SET relevance = 7.5 WHERE seq = (SELECT MAX(seq) FROM entries)",
        ),
        (
            "id twice",
            "UPDATE entries SET id = (SELECT id FROM entries ORDER BY seq LIMIT 1)"
            " WHERE seq = (SELECT MAX(seq) FROM entries)",
        ),
        ("stale marker", f"UPDATE meta SET value = 'x' WHERE key = '{sqlite_format.IMAGE_KEY}'"),
    ):
        db.write_bytes(pristine)
        change_file(db, statement)
        cases[name] = db.read_bytes()
    for name, raw in cases.items():
        results = []
        for late in (False, True):
            db.write_bytes(raw)
            for side in (Path(f"{db}-wal"), Path(f"{db}-shm")):
                side.unlink(missing_ok=True)
            got, warned = with_warnings(caplog, _open_either, db, late)
            results.append((got, warned))
            if got[0] == "error":
                assert db.read_bytes() == raw, name  # refused: left unchanged
        assert results[0] == results[1], name
        _no_threads_left()


def test_a_failed_late_check_opens_nothing_for_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check refuses the file after the rows were read: ``finish`` raises its error
    before any read-write connection exists, the lock is released and the file is
    unchanged; ``open_memory`` raises it too, with the state loaded meanwhile dropped."""
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 120)
    pristine = db.read_bytes()
    checked = threading.Event()

    def bad_check(path: str, conn: sqlite3.Connection) -> None:
        checked.set()
        raise StorageError(path, "corrupted: checked late")

    connects: list[str] = []
    real_connect = sqlite_module._connect

    def spy_connect(path: str, durability: Durability) -> Any:
        connects.append(path)
        return real_connect(path, durability)

    monkeypatch.setattr(sqlite_format, "_quick_check", bad_check)
    monkeypatch.setattr(sqlite_module, "_connect", spy_connect)
    for late in (False, True):
        assert _open_either(db, late) == ("error", f"{db}: corrupted: checked late")
    assert connects == []
    loads: list[int] = []
    real_load = MemoryState.load

    def counted(self: MemoryState, *args: Any, **kwargs: Any) -> Any:
        loads.append(1)
        return real_load(self, *args, **kwargs)

    monkeypatch.setattr(MemoryState, "load", counted)
    for load_first in (False, True):
        monkeypatch.setattr(lifecycle, "_LOAD_BEFORE_CHECK", load_first)
        del loads[:]
        with pytest.raises(StorageError, match="checked late"):
            trio.run(_open_and_close, db)
        assert loads == ([1] if load_first else [])  # loaded before the check's error
    monkeypatch.setattr(MemoryState, "load", real_load)
    assert connects == []
    assert db.read_bytes() == pristine
    _no_threads_left()
    monkeypatch.undo()  # the check passes again: the file opens (the lock was released)
    monkeypatch.setattr(sqlite_format, "_CHECK_LATE", True)
    assert _open_either(db, True)[0] != "error"


async def _open_and_close(path: Path) -> None:
    async with open_memory(path=path):
        pass  # pragma: no cover


def test_abort_and_an_interrupt_in_the_load_release_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 120)
    pristine = db.read_bytes()
    opening, entries = SqliteStore.open_read(str(db), Durability.NORMAL)
    assert entries
    opening.abort()
    opening.abort()  # idempotent
    with pytest.raises(StorageError, match="finished or aborted"):
        opening.finish()
    _no_threads_left()
    opening, _ = SqliteStore.open_read(str(db), Durability.NORMAL)  # the lock is free
    store = opening.finish()
    opening.abort()  # a no-op once finished
    store.close()

    def interrupted(self: MemoryState, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryState, "load", interrupted)
    with pytest.raises(KeyboardInterrupt):
        trio.run(_open_and_close, db)
    _no_threads_left()
    monkeypatch.undo()
    assert _open_either(db, True)[0] != "error"  # unlocked and whole
    assert len(pristine) > 0


async def _opened(path: Path, capacity: int | None = None) -> Any:
    async with open_memory(path=path, scorer=WordOverlapScorer(), capacity=capacity) as memory:
        assert memory._storage is not None
        return memory._state, memory._storage.image_fresh


async def _answers(path: Path, capacity: int | None = None) -> Any:
    async with open_memory(path=path, scorer=WordOverlapScorer(), capacity=capacity) as memory:
        answers = []
        for q in QUERIES:
            hits = await memory.retrieve(q, 10)
            answers.append([(str(h.id), h.memory) for h in hits])
        return answers


def _rows_of(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT * FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()


@pytest.mark.parametrize("capacity", [None, 150])
def test_an_open_with_the_knobs_equals_one_without(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capacity: int | None,
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 400)
    pristine = db.read_bytes()
    monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 1)
    for stale in (False, True):
        seen = []
        for on in (False, True):
            db.write_bytes(pristine)
            for side in (Path(f"{db}-wal"), Path(f"{db}-shm")):
                side.unlink(missing_ok=True)
            if stale:  # a row's text changed behind actormem's back, the marker kept
                change_first_text(db)
            monkeypatch.setattr(lifecycle, "_LOAD_BEFORE_CHECK", on)
            monkeypatch.setattr(lifecycle, "_PROMOTE_LOADED", on)
            monkeypatch.setattr(sqlite_format, "_CHECK_LATE", on)
            (state, fresh), warned = with_warnings(caplog, trio.run, _opened, db, capacity)
            rows = _rows_of(db)
            answers = trio.run(_answers, db, capacity)
            seen.append((state, fresh, answers, warned, rows))
        (a, fa, qa, wa, ra), (b, fb, qb, wb, rb) = seen
        _assert_same(a, b)
        assert (fa, qa, wa, ra) == (fb, qb, wb, rb)
        assert fa == (not stale and capacity is None)  # the image used, or rebuilt
        if capacity is None:  # (a load that evicts rebuilds: no image read)
            assert any("digest" in w for w in wa) == stale
        if capacity is not None:
            assert len(ra) == capacity  # the evictions committed on both sides
        _no_threads_left()


#: CPython 3.12 (3.12.1 here) starts with objects frozen already (gc.get_freeze_count()
#: is 375 before any code runs): to_oldest_generation then leaves the collector alone,
#: as after an application's own gc.freeze(), so the load is not promoted there.
_NOT_FROZEN_AT_START = pytest.mark.skipif(
    sys.version_info[:2] == (3, 12),
    reason="CPython 3.12 starts with frozen objects: no promotion (to_oldest_generation)",
)


@_NOT_FROZEN_AT_START
def test_the_load_is_promoted_and_nothing_left_frozen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 60)

    async def by_id_generation() -> int | None:
        async with open_memory(path=db) as memory:
            target = memory._state._by_id
            for gen in (0, 1, 2):
                if any(o is target for o in gc.get_objects(gen)):
                    return gen
            return None

    assert gc.get_freeze_count() == 0
    monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 1)
    was = gc.isenabled()
    gc.disable()  # no collection moves it between the open and the look
    try:
        assert trio.run(by_id_generation) == 2
        assert gc.get_freeze_count() == 0
        monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 10**9)  # below it: left young
        assert trio.run(by_id_generation) == 0
        monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 1)
        monkeypatch.setattr(lifecycle, "_PROMOTE_LOADED", False)
        assert trio.run(by_id_generation) == 0
        monkeypatch.setattr(lifecycle, "_PROMOTE_LOADED", True)
        # the application's own freeze: left as it is (an object frozen before the open is
        # still frozen after it: in no generation), and the load young. The frozen count
        # itself may fall: a frozen object that dies meanwhile leaves it.
        mine = [object()]
        gc.freeze()
        try:
            assert gc.get_freeze_count() > 0
            assert trio.run(by_id_generation) == 0
            assert not any(o is mine for gen in (0, 1, 2) for o in gc.get_objects(gen))
            assert gc.get_freeze_count() > 0
        finally:
            gc.unfreeze()
    finally:
        if was:
            gc.enable()
    assert gc.get_freeze_count() == 0


@_NOT_FROZEN_AT_START
def test_a_promoted_memory_is_collected_after_its_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unlike a freeze (which leaked every closed memory through its owner's cycle), the
    promoted load is still seen by full collections: a closed memory is freed."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 60)
    monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 1)
    refs: list[Any] = []

    async def opened() -> None:
        async with open_memory(path=db) as memory:
            refs.append(weakref.ref(memory))
            refs.append(weakref.ref(memory._state))

    trio.run(opened)
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert gc.get_freeze_count() == 0
