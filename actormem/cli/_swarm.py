"""The swarm: many agent tasks replaying episodes against one shared memory.

Theory of operation
-------------------
:func:`run_swarm` starts ``agents`` trio tasks on an open :class:`~actormem.Memory`. Each
agent loops: take the next :class:`~actormem.cli._swarm_data.Episode` from the shared
workload, then for every step

1. ``MemoryHooks.before_turn(query)``: a retrieve of ``top_k`` entries, with the query
   being the previous step's tool result (the episode's first input before step 0);
2. ``MemoryHooks.after_tool_call(tool, input, result)``: a store of the trajectory entry;

and at the end of the episode ``MemoryHooks.end_run(success)`` (a consolidation when the
episode's reward is > 0 or the data has no reward). The hooks talk to the memory through
a per-agent :class:`_Probe`, which times every call (wall-clock, ``time.perf_counter``,
including the time spent queued behind the other agents: the latency an agent sees) and
notes the id of every acknowledged store. Each store goes into the namespace
``(source, episode)`` (passed to ``after_tool_call``), so that replayed copies of an
episode stay distinct entries.

With a ``duration`` or a ``max_steps`` limit, agents stop taking episodes once it is
reached and leave the one in hand at the next step boundary (counted as *interrupted*;
no ``end_run``).

Accounting (:func:`check_accounting`), exact per id. The memory is opened with a
:class:`Removals` as its ``on_remove`` callback, so the owner reports every entry that
leaves it with its cause. Every id the run is responsible for, the ones present when it
started and every acknowledged store, is *tracked*. At the end, per id::

    arrivals (1 if present at the start, + its acknowledged stores)
        == departures (its removal reports during the run, + 1 if in the final snapshot)

An id replaced by an upsert of itself arrives twice and leaves once (``replaced``) and is
present; a merged-away, evicted, pruned or deleted id leaves once and is absent (a merge
survivor is rewritten in place, with no report). Fewer departures than arrivals is a
*lost* store (gone with no report); more (a removal report or a present entry nobody's
store explains) is *unexpected*. Two cross-checks from the engine's counters: each
counter (``upserts``, ``evictions``, ``pruned``, ``merged``, ``deletes``) grew by exactly
the number of reports of its cause during the run, and the old totals identity
``tracked = present + counter growth`` holds. Removals reported before the run
(evictions while loading a file larger than ``capacity``) are of entries that were never
tracked and are only counted.
"""

from __future__ import annotations

import json
import logging
import statistics
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
import trio

from .._engine.memory import Memory
from .._entry import MemoryEntry, namespace_ok
from .._errors import StorageError
from .._stats import ConsolidationStats, MemoryStatistics
from ..agent._hooks import MemoryHooks
from ._swarm_data import Episode, Workload

__all__ = [
    "CAUSES",
    "Accounting",
    "LatencySummary",
    "Removals",
    "SwarmRun",
    "Tally",
    "check_accounting",
    "run_swarm",
    "summarize_latency",
]

#: Retrieves the live display's "current p99" is computed over (the most recent ones).
RECENT_WINDOW = 2048

