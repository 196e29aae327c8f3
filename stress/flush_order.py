"""What the order of a held-back access flush's ``UPDATE``s costs SQLite
(``sqlite._SORTED_FLUSH``): one transaction of N access updates on a durable memory's
file, in seq order and in a random (first-access-like) order, alternating, by thread CPU.

Usage (from the project root)::

    python -m actormem swarm --tool-calls ../shared/data/tool_calls.jsonl \\
        --tool-calls ../shared/data/tool_lookups.jsonl --path /tmp/mj.db
    python -m stress.flush_order /tmp/mj.db [--rows 2000] [--repeats 30] [--seed 1]

Works on a copy of the file (beside it, removed after); each repeat picks ``--rows`` seqs
at random (all of them when the file has fewer), commits them in one order then the
other (which first alternates), then truncates the WAL. Prints the median and mean CPU
milliseconds of each order. Needs no actormem import: plain ``sqlite3`` with the store's
statement (``sqlite_format.UPDATE_ACCESS``), WAL mode, ``synchronous=NORMAL``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from actormem._storage.sqlite_format import UPDATE_ACCESS  # noqa: E402
from stress._bench_args import positive_int  # noqa: E402


def measure(path: str, rows: int, repeats: int, seed: int) -> dict[str, list[float]]:
    """Thread CPU ms of each order's transactions on a copy of ``path``."""
    copy = path + ".flush_order"
    shutil.copy(path, copy)
    conn = sqlite3.connect(copy, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        seqs = [seq for (seq,) in conn.execute("SELECT seq FROM entries")]
        rng = random.Random(seed)
        out: dict[str, list[float]] = {"seq order": [], "random order": []}
        for rep in range(repeats):
            pick = rng.sample(seqs, min(rows, len(seqs)))
            stamp = f"2026-12-07T21:{rep % 60:02d}:00.123456+00:00"
            params = [(rng.randint(1, 300), stamp, None, seq) for seq in pick]
            orders = {"seq order": sorted(params, key=lambda p: p[3]), "random order": params}
            for name in sorted(orders, reverse=rep % 2 == 1):
                start = time.thread_time_ns()
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(UPDATE_ACCESS, orders[name])
                conn.execute("COMMIT")
                out[name].append((time.thread_time_ns() - start) / 1e6)
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return out
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(copy + suffix):
                os.remove(copy + suffix)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stress.flush_order", description=__doc__)
    parser.add_argument("file", help="a durable memory's file (not open elsewhere)")
    parser.add_argument("--rows", type=positive_int, default=2000)
    parser.add_argument("--repeats", type=positive_int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    out = measure(args.file, args.rows, args.repeats, args.seed)
    for name, ms in out.items():
        print(f"{name}: median {statistics.median(ms):.2f} ms, mean {statistics.mean(ms):.2f} ms")


if __name__ == "__main__":
    main()
