"""The main job's retrieve tail taken apart: the crowded phase's cycle, and what the
slowest retrieves have that the others do not.

Usage (from the project root)::

    python -m stress.mainjob_tail [--trace-json OUT] [--synthetic] [swarm arguments ...]

Runs ``actormem swarm`` in this process as ``stress.mainjob_phases`` does (durable
unless the arguments say ``--in-memory``; ``stress.bench_mainjob``'s two data files
unless they name ``--tool-calls``; ``--synthetic``, first: the swarm's seeded synthetic
data), with ``Memory.retrieve`` wrapped so that each retrieve records its start and end
(``time.perf_counter``), its query's length in characters, the CPU of its own task steps
(``time.thread_time_ns`` around each ``send`` into its coroutine: the loop thread's CPU
while the retrieve itself ran, collections it set off included) and how many task steps
it took (1 + the times it yielded); and a ``gc.callbacks`` hook that records every
collection's generation, start, wall time and thread CPU. The owner's batches
(``Memory._apply_batch``) and, durable, the inline commits (``SqliteStore.write_inline``)
and the deferred index adds (``MemoryState.flush_index``) record their wall time and
thread CPU.

It prints (and ``--trace-json OUT`` writes, with the raw records; ``--json`` is the
swarm's own):

* the **crowded phase**: the retrieves started while every agent was running (the swarm
  deals its episodes longest first, so after a few seconds only the four long episodes'
  agents are left: docs/benchmarks.md, "What durability adds to the main job, part 8");
  its wall time, and its **cycle**: the wall time of one round of the agents (the phase's
  wall time over its retrieves per agent). In a closed loop of ``k`` agents with no time
  between steps, each agent's retrieve and store together wait about one cycle (Little's
  law: ``k`` requests in flight over the throughput), whatever the scheduling order;
* the run's retrieve p50 / p99 and **p99 / cycle**;
* the crowded phase's retrieves in latency bands (p0-50, p50-90, p90-97, p97-100): mean
  latency, query characters, own CPU, task steps, and the collections' wall time
  overlapping them;
* the collections by generation (count, thread CPU, largest), and the owner's parts.

Why: the main job's retrieve p99 target (<= 20 ms) and the ops per CPU-second target are
one question in the crowded phase; this says how much of the p99 the cycle is and what
the slowest retrieves add to it (docs/benchmarks.md, "The main job's CPU and retrieve
tail on the AMD VM", branch mainjob30).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Generator
from dataclasses import asdict, dataclass, field
from typing import Any

from stress.mainjob_phases import counting_agent, swarm_args

#: The latency bands of the crowded phase's report (fractions of its retrieves).
BANDS = (("p0-50", 0.0, 0.5), ("p50-90", 0.5, 0.9), ("p90-97", 0.9, 0.97), ("p97-100", 0.97, 1.0))


@dataclass
class Trace:
    """What one run recorded (times in seconds from ``time.perf_counter``, CPU in ns)."""

    agents: int = 0
    #: (start, end, query chars, own CPU ns, task steps, agents running at the start)
    retrieves: list[tuple[float, float, int, int, int, int]] = field(default_factory=list)
    #: (start, wall s, generation, thread CPU ns)
    collections: list[tuple[float, float, int, int]] = field(default_factory=list)
    #: part name -> [(start, wall s, thread CPU ns)]
    parts: dict[str, list[tuple[float, float, int]]] = field(default_factory=dict)
    process_cpu_s: float = 0.0
    #: The process's CPU (``time.process_time``) at the first and at the last start of a
    #: retrieve while every agent was running (the crowded phase), or None.
    crowded_cpu: list[float] | None = None


class _Timed:
    """Awaits ``coro``, adding the thread CPU of each of its steps to ``cpu`` and
    counting the steps."""

    __slots__ = ("coro", "cpu", "steps")

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.cpu = 0
        self.steps = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, clock = self.coro, time.thread_time_ns
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                got = coro.throw(error) if error is not None else coro.send(value)
            except StopIteration as stop:
                self.cpu += clock() - start
                self.steps += 1
                return stop.value
            self.cpu += clock() - start
            self.steps += 1
            try:
                value, error = (yield got), None
            except BaseException as exc:  # delivered into the coroutine at its next step
                value, error = None, exc


def _agents(argv: list[str]) -> int:
    """The ``--agents`` value of ``argv`` (the swarm's default, 64, if absent)."""
    for i, arg in enumerate(argv):
        if arg == "--agents" and i + 1 < len(argv):
            return int(argv[i + 1])
        if arg.startswith("--agents="):
            return int(arg.split("=", 1)[1])
    return 64


def run(argv: list[str]) -> Trace:
    """Run the swarm with ``argv`` (see the module docs) and return what it recorded.
    The wrapped methods and the collector's callback are restored whatever happens."""
    import actormem._engine.memory as memory_module
    import actormem._engine.state as state_module
    import actormem.cli._swarm as swarm
    from actormem._storage import sqlite
    from actormem.cli import _main

    argv = swarm_args(argv)
    trace = Trace(agents=_agents(argv))
    clock, cpu = time.perf_counter, time.thread_time_ns
    live = [0]
    started = [0.0, 0]

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0], started[1] = clock(), cpu()
        else:
            trace.collections.append(
                (started[0], clock() - started[0], info["generation"], cpu() - started[1])
            )

    retrieve = memory_module.Memory.retrieve

    async def timed_retrieve(self: Any, query: str, *args: Any, **kwargs: Any) -> Any:
        start, running = clock(), live[0]
        if running >= trace.agents:
            now = time.process_time()
            if trace.crowded_cpu is None:
                trace.crowded_cpu = [now, now]
            trace.crowded_cpu[1] = now
        timed = _Timed(retrieve(self, query, *args, **kwargs))
        found = await timed
        trace.retrieves.append((start, clock(), len(query), timed.cpu, timed.steps, running))
        return found

    def timed_part(name: str, fn: Any) -> Any:
        spans = trace.parts.setdefault(name, [])

        def timed(*args: Any, **kwargs: Any) -> Any:
            start, start_cpu = clock(), cpu()
            try:
                return fn(*args, **kwargs)
            finally:
                spans.append((start, clock() - start, cpu() - start_cpu))

        return timed

    wrapped = [
        (swarm, "_agent", counting_agent(swarm._agent, live)),
        (memory_module.Memory, "retrieve", timed_retrieve),
        (memory_module.Memory, "_apply_batch",
         timed_part("apply_batch", memory_module.Memory._apply_batch)),
        (sqlite.SqliteStore, "write_inline",
         timed_part("write_inline", sqlite.SqliteStore.write_inline)),
        (state_module.MemoryState, "flush_index",
         timed_part("flush_index", state_module.MemoryState.flush_index)),
    ]  # fmt: skip
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in wrapped]
    for owner, name, new in wrapped:
        setattr(owner, name, new)
    gc.callbacks.append(on_collection)
    start_cpu = time.process_time()
    try:
        _main.main(["swarm", *argv])
    finally:
        trace.process_cpu_s = time.process_time() - start_cpu
        gc.callbacks.remove(on_collection)
        for owner, name, old in saved:
            setattr(owner, name, old)
    return trace


