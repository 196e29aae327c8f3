"""A retrieve warm and cold, at the peers bench's size, without the hour of its 1M cell.

``stress.bench --scenario peers`` times each actormem call right after the peer's call on
the same question; after the seed's scan of 1M entries (seconds of Python over ~1 GB of
objects) actormem's arrays are out of the caches and the TLB, and a word-overlap
question cost ~10x its warm figure on the Intel VM (docs/benchmarks.md, "The seed's scan
at 1M: cold retrieves"). This script builds the bench's memory (``build_state``, the
bench's corpus and question order), serves it (``serve_state``) and times, question by
question and in rotation (the order shifted by question), ``memory.retrieve(q, 10)``
and ``index.top_k(view, q, 10, None)`` after:

* ``warm``: the previous question's retrieve (a service answering query after query);
* ``thrash``: a pass over ``--thrash-mib`` MiB that writes a byte of every cache line
  (the last level cache, the L2 and the TLB emptied of actormem's lines);
* ``objects``: a pass over the seed's reference list reading every entry's text length
  (the scan's Python objects touched, nothing scored; ``--objects``);
* ``scan``: the seed's scan itself on the question (``--scan`` questions: seconds each).

Every question runs once untimed first (the word memo as the bench's warm-up leaves
it), so the orders differ only by what ran just before the call; with ``--fresh`` each
question is timed once, on its first call, in one order and one call (rotated by
question), as the bench's interleaved questions after its warm-up are. Figures: thread CPU
and wall per call, p50 / p99 / mean in ms, one line per (order, call). With
``--profile ORDERS`` the retrieves of those orders (comma-separated) also run under
``cProfile`` and the functions with the most own time are printed (the profile's
overhead is in those figures). With ``--steps`` the ``top_k`` calls drain
``top_k_steps`` by hand, timing each step (the work between two yields) and adding it
up by the yields it ran between.

Usage (from the repository root)::

    python -m stress.cold_retrieve --data ../shared/data --n 1000000 --q 60 --scan 5
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import trio
import trio.testing

from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_engine import build_state, serve_state
from .peers import ReferenceStore

__all__ = ["main"]


def _fig(ns: Sequence[int]) -> str:
    xs = sorted(ns)
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return (
        f"p50 {statistics.median(xs) / 1e6:7.3f} p99 {p99 / 1e6:7.3f} "
        f"mean {statistics.fmean(xs) / 1e6:7.3f}"
    )


def _where(gen: Any) -> str:
    """The innermost generator's function and line where ``gen`` is suspended."""
    while True:
        inner = getattr(gen, "gi_yieldfrom", None)
        if inner is None or not hasattr(inner, "gi_frame") or inner.gi_frame is None:
            break
        gen = inner
    frame = gen.gi_frame
    if frame is None:
        return "end"
    return f"{frame.f_code.co_name}:{frame.f_lineno}"


def _stepped(steps: Any, into: dict[str, int]) -> None:
    """Drain ``steps`` (a ``top_k_steps`` generator), adding each step's thread CPU
    to ``into`` under (the yield it started at -> the one it stopped at)."""
    thread = time.thread_time_ns
    at = "start"
    while True:
        c0 = thread()
        try:
            next(steps)
        except StopIteration:
            into[f"{at} -> end"] = into.get(f"{at} -> end", 0) + thread() - c0
            return
        c1 = thread()
        now = _where(steps)
        key = f"{at} -> {now}"
        into[key] = into.get(key, 0) + c1 - c0
        at = now


