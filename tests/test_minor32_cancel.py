"""minor32: writers inside a cancelled scope see ``trio.Cancelled``, not
``trio.ClosedResourceError``, when the scope around ``open_memory`` is cancelled.

The owner is in the same cancel scope as the writers; if it stopped (and closed the
memory) before a writer's next call, that call raised ``ClosedResourceError``, which
escaped the cancelled scope as an ``ExceptionGroup`` instead of being absorbed.
``ClosedResourceError`` stays for callers outside the cancelled scope, and for use
after a normal close (``test_memory.py``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import outcome
import pytest
import trio
import trio.testing

from actormem import Memory, MemoryCategory, MemoryEntry, open_memory, serve_memory
from actormem._storage.sqlite_format import read_validated

from .test_memory import gate_owner


def fact(text: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text)


@pytest.mark.parametrize("path", [False, True])
async def test_a_call_in_the_cancelled_scope_after_the_owner_stopped_is_cancelled(
    tmp_path: Path, path: bool
) -> None:
    where = str(tmp_path / "m.db") if path else None
    after: list[BaseException] = []
    with trio.CancelScope() as outer:
        async with open_memory(path=where) as memory:
            await memory.store(fact("acknowledged"))
            outer.cancel()
            with trio.CancelScope(shield=True):
                await trio.testing.wait_all_tasks_blocked()  # the owner stops and closes
            assert memory._closed
            for call in (
                memory.store(fact("after")),
                memory.delete(uuid.uuid4()),
                memory.wait_applied(0),
                memory.retrieve("acknowledged"),
            ):
                try:
                    await call
                except BaseException as exc:  # noqa: BLE001 - what it raised is the point
                    after.append(exc)
    assert outer.cancelled_caught
    assert [type(exc) for exc in after] == [trio.Cancelled] * 4
    if where is not None:
        assert [e.memory for _, e in read_validated(where)] == ["acknowledged"]


async def test_a_request_failed_by_the_stopping_owner_is_cancelled_for_a_cancelled_caller() -> None:
    """The caller waited for room; the owner took its request (the send returned: the
    caller is no longer parked, so the cancel does not abort it), the scope was
    cancelled and the stopping owner failed the request, all before the caller ran
    again: its answer was ``ClosedResourceError``. It is not applied either way."""

    class TakenThenFailed:
        def send_nowait(self, request: Any) -> None:
            raise trio.WouldBlock

        async def send(self, request: Any) -> None:  # no schedule point: as trio's own
            outer.cancel()
            request.set(outcome.Error(trio.ClosedResourceError("owner cancelled")))

    got: list[type[BaseException]] = []
    with trio.CancelScope() as outer:
        async with open_memory() as memory:
            real = memory._send
            memory._send = TakenThenFailed()  # type: ignore[assignment]
            try:
                await memory.store(fact("taken"))
            except BaseException as exc:
                got.append(type(exc))
                raise
            finally:
                memory._send = real
    assert outer.cancelled_caught
    assert got == [trio.Cancelled]


async def _writer(memory: Memory, w: int, acked: set[uuid.UUID], ended: list[Any]) -> None:
    try:
        for i in range(10**6):
            entry = fact(f"writer {w} store {i}")
            await memory.store(entry)
            acked.add(entry.id)
    except BaseException as exc:
        ended.append(type(exc))
        raise


async def test_looping_writers_in_a_cancelled_scope_end_cancelled(tmp_path: Path) -> None:
    """Writers looping on ``store`` inside the cancelled scope: whenever the cancel
    comes (a different point each round), each ends with ``Cancelled`` and the scope
    absorbs them; in durable mode every acknowledged store is in the file."""
    for rounds, durable in ((40, False), (10, True)):
        for k in range(rounds):
            where = str(tmp_path / f"m{k}.db") if durable else None
            ended: list[Any] = []
            acked: set[uuid.UUID] = set()
            with trio.CancelScope() as outer:
                async with open_memory(path=where, queue_size=2) as memory:
                    async with trio.open_nursery() as nursery:
                        for w in range(6):
                            nursery.start_soon(_writer, memory, w, acked, ended)
                        for _ in range(k):
                            await trio.lowlevel.checkpoint()
                        outer.cancel()
            assert outer.cancelled_caught
            assert ended == [trio.Cancelled] * 6, (k, where)
            if where is not None:
                present = {e.id for _, e in read_validated(where)}
                assert acked <= present


async def test_callers_outside_the_cancelled_scope_still_get_closed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The documented contract for callers the cancellation does not reach: a request
    the cancelled owner did not apply is answered with ``ClosedResourceError``."""
    errors: list[BaseException] = []

    async def caller(memory: Memory) -> None:
        try:
            await memory.store(fact("pending"))
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as outside, trio.open_nursery() as owner_nursery:
        memory: Any = await owner_nursery.start(serve_memory)
        gate = gate_owner(memory)
        outside.start_soon(caller, memory)
        await trio.testing.wait_all_tasks_blocked()
        outside.start_soon(caller, memory)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.entered == 1
        owner_nursery.cancel_scope.cancel()
    assert len(errors) == 2
    with pytest.raises(trio.ClosedResourceError):
        await memory.store(fact("after"))
