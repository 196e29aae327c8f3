"""Replication throughput and lag over a PostgreSQL write log (docs/replication.md).

Usage (from the project root; needs a PostgreSQL server and ``actormem[postgres]``)::

    python stress/bench_replication.py [--dsn DSN] [--stores 3000] [--writers 64]
        [--entries 5000] [--seconds 5] [--lag-samples 300] [--json OUT]

``--dsn`` names a database the user may create databases from (default
``$ACTORMEM_TEST_PG`` or ``postgresql://postgres@127.0.0.1:5432/postgres``); each part of
the run uses a new database and drops it. In one run:

1. **Stores/s through the log**: 1 node process, then 3 node processes at once, each with
   ``--writers`` tasks storing ``--stores`` entries between them (each task awaits its
   store: acknowledged once its batch is in the log and applied on that node). The
   figure is all acknowledged stores over the wall time of the slowest node.
2. **Replication lag**: two nodes in one process; node A stores one entry at a time
   (``--lag-samples`` of them) while 16 other tasks keep storing on A; the lag of a store
   is from its acknowledgement on A to node B having applied its seq
   (``wait_applied``), p50 and p99.
3. **Retrieves/s with 1, 2 and 4 node processes** of one memory of ``--entries``
   entries: each process opens its node (catching up from the log), then 4 tasks
   retrieve for ``--seconds``; the figure is the sum over processes.

Output: one JSON object per measurement on stdout (and in ``--json``), then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryCategory, MemoryEntry, ReplicaOptions, open_memory

WORDS = (
    "deploy blue cluster rust tokio trio sqlite commit latency agent tool search glob file "
    "error retry timeout cache index snapshot owner writer reader memory recall fact"
).split()
NAME = "bench"
HERE = Path(__file__).resolve()


def make_entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=rng.getrandbits(128), version=4),
        category=MemoryCategory.FACT,
        memory=" ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 12))),
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(10**7)),
    )


@contextmanager
def database(admin: str) -> Iterator[str]:
    """A new database for one measurement; dropped afterwards."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    name = f"actormem_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(**{**conninfo_to_dict(admin), "dbname": name})
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# ---------------------------------------------------------------- node processes


async def node_store(dsn: str, seed: int, count: int, writers: int) -> dict[str, Any]:
    rng = random.Random(seed)
    todo = [make_entry(rng) for _ in range(count)]
    async with open_memory(log=dsn, name=NAME) as memory:
        start = time.perf_counter()

        async def writer(part: list[MemoryEntry]) -> None:
            for e in part:
                await memory.store(e)

        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(writer, todo[w::writers])
        elapsed = time.perf_counter() - start
    return {"stores": count, "seconds": elapsed}


async def node_retrieve(dsn: str, seed: int, seconds: float, tasks: int) -> dict[str, Any]:
    rng = random.Random(seed)
    async with open_memory(log=dsn, name=NAME) as memory:
        print("ready", flush=True)
        await trio.to_thread.run_sync(sys.stdin.readline)  # start together
        done = 0
        deadline = time.perf_counter() + seconds

        async def reader() -> None:
            nonlocal done
            while time.perf_counter() < deadline:
                await memory.retrieve(" ".join(rng.sample(WORDS, 3)), 10)
                done += 1

        async with trio.open_nursery() as nursery:
            for _ in range(tasks):
                nursery.start_soon(reader)
    return {"retrieves": done, "seconds": seconds, "entries": len(memory)}


def child_main(argv: list[str]) -> None:
    mode, dsn, seed = argv[0], argv[1], int(argv[2])
    if mode == "store":
        result = trio.run(node_store, dsn, seed, int(argv[3]), int(argv[4]))
    else:
        result = trio.run(node_retrieve, dsn, seed, float(argv[3]), int(argv[4]))
    print(json.dumps(result), flush=True)


def spawn(*args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), "--child", *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"a node process failed ({proc.returncode})")
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


# ---------------------------------------------------------------- measurements


