"""Where the main job's retrieves spend their time: the swarm in this process, every
retrieve taken apart.

Usage (from the project root)::

    python -m stress.retrieve_waits [--runs 2] [--clock cpu|wall] [--durable]
        [--slots N|none] [--slice SECONDS] [--share S] [--gate-off] [--steps N]
        [--commit-park SECONDS] [--switch SECONDS] [--agents 64]
        [--one-step-chars N]

Runs ``actormem swarm`` on the real tool calls (``../shared/data/tool_calls.jsonl`` and
``tool_lookups.jsonl``, 64 agents, in memory unless ``--durable``) ``--runs`` times in
this process, with the engine's scheduling knobs set as given (``SCORING_SLOTS``,
``RETRIEVE_SLICE``, ``SHARE``, ``COMMIT_PARK``, the interpreter's switch interval, the
fair-share gate on or off). Every
retrieve is timed (``Memory._retrieve_hits``, which ``retrieve`` and ``retrieve_scored``
both call), and a trio instrument follows its task while it
runs. Per retrieve:

* ``wall``: the call's duration (the latency an agent sees, as the swarm's probe times
  it: ``--clock cpu`` measures it on the loop thread's CPU clock, ``time.thread_time``,
  which drops the time the OS ran other processes; on a shared machine that is the
  figure that says what the scheduling inside the process decides);
* ``slot``: waiting for a scoring slot (``Memory._wait_for_slot``, or
  ``Memory._wait_in_line`` with ``memory._OWN_SLOTS``);
* ``cps`` / ``at_cps``: the fair-share gate's checkpoints it met (slice boundaries, the
  park before scoring) and the time spent in them (parked, or waiting for its turn);
* ``run`` / ``ready`` / ``parked``: the time its task was running, runnable but waiting
  for trio to run it, and parked (waiting for a slot, at the gate).

Printed per run: the process CPU, retrieve p50 / p99 of all retrieves, the same for the
*crowded phase* (the retrieves that started before half of the agents had finished: the
workload's four long episodes, 4,000 of the 5,685 steps, run after it with one to four
agents, so the p99 of a whole run is about the 97th percentile of the crowded phase),
store mean and p99, the loop's CPU in the crowded phase by kind of task step (the owner;
agents' steps that end inside a retrieve; other agents' steps) and the breakdown above
averaged over all retrieves, the slowest 10% and the slowest 1%. A throwaway measurement
aid, not a benchmark of record: the instrument itself costs a few percent of CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

import actormem._engine.memory as memory_module
import actormem._engine.snapshot as snapshot_module
import actormem.cli._swarm as swarm_module
from actormem._engine import fairshare
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem.cli._main import main as cli_main

from ._bench_stats import load_average

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data"


class _Retrieve:
    __slots__ = ("at_cps", "cps", "parked", "ready", "run", "slot", "start", "wall", "yields")

    def __init__(self, now: float) -> None:
        self.start = now
        self.wall = self.slot = self.at_cps = self.run = self.ready = self.parked = 0.0
        self.cps = 0
        #: Task steps that ended inside the call: the times it gave the loop up.
        self.yields = 0


class _Probe(trio.abc.Instrument):
    """Follows the tasks that are inside a retrieve: running, runnable, parked."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.active: dict[trio.lowlevel.Task, _Retrieve] = {}
        # task -> ("run" | "ready" | "parked", since)
        self.state: dict[trio.lowlevel.Task, tuple[str, float]] = {}
        self.done: list[_Retrieve] = []
        #: The stores' records (the same fields; ``slot``, ``cps`` unused).
        self.stores: set[trio.lowlevel.Task] = set()
        self.stores_done: list[_Retrieve] = []
        self.step_cpu = {"owner": 0.0, "retrieve": 0.0, "agent": 0.0}
        self.counting = True
        self._step_start = 0.0
        #: The run loop's batches in the crowded phase: task steps and loop-thread CPU
        #: between two I/O waits (trio runs one batch of runnable tasks between them).
        self.batches: list[tuple[int, float]] = []
        self._batch_steps = 0
        self._batch_cpu = 0.0

    def after_io_wait(self, timeout: float) -> None:
        self._batch_steps = 0
        self._batch_cpu = time.thread_time()

    def before_io_wait(self, timeout: float) -> None:
        if self.counting and self._batch_steps:
            self.batches.append((self._batch_steps, time.thread_time() - self._batch_cpu))

    def task_scheduled(self, task: trio.lowlevel.Task) -> None:
        rec = self.active.get(task)
        if rec is None:
            return
        kind, since = self.state.get(task, ("parked", self.clock()))
        if kind == "parked":
            now = self.clock()
            rec.parked += now - since
            self.state[task] = ("ready", now)
        # rescheduled during its own step (a plain checkpoint): ready from the step's end

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self._step_start = time.thread_time()
        rec = self.active.get(task)
        if rec is None:
            return
        now = self.clock()
        kind, since = self.state.get(task, ("ready", now))
        if kind == "ready":
            rec.ready += now - since
        self.state[task] = ("run", now)

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        self._batch_steps += 1
        if self.counting:
            cpu = time.thread_time() - self._step_start
            name = task.name
            inside = task in self.active and task not in self.stores
            kind = "owner" if "owner" in name else "retrieve" if inside else "agent"
            if kind != "agent" or "agent" in name:
                self.step_cpu[kind] += cpu
        rec = self.active.get(task)
        if rec is None:
            return
        rec.yields += 1
        now = self.clock()
        kind, since = self.state.get(task, ("run", now))
        if kind == "run":
            rec.run += now - since
            self.state[task] = ("parked", now)
        elif kind == "ready":  # rescheduled during the step: runnable from now
            self.state[task] = ("ready", now)

    def begin(self, task: trio.lowlevel.Task) -> _Retrieve:
        now = self.clock()
        rec = _Retrieve(now)
        self.active[task] = rec
        self.state[task] = ("run", now)
        return rec

    def end(self, task: trio.lowlevel.Task) -> None:
        rec = self.active.pop(task)
        now = self.clock()
        kind, since = self.state.pop(task, ("run", now))
        if kind == "run":
            rec.run += now - since
        rec.wall = now - rec.start
        if task in self.stores:
            self.stores.discard(task)
            self.stores_done.append(rec)
        else:
            self.done.append(rec)


