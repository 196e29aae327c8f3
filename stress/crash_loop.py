"""SIGKILL a storing process at random moments; check that no acknowledged store is lost.

Usage (from the project root)::

    python stress/crash_loop.py [--iterations 100] [--seed 0] [--rounds 3]
        [--max-acks 400] [--writers 4] [--chunk 0] [--dir DIR]

Iteration ``k`` runs :func:`tests.crash_child.run_trial` with seed ``seed + k`` on a fresh
file: ``--rounds`` times in a row, a child process opens the durable memory, stores
entries from ``--writers`` concurrent tasks and prints each id once its ``store`` returned;
the parent kills it with SIGKILL after a random number of acknowledgements (up to
``--max-acks``, plus a random sub-5 ms delay) or, one time in five, at a random moment of
its first 0.6 s (file creation, loading). After every kill the parent reopens the file and
compares every acknowledged entry field by field. ``--chunk N`` (N > 0): the tasks store by
``store_many`` in lists of N (a kill then falls inside group commits of many entries).
The child reads ``tests/crash_child.py``'s environment variables (``ACTORMEM_TEST_`` +
``CHECKPOINT_FRAMES``, ``C_COMMIT``, ``RETRIEVE``, ``ACCESS_PENDING``, ``ACCESS_DELAY``,
``DURABILITY``); with ``ACTORMEM_TEST_RETRIEVE=1`` (a retrieve after each store: access
updates amid the kills) the entries are compared but for their access bookkeeping.

Output: one JSON object per iteration, then a summary object; the exit status is 1 if
any acknowledged entry was lost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from crash_child import run_trial  # type: ignore[import-not-found]  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=3, help="kills per file")
    parser.add_argument("--max-acks", type=int, default=400)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=0, help="store_many lists of N (0: store)")
    parser.add_argument("--dir", type=Path, default=None, help="where the files go")
    args = parser.parse_args(argv)
    totals = {"iterations": 0, "kills": 0, "early_kills": 0, "acked": 0, "lost": 0}
    start = time.perf_counter()
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    for k in range(args.iterations):
        directory = Path(tempfile.mkdtemp(prefix="actormem-crash-", dir=args.dir))
        try:
            report = run_trial(
                str(directory / "crash.db"),
                args.seed + k,
                rounds=args.rounds,
                max_acks=args.max_acks,
                writers=args.writers,
                chunk=args.chunk,
            )
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print(json.dumps(report), flush=True)
        totals["iterations"] += 1
        totals["kills"] += len(report["kills"])
        totals["early_kills"] += sum(kill["early"] for kill in report["kills"])
        totals["acked"] += report["acked"]
        totals["lost"] += len(report["lost"])
    summary = {"summary": totals, "seed": args.seed, "seconds": time.perf_counter() - start}
    print(json.dumps(summary), flush=True)
    return 1 if totals["lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
