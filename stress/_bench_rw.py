"""Scenario 3: readers never block writers, writers never block readers.

On a served memory of ``n`` entries, 64 writer tasks (``await memory.store``, new
corpus entries) and 64 reader tasks (``await memory.retrieve(question, 10)``) run in three
phases:

A. writers alone, ``writer_quota`` stores each;
B. readers alone, ``reader_quota`` retrieves each (as many as fit the time budget);
C. both at once. Each side keeps going after its quota until the other side has
   finished its own, and a call counts only if some task of the other side was still
   running when it returned, so every sample of phase C was taken under contention.

Every task stops early once its phase has run ``budget_s`` and every task of the other
side has had one call through: at 1M entries one scheduling round of 64 retrieves takes
tens of seconds, and a store needs two rounds (request, then reply).

Figures: each side's p99 with the other running over its p99 alone (target: at most 2),
and, from a trio :class:`~trio.abc.Instrument`, the longest *task step* (the time the
event loop ran one task without reaching a checkpoint) of the readers: a retrieve scores
its snapshot in slices of about 0.1 ms (``RETRIEVE_SLICE``) with a checkpoint between
them, so that step is the stall every other task (writers, the owner) suffers during a
retrieve; the garbage collector's pauses land in whatever step allocates. The owner's
longest step (one batch of writes) is reported too: readers wait for it in the same way.
Each step is timed in wall time and in CPU time (see :class:`StepTimer`).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import trio

from actormem import Memory, MemoryEntry

from ._bench_stats import GcPauses, median, summarize_ms

__all__ = ["StepTimer", "combine_repeats", "rw_cell"]

STALL_MS = 5.0


class StepTimer(trio.abc.Instrument):
    """Longest task step by kind of task (reader, writer, owner, other), in wall time and
    in the event-loop thread's CPU time.

    The two differ when the OS runs something else meanwhile: this machine is shared
    (load ~1 on 2 cores), and a tight loop reading the clock for 30 s sees gaps of up to
    ~4 ms. The CPU figure is the work the task did in one step, what the library bounds;
    the wall figure is what other tasks waited."""

    def __init__(self) -> None:
        self._t0 = 0
        self._c0 = 0
        self.longest: dict[str, int] = defaultdict(int)
        self.longest_cpu: dict[str, int] = defaultdict(int)
        self.over: dict[str, int] = defaultdict(int)
        self.steps: dict[str, int] = defaultdict(int)

    @contextmanager
    def recording(self) -> Iterator[StepTimer]:
        """Forget what was recorded, then time every task step while inside, as a trio
        instrument of the current run (removed on the way out)."""
        self.longest.clear()
        self.longest_cpu.clear()
        self.over.clear()
        self.steps.clear()
        trio.lowlevel.add_instrument(self)
        # The step in progress (the caller's) counts from here: it began unobserved.
        self.before_task_step(trio.lowlevel.current_task())
        try:
            yield self
        finally:
            trio.lowlevel.remove_instrument(self)

    @staticmethod
    def kind(task: trio.lowlevel.Task) -> str:
        """``reader`` or ``writer`` (by task name), ``owner``, or ``other``."""
        name = task.name
        return name if name in ("reader", "writer") else "owner" if "owner" in name else "other"

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._c0 = time.thread_time_ns()
        self._t0 = time.perf_counter_ns()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        dt = time.perf_counter_ns() - self._t0
        cpu = time.thread_time_ns() - self._c0
        kind = self.kind(task)
        self.steps[kind] += 1
        if dt > self.longest[kind]:
            self.longest[kind] = dt
        if cpu > self.longest_cpu[kind]:
            self.longest_cpu[kind] = cpu
        if dt > STALL_MS * 1e6:
            self.over[kind] += 1

    def longest_ms(self, kind: str) -> tuple[float, float]:
        """``(wall, CPU)`` of the longest steps of ``kind``, in ms (each its own step)."""
        return self.longest.get(kind, 0) / 1e6, self.longest_cpu.get(kind, 0) / 1e6

    def snapshot(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for kind in ("reader", "writer", "owner", "other"):
            wall, cpu = self.longest_ms(kind)
            out[f"{kind}_longest_step_ms"] = wall
            out[f"{kind}_longest_step_cpu_ms"] = cpu
        for kind in ("reader", "owner"):
            out[f"{kind}_steps_over_{STALL_MS:g}ms"] = self.over.get(kind, 0)
        return out


class _Phase:
    """Shared counters of one phase: who has not finished its quota yet, who still runs."""

    def __init__(self, writers: int, readers: int) -> None:
        self.total = {"writer": writers, "reader": readers}
        self.left = {"writer": writers, "reader": readers}
        self.running = {"writer": writers, "reader": readers}
        #: Tasks that have completed at least one call.
        self.started = {"writer": 0, "reader": 0}

    def may_stop(self, other: str, deadline: float) -> bool:
        """Past the deadline, once every task of the other side got one call through
        (else a side whose calls take several scheduling rounds would get no sample)."""
        return time.perf_counter() >= deadline and self.started[other] == self.total[other]


async def _run_phase(
    memory: Memory,
    new_entries: Iterator[MemoryEntry],
    queries: Sequence[str],
    *,
    writers: int,
    readers: int,
    writer_quota: int,
    reader_quota: int,
    budget_s: float,
) -> tuple[list[int], list[int], float]:
    phase = _Phase(writers, readers)
    w_lat: list[int] = []
    r_lat: list[int] = []
    perf = time.perf_counter_ns
    both = writers > 0 and readers > 0
    deadline = time.perf_counter() + budget_s

    async def worker(kind: str, number: int) -> None:
        other = "reader" if kind == "writer" else "writer"
        quota = writer_quota if kind == "writer" else reader_quota
        sink = w_lat if kind == "writer" else r_lat
        done = 0
        qi = number * 7
        while done < quota or (both and phase.left[other] > 0):
            if done and phase.may_stop(other, deadline):
                break
            if kind == "writer":
                entry = next(new_entries)
                t0 = perf()
                await memory.store(entry)
            else:
                q = queries[qi % len(queries)]
                qi += 1
                t0 = perf()
                await memory.retrieve(q, 10)
            dt = perf() - t0
            if not both or phase.running[other] > 0:
                sink.append(dt)
            done += 1
            if done == 1:
                phase.started[kind] += 1
            if done == quota:
                phase.left[kind] -= 1
        phase.running[kind] -= 1

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for i in range(writers):
            nursery.start_soon(worker, "writer", i, name="writer")
        for i in range(readers):
            nursery.start_soon(worker, "reader", i, name="reader")
    return w_lat, r_lat, time.perf_counter() - start


async def rw_cell(
    memory: Memory,
    new_entries: Iterator[MemoryEntry],
    queries: Sequence[str],
    *,
    writers: int = 64,
    readers: int = 64,
    writer_quota: int = 100,
    budget_s: float = 30.0,
    max_reader_quota: int = 10,
) -> dict[str, Any]:
    """Scenario 3's row for one served memory."""
    # Reader quota: what fits the budget in phase B, judged from a few retrieves.
    start = time.perf_counter()
    for q in queries[:3]:
        await memory.retrieve(q, 10)
    est = (time.perf_counter() - start) / 3
    reader_quota = max(1, min(max_reader_quota, int(budget_s / max(readers * est, 1e-9))))

    timer = StepTimer()
    phases: dict[str, dict[str, Any]] = {}
    for name, (w, r) in {
        "writers_alone": (writers, 0),
        "readers_alone": (0, readers),
        "both": (writers, readers),
    }.items():
        with timer.recording(), GcPauses() as pauses:
            w_lat, r_lat, wall = await _run_phase(
                memory,
                new_entries,
                queries,
                writers=w,
                readers=r,
                writer_quota=writer_quota,
                reader_quota=reader_quota,
                budget_s=budget_s,
            )
        phases[name] = {
            "wall_s": wall,
            **summarize_ms(w_lat, "writer_"),
            **summarize_ms(r_lat, "reader_"),
            **timer.snapshot(),
            **pauses.as_json(),
        }
    alone_w = phases["writers_alone"]["writer_p99_ms"]
    alone_r = phases["readers_alone"]["reader_p99_ms"]
    both = phases["both"]
    return {
        "entries_at_start": None,  # filled by the caller
        "writers": writers,
        "readers": readers,
        "writer_quota": writer_quota,
        "reader_quota": reader_quota,
        "writer_p99_alone_ms": alone_w,
        "writer_p99_with_readers_ms": both["writer_p99_ms"],
        "writer_p99_ratio": both["writer_p99_ms"] / alone_w if alone_w > 0 else float("nan"),
        "reader_p99_alone_ms": alone_r,
        "reader_p99_with_writers_ms": both["reader_p99_ms"],
        "reader_p99_ratio": both["reader_p99_ms"] / alone_r if alone_r > 0 else float("nan"),
        "longest_retrieve_step_ms": max(
            phases["readers_alone"]["reader_longest_step_ms"], both["reader_longest_step_ms"]
        ),
        "longest_retrieve_step_cpu_ms": max(
            phases["readers_alone"]["reader_longest_step_cpu_ms"],
            both["reader_longest_step_cpu_ms"],
        ),
        "longest_owner_step_ms": max(p["owner_longest_step_ms"] for p in phases.values()),
        "gc_longest_ms": max(p["gc_longest_ms"] for p in phases.values()),
        "phases": phases,
    }


