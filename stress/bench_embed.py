"""The built-in dense model's embedding: its pooling before and after the count matrix.

Measures, old and new alternating call by call in one process, the CPU of embedding
(thread time of the calling thread, ms) for: the main job's queries one at a time
(LoCoMo questions, real tool results), batches of 64 entry texts (what ``store_many``
embeds), and one query of ``MAX_QUERY_CHARS``; then the longest stall of a trio event
loop while a worker thread embeds that long query (a ticker task's largest gap, ms).
Old is the pooling before (``np.add.reduceat`` over every token's row, which holds the
GIL); new is ``wordllama_embedder`` as shipped. Both must agree to float32 rounding.

    python -m stress.bench_embed --data ../shared/data --count 200
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import trio
import trio.lowlevel

from actormem import MAX_QUERY_CHARS
from actormem._index import dense

from ._bench_data import load_corpus, tool_result_queries


def _old_embed(dim: int) -> Callable[[Sequence[str]], Any]:
    """The pooling before this change (reduceat over the gathered token rows)."""
    made = dense.wordllama_embedder(dim)
    closure = dict(zip(made.fn.__code__.co_freevars, made.fn.__closure__ or (), strict=True))
    tokenizer = closure["tokenizer"].cell_contents
    table = closure["table"].cell_contents
    top = table.shape[0] - 1

    def embed(texts: Sequence[str]) -> Any:
        encoded = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encoded), np.int64, len(encoded))
        ids = np.fromiter((i for e in encoded for i in e.ids), np.int64, int(lengths.sum()))
        np.clip(ids, 0, top, out=ids)
        out = np.zeros((len(texts), table.shape[1]), np.float32)
        filled = lengths > 0
        if ids.size:
            starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))[filled]
            distinct, inverse = np.unique(ids, return_inverse=True)
            sums = np.add.reduceat(table[distinct][inverse], starts, axis=0, dtype=np.float32)
            out[filled] = sums / lengths[filled, None].astype(np.float32)
        return out[:, :dim]

    return embed


def _cpu_ms(fn: Callable[[Sequence[str]], Any], texts: Sequence[str]) -> tuple[float, Any]:
    start = time.thread_time()
    out = fn(texts)
    return (time.thread_time() - start) * 1000, out


async def _stall_ms(fn: Callable[[Sequence[str]], Any], text: str) -> float:
    gaps = [0.0]
    done = False

    async def tick() -> None:
        last = time.perf_counter()
        while not done:
            await trio.lowlevel.checkpoint()
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with trio.open_nursery() as nursery:
        nursery.start_soon(tick)
        await trio.sleep(0.01)
        await trio.to_thread.run_sync(fn, [text])
        done = True
    return max(gaps) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--dim", type=int, default=256)
    args = parser.parse_args()
    new = dense.wordllama_embedder(args.dim)
    old = _old_embed(args.dim)
    corpus = load_corpus(args.data)
    texts = [corpus.text(i)[1] for i in range(64 * args.count // 8)]
    tools = tool_result_queries(args.data, args.count, 0)
    long = (" ".join(tools) * 10)[:MAX_QUERY_CHARS]
    cases: dict[str, list[list[str]]] = {
        "LoCoMo question": [[q] for q in corpus.queries[: args.count]],
        "tool result": [[q] for q in tools],
        "64 entry texts": [texts[i : i + 64] for i in range(0, len(texts), 64)],
        f"{MAX_QUERY_CHARS:,}-char query": [[long]] * 5,
    }
    print("| input | old p50 / max ms | new p50 / max ms | p50 ratio |\n|---|---|---|---:|")
    for name, batches in cases.items():
        times: dict[str, list[float]] = {"old": [], "new": []}
        for i, batch in enumerate(batches):
            order = [("old", old), ("new", new)] if i % 2 else [("new", new), ("old", old)]
            outs = {}
            for label, fn in order:
                ms, outs[label] = _cpu_ms(fn, batch)
                times[label].append(ms)
            np.testing.assert_allclose(outs["new"], outs["old"], rtol=1e-3, atol=1e-4)
        o, n = (statistics.median(times[k]) for k in ("old", "new"))
        print(
            f"| {name} | {o:.3f} / {max(times['old']):.2f} | {n:.3f} / {max(times['new']):.2f} "
            f"| {o / n:.2f} |"
        )
    stalls = {
        label: [trio.run(_stall_ms, fn, long) for _ in range(3)]
        for label, fn in (("old", old), ("new", new))
    }
    print(
        f"\nlongest event-loop stall while a worker thread embeds the "
        f"{MAX_QUERY_CHARS:,}-char query (3 runs): old {max(stalls['old']):.1f} ms, "
        f"new {max(stalls['new']):.1f} ms"
    )


if __name__ == "__main__":
    main()
