"""The fair-share gate: readers yield the loop to pending writes, and are never starved.

The gate's phases run on trio's clock, so the unit tests drive it with the autojump
:class:`trio.testing.MockClock`: a reader's slice of work is ``trio.sleep(SLICE)`` (it
advances mock time), and the park's timeout makes the clock jump. The figures asserted
are exact consequences of the phase rules, not timings of this machine.
"""

from __future__ import annotations

import functools
import math
import random
import uuid
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing

import actormem._engine.fairshare as fairshare
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine.fairshare import (
    CLOSED_MAX,
    COMMIT_PARK,
    OPEN_MIN,
    SHARE,
    STARVE_MAX,
    ReadGate,
)

SLICE = 1e-4


async def _reader(gate: ReadGate, until: float, parks: list[float], slices: list[int]) -> None:
    """Loop slices of work until ``until``; record how long each gate checkpoint took."""
    while trio.current_time() < until:
        await trio.sleep(SLICE)
        slices[0] += 1
        t0 = trio.current_time()
        await gate.checkpoint()
        parks.append(trio.current_time() - t0)
        gate._check()


async def test_without_demand_readers_never_park(autojump_clock: trio.testing.MockClock) -> None:
    gate = ReadGate()
    parks: list[float] = []
    slices = [0]
    await _reader(gate, 0.1, parks, slices)
    assert gate.parks == 0
    assert max(parks) == 0


