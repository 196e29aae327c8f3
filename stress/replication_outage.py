"""PostgreSQL restarted under load: replicated stores fail cleanly, nothing acknowledged
is lost, the nodes resume and converge (docs/replication.md).

Usage (from the project root; it STOPS the PostgreSQL cluster for a few seconds, which
every other user of the server notices, hence the flag)::

    python stress/replication_outage.py --i-may-restart-postgres [--dsn DSN]
        [--outage 3] [--writers 16] [--stop CMD] [--start CMD]

``--stop``/``--start`` default to ``pg_ctlcluster --skip-systemctl-redirect 15 main
stop -m fast`` and ``... start`` (Debian's cluster tools).

Three in-process nodes of one memory (each with ``--writers`` tasks storing new entries
in a loop) run for 2 s, the cluster is stopped for ``--outage`` seconds and started
again, the load goes on for 3 s more, then every node catches up. Printed as one JSON
object: stores acknowledged, stores failed with StorageError, acknowledged stores
missing from any node (must be 0), whether the nodes' states are equal at the same seq.
Exit status 1 if anything was lost, the nodes differ, no store failed during the outage
or none was acknowledged after it. `.ci/run` runs it (CI has the machine to itself).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import time
import uuid
from pathlib import Path

import trio

from actormem import Memory, ReplicaOptions, StorageError, open_memory
from actormem._engine.replica import encode_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from stress.bench_replication import database, make_entry  # noqa: E402

NAME = "outage"


async def run(dsn: str, writers: int, outage: float, stop_cmd: str, start_cmd: str) -> dict:
    options = ReplicaOptions(log_timeout=1.0, poll_interval=0.2, heartbeat_interval=0.2)
    acked: set[uuid.UUID] = set()
    failed = 0
    async with (
        open_memory(log=dsn, name=NAME, log_options=options) as a,
        open_memory(log=dsn, name=NAME, log_options=options) as b,
        open_memory(log=dsn, name=NAME, log_options=options) as c,
    ):
        nodes = [a, b, c]
        done = trio.Event()

        async def writer(node: Memory, seed: int) -> None:
            nonlocal failed
            rng = random.Random(seed)
            while not done.is_set():
                e = make_entry(rng)
                try:
                    await node.store(e)
                except StorageError:
                    failed += 1
                    await trio.sleep(0.05)
                else:
                    acked.add(e.id)

        async with trio.open_nursery() as nursery:
            for i, node in enumerate(nodes):
                for j in range(writers):
                    nursery.start_soon(writer, node, i * 1000 + j)
            await trio.sleep(2)
            before = len(acked)
            await trio.to_thread.run_sync(lambda: subprocess.run(shlex.split(stop_cmd), check=True))
            stopped_at = time.monotonic()
            await trio.sleep(outage)
            await trio.to_thread.run_sync(
                lambda: subprocess.run(shlex.split(start_cmd), check=True)
            )
            down = time.monotonic() - stopped_at
            restarted = len(acked)
            await trio.sleep(3)
            done.set()
        head = 0
        for node in nodes:  # flush and find the last seq (retrying until the log answers)
            while True:
                try:
                    await node.delete(uuid.uuid4())
                    break
                except StorageError:
                    await trio.sleep(0.2)
            head = max(head, node.statistics().log_applied_seq or 0)
        for node in nodes:
            await node.wait_applied(head)
        states = [encode_snapshot(n._state, 0) for n in nodes]
        ids = [{e["id"] for _, e in json.loads(s)["entries"]} for s in states]
        missing = sum(len({str(i) for i in acked} - got) for got in ids)
        return {
            "acked": len(acked),
            "acked_before_outage": before,
            "acked_after_restart": len(acked) - restarted,
            "failed_with_storage_error": failed,
            "outage_seconds": round(down, 2),
            "missing_acknowledged": missing,
            "converged": states[0] == states[1] == states[2],
            "seq": head,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--i-may-restart-postgres", action="store_true", required=True)
    parser.add_argument(
        "--dsn",
        default=os.environ.get("ACTORMEM_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"),
    )
    parser.add_argument("--outage", type=float, default=3.0)
    parser.add_argument("--writers", type=int, default=16)
    parser.add_argument(
        "--stop", default="pg_ctlcluster --skip-systemctl-redirect 15 main stop -m fast"
    )
    parser.add_argument("--start", default="pg_ctlcluster --skip-systemctl-redirect 15 main start")
    args = parser.parse_args()
    with database(args.dsn) as dsn:
        result = trio.run(run, dsn, args.writers, args.outage, args.stop, args.start)
    print(json.dumps(result))
    # Lost nothing, converged, refused cleanly while the database was down, and resumed.
    if (
        result["missing_acknowledged"]
        or not result["converged"]
        or result["failed_with_storage_error"] == 0
        or result["acked_after_restart"] == 0
    ):
        sys.exit(1)


if __name__ == "__main__":
    main()
