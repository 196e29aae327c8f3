"""``actormem swarm --processes N``: the swarm's agents in N processes, one memory served
over HTTP.

Theory of operation
-------------------
The parent process opens the memory as a one-process swarm does (with the
:class:`~actormem.cli._swarm.Removals` callback that the exact accounting needs) and
serves it on a free loopback port (:func:`~actormem.server.serve_memory_http`, in the
same trio run). It then starts N child processes (``python -m actormem.cli._swarm_procs``)
with the swarm's own command line, the server's URL and the child's number ``k``. Each
child rebuilds the same seeded workload from that command line, keeps episodes
``k, k + N, k + 2N ...`` (a disjoint share), and runs :func:`~actormem.cli._swarm.run_swarm`
with its share of the agents against an :class:`~actormem.client.AsyncClient`, which has
the memory's method names, so the agent hooks run unchanged. When done it prints one JSON
document: its counts, its latencies (each measured in the child, through HTTP) and the id
of every store the server acknowledged.

The parent merges those into one :class:`~actormem.cli._swarm.SwarmRun` and checks the
accounting exactly as for one process: every acknowledged store of every child is
present in the memory or was reported removed by the memory's owner. A child that fails
makes the run fail (exit 1) after the others end.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from typing import Any, cast

import trio

from .._engine.memory import Memory
from .._util import read_token_file
from ._swarm import SwarmRun, run_swarm
from ._swarm_args import swarm_parser, swarm_workload
from ._swarm_data import Episode, Workload

__all__ = ["run_agent_processes"]


class _Share:
    """Every ``n``-th episode of a workload, starting at ``k`` (a ``Workload`` look-alike)."""

    def __init__(self, workload: Workload, k: int, n: int) -> None:
        self._workload = workload
        self._k = k
        self._n = n
        self._seen = 0
        self.total = None if workload.total is None else len(range(k, workload.total, n))

    def take(self) -> Episode | None:
        while True:
            episode = self._workload.take()
            if episode is None:
                return None
            index, self._seen = self._seen, self._seen + 1
            if index % self._n == self._k:
                return episode


def _split(total: int, parts: int, k: int) -> int:
    """Share ``k`` of ``total`` split into ``parts`` near-equal integers."""
    return total // parts + (1 if k < total % parts else 0)


async def run_agent_processes(
    url: str, argv: list[str], processes: int, run: SwarmRun
) -> list[str]:
    """Run ``processes`` agent processes against ``url`` and merge their results into
    ``run``; return the error lines of the children that failed (none on success)."""
    results: list[dict[str, Any] | None] = [None] * processes
    errors: list[str] = []

    async def child(k: int) -> None:
        command = [sys.executable, "-m", "actormem.cli._swarm_procs", url, str(k), str(processes)]
        done = await trio.run_process(
            [*command, *argv], capture_stdout=True, capture_stderr=True, check=False
        )
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            errors.append(f"agent process {k} exited {done.returncode}: {' | '.join(tail)}")
            return
        results[k] = json.loads(done.stdout)

    async with trio.open_nursery() as nursery:
        for k in range(processes):
            nursery.start_soon(child, k)
    for result in results:
        if result is None:
            continue
        run.store_latency.extend(result["store_latency"])
        run.retrieve_latency.extend(result["retrieve_latency"])
        run.consolidate_latency.extend(result["consolidate_latency"])
        run.stored.extend(uuid.UUID(i) for i in result["stored"])
        run.child_cpu_s += result["cpu_s"]
        for name in (
            "episodes_done",
            "episodes_succeeded",
            "episodes_interrupted",
            "steps",
            "steps_started",
            "failures",
            "merged_by_end_run",
        ):
            setattr(run, name, getattr(run, name) + result[name])
    return errors


async def _child(url: str, k: int, n: int, args: argparse.Namespace) -> dict[str, Any]:
    from ..client import AsyncClient
    workload, _ = swarm_workload(args)
    share = _Share(workload, k, n)
    agents = max(1, _split(args.agents, n, k))
    steps = None if args.steps is None else _split(args.steps, n, k)
    token = None
    if args.server is not None and args.token_file is not None:  # swarm --server URL
        token = read_token_file(args.token_file)
    async with AsyncClient(url, token=token, timeout=60) as client:
        if steps == 0:
            run = SwarmRun(agents=agents)
        else:
            run = await run_swarm(
                cast(Memory, client),  # the same method names: the hooks run unchanged
                cast(Workload, share),
                agents=agents,
                top_k=args.top_k,
                duration=args.duration,
                max_steps=steps,
            )
    return {
        "store_latency": run.store_latency,
        "retrieve_latency": run.retrieve_latency,
        "consolidate_latency": run.consolidate_latency,
        "stored": [str(i) for i in run.stored],
        "episodes_done": run.episodes_done,
        "episodes_succeeded": run.episodes_succeeded,
        "episodes_interrupted": run.episodes_interrupted,
        "steps": run.steps,
        "steps_started": run.steps_started,
        "failures": run.failures,
        "merged_by_end_run": run.merged_by_end_run,
        "cpu_s": run.cpu_s,
    }


def _main(argv: list[str]) -> int:
    url, k, n, swarm_argv = argv[0], int(argv[1]), int(argv[2]), argv[3:]
    args = swarm_parser().parse_args(swarm_argv)
    result = trio.run(_child, url, k, n, args)
    json.dump(result, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
