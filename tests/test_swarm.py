"""``actormem swarm``: real data end to end, eviction, accounting, workload and display."""

from __future__ import annotations

import hashlib
import io
import json
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.lowlevel

import actormem._cli
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._cli import main
from actormem._jsonl import ToolCall
from actormem._swarm import (
    Accounting,
    SwarmRun,
    check_accounting,
    entry_key,
    run_swarm,
    summarize_latency,
)
from actormem._swarm_data import group_episodes, replay_workload, synthetic_workload
from actormem._swarm_display import progress_line, watch

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def real_file(name: str) -> Path:
    """A file of ``../shared/data``; skipped when absent, but a failure on CI."""
    path = DATA / name
    if not path.is_file():
        reason = f"real data {path} is absent (see shared/data/README.md)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


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
    assert accounting["tracked"] == accounting["counted"] == report["throughput"]["steps"]
    for op in ("store", "retrieve", "consolidate"):
        figures = report["latency_ms"][op]
        assert figures is not None, op
        assert figures["count"] > 0
        for name in ("p50", "p95", "p99", "max", "mean"):
            assert figures[name] > 0, (op, name)
        assert figures["p50"] <= figures["p95"] <= figures["p99"] <= figures["max"]
    assert report["throughput"]["operations_per_s"] > 0
    assert report["elapsed_s"] > 0


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
    accounting = report["accounting"]
    assert accounting["present"] == 40
    removed = accounting["evicted"] + accounting["merged"]
    assert accounting["present"] + removed == accounting["tracked"]
    assert "lost: 0" in out
    assert report["verify"]["ok"] is True
    assert report["verify"]["entries"] == 40
    assert db.exists()  # --path keeps the file

    # A second run on the same file tracks the 40 entries already there too.
    status, out, err = run_cli(
        capsys, "swarm", "--agents", "4", "--episodes", "5", "--capacity", "40",
        "--seed", "4", "--path", str(db), "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    second = json.loads(out_json.read_text(encoding="utf-8"))
    assert second["accounting"]["tracked"] == 40 + second["throughput"]["steps"]
    assert second["accounting"]["ok"] is True


def test_swarm_in_memory_with_bm25(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_json = tmp_path / "run.json"
    status, out, err = run_cli(
        capsys, "swarm", "--agents", "8", "--episodes", "20", "--in-memory", "--scorer", "bm25",
        "--top-k", "5", "--json", str(out_json),
    )  # fmt: skip
    assert status == 0, err
    assert "memory in memory" in out.splitlines()[2]
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
    def lossy(*args: Any, **kwargs: Any) -> Accounting:
        sound = check_accounting(*args, **kwargs)
        return attrs.evolve(sound, present=sound.present - 1, missing=1, lost=1,
                            missing_sample=("6f1c0000-0000-4000-8000-000000000000",))  # fmt: skip

    monkeypatch.setattr(actormem._cli, "check_accounting", lossy)
    out_json = tmp_path / "run.json"
    status, out, _ = run_cli(
        capsys, "swarm", "--agents", "2", "--episodes", "3", "--in-memory", "--json", str(out_json)
    )
    assert status == 1
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("lost:")] == ["lost: 1"]
    failed = [line for line in lines if line.startswith("accounting FAILED:")]
    assert len(failed) == 1
    assert "1 ids missing, e.g. 6f1c0000-0000-4000-8000-000000000000" in failed[0]
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["status"] == 1
    assert report["accounting"]["ok"] is False


# --------------------------------------------------------------------- accounting


async def test_accounting_balances_evictions_merges_and_deletes() -> None:
    async with open_memory(capacity=3) as memory:
        before = memory.statistics()
        stored = []
        for text in ["a", "b", "A  ", "c", "d"]:
            entry = MemoryEntry.new(MemoryCategory.FACT, text)
            await memory.store(entry)
            stored.append((entry.id, entry_key(entry)))
        await memory.consolidate()
        await memory.delete(stored[-1][0])
        result = check_accounting(memory, initial={}, stored=stored, before=before)
    assert result.ok
    assert (result.tracked, result.evicted, result.deleted) == (5, 2, 1)
    assert result.present + result.merged == 2
    assert result.lost == 0


async def test_accounting_merge_key_folds_case_like_the_engine() -> None:
    async with open_memory() as memory:
        before = memory.statistics()
        stored = []
        for text in ("Straße  nach Köln", "STRASSE nach\tköln"):
            entry = MemoryEntry.new(MemoryCategory.FACT, text)
            await memory.store(entry)
            stored.append((entry.id, entry_key(entry)))
        assert (await memory.consolidate()).merged == 1
        result = check_accounting(memory, initial={}, stored=stored, before=before)
    assert result.ok
    assert (result.present, result.merged, result.orphan_groups) == (1, 1, 0)


async def test_accounting_finds_a_store_that_vanished() -> None:
    async with open_memory() as memory:
        before = memory.statistics()
        kept = MemoryEntry.new(MemoryCategory.FACT, "kept")
        await memory.store(kept)
        ghost = MemoryEntry.new(MemoryCategory.FACT, "never stored")
        stored = [(kept.id, entry_key(kept)), (ghost.id, entry_key(ghost))]
        result = check_accounting(memory, initial={}, stored=stored, before=before)
    assert not result.ok
    assert result.lost == 1
    assert result.missing_sample == (str(ghost.id),)


async def test_accounting_finds_an_entry_from_nowhere() -> None:
    async with open_memory() as memory:
        before = memory.statistics()
        await memory.store(MemoryEntry.new(MemoryCategory.FACT, "untracked"))
        result = check_accounting(memory, initial={}, stored=[], before=before)
    assert result.unexpected == 1
    assert not result.ok


async def test_accounting_counts_entries_present_at_the_start() -> None:
    async with open_memory(capacity=2) as memory:
        old = MemoryEntry.new(MemoryCategory.FACT, "old")
        await memory.store(old)
        before = memory.statistics()
        initial = {old.id: entry_key(old)}
        stored = []
        for text in ("x", "y"):
            entry = MemoryEntry.new(MemoryCategory.FACT, text)
            await memory.store(entry)
            stored.append((entry.id, entry_key(entry)))
        result = check_accounting(memory, initial=initial, stored=stored, before=before)
    assert result.ok
    assert (result.tracked, result.present, result.evicted) == (3, 2, 1)


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

    async with open_memory() as memory, trio.open_nursery() as nursery:
        before = memory.statistics()
        nursery.start_soon(end_of_time)
        await run_swarm(memory, workload, agents=6, duration=10, run=run)
        result = check_accounting(memory, initial={}, stored=run.stored, before=before)
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
