"""A driver shared by the tests of reader-side structures the owner keeps up to date
(the long lists' bitsets, the lists by token id): retrieves read a step at a time, some
abandoned, while the owner stores, deletes, purges and renumbers between the steps;
every finished one is compared with another path on the same snapshot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from actormem import MemoryEntry
from actormem._engine.state import MemoryState, View


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

    def finished(view: View, q: str, got: list[Any]) -> None:
        assert [(s, r.seq) for s, r in got] == off(view, q), q

    for _ in range(int(rng.integers(40, 120))):
        state.store(entry())
    state.publish()
    running: dict[int, tuple[View, str, Any]] = {}
    checked = 0
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
                try:
                    next(gen)
                except StopIteration as stop:
                    finished(view, q, stop.value)
                    checked += 1
                    del running[key]
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
            view, q, gen = running[key]
            try:
                next(gen)
            except StopIteration as stop:
                finished(view, q, stop.value)
                checked += 1
                del running[key]
    state.vacuum(state.published)
    state._check()
    return checked
