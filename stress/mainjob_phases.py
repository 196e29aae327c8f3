"""The main job by how many agents are still running: stores, group commits, CPU.

Usage (from the project root)::

    python -m stress.mainjob_phases [--synthetic] [swarm arguments ...]

Runs ``actormem swarm`` in this process (durable unless the arguments say
``--in-memory``; ``stress.bench_mainjob``'s two data files unless they name
``--tool-calls``; ``--synthetic``, first: the swarm's seeded synthetic data) with
the swarm's agent coroutine, the owner's ``Memory._apply_batch``, ``Memory.retrieve``
and ``SqliteStore._committed`` wrapped, and prints, per number of agents still running
when a batch is applied (64, 16-63, 5-15, 4, 3, 2, 1): the awaited requests (the agents'
stores and consolidations), the retrieves, the group commits, the awaited requests per
commit, and the process CPU (``time.process_time``) from one batch to the next,
charged to the number of agents running at the later one (at d2d7820 a
``--gather N`` set that commit's ``memory.GATHER_STORES``, since reverted).

Why: the swarm hands its 283 episodes of very different lengths to 64 agent tasks,
so after a few seconds only the agents with the longest episodes are left
(docs/benchmarks.md, "What durability adds to the main job, part 8"). An agent awaits
its store, so ``k`` agents bring at most ``k`` stores to one group commit: with fewer
than ~5 left, a commit holds what those agents stored, whatever the gate does.
"""

from __future__ import annotations

import collections
import sys
import time
from typing import Any

#: The groups of "agents still running" the report is made of.
BUCKETS = ("64", "16-63", "5-15", "4", "3", "2", "1")


def bucket(live: int) -> str:
    """The report's group for ``live`` agents running."""
    if live >= 64:
        return "64"
    if live >= 16:
        return "16-63"
    if live >= 5:
        return "5-15"
    return str(max(live, 1))


def swarm_args(argv: list[str]) -> list[str]:
    """``argv`` for ``actormem swarm``: without a leading ``--synthetic`` (the swarm's
    seeded synthetic data), else with ``stress.bench_mainjob``'s two data files added
    unless it names ``--tool-calls``. O(len(argv))."""
    if argv[:1] == ["--synthetic"]:  # the swarm's seeded synthetic data (tests)
        return argv[1:]
    if "--tool-calls" not in argv:
        from stress.bench_mainjob import DEFAULT_FILES

        for path in DEFAULT_FILES:
            argv = [*argv, "--tool-calls", str(path)]
    return argv


def counting_agent(agent: Any, live: list[int]) -> Any:
    """The swarm's agent coroutine function ``agent`` wrapped so that ``live[0]`` counts
    the agents running (one more while each call runs). O(1) a call."""

    async def counted_agent(*args: Any, **kwargs: Any) -> None:
        live[0] += 1
        try:
            await agent(*args, **kwargs)
        finally:
            live[0] -= 1

    return counted_agent


def run(argv: list[str]) -> dict[str, dict[str, float]]:
    """Run the swarm with ``argv`` (see the module docs); return the figures by group."""
    import actormem._engine.memory as memory_module
    import actormem.cli._swarm as swarm
    from actormem._storage import sqlite
    from actormem.cli import _main

    argv = swarm_args(argv)
    live = [0]
    figures: dict[str, collections.Counter[str]] = {b: collections.Counter() for b in BUCKETS}
    last: list[Any] = [None, time.process_time()]

    agent = swarm._agent
    counted_agent = counting_agent(agent, live)

    apply = memory_module.Memory._apply_batch

    def counted_apply(self: Any, batch: list[Any]) -> Any:
        here = bucket(live[0])
        figures[here]["awaited"] += sum(1 for request in batch if request.waits)
        now = time.process_time()
        if last[0] is not None:
            figures[here]["cpu_s"] += now - last[1]
        last[0], last[1] = here, now
        return apply(self, batch)

    retrieve = memory_module.Memory.retrieve

    async def counted_retrieve(self: Any, *args: Any, **kwargs: Any) -> Any:
        figures[bucket(live[0])]["retrieves"] += 1
        return await retrieve(self, *args, **kwargs)

    committed = sqlite.SqliteStore._committed

    def counted_committed(self: Any, batch: Any, changes_rows: bool, frames: int = -1) -> None:
        figures[bucket(live[0])]["commits"] += 1
        committed(self, batch, changes_rows, frames)

    swarm._agent = counted_agent  # type: ignore[assignment]
    memory_module.Memory._apply_batch = counted_apply  # type: ignore[method-assign]
    memory_module.Memory.retrieve = counted_retrieve  # type: ignore[method-assign]
    sqlite.SqliteStore._committed = counted_committed  # type: ignore[method-assign]
    try:
        _main.main(["swarm", *argv])
    finally:
        swarm._agent = agent  # type: ignore[assignment]
        memory_module.Memory._apply_batch = apply  # type: ignore[method-assign]
        memory_module.Memory.retrieve = retrieve  # type: ignore[method-assign]
        sqlite.SqliteStore._committed = committed  # type: ignore[method-assign]
    return {b: dict(figures[b]) for b in BUCKETS}


def table(figures: dict[str, dict[str, float]]) -> str:
    """The figures as a Markdown table (a row per group with any batch, then all)."""
    rows = ["| agents running | awaited | retrieves | commits | awaited per commit | CPU s |",
            "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    total: collections.Counter[str] = collections.Counter()
    for name in (*BUCKETS, "all"):
        got = total if name == "all" else figures[name]
        if name != "all":
            total.update(got)
        if not got.get("awaited") and not got.get("retrieves"):
            continue
        commits = got.get("commits", 0)
        per = f"{got.get('awaited', 0) / commits:.2f}" if commits else "-"
        rows.append(
            f"| {name} | {got.get('awaited', 0):,} | {got.get('retrieves', 0):,} "
            f"| {commits:,} | {per} | {got.get('cpu_s', 0.0):.2f} |"
        )
    return "\n".join(rows)


def main(argv: list[str]) -> None:
    figures = run(argv)
    print(table(figures), file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
