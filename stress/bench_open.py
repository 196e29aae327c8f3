"""Opening a durable file: open plus the first query, in a fresh process.

Usage (from the project root)::

    python -m stress.bench_open --sizes 100000 --repeats 2 --scorers word-overlap,bm25

For each size ``n`` a file of ``n`` real entries (:mod:`stress._bench_data`: tool calls and
LoCoMo turns, marked per cycle) is written once, straight into SQLite through the file's
own row codec (``encode_record``), and kept in ``--scratch`` for later runs. Then, for
each scorer and repeat, a *fresh* Python process (``python -c`` with :func:`child`'s source)
imports actormem, opens the file with ``open_memory(path=...)`` and answers one retrieve;
it reports, as one JSON line:

* ``wall_s`` / ``cpu_s``: from just before ``open_memory`` to the first answer (wall
  time; the process's CPU time, ``time.process_time``);
* ``read_s``: the part spent reading and decoding the rows (``SqliteStore.open``, or
  ``SqliteStore.open_read`` from branch ``open16``), and ``load_s``: rebuilding the
  state and its index from them (``MemoryState.load``), both CPU seconds of the thread
  that ran them; ``finish_s`` (from ``open16``): making the store after the load
  (``Opening.finish``: joining the late ``quick_check``, the read-write connection);
* ``beside_s``: the CPU of the threads that run beside the open's own (``quick_check``
  and the image's read, the texts' digest: none before branch ``open11``; the split
  row reader's SQLite thread, also given alone as ``feed_s``, from branch ``open13``;
  ``feed_wait_s``, from branch ``open27``: the wall seconds that thread waited with every
  chunk full, the open's thread behind it or busy with a prepared step), and
  ``path_cpu_s``: ``cpu_s`` less it, the CPU of the open's own path, which is what its
  wall time would be on an idle machine with a core free for the threads beside
  (``wall_s`` itself is only meaningful at a low load: ``load1``, the 1-minute load
  average when the run ended);
* ``digest_s`` and ``marker_s`` (from branch ``open26``): of ``beside_s``, the CPU of the
  texts' digest thread (``LateDigest``: the groups, the texts' bytes and their hash;
  from branch ``open42`` ``StoreDigest`` too, the same over the entries' store) and of
  hashing the image's parts against their marker (``image_marker``). Every
  phase is as at the first answer (from ``open26``: the close's calls not counted);
* ``prep_s`` (from branch ``open29``): of ``beside_s``, the CPU of the thread that
  checks the image's posting lists and makes the masks' numbering
  (``wordoverlap.persist.Prepared._numeric``);
* ``checks_s`` (from branch ``open32``): of ``beside_s``, the CPU of the thread that runs
  BM25's image checks in the core and the arrays made of the image
  (``bm25.persist._image_side``);
* ``max_rss_mib``: the process's peak resident memory; ``first_hit``: the best entry's id
  (the same for every checkout measured);
* with ``--phases`` (branch ``open33``), ``c_NAME`` / ``w_NAME``: the thread CPU and
  the wall seconds of some steps of a word-overlap open (from ``open44`` of a BM25
  one too: ``bm25_*``), wherever they ran (see :func:`child`; ``w_groups_wait`` /
  ``w_digest_wait``: the open's thread waiting for the digest thread's groups /
  digest; from ``open42``, ``digest_groups`` / ``digest_bytes`` also count
  ``StoreDigest``'s, and ``rows_slots`` is timed). A step a checkout lacks is left out;
* ``image``: whether the index was restored from the file's index image (None: a checkout
  without one), and ``close_s``: the CPU of closing (writing the image when it was not).

Each checkout and scorer opens its own copy of the file (a checkout with the index image
upgrades it to schema 4, which older ones refuse, and keeps one scorer's image). A
checkout with the image rebuilds on its first open and keeps the image at the close, so
its later repeats restore it: run ``--repeats 2`` (or more) and read the repeats apart.

``--root DIR`` (repeatable) measures other checkouts side by side, e.g. main before this
change: ``--root /work/main --root .``.

The target of issue #20: a 1M-entry file opens and answers its first query in <= 3 s.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ._bench_args import existing_dir, positive_ints
from ._bench_data import DEFAULT_DATA, entries, load_corpus
from ._bench_stats import load_average

SCORERS = ("word-overlap", "bm25")


def build_file(path: Path, n: int, data: Path, seed: int) -> None:
    """Write ``n`` corpus entries into a new memory file at ``path`` (rows as a memory
    would write them, seqs 1..n), of schema version 3, which checkouts before the index
    image (version 4) open too and later ones upgrade. O(n)."""
    from actormem._record import Record
    from actormem._storage.sqlite_format import CREATE_SCHEMA_V3, INSERT_ENTRY, encode_record

    tmp = path.with_suffix(".building")
    for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm"), Path(f"{tmp}.lock")):
        leftover.unlink(missing_ok=True)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        for statement in CREATE_SCHEMA_V3:
            conn.execute(statement)
        conn.execute("PRAGMA journal_mode = WAL")
    finally:
        conn.close()
    corpus = load_corpus(data, seed)
    conn = sqlite3.connect(tmp)
    try:
        with conn:
            batch: list[tuple[Any, ...]] = []
            for seq, entry in enumerate(entries(corpus, n), start=1):
                batch.append(encode_record(Record(entry, seq, seq)))
                if len(batch) == 10_000:
                    conn.executemany(INSERT_ENTRY, batch)
                    batch = []
            conn.executemany(INSERT_ENTRY, batch)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    os.replace(tmp, path)


def child(path: str, scorer: str, query: str, phases_on: str = "") -> dict[str, Any]:
    """Open ``path`` and answer ``query``; the figures of one fresh process. ``phases_on``
    non-empty (``--phases``): also some steps of a word-overlap open (the texts made for
    the digest, the image's prepared steps and the vocabulary in them, the bulk feed,
    the restore and its parts, the waits for the digest thread), each as ``c_NAME``
    (thread CPU s) and ``w_NAME`` (wall s), summed over its calls.

    Self-contained (stdlib and actormem only): :func:`main` runs its source with
    ``python -c`` and ``PYTHONPATH=--root``, so another checkout can be measured."""
    import json as _json  # noqa: F401  (the -c wrapper prints with it)
    import resource
    import threading
    import time

    import trio

    import actormem._storage.sqlite as sqlite_module
    from actormem import BM25Scorer, WordOverlapScorer, open_memory
    from actormem._engine.state import MemoryState

    phases: dict[str, float] = {}

    inside: set[tuple[str, int]] = set()  # a phase timed once where one call makes another
    lock = threading.Lock()

    def timed(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            # per thread: two threads beside the open (quick_check's, the digest's) may
            # run at once, and each one's CPU counts (open25: a set of names alone
            # left the second uncounted)
            key = (name, threading.get_ident())
            if key in inside:
                return fn(*args, **kwargs)
            inside.add(key)
            c0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    phases[name] = phases.get(name, 0.0) + time.thread_time() - c0
                inside.discard(key)

        return wrapper

    store_cls: Any = sqlite_module.SqliteStore
    store_cls.open = staticmethod(timed("read_s", store_cls.open))
    # Branch open16: the read (open_read) and the store's making after the load
    # (Opening.finish: the late quick_check joined, the read-write connection).
    if hasattr(store_cls, "open_read"):
        store_cls.open_read = staticmethod(timed("read_s", store_cls.open_read))
    opening_cls: Any = getattr(sqlite_module, "Opening", None)
    if opening_cls is not None:
        opening_cls.finish = timed("finish_s", opening_cls.finish)
    state_cls: Any = MemoryState
    state_cls.load = timed("load_s", state_cls.load)
    # The work a checkout runs in threads beside the open's own (none before branch
    # open11): their CPU, so that the open's own path (cpu_s less it) can be told apart.
    import actormem._index.persist as index_persist
    import actormem._storage.sqlite_format as fmt

    fmt_any: Any = fmt
    if hasattr(fmt_any, "_checks_beside"):
        fmt_any._checks_beside = timed("beside_s", fmt_any._checks_beside)
    late: Any = getattr(index_persist, "LateDigest", None)
    if late is not None:
        late._drain = timed("beside_s", late._drain)
        # (open26) the digest's thread alone: its groups, the texts' bytes, the hash
        late._drain = timed("digest_s", late._drain)
    store_late: Any = getattr(index_persist, "StoreDigest", None)
    if store_late is not None:  # (open42) the digest's thread over the store's UTF-8
        store_late._drain = timed("beside_s", store_late._drain)
        store_late._drain = timed("digest_s", store_late._drain)
    import actormem._index.wordoverlap.persist as wo_persist

    prepared: Any = getattr(wo_persist, "Prepared", None)
    if prepared is not None and hasattr(prepared, "_numeric"):
        # (open29) the image's lists checks, masks and rows of bits, in a thread beside
        numeric = timed("prep_s", prepared._numeric)
        prepared._numeric = staticmethod(timed("beside_s", numeric))
    import actormem._index.bm25.persist as bm25_persist
    from actormem._index import kernels as index_kernels

    bm25_any: Any = bm25_persist
    if getattr(bm25_any, "_C_CHECKS", False) and index_kernels.bm25_core_active():
        # (open32) BM25's image checks in the core, in a thread beside the open's
        checks = timed("checks_s", bm25_any._image_side)
        bm25_any._image_side = timed("beside_s", checks)
    if hasattr(fmt_any, "image_marker"):
        # (open26) the image's marker hashed over its parts (in the thread beside)
        fmt_any.image_marker = timed("marker_s", fmt_any.image_marker)

    def steps(name: str, fn: Any) -> Any:
        # (--phases) CPU and wall of one step of the open, wherever it runs
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            c0, w0 = time.thread_time(), time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with lock:
                    for key, spent in (("c_", time.thread_time() - c0),
                                       ("w_", time.perf_counter() - w0)):  # fmt: skip
                        phases[key + name] = phases.get(key + name, 0.0) + spent

        return wrapper

    if phases_on:
        import actormem._engine.state as state_module
        import actormem._index.wordoverlap.ccore as wo_ccore

        def patch(owner: Any, attr: str, name: str) -> None:
            fn = getattr(owner, attr, None)
            if fn is not None:  # (a checkout without it: left out)
                setattr(owner, attr, steps(name, fn))

        def patch_maker(attr: str, name: str) -> None:
            # ccore's getters return the core's function (or None): the function timed
            maker = getattr(wo_ccore, attr, None)
            if maker is not None:
                setattr(wo_ccore, attr, lambda: (lambda f: f and steps(name, f))(maker()))

        patch(wo_persist, "start_early", "start_early")  # the texts made for the digest
        patch(wo_persist, "restore", "restore")
        patch(wo_persist, "_restore_checked", "restore_checked")
        patch(prepared, "step", "prep_step")  # (the image's steps, mostly while reading)
        patch(wo_ccore, "acquire_all", "acquire_all")  # the vocabulary, in those steps
        patch(getattr(wo_persist, "_Numbering", None), "set_glist", "set_glist")
        patch(getattr(state_module, "_BulkFeed", None), "_feed", "feed")  # load_inserts
        patch(getattr(state_module, "_BulkRun", None), "finish", "run_finish")
        patch(late, "groups", "groups_wait")  # the open's thread waiting for the groups
        patch(late, "first_error", "digest_wait")  # ... and for the digest
        patch(index_persist, "_groups_of", "digest_groups")  # (the digest thread's groups)
        patch(index_persist, "_hash_encoded", "digest_bytes")  # (its texts' bytes, hashed)
        patch_maker("restore_columns", "restore_columns")
        patch_maker("rows_texts", "rows_texts")
        # (open42) the digest thread's groups and bytes from the store, the rows' slots
        patch(index_persist, "_slots_groups", "digest_groups")
        patch(index_persist, "_hash_store", "digest_bytes")
        patch_maker("rows_slots", "rows_slots")
        # (open44) BM25's restore and its parts: the texts' columns (and the thread
        # taken), the rows' part beside the checks' thread, then the rest; the wait
        # for the checks' thread is restore_late's wall less its steps'
        patch(bm25_persist, "restore", "bm25_restore")
        patch(bm25_persist, "_restore_late", "bm25_restore_late")
        patch(bm25_persist, "_texts", "bm25_texts")
        patch(bm25_persist, "_build_rows", "bm25_build_rows")
        patch(bm25_persist, "start_early", "bm25_start_early")
        from actormem._index.bm25.index import BM25Index

        patch(BM25Index, "_dense_refresh", "bm25_dense_refresh")
        patch(getattr(sqlite_module, "Opening", None), "finish", "finish")

    async def run() -> dict[str, Any]:
        sc = BM25Scorer() if scorer == "bm25" else WordOverlapScorer()
        c0 = time.process_time()
        t0 = time.perf_counter()
        async with open_memory(path=path, scorer=sc) as memory:
            t_open = time.perf_counter() - t0
            hits = await memory.retrieve(query, 10)
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            with lock:  # (open26) as at the answer: the close's calls not counted
                at_answer = dict(phases)
            n = len(memory)
            image = getattr(memory._storage, "image_fresh", None)
            c1 = time.process_time()
        close = time.process_time() - c1
        # the split row reader's C threads (branch open13): beside the path too
        crows: Any = getattr(fmt_any, "_crows", None)
        feed = getattr(crows, "feed_cpu_s", None)
        if feed is not None:
            at_answer["feed_s"] = feed()
            at_answer["beside_s"] = at_answer.get("beside_s", 0.0) + at_answer["feed_s"]
        # (open27) the wall time that thread sat with every chunk full (the open's
        # thread behind it, or busy with a prepared step): not CPU, not in beside_s
        waited = getattr(crows, "feed_wait_s", None)
        if waited is not None:
            at_answer["feed_wait_s"] = waited()
        beside = at_answer.get("beside_s", 0.0)
        return {
            "entries": n,
            "path_cpu_s": round(cpu - beside, 3),
            "hits": [str(h.id) for h in hits],
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "open_wall_s": round(t_open, 3),
            **{k: round(v, 3) for k, v in at_answer.items()},
            "max_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "image": image,
            "close_s": round(close, 3),
        }

    return trio.run(run)


_CHILD = (
    "import sys, json\nfrom typing import Any\n"
    + inspect.getsource(child)
    + "\nprint(json.dumps(child(*sys.argv[1:5])))\n"
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_ints, default=[100_000])
    parser.add_argument("--scorers", default="word-overlap,bm25")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=existing_dir, default=DEFAULT_DATA)
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/actormem_bench_open"))
    parser.add_argument("--query", default="What did Caroline research?")
    parser.add_argument(
        "--phases",
        action="store_true",
        help="also each step of the open (c_NAME thread CPU s, w_NAME wall s; word overlap)",
    )
    parser.add_argument(
        "--root",
        action="append",
        type=existing_dir,
        help="a checkout to measure (repeatable, run side by side); default: this one",
    )
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    roots = [(str(r), r.resolve()) for r in args.root or [here]]
    scratch = Path(tempfile.mkdtemp(prefix="bench_open_cwd_"))  # not a checkout: cwd
    scorers = [s for s in args.scorers.split(",") if s]
    for s in scorers:
        if s not in SCORERS:
            parser.error(f"unknown scorer {s!r}")
    args.scratch.mkdir(parents=True, exist_ok=True)
    print(json.dumps({"load_average": load_average(), "sizes": args.sizes, "scorers": scorers}))
    for n in args.sizes:
        path = args.scratch / f"open_{n}_{args.seed}.db"
        if not path.exists():
            t0 = time.perf_counter()
            build_file(path, n, args.data, args.seed)
            print(json.dumps({"built": str(path), "n": n, "s": round(time.perf_counter() - t0, 1)}))
        copies: dict[tuple[int, str], Path] = {}
        for i in range(len(roots)):
            for scorer in scorers:
                copy = copies[i, scorer] = path.with_name(f"{path.stem}.{i}.{scorer}.db")
                if not copy.exists():
                    shutil.copyfile(path, copy)
        for repeat in range(args.repeats):
            for scorer in scorers:
                for i, (label, root) in enumerate(roots):
                    copy = copies[i, scorer]
                    cmd = [sys.executable, "-c", _CHILD, str(copy), scorer, args.query]
                    if args.phases:
                        cmd.append("phases")
                    env = {**os.environ, "PYTHONPATH": str(root)}
                    out = subprocess.run(
                        cmd, check=True, capture_output=True, text=True, env=env, cwd=scratch
                    ).stdout
                    row = {"n": n, "scorer": scorer, "repeat": repeat, "root": label}
                    row["load1"] = round(os.getloadavg()[0], 2)  # wall means little above ~1
                    row |= json.loads(out)
                    hits = row.pop("hits")
                    row["first_hit"] = hits[0] if hits else None
                    print(json.dumps(row), flush=True)
    print(json.dumps({"load_average_end": load_average()}))


if __name__ == "__main__":
    main()
