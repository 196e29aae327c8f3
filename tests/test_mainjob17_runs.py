"""Branch ``mainjob17``: the owner's batches, each against the path before it (its
knob off): the same state, journal, removals, replies and answers.

* ``memory._STORE_RUNS``: a batch's runs of plain ``store``/``store_nowait`` requests
  applied by one ``MemoryState.store_many`` each;
* ``memory._WAIT_UNSCOPED``: the owner waits without a cancel scope when nothing
  expires.

The batches are applied directly (``Memory._apply_batch``, the owner's own call, on two
memories, one knob setting each), so both sides see exactly the same requests in the
same batches; the durable side defers its index adds as the owner does
(``defer_index`` ... ``flush_index``).
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import outcome
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.memory as memory_mod
from actormem import InvalidEntryError, MemoryCategory, MemoryEntry, open_memory
from actormem._engine.memory import Memory, _Request
from actormem._index.wordoverlap import WordOverlapScorer

from .strategies import examples
from .test_store_batch import _snapshot

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["deploy", "blue", "rust", "the", "logs", "cluster", "é", "x.y", '{"k":1}']
IDS = [uuid.UUID(int=i + 1) for i in range(6)]


class _Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


#: One request: (op, payload). Ops: "store", "nowait", "many", "delete", "flush",
#: "consolidate", "sweep", "delete_key"; entries described by (text, id, key, ttl, ns).
_entry_parts = st.tuples(
    st.lists(st.sampled_from(WORDS), min_size=0, max_size=4).map(" ".join),
    st.one_of(st.none(), st.sampled_from(IDS)),
    st.one_of(st.none(), st.sampled_from(["k1", "k2"])),
    st.sampled_from([None, None, None, 60.0]),
    st.sampled_from([(), ("a",), ("a", "b")]),
    st.sampled_from([0.1, 0.5, 1.0]),
)
_requests = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["store", "store", "store", "nowait"]), _entry_parts),
        st.tuples(st.sampled_from(["store", "store", "store", "nowait"]), _entry_parts),
        st.tuples(st.sampled_from(["store", "store", "store", "nowait"]), _entry_parts),
        st.tuples(st.just("many"), st.lists(_entry_parts, max_size=3)),
        st.tuples(st.just("delete"), st.sampled_from(IDS)),
        st.tuples(st.just("delete_key"), st.sampled_from(["k1", "k2"])),
        st.tuples(st.sampled_from(["flush", "consolidate", "sweep"]), st.none()),
    ),
    max_size=14,
)


def _entry(parts: tuple[Any, ...], n: int) -> MemoryEntry:
    text, ident, key, ttl, ns, rel = parts
    return MemoryEntry(
        category=MemoryCategory.TRAJECTORY,
        memory=text or f"empty {n}",
        id=ident or uuid.UUID(int=1000 + n),
        key=key,
        ttl=ttl,
        namespace=ns,
        relevance=rel,
        created_at=T0 + timedelta(seconds=n),
    )


def _build(spec: list[tuple[str, Any]], start: int) -> list[_Request]:
    """Fresh requests (each side its own: a request is answered once)."""
    out: list[_Request] = []
    n = start
    for op, arg in spec:
        n += 1
        if op == "store":
            out.append(_Request(memory_mod._STORE, _entry(arg, n), True))
        elif op == "nowait":
            out.append(_Request(memory_mod._STORE_NOWAIT, _entry(arg, n), False))
        elif op == "many":
            entries = []
            for parts in arg:
                n += 1
                entries.append(_entry(parts, n))
            out.append(_Request(memory_mod._STORE_MANY, tuple(entries), True))
        elif op == "delete":
            out.append(_Request(memory_mod._DELETE, arg, True))
        elif op == "delete_key":
            out.append(_Request(memory_mod._DELETE_KEY, ((), arg), True))
        elif op == "flush":
            out.append(memory_mod._FLUSH_REQUEST)
        elif op == "consolidate":
            out.append(_Request(memory_mod._CONSOLIDATE, None, True))
        else:
            out.append(_Request(memory_mod._SWEEP, None, True))
    return out


def _reply(result: outcome.Outcome[Any]) -> Any:
    if isinstance(result, outcome.Error):
        return ("error", type(result.error).__name__, str(result.error))
    value = result.unwrap()
    return ("value", value if not hasattr(value, "__attrs_attrs__") else repr(value))


def _apply(memory: Memory, batch: list[_Request], durable: bool) -> list[Any]:
    state = memory._state
    if durable:
        state.defer_index()
    replies = memory._apply_batch(batch)
    if durable:
        state.flush_index()
    state.publish()
    out = []
    for req, result in replies:
        out.append((batch.index(req), _reply(result)))
    return out


def _answers(memory: Memory) -> list[Any]:
    view = memory._state.view()
    found = []
    for q in ["deploy blue", "rust logs", "the", "x.y cluster"]:
        hits = memory._state.index.top_k(view, q, 5, None)  # type: ignore[attr-defined]
        found.append([(score, rec.entry.id, rec.seq) for score, rec in hits])
    return found


async def _two(
    durable: bool, tmp: Any, stack: contextlib.AsyncExitStack
) -> tuple[list[Memory], dict[bool, list[Any]]]:
    removed: dict[bool, list[Any]] = {True: [], False: []}
    mems = []
    for on in (True, False):
        path = None if not durable else str(tmp / f"m{on}.db")
        mems.append(
            await stack.enter_async_context(
                open_memory(
                    path=path,
                    scorer=WordOverlapScorer(),
                    clock=_Clock(),
                    on_remove=lambda e, cause, on=on: removed[on].append((e.id, cause)),
                )
            )
        )
    return mems, removed


def _run_batches(batches: list[list[tuple[str, Any]]], durable: bool, tmp: Any) -> None:
    async def run() -> None:
        async with contextlib.AsyncExitStack() as stack:
            (on, off), removed = await _two(durable, tmp, stack)
            start = 0
            knob_before = memory_mod._STORE_RUNS
            try:
                for i, spec in enumerate(batches):
                    got = {}
                    for knob, memory in ((True, on), (False, off)):
                        memory_mod._STORE_RUNS = knob
                        if i % 2 and memory._state._live:  # access hits to apply first
                            recs = list(memory._state._by_id.values())[:2]
                            memory._pending_access = {
                                r.entry._id: (2, T0 + timedelta(hours=1)) for r in recs
                            }
                        got[knob] = _apply(memory, _build(spec, start), durable)
                    start += 100
                    assert got[True] == got[False]
                    assert _snapshot(on._state) == _snapshot(off._state)
                    assert _answers(on) == _answers(off)
                    assert removed[True] == removed[False]
                    assert _counts(on) == _counts(off)
            finally:
                memory_mod._STORE_RUNS = knob_before

    trio.run(run)


def _counts(memory: Memory) -> dict[Any, Any]:
    return {
        k: None if r.access is None else (r.access.count, r.access.last, r.access.version)
        for k, r in memory._state._by_id.items()
    }


@given(st.lists(_requests, min_size=1, max_size=5))
@settings(max_examples=examples(12), deadline=None)
def test_store_runs_agree_in_memory(batches: list[list[tuple[str, Any]]]) -> None:
    _run_batches(batches, False, None)


@given(st.lists(_requests, min_size=1, max_size=3))
@settings(max_examples=examples(5), deadline=None)
def test_store_runs_agree_durable(tmp_path_factory: Any, batches: list[Any]) -> None:
    _run_batches(batches, True, tmp_path_factory.mktemp("d"))


def test_store_run_error_answers_its_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ActorMemError inside a run (none is known for plain entries: one is forced
    here by a state whose store raises for one text) answers the request of that entry,
    the ones before and after it stored, as the path one store at a time does."""
    from actormem._engine.state import MemoryState

    real_store = MemoryState._store

    def failing(self: MemoryState, entry: MemoryEntry, new_seq: int | None) -> Any:
        if entry.memory == "boom":
            raise InvalidEntryError("boom refused")
        return real_store(self, entry, new_seq)

    monkeypatch.setattr(MemoryState, "_store", failing)
    monkeypatch.setattr(MemoryState, "store_many", _store_many_by_store)
    spec = [("store", ("a b", None, None, None, (), 1.0)) for _ in range(3)]
    spec.insert(1, ("store", ("boom", None, None, None, (), 1.0)))
    spec.append(("store", ("boom", None, None, None, (), 1.0)))

    async def run() -> None:
        results = {}
        for knob in (True, False):
            monkeypatch.setattr(memory_mod, "_STORE_RUNS", knob)
            async with open_memory(scorer=WordOverlapScorer()) as memory:
                got = _apply(memory, _build(spec, 0), False)
                results[knob] = (got, _snapshot(memory._state), memory._state.stores)
        assert results[True] == results[False]
        assert [r[1][0] for r in results[True][0]] == ["value", "error", "value", "value", "error"]

    trio.run(run)


