"""Retrieves and listings under way holding their view's version in the memory's
:class:`~actormem._engine.snapshot.VersionHolds` (``memory._HOLDS_BY_VERSION``) instead
of a :class:`Snapshot` registered in its ``WeakSet`` (the path before it): the vacuum
keeps what they read, ``live_snapshots`` counts them, a cancel or an error releases
them; the same retrieves, horizons and counters either way."""

from __future__ import annotations

import random

import attrs
import pytest
import trio
import trio.testing

import actormem._engine.memory
import actormem._engine.snapshot
from actormem import WordOverlapScorer, open_memory
from actormem._engine.snapshot import VersionHolds, run_retrieve_sliced

from .test_sliced import _BruteScorer, _expected, _fact, stored_at_random, write_at_random


@pytest.fixture(params=[True, False], ids=["holds", "weakset"])
def holds_on(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(actormem._engine.memory, "_HOLDS_BY_VERSION", request.param)
    return bool(request.param)


@pytest.fixture
def every_yield_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)


def test_version_holds_count_and_oldest() -> None:
    holds = VersionHolds()
    assert holds.oldest(7) == 7
    for v in (5, 3, 5, 9):
        holds.hold(v)
    assert holds.count == 4
    assert holds.oldest(7) == 3
    assert holds.oldest(2) == 2
    holds.release(3)
    assert holds.oldest(7) == 5
    holds.release(5)
    assert holds.oldest(7) == 5  # one reader of 5 left
    holds.release(5)
    assert holds.oldest(7) == 7
    holds.release(9)
    assert holds.count == 0
    assert holds._by_version == {}
    with pytest.raises(KeyError):
        holds.release(9)


@pytest.mark.parametrize("seed", range(3))
async def test_writes_during_a_held_retrieve_do_not_change_it(
    seed: int, holds_on: bool, every_yield_checkpoints: None
) -> None:
    # test_sliced's test, through the memory's own registry: the owner deletes,
    # rewrites and vacuums while the retrieve scores its view, held by version only.
    rng = random.Random(seed)
    async with open_memory(scorer=_BruteScorer()) as memory:
        assert (memory._holds is not None) == holds_on
        stored = await stored_at_random(memory, rng)
        query = "deploy error alpha"
        snap = memory.snapshot()
        expected = _expected(list(snap), query, 10)
        view = snap._view
        del snap  # the retrieve's own hold must now protect the view
        writes = 0
        seen: list[int] = []

        async def writer() -> None:
            nonlocal writes
            for j in range(300):
                seen.append(memory.statistics().live_snapshots)
                await write_at_random(memory, rng, stored, query, j)
                writes += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            hits = await run_retrieve_sliced(
                memory._state, view, query, 10, None, memory._registry()
            )
            # read before the next checkpoint, as Memory.retrieve builds its entries: the
            # hold is released, and a purge releases a record's slot in the entry store
            got = [(s, r.entry.memory) for s, r in hits]
            writes_during = writes
            nursery.cancel_scope.cancel()
        assert got == expected
        assert writes_during > 0
        assert seen[0] == 1  # the retrieve under way counted
        assert memory.statistics().live_snapshots == 0
        assert memory._horizon() == memory._state.published


async def test_horizon_and_live_snapshots_with_retrieves_under_way(
    holds_on: bool, every_yield_checkpoints: None
) -> None:
    # Retrieves parked mid-scoring at several versions, a user's snapshot beside them:
    # the horizon is the oldest version read, live_snapshots counts them all.
    async with open_memory(scorer=_BruteScorer()) as memory:
        for i in range(40):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        gate = trio.Event()
        versions = []

        async def reader(started: trio.Event) -> None:
            versions.append(memory._state.published)
            started.set()
            await memory.retrieve("deploys", 3)

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                started = trio.Event()
                nursery.start_soon(reader, started)
                await started.wait()
                snap = memory.snapshot() if len(versions) == 2 else None
                await memory.store(_fact("a new version", 0.5))
                if snap is not None:
                    del snap
            stats = memory.statistics()
            horizon = memory._horizon()
            gate.set()
        assert horizon <= versions[0] < memory._state.published
        assert stats.live_snapshots >= 1
        assert memory.statistics().live_snapshots == 0
        assert memory._horizon() == memory._state.published


