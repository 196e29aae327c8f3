"""What a lone durable store pays besides SQLite: the hand-off to a worker thread and back.

Usage (from the project root)::

    python -m stress.handoff [--rounds 2000] [--dir DIR]

Prints, per round (median of 5 runs of ``--rounds`` each, wall time and the event-loop
thread's CPU time):

* ``lock ping-pong``: two plain threads passing a lock back and forth, the OS's
  wake-up latency and nothing else;
* ``to_thread no-op``: ``await trio.to_thread.run_sync(lambda: None)``;
* ``commit path no-op``: the owner's own hand-off (``_in_thread_while``, as a group
  commit uses it) with nothing to write;
* ``inline commit``: ``BEGIN IMMEDIATE`` / one ``INSERT`` of a 300-byte row / ``COMMIT``
  on a WAL file with ``synchronous=NORMAL``, on the calling thread (what the worker does
  for a lone store, without the hand-off).

A lone writer's durable store costs about the commit path plus the inline commit plus
the engine's in-memory work; 64 writers share one hand-off and one commit per batch.
That is why the "64 writers vs one" ratio of ``stress/bench_durable.py`` in ``normal``
mode mostly measures this hand-off (``docs/benchmarks.md``, "Durable store throughput").
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import statistics
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from actormem._engine.memory import _in_thread_while

from ._bench_args import existing_dir, make_scratch_dir, positive_int


def _lock_ping_pong(rounds: int) -> tuple[float, float]:
    there, back = threading.Lock(), threading.Lock()
    there.acquire()
    back.acquire()

    def other() -> None:
        for _ in range(rounds):
            there.acquire()
            back.release()

    thread = threading.Thread(target=other)
    thread.start()
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(rounds):
        there.release()
        back.acquire()
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    thread.join()
    return wall / rounds, cpu / rounds


def _timed(rounds: int, call: Callable[[], Awaitable[object]]) -> tuple[float, float]:
    async def main() -> tuple[float, float]:
        await call()  # the worker thread exists before timing starts
        wall, cpu = time.perf_counter(), time.thread_time()
        for _ in range(rounds):
            await call()
        return (time.perf_counter() - wall) / rounds, (time.thread_time() - cpu) / rounds

    return trio.run(main)


def _inline_commit(rounds: int, directory: Path) -> tuple[float, float]:
    path = directory / "handoff.db"
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, id TEXT, memory TEXT)")
        text = "x" * 300
        wall, cpu = time.perf_counter(), time.thread_time()
        for i in range(rounds):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?, ?, ?)", (i, str(i), text))
            conn.execute("COMMIT")
        return (time.perf_counter() - wall) / rounds, (time.thread_time() - cpu) / rounds
    finally:
        conn.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m stress.handoff", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--rounds", type=positive_int, default=2000, help="round trips per run")
    parser.add_argument(
        "--dir",
        type=existing_dir,
        default=None,
        help="folder for the SQLite file (default: a temporary one)",
    )
    args = parser.parse_args(argv)
    rounds = args.rounds

    def nothing(_: object = None) -> None:
        return None

    scratch = make_scratch_dir(parser, args.dir, "actormem-handoff-")
    try:
        cases: dict[str, Callable[[], tuple[float, float]]] = {
            "lock ping-pong": lambda: _lock_ping_pong(rounds),
            "to_thread no-op": lambda: _timed(rounds, lambda: trio.to_thread.run_sync(nothing)),
            "commit path no-op": lambda: _timed(
                rounds, lambda: _in_thread_while(nothing, None, nothing)
            ),
            "inline commit": lambda: _inline_commit(rounds, scratch),
        }
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(5):  # interleaved, so a burst of load elsewhere hits all alike
            for name, case in cases.items():
                runs[name].append(case())
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"python -m stress.handoff --rounds {rounds}  (median of 5 runs, per round)")
    print("| case | wall µs | event-loop thread CPU µs |\n|---|---:|---:|")
    for name, got in runs.items():
        wall = statistics.median(w for w, _ in got) * 1e6
        cpu = statistics.median(c for _, c in got) * 1e6
        print(f"| {name} | {wall:.0f} | {cpu:.0f} |")


if __name__ == "__main__":
    main()
