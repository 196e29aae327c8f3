"""stress/mainjob_tail.py: the main job's retrieve tail, its crowded phase's cycle."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest
import trio

from stress import mainjob_tail


def _wrapped() -> tuple[object, ...]:
    import actormem._engine.memory as memory_module
    import actormem._engine.state as state_module
    import actormem.cli._swarm as swarm
    from actormem._storage import sqlite

    return (swarm._agent, memory_module.Memory.retrieve, memory_module.Memory._apply_batch,
            sqlite.SqliteStore.write_inline, state_module.MemoryState.flush_index)  # fmt: skip


@pytest.mark.parametrize("durable", [False, True])
def test_a_run_records_every_retrieve_and_restores_what_it_wrapped(
    tmp_path: Path, durable: bool
) -> None:
    """A small synthetic swarm: one record per retrieve, each with a step and its query's
    length, the crowded phase's retrieves among them, the bands a partition of it; the
    wrapped methods and the collector's callbacks as they were; the durable run's inline
    commits and deferred adds recorded."""
    before, callbacks = _wrapped(), list(gc.callbacks)
    where = ["--path", str(tmp_path / "m.sqlite")] if durable else ["--in-memory"]
    trace = mainjob_tail.run(
        ["--synthetic", "--agents", "8", "--steps", "60", "--interval", "600",
         "--json", str(tmp_path / "o.json"), *where]  # fmt: skip
    )
    assert _wrapped() == before
    assert gc.callbacks == callbacks
    assert trace.agents == 8
    assert len(trace.retrieves) == 60
    for start, end, chars, cpu, steps, running in trace.retrieves:
        assert start <= end
        assert chars >= 0
        assert cpu >= 0
        assert steps >= 1
        assert 1 <= running <= 8
    assert trace.parts["apply_batch"]
    assert bool(trace.parts["flush_index"]) is durable
    figures = mainjob_tail.summary(trace)
    assert figures["retrieves"] == 60
    crowded = figures["crowded_retrieves"]
    assert crowded == sum(1 for r in trace.retrieves if r[5] == 8) > 0
    assert sum(b["n"] for b in figures["bands"]) == crowded
    assert trace.crowded_cpu is not None
    assert trace.crowded_cpu[0] <= trace.crowded_cpu[1]
    assert figures["cpu_cycle_ms"] == pytest.approx(8 * figures["crowded_cpu_per_step_ms"])
    assert figures["retrieve_p50_ms"] <= figures["retrieve_p99_ms"]
    text = mainjob_tail.report(figures)
    assert text.startswith("retrieves 60: ")
    assert "| p0-50 |" in text
    assert "| apply_batch |" in text


def test_timed_counts_steps_and_passes_values_and_errors_through() -> None:
    """_Timed gives the coroutine's result, counts one step per send (1 + its yields), and
    delivers an exception raised at a yield into the coroutine."""

    async def two_yields() -> int:
        await trio.lowlevel.checkpoint()
        await trio.lowlevel.checkpoint()
        return 7

    async def cancelled_inside() -> str:
        with trio.move_on_after(0) as scope:
            await trio.sleep(1)
        return "caught" if scope.cancelled_caught else "not"

    async def main() -> tuple[int, int, str, int]:
        timed = mainjob_tail._Timed(two_yields())
        got = await timed
        other = mainjob_tail._Timed(cancelled_inside())
        said = await other
        return got, timed.steps, said, other.steps

    got, steps, said, other_steps = trio.run(main)
    assert (got, steps) == (7, 3)
    assert said == "caught"
    assert other_steps >= 1


def test_summary_of_a_made_trace() -> None:
    """The cycle is the crowded phase's wall time over its retrieves per agent; the
    bands split it by latency; a trace without retrieves is refused."""
    trace = mainjob_tail.Trace(agents=2)
    # Four crowded retrieves over 0.3 s (two rounds of two agents), one after.
    trace.retrieves = [(0.0, 0.010, 10, 1000, 1, 2), (0.1, 0.12, 20, 2000, 2, 2),
                       (0.2, 0.205, 30, 3000, 1, 2), (0.3, 0.34, 40, 4000, 3, 2),
                       (0.5, 0.501, 5, 500, 1, 1)]  # fmt: skip
    trace.collections = [(0.31, 0.01, 1, 5000)]
    trace.crowded_cpu = [1.0, 1.03]
    figures = mainjob_tail.summary(trace)
    assert figures["crowded_cpu_per_step_ms"] == pytest.approx(10.0)
    assert figures["cpu_cycle_ms"] == pytest.approx(20.0)
    assert figures["crowded_retrieves"] == 4
    assert figures["cycle_ms"] == pytest.approx(1e3 * 0.3 / 2)
    slowest = figures["bands"][-1]
    assert slowest["band"] == "p97-100"
    assert slowest["n"] == 1
    assert slowest["latency_ms"] == pytest.approx(40.0)
    assert slowest["gc_overlap_ms"] == pytest.approx(10.0)
    assert figures["collections"] == [
        {"generation": 1, "count": 1, "cpu_ms": 0.005, "largest_cpu_ms": 0.005}
    ]
    json.dumps(figures)  # plain data
    with pytest.raises(ValueError, match="no retrieve"):
        mainjob_tail.summary(mainjob_tail.Trace(agents=2))
