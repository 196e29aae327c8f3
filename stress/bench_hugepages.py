"""Huge pages for the indexes' large arrays, knob on against off, BM25 or word overlap.

The advice is given when memory is allocated, so the two sides cannot share one index:
each run of this module builds one index (``--huge on`` or ``off``: the indexes'
``knobs._HUGE_PAGES``) and times the questions on it; run it in alternation (on, off,
on, off ...) and compare the summed CPU. Per run: the thread CPU of each query (run once
untimed first, then ``--repeat`` times timed, the least kept), summed and its p50; the
process's ``AnonHugePages`` and RSS (``/proc/self/smaps_rollup``) after the build; and
a hash of every top 10, which must be the same on both sides. Prints one JSON line.

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
    p.add_argument("--huge", choices=("on", "off"), required=True)
    p.add_argument("--scorer", choices=("bm25", "wo"), default="bm25")
    p.add_argument("--set", default="questions")
    args = p.parse_args(argv)
    bm25_knobs._HUGE_PAGES = wo_knobs._HUGE_PAGES = args.huge == "on"
    corpus = load_corpus(args.data, args.seed)
    queries = query_sets(corpus, args.data, args.queries, args.seed)[args.set]
    scorer: Any = BM25Scorer() if args.scorer == "bm25" else WordOverlapScorer()
    state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=scorer)
    built = time.process_time()
    fill_state(state, entries(corpus, args.size))
    built = time.process_time() - built
    gc.collect()
    gc.freeze()
    mem = rollup()
    view, index = state.view(), state.index
    digest = hashlib.sha256()
    cpu: list[float] = []
    for query in queries:
        top = index.top_k(view, query, 10, None)
        digest.update(repr([(round(s, 12), r.seq) for s, r in top]).encode())
        best = float("inf")
        for _ in range(args.repeat):
            start = time.thread_time_ns()
            index.top_k(view, query, 10, None)
            best = min(best, (time.thread_time_ns() - start) / 1e6)
        cpu.append(best)
    cpu.sort()
    out = {
        "huge": args.huge,
        "scorer": args.scorer,
        "size": args.size,
        "queries": len(cpu),
        "sum_ms": round(sum(cpu), 2),
        "p50_ms": round(cpu[len(cpu) // 2], 4),
        "build_cpu_s": round(built, 1),
        "rss_kB": mem.get("Rss"),
        "anon_huge_kB": mem.get("AnonHugePages"),
        "top_sha": digest.hexdigest()[:16],
    }
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
