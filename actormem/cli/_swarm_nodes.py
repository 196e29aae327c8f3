"""``actormem swarm --nodes N --log DSN``: the swarm spread over N node processes.

Theory of operation
-------------------
The parent starts N child processes (``python -m actormem.cli._swarm_nodes``), each a
node of one new replicated memory ``swarm-<random>`` in the database ``DSN``
(docs/replication.md), with ``--agents`` agent tasks of its own and every N-th episode
of the workload. The run is in four steps, driven over the children's stdin/stdout (one
JSON object a line):

1. Each child opens its node and says ``ready``; once all are, the parent says ``go``
   (so no node starts with entries another one stored: nothing is present at the start).
2. Each child runs its agents (:func:`~actormem.cli._swarm.run_swarm`), then makes a
   no-op write (which also appends its last access hits) and reports its figures, its
   acknowledged store ids, and the seq it has applied.
3. The parent takes the largest seq (the log's last record: nobody writes any more),
   gathers every node's acknowledged ids into a file, and tells each child to check.
4. Each child waits until it applied that seq, then runs the swarm's per-id accounting
   (:func:`~actormem.cli._swarm.check_accounting`) with *every* node's acknowledged
   stores against its own state and removal reports (each node applies every removal,
   so each must account for every store), and reports a digest of its state and the
   time at which it applied each record.

The report adds the replication lag (from a store's acknowledgement on its node, i.e.
its record applied there, to the same record applied on each other node; p50/p99 over
every record and other node; all on one machine's clock) and the convergence check
(every node at the same seq with the same digest). Exit status 1 if the accounting of
any node fails (``lost`` > 0 or unexpected entries) or the nodes differ. The memory's
rows are deleted from the database at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from .._engine.lifecycle import open_memory
from .._engine.replica import Replica, encode_snapshot
from .._storage.pglog import PgLog, check_reachable, redact_dsn
from ._options import write_json
from ._swarm import Removals, SwarmRun, check_accounting, run_swarm
from ._swarm_args import SCORERS, swarm_parser, swarm_workload
from ._swarm_data import Episode, Workload

__all__ = ["swarm_nodes"]


def _share(workload: Workload, index: int, nodes: int) -> Workload:
    """Episodes ``index``, ``index + nodes``, ... of ``workload``."""

    def pick() -> Iterator[Episode]:
        for k, episode in enumerate(iter(workload.take, None)):
            if k % nodes == index:
                yield episode

    total = None if workload.total is None else len(range(index, workload.total, nodes))
    return Workload(pick(), total=total, limit=None, description=workload.description)


def _send(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


async def _child(args: argparse.Namespace, workload: Workload, cfg: dict[str, Any]) -> None:
    removals = Removals()
    async with open_memory(
        log=cfg["dsn"],
        name=cfg["name"],
        path=cfg["path"],
        capacity=args.capacity,
        scorer=SCORERS[args.scorer](),
        on_remove=removals,
    ) as memory:
        replica = memory._replica
        assert isinstance(replica, Replica)
        trace: dict[int, tuple[float, bool]] = {}
        replica.trace = trace
        _send({"ready": True})
        await trio.to_thread.run_sync(sys.stdin.readline)  # "go"
        initial = [e.id for e in memory.snapshot()]
        before = memory.statistics()
        removals.start_run()
        run = SwarmRun(agents=args.agents)
        share = _share(workload, cfg["index"], cfg["nodes"])
        await run_swarm(
            memory,
            share,
            agents=args.agents,
            top_k=args.top_k,
            duration=args.duration,
            max_steps=None if args.steps is None else -(-args.steps // cfg["nodes"]),
            run=run,
        )
        await memory.delete(uuid.uuid4())  # every earlier request, access hits included
        _send(
            {
                "elapsed": run.elapsed,
                "cpu_s": run.cpu_s,
                "steps": run.steps,
                "operations": run.operations,
                "failures": run.failures,
                "episodes": run.episodes_done,
                "stored": [str(i) for i in run.stored],
                "applied": memory.statistics().log_applied_seq,
            }
        )
        line = await trio.to_thread.run_sync(sys.stdin.readline)  # "check SEQ FILE"
        _, seq, stored_file = line.split(maxsplit=2)
        await memory.wait_applied(int(seq))
        text = await trio.Path(stored_file.strip()).read_text()
        stored = [uuid.UUID(s) for s in json.loads(text)]
        accounting = check_accounting(
            memory, initial=initial, stored=stored, removals=removals, before=before
        )
        state = encode_snapshot(memory._state, 0)
        _send(
            {
                "applied": memory.statistics().log_applied_seq,
                "digest": hashlib.sha256(state).hexdigest(),
                "entries": len(memory),
                "accounting": accounting.to_json(),
                "ok": accounting.ok,
                "lost": accounting.lost,
                "trace": {str(s): t for s, t in trace.items()},
            }
        )


def child_main(argv: list[str]) -> None:
    """The child process: ``python -m actormem.cli._swarm_nodes CONFIG_JSON``."""
    cfg = json.loads(argv[0])
    args = swarm_parser().parse_args(cfg["argv"])
    workload, _ = swarm_workload(args)
    trio.run(_child, args, workload, cfg)


def _lags(results: list[dict[str, Any]]) -> list[float]:
    """Seconds from a record's acknowledgement on its node to its apply on each other."""
    acked: dict[str, float] = {}
    for r in results:
        for seq, (when, mine) in r["trace"].items():
            if mine:
                acked[seq] = when
    lags = []
    for r in results:
        for seq, (when, mine) in r["trace"].items():
            if not mine and seq in acked:
                lags.append(max(0.0, when - acked[seq]))
    return lags


