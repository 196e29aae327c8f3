"""Retrieve CPU with the compiled index kernels against the numpy reference, in one run.

For each size and scorer, one memory of real texts (``stress._bench_data``: tool calls
and LoCoMo turns, marked per cycle) is built once; then every query runs twice in turn,
once with the kernels and once with the reference path (``kernels.ENABLED``), and the
thread CPU time of each ``index.top_k(view, query, 10, None)`` is taken. The two paths
must return identical top-10s (scores and ties), or the run fails. Two query sets:

* ``questions``: LoCoMo questions (about 10 words), as the earlier benchmarks;
* ``tool results``: the result of a real tool call as the query, what the swarm's agents
  retrieve with (the main job: median 59 words, up to 24,000 characters of JSON).

Usage (from the repository root)::

    python -m stress.bench_kernels --sizes 10000,100000 --queries 200 [--json out.json]

Prints one line per cell and, with ``--json``, every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from typing import Any

from actormem._index import kernels

from ._bench_args import add_paired_args
from ._bench_data import DEFAULT_DATA, load_corpus, query_sets
from ._bench_engine import build_state
from ._bench_stats import paired_line, summarize_cpu_ms, time_paired

K = 10


def time_both(index: Any, view: Any, queries: Sequence[str]) -> dict[str, Any]:
    """Per query, the reference then the kernels (then the other order on the next
    query): thread CPU in ms, and a check that both give the same top-k."""

    def switch(compiled: bool) -> None:
        kernels.ENABLED = compiled

    cpu = time_paired(
        queries,
        switch,
        lambda _, query: index.top_k(view, query, K, None),
        "the kernels and the reference",
    )
    kernels.ENABLED = kernels.AVAILABLE
    out: dict[str, Any] = {"queries": len(queries)}
    out["numpy"] = summarize_cpu_ms(cpu[False])
    out["kernels"] = summarize_cpu_ms(cpu[True])
    out["ratio_p50"] = out["numpy"]["p50_ms"] / out["kernels"]["p50_ms"]
    out["ratio_mean"] = out["numpy"]["mean_ms"] / out["kernels"]["mean_ms"]
    return out


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stress.bench_kernels", description=__doc__)
    add_paired_args(p, [10_000, 100_000], DEFAULT_DATA)
    p.add_argument("--scorers", default="word-overlap,bm25")
    args = p.parse_args(argv)
    if not kernels.AVAILABLE:
        p.error("the compiled kernels are not built (pip install -e .)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    corpus = load_corpus(args.data, args.seed)
    sets = query_sets(corpus, args.data, args.queries, args.seed)
    cells = []
    for size in args.sizes:
        for scorer in args.scorers.split(","):
            state, build_s = build_state(corpus, size, scorer)
            gc.freeze()
            view, index = state.view(), state.index
            for name, queries in sets.items():
                for query in queries[:3]:  # warm caches on both paths
                    index.top_k(view, query, K, None)
                cell = {"size": size, "scorer": scorer, "queries_of": name, "build_s": build_s}
                cell.update(time_both(index, view, queries))
                cells.append(cell)
                print(
                    f"{scorer:12} n={size:>9,} {name:12} {paired_line(cell, 'numpy', 'kernels')},"
                    f" x{cell['ratio_mean']:.2f} mean",
                    flush=True,
                )
            del state, view, index
            gc.unfreeze()
            gc.collect()
    if args.json is not None:
        args.json.write_text(json.dumps({"command": sys.argv, "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
