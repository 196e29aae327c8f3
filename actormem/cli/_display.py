"""What ``actormem swarm`` shows: a live progress display while it runs, a table at the end.

Theory of operation
-------------------
:func:`watch` is a trio task that samples a :class:`~actormem.cli._swarm.SwarmRun` and the
memory's statistics at a fixed interval. On a terminal it drives a :mod:`rich.progress`
display (redrawn by this task, never by rich's own refresh thread, so nothing reads the
run from another thread); elsewhere (a pipe, a file, CI) it prints one plain line per
interval instead. Operations/s is the rate over the last interval; the retrieve p99 is
over the most recent :data:`~actormem.cli._swarm.RECENT_WINDOW` retrieves.

:func:`result_specs` gives the final figures' tables; :func:`plain_tables` draws them as rich
would into a file, without rich (``_PLAIN_TABLES``), :func:`rich_tables` makes them
:class:`rich.table.Table` objects for rich's console.
"""

from __future__ import annotations

import builtins
import errno
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

import trio

from .._stats import MemoryStatistics
from ._swarm import CAUSES, Accounting, LatencySummary, SwarmRun

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = [
    "TableSpec",
    "pipe_console",
    "plain_output",
    "plain_tables",
    "progress_line",
    "result_specs",
    "rich_tables",
    "watch",
]

#: ``actormem swarm`` writes its end-of-run tables without importing rich when its
#: output is not a terminal (:func:`plain_output`) and every table fits the width rich
#: would give it (:func:`plain_tables`): the same characters rich writes there (its
#: ``HEAVY_HEAD`` box, no styles, the title padded to the table's width), drawn by a few
#: string joins, instead of ~22-50 ms of importing rich and ~13 ms of its drawing in the
#: main job's process. A terminal, any environment variable rich reads to decide
#: (``FORCE_COLOR``, ``TTY_COMPATIBLE``, ``TTY_INTERACTIVE``, ``COLUMNS``, ``LINES``,
#: ``JUPYTER_*``), IPython, a non-UTF encoding, a cell outside the plain characters or a
#: table wider than the console: rich draws them, as before. False: rich always (the
#: path before it; the same output).
_PLAIN_TABLES = True

#: The environment variables rich's console reads to decide whether it writes to a
#: terminal, its width and its styles: any of them set leaves the output to rich.
_RICH_ENVIRON = (
    "FORCE_COLOR",
    "TTY_COMPATIBLE",
    "TTY_INTERACTIVE",
    "COLUMNS",
    "LINES",
    "JUPYTER_COLUMNS",
    "JUPYTER_LINES",
)
#: What a plain table's title, headers and cells may hold: characters rich shows as
#: they are, one cell each (no markup ``[``, no emoji ``:``, no wide or control
#: characters), and no leading, trailing or double space (rich's wrapping of words).
_PLAIN_CELL = re.compile(r"(?:[A-Za-z0-9,.()%/_+-]+(?: [A-Za-z0-9,.()%/_+-]+)*)?")

_pipe_console_type: Any = None


def pipe_console(**options: Any) -> Console:
    """A :class:`PipeConsole` (``options`` as :class:`rich.console.Console`'s). rich is
    imported by the first call. O(1)."""
    global _pipe_console_type
    if _pipe_console_type is None:
        from rich.console import Console

        class PipeConsole(Console):
            """A :class:`rich.console.Console` whose write to a reader that has gone
            (``actormem swarm | head -1``) raises :class:`BrokenPipeError` like every
            other write of the command, so that ``main`` stops quietly with status 141
            (docs/cli.md). rich's own handling raises ``SystemExit(1)``, which in a trio
            task came out as an exception group's traceback and status 1."""

            def on_broken_pipe(self) -> None:
                self.quiet = True  # rich's own first step: nothing more is rendered
                raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

        PipeConsole.__module__ = __name__
        PipeConsole.__qualname__ = "PipeConsole"
        _pipe_console_type = PipeConsole
    console: Console = _pipe_console_type(**options)
    return console


