"""A retrieve whose scope is cancelled while its memory closes gets Cancelled, which the
scope absorbs (review32c): the retrieve's park at the read gate could end (the task
rescheduled) just before the scope around ``open_memory`` was cancelled and the owner,
cancelled by it, closed the memory; the retrieve then raised ClosedResourceError, which
escaped the cancelled scope in an ExceptionGroup (about one round in 40). Callers the
cancellation does not reach still get ClosedResourceError."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
import trio

from actormem import Memory, MemoryCategory, MemoryEntry, open_memory


def _park_then_close(
    memory: Memory, scope: trio.CancelScope | None
) -> Callable[[object], Awaitable[None]]:
    """A gate checkpoint that returns as a rescheduled task does, after the memory
    closed and (when given) the caller's scope was cancelled."""

    async def checkpoint(gate: object) -> None:
        memory._close()
        if scope is not None:
            scope.cancel()

    return checkpoint


def test_retrieve_in_a_cancelled_scope_gets_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        with trio.CancelScope() as scope:
            async with open_memory() as memory:
                await memory.store(MemoryEntry.new(MemoryCategory.FACT, "alpha beta"))
                gate = memory._gate
                monkeypatch.setattr(type(gate), "would_park", lambda gate: True)
                monkeypatch.setattr(type(gate), "checkpoint", _park_then_close(memory, scope))
                await memory.retrieve("alpha", 3)
                pytest.fail("the retrieve went on in a cancelled scope")
        assert scope.cancelled_caught

    trio.run(main)


def test_retrieve_outside_the_cancelled_scope_gets_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        async with open_memory() as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "alpha beta"))
            gate = memory._gate
            monkeypatch.setattr(type(gate), "would_park", lambda gate: True)
            monkeypatch.setattr(type(gate), "checkpoint", _park_then_close(memory, None))
            with pytest.raises(trio.ClosedResourceError):
                await memory.retrieve("alpha", 3)

    trio.run(main)