class _Current:
    """The run being measured (the wrappers are installed once, for every run)."""

    probe: _Probe
    stores: list[float]
    ends: list[float]
    half: int


def _install(clock: Callable[[], float]) -> None:
    cur = _Current
    retrieve_hits = memory_module.Memory._retrieve_hits
    wait_for_slot = memory_module.Memory._wait_for_slot
    wait_in_line = memory_module.Memory._wait_in_line  # memory._OWN_SLOTS
    store = memory_module.Memory.store
    checkpoint = fairshare.ReadGate.checkpoint
    agent = swarm_module._agent

    async def timed_retrieve(self: Any, *args: Any, **kwargs: Any) -> Any:
        task = trio.lowlevel.current_task()
        cur.probe.begin(task)
        try:
            return await retrieve_hits(self, *args, **kwargs)
        finally:
            cur.probe.end(task)

    async def timed_slot(self: Any, slots: Any, borrower: Any) -> None:
        rec = cur.probe.active.get(trio.lowlevel.current_task())
        start = clock()
        try:
            await wait_for_slot(self, slots, borrower)
        finally:
            if rec is not None:
                rec.slot += clock() - start

    async def timed_line(self: Any, slots: Any, borrower: Any) -> None:
        rec = cur.probe.active.get(trio.lowlevel.current_task())
        start = clock()
        try:
            await wait_in_line(self, slots, borrower)
        finally:
            if rec is not None:
                rec.slot += clock() - start

    async def timed_store(self: Any, *args: Any, **kwargs: Any) -> Any:
        task = trio.lowlevel.current_task()
        start = clock()
        cur.probe.begin(task)
        cur.probe.stores.add(task)
        try:
            return await store(self, *args, **kwargs)
        finally:
            cur.probe.end(task)
            cur.stores.append(clock() - start)

    async def timed_checkpoint(self: Any) -> None:
        rec = cur.probe.active.get(trio.lowlevel.current_task())
        start = clock()
        try:
            await checkpoint(self)
        finally:
            if rec is not None:
                rec.cps += 1
                rec.at_cps += clock() - start

    async def timed_agent(*args: Any, **kwargs: Any) -> None:
        try:
            await agent(*args, **kwargs)
        finally:
            cur.ends.append(clock())
            if len(cur.ends) == cur.half:  # half of the agents done: the crowded phase ends
                cur.probe.counting = False

    memory_module.Memory._retrieve_hits = timed_retrieve  # type: ignore[method-assign]
    memory_module.Memory._wait_for_slot = timed_slot  # type: ignore[method-assign]
    memory_module.Memory._wait_in_line = timed_line  # type: ignore[method-assign]
    memory_module.Memory.store = timed_store  # type: ignore[method-assign]
    fairshare.ReadGate.checkpoint = timed_checkpoint  # type: ignore[method-assign]
    swarm_module._agent = timed_agent


