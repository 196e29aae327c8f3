"""Branch ``mainjob12``: the main job's paths outside the index, each against the path
before it (its knob off): the same results, errors and bookkeeping.

* ``memory._ACCESS_BY_INT``: a retrieve's hits noted by the id's int; the owner's
  ``apply_access`` takes ints or UUIDs;
* ``memory._RETRIEVE_DIRECT``: ``retrieve`` without a ``ScoredEntry`` per hit;
* ``memory._HORIZON_REFS``: the oldest live snapshot read off the weak references;
* ``thresholds._UNWRAPPED``: without thresholds, the index's own steps;
* ``_util._PAUSE_CLASS``: ``gc_paused`` as a class;
* ``cli._swarm._ACCOUNT_BY_INT``: the accounting over the ids' ints;
* ``_entry._ID_POOL``: fresh ids' random bits read 64 ids at a time.
"""

from __future__ import annotations

import gc
import os
import types
import uuid
import weakref
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.memory as memory_mod
import actormem._entry as entry_mod
import actormem._index.thresholds as thresholds_mod
import actormem._util as util_mod
import actormem.cli._swarm as swarm_mod
from actormem import BM25Scorer, InvalidQueryError, MemoryCategory, MemoryEntry, open_memory
from actormem._engine.snapshot import run_retrieve_sliced
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.scoring import drain
from actormem._index.thresholds import thresholded_steps
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._record import Record
from actormem._util import gc_paused
from actormem.cli._swarm import CAUSES, Removals, check_accounting

from .strategies import examples

TEXTS = [
    "deploy the blue cluster",
    "the build failed on rust nightly",
    "search the logs for deploy errors",
    "glob files under src",
    "blue green deploy notes",
    "nothing in common here",
    "rust borrow checker errors",
    "cluster logs rotated",
]
QUERIES = ["deploy blue", "rust errors", "logs", "zzz", "", "the cluster deploy logs"]