def _quantile(sorted_values: list[float], q: float) -> float:
    """The value at rank ``floor(q * n)`` of ``sorted_values`` (the last for q = 1)."""
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _overlap(spans: list[tuple[float, float, int, int]], start: float, end: float) -> float:
    """The seconds of ``spans`` (start, wall s, ...) inside ``[start, end]``."""
    return sum(max(0.0, min(end, s + wall) - max(start, s)) for s, wall, *_ in spans)


def summary(trace: Trace) -> dict[str, Any]:
    """The figures the module docs list, from ``trace``. Raises ValueError if no retrieve
    was recorded."""
    rets = sorted(trace.retrieves)
    if not rets:
        raise ValueError("no retrieve recorded")
    latency = sorted(end - start for start, end, *_ in rets)
    crowded = [r for r in rets if r[5] >= trace.agents]
    out: dict[str, Any] = {
        "retrieves": len(rets),
        "retrieve_p50_ms": 1e3 * _quantile(latency, 0.5),
        "retrieve_p99_ms": 1e3 * _quantile(latency, 0.99),
        "process_cpu_s": trace.process_cpu_s,
        "crowded_retrieves": len(crowded),
    }
    if len(crowded) >= 2:
        wall = crowded[-1][0] - crowded[0][0]
        cycle = wall / (len(crowded) / trace.agents)
        out.update(crowded_wall_s=wall, cycle_ms=1e3 * cycle)
        if trace.crowded_cpu is not None:
            # The process's CPU per agent step (a retrieve, its store, the owner's share,
            # the harness) in the crowded phase; the cycle on a core of its own would be
            # about agents times it.
            step = (trace.crowded_cpu[1] - trace.crowded_cpu[0]) / (len(crowded) - 1)
            out.update(crowded_cpu_s=trace.crowded_cpu[1] - trace.crowded_cpu[0],
                       crowded_cpu_per_step_ms=1e3 * step,
                       cpu_cycle_ms=1e3 * step * trace.agents)  # fmt: skip
        out["p99_per_cycle"] = out["retrieve_p99_ms"] / out["cycle_ms"] if cycle > 0 else None
        by_latency = sorted(crowded, key=lambda r: r[1] - r[0])
        bands = []
        for name, lo, hi in BANDS:
            part = by_latency[int(lo * len(by_latency)) : int(hi * len(by_latency))]
            if not part:
                continue
            bands.append({
                "band": name,
                "n": len(part),
                "latency_ms": 1e3 * statistics.fmean(r[1] - r[0] for r in part),
                "query_chars": statistics.fmean(r[2] for r in part),
                "own_cpu_ms": statistics.fmean(r[3] for r in part) / 1e6,
                "steps": statistics.fmean(r[4] for r in part),
                "gc_overlap_ms": 1e3 * statistics.fmean(
                    _overlap(trace.collections, r[0], r[1]) for r in part
                ),
            })  # fmt: skip
        out["bands"] = bands
    gens = []
    for generation in (0, 1, 2):
        got = [c for c in trace.collections if c[2] == generation]
        if got:
            gens.append({
                "generation": generation,
                "count": len(got),
                "cpu_ms": sum(c[3] for c in got) / 1e6,
                "largest_cpu_ms": max(c[3] for c in got) / 1e6,
            })  # fmt: skip
    out["collections"] = gens
    out["parts"] = {
        name: {"calls": len(spans), "cpu_ms": sum(s[2] for s in spans) / 1e6}
        for name, spans in trace.parts.items()
        if spans
    }
    out["retrieve_own_cpu_s"] = sum(r[3] for r in rets) / 1e9
    return out


