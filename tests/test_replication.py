"""Replicas of one memory over a PostgreSQL write log (docs/replication.md).

Every test gets a fresh database (tests/pg.py); without a server they skip, naming
ACTORMEM_TEST_PG. States are compared field for field through ``encode_snapshot``
(every entry with its insertion number and access bookkeeping, and the version).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import uuid
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing

from actormem import (
    InvalidEntryError,
    InvalidQueryError,
    Memory,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_memory,
)
from actormem._engine.replica import ReplicaOptions, encode_snapshot
from tests.pg import FAST, Proxy, sql

WORDS = "alpha beta gamma delta tool error fix plan ok".split()
HERE = Path(__file__).resolve().parent


def node(dsn: str, name: str, path: Path | None, **options: Any) -> Any:
    """``open_memory`` of a node with the short test timings (unless given)."""
    options.setdefault("log_options", FAST)
    return open_memory(log=dsn, name=name, path=path, **options)


def state_of(memory: Memory) -> tuple[int | None, Any]:
    """(applied seq, every entry field by field with its insertion number, version)."""
    body = json.loads(encode_snapshot(memory._state, 0))
    return memory.statistics().log_applied_seq, (body["entries"], body["version"])


def entry(rng: random.Random, **kw: Any) -> MemoryEntry:
    fields: dict[str, Any] = {
        "id": uuid.UUID(int=rng.getrandbits(128), version=4),
        "category": rng.choice([MemoryCategory.FACT, MemoryCategory.INSIGHT]),
        "memory": " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3))),
        "relevance": rng.choice([0.01, 0.5, 1.0]),
        "created_at": datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(10**6)),
    }
    fields.update(kw)
    return MemoryEntry(**fields)


async def settle(*memories: Memory) -> int:
    """Make every node flush its access hits into the log, then wait until all have
    applied the last record; return its seq."""
    head = 0
    for m in memories:
        head = max(head, await m.delete(uuid.uuid4()) and 0 or m.statistics().log_applied_seq or 0)
    for m in memories:
        await m.wait_applied(head)
    return head


async def test_nodes_converge_under_concurrent_writes(pg_dsn: str, tmp_path: Path) -> None:
    """Three nodes; stores, upserts, store-many, deletes by id and by key, entries with
    a time to live and sweeps, retrieves (access bookkeeping), consolidations and
    evictions (capacity 25) from all three at once: every node ends in the same state
    at the same seq."""
    async with (
        node(pg_dsn, "team-a", tmp_path / "1.db", capacity=25) as a,
        node(pg_dsn, "team-a", tmp_path / "2.db", capacity=25) as b,
        node(pg_dsn, "team-a", None, capacity=25) as c,
    ):
        nodes = [a, b, c]

        async def worker(me: Memory, seed: int) -> None:
            rng = random.Random(seed)
            mine: list[MemoryEntry] = []
            for _ in range(40):
                r = rng.random()
                if r < 0.5 or not mine:
                    e = entry(rng)
                    mine.append(e)
                    seq = await me.store(e)
                    assert isinstance(seq, int)
                elif r < 0.6:
                    await me.store(rng.choice(mine).with_tag("upserted"))
                elif r < 0.65:
                    await me.store_many([entry(rng), rng.choice(mine).with_tag("again")])
                elif r < 0.7:
                    await me.delete(rng.choice(mine).id)
                elif r < 0.73:  # a keyed entry with a short time to live, by key
                    ns, key = ("keys",), rng.choice(["a", "b"])
                    await me.store(entry(rng, namespace=ns, key=key, ttl=0.05))
                elif r < 0.75:
                    await me.delete_key(("keys",), rng.choice(["a", "b"]))
                elif r < 0.77:
                    await me.sweep_expired()
                elif r < 0.8:
                    await me.consolidate()
                else:
                    await me.retrieve(rng.choice(WORDS), 3)

        async with trio.open_nursery() as nursery:
            for i, member in enumerate(nodes):
                for j in range(3):
                    nursery.start_soon(worker, member, i * 10 + j)
        # The workers' keyed entries may all be replaced or deleted before their 50 ms
        # run out (a fast run): one more that surely expires, swept through the log.
        await a.store(entry(random.Random(99), namespace=("keys",), key="last", ttl=0.05))
        await trio.sleep(0.06)
        await a.sweep_expired()
        head = await settle(*nodes)
        states = [state_of(n) for n in nodes]
        assert states[0] == states[1] == states[2]
        assert states[0][0] == head
        assert any(e["access_count"] for _, e in states[0][1][0])  # accesses were logged
        assert a.statistics().evictions > 0  # capacity 25 was reached
        assert a.statistics().expired > 0  # time-to-live entries ran out on every node


async def test_causal_read_on_another_node(pg_dsn: str) -> None:
    """A store's seq, waited for on another node, makes the store visible there."""
    rng = random.Random(5)
    async with (
        open_memory(log=pg_dsn, name="m", log_options=FAST) as a,
        open_memory(log=pg_dsn, name="m", log_options=FAST) as b,
    ):
        for _ in range(20):
            e = entry(rng)
            seq = await a.store(e)
            assert isinstance(seq, int)
            if seq % 2:
                await b.wait_applied(seq)
                assert await b.get(e.id) == e
            else:  # the retrieve waits itself
                hits = await b.retrieve(e.memory, 100, min_seq=seq)
                assert e.id in {h.id for h in hits}
            assert (b.statistics().log_applied_seq or 0) >= seq
        with trio.move_on_after(0.2) as scope:  # a seq nobody appended: waits until cancelled
            await b.wait_applied(10**9)
        assert scope.cancelled_caught
        with pytest.raises(InvalidEntryError, match="64 bits"):  # any node may checkpoint
            await b.store(attrs.evolve(e, access_count=2**63))
    with pytest.raises(trio.ClosedResourceError):
        await b.wait_applied(1)


