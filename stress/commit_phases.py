"""Where the owner's time goes per batch: a durable memory's group commit, step by step.

Usage (from the project root)::

    python -m stress.commit_phases [--entries 16000] [--writers 64]
        [--modes memory normal] [--repeats 3] [--idle-ms 0] [--dir DIR]

Runs the 64-writer cell of ``stress/bench_durable.py`` (each writer awaits its ``store``)
with every group commit in its worker thread (``memory._INLINE_COMMIT`` off: a small
batch would otherwise be committed on the event loop) and the owner's steps timed: the
methods below are wrapped for the run and restored after it, and each call records when
it started and ended (``time.perf_counter``, which is comparable across threads). Per
batch:

* ``writers``: from publishing one batch to applying the next: the answered writers run
  and send their next stores;
* ``apply``: ``Memory._apply_batch`` (in memory mode this includes indexing);
* ``encode``: ``SqliteStore.prepare``, the batch's rows;
* ``index``: ``MemoryState.flush_index``, the batch's deferred index calls;
* ``index end -> write start``: the worker thread waiting for the GIL (or its wake-up),
  in the batches whose write started after the indexing ended (``write during index``
  counts the others, where the worker got the GIL while numpy had released it);
* ``write``: ``SqliteStore.write`` in the worker thread, ``BEGIN`` to ``COMMIT``;
* ``write end -> owner``: until the owner runs again (trio's wake-up of the event loop);
* ``period``: one batch's ``apply`` start to the next's.

Each figure is the median over the batches of a run, then the median over ``--repeats``
interleaved runs. Not counted: the run's untimed warm-up stores (one batch each) and
then ``--entries`` / 8 / ``--writers`` batches, about the first eighth of the stores.
``--idle-ms`` adds a ``time.sleep`` of that many milliseconds before each in-memory
publish: what the event loop's idle wait for a commit costs the code that runs after it
(on this VM: 27-48% slower, docs/benchmarks.md, "Where a batch of 64 goes").
"""

from __future__ import annotations

import argparse
import contextlib
import math
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import trio

import actormem._engine.memory as memory_module
from actormem._engine.state import MemoryState
from actormem._storage.sqlite import SqliteStore

# Run as a script: the project root, for `stress`.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stress._bench_args import distinct, existing_dir, make_scratch_dir, positive_int  # noqa: E402
from stress.bench_durable import WARM_UP_ENTRIES, WARM_UP_SEED, make_entries, run_one  # noqa: E402

STEPS = (
    "writers",
    "apply",
    "encode",
    "index",
    "index end -> write start",
    "write",
    "write end -> owner",
    "period",
)

Event = tuple[str, float]


def _wrap(owner: Any, name: str, label: str, events: list[Event]) -> Callable[[], None]:
    """Record ``label<``/``label>`` around every call of ``owner.name``; return an undo."""
    original = getattr(owner, name)

    def timed(*args: Any, **kwargs: Any) -> Any:
        events.append((label + "<", time.perf_counter()))
        try:
            return original(*args, **kwargs)
        finally:
            events.append((label + ">", time.perf_counter()))

    setattr(owner, name, timed)
    return lambda: setattr(owner, name, original)


@contextlib.contextmanager
def timed_owner(events: list[Event], idle_ms: float = 0.0) -> Iterator[None]:
    """Wrap the owner's steps (see the module docs) for the duration of the block, with
    every group commit in its worker thread (``memory._INLINE_COMMIT`` off: the
    hand-off is what this measures)."""
    inline = memory_module._INLINE_COMMIT
    memory_module._INLINE_COMMIT = False
    undo = [
        _wrap(memory_module.Memory, "_apply_batch", "apply", events),
        _wrap(SqliteStore, "prepare", "encode", events),
        _wrap(SqliteStore, "write", "write", events),
        _wrap(MemoryState, "flush_index", "index", events),
    ]
    publish = MemoryState.publish

    def timed_publish(state: MemoryState) -> None:
        if idle_ms and state.journal is None:  # in-memory: the idle experiment
            time.sleep(idle_ms / 1e3)
        publish(state)
        events.append(("publish>", time.perf_counter()))

    in_thread = memory_module._in_thread_while

    async def timed_in_thread(fn: Any, arg: Any, meanwhile: Callable[[], None]) -> None:
        await in_thread(fn, arg, meanwhile)
        events.append(("owner", time.perf_counter()))

    setattr(MemoryState, "publish", timed_publish)  # noqa: B010 (typed as a method)
    memory_module._in_thread_while = timed_in_thread
    try:
        yield
    finally:
        setattr(MemoryState, "publish", publish)  # noqa: B010
        memory_module._in_thread_while = in_thread
        memory_module._INLINE_COMMIT = inline
        for u in undo:
            u()


