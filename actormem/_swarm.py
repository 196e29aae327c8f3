"""The swarm: many agent tasks replaying episodes against one shared memory.

Theory of operation
-------------------
:func:`run_swarm` starts ``agents`` trio tasks on an open :class:`~actormem.Memory`. Each
agent loops: take the next :class:`~actormem._swarm_data.Episode` from the shared
workload, then for every step

1. ``MemoryHooks.before_turn(query)``: a retrieve of ``top_k`` entries, with the query
   being the previous step's tool result (the episode's first input before step 0);
2. ``MemoryHooks.after_tool_call(tool, input, result)``: a store of the trajectory entry;

and at the end of the episode ``MemoryHooks.end_run(success)`` (a consolidation when the
episode's reward is > 0 or the data has no reward). The hooks talk to the memory through
a per-agent :class:`_Probe`, which times every call (wall-clock, ``time.perf_counter``,
including the time spent queued behind the other agents: the latency an agent sees),
puts each entry into the namespace ``(source, episode)`` so that replayed copies of an
episode stay distinct entries, and notes the id of every acknowledged store.

With a ``duration`` or a ``max_steps`` limit, agents stop taking episodes once it is
reached and leave the one in hand at the next step boundary (counted as *interrupted*;
no ``end_run``).

Accounting (:func:`check_accounting`). Every entry the run is responsible for, the ones
present when it started and every store an agent made, must end up either present or
removed by something the engine counts. Two checks, both from the public API:

* *Totals*: ``tracked = present + replaced + evicted + pruned + merged + deleted``, where
  ``tracked`` counts the entries present at the start plus every acknowledged store,
  ``present`` the distinct tracked ids in the final snapshot, and the other terms the
  growth of the engine's counters over the run (``upserts`` for ``replaced``).
* *Per id*: a merge always leaves a survivor with the same namespace, category and
  case/whitespace-folded text (the merge key). Group the missing ids by key; a group with
  no surviving entry of its key lost its last member to an eviction, prune or delete, so
  such *orphan groups* must not outnumber evictions + prunes + deletes.

``lost`` is the shortfall in either check (0 on a sound run). The engine does not say
*which* id each eviction removed, so the check is exact in total and for merges but not
per evicted id: a removal counter bumped for nothing while another entry silently
vanished would balance. An engine callback reporting each removed id with its cause
would make it exact per id.
"""

from __future__ import annotations

import json
import statistics
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from ._agent_hooks import MemoryHooks
from ._entry import MemoryEntry
from ._memory import Memory
from ._stats import ConsolidationStats, MemoryStatistics
from ._swarm_data import Episode, Workload

__all__ = [
    "Accounting",
    "LatencySummary",
    "SwarmRun",
    "check_accounting",
    "entry_key",
    "run_swarm",
    "summarize_latency",
]

#: Retrieves the live display's "current p99" is computed over (the most recent ones).
RECENT_WINDOW = 2048


@attrs.frozen(kw_only=True, slots=True)
class LatencySummary:
    """Latency figures of one kind of operation, in milliseconds.

    Percentiles use :func:`statistics.quantiles` with ``method="inclusive"`` (linear
    interpolation between order statistics), so p50 of ``[1, 2]`` is 1.5.

    Attributes:
        count: Operations timed.
        p50, p95, p99: Percentiles, ms.
        max: Slowest operation, ms.
        mean: Arithmetic mean, ms.
    """

    count: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float

    def to_json(self) -> dict[str, float]:
        return attrs.asdict(self)


def summarize_latency(samples: Sequence[float]) -> LatencySummary | None:
    """Summarize durations in seconds into a :class:`LatencySummary` in ms; ``None`` when
    there are no samples. O(n log n)."""
    if not samples:
        return None
    if len(samples) == 1:
        cuts = [samples[0]] * 99
    else:
        cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return LatencySummary(
        count=len(samples),
        p50=cuts[49] * 1e3,
        p95=cuts[94] * 1e3,
        p99=cuts[98] * 1e3,
        max=max(samples) * 1e3,
        mean=statistics.fmean(samples) * 1e3,
    )


