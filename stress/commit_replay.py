"""The main job's group commits replayed alone: what SQLite's side costs per page size.

Usage (from the project root)::

    python -m stress.commit_replay record OUT.pickle [swarm arguments ...]
        Run ``actormem swarm`` (durable) in this process with ``SqliteStore._write``
        wrapped, and keep every batch's deletes, rows and access updates in OUT.
    python -m stress.commit_replay replay IN.pickle [--pages 16384,8192]
        [--checkpoint-frames 1000] [--repeats 3] [--dir DIR]
        Commit the recorded batches into a new file, in order, as the owner of a
        ``normal`` memory does (``inline_ok`` then ``write_inline``, else ``write``;
        checkpoints beside the writer run at once on this thread), once per page size
        and repeat, alternating; print the process's user and system CPU of the
        replay (``getrusage``), the commits and the checkpoints.

The rows are the records' encoded rows as ``prepare`` made them, so the replay times
the transactions and their checkpoints only: no engine, no event loop, no encoding.
The access updates' ``long_frames`` are not recorded (0: the main job's rows of ~900
bytes never overflow a page).
"""

from __future__ import annotations

import argparse
import os
import pickle
import resource
import runpy
import sys
import tempfile
from typing import Any


def record(out: str, swarm: list[str]) -> None:
    from actormem._storage import sqlite

    batches: list[tuple[list[Any], list[Any], list[Any]]] = []
    write = sqlite.SqliteStore._write

    def recorded(self: Any, batch: Any, wait: bool) -> bool:
        batches.append((list(batch.deletes), list(batch.puts), list(batch.accesses)))
        return write(self, batch, wait)

    sqlite.SqliteStore._write = recorded  # type: ignore[method-assign]
    sys.argv = ["actormem", "swarm", *swarm]
    try:
        runpy.run_module("actormem", run_name="__main__")
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        sqlite.SqliteStore._write = write  # type: ignore[method-assign]
        with open(out, "wb") as f:
            pickle.dump(batches, f)
    print(f"{len(batches)} batches -> {out}", file=sys.stderr)


def replay_once(batches: list[Any], page: int, frames: int, directory: str) -> dict[str, Any]:
    from actormem._storage import sqlite

    sqlite._PAGE_SIZE, sqlite.CHECKPOINT_FRAMES = page, frames
    with tempfile.TemporaryDirectory(dir=directory) as scratch:
        store, _ = sqlite.SqliteStore.open(os.path.join(scratch, "m.db"), sqlite.Durability.NORMAL)
        try:
            store.take_checkpoints()
            before = resource.getrusage(resource.RUSAGE_SELF)
            for deletes, puts, accesses in batches:
                batch = sqlite.Batch(deletes, puts, accesses)
                if not (store.inline_ok(batch, 64) and store.write_inline(batch)):
                    store.write(batch)
                if store.checkpoint_due():
                    store.checkpoint_beside()()
            store.checkpoint_due()  # takes the last one's result
            after = resource.getrusage(resource.RUSAGE_SELF)
        finally:
            store.close()
    return {
        "page": page,
        "user_s": after.ru_utime - before.ru_utime,
        "system_s": after.ru_stime - before.ru_stime,
        "commits": store.commits,
        "checkpoints": store.checkpoints,
    }


def main(argv: list[str]) -> None:
    if argv[:1] == ["record"] and len(argv) >= 2:
        record(argv[1], argv[2:])
        return
    p = argparse.ArgumentParser(prog="python -m stress.commit_replay replay")
    p.add_argument("batches")
    p.add_argument("--pages", default="16384,8192")
    p.add_argument("--checkpoint-frames", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None)
    if argv[:1] != ["replay"]:
        raise SystemExit(__doc__)
    args = p.parse_args(argv[1:])
    with open(args.batches, "rb") as f:
        batches = pickle.load(f)
    pages = [int(x) for x in args.pages.split(",")]
    for _ in range(args.repeats):
        for page in pages:
            got = replay_once(batches, page, args.checkpoint_frames, args.dir)
            total = got["user_s"] + got["system_s"]
            print(
                f"page {page:>6}: user {got['user_s']:.3f} s, system {got['system_s']:.3f} s,"
                f" total {total:.3f} s; {got['commits']} commits, {got['checkpoints']} checkpoints",
                flush=True,
            )


if __name__ == "__main__":
    main(sys.argv[1:])