class _Clock:
    """A clock that moves a second at each read (so every access time differs)."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


def _state(scorer: Any) -> MemoryState:
    return MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=scorer)


def _entry(i: int, text: str, relevance: float = 1.0) -> MemoryEntry:
    return MemoryEntry(
        id=uuid.UUID(int=(i + 1) * 0x1234567),
        category=MemoryCategory.FACT,
        memory=text,
        relevance=relevance,
        namespace=("ns", str(i % 2)),
        created_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


async def _session(
    monkeypatch: pytest.MonkeyPatch, on: bool, steps: list[tuple[str, int, int]], scorer: Any
) -> tuple[list[Any], list[tuple[Any, ...]], dict[str, int]]:
    """Store the texts, run the retrieves ``steps`` (query, k, namespace choice), with
    every knob of this branch ``on`` or off; the answers, the final entries' access
    bookkeeping and the counters."""
    monkeypatch.setattr(memory_mod, "_ACCESS_BY_INT", on)
    monkeypatch.setattr(memory_mod, "_RETRIEVE_DIRECT", on)
    monkeypatch.setattr(memory_mod, "_HORIZON_REFS", on)
    monkeypatch.setattr(thresholds_mod, "_UNWRAPPED", on)
    monkeypatch.setattr(util_mod, "_PAUSE_CLASS", on)
    answers: list[Any] = []
    options = {} if scorer is None else {"scorer": scorer}
    async with open_memory(clock=_Clock(), **options) as memory:
        for i, text in enumerate(TEXTS):
            await memory.store(_entry(i, text, 0.5 + 0.05 * i))
        held = memory.snapshot()  # an old snapshot: the horizon stays behind
        for query, k, which in steps:
            ns = None if which == 2 else ("ns", str(which))
            got = await memory.retrieve(query, k, namespace=ns)
            answers.append([(e.id, e.memory, e.access_count, e.last_accessed) for e in got])
            if on and got and memory._replica is None:
                # By record (memory._ACCESS_BY_REC), else by the id's int.
                kind = Record if memory_mod._ACCESS_BY_REC else int
                assert all(type(key) is kind for key in memory._pending_access)
            # The owner applies the hits with this store's batch at the latest (trio
            # picks the order of ready tasks at random: without it the two retrieves'
            # hits would fall in one batch or two by chance).
            await memory.store(_entry(97, f"between {query}"))
            scored = await memory.retrieve_scored(query, k, namespace=ns)
            answers.append([(s.score, s.entry.id, s.entry.access_count) for s in scored])
            answers.append(memory._horizon())
            await memory.store(_entry(99, f"late {query}"))  # a batch: the hits applied
        await memory.store(_entry(98, "flush"))
        final = sorted(
            (e.id, e.access_count, e.last_accessed, e.memory) for e in memory.snapshot()
        )
        stats = memory.statistics()
        counters = {"access_updates": stats.access_updates, "retrieves": stats.retrieves}
        del held
    return answers, final, counters


@settings(max_examples=examples(12), deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(QUERIES), st.integers(0, 5), st.integers(0, 2)),
        min_size=1,
        max_size=8,
    ),
    bm25=st.booleans(),
)
def test_retrieves_and_access_bookkeeping_match_the_path_before(
    steps: list[tuple[str, int, int]], bm25: bool
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        new = trio.run(_session, mp, True, steps, BM25Scorer() if bm25 else None)
    with pytest.MonkeyPatch.context() as mp:
        old = trio.run(_session, mp, False, steps, BM25Scorer() if bm25 else None)
    assert new == old
    found = any(answer for answer in new[0] if isinstance(answer, list))
    assert (new[2]["access_updates"] > 0) == found


@pytest.mark.parametrize("direct", [True, False])
async def test_retrieve_raises_as_before(monkeypatch: pytest.MonkeyPatch, direct: bool) -> None:
    monkeypatch.setattr(memory_mod, "_RETRIEVE_DIRECT", direct)
    async with open_memory() as memory:
        await memory.store(_entry(0, "deploy"))
        with pytest.raises(TypeError, match="query must be str"):
            await memory.retrieve(b"deploy", 3)  # type: ignore[arg-type]
        with pytest.raises(InvalidQueryError, match="limit must be >= 0"):
            await memory.retrieve("deploy", -1)
        with pytest.raises(InvalidQueryError):
            await memory.retrieve("deploy", 3, min_score=float("nan"))
        assert memory.statistics().retrieves == 0
        assert memory._pending_access == {}
        got = await memory.retrieve("deploy", 3, min_matched=1, min_score=0.5)
        assert [e.memory for e in got] == ["deploy"]
    with pytest.raises(trio.ClosedResourceError):
        await memory.retrieve("deploy", 3)


def test_apply_access_takes_ints_and_uuids_alike() -> None:
    def build() -> MemoryState:
        state = _state(WordOverlapScorer())
        for i, text in enumerate(TEXTS[:4]):
            state.store(_entry(i, text))
        state.delete(_entry(3, "").id)  # gone: its hits are ignored
        state.publish()
        return state

    when = datetime(2026, 2, 1, tzinfo=UTC)
    hits = {_entry(i, "").id: (i + 1, when + timedelta(minutes=i)) for i in range(4)}
    hits[uuid.UUID(int=12345)] = (7, when)  # never stored
    by_uuid, by_int = build(), build()
    assert by_uuid.apply_access(hits, 0) == 3
    assert by_int.apply_access({k.int: v for k, v in hits.items()}, 0) == 3
    for i in range(3):
        a = by_uuid.current(_entry(i, "").id)
        b = by_int.current(_entry(i, "").id)
        assert a is not None
        assert b is not None
        assert a.current_access() == b.current_access() == (i + 1, when + timedelta(minutes=i))
    assert by_uuid.version == by_int.version
    assert by_uuid.access_updates == by_int.access_updates == 3


async def test_horizon_reads_the_oldest_live_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_memory() as memory:
        await memory.store(_entry(0, "a"))
        first = memory.snapshot()
        await memory.store(_entry(1, "b"))
        second = memory.snapshot()
        await memory.store(_entry(2, "c"))
        seen = []
        for refs in (True, False):
            monkeypatch.setattr(memory_mod, "_HORIZON_REFS", refs)
            seen.append(memory._horizon())
        assert seen == [first.version] * 2
        del first
        gc.collect()
        for refs in (True, False):
            monkeypatch.setattr(memory_mod, "_HORIZON_REFS", refs)
            seen.append(memory._horizon())
        assert seen[2:] == [second.version] * 2
        del second
        for refs in (True, False):
            monkeypatch.setattr(memory_mod, "_HORIZON_REFS", refs)
            assert memory._horizon() == memory._state.published


@pytest.mark.parametrize("bm25", [False, True])
def test_thresholded_steps_unwrapped_give_the_same_steps(
    monkeypatch: pytest.MonkeyPatch, bm25: bool
) -> None:
    state = _state(BM25Scorer() if bm25 else WordOverlapScorer())
    for i, text in enumerate(TEXTS * 3):
        state.store(_entry(i, text, 0.3 + 0.02 * i))
    state.publish()
    view = state.view()
    for query in QUERIES:
        for min_score, min_matched in ((None, 0), (0.5, 0), (None, 1), (0.1, 2)):
            runs = []
            for unwrapped in (True, False):
                monkeypatch.setattr(thresholds_mod, "_UNWRAPPED", unwrapped)
                steps = thresholded_steps(
                    state.index, view, query, 5, None, min_score, min_matched
                )
                count = 0
                while True:
                    try:
                        next(steps)
                    except StopIteration as stop:
                        runs.append((count, stop.value))
                        break
                    count += 1
            # The same result (the step counts may differ: the index's word memo fills
            # at the first run).
            assert runs[0][1] == runs[1][1]
            assert drain(
                thresholded_steps(state.index, view, query, 5, None, min_score, min_matched)
            ) == runs[0][1]


async def test_an_index_that_raises_when_called_unpins_nothing_and_raises() -> None:
    """Without thresholds the index's ``top_k_steps`` is called by ``thresholded_steps``:
    inside ``run_retrieve_sliced``'s ``try``, so what it raises comes out as before."""

    class Boom:
        def top_k_steps(self, *args: Any) -> Any:
            raise RuntimeError("boom")

    state = _state(WordOverlapScorer())
    state.store(_entry(0, "a"))
    state.publish()
    state.index = Boom()  # type: ignore[assignment]
    registry: weakref.WeakSet[Any] = weakref.WeakSet()
    with pytest.raises(RuntimeError, match="boom"):
        await run_retrieve_sliced(state, state.view(), "a", 3, None, registry)
    gc.collect()
    assert len(registry) == 0


