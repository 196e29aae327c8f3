"""Scenario 5: actormem and its peers on the same entries and the same queries.

Each peer (see :mod:`stress.peers`) is built from the entries of the size's actormem
memories, then timed on a query list chosen so the peer and both actormem memories fit
the time budget together. On that list the three are timed interleaved, query by query
(peer, word overlap, BM25), so drifts in machine load hit all three alike; the ratios are
peer / actormem on exactly those calls. Every call runs on this thread (no peer hands its
work to another), so each is timed twice: wall time, and the thread's CPU time
(``time.thread_time_ns``). On a loaded machine wall time favours the short calls (a 2 ms
retrieve often runs within one time slice, a 2 s scan is preempted ~load/cores times),
so the ``cpu_`` ratios are the ones to compare across runs. A separate untimed pass
records ``agreement``: the mean fraction of the peer's top 10 that actormem's top 10 (same
formula family) also returns.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from actormem import Memory, MemoryEntry

from ._bench_retrieve import Budget, K, choose_queries
from ._bench_stats import summarize_ms
from .peers import (
    LangGraphStore,
    LockedDictStore,
    Peer,
    ReferenceStore,
    SQLiteFTS5Store,
    langgraph_available,
)

__all__ = ["PEER_NAMES", "make_peer", "peers_cell"]

#: Peer ids for ``--peers``, and which actormem scorer shares their formula family.
PEER_NAMES = {
    "reference": "word-overlap",
    "lockdict": "word-overlap",
    "fts5": "bm25",
    "langgraph": None,
    "langgraph-hash": None,
}


def make_peer(name: str) -> Peer | None:
    """A fresh peer, or None if its package is not installed."""
    if name == "reference":
        return ReferenceStore()
    if name == "lockdict":
        return LockedDictStore()
    if name == "fts5":
        return SQLiteFTS5Store()
    if name in ("langgraph", "langgraph-hash"):
        if not langgraph_available():
            return None
        return LangGraphStore("none" if name == "langgraph" else "hash")
    raise ValueError(f"unknown peer {name!r}")


async def _interleaved(
    calls: dict[str, Callable[[str], Awaitable[object]]], queries: Sequence[str], repeats: int
) -> dict[str, dict[str, Any]]:
    perf, cpu = time.perf_counter_ns, time.thread_time_ns
    samples: dict[str, list[int]] = {name: [] for name in calls}
    cpu_samples: dict[str, list[int]] = {name: [] for name in calls}
    for _ in range(repeats):
        for q in queries:
            for name, call in calls.items():
                t0, c0 = perf(), cpu()
                await call(q)
                samples[name].append(perf() - t0)
                cpu_samples[name].append(cpu() - c0)
    return {
        name: {**summarize_ms(s), **summarize_ms(cpu_samples[name], prefix="cpu_")}
        for name, s in samples.items()
    }


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


async def peers_cell(
    name: str,
    entries: Sequence[MemoryEntry],
    memories: dict[str, Memory],
    queries: Sequence[str],
    budget: Budget,
    agreement_queries: int = 50,
) -> dict[str, Any] | None:
    """Scenario 5's row for peer ``name`` at ``len(entries)`` entries (None: not installed)."""
    peer = make_peer(name)
    if peer is None:
        return None
    try:
        start = time.perf_counter()
        peer.build(entries)
        build_s = time.perf_counter() - start

        async def peer_call(q: str) -> object:
            return await peer.retrieve(q, K)

        def actormem_call(scorer: str) -> Callable[[str], Awaitable[object]]:
            memory = memories[scorer]

            async def call(q: str) -> object:
                return await memory.retrieve(q, K)

            return call

        calls: dict[str, Callable[[str], Awaitable[object]]] = {"peer": peer_call}
        for scorer in memories:
            calls[scorer] = actormem_call(scorer)

        async def all_calls(q: str) -> object:
            for call in calls.values():
                await call(q)
            return None

        # The budget covers the peer and the actormem calls interleaved with it.
        chosen = await choose_queries(all_calls, queries, budget)
        timed = await _interleaved(calls, chosen, budget.repeats)

        family = PEER_NAMES[name]
        agreement = None
        if family is not None and family in memories:
            fracs = []
            for q in chosen[:agreement_queries]:
                mine = {str(e.id) for e in await memories[family].retrieve(q, K)}
                theirs = await peer.retrieve(q, K)
                if theirs:
                    fracs.append(sum(1 for i in theirs if i in mine) / len(theirs))
            agreement = sum(fracs) / len(fracs) if fracs else None

        row: dict[str, Any] = {
            "peer": peer.name,
            "compares": peer.compares,
            "n": len(entries),
            "build_entries_per_s": len(entries) / build_s if build_s > 0 else float("inf"),
            "queries": len(chosen),
            "repeats": budget.repeats,
            "p50_ms": timed["peer"]["p50_ms"],
            "p99_ms": timed["peer"]["p99_ms"],
            "cpu_p50_ms": timed["peer"]["cpu_p50_ms"],
            "cpu_p99_ms": timed["peer"]["cpu_p99_ms"],
            "agreement_top10": agreement,
            "formula_family": family,
        }
        for scorer in memories:
            row[f"{scorer}_p50_ms"] = timed[scorer]["p50_ms"]
            row[f"{scorer}_p99_ms"] = timed[scorer]["p99_ms"]
            row[f"ratio_p50_vs_{scorer}"] = _ratio(timed["peer"]["p50_ms"], timed[scorer]["p50_ms"])
            row[f"ratio_p99_vs_{scorer}"] = _ratio(timed["peer"]["p99_ms"], timed[scorer]["p99_ms"])
            for q in ("p50", "p99"):
                mine_ms = timed[scorer][f"cpu_{q}_ms"]
                row[f"{scorer}_cpu_{q}_ms"] = mine_ms
                row[f"cpu_ratio_{q}_vs_{scorer}"] = _ratio(timed["peer"][f"cpu_{q}_ms"], mine_ms)
        return row
    finally:
        peer.close()
