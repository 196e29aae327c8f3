"""Huge pages for the indexes' large arrays, knob on against off, BM25 or word overlap.

The advice is given when memory is allocated, so the two sides cannot share one index:
``--huge on`` or ``off`` builds one index with the indexes' ``knobs._HUGE_PAGES`` so
(run them in alternation and compare), ``--huge both`` builds one of each in this
process (off first; ``--on-first``: on first) and runs every query on both in turn,
alternating which goes first.
Per side: the thread CPU of each query (run once untimed first, then ``--repeat`` times
timed, the least kept), summed, its p50 and p99; what the build added to the process's
RSS and ``AnonHugePages`` (``/proc/self/smaps_rollup``); and a hash of every top 10,
which must be the same on both sides. Prints one JSON line a side.

Usage (from the repository root)::

    python -m stress.bench_hugepages --data ../shared/data --size 1000000 --huge on
    python -m stress.bench_hugepages --data ../shared/data --size 1000000 --huge off --scorer wo
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from actormem import BM25Scorer, WordOverlapScorer
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.wordoverlap import knobs as wo_knobs

from ._bench_data import DEFAULT_DATA, entries, load_corpus, query_sets
from ._bench_engine import fill_state


def rollup() -> dict[str, int]:
    """``Rss`` and ``AnonHugePages`` of this process in kB (``/proc/self/smaps_rollup``;
    empty off Linux)."""
    out: dict[str, int] = {}
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Rss", "AnonHugePages"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m stress.bench_hugepages", description=__doc__)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--huge", choices=("on", "off", "both"), required=True)
    p.add_argument("--on-first", action="store_true", help="with both: build on first")
    p.add_argument("--scorer", choices=("bm25", "wo"), default="bm25")
    p.add_argument("--set", default="questions")
    args = p.parse_args(argv)
    corpus = load_corpus(args.data, args.seed)
    queries = query_sets(corpus, args.data, args.queries, args.seed)[args.set]
    sides = (
        (["on", "off"] if args.on_first else ["off", "on"]) if args.huge == "both" else [args.huge]
    )
    built: dict[str, Any] = {}
    for side in sides:  # one index per side, the knob set while it is built
        bm25_knobs._HUGE_PAGES = wo_knobs._HUGE_PAGES = side == "on"
        before = rollup()
        scorer: Any = BM25Scorer() if args.scorer == "bm25" else WordOverlapScorer()
        state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=scorer)
        start = time.process_time()
        fill_state(state, entries(corpus, args.size))
        cpu_s = time.process_time() - start
        gc.collect()
        after = rollup()
        built[side] = (state, cpu_s, {k: after.get(k, 0) - before.get(k, 0) for k in after})
    gc.freeze()
    digests = {side: hashlib.sha256() for side in sides}
    cpu: dict[str, list[float]] = {side: [] for side in sides}
    for i, query in enumerate(queries):
        order = sides if i % 2 == 0 else sides[::-1]  # alternate which side goes first
        for side in order:
            state = built[side][0]
            view, index = state.view(), state.index
            top = index.top_k(view, query, 10, None)  # untimed: warms the query's lists
            digests[side].update(repr([(round(s, 12), r.seq) for s, r in top]).encode())
            best = float("inf")
            for _ in range(args.repeat):
                start_ns = time.thread_time_ns()
                index.top_k(view, query, 10, None)
                best = min(best, (time.thread_time_ns() - start_ns) / 1e6)
            cpu[side].append(best)
    for side in sides:
        times = sorted(cpu[side])
        state, cpu_s, grew = built[side]
        out = {
            "huge": side,
            "scorer": args.scorer,
            "size": args.size,
            "queries": len(times),
            "sum_ms": round(sum(times), 2),
            "p50_ms": round(times[len(times) // 2], 4),
            "p99_ms": round(times[min(len(times) - 1, len(times) * 99 // 100)], 4),
            "build_cpu_s": round(cpu_s, 1),
            "build_rss_kB": grew.get("Rss"),
            "build_anon_huge_kB": grew.get("AnonHugePages"),
            "process": rollup(),
            "top_sha": digests[side].hexdigest()[:16],
        }
        print(json.dumps(out), flush=True)
    if len(sides) == 2:
        assert digests["on"].digest() == digests["off"].digest(), "different top-10s"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