async def test_applied_seq_moves_only_when_published(pg_dsn: str, tmp_path: Path) -> None:
    """While node B's local commit of a record is in its thread, B does not claim the
    record applied: a causal read waits for the publish (it once returned during the
    commit and read the old snapshot)."""
    import threading

    rng = random.Random(6)
    async with (
        node(pg_dsn, "m", None) as a,
        node(pg_dsn, "m", tmp_path / "b.db") as b,
    ):
        replica = b._replica
        assert replica is not None
        assert replica.store is not None
        write = replica.store.write
        entered, release = threading.Event(), threading.Event()

        def slow_write(batch: Any) -> None:
            entered.set()
            release.wait(30)
            write(batch)

        replica.store.write = slow_write  # type: ignore[method-assign]
        e = entry(rng)
        seq = await a.store(e)
        assert isinstance(seq, int)
        await trio.to_thread.run_sync(entered.wait, 30)  # B is committing the record
        seen: list[MemoryEntry | None] = []

        async def reader() -> None:
            seen.append((await b.retrieve(e.memory, 10, min_seq=seq) or [None])[0])

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert seen == []  # still waiting
            assert (b.statistics().log_applied_seq or 0) < seq
            release.set()
        assert seen == [e]


async def test_restart_replays_from_checkpoint(pg_dsn: str, tmp_path: Path) -> None:
    """A node closed while others write reopens its checkpoint, reads the log from its
    applied seq + 1 and converges; its file holds the applied seq with the state; a
    clean close logs the access hits still buffered."""
    rng = random.Random(1)
    path = tmp_path / "a.db"
    lazy = attrs.evolve(FAST, access_interval=3600.0)  # hits go out with writes or at close
    async with open_memory(log=pg_dsn, name="m", path=path, log_options=lazy) as a:
        for _ in range(5):
            await a.store(entry(rng))
        hit = (await a.retrieve(WORDS[0] + " " + WORDS[1], 1))[0]
    async with open_memory(log=pg_dsn, name="m", path=path, log_options=FAST) as a:
        got = await a.get(hit.id)
        assert got is not None
        assert got.access_count == hit.access_count + 1  # the close logged the hit
        first = a.statistics().log_applied_seq
    with closing(sqlite3.connect(path)) as conn:  # closed: 3.13 warns on one left open
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta["replica_applied_seq"] == str(first)
    async with open_memory(log=pg_dsn, name="m", path=tmp_path / "b.db", log_options=FAST) as b:
        for _ in range(5):
            await b.store(entry(rng))
        async with open_memory(log=pg_dsn, name="m", path=path, log_options=FAST) as a:
            assert a.statistics().log_applied_seq == b.statistics().log_applied_seq == first + 5
            assert state_of(a) == state_of(b)
            assert len(a) == 10


