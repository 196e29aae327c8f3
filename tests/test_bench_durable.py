"""Tiny runs of the durable benchmarks (``stress/bench_durable.py``,
``python -m stress.commit_phases``, ``python -m stress.handoff``): they run, report
every cell, clean up, restore what they patch, and refuse bad arguments with a usage
line. They need no data. No timing thresholds: benchmarks report figures, tests assert
behaviour."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

import actormem._engine.memory as memory_module
from actormem._engine.state import MemoryState
from actormem._storage.sqlite import SqliteStore
from stress import bench_durable, commit_phases, handoff


def test_bench_durable_runs_every_cell_with_any_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # --seed 1 once crashed: random.Random(-1), the warm-up's seed, is Random(1), so the
    # warm-up stored the same ids and the run counted 20 entries short.
    bench_durable.main(
        ["--entries", "30", "--writers", "1", "4", "--modes", "memory", "normal",
         "--repeats", "1", "--seed", "1", "--dir", str(tmp_path)]
    )
    out = capsys.readouterr().out
    runs = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert {(r["mode"], r["writers"]) for r in runs} == {
        ("memory", 1), ("memory", 4), ("normal", 1), ("normal", 4)
    }
    by_cell = {(r["mode"], r["writers"]): r for r in runs}
    assert by_cell["normal", 1]["commits"] == 30  # one writer: a commit per store
    assert 1 <= by_cell["normal", 4]["commits"] <= 30
    assert by_cell["memory", 1]["commits"] == 0
    assert all(r["entries_per_s"] > 0 and r["p99_ms"] >= r["p50_ms"] > 0 for r in runs)
    assert "| normal | 4 |" in out
    assert list(tmp_path.iterdir()) == []  # its files lived in a folder it removed


def test_warm_up_entries_never_share_ids_with_measured_ones() -> None:
    warm = {e.id for e in bench_durable.make_entries(20, bench_durable.WARM_UP_SEED)}
    for seed in (-1, 0, 1, 2):
        assert warm.isdisjoint(e.id for e in bench_durable.make_entries(200, seed))


def test_phases_reads_each_step_of_each_batch() -> None:
    def batch(t: float, write_at: float) -> list[tuple[str, float]]:
        return [
            ("apply<", t), ("apply>", t + 10), ("encode<", t + 10), ("encode>", t + 14),
            ("index<", t + 14), ("index>", t + 20), ("write<", t + write_at),
            ("write>", t + write_at + 5), ("owner", t + write_at + 7), ("publish>", t + 30),
        ]

    # Three batches 40 s apart; the second one's write started during its indexing.
    events = batch(0, 21) + batch(40, 16) + batch(80, 21) + [("apply<", 120.0)]
    got = commit_phases.phases(events)
    assert got["batches"] == 3
    assert got["write during index"] == 1
    assert got["period"] == pytest.approx(40e6)
    assert got["apply"] == pytest.approx(10e6)
    assert got["encode"] == pytest.approx(4e6)
    assert got["index"] == pytest.approx(6e6)
    assert got["index end -> write start"] == pytest.approx(1e6)  # the two serial batches
    assert got["write"] == pytest.approx(5e6)
    assert got["write end -> owner"] == pytest.approx(2e6)
    assert got["writers"] == pytest.approx(10e6)  # publish at +30, next apply at +40
    assert commit_phases.phases(events, skip=2)["batches"] == 1


def test_commit_phases_runs_and_restores_what_it_patches(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (
        memory_module._in_thread_while, memory_module.Memory._apply_batch,
        SqliteStore.prepare, SqliteStore.write, MemoryState.flush_index, MemoryState.publish,
    )
    commit_phases.main(
        ["--entries", "256", "--writers", "8", "--repeats", "1", "--modes", "memory",
         "normal", "--idle-ms", "0.1", "--dir", str(tmp_path)]
    )
    after = (
        memory_module._in_thread_while, memory_module.Memory._apply_batch,
        SqliteStore.prepare, SqliteStore.write, MemoryState.flush_index, MemoryState.publish,
    )
    assert after == before
    rows = {
        line.split(" | ")[0].removeprefix("| "): line.strip(" |").split(" | ")[1:]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ")
    }
    assert rows["encode"][0] == "-"  # memory, normal
    assert rows["encode"][1] != "-"
    assert rows["write"][0] == "-"
    assert rows["write"][1] != "-"
    assert all(cell != "-" for cell in rows["period"] + rows["apply"])
    assert list(tmp_path.iterdir()) == []


def test_commit_phases_skips_the_warm_up_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm-up stores are one batch each; skipping only entries/8/writers batches from
    # the start made a 1,000-entry run report a period of ~0.4 ms instead of ~2 ms.
    seen: list[tuple[int, int]] = []
    phases = commit_phases.phases

    def spy(events: list[commit_phases.Event], skip: int = 0) -> dict[str, object]:
        seen.append((sum(label == "apply<" for label, _ in events), skip))
        return phases(events, skip)

    monkeypatch.setattr(commit_phases, "phases", spy)
    got = commit_phases.run("memory", 256, 8, tmp_path, 0)
    [(batches_seen, skip)] = seen
    assert skip == bench_durable.WARM_UP_ENTRIES + 4  # then 256 / 8 / 8 batches
    assert got["batches"] == batches_seen - 1 - skip  # the last one has no end


def test_bench_durable_table_without_a_lone_writer_has_no_ratio(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench_durable.main(
        ["--entries", "20", "--writers", "4", "--modes", "memory", "--repeats", "1",
         "--dir", str(tmp_path)]
    )
    table = capsys.readouterr().out.split("| mode |")[1]
    assert "| memory | 4 |" in table
    assert table.splitlines()[-1].endswith("| - |")  # no 1-writer run: no ratio
    assert "nan" not in table


def test_handoff_prints_its_four_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    handoff.main(["--rounds", "5", "--dir", str(tmp_path)])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    names = [row.split(" | ")[0].removeprefix("| ") for row in rows[1:]]
    assert names == ["lock ping-pong", "to_thread no-op", "commit path no-op", "inline commit"]
    for row in rows[1:]:
        wall, cpu = (float(cell) for cell in row.strip(" |").split(" | ")[1:])
        assert wall >= 0
        assert cpu >= 0
    assert list(tmp_path.iterdir()) == []  # its SQLite file lived in a temporary folder


_QUICK = ["--entries", "10", "--repeats", "1"]  # a short run, should the check be missing


@pytest.mark.parametrize(
    ("main", "argv", "message"),
    [
        (handoff.main, ["--rounds", "0"], "must be >= 1"),
        (handoff.main, ["--dir", "/nonexistent/dir"], "is not an existing directory"),
        (commit_phases.main, ["--idle-ms", "5000"], "--idle-ms must be between 0 and 1000"),
        (commit_phases.main, ["--entries", "0"], "must be >= 1"),
        (commit_phases.main, ["--modes", "fast"], "invalid choice: 'fast'"),
        (commit_phases.main, ["--modes", "normal", "normal"], "--modes: each value once"),
        (bench_durable.main, [*_QUICK, "--writers", "1", "1"],
         "--writers: each value once, got 1 more than once"),
        (bench_durable.main, [*_QUICK, "--modes", "normal", "normal"],
         "--modes: each value once, got normal"),
        (bench_durable.main, [*_QUICK, "--json", "/"], "'/' is a folder, not a file"),
        (bench_durable.main, [*_QUICK, "--json", "/proc/actormem.jsonl"],
         "cannot write '/proc/actormem.jsonl'"),
    ],
)
def test_refuses_bad_arguments_before_running(
    main: Callable[[list[str]], None],
    argv: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