def bench_stores(admin: str, nodes: int, stores: int, writers: int) -> dict[str, Any]:
    with database(admin) as dsn:
        procs = [spawn("store", dsn, i, stores, writers) for i in range(nodes)]
        results = [finish(p) for p in procs]
    total = sum(r["stores"] for r in results)
    wall = max(r["seconds"] for r in results)
    return {
        "measure": "stores",
        "nodes": nodes,
        "writers_per_node": writers,
        "stores": total,
        "stores_per_s": round(total / wall),
    }


async def _lag(dsn: str, samples: int) -> list[float]:
    rng = random.Random(1)
    fast = ReplicaOptions(poll_interval=0.5)
    lags: list[float] = []
    async with (
        open_memory(log=dsn, name=NAME, log_options=fast) as a,
        open_memory(log=dsn, name=NAME, log_options=fast) as b,
    ):
        stop = trio.Event()

        async def background() -> None:
            while not stop.is_set():
                await a.store(make_entry(rng))

        async with trio.open_nursery() as nursery:
            for _ in range(16):
                nursery.start_soon(background)
            for _ in range(samples):
                seq = await a.store(make_entry(rng))
                acked = time.perf_counter()
                assert seq is not None
                await b.wait_applied(seq)
                lags.append(time.perf_counter() - acked)
            stop.set()
    return lags


def bench_lag(admin: str, samples: int) -> dict[str, Any]:
    with database(admin) as dsn:
        lags = trio.run(_lag, dsn, samples)
    q = statistics.quantiles(lags, n=100)
    return {
        "measure": "lag",
        "samples": len(lags),
        "p50_ms": round(q[49] * 1000, 2),
        "p99_ms": round(q[98] * 1000, 2),
    }


async def _fill(dsn: str, entries: int) -> None:
    rng = random.Random(2)
    async with open_memory(log=dsn, name=NAME) as memory:
        async with trio.open_nursery() as nursery:
            todo = [make_entry(rng) for _ in range(entries)]
            for w in range(64):

                async def writer(part: list[MemoryEntry] = todo[w::64]) -> None:
                    for e in part:
                        await memory.store(e)

                nursery.start_soon(writer)


def bench_retrieves(admin: str, entries: int, seconds: float) -> list[dict[str, Any]]:
    out = []
    with database(admin) as dsn:
        trio.run(_fill, dsn, entries)
        for n in (1, 2, 4):
            procs = [spawn("retrieve", dsn, i, seconds, 4) for i in range(n)]
            for p in procs:
                assert p.stdout is not None
                if p.stdout.readline().strip() != "ready":
                    raise SystemExit("a node process failed to open")
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            results = [finish(p) for p in procs]
            total = sum(r["retrieves"] for r in results)
            out.append(
                {
                    "measure": "retrieves",
                    "processes": n,
                    "entries": results[0]["entries"],
                    "retrieves_per_s": round(total / seconds),
                }
            )
    return out


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ACTORMEM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--stores", type=int, default=3000, help="stores per node")
    parser.add_argument("--writers", type=int, default=64, help="writer tasks per node")
    parser.add_argument("--entries", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--lag-samples", type=int, default=300)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    for nodes in (1, 3):
        emit(bench_stores(args.dsn, nodes, args.stores, args.writers))
    emit(bench_lag(args.dsn, args.lag_samples))
    for row in bench_retrieves(args.dsn, args.entries, args.seconds):
        emit(row)
    if args.json:
        args.json.write_text("".join(json.dumps(r) + "\n" for r in rows))
    print()
    print("| measure | setting | figure |")
    print("|---|---|---|")
    for r in rows:
        if r["measure"] == "stores":
            print(
                f"| stores/s | {r['nodes']} node(s) x {r['writers_per_node']} writers "
                f"| {r['stores_per_s']} |"
            )
        elif r["measure"] == "lag":
            print(
                f"| replication lag | {r['samples']} samples, 16 writers busy "
                f"| p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms |"
            )
        else:
            print(
                f"| retrieves/s | {r['processes']} node process(es), {r['entries']} entries "
                f"| {r['retrieves_per_s']} |"
            )


if __name__ == "__main__":
    main()
