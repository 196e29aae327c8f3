"""``actormem swarm``: real data end to end, eviction, accounting, workload and display."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

import actormem.cli._main
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem.agent._toolcalls import ToolCall
from actormem.cli._display import progress_line, watch
from actormem.cli._main import main
from actormem.cli._swarm import (
    CAUSES,
    Accounting,
    Removals,
    SwarmRun,
    check_accounting,
    run_swarm,
    summarize_latency,
)
from actormem.cli._swarm_data import group_episodes, replay_workload, synthetic_workload

from .realdata import real_file


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def check_report(report: dict[str, Any]) -> None:
    """The JSON report's invariants every sound run has."""
    assert report["status"] == 0
    accounting = report["accounting"]
    assert accounting["ok"] is True
    assert accounting["lost"] == 0
    assert accounting["unexpected"] == 0
    assert accounting["counter_mismatches"] == []
    assert accounting["totals_hold"] is True
    assert accounting["reports"] == accounting["counters"]
    stores = accounting["stores"]
    assert stores["tracked"] == report["throughput"]["steps"]
    assert stores["tracked"] == stores["present"] + sum(stores[c] for c in CAUSES)
    for op in ("store", "retrieve", "consolidate"):
        figures = report["latency_ms"][op]
        assert figures is not None, op
        assert figures["count"] > 0
        for name in ("p50", "p95", "p99", "max", "mean"):
            assert figures[name] > 0, (op, name)
        assert figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"]
    assert report["throughput"]["operations_per_s"] > 0
    assert report["elapsed_s"] > 0
    throughput = report["throughput"]
    assert throughput["cpu_s"] > 0
    assert throughput["operations_per_cpu_s"] == pytest.approx(
        throughput["operations"] / throughput["cpu_s"]
    )


# --------------------------------------------------------------------- end to end