def phases(events: list[Event], skip: int = 0) -> dict[str, Any]:
    """Median duration (µs) of each step over the batches in ``events``, and counts.

    A batch runs from one ``apply<`` to the next; the first ``skip`` batches are left out.
    """
    starts = [i for i, (label, _) in enumerate(events) if label == "apply<"]
    found: dict[str, list[float]] = {step: [] for step in STEPS}
    overlapped = 0
    for a, b in zip(starts[skip:], starts[skip + 1 :], strict=False):
        batch = events[a:b]
        at = {label: t for label, t in batch}
        found["period"].append(events[b][1] - events[a][1])
        found["apply"].append(at["apply>"] - at["apply<"])
        if "publish>" in at:
            found["writers"].append(events[b][1] - at["publish>"])
        for step in ("encode", "index", "write"):
            if step + "<" in at and step + ">" in at:
                found[step].append(at[step + ">"] - at[step + "<"])
        if "write<" in at and "index>" in at:
            if at["write<"] >= at["index>"]:
                found["index end -> write start"].append(at["write<"] - at["index>"])
            else:
                overlapped += 1
        if "write>" in at and "owner" in at:
            found["write end -> owner"].append(at["owner"] - at["write>"])
    out: dict[str, Any] = {
        step: statistics.median(v) * 1e6 if v else None for step, v in found.items()
    }
    out["batches"] = len(found["period"])
    out["write during index"] = overlapped
    return out


def run(
    mode: str, entries: int, writers: int, directory: Path, repeat: int, idle_ms: float = 0.0
) -> dict[str, Any]:
    """One timed run of ``writers`` writers storing ``entries`` entries; its phases."""
    events: list[Event] = []
    with timed_owner(events, idle_ms):
        result = trio.run(run_one, mode, writers, make_entries(entries, 0), directory, repeat)
    skip = WARM_UP_ENTRIES + math.ceil(entries / 8 / writers)
    return {"mode": mode, "entries_per_s": result["entries_per_s"], **phases(events, skip)}


def _median_of(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def table(runs: list[dict[str, Any]], modes: list[str]) -> str:
    """A markdown table: one column per mode, the median over its runs of each figure."""
    lines = ["| step (median µs per batch) | " + " | ".join(modes) + " |"]
    lines.append("|---|" + "---:|" * len(modes))
    keys = [*STEPS, "write during index", "batches", "entries_per_s"]
    for key in keys:
        cells = []
        for mode in modes:
            value = _median_of([r for r in runs if r["mode"] == mode], key)
            cells.append("-" if value is None else f"{value:,.0f}")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=positive_int, default=16000)
    parser.add_argument("--writers", type=positive_int, default=64)
    parser.add_argument(
        "--modes", nargs="+", choices=("memory", "normal", "full"), default=["memory", "normal"]
    )
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--idle-ms", type=float, default=0.0, metavar="MS")
    parser.add_argument("--dir", type=existing_dir, default=None)
    args = parser.parse_args(argv)
    if not 0 <= args.idle_ms <= 1000:
        parser.error(f"--idle-ms must be between 0 and 1000, got {args.idle_ms}")
    distinct(args.modes, "--modes", parser)
    directory = make_scratch_dir(parser, args.dir, "actormem-phases-")
    try:
        warm_up = make_entries(200, WARM_UP_SEED + " phases")
        trio.run(run_one, args.modes[-1], args.writers, warm_up, directory, -1)
        runs = []
        for repeat in range(args.repeats):
            for mode in args.modes:
                r = run(mode, args.entries, args.writers, directory, repeat, args.idle_ms)
                runs.append(r)
                print(
                    f"{mode} repeat {repeat}: {r['entries_per_s']:,.0f} entries/s, "
                    f"period {r['period']:,.0f} µs",
                    flush=True,
                )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print()
    print(table(runs, args.modes))


if __name__ == "__main__":
    main()