@pytest.mark.parametrize("as_class", [True, False])
def test_gc_paused_both_ways(monkeypatch: pytest.MonkeyPatch, as_class: bool) -> None:
    monkeypatch.setattr(util_mod, "_PAUSE_CLASS", as_class)
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(KeyError):
        with gc_paused():
            raise KeyError("x")
    assert gc.isenabled()
    assert util_mod._gc_pauses == {}
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # was off before: stays off
    finally:
        gc.enable()


def _ids(draw: Any, n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=draw(st.integers(0, 2**128 - 1))) for _ in range(n)]


@st.composite
def _scenarios(draw: Any) -> dict[str, Any]:
    pool = _ids(draw, draw(st.integers(1, 14)))
    pick = st.sampled_from(pool)
    return {
        "initial": draw(st.lists(pick, max_size=5, unique=True)),
        "stored": draw(st.lists(pick, max_size=12)),
        "present": draw(st.lists(pick, max_size=10, unique=True)),
        "before": draw(st.lists(st.tuples(pick, st.sampled_from(CAUSES)), max_size=3)),
        "during": draw(st.lists(st.tuples(pick, st.sampled_from(CAUSES)), max_size=12)),
        "uncertain": draw(st.lists(pick, max_size=4)),
        "growth": draw(st.lists(st.integers(0, 3), min_size=5, max_size=5)),
    }


def _stats(values: list[int]) -> Any:
    fields = ("upserts", "evictions", "pruned", "merged", "deletes")
    return types.SimpleNamespace(**dict(zip(fields, values, strict=True)))


def accountings(scenario: dict[str, Any], knobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``check_accounting``'s JSON for ``scenario`` (keys initial, stored, present,
    before, during, uncertain, growth) with each set of ``_swarm`` knobs in turn."""
    present = [
        MemoryEntry(id=i, category=MemoryCategory.FACT, memory="x") for i in scenario["present"]
    ]
    memory = types.SimpleNamespace(
        statistics=lambda: _stats(scenario["growth"]), snapshot=lambda: present
    )
    removals = Removals()
    removals.log.extend(scenario["before"])
    removals.start_run()
    removals.log.extend(scenario["during"])
    results = []
    for values in knobs:
        with pytest.MonkeyPatch.context() as mp:
            for name, value in values.items():
                mp.setattr(swarm_mod, name, value)
            results.append(
                check_accounting(
                    memory,  # type: ignore[arg-type]
                    initial=scenario["initial"],
                    stored=scenario["stored"],
                    removals=removals,
                    before=_stats([0] * 5),
                    uncertain=scenario["uncertain"],
                ).to_json()
            )
    return results


@settings(max_examples=examples(300), deadline=None)
@given(_scenarios())
def test_accounting_by_int_is_the_accounting(scenario: dict[str, Any]) -> None:
    results = accountings(scenario, [{"_ACCOUNT_BY_INT": True}, {"_ACCOUNT_BY_INT": False}])
    assert results[0] == results[1]
    assert results[0]["tracked"] >= len(scenario["initial"])


@pytest.mark.parametrize("pool", [64, 1, 0])
def test_fresh_ids_from_the_pool_are_random_version_4(
    monkeypatch: pytest.MonkeyPatch, pool: int
) -> None:
    monkeypatch.setattr(entry_mod, "_ID_POOL", pool)
    monkeypatch.setattr(entry_mod, "_ids", [])
    made = [entry_mod._new_id() for _ in range(300)]
    assert len(set(made)) == 300
    assert all(uuid.UUID(int=i).version == 4 for i in made)
    assert all(uuid.UUID(int=i).variant == uuid.RFC_4122 for i in made)
    assert len(entry_mod._ids) == (-300 % pool if pool else 0)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_does_not_reuse_the_parents_ids() -> None:
    entry_mod._new_id()  # the pool holds ids now
    assert entry_mod._ids
    ahead = list(entry_mod._ids)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.write(write, f"{len(entry_mod._ids)} {entry_mod._new_id()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as got:
        left, child_id = got.read().split()
    os.waitpid(pid, 0)
    assert left == "0"
    assert int(child_id) not in ahead
    assert entry_mod._ids == ahead
