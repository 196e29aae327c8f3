"""The main job's latencies with the fair-share gate and with the gate before it, on the
loop thread's CPU clock.

Usage (from the project root)::

    python -m stress.bench_gate_mainjob --pairs 4 [--share 0.7] [--old-share 0.6] [--steps N]

Runs ``actormem swarm`` (in memory, the real tool calls) in this process, ``2 * pairs``
times, the order alternating pair by pair: once with the FIFO gate
(:class:`~actormem._engine.fairshare.ReadGate`'s default) and once with the gate before
it (``ReadGate.fifo = False`` and its ``SHARE``), everything else alike. The swarm's
probes time each call with ``time.thread_time`` instead of ``time.perf_counter``: the
CPU the loop's thread spent, on every task, while the call was pending. On a machine
other processes share, wall-clock latencies mostly measure the other processes (a p99
of 60 ms wall is 30 ms of this clock at a load of 4 on 2 cores); this clock keeps what
the scheduling inside the process decides (how long the other tasks ran before this
call's turn came) and drops the time the process waited for a core. It cannot show
latency that is idle time of the loop (durable commits in their thread, sleeps), hence
memory mode only.

Printed: one JSON object per run (gate, share, CPU and wall seconds, retrieve and store
p50 / p99 / mean in ms of that clock), then a table with each side's median and the
median of the pairs' ratios.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import tempfile
import time
import types
from pathlib import Path
from typing import Any

import actormem.cli._swarm as swarm
from actormem._engine import fairshare
from actormem.cli._main import main as cli_main

from ._bench_args import positive_int
from ._bench_stats import load_average

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"
FIGURES = ("retrieve_p50", "retrieve_p99", "retrieve_mean", "store_p50", "store_p99", "store_mean")


def _thread_clock() -> types.SimpleNamespace:
    """A stand-in for the swarm module's ``time``: ``perf_counter`` is the thread's CPU."""
    names = {k: getattr(time, k) for k in dir(time) if not k.startswith("_")}
    return types.SimpleNamespace(**(names | {"perf_counter": time.thread_time}))


def _run(fifo: bool, share: float, files: list[Path], steps: int | None) -> dict[str, Any]:
    fairshare._FIFO = fifo
    fairshare.SHARE = share
    fairshare.OPEN_MIN = fairshare.CLOSED_MAX * (1 - share) / share
    with tempfile.TemporaryDirectory(prefix="bench_gate_mainjob_") as scratch:
        out = Path(scratch) / "run.json"
        argv = ["swarm", "--in-memory", "--json", str(out)]
        for f in files:
            argv += ["--tool-calls", str(f)]
        if steps is not None:
            argv += ["--steps", str(steps)]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            cli_main(argv)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        figures = json.loads(out.read_text())
    row: dict[str, Any] = {"gate": "fifo" if fifo else "starve", "share": share}
    row |= {"cpu_s": round(cpu, 3), "wall_s": round(wall, 3)}
    for kind in ("retrieve", "store"):
        summary = _find(figures, kind)
        for stat in ("p50", "p99", "mean"):
            row[f"{kind}_{stat}"] = None if summary is None else summary[stat]
    return row


def _find(obj: Any, key: str) -> dict[str, float] | None:
    """The first mapping under ``key`` in the swarm's JSON figures."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == key and isinstance(v, dict) and "p99" in v:
                return v
            found = _find(v, key)
            if found is not None:
                return found
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=positive_int, default=4)
    parser.add_argument("--share", type=float, default=fairshare.SHARE, help="FIFO gate")
    parser.add_argument("--old-share", type=float, default=0.6, help="the gate before it")
    parser.add_argument("--tool-calls", type=Path, action="append", default=None)
    parser.add_argument("--steps", type=positive_int, default=None, help="stop after N")
    args = parser.parse_args(argv)
    files = args.tool_calls or [DATA / "tool_calls.jsonl", DATA / "tool_lookups.jsonl"]
    swarm.time = _thread_clock()  # type: ignore[assignment]
    print(json.dumps({"load_average": load_average(), "args": vars(args) | {"tool_calls": [
        str(f) for f in files]}}))  # fmt: skip
    rows: list[dict[str, Any]] = []
    try:
        for pair in range(args.pairs):
            order = (True, False) if pair % 2 == 0 else (False, True)
            for fifo in order:
                share = args.share if fifo else args.old_share
                row = _run(fifo, share, files, args.steps) | {"pair": pair}
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        swarm.time = time  # type: ignore[assignment]
        fairshare._FIFO = True
    new = [r for r in rows if r["gate"] == "fifo"]
    old = [r for r in rows if r["gate"] == "starve"]
    print("| figure (ms, loop thread's CPU) | FIFO gate | gate before | ratio (median of pairs) |")
    print("|---|---:|---:|---:|")
    for name in FIGURES:
        ratios = [a[name] / b[name] for a, b in zip(new, old, strict=True) if b[name]]
        print(
            f"| {name} | {statistics.median(r[name] for r in new):.2f} | "
            f"{statistics.median(r[name] for r in old):.2f} | {statistics.median(ratios):.2f} |"
        )
    print(json.dumps({"load_average_end": load_average()}))


if __name__ == "__main__":
    main()