#: An agent stores a tool call read from a file (whose ``ToolCall.text`` the reader set)
#: through ``MemoryHooks._after_checked_tool_call``: the text formatted and checked once
#: when the file was read, the entry built without the constructor's checks (~15 us a
#: step less). The same entries as ``after_tool_call`` stores. False: every step through
#: ``after_tool_call`` (the path before it).
_CHECKED_TRAJECTORIES = True


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
        cpu_started: ``time.process_time()`` at the start; ``cpu_s`` is set at the end:
            the CPU seconds (user + system, every thread of this process: the agents,
            the owner, a durable memory's writer thread) the run took. With agent
            processes (``--processes``) only this process's share (the served memory).
        episodes_done: Episodes replayed to the end (``end_run`` called).
        episodes_succeeded: Of those, the ones whose ``end_run`` got ``success=True``.
        episodes_interrupted: Episodes left mid-way (duration over or step limit reached).
        steps: Tool calls replayed (one retrieve + one store each).
        steps_started: Tool calls begun (``steps`` plus those in flight).
        failures: Memory calls that raised (the hooks log them and carry on); 0 normally.
        broken: A memory call found the memory broken (or broke it: a failed commit); the
            agents then leave at their next step (the run ends early, and the command
            reports the cause).
        store_latency, retrieve_latency, consolidate_latency: Durations in seconds.
        stored: The id of each acknowledged store, in order.
        uncertain: Ids of stores cancelled after their request was sent (an interrupted
            run): each may or may not have been applied (see :func:`check_accounting`).
        merged_by_end_run: Entries the ``end_run`` consolidations reported as merged.
    """

    agents: int
    started: float = attrs.field(factory=time.perf_counter)
    elapsed: float = 0.0
    cpu_started: float = attrs.field(factory=time.process_time)
    cpu_s: float = 0.0
    child_cpu_s: float = 0.0
    episodes_done: int = 0
    episodes_succeeded: int = 0
    episodes_interrupted: int = 0
    steps: int = 0
    steps_started: int = 0
    failures: int = 0
    #: The memory broke (a call raised ``trio.BrokenResourceError``: a commit failed, see
    #: docs/durability.md): every later call would fail too, so the agents leave.
    broken: bool = False
    store_latency: list[float] = attrs.field(factory=list)
    retrieve_latency: list[float] = attrs.field(factory=list)
    consolidate_latency: list[float] = attrs.field(factory=list)
    stored: list[uuid.UUID] = attrs.field(factory=list)
    uncertain: list[uuid.UUID] = attrs.field(factory=list)
    merged_by_end_run: int = 0

    @property
    def operations(self) -> int:
        """Memory calls made: stores + retrieves + consolidations."""
        return len(self.store_latency) + len(self.retrieve_latency) + len(self.consolidate_latency)

    def start_clocks(self) -> None:
        """Start the wall and CPU clocks (``started``, ``cpu_started``) now."""
        self.started = time.perf_counter()
        self.cpu_started = time.process_time()

    def stop_clocks(self) -> None:
        """Set ``elapsed`` and ``cpu_s``: the time since :meth:`start_clocks` (``cpu_s``
        with ``child_cpu_s`` added)."""
        self.elapsed = time.perf_counter() - self.started
        self.cpu_s = time.process_time() - self.cpu_started + self.child_cpu_s

    @property
    def operations_per_cpu_s(self) -> float:
        """Memory operations per CPU-second of this process (``cpu_s``); 0.0 before the
        run ends."""
        return self.operations / self.cpu_s if self.cpu_s > 0 else 0.0

    def recent_retrieve_p99(self) -> float | None:
        """p99 in ms of the last :data:`RECENT_WINDOW` retrieves, or ``None``. O(w log w)."""
        summary = summarize_latency(self.retrieve_latency[-RECENT_WINDOW:])
        return None if summary is None else summary.p99


class _Probe:
    """The memory as one agent's hooks see it: timed, ids noted."""

    def __init__(self, memory: Memory, run: SwarmRun) -> None:
        self._memory = memory
        self._run = run

    def _failed(self, exc: Exception) -> None:
        self._run.failures += 1
        # A failed commit's own callers get its StorageError, every later call a
        # BrokenResourceError (docs/durability.md): either way the memory is broken,
        # every later call fails too, and the agents leave.
        if isinstance(exc, trio.BrokenResourceError | StorageError):
            self._run.broken = True

    async def store(self, entry: MemoryEntry) -> None:
        start = time.perf_counter()
        try:
            await self._memory.store(entry)
        except trio.Cancelled:
            self._run.uncertain.append(entry.id)  # queued, so perhaps applied
            raise
        except Exception as exc:
            self._failed(exc)
            raise
        self._run.store_latency.append(time.perf_counter() - start)
        self._run.stored.append(entry.id)

    async def retrieve(
        self, query: str, limit: int, *, namespace: Sequence[str] | None = None
    ) -> list[MemoryEntry]:
        start = time.perf_counter()
        try:
            found = await self._memory.retrieve(query, limit, namespace=namespace)
        except Exception as exc:
            self._failed(exc)
            raise
        self._run.retrieve_latency.append(time.perf_counter() - start)
        return found

    async def consolidate(self) -> ConsolidationStats:
        start = time.perf_counter()
        try:
            report = await self._memory.consolidate()
        except Exception as exc:
            self._failed(exc)
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
    while trio.current_time() < deadline and run.steps_started < max_steps and not run.broken:
        episode: Episode | None = workload.take()
        if episode is None:
            return
        namespace = (episode.source, episode.episode)
        checked = _CHECKED_TRAJECTORIES and namespace_ok(namespace)
        query = episode.first_query
        for call in episode.steps:
            if trio.current_time() >= deadline or run.steps_started >= max_steps or run.broken:
                run.episodes_interrupted += 1
                return
            run.steps_started += 1  # before any checkpoint: no other agent can slip in
            await hooks.before_turn(query)
            text = call.text
            if checked and text is not None:
                await hooks._after_checked_tool_call(call.tool, text, namespace)
            else:
                await hooks.after_tool_call(call.tool, call.input, call.result, namespace=namespace)
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
    stopped; every store and consolidation is acknowledged by then. When cancelled, the
    run's figures so far stay in ``run`` (``elapsed`` included), and the stores whose
    answer the cancellation cut off are in ``run.uncertain``.

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
        The filled-in :class:`SwarmRun`, with ``elapsed`` and ``cpu_s`` set.

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
    run.start_clocks()
    quiet = _BrokenQuiet(run)
    hooks_logger = logging.getLogger("actormem.agent")
    hooks_logger.addFilter(quiet)
    try:
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
    finally:  # also when cancelled (an interrupted run still reports its figures)
        hooks_logger.removeFilter(quiet)
        run.stop_clocks()
    return run


class _BrokenQuiet(logging.Filter):
    """The hooks' log during a swarm run, once the memory is broken (a failed commit: disk
    full, I/O error): every agent's next call then fails alike, and each failure logged
    with its chained tracebacks buried the command's one error line under thousands of
    lines. The first such failure is logged as one line naming the cause, the later ones
    not at all (they are counted in ``run.failures``). Other failures log as before."""

    def __init__(self, run: SwarmRun) -> None:
        super().__init__()
        self._run = run
        self._said = False

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if not self._run.broken or not isinstance(exc, trio.BrokenResourceError | StorageError):
            return True
        if self._said:
            return False
        self._said = True
        while isinstance(exc, trio.BrokenResourceError) and exc.__cause__ is not None:
            exc = exc.__cause__  # the owner's death: the StorageError that broke it
        record.msg = (
            f"{record.getMessage()}: {exc}; the memory is broken "
            "(further failed calls are counted, not logged)"
        )
        record.args = None
        record.exc_info = None
        record.exc_text = None
        return True


#: :func:`check_accounting` keys the ids by their 128-bit ints: the
#: same accounting, ~5 Python calls an id fewer (a ``UUID``'s hash and equality). False:
#: on the ``UUID`` objects (the path before it).
_ACCOUNT_BY_INT = True

#: :func:`check_accounting` takes the ids present from the snapshot's records (each
#: visible record's ``entry._id``) instead of iterating the snapshot, which makes each
#: entry with its access bookkeeping as of the snapshot (a new ``MemoryEntry`` for
#: every entry a retrieve touched: ~5,000 of them after the main job) only to read its
#: id. The same set of ids. Only with :data:`_ACCOUNT_BY_INT` and a memory whose
#: snapshot has records (not a server's, whose snapshot is a list of entries). False:
#: the snapshot iterated (the path before it).
_PRESENT_FROM_RECORDS = True

#: With :data:`_PRESENT_FROM_RECORDS`, the present ids are the view's
#: :meth:`~actormem._engine.state.View.visible_ids` (one pass over the id table) instead
#: of a set made from ``View.records()``, which looks every id up again and sorts the
#: ~5,700 records by ``seq`` only for the set to drop the order. The same set. False:
#: from ``records()`` (the path before it).
_PRESENT_BY_IDS = True

#: :func:`check_accounting` tallies a run where every id arrived once and none is lost
#: or over-reported (a sound run: the main job's) from set sizes (:func:`_tally_by_sets`),
#: and counts the arrivals with ``Counter.update`` (in C), instead of a Python loop over
#: every id (~6 ms of CPU for the main job's ~5,700 ids on the AMD VM, after the run's
#: clocks stopped but inside the process's figure). The same accounting; any other run
#: goes through the loop, which names the lost and unexpected ids in arrival order.
#: False: the loop for every run (the path before it).
_TALLY_BY_SETS = True

#: The causes ``on_remove`` reports, in the order the accounting shows them.
CAUSES = ("replaced", "evicted", "pruned", "merged", "deleted")

#: Engine counter (:class:`~actormem.MemoryStatistics` field) that counts each cause.
_COUNTERS = {
    "replaced": "upserts",
    "evicted": "evictions",
    "pruned": "pruned",
    "merged": "merged",
    "deleted": "deletes",
}

#: Ids named in a failed accounting's message (the first ones, in arrival order).
NAMED_IDS = 5


class Removals:
    """The ``on_remove`` callback of the swarm's memory: notes ``(id, cause)`` of every
    removal in the order the owner applied them. O(1) per call.

    Pass it to ``open_memory(on_remove=...)`` and call :meth:`start_run` when the run
    starts; reports before that (evictions while loading a file) are kept apart. It may
    be called from the worker thread that loads a file (an ``append``, safe under the GIL;
    nothing reads the log meanwhile).
    """

    def __init__(self) -> None:
        self.log: list[tuple[uuid.UUID, str]] = []
        self._start = 0

    def __call__(self, entry: MemoryEntry, cause: str) -> None:
        self.log.append((entry.id, cause))

    def start_run(self) -> None:
        """Mark the start of the run: what was reported so far is :attr:`before_run`."""
        self._start = len(self.log)

    @property
    def before_run(self) -> list[tuple[uuid.UUID, str]]:
        return self.log[: self._start]

    @property
    def during_run(self) -> list[tuple[uuid.UUID, str]]:
        return self.log[self._start :]


@attrs.frozen(kw_only=True, slots=True)
class Tally:
    """Where the arrivals of one group of tracked ids went.

    Attributes:
        tracked: Arrivals: ids present at the start (one each) or acknowledged stores.
        present: Of those ids, the ones in the final snapshot.
        replaced, evicted, pruned, merged, deleted: Removal reports of those ids during
            the run, per cause.
        lost: Arrivals with no departure: gone from the snapshot with no report.
    """

    tracked: int = 0
    present: int = 0
    replaced: int = 0
    evicted: int = 0
    pruned: int = 0
    merged: int = 0
    deleted: int = 0
    lost: int = 0

    @property
    def removed(self) -> int:
        return self.replaced + self.evicted + self.pruned + self.merged + self.deleted

    def to_json(self) -> dict[str, int]:
        return attrs.asdict(self)


@attrs.frozen(kw_only=True, slots=True)
class Accounting:
    """Where every tracked id went (see the module docs).

    Attributes:
        stores: The agents' acknowledged stores.
        initial: The entries present when the run started (a reused file). An agent store
            of one of these ids (never, with fresh ids) counts here too.
        unexpected: Departures beyond arrivals, summed over ids: a removal report or a
            present entry that no tracked arrival explains (a store that raised but was
            applied, a writer outside the swarm, a report made twice).
        before_run: Removal reports before the run, per cause (evictions while loading a
            file larger than the capacity): entries never tracked, only counted.
        reports: Removal reports during the run, per cause (all ids).
        counters: Growth of the engine's counter of each cause over the run.
        lost_ids, unexpected_ids: The first :data:`NAMED_IDS` such ids, in arrival order.
    """

    stores: Tally
    initial: Tally
    unexpected: int
    before_run: dict[str, int]
    reports: dict[str, int]
    counters: dict[str, int]
    lost_ids: tuple[str, ...]
    unexpected_ids: tuple[str, ...]

    @property
    def lost(self) -> int:
        """Tracked arrivals with no departure, stores and initial entries together."""
        return self.stores.lost + self.initial.lost

    @property
    def tracked(self) -> int:
        return self.stores.tracked + self.initial.tracked

    @property
    def present(self) -> int:
        return self.stores.present + self.initial.present

    @property
    def counter_mismatches(self) -> tuple[str, ...]:
        """Causes whose engine counter did not grow by the number of their reports."""
        return tuple(c for c in CAUSES if self.counters[c] != self.reports[c])

    @property
    def totals_hold(self) -> bool:
        """The counters-only identity: tracked = present + growth of the five counters."""
        return self.tracked == self.present + sum(self.counters.values())

    @property
    def ok(self) -> bool:
        """Every id balances, and the counters agree with the reports and the totals."""
        return (
            self.lost == 0
            and self.unexpected == 0
            and not self.counter_mismatches
            and self.totals_hold
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "stores": self.stores.to_json(),
            "initial": self.initial.to_json(),
            "tracked": self.tracked,
            "present": self.present,
            "lost": self.lost,
            "unexpected": self.unexpected,
            "lost_ids": list(self.lost_ids),
            "unexpected_ids": list(self.unexpected_ids),
            "before_run": self.before_run,
            "reports": self.reports,
            "counters": self.counters,
            "counter_mismatches": list(self.counter_mismatches),
            "totals_hold": self.totals_hold,
            "ok": self.ok,
        }


def check_accounting(
    memory: Memory,
    *,
    initial: Iterable[uuid.UUID],
    stored: Sequence[uuid.UUID],
    removals: Removals,
    before: MemoryStatistics,
    uncertain: Iterable[uuid.UUID] = (),
) -> Accounting:
    """Check, per id, that every tracked arrival is present or was reported removed.

    Call it when no write is in flight (every store acknowledged, e.g. after a no-op
    write). O(n + s + r) for n entries in the memory, s stores and r removal reports.

    Args:
        memory: The open memory the swarm wrote to, opened with ``on_remove=removals``.
        initial: Ids of the entries present when the run started.
        stored: The id of every acknowledged store of the run.
        removals: The memory's ``on_remove`` callback, :meth:`Removals.start_run` called
            when the run started.
        before: ``memory.statistics()`` when the run started.
        uncertain: Ids of stores whose caller was cancelled after sending them (an
            interrupted run). Such a store was applied, or not at all: it counts as an
            arrival exactly when the memory shows it (the id is present or was reported
            removed), and is otherwise left out.
    """
    after = memory.statistics()
    snapshot = memory.snapshot()
    # With _ACCOUNT_BY_INT the ids are keyed by their 128-bit ints (``UUID.int``,
    # ``MemoryEntry._id``): a ``UUID``'s hash and equality are Python calls, made several
    # times per id by the dicts and sets here; an int's are not. The same tallies, named
    # ids (as UUID strings) and order either way: a UUID's string is its 32 hex digits at
    # fixed width, so the ints' order is the strings' order.
    key: Callable[[uuid.UUID], Any]
    named: Callable[[Any], str]
    if _ACCOUNT_BY_INT:
        view = getattr(snapshot, "_view", None) if _PRESENT_FROM_RECORDS else None
        present_ids: set[Any]
        if view is not None:
            if _PRESENT_BY_IDS:
                present_ids = view.visible_ids()
            else:
                present_ids = {rec.cols.ident(rec.slot) for rec in view.records()}
        else:
            present_ids = {entry._id for entry in snapshot}
        key, named, order = _id_int, _int_named, None
    else:
        present_ids = {entry.id for entry in snapshot}
        key, named, order = _same_id, str, str
    during = [(key(id), cause) for id, cause in removals.during_run]
    reported = {ident for ident, _ in during}
    stored_keys = [key(id) for id in stored]
    for id in uncertain:
        ident = key(id)
        if ident in present_ids or ident in reported:
            stored_keys.append(ident)
    # Arrivals per id, in arrival order (dicts keep it): the initial entries, then stores.
    arrivals: dict[Any, int] = dict.fromkeys(map(key, initial), 1)
    initial_ids = set(arrivals)
    if _TALLY_BY_SETS:
        arrivals = Counter(arrivals)
        arrivals.update(stored_keys)  # counted in C, as the loop below counts them
    else:
        for ident in stored_keys:
            arrivals[ident] = arrivals.get(ident, 0) + 1
    removed: dict[Any, list[str]] = {}
    for ident, cause in during:
        removed.setdefault(ident, []).append(cause)

    tallies = {True: Counter[str](), False: Counter[str]()}  # keyed by "was initial"
    lost_ids: list[str] = []
    unexpected_ids: list[str] = []
    unexpected = 0
    causes: Sequence[str]
    every = len(initial_ids) + len(stored_keys)
    per_id: Iterable[tuple[Any, int]] = arrivals.items()
    if _TALLY_BY_SETS and _tally_by_sets(arrivals, every, initial_ids, present_ids, removed):
        arrived = arrivals.keys()
        here_initial = len(initial_ids & present_ids)
        tallies[True].update(tracked=len(initial_ids), present=here_initial)
        if len(arrivals) > len(initial_ids):
            tallies[False].update(
                tracked=len(arrivals) - len(initial_ids),
                present=len(arrived & present_ids) - here_initial,
            )
        for ident, causes in removed.items():
            if ident in arrivals:
                tallies[ident in initial_ids].update(causes)
        per_id = ()  # tallied: no gap to find, no id to name
    for ident, count in per_id:
        tally = tallies[ident in initial_ids]
        causes = removed.get(ident, ())
        here = ident in present_ids
        tally["tracked"] += count
        tally["present"] += here
        if causes:
            tally.update(causes)
        gap = count - len(causes) - here
        if gap > 0:
            tally["lost"] += gap
            if len(lost_ids) < NAMED_IDS:
                lost_ids.append(named(ident))
        elif gap < 0:
            unexpected -= gap
            if len(unexpected_ids) < NAMED_IDS:
                unexpected_ids.append(named(ident))
    # Departures of ids nobody tracked: present entries and removal reports.
    for ident in sorted(present_ids - arrivals.keys(), key=order):
        unexpected += 1 + len(removed.pop(ident, ()))
        if len(unexpected_ids) < NAMED_IDS:
            unexpected_ids.append(named(ident))
    for ident, causes in removed.items():
        if ident not in arrivals:
            unexpected += len(causes)
            if len(unexpected_ids) < NAMED_IDS:
                unexpected_ids.append(named(ident))

    def by_cause(events: Iterable[tuple[Any, str]]) -> dict[str, int]:
        counted = Counter(cause for _, cause in events)
        return {cause: counted[cause] for cause in CAUSES}

    return Accounting(
        stores=Tally(**tallies[False]),
        initial=Tally(**tallies[True]),
        unexpected=unexpected,
        before_run=by_cause(removals.before_run),
        reports=by_cause(during),
        counters={
            cause: getattr(after, field) - getattr(before, field)
            for cause, field in _COUNTERS.items()
        },
        lost_ids=tuple(lost_ids),
        unexpected_ids=tuple(unexpected_ids),
    )


def _tally_by_sets(
    arrivals: dict[Any, int],
    every: int,
    initial_ids: set[Any],
    present_ids: set[Any],
    removed: dict[Any, list[str]],
) -> bool:
    """Whether :func:`check_accounting`'s per-id tallies can be made from set sizes
    (:data:`_TALLY_BY_SETS`): every id arrived once (``every`` arrivals over as many
    ids), and no id has a gap either way, none lost (absent, never reported removed)
    and none over-reported (removal reports and presence more than its one arrival).
    Then each group's ``tracked`` is its ids, ``present`` those present, and the
    causes are those of the reported ids; nothing is named. Otherwise (a lost or
    unexpected id, whose names go in arrival order, or an id stored twice) the per-id
    loop tallies. O(n) in C for n ids, plus O(r) for the r reported ids."""
    if len(arrivals) != every:
        return False
    for ident, causes in removed.items():
        if ident in arrivals and len(causes) + (ident in present_ids) != 1:
            return False
    missing = arrivals.keys() - present_ids
    return missing.issubset(removed.keys())


def _id_int(id: uuid.UUID) -> int:
    return id.int


def _int_named(ident: int) -> str:
    return str(uuid.UUID(int=ident))


def _same_id(id: uuid.UUID) -> uuid.UUID:
    return id


def dumps_figures(figures: dict[str, Any]) -> str:
    """``figures`` as indented JSON with a trailing newline."""
    return json.dumps(figures, indent=2, sort_keys=False) + "\n"
