"""Scoring slots: at most ``SCORING_SLOTS`` retrieves of a memory score at once; the
others wait for a slot, first come first served, and get the same results.

The brute-force scorer of ``test_sliced`` yields after every record and, with
``RETRIEVE_SLICE = 0``, every yield is a checkpoint, so many retrieves interleave; the
index counts how many are between their first and last step at any time.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Generator

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.memory
import actormem._engine.snapshot
from actormem import DenseScorer, open_memory
from actormem._index.scoring import Accept, ReadView
from actormem._record import Record

from .strategies import examples
from .test_dense import FAKE
from .test_sliced import _BruteIndex, _BruteScorer, _fact

Hits = list[tuple[float, Record]]


class _CountingIndex(_BruteIndex):
    """The brute-force index, noting how many retrieves score at once and in which
    order they began (by query)."""

    def __init__(self) -> None:
        super().__init__()
        self.scoring = 0
        self.most = 0
        self.began: list[str] = []

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, Hits]:
        self.scoring += 1
        self.most = max(self.most, self.scoring)
        self.began.append(query)
        try:
            return (yield from super().top_k_steps(view, query, limit, accept))
        finally:
            self.scoring -= 1


@pytest.fixture
def every_yield_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)


async def _concurrent_retrieves(slots: int | None, monkeypatch: pytest.MonkeyPatch) -> tuple[
    _CountingIndex, list[list[str]], list[list[str]]
]:
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", slots)
    index = _CountingIndex()
    async with open_memory(scorer=_BruteScorer(index)) as memory:
        for i in range(80):
            await memory.store(_fact(f"entry {i} about deploys {i % 7}", 0.1 + (i % 5) / 10))
        alone = [[e.memory for e in await memory.retrieve(f"deploys {q}", 3)] for q in range(10)]
        index.began.clear()
        index.most = 0
        together: list[list[str]] = [[] for _ in range(10)]

        async def one(q: int) -> None:
            together[q] = [e.memory for e in await memory.retrieve(f"deploys {q}", 3)]

        async with trio.open_nursery() as nursery:
            for q in range(10):
                nursery.start_soon(one, q)
                while _asked(index, memory._slots) <= q:  # each asks in this order
                    await trio.lowlevel.checkpoint()
        assert memory._slots is None or memory._slots.borrowed_tokens == 0
    return index, alone, together


def _asked(index: _CountingIndex, slots: trio.CapacityLimiter | None) -> int:
    """Retrieves that began scoring or wait for a slot."""
    return len(index.began) + (0 if slots is None else slots.statistics().tasks_waiting)


async def test_at_most_the_slots_score_at_once_first_come_first_served(
    every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, alone, together = await _concurrent_retrieves(2, monkeypatch)
    assert together == alone
    assert index.most == 2
    assert index.began == [f"deploys {q}" for q in range(10)]


async def test_without_slots_every_retrieve_scores_at_once(
    every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    index, alone, together = await _concurrent_retrieves(None, monkeypatch)
    assert together == alone
    assert index.most == 10


async def test_a_retrieve_cancelled_while_waiting_for_a_slot_takes_none(
    every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", 1)
    index = _CountingIndex()
    async with open_memory(scorer=_BruteScorer(index)) as memory:
        for i in range(30):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        slots = memory._slots
        assert slots is not None
        holder = object()
        slots.acquire_on_behalf_of_nowait(holder)  # as a retrieve scoring
        async with trio.open_nursery() as nursery:
            with trio.CancelScope() as waiting:
                nursery.start_soon(_cancel_when_waiting, waiting, slots)
                await memory.retrieve("entry", 3)
        assert waiting.cancelled_caught
        slots.release_on_behalf_of(holder)
        assert index.began == []  # the cancelled one never scored
        assert slots.borrowed_tokens == 0
        assert memory.statistics().live_snapshots == 0
        assert len(await memory.retrieve("entry", 3)) == 3


async def _cancel_when_waiting(scope: trio.CancelScope, slots: trio.CapacityLimiter) -> None:
    while slots.statistics().tasks_waiting == 0:
        await trio.lowlevel.checkpoint()
    scope.cancel()


async def test_retrieves_that_embed_the_query_take_no_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A dense index embeds the query, perhaps in a worker thread: slots would cap the
    # embeddings under way too.
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", 1)
    async with open_memory(scorer=DenseScorer(embedder=FAKE)) as memory:
        await memory.store(_fact("entry about deploys", 0.5))
        slots = memory._slots
        assert slots is not None
        async with slots:  # every slot taken: a retrieve that needed one would hang
            with trio.fail_after(5):
                found = await memory.retrieve("deploys", 1)
        assert [e.memory for e in found] == ["entry about deploys"]


async def test_a_retrieve_after_close_raises_without_waiting_for_a_slot(
    every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every slot held by a retrieve still scoring (it took its view before the close):
    # a retrieve called after the close raises at once, as before there were slots, not
    # once the slot holders have scored.
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", 1)
    index = _CountingIndex()
    async with open_memory(scorer=_BruteScorer(index)) as memory:
        for i in range(100):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        order: list[str] = []

        async def scoring() -> None:
            assert len(await memory.retrieve("deploys", 3)) == 3
            order.append("scored")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scoring)
            while not index.scoring:
                await trio.lowlevel.checkpoint()
            await memory.aclose()
            with pytest.raises(trio.ClosedResourceError):
                await memory.retrieve("deploys", 3)
            order.append("refused")
        assert order == ["refused", "scored"]
        assert memory._slots is not None
        assert memory._slots.borrowed_tokens == 0


@settings(max_examples=examples(40), deadline=None)
@given(
    slots=st.sampled_from([1, 2, 3]),
    cancel_after=st.lists(st.integers(0, 40), min_size=1, max_size=8),
    close_after=st.none() | st.integers(0, 40),
)
def test_cancelled_or_closed_anywhere_leaks_no_slot_and_loses_no_hit(
    slots: int, cancel_after: list[int], close_after: int | None
) -> None:
    # Readers cancelled after a given number of checkpoints (waiting for a slot, holding
    # it, in the gate, scoring), writers beside them, the memory perhaps closed midway:
    # no slot, snapshot or parked reader is left behind, every acknowledged write is
    # visible, and each entry's access count is the number of retrieves that returned it.
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(actormem._engine.memory, "SCORING_SLOTS", slots)
        mp.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)
        trio.run(_cancel_anywhere, cancel_after, close_after)


async def _cancel_anywhere(cancel_after: list[int], close_after: int | None) -> None:
    returned: Counter[uuid.UUID] = Counter()
    acked: list[uuid.UUID] = []
    async with open_memory(scorer=_BruteScorer(_CountingIndex())) as memory:
        for i in range(12):
            e = _fact(f"entry {i} about deploys", 0.5)
            await memory.store(e)
            acked.append(e.id)

        async def reader(after: int) -> None:
            async with trio.open_nursery() as nursery:

                async def cancel() -> None:
                    for _ in range(after):
                        await trio.lowlevel.checkpoint()
                    nursery.cancel_scope.cancel()

                nursery.start_soon(cancel)
                try:
                    hits = await memory.retrieve("deploys", 3)
                except trio.ClosedResourceError:
                    hits = []
                returned.update(h.id for h in hits)
                nursery.cancel_scope.cancel()

        async def writer() -> None:
            for j in range(5):
                e = _fact(f"written {j} about deploys", 0.9)
                try:
                    await memory.store(e)
                    acked.append(e.id)
                    assert await memory.get(e.id) is not None  # read your writes
                except trio.ClosedResourceError:
                    return

        async with trio.open_nursery() as nursery:
            for after in cancel_after:
                nursery.start_soon(reader, after)
            nursery.start_soon(writer)
            if close_after is not None:
                for _ in range(close_after):
                    await trio.lowlevel.checkpoint()
                await memory.aclose()
        assert memory._slots is not None
        assert memory._slots.borrowed_tokens == 0
        assert memory._slots.statistics().tasks_waiting == 0
        assert memory.statistics().live_snapshots == 0
        memory._gate._check()
        if close_after is None:
            await memory.store(_fact("flushes the access buffer", 0.1))
            for id in acked:
                got = await memory.get(id)
                assert got is not None
                assert got.access_count == returned[id]


async def test_retrieves_waiting_for_a_slot_raise_when_the_memory_closes(
    every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # They raise when it closes, taking no slot, not once the retrieve holding the slot
    # has scored (the owner's end wakes them the same way when it dies).
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", 1)
    index = _CountingIndex()
    order: list[str] = []
    async with open_memory(scorer=_BruteScorer(index)) as memory:
        for i in range(100):
            await memory.store(_fact(f"entry {i} about deploys", 0.5))
        slots = memory._slots
        assert slots is not None

        async def scoring() -> None:
            assert len(await memory.retrieve("deploys", 3)) == 3
            order.append("scored")

        async def waiting() -> None:
            with pytest.raises(trio.ClosedResourceError):
                await memory.retrieve("deploys", 3)
            order.append("refused")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(scoring)
            while not index.scoring:
                await trio.lowlevel.checkpoint()
            nursery.start_soon(waiting)
            nursery.start_soon(waiting)
            while slots.statistics().tasks_waiting < 2:
                await trio.lowlevel.checkpoint()
            await memory.aclose()
        assert slots.borrowed_tokens == 0
    assert order == ["refused", "refused", "scored"]
    assert index.began == ["deploys"]


class _InterruptAfterAcquire:
    """A memory's slots whose non-blocking acquire takes the slot and then raises, as a
    KeyboardInterrupt delivered just after the acquire returned would."""

    def __init__(self, slots: trio.CapacityLimiter) -> None:
        self._slots = slots

    def __getattr__(self, name: str) -> object:
        return getattr(self._slots, name)

    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        self._slots.acquire_on_behalf_of_nowait(borrower)
        raise KeyboardInterrupt


async def test_an_interrupt_just_after_taking_a_slot_gives_it_back() -> None:
    async with open_memory() as memory:
        await memory.store(_fact("entry about deploys", 0.5))
        slots = memory._slots
        assert slots is not None
        memory._slots = _InterruptAfterAcquire(slots)  # type: ignore[assignment]
        with pytest.raises(KeyboardInterrupt):
            await memory.retrieve("deploys", 3)
        assert slots.borrowed_tokens == 0  # not leaked: later retrieves still score
        memory._slots = slots
        assert len(await memory.retrieve("deploys", 3)) == 1
