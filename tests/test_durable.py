"""Durable memories: round trips, crash safety, refusals, locking, cancellation, failures."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actormem import (
    MAX_MEMORY_CHARS,
    InvalidEntryError,
    InvalidQueryError,
    Memory,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_memory,
    serve_memory,
)
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Durability
from actormem._storage.sqlite_format import APPLICATION_ID, SCHEMA_VERSION

from .crash_child import make_entry, run_trial

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="durable memories need fcntl.flock (POSIX)"
)

CHILD = str(Path(__file__).with_name("crash_child.py"))
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fact(text: str, relevance: float = 1.0) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_relevance(relevance)


def varied(i: int, rng: random.Random) -> MemoryEntry:
    """Entry ``i`` of the round trip: every category, unicode, empty and odd fields."""
    texts = [
        "", "plain", "ünïcödé 日本語 🧠 مرحبا", "nul\x00inside", "line\nbreak\ttab", " ",
        "x" * MAX_MEMORY_CHARS, "'; DROP TABLE entries; --", "e\u0301\u200d\ufeff",
    ]
    return MemoryEntry(
        id=uuid.UUID(int=rng.getrandbits(128)),
        category=list(MemoryCategory)[i % len(MemoryCategory)],
        memory=(texts[i % len(texts)] + ("" if i % 3 else f" #{i}"))[:MAX_MEMORY_CHARS],
        tags=[] if i % 2 else rng.sample(["a", "İ", "🧠 tag", "with space", "x" * 300], 3),
        namespace=[(), ("t",), ("t", "acme"), ("日本", "ü")][i % 4],
        created_at=[
            T0 + timedelta(microseconds=rng.randrange(10**13)),
            datetime(1, 1, 1, tzinfo=UTC),
            datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
            datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=-7))),
        ][i % 4 if i < 40 else 0],
        relevance=[0.0, 1.0, 5e-324, 0.1 + 0.2, rng.random()][i % 5],
        access_count=[0, 1, 2**63 - 1, rng.randrange(10**9)][i % 4],
        validated=i % 7 == 0,
        last_accessed=None if i % 3 else T0 + timedelta(microseconds=rng.randrange(10**12)),
    )


async def contents(memory: Memory) -> list[MemoryEntry]:
    """Every entry in insertion order, once no access update is pending."""
    # A write round trip: once the owner answered it, every earlier batch (and the access
    # hits buffered before it) was committed and published.
    assert not await memory.delete(uuid.uuid4())
    assert not memory._pending_access
    memory._state._check()
    return list(memory.snapshot())


async def reopened(path: Path, **options: Any) -> list[MemoryEntry]:
    async with open_memory(path=path, **options) as memory:
        return await contents(memory)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


# ------------------------------------------------------------------ round trips


async def test_round_trip_of_1000_varied_entries(db: Path) -> None:
    rng = random.Random(4)
    entries = [varied(i, rng) for i in range(1000)]
    async with open_memory(path=db) as memory:
        async with trio.open_nursery() as nursery:
            for e in entries[:500]:
                nursery.start_soon(memory.store, e)
        for e in entries[500:]:
            await memory.store(e)
        before = await contents(memory)
    assert sorted(before, key=lambda e: e.id.int) == sorted(entries, key=lambda e: e.id.int)
    after = await reopened(db)
    assert after == before  # every field, in insertion order
    for a, b in zip(after, before, strict=False):
        assert attrs.astuple(a) == attrs.astuple(b)
        assert a.created_at.tzinfo == UTC
        assert a.relevance.hex() == b.relevance.hex()
    assert await reopened(db) == before  # a reopen without writes changes nothing


async def test_every_kind_of_change_is_persisted(db: Path) -> None:
    now = [T0]
    rng = random.Random(7)
    async with open_memory(path=db, capacity=50, clock=lambda: now[0]) as memory:
        ids = []
        for i in range(60):  # 10 evictions
            e = attrs.evolve(varied(i, rng), relevance=0.5 + i / 200, access_count=i)
            ids.append(e.id)
            await memory.store(e)
        upsert = MemoryEntry(id=ids[-1], category=MemoryCategory.INSIGHT, memory="upserted")
        await memory.store(upsert)
        assert await memory.delete(ids[-2])
        await memory.store(fact("Deploy uses BLUE", 0.3))
        await memory.store(fact("deploy  uses blue", 0.9).with_tag("infra"))
        await memory.store(fact("noise", 0.01))
        now[0] = T0 + timedelta(days=1)
        await memory.retrieve("deploy blue", 3)
        await memory.retrieve("upserted", 1)
        await trio.testing.wait_all_tasks_blocked()
        stats = await memory.consolidate()
        assert stats.pruned == 1
        assert stats.merged >= 1
        before = await contents(memory)
        assert memory.statistics().evictions > 0
    after = await reopened(db, capacity=50)
    assert after == before
    merged = [e for e in after if e.memory == "Deploy uses BLUE"]
    assert merged[0].tags == ("infra",)
    assert merged[0].access_count == 2
    assert merged[0].last_accessed == T0 + timedelta(days=1)


async def test_random_batches_coalesce_correctly() -> None:
    """Random mixes of stores, upserts, deletes, evictions and retrieves, many per batch
    (store_nowait queues them for one wake-up); the file always equals the memory."""
    for seed in range(4):
        rng = random.Random(seed)
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "m.db"
            pool = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(40)]
            async with open_memory(path=db, capacity=25) as memory:
                for _ in range(40):
                    for _ in range(rng.randint(1, 12)):
                        op = rng.random()
                        id = rng.choice(pool)
                        if op < 0.75:
                            memory.store_nowait(
                                MemoryEntry(
                                    id=id,
                                    category=MemoryCategory.FACT,
                                    memory=rng.choice(["alpha", "beta", "gamma", "Alpha "]),
                                    relevance=rng.random(),
                                )
                            )
                        elif op < 0.9:
                            await memory.retrieve(rng.choice(["alpha", "beta"]), 3)
                        else:
                            await memory.delete(id)
                    if rng.random() < 0.1:
                        await memory.consolidate()
                    await memory.store(fact(f"sync {rng.random()}"))
                before = await contents(memory)
                commits = memory._storage.commits if memory._storage else 0
            assert commits < 40 * 4
            assert await reopened(db, capacity=25) == before


async def test_eviction_then_restore_of_the_same_id_in_one_batch(db: Path) -> None:
    async with open_memory(path=db, capacity=2) as memory:
        x = fact("x", 0.1)
        await memory.store(x)
        await memory.store(fact("y", 0.9))
        assert memory._storage is not None
        commits = memory._storage.commits
        memory.store_nowait(fact("z", 0.9))  # evicts x
        memory.store_nowait(x.with_relevance(1.0))  # x again: evicts y or z
        await memory.store(fact("w", 0.95))
        assert memory._storage.commits == commits + 1  # one batch, one transaction
        before = await contents(memory)
    assert x.id in {e.id for e in before}
    assert await reopened(db, capacity=2) == before


async def test_access_counts_are_persisted(db: Path) -> None:
    now = T0 + timedelta(hours=3, microseconds=17)
    async with open_memory(path=db, clock=lambda: now) as memory:
        e = fact("rust is fast")
        await memory.store(e)
        async with trio.open_nursery() as nursery:
            for _ in range(20):
                nursery.start_soon(memory.retrieve, "rust", 1)
        before = await contents(memory)
    (got,) = await reopened(db)
    assert got == before[0]
    assert got.access_count == 20
    assert got.last_accessed == now


async def test_reads_never_touch_the_file(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The statements are traced on the store's own connection: the Python commit path
    # (the compiled writer's twin: tests/test_durable12.py).
    monkeypatch.setattr(sqlite_store, "_C_COMMIT", False)
    # A hit's access update in the next commit, as before durable15 (its deferred twin:
    # tests/test_durable15.py).
    monkeypatch.setattr(sqlite_store, "_DEFER_ACCESS", False)
    async with open_memory(path=db) as memory:
        for i in range(50):
            await memory.store(fact(f"entry {i}"))
        assert memory._storage is not None
        assert memory._storage._conn is not None
        statements: list[str] = []
        memory._storage._conn.set_trace_callback(statements.append)
        for _ in range(20):
            assert await memory.retrieve("entry", 5, namespace=("nowhere",)) == []
            assert len(memory.snapshot().retrieve("entry", 3)) == 3  # snapshots never count
            assert await memory.get(uuid.uuid4()) is None
        await contents(memory)
        assert statements == []
        await memory.retrieve("entry 7", 1)  # a hit: its access update is committed
        await contents(memory)
        assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE", "COMMIT"]


async def test_smaller_capacity_evicts_on_load_and_persists_it(db: Path) -> None:
    async with open_memory(path=db) as memory:
        await memory.store(fact("e0", 0.1).as_validated())
        for i in range(1, 10):
            await memory.store(fact(f"e{i}", (i + 1) / 10))
    async with open_memory(path=db, capacity=4) as memory:
        kept = await contents(memory)
        assert memory.statistics().evictions == 6
    # The validated entry and the three most relevant stay, in insertion order.
    assert [e.memory for e in kept] == ["e0", "e7", "e8", "e9"]
    assert await reopened(db) == kept


async def test_store_nowait_is_committed_before_close(db: Path) -> None:
    async with open_memory(path=db) as memory:
        for i in range(100):
            memory.store_nowait(fact(f"n{i}"))
    assert [e.memory for e in await reopened(db)] == [f"n{i}" for i in range(100)]


async def test_group_commit_shares_transactions(db: Path) -> None:
    async with open_memory(path=db) as memory:
        async with trio.open_nursery() as nursery:
            for i in range(300):
                nursery.start_soon(memory.store, fact(f"c{i}"))
        assert memory._storage is not None
        assert len(memory) == 300
        assert memory._storage.commits < 30
        assert memory._storage.written == 300


async def test_serve_memory_and_options(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    async with trio.open_nursery() as nursery:
        memory = await nursery.start(
            lambda task_status: serve_memory(
                path=str(db), durability="full", task_status=task_status
            )
        )
        assert memory._storage is not None
        assert memory._storage.durability is Durability.FULL
        await memory.store(fact("served"))
        await memory.aclose()
    assert not (tmp_path / "served.db.lock").exists()
    assert [e.memory for e in await reopened(db, durability=Durability.NORMAL)] == ["served"]
    with pytest.raises(InvalidQueryError):
        async with open_memory(path=db, durability="sometimes"):
            pass
    with pytest.raises(TypeError):
        async with open_memory(path=db, durability=2):  # type: ignore[arg-type]
            pass
    with pytest.raises(TypeError):
        async with open_memory(path=b"x.db"):  # type: ignore[arg-type]
            pass
    with pytest.raises(InvalidQueryError):
        async with open_memory(path=""):
            pass
    async with open_memory(path=db) as memory:
        with pytest.raises(InvalidEntryError):
            await memory.store(attrs.evolve(fact("huge"), access_count=2**63))
    async with open_memory() as memory:  # path=None: no file anywhere
        await memory.store(attrs.evolve(fact("huge"), access_count=2**63))
        assert memory._storage is None
    async with trio.open_nursery() as nursery:
        with pytest.raises(StorageError, match="no such directory: "):
            await nursery.start(
                lambda task_status: serve_memory(
                    path=tmp_path / "missing-dir" / "m.db", task_status=task_status
                )
            )


# ------------------------------------------------------------------ crash safety


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_sigkill_loses_no_acknowledged_store(tmp_path: Path, seed: int) -> None:
    report = run_trial(str(tmp_path / "crash.db"), seed, rounds=2, max_acks=200)
    assert report["lost"] == []
    assert report["stored"] >= report["acked"]


def test_crash_child_entries_are_deterministic() -> None:
    assert make_entry(3, 5) == make_entry(3, 5)
    assert make_entry(3, 5) != make_entry(3, 6)


# ------------------------------------------------------------------ refusals


def snapshot_dir(directory: Path) -> dict[str, str]:
    return {p.name: digest(p) for p in sorted(directory.iterdir()) if p.is_file()}


async def assert_refused(path: Path, match: str) -> StorageError:
    before = snapshot_dir(path.parent)
    with pytest.raises(StorageError, match=match) as info:
        async with open_memory(path=path):
            pass  # pragma: no cover
    assert info.value.path == str(path)
    assert info.value.reason in str(info.value)
    assert snapshot_dir(path.parent) == before  # byte for byte, and no file added
    return info.value


async def make_db(path: Path, n: int = 50) -> None:
    async with open_memory(path=path) as memory:
        for i in range(n):
            await memory.store(fact(f"entry {i} " + "padding " * 40))


async def test_refuses_garbage_empty_and_foreign_files(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"definitely not a database\n" * 100)
    await assert_refused(garbage, "not an actormem database")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    await assert_refused(empty, "empty file")
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute("CREATE TABLE entries (id TEXT)")
    conn.commit()
    conn.close()
    await assert_refused(foreign, "another application")
    lookalike = tmp_path / "lookalike.db"  # right application_id, nothing else
    conn = sqlite3.connect(lookalike)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    conn.close()
    await assert_refused(lookalike, "missing")


async def test_refuses_a_newer_schema_version(db: Path) -> None:
    await make_db(db)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()  # the last connection checkpoints: the header holds the new version
    await assert_refused(db, "newer actormem")


async def test_refuses_corrupted_files(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    await make_db(db, 200)
    pristine = db.read_bytes()
    page = int.from_bytes(pristine[16:18], "big")
    # Scribble over the middle of every page after the first (keeps the header valid).
    data = bytearray(pristine)
    for start in range(page, len(data), page):
        data[start + 8 : start + page - 8] = bytes(range(256)) * ((page - 16) // 256) + bytes(
            (page - 16) % 256
        )
    db.write_bytes(bytes(data))
    await assert_refused(db, "corrupt|malformed")
    db.write_bytes(pristine[: len(pristine) // 2])  # truncated
    await assert_refused(db, "corrupt|malformed|not an")
    # A row that decodes to an invalid entry.
    db.write_bytes(pristine)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE entries SET relevance = 7.5 WHERE seq = 3")
    conn.commit()
    conn.close()
    await assert_refused(db, "seq 3 is invalid")
    # The same id twice (rows are keyed by seq, so only loading can notice).
    db.write_bytes(pristine)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE entries SET id = (SELECT id FROM entries WHERE seq = 1) WHERE seq = 9")
    conn.commit()
    conn.close()
    await assert_refused(db, "appears twice")
    # Text that is not UTF-8.
    db.write_bytes(pristine)
    conn = sqlite3.connect(db)
    conn.execute("UPDATE entries SET memory = CAST(? AS TEXT) WHERE seq = 2", (b"\xff" * 5000,))
    conn.commit()
    conn.close()
    refused = await assert_refused(db, "decode|UTF-8|corrupt")
    assert len(str(refused)) < 1000
    # A long invalid value is quoted in part; a deeply nested one is refused too.
    for tags, match in (('"' + "x" * 5000 + '"', "more characters"), ("[" * 50_000, "too deep")):
        db.write_bytes(pristine)
        conn = sqlite3.connect(db)
        conn.execute("UPDATE entries SET tags = ? WHERE seq = 2", (tags,))
        conn.commit()
        conn.close()
        refused = await assert_refused(db, match)
        assert len(str(refused)) < 1000
    # A seq beyond what any memory reaches (loading continues the versions from it).
    for seq in (2**62 + 1, 2**63 - 1):
        db.write_bytes(pristine)
        conn = sqlite3.connect(db)
        conn.execute(
            "UPDATE entries SET seq = ? WHERE seq = (SELECT max(seq) FROM entries)", (seq,)
        )
        conn.commit()
        conn.close()
        await assert_refused(db, f"bad seq {seq}")


@pytest.mark.parametrize(
    ("kind", "sql"),
    [
        ("trigger", "CREATE TRIGGER tg AFTER INSERT ON entries BEGIN DELETE FROM entries; END"),
        ("view", "CREATE VIEW v AS SELECT memory FROM entries"),
        ("index", "CREATE INDEX ix ON entries (id)"),
        ("table", "CREATE TABLE extra (x)"),
        ("altered", "ALTER TABLE entries RENAME COLUMN memory TO mem"),
    ],
)
async def test_refuses_schema_objects_actormem_did_not_create(
    db: Path, kind: str, sql: str
) -> None:
    await make_db(db, 10)
    conn = sqlite3.connect(db)
    conn.execute(sql)
    conn.commit()
    conn.close()  # the last connection checkpoints: the file holds the new schema
    match = "unexpected schema objects" if kind != "altered" else "unexpected|columns"
    error = await assert_refused(db, match)
    if kind != "altered":
        assert kind in error.reason


async def test_whitespace_and_comments_of_the_schema_do_not_matter() -> None:
    from actormem._storage.sqlite_format import _normalise_sql

    assert _normalise_sql("CREATE TABLE t (\n a INT, -- note\n b  TEXT )") == (
        "CREATE TABLE t(a INT,b TEXT)"
    )


async def test_refuses_an_orphaned_wal(db: Path) -> None:
    with open(str(db) + "-wal", "wb") as wal:  # noqa: ASYNC230 - test setup
        wal.write(b"\x37\x7f\x06\x82" + bytes(100))
    await assert_refused(db, "log")


def test_refuses_a_read_only_directory(tmp_path: Path) -> None:
    if sys.platform != "linux" and os.geteuid() == 0:
        pytest.skip("dropping root's file-permission capabilities needs Linux")
    # A world-readable directory outside pytest's private tmp tree, for the child.
    directory = Path(tempfile.mkdtemp(prefix="actormem-ro-"))
    try:
        db = directory / "m.db"
        trio.run(make_db, db)
        directory.chmod(0o755)
        db.chmod(0o644)
        before = snapshot_dir(directory)
        directory.chmod(0o555)
        args = [sys.executable, CHILD, "try-open", str(db)]
        if os.geteuid() == 0:
            args.append("--drop-dac")
        done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=True)
        result = json.loads(done.stdout)
        assert "not writable" in result["error"]
        assert result["path"] == str(db)
        directory.chmod(0o755)
        assert snapshot_dir(directory) == before
    finally:
        directory.chmod(0o755)
        shutil.rmtree(directory)


# ------------------------------------------------------------------ locking


async def test_second_open_in_the_same_process_is_refused(db: Path) -> None:
    link = db.with_name("link.db")
    link.symlink_to(db)
    async with open_memory(path=db) as memory:
        await memory.store(fact("held"))
        for other in (db, link, db):
            with pytest.raises(StorageError, match="held by another memory"):
                async with open_memory(path=other):
                    pass  # pragma: no cover
        await memory.store(fact("still fine"))
    assert [e.memory for e in await reopened(db)] == ["held", "still fine"]


@pytest.fixture
def holder(db: Path) -> Iterator[subprocess.Popen[str]]:
    child = subprocess.Popen(
        [sys.executable, CHILD, "hold", str(db)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    yield child
    child.kill()
    child.wait()
    child.stdout.close()


async def test_second_process_is_refused_until_the_holder_dies(
    db: Path, holder: subprocess.Popen[str]
) -> None:
    with pytest.raises(StorageError, match="held by another memory"):
        async with open_memory(path=db):
            pass  # pragma: no cover
    holder.send_signal(signal.SIGKILL)
    await trio.to_thread.run_sync(holder.wait)
    async with open_memory(path=db) as memory:  # the kernel released the lock
        await memory.store(fact("after the holder"))
    assert len(await reopened(db)) == 1


# ------------------------------------------------------------------ cancellation


class SlowCommits:
    """Parks every commit inside its worker thread until released (none is made on the
    event loop: ``memory._INLINE_COMMIT``'s path is closed for the store)."""

    def __init__(self, memory: Memory) -> None:
        assert memory._storage is not None
        self.store = memory._storage
        self.inner = self.store.write
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()
        self.store.write = self  # type: ignore[method-assign]
        # Every commit in its worker thread (a commit on the loop would park the loop).
        self.store.inline_ok = lambda batch, rows: False  # type: ignore[method-assign]

    def __call__(self, batch: Any) -> None:
        self.entered.release()
        self.release.wait()
        self.inner(batch)

    async def wait_entered(self) -> None:
        await trio.to_thread.run_sync(self.entered.acquire)


async def test_cancelled_caller_neither_stalls_the_owner_nor_half_writes(db: Path) -> None:
    async with open_memory(path=db) as memory:
        slow = SlowCommits(memory)
        victim = fact("committed while its caller left " * 100)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(memory.store, victim)
                await slow.wait_entered()
                scope.cancel()  # the caller goes away mid-commit
        assert scope.cancelled_caught
        slow.release.set()
        await memory.store(fact("next"))  # the owner carries on
        assert await memory.get(victim.id) == victim
    assert [e.id for e in await reopened(db)][0] == victim.id
    assert (await reopened(db))[0] == victim


async def test_cancelled_owner_finishes_the_running_commit(db: Path) -> None:
    outcome: list[BaseException] = []
    victim = fact("in flight when the owner is cancelled")
    with trio.CancelScope() as scope:
        async with open_memory(path=db) as memory:
            slow = SlowCommits(memory)

            async def caller() -> None:
                try:
                    await memory.store(victim)
                except BaseException as exc:
                    outcome.append(exc)
                    raise

            async with trio.open_nursery() as nursery:
                nursery.start_soon(caller)
                await slow.wait_entered()
                scope.cancel()
                with trio.CancelScope(shield=True):
                    await trio.testing.wait_all_tasks_blocked()  # the cancel reached them
                assert outcome
                assert isinstance(outcome[0], trio.Cancelled)
                # The commit thread is not abandoned: the owner waits for it to finish.
                slow.release.set()
    assert memory._storage is not None
    assert memory._storage.commits == 1
    assert (await reopened(db)) == [victim]


async def test_readers_never_see_a_batch_before_its_commit_returned(db: Path) -> None:
    """While a batch's commit is parked in its thread, snapshots, ``get`` and retrieves
    show the memory as before the batch; they show it once the commit returned."""
    async with open_memory(path=db) as memory:
        kept = fact("deploy kept")
        await memory.store(kept)
        slow = SlowCommits(memory)
        new, replacing = fact("deploy new"), attrs.evolve(kept, memory="deploy replaced")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(memory.store, new)
                nursery.start_soon(memory.store, replacing)
                await slow.wait_entered()
                assert list(memory.snapshot()) == [kept]
                assert await memory.get(new.id) is None
                assert [e.memory for e in await memory.retrieve("deploy", 5)] == ["deploy kept"]
                slow.release.set()
        finally:
            slow.release.set()  # never leave the worker parked, even when an assert fails
        assert [e.memory for e in memory.snapshot()] == ["deploy replaced", "deploy new"]


# ------------------------------------------------------------------ failures


async def test_failed_commit_is_never_acknowledged_and_breaks_the_memory(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store's own connection is made "full": the Python commit path (the compiled
    # writer's twin: tests/test_durable12.py).
    monkeypatch.setattr(sqlite_store, "_C_COMMIT", False)
    async with open_memory(path=db) as memory:
        await memory.store(fact("before"))
        assert memory._storage is not None
        assert memory._storage._conn is not None
        conn = memory._storage._conn
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages}")  # the disk is now "full"
        big = fact("x" * 50_000)
        results: list[BaseException] = []

        async def store(e: MemoryEntry) -> None:
            try:
                await memory.store(e)
            except (StorageError, trio.BrokenResourceError) as exc:
                results.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(store, big)
            nursery.start_soon(store, fact("same batch"))
        assert [type(r) for r in results] == [StorageError, StorageError]
        assert "full" in str(results[0])
        with pytest.raises(trio.BrokenResourceError) as later:
            await memory.store(fact("later"))
        assert isinstance(later.value.__cause__, StorageError)
        with pytest.raises(trio.BrokenResourceError):
            await memory.retrieve("x")
        with pytest.raises(trio.BrokenResourceError):
            memory.store_nowait(fact("later"))
        assert "broken" in repr(memory)
    # The memory exits quietly; the file holds exactly what was acknowledged.
    assert [e.memory for e in await reopened(db)] == ["before"]


@pytest.mark.parametrize("how", ["removed", "replaced"])
async def test_file_removed_or_replaced_underneath_fails_the_commit(
    tmp_path: Path, how: str
) -> None:
    db = tmp_path / "m.db"
    async with open_memory(path=db) as memory:
        await memory.store(fact("before"))
        if how == "removed":
            os.remove(db)
        else:
            other = tmp_path / "other.db"
            await make_db(other, 3)
            os.replace(other, db)
        with pytest.raises(StorageError, match="removed|replaced") as info:
            await memory.store(fact("after"))
        assert info.value.path == str(db)
        with pytest.raises(trio.BrokenResourceError) as later:
            await memory.store(fact("later"))
        assert isinstance(later.value.__cause__, StorageError)
    # SQLite notices the moved file and does not checkpoint on close: the old log stays.
    # (Reopening then refuses "missing" databases; see docs/durability.md.)
