"""Benchmarks: actormem and what users would pick instead, side by side, on real texts.

Usage (from the project root)::

    python -m stress.bench [--scenario NAME[,NAME...]] [--sizes 1000,10000,100000,1000000]
        [--json OUT] [--repeats 3] [--budget 20] [--seed 0] [--profile DIR] ...
    python -m stress.bench --render OUT      # the tables of an earlier run

Scenarios (``--scenario``, default all; see each module's docs for the protocol):

``retrieve``  retrieve latency (k = 10) and snapshot time against size, both scorers
              (:mod:`stress._bench_retrieve`);
``store``     store throughput and latency against 1-512 writer tasks, in memory and
              durable, beside a bare channel round trip (:mod:`stress._bench_store`);
``rw``        64 writers and 64 readers: each side's p99 with and without the other,
              and the event loop's longest step during a retrieve (:mod:`stress._bench_rw`);
``memory``    bytes per entry beyond the text (:mod:`stress._bench_memory`);
``peers``     the seed's reference list, a ``trio.Lock`` dict, SQLite FTS5 and
              LangGraph's ``InMemoryStore`` on the same entries and queries, timed
              query by query (actormem right after the peer: cold) and in blocks
              (actormem after its own calls: warm), on twice the chosen queries
              (:mod:`stress._bench_peers`, :mod:`stress.peers`).

Entries are the real texts of ``../shared/data`` (tool calls and LoCoMo turns, cycled
with distinct ids); queries are the LoCoMo questions (:mod:`stress._bench_data`).
Memories for the read scenarios are built through the I/O-free ``MemoryState`` and served
by the real owner task (:mod:`stress._bench_engine`). Every latency is reported as p50
and p99 over all repeats; every comparison is a ratio of figures from the same run.

``--sizes`` sets the sizes of ``retrieve``; ``peers`` defaults to those up to 100k,
``rw`` and ``memory`` to those among 100k and 1M (else the largest). Each cell gets a
time budget (``--budget`` seconds) that decides how many queries it times, between
``--min-queries`` and ``--queries``. Output: markdown tables on stdout, everything in
JSON with ``--json``. The seed fixes the order of texts and queries.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import (
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from pathlib import Path
from typing import Any

import trio

from actormem import Memory
from actormem._engine.state import MemoryState

from ._bench_args import existing_file, output_file, positive_int, positive_ints, positive_seconds
from ._bench_data import DEFAULT_DATA, Corpus, entries, load_corpus
from ._bench_engine import SCORERS, build_state, check_served, serve_state
from ._bench_memory import measure_in_child
from ._bench_peers import PEER_NAMES, peers_cell
from ._bench_retrieve import Budget, retrieve_cell
from ._bench_rw import STALL_MS, combine_repeats, rw_cell
from ._bench_stats import Target, load_average, machine
from ._bench_store import durable_modes, store_runs

SCENARIOS = ("store", "retrieve", "peers", "rw", "memory")
DEFAULT_SIZES = (1_000, 10_000, 100_000, 1_000_000)


def _names(text: str, allowed: Sequence[str]) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    for name in names:
        if name not in allowed:
            raise argparse.ArgumentTypeError(f"{name!r} is not one of {', '.join(allowed)}")
    return names


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m stress.bench",
        description="actormem benchmarks beside its peers, on real texts.",
    )
    p.add_argument(
        "--scenario",
        default="all",
        help=f"comma-separated, from {', '.join(SCENARIOS)} (default: all)",
    )
    p.add_argument(
        "--sizes",
        type=positive_ints,
        default=None,
        help="entries for the retrieve scenario (default 1000,10000,100000,1000000)",
    )
    p.add_argument("--peer-sizes", type=positive_ints, default=None)
    p.add_argument("--rw-sizes", type=positive_ints, default=None)
    p.add_argument("--memory-sizes", type=positive_ints, default=None)
    p.add_argument(
        "--scorers",
        default=",".join(SCORERS),
        help="for retrieve, peers and memory (default: word-overlap,bm25)",
    )
    p.add_argument(
        "--peers", default=",".join(PEER_NAMES), help=f"from {', '.join(PEER_NAMES)} (default: all)"
    )
    p.add_argument("--writers", type=positive_ints, default=[1, 8, 64, 512])
    p.add_argument(
        "--store-entries",
        type=positive_int,
        default=10_000,
        help="entries stored per store run (default 10000)",
    )
    p.add_argument(
        "--durable",
        default="auto",
        help="durability modes for the store scenario: auto (all the engine has), "
        "none, or a comma-separated list",
    )
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument(
        "--budget",
        type=positive_seconds,
        default=20.0,
        help="seconds of timed calls per cell (default 20)",
    )
    p.add_argument("--queries", type=positive_int, default=500, help="most queries per cell")
    p.add_argument("--min-queries", type=positive_int, default=20, help="fewest queries per cell")
    p.add_argument("--seed", type=int, default=0, help="order of texts and queries")
    p.add_argument(
        "--verbatim",
        action="store_true",
        help="cycle texts verbatim instead of marking each with its episode and "
        "cycle (see stress/_bench_data.py; not for the memory scenario)",
    )
    p.add_argument(
        "--no-gc-freeze",
        dest="gc_freeze",
        action="store_false",
        help="do not gc.freeze() the prebuilt memories (docs/design.md, 'Garbage "
        "collection': freezing after a large load is what we recommend)",
    )
    p.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help="folder with tool_calls.jsonl and locomo10.json",
    )
    p.add_argument("--json", type=output_file, default=None, help="write every figure here")
    p.add_argument(
        "--render",
        type=existing_file,
        default=None,
        help="print the tables of an earlier --json file and exit (runs nothing)",
    )
    p.add_argument(
        "--profile",
        type=Path,
        default=None,
        help="write a pyinstrument profile of each cell into this folder",
    )
    args = p.parse_args(argv)
    try:
        args.scenarios = (
            list(SCENARIOS) if args.scenario == "all" else _names(args.scenario, SCENARIOS)
        )
        args.scorer_names = _names(args.scorers, list(SCORERS))
        args.peer_names = _names(args.peers, list(PEER_NAMES))
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    sizes = args.sizes or list(DEFAULT_SIZES)
    args.sizes = sizes
    big = [s for s in sizes if s in (100_000, 1_000_000)] or [max(sizes)]
    if args.peer_sizes is None:
        args.peer_sizes = [s for s in sizes if s <= 100_000] or [min(sizes)]
    if args.rw_sizes is None:
        args.rw_sizes = big
    if args.memory_sizes is None:
        args.memory_sizes = big
    if args.durable == "auto":
        args.durable_modes = durable_modes()
    elif args.durable == "none":
        args.durable_modes = []
    else:
        args.durable_modes = [m.strip() for m in args.durable.split(",") if m.strip()]
        known = durable_modes()
        for mode in args.durable_modes:
            if mode not in known:
                p.error(f"--durable: {mode!r} is not one of auto, none, {', '.join(known)}")
    return args


class Run:
    """One benchmark run: its options, the corpus, and the figures gathered so far."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.corpus: Corpus = load_corpus(str(args.data), args.seed, not args.verbatim)
        self.results: dict[str, list[dict[str, Any]]] = {s: [] for s in args.scenarios}
        self.builds: list[dict[str, Any]] = []
        self.budget = Budget(args.budget, args.repeats, args.min_queries, args.queries)

    def log(self, message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def profile(self, name: str) -> AbstractContextManager[Any]:
        if self.args.profile is None:
            return nullcontext()
        return _Profiled(self.args.profile / f"{name}.txt")

    # ---------------------------------------------------------------- scenarios

    async def store(self) -> None:
        batch = list(entries(self.corpus, self.args.store_entries))
        modes = ["memory", *self.args.durable_modes]
        self.log(f"store: {len(batch)} entries, writers {self.args.writers}, modes {modes}")
        with self.profile("store"):
            rows = await store_runs(batch, self.args.writers, modes, self.args.repeats)
        self.results["store"] = rows

    async def sized(self, n: int) -> None:
        """retrieve, peers and rw at ``n`` entries, sharing the memories they build."""
        a = self.args
        want = set()
        if "retrieve" in a.scenarios and n in a.sizes:
            want.update(a.scorer_names)
        if "peers" in a.scenarios and n in a.peer_sizes:
            want.update(a.scorer_names)
        if "rw" in a.scenarios and n in a.rw_sizes:
            want.add("word-overlap")
        if not want:
            return
        states = {}
        for scorer in [s for s in SCORERS if s in want]:
            self.log(f"build {scorer} n={n}")
            state, seconds = build_state(self.corpus, n, scorer)
            gc.collect()
            if a.gc_freeze:
                gc.freeze()  # as docs/design.md recommends after loading a large memory
            states[scorer] = state
            self.builds.append(
                {
                    "scorer": scorer,
                    "n": n,
                    "seconds": seconds,
                    "entries_per_s": n / seconds if seconds else math.inf,
                }
            )
        try:
            async with _serve_all(states) as memories:
                for scorer, memory in memories.items():
                    await check_served(memory, states[scorer], self.corpus)
                if "retrieve" in a.scenarios and n in a.sizes:
                    await self._retrieve(n, memories)
                if "peers" in a.scenarios and n in a.peer_sizes:
                    await self._peers(n, memories)
                if "rw" in a.scenarios and n in a.rw_sizes:
                    await self._rw(n, memories["word-overlap"])
        finally:
            states.clear()
            gc.unfreeze()
            gc.collect()

    async def _retrieve(self, n: int, memories: dict[str, Memory]) -> None:
        for scorer in self.args.scorer_names:
            self.log(f"retrieve {scorer} n={n}")
            with self.profile(f"retrieve-{scorer}-{n}"):
                row = await retrieve_cell(memories[scorer], self.corpus.queries, self.budget)
            self.results["retrieve"].append({"scorer": scorer, "n": n, **row})

    async def _peers(self, n: int, memories: dict[str, Memory]) -> None:
        batch = list(entries(self.corpus, n))
        mine = {s: memories[s] for s in self.args.scorer_names}
        for peer in self.args.peer_names:
            self.log(f"peers {peer} n={n}")
            with self.profile(f"peers-{peer}-{n}"):
                row = await peers_cell(peer, batch, mine, self.corpus.queries, self.budget)
            if row is None:
                self.log(f"peers {peer}: not installed, skipped")
                continue
            self.results["peers"].append({"id": peer, **row})

    async def _rw(self, n: int, memory: Memory) -> None:
        rows = []
        new = entries(self.corpus, 10**9, start=n + 1_000_000)
        for repeat in range(self.args.repeats):
            # Each repeat's writers add 12,800 entries or more to the same memory.
            self.log(f"rw n={n} repeat {repeat + 1}/{self.args.repeats}")
            with self.profile(f"rw-{n}-{repeat}"):
                rows.append(
                    await rw_cell(memory, new, self.corpus.queries, budget_s=self.args.budget)
                )
        row = combine_repeats(rows)
        row["entries_at_start"] = n
        self.results["rw"].append({"n": n, **row})

    def memory(self) -> None:
        for n in self.args.memory_sizes:
            for scorer in self.args.scorer_names:
                self.log(f"memory {scorer} n={n} (child process)")
                row = measure_in_child(n, scorer, str(self.args.data))
                self.results["memory"].append(row)

    async def main(self) -> None:
        a = self.args
        if "store" in a.scenarios:
            await self.store()
        sizes = sorted(set(a.sizes) | set(a.peer_sizes) | set(a.rw_sizes))
        if {"retrieve", "peers", "rw"} & set(a.scenarios):
            for n in sizes:
                await self.sized(n)
        if "memory" in a.scenarios:
            self.memory()


@asynccontextmanager
async def _serve_all(states: dict[str, MemoryState]) -> AsyncIterator[dict[str, Memory]]:
    """Every state served at once, by its own owner task."""
    async with AsyncExitStack() as stack:
        yield {
            name: await stack.enter_async_context(serve_state(state))
            for name, state in states.items()
        }


class _Profiled:
    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> None:
        from pyinstrument import Profiler

        self.profiler = Profiler(async_mode="disabled")
        self.profiler.start()

    def __exit__(self, *exc: object) -> None:
        self.profiler.stop()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(self.profiler.output_text(unicode=False, color=False))


# -------------------------------------------------------------------- targets and tables


def _find(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any] | None:
    for row in rows:
        if all(row.get(k) == v for k, v in match.items()):
            return row
    return None


def _fig(row: dict[str, Any] | None, key: str) -> float | None:
    if row is None:
        return None
    value = row.get(key)
    return None if value is None else float(value)


def targets(results: dict[str, list[dict[str, Any]]]) -> list[Target]:
    """The issue's targets, from this run's figures (None where not run)."""
    out: list[Target] = []
    retrieve = results.get("retrieve", [])
    for scorer in SCORERS:
        row = _find(retrieve, scorer=scorer, n=100_000)
        out.append(Target(f"retrieve p50, {scorer}, 100k", _fig(row, "p50_ms"), "<", 1, "ms"))
        out.append(Target(f"retrieve p99, {scorer}, 100k", _fig(row, "p99_ms"), "<", 5, "ms"))
    for scorer in SCORERS:
        small = _find(retrieve, scorer=scorer, n=1_000)
        big = _find(retrieve, scorer=scorer, n=1_000_000)
        ratio = big["snapshot_p50_us"] / small["snapshot_p50_us"] if small and big else None
        out.append(Target(f"snapshot p50 1M / 1k, {scorer}", ratio, "<=", 2, "x"))
    peers = results.get("peers", [])
    for peer, need in (("reference", 100), ("fts5", 10)):
        row = _find(peers, id=peer, n=100_000)
        for scorer in SCORERS:
            key = f"ratio_p50_vs_{scorer}"
            fig = row.get(key) if row else None
            out.append(Target(f"{peer} p50 / actormem {scorer} p50, 100k", fig, ">=", need, "x"))
    store = results.get("store", [])
    row = _find(store, system="actormem memory", writers=64)
    out.append(
        Target(
            "store, in memory, 64 writers", _fig(row, "entries_per_s"), ">=", 50_000, "entries/s"
        )
    )
    out.append(Target("store p99, in memory, 64 writers", _fig(row, "p99_ms"), "<", 5, "ms"))
    rw = results.get("rw", [])
    row = _find(rw, n=100_000)
    out.append(
        Target("writer p99 with readers / alone, 100k", _fig(row, "writer_p99_ratio"), "<=", 2, "x")
    )
    out.append(
        Target("reader p99 with writers / alone, 100k", _fig(row, "reader_p99_ratio"), "<=", 2, "x")
    )
    # The stall targets use the step's CPU time: its wall time also counts the OS running
    # another process meanwhile (the machine is shared); tables show both.
    row = _find(rw, n=1_000_000)
    out.append(
        Target(
            "longest retrieve step (CPU), 1M, rw 64 readers, word-overlap",
            _fig(row, "longest_retrieve_step_cpu_ms"),
            "<=",
            STALL_MS,
            "ms",
        )
    )
    for scorer in SCORERS:
        row = _find(retrieve, scorer=scorer, n=1_000_000)
        out.append(
            Target(
                f"longest retrieve step (CPU), 1M, one reader, {scorer}",
                _fig(row, "longest_step_cpu_ms"),
                "<=",
                STALL_MS,
                "ms",
            )
        )
    mem = results.get("memory", [])
    for scorer in SCORERS:
        row = _find(mem, scorer=scorer, n=1_000_000)
        out.append(
            Target(
                f"bytes per entry beyond text, {scorer}, 1M",
                _fig(row, "beyond_text_bytes"),
                "<",
                1024,
                "B",
            )
        )
    return out


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "-"
        if value == math.inf:
            return "inf"
        a = abs(value)
        if a >= 10_000:
            return f"{value:,.0f}"
        if a >= 100:
            return f"{value:.0f}"
        if a >= 10:
            return f"{value:.1f}"
        if a >= 1:
            return f"{value:.2f}"
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def table(rows: list[dict[str, Any]], columns: list[tuple[str, str]]) -> str:
    """A markdown table of ``rows`` with ``(key, heading)`` columns."""
    lines = [
        "| " + " | ".join(h for _, h in columns) + " |",
        "|" + "|".join("---" for _ in columns) + "|",
    ]
    for row in rows:
        lines.append("| " + " | ".join(_fmt(row.get(k)) for k, _ in columns) + " |")
    return "\n".join(lines)


COLUMNS: dict[str, list[tuple[str, str]]] = {
    "retrieve": [
        ("scorer", "scorer"),
        ("n", "entries"),
        ("p50_ms", "p50 ms"),
        ("p99_ms", "p99 ms"),
        ("max_ms", "max ms"),
        ("cpu_p50_ms", "CPU p50 ms"),
        ("longest_step_ms", "longest step ms"),
        ("longest_step_cpu_ms", "longest step CPU ms"),
        ("gc_longest_ms", "GC max ms"),
        ("queries", "queries"),
        ("repeats", "repeats"),
        ("snapshot_p50_us", "snapshot p50 µs"),
        ("snapshot_p99_us", "snapshot p99 µs"),
    ],
    "store": [
        ("system", "system"),
        ("writers", "writers"),
        ("entries_per_s", "entries/s"),
        ("p50_ms", "p50 ms"),
        ("p99_ms", "p99 ms"),
        ("max_ms", "max ms"),
    ],
    "rw": [
        ("n", "entries"),
        ("writer_p99_alone_ms", "writer p99 alone"),
        ("writer_p99_with_readers_ms", "writer p99 w/ readers"),
        ("writer_p99_ratio", "ratio"),
        ("reader_p99_alone_ms", "reader p99 alone"),
        ("reader_p99_with_writers_ms", "reader p99 w/ writers"),
        ("reader_p99_ratio", "ratio"),
        ("longest_retrieve_step_ms", "longest retrieve step ms"),
        ("longest_retrieve_step_cpu_ms", "longest retrieve step CPU ms"),
        ("longest_owner_step_ms", "longest owner step ms"),
        ("gc_longest_ms", "GC max ms"),
        ("reader_quota", "retrieves/reader"),
        ("repeats", "repeats"),
    ],
    "memory": [
        ("scorer", "scorer"),
        ("n", "entries"),
        ("text_bytes_per_entry", "text B"),
        ("beyond_text_bytes", "beyond text B"),
        ("engine_bytes", "engine B"),
        ("entry_bytes", "entry value B"),
        ("rss_stored_mib", "RSS MiB"),
    ],
    "peers": [
        ("peer", "peer"),
        ("n", "entries"),
        ("p50_ms", "p50 ms"),
        ("p99_ms", "p99 ms"),
        ("word-overlap_p50_ms", "actormem WO p50"),
        ("bm25_p50_ms", "actormem BM25 p50"),
        ("ratio_p50_vs_word-overlap", "peer/WO p50"),
        ("ratio_p99_vs_word-overlap", "peer/WO p99"),
        ("ratio_p50_vs_bm25", "peer/BM25 p50"),
        ("ratio_p99_vs_bm25", "peer/BM25 p99"),
        ("cpu_ratio_p50_vs_word-overlap", "CPU peer/WO p50"),
        ("cpu_ratio_p99_vs_word-overlap", "CPU peer/WO p99"),
        ("cpu_ratio_p50_vs_bm25", "CPU peer/BM25 p50"),
        ("cpu_ratio_p99_vs_bm25", "CPU peer/BM25 p99"),
        ("warm_word-overlap_p50_ms", "warm: actormem WO p50"),
        ("warm_bm25_p50_ms", "warm: actormem BM25 p50"),
        ("warm_ratio_p50_vs_word-overlap", "warm: peer/WO p50"),
        ("warm_ratio_p99_vs_word-overlap", "warm: peer/WO p99"),
        ("warm_ratio_p50_vs_bm25", "warm: peer/BM25 p50"),
        ("warm_ratio_p99_vs_bm25", "warm: peer/BM25 p99"),
        ("warm_cpu_ratio_p50_vs_word-overlap", "warm: CPU peer/WO p50"),
        ("warm_cpu_ratio_p50_vs_bm25", "warm: CPU peer/BM25 p50"),
        ("agreement_top10", "top-10 agreement"),
        ("queries", "queries"),
        ("build_entries_per_s", "build entries/s"),
    ],
    "targets": [
        ("target", "target"),
        ("figure", "figure"),
        ("bound", "bound"),
        ("unit", "unit"),
        ("met", "met"),
    ],
}

TITLES = {
    "retrieve": "1. Retrieve latency vs size (k = 10)",
    "store": "2. Store throughput vs concurrency",
    "rw": "3. Readers and writers (64 + 64)",
    "memory": "4. Memory per entry",
    "peers": "5. Peers (same entries, same queries)",
    "targets": "Targets",
}


def report(result: dict[str, Any]) -> str:
    m = result["machine"]
    parts = [
        f"Command: `{result['command']}`, {m['date']}, {result['duration_s'] / 60:.0f} min, "
        f"actormem {m.get('actormem_source', 'unknown')}.  \n"
        f"Machine: {m['cores']} cores ({m['cpu']}), {m['memory_gib']} GiB, "
        f"{m['implementation']} {m['python']}, trio {m['trio']}, SQLite {m['sqlite']}, "
        f"LangGraph {m['langgraph'] or 'not installed'}; load average (1/5/15 min) "
        f"{m['load_average_start']} at the start, {result['load_average_end']} at the end.\n"
    ]
    for name, rows in result["scenarios"].items():
        if rows:
            parts.append(f"### {TITLES[name]}\n\n{table(rows, COLUMNS[name])}\n")
    tgt = [t for t in result["targets"] if t["figure"] is not None]
    if tgt:
        shown = [{**t, "met": "met" if t["met"] else "MISSED"} for t in tgt]
        parts.append(f"### {TITLES['targets']}\n\n{table(shown, COLUMNS['targets'])}\n")
    return "\n".join(parts)


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmarks; print the tables; return (and with ``--json`` write) the figures."""
    args = parse_args(argv)
    if args.render is not None:
        earlier: dict[str, Any] = json.loads(args.render.read_text())
        print(report(earlier))
        return earlier
    started = time.perf_counter()
    info = machine()
    bench = Run(args)
    trio.run(bench.main)
    result: dict[str, Any] = {
        "command": "python -m stress.bench " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": info,
        "options": {
            "scenarios": args.scenarios,
            "sizes": args.sizes,
            "peer_sizes": args.peer_sizes,
            "rw_sizes": args.rw_sizes,
            "memory_sizes": args.memory_sizes,
            "writers": args.writers,
            "store_entries": args.store_entries,
            "durable_modes": args.durable_modes,
            "repeats": args.repeats,
            "budget_s": args.budget,
            "queries": args.queries,
            "min_queries": args.min_queries,
            "seed": args.seed,
            "gc_freeze": args.gc_freeze,
            "texts": len(bench.corpus.texts),
            "texts_marked": bench.corpus.marked,
            "mean_text_chars": bench.corpus.mean_text_chars,
            "questions": len(bench.corpus.queries),
        },
        "builds": bench.builds,
        "scenarios": bench.results,
        "targets": [t.as_json() for t in targets(bench.results)],
        "load_average_end": load_average(),
        "duration_s": time.perf_counter() - started,
    }
    print(report(result))
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    return result


if __name__ == "__main__":
    run()
