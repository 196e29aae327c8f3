"""Word overlap with its compiled core (``_cwordoverlap.c``) against the Python path, in one run.

For each size, two word-overlap memories of the same real texts (``stress._bench_data``)
are built side by side, one with the core (``kernels.WO_CORE``) and one without, in
alternating batches of stores, timing the thread CPU of each batch: the store cost per
path (the whole ``MemoryState.store``, with a publish and vacuum per batch); and the
token part of the index's ``add`` alone (posting lists and vocabulary), per text. Then
every query runs on both (alternating which goes first), timing the thread CPU of each
``index.top_k(view, query, 10, None)``; the two top-10s must be identical (scores and
ties), or the run fails. Both paths use the other compiled kernels (``_ckernels.c``)
when they are built. Queries: LoCoMo questions, and tool results of
``tool_calls.jsonl`` (what the swarm's agents retrieve with).

With ``--bits``, the comparison is instead the core's bit-sliced counts (packed match
sets, ``ccore.BitPlanes``) against the core's byte counts (``ACTORMEM_WO_BITS=0``, the
path before them), in one memory per size built with the core: per query both paths in
turn, each with its own match-set cache (swapped in with the path, so neither reads
the other's sets), thread CPU per ``top_k``, identical top-10s required. With
``--memo``, the same for the word memo of ``ccore.count_words`` (``ccore.MEMO``) against
recomputing each word's small match set (``ACTORMEM_WO_MEMO=0``), both bit-sliced: each
side has its own match-set cache and memo, kept from query to query (no texts are
added between queries here, so a repeated word is a pure hit). With ``--counts``, the
same for the dense sets added through carry-save blocks, the large sparse sets added as
bitsets with them, the counts read through the words' maxima, new sets' posting
lists joined in batches of whole lists and the short words' sets read from the owner's
rows of bits, mid-sized sets cached as bitsets and the carry-save pass's planes in
registers, the ranking's order in C, the long posting lists' bitsets kept by the
owner, the lists read by token id and prefetched (``knobs._DENSE_CSA``,
``_SPARSE_AS_DENSE``, ``_WORD_MAXIMA``, ``_JOIN_LISTS``, ``_SHORT_ROWS``,
``_JOIN_IN_PLACE``, ``_BITSET_FROM``, ``_CSA_REGS``, ``_VISIT_C``, ``_TOKEN_BITS``,
``_MEMO_KEEP_LEFT``, ``_LISTS_BY_ID``, ``_PREFETCH``: ``knobs._QUERY_KNOBS``)
against the path before them (all 0: each dense set through every plane, every sparse
set group by group, every plane read, lists joined in Python slices, short words' sets
built from the masks, long lists' slices copied, mid-sized sets as group numbers, the
carry-save loop as before), both bit-sliced with the memo; ``--knobs`` names the ones
the old side turns off (the others on both sides); ``--stores`` builds the memory
twice, with each side's knobs, and reports the store
cost of each (``_SHORT_ROWS`` and ``_TOKEN_BITS`` are owner's work at store time);
``--flip`` runs the old side first on even queries (the other order of each pair).

Usage (from the repository root)::

    python -m stress.bench_wocore --sizes 100000 --queries 200 [--json out.json]
    python -m stress.bench_wocore --bits --sizes 100000,1000000 --queries 200
    python -m stress.bench_wocore --memo --sizes 1000000 --queries 200
    python -m stress.bench_wocore --counts --sizes 1000000 --queries 200
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from actormem import MemoryEntry
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.index import _WordOverlapIndex
from actormem._index.wordoverlap.matchsets import MatchCache

from ._bench_args import add_paired_args
from ._bench_data import DEFAULT_DATA, entries, load_corpus, query_sets
from ._bench_engine import BATCH, fill_state, make_scorer, store_paired
from ._bench_stats import paired_line, summarize_cpu_ms, time_paired

K = 10


def switch(core: bool) -> None:
    kernels.WO_CORE = core


def store_batch(state: MemoryState, part: Sequence[MemoryEntry]) -> None:
    """Store ``part`` (at most ``BATCH`` entries), then one publish and vacuum."""
    for entry in part:
        state.store(entry)
    state.publish()
    state.vacuum(state.published)


def build_both(corpus: Any, size: int) -> tuple[dict[bool, MemoryState], dict[bool, float]]:
    """Two states of ``size`` entries, built in alternating batches; per path the
    thread CPU seconds of its stores (with a publish and vacuum per batch)."""
    states = {
        core: MemoryState(capacity=None, half_life=3600.0, scorer=make_scorer("word-overlap"))
        for core in (False, True)
    }
    cpu = store_paired(states, list(entries(corpus, size)), BATCH, switch, store_batch)
    kernels.WO_CORE = kernels.WO_CORE_AVAILABLE
    return states, cpu


def time_tokens(corpus: Any, size: int) -> dict[bool, float]:
    """The token part of the index's ``add`` alone, per path: microseconds of thread CPU
    per text to put the lower-cased texts of ``size`` entries into two fresh indexes'
    posting lists and vocabularies (``_add_tokens`` against ``ccore.add_text``), in
    alternating batches."""
    lows = [entry.memory.lower() for entry in entries(corpus, size)]
    indexes = {core: _WordOverlapIndex(2048) for core in (False, True)}
    cpu = dict.fromkeys(indexes, 0.0)
    for k, start in enumerate(range(0, size, BATCH)):
        for core in (False, True) if k % 2 else (True, False):
            index = indexes[core]
            post, vocab = index._e.post, index._vocab
            t0 = time.thread_time()
            if core:
                for gid in range(start, min(size, start + BATCH)):
                    ccore.add_text(post, lows[gid], gid, vocab)
            else:
                for gid in range(start, min(size, start + BATCH)):
                    index._add_tokens(post, lows[gid], gid)
            cpu[core] += time.thread_time() - t0
    assert indexes[True]._e.post == indexes[False]._e.post
    return {core: seconds / size * 1e6 for core, seconds in cpu.items()}


def time_both(states: dict[bool, MemoryState], queries: Sequence[str]) -> dict[str, Any]:
    """Per query, both paths in turn: thread CPU in ms, and a check that they agree."""
    views = {core: state.view() for core, state in states.items()}
    cpu = time_paired(
        queries,
        switch,
        lambda core, query: states[core].index.top_k(views[core], query, K, None),
        "the core and the Python path",
    )
    kernels.WO_CORE = kernels.WO_CORE_AVAILABLE
    out: dict[str, Any] = {"queries": len(queries)}
    out["python"] = summarize_cpu_ms(cpu[False])
    out["core"] = summarize_cpu_ms(cpu[True])
    out["ratio_p50"] = out["python"]["p50_ms"] / out["core"]["p50_ms"]
    return out


#: The switches ``--bits``, ``--memo`` and ``--counts`` compare: (name off, name on).
SIDES = {
    "BITS": ("bytes", "bits"),
    "MEMO": ("recomputed", "memo"),
    "COUNTS": ("one by one", "carry-save"),
}
#: ``--counts``: the word-overlap knobs of each side (True: as set now, the new path).
_COUNTS_NAMES = wo_knobs._QUERY_KNOBS
COUNTS_KNOBS = {
    False: dict.fromkeys(_COUNTS_NAMES, 0),
    True: {name: getattr(wo_knobs, name) for name in _COUNTS_NAMES},
}


def counts_knobs(names: Sequence[str]) -> None:
    """``--counts``' old side: only ``names`` (of :data:`_COUNTS_NAMES`) off, the others
    as set now."""
    unknown = set(names) - set(_COUNTS_NAMES)
    if unknown:
        raise SystemExit(f"--knobs: not a --counts knob: {sorted(unknown)}")
    COUNTS_KNOBS[False] = {
        name: 0 if name in names else COUNTS_KNOBS[True][name] for name in _COUNTS_NAMES
    }


def switches() -> dict[tuple[Any, str], Any]:
    """The values :func:`set_switch` may change: every knob of ``wordoverlap.knobs`` and
    the ``ccore`` switches of :data:`SIDES`."""
    names = [(wo_knobs, n) for n in vars(wo_knobs) if n.lstrip("_").isupper()]
    names += [(ccore, flag) for flag in SIDES if flag != "COUNTS"]
    return {(module, name): getattr(module, name) for module, name in names}


def restore_switches(saved: dict[tuple[Any, str], Any]) -> None:
    for (module, name), value in saved.items():
        setattr(module, name, value)


def set_switch(flag: str, on: bool) -> None:
    """Turn ``flag`` (a key of :data:`SIDES`) on or off: a ``ccore`` switch, or for
    ``COUNTS`` the knobs of :data:`COUNTS_KNOBS`. The bit planes at every size
    (``knobs._BITS_MIN`` 0): these comparisons are of them, or ``--bits`` of them
    against the bytes."""
    wo_knobs._BITS_MIN = 0
    if flag == "COUNTS":
        for name, value in COUNTS_KNOBS[on].items():
            setattr(wo_knobs, name, value)
    else:
        setattr(ccore, flag, on)


def time_switch(
    state: MemoryState,
    queries: Sequence[str],
    flag: str,
    memos: dict[bool, Any],
    flip: bool = False,
) -> dict[str, Any]:
    """Per query, the core with ``ccore.<flag>`` off and on in turn on one memory (each
    side with its own match-set cache and word memo, ``memos``: kept across calls):
    thread CPU in ms, and a check that they agree."""
    index: Any = state.index
    view = state.view()
    off, on_name = SIDES[flag]

    def switch_flag(on: bool) -> None:
        set_switch(flag, on)
        index._e.cache, index._e.memo = memos[on]

    cpu = time_paired(
        queries,
        switch_flag,
        lambda on, query: index.top_k(view, query, K, None),
        f"the {on_name} and the {off} path",
        flip=flip,
    )
    set_switch(flag, True)
    out: dict[str, Any] = {"queries": len(queries)}
    out[off] = summarize_cpu_ms(cpu[False])
    out[on_name] = summarize_cpu_ms(cpu[True])
    out["ratio_p50"] = out[off]["p50_ms"] / out[on_name]["p50_ms"]
    return out


def build_counts_pair(corpus: Any, size: int) -> tuple[MemoryState, dict[str, float]]:
    """``--counts --stores``: two memories of ``size`` entries built in alternating
    batches, one made with the old side's knobs (``COUNTS_KNOBS[False]``: the owner's
    work they switch off, e.g. ``_SHORT_ROWS``' rows, is not done), one with the new;
    per side the entries stored per thread CPU-second (whole ``MemoryState.store``s,
    a publish and vacuum per batch). Returns the new side's memory (the other freed)."""
    states = {}
    for on in (False, True):
        set_switch("COUNTS", on)  # read when the index is made
        states[on] = MemoryState(
            capacity=None, half_life=3600.0, scorer=make_scorer("word-overlap")
        )
    cpu = store_paired(
        states, list(entries(corpus, size)), BATCH, lambda on: set_switch("COUNTS", on),
        store_batch,
    )  # fmt: skip
    set_switch("COUNTS", True)
    state = states.pop(True)
    states.clear()
    gc.collect()
    return state, {"old": size / cpu[False], "new": size / cpu[True]}