def test_store_run_error_after_every_store_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ActorMemError raised by ``store_many`` after every store of the run was counted
    (an index failing late) answers the run's last request; the owner keeps serving."""
    from actormem._engine.state import MemoryState

    def late(self: MemoryState, entries: Any, now: Any = None) -> None:
        _store_many_by_store(self, entries, now)
        raise InvalidEntryError("late refusal")

    monkeypatch.setattr(MemoryState, "store_many", late)
    monkeypatch.setattr(memory_mod, "_STORE_RUNS", True)
    spec = [("store", (f"t{i} x", None, None, None, (), 1.0)) for i in range(3)]

    async def run() -> None:
        async with open_memory(scorer=WordOverlapScorer()) as memory:
            got = _apply(memory, _build(spec, 0), False)
            assert [r[1][0] for r in got] == ["value", "value", "error"]
            assert memory._state._live == 3
            # the owner still serves
            await memory.store(MemoryEntry(memory="after the run", category=MemoryCategory.FACT))
            assert memory._state._live == 4

    trio.run(run)


def _store_many_by_store(self: Any, entries: Any, now: Any = None) -> None:
    for entry in entries:  # store_many's contract: store() after store(), stops at an error
        self.store(entry, now)


def test_store_runs_used_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of two or more plain stores go through store_many (ttl entries, other ops
    and lone stores do not); with the knob off, never."""
    calls: list[int] = []
    from actormem._engine.state import MemoryState

    real = MemoryState.store_many

    def counting(self: MemoryState, entries: Any, now: Any = None) -> None:
        calls.append(len(entries))
        real(self, entries, now)

    monkeypatch.setattr(MemoryState, "store_many", counting)
    plain = ("a b", None, None, None, (), 1.0)
    ttl = ("c", None, None, 60.0, (), 1.0)
    spec = [
        ("store", plain), ("flush", None), ("nowait", plain), ("store", plain),
        ("store", ttl), ("store", plain), ("delete", IDS[0]), ("store", plain),
        ("store", plain),
    ]  # fmt: skip

    async def run() -> None:
        for knob, want in ((True, [3, 2]), (False, [])):
            calls.clear()
            monkeypatch.setattr(memory_mod, "_STORE_RUNS", knob)
            async with open_memory(scorer=WordOverlapScorer(), clock=_Clock()) as memory:
                _apply(memory, _build(spec, 0), False)
                assert memory._state.stores == 7
            assert calls == want

    trio.run(run)


@pytest.mark.parametrize("unscoped", [True, False])
def test_owner_waits_with_and_without_scope(
    monkeypatch: pytest.MonkeyPatch, unscoped: bool
) -> None:
    """The owner's wait: stores answered, and an expiring entry swept at its time, with
    the scope skipped while nothing expires (``_WAIT_UNSCOPED``) or always entered."""
    monkeypatch.setattr(memory_mod, "_WAIT_UNSCOPED", unscoped)
    removed: list[str] = []

    async def run() -> None:
        clock = _Clock()
        async with open_memory(
            scorer=WordOverlapScorer(), clock=clock, on_remove=lambda e, c: removed.append(c)
        ) as memory:
            await memory.store(MemoryEntry(category=MemoryCategory.FACT, memory="kept"))
            assert len(memory) == 1
            await memory.store(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory="gone",
                    # (each reading of this clock moves it 1 s on, and len() reads it once:
                    # an expiry 3 s ahead outlives the owner's and len()'s readings)
                    expires_at=clock.now + timedelta(seconds=3),
                )
            )
            assert len(memory) == 2
            clock.now += timedelta(seconds=10)  # past its expiry: the next sweep drops it
            assert len(memory) == 1  # expired: never counted, even before the sweep
            with trio.fail_after(5):
                while removed != ["expired"]:  # noqa: ASYNC110 (the owner sweeps on its own)
                    await trio.sleep(0.01)
        assert removed == ["expired"]

    trio.run(run)