def _run(args: argparse.Namespace, clock: Callable[[], float]) -> None:
    probe = _Current.probe = _Probe(clock)
    stores = _Current.stores = []
    ends = _Current.ends = []
    _Current.half = max(1, args.agents // 2)
    real_run = trio.run

    def run_probed(*a: Any, **k: Any) -> Any:
        k["instruments"] = [*k.get("instruments", ()), probe]
        return real_run(*a, **k)

    trio.run = run_probed  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory(prefix="retrieve_waits_") as scratch:
            argv = ["swarm", "--json", str(Path(scratch) / "run.json")]
            argv += ["--path", str(Path(scratch) / "m.db")] if args.durable else ["--in-memory"]
            for name in ("tool_calls.jsonl", "tool_lookups.jsonl"):
                argv += ["--tool-calls", str(args.data / name)]
            if args.steps is not None:
                argv += ["--steps", str(args.steps)]
            argv += ["--agents", str(args.agents)]
            cpu0 = time.process_time()
            with contextlib.redirect_stdout(io.StringIO()):
                cli_main(argv)
            cpu = time.process_time() - cpu0
    finally:
        trio.run = real_run
    _report(probe, stores, ends, cpu)


def _ms(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1e3


def _report(probe: _Probe, stores: list[float], ends: list[float], cpu: float) -> None:
    recs = sorted(probe.done, key=lambda r: r.wall)
    walls = [r.wall for r in recs]
    crowd_end = sorted(ends)[len(ends) // 2] if ends else float("inf")
    crowd = [r.wall for r in recs if r.start < crowd_end]
    print(
        f"process CPU {cpu:.2f} s, load {load_average()}; retrieves {len(recs)}: "
        f"p50 {_ms(walls, 0.5):.1f} p99 {_ms(walls, 0.99):.1f} ms; crowded phase "
        f"{len(crowd)}: mean {statistics.mean(crowd) * 1e3:.1f} p99 {_ms(crowd, 0.99):.1f} ms; "
        f"stores mean {statistics.mean(stores) * 1e3:.1f} p99 {_ms(stores, 0.99):.1f} ms"
    )
    total = sum(probe.step_cpu.values())
    shares = ", ".join(f"{k} {v / total:.0%}" for k, v in probe.step_cpu.items())
    print(f"  crowded phase, task steps' CPU {total:.3f} s: {shares}")
    n = len(recs)
    for name, part in (
        ("all", recs),
        ("slowest 10%", recs[int(0.9 * n) :]),
        ("slowest 1%", recs[int(0.99 * n) :]),
    ):

        def mean(f: Callable[[_Retrieve], float], part: list[_Retrieve] = part) -> float:
            return statistics.mean(f(r) for r in part)

        print(
            f"  {name:12s} n={len(part):5d} wall {mean(lambda r: r.wall) * 1e3:6.2f}"
            f" slot {mean(lambda r: r.slot) * 1e3:6.2f} cps {mean(lambda r: r.cps):4.1f}"
            f" at_cps {mean(lambda r: r.at_cps) * 1e3:6.2f} run {mean(lambda r: r.run) * 1e3:5.2f}"
            f" ready {mean(lambda r: r.ready) * 1e3:6.2f}"
            f" parked {mean(lambda r: r.parked) * 1e3:6.2f} ms"
        )
    _report_yields("retrieves", recs)
    _report_yields("stores", sorted(probe.stores_done, key=lambda r: r.wall))
    if probe.batches:
        steps = sorted(b[0] for b in probe.batches)
        cpus = sorted(b[1] for b in probe.batches)
        print(
            f"  crowded phase: {len(steps)} batches of the run loop, task steps a batch "
            f"mean {statistics.mean(steps):.1f} p50 {steps[len(steps) // 2]} "
            f"p99 {steps[int(0.99 * len(steps))]}, loop CPU a batch mean "
            f"{statistics.mean(cpus) * 1e3:.2f} p99 {cpus[int(0.99 * len(cpus))] * 1e3:.2f} ms"
        )


def _report_yields(name: str, recs: list[_Retrieve]) -> None:
    """How often the calls gave the loop up and what a yield cost them (the call's time
    not running, per yield), for all of them, the slowest 10% and 1%."""
    n = len(recs)
    if not n:
        return
    parts = []
    for label, part in (("all", recs), ("slowest 10%", recs[int(0.9 * n) :])):
        parts.append(part)
        yields = statistics.mean(r.yields for r in part)
        waited = statistics.mean(r.wall - r.run for r in part)
        per = waited / yields if yields else 0.0
        print(
            f"  {name:9s} {label:12s} yields {yields:4.2f} (0: {sum(not r.yields for r in part)})"
            f" waiting {waited * 1e3:6.2f} ms, {per * 1e3:6.2f} ms a yield"
        )
    slow = recs[int(0.99 * n) :]
    yields = statistics.mean(r.yields for r in slow)
    waited = statistics.mean(r.wall - r.run for r in slow)
    print(
        f"  {name:9s} {'slowest 1%':12s} yields {yields:4.2f} waiting {waited * 1e3:6.2f} ms, "
        f"{(waited / yields if yields else 0.0) * 1e3:6.2f} ms a yield"
    )


#: Everything ``main`` may replace, put back when it returns (so a test can run it).
_PATCHED: tuple[tuple[Any, str], ...] = (
    (memory_module.Memory, "_retrieve_hits"),
    (memory_module.Memory, "_wait_for_slot"),
    (memory_module.Memory, "_wait_in_line"),
    (memory_module.Memory, "store"),
    (fairshare.ReadGate, "checkpoint"),
    (fairshare.ReadGate, "__init__"),
    (swarm_module, "_agent"),
    (memory_module, "SCORING_SLOTS"),
    (snapshot_module, "RETRIEVE_SLICE"),
    (fairshare, "SHARE"),
    (fairshare, "OPEN_MIN"),
    (fairshare, "COMMIT_PARK"),
    (wo_knobs, "_ONE_STEP_CHARS"),
)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    p.add_argument("--durable", action="store_true", help="a fresh SQLite file, not in memory")
    p.add_argument("--slots", default=None, help="SCORING_SLOTS: an int or 'none'")
    p.add_argument("--slice", type=float, default=None, help="RETRIEVE_SLICE, seconds")
    p.add_argument("--share", type=float, default=None, help="the fair share's SHARE")
    p.add_argument("--commit-park", type=float, default=None, help="COMMIT_PARK, seconds")
    p.add_argument("--switch", type=float, default=None, help="sys.setswitchinterval, seconds")
    p.add_argument("--gate-off", action="store_true", help="the fair-share gate disabled")
    p.add_argument(
        "--one-step-chars",
        type=int,
        default=None,
        help="the longest query a small retrieve runs in one step (knobs._ONE_STEP_CHARS)",
    )
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--agents", type=int, default=64)
    p.add_argument("--data", type=Path, default=DATA)
    args = p.parse_args(argv)
    saved = [(obj, name, obj.__dict__[name]) for obj, name in _PATCHED]
    switch = sys.getswitchinterval()
    try:
        _measure(args)
    finally:
        for obj, name, value in saved:
            setattr(obj, name, value)
        sys.setswitchinterval(switch)


def _measure(args: argparse.Namespace) -> None:
    if args.slots is not None:
        memory_module.SCORING_SLOTS = None if args.slots == "none" else int(args.slots)
    if args.slice is not None:
        snapshot_module.RETRIEVE_SLICE = args.slice  # type: ignore[attr-defined]
    if args.share is not None:
        fairshare.SHARE = args.share
        fairshare.OPEN_MIN = fairshare.CLOSED_MAX * (1 - args.share) / args.share
    if args.commit_park is not None:
        fairshare.COMMIT_PARK = args.commit_park
    if args.switch is not None:
        sys.setswitchinterval(args.switch)
    if args.one_step_chars is not None:
        wo_knobs._ONE_STEP_CHARS = args.one_step_chars
    if args.gate_off:
        make_gate = fairshare.ReadGate.__init__

        def gate_off(self: fairshare.ReadGate) -> None:
            make_gate(self)
            self.enabled = False

        fairshare.ReadGate.__init__ = gate_off  # type: ignore[method-assign]
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    _install(clock)
    for _ in range(args.runs):
        _run(args, clock)


if __name__ == "__main__":
    main()
