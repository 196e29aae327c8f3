"""What the hybrid scorer costs beside BM25: store and retrieve latency, memory per entry.

Usage (from the project root)::

    python -m stress.hybrid_cost [--entries 10000 100000] [--writers 64] [--queries 300]
        [--scorers bm25-tuned hybrid] [--exact-1m] [--seed 0] [--json OUT]
        [--data ../shared/data]

For each size and scorer, in one process and one run: a fresh in-memory ``Memory``
(``open_memory(scorer=...)``); ``--writers`` tasks ``await memory.store(e)`` the
entries of :mod:`stress._bench_data` (real tool calls and LoCoMo turns, cycled, every
text distinct) -> entries/s and store latency p50/p99 in ms (the hybrid's owner embeds
each batch's new texts in a worker thread before applying it); then ``--queries``
LoCoMo questions, ``await memory.retrieve(q, 10)`` one after another -> p50/p99 in ms;
the CPU time of the store phase per entry (``time.process_time``: every thread, the
embedding workers included) and of each retrieve (``time.thread_time``, p50/p99);
the resident memory the memory added (``/proc/self/statm`` after minus before, divided
by the entries; the process's other allocations make this approximate, and numpy's
freed pages may stay resident) and, for the hybrid, the vector matrix's bytes.

``--exact-1m`` also times the dense index's exact cosine top-10 over 1,000,000 random
256-dimensional unit rows (what one dense search scans at that size), p50/p99 over 50
queries, without the engine around it.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import trio

from actormem import BM25Scorer, DenseScorer, HybridScorer, open_memory, stop_words
from actormem._index.dense import DenseIndex, FunctionEmbedder
from actormem._index.scoring import Scorer
from actormem._index.tokenize import Tokenizer

from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_stats import summarize_ms


def _tuned() -> BM25Scorer:
    return BM25Scorer(
        k1=1.5,
        b=0.5,
        tokenizer=Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk")),
    )


SCORERS = {
    "bm25-tuned": _tuned,
    "hybrid": lambda: HybridScorer(bm25=_tuned(), dense=DenseScorer()),
}


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _run(
    scorer: Scorer, n: int, writers: int, queries: Sequence[str], data: str
) -> dict[str, Any]:
    corpus = load_corpus(data)
    todo = list(entries(corpus, n))
    gc.collect()
    before = _rss()
    store_ns: list[int] = []
    retrieve_ns: list[int] = []
    retrieve_cpu_ns: list[int] = []
    async with open_memory(scorer=scorer) as memory:

        async def writer(part: Sequence[Any]) -> None:
            for e in part:
                t0 = time.perf_counter_ns()
                await memory.store(e)
                store_ns.append(time.perf_counter_ns() - t0)

        start = time.perf_counter()
        cpu_start = time.process_time()  # every thread's: the embedding workers' too
        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(writer, todo[w::writers])
        store_s = time.perf_counter() - start
        store_cpu_s = time.process_time() - cpu_start
        del todo
        gc.collect()
        grown = _rss() - before
        for q in queries:
            t0 = time.perf_counter_ns()
            c0 = time.thread_time_ns()
            await memory.retrieve(q, 10)
            retrieve_cpu_ns.append(time.thread_time_ns() - c0)
            retrieve_ns.append(time.perf_counter_ns() - t0)
        index: Any = memory._state.index
        matrix = getattr(getattr(index, "dense", None), "nbytes", 0)
        inline = getattr(getattr(index, "dense", None), "inline", 0)
    return {
        "scorer": scorer.name,
        "entries": n,
        "store_per_s": round(n / store_s),
        "store_cpu_us_per_entry": round(store_cpu_s / n * 1e6, 1),
        **summarize_ms(store_ns, "store_"),
        **summarize_ms(retrieve_ns, "retrieve_"),
        **summarize_ms(retrieve_cpu_ns, "retrieve_cpu_"),
        "rss_bytes_per_entry": round(grown / n),
        "vector_bytes": matrix,
        "inline_embeddings": inline,
    }


def _exact_1m(seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    dim, n = 256, 1_000_000

    def embed(texts: Sequence[str]) -> Any:
        return rng.standard_normal((len(texts), dim)).astype(np.float32)

    index = DenseIndex(FunctionEmbedder(fn=embed, name="random", dim=dim))
    block = rng.standard_normal((n, dim)).astype(np.float32)
    block /= np.linalg.norm(block, axis=1, keepdims=True)
    index._matrix = block  # rows only: no records, so this times the scan and the sort
    index._n = n
    index._recs = [None] * n
    samples = []
    for _ in range(50):
        q = embed(["q"])[0]
        q /= np.linalg.norm(q)
        t0 = time.perf_counter_ns()
        gen = index.similarities_steps(q)
        try:
            while True:
                next(gen)
        except StopIteration as stop:
            sims, _ = stop.value
        np.argpartition(-sims, 9)[:10]
        samples.append(time.perf_counter_ns() - t0)
    return {"rows": n, "dim": dim, "matrix_bytes": block.nbytes, **summarize_ms(samples, "top10_")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m stress.hybrid_cost")
    parser.add_argument("--entries", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--scorers", nargs="+", choices=sorted(SCORERS), default=list(SCORERS))
    parser.add_argument("--exact-1m", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=str)
    parser.add_argument("--data", type=str, default=str(DEFAULT_DATA), help="../shared/data")
    args = parser.parse_args(argv)
    queries = load_corpus(args.data, seed=args.seed).queries[: args.queries]
    rows = []
    for n in args.entries:
        for name in args.scorers:
            row = trio.run(_run, SCORERS[name](), n, args.writers, queries, args.data)
            print(json.dumps(row), flush=True)
            rows.append(row)
    out: dict[str, Any] = {"runs": rows}
    if args.exact_1m:
        out["exact_1m"] = _exact_1m(args.seed)
        print(json.dumps(out["exact_1m"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