#: Figures of a row that are a maximum over the run: combined by max, not median.
_MAX_KEYS = frozenset(
    {
        "longest_retrieve_step_ms",
        "longest_retrieve_step_cpu_ms",
        "longest_owner_step_ms",
        "gc_longest_ms",
    }
)
#: The run's settings: the same in every repeat, kept as they are.
_SETTINGS = frozenset({"writers", "readers", "writer_quota", "reader_quota"})


def _median_of_numbers(values: list[float]) -> float:
    """The median of the values that are numbers (a p99 of no samples is NaN)."""
    numbers = [v for v in values if not math.isnan(v)]
    return median(numbers) if numbers else math.nan


def combine_repeats(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One row from :func:`rw_cell` rows of repeated runs on one memory: the median of
    each p99, each ratio then recomputed from those medians (so a ratio matches the
    columns beside it), and the maximum of each longest step or pause; the settings of
    the first repeat (the reader quota may differ per repeat: each repeat's is kept);
    per-repeat ratios and every repeat's phases beside them."""
    out: dict[str, Any] = {}
    for key, first in rows[0].items():
        values = [row[key] for row in rows]
        if key in _SETTINGS or not isinstance(first, (int, float)) or isinstance(first, bool):
            out[key] = first
        elif key in _MAX_KEYS:
            out[key] = max(values)
        else:
            out[key] = _median_of_numbers(values)
    for side, other in (("writer", "readers"), ("reader", "writers")):
        alone = out[f"{side}_p99_alone_ms"]
        both = out[f"{side}_p99_with_{other}_ms"]
        out[f"{side}_p99_ratio"] = both / alone if alone > 0 else math.nan
    out["repeats"] = len(rows)
    out["repeat_reader_quota"] = [row["reader_quota"] for row in rows]
    out["repeat_writer_p99_ratio"] = [row["writer_p99_ratio"] for row in rows]
    out["repeat_reader_p99_ratio"] = [row["reader_p99_ratio"] for row in rows]
    out["phases"] = [row["phases"] for row in rows]
    return out
