"""The texts' digest's CPU over a file's texts, in-process (issue #20, branch ``open19``).

Reads the ``memory`` column of a memory file (seq order, each str's hash cached as the
row reader leaves them) and times, ``--repeats`` times in turn, with ``time.thread_time``
(the CPU of the thread that would be the digest's) and the wall:

* ``distinct``: ``persist._digest_nogil(texts, (), True)()``, what ``LateDigest``'s
  thread runs for the word-overlap restore's early digest (the core's path);
* ``all``: ``persist._digest_nogil(texts, ())()``, every text (``text_digest``'s);
* ``hashlib``: the core's encoder off (``persist._encoder``; ``_DIGEST_NOGIL`` in a
  checkout before branch tidy24b), ``text_digest(list(dict.fromkeys(texts)))``: the
  path of a build without the core (the distinct texts found, joined and encoded with
  the GIL, then hashed).

``--root CHECKOUT`` imports that checkout's ``actormem`` (so two checkouts are compared
by running this file from each). Prints one JSON line per repeat with the load average.
``--only NAME --limit N`` (for callgrind): the first N texts, one digest of that kind
(``none``: the read alone), no timing.

    python stress/bench_digest.py --file /work/scratch_open18/open_1000000_0.db \\
        --root /work/wt/open19 --repeats 3
    valgrind --tool=callgrind python stress/bench_digest.py --file ... --root ... \\
        --only distinct --limit 100000
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
import time
from typing import Any


def _timed(fn: Any) -> tuple[float, float, Any]:
    c0, w0 = time.thread_time(), time.perf_counter()
    out = fn()
    return time.thread_time() - c0, time.perf_counter() - w0, out


def _no_encoder() -> bool:
    return False


def _join_path(persist: Any, on: bool) -> None:
    """The digest's bytes by ``str.join`` and ``encode`` (``on``) or by the core."""
    if hasattr(persist, "_DIGEST_NOGIL"):  # a checkout before branch tidy24b
        persist._DIGEST_NOGIL = not on
    else:
        persist._encoder = _no_encoder if on else _ENCODER[0]


_ENCODER: list[Any] = []


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--file", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--only", choices=("none", "distinct", "all", "hashlib"))
    parser.add_argument("--limit", type=int, default=-1)
    args = parser.parse_args(argv)
    sys.path.insert(0, args.root)
    from actormem._index import persist

    _ENCODER.append(getattr(persist, "_encoder", None))
    conn = sqlite3.connect(f"file:{args.file}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT memory FROM entries ORDER BY seq LIMIT ?", (args.limit,))
        texts = [row[0] for row in rows]
    finally:
        conn.close()
    for text in texts:
        hash(text)
    if args.only is not None:
        if args.only == "distinct":
            print(persist._digest_nogil(texts, (), True)())
        elif args.only == "all":
            print(persist._digest_nogil(texts, ())())
        elif args.only == "hashlib":
            _join_path(persist, True)
            print(persist.text_digest(list(dict.fromkeys(texts))))
        return
    for _ in range(args.repeats):
        out: dict[str, Any] = {"root": args.root, "load": os.getloadavg()[0]}
        for name, fn in (
            ("distinct", lambda: persist._digest_nogil(texts, (), True)()),
            ("all", lambda: persist._digest_nogil(texts, ())()),
        ):
            cpu, wall, digest = _timed(fn)
            out[name] = [round(cpu, 3), round(wall, 3), digest[:8]]
        _join_path(persist, True)
        try:
            cpu, wall, digest = _timed(lambda: persist.text_digest(list(dict.fromkeys(texts))))
        finally:
            _join_path(persist, False)
        out["hashlib"] = [round(cpu, 3), round(wall, 3), digest[:8]]
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
