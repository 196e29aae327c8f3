"""Timing, percentiles, machine facts and target checks shared by the benchmark scenarios.

Latency is wall time (``time.perf_counter_ns``). Where a figure is a synchronous call, the
scenario also records the calling thread's CPU time (``time.thread_time_ns``): on a
machine other processes share, wall time includes waits for a core and CPU time does not,
so the two side by side tell contention from cost.
"""

from __future__ import annotations

import gc
import math
import os
import platform
import sqlite3
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

__all__ = [
    "GcPauses",
    "Target",
    "load_average",
    "machine",
    "paired_line",
    "percentile",
    "rss_bytes",
    "summarize_cpu_ms",
    "summarize_ms",
    "time_paired",
]


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of already sorted values, linear interpolation (numpy's
    default). NaN for no values. O(1)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    return sorted_values[lo] * (1.0 - frac) + sorted_values[hi] * frac


def summarize_ms(samples_ns: Iterable[int], prefix: str = "") -> dict[str, float]:
    """``{p50_ms, p99_ms, max_ms, mean_ms, samples}`` (keys prefixed) of nanosecond samples."""
    values = sorted(samples_ns)
    n = len(values)
    out = {
        "p50_ms": percentile(values, 0.50) / 1e6,
        "p99_ms": percentile(values, 0.99) / 1e6,
        "max_ms": values[-1] / 1e6 if values else math.nan,
        "mean_ms": sum(values) / n / 1e6 if values else math.nan,
        "samples": n,
    }
    return {prefix + k: v for k, v in out.items()}


def summarize_cpu_ms(values_ms: Iterable[float]) -> dict[str, float]:
    """``{p50_ms, p99_ms, mean_ms}`` of millisecond samples (at least one)."""
    values = sorted(values_ms)
    return {
        "p50_ms": percentile(values, 0.5),
        "p99_ms": percentile(values, 0.99),
        "mean_ms": sum(values) / len(values),
    }


def time_paired(
    queries: Sequence[str],
    switch: Callable[[bool], None],
    top_k: Callable[[bool, str], Sequence[tuple[float, Any]]],
    what: str,
    warm: bool = False,
    flip: bool = False,
) -> dict[bool, list[float]]:
    """Two paths of one query, A/B in one run: per query, for each path ``on`` (``True``
    first on even queries, ``False`` first on odd ones) ``switch(on)``, then the thread
    CPU in ms of ``top_k(on, query)``. Returns the samples per path.

    The first of the two runs of a query brings its data (posting lists, lengths, the
    groups met) into the caches for the second: over a set whose heaviest queries fall
    on one parity, that shows at the p99 as a difference between the paths. With
    ``warm``, each query first runs once untimed (on the ``False`` path), so that both
    timed runs find its data cached. With ``flip``, ``False`` runs first on even queries
    (the other order: a run and its flipped run show what the order gives either path).

    Raises:
        AssertionError: The paths' hits, as ``(score, record.seq)``, differ on a query
            (``what`` names the two paths in the message).
    """
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for i, query in enumerate(queries):
        got = {}
        if warm:
            switch(False)
            top_k(False, query)
        for on in (False, True) if (i + flip) % 2 else (True, False):
            switch(on)
            start = time.thread_time_ns()
            hits = top_k(on, query)
            cpu[on].append((time.thread_time_ns() - start) / 1e6)
            got[on] = [(score, rec.seq) for score, rec in hits]
        if got[True] != got[False]:
            raise AssertionError(f"{what} differ on {query[:80]!r}")
    return cpu


def paired_line(cell: dict[str, Any], a: str, b: str) -> str:
    """``a p50 .. p99 .. ms | b p50 .. p99 .. ms | x.. p50`` of a cell with the
    :func:`summarize_cpu_ms` of paths ``a`` and ``b`` and their ``ratio_p50``."""
    return (
        f"{a} p50 {cell[a]['p50_ms']:.3f} p99 {cell[a]['p99_ms']:.2f} ms"
        f" | {b} p50 {cell[b]['p50_ms']:.3f} p99 {cell[b]['p99_ms']:.2f} ms"
        f" | x{cell['ratio_p50']:.2f} p50"
    )


def median(values: Sequence[float]) -> float:
    return percentile(sorted(values), 0.5)


def rss_bytes() -> int:
    """Resident set size of this process, after a full collection (Linux ``/proc``)."""
    gc.collect()
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE")


def rss_trimmed_bytes() -> int | None:
    """:func:`rss_bytes` after glibc's ``malloc_trim(0)`` hands the free memory at the
    heap's ends and in its free pages back to the system, or None where there is no
    glibc. Freed memory that the C allocator keeps counts in RSS but is nobody's: a
    benchmark reports both. O(heap size)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    gc.collect()
    trim(0)
    return rss_bytes()


def load_average() -> list[float]:
    """1, 5 and 15-minute load averages (runnable processes): above the core count, the
    machine is shared and wall-clock figures include waits for a core."""
    return [round(x, 2) for x in os.getloadavg()]


def _total_memory() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0  # pragma: no cover


def source_version() -> str:
    """``git describe``-like id of the code measured: the commit, ``+dirty`` if
    ``actormem/`` has uncommitted changes (the editable install runs the work tree)."""
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "actormem"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def machine() -> dict[str, Any]:
    """Facts about the machine and the software, for the JSON and the doc."""
    import trio

    try:
        from importlib.metadata import version

        langgraph = version("langgraph")
    except Exception:  # not installed: the peer is skipped
        langgraph = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:  # pragma: no cover
        pass
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "memory_gib": round(_total_memory() / 2**30, 1),
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "trio": trio.__version__,
        "sqlite": sqlite3.sqlite_version,
        "langgraph": langgraph,
        "load_average_start": load_average(),
        "actormem_source": source_version(),
    }


class Target:
    """One target of the issue: a figure, the bound it must respect, and whether it does.

    ``op`` is how the figure must compare with ``limit``: ``"<"``, ``"<="`` or ``">="``.
    A figure of None (the scenario or size was not run) is neither met nor missed.
    """

    def __init__(self, name: str, figure: float | None, op: str, limit: float, unit: str) -> None:
        if op not in ("<", "<=", ">="):
            raise ValueError(op)
        self.name = name
        self.figure = figure
        self.op = op
        self.limit = limit
        self.unit = unit

    @property
    def met(self) -> bool | None:
        f = self.figure
        if f is None or math.isnan(f):
            return None
        if self.op == "<":
            return f < self.limit
        if self.op == "<=":
            return f <= self.limit
        return f >= self.limit

    def as_json(self) -> dict[str, Any]:
        return {
            "target": self.name,
            "figure": self.figure,
            "bound": f"{self.op} {self.limit:g}",
            "unit": self.unit,
            "met": self.met,
        }


class GcPauses:
    """Longest and total pause of Python's cyclic garbage collector while entered.

    A full (generation 2) collection walks every container object, so its pause grows
    with the memory's size and stops the event loop like any synchronous call.
    """

    def __init__(self) -> None:
        self._t0 = 0
        self.longest_ns = 0
        self.total_ns = 0
        self.collections = [0, 0, 0]

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter_ns()
            return
        dt = time.perf_counter_ns() - self._t0
        self.total_ns += dt
        self.longest_ns = max(self.longest_ns, dt)
        self.collections[info["generation"]] += 1

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def as_json(self, prefix: str = "gc_") -> dict[str, Any]:
        return {
            f"{prefix}longest_ms": self.longest_ns / 1e6,
            f"{prefix}total_ms": self.total_ns / 1e6,
            f"{prefix}collections": list(self.collections),
        }
