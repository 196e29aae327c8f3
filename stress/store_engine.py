"""The owner's store path alone: 64 writers ``await memory.store(e)`` in memory.

Usage (from the project root)::

    python -m stress.store_engine [--entries 20000] [--writers 64] [--repeats 3]
        [--scorers stub word-overlap]

``stub`` is a scorer whose index does nothing (``add``/``retire``/``purge`` are no-ops),
so its rows measure the engine's own share: the channel round trip, the owner loop,
publishing, vacuum and :meth:`MemoryState.store` (validation, duplicate key, the
relevance and eviction orders). ``word-overlap`` is the default scorer. Also measured:
the bare channel floor of :mod:`stress._bench_store`. Reported per cell: entries/s over
the wall time, process CPU seconds per 1,000 entries (less sensitive to a shared
machine than wall time), p50/p99 latency in ms; the median run of ``--repeats``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterable
from typing import Any

import trio

from actormem import open_memory
from actormem._record import Record

from ._bench_data import entries, load_corpus
from ._bench_engine import make_scorer
from ._bench_stats import summarize_ms
from ._bench_store import _drive, _floor_run


class _StubIndex:
    def add(self, rec: Record) -> None:
        pass

    def retire(self, rec: Record) -> None:
        pass

    def purge(self, rec: Record) -> None:
        pass

    def top_k(self, view: Any, query: str, limit: int, accept: Any) -> list[Any]:
        return []

    def _check(self, live: Iterable[Record]) -> None:
        pass


class StubScorer:
    """A scorer whose index does nothing: isolates the engine's own cost."""

    name = "stub"

    def make_index(self) -> _StubIndex:
        return _StubIndex()

    def score_entry(self, entry_text: str, tags: Any, relevance: float, query: str) -> float:
        return 0.0


async def _run(scorer_name: str, batch: list[Any], writers: int) -> tuple[float, float, list[int]]:
    cpu0 = time.process_time()
    if scorer_name == "floor":
        wall, lat = await _floor_run(batch, writers)
    else:
        scorer = StubScorer() if scorer_name == "stub" else make_scorer(scorer_name)
        async with open_memory(scorer=scorer) as memory:
            wall, lat = await _drive(memory.store, batch, writers)
            assert len(memory) == len(batch)
    return wall, time.process_time() - cpu0, lat


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20000)
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scorers", nargs="+", default=["floor", "stub", "word-overlap"])
    args = parser.parse_args(argv)
    batch = list(entries(load_corpus(), args.entries))
    runs: dict[str, list[tuple[float, float, list[int]]]] = {s: [] for s in args.scorers}
    for _ in range(args.repeats):
        for s in args.scorers:  # interleaved, so load elsewhere hits every cell alike
            runs[s].append(trio.run(_run, s, batch, args.writers))
    print(f"{args.entries} entries, {args.writers} writers, median of {args.repeats}")
    print("| scorer | entries/s | CPU s/1k | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for s, rs in runs.items():
        rs.sort(key=lambda r: r[0])
        wall, cpu, lat = rs[len(rs) // 2]
        cpus = sorted(r[1] for r in rs)
        st = summarize_ms(lat)
        print(
            f"| {s} | {len(batch) / wall:,.0f} | {1000 * cpus[len(cpus) // 2] / len(batch):.4f} "
            f"| {st['p50_ms']:.3f} | {st['p99_ms']:.3f} |"
        )


if __name__ == "__main__":
    main()
