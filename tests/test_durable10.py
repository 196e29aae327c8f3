"""Branch durable10: a durable ``normal`` memory's small group commits made on the event
loop (``memory._INLINE_COMMIT``), against the path before it (every commit in a worker
thread, SQLite's automatic checkpoint).

* The same file and the same replies either way: Hypothesis draws a run of stores,
  ``store_many`` lists (some past ``INLINE_ROWS``: those still go to the thread),
  upserts, deletes, deletes by key, retrieves (their access updates are committed with
  the next batch: an awaited write after each makes that batch the same on both sides;
  unawaited, which batch takes them depends on when the owner runs), consolidations and
  expiries, with a clock that repeats; every reply, every
  retrieve's results and scores, the statistics and every row of the file are equal.
* Checkpoints: the store takes them (``wal_autocheckpoint`` 0), only in the worker
  thread, never after a commit made on the loop; the estimate of the WAL's frames is
  never below the frames SQLite wrote (read from the WAL index's header), and the WAL
  stays bounded.
* ``inline_ok`` refuses ``full`` durability, ``meta`` rows, clearing, too many rows, a
  checkpoint due, and a store that did not ``take_checkpoints``.
* A database locked by another program: the commit on the loop gives up at once and the
  thread waits for the lock, while the loop runs on.
* ``_commit_inline``'s order and errors, as ``_in_thread_while``'s.
* ``sqlite_format._ACCESS_ISO``: ``encode_access`` by the core's ``iso_utc`` gives the
  parameters ``isoformat`` gives, value and type, for times in any zone, with and
  without access bookkeeping and expiries.
* Cancelled writers and a cancelled memory lose no acknowledged store; a SIGKILL in the
  middle of single stores (commits on the loop) loses none either.
"""

from __future__ import annotations

import mmap
import sqlite3
import struct
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, StorageError, open_memory
from actormem._engine import memory as memory_module
from actormem._engine.memory import _commit_inline
from actormem._record import Access, Record
from actormem._storage import sqlite as sqlite_store
from actormem._storage import sqlite_format
from actormem._storage.sqlite import Batch, Durability, SqliteStore, frames_of

from .crash_child import run_trial
from .strategies import examples

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["deploy", "pager", "disk", "cache", "ünï", "日本", "db", "retry", "x" * 40]


class Clock:
    """A clock that moves 1 ms a reading: access times differ, and repeat exactly."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now


def _entry(i: int, words: list[str], key: bool, ttl: bool, big: bool) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=i + 1),
        category=list(MemoryCategory)[i % len(MemoryCategory)],
        memory=" ".join(words) + (" y" * 400 if big else "") + f" #{i}",
        tags=["t"] if i % 3 == 0 else [],
        namespace=("a",) if i % 2 else (),
        created_at=T0 + timedelta(seconds=i),
        key=f"k{i % 5}" if key else None,
        value={"i": i} if i % 4 == 0 else None,
        ttl=3600.0 if ttl else None,
    )


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("store"), st.integers(0, 60), st.booleans(), st.booleans()),
        st.tuples(st.just("many"), st.integers(0, 60), st.integers(1, 90), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 60)),
        st.tuples(st.just("delete_key"), st.integers(0, 4)),
        st.tuples(st.just("retrieve"), st.sampled_from(WORDS), st.integers(1, 8)),
        st.tuples(st.just("consolidate")),
    ),
    min_size=1,
    max_size=25,
)

#: A text's words for each of the 61 entries ``_ops`` may name (its second item).
_words = st.lists(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), min_size=61, max_size=61
)


async def _play(path: Path, ops: list[tuple[Any, ...]], words: list[list[str]]) -> list[Any]:
    """Run ``ops`` on a durable memory at ``path``; every reply, then the statistics
    and the entries read back after reopening."""
    out: list[Any] = []
    clock = Clock()
    async with open_memory(path=path, clock=clock) as memory:
        for op in ops:
            kind = op[0]
            try:
                if kind == "store":
                    _, i, key, ttl = op
                    out.append(await memory.store(_entry(i, words[i], key, ttl, i % 7 == 0)))
                elif kind == "many":
                    _, i, n, key = op
                    batch = [
                        _entry(j, words[j % 61], key, False, j % 9 == 0) for j in range(i, i + n)
                    ]
                    out.append(await memory.store_many(batch))
                elif kind == "delete":
                    out.append(await memory.delete(uuid.UUID(int=op[1] + 1)))
                elif kind == "delete_key":
                    out.append(await memory.delete_key((), f"k{op[1]}"))
                elif kind == "retrieve":
                    found = await memory.retrieve_scored(op[1], op[2])
                    out.append([(s.entry.id, s.score) for s in found])
                    # The hits reach the owner unawaited, with whatever batch comes next:
                    # an awaited write here makes that the same batch on both sides.
                    out.append(await memory.sweep_expired())
                else:
                    stats = await memory.consolidate()
                    out.append(repr(stats))
            except Exception as exc:  # domain errors must be the same too
                out.append(repr(exc))
        await memory.sweep_expired()
        stats = memory.statistics()
        out.append(
            (stats.entries, stats.stores, stats.upserts, stats.deletes, stats.access_updates)
        )
    async with open_memory(path=path, clock=clock) as memory:
        out.append(list(memory.snapshot()))
    return out


def _dump(path: Path) -> list[Any]:
    conn = sqlite3.connect(path)
    try:
        return [list(conn.execute(f"SELECT * FROM {t} ORDER BY 1")) for t in ("entries", "meta")]
    finally:
        conn.close()


class Counting:
    """Counts a store's commits made on the loop and in the thread."""

    def __init__(self) -> None:
        self.inline = 0
        self.thread = 0

    def attach(self, store: SqliteStore) -> None:
        inline, write = store.write_inline, store.write

        def write_inline(batch: Batch) -> bool:
            done = inline(batch)
            self.inline += done
            return done

        def threaded(batch: Batch) -> None:
            assert threading.current_thread() is not threading.main_thread()
            self.thread += 1
            write(batch)

        store.write_inline = write_inline  # type: ignore[method-assign]
        store.write = threaded  # type: ignore[method-assign]