async def test_pending_writes_take_their_share_and_readers_are_never_starved(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = ReadGate()
    gate.enter()  # a write in flight all the time: the worst case for readers
    parks: list[float] = []
    slices = [0]
    t0 = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(_reader, gate, t0 + 1.0, parks, slices)
    # No park lasts longer than a closed phase.
    assert max(parks) <= CLOSED_MAX + 1e-9
    assert gate.parks > 0
    # Readers ran (1 - SHARE) of the time: 4 readers x 1 s x (1 - SHARE) / SLICE slices, give or
    # take one phase.
    expected = 4 * (1 - SHARE) / SLICE
    assert abs(slices[0] - expected) <= 4 * (CLOSED_MAX / SLICE + 1)
    gate.leave()
    gate._check()
    assert not gate.closed


async def test_last_write_leaving_wakes_parked_readers_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate, woke, reader = _gate_with_a_write()
    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.closed
        assert not woke
        await trio.sleep(CLOSED_MAX / 3)
        gate.leave()
    assert woke == [pytest.approx(CLOSED_MAX / 3)] * 3
    gate._check()


async def test_a_durable_commit_parks_readers_up_to_commit_park(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = ReadGate()
    gate.enter()
    gate.commit_started()
    t0 = trio.current_time()
    await gate.checkpoint()  # parks for the longest closed phase, no longer
    assert trio.current_time() - t0 == pytest.approx(COMMIT_PARK)
    # The commit ending shortens a closed phase under way to CLOSED_MAX.
    woke: list[float] = []

    async def reader() -> None:
        await trio.sleep(COMMIT_PARK)  # past the open phase it earned
        start = trio.current_time()
        await gate.checkpoint()
        woke.append(trio.current_time() - start)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(COMMIT_PARK + CLOSED_MAX / 2)
        assert gate.closed
        gate.commit_ended()
    assert woke == [pytest.approx(CLOSED_MAX)]
    gate.leave()


async def test_a_cancelled_watch_hands_over_the_timeout(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate, woke, reader = _gate_with_a_write()
    async with trio.open_nursery() as nursery:
        first = trio.CancelScope()
        nursery.start_soon(_cancellable, gate, first)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(reader)
        await trio.testing.wait_all_tasks_blocked()
        assert gate._watch is not None  # the first reader holds the watch
        first.cancel()
    # The second reader still woke when the closed phase ended.
    assert woke == [pytest.approx(CLOSED_MAX)]
    gate.leave()


def _gate_with_a_write() -> tuple[ReadGate, list[float], Callable[[], Awaitable[None]]]:
    """A gate with one write in flight, the wake-up times, and a reader noting its own."""
    gate = ReadGate()
    gate.enter()
    woke: list[float] = []
    return gate, woke, functools.partial(_wake_time, gate, woke)


async def _wake_time(gate: ReadGate, woke: list[float]) -> None:
    """Pass the gate once; note when."""
    await gate.checkpoint()
    woke.append(trio.current_time())


async def _cancellable(gate: ReadGate, scope: trio.CancelScope) -> None:
    with scope:
        await gate.checkpoint()


async def test_disabled_gate_never_parks(autojump_clock: trio.testing.MockClock) -> None:
    gate = ReadGate()
    gate.enabled = False
    gate.enter()
    parks: list[float] = []
    await _reader(gate, 0.05, parks, [0])
    assert gate.parks == 0


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=f"fact number {i} about the garden and the weather",
        id=uuid.UUID(int=i + 1),
    )


@pytest.mark.parametrize("durable", [False, True])
async def test_writers_get_through_while_64_readers_loop(
    durable: bool, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("actormem._engine.snapshot.RETRIEVE_SLICE", 0.0)  # a gate per step
    path = None if not durable else f"{tmp_path}/m.db"
    async with open_memory(path=path) as memory:
        await memory.store_many([_entry(i) for i in range(300)])
        stop = False
        retrieves = [0] * 64

        async def reader(i: int) -> None:
            while not stop:
                await memory.retrieve("garden weather fact", 5)
                retrieves[i] += 1

        async def writer(w: int) -> None:
            for j in range(40):
                await memory.store(_entry(1000 + w * 100 + j))

        async with trio.open_nursery() as readers:
            for i in range(64):
                readers.start_soon(reader, i)
            async with trio.open_nursery() as writers:
                for w in range(8):
                    writers.start_soon(writer, w)
            stop = True
        assert len(memory) == 300 + 8 * 40
        assert all(retrieves)  # every reader got through while writes were pending
        assert memory._gate._demand == 0
        memory._gate._check()
        assert not memory._gate.closed


async def test_a_cancelled_writer_leaves_no_demand() -> None:
    async with open_memory(queue_size=1) as memory:
        with trio.move_on_after(0):
            await memory.store(_entry(1))
        async with trio.open_nursery() as nursery:
            for i in range(5):
                nursery.start_soon(memory.store, _entry(i))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        assert memory._gate._demand == 0


def test_share_constants_are_sane() -> None:
    assert 0 < fairshare.SHARE < 1
    assert 0 < fairshare.CLOSED_MAX < fairshare.COMMIT_PARK


async def test_a_commit_starting_cuts_the_readers_open_phase_short(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = ReadGate()
    gate.enter()
    gate.commit_started()
    await gate.checkpoint()  # a long commit: parked for COMMIT_PARK, then open
    gate.commit_ended()
    assert not gate.closed
    # That closed phase earned readers a long open phase ...
    await trio.sleep(0.01)
    parks = gate.parks
    await gate.checkpoint()
    assert gate.parks == parks
    # ... which the next commit cuts short: readers park again at once.
    gate.commit_started()
    t0 = trio.current_time()
    await gate.checkpoint()
    assert gate.parks == parks + 1
    assert trio.current_time() - t0 == pytest.approx(COMMIT_PARK)
    gate.commit_ended()
    gate.leave()
    gate._check()


async def _park_then_use_up_the_open_phase(gate: ReadGate, woke: list[float]) -> None:
    """Pass the gate (the watch's timeout opens it), then, in the same task step, reach a
    slice boundary past the open phase it earned: the gate closes before the other
    readers the opening woke have run."""
    await gate.checkpoint()
    woke.append(trio.current_time())
    assert gate._closed_now(trio.current_time() + OPEN_MIN + 1e-9)


@pytest.mark.parametrize("waited", [CLOSED_MAX, CLOSED_MAX / 2])
async def test_a_reader_woken_by_an_opening_passes_once_it_waited_starve_max(
    autojump_clock: trio.testing.MockClock, waited: float
) -> None:
    """The gate before the FIFO hand-off (``fifo = False``): the second reader is woken by
    the opening but runs after the gate closed again: it passes if it has waited
    STARVE_MAX, and parks once more (for the next closed phase) if it has waited less."""
    assert STARVE_MAX == CLOSED_MAX
    gate, woke, reader = _gate_with_a_write()
    gate.fifo = False
    first: list[float] = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_park_then_use_up_the_open_phase, gate, first)
        await trio.testing.wait_all_tasks_blocked()
        t0 = trio.current_time()
        await trio.sleep(CLOSED_MAX - waited)
        nursery.start_soon(reader)
    assert first == [pytest.approx(t0 + CLOSED_MAX)]
    if waited >= STARVE_MAX:
        assert woke == [pytest.approx(t0 + CLOSED_MAX)]  # through with the first
    else:
        # Parked again, out when that closed phase ended (it began where the first
        # reader's boundary was, past the open phase).
        assert woke == [pytest.approx(t0 + CLOSED_MAX + OPEN_MIN + CLOSED_MAX)]
    gate.leave()
    gate._check()


async def test_would_park_tells_whether_a_reader_would_park_now(
    autojump_clock: trio.testing.MockClock,
) -> None:
    gate = ReadGate()
    assert not gate.would_park()  # no demand
    gate.enter()
    assert gate.would_park()  # demand, and no open phase earned yet: closes now
    assert gate.closed
    gate.enabled = False
    assert not gate.would_park()
    gate.enabled = True
    gate.leave()
    assert not gate.would_park()
    gate._check()


# ---------------------------------------------------------------- the FIFO hand-off


def _admits() -> int:
    """Readers an opening after a full closed phase admits."""
    return math.ceil(OPEN_MIN / fairshare.ADMIT_SLICE)


async def _pass_once(gate: ReadGate, name: str, passed: dict[str, float]) -> None:
    await gate.checkpoint()
    passed[name] = trio.current_time()
    gate._check()


async def test_an_opening_admits_the_first_parked_readers_as_many_as_it_pays_for(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """More readers parked than an open phase pays for: the first ``_admits()`` (in the
    order they parked) pass at the first opening, the others at the next one."""
    gate = ReadGate()
    gate.enter()
    passed: dict[str, float] = {}
    count = _admits() + 5
    async with trio.open_nursery() as nursery:
        for i in range(count):
            nursery.start_soon(_pass_once, gate, f"r{i}", passed)
            await trio.testing.wait_all_tasks_blocked()  # parked in this order
        assert len(gate._queue) + len(gate._first) == count
    first = CLOSED_MAX
    second = CLOSED_MAX + OPEN_MIN + CLOSED_MAX  # the closed phase after the open one
    assert [passed[f"r{i}"] for i in range(count)] == (
        [pytest.approx(first)] * _admits() + [pytest.approx(second)] * 5
    )
    gate.leave()
    gate._check()


async def test_readers_pass_in_the_order_they_parked_and_no_one_overtakes(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One reader per opening: three parked readers pass at three openings in the order
    they parked (the watch going from one to the next), and a reader arriving at the
    open gate while others are parked parks behind them."""
    monkeypatch.setattr(fairshare, "ADMIT_SLICE", 1.0)  # every opening admits one
    gate = ReadGate()
    gate.enter()
    passed: dict[str, float] = {}
    cycle = OPEN_MIN + CLOSED_MAX
    async with trio.open_nursery() as nursery:
        for name in ("a", "b", "c"):
            nursery.start_soon(_pass_once, gate, name, passed)
            await trio.testing.wait_all_tasks_blocked()
        await trio.sleep(CLOSED_MAX + cycle / 10)  # "a" is through, the gate is open
        assert passed == {"a": pytest.approx(CLOSED_MAX)}
        assert not gate.closed
        assert gate.would_park()  # others are parked: a newcomer waits for its turn
        nursery.start_soon(_pass_once, gate, "late", passed)
    assert passed == {
        "a": pytest.approx(CLOSED_MAX),
        "b": pytest.approx(CLOSED_MAX + cycle),
        "c": pytest.approx(CLOSED_MAX + 2 * cycle),
        "late": pytest.approx(CLOSED_MAX + 3 * cycle),
    }
    gate.leave()
    gate._check()


async def test_a_cancelled_watch_with_readers_left_hands_over(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader holding the watch for readers an opening left parked is cancelled:
    the next one takes the watch and passes at the following opening."""
    monkeypatch.setattr(fairshare, "ADMIT_SLICE", 1.0)
    gate = ReadGate()
    gate.enter()
    passed: dict[str, float] = {}
    scope = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_pass_once, gate, "a", passed)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(_cancellable, gate, scope)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(_pass_once, gate, "c", passed)
        await trio.sleep(CLOSED_MAX + OPEN_MIN / 2)
        assert passed == {"a": pytest.approx(CLOSED_MAX)}
        assert gate._watch is not None
        assert gate._watcher is not None
        assert gate._watcher.name.endswith("_cancellable")
        scope.cancel()
        await trio.testing.wait_all_tasks_blocked()
        gate._check()
    assert passed["c"] == pytest.approx(CLOSED_MAX + OPEN_MIN + CLOSED_MAX)
    gate.leave()
    gate._check()


async def test_a_reader_that_passed_an_open_gate_runs_no_slice_once_it_closed(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader passes an open gate, and its turn comes after the open phase ended (the
    round ran long: the patched schedule point moves the clock past it): it parks until
    the closed phase ends instead of running its slice in the owner's phase."""
    gate = ReadGate()
    gate.enter()
    await gate.checkpoint()  # the first closed phase: parked up to CLOSED_MAX
    assert not gate.closed
    real = trio.lowlevel.checkpoint

    async def long_round() -> None:
        autojump_clock.jump(OPEN_MIN)
        await real()

    monkeypatch.setattr(trio.lowlevel, "checkpoint", long_round)
    parks = gate.parks
    t0 = trio.current_time()
    await gate.checkpoint()
    monkeypatch.setattr(trio.lowlevel, "checkpoint", real)
    assert gate.parks == parks + 1
    assert trio.current_time() - t0 == pytest.approx(OPEN_MIN + CLOSED_MAX)
    # With the gate before the FIFO hand-off, the reader ran on.
    gate.fifo = False
    monkeypatch.setattr(trio.lowlevel, "checkpoint", long_round)
    parks = gate.parks
    t0 = trio.current_time()
    await gate.checkpoint()
    monkeypatch.setattr(trio.lowlevel, "checkpoint", real)
    assert gate.parks == parks
    assert trio.current_time() - t0 == pytest.approx(OPEN_MIN)
    gate.leave()
    gate._check()


async def test_once_every_write_is_answered_readers_get_a_whole_open_phase(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A short closed phase that ends because the writes are done earns readers a whole
    open phase (OPEN_DONE), not a share of its own length, before the next write may
    close the gate again (the gate before the FIFO hand-off: the share only)."""
    for fifo in (True, False):
        gate = ReadGate()
        gate.fifo = fifo
        gate.enter()
        assert gate.would_park()  # closes now
        await trio.sleep(CLOSED_MAX / 10)
        gate.leave()  # the writes are done: open
        gate.enter()  # the next write comes at once
        await trio.sleep(CLOSED_MAX / 10 * (1 - SHARE) / SHARE * 1.5)
        assert gate.would_park() is not fifo
        if fifo:
            await trio.sleep(fairshare.OPEN_DONE)
            assert gate.would_park()
        gate.leave()
        gate._check()


async def test_the_watch_is_let_through_by_an_opening_that_comes_before_it_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The watch's timeout fires, and before its holder runs, a reader reaching a boundary
    at the same instant opens the gate: that opening lets the holder through first (it
    does not wait for the next opening behind the reader that parked after it). trio runs
    a batch forward or reversed at random, so the race is run many times."""
    for _ in range(40):
        gate = ReadGate()
        gate.enter()
        passed: dict[str, float] = {}
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_pass_once, gate, "first", passed)  # closes, holds the watch
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(_pass_once, gate, "second", passed)
            await trio.testing.wait_all_tasks_blocked()
            t0 = gate._since
            # A newcomer at a boundary exactly when the closed phase ends.
            nursery.start_soon(_arrive_at, gate, t0 + CLOSED_MAX, "newcomer", passed)
        # Both parked readers pass at the opening, in the order they parked (the
        # newcomer, whose check opened the gate, may pass with them).
        assert passed["first"] == pytest.approx(t0 + CLOSED_MAX)
        assert passed["second"] == pytest.approx(t0 + CLOSED_MAX)
        assert [name for name in passed if name != "newcomer"] == ["first", "second"]
        gate.leave()
        gate._check()
        assert gate._watch is None
        assert gate._let_through is None


async def _arrive_at(gate: ReadGate, when: float, name: str, passed: dict[str, float]) -> None:
    await trio.sleep_until(when)
    await _pass_once(gate, name, passed)


@pytest.mark.parametrize(("seed", "commits"), [(s, s % 2 == 0) for s in range(6)])
async def test_random_readers_writers_commits_and_cancellations(
    autojump_clock: trio.testing.MockClock, seed: int, commits: bool
) -> None:
    """Readers looping slices (some reaching a boundary exactly when the watch fires),
    writers (enter, wait, leave), group commits and random cancellations of all of them:
    the invariants hold at every step, no park outlasts an open phase plus a closed
    phase's limit (every opening admits all of these few readers), demand returns to
    zero and nothing is left parked."""
    rng = random.Random(seed)
    gate = ReadGate()
    readers = 12  # < _admits(): every opening lets every parked reader through
    assert readers < _admits()
    limit = COMMIT_PARK if commits else CLOSED_MAX
    bound = max(fairshare.OPEN_DONE, limit * (1 - SHARE) / SHARE) + limit
    parks: list[float] = []
    end = trio.current_time() + 1.0

    async def reader() -> None:
        while trio.current_time() < end:
            with trio.move_on_after(rng.choice([math.inf, rng.uniform(0, 0.02)])):
                while True:
                    if gate._watch is not None and rng.random() < 0.3:
                        # A boundary exactly when the watch's timeout fires.
                        await trio.sleep_until(gate._watch.deadline)
                    else:
                        await trio.sleep(SLICE * rng.randint(0, 3))
                    t0 = trio.current_time()
                    try:
                        await gate.checkpoint()
                    finally:
                        parks.append(trio.current_time() - t0)
                        gate._check()
                    if rng.random() < 0.02:
                        break

    async def writer() -> None:
        while trio.current_time() < end:
            await trio.sleep(rng.uniform(0, 0.01))
            with trio.move_on_after(rng.choice([math.inf, rng.uniform(0, 0.005)])):
                gate.enter()
                try:
                    await trio.sleep(rng.uniform(0, 0.01))
                finally:
                    gate.leave()
                    gate._check()

    async def committer() -> None:
        while trio.current_time() < end:
            await trio.sleep(rng.uniform(0, 0.05))
            gate.commit_started()
            try:
                await trio.sleep(rng.uniform(0, 0.3))
            finally:
                gate.commit_ended()
                gate._check()

    with trio.fail_after(60):  # mock time: a reader parked forever fails here
        async with trio.open_nursery() as nursery:
            for _ in range(readers):
                nursery.start_soon(reader)
            for _ in range(4):
                nursery.start_soon(writer)
            if commits:
                nursery.start_soon(committer)
    assert gate.parks > 0
    assert max(parks) <= bound + 1e-9
    gate._check()
    assert gate._demand == 0
    assert not gate.closed
    assert not gate._first
    assert not gate._queue
    assert gate._watch is None
    assert gate._relay is None
    assert gate._let_through is None
