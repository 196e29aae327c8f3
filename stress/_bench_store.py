"""Scenario 2: store throughput and latency against the number of concurrent writers.

One run: a fresh, empty memory; ``writers`` tasks share ``total`` corpus entries and
each ``await memory.store(entry)`` its share in turn, every call timed. Throughput is
``total`` over the wall time from the first store to the last acknowledgement; the
figure is the median over the repeats, the latencies pool every repeat.

Modes: ``memory`` (no file) and, once the engine has them, ``durable`` modes
(``open_memory(path=..., durability=...)``, a fresh file in a temporary directory per run).

Beside them, in the same run and with the same writers:

* the *floor*: a bare trio memory channel request and reply between the writer tasks
  and one server task, which answers each request by setting a ``trio.Event`` in the
  box that came with it (what every actormem store pays before any work);
* the hand-written peer: ``trio.Lock`` + dict (see :mod:`stress.peers`);
* ``actormem memory, store_nowait``: the same entries queued without waiting for the
  acknowledgement (``store_nowait``; on :class:`trio.WouldBlock`, one awaited ``store``
  waits out the backpressure), then one awaited ``store`` per writer, which the owner
  applies after everything that writer queued. Its rate is what the owner itself can
  apply; latencies are those of the calls (mostly the non-blocking ones).
"""

from __future__ import annotations

import inspect
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryEntry, open_memory

from ._bench_stats import median, summarize_ms
from .peers import LockedDictStore

__all__ = ["durable_modes", "store_runs"]

StoreFn = Callable[[MemoryEntry], Awaitable[object]]


def durable_modes() -> list[str]:
    """The durability values ``open_memory`` accepts, [] before durability landed."""
    params = inspect.signature(open_memory).parameters
    if "path" not in params or "durability" not in params:
        return []
    try:
        from actormem._storage.sqlite import Durability
    except ImportError:  # pragma: no cover - only during the landing
        return ["normal"]
    return [d.value for d in Durability]


async def _drive(
    store: StoreFn, batch: Sequence[MemoryEntry], writers: int
) -> tuple[float, list[int]]:
    """Run ``writers`` tasks storing ``batch`` round-robin; (wall seconds, latencies ns)."""
    latencies: list[int] = []
    perf = time.perf_counter_ns

    async def writer(share: Sequence[MemoryEntry]) -> None:
        mine = []
        for entry in share:
            t0 = perf()
            await store(entry)
            mine.append(perf() - t0)
        latencies.extend(mine)

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for w in range(writers):
            nursery.start_soon(writer, batch[w::writers], name="writer")
    return time.perf_counter() - start, latencies


class _Box:
    __slots__ = ("event", "value")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: object = None


async def _nowait_run(batch: Sequence[MemoryEntry], writers: int) -> tuple[float, list[int]]:
    async with open_memory() as memory:
        shares = [list(batch[w::writers]) for w in range(writers)]
        latencies: list[int] = []
        perf = time.perf_counter_ns

        async def writer(share: list[MemoryEntry]) -> None:
            mine = []
            for entry in share[:-1]:
                t0 = perf()
                try:
                    memory.store_nowait(entry)
                except trio.WouldBlock:
                    await memory.store(entry)
                mine.append(perf() - t0)
                if len(mine) % 64 == 0:
                    await trio.lowlevel.checkpoint()
            if share:
                t0 = perf()
                await memory.store(share[-1])  # applied after all this task queued
                mine.append(perf() - t0)
            latencies.extend(mine)

        start = time.perf_counter()
        async with trio.open_nursery() as nursery:
            for share in shares:
                nursery.start_soon(writer, share, name="writer")
        wall = time.perf_counter() - start
        assert len(memory) == len(batch)
    return wall, latencies


async def _floor_run(batch: Sequence[MemoryEntry], writers: int) -> tuple[float, list[int]]:
    send, receive = trio.open_memory_channel[tuple[MemoryEntry, _Box]](1024)

    async def server() -> None:
        async with receive:
            async for entry, box in receive:
                box.value = entry
                box.event.set()

    async def request(entry: MemoryEntry) -> object:
        box = _Box()
        await send.send((entry, box))
        await box.event.wait()
        return box.value

    async with trio.open_nursery() as nursery:
        nursery.start_soon(server)
        result = await _drive(request, batch, writers)
        await send.aclose()
    return result


def _memory_opener(mode: str, tmp: Path, run: int) -> AbstractAsyncContextManager[Any]:
    if mode == "memory":
        return open_memory()
    return open_memory(path=tmp / f"bench-{run}.db", durability=mode)


async def store_runs(
    batch: Sequence[MemoryEntry],
    writer_counts: Sequence[int],
    modes: Sequence[str],
    repeats: int,
    *,
    floor: bool = True,
    peer: bool = True,
) -> list[dict[str, Any]]:
    """Scenario 2's rows: one per (system, writers)."""
    rows: list[dict[str, Any]] = []
    systems: list[str] = [f"actormem {m}" for m in modes]
    if "memory" in modes:
        systems.insert(1, "actormem memory, store_nowait")
    if peer:
        systems.append("trio.Lock + dict")
    if floor:
        systems.append("floor: channel round trip")
    with tempfile.TemporaryDirectory(prefix="actormem-bench-") as tmpdir:
        tmp = Path(tmpdir)
        run_no = 0
        for writers in writer_counts:
            for system in systems:
                rates: list[float] = []
                latencies: list[int] = []
                for _ in range(repeats):
                    run_no += 1
                    if system == "actormem memory, store_nowait":
                        wall, lat = await _nowait_run(batch, writers)
                    elif system.startswith("actormem "):
                        mode = system.removeprefix("actormem ")
                        async with _memory_opener(mode, tmp, run_no) as memory:
                            wall, lat = await _drive(memory.store, batch, writers)
                            assert len(memory) == len(batch)
                    elif system == "trio.Lock + dict":
                        store = LockedDictStore()
                        wall, lat = await _drive(store.store, batch, writers)
                    else:
                        wall, lat = await _floor_run(batch, writers)
                    rates.append(len(batch) / wall)
                    latencies.extend(lat)
                stats = summarize_ms(latencies)
                rows.append(
                    {
                        "system": system,
                        "writers": writers,
                        "entries": len(batch),
                        "repeats": repeats,
                        "entries_per_s": median(rates),
                        "entries_per_s_runs": rates,
                        "p50_ms": stats["p50_ms"],
                        "p99_ms": stats["p99_ms"],
                        "max_ms": stats["max_ms"],
                    }
                )
    return rows
