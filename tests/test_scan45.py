"""``Memory.scan``: a snapshot's entries read a slice at a time, for long reads.

docs/server.md's known limit (review, 2026-12-07): 16 exports at once of a 100,000-entry
memory kept the server's stores from being answered for over 8 s on 2 cores. An export
iterated its snapshot, which builds every entry in one step (a list), then encoded them
with a plain checkpoint between chunks of 256. ``Memory.scan`` builds the entries as they
are asked for, slices the work at ``RETRIEVE_SLICE`` (the caller's work included) and
meets the fair-share gate between slices as retrieves do; ``GET /v1/export`` reads
through it. The figures: ``python -m stress.bench_export_stores`` (docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

import actormem._engine.snapshot as snapshot_mod
from actormem import MemoryCategory, MemoryEntry, open_memory


def _entry(i: int, **kw: object) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=f"fact number {i} about the garden and the weather",
        id=uuid.UUID(int=i + 1),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("durable", [False, True])
async def test_scan_gives_the_snapshot_while_writes_land_between_entries(
    durable: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between every entry the scan hands out, the memory is changed (stores, replaced
    keys, deletes, retrieves that count accesses, evictions at capacity): the scan still
    gives exactly what iterating the snapshot gave when it was taken, access counts
    included, and reaches a checkpoint every few entries (``RETRIEVE_SLICE`` 0)."""
    monkeypatch.setattr(snapshot_mod, "RETRIEVE_SLICE", 0.0)
    path = None if not durable else tmp_path / "m.db"
    async with open_memory(path=path, capacity=400) as memory:
        await memory.store_many(
            [_entry(i, key=f"k{i % 50}" if i % 3 == 0 else None) for i in range(300)]
        )
        await memory.retrieve("garden weather", 5)  # access counts on some
        await memory.wait_applied(memory.snapshot().version)
        snap = memory.snapshot()
        expected = list(snap)
        # Writes between the snapshot and the scan's start, applied before it.
        await memory.store(_entry(900))
        await memory.delete(expected[5].id)
        await memory.store(_entry(901, key="k3"))
        await memory.retrieve("garden weather fact", 20)
        await memory.wait_applied(memory.snapshot().version)
        got: list[MemoryEntry] = []
        i = 1000
        async with contextlib.aclosing(memory.scan(snap)) as entries:
            async for entry in entries:
                got.append(entry)
                # Writes of every kind while the scan is half way.
                await memory.store(_entry(i, key=f"k{i % 50}"))  # replaces a key's entry
                await memory.store(_entry(i + 1))  # past capacity: evictions
                await memory.delete(got[0].id)
                await memory.retrieve("garden", 3)
                i += 2
        assert got == expected
        assert [e.access_count for e in got] == [e.access_count for e in expected]
        assert len(memory) <= 400


async def test_scan_reaches_a_checkpoint_every_few_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``RETRIEVE_SLICE`` 0, a scan of 200 entries lets another task run many
    times before it ends (before: an export's one step built all of them)."""
    monkeypatch.setattr(snapshot_mod, "RETRIEVE_SLICE", 0.0)
    async with open_memory() as memory:
        await memory.store_many([_entry(i) for i in range(200)])
        ticks = 0
        done = False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            await trio.lowlevel.checkpoint()
            ticks = 0
            n = 0
            async for _ in memory.scan():
                n += 1
            done = True
        assert n == 200
        assert ticks >= 200 // snapshot_mod._SCAN_CLOCK


async def test_writers_get_through_while_scans_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight scans of 2,000 entries and a writer: every store is acknowledged while the
    scans still run, and the scans go through the fair-share gate (it parked them)."""
    monkeypatch.setattr(snapshot_mod, "RETRIEVE_SLICE", 0.0)
    async with open_memory() as memory:
        await memory.store_many([_entry(i) for i in range(2000)])
        scans_done = 0
        stores_before_end: list[int] = []

        async def scan() -> None:
            nonlocal scans_done
            async for _ in memory.scan():
                pass
            scans_done += 1

        async def writer() -> None:
            for j in range(20):
                await memory.store(_entry(10_000 + j))
                if scans_done == 0:
                    stores_before_end.append(j)

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(scan)
            nursery.start_soon(writer)
        assert scans_done == 8
        assert len(stores_before_end) == 20
        assert memory._gate.parks > 0
        memory._gate._check()


async def test_scan_skips_entries_expired_at_the_snapshots_time() -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    async with open_memory(clock=lambda: now[0]) as memory:
        await memory.store_many(
            [_entry(i, ttl=10 if i % 2 else None) for i in range(20)]
        )
        now[0] += timedelta(seconds=11)
        snap = memory.snapshot()
        now[0] += timedelta(days=1)
        got = [e async for e in memory.scan(snap)]
        assert got == list(snap)
        assert [e.id.int - 1 for e in got] == list(range(0, 20, 2))


async def test_scan_refuses_what_is_not_this_memorys_snapshot() -> None:
    async with open_memory() as memory, open_memory() as other:
        await memory.store(_entry(1))
        with pytest.raises(TypeError, match="Snapshot"):
            memory.scan(list(memory.snapshot()))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="another"):
            memory.scan(other.snapshot())
        snap = memory.snapshot()
    # Closed: a snapshot taken before stays readable; none can be taken now.
    assert [e.id async for e in memory.scan(snap)] == [uuid.UUID(int=2)]
    with pytest.raises(trio.ClosedResourceError):
        memory.scan()


async def test_a_scan_closed_early_releases_its_snapshot() -> None:
    async with open_memory() as memory:
        await memory.store_many([_entry(i) for i in range(50)])
        before = len(memory._snapshots)
        entries = memory.scan()
        assert len(memory._snapshots) == before + 1
        async with contextlib.aclosing(entries):
            async for _ in entries:
                break
        del entries
        import gc

        gc.collect()
        assert len(memory._snapshots) == before
