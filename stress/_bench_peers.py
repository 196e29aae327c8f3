"""Scenario 5: actormem and its peers on the same entries and the same queries.

Each peer (see :mod:`stress.peers`) is built from the entries of the size's actormem
memories, then timed on a query list chosen so the peer and both actormem memories fit
the time budget together. Two orders are timed, in alternating blocks of
:data:`BLOCK` queries so that drifts in machine load hit both alike:

* **interleaved** (the headline figures, ``p50_ms``, ``ratio_p50_vs_*``): on the chosen
  list, query by query (peer, word overlap, BM25). Each actormem call runs right after the
  peer's call on the same query; after the seed's scan of 1M entries (seconds of CPU
  touching gigabytes) actormem's index is out of the CPU's caches, so these are *cold*
  figures (docs/benchmarks.md, "The peers at 1M: actormem's side cold and warm").
* **blocks** (``warm_*`` keys): on the next as many queries of the list (none timed
  before in the cell), a block of queries on the peer, then the same block on each
  actormem memory in turn: every actormem call but a block's first follows actormem's own
  calls, as in a service answering query after query, and as the core benchmarks
  (``stress.bench_wocore``, ``stress.bench_bm25_core``) time it.

The ratios are peer / actormem on the same calls of one order. Every call runs on this
thread (no peer hands its work to another), so each is timed twice: wall time, and the
thread's CPU time (``time.thread_time_ns``). On a loaded machine wall time favours the
short calls (a 2 ms retrieve often runs within one time slice, a 2 s scan is preempted
~load/cores times), so the ``cpu_`` ratios are the ones to compare across runs. A separate
untimed pass records ``agreement``: the mean fraction of the peer's top 10 that
actormem's top 10 (same formula family) also returns.
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

__all__ = ["BLOCK", "PEER_NAMES", "block_orders", "make_peer", "peers_cell"]

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


#: Queries a block of the two timed orders (see the module docs).
BLOCK = 10


def block_orders(
    names: Sequence[str], cold: Sequence[str], warm: Sequence[str], block: int = BLOCK
) -> list[tuple[str, str, str]]:
    """The calls of one repeat, in order, as ``(order, name, query)``: ``names[0]`` is the
    peer, the others actormem's memories. Per block of ``block`` queries: the block of
    ``cold`` query by query (each query on every name in turn; order ``"interleaved"``),
    then the block of ``warm`` name by name (each name on the whole block; order
    ``"blocks"``). O(len(names) * (len(cold) + len(warm))).

    Raises:
        ValueError: ``block`` < 1.
    """
    if block < 1:
        raise ValueError(f"block must be >= 1, not {block}")
    out: list[tuple[str, str, str]] = []
    for lo in range(0, max(len(cold), len(warm)), block):
        for q in cold[lo : lo + block]:
            out.extend(("interleaved", name, q) for name in names)
        for name in names:
            out.extend(("blocks", name, q) for q in warm[lo : lo + block])
    return out


async def _timed_orders(
    calls: dict[str, Callable[[str], Awaitable[object]]],
    cold: Sequence[str],
    warm: Sequence[str],
    repeats: int,
) -> dict[str, dict[str, dict[str, Any]]]:
    """``{order: {name: figures}}`` of :func:`block_orders`' calls, ``repeats`` times."""
    perf, cpu = time.perf_counter_ns, time.thread_time_ns
    orders = ("interleaved", "blocks")
    samples: dict[str, dict[str, list[int]]] = {o: {name: [] for name in calls} for o in orders}
    cpu_samples: dict[str, dict[str, list[int]]] = {o: {n: [] for n in calls} for o in orders}
    plan = block_orders(list(calls), cold, warm)
    for _ in range(repeats):
        for order, name, q in plan:
            call = calls[name]
            t0, c0 = perf(), cpu()
            await call(q)
            samples[order][name].append(perf() - t0)
            cpu_samples[order][name].append(cpu() - c0)
    return {
        o: {
            name: {**summarize_ms(s), **summarize_ms(cpu_samples[o][name], prefix="cpu_")}
            for name, s in samples[o].items()
        }
        for o in orders
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
        # The blocks' order on the next as many queries (none of them timed before).
        warm = list(queries[len(chosen) : 2 * len(chosen)])
        both = await _timed_orders(calls, chosen, warm, budget.repeats)
        timed = both["interleaved"]

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
        # The blocks' order: actormem warm (its calls follow its own), the same keys
        # prefixed ``warm_``.
        blocks = both["blocks"]
        row["warm_queries"] = len(warm)
        for key in ("p50_ms", "p99_ms", "cpu_p50_ms", "cpu_p99_ms"):
            row[f"warm_{key}"] = blocks["peer"][key]
        for scorer in memories:
            for q in ("p50", "p99"):
                for kind in ("", "cpu_"):
                    mine_ms = blocks[scorer][f"{kind}{q}_ms"]
                    row[f"warm_{scorer}_{kind}{q}_ms"] = mine_ms
                    row[f"warm_{kind}ratio_{q}_vs_{scorer}"] = _ratio(
                        blocks["peer"][f"{kind}{q}_ms"], mine_ms
                    )
        return row
    finally:
        peer.close()