def _read(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"a node process ended early (status {proc.wait()})")
    result: dict[str, Any] = json.loads(line)
    return result


def _tell(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def swarm_nodes(args: argparse.Namespace) -> int:
    """Run ``actormem swarm --nodes N --log DSN`` (see the module docs); the exit status."""
    name = f"swarm-{uuid.uuid4().hex[:12]}"
    nodes = args.nodes
    check_reachable(args.log)  # one clear line now, not a traceback from every node
    print(
        f"actormem swarm: {nodes} node processes of memory {name!r} in {redact_dsn(args.log)}, "
        f"{args.agents} agents each",
        flush=True,
    )
    procs: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="actormem-swarm-") as folder:
        argv = [a for a in args.argv]
        try:
            for index in range(nodes):
                cfg = {
                    "dsn": args.log,
                    "name": name,
                    "path": str(Path(folder) / f"node{index}.sqlite"),
                    "index": index,
                    "nodes": nodes,
                    "argv": argv,
                }
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "actormem.cli._swarm_nodes", json.dumps(cfg)],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                )
            for proc in procs:
                _read(proc)  # ready
            for proc in procs:
                _tell(proc, "go")
            runs = [_read(proc) for proc in procs]
            head = max(r["applied"] or 0 for r in runs)
            stored_file = Path(folder) / "stored.json"
            stored_file.write_text(json.dumps([s for r in runs for s in r["stored"]]))
            for proc in procs:
                _tell(proc, f"check {head} {stored_file}")
            checks = [_read(proc) for proc in procs]
            for proc in procs:
                proc.wait()
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
                for pipe in (proc.stdin, proc.stdout):
                    if pipe is not None:
                        pipe.close()
            _drop(args.log, name)
    return _report(args, runs, checks, head)


def _drop(dsn: str, name: str) -> None:
    try:
        log = PgLog.open(dsn, name, {}, connect_timeout=5.0)
    except Exception as exc:  # noqa: BLE001 - best effort clean-up; say so and go on
        print(f"note: could not remove memory {name!r} from the log: {exc}", file=sys.stderr)
        return
    try:
        log.drop()
    finally:
        log.close()


def _report(
    args: argparse.Namespace,
    runs: list[dict[str, Any]],
    checks: list[dict[str, Any]],
    head: int,
) -> int:
    wall = max(r["elapsed"] for r in runs) or 1e-9
    cpu_s = sum(r["cpu_s"] for r in runs)
    operations = sum(r["operations"] for r in runs)
    steps = sum(r["steps"] for r in runs)
    for i, (r, c) in enumerate(zip(runs, checks, strict=True)):
        print(
            f"node {i}: {r['episodes']:,} episodes, {r['steps']:,} steps, "
            f"{len(r['stored']):,} stores acknowledged, {r['failures']} failures; "
            f"applied seq {c['applied']}, {c['entries']:,} entries, lost: {c['lost']}"
        )
    print(f"throughput: {operations / wall:,.0f} memory operations/s, {steps / wall:,.0f} steps/s")
    lags = _lags(checks)
    lag: dict[str, float] | None = None
    if len(lags) >= 2:
        q = statistics.quantiles(lags, n=100)
        lag = {"p50_ms": q[49] * 1000, "p99_ms": q[98] * 1000, "samples": len(lags)}
        print(
            f"replication lag (ack on one node to applied on another): "
            f"p50 {lag['p50_ms']:.2f} ms, p99 {lag['p99_ms']:.2f} ms ({len(lags):,} samples)"
        )
    converged = (
        all(c["applied"] == head for c in checks) and len({c["digest"] for c in checks}) == 1
    )
    print(f"convergence: {'every node identical' if converged else 'NODES DIFFER'} at seq {head}")
    lost = max(c["lost"] for c in checks)
    ok = converged and all(c["ok"] for c in checks) and not any(r["failures"] for r in runs)
    if not all(c["ok"] for c in checks):
        print("accounting FAILED on a node: see --json for the details")
    print(f"lost: {lost}")
    status = 0 if ok else 1
    if args.json is not None:
        report = {
            "nodes": len(runs),
            "agents_per_node": args.agents,
            "elapsed_s": wall,
            "operations_per_s": operations / wall,
            "cpu_s": cpu_s,
            "operations_per_cpu_s": operations / cpu_s if cpu_s > 0 else 0.0,
            "steps": steps,
            "seq": head,
            "converged": converged,
            "replication_lag_ms": lag,
            "per_node": [
                {k: v for k, v in {**r, **c}.items() if k not in ("stored", "trace")}
                for r, c in zip(runs, checks, strict=True)
            ],
            "status": status,
        }
        write_json(args.json, report)
    return status


if __name__ == "__main__":
    child_main(sys.argv[1:])