@settings(
    max_examples=examples(12),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ops=_ops,
    words=_words,
)
def test_files_and_replies_are_the_same_either_way(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]], words: list[list[str]]
) -> None:
    folder = tmp_path_factory.mktemp("same")
    outs = []
    for on in (True, False):
        memory_module._INLINE_COMMIT = on
        try:
            path = folder / f"{on}.db"
            outs.append((trio.run(_play, path, ops, words), _dump(path)))
        finally:
            memory_module._INLINE_COMMIT = True
    assert outs[0] == outs[1]


def test_small_batches_commit_on_the_loop_large_ones_in_the_thread(tmp_path: Path) -> None:
    async def main() -> Counting:
        counting = Counting()
        async with open_memory(path=tmp_path / "m.db") as memory:
            assert memory._storage is not None
            counting.attach(memory._storage)
            for i in range(5):
                await memory.store(_entry(i, ["deploy"], False, False, False))
            await memory.retrieve("deploy", 3)
            await memory.store_many(
                [
                    _entry(i, ["pager"], False, False, False)
                    for i in range(100, 100 + memory_module.INLINE_ROWS + 1)
                ]
            )
        return counting

    counting = trio.run(main)
    assert (counting.inline, counting.thread) == (5, 1)


def _wal_frames(path: Path) -> int:
    """Frames in the WAL not yet checkpointed: ``mxFrame - nBackfill`` of the WAL index
    header (https://sqlite.org/walformat.html, 2.1 and 2.2)."""
    with (
        open(str(path) + "-shm", "rb") as f,
        mmap.mmap(f.fileno(), 136, access=mmap.ACCESS_READ) as m,
    ):
        (mx,) = struct.unpack_from("=I", m, 16)
        (backfill,) = struct.unpack_from("=I", m, 96)
    return int(mx - backfill)


def test_checkpoints_in_the_thread_only_and_the_estimate_covers_the_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_FRAMES", 60)
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_BESIDE", False)  # durable11's, off
    path = tmp_path / "m.db"
    where: list[bool] = []
    seen: list[tuple[int, int]] = []

    async def main() -> tuple[int, int]:
        async with open_memory(path=path, clock=Clock()) as memory:
            store = memory._storage
            assert store is not None
            conn = store._conn
            assert conn is not None
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
            checkpoint = store._checkpoint

            def recorded(conn: sqlite3.Connection) -> None:
                where.append(threading.current_thread() is threading.main_thread())
                checkpoint(conn)

            store._checkpoint = recorded  # type: ignore[method-assign]
            write_inline, write = store.write_inline, store.write

            def inline(batch: Batch) -> bool:
                done = write_inline(batch)
                seen.append((_wal_frames(path), store.wal_frames))
                return done

            def threaded(batch: Batch) -> None:
                write(batch)
                seen.append((_wal_frames(path), store.wal_frames))

            store.write_inline = inline  # type: ignore[method-assign]
            store.write = threaded  # type: ignore[method-assign]
            for i in range(300):
                await memory.store(
                    _entry(i, [WORDS[i % 9], WORDS[i % 5]], False, False, i % 5 == 0)
                )
                if i % 3 == 0:
                    await memory.retrieve(WORDS[i % 9], 8)
            for at in range(0, 600, 200):
                await memory.store_many(
                    [
                        _entry(1000 + j, ["disk"], False, False, j % 3 == 0)
                        for j in range(at, at + 200)
                    ]
                )
            return store.checkpoints, store.commits

    checkpoints, commits = trio.run(main)
    assert checkpoints >= 3
    assert where == [False] * checkpoints
    assert commits > 300
    # The estimate never falls short of the frames SQLite wrote since the last checkpoint.
    assert all(actual <= estimate for actual, estimate in seen), [
        (n, a, e) for n, (a, e) in enumerate(seen) if a > e or n < 3
    ]
    assert max(actual for actual, _ in seen) < 60 + 60  # bounded: one batch past the threshold


