"""Scenario 1: retrieve latency and snapshot time against the memory's size.

For each size and scorer, a memory built with :func:`~stress._bench_engine.build_state`
is served by the real owner (:func:`~stress._bench_engine.serve_state`) and timed through
the public API: ``memory.snapshot()`` and ``await memory.retrieve(query, 10)`` from a
trio task, LoCoMo questions in a seeded order. The query list is the longest prefix that
fits the time budget (between ``min_queries`` and ``max_queries``); every repeat runs the
same list, and the figures pool every repeat's samples (the per-repeat p50s are kept
too, to show the spread).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from actormem import Memory

from ._bench_rw import StepTimer
from ._bench_stats import GcPauses, median, summarize_ms

__all__ = ["Budget", "choose_queries", "time_calls", "time_snapshots"]

K = 10


class Budget:
    """How long one cell may take and how many queries it may use."""

    def __init__(self, seconds: float, repeats: int, min_queries: int, max_queries: int) -> None:
        self.seconds = seconds
        self.repeats = repeats
        self.min_queries = min_queries
        self.max_queries = max_queries


async def choose_queries(
    call: Callable[[str], Awaitable[object]], queries: Sequence[str], budget: Budget
) -> list[str]:
    """The prefix of ``queries`` that fits the budget, judged from 3 calls after 2 warm-ups."""
    for q in queries[:2]:
        await call(q)
    start = time.perf_counter()
    for q in queries[2:5]:
        await call(q)
    est = (time.perf_counter() - start) / 3
    fit = int(budget.seconds / max(est * budget.repeats, 1e-9))
    n = max(budget.min_queries, min(budget.max_queries, fit, len(queries)))
    return list(queries[:n])


async def time_calls(
    call: Callable[[str], Awaitable[object]], queries: Sequence[str], repeats: int
) -> dict[str, Any]:
    """Time ``await call(q)`` for each query, ``repeats`` times; wall and thread CPU."""
    wall: list[int] = []
    cpu: list[int] = []
    per_repeat: list[float] = []
    perf, thread = time.perf_counter_ns, time.thread_time_ns
    for _ in range(repeats):
        mine: list[int] = []
        for q in queries:
            c0 = thread()
            t0 = perf()
            await call(q)
            t1 = perf()
            cpu.append(thread() - c0)
            mine.append(t1 - t0)
        wall.extend(mine)
        per_repeat.append(summarize_ms(mine)["p50_ms"])
    out: dict[str, Any] = summarize_ms(wall)
    out["cpu_p50_ms"] = summarize_ms(cpu)["p50_ms"]
    out["repeat_p50_ms"] = per_repeat
    out["queries"] = len(queries)
    out["repeats"] = repeats
    return out


def time_snapshots(memory: Memory, count: int = 2000) -> dict[str, float]:
    """``memory.snapshot()``, ``count`` times (each dropped at once): p50/p99 in µs."""
    perf = time.perf_counter_ns
    samples = []
    snap = memory.snapshot
    for _ in range(count):
        t0 = perf()
        s = snap()
        t1 = perf()
        del s
        samples.append(t1 - t0)
    stats = summarize_ms(samples)
    return {
        "snapshot_p50_us": stats["p50_ms"] * 1e3,
        "snapshot_p99_us": stats["p99_ms"] * 1e3,
    }


async def retrieve_cell(memory: Memory, queries: Sequence[str], budget: Budget) -> dict[str, Any]:
    """Scenario 1's figures for one served memory, with the longest step of the calling
    task while the timed retrieves run (``longest_step_ms``: how long the event loop went
    without a checkpoint, a one-reader figure beside the rw scenario's 64 readers; and
    ``longest_step_cpu_ms``, the most CPU time one step took, see :class:`StepTimer`)."""

    async def call(q: str) -> object:
        return await memory.retrieve(q, K)

    chosen = await choose_queries(call, queries, budget)
    timer = StepTimer()
    with timer.recording(), GcPauses() as pauses:
        row = await time_calls(call, chosen, budget.repeats)
    wall, cpu = timer.longest_ms(timer.kind(trio.lowlevel.current_task()))
    row["longest_step_ms"], row["longest_step_cpu_ms"] = wall, cpu
    row.update(pauses.as_json())
    row.update(time_snapshots(memory))
    row["spread_p50_ms"] = [min(row["repeat_p50_ms"]), max(row["repeat_p50_ms"])]
    row["median_repeat_p50_ms"] = median(row["repeat_p50_ms"])
    return row
