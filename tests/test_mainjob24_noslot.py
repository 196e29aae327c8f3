"""A one-step retrieve without a scoring slot (``memory._ONE_STEP_NO_SLOT``) and with
a plain trailing schedule point (``snapshot._ONE_STEP_PLAIN``), both off by default,
against the path before: the same hits, scores, ties and access counts; still a
schedule point and a cancel point; the slots still bound the sliced retrieves; a
retrieve found small runs in one step even if the memory grew past the limit since."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.memory as memory_module
import actormem._engine.snapshot as snapshot
from actormem import BM25Scorer, open_memory
from actormem._engine.fairshare import ReadGate, ScoringSlots
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples
from .test_mainjob16_onestep import _Counting, _entry, _run

_KNOBS = [(False, False), (True, False), (False, True), (True, True)]


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 120), knobs=st.sampled_from(_KNOBS))
def test_same_results_and_access_counts_either_way(
    seed: int, ops: int, knobs: tuple[bool, bool]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(memory_module, "_ONE_STEP_NO_SLOT", False)
        mp.setattr(snapshot, "_ONE_STEP_PLAIN", False)
        off = trio.run(_run, seed, ops)
        mp.setattr(memory_module, "_ONE_STEP_NO_SLOT", knobs[0])
        mp.setattr(snapshot, "_ONE_STEP_PLAIN", knobs[1])
        on = trio.run(_run, seed, ops)
    assert on == off


def _slots(memory: Any) -> ScoringSlots:
    slots = memory._slots
    assert type(slots) is ScoringSlots
    return slots


def _take_every_slot(slots: ScoringSlots) -> None:
    while slots.take(object()):
        pass
    assert slots.borrowed_tokens == slots.total_tokens


async def test_small_retrieve_takes_no_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every slot held by others: with the knob a small retrieve answers at once,
    without it it waits; a long query (sliced) waits for a slot either way."""
    rng = random.Random(5)
    async with open_memory() as memory:
        for i in range(60):
            await memory.store(_entry(rng, i))
        _take_every_slot(_slots(memory))
        monkeypatch.setattr(memory_module, "_ONE_STEP_NO_SLOT", True)
        with trio.fail_after(10):
            got = await memory.retrieve_scored("deploy blue the", 5)
        snap = memory.snapshot()
        assert [(h.entry.id, h.score) for h in got] == [
            (h.entry.id, h.score) for h in snap.retrieve_scored("deploy blue the", 5)
        ]
        long_query = "deploy " * (wo_knobs._ONE_STEP_CHARS // 7 + 1)
        assert not snapshot.one_step_size(memory._state, long_query)
        with trio.move_on_after(0.2) as waited:
            await memory.retrieve(long_query, 3)  # sliced: it needs a slot
        assert waited.cancelled_caught
        monkeypatch.setattr(memory_module, "_ONE_STEP_NO_SLOT", False)
        with trio.move_on_after(0.2) as waited:
            await memory.retrieve("deploy", 3)
        assert waited.cancelled_caught
        assert _slots(memory).statistics().tasks_waiting == 0  # the cancelled left the line


@pytest.mark.parametrize("knobs", _KNOBS)
async def test_still_a_schedule_point_and_a_cancel_point(
    knobs: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(memory_module, "_ONE_STEP_NO_SLOT", knobs[0])
    monkeypatch.setattr(snapshot, "_ONE_STEP_PLAIN", knobs[1])
    async with open_memory() as memory:
        await memory.store(_entry(random.Random(2), 0))
        for _ in range(3):
            with trio.testing.assert_checkpoints():
                await memory.retrieve("deploy", 3)
        with trio.CancelScope() as scope:
            scope.cancel()
            await memory.retrieve("deploy", 3)
            pytest.fail("not cancelled")  # pragma: no cover
        assert _slots(memory).borrowed_tokens == 0


async def test_plain_trailer_does_not_park_at_a_closed_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With writes pending and the gate closed, a one-step retrieve that found the gate
    open before scoring ends with trio's checkpoint, not the gate's (knob on), or the
    gate's (knob off)."""
    calls: list[int] = []
    real = ReadGate.checkpoint

    async def counted(self: Any) -> None:
        calls.append(1)
        await real(self)

    monkeypatch.setattr(ReadGate, "checkpoint", counted)
    async with open_memory() as memory:
        await memory.store(_entry(random.Random(4), 0))
        for plain, expected in ((True, 0), (False, 1)):
            calls.clear()
            monkeypatch.setattr(snapshot, "_ONE_STEP_PLAIN", plain)
            await memory.retrieve("deploy", 3)
            assert len(calls) == expected


async def test_found_small_runs_in_one_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory grew past the limit between the check and the scoring: the retrieve,
    holding no slot, still runs in one step (never sliced without a slot)."""
    monkeypatch.setattr(memory_module, "_ONE_STEP_NO_SLOT", True)
    counting = _Counting(monkeypatch)
    rng = random.Random(6)
    async with open_memory() as memory:
        for i in range(30):
            await memory.store(_entry(rng, i))
        index = memory._state.index
        answers = iter([True])

        def once(self: Any, query: str, entries: int = 0) -> bool:
            assert self is index
            return next(answers, False)  # small at the check, large from then on

        monkeypatch.setattr(type(index), "one_step_ok", once)  # a slotted class
        got = await memory.retrieve_scored("deploy blue", 5)
        assert counting.calls == 0
        assert _slots(memory).borrowed_tokens == 0
        snap = memory.snapshot()
        assert [(h.entry.id, h.score) for h in got] == [
            (h.entry.id, h.score) for h in snap.retrieve_scored("deploy blue", 5)
        ]
        await memory.retrieve("deploy blue", 5)  # large now: a slot, sliced
        assert counting.calls == 1


async def test_one_step_size(monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_memory() as memory:
        await memory.store(_entry(random.Random(7), 0))
        state = memory._state
        assert state.published_len == len(state.view()) == 1
        assert snapshot.one_step_size(state, "deploy")
        assert not snapshot.one_step_size(state, "x" * (wo_knobs._ONE_STEP_CHARS + 1))
        monkeypatch.setattr(snapshot, "RETRIEVE_SLICE", 0.0)
        assert not snapshot.one_step_size(state, "deploy")
        monkeypatch.setattr(snapshot, "RETRIEVE_SLICE", 1e-4)
        monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", False)
        assert not snapshot.one_step_size(state, "deploy")
    async with open_memory(scorer=BM25Scorer()) as memory:
        assert not snapshot.one_step_size(memory._state, "deploy")