@attrs.define(kw_only=True)
class SwarmRun:
    """Everything a swarm run measured; filled in while it runs (read it for progress).

    Attributes:
        agents: Agent tasks started.
        started: ``time.perf_counter()`` at the start; ``elapsed`` is set at the end (s).
        episodes_done: Episodes replayed to the end (``end_run`` called).
        episodes_succeeded: Of those, the ones whose ``end_run`` got ``success=True``.
        episodes_interrupted: Episodes left mid-way (duration over or step limit reached).
        steps: Tool calls replayed (one retrieve + one store each).
        steps_started: Tool calls begun (``steps`` plus those in flight).
        failures: Memory calls that raised (the hooks log them and carry on); 0 normally.
        store_latency, retrieve_latency, consolidate_latency: Durations in seconds.
        stored: ``(id, entry_key(entry))`` of each acknowledged store, in order.
        merged_by_end_run: Entries the ``end_run`` consolidations reported as merged.
    """

    agents: int
    started: float = attrs.field(factory=time.perf_counter)
    elapsed: float = 0.0
    episodes_done: int = 0
    episodes_succeeded: int = 0
    episodes_interrupted: int = 0
    steps: int = 0
    steps_started: int = 0
    failures: int = 0
    store_latency: list[float] = attrs.field(factory=list)
    retrieve_latency: list[float] = attrs.field(factory=list)
    consolidate_latency: list[float] = attrs.field(factory=list)
    stored: list[tuple[uuid.UUID, int]] = attrs.field(factory=list)
    merged_by_end_run: int = 0

    @property
    def operations(self) -> int:
        """Memory calls made: stores + retrieves + consolidations."""
        return len(self.store_latency) + len(self.retrieve_latency) + len(self.consolidate_latency)

    def recent_retrieve_p99(self) -> float | None:
        """p99 in ms of the last :data:`RECENT_WINDOW` retrieves, or ``None``. O(w log w)."""
        summary = summarize_latency(self.retrieve_latency[-RECENT_WINDOW:])
        return None if summary is None else summary.p99


class _Probe:
    """The memory as one agent's hooks see it: timed, namespaced, ids noted."""

    def __init__(self, memory: Memory, run: SwarmRun) -> None:
        self._memory = memory
        self._run = run
        self.namespace: tuple[str, ...] = ()

    async def store(self, entry: MemoryEntry) -> None:
        entry = entry.with_namespace(*self.namespace)
        start = time.perf_counter()
        try:
            await self._memory.store(entry)
        except Exception:
            self._run.failures += 1
            raise
        self._run.store_latency.append(time.perf_counter() - start)
        self._run.stored.append((entry.id, entry_key(entry)))

    async def retrieve(self, query: str, limit: int) -> list[MemoryEntry]:
        start = time.perf_counter()
        try:
            found = await self._memory.retrieve(query, limit)
        except Exception:
            self._run.failures += 1
            raise
        self._run.retrieve_latency.append(time.perf_counter() - start)
        return found

    async def consolidate(self) -> ConsolidationStats:
        start = time.perf_counter()
        try:
            report = await self._memory.consolidate()
        except Exception:
            self._run.failures += 1
            raise
        self._run.consolidate_latency.append(time.perf_counter() - start)
        self._run.merged_by_end_run += report.merged
        return report


async def _agent(
    memory: Memory,
    workload: Workload,
    run: SwarmRun,
    top_k: int,
    deadline: float,
    max_steps: float,
) -> None:
    probe = _Probe(memory, run)
    hooks = MemoryHooks(probe, top_k=top_k)
    while trio.current_time() < deadline and run.steps_started < max_steps:
        episode: Episode | None = workload.take()
        if episode is None:
            return
        probe.namespace = (episode.source, episode.episode)
        query = episode.first_query
        for call in episode.steps:
            if trio.current_time() >= deadline or run.steps_started >= max_steps:
                run.episodes_interrupted += 1
                return
            run.steps_started += 1  # before any checkpoint: no other agent can slip in
            await hooks.before_turn(query)
            await hooks.after_tool_call(call.tool, call.input, call.result)
            run.steps += 1
            query = call.result
        await hooks.end_run(episode.success)
        run.episodes_done += 1
        run.episodes_succeeded += episode.success


