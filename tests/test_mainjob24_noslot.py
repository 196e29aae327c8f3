"""A one-step retrieve's scoring slot and trailing schedule point (the default path,
left after mainjob24's two knobs, ``memory._ONE_STEP_NO_SLOT`` and
``snapshot._ONE_STEP_PLAIN``, both off and measured no gain, were removed in tidy25):
a small retrieve waits for a slot while every slot is held, and leaves the line when
cancelled; it is a schedule point and a cancel point; its trailing schedule point is the
fair-share gate's."""

from __future__ import annotations

import random
from typing import Any

import pytest
import trio
import trio.testing

from actormem import open_memory
from actormem._engine.fairshare import ReadGate, ScoringSlots

from .test_mainjob16_onestep import _entry


def _slots(memory: Any) -> ScoringSlots:
    slots = memory._slots
    assert type(slots) is ScoringSlots
    return slots


def _take_every_slot(slots: ScoringSlots) -> None:
    while slots.take(object()):
        pass
    assert slots.borrowed_tokens == slots.total_tokens


async def test_small_retrieve_waits_for_a_slot() -> None:
    """Every slot held by others: a small retrieve waits for one; cancelled, it leaves
    the line."""
    rng = random.Random(5)
    async with open_memory() as memory:
        for i in range(60):
            await memory.store(_entry(rng, i))
        _take_every_slot(_slots(memory))
        with trio.move_on_after(0.2) as waited:
            await memory.retrieve("deploy", 3)
        assert waited.cancelled_caught
        assert _slots(memory).statistics().tasks_waiting == 0  # the cancelled left the line


async def test_still_a_schedule_point_and_a_cancel_point() -> None:
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


async def test_one_step_trailer_is_the_gates_checkpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A one-step retrieve that found the gate open before scoring ends with the gate's
    checkpoint (once), not trio's plain one."""
    calls: list[int] = []
    real = ReadGate.checkpoint

    async def counted(self: Any) -> None:
        calls.append(1)
        await real(self)

    monkeypatch.setattr(ReadGate, "checkpoint", counted)
    async with open_memory() as memory:
        await memory.store(_entry(random.Random(4), 0))
        calls.clear()
        await memory.retrieve("deploy", 3)
        assert len(calls) == 1