def test_swarm_on_both_real_files(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    calls, lookups = real_file("tool_calls.jsonl"), real_file("tool_lookups.jsonl")
    out_json = tmp_path / "run.json"
    status, out, err = run_cli(
        capsys,
        "swarm",
        "--tool-calls", str(calls),
        "--tool-calls", str(lookups),
        "--agents", "16",
        "--steps", "1500",
        "--verify",
        "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    first = out.splitlines()[0]
    assert first.startswith("actormem swarm: real tool calls: 5,685 calls in 283 episodes")
    assert "lost: 0" in out.splitlines()
    report = json.loads(out_json.read_text(encoding="utf-8"))
    check_report(report)
    assert report["throughput"]["steps"] == 1500
    assert report["throughput"]["episodes"] >= 11  # the tau-bench and ToolTalk ones finish
    assert report["options"]["agents"] == 16
    assert report["data_files"] == [
        {"path": str(p), "sha256": hashlib.sha256(p.read_bytes()).hexdigest(), "rows": rows}
        for p, rows in ((calls, 1635), (lookups, 4050))
    ]
    assert report["command"].startswith("actormem swarm --tool-calls")
    assert report["options"]["path"].endswith("swarm.sqlite")  # a fresh temporary file
    assert not Path(report["options"]["path"]).exists()  # ... removed afterwards
    assert report["verify"] == {
        "entries": report["accounting"]["present"],
        "differing": 0,
        "missing": 0,
        "extra": 0,
        "ok": True,
    }


def test_swarm_on_a_file_with_a_capacity_small_enough_to_evict(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out_json = tmp_path / "run.json"
    db = tmp_path / "small.sqlite"
    status, out, err = run_cli(
        capsys,
        "swarm", "--agents", "16", "--episodes", "60", "--capacity", "40", "--seed", "3",
        "--path", str(db), "--verify", "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    assert out.splitlines()[0] == "actormem swarm: synthetic data (seeded generator, seed 3)"
    report = json.loads(out_json.read_text(encoding="utf-8"))
    check_report(report)
    assert report["memory"]["entries"] == 40
    assert report["memory"]["evictions"] > 0
    stores = report["accounting"]["stores"]
    assert stores["present"] == 40
    assert stores["evicted"] == report["memory"]["evictions"]
    assert stores["present"] + stores["evicted"] + stores["merged"] == stores["tracked"]
    assert "lost: 0" in out
    assert report["verify"]["ok"] is True
    assert report["verify"]["entries"] == 40
    assert db.exists()  # --path keeps the file

    # The file now holds entries: a second run is refused unless --reuse-path says so
    # (it would add its entries to the user's, and consolidate them), the file unchanged.
    kept = db.read_bytes()
    status, out, err = run_cli(
        capsys, "swarm", "--agents", "4", "--episodes", "5", "--path", str(db),
    )  # fmt: skip
    assert status == 2
    assert err.startswith(f"actormem swarm: error: --path {db}: holds 40 entries; ")
    assert "--reuse-path" in err
    assert err.count("\n") == 1
    assert db.read_bytes() == kept

    # A second run on the same file with a smaller capacity: loading evicts 15 of the 40
    # (reported before the run, not tracked); the 25 left are tracked as initial entries,
    # and the agents' stores evict them: counted, not lost.
    status, out, err = run_cli(
        capsys, "swarm", "--agents", "4", "--episodes", "5", "--capacity", "25",
        "--seed", "4", "--path", str(db), "--reuse-path", "--verify", "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    second = json.loads(out_json.read_text(encoding="utf-8"))
    check_report(second)
    accounting = second["accounting"]
    assert accounting["before_run"]["evicted"] == 15
    initial = accounting["initial"]
    assert initial["tracked"] == 25
    assert initial["evicted"] > 0
    assert initial["present"] + initial["evicted"] == 25
    assert initial["lost"] == 0
    assert accounting["present"] == 25
    assert "accounting: 15 entries of the file removed while loading it" in out
    assert "accounting: 25 entries present at the start = " in out
    assert second["verify"]["ok"] is True


def test_swarm_in_memory_with_bm25(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_json = tmp_path / "run.json"
    status, out, err = run_cli(
        capsys, "swarm", "--agents", "8", "--episodes", "20", "--in-memory", "--scorer", "bm25",
        "--top-k", "5", "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    assert out.splitlines()[2].endswith(", memory in RAM only (--in-memory)")
    assert "memory in memory" not in out
    report = json.loads(out_json.read_text(encoding="utf-8"))
    check_report(report)
    assert report["options"]["path"] is None
    assert report["options"]["scorer"] == "bm25"


def test_swarm_option_conflicts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    status, _, err = run_cli(capsys, "swarm", "--in-memory", "--path", str(tmp_path / "x"))
    assert status == 2
    assert "not allowed with" in err
    status, _, err = run_cli(capsys, "swarm", "--in-memory", "--verify")
    assert status == 2
    assert err == "actormem swarm: error: --verify needs a file: drop --in-memory\n"


def test_swarm_exits_non_zero_naming_what_is_missing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    dropped: list[str] = []

    class Lossy(Removals):
        """Drops the second eviction report: that entry leaves without a trace."""

        def __call__(self, entry: MemoryEntry, cause: str) -> None:
            if cause == "evicted" and len(dropped) < 2:
                dropped.append(str(entry.id))
                if len(dropped) == 2:
                    return
            super().__call__(entry, cause)

    monkeypatch.setattr(actormem.cli._main, "Removals", Lossy)
    out_json = tmp_path / "run.json"
    status, out, _ = run_cli(
        capsys, "swarm", "--agents", "2", "--episodes", "6", "--capacity", "5", "--in-memory",
        "--json", str(out_json),
    )  # fmt: skip
    assert status == 1
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("lost:")] == ["lost: 1"]
    failed = [line for line in lines if line.startswith("accounting FAILED:")]
    assert failed[0] == (
        f"accounting FAILED: 1 lost (not present, no removal reported): {dropped[1]}"
    )
    assert "the engine counted" in failed[1]  # evictions grew by one more than reported
    assert len(failed) == 2
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["status"] == 1
    accounting = report["accounting"]
    assert accounting["ok"] is False
    assert accounting["lost_ids"] == [dropped[1]]
    assert accounting["counter_mismatches"] == ["evicted"]
    assert accounting["counters"]["evicted"] == accounting["reports"]["evicted"] + 1


# --------------------------------------------------------------------- accounting


def fact(text: str, relevance: float = 1.0) -> MemoryEntry:
    return attrs.evolve(MemoryEntry.new(MemoryCategory.FACT, text), relevance=relevance)


class Tracked:
    """A memory opened with a :class:`Removals`, and the ids stored through it."""

    def __init__(self, memory: Any, removals: Removals) -> None:
        self.memory = memory
        self.removals = removals
        self.initial = [e.id for e in memory.snapshot()]
        self.before = memory.statistics()
        self.stored: list[Any] = []
        removals.start_run()

    async def store(self, entry: MemoryEntry) -> MemoryEntry:
        await self.memory.store(entry)
        self.stored.append(entry.id)
        return entry

    def check(self) -> Accounting:
        return check_accounting(
            self.memory,
            initial=self.initial,
            stored=self.stored,
            removals=self.removals,
            before=self.before,
        )


async def test_accounting_is_exact_per_id_through_every_cause() -> None:
    removals = Removals()
    async with open_memory(capacity=4, on_remove=removals) as memory:
        run = Tracked(memory, removals)
        a = await run.store(fact("a", 0.5))
        b = await run.store(fact("b"))
        c = await run.store(fact("c"))
        await run.store(fact("d"))
        await run.store(attrs.evolve(b, memory="b2"))  # an upsert: b replaced, b present
        await run.store(fact("e"))  # full: evicts a, the lowest weighted recency
        await memory.delete(c.id)
        dup = await run.store(fact("B2 "))
        await memory.consolidate()  # merges dup into b (the earlier one survives)
        tiny = await run.store(fact("tiny", 0.01))
        await memory.consolidate()  # prunes tiny
        await run.store(a)  # stored again after its eviction: present again
        result = run.check()
        assert {e.id for e in memory.snapshot()} >= {a.id, b.id}
    assert removals.during_run[1:] == [
        (a.id, "evicted"),
        (c.id, "deleted"),
        (dup.id, "merged"),
        (tiny.id, "pruned"),
    ]
    assert result.stores.to_json() == {
        "tracked": 9,
        "present": 4,  # a, b, d, e
        "replaced": 1,
        "evicted": 1,
        "pruned": 1,
        "merged": 1,
        "deleted": 1,
        "lost": 0,
    }
    assert result.initial.tracked == 0
    assert result.ok
    assert result.reports == result.counters == dict.fromkeys(CAUSES, 1)
    assert (result.lost, result.unexpected, result.lost_ids) == (0, 0, ())


async def test_accounting_names_a_store_that_vanished() -> None:
    removals = Removals()
    async with open_memory(on_remove=removals) as memory:
        run = Tracked(memory, removals)
        await run.store(fact("kept"))
        ghost = fact("never stored")
        run.stored.append(ghost.id)  # acknowledged, yet the memory never saw it
        result = run.check()
    assert not result.ok
    assert result.lost == result.stores.lost == 1
    assert result.lost_ids == (str(ghost.id),)
    assert not result.totals_hold
    assert result.counter_mismatches == ()


async def test_accounting_finds_a_delete_behind_its_back() -> None:
    removals = Removals()
    async with open_memory(on_remove=removals) as memory:
        run = Tracked(memory, removals)
        gone = await run.store(fact("gone"))
        await run.store(fact("kept"))
        memory._state.on_remove = None  # the removal goes unreported
        await memory.delete(gone.id)
        memory._state.on_remove = removals
        result = run.check()
    assert not result.ok
    assert result.lost_ids == (str(gone.id),)
    assert result.stores.lost == 1
    assert result.counter_mismatches == ("deleted",)
    assert result.totals_hold  # the old totals check alone would have passed


async def test_accounting_is_exact_where_the_counts_balance() -> None:
    """An entry that vanished while a report named another: every total and counter agrees,
    only the per-id check sees it."""
    removals = Removals()
    async with open_memory(capacity=2, on_remove=removals) as memory:
        run = Tracked(memory, removals)
        first = await run.store(fact("first"))
        second = await run.store(fact("second"))
        await run.store(fact("third"))  # evicts first
        assert removals.during_run == [(first.id, "evicted")]
        removals.log[-1] = (second.id, "evicted")  # ... but the report names second
        result = run.check()
    assert result.totals_hold
    assert result.counter_mismatches == ()
    assert result.lost_ids == (str(first.id),)
    assert result.unexpected_ids == (str(second.id),)  # present and reported removed
    assert (result.lost, result.unexpected) == (1, 1)
    assert not result.ok


async def test_accounting_finds_an_entry_from_nowhere() -> None:
    removals = Removals()
    async with open_memory(on_remove=removals) as memory:
        run = Tracked(memory, removals)
        stray = fact("untracked")
        await memory.store(stray)
        result = run.check()
    assert result.unexpected == 1
    assert result.unexpected_ids == (str(stray.id),)
    assert result.lost == 0
    assert not result.ok


async def test_accounting_counts_entries_present_at_the_start_apart() -> None:
    removals = Removals()
    async with open_memory(capacity=2, on_remove=removals) as memory:
        old = fact("old")
        await memory.store(old)
        run = Tracked(memory, removals)
        await run.store(fact("x"))
        await run.store(fact("y"))  # evicts old: an initial entry, counted, not lost
        result = run.check()
    assert result.ok
    assert result.initial.to_json() == {
        **dict.fromkeys(("present", *CAUSES, "lost"), 0),
        "tracked": 1,
        "evicted": 1,
    }
    assert (result.stores.tracked, result.stores.present, result.stores.evicted) == (2, 2, 0)


async def test_accounting_keeps_evictions_while_loading_apart(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    async with open_memory(path=path) as memory:
        for text in ("a", "b", "c"):
            await memory.store(fact(text))
    removals = Removals()
    async with open_memory(path=path, capacity=2, on_remove=removals) as memory:
        run = Tracked(memory, removals)
        await run.store(fact("d"))
        result = run.check()
    assert result.ok
    assert result.before_run == {**dict.fromkeys(CAUSES, 0), "evicted": 1}
    assert result.initial.tracked == 2
    assert result.initial.present + result.initial.evicted == 2


def duplicated_episodes(count: int) -> list[Any]:
    """Episodes whose first two calls are identical: their end_run merges one away."""
    calls = []
    for i in range(count):
        for step in range(4):
            same = step < 2
            calls.append(
                ToolCall(
                    source="s",
                    episode=f"e{i}",
                    step=step,
                    tool="t",
                    input={"q": 0 if same else step},
                    result="same" if same else f"r{step}",
                    reward=1.0,
                )
            )
    return group_episodes(calls)


@pytest.mark.parametrize("capacity", [None, 9])
async def test_swarm_accounting_holds_through_merges_prunes_and_evictions(
    capacity: int | None,
) -> None:
    removals = Removals()
    async with open_memory(capacity=capacity, on_remove=removals) as memory:
        for i in range(3):  # left from an earlier run; consolidation prunes them
            await memory.store(fact(f"faint {i}", 0.01))
        initial = [e.id for e in memory.snapshot()]
        before = memory.statistics()
        removals.start_run()
        workload = replay_workload(duplicated_episodes(12), description="t")
        run = await run_swarm(memory, workload, agents=3, top_k=2)
        await memory.delete(MemoryEntry.new(MemoryCategory.FACT, "x").id)  # settle
        result = check_accounting(
            memory, initial=initial, stored=run.stored, removals=removals, before=before
        )
    assert result.ok, result.to_json()
    assert result.stores.tracked == run.steps == 48
    assert result.initial.tracked == 3
    assert result.initial.pruned + result.initial.evicted == 3
    removed_stores = result.stores.evicted + result.stores.merged
    assert result.stores.present + removed_stores == 48
    if capacity is None:
        assert result.initial.pruned == 3
        assert result.stores.merged == 12  # one per episode
        assert result.stores.present == 36
    else:
        assert result.stores.evicted > 0
        assert result.stores.present + result.initial.present <= capacity


# --------------------------------------------------------------------- the runner


def call(episode: str, step: int, result: str = "r", reward: float | None = None) -> ToolCall:
    return ToolCall(
        source="s", episode=episode, step=step, tool="t", input={"q": step}, result=result,
        reward=reward,
    )  # fmt: skip


async def test_step_limit_is_exact_and_interrupts_episodes() -> None:
    episodes = group_episodes([call(f"e{i}", s) for i in range(10) for s in range(5)])
    workload = replay_workload(episodes, description="test")
    async with open_memory() as memory:
        run = await run_swarm(memory, workload, agents=4, max_steps=13)
        assert len(memory) == 13
    assert run.steps == 13
    assert len(run.stored) == 13
    assert run.episodes_done + run.episodes_interrupted <= 4 + 13 // 5
    assert run.episodes_interrupted >= 1


async def test_duration_stops_agents_at_a_step_boundary(mock_clock: trio.testing.MockClock) -> None:
    workload = synthetic_workload(seed=1, limit=1000)
    run = SwarmRun(agents=6)
    started_at_jump = []

    async def end_of_time() -> None:
        while run.steps < 20:  # noqa: ASYNC110 - polls a plain counter the agents bump
            await trio.lowlevel.checkpoint()
        mock_clock.jump(11)
        started_at_jump.append(run.steps_started)

    removals = Removals()
    async with open_memory(on_remove=removals) as memory, trio.open_nursery() as nursery:
        before = memory.statistics()
        nursery.start_soon(end_of_time)
        await run_swarm(memory, workload, agents=6, duration=10, run=run)
        result = check_accounting(
            memory, initial=[], stored=run.stored, removals=removals, before=before
        )
    assert run.steps >= 20
    assert [run.steps] == started_at_jump  # steps begun finish; none begins after the end
    assert workload.taken < 1000
    assert run.episodes_interrupted + run.episodes_done == workload.taken
    assert run.episodes_interrupted >= 1
    assert result.ok


async def test_agents_query_with_the_previous_result() -> None:
    seen: list[str] = []
    episodes = group_episodes([call("e", 1, "second"), call("e", 0, "first")])
    workload = replay_workload(episodes, description="test")
    async with open_memory() as memory:
        original = memory.retrieve

        async def spy(query: str, limit: int = 10, **kwargs: Any) -> Any:
            seen.append(query)
            return await original(query, limit, **kwargs)

        object.__setattr__(memory, "retrieve", spy)
        run = await run_swarm(memory, workload, agents=1, top_k=2)
    assert seen == ['{"q":0}', "first"]
    assert run.episodes_done == 1
    assert run.episodes_succeeded == 1


async def test_failed_episode_skips_consolidation() -> None:
    episodes = group_episodes([call("bad", 0, reward=0.0), call("good", 0, reward=1.0)])
    assert [e.success for e in episodes] == [False, True]
    async with open_memory() as memory:
        run = await run_swarm(memory, replay_workload(episodes, description="t"), agents=2)
        assert memory.statistics().consolidations == 1
    assert run.episodes_succeeded == 1
    assert len(run.consolidate_latency) == 1


async def test_run_swarm_rejects_bad_options() -> None:
    async with open_memory() as memory:
        workload = synthetic_workload(seed=0, limit=1)
        with pytest.raises(ValueError, match="agents"):
            await run_swarm(memory, workload, agents=0)
        with pytest.raises(ValueError, match="top_k"):
            await run_swarm(memory, workload, agents=1, top_k=-1)
        with pytest.raises(ValueError, match="duration"):
            await run_swarm(memory, workload, agents=1, duration=0)
        with pytest.raises(ValueError, match="max_steps"):
            await run_swarm(memory, workload, agents=1, max_steps=0)


# --------------------------------------------------------------------- workloads


def test_group_episodes_orders_by_step_and_keeps_ties_in_file_order() -> None:
    calls = [
        call("a", 2, "a2", reward=0.0),
        call("b", 0, "b0"),
        call("a", 0, "a0"),
        call("b", 0, "b0'"),
        call("a", 1, "a1", reward=1.0),
    ]
    a, b = group_episodes(calls)
    assert [c.result for c in a.steps] == ["a0", "a1", "a2"]
    assert a.reward == 0.0
    assert not a.success
    assert [c.result for c in b.steps] == ["b0", "b0'"]
    assert b.reward is None
    assert b.success


def test_scale_gives_distinct_episode_ids_longest_first() -> None:
    episodes = group_episodes(
        [call("short", 0), call("long", 0), call("long", 1), call("mid", 0), call("mid", 1)]
    )
    workload = replay_workload(episodes, scale=2, description="t")
    assert workload.total == 6
    taken = []
    while (episode := workload.take()) is not None:
        taken.append(episode.episode)
    assert taken == ["long#1", "long#2", "mid#1", "mid#2", "short#1", "short#2"]
    single = replay_workload(episodes, limit=2, description="t")
    assert single.total == 2
    assert [single.take().episode, single.take().episode, single.take()] == [  # type: ignore[union-attr]
        "long",
        "mid",
        None,
    ]
    with pytest.raises(ValueError, match="scale"):
        replay_workload(episodes, scale=0, description="t")
    with pytest.raises(ValueError, match="no episodes"):
        replay_workload([], description="t")


def test_synthetic_workload_is_seeded() -> None:
    def first(seed: int) -> list[Any]:
        w = synthetic_workload(seed=seed, limit=5)
        return [w.take() for _ in range(6)]

    one, again, other = first(7), first(7), first(8)
    assert one == again
    assert one != other
    assert one[-1] is None
    for episode in one[:-1]:
        assert 2 <= len(episode.steps) <= 12
        assert [c.step for c in episode.steps] == list(range(len(episode.steps)))
        assert episode.reward in (0.0, 1.0)
        json.loads(episode.steps[0].result)


# --------------------------------------------------------------------- display and figures


def test_latency_summary() -> None:
    assert summarize_latency([]) is None
    one = summarize_latency([0.002])
    assert one is not None
    assert one.p50 == one.p99 == one.max == pytest.approx(2.0)
    many = summarize_latency([i / 1000 for i in range(1, 101)])
    assert many is not None
    assert many.count == 100
    assert many.p50 == pytest.approx(50.5)
    assert many.max == pytest.approx(100.0)
    assert many.p50 < many.p95 < many.p99 < many.max


async def test_plain_progress_lines(autojump_clock: trio.testing.MockClock) -> None:
    run = SwarmRun(agents=2)
    run.retrieve_latency.extend([0.001, 0.003])
    async with open_memory() as memory:
        out = io.StringIO()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: watch(
                    run, memory.statistics, total=10, interactive=False, interval=1.0, out=out
                )
            )
            await trio.sleep(3.5)
            nursery.cancel_scope.cancel()
        lines = out.getvalue().splitlines()
        assert len(lines) == 3
        assert all("episodes 0/10" in line and "entries 0" in line for line in lines)
        assert "retrieve p99" in lines[0]
        assert "evictions 0" in lines[0]
        assert progress_line(run, None, 12.0, memory.statistics()).count("ops/s 12") == 1


async def test_live_display_draws_without_a_terminal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    run = SwarmRun(agents=1)
    async with open_memory() as memory:
        out = io.StringIO()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: watch(
                    run, memory.statistics, total=None, interactive=True, interval=0.5, out=out
                )
            )
            await trio.sleep(2)
            nursery.cancel_scope.cancel()
    assert "episodes" in out.getvalue()