def __getattr__(name: str) -> Any:
    if name == "PipeConsole":  # made with rich's import, on first use
        if _pipe_console_type is None:
            pipe_console()
        return _pipe_console_type
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def plain_output(stream: TextIO) -> bool:
    """Whether rich's console would write to ``stream`` (``sys.stdout``) as to a file:
    no terminal (``isatty()`` False), none of the environment variables it reads to
    decide (:data:`_RICH_ENVIRON`), not under IPython or IDLE, not Windows, and a UTF
    encoding (rich draws ASCII boxes otherwise). Then :func:`plain_tables` may draw the
    tables. Any doubt (an ``isatty`` that raises) is False. O(1)."""
    if not _PLAIN_TABLES or sys.platform == "win32":
        return False
    if any(name in os.environ for name in _RICH_ENVIRON):
        return False
    if getattr(builtins, "get_ipython", None) is not None:
        return False
    if getattr(sys.stdin, "__module__", "").startswith("idlelib"):
        return False
    encoding = (getattr(stream, "encoding", "utf-8") or "utf-8").lower()
    if not encoding.startswith("utf"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return isatty is not None and not isatty()
    except Exception:
        return False


def _console_width() -> int:
    """The width rich's console takes when it writes to a file and ``COLUMNS`` is not
    set: the first of stdin, stdout and stderr that is a terminal, else 80. O(1)."""
    width = None
    for fd in (0, 1, 2):
        try:
            width = os.get_terminal_size(fd).columns
        except (AttributeError, ValueError, OSError):
            continue
        break
    return width or 80


@dataclass(frozen=True)
class TableSpec:
    """One end-of-run table: its title, its columns (name, ``"left"`` or ``"right"``)
    and its rows (one str a column)."""

    title: str
    columns: tuple[tuple[str, str], ...]
    rows: tuple[tuple[str, ...], ...]


def _plain_row(values: Any, widths: list[int], justify: list[str], bar: str) -> str:
    """One row of a plain table: each value padded by one space a side, justified in its
    column's width, between ``bar`` characters. O(width)."""
    parts = [
        f" {v.rjust(w) if how == 'right' else v.ljust(w)} "
        for v, w, how in zip(values, widths, justify, strict=True)
    ]
    return bar + bar.join(parts) + bar


def plain_tables(specs: list[TableSpec], width: int | None = None) -> str | None:
    """The text rich's console writes to a file for ``specs`` (each a
    :class:`rich.table.Table` with ``title_justify="left"``, printed on its own), or
    None when rich would draw one otherwise than plainly: a title, header or cell
    outside :data:`_PLAIN_CELL`, a table without rows or columns, or one wider than
    ``width`` (default: the console's, :func:`_console_width`) or than its title. Every
    line ends with ``\n``. O(cells)."""
    limit = _console_width() if width is None else width
    out: list[str] = []
    for spec in specs:
        if not spec.columns or not spec.rows:
            return None
        cells = [spec.title, *(name for name, _ in spec.columns)]
        cells.extend(cell for row in spec.rows for cell in row)
        if any(len(row) != len(spec.columns) for row in spec.rows):
            return None
        if not all(_PLAIN_CELL.fullmatch(cell) for cell in cells):
            return None
        widths = [
            max(len(name), *(len(row[j]) for row in spec.rows))
            for j, (name, _) in enumerate(spec.columns)
        ]
        total = sum(widths) + 3 * len(widths) + 1
        if total > limit or len(spec.title) > total:
            return None
        justify = [how for _, how in spec.columns]
        out.append(spec.title.ljust(total))
        out.append("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
        out.append(_plain_row([name for name, _ in spec.columns], widths, justify, "┃"))
        out.append("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
        out.extend(_plain_row(row, widths, justify, "│") for row in spec.rows)
        out.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    return "".join(f"{text}\n" for text in out)


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
    from rich.console import Group
    from rich.live import Live
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    console = pipe_console(file=out)
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


def result_specs(
    run: SwarmRun,
    latency: dict[str, LatencySummary | None],
    stats: MemoryStatistics,
    accounting: Accounting,
) -> list[TableSpec]:
    """The end-of-run tables' contents: throughput, latency (ms), memory and accounting
    (one row for the agents' stores, one for the entries present at the start when there
    were any)."""
    elapsed = max(run.elapsed, 1e-9)

    def right(*names: str) -> tuple[tuple[str, str], ...]:
        return tuple((name, "right") for name in names)

    throughput = TableSpec(
        "throughput",
        right("agents", "elapsed s", "episodes", "steps", "operations", "ops/s", "steps/s"),
        (
            (
                str(run.agents),
                f"{run.elapsed:.2f}",
                f"{run.episodes_done:,}",
                f"{run.steps:,}",
                f"{run.operations:,}",
                f"{run.operations / elapsed:,.0f}",
                f"{run.steps / elapsed:,.0f}",
            ),
        ),
    )
    lat_rows: list[tuple[str, ...]] = []
    for op, summary in latency.items():
        if summary is None:
            lat_rows.append((op, "0", "-", "-", "-", "-"))
        else:
            lat_rows.append(
                (
                    op,
                    f"{summary.count:,}",
                    *(f"{v:.3f}" for v in (summary.p50, summary.p95, summary.p99, summary.max)),
                )
            )
    lat = TableSpec(
        "latency (ms)",
        (("operation", "left"), *right("count", "p50", "p95", "p99", "max")),
        tuple(lat_rows),
    )
    memory = TableSpec(
        "memory",
        right("entries", "capacity", "evictions", "prunes", "merges", "consolidations"),
        (
            (
                f"{stats.entries:,}",
                "none" if stats.capacity is None else f"{stats.capacity:,}",
                f"{accounting.counters['evicted']:,}",
                f"{accounting.counters['pruned']:,}",
                f"{accounting.counters['merged']:,}",
                f"{stats.consolidations:,}",
            ),
        ),
    )
    # Where the tracked arrivals went; their number is in the line printed below the
    # table (a "tracked" column would not fit in 80 characters).
    rows = [("stores", accounting.stores)]
    if accounting.initial.tracked:
        rows.append(("initial", accounting.initial))
    check = TableSpec(
        "accounting",
        (("of", "left"), *right("present", *CAUSES, "lost")),
        tuple(
            (label, *(f"{getattr(tally, name):,}" for name in ("present", *CAUSES, "lost")))
            for label, tally in rows
        ),
    )
    return [throughput, lat, memory, check]


def rich_tables(specs: list[TableSpec]) -> list[Table]:
    """``specs`` as :class:`rich.table.Table` objects (rich imported here). O(cells)."""
    from rich.table import Table

    tables = []
    for spec in specs:
        table = Table(title=spec.title, title_justify="left")
        for name, justify in spec.columns:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for row in spec.rows:
            table.add_row(*row)
        tables.append(table)
    return tables