async def test_cancelled_or_failing_retrieve_releases_its_hold(
    holds_on: bool, every_yield_checkpoints: None
) -> None:
    async with open_memory(scorer=_BruteScorer()) as memory:
        for i in range(50):
            await memory.store(_fact(f"entry {i}", 0.5))
        for after in range(6):
            with trio.CancelScope() as scope:

                async def cancel_soon(n: int) -> None:
                    for _ in range(n):
                        await trio.lowlevel.checkpoint()
                    scope.cancel()

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cancel_soon, after)
                    await memory.retrieve("entry", 5)
            assert memory.statistics().live_snapshots == 0
            assert memory._holds is None or memory._holds._by_version == {}
        # an index that raises: the hold is released too
        state = memory._state

        class Boom(Exception):
            pass

        def boom(*args: object, **kwargs: object) -> None:
            raise Boom

        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(state.index, "top_k_steps", boom)
            with pytest.raises(Boom):
                await memory.retrieve("entry", 5)
        assert memory.statistics().live_snapshots == 0
        assert len(await memory.retrieve("entry", 5)) == 5


async def test_listing_holds_its_version(holds_on: bool, every_yield_checkpoints: None) -> None:
    async with open_memory(scorer=WordOverlapScorer()) as memory:
        for i in range(30):
            await memory.store(_fact(f"entry {i}", 0.5))
        seen: list[int] = []

        async def watch() -> None:
            for _ in range(50):
                seen.append(memory.statistics().live_snapshots)
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            listed = await memory.list_entries(limit=100)
        assert len(listed) == 30
        assert max(seen) <= 1  # (a listing this short may end before the watch runs)
        assert memory.statistics().live_snapshots == 0
        assert memory._horizon() == memory._state.published


def test_same_results_and_counters_either_way() -> None:
    # One seeded workload of stores, deletes, retrieves and listings, readers and
    # writers interleaved on a mock clock, with and without the knob: the same hits,
    # the same access counts, the same statistics.
    def run(on: bool) -> object:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(actormem._engine.memory, "_HOLDS_BY_VERSION", on)
            mp.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)
            return trio.run(_workload, clock=trio.testing.MockClock(autojump_threshold=0))

    assert run(True) == run(False)


async def _workload() -> object:
    trio._core._run._r.seed(7)  # type: ignore[attr-defined]
    rng = random.Random(3)
    out: list[object] = []
    async with open_memory(scorer=WordOverlapScorer()) as memory:
        ids = []
        for i in range(60):
            e = _fact(f"entry {i} about {rng.choice(['deploys', 'cats', 'caches'])}", 0.5)
            e = attrs.evolve(e, id=__import__("uuid").UUID(int=i + 1))
            await memory.store(e)
            ids.append(e.id)

        async def reader(r: int) -> None:
            for q in range(6):
                hits = await memory.retrieve(rng.choice(["deploys", "cats", "about"]), 3)
                out.append((r, q, [h.memory for h in hits]))

        async def writer() -> None:
            for j in range(20):
                if j % 3 == 0 and ids:
                    await memory.delete(ids.pop(0))
                else:
                    await memory.store(_fact(f"written {j} about cats", 0.9))

        async with trio.open_nursery() as nursery:
            for r in range(5):
                nursery.start_soon(reader, r)
            nursery.start_soon(writer)
        await memory.store(_fact("flushes the access buffer", 0.1))
        stats = memory.statistics()
        counts = sorted((e.memory, e.access_count) for e in memory.snapshot())
    return sorted(out), counts, attrs.asdict(stats) if attrs.has(type(stats)) else stats
