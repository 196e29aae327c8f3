"""BM25 with its compiled core (``_cbm25.c``) against the driver before it, in one run.

*Old* is the Python MaxScore driver with the per-step kernels of ``_ckernels.c``
(``kernels.BM25_CORE = False``); *new* is the core: the add term loop and the whole query
driver in C (document at a time, MaxScore with block-max windows). For each size and
configuration one memory of real texts (``stress._bench_data``) is built; every query then
runs on both paths in turn (alternating which goes first), the thread CPU of each
``index.top_k(view, query, 10, None)`` is taken, and the two top-10s must be identical
(scores and ties) or the run fails. Query sets: ``questions`` (LoCoMo, about 10 words) and
``tool results`` (a real tool call's result, what the swarm's agents retrieve with).
Configurations: ``bm25`` (plain, the paper's reference line) and ``bm25-tuned`` (Snowball
stemming and NLTK's stop words, k1 1.5, b 0.5: ``actormem eval locomo --scorer
bm25-tuned``'s text processing). Store cost: ``--adds`` entries stored into two fresh
states, one per path, in alternating chunks of 1,000, CPU per ``MemoryState.store``.

``--old core-bound`` makes *old* the core's driver before the cost-aware split
(``knobs._COST_SPLIT = False``: MaxScore's split by bound, document at a time with
block-max windows) and *new* the core as it is (cost-aware split, term at a time over
windows of groups); the store cost then compares the same path twice. ``--old
core-offer`` makes *old* the core with each step's groups offered to the heap of records
in Python (``knobs._C_OFFER = False``) and *new* the core offering them in C as it finds
them (theta rises within a step). ``--old core-prefetch`` makes *old* the core's walk
without its prefetch of the lengths (``knobs._PREFETCH_WALK = False``), ``--old
core-window`` the record heap's path with windows of 1,024 groups, not 4,096
(``knobs._WIDE_WINDOWS = False``), ``--old core-walk`` both, ``--old core-split`` the
cost-aware split that takes non-essential terms up to theta itself
(``knobs._SPLIT_ROOM = 1.0``, against its default), ``--old core-ties`` the heap in C
reading the records of every group that ties with its worst, the block cache built with
the cost-aware split and the lookups' searches without prefetch (``knobs._TIE_SKIP =
knobs._NO_BLOCKS = knobs._PREFETCH_SEEK = False``), ``--old core-tight`` the windowed walk's
loop before its tight form (``knobs._TIGHT_WALK = False``), ``--old core-interp`` the
seeks galloping from the cursor, not from an interpolated guess (``knobs._INTERP_SEEK =
False``), ``--old core-simd`` the tight walk one posting at a time, not eight with
AVX-512 (``knobs._SIMD_WALK = False``), ``--old core-ahead`` the lookups not prefetched
ahead (``knobs._PREFETCH_LOOKUPS = False``), ``--old core-q4`` all three, ``--old
core-codes`` the walk reading the int32 lengths, not their one-byte codes
(``knobs._LENGTH_CODES = False``), ``--old core-q6`` the lookups reading the int32
lengths, the seeding's lookups and the offers' reads not prefetched and every window's
score array cleared whole (``knobs._LOOKUP_CODES = knobs._PREFETCH_SEEDS =
knobs._SPARSE_CLEAR = knobs._PREFETCH_OFFERS = False``), ``--old core-q7`` the lookups
searching the long lists, not reading their dense frequency arrays
(``knobs._DENSE_TFS = False`` for the queries; the index keeps its arrays), ``--old
core-q8`` the scalar walk with its prefetch (``knobs._SCALAR_NO_PREFETCH = False``;
until tidy25 also windows cleared by their postings only below an eighth of their
width, ``knobs._SPARSE_QUARTER``, removed as neutral), ``--old core-q9`` the scalar
walk computing every posting's part and its mark's expression (``knobs._WALK_ONES =
knobs._MARK_CUT = False``), ``--old core-q10`` the eight-lane walk on an AMD CPU with
AVX-512, marking its groups a posting (``knobs._SCALAR_ON_AMD = knobs._SCAN_MARKS =
False``; *new*: their defaults), ``--old core-q11`` the walk driven a call a step from
Python, not run to its end in one call after the seeding (``knobs._WHOLE_DRIVE =
False``), ``--old core-q12`` a drained query through the sliced search's generator (its
``_Exact``, ``Bm25Daat`` and checks, a seeding call then a walk's call, the walk's
scratch made once a step), not the short path from the weights to one core call with
its scratch made once (``knobs._QUERY_FAST = False``; ``_ONE_CALL`` and
``_CALL_SCRATCH`` only act on the short path), ``--old core-q14`` every window of the
short path's walk scanned for its marks, not the windows expected sparse walked marking
by the cut on a CPU without AVX-512 (``knobs._SPARSE_MARKS = False``; on a CPU with
AVX-512 both sides are the same path), ``--old core-q16`` the lookups reading the dense
frequency arrays of every list in one group in 16 (``knobs._DENSE_RATIO = 16``, the
ratio before dense44), not only those in one group in 10 (its default; 8 at
dense44): the timed index is built at the default and given the old ratio's other
arrays, which the new side's queries do not see (``dense_extra``); the store cost
compares the two ratios.
``--old core-q45`` a drained query's windows as wide as the sliced path's (4,096
groups, steps of 16,384 postings: ``knobs._DRAIN_WINDOW = 0``), not 16,384 groups in
steps of 65,536 postings (its default on an AMD CPU; elsewhere both sides are the same
path).

``--warm`` runs each query once untimed before its timed pair (``time_paired``): without
it the first run of a pair reads the query's posting lists from memory and the second
finds them cached, which at 1M decides the p99 of the tool results (their heaviest
queries all run the new path first; docs/benchmarks.md, "BM25 at 1M: the tool results'
p99").

Usage (from the repository root)::

    python -m stress.bench_bm25_core --data ../shared/data --sizes 100000,1000000 --queries 200
    python -m stress.bench_bm25_core --data ../shared/data --old core-bound --adds 1000

Prints one line per cell and, with ``--json``, every figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from collections.abc import Sequence
from typing import Any

from actormem import BM25Scorer, Tokenizer
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index import kernels
from actormem._index.bm25 import knobs
from actormem._index.tokenize import stop_words

from ._bench_args import add_paired_args, positive_int
from ._bench_data import DEFAULT_DATA, entries, load_corpus, query_sets
from ._bench_engine import fill_state, store_paired
from ._bench_stats import paired_line, summarize_cpu_ms, time_paired

K = 10


def make(name: str) -> BM25Scorer:
    """The configuration named ``bm25`` or ``bm25-tuned``."""
    if name == "bm25":
        return BM25Scorer()
    if name == "bm25-tuned":
        words = Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk"))
        return BM25Scorer(k1=1.5, b=0.5, tokenizer=words)
    raise ValueError(f"unknown configuration {name!r}")


#: What *old* is: ``python`` (the Python driver), ``core-bound`` (the core's driver
#: with MaxScore's split by bound), ``core-offer`` (the groups offered in Python),
#: ``core-prefetch`` (the walk without its prefetch), ``core-window`` (narrower windows)
#: or ``core-walk`` (both), ``core-split`` (non-essential terms up to theta),
#: ``core-ties`` (every tie's records read, the block cache built, no prefetch in the
#: lookups), ``core-tight`` (the walk's loop before its tight form); set by ``main``.
OLD = "python"


#: The default of ``knobs._SPLIT_ROOM``, the new side of ``--old core-split``.
SPLIT_ROOM = knobs._SPLIT_ROOM

#: The default of ``knobs._SCAN_MARKS``, the new side of ``--old core-q10``.
SCAN_MARKS = knobs._SCAN_MARKS

#: The default of ``knobs._DRAIN_WINDOW``, the new side of ``--old core-q45``.
DRAIN_WINDOW = knobs._DRAIN_WINDOW

#: The default of ``knobs._DENSE_RATIO``, the new side of ``--old core-q16``; its old
#: side is 16 (the ratio before dense44).
DENSE_RATIO = knobs._DENSE_RATIO
OLD_DENSE_RATIO = 16

#: ``--old core-q16``: the terms of the timed index whose dense arrays only the old
#: ratio makes, with those arrays (``dense_extra``); the new side reads them as None.
HIDDEN: list[tuple[Any, Any]] = []


def dense_extra(index: Any) -> None:
    """``--old core-q16``: give ``index`` (built at the default ratio) the old ratio's
    dense arrays too, and keep the added ones in ``HIDDEN`` for ``switch``: one index,
    whose queries read the old ratio's arrays on the old side and the new one's on the
    new side (the same results either way)."""
    HIDDEN.clear()
    knobs._DENSE_RATIO = OLD_DENSE_RATIO
    had = {id(term) for term in index._terms.values() if term.dense is not None}
    index._dense_refresh()
    HIDDEN.extend(
        (term, term.dense)
        for term in index._terms.values()
        if term.dense is not None and id(term) not in had
    )
    switch(True)
    print(f"core-q16: {len(had)} dense lists at the new ratio, {len(HIDDEN)} more at the old")


def switch(new: bool) -> None:
    if OLD == "python":
        kernels.BM25_CORE = new
    elif OLD == "core-offer":
        knobs._C_OFFER = new
    elif OLD == "core-prefetch":
        knobs._PREFETCH_WALK = new
    elif OLD == "core-window":
        knobs._WIDE_WINDOWS = new
    elif OLD == "core-walk":
        knobs._PREFETCH_WALK = knobs._WIDE_WINDOWS = new
    elif OLD == "core-split":
        knobs._SPLIT_ROOM = SPLIT_ROOM if new else 1.0
    elif OLD == "core-ties":
        knobs._TIE_SKIP = knobs._NO_BLOCKS = knobs._PREFETCH_SEEK = new
    elif OLD == "core-tight":
        knobs._TIGHT_WALK = new
    elif OLD == "core-interp":
        knobs._INTERP_SEEK = new
    elif OLD == "core-simd":
        knobs._SIMD_WALK = new
    elif OLD == "core-ahead":
        knobs._PREFETCH_LOOKUPS = new
    elif OLD == "core-q4":
        knobs._INTERP_SEEK = knobs._SIMD_WALK = knobs._PREFETCH_LOOKUPS = new
    elif OLD == "core-codes":
        knobs._LENGTH_CODES = new
    elif OLD == "core-q6":
        knobs._LOOKUP_CODES = knobs._PREFETCH_SEEDS = knobs._SPARSE_CLEAR = new
        knobs._PREFETCH_OFFERS = new
    elif OLD == "core-q7":
        knobs._DENSE_TFS = new
    elif OLD == "core-q9":
        knobs._WALK_ONES = knobs._MARK_CUT = new
    elif OLD == "core-q10":
        knobs._SCALAR_ON_AMD = new
        knobs._SCAN_MARKS = SCAN_MARKS and new
    elif OLD == "core-q11":
        knobs._WHOLE_DRIVE = new
    elif OLD == "core-q12":
        knobs._QUERY_FAST = new
    elif OLD == "core-q14":
        knobs._SPARSE_MARKS = new
    elif OLD == "core-q45":
        knobs._DRAIN_WINDOW = DRAIN_WINDOW if new else 0
    elif OLD == "core-q8":
        knobs._SCALAR_NO_PREFETCH = new
    elif OLD == "core-q16":
        knobs._DENSE_RATIO = DENSE_RATIO if new else OLD_DENSE_RATIO
        for term, dense in HIDDEN:
            term.dense = None if new else dense
    else:
        knobs._COST_SPLIT = new


def time_both(index: Any, view: Any, queries: Sequence[str], warm: bool = False) -> dict[str, Any]:
    """Per query, old then new (then the other order on the next query): thread CPU in
    ms, and a check that both give the same top-k (``warm``: see ``time_paired``)."""
    cpu = time_paired(
        queries,
        switch,
        lambda _, query: index.top_k(view, query, K, None),
        "the core and the old driver",
        warm,
    )
    switch(True)
    out: dict[str, Any] = {"queries": len(queries), "old": summarize_cpu_ms(cpu[False])}
    out["new"] = summarize_cpu_ms(cpu[True])
    out["ratio_p50"] = out["old"]["p50_ms"] / out["new"]["p50_ms"]
    return out


def store_cost(corpus: Any, name: str, adds: int) -> dict[str, Any]:
    """CPU per store (us) of two fresh states, old and new, fed the same entries in
    alternating chunks of up to 1,000 (at least eight), after 100 untimed stores a path."""
    batch = list(entries(corpus, adds))
    for core in (False, True):  # untimed: the process's first stores on each path
        switch(core)
        warm = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make(name))
        fill_state(warm, batch[:100])
    states = {
        core: MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make(name))
        for core in (False, True)
    }
    cpu = store_paired(states, batch, 1000, switch)
    switch(True)
    return {"adds": adds, "old_us": 1e6 * cpu[False] / adds, "new_us": 1e6 * cpu[True] / adds}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stress.bench_bm25_core", description=__doc__)
    add_paired_args(p, [100_000], DEFAULT_DATA)
    p.add_argument("--configs", default="bm25,bm25-tuned")
    p.add_argument("--adds", type=positive_int, default=50_000, help="entries for store cost")
    p.add_argument(
        "--old",
        choices=(
            "python",
            "core-bound",
            "core-offer",
            "core-prefetch",
            "core-window",
            "core-walk",
            "core-split",
            "core-ties",
            "core-tight",
            "core-interp",
            "core-simd",
            "core-ahead",
            "core-q4",
            "core-codes",
            "core-q6",
            "core-q7",
            "core-q8",
            "core-q9",
            "core-q10",
            "core-q11",
            "core-q12",
            "core-q14",
            "core-q16",
            "core-q45",
        ),
        default="python",
        help="old: the Python driver, the core's driver with MaxScore's split by bound, or"
        " the core's driver with the groups offered to the heap in Python (core-offer), or"
        " the core's walk without prefetching the lengths (core-prefetch), or the heap in C"
        " with windows of 1,024 groups (core-window), or both (core-walk), or the split"
        " taking non-essential terms up to theta itself (core-split), or the heap reading"
        " every tie's records, the block cache built and the lookups without prefetch"
        " (core-ties), or the windowed walk's loop before its tight form (core-tight), or the"
        " lookups' searches galloping from the cursor, not from an interpolated guess"
        " (core-interp), or the tight walk one posting at a time, not eight (core-simd),"
        " or the lookups not prefetched ahead (core-ahead), or all three (core-q4), or the"
        " walk reading the lengths, not their one-byte codes (core-codes), or the lookups"
        " reading the lengths, the seeding and offers not prefetched and every window's"
        " scores cleared whole (core-q6), or the lookups searching the long lists, not"
        " reading their dense frequency arrays (core-q7), or the scalar walk with its"
        " prefetch (core-q8), or"
        " the scalar walk computing every part and mark (core-q9), or the eight-lane walk"
        " on an AMD CPU, marking its groups a posting (core-q10), or the walk a call a step"
        " (core-q11), or a drained query through the sliced search's generator, not the"
        " short path to one core call with its scratch made once (core-q12), or every window"
        " scanned for its marks, none walked marking by the cut (core-q14), or the dense"
        " frequency arrays of the lists in one group in 16, not 10 (core-q16), or a drained"
        " query's windows 4,096 groups wide, not 16,384 on an AMD CPU (core-q45)",
    )
    p.add_argument(
        "--warm",
        action="store_true",
        help="run each query once untimed before timing it on both paths",
    )
    args = p.parse_args(argv)
    if not (kernels.AVAILABLE and kernels.bm25_core_active()):
        p.error("the compiled kernels or BM25 core are not built (pip install -e .)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    global OLD
    args = parse_args(argv)
    OLD = args.old
    corpus = load_corpus(args.data, args.seed)
    sets = query_sets(corpus, args.data, args.queries, args.seed)
    cells: list[dict[str, Any]] = []
    for name in args.configs.split(","):
        cost = store_cost(corpus, name, args.adds)
        cells.append({"config": name, "store": cost})
        print(
            f"{name:10} store, {cost['adds']:,} entries: old {cost['old_us']:.1f} us"
            f" | new {cost['new_us']:.1f} us per store",
            flush=True,
        )
        for size in args.sizes:
            state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make(name))
            fill_state(state, entries(corpus, size))
            if OLD == "core-q16":
                dense_extra(state.index)
            gc.freeze()
            view, index = state.view(), state.index
            for set_name, queries in sets.items():
                for query in queries[:3]:  # warm caches on both paths
                    for new in (False, True):
                        switch(new)
                        index.top_k(view, query, K, None)
                cell = {"config": name, "size": size, "queries_of": set_name}
                cell.update(time_both(index, view, queries, args.warm))
                cells.append(cell)
                print(
                    f"{name:10} n={size:>9,} {set_name:12} {paired_line(cell, 'old', 'new')}",
                    flush=True,
                )
            HIDDEN.clear()
            del state, view, index
            gc.unfreeze()
            gc.collect()
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"command": sys.argv, "old": OLD, "warm": args.warm, "cells": cells}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
