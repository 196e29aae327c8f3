"""Sliced retrieves: ``Memory.retrieve`` lets other tasks run while it scores.

A brute-force scorer whose ``top_k_steps`` yields after every record drives the
protocol of ``actormem._index.scoring``: with ``RETRIEVE_SLICE = 0`` every yield is a trio
checkpoint, so writers (stores, deletes, upserts, the owner's vacuum) run in the middle
of a retrieve, and the result must still be that of the version the retrieve started at.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Generator, Iterable

import attrs
import pytest
import trio
import trio.testing

import actormem._engine.snapshot
from actormem import Memory, MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.snapshot import run_retrieve_sliced
from actormem._index.scoring import Accept, ReadView, drain
from actormem._index.wordoverlap import word_overlap_score
from actormem._record import Record

Hits = list[tuple[float, Record]]


class _BruteIndex:
    """Scores every visible record, in relevance order, yielding after each one."""

    def __init__(self) -> None:
        self.steps_taken = 0

    def add(self, rec: Record) -> None:
        pass

    def retire(self, rec: Record) -> None:
        pass

    def purge(self, rec: Record) -> None:
        pass

    def top_k(self, view: ReadView, query: str, limit: int, accept: Accept) -> Hits:
        return drain(self.top_k_steps(view, query, limit, accept))

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, Hits]:
        heap: list[tuple[float, int, Record]] = []
        for rec in view.by_relevance():
            self.steps_taken += 1
            yield
            assert view.visible(rec)
            if accept is not None and not accept(rec):
                continue
            e = rec.entry
            item = (word_overlap_score(e.memory, e.tags, e.relevance, query), -rec.seq, rec)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)
        heap.sort(key=lambda t: (-t[0], -t[1]))
        return [(score, rec) for score, _, rec in heap]

    def _check(self, live: Iterable[Record]) -> None:
        pass


@attrs.frozen
class _BruteScorer:
    index: _BruteIndex = attrs.field(factory=_BruteIndex)

    @property
    def name(self) -> str:
        return "brute"

    def make_index(self) -> _BruteIndex:
        return self.index

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        return word_overlap_score(entry_text, tags, relevance, query)


def _fact(text: str, relevance: float) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_relevance(relevance)


def _expected(entries: list[MemoryEntry], query: str, limit: int) -> list[tuple[float, str]]:
    """Brute force over a snapshot's entries (insertion order breaks ties)."""
    scored = [(word_overlap_score(e.memory, e.tags, e.relevance, query), e.memory) for e in entries]
    scored.sort(key=lambda t: -t[0])  # stable: insertion order among equals
    return scored[:limit]


@pytest.fixture
def every_yield_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)


async def stored_at_random(memory: Memory, rng: random.Random) -> list[MemoryEntry]:
    """120 entries of three random words each stored in ``memory``: the list."""
    words = ["alpha", "beta", "gamma", "delta", "deploy", "error", "cache"]
    stored = []
    for i in range(120):
        e = _fact(" ".join(rng.choices(words, k=3)) + f" #{i}", rng.choice([0.2, 0.5, 0.9]))
        await memory.store(e)
        stored.append(e)
    return stored


async def write_at_random(
    memory: Memory, rng: random.Random, stored: list[MemoryEntry], query: str, j: int
) -> None:
    """One random write, the ``j``-th: a new entry matching ``query`` best, the delete of
    an entry of ``stored`` (taken out of it), or its rewrite to match ``query``."""
    op = rng.random()
    if op < 0.4:
        # Would outrank everything if it were visible.
        await memory.store(_fact(f"{query} {query} new {j}", 1.0))
    elif op < 0.7 and stored:
        await memory.delete(stored.pop(rng.randrange(len(stored))).id)
    else:
        old = stored.pop(rng.randrange(len(stored))) if stored else None
        if old is not None:
            new = attrs.evolve(old, memory=f"{query} rewritten {j}", relevance=1.0)
            await memory.store(new)


