"""Build big memories fast, and serve them with the real owner loop.

Storing through the owner costs the channel round trip on top of the state's own work,
so a 1M-entry memory takes minutes that read benchmarks do not need to spend. For the
scenarios about reads, :func:`build_state` fills the I/O-free
:class:`~actormem._engine.state.MemoryState` directly (the same ``store`` the owner calls, one
call per entry, publishing and vacuuming after every 512 as the owner does after a
batch), and :func:`serve_state` puts that state behind a
real :func:`~actormem.open_memory`, so retrieves, snapshots and later stores go through
the public API and the real owner task.

:func:`serve_state` swaps the state into the fresh :class:`~actormem.Memory` before the
owner task first runs (it reads ``memory._state`` when it starts). That touches one
private attribute; :func:`check_served` proves the owner really writes the prebuilt
state, so a change in the engine that breaks the swap fails the benchmark loudly
instead of measuring an empty memory.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager

import trio

from actormem import BM25Scorer, Memory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.scoring import Scorer

from ._bench_data import Corpus, entries

__all__ = ["SCORERS", "build_state", "check_served", "serve_state", "store_paired"]

#: The scorers the benchmarks compare, by the name the tables use.
SCORERS: dict[str, type[WordOverlapScorer] | type[BM25Scorer]] = {
    "word-overlap": WordOverlapScorer,
    "bm25": BM25Scorer,
}


def make_scorer(name: str) -> Scorer:
    return SCORERS[name]()


#: Stores per publish and vacuum in :func:`fill_state`: the owner's largest batch.
BATCH = 512


def fill_state(state: MemoryState, batch: Iterable[MemoryEntry]) -> None:
    """Store ``batch`` as the owner would: publish and vacuum after every ``BATCH``
    stores (the vacuum also lets scorers trim per-version statistics, e.g. BM25's)."""
    store = state.store
    for i, entry in enumerate(batch, 1):
        store(entry)
        if i % BATCH == 0:
            state.publish()
            state.vacuum(state.published)
    state.publish()
    state.vacuum(state.published)


def store_paired(
    states: dict[bool, MemoryState],
    batch: Sequence[MemoryEntry],
    chunk: int,
    switch: Callable[[bool], None],
    fill: Callable[[MemoryState, Sequence[MemoryEntry]], None] = fill_state,
) -> dict[bool, float]:
    """Store cost of two paths, A/B in one run: ``batch`` in chunks of ``chunk``, each
    chunk into both states (``True`` first on even chunks, ``False`` first on odd ones)
    after ``switch(path)``, with ``fill(state, chunk)``. Returns the thread CPU seconds
    per path. O(len(batch)) stores per path.

    A batch of fewer than eight chunks is cut into eight: with one chunk the side stored
    first paid alone for what the process had not touched yet (a 1,000-entry cost read
    x2.4 for the side first with identical code)."""
    chunk = max(1, min(chunk, len(batch) // 8))
    cpu = dict.fromkeys(states, 0.0)
    for k, lo in enumerate(range(0, len(batch), chunk)):
        part = batch[lo : lo + chunk]
        for on in (False, True) if k % 2 else (True, False):
            switch(on)
            start = time.thread_time()
            fill(states[on], part)
            cpu[on] += time.thread_time() - start
    return cpu


def build_state(corpus: Corpus, n: int, scorer: str) -> tuple[MemoryState, float]:
    """A published state of ``n`` corpus entries, and the seconds its stores took."""
    state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make_scorer(scorer))
    batch = list(entries(corpus, n))
    start = time.perf_counter()
    fill_state(state, batch)
    return state, time.perf_counter() - start


@asynccontextmanager
async def serve_state(state: MemoryState) -> AsyncIterator[Memory]:
    """``async with serve_state(state) as memory``: the public API over a prebuilt state."""
    async with open_memory(scorer=state.scorer) as memory:
        memory._state = state  # before the owner's first step: see the module docs
        yield memory


async def check_served(memory: Memory, state: MemoryState, corpus: Corpus) -> None:
    """Store one entry through ``memory``, delete it, and assert that ``state`` saw both.

    Raises:
        AssertionError: The owner writes another state (the swap no longer works).
    """
    (probe,) = entries(corpus, 1, start=10**8)
    before = len(state)
    await memory.store(probe)
    stale = "the owner does not write the prebuilt state: update stress/_bench_engine.py"
    assert len(state) == before + 1, stale
    assert memory.snapshot().get(probe.id) is not None, stale
    assert await memory.delete(probe.id)
    assert len(state) == before
    await trio.lowlevel.checkpoint()
