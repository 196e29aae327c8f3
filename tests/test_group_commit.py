"""Group commit overlapped with indexing: deferred index calls and the commit thread."""

from __future__ import annotations

import random
import threading
import uuid

import pytest
import trio

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.memory import _in_thread_while
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.scoring import Scorer

WORDS = ["deploy", "error", "cache", "retry", "timeout", "user", "plan", "disk", "Deploy"]


def _ops(seed: int, n: int) -> list[tuple[str, MemoryEntry | uuid.UUID | None]]:
    rng = random.Random(seed)
    ids: list[uuid.UUID] = []
    ops: list[tuple[str, MemoryEntry | uuid.UUID | None]] = []
    for _ in range(n):
        r = rng.random()
        if r < 0.6 or not ids:
            text = " ".join(rng.choices(WORDS, k=rng.randint(1, 5)))
            e = MemoryEntry(category=MemoryCategory.FACT, memory=text, relevance=rng.random())
            ids.append(e.id)
            ops.append(("store", e))
        elif r < 0.75:  # upsert
            e = MemoryEntry(
                id=rng.choice(ids), category=MemoryCategory.FACT, memory=rng.choice(WORDS)
            )
            ops.append(("store", e))
        elif r < 0.9:
            ops.append(("delete", rng.choice(ids)))
        else:
            ops.append(("consolidate", None))
    return ops


@pytest.mark.parametrize("scorer", [WordOverlapScorer(), BM25Scorer()], ids=lambda s: s.name)
@pytest.mark.parametrize("seed", range(3))
def test_deferred_indexing_gives_the_same_state(scorer: Scorer, seed: int) -> None:
    states = [
        MemoryState(capacity=25, half_life=DEFAULT_HALF_LIFE, scorer=scorer) for _ in range(2)
    ]
    immediate, deferred = states
    rng = random.Random(seed)
    ops = _ops(seed, 400)
    i = 0
    while i < len(ops):
        batch = ops[i : i + rng.randint(1, 30)]
        i += len(batch)
        deferred.defer_index()
        for state in states:
            for op, arg in batch:
                if op == "store":
                    assert isinstance(arg, MemoryEntry)
                    state.store(arg)
                elif op == "delete":
                    assert isinstance(arg, uuid.UUID)
                    state.delete(arg)
                else:
                    state.consolidate()
            if state is deferred:
                state.flush_index()
            state.publish()
            state.vacuum(state.published)
            state._check()
        for query in ["deploy", "error cache", "plan disk retry", "zzz"]:
            got = [
                [(score, rec.entry.id) for score, rec in s.index.top_k(s.view(), query, 5, None)]
                for s in states
            ]
            assert got[0] == got[1]


def test_publish_before_flush_is_a_bug() -> None:
    state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    state.defer_index()
    state.store(MemoryEntry.new(MemoryCategory.FACT, "x"))
    with pytest.raises(AssertionError):
        state.publish()
    state.flush_index()
    state.publish()
    state._check()


async def test_commit_thread_runs_while_the_owner_indexes() -> None:
    started = threading.Event()
    seen: list[bool] = []

    def write(arg: str) -> None:  # the "commit": waits until indexing has begun
        seen.append(started.wait(timeout=30))

    def meanwhile() -> None:  # the "indexing": runs only once the thread is going
        started.set()

    await _in_thread_while(write, "batch", meanwhile)
    assert seen == [True]


async def test_errors_of_either_side_propagate_after_the_thread_ends() -> None:
    finished = threading.Event()

    def write(arg: str) -> None:
        finished.wait(timeout=30)

    def meanwhile_fails() -> None:
        finished.set()
        raise RuntimeError("bug in the index")

    with pytest.raises(RuntimeError, match="bug in the index"):
        await _in_thread_while(write, "batch", meanwhile_fails)

    def write_fails(arg: str) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        await _in_thread_while(write_fails, "batch", lambda: None)


async def test_cancellation_waits_for_the_commit_thread() -> None:
    release = threading.Event()
    wrote: list[str] = []

    def write(arg: str) -> None:
        release.wait(timeout=30)
        wrote.append(arg)

    with trio.CancelScope() as scope:
        scope.cancel()  # already cancelled: the shielded wait still sees the write end

        def meanwhile() -> None:
            release.set()

        await _in_thread_while(write, "batch", meanwhile)
    assert wrote == ["batch"]
