"""The node-file check every open's finish makes (``refuse_node_file``), against a whole
open and close, thread CPU, in one run.

Usage (from the project root)::

    python -m stress.bench_node_check [--entries 2000] [--calls 20000] [--opens 10]

Prints one line: the check's CPU a call (one ``SELECT`` of a ``meta`` row on an open
connection) and the trio thread's CPU for an open and close of a file of ``--entries``
entries (the worker threads' share not counted).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile
import time

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage.sqlite import refuse_node_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--opens", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = os.path.join(scratch, "b.db")

        async def fill() -> None:
            async with open_memory(path=path) as memory:
                texts = [f"entry {i}" for i in range(args.entries)]
                await memory.store_many([MemoryEntry.new(MemoryCategory.FACT, t) for t in texts])

        async def open_close() -> None:
            async with open_memory(path=path):
                pass

        trio.run(fill)
        conn = sqlite3.connect(path, isolation_level=None)
        start = time.thread_time()
        for _ in range(args.calls):
            refuse_node_file(path, conn)
        check = (time.thread_time() - start) / args.calls
        conn.close()
        start = time.thread_time()
        for _ in range(args.opens):
            trio.run(open_close)
        whole = (time.thread_time() - start) / args.opens
    print(
        f"refuse_node_file: {check * 1e6:.1f} us CPU a call; an open and close of "
        f"{args.entries:,} entries: {whole * 1e3:.1f} ms of the trio thread's CPU"
    )


if __name__ == "__main__":
    main()
