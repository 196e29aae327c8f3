"""A memory's scoring slots as :class:`~actormem._engine.fairshare.ScoringSlots`
(``memory._OWN_SLOTS``) against trio's :class:`trio.CapacityLimiter` (the path before
it): first come first served, the hand-off to the first waiter, a cancel at every
checkpoint of a wait, the waiters woken with no slot when the memory closes; the same
retrieves, errors and access counts either way."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.memory
import actormem._engine.snapshot
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine.fairshare import ScoringSlots

from . import test_scoring_slots as slots_tests
from .strategies import examples
from .test_sliced import _BruteScorer, _fact


@pytest.fixture(params=[True, False], ids=["own", "limiter"])
def own_slots(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(actormem._engine.memory, "_OWN_SLOTS", request.param)
    return bool(request.param)


# -- the scoring-slot tests of test_scoring_slots, with the knob on and off -------------


async def test_slots_fifo_either_way(
    own_slots: bool, every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    await slots_tests.test_at_most_the_slots_score_at_once_first_come_first_served(
        every_yield_checkpoints, monkeypatch
    )


async def test_slots_cancel_while_waiting_either_way(
    own_slots: bool, every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    await slots_tests.test_a_retrieve_cancelled_while_waiting_for_a_slot_takes_none(
        every_yield_checkpoints, monkeypatch
    )


async def test_slots_after_close_either_way(
    own_slots: bool, every_yield_checkpoints: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    await slots_tests.test_a_retrieve_after_close_raises_without_waiting_for_a_slot(
        every_yield_checkpoints, monkeypatch
    )
    await slots_tests.test_retrieves_waiting_for_a_slot_raise_when_the_memory_closes(
        every_yield_checkpoints, monkeypatch
    )


async def test_slots_interrupt_either_way(own_slots: bool) -> None:
    await slots_tests.test_an_interrupt_just_after_taking_a_slot_gives_it_back()


async def test_slots_kind(own_slots: bool) -> None:
    async with open_memory() as memory:
        assert type(memory._slots) is (ScoringSlots if own_slots else trio.CapacityLimiter)


@pytest.fixture
def every_yield_checkpoints(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)


# -- ScoringSlots alone, with trio's testing tools -------------------------------------


async def test_slots_hand_off_first_come_first_served() -> None:
    slots = ScoringSlots(2)
    a, b = object(), object()
    assert slots.take(a)
    assert slots.take(b)
    assert not slots.take(object())
    got: list[int] = []

    async def waiter(i: int, borrower: object) -> None:
        assert await slots.wait(borrower)
        got.append(i)
        assert borrower in slots._held

    borrowers = [object() for _ in range(5)]
    async with trio.open_nursery() as nursery:
        for i, borrower in enumerate(borrowers):
            assert not slots.take(borrower)  # the line is long: no slot now
            nursery.start_soon(waiter, i, borrower)
            await trio.testing.wait_all_tasks_blocked()
        assert slots.statistics().tasks_waiting == 5
        assert not slots.take(object())  # nobody passes the line, even with a slot free
        slots.give_back(a)
        slots.give_back(object())  # holds none: nothing happens
        await trio.testing.wait_all_tasks_blocked()
        assert got == [0]
        assert not slots.take(object())
        slots.give_back(b)
        slots.give_back(borrowers[0])  # two slots handed: to the next two in line
        assert slots._held == set(borrowers[1:3])
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(got) == [0, 1, 2]  # (trio runs a batch in either order)
        for borrower in borrowers[1:]:
            slots.give_back(borrower)
            await trio.testing.wait_all_tasks_blocked()
    assert sorted(got) == [0, 1, 2, 3, 4]
    assert slots.borrowed_tokens == 0
    assert slots.statistics().tasks_waiting == 0
    assert slots.take(object())


@pytest.mark.parametrize("cancelled", range(4))
async def test_slots_cancel_at_each_place_in_line(cancelled: int) -> None:
    # Four waiters; one cancelled while waiting leaves the line and takes nothing; the
    # others get the slot in their order.
    slots = ScoringSlots(1)
    holder = object()
    assert slots.take(holder)
    got: list[int] = []
    scopes = [trio.CancelScope() for _ in range(4)]
    outcomes: dict[int, str] = {}

    async def waiter(i: int) -> None:
        borrower = object()
        with scopes[i]:
            assert not slots.take(borrower)
            if await slots.wait(borrower):
                got.append(i)
                await trio.lowlevel.checkpoint()
                slots.give_back(borrower)
            return
        outcomes[i] = "cancelled"
        assert borrower not in slots._held

    async with trio.open_nursery() as nursery:
        for i in range(4):
            nursery.start_soon(waiter, i)
            await trio.testing.wait_all_tasks_blocked()
        scopes[cancelled].cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert slots.statistics().tasks_waiting == 3
        slots.give_back(holder)
    assert outcomes == {cancelled: "cancelled"}
    assert got == [i for i in range(4) if i != cancelled]
    assert slots.borrowed_tokens == 0


async def test_slots_cancelled_before_waiting_and_after_the_hand_off() -> None:
    slots = ScoringSlots(1)
    holder = object()
    assert slots.take(holder)
    # A cancel that comes after the hand-off: the slot is the waiter's, no Cancelled
    # from the wait itself (as the limiter's park).
    borrower = object()
    with trio.CancelScope() as scope:

        async def hand_off_then_cancel() -> None:
            await trio.testing.wait_all_tasks_blocked()
            slots.give_back(holder)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hand_off_then_cancel)
            assert await slots.wait(borrower)
    assert borrower in slots._held
    slots.give_back(borrower)
    assert slots.borrowed_tokens == 0


async def test_slots_stopped_while_waiting() -> None:
    slots = ScoringSlots(1)
    holder = object()
    assert slots.take(holder)
    woke: list[bool] = []

    async def waiter() -> None:
        borrower = object()
        woke.append(await slots.wait(borrower))
        assert borrower not in slots._held

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        slots.stop_waiters()
    assert woke == [False, False, False]
    assert slots.statistics().tasks_waiting == 0
    slots.give_back(holder)
    assert slots.borrowed_tokens == 0
    slots.stop_waiters()  # nobody waits: nothing happens


async def test_slots_limiter_names() -> None:
    with pytest.raises(ValueError, match="total"):
        ScoringSlots(0)
    with pytest.raises(ValueError, match="total"):
        ScoringSlots(True)
    slots = ScoringSlots(1)
    assert slots.total_tokens == 1
    a = object()
    slots.acquire_on_behalf_of_nowait(a)
    with pytest.raises(RuntimeError, match="already"):
        slots.acquire_on_behalf_of_nowait(a)
    with pytest.raises(RuntimeError, match="already"):
        await slots.acquire_on_behalf_of(a)
    with pytest.raises(trio.WouldBlock):
        slots.acquire_on_behalf_of_nowait(object())
    with pytest.raises(RuntimeError, match="no slot"):
        slots.release_on_behalf_of(object())
    stats = slots.statistics()
    assert (stats.borrowed_tokens, stats.total_tokens, stats.tasks_waiting) == (1, 1, 0)

    async def stopped() -> None:
        with pytest.raises(trio.ClosedResourceError):
            await slots.acquire_on_behalf_of(object())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(stopped)
        await trio.testing.wait_all_tasks_blocked()
        slots.stop_waiters()
    slots.release_on_behalf_of(a)
    async with slots:
        assert slots.borrowed_tokens == 1
    assert slots.borrowed_tokens == 0
    with trio.CancelScope() as scope:
        scope.cancel()
        await slots.acquire_on_behalf_of(object())  # cancelled at its first checkpoint
    assert slots.borrowed_tokens == 0


# -- whole memories: the same retrieves with the knob on and off -----------------------

_BASE = datetime(2026, 1, 1, tzinfo=UTC)


async def _run_readers(
    cancel_after: list[int | None], close_after: int | None, slots: int, seed: int
) -> tuple[list[Any], dict[int, int], tuple[int, int]]:
    """Readers (each cancelled after a number of checkpoints, or never) and a writer on
    one memory, perhaps closed midway; each reader's hits or error, each entry's access
    count, the slots' state at the end."""
    trio_random = trio._core._run._r  # type: ignore[attr-defined]
    trio_random.seed(seed)  # the scheduler's batch order: the same on both sides
    out: list[Any] = [None] * len(cancel_after)
    counts: dict[int, int] = {}
    async with open_memory(scorer=_BruteScorer(slots_tests._CountingIndex())) as memory:
        ids = []
        for i in range(12):
            e = MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"entry {i} about deploys {i % 3}",
                relevance=0.1 * (i % 4),
                created_at=_BASE,
                id=uuid.UUID(int=i + 1),
            )
            await memory.store(e)
            ids.append(e.id)

        async def reader(r: int, after: int | None) -> None:
            async with trio.open_nursery() as nursery:

                async def cancel() -> None:
                    assert after is not None
                    for _ in range(after):
                        await trio.lowlevel.checkpoint()
                    nursery.cancel_scope.cancel()

                if after is not None:
                    nursery.start_soon(cancel)
                try:
                    hits = await memory.retrieve(f"deploys {r % 3}", 3)
                    out[r] = [h.memory for h in hits]
                except trio.ClosedResourceError:
                    out[r] = "closed"
                nursery.cancel_scope.cancel()
            if out[r] is None:
                out[r] = "cancelled"

        async def writer() -> None:
            for j in range(4):
                try:
                    await memory.store(_fact(f"written {j} about deploys", 0.9))
                except trio.ClosedResourceError:
                    return

        async with trio.open_nursery() as nursery:
            for r, after in enumerate(cancel_after):
                nursery.start_soon(reader, r, after)
            nursery.start_soon(writer)
            if close_after is not None:
                for _ in range(close_after):
                    await trio.lowlevel.checkpoint()
                await memory.aclose()
        state = memory._slots
        assert state is not None
        end = (state.borrowed_tokens, state.statistics().tasks_waiting)
        if close_after is None:
            await memory.store(_fact("flushes the access buffer", 0.1))
            for id in ids:
                got = await memory.get(id)
                assert got is not None
                counts[id.int] = got.access_count
    return out, counts, end


