"""Branch durable12: a ``normal`` memory's commits on the loop written by the compiled
writer (``_cwrite.c``) over a connection of its own (``sqlite._C_COMMIT``).

* The same operations with the knob on and off: the same replies, retrieves, statistics,
  entries read back and every row of ``entries`` and ``meta`` (Hypothesis, through
  ``test_durable10``'s ``_play``), and with the knob on the commits on the loop are the
  writer's (the Python path's ``stat`` is never reached).
* Batches replayed straight into two stores, one each way: the same rows, the same
  ``frames_of`` bookkeeping; values the writer does not bind as ``sqlite3`` would (an
  ``int`` subclass, an ``int`` past 64 bits, a lone surrogate) take the Python path and
  give the same rows or the same error.
* Errors: a failing statement (``NOT NULL``) rolls back and raises the same
  ``StorageError`` either way; a write lock held by another connection returns False
  with nothing done; a replaced file and a closed store fail as before; the writer's
  own argument refusals.
* A file written with the knob on opens and grows with it off, and back.
* Any values in an access update (Hypothesis: ints past 64 bits, bools, NaN, text with
  NUL or lone surrogates, bytes, None): the same rows or the same error either way.
* SIGKILL trials: ``tests/test_durable12_kill.py``.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, StorageError, open_memory
from actormem._record import Record
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch, Durability, SqliteStore
from actormem._storage.sqlite_format import encode_records

from .strategies import examples
from .test_durable10 import _dump, _ops, _play, _words

pytestmark = pytest.mark.skipif(
    not sqlite_store._c_writer_usable(), reason="the compiled writer is not built here"
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _entry(i: int, text: str = "disk pager") -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i + 1),
        category=list(MemoryCategory)[i % len(MemoryCategory)],
        memory=f"{text} #{i}",
        tags=["t"] if i % 3 == 0 else [],
        namespace=("a",) if i % 2 else (),
        created_at=T0 + timedelta(seconds=i),
        key=f"k{i}" if i % 4 == 0 else None,
        value={"i": i} if i % 5 == 0 else None,
        ttl=60.0 if i % 6 == 0 else None,
    )


def _rows_of(entries: list[tuple[int, MemoryEntry]]) -> list[tuple[Any, ...]]:
    return encode_records([Record(e, 1, seq) for seq, e in entries])


def _open(path: Path) -> SqliteStore:
    store, _ = SqliteStore.open(str(path), Durability.NORMAL)
    store.take_checkpoints()
    return store


@pytest.fixture
def knob() -> Any:
    yield
    sqlite_store._C_COMMIT = True


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ops=_ops,
    words=_words,
)
def test_replies_and_files_are_the_same_either_way(
    tmp_path_factory: pytest.TempPathFactory,
    knob: None,
    ops: list[tuple[Any, ...]],
    words: list[list[str]],
) -> None:
    folder = tmp_path_factory.mktemp("same")
    outs = []
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        path = folder / f"{on}.db"
        outs.append((trio.run(_play, path, ops, words), _dump(path)))
    assert outs[0] == outs[1]


def test_the_loop_commits_are_the_writers(
    tmp_path: Path, knob: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    python_path = []
    check = SqliteStore._check_identity

    def counted(self: SqliteStore) -> None:
        python_path.append(1)
        check(self)

    monkeypatch.setattr(SqliteStore, "_check_identity", counted)

    async def main() -> tuple[int, bool]:
        async with open_memory(path=tmp_path / "m.db") as memory:
            store = memory._storage
            assert store is not None
            assert store._cwriter is not None
            python_path.clear()  # the opening's checks
            for i in range(30):
                await memory.store(_entry(i))
                await memory.retrieve("disk", 3)
            return store.commits, bool(python_path)

    commits, used_python = trio.run(main)
    assert commits >= 30
    assert not used_python
    sqlite_store._C_COMMIT = False

    async def reopen() -> int:
        async with open_memory(path=tmp_path / "m.db") as memory:
            assert memory._storage is not None
            assert memory._storage._cwriter is None
            return len(memory)

    assert trio.run(reopen) == 30


def _batches() -> list[Batch]:
    """Puts, upserts (the same seq again), access updates and deletes, some long rows."""
    out = []
    seq = 0
    for b in range(12):
        entries = []
        for _ in range(1 + b % 3):
            seq += 1
            entries.append((seq, _entry(seq, "long " * (900 if seq % 7 == 0 else 1))))
        accesses = [
            (s % 5, (T0 + timedelta(seconds=s)).isoformat(), None, s) for s in range(1, seq, 3)
        ]
        deletes = [(s,) for s in range(1, seq, 11) if b % 4 == 3]
        vectors = [(s, b"h" * 16, b"\0" * 8) for s, _ in entries if s % 2]
        out.append(Batch(deletes, _rows_of(entries), accesses, vectors=vectors))
    return out


def _all_rows(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return [
            list(conn.execute(f"SELECT * FROM {t} ORDER BY 1"))
            for t in ("entries", "meta", "vectors")
        ]
    finally:
        conn.close()


def test_replayed_batches_make_the_same_rows(tmp_path: Path, knob: None) -> None:
    got = []
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        store = _open(tmp_path / f"{on}.db")
        try:
            assert (store._cwriter is not None) is on
            for batch in _batches():
                assert store.inline_ok(batch, 64)
                assert store.write_inline(batch) is True
            got.append((store.commits, store.written, store.wal_frames))
        finally:
            store.close()
        got.append(_all_rows(tmp_path / f"{on}.db"))
    assert got[0][:2] == got[2][:2]
    # The compiled writer counts the frames SQLite wrote (sqlite._REAL_FRAMES), the
    # Python path estimates them, never fewer.
    assert 0 < got[0][2] <= got[2][2]
    assert got[1] == got[3]
    assert got[1][0]  # rows were written


@pytest.mark.parametrize(
    "odd",
    [True, 2**70, "lone \ud800 surrogate", -(2**63)],
    ids=["bool", "big-int", "surrogate", "min-int64"],
)
def test_values_it_does_not_bind_take_the_python_path(tmp_path: Path, knob: None, odd: Any) -> None:
    outcome = []
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        store = _open(tmp_path / f"{on}.db")
        try:
            rows = _rows_of([(1, _entry(1))])
            store.write_inline(Batch([], rows, []))
            try:
                store.write_inline(Batch([], [], [(odd, None, None, 1)]))
                outcome.append("ok")
            except Exception as exc:  # the same error, whatever it is
                outcome.append(type(exc).__name__)
            outcome.append(store._cwriter is not None and store._cwriter.in_transaction)
        finally:
            store.close()
        outcome.append(_all_rows(tmp_path / f"{on}.db"))
    assert outcome[:3] == outcome[3:]


def test_a_failing_statement_rolls_back_with_the_same_error(tmp_path: Path, knob: None) -> None:
    reasons = []
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        store = _open(tmp_path / f"{on}.db")
        try:
            good = _rows_of([(1, _entry(1))])
            bad = list(_rows_of([(2, _entry(2))])[0])
            bad[3] = None  # memory is NOT NULL
            with pytest.raises(StorageError) as info:
                store.write_inline(Batch([], [*good, tuple(bad)], [(3, None, None, 1)]))
            reasons.append(info.value.reason)
            assert not (store._cwriter and store._cwriter.in_transaction)
            assert store.commits == 0
            assert store.write_inline(Batch([], good, [])) is True  # the next one commits
        finally:
            store.close()
        reasons.append(_all_rows(tmp_path / f"{on}.db"))
    assert reasons[0] == reasons[2]
    assert "NOT NULL" in reasons[0]
    assert reasons[1] == reasons[3]


def test_a_lock_held_elsewhere_returns_false_with_nothing_done(tmp_path: Path, knob: None) -> None:
    store = _open(tmp_path / "m.db")
    try:
        assert store._cwriter is not None
        other = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        batch = Batch([], _rows_of([(1, _entry(1))]), [])
        assert store.write_inline(batch) is False
        assert store.commits == 0
        assert not store._cwriter.in_transaction
        other.execute("ROLLBACK")
        other.close()
        assert store.write_inline(batch) is True
    finally:
        store.close()
    assert len(_all_rows(tmp_path / "m.db")[0]) == 1


def test_a_replaced_file_and_a_closed_store_fail_as_before(tmp_path: Path, knob: None) -> None:
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        path = tmp_path / f"{on}.db"
        store = _open(path)
        batch = Batch([], _rows_of([(1, _entry(1))]), [])
        try:
            os.rename(path, tmp_path / "moved.db")
            with pytest.raises(StorageError, match="removed or moved away"):
                store.write_inline(batch)
            os.rename(tmp_path / "moved.db", path)
            assert store.write_inline(batch) is True
        finally:
            store.close()
        with pytest.raises(StorageError, match="closed"):
            store.write_inline(batch)


def test_writer_refusals(tmp_path: Path) -> None:
    from actormem._storage import _cwrite  # type: ignore[attr-defined]

    store = _open(tmp_path / "m.db")
    try:
        writer = store._cwriter
        assert writer is not None
        assert writer.commit(None, "not a list", [], [], []) == -1
        assert writer.commit(None, [(1, 2)], [], [], []) == -1  # wrong length
        assert writer.commit(None, [[1]], [], [], []) == -1  # not a tuple
        assert writer.commit(None, [], [], [(1, None, None)], []) == -1
        with pytest.raises(TypeError):
            writer.commit(5, [], [], [], [])
        assert writer.commit(None, [], [], [], []) == 1  # an empty transaction
        uri = sqlite_store.file_uri(store.path) + "?mode=rw"
        with pytest.raises(ValueError, match="9 statements"):
            _cwrite.Writer(uri, os.fsencode(store.path), 0, 0, "", ("COMMIT",))
        with pytest.raises(TypeError):
            _cwrite.Writer(uri, os.fsencode(store.path), 0, 0, "", (1,) * 9)
        with pytest.raises(sqlite3.OperationalError):
            _cwrite.Writer(
                uri, os.fsencode(store.path), 0, 0, "",
                ("SELECT nonsense FROM nowhere",) * 9,
            )  # fmt: skip
        writer.close()
        writer.close()  # idempotent
        assert writer.closed
        with pytest.raises(ValueError, match="closed"):
            writer.commit(None, [], [], [], [])
    finally:
        store._cwriter = None
        store.close()


def test_files_open_and_grow_with_the_knob_either_way(tmp_path: Path, knob: None) -> None:
    path = tmp_path / "m.db"

    async def grow(start: int) -> int:
        async with open_memory(path=path) as memory:
            for i in range(start, start + 20):
                await memory.store(_entry(i))
                await memory.retrieve("pager", 2)
            return len(memory)

    for n, on in enumerate((True, False, True)):
        sqlite_store._C_COMMIT = on
        assert trio.run(grow, 20 * n) == 20 * (n + 1)
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()


_values = st.one_of(
    st.none(),
    st.integers(-(2**64), 2**64),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.binary(max_size=30),
)


@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(params=st.lists(st.tuples(_values, _values, _values), min_size=1, max_size=6))
def test_any_values_give_the_same_rows_or_the_same_error(
    tmp_path_factory: pytest.TempPathFactory, knob: None, params: list[tuple[Any, ...]]
) -> None:
    """Access updates of arbitrary values (``UPDATE_ACCESS``'s three columns; the
    schema's types are not enforced by SQLite) on rows 1-3, either way: the same rows
    after, or the same error and no change."""
    folder = tmp_path_factory.mktemp("values")
    outcome = []
    for on in (True, False):
        sqlite_store._C_COMMIT = on
        store = _open(folder / f"{on}.db")
        try:
            assert store.write_inline(Batch([], _rows_of([(s, _entry(s)) for s in (1, 2, 3)]), []))
            accesses = [(*p, 1 + k % 3) for k, p in enumerate(params)]
            try:
                store.write_inline(Batch([], [], accesses))
                outcome.append("ok")
            except Exception as exc:
                outcome.append(type(exc).__name__)
        finally:
            store.close()
        outcome.append(repr(_all_rows(folder / f"{on}.db")))  # repr: nan == nan
    assert outcome[:2] == outcome[2:]


async def test_reads_never_commit_and_a_hit_commits_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``test_durable``'s reads-never-touch-the-file, for the writer: retrieves without
    hits, snapshots and gets commit nothing; a hit's access update is one commit (with
    ``sqlite._DEFER_ACCESS`` off; on: tests/test_durable15.py)."""
    monkeypatch.setattr(sqlite_store, "_DEFER_ACCESS", False)
    async with open_memory(path=tmp_path / "m.db") as memory:
        for i in range(50):
            await memory.store(_entry(i, f"entry {i}"))
        store = memory._storage
        assert store is not None
        assert store._cwriter is not None
        commits, written = store.commits, store.written
        for _ in range(20):
            assert await memory.retrieve("entry", 5, namespace=("nowhere",)) == []
            assert len(memory.snapshot().retrieve("entry", 3)) == 3
            assert await memory.get(uuid.uuid4()) is None
        await memory.sweep_expired()  # an awaited round trip through the owner
        assert (store.commits, store.written) == (commits, written)
        await memory.retrieve("entry 7", 1)
        await memory.sweep_expired()
        assert (store.commits, store.written) == (commits + 1, written + 1)


async def test_a_full_disk_fails_the_commit_and_breaks_the_memory(tmp_path: Path) -> None:
    """``test_durable``'s failed commit, through the writer: its connection limited to
    the file's pages (``max_page_count``), a large store fails with "full", nothing of
    its batch is acknowledged, the memory is broken and the file holds what was."""
    from actormem._storage import _cwrite  # type: ignore[attr-defined]

    path = tmp_path / "m.db"
    async with open_memory(path=path) as memory:
        await memory.store(_entry(1, "before"))
        store = memory._storage
        assert store is not None
        assert store._cwriter is not None
        (pages,) = store._conn.execute("PRAGMA page_count").fetchone()
        dev, ino = store._identity
        full = _cwrite.Writer(
            sqlite_store.file_uri(store.path) + "?mode=rw",
            os.fsencode(store.path),
            dev,
            ino,
            f"PRAGMA busy_timeout = 0; PRAGMA max_page_count = {pages}",
            sqlite_store._C_STATEMENTS,
        )
        store._cwriter.close()
        store._cwriter = full
        results: list[BaseException] = []

        async def put(e: MemoryEntry) -> None:
            try:
                await memory.store(e)
            except (StorageError, trio.BrokenResourceError) as exc:
                results.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(put, _entry(2, "x" * 50_000))
            nursery.start_soon(put, _entry(3, "same batch"))
        assert [type(r) for r in results] == [StorageError, StorageError]
        assert "full" in str(results[0])
        assert not full.in_transaction
        with pytest.raises(trio.BrokenResourceError):
            await memory.store(_entry(4, "later"))
    async with open_memory(path=path) as memory:
        assert [e.memory for e in memory.snapshot()] == ["before #1"]
