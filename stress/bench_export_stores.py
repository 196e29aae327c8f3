"""Stores beside concurrent exports: what ``GET /v1/export`` costs the server's writers.

    python -m stress.bench_export_stores [--entries 100000] [--exports 16] [--rounds 2]
                                         [--data ../shared/data] [--root DIR ...]
                                         [--json OUT]

docs/server.md's known limit (review, 2026-12-07): 16 exports at once of a 100,000-entry
memory kept the server's stores from being answered for over 8 s on 2 cores. For each
checkout (``--root``, repeatable: run side by side, alternating in each round; default:
this one) and round:

1. start ``python -m actormem serve --in-memory --port 0`` from that checkout and fill it
   with ``--entries`` entries of the real texts (``stress._bench_data``: the tool calls
   and LoCoMo turns) by ``store_many`` (untimed);
2. in this process, under trio, one writer stores single entries back to back through
   :class:`actormem.client.AsyncClient`, timing each: first ``--alone`` stores alone, then
   while ``--exports`` clients (in a process of their own, one trio loop) each stream the
   whole export (``httpx``, every byte read as it comes), until the last export ends.

Prints per checkout and round: the stores' p50 / p99 / max in milliseconds alone and
beside the exports, how many stores the writer made during the exports, and the exports'
wall time (first byte of the first request to the last export's end) and lines (each
export must return every entry, or the run fails). A benchmark: it asserts nothing about
the figures. Three processes: the server, the writer, the exports' clients.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import trio

from actormem import MemoryCategory, MemoryEntry
from stress._bench_args import output_file, positive_int
from stress._bench_data import DEFAULT_DATA, entries, load_corpus
from stress.bench_server import start_server

_HERE = Path(__file__).resolve().parent.parent


def _ms(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))]
    return {
        "n": len(samples),
        "p50_ms": statistics.median(samples) * 1e3,
        "p99_ms": p99 * 1e3,
        "max_ms": ordered[-1] * 1e3,
    }


async def _exports(url: str, exports: int) -> list[int]:
    """``exports`` streams of ``GET /v1/export`` at once, every byte read as it comes;
    the lines of each."""
    lines: list[int] = []

    async def export(client: httpx.AsyncClient) -> None:
        count = 0
        async with client.stream("GET", f"{url}/v1/export") as answer:
            answer.raise_for_status()
            async for chunk in answer.aiter_bytes():
                count += chunk.count(b"\n")
        lines.append(count)

    limits = httpx.Limits(max_connections=exports)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        async with trio.open_nursery() as nursery:
            for _ in range(exports):
                nursery.start_soon(export, client)
    return lines


def _exporter(url: str, exports: int, started: Any, out: Any) -> None:
    """The exports, in a process of their own (their reads do not share the writer's
    loop); ``started`` is set as they begin, their lines put on ``out``."""
    started.set()
    out.put(trio.run(_exports, url, exports))


async def _measure(url: str, exports: int, alone: int, expected: int) -> dict[str, Any]:
    from actormem.client import AsyncClient

    ctx = multiprocessing.get_context("spawn")
    async with AsyncClient(url, timeout=600, retries=0) as writer:
        solo: list[float] = []
        for i in range(alone):
            start = time.perf_counter()
            await writer.store(MemoryEntry.new(MemoryCategory.FACT, f"alone store {i}"))
            solo.append(time.perf_counter() - start)
        beside: list[float] = []
        started, out = ctx.Event(), ctx.Queue()
        child = ctx.Process(target=_exporter, args=(url, exports, started, out))
        child.start()
        await trio.to_thread.run_sync(started.wait)
        t0 = time.perf_counter()
        i = 0
        slowest: list[tuple[float, float]] = []  # (latency, start since t0)
        while child.is_alive() and out.empty():
            start = time.perf_counter()
            await writer.store(MemoryEntry.new(MemoryCategory.FACT, f"beside store {i}"))
            beside.append(time.perf_counter() - start)
            slowest = sorted([*slowest, (beside[-1], start - t0)], reverse=True)[:3]
            i += 1
        lines = await trio.to_thread.run_sync(out.get, True, 600)
        wall = time.perf_counter() - t0
        child.join()
    # Each export is of the snapshot its request took: every entry stored before it.
    short = [n for n in lines if n < expected]
    if short or len(lines) != exports:
        raise SystemExit(f"exports returned {lines} lines, expected {exports} of >= {expected}")
    return {
        "alone": _ms(solo),
        "beside": _ms(beside),
        "exports_wall_s": wall,
        "export_lines": sorted(set(lines)),
        "slowest_beside": [{"ms": lat * 1e3, "at_s": at} for lat, at in slowest],
    }


def run_one(root: Path, n: int, exports: int, alone: int, data: Path) -> dict[str, Any]:
    """One round against the server of ``root``: fill, then measure. Its figures."""
    from actormem.client import Client

    corpus = load_corpus(data)
    proc, url = start_server(root)
    try:
        with Client(url, timeout=120) as client:
            batch: list[MemoryEntry] = []
            for entry in entries(corpus, n):
                batch.append(entry)
                if len(batch) == 1000:
                    client.store_many(batch)
                    batch = []
            if batch:
                client.store_many(batch)
        figures = trio.run(_measure, url, exports, alone, n + alone)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()
    return {"root": str(root), "entries": n, "exports": exports, **figures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stress.bench_export_stores",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--entries", type=positive_int, default=100_000)
    parser.add_argument("--exports", type=positive_int, default=16)
    parser.add_argument("--alone", type=positive_int, default=200)
    parser.add_argument("--rounds", type=positive_int, default=2)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--root", type=Path, action="append", default=None)
    parser.add_argument("--json", type=output_file, default=None)
    args = parser.parse_args(argv)
    roots = [r.resolve() for r in (args.root or [_HERE])]
    results: list[dict[str, Any]] = []
    print(f"# load {os.getloadavg()[0]:.2f}; {args.entries:,} entries, {args.exports} exports")
    print(
        "| round | checkout | stores alone p50 / p99 ms "
        "| beside exports: stores, p50 / p99 / max ms | exports' wall s |"
    )
    print("|---|---|---|---|---|")
    for round_ in range(args.rounds):
        order = roots if round_ % 2 == 0 else roots[::-1]
        for root in order:
            r = run_one(root, args.entries, args.exports, args.alone, args.data)
            r["round"] = round_
            r["load1"] = os.getloadavg()[0]
            results.append(r)
            a, b = r["alone"], r["beside"]
            print(
                f"| {round_} | {root} | {a['p50_ms']:.2f} / {a['p99_ms']:.2f} | "
                f"{b['n']}, {b.get('p50_ms', 0):.1f} / {b.get('p99_ms', 0):.1f} / "
                f"{b.get('max_ms', 0):.1f} | {r['exports_wall_s']:.2f} |",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