@pytest.mark.parametrize("seed", range(4))
async def test_writes_during_a_sliced_retrieve_do_not_change_it(
    seed: int, every_yield_checkpoints: None
) -> None:
    rng = random.Random(seed)
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        stored = await stored_at_random(memory, rng)
        query = "deploy error alpha"
        snap = memory.snapshot()
        expected = _expected(list(snap), query, 10)
        view = snap._view
        del snap  # the retrieve's own registration must now protect the view
        state = memory._state
        writes = 0

        async def writer() -> None:
            nonlocal writes
            for j in range(300):
                await write_at_random(memory, rng, stored, query, j)
                writes += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)  # first runs at the retrieve's first checkpoint
            hits = await run_retrieve_sliced(state, view, query, 10, None, memory._snapshots)
            # Read before the next checkpoint, as Memory.retrieve builds its entries: with
            # the retrieve's registration gone, the writer's next purge may release a
            # hit's slot in the state's entry store (step A: a record holds no entry).
            got = [(s, r.entry.memory) for s, r in hits]
            writes_during = writes
            nursery.cancel_scope.cancel()
        assert got == expected
        assert writes_during > 0, "no write ran during the retrieve: nothing was tested"
        assert memory.statistics().live_snapshots == 0


async def test_memory_retrieve_lets_writers_run(every_yield_checkpoints: None) -> None:
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        for i in range(200):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        stores = 0

        async def writer() -> None:
            nonlocal stores
            while True:
                await memory.store(_fact("more deploys", 0.5))
                stores += 1

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            before = stores
            hits = await memory.retrieve("deploys", 5)
            during = stores - before
            nursery.cancel_scope.cancel()
        assert len(hits) == 5
        assert during > 0
        assert scorer.index.steps_taken >= 200


async def test_cancelled_sliced_retrieve_releases_its_view(every_yield_checkpoints: None) -> None:
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        for i in range(50):
            await memory.store(_fact(f"entry {i}", 0.5))
        with trio.CancelScope() as scope:

            async def cancel_soon() -> None:
                await trio.lowlevel.checkpoint()
                await trio.lowlevel.checkpoint()
                scope.cancel()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(cancel_soon)
                await memory.retrieve("entry", 5)
                pytest.fail("the retrieve should have been cancelled")  # pragma: no cover
        assert scope.cancelled_caught
        assert 0 < scorer.index.steps_taken < 50
        assert memory.statistics().live_snapshots == 0
        # The memory still works.
        assert len(await memory.retrieve("entry", 5)) == 5


async def test_index_without_steps_runs_in_one_step() -> None:
    async with open_memory(scorer=WordOverlapScorer()) as memory:
        await memory.store(_fact("one entry", 0.5))
        assert [e.memory for e in await memory.retrieve("entry", 3)] == ["one entry"]


class _StepCounter(trio.abc.Instrument):
    """Counts the task steps of one task."""

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task
        self.steps = 0

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if task is self.task:
            self.steps += 1


@pytest.mark.parametrize("slice_s", [1e9, 0.0])
async def test_a_retrieve_has_one_schedule_point_per_slice_and_none_extra(
    slice_s: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retrieve shorter than a slice is one schedule point (at its end); a sliced one is
    one per slice boundary, with none added at the start (each costs a scheduling round
    with many tasks)."""
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", slice_s)
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        for i in range(30):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        counter = _StepCounter(trio.lowlevel.current_task())
        trio.lowlevel.add_instrument(counter)
        try:
            with trio.testing.assert_checkpoints():
                hits = await memory.retrieve("deploys", 5)
        finally:
            trio.lowlevel.remove_instrument(counter)
        assert len(hits) == 5
        # The index yields once per record: 30 boundaries when each is a checkpoint.
        assert counter.steps == (1 if slice_s else 30)


async def test_a_retrieve_cancelled_before_it_starts_scores_nothing() -> None:
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        await memory.store(_fact("entry about deploys", 0.5))
        with trio.CancelScope() as scope:
            scope.cancel()
            await memory.retrieve("deploys", 5)
        assert scope.cancelled_caught
        assert scorer.index.steps_taken == 0
        assert memory.statistics().live_snapshots == 0


async def test_a_retrieve_parks_before_scoring_while_writes_hold_the_gate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    scorer = _BruteScorer()
    async with open_memory(scorer=scorer) as memory:
        for i in range(5):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        gate = memory._gate
        gate.enter()  # a write in flight: the gate closes at the next reader's boundary
        hits: list[MemoryEntry] = []

        async def reader() -> None:
            hits.extend(await memory.retrieve("deploys", 3))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reader)
            await trio.testing.wait_all_tasks_blocked()
            assert gate.closed
            assert scorer.index.steps_taken == 0  # parked before any scoring
            gate.leave()
        assert len(hits) == 3
        assert scorer.index.steps_taken == 5
