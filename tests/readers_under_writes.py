"""A driver shared by the tests of reader-side structures the owner keeps up to date
(the long lists' bitsets, the lists by token id): retrieves read a step at a time, some
abandoned, while the owner stores, deletes, purges and renumbers between the steps;
every finished one is compared with another path on the same snapshot."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState, View
from actormem._index.scoring import drain
from actormem._index.wordoverlap import knobs as wo_knobs

BASE = datetime(2026, 1, 1, tzinfo=UTC)


def unmemoized_state() -> MemoryState:
    """A word-overlap state that caches no match set (the budget): every retrieve reads
    its words' lists again."""
    return MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=1 << 40)
    )


def entry_maker(
    rng: np.random.Generator,
    words: Sequence[str],
    chances: Sequence[float],
    tail: Callable[[int], str],
) -> Callable[[], MemoryEntry]:
    """A factory of facts: each of ``words`` with its chance, then ``tail(n)`` for the
    n-th entry (1, 2, ...), which is also its id and its second of creation."""
    count = 0

    def entry() -> MemoryEntry:
        nonlocal count
        count += 1
        picked = [w for w, p in zip(words, chances, strict=True) if rng.random() < p]
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join([*picked, tail(count)]),
            relevance=float(rng.choice([0.2, 0.6, 1.0])),
            created_at=BASE + timedelta(seconds=count),
            id=uuid.UUID(int=count),
        )

    return entry


def path_with(
    monkeypatch: pytest.MonkeyPatch, state: MemoryState, knob: str, value: object
) -> Callable[[View, str], list[tuple[float, int]]]:
    """The top 5 of a query at a view with word overlap's ``knob`` set to ``value``."""

    def top5(view: View, q: str) -> list[tuple[float, int]]:
        with monkeypatch.context() as m:
            m.setattr(wo_knobs, knob, value)
            return [(s, r.seq) for s, r in drain(state.index.top_k_steps(view, q, 5, None))]  # type: ignore[attr-defined]

    return top5


def run(
    state: MemoryState,
    entry: Callable[[], MemoryEntry],
    queries: list[str],
    rng: np.random.Generator,
    off: Callable[[View, str], list[tuple[float, int]]],
    after_writes: Callable[[], None] = lambda: None,
) -> int:
    """Fill ``state`` with 40-120 ``entry()``s, then 60 turns: maybe start a retrieve
    (top 5) of one of ``queries``, advance each running one 1-3 steps (5% abandoned),
    store 0-9 entries, delete up to a quarter of the live ones, publish, vacuum to the
    oldest snapshot read, ``after_writes()``; then finish the rest. Every finished
    retrieve must equal ``off(its view, its query)`` as ``(score, seq)`` pairs. Returns
    how many finished."""

    running: dict[int, tuple[View, str, Any]] = {}
    checked = 0

    def step(key: int) -> bool:
        """Advance one running retrieve a step; once it ends, compare it and drop it."""
        nonlocal checked
        view, q, gen = running[key]
        try:
            next(gen)
        except StopIteration as stop:
            got = stop.value
        else:
            return False
        assert [(s, r.seq) for s, r in got] == off(view, q), q
        checked += 1
        del running[key]
        return True

    for _ in range(int(rng.integers(40, 120))):
        state.store(entry())
    state.publish()
    for turn in range(60):
        if turn < 45 and rng.random() < 0.5:
            view = state.view()
            q = queries[int(rng.integers(0, len(queries)))]
            running[turn] = (view, q, state.index.top_k_steps(view, q, 5, None))  # type: ignore[attr-defined]
        for key in list(running):
            view, q, gen = running[key]
            if rng.random() < 0.05:
                gen.close()  # abandoned mid-way
                del running[key]
                continue
            for _ in range(int(rng.integers(1, 4))):
                if step(key):
                    break
        for _ in range(int(rng.integers(0, 10))):
            state.store(entry())
        alive = [rec.entry.id for rec in state.view().records()]
        for i in rng.permutation(len(alive))[: int(rng.integers(0, 1 + len(alive) // 4))]:
            state.delete(alive[int(i)])
        state.publish()
        oldest = min([state.published, *(v.version for v, _, _ in running.values())])
        state.vacuum(oldest)
        after_writes()
    while running:
        for key in list(running):
            step(key)
    state.vacuum(state.published)
    state._check()
    return checked