def test_inline_ok_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_store, "_CHECKPOINT_BESIDE", False)  # durable11's, off
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    try:
        row = Batch([], [], [(1, None, None, 1)])
        assert not store.inline_ok(row, 64)  # take_checkpoints not called
        store.take_checkpoints()
        assert store.inline_ok(row, 64)
        assert not store.inline_ok(Batch([], [], [(1, None, None, 1)] * 65), 64)
        assert store.inline_ok(Batch([], [], [(1, None, None, 1)] * 64), 64)
        assert not store.inline_ok(Batch([], [], [], meta=[("k", "v")]), 64)
        assert not store.inline_ok(Batch([], [], [], clear=True), 64)
        assert not store.inline_ok(Batch([], [], [], vectors=[(1, b"", b"")] * 65), 64)
        store.wal_frames = sqlite_store.CHECKPOINT_FRAMES - frames_of(row, 16384)
        assert not store.inline_ok(row, 64)  # a checkpoint due after it
        store.wal_frames -= 1
        assert store.inline_ok(row, 64)
        assert store.save_counters({"stores": 1}) is None  # patient again from here on
        assert not store.inline_ok(row, 64)
    finally:
        store.close()
    full, _ = SqliteStore.open(str(tmp_path / "f.db"), Durability.FULL)
    try:
        full.take_checkpoints()
        assert not full.inline_ok(Batch([], [], []), 64)
    finally:
        full.close()


def test_full_durability_commits_in_the_thread(tmp_path: Path) -> None:
    async def main() -> Counting:
        counting = Counting()
        async with open_memory(path=tmp_path / "m.db", durability="full") as memory:
            assert memory._storage is not None
            conn = memory._storage._conn
            assert conn is not None
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
            counting.attach(memory._storage)
            for i in range(3):
                await memory.store(_entry(i, ["deploy"], False, False, False))
        return counting

    counting = trio.run(main)
    assert (counting.inline, counting.thread) == (0, 3)


def test_knob_off_is_the_path_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_module, "_INLINE_COMMIT", False)

    async def main() -> Counting:
        counting = Counting()
        async with open_memory(path=tmp_path / "m.db") as memory:
            assert memory._storage is not None
            conn = memory._storage._conn
            assert conn is not None
            assert conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (1000,)
            assert conn.execute("PRAGMA busy_timeout").fetchone() == (10000,)
            counting.attach(memory._storage)
            await memory.store(_entry(1, ["deploy"], False, False, False))
        return counting

    counting = trio.run(main)
    assert (counting.inline, counting.thread) == (0, 1)


def test_a_locked_database_is_waited_for_in_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "m.db"

    async def main() -> tuple[Counting, int]:
        counting = Counting()
        ticks = 0
        async with open_memory(path=path) as memory:
            assert memory._storage is not None
            counting.attach(memory._storage)
            await memory.store(_entry(0, ["deploy"], False, False, False))
            foreign = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            foreign.execute("BEGIN IMMEDIATE")  # another program holds the write lock
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(memory.store, _entry(1, ["pager"], False, False, False))
                    for _ in range(20):  # the loop runs while the store waits
                        await trio.sleep(0.005)
                        ticks += 1
                    assert await memory.get(uuid.UUID(int=2)) is None
                    foreign.execute("COMMIT")
            finally:
                foreign.close()
            assert await memory.get(uuid.UUID(int=2)) is not None
            await memory.store(_entry(2, ["disk"], False, False, False))
        return counting, ticks

    counting, ticks = trio.run(main)
    assert ticks == 20
    assert (counting.inline, counting.thread) == (2, 1)

    async def back() -> int:
        async with open_memory(path=path) as memory:
            return len(memory)

    assert trio.run(back) == 3


def test_a_lock_held_past_the_wait_fails_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_BUSY_MS", 50)
    store, _ = SqliteStore.open(str(tmp_path / "m.db"), Durability.NORMAL)
    foreign = sqlite3.connect(tmp_path / "m.db", isolation_level=None)
    try:
        store.take_checkpoints()
        foreign.execute("BEGIN IMMEDIATE")
        put = Batch([(5,)], [], [])
        assert store.write_inline(put) is False
        with pytest.raises(StorageError, match="locked by another program"):
            store.write(put)
        foreign.execute("COMMIT")
        assert store.commits == 0
        conn = store._conn
        assert conn is not None
        assert conn.execute("PRAGMA busy_timeout").fetchone() == (0,)
        assert store.write_inline(put) is True
        assert store.commits == 1
    finally:
        foreign.close()
        store.close()