def main_switch(args: argparse.Namespace, flag: str) -> list[dict[str, Any]]:
    """The ``--bits``, ``--memo`` or ``--counts`` comparison (see the module
    documentation)."""
    corpus = load_corpus(args.data, args.seed)
    sets = query_sets(corpus, args.data, args.queries, args.seed)
    cells = []
    for size in args.sizes:
        if flag == "COUNTS" and args.stores:
            state, rates = build_counts_pair(corpus, size)
            cells.append({"size": size, "store_per_cpu_s": rates})
            print(
                f"n={size:>9,} store: old {rates['old']:,.0f} / new {rates['new']:,.0f}"
                f" entries per CPU-second (x{rates['new'] / rates['old']:.3f})",
                flush=True,
            )
        else:
            state = MemoryState(capacity=None, half_life=3600.0, scorer=make_scorer("word-overlap"))
            fill_state(state, entries(corpus, size))
        gc.freeze()
        memos = {on: (MatchCache(), [{}, {}, 0]) for on in (False, True)}
        for name, queries in sets.items():
            time_switch(state, queries[:3], flag, memos)  # warm caches on both paths
            timed = time_switch(state, queries, flag, memos, args.flip)
            cell = {"size": size, "queries_of": name, **timed}
            cells.append(cell)
            print(f"n={size:>9,} {name:12} {paired_line(cell, *SIDES[flag])}", flush=True)
        del state
        gc.unfreeze()
        gc.collect()
    return cells


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m stress.bench_wocore", description=__doc__)
    add_paired_args(p, [100_000], DEFAULT_DATA)
    p.add_argument(
        "--bits", action="store_true", help="bit-sliced against byte counts, both with the core"
    )
    p.add_argument(
        "--memo",
        action="store_true",
        help="the word memo against recomputing each word's set, both bit-sliced in the core",
    )
    p.add_argument(
        "--counts",
        action="store_true",
        help="the dense sets through carry-save blocks, large sparse sets as bitsets, word"
        " maxima and batched joins against the path before them, both bit-sliced with the"
        " memo",
    )
    p.add_argument(
        "--knobs",
        default=",".join(_COUNTS_NAMES),
        help="--counts: the knobs the old side turns off (comma-separated; default all of"
        f" {', '.join(_COUNTS_NAMES)})",
    )
    p.add_argument(
        "--flip",
        action="store_true",
        help="--bits, --memo, --counts: the old side first on even queries (the other order"
        " of each pair: the second run of a query finds its data cached)",
    )
    p.add_argument(
        "--stores",
        action="store_true",
        help="--counts: build the memory twice in alternating batches, with the old and the"
        " new side's knobs, and report the store cost of each (then the queries on the new"
        " one)",
    )
    args = p.parse_args(argv)
    counts_knobs([name for name in args.knobs.split(",") if name])
    if args.bits + args.memo + args.counts > 1:
        p.error("--bits, --memo and --counts: one at a time")
    if not kernels.WO_CORE_AVAILABLE:
        p.error("the word-overlap core is not built (pip install -e .)")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.bits or args.memo or args.counts:
        saved = switches()
        try:
            cells = main_switch(args, "BITS" if args.bits else "MEMO" if args.memo else "COUNTS")
        finally:  # in-process callers (the tests) get the knobs as they were
            restore_switches(saved)
        if args.json is not None:
            args.json.write_text(json.dumps({"command": sys.argv, "cells": cells}, indent=1))
        return 0
    corpus = load_corpus(args.data, args.seed)
    sets = query_sets(corpus, args.data, args.queries, args.seed)
    cells = []
    for size in args.sizes:
        states, store_cpu = build_both(corpus, size)
        gc.freeze()
        rates = {core: size / store_cpu[core] for core in store_cpu}
        print(
            f"n={size:>9,} store: python {rates[False]:,.0f} / core {rates[True]:,.0f}"
            f" entries per CPU-second (x{rates[True] / rates[False]:.2f})",
            flush=True,
        )
        per_s = {"python": rates[False], "core": rates[True]}
        tokens_us = time_tokens(corpus, size)
        print(
            f"n={size:>9,} the add's tokens: python {tokens_us[False]:.2f} / core"
            f" {tokens_us[True]:.2f} us per text (x{tokens_us[False] / tokens_us[True]:.2f})",
            flush=True,
        )
        cells.append(
            {
                "size": size,
                "store_per_cpu_s": per_s,
                "add_tokens_us": {"python": tokens_us[False], "core": tokens_us[True]},
            }
        )
        for name, queries in sets.items():
            time_both(states, queries[:3])  # warm caches on both paths
            cell = {"size": size, "queries_of": name, **time_both(states, queries)}
            cells.append(cell)
            print(f"n={size:>9,} {name:12} {paired_line(cell, 'python', 'core')}", flush=True)
        del states
        gc.unfreeze()
        gc.collect()
    if args.json is not None:
        args.json.write_text(json.dumps({"command": sys.argv, "cells": cells}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