async def _run(args: argparse.Namespace) -> list[str]:
    corpus = load_corpus(str(args.data), 0, True)
    t0 = time.perf_counter()
    state, _ = build_state(corpus, args.n, args.scorer)
    print(f"built {args.n} {args.scorer} in {time.perf_counter() - t0:.1f} s", flush=True)
    ref: ReferenceStore | None = None
    if args.scan or args.objects:
        ref = ReferenceStore()
        ref.build(list(entries(corpus, args.n)))  # not frozen, as in the bench
    gc.collect()
    gc.freeze()
    questions = list(corpus.queries[args.start : args.start + args.q])
    big = np.zeros(args.thrash_mib << 20, dtype=np.uint8)
    big[:] = 1  # mapped before the first timed pass

    def thrash() -> None:
        big[::64] += 1

    def objects() -> None:
        assert ref is not None
        n = 0
        for e in ref._entries:
            n += len(e.memory)

    orders: list[str] = ["warm", "thrash"] + (["objects"] if args.objects else [])
    cpu: dict[tuple[str, str], list[int]] = {
        (o, c): [] for o in orders + ["scan"] for c in ("retrieve", "top_k")
    }
    wall: dict[tuple[str, str], list[int]] = {k: [] for k in cpu}
    thread, perf = time.thread_time_ns, time.perf_counter_ns
    lines: list[str] = []
    steps: dict[str, dict[str, int]] = {}
    profs = {o: cProfile.Profile() for o in (args.profile or "").split(",") if o}
    async with serve_state(state) as memory:
        view = state.view
        index = state.index

        async def one(order: str, call: str, q: str, prev: str) -> None:
            if order == "warm":
                if call == "retrieve":
                    await memory.retrieve(prev, 10)
                else:
                    index.top_k(view(), prev, 10, None)
            elif order == "thrash":
                thrash()
            elif order == "objects":
                objects()
            elif order == "scan":
                assert ref is not None
                await ref.retrieve(q, 10)
            prof = profs.get(order) if call == "retrieve" else None
            if call == "retrieve":
                if prof is not None:
                    prof.enable()
                c0, w0 = thread(), perf()
                await memory.retrieve(q, 10)
                c1, w1 = thread(), perf()
                if prof is not None:
                    prof.disable()
            elif args.steps:
                v = view()
                c0, w0 = thread(), perf()
                stepper: Any = index  # the word-overlap and BM25 indexes' top_k_steps
                _stepped(stepper.top_k_steps(v, q, 10, None), steps.setdefault(order, {}))
                c1, w1 = thread(), perf()
            else:
                v = view()
                c0, w0 = thread(), perf()
                index.top_k(v, q, 10, None)
                c1, w1 = thread(), perf()
            cpu[(order, call)].append(c1 - c0)
            wall[(order, call)].append(w1 - w0)
            # the owner's apply of the access, outside the timing, as in the bench
            await trio.testing.wait_all_tasks_blocked()

        if args.fresh:  # first-time questions: one order each, in rotation
            fresh = [
                (o, c)
                for o in orders + (["scan"] if args.scan else [])
                for c in ("retrieve", "top_k")
            ]
            for i, q in enumerate(questions):
                await one(*fresh[i % len(fresh)], q, questions[i - 1])
            questions = []
        for q in questions:  # each once untimed: the memo as after the bench's warm-up
            await memory.retrieve(q, 10)
        await trio.testing.wait_all_tasks_blocked()
        plan: list[tuple[str, str]] = [(o, c) for o in orders for c in ("retrieve", "top_k")]
        for i, q in enumerate(questions):
            prev = questions[i - 1]
            for j in range(len(plan)):
                order, call = plan[(i + j) % len(plan)]
                await one(order, call, q, prev)
            if i < args.scan:
                await one("scan", "retrieve", q, prev)
                await one("scan", "top_k", q, prev)
        for key in cpu:
            if cpu[key]:
                lines.append(
                    f"{key[0]:8s} {key[1]:8s} n {len(cpu[key]):3d} CPU {_fig(cpu[key])} | "
                    f"wall {_fig(wall[key])}"
                )
                print(lines[-1], flush=True)
    gc.unfreeze()
    for order, by in steps.items():
        n = len(cpu[(order, "top_k")])
        print(f"== top_k's steps after {order}: mean us a call", flush=True)
        for where, ns in sorted(by.items(), key=lambda kv: -kv[1])[: args.top]:
            print(f"{ns / n / 1e3:9.1f}  {where}")
    for name, prof in profs.items():
        print(f"== profile of the {name} retrieves", flush=True)
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
    return lines


def main(argv: Sequence[str] | None = None) -> list[str]:
    """Run the orders (see the module docs); the lines printed."""
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--n", type=int, default=1_000_000, help="entries")
    p.add_argument("--scorer", default="word-overlap", choices=("word-overlap", "bm25"))
    p.add_argument("--q", type=int, default=60, help="questions")
    p.add_argument("--start", type=int, default=0, help="first question's number")
    p.add_argument("--thrash-mib", type=int, default=1024, help="MiB a thrash touches")
    p.add_argument("--objects", action="store_true", help="time the objects' order too")
    p.add_argument("--scan", type=int, default=0, help="questions also after the scan")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="first-time questions: each timed once, in one order and call (rotated)",
    )
    p.add_argument(
        "--steps",
        action="store_true",
        help="top_k as its steps, each step's CPU by where it stopped (printed last)",
    )
    p.add_argument(
        "--profile", default=None, help="cProfile these orders' retrieves (comma-separated)"
    )
    p.add_argument("--top", type=int, default=25, help="functions the profile prints")
    args = p.parse_args(argv)
    return trio.run(_run, args)


if __name__ == "__main__":
    main()