def test_commit_inline_order_and_errors() -> None:
    calls: list[str] = []

    def meanwhile() -> None:
        calls.append("meanwhile")

    def done(arg: str) -> bool:
        calls.append(arg)
        return True

    assert _commit_inline(done, "write", meanwhile) is True
    assert calls == ["write", "meanwhile"]
    calls.clear()
    assert _commit_inline(lambda arg: False, "x", meanwhile) is False
    assert calls == []  # locked: the thread's commit will index meanwhile

    def fails(arg: str) -> bool:
        raise StorageError("p", "disk on fire")

    with pytest.raises(StorageError, match="disk on fire"):
        _commit_inline(fails, "x", meanwhile)
    assert calls == ["meanwhile"]

    def bug() -> None:
        raise KeyError("bug")

    with pytest.raises(KeyError) as caught:
        _commit_inline(fails, "x", bug)
    assert isinstance(caught.value.__context__, StorageError)
    with pytest.raises(KeyError):
        _commit_inline(done, "x", bug)


def test_cancelled_writers_and_memory_lose_no_acknowledged_store(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    acked: set[uuid.UUID] = set()
    tried: set[uuid.UUID] = set()

    async def writer(
        memory: Any, w: int, target: int = 0, enough: trio.Event | None = None
    ) -> None:
        try:
            for i in range(10**6):
                entry = _entry(w * 10**6 + i, [WORDS[i % 9]], False, False, i % 4 == 0)
                tried.add(entry.id)
                await memory.store(entry)
                acked.add(entry.id)
                if enough is not None and len(acked) >= target:
                    enough.set()
                if i % 3 == 0:
                    await memory.retrieve(WORDS[i % 9], 3)
        except trio.ClosedResourceError:  # the memory closed under the store
            pass

    async def main() -> None:
        with trio.CancelScope() as outer:
            async with open_memory(path=path) as memory:
                with trio.move_on_after(0.2):  # cancels the writers mid-flight
                    async with trio.open_nursery() as nursery:
                        for w in range(12):
                            nursery.start_soon(writer, memory, w)
                target = len(acked) + 40
                enough = trio.Event()
                async with trio.open_nursery() as nursery:  # then the memory, stores queued
                    for w in range(12, 20):
                        nursery.start_soon(writer, memory, w, target, enough)
                    await enough.wait()
                    outer.cancel()

    trio.run(main)

    async def back() -> set[uuid.UUID]:
        async with open_memory(path=path) as memory:
            return {e.id for e in memory.snapshot()}

    present = trio.run(back)
    assert acked <= present <= tried
    assert len(acked) >= 40


@pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock")
def test_sigkill_amid_commits_on_the_loop_loses_nothing(tmp_path: Path) -> None:
    report = run_trial(str(tmp_path / "crash.db"), 1010, rounds=2, max_acks=400, writers=8)
    assert report["lost"] == []
    assert report["stored"] >= report["acked"]


_times = st.integers(10**12, 10**17).map(
    lambda us: datetime(1, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
)
_zones = st.sampled_from([UTC, timezone(timedelta(hours=-7)), timezone(timedelta(minutes=330))])


@settings(max_examples=examples(60), deadline=None)
@given(
    created=_times,
    last=st.none() | _times,
    zone=_zones,
    count=st.sampled_from([0, 3, 2**63 - 1, 2**63, 2**70]),
    access=st.none() | st.tuples(st.integers(0, 2**64), st.none() | _times, st.none() | _times),
    ttl=st.booleans(),
)
def test_encode_access_is_the_same_either_way(
    created: datetime,
    last: datetime | None,
    zone: timezone,
    count: int,
    access: tuple[int, datetime | None, datetime | None] | None,
    ttl: bool,
) -> None:
    entry = MemoryEntry(
        category=MemoryCategory.FACT,
        memory="m",
        created_at=created.astimezone(zone),
        last_accessed=None if last is None else last.astimezone(zone),
        access_count=count,
        ttl=60.0 if ttl else None,
    )
    rec = Record(entry, 4, 4)
    if access is not None:
        n, when, expires = access
        rec.access = Access(5, n, when and when.astimezone(zone), None, expires)
    got = {}
    for on in (True, False):
        sqlite_format._ACCESS_ISO = on
        try:
            got[on] = sqlite_format.encode_access(rec)
        finally:
            sqlite_format._ACCESS_ISO = True
    assert got[True] == got[False]
    assert [type(x) for x in got[True]] == [type(x) for x in got[False]]