async def run_swarm(
    memory: Memory,
    workload: Workload,
    *,
    agents: int,
    top_k: int = 3,
    duration: float | None = None,
    max_steps: int | None = None,
    run: SwarmRun | None = None,
) -> SwarmRun:
    """Replay ``workload`` with ``agents`` concurrent agent tasks sharing ``memory``.

    Returns when the workload is exhausted (or ``duration`` is over) and every agent has
    stopped; every store and consolidation is acknowledged by then.

    Args:
        memory: An open memory.
        workload: The episodes to replay; consumed.
        agents: Agent tasks, an int >= 1.
        top_k: Entries each ``before_turn`` retrieves (>= 0; 0 skips retrieval).
        duration: Seconds after which agents stop (see the module docs), or ``None``.
        max_steps: Most tool calls to replay in all, or ``None``. Agents stop at the step
            boundary where the count is reached (exactly ``max_steps`` steps are made when
            the workload has that many).
        run: A :class:`SwarmRun` to fill in (to watch progress from another task); a new
            one by default.

    Returns:
        The filled-in :class:`SwarmRun`, with ``elapsed`` set.

    Raises:
        ValueError: ``agents`` < 1, ``top_k`` < 0, ``duration`` <= 0 or ``max_steps`` < 1.
    """
    if agents < 1:
        raise ValueError(f"agents must be >= 1, got {agents}")
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0, got {top_k}")
    if duration is not None and not duration > 0:
        raise ValueError(f"duration must be > 0 seconds, got {duration}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    if run is None:
        run = SwarmRun(agents=agents)
    steps_cap = float("inf") if max_steps is None else max_steps
    deadline = trio.current_time() + duration if duration is not None else float("inf")
    run.started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for number in range(agents):
            nursery.start_soon(
                _agent,
                memory,
                workload,
                run,
                top_k,
                deadline,
                steps_cap,
                name=f"swarm agent {number}",
            )
    run.elapsed = time.perf_counter() - run.started
    return run


@attrs.frozen(kw_only=True, slots=True)
class Accounting:
    """Where every tracked store went (see the module docs for the two checks).

    Attributes:
        tracked: Entries present at the start plus acknowledged stores during the run.
        present: Distinct tracked ids in the final snapshot.
        replaced, evicted, pruned, merged, deleted: Growth of the engine's ``upserts``,
            ``evictions``, ``pruned``, ``merged`` and ``deletes`` counters over the run.
        missing: Distinct tracked ids absent from the final snapshot.
        orphan_groups: Distinct (namespace, category, folded text) keys of missing ids
            with no surviving entry of the same key: each needs at least one eviction,
            prune or delete, since a merge always leaves a survivor.
        unexpected: Entries in the final snapshot nobody tracked (a store that raised
            but was applied anyway, or a writer outside the swarm).
        lost: Stores the counters do not account for (0 on a sound run).
        missing_sample: Up to 5 missing ids, as strings, for the error message.
    """

    tracked: int
    present: int
    replaced: int
    evicted: int
    pruned: int
    merged: int
    deleted: int
    missing: int
    orphan_groups: int
    unexpected: int
    lost: int
    missing_sample: tuple[str, ...]

    @property
    def counted(self) -> int:
        """present + replaced + evicted + pruned + merged + deleted."""
        removed = self.replaced + self.evicted + self.pruned + self.merged + self.deleted
        return self.present + removed

    @property
    def ok(self) -> bool:
        """Whether both checks hold exactly and no entry appeared from nowhere."""
        return self.lost == 0 and self.unexpected == 0 and self.counted == self.tracked

    def to_json(self) -> dict[str, Any]:
        return {
            **attrs.asdict(self),
            "missing_sample": list(self.missing_sample),
            "counted": self.counted,
            "ok": self.ok,
        }


def entry_key(entry: MemoryEntry) -> int:
    """Hash of the key consolidation merges on, as :meth:`~actormem.Memory.consolidate`
    documents it: the namespace, the category, and the text ignoring case
    (``str.casefold``) and runs of whitespace. O(length of the text).

    The per-id check stays sound as long as this key is never finer than the engine's:
    two entries the engine merges must get the same key here."""
    return hash((entry.namespace, entry.category, " ".join(entry.memory.casefold().split())))


def check_accounting(
    memory: Memory,
    *,
    initial: Mapping[uuid.UUID, int],
    stored: Sequence[tuple[uuid.UUID, int]],
    before: MemoryStatistics,
) -> Accounting:
    """Check that every tracked store is present or counted as removed.

    Call it when no write is in flight (every store acknowledged). O(n) for n entries in
    the memory plus the tracked stores.

    Args:
        memory: The open memory the swarm wrote to.
        initial: ``id -> entry_key(entry)`` of the entries present when the run started.
        stored: ``(id, entry_key(entry))`` of every acknowledged store of the run.
        before: ``memory.statistics()`` when the run started.
    """
    after = memory.statistics()
    survivors: set[int] = set()
    present_ids: set[uuid.UUID] = set()
    for entry in memory.snapshot():
        survivors.add(entry_key(entry))
        present_ids.add(entry.id)
    keys: dict[uuid.UUID, int] = dict(initial)
    keys.update(stored)
    missing = [i for i in keys if i not in present_ids]
    orphan_groups = len({keys[i] for i in missing} - survivors)
    evicted = after.evictions - before.evictions
    pruned = after.pruned - before.pruned
    merged = after.merged - before.merged
    deleted = after.deletes - before.deletes
    replaced = after.upserts - before.upserts
    tracked = len(initial) + len(stored)
    present = len(keys) - len(missing)
    counted = present + replaced + evicted + pruned + merged + deleted
    lost = max(tracked - counted, orphan_groups - (evicted + pruned + deleted), 0)
    return Accounting(
        tracked=tracked,
        present=present,
        replaced=replaced,
        evicted=evicted,
        pruned=pruned,
        merged=merged,
        deleted=deleted,
        missing=len(missing),
        orphan_groups=orphan_groups,
        unexpected=len(present_ids - keys.keys()),
        lost=lost,
        missing_sample=tuple(sorted(str(i) for i in missing)[:5]),
    )


def dumps_figures(figures: dict[str, Any]) -> str:
    """``figures`` as indented JSON with a trailing newline."""
    return json.dumps(figures, indent=2, sort_keys=False) + "\n"