async def test_node_down_during_truncation_bootstraps_from_snapshot(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Node A is down while B writes a snapshot every 4 records and truncates the log
    (A's heartbeat is stale): A's records are gone, so it restarts from the snapshot and
    converges; a new node without a file starts from the snapshot too."""
    rng = random.Random(2)
    a_path = tmp_path / "a.db"
    async with open_memory(log=pg_dsn, name="m", path=a_path, capacity=8, log_options=FAST) as a:
        for _ in range(3):
            await a.store(entry(rng))
    opts = ReplicaOptions(
        log_timeout=2.0, poll_interval=0.1, heartbeat_interval=0.1, snapshot_every=4, live_seconds=0
    )
    async with node(pg_dsn, "m", tmp_path / "b.db", capacity=8, log_options=opts) as b:
        for _ in range(14):
            await b.store(entry(rng))
        await b.consolidate()
        (low,) = sql(pg_dsn, "SELECT min(seq) FROM actormem_log WHERE memory = 'm'")[0]
        assert low is None or low > 4  # A (applied 3) can no longer read what it needs
        async with (
            open_memory(log=pg_dsn, name="m", path=a_path, capacity=8, log_options=FAST) as a,
            open_memory(log=pg_dsn, name="m", capacity=8, log_options=FAST) as c,
        ):
            head = await settle(a, b, c)
            assert state_of(a) == state_of(b) == state_of(c)
            assert state_of(a)[0] == head
    with closing(sqlite3.connect(a_path)) as conn:
        rows = conn.execute("SELECT count(*) FROM entries").fetchone()
    assert rows == (len(state_of_file(a_path)),)


async def refused(error: type[Exception], match: str, **options: Any) -> None:
    """``open_memory(**options)`` raises ``error`` matching ``match``."""
    with pytest.raises(error, match=match):
        async with open_memory(**options):
            pass  # pragma: no cover


def state_of_file(path: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute("SELECT * FROM entries ORDER BY seq").fetchall()


def file_content(path: Path) -> tuple[Any, ...]:
    conn = sqlite3.connect(path)
    try:
        return (
            conn.execute("SELECT * FROM entries ORDER BY seq").fetchall(),
            sorted(conn.execute("SELECT * FROM meta").fetchall()),
        )
    finally:
        conn.close()


async def test_bad_input_is_refused_and_changes_nothing(pg_dsn: str, tmp_path: Path) -> None:
    rng = random.Random(3)
    # A DSN that does not answer: StorageError naming it, no file made.
    dead = "postgresql://postgres@127.0.0.1:1/nothing"
    await refused(
        StorageError,
        r"127\.0\.0\.1:1.*cannot connect",
        log=dead,
        name="m",
        path=tmp_path / "x.db",
        log_options=FAST,
    )
    assert not (tmp_path / "x.db").exists()
    # A memory name that is not an identifier: refused before connecting.
    for bad in ("bad name", "1abc", "", "a" * 64, "drop;table"):
        await refused(InvalidQueryError, "name", log=pg_dsn, name=bad, log_options=FAST)
    assert sql(pg_dsn, "SELECT to_regclass('actormem_log')") == [(None,)]
    await refused(InvalidQueryError, "name", log=pg_dsn, log_options=FAST)
    # A node of memory "a" makes a checkpoint; memory "b" may not use it.
    path = tmp_path / "a.db"
    async with open_memory(log=pg_dsn, name="a", path=path, log_options=FAST) as a:
        await a.store(entry(rng))
    before = file_content(path)
    await refused(
        StorageError, "checkpoint of memory 'a'", log=pg_dsn, name="b", path=path, log_options=FAST
    )
    assert file_content(path) == before
    # A node with other options than the memory's.
    await refused(InvalidQueryError, "capacity", log=pg_dsn, name="a", capacity=5, log_options=FAST)
    # A plain durable file with entries is not a checkpoint.
    plain = tmp_path / "plain.db"
    async with open_memory(path=plain) as m:
        await m.store(entry(rng))
    plain_before = file_content(plain)
    await refused(StorageError, "not a replica", log=pg_dsn, name="a", path=plain, log_options=FAST)
    assert file_content(plain) == plain_before
    # A record written by a newer actormem: the node refuses to apply it.
    sql(
        pg_dsn,
        "INSERT INTO actormem_log VALUES ('a', 2, %s, now(), %s)",
        uuid.uuid4(),
        b'{"v": 99, "ops": []}',
    )
    sql(pg_dsn, "UPDATE actormem_memories SET head = 2 WHERE memory = 'a'")
    await refused(StorageError, "newer actormem", log=pg_dsn, name="a", path=path, log_options=FAST)
    assert file_content(path) == before
    # A log whose format is newer.
    sql(pg_dsn, "UPDATE actormem_memories SET format_version = 2 WHERE memory = 'a'")
    await refused(StorageError, "newer actormem", log=pg_dsn, name="a", path=path, log_options=FAST)
    assert file_content(path) == before


async def test_log_unreachable_stores_fail_reads_go_on_then_catch_up(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Cut node A's way to the server: its stores fail with StorageError after the
    bounded wait and change nothing, its reads go on (statistics say how stale), and
    once the way is back it catches up with what B stored meanwhile by itself."""
    rng = random.Random(4)
    proxy = Proxy(pg_dsn)
    opts = ReplicaOptions(log_timeout=0.5, poll_interval=0.1, heartbeat_interval=0.1)
    async with trio.open_nursery() as nursery:
        await proxy.up(nursery)
        via_proxy = proxy.via()
        async with (
            open_memory(log=via_proxy, name="m", path=tmp_path / "a.db", log_options=opts) as a,
            open_memory(log=pg_dsn, name="m", path=tmp_path / "b.db", log_options=FAST) as b,
        ):
            kept = entry(rng)
            await a.store(kept)
            proxy.down()
            lost = entry(rng)
            with pytest.raises(StorageError):
                await a.store(lost)
            assert await a.get(kept.id) is not None  # reads go on
            assert await a.get(lost.id) is None
            seq = await b.store(entry(rng))
            assert isinstance(seq, int)
            assert (a.statistics().log_applied_seq or 0) < seq
            assert a.statistics().log_stale_seconds is not None
            await proxy.up(nursery)
            await a.wait_applied(seq)  # caught up by itself
            after = await a.store(entry(rng))
            assert isinstance(after, int)
            await b.wait_applied(after)
            assert state_of(a) == state_of(b)
            assert len(a) == 3
        proxy.down()


def _spawn(dsn: str, path: Path, seed: int, start: int, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "replica_child.py"), dsn, "swarm", str(path)]
        + [str(seed), str(start), str(count), "8"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def _close_pipes(proc: subprocess.Popen[str]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()


def _read_until_stored(proc: subprocess.Popen[str], acked: set[int]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("acked "):
            acked.add(int(line.split()[1]))
        elif line.strip() == "stored":
            return
    raise AssertionError(f"node exited early with {proc.wait()}")


def test_node_processes_converge_after_kill_9(pg_dsn: str, tmp_path: Path) -> None:
    """Three node processes (capacity 40) store, upsert, delete, consolidate and
    retrieve concurrently; one is killed with SIGKILL while its appends are in flight and
    restarted on its checkpoint. Then every node is at the log's last seq with the same
    state, that state is what replaying the log from PostgreSQL into a fresh state gives,
    and every acknowledged store is in the log (nothing acknowledged lost)."""
    from actormem._engine.replica import apply_ops, decode_batch
    from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
    from actormem._index.wordoverlap import WordOverlapScorer
    from tests.crash_child import make_entry
    from tests.replica_child import CAPACITY, state_digest

    count = 60
    procs = [_spawn(pg_dsn, tmp_path / f"n{i}.db", 7, i * 1000, count) for i in range(3)]
    acked: set[int] = set()
    try:
        victim = procs[0]
        assert victim.stdout is not None
        for line in victim.stdout:  # kill it once it acknowledged a few stores
            if line.startswith("acked "):
                acked.add(int(line.split()[1]))
            if len(acked) >= 10:
                break
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        _close_pipes(victim)
        procs[0] = _spawn(pg_dsn, tmp_path / "n0.db", 7, 0, count)
        for proc in procs:
            _read_until_stored(proc, acked)
        (head,) = sql(pg_dsn, "SELECT head FROM actormem_memories WHERE memory = 'swarm'")[0]
        results = []
        for proc in procs:
            assert proc.stdin is not None
            assert proc.stdout is not None
            proc.stdin.write(f"check {head}\n")
            proc.stdin.flush()
            results.append(json.loads(proc.stdout.readline()))
            assert proc.wait() == 0
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            _close_pipes(proc)
    assert [r["applied"] for r in results] == [head] * 3
    assert results[0]["digest"] == results[1]["digest"] == results[2]["digest"]
    # The log, replayed into a fresh state, gives the nodes' state.
    rows = sql(
        pg_dsn,
        "SELECT seq, appended_at, payload FROM actormem_log WHERE memory = 'swarm' ORDER BY seq",
    )
    assert [r[0] for r in rows] == list(range(1, head + 1))  # no gap
    replay = MemoryState(capacity=CAPACITY, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    logged: set[str] = set()
    for seq, appended_at, payload in rows:
        ops = decode_batch("log", seq, bytes(payload))
        apply_ops(replay, ops, appended_at.astimezone(UTC), replay.published)
        replay.publish()
        logged |= {op[1]["id"] for op in ops if op[0] == "s"}
    assert state_digest(replay) == results[0]["digest"]
    assert replay.evictions > 0  # the capacity was reached
    assert {str(make_entry(7, i).id) for i in acked} <= logged  # lost: 0


def test_swarm_over_node_processes(pg_dsn: str, tmp_path: Path) -> None:
    """``actormem swarm --nodes 2 --log DSN``: the report's accounting and convergence
    pass, and the memory's rows are gone from the database afterwards."""
    out = tmp_path / "report.json"
    argv = ["swarm", "--nodes", "2", "--log", pg_dsn, "--agents", "4", "--episodes", "12"]
    proc = subprocess.run(
        [sys.executable, "-m", "actormem", *argv, "--capacity", "40", "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "lost: 0" in proc.stdout
    assert "convergence: every node identical" in proc.stdout
    report = json.loads(out.read_text())
    assert report["converged"] is True
    assert report["cpu_s"] > 0
    assert report["operations_per_cpu_s"] > 0
    assert [n["lost"] for n in report["per_node"]] == [0, 0]
    assert report["per_node"][0]["digest"] == report["per_node"][1]["digest"]
    assert sql(pg_dsn, "SELECT count(*) FROM actormem_log") == [(0,)]
    usage = subprocess.run(
        [sys.executable, "-m", "actormem", "swarm", "--nodes", "2"],
        capture_output=True,
        text=True,
        cwd=HERE.parent,
    )
    assert usage.returncode == 2
    assert "--nodes needs --log" in usage.stderr


def _serve_node(dsn: str, path: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "actormem", "serve", "--log", dsn, "--name", "web"]
        + ["--path", str(path), "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=HERE.parent,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "node of 'web'" in line, line
    return proc, line.split(" on ")[-1].split()[0]


def test_server_nodes_store_and_causal_retrieve(pg_dsn: str, tmp_path: Path) -> None:
    """Two ``actormem serve --log`` processes, nodes of one memory: a store on one
    answers its seq, a retrieve on the other with ``min_seq`` sees it; SIGTERM stops
    both cleanly."""
    import httpx

    from actormem.client import Client

    procs = []
    try:
        for i in range(2):
            procs.append(_serve_node(pg_dsn, tmp_path / f"s{i}.db"))
        (_, one), (_, two) = procs
        with httpx.Client(timeout=30) as http:
            for i in range(5):
                body = {"category": "fact", "memory": f"blue cluster deploy {i}"}
                stored = http.post(f"{one}/v1/entries", json=body).json()
                assert isinstance(stored["seq"], int)
                found = http.post(
                    f"{two}/v1/retrieve",
                    json={"query": f"deploy {i}", "limit": 10, "min_seq": stored["seq"]},
                ).json()
                assert stored["id"] in {e["id"] for e in found["entries"]}
        with Client(two) as client:  # the Python client passes min_seq through
            body = {"category": "fact", "memory": "green cluster rollback"}
            with httpx.Client(timeout=30) as http:
                stored = http.post(f"{one}/v1/entries", json=body).json()
            hits = client.retrieve("rollback", 10, min_seq=stored["seq"])
            assert str(hits[0].id) == stored["id"]
            assert (client.statistics().log_applied_seq or 0) >= stored["seq"]
    finally:
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        statuses = [proc.wait(timeout=60) for proc, _ in procs]
        for proc, _ in procs:
            _close_pipes(proc)
    assert statuses == [0, 0]
