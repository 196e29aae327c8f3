"""Durable store throughput: group commit against one commit per store.

Usage (from the project root)::

    python stress/bench_durable.py [--entries 4000] [--writers 1 8 64]
        [--modes memory normal full] [--repeats 3] [--seed 0] [--dir DIR] [--json OUT]

For each mode (``memory``: ``path=None``; ``normal`` / ``full``: a durable memory with that
:class:`~actormem._storage.sqlite.Durability`, a fresh file in ``--dir`` per run) and each writer
count W, W tasks store ``--entries`` entries between them (each task awaits its store
before the next), into an unbounded memory. Reported per run: entries/s over the wall
time, p50 and p99 of the per-store latency (from the call to its return, so it includes
the wait for the group commit), the number of transactions and the mean batch size.
Each cell runs ``--repeats`` times (modes and writer counts interleaved, so a burst of
load elsewhere on the machine hits every cell alike); the table shows, per cell, the run
with the median throughput.

With one writer every store is its own transaction: that is the "one writer committing
each store on its own" baseline; ``group x`` is each run's throughput over the
1-writer throughput of the same mode. ``--dir`` should be on the disk you care about
(not tmpfs, where fsync is free). Output: one JSON object per run on stdout (and in
``--json``), then a markdown table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory

# Run as a script (`python stress/bench_durable.py`): the project root, for `stress`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stress._bench_args import (  # noqa: E402
    distinct,
    existing_dir,
    make_scratch_dir,
    output_file,
    positive_int,
)

WORDS = (
    "deploy blue cluster rust tokio trio sqlite commit latency agent tool search glob file "
    "error retry timeout cache index snapshot owner writer reader memory recall fact"
).split()


#: Seed of the untimed warm-up entries: a string, so that no ``--seed`` reproduces their
#: ids (``random.Random`` seeds an int by its absolute value: -1 and 1 are one seed).
WARM_UP_SEED = "warm-up"
#: Untimed stores before each timed run, awaited one at a time (one batch each).
WARM_UP_ENTRIES = 20


def make_entries(n: int, seed: int | str) -> list[MemoryEntry]:
    """``n`` entries of 8-30 words with tags and namespaces, fixed by ``seed``."""
    rng = random.Random(seed)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    return [
        MemoryEntry(
            id=uuid.UUID(int=rng.getrandbits(128), version=4),
            category=rng.choice(list(MemoryCategory)),
            memory=" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))),
            tags=rng.sample(["infra", "tool", "user", "plan"], rng.randint(0, 2)),
            namespace=("agent", str(rng.randrange(4))),
            created_at=base + timedelta(seconds=i),
            relevance=rng.random(),
        )
        for i in range(n)
    ]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


async def run_one(
    mode: str, writers: int, entries: list[MemoryEntry], directory: Path, repeat: int = 0
) -> dict[str, Any]:
    path = None if mode == "memory" else directory / f"bench-{mode}-{writers}-{repeat}.db"
    options: dict[str, Any] = {} if path is None else {"path": path, "durability": mode}
    latencies: list[float] = []
    async with open_memory(**options) as memory:
        # Warm up (thread cache, first pages) with entries that are not timed.
        for e in make_entries(WARM_UP_ENTRIES, seed=WARM_UP_SEED):
            await memory.store(e)
        commits0 = memory._storage.commits if memory._storage else 0

        async def writer(share: list[MemoryEntry]) -> None:
            for entry in share:
                t0 = time.perf_counter()
                await memory.store(entry)
                latencies.append(time.perf_counter() - t0)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(writer, entries[w::writers])
        wall = time.perf_counter() - start
        commits = (memory._storage.commits - commits0) if memory._storage else 0
        assert len(memory) == len(entries) + WARM_UP_ENTRIES
    return {
        "mode": mode,
        "writers": writers,
        "entries": len(entries),
        "seconds": wall,
        "entries_per_s": len(entries) / wall,
        "p50_ms": percentile(latencies, 0.50) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "mean_ms": statistics.fmean(latencies) * 1e3,
        "commits": commits,
        "batch": len(entries) / commits if commits else None,
    }


def table(runs: list[dict[str, Any]]) -> str:
    base = {r["mode"]: r["entries_per_s"] for r in runs if r["writers"] == 1}
    lines = [
        "| mode | writers | entries/s | p50 ms | p99 ms | commits | entries/commit | group x |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        ratio = f"{r['entries_per_s'] / base[r['mode']]:.1f}" if r["mode"] in base else "-"
        batch = "-" if r["batch"] is None else f"{r['batch']:.1f}"
        commits = "-" if r["mode"] == "memory" else str(r["commits"])
        lines.append(
            f"| {r['mode']} | {r['writers']} | {r['entries_per_s']:,.0f} | {r['p50_ms']:.3f} "
            f"| {r['p99_ms']:.3f} | {commits} | {batch} | {ratio} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=positive_int, default=4000, help="entries stored per run")
    parser.add_argument("--writers", type=positive_int, nargs="+", default=[1, 8, 64])
    parser.add_argument(
        "--modes",
        nargs="+",
        default=["memory", "normal", "full"],
        choices=["memory", "normal", "full"],
    )
    parser.add_argument("--repeats", type=positive_int, default=3, help="runs per cell (median)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dir", type=existing_dir, default=None, help="where the files go")
    parser.add_argument("--json", type=output_file, default=None, help="also write the runs here")
    args = parser.parse_args(argv)
    distinct(args.writers, "--writers", parser)
    distinct(args.modes, "--modes", parser)
    directory = make_scratch_dir(parser, args.dir, "actormem-bench-")
    entries = make_entries(args.entries, args.seed)
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    try:
        for repeat in range(args.repeats):
            for mode in args.modes:
                for writers in args.writers:
                    run = trio.run(run_one, mode, writers, entries, directory, repeat)
                    run.update(seed=args.seed, repeat=repeat)
                    print(json.dumps(run), flush=True)
                    cells.setdefault((mode, writers), []).append(run)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    runs = [
        sorted(cell, key=lambda r: r["entries_per_s"])[(len(cell) - 1) // 2]
        for cell in cells.values()
    ]
    if args.json is not None:
        every = [r for cell in cells.values() for r in cell]
        args.json.write_text("".join(json.dumps(r) + "\n" for r in every))
    print()
    print(f"python {' '.join(sys.argv)}  (sqlite {__import__('sqlite3').sqlite_version})")
    print()
    print(table(runs))


if __name__ == "__main__":
    main()
