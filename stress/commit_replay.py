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
        replay (``getrusage``), the commits and the checkpoints. ``--merge K``
        commits every K consecutive batches as one (their deletes, puts and access
        updates in order, each list run as the engine runs a batch's): what fewer,
        larger group commits would cost.
    python -m stress.commit_replay accesslog IN.pickle [--fold 200] [--repeats 3]
        [--dir DIR]
        A prototype of access counts in an append-only table, over Python's
        ``sqlite3`` alone (8 KiB pages, WAL, ``synchronous=NORMAL``, SQLite's automatic
        checkpoint at 1,000 frames): the recorded batches committed as they are
        (``update``: access updates rewrite the rows in place, as the file does
        today), with each access update appended to a table ``access_log`` instead
        (``log``: folded into ``entries`` in a commit of its own every ``--fold``
        commits: the last row of each seq wins; a put of a seq with rows in the log
        deletes them first) and appended without any fold (``lognofold``); user and
        system CPU of each (``getrusage``).

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

    def recorded(self: Any, batch: Any, wait: bool, *more: Any) -> bool:
        batches.append((list(batch.deletes), list(batch.puts), list(batch.accesses)))
        return write(self, batch, wait, *more)

    sqlite.SqliteStore._write = recorded  # type: ignore[method-assign]
    from actormem.cli import _main

    fast_exit, argv = _main._FAST_EXIT, sys.argv
    _main._FAST_EXIT = False  # the swarm's os._exit would skip writing OUT
    sys.argv = ["actormem", "swarm", *swarm]
    try:
        runpy.run_module("actormem", run_name="__main__")
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        _main._FAST_EXIT, sys.argv = fast_exit, argv
        sqlite.SqliteStore._write = write  # type: ignore[method-assign]
        with open(out, "wb") as f:
            pickle.dump(batches, f)
    print(f"{len(batches)} batches -> {out}", file=sys.stderr)


def merged(batches: list[Any], k: int) -> list[Any]:
    """Every ``k`` consecutive batches as one: deletes, puts and access updates each
    concatenated in order."""
    if k <= 1:
        return batches
    return [
        tuple([x for batch in batches[i : i + k] for x in batch[part]] for part in range(3))
        for i in range(0, len(batches), k)
    ]


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


_FOLD = (
    "UPDATE entries SET access_count = l.ac, last_accessed = l.la, expires_at = l.ea"
    " FROM (SELECT seq, access_count AS ac, last_accessed AS la, expires_at AS ea,"
    " max(rowid) FROM access_log GROUP BY seq) AS l WHERE entries.seq = l.seq"
)


def access_log_once(
    batches: list[Any], variant: str, fold: int, directory: str
) -> tuple[float, float, list[tuple[Any, ...]]]:
    """One ``accesslog`` run of ``variant`` (``update``, ``log``, ``lognofold``) into a
    new file in ``directory``: (user s, system s, the rows' ``seq, access_count,
    last_accessed, expires_at`` at the end, the log folded after the timing)."""
    import sqlite3

    from actormem._storage.sqlite_format import (
        _CREATE_ENTRIES,
        DELETE_ENTRY,
        INSERT_ENTRY,
        UPDATE_ACCESS,
    )

    conn = sqlite3.connect(os.path.join(directory, f"{variant}.db"), isolation_level=None)
    try:
        for pragma in ("page_size = 8192", "journal_mode = WAL", "synchronous = NORMAL",
                       "wal_autocheckpoint = 1000"):  # fmt: skip
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(_CREATE_ENTRIES)  # the file's table
        conn.execute(
            "CREATE TABLE access_log (access_count INTEGER NOT NULL, last_accessed TEXT,"
            " expires_at TEXT, seq INTEGER NOT NULL)"
        )
        log = "INSERT INTO access_log VALUES (?, ?, ?, ?)"
        access = UPDATE_ACCESS if variant == "update" else log
        logged: set[int] = set()  # the seqs with rows in access_log
        before = resource.getrusage(resource.RUSAGE_SELF)
        for n, (deletes, puts, accesses) in enumerate(batches, 1):
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(DELETE_ENTRY, deletes)
            if logged and puts:  # a row put again: its older log rows must not win
                stale = [(row[0],) for row in puts if row[0] in logged]
                conn.executemany("DELETE FROM access_log WHERE seq = ?", stale)
                logged.difference_update(seq for (seq,) in stale)
            conn.executemany(INSERT_ENTRY, puts)
            conn.executemany(access, accesses)
            conn.execute("COMMIT")
            if variant != "update":
                logged.update(row[-1] for row in accesses)
            if variant == "log" and n % fold == 0:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(_FOLD)
                conn.execute("DELETE FROM access_log")
                conn.execute("COMMIT")
                logged.clear()
        after = resource.getrusage(resource.RUSAGE_SELF)
        conn.execute(_FOLD)  # what is left in the log, untimed
        rows = conn.execute(
            "SELECT seq, access_count, last_accessed, expires_at FROM entries ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, rows


def access_log(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m stress.commit_replay accesslog")
    p.add_argument("batches")
    p.add_argument("--fold", type=int, default=200)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None)
    args = p.parse_args(argv)
    with open(args.batches, "rb") as f:
        batches = pickle.load(f)
    for _ in range(args.repeats):
        for variant in ("update", "log", "lognofold"):
            with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
                user, system, _ = access_log_once(batches, variant, args.fold, scratch)
            print(f"{variant:>9}: user {user:.3f} s, system {system:.3f} s,"
                  f" total {user + system:.3f} s", flush=True)  # fmt: skip


def main(argv: list[str]) -> None:
    if argv[:1] == ["record"] and len(argv) >= 2:
        record(argv[1], argv[2:])
        return
    if argv[:1] == ["accesslog"]:
        access_log(argv[1:])
        return
    p = argparse.ArgumentParser(prog="python -m stress.commit_replay replay")
    p.add_argument("batches")
    p.add_argument("--pages", default="16384,8192")
    p.add_argument("--checkpoint-frames", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", default=None)
    p.add_argument("--merge", type=int, default=1)
    if argv[:1] != ["replay"]:
        raise SystemExit(__doc__)
    args = p.parse_args(argv[1:])
    with open(args.batches, "rb") as f:
        batches = merged(pickle.load(f), args.merge)
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
