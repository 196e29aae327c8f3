"""The actor: concurrency, snapshots, backpressure, cancellation, lifecycle."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio
import trio.testing

import actormem
import actormem._engine.memory
import actormem._engine.snapshot
from actormem import (
    InvalidQueryError,
    Memory,
    MemoryCategory,
    MemoryEntry,
    Snapshot,
    open_memory,
    serve_memory,
)


def fact(text: str, relevance: float = 1.0) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_relevance(relevance)


class Gate:
    """A commit hook that parks the owner until opened: a slow request, on demand."""

    def __init__(self) -> None:
        self.open = trio.Event()
        self.entered = 0

    async def __call__(self, journal: Any, meanwhile: Any) -> None:
        meanwhile()  # the deferred indexing, as the real commit does
        self.entered += 1
        await self.open.wait()


def gate_owner(memory: Memory) -> Gate:
    gate = Gate()
    memory._state.journal = []
    memory._commit = gate
    return gate


@pytest.fixture
async def memory() -> AsyncIterator[Memory]:
    async with open_memory() as m:
        yield m


async def test_concurrent_stores_and_retrieves(memory: Memory) -> None:
    for i in range(200):
        await memory.store(fact(f"seed entry {i}"))
    answers: list[int] = []

    async def reader() -> None:
        for _ in range(20):
            answers.append(len(await memory.retrieve("entry 7", 5)))

    async with trio.open_nursery() as nursery:
        for _ in range(5):
            nursery.start_soon(reader)
        for i in range(50):
            nursery.start_soon(memory.store, fact(f"concurrent entry {i}"))
    assert len(memory) == 250
    assert answers == [5] * 100
    memory._state._check()


async def test_snapshot_isolation(memory: Memory) -> None:
    old = fact("kept in old snapshot")
    await memory.store(old)
    snap = memory.snapshot()
    new = fact("written after the snapshot")
    await memory.store(new)
    await memory.delete(old.id)
    await memory.store(old.id and fact("another"))
    assert len(snap) == 1
    assert snap.get(new.id) is None
    assert snap.get(old.id) == old
    assert [e.id for e in snap] == [old.id]
    assert snap.retrieve("written after") == [old]
    assert new.id not in snap
    assert old.id in snap
    fresh = memory.snapshot()
    assert fresh.get(new.id) == new
    assert fresh.get(old.id) is None
    assert len(fresh) == 2
    assert memory.statistics().live_snapshots == 2
    del snap, fresh
    assert memory.statistics().live_snapshots == 0


async def test_readers_answer_while_owner_is_blocked(memory: Memory) -> None:
    await memory.store(fact("already there"))
    gate = gate_owner(memory)
    done = trio.Event()

    async def slow_store() -> None:
        await memory.store(fact("pending"))
        done.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(slow_store)
        await trio.testing.wait_all_tasks_blocked()
        assert gate.entered == 1
        assert not done.is_set()
        # The owner is parked inside a request; reads still answer, from the last
        # published snapshot.
        assert [e.memory for e in await memory.retrieve("pending", 5)] == ["already there"]
        assert len(memory) == 1
        gate.open.set()
    assert done.is_set()
    assert len(memory) == 2


async def test_backpressure_and_store_nowait() -> None:
    async with open_memory(queue_size=1) as memory:
        gate = gate_owner(memory)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(memory.store, fact("a"))  # taken by the owner, parked
            await trio.testing.wait_all_tasks_blocked()
            memory.store_nowait(fact("b"))  # fills the one-slot buffer
            with pytest.raises(trio.WouldBlock):
                memory.store_nowait(fact("c"))
            assert memory.statistics().queue_depth == 1
            blocked = trio.Event()

            async def waits() -> None:
                blocked.set()
                await memory.store(fact("d"))  # waits for room: backpressure

            nursery.start_soon(waits)
            await trio.testing.wait_all_tasks_blocked()
            assert blocked.is_set()
            assert len(memory) == 0
            gate.open.set()
        assert sorted(e.memory for e in memory.snapshot()) == ["a", "b", "d"]


async def test_cancelled_callers_do_not_stall_the_owner() -> None:
    async with open_memory(queue_size=8) as memory:
        gate = gate_owner(memory)
        async with trio.open_nursery() as nursery:
            for i in range(1000):
                nursery.start_soon(memory.store, fact(f"cancelled {i}"))
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        # The owner took one batch (its first request plus what it drained, up to its
        # batch limit) and parked; the remaining callers were cancelled either with a
        # request queued (applied later, not acknowledged) or while waiting for room.
        sent = gate.entered
        gate.open.set()
        for _ in range(1000):
            with trio.CancelScope() as scope:
                scope.cancel()
                await memory.store(fact("never sent"))
        await memory.store(fact("normal call"))
        texts = [e.memory for e in memory.snapshot()]
        assert sent == 1
        assert texts[-1] == "normal call"
        assert 9 <= len(texts) - 1 < 1000
        assert "never sent" not in texts
        assert len(set(texts)) == len(texts)
        memory._state._check()


@pytest.mark.parametrize("slots", [None, 8])
async def test_access_bookkeeping_is_batched(
    slots: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each retrieve in one task step (no slicing), so all 50 finish before the owner runs
    # (with scoring slots, each wave of `slots` retrieves does).
    monkeypatch.setattr(actormem._engine.snapshot, "RETRIEVE_SLICE", math.inf)
    monkeypatch.setattr(actormem._engine.memory, "SCORING_SLOTS", slots)
    now = datetime(2026, 5, 1, tzinfo=UTC)
    async with open_memory(clock=lambda: now) as memory:
        e = fact("rust is fast")
        await memory.store(e)
        (first,) = await memory.retrieve("rust", 1)
        assert first.access_count == 0  # results are as of the snapshot read
        await trio.testing.wait_all_tasks_blocked()
        assert memory.statistics().access_updates == 1
        async with trio.open_nursery() as nursery:
            for _ in range(50):
                nursery.start_soon(memory.retrieve, "rust", 1)
        memory.snapshot().retrieve("rust")  # snapshots never count
        await trio.testing.wait_all_tasks_blocked()
        stored = await memory.get(e.id)
        assert stored is not None
        assert stored.access_count == 51
        assert stored.last_accessed == now
        stats = memory.statistics()
        # 50 concurrent reads reached the owner as one write, not 50 (with slots, one
        # per wave of retrieves that scored together).
        waves = 1 if slots is None else math.ceil(50 / slots)
        assert stats.retrieves == 51
        assert 2 <= stats.access_updates <= 1 + waves


async def test_access_refreshes_eviction_order() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    clock_now = [t0]
    async with open_memory(capacity=2, half_life=3600.0, clock=lambda: clock_now[0]) as memory:
        old = MemoryEntry(category=MemoryCategory.FACT, memory="old but used", created_at=t0)
        young = MemoryEntry(
            category=MemoryCategory.FACT, memory="young", created_at=t0 + timedelta(hours=1)
        )
        await memory.store(old)
        await memory.store(young)
        clock_now[0] = t0 + timedelta(hours=2)
        await memory.retrieve("used", 1)
        await trio.testing.wait_all_tasks_blocked()
        await memory.store(fact("newcomer"))
        assert await memory.get(young.id) is None  # the old entry was used later
        assert await memory.get(old.id) is not None
        assert memory.statistics().evictions == 1


async def test_eviction_prefers_unvalidated_and_low_relevance() -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with open_memory(capacity=3, half_life=86400.0) as memory:
        low_valid = MemoryEntry(
            category=MemoryCategory.FACT, memory="v", relevance=0.01, validated=True, created_at=t0
        )
        older = MemoryEntry(category=MemoryCategory.FACT, memory="o", relevance=1.0, created_at=t0)
        # Half the relevance but one half-life younger: the same weighted recency, so
        # the tie goes to the earlier stored ("o").
        younger = MemoryEntry(
            category=MemoryCategory.FACT,
            memory="y",
            relevance=0.5,
            created_at=t0 + timedelta(days=1),
        )
        for e in (low_valid, older, younger):
            await memory.store(e)
        await memory.store(fact("x"))
        assert await memory.get(older.id) is None
        await memory.store(fact("z"))
        assert await memory.get(younger.id) is None
        assert await memory.get(low_valid.id) is not None  # validated goes last
        await memory.store(fact("w"))
        assert await memory.get(low_valid.id) is not None
        assert len(memory) == 3
        assert memory.statistics().evictions == 3


async def test_upsert_keeps_created_at_and_position(memory: Memory) -> None:
    t0 = datetime(2020, 1, 1, tzinfo=UTC)
    a = MemoryEntry(category=MemoryCategory.FACT, memory="alpha", created_at=t0)
    b = fact("beta")
    await memory.store(a)
    await memory.store(b)
    a2 = MemoryEntry(id=a.id, category=MemoryCategory.INSIGHT, memory="alpha two")
    await memory.store(a2)
    got = await memory.get(a.id)
    assert got is not None
    assert got.memory == "alpha two"
    assert got.created_at == t0
    assert [e.memory for e in memory.snapshot()] == ["alpha two", "beta"]
    assert [e.memory for e in await memory.retrieve("zzz", 2)] == ["alpha two", "beta"]
    assert len(memory) == 2
    assert memory.statistics().upserts == 1


async def test_filters(memory: Memory) -> None:
    acme = fact("deploy acme").with_namespace("t", "acme").with_tag("infra")
    corp = fact("deploy corp").with_namespace("t", "acme-corp")
    insight = MemoryEntry.new(MemoryCategory.INSIGHT, "deploy insight")
    insight = insight.with_namespace("t", "acme", "x")
    for e in (acme, corp, insight):
        await memory.store(e)
    got = await memory.retrieve("deploy", 10, namespace=("t", "acme"))
    assert [e.memory for e in got] == ["deploy acme", "deploy insight"]
    got = await memory.retrieve("deploy", 10, category=MemoryCategory.INSIGHT)
    assert [e.memory for e in got] == ["deploy insight"]
    got = await memory.retrieve("deploy", 10, tags=["infra"])
    assert [e.memory for e in got] == ["deploy acme"]
    got = await memory.retrieve("deploy", 10, category=[MemoryCategory.FACT], namespace=("t",))
    assert [e.memory for e in got] == ["deploy acme", "deploy corp"]


async def test_bad_input_is_rejected_and_changes_nothing(memory: Memory) -> None:
    await memory.store(fact("x"))
    before = memory.statistics()
    with pytest.raises(TypeError):
        await memory.store("not an entry")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await memory.retrieve(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError):
        await memory.retrieve("x", -1)
    with pytest.raises(InvalidQueryError):
        await memory.retrieve("x" * (actormem.MAX_QUERY_CHARS + 1))
    with pytest.raises(TypeError):
        await memory.retrieve("x", namespace="t")  # type: ignore[arg-type]
    with pytest.raises(InvalidQueryError):
        await memory.retrieve("x", namespace=("t", ""))
    with pytest.raises(InvalidQueryError):
        await memory.retrieve("x", category=[])
    with pytest.raises(TypeError):
        await memory.delete("id")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await memory.get(42)  # type: ignore[arg-type]
    assert memory.statistics() == before
    assert len(await memory.retrieve("x", tags=[], namespace=())) == 1  # empty asks nothing
    with pytest.raises(InvalidQueryError):
        async with open_memory(capacity=0):
            pass
    with pytest.raises(InvalidQueryError):
        async with open_memory(half_life=float("nan")):
            pass
    with pytest.raises(InvalidQueryError, match="half_life"):
        async with open_memory(half_life=1e-300):  # t / half_life would overflow
            pass


async def test_a_naive_clock_fails_the_retrieve_not_the_owner() -> None:
    async with open_memory(clock=lambda: datetime(2026, 1, 1)) as memory:
        await memory.store(fact("blue cluster"))
        with pytest.raises(TypeError, match="timezone-aware"):
            await memory.retrieve("blue")
        await memory.store(fact("still serving"))  # the owner lives
        await trio.testing.wait_all_tasks_blocked()
        assert len(memory) == 2
        assert memory.statistics().access_updates == 0


async def test_pending_accesses_keep_the_latest_time_when_the_clock_goes_back() -> None:
    t0 = datetime(2026, 1, 1, 2, tzinfo=UTC)
    times = iter([t0, t0 - timedelta(hours=2)])
    async with open_memory(clock=lambda: next(times)) as memory:
        e = fact("blue cluster")
        await memory.store(e)
        # Both retrieves land in one pending batch (the owner has not run between them).
        snap = memory.snapshot()
        assert memory._pending_access == {}
        memory._note_access([(1.0, snap._view.get(e.id))])  # type: ignore[attr-defined]
        memory._note_access([(1.0, snap._view.get(e.id))])  # type: ignore[attr-defined]
        await trio.testing.wait_all_tasks_blocked()
        got = await memory.get(e.id)
        assert got is not None
        assert got.access_count == 2
        assert got.last_accessed == t0


async def test_consolidate_prunes_merges_and_loses_no_concurrent_store(memory: Memory) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    keep = MemoryEntry(category=MemoryCategory.FACT, memory="Deploy  uses BLUE", created_at=t0)
    dup = fact("deploy uses blue", 0.4).with_tag("infra").as_validated()
    await memory.store(keep)
    await memory.store(dup)
    await memory.store(fact("noise", 0.04))
    await memory.store(fact("edge", 0.05))
    await memory.store(fact("trusted noise", 0.0).as_validated())
    results: list[Any] = []

    async def consolidate() -> None:
        results.append(await memory.consolidate())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consolidate)
        for i in range(100):
            nursery.start_soon(memory.store, fact(f"arrives meanwhile {i}"))
    (stats,) = results
    assert (stats.entries_before, stats.pruned, stats.merged) == (
        stats.entries_before, 1, 1,
    )
    assert stats.bytes_saved == len("noise") + len("deploy uses blue")
    assert len(memory) == 5 - 2 + 100
    merged = await memory.get(keep.id)
    assert merged is not None
    assert merged.memory == "Deploy  uses BLUE"
    assert merged.created_at == t0
    assert merged.relevance == 1.0
    assert merged.tags == ("infra",)
    assert merged.validated
    assert await memory.get(dup.id) is None


async def test_close_then_every_call_raises_closed() -> None:
    async with open_memory() as memory:
        await memory.store(fact("x"))
    for call in (
        memory.store(fact("y")),
        memory.retrieve("x"),
        memory.retrieve_scored("x"),
        memory.delete(uuid.uuid4()),
        memory.consolidate(),
        memory.get(uuid.uuid4()),
    ):
        with pytest.raises(trio.ClosedResourceError):
            await call
    with pytest.raises(trio.ClosedResourceError):
        memory.store_nowait(fact("z"))
    with pytest.raises(trio.ClosedResourceError):
        memory.snapshot()


async def test_pending_callers_get_closed_error_when_memory_closes() -> None:
    errors: list[BaseException] = []
    answered: list[str] = []

    async def caller(memory: Memory, text: str) -> None:
        try:
            await memory.store(fact(text))
            answered.append(text)
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    async with trio.open_nursery() as outside:
        async with open_memory(queue_size=1) as memory:
            gate = gate_owner(memory)
            outside.start_soon(caller, memory, "in the owner")
            await trio.testing.wait_all_tasks_blocked()
            outside.start_soon(caller, memory, "queued")
            await trio.testing.wait_all_tasks_blocked()
            for i in range(3):
                outside.start_soon(caller, memory, f"waiting for room {i}")
            await trio.testing.wait_all_tasks_blocked()
            gate.open.set()
    # What reached the channel was applied and answered; the rest got a defined error.
    assert answered == ["in the owner", "queued"]
    assert len(errors) == 3


async def test_serve_memory_with_nursery_start() -> None:
    async with trio.open_nursery() as nursery:
        memory = await nursery.start(serve_memory)
        await memory.store(fact("served"))
        assert len(memory) == 1
        await memory.aclose()
        await memory.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError):
        await memory.store(fact("after"))


class _PoisonScorer:
    name = "poison"

    def make_index(self) -> Any:
        inner = actormem.WordOverlapScorer().make_index()

        class Index:
            def add(self, rec: Any) -> None:
                if rec.entry.memory == "poison":
                    raise RuntimeError("bug in the index")
                inner.add(rec)

            def add_many(self, recs: list[Any]) -> None:  # add of each, as the contract says
                for rec in recs:
                    self.add(rec)

            def __getattr__(self, name: str) -> Any:
                return getattr(inner, name)

        return Index()

    def score_entry(self, *args: Any) -> float:
        raise NotImplementedError


async def test_owner_death_breaks_every_call_and_crashes_loudly() -> None:
    caught: list[BaseException] = []
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            memory = await nursery.start(
                lambda task_status: serve_memory(scorer=_PoisonScorer(), task_status=task_status)
            )

            async def victim() -> None:
                try:
                    await memory.store(fact("poison"))
                except trio.BrokenResourceError as exc:
                    caught.append(exc)

            async with trio.open_nursery() as inner:
                inner.start_soon(victim)
    assert info.group_contains(RuntimeError, match="bug in the index")
    (exc,) = caught
    assert isinstance(exc.__cause__, RuntimeError)
    with pytest.raises(trio.BrokenResourceError) as later:
        await memory.store(fact("later"))
    assert isinstance(later.value.__cause__, RuntimeError)
    with pytest.raises(trio.BrokenResourceError):
        await memory.retrieve("x")


async def test_body_exceptions_are_not_wrapped() -> None:
    with pytest.raises(KeyError):
        async with open_memory():
            raise KeyError("mine")


async def test_idle_memory_uses_no_cpu(autojump_clock: trio.testing.MockClock) -> None:
    steps: list[str] = []

    class Count(trio.abc.Instrument):
        def before_task_step(self, task: trio.lowlevel.Task) -> None:
            steps.append(task.name)

    async with open_memory() as memory:
        await memory.store(fact("x"))
        await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.add_instrument(Count())
        await trio.sleep(3600)
        owner_steps = [name for name in steps if "serve_memory" in name or "owner" in name]
        assert owner_steps == []
        assert memory.statistics().queue_depth == 0


def test_handles_have_no_public_constructor() -> None:
    with pytest.raises(TypeError):
        Memory()
    with pytest.raises(TypeError):
        Snapshot()


async def test_cancelled_owner_answers_every_queued_request(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # With the autojump clock a caller left waiting forever trips fail_after at once.
    errors: list[BaseException] = []

    async def caller(memory: Memory, text: str) -> None:
        try:
            await memory.store(fact(text))
        except trio.ClosedResourceError as exc:
            errors.append(exc)

    with trio.fail_after(3600):
        async with trio.open_nursery() as outside, trio.open_nursery() as owner_nursery:
            memory = await owner_nursery.start(
                lambda task_status: serve_memory(queue_size=2, task_status=task_status)
            )
            gate = gate_owner(memory)
            outside.start_soon(caller, memory, "in the owner")
            await trio.testing.wait_all_tasks_blocked()
            for i in range(5):  # 2 queued, 3 waiting for room
                outside.start_soon(caller, memory, f"pending {i}")
            await trio.testing.wait_all_tasks_blocked()
            assert gate.entered == 1
            assert memory.statistics().queue_depth == 2
            owner_nursery.cancel_scope.cancel()
    # Every caller got a defined error; none is left waiting (the nursery exited).
    assert len(errors) == 6


async def test_owner_death_answers_more_than_one_batch_of_pending_requests(
    autojump_clock: trio.testing.MockClock,
) -> None:
    outcomes: list[str] = []

    async def victim(memory: Memory, text: str) -> None:
        try:
            await memory.store(fact(text))
            outcomes.append("stored")
        except trio.BrokenResourceError:
            outcomes.append("broken")

    with pytest.raises(BaseExceptionGroup), trio.fail_after(3600):
        async with trio.open_nursery() as nursery:
            memory = await nursery.start(
                lambda task_status: serve_memory(scorer=_PoisonScorer(), task_status=task_status)
            )
            gate = gate_owner(memory)
            async with trio.open_nursery() as callers:
                callers.start_soon(victim, memory, "first")  # the owner parks on it
                await trio.testing.wait_all_tasks_blocked()
                callers.start_soon(victim, memory, "poison")  # queued first
                await trio.testing.wait_all_tasks_blocked()
                for i in range(599):
                    callers.start_soon(victim, memory, f"after {i}")
                await trio.testing.wait_all_tasks_blocked()
                gate.open.set()
    # The poison's batch takes 512 requests and 88 stay queued: all are answered.
    assert len(outcomes) == 601
    assert outcomes.count("stored") == 1
    assert outcomes.count("broken") == 600


async def test_on_remove_reports_every_removal_with_its_cause() -> None:
    removed: list[tuple[str, str]] = []
    async with open_memory(
        capacity=4, on_remove=lambda e, cause: removed.append((e.memory, cause))
    ) as memory:
        a, b, c = fact("a", 0.5), fact("b"), fact("c")
        for e in (a, b, c, fact("d")):
            await memory.store(e)
        await memory.store(MemoryEntry(id=b.id, category=MemoryCategory.FACT, memory="b2"))
        await memory.store(fact("e"))  # full: evicts the lowest weighted recency, "a"
        await memory.delete(c.id)
        await memory.store(fact("B2 "))
        await memory.consolidate()  # folds "B2 " into the earlier "b2"
        await memory.store(fact("tiny", 0.01))
        await memory.consolidate()
    assert removed == [
        ("b", "replaced"),
        ("a", "evicted"),
        ("c", "deleted"),
        ("B2 ", "merged"),
        ("tiny", "pruned"),
    ]
    with pytest.raises(TypeError):
        async with open_memory(on_remove="no"):  # type: ignore[arg-type]
            pass


async def test_caller_cancelled_while_parked_on_its_reply() -> None:
    # The owner holds a batch of three stores (parked in its commit); one caller is
    # cancelled while parked on its reply. Answering must skip it (it already got
    # Cancelled from trio) and still wake the other two; its store stays applied.
    async with open_memory() as memory:
        gate = gate_owner(memory)
        results: dict[str, str] = {}

        async def caller(text: str, scope: trio.CancelScope) -> None:
            with scope:
                await memory.store(fact(text))
                results[text] = "stored"
                return
            results[text] = "cancelled"

        scopes = {t: trio.CancelScope() for t in ("a", "b", "c")}
        async with trio.open_nursery() as nursery:
            for text, scope in scopes.items():
                nursery.start_soon(caller, text, scope)
            await trio.testing.wait_all_tasks_blocked()
            assert gate.entered == 1  # one batch holding all three
            scopes["b"].cancel()
            await trio.testing.wait_all_tasks_blocked()
            assert results == {"b": "cancelled"}
            gate.open.set()
        assert results == {"a": "stored", "b": "cancelled", "c": "stored"}
        assert sorted(e.memory for e in memory.snapshot()) == ["a", "b", "c"]
        # A cancel that lands after the answer is a no-op for the request.
        await memory.store(fact("d"))
        assert len(memory) == 4


async def test_reply_given_before_the_caller_parks() -> None:
    # queue_size=1: callers wait for room in send(); the owner drains a waiting
    # caller's request, applies and answers it in the same step, so the caller finds
    # its answer already there when send() returns and must not park.
    async with open_memory(queue_size=1) as memory:
        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(memory.store, fact(f"entry {i}"))
        assert len(memory) == 50
        memory._state._check()


async def test_request_reply_box() -> None:
    from outcome import Error, Value

    from actormem._engine.memory import _STORE, _Request

    # Answered before the wait: no park, the value or the error comes straight back.
    req = _Request(_STORE, None, True)
    req.set(Value(42))
    req.set(Value(0))  # a second answer is ignored
    assert await req.wait() == 42
    req = _Request(_STORE, None, True)
    req.set(Error(KeyError("k")))
    with pytest.raises(KeyError):
        await req.wait()
    # Answered while parked: the waiter is rescheduled with the outcome.
    req = _Request(_STORE, None, True)
    got: list[Any] = []

    async def waiter() -> None:
        got.append(await req.wait())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert req.task is not None
        assert not got
        req.set(Value("done"))
        assert req.task is None
    assert got == ["done"]
    # Cancelled while parked: the abort forgets the task; a later answer wakes nobody.
    req = _Request(_STORE, None, True)
    with trio.CancelScope() as scope:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(req.wait)
            await trio.testing.wait_all_tasks_blocked()
            scope.cancel()
    assert scope.cancelled_caught
    assert req.task is None
    req.set(Value(1))
    assert req.task is None
