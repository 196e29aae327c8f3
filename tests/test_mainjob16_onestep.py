"""A small word-overlap retrieve running its steps in one task step
(``snapshot._ONE_STEP_SMALL``, ``_WordOverlapIndex.one_step_ok``) against the sliced
path before it: the same hits, scores, ties and access counts; still one schedule
point; slices kept for a large numbering, a long query, other scorers and
``RETRIEVE_SLICE`` 0."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.snapshot as snapshot
from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples

_WORDS = ["deploy", "deploys", "blue", "the", "then", "rust", "go", "a", "ab", "é", "x.y"]
_TAGS = ["infra", "deploy", "x"]
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


def _clock() -> datetime:
    return _NOW


def _entry(rng: random.Random, i: int) -> MemoryEntry:
    words = rng.choices(_WORDS, k=rng.randint(0, 8))
    if rng.random() < 0.3:
        words.append(f"id{rng.randint(0, 50)}")
    return MemoryEntry(
        id=uuid.UUID(int=rng.getrandbits(128), version=4),
        category=rng.choice(list(MemoryCategory)),
        memory=" ".join(words) if words else "the",
        tags=rng.sample(_TAGS, rng.randint(0, 2)),
        relevance=rng.choice([0.2, 0.5, 0.9, 1.0]),
        namespace=("a",) if rng.random() < 0.7 else ("b",),
    )


class _Counting:
    """Counts the calls of ``snapshot._run_sliced`` (the sliced path)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        real = snapshot._run_sliced

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await real(*args, **kwargs)

        monkeypatch.setattr(snapshot, "_run_sliced", counted)


async def _run(seed: int, ops: int) -> list[Any]:
    """A seeded workload of stores, deletes and retrieves of every kind; what each
    retrieve gave (ids and scores, best first) and the access counts at the end."""
    rng = random.Random(seed)
    out: list[Any] = []
    async with open_memory(clock=_clock) as memory:
        ids = []
        for i in range(ops):
            r = rng.random()
            if r < 0.55 or not ids:
                e = _entry(rng, i)
                await memory.store(e)
                ids.append(e.id)
            elif r < 0.62:
                await memory.delete(ids.pop(rng.randrange(len(ids))))
            else:
                query = " ".join(rng.choices(_WORDS + ["deploy blue", "zz"], k=rng.randint(0, 12)))
                kwargs: dict[str, Any] = {}
                if rng.random() < 0.2:
                    kwargs["namespace"] = ["a"]
                if rng.random() < 0.2:
                    kwargs["tags"] = [rng.choice(_TAGS)]
                if rng.random() < 0.15:
                    kwargs["min_matched"] = rng.randint(1, 2)
                if rng.random() < 0.15:
                    kwargs["min_score"] = rng.choice([0.3, 0.6])
                hits = await memory.retrieve_scored(query, rng.choice([1, 3, 10, 100]), **kwargs)
                # (An entry's access_count as returned is its view's: when the owner
                # applied the earlier retrieves' accesses is the scheduler's business.)
                out.append([(h.entry.id, h.score) for h in hits])
        # A write's batch applies the accesses the retrieves left (when the owner
        # ran meanwhile is the scheduler's business; what it applies is the same).
        await memory.store(_entry(rng, ops))
        snap = memory.snapshot()
        out.append(sorted((e.id.int, e.access_count) for e in snap))
    return out


@settings(max_examples=examples(12), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 160))
def test_same_results_and_access_counts_either_way(seed: int, ops: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(snapshot, "_ONE_STEP_SMALL", True)
        on = trio.run(_run, seed, ops)
        mp.setattr(snapshot, "_ONE_STEP_SMALL", False)
        off = trio.run(_run, seed, ops)
    assert on == off


async def test_small_retrieve_takes_no_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", True)
    counting = _Counting(monkeypatch)
    rng = random.Random(3)
    async with open_memory() as memory:
        for i in range(200):
            await memory.store(_entry(rng, i))
        got = await memory.retrieve_scored("deploy blue the", 5)
        assert counting.calls == 0
        snap = memory.snapshot()
        assert [(h.entry.id, h.score) for h in got] == [
            (h.entry.id, h.score) for h in snap.retrieve_scored("deploy blue the", 5)
        ]
        # The query's length and the numbering's groups are the limits.
        query = "deploy " * (wo_knobs._ONE_STEP_CHARS // 7) + "x" * (wo_knobs._ONE_STEP_CHARS % 7)
        assert len(query) == wo_knobs._ONE_STEP_CHARS
        await memory.retrieve(query, 3)
        assert counting.calls == 0
        await memory.retrieve(query + "y", 3)
        assert counting.calls == 1
        monkeypatch.setattr(wo_knobs, "_ONE_STEP_GROUPS", memory._state.index._e.n - 1)
        await memory.retrieve("deploy", 3)
        assert counting.calls == 2
        monkeypatch.setattr(wo_knobs, "_ONE_STEP_GROUPS", memory._state.index._e.n)
        await memory.retrieve("deploy", 3)
        assert counting.calls == 2
        # A zero slice (a checkpoint at every yield) slices every retrieve.
        monkeypatch.setattr(snapshot, "RETRIEVE_SLICE", 0.0)
        await memory.retrieve("deploy", 3)
        assert counting.calls == 3
        monkeypatch.setattr(snapshot, "RETRIEVE_SLICE", 1e-4)
        monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", False)
        await memory.retrieve("deploy", 3)
        assert counting.calls == 4


async def test_other_scorers_are_sliced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", True)
    counting = _Counting(monkeypatch)
    async with open_memory(scorer=BM25Scorer()) as memory:
        await memory.store(_entry(random.Random(1), 0))
        await memory.retrieve("deploy", 3)
    assert counting.calls == 1


@pytest.mark.parametrize("on", [True, False])
async def test_small_retrieve_is_a_schedule_point(
    on: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", on)
    async with open_memory() as memory:
        await memory.store(_entry(random.Random(2), 0))
        for _ in range(3):
            with trio.testing.assert_checkpoints():  # a schedule point, as before
                await memory.retrieve("deploy", 3)
        # A cancelled retrieve raises at its cancel point, before any scoring.
        with trio.CancelScope() as scope:
            scope.cancel()
            await memory.retrieve("deploy", 3)
            pytest.fail("not cancelled")  # pragma: no cover


def test_one_step_ok_is_the_index_method() -> None:
    index = WordOverlapScorer().make_index()
    assert index.one_step_ok("a" * wo_knobs._ONE_STEP_CHARS)
    assert not index.one_step_ok("a" * (wo_knobs._ONE_STEP_CHARS + 1))
