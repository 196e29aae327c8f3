"""Load benchmark of ``actormem serve``: store and retrieve through HTTP from several client
processes, beside the same calls in-process and beside the floor (a trivial route of the
same server), in one run.

    python -m stress.bench_server [--clients 4] [--ops 400] [--entries 2000] [--seed 0]
                                  [--json OUT]

Steps (loopback only, bounded by ``--clients x --ops`` calls per phase):

1. Start ``python -m actormem serve --in-memory --port 0`` and fill it with ``--entries``
   seeded entries (``store_many``, untimed).
2. Start ``--clients`` client processes (each one :class:`actormem.client.Client`, i.e. one
   keep-alive connection). For each phase they wait at a barrier, then make ``--ops``
   calls back to back, timing each: ``floor`` (``GET /healthz``: HTTP + routing, no
   memory), ``store`` (one new entry per call), ``retrieve`` (``retrieve(query, 10)``).
   Throughput = all calls of the phase / the phase's wall time (barrier to barrier).
3. In this process, under trio, the same ``store`` and ``retrieve`` calls on an
   ``open_memory()`` filled the same way: once from one task back to back (latency), and
   from ``--clients`` tasks at once (throughput).

Prints a table and, with ``--json``, every figure. Percentiles: ``statistics.quantiles``
(inclusive), in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from stress._bench_args import output_file, positive_int

PHASES = ("floor", "store", "retrieve")
_WORDS = (
    "deploy cluster blue green build test cache index query retry timeout error fix "
    "token server client agent memory store retrieve merge prune tool call result "
    "shell file path network disk queue batch commit snapshot owner task thread"
).split()


def _text(rng: random.Random, words: int = 12) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _entries(seed: str, n: int) -> list[MemoryEntry]:
    rng = random.Random(seed)
    return [MemoryEntry.new(MemoryCategory.FACT, _text(rng)) for _ in range(n)]


def _queries(seed: str, n: int) -> list[str]:
    rng = random.Random(seed)
    return [_text(rng, 4) for _ in range(n)]


def _summary(samples: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return {"count": len(samples), "p50_ms": cuts[49] * 1e3, "p99_ms": cuts[98] * 1e3}


def _client_process(url: str, k: int, ops: int, seed: int, barrier: Any, out: Any) -> None:
    from actormem.client import Client

    entries = _entries(f"{seed}-client-{k}", ops)
    queries = _queries(f"{seed}-query-{k}", ops)
    latencies: dict[str, list[float]] = {}
    with Client(url, timeout=60) as client:
        calls = {
            "floor": lambda i: client._http.get("/healthz"),
            "store": lambda i: client.store(entries[i]),
            "retrieve": lambda i: client.retrieve(queries[i], 10),
        }
        calls["floor"](0)  # open the connection before timing
        for phase in PHASES:
            call = calls[phase]
            barrier.wait()
            samples = []
            for i in range(ops):
                start = time.perf_counter()
                call(i)
                samples.append(time.perf_counter() - start)
            latencies[phase] = samples
            barrier.wait()
    out.put((k, latencies))


def start_server(root: Path | None = None) -> tuple[subprocess.Popen[str], str]:
    """``actormem serve --in-memory`` on a free port, and its URL; of the checkout at
    ``root`` (its own ``actormem`` first on the path) when given, else the installed
    one. Its stdout is a pipe: close it after the process ends."""
    env = None if root is None else dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.Popen(
        [sys.executable, "-m", "actormem", "serve", "--in-memory", "--port", "0"],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r" on (http://\S+) ", line)
    if match is None:
        proc.kill()
        which = "" if root is None else f" of {root}"
        raise SystemExit(f"the server{which} did not start: {line!r}")
    return proc, match.group(1)


def http_run(clients: int, ops: int, entries: int, seed: int) -> dict[str, Any]:
    from actormem.client import Client

    proc, url = start_server()
    try:
        with Client(url, timeout=60) as client:
            batch = _entries(f"{seed}-fill", entries)
            for i in range(0, len(batch), 500):
                client.store_many(batch[i : i + 500])
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(clients + 1)
        out = ctx.Queue()
        workers = [
            ctx.Process(target=_client_process, args=(url, k, ops, seed, barrier, out))
            for k in range(clients)
        ]
        for w in workers:
            w.start()
        walls = {}
        for phase in PHASES:
            barrier.wait()
            start = time.perf_counter()
            barrier.wait()
            walls[phase] = time.perf_counter() - start
        results = [out.get(timeout=120) for _ in workers]
        for w in workers:
            w.join()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()  # else the pipe is closed by the GC, with a ResourceWarning
    figures: dict[str, Any] = {}
    for phase in PHASES:
        samples = [s for _, lat in results for s in lat[phase]]
        figures[phase] = {**_summary(samples), "calls_per_s": len(samples) / walls[phase]}
    return figures


async def _in_process(clients: int, ops: int, entries: int, seed: int) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    async with open_memory() as memory:
        await memory.store_many(_entries(f"{seed}-fill", entries))
        stores = _entries(f"{seed}-inproc", ops * clients)
        queries = _queries(f"{seed}-inproc-q", ops * clients)
        # Latency: one task, back to back.
        for name, call in (
            ("store", lambda i: memory.store(stores[i])),
            ("retrieve", lambda i: memory.retrieve(queries[i], 10)),
        ):
            samples = []
            for i in range(ops):
                start = time.perf_counter()
                await call(i)
                samples.append(time.perf_counter() - start)
            figures[name] = _summary(samples)
        # Throughput: ``clients`` tasks at once, ``ops`` calls each.
        for name, make in (
            ("store", lambda i: memory.store(stores[i])),
            ("retrieve", lambda i: memory.retrieve(queries[i], 10)),
        ):

            async def task(k: int, make: Any = make) -> None:
                for i in range(k * ops, (k + 1) * ops):
                    await make(i)

            start = time.perf_counter()
            async with trio.open_nursery() as nursery:
                for k in range(clients):
                    nursery.start_soon(task, k)
            figures[name]["calls_per_s"] = clients * ops / (time.perf_counter() - start)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stress.bench_server", description=__doc__)
    parser.add_argument("--clients", type=positive_int, default=4, help="client processes")
    parser.add_argument("--ops", type=positive_int, default=400, help="calls per client and phase")
    parser.add_argument("--entries", type=positive_int, default=2000, help="entries pre-filled")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=output_file, metavar="OUT")
    args = parser.parse_args(argv)
    http = http_run(args.clients, args.ops, args.entries, args.seed)
    local = trio.run(_in_process, args.clients, args.ops, args.entries, args.seed)
    print(f"{args.clients} client processes x {args.ops} calls per phase, "
          f"{args.entries} entries pre-filled, cpus {os.cpu_count()}")
    print(f"{'call':<22}{'p50 ms':>9}{'p99 ms':>9}{'calls/s':>10}")
    rows = [
        ("floor (HTTP /healthz)", http["floor"]),
        ("store (HTTP)", http["store"]),
        ("store (in-process)", local["store"]),
        ("retrieve (HTTP)", http["retrieve"]),
        ("retrieve (in-process)", local["retrieve"]),
    ]
    for name, f in rows:
        print(f"{name:<22}{f['p50_ms']:>9.3f}{f['p99_ms']:>9.3f}{f['calls_per_s']:>10,.0f}")
    if args.json is not None:
        report = {
            "command": " ".join(["python -m stress.bench_server", *(argv or sys.argv[1:])]),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "options": vars(args) | {"json": str(args.json)},
            "http": http,
            "in_process": local,
        }
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
