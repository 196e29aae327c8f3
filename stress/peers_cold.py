"""Where the peers benchmark's actormem figures go: the same questions cold and warm.

``stress.bench --scenario peers`` times each actormem call right after the peer's call on
the same query (docs/benchmarks.md, "The peers at 1M: actormem's side cold and warm").
This script serves the bench's two memories (word overlap, BM25; ``build_state`` and
``serve_state``, the bench's corpus and question order) beside the seed's reference list
built from a fresh batch of the same entries (as the bench does), and times
``memory.retrieve(q, 10)`` by thread CPU in these orders, one after another:

* ``bench warm-up``: questions 0-4, the seed's scan before each call (``choose_queries``);
* ``after the scan``: questions 0 to ``--q``, the scan before each call (the bench's order);
* ``back to back``: the same questions, no scan (twice);
* ``flushed``: the same, a write of ``--flush-mib`` MiB before each call (the last level
  cache emptied, nothing else of the scan);
* ``fresh``: ``--q`` other questions (from number 1000), first time, then again;
* ``fresh after the scan``: those with the scan before each call (``--no-fresh-scan``
  skips it: at 1M each scan is seconds of CPU);
* ``top_k``: ``index.top_k`` (the core benches' call) on the first questions, warm and
  after the flush.

Each line gives p50 and p99 in ms, and the collections that ran inside the calls
(``gc.callbacks``). Usage::

    python -m stress.peers_cold --data ../shared/data --n 100000 --q 20
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_engine import build_state, serve_state
from .peers import ReferenceStore

__all__ = ["main"]


def _p50_p99(ns: Sequence[int]) -> tuple[float, float]:
    xs = sorted(ns)
    return statistics.median(xs) / 1e6, xs[min(len(xs) - 1, int(0.99 * len(xs)))] / 1e6


class _GcTimer:
    """Thread CPU of the collections that run, via ``gc.callbacks``."""

    def __init__(self) -> None:
        self.ns = 0
        self.runs = 0
        self._start = 0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time_ns()
        else:
            self.ns += time.thread_time_ns() - self._start
            self.runs += 1


async def _run(args: argparse.Namespace) -> list[str]:
    corpus = load_corpus(str(args.data), 0, True)
    states = {}
    for scorer in ("word-overlap", "bm25"):
        states[scorer], _ = build_state(corpus, args.n, scorer)
    gc.collect()
    gc.freeze()
    questions = corpus.queries[: args.q]
    fresh = corpus.queries[1000 : 1000 + args.q]
    buf = bytearray(args.flush_mib << 20)
    mib = b"\1" * (1 << 20)

    def flush() -> None:
        view = memoryview(buf)
        for off in range(0, len(buf), 1 << 20):
            view[off : off + (1 << 20)] = mib

    timer = _GcTimer()
    gc.callbacks.append(timer)
    lines: list[str] = []
    ref = ReferenceStore()
    ref.build(list(entries(corpus, args.n)))  # not frozen, as in the bench
    thread = time.thread_time_ns
    try:
        async with serve_state(states["word-overlap"]) as wo, serve_state(states["bm25"]) as bm:
            memories = {"word-overlap": wo, "bm25": bm}

            async def order(label: str, queries: Sequence[str], before: str | None) -> None:
                times: dict[str, list[int]] = {k: [] for k in memories}
                runs = dict.fromkeys(memories, 0)
                gc_ns = dict.fromkeys(memories, 0)
                for q in queries:
                    for name, memory in memories.items():
                        if before == "scan":
                            await ref.retrieve(q, 10)
                        elif before == "flush":
                            flush()
                        runs0, ns0 = timer.runs, timer.ns
                        start = thread()
                        await memory.retrieve(q, 10)
                        times[name].append(thread() - start)
                        runs[name] += timer.runs - runs0
                        gc_ns[name] += timer.ns - ns0
                for name in memories:
                    p50, p99 = _p50_p99(times[name])
                    lines.append(
                        f"{label:24s} {name:12s} p50 {p50:.3f} p99 {p99:.3f} ms; "
                        f"collections {runs[name]}, {gc_ns[name] / 1e6:.1f} ms"
                    )
                    print(lines[-1], flush=True)

            await order("bench warm-up", questions[:5], "scan")
            await order("after the scan", questions, "scan")
            await order("back to back", questions, None)
            await order("flushed", questions, "flush")
            await order("back to back again", questions, None)
            await order("fresh", fresh, None)
            await order("fresh again", fresh, None)
            if not args.no_fresh_scan:
                await order("fresh after the scan", fresh, "scan")
            for name, state in states.items():
                view = state.view()
                warm: list[int] = []
                cold: list[int] = []
                for q in questions:
                    start = thread()
                    state.index.top_k(view, q, 10, None)
                    warm.append(thread() - start)
                    flush()
                    start = thread()
                    state.index.top_k(view, q, 10, None)
                    cold.append(thread() - start)
                (w50, w99), (c50, c99) = _p50_p99(warm), _p50_p99(cold)
                lines.append(
                    f"{'top_k warm / flushed':24s} {name:12s} p50 {w50:.3f} / {c50:.3f} "
                    f"p99 {w99:.3f} / {c99:.3f} ms"
                )
                print(lines[-1], flush=True)
    finally:
        gc.callbacks.remove(timer)
        gc.unfreeze()
    return lines


def main(argv: Sequence[str] | None = None) -> list[str]:
    """Run the orders (see the module docs); the lines printed."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--n", type=int, default=100_000, help="entries per memory")
    p.add_argument("--q", type=int, default=20, help="questions per order")
    p.add_argument("--flush-mib", type=int, default=512, help="MiB written to flush")
    p.add_argument("--no-fresh-scan", action="store_true", help="skip the last scan order")
    args = p.parse_args(argv)
    return trio.run(_run, args)


if __name__ == "__main__":
    main()
