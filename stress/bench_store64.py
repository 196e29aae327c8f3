"""Issue #20's store target as a benchmark: 64 writer tasks, real texts, in memory and durable.

Each run is a fresh process (so runs of two checkouts can alternate): a fresh memory
(``open_memory()``, or ``open_memory(path=..., durability=...)`` on a fresh file), then
``--writers`` tasks share ``--entries`` real entries (``stress._bench_data``: the tool
calls and LoCoMo turns, marked per cycle so every text is distinct). With ``store``
each task awaits one ``memory.store(entry)`` after another; with ``store_many`` each
task sends its share in lists of ``--chunk`` entries (``await memory.store_many(list)``:
what a caller that batches does). Before the timed part, ``--preload`` entries are
stored with ``store_many`` (the memory is then not empty: at 100k the index's posting
lists and vocabulary exist, as in a long-running memory).

``--gc-freeze`` calls ``gc.collect()`` and ``gc.freeze()`` just before the timed part
(the benchmark's own corpus, prebuilt entries and imports then leave the collector's
full passes, as the other benchmarks freeze their prebuilt memories; docs/design.md,
"Garbage collection"); off by default, the way earlier figures were taken.

Reported per run: entries/s over the wall time of the timed part, and entries per
CPU-second of the whole process over the same part (``time.process_time``: the owner,
the writers and, durable, the commit thread), and the CPU split into the event-loop
thread (``time.thread_time``) and the rest.

``--against DIR`` runs every cell also with the package of another checkout (``DIR``,
e.g. a worktree of ``main`` with its extensions built), alternating the two run by run
(which goes first alternates too), so that both see the same minutes of a shared machine;
the table gives the medians per cell and new/old ratios. ``--old-knobs`` does the same
with this checkout for both sides, the old one with the batched store path's knobs off
(``state._STORE_BATCH``, ``wordoverlap.knobs._ADD_MANY``, ``sqlite_format._ENCODE_DIRECT``);
``--old-knobs store5`` with branch store5's knobs off instead (``wordoverlap.knobs.
_ACQUIRE_FAST`` and ``_UNTRACK``, ``textfold._FOLD_DIRECT``, ``state._RELEVANCE_APPEND``);
``--old-knobs store6`` with branch store6's (``state._UNTRACK_RECORDS``,
``wordoverlap.knobs._CACHE_UCS``, ``sqlite_format._ISO_DIRECT`` and ``_INSERT_NO_NULLS``);
``--old-knobs store7`` with branch store7's (``state._DEFER_BATCH``); ``--old-knobs
store8`` with branch store8's (``wordoverlap.knobs._SCAN_ONE``, ``_LOWER_C``,
``_LEAN_TEXT_CHECKS``, ``_MASKS_BY_KIND``, ``textfold._FOLD_TABLE``, ``state._DUPKEY_C``);
``--old-knobs
durable8`` with branch durable8's (``memory._GC_PAUSE``, ``sqlite_format._ROWS_C``,
``sqlite._PAGE_SIZE``); ``--old-knobs store10`` with branch store10's (``state._STORE_C``,
``wordoverlap.knobs._ADD_GROUPS_C`` and ``_GROW_DIRECT``); ``--old-knobs durable10`` with
branch durable10's (``memory._INLINE_COMMIT``, ``sqlite_format._ACCESS_ISO``).

Usage (from the repository root)::

    python -m stress.bench_store64 --entries 64000 --repeats 3 [--against ../wt/base]
        [--modes memory,normal] [--apis store,store_many] [--preload 0] [--json out.json]
    python -m stress.bench_store64 --state 100000,300000

``--state SIZES`` measures the state's store alone instead (``MemoryState.store``, no
owner, no trio): this checkout's store path against the path before it (the knobs
``wordoverlap.knobs._ADD_CACHED`` and ``textfold._FOLD_HASH``), in one process, two
states filled side by side in alternating chunks of 512 (thread CPU per chunk).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryEntry, open_memory
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState

from ._bench_args import existing_dir, output_file, positive_int, positive_ints
from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_engine import fill_state, make_scorer, store_paired

ROOT = Path(__file__).resolve().parent.parent


async def _timed(
    modes: str,
    api: str,
    batch: Sequence[MemoryEntry],
    preload: Sequence[MemoryEntry],
    writers: int,
    chunk: int,
    scratch: Path,
    freeze: bool = False,
) -> dict[str, float]:
    opener = (
        open_memory()
        if modes == "memory"
        else open_memory(path=scratch / "bench.db", durability=modes)
    )
    async with opener as memory:
        for lo in range(0, len(preload), 512):
            await memory.store_many(preload[lo : lo + 512])

        async def one_by_one(share: Sequence[MemoryEntry]) -> None:
            store = memory.store
            for entry in share:
                await store(entry)

        async def in_lists(share: Sequence[MemoryEntry]) -> None:
            store_many = memory.store_many
            for lo in range(0, len(share), chunk):
                await store_many(share[lo : lo + chunk])

        task = one_by_one if api == "store" else in_lists
        if freeze:  # the benchmark's own corpus and entries out of the collector's sight
            gc.collect()
            gc.freeze()
        wall0, cpu0, thr0 = time.perf_counter(), time.process_time(), time.thread_time()
        async with trio.open_nursery() as nursery:
            for w in range(writers):
                nursery.start_soon(task, batch[w::writers])
        wall = time.perf_counter() - wall0
        cpu = time.process_time() - cpu0
        thread = time.thread_time() - thr0
        if freeze:
            gc.unfreeze()
        assert len(memory) == len(batch) + len(preload)
    return {"wall_s": wall, "cpu_s": cpu, "loop_cpu_s": thread}


def _switch_batch(on: bool) -> None:
    """The batched store path (branch store4) on or off: ``MemoryState.store_many``'s
    inserts in one frame with the index's ``add_many`` (``state._STORE_BATCH``,
    ``wordoverlap.knobs._ADD_MANY``) and the durable row of a new record from its entry
    (``sqlite_format._ENCODE_DIRECT``). Off is the path before them; the same results."""
    from actormem._engine import state
    from actormem._index.wordoverlap import knobs
    from actormem._storage import sqlite_format

    state._STORE_BATCH = on
    knobs._ADD_MANY = on
    sqlite_format._ENCODE_DIRECT = on


def _switch_store5(on: bool) -> None:
    """The store path of branch store5 on or off: a new token's grams acquired without
    its key set (``wordoverlap.knobs._ACQUIRE_FAST``), the compiled add's new lists and
    sets untracked by the collector (``wordoverlap.knobs._UNTRACK``) and the duplicate
    key's fold hash of a text that is not ASCII without ``str.casefold``
    (``textfold._FOLD_DIRECT``), the relevance order's append at its end inline
    (``state._RELEVANCE_APPEND``). Off is the path before them (the batched path of
    ``_switch_batch`` stays on); the same results."""
    from actormem._engine import state
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    state._RELEVANCE_APPEND = on
    knobs._ACQUIRE_FAST = on
    knobs._UNTRACK = on
    textfold._FOLD_DIRECT = on


def _switch_store6(on: bool) -> None:
    """The store path of branch store6 on or off: the records ``store_many`` inserts into
    an unbounded memory untracked by the cyclic collector (``state._UNTRACK_RECORDS``),
    the token cache serving the texts that are not ASCII (``wordoverlap.knobs.
    _CACHE_UCS``), a durable row's datetimes formatted in C (``sqlite_format.
    _ISO_DIRECT``) and its NULLs left out of the insert (``sqlite_format.
    _INSERT_NO_NULLS``). Off is the path before them (the batched path and store5's stay on);
    the same results."""
    from actormem._engine import state
    from actormem._index.wordoverlap import knobs
    from actormem._storage import sqlite_format

    state._UNTRACK_RECORDS = on
    knobs._CACHE_UCS = on
    sqlite_format._ISO_DIRECT = on
    sqlite_format._INSERT_NO_NULLS = on


def _switch_store7(on: bool) -> None:
    """The store path of branch store7 on or off: ``store_many`` into a state that defers
    its index (the durable owner's batch) through ``_store_batch``, and the deferred
    adds made by ``add_many`` (``state._DEFER_BATCH``). Off is the path before it (the
    batched path, store5's and store6's stay on); the same results."""
    from actormem._engine import state

    state._DEFER_BATCH = on


def _switch_durable8(on: bool) -> None:
    """The durable path of branch durable8 on or off: no cyclic collection from a durable
    batch's apply to its answers (``memory._GC_PAUSE``) and the batch's rows built in
    one C pass (``sqlite_format._ROWS_C``), a new file's pages of 16 KiB
    (``sqlite._PAGE_SIZE``). Off is the path before them; the same rows."""
    from actormem._engine import memory
    from actormem._storage import sqlite, sqlite_format

    memory._GC_PAUSE = on
    sqlite_format._ROWS_C = on
    sqlite._PAGE_SIZE = 16384 if on else None


def _switch_durable10(on: bool) -> None:
    """The durable path of branch durable10 on or off: a small group commit made on the
    event loop, the store's own checkpoints in its thread (``memory._INLINE_COMMIT``),
    and access updates' datetimes by ``iso_utc`` (``sqlite_format._ACCESS_ISO``). Off is
    the path before them; the same rows."""
    from actormem._engine import memory
    from actormem._storage import sqlite_format

    memory._INLINE_COMMIT = on
    sqlite_format._ACCESS_ISO = on


def _switch_store8(on: bool) -> None:
    """The store path of branch store8 on or off: the compiled add's one-pass token scan
    (``wordoverlap.knobs._SCAN_ONE``), the fold hash's table (``textfold._FOLD_TABLE``),
    ``add_many``'s ``lower_text`` (``knobs._LOWER_C``), the text checks left to C
    (``knobs._LEAN_TEXT_CHECKS``), ``text_masks`` per string kind
    (``knobs._MASKS_BY_KIND``) and the C duplicate key (``state._DUPKEY_C``; off, the one
    formula in Python: slower than the inline copies before it). The same results."""
    from actormem._engine import state
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    knobs._SCAN_ONE = on
    knobs._LOWER_C = on
    knobs._LEAN_TEXT_CHECKS = on
    knobs._MASKS_BY_KIND = on
    textfold._FOLD_TABLE = on
    state._DUPKEY_C = on


def _switch_store10(on: bool) -> None:
    """The store path of branch store10 on or off: a batch's plain inserts in one C call
    (``state._STORE_C``; off, ``_store_batch``'s Python loop), ``add_many``'s new texts
    in one C call (``wordoverlap.knobs._ADD_GROUPS_C``) and full posting lists grown by
    the compiled add (``knobs._GROW_DIRECT``). The same results."""
    from actormem._engine import state
    from actormem._index.wordoverlap import knobs

    state._STORE_C = on
    knobs._ADD_GROUPS_C = on
    knobs._GROW_DIRECT = on


#: ``--old-knobs SET``: the knobs the old side turns off.
_KNOB_SETS = {
    "batch": _switch_batch,
    "store5": _switch_store5,
    "store6": _switch_store6,
    "store7": _switch_store7,
    "durable8": _switch_durable8,
    "store8": _switch_store8,
    "store10": _switch_store10,
    "durable10": _switch_durable10,
}


def child(args: argparse.Namespace) -> None:
    """One run in this process; one JSON line on stdout."""
    if args.knobs_off:
        _KNOB_SETS[args.knobs_off](False)
    corpus = load_corpus(args.data)
    preload = list(entries(corpus, args.preload, start=10**7))
    batch = list(entries(corpus, args.entries))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        out = trio.run(
            _timed,
            args.mode,
            args.api,
            batch,
            preload,
            args.writers,
            args.chunk,
            Path(tmp),
            args.gc_freeze,
        )
    n = len(batch)
    out.update(
        entries_per_s=n / out["wall_s"],
        entries_per_cpu_s=n / out["cpu_s"],
        loop_us_per_entry=1e6 * out["loop_cpu_s"] / n,
    )
    print(json.dumps(out))


def _switch(on: bool) -> None:
    """This checkout's store path on or off: off is the path before the token cache
    (``wordoverlap.knobs._ADD_CACHED``: ``add_text_known`` for every text, the posting
    appends by ``array.append``) and the duplicate key by the fold's hash
    (``textfold._FOLD_HASH``, read when a state is made); the storepath branch's
    ``add_text_known`` and ``fold_ascii`` stay on in both."""
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    knobs._ADD_CACHED = on
    textfold._FOLD_HASH = on


def state_paired(args: argparse.Namespace) -> None:
    """``--state``: the state's store alone (no owner, no trio), both paths of this
    checkout side by side: per size two fresh word-overlap states get the same entries
    in alternating chunks of 512 (which path goes first alternates), with a publish and
    vacuum per chunk, thread CPU per chunk (``store_paired``)."""
    corpus = load_corpus(args.data)
    print("| entries | old: entries per CPU-s | new: entries per CPU-s | new/old |")
    print("|---:|---:|---:|---:|")
    for size in args.state:
        batch = list(entries(corpus, size))
        states = {}
        for on in (False, True):
            _switch(on)  # the duplicate key's function is chosen when the state is made
            states[on] = MemoryState(
                capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=make_scorer("word-overlap")
            )
        cpu = store_paired(states, batch, 512, _switch, fill_state)
        _switch(True)
        old, new = size / cpu[False], size / cpu[True]
        print(f"| {size:,} | {old:,.0f} | {new:,.0f} | {new / old:.2f} |", flush=True)
        del states, batch


def _run(
    tree: Path, cell: dict[str, Any], args: argparse.Namespace, knobs_off: str | None = None
) -> dict[str, Any]:
    # actormem from ``tree``, imported first; then this checkout's ``stress`` (the other
    # checkout may have no such benchmark), which finds actormem already imported.
    boot = (
        f"import sys; sys.path[:0] = [{str(tree)!r}]; import actormem; "
        f"assert actormem.__file__.startswith({str(tree)!r}), actormem.__file__; "
        f"sys.path[0] = {str(ROOT)!r}; from stress.bench_store64 import main; "
        "raise SystemExit(main())"
    )
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    cmd = [
        sys.executable,
        "-c",
        boot,
        "--child",
        "--mode",
        cell["mode"],
        "--api",
        cell["api"],
        "--entries",
        str(args.entries),
        "--writers",
        str(args.writers),
        "--chunk",
        str(args.chunk),
        "--preload",
        str(args.preload),
        "--data",
        str(args.data),
    ]
    if args.dir is not None:
        cmd += ["--dir", str(args.dir)]
    if args.gc_freeze:
        cmd.append("--gc-freeze")
    if knobs_off:
        cmd += ["--knobs-off", knobs_off]
    done = subprocess.run(
        cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"run failed ({tree}):\n{done.stderr}")
    row: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return row


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--entries", type=positive_int, default=64000)
    p.add_argument("--writers", type=positive_int, default=64)
    p.add_argument("--chunk", type=positive_int, default=32, help="entries per store_many")
    p.add_argument("--preload", type=int, default=0)
    p.add_argument("--modes", default="memory,normal")
    p.add_argument("--apis", default="store,store_many")
    p.add_argument("--repeats", type=positive_int, default=3)
    p.add_argument("--against", type=existing_dir, default=None)
    p.add_argument("--data", type=Path, default=DEFAULT_DATA)
    p.add_argument("--dir", type=existing_dir, default=None, help="where durable files go")
    p.add_argument("--json", type=output_file, default=None)
    p.add_argument(
        "--gc-freeze",
        action="store_true",
        help="gc.freeze() before the timed part: the benchmark's corpus and prebuilt entries "
        "are then not walked by the collector's full passes (off: the figures before it)",
    )
    p.add_argument(
        "--old-knobs",
        nargs="?",
        const="batch",
        default=None,
        choices=sorted(_KNOB_SETS),
        help="old = this checkout with a set of knobs off (not --against): 'batch' (the "
        "default) the batched store path's, 'store5' branch store5's vocabulary and fold, "
        "'store6' the untracked records, the token cache for texts that are not ASCII, "
        "the rows' datetimes in C and their NULLs left out of the insert, 'store7' the "
        "durable owner's batch through the batched path, 'durable8' the durable batch without "
        "collections, its rows in C and 16 KiB pages, 'store8' the one-pass token scan, the "
        "fold and lower-case tables, the text checks in C and the C duplicate key, 'store10' "
        "a batch's plain inserts and new texts in C calls, posting lists grown in C",
    )
    p.add_argument(
        "--state",
        type=positive_ints,
        default=None,
        help="sizes: the state's store alone, this checkout's old and new path in one process",
    )
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--knobs-off", choices=sorted(_KNOB_SETS), help=argparse.SUPPRESS)
    p.add_argument("--mode", default="memory", help=argparse.SUPPRESS)
    p.add_argument("--api", default="store", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args)
        return 0
    if args.state is not None:
        state_paired(args)
        return 0
    if args.old_knobs is not None and args.against is not None:
        p.error("--old-knobs and --against exclude each other")
    trees = {"new": ROOT} if args.against is None else {"old": args.against, "new": ROOT}
    if args.old_knobs is not None:
        trees = {"old": ROOT, "new": ROOT}
    cells = [{"mode": m, "api": a} for m in args.modes.split(",") for a in args.apis.split(",")]
    runs: list[dict[str, Any]] = []
    for r in range(args.repeats):
        for cell in cells:
            order = list(trees) if r % 2 == 0 else list(reversed(trees))
            for side in order:
                row = _run(trees[side], cell, args, args.old_knobs if side == "old" else None)
                row.update(cell, side=side, repeat=r)
                runs.append(row)
                print(json.dumps(row), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps(runs, indent=1))
    print()
    print("| mode | api | side | entries/s wall | entries per CPU-s | loop µs/entry | new/old |")
    print("|---|---|---|---:|---:|---:|---:|")
    for cell in cells:
        med: dict[str, float] = {}
        for side in trees:
            mine = [
                x
                for x in runs
                if x["side"] == side and x["mode"] == cell["mode"] and x["api"] == cell["api"]
            ]
            wall = statistics.median(x["entries_per_s"] for x in mine)
            cpu = med[side] = statistics.median(x["entries_per_cpu_s"] for x in mine)
            loop = statistics.median(x["loop_us_per_entry"] for x in mine)
            ratio = f"{med['new'] / med['old']:.2f}" if side == "new" and "old" in med else ""
            print(
                f"| {cell['mode']} | {cell['api']} | {side} | {wall:,.0f} | {cpu:,.0f} "
                f"| {loop:.1f} | {ratio} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