@settings(max_examples=examples(30), deadline=None)
@given(
    slots=st.sampled_from([1, 2, 3]),
    cancel_after=st.lists(st.none() | st.integers(0, 30), min_size=1, max_size=8),
    close_after=st.none() | st.integers(0, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_memories_retrieve_alike_with_either_slots(
    slots: int, cancel_after: list[int | None], close_after: int | None, seed: int
) -> None:
    # The same readers, cancels and close against the two kinds of slots, the
    # scheduler seeded alike: the same hits, cancels and refusals per reader, the same
    # access counts, no slot or waiter left.
    got = {}
    saved = random.getstate()
    try:
        for own in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(actormem._engine.memory, "SCORING_SLOTS", slots)
                mp.setattr(actormem._engine.memory, "_OWN_SLOTS", own)
                mp.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", 0.0)
                got[own] = trio.run(
                    _run_readers,
                    cancel_after,
                    close_after,
                    slots,
                    seed,
                    clock=trio.testing.MockClock(autojump_threshold=0),  # the gate's phases
                )
    finally:
        random.setstate(saved)
    assert got[True][2] == got[False][2] == (0, 0)
    assert got[True][1] == got[False][1]
    if close_after is None:  # (a close wakes the limiter's waiters in its set's order)
        assert got[True][0] == got[False][0]
