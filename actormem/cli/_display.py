"""What ``actormem swarm`` shows: a live progress display while it runs, a table at the end.

Theory of operation
-------------------
:func:`watch` is a trio task that samples a :class:`~actormem.cli._swarm.SwarmRun` and the
memory's statistics at a fixed interval. On a terminal it drives a :mod:`rich.progress`
display (redrawn by this task, never by rich's own refresh thread, so nothing reads the
run from another thread); elsewhere (a pipe, a file, CI) it prints one plain line per
interval instead. Operations/s is the rate over the last interval; the retrieve p99 is
over the most recent :data:`~actormem.cli._swarm.RECENT_WINDOW` retrieves.

:func:`result_tables` renders the final figures as :class:`rich.table.Table` objects.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable
from typing import TextIO

import trio
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .._stats import MemoryStatistics
from ._swarm import CAUSES, Accounting, LatencySummary, SwarmRun

__all__ = ["PipeConsole", "progress_line", "result_tables", "watch"]


class PipeConsole(Console):
    """A :class:`rich.console.Console` whose write to a reader that has gone
    (``actormem swarm | head -1``) raises :class:`BrokenPipeError` like every other
    write of the command, so that ``main`` stops quietly with status 141 (docs/cli.md).
    rich's own handling raises ``SystemExit(1)``, which in a trio task came out as an
    exception group's traceback and status 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # rich's own first step: nothing more is rendered
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def progress_line(
    run: SwarmRun,
    total: int | None,
    rate: float,
    stats: MemoryStatistics,
    total_steps: int | None = None,
) -> str:
    """One plain progress line: elapsed s, episodes, steps, ops/s, retrieve p99, entries,
    evictions. Steps (tool calls replayed) move from the first second, while the first
    episodes (the longest go first) may take minutes to end."""
    elapsed = time.perf_counter() - run.started
    of = "" if total is None else f"/{total:,}"
    steps_of = "" if total_steps is None else f"/{total_steps:,}"
    return (
        f"[{elapsed:7.1f}s] episodes {run.episodes_done:,}{of}  "
        f"steps {run.steps:,}{steps_of}  ops/s {rate:,.0f}  "
        f"retrieve p99 {_ms(run.recent_retrieve_p99())} ms  entries {stats.entries:,}  "
        f"evictions {stats.evictions:,}"
    )


async def watch(
    run: SwarmRun,
    statistics: Callable[[], MemoryStatistics],
    *,
    total: int | None,
    interactive: bool,
    interval: float,
    out: TextIO,
    total_steps: int | None = None,
) -> None:
    """Show progress until cancelled (the caller cancels it when the run ends).

    Args:
        run: The run being filled in.
        statistics: Returns the memory's current statistics (``memory.statistics``).
        total: Episodes expected, or ``None`` when unknown.
        total_steps: Tool calls expected, or ``None`` when unknown. When known, the
            live bar counts steps (it moves from the start); else episodes.
        interactive: Draw a live rich display (True) or print plain lines (False).
        interval: Seconds between refreshes (plain lines: between lines).
        out: Where to write.
    """
    last_ops, last_time = run.operations, time.perf_counter()

    def sample() -> tuple[float, MemoryStatistics]:
        nonlocal last_ops, last_time
        now, ops = time.perf_counter(), run.operations
        rate = (ops - last_ops) / (now - last_time) if now > last_time else 0.0
        last_ops, last_time = ops, now
        return rate, statistics()

    if not interactive:
        while True:
            await trio.sleep(interval)
            rate, stats = sample()
            print(progress_line(run, total, rate, stats, total_steps), file=out, flush=True)
    # Imported here: a run that prints plain lines (a pipe, the benchmarks) does not pay
    # the ~8 ms of importing rich's live display.
    from rich.live import Live
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    console = PipeConsole(file=out)
    by_steps = total_steps is not None
    progress = Progress(
        TextColumn("steps" if by_steps else "episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    task = progress.add_task("swarm", total=total_steps if by_steps else total)

    def frame() -> Group:
        rate, stats = sample()
        progress.update(task, completed=run.steps if by_steps else run.episodes_done)
        of = "" if total is None else f"/{total:,}"
        counted = f"episodes {run.episodes_done:,}{of}" if by_steps else f"steps {run.steps:,}"
        detail = (
            f"{counted}   ops/s {rate:,.0f}   retrieve p99 {_ms(run.recent_retrieve_p99())} ms   "
            f"entries {stats.entries:,}   evictions {stats.evictions:,}"
        )
        return Group(progress, Text(detail))

    # The Live display is redrawn by this task only (no refresh thread).
    with Live(frame(), console=console, auto_refresh=False) as live:
        try:
            while True:
                await trio.sleep(interval)
                live.update(frame(), refresh=True)
        finally:
            live.update(frame(), refresh=True)  # the final figures, once the run is over


def result_tables(
    run: SwarmRun,
    latency: dict[str, LatencySummary | None],
    stats: MemoryStatistics,
    accounting: Accounting,
) -> list[Table]:
    """The end-of-run tables: throughput, latency (ms), memory and accounting (one row for
    the agents' stores, one for the entries present at the start when there were any)."""
    elapsed = max(run.elapsed, 1e-9)
    throughput = Table(title="throughput", title_justify="left")
    for name in ("agents", "elapsed s", "episodes", "steps", "operations", "ops/s", "steps/s"):
        throughput.add_column(name, justify="right")
    throughput.add_row(
        str(run.agents),
        f"{run.elapsed:.2f}",
        f"{run.episodes_done:,}",
        f"{run.steps:,}",
        f"{run.operations:,}",
        f"{run.operations / elapsed:,.0f}",
        f"{run.steps / elapsed:,.0f}",
    )
    lat = Table(title="latency (ms)", title_justify="left")
    lat.add_column("operation")
    for name in ("count", "p50", "p95", "p99", "max"):
        lat.add_column(name, justify="right")
    for op, summary in latency.items():
        if summary is None:
            lat.add_row(op, "0", "-", "-", "-", "-")
        else:
            lat.add_row(
                op,
                f"{summary.count:,}",
                *(f"{v:.3f}" for v in (summary.p50, summary.p95, summary.p99, summary.max)),
            )
    memory = Table(title="memory", title_justify="left")
    for name in ("entries", "capacity", "evictions", "prunes", "merges", "consolidations"):
        memory.add_column(name, justify="right")
    memory.add_row(
        f"{stats.entries:,}",
        "none" if stats.capacity is None else f"{stats.capacity:,}",
        f"{accounting.counters['evicted']:,}",
        f"{accounting.counters['pruned']:,}",
        f"{accounting.counters['merged']:,}",
        f"{stats.consolidations:,}",
    )
    # Where the tracked arrivals went; their number is in the line printed below the
    # table (a "tracked" column would not fit in 80 characters).
    check = Table(title="accounting", title_justify="left")
    check.add_column("of")
    for name in ("present", *CAUSES, "lost"):
        check.add_column(name, justify="right")
    rows = [("stores", accounting.stores)]
    if accounting.initial.tracked:
        rows.append(("initial", accounting.initial))
    for label, tally in rows:
        values = [getattr(tally, name) for name in ("present", *CAUSES, "lost")]
        check.add_row(label, *(f"{v:,}" for v in values))
    return [throughput, lat, memory, check]