def report(figures: dict[str, Any]) -> str:
    """``figures`` (:func:`summary`) as text: a line of totals, then Markdown tables."""
    lines = [
        f"retrieves {figures['retrieves']:,}: p50 {figures['retrieve_p50_ms']:.1f} ms, "
        f"p99 {figures['retrieve_p99_ms']:.1f} ms; process CPU {figures['process_cpu_s']:.2f} s, "
        f"retrieves' own {figures['retrieve_own_cpu_s']:.2f} s"
    ]
    if "cycle_ms" in figures:
        ratio = figures["p99_per_cycle"]
        lines.append(
            f"crowded phase: {figures['crowded_retrieves']:,} retrieves in "
            f"{figures['crowded_wall_s']:.2f} s, cycle {figures['cycle_ms']:.1f} ms, "
            f"p99 / cycle {'-' if ratio is None else f'{ratio:.2f}'}"
        )
        if "crowded_cpu_per_step_ms" in figures:
            lines.append(
                f"crowded phase's process CPU: {figures['crowded_cpu_s']:.2f} s, "
                f"{figures['crowded_cpu_per_step_ms']:.3f} ms an agent step; x agents: "
                f"{figures['cpu_cycle_ms']:.1f} ms (the cycle on a core of its own)"
            )
        lines += ["", "| band | retrieves | latency ms | query chars | own CPU ms | steps "
                  "| GC overlap ms |", "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
        for b in figures["bands"]:
            lines.append(
                f"| {b['band']} | {b['n']:,} | {b['latency_ms']:.1f} | {b['query_chars']:.0f} "
                f"| {b['own_cpu_ms']:.2f} | {b['steps']:.1f} | {b['gc_overlap_ms']:.2f} |"
            )
    lines += ["", "| collections | count | thread CPU ms | largest ms |", "|---|---:|---:|---:|"]
    for g in figures["collections"]:
        lines.append(
            f"| generation {g['generation']} | {g['count']:,} | {g['cpu_ms']:.1f} "
            f"| {g['largest_cpu_ms']:.1f} |"
        )
    lines += ["", "| part | calls | thread CPU ms |", "|---|---:|---:|"]
    for name, p in figures["parts"].items():
        lines.append(f"| {name} | {p['calls']:,} | {p['cpu_ms']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m stress.mainjob_tail", add_help=False)
    parser.add_argument("--trace-json", default=None)
    ours, rest = parser.parse_known_args(argv)
    trace = run(rest)
    figures = summary(trace)
    print(report(figures), file=sys.stderr)
    if ours.trace_json is not None:
        with open(ours.trace_json, "w") as out:
            json.dump({"argv": argv, "summary": figures, "trace": asdict(trace)}, out)


if __name__ == "__main__":
    main(sys.argv[1:])
