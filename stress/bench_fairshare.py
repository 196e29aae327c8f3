"""Writers' latency alone and beside 64 readers, with the fair-share gate on and off.

Usage (from the project root)::

    python -m stress.bench_fairshare --n 20000 --seconds 3 --rounds 2 --modes memory,normal

For each mode (``memory``: no file; ``normal`` / ``full``: a durable file in a scratch
directory) a memory of ``n`` real entries (:mod:`stress._bench_data`) is built, then three
phases run back to back, ``rounds`` times interleaved, each for ``seconds`` of wall time
(the writers' new entries grow the memory from phase to phase, so later phases retrieve
from a larger memory; ``--steady`` holds it at ``n`` entries, each store evicting one):

* ``alone``: ``writers`` tasks loop ``await memory.store`` (new entries);
* ``gate``: the same writers and ``readers`` tasks looping ``await memory.retrieve(q, 10)``
  (LoCoMo questions), with the :class:`~actormem._engine.fairshare.ReadGate` on;
* ``starve``: the same with the gate before the FIFO hand-off (``memory._gate.fifo =
  False``: every opening wakes every parked reader, ``STARVE_MAX``) and its ``SHARE`` of
  0.6 (unless ``--share``); only with ``--phases``;
* ``nogate``: the same with the gate off (``memory._gate.enabled = False``): trio's
  round-robin alone, the behaviour before the gate;
* ``noslots``: the ``gate`` phase with no limit on the retrieves scoring at once
  (``SCORING_SLOTS`` of ``actormem._engine.memory``; the other phases have the memory's
  own); only with ``--phases``.

Printed: one JSON object per mode and phase (latencies in ms: writers' p50/p99, readers'
p50/p99, calls done, the process's CPU seconds, how often readers parked) and a summary
table with writers' p99 with readers over alone (target: at most 2) side by side: the
worst round's figures, and each round's ratio against that round's alone phase. The
machine is shared, so compare figures of one run only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from actormem import Memory, MemoryEntry, open_memory
from actormem._engine import fairshare

from ._bench_args import existing_dir, positive_ints
from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_stats import load_average, summarize_ms

#: Phases a round may run (``--phases``): writers alone, beside readers with the gate
#: (FIFO hand-off), with the gate before it (``ReadGate.fifo = False``), with no gate,
#: with the FIFO gate and no scoring slots.
PHASES = ("alone", "gate", "starve", "nogate", "noslots")


async def _phase(
    memory: Memory,
    new: Iterator[MemoryEntry],
    queries: list[str],
    *,
    writers: int,
    readers: int,
    seconds: float,
) -> dict[str, Any]:
    """Run writers (and readers) for ``seconds``; latencies of calls that returned in it."""
    w_lat: list[int] = []
    r_lat: list[int] = []
    perf = time.perf_counter_ns
    stop = time.perf_counter() + seconds
    parks0 = memory._gate.parks

    async def writer() -> None:
        while time.perf_counter() < stop:
            t0 = perf()
            await memory.store(next(new))
            w_lat.append(perf() - t0)

    async def reader(number: int) -> None:
        qi = number * 7
        while time.perf_counter() < stop:
            t0 = perf()
            await memory.retrieve(queries[qi % len(queries)], 10)
            r_lat.append(perf() - t0)
            qi += 1

    cpu0 = time.process_time()
    async with trio.open_nursery() as nursery:
        for _ in range(writers):
            nursery.start_soon(writer, name="writer")
        for i in range(readers):
            nursery.start_soon(reader, i, name="reader")
    return {
        "stores": len(w_lat),
        "retrieves": len(r_lat),
        "cpu_s": round(time.process_time() - cpu0, 3),
        "parks": memory._gate.parks - parks0,
        **summarize_ms(w_lat, "writer_"),
        **summarize_ms(r_lat, "reader_"),
    }


async def _mode(args: argparse.Namespace, mode: str, scratch: Path) -> list[dict[str, Any]]:
    corpus = load_corpus(args.data, args.seed)
    path = None if mode == "memory" else scratch / f"{mode}.db"
    rows: list[dict[str, Any]] = []
    capacity = args.n if args.steady else None
    durability = "normal" if mode == "memory" else mode
    async with open_memory(path=path, durability=durability, capacity=capacity) as memory:
        batch: list[MemoryEntry] = []
        for entry in entries(corpus, args.n):
            batch.append(entry)
            if len(batch) == 512:
                await memory.store_many(batch)
                batch = []
        if batch:
            await memory.store_many(batch)
        new = entries(corpus, 10**9, start=args.n)
        slots = memory._slots
        for rnd in range(args.rounds):
            for phase in args.phases:
                memory._slots = None if phase == "noslots" else slots
                memory._gate.enabled = phase != "nogate"
                memory._gate.fifo = phase != "starve"
                _set_share(args.share or (_STARVE_SHARE if phase == "starve" else _SHARE))
                row = await _phase(
                    memory,
                    new,
                    corpus.queries,
                    writers=args.writers,
                    readers=0 if phase == "alone" else args.readers,
                    seconds=args.seconds,
                )
                row = {"mode": mode, "phase": phase, "round": rnd, "n": args.n, **row}
                print(json.dumps(row), flush=True)
                rows.append(row)
        memory._slots = slots
        memory._gate.enabled = True
        memory._gate.fifo = True
        _set_share(args.share or _SHARE)
    return rows


def _pooled(rows: list[dict[str, Any]], key: str) -> float:
    """The worst (largest) ``key`` over the rounds: p99s are compared worst to worst."""
    return max(float(r[key]) for r in rows)


#: The owner's share: this gate's default, and the gate's before the FIFO hand-off.
_SHARE = fairshare.SHARE
_STARVE_SHARE = 0.6


def _set_share(share: float) -> None:
    fairshare.SHARE = share
    fairshare.OPEN_MIN = fairshare.CLOSED_MAX * (1 - share) / share


_GATES = {
    "gate": "on (FIFO)",
    "starve": "on (STARVE_MAX)",
    "nogate": "off",
    "noslots": "on (FIFO), no scoring slots",
}


def _table(rows: list[dict[str, Any]]) -> str:
    out = [
        "| mode | writer p50 alone | writer p99 alone | writer p50 w/ readers | writer p99 w/ "
        "readers | ratio p99 | ratio per round (median) | reader p50 | reader p99 | reader p99 "
        "median | stores/s | retrieves/s | gate |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for mode in dict.fromkeys(r["mode"] for r in rows):
        alone = [r for r in rows if r["mode"] == mode and r["phase"] == "alone"]
        for phase in dict.fromkeys(r["phase"] for r in rows if r["phase"] != "alone"):
            both = [r for r in rows if r["mode"] == mode and r["phase"] == phase]
            secs = sum(r["wall_s"] for r in both)
            ratio = _pooled(both, "writer_p99_ms") / _pooled(alone, "writer_p99_ms")
            per_round = [
                b["writer_p99_ms"] / a["writer_p99_ms"]
                for a, b in zip(alone, both, strict=True)  # the same round's alone phase
            ]
            out.append(
                f"| {mode} | {_pooled(alone, 'writer_p50_ms'):.3g} | "
                f"{_pooled(alone, 'writer_p99_ms'):.3g} | {_pooled(both, 'writer_p50_ms'):.3g} | "
                f"{_pooled(both, 'writer_p99_ms'):.3g} | {ratio:.2f} | "
                f"{', '.join(f'{x:.2f}' for x in per_round)} "
                f"({statistics.median(per_round):.2f}) | "
                f"{_pooled(both, 'reader_p50_ms'):.3g} | {_pooled(both, 'reader_p99_ms'):.3g} | "
                f"{statistics.median(r['reader_p99_ms'] for r in both):.3g} | "
                f"{sum(r['stores'] for r in both) / secs:,.0f} | "
                f"{sum(r['retrieves'] for r in both) / secs:,.0f} | "
                f"{_GATES[phase]} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="entries before the phases")
    parser.add_argument("--writers", type=int, default=64)
    parser.add_argument("--readers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=3.0, help="wall seconds per phase")
    parser.add_argument("--rounds", type=positive_ints, default=[2], help="interleaved repeats")
    parser.add_argument("--modes", default="memory,normal", help="memory, normal, full")
    parser.add_argument(
        "--phases",
        default="alone,gate,nogate",
        help=f"comma-separated, run in this order each round: {','.join(PHASES)} (alone first)",
    )
    parser.add_argument(
        "--steady",
        action="store_true",
        help="hold the memory at n entries (capacity n: each store evicts one), so that "
        "every phase retrieves from a memory of one size",
    )
    parser.add_argument(
        "--share",
        type=float,
        default=None,
        help="the owner's share of the loop while writes are pending (fairshare.SHARE, "
        "and OPEN_MIN with it) for this run, both gates (default: each gate's own)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=existing_dir, default=DEFAULT_DATA)
    args = parser.parse_args(argv)
    args.rounds = args.rounds[0]
    args.phases = [p for p in args.phases.split(",") if p]
    if args.phases[:1] != ["alone"] or not set(args.phases) <= set(PHASES):
        parser.error(f"--phases: 'alone' first, then some of {PHASES[1:]}")
    modes = [m for m in args.modes.split(",") if m]
    for mode in modes:
        if mode not in ("memory", "normal", "full"):
            parser.error(f"unknown mode {mode!r}")
    if args.share is not None:
        if not 0 < args.share < 1:
            parser.error("--share is between 0 and 1")
        _set_share(args.share)
    settings = vars(args) | {"data": str(args.data)}
    print(json.dumps({"load_average": load_average(), "args": settings}))
    scratch = Path(tempfile.mkdtemp(prefix="bench_fairshare_"))
    try:
        rows: list[dict[str, Any]] = []
        for mode in modes:
            rows += trio.run(_mode, args, mode, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for row in rows:
        row["wall_s"] = args.seconds
    print(_table(rows))
    print(json.dumps({"load_average_end": load_average()}), file=sys.stderr)


if __name__ == "__main__":
    main()
