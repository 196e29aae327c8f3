"""``actormem swarm`` ended by SIGINT or SIGTERM, its temporary folder, its workload."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

import pytest

from actormem._stats import MemoryStatistics
from actormem.agent._toolcalls import ToolCall
from actormem.cli._display import progress_line
from actormem.cli._main import main
from actormem.cli._swarm import SwarmRun
from actormem.cli._swarm_data import Episode, replay_workload

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_swarm_with_its_figures_and_no_temporary_folder(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """A real signal to ``python -m actormem swarm`` once it shows progress: one line on
    stderr, the report of the part that ran (accounting checked) and its JSON, exit
    128 + signal, and the temporary folder gone."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    out_json = tmp_path / "run.json"
    child = subprocess.Popen(
        [sys.executable, "-m", "actormem", "swarm", "--agents", "4", "--duration", "60",
         "--interval", "0.05", "--json", str(out_json)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "TMPDIR": str(temp)},
    )  # fmt: skip
    assert child.stdout is not None
    seen = []
    for line in child.stdout:
        seen.append(line)
        if line.startswith("[") and " steps 0 " not in line:
            break  # a progress line with steps made: the run is on
    assert [p.name for p in temp.iterdir()][0].startswith("actormem-swarm-")
    child.send_signal(signum)
    rest, err = child.communicate(timeout=120)
    out = "".join(seen) + rest
    name = signal.Signals(signum).name
    assert err == (
        f"actormem swarm: interrupted ({name}): the figures above are those of the part "
        "that ran\n"
    )
    assert child.returncode == 128 + signum
    assert f"interrupted by {name} after " in out
    assert "lost: 0" in out.splitlines()
    report = json.loads(out_json.read_text(encoding="utf-8"))
    assert report["interrupted"] == name
    assert report["status"] == child.returncode  # the exit status, not 0
    assert report["accounting"]["ok"] is True
    assert report["throughput"]["steps"] > 0
    assert list(temp.iterdir()) == []


def test_no_temporary_folder_unless_needed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("a temporary folder was made")

    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    for where in (["--in-memory"], ["--path", str(tmp_path / "mine.sqlite")]):
        status = main(["swarm", "--agents", "2", "--episodes", "3", *where])
        out, err = capsys.readouterr()
        assert status == 0, err
        assert "lost: 0" in out
    assert (tmp_path / "mine.sqlite").exists()


def _episodes(n: int) -> list[Episode]:
    return [
        Episode(
            source="s",
            episode=f"e{i}",
            steps=tuple(
                ToolCall(source="s", episode=f"e{i}", step=j, tool="t", input={}, result="r")
                for j in range(1 + i % 3)
            ),
            reward=None,
        )
        for i in range(n)
    ]


def test_a_huge_scale_is_dealt_lazily() -> None:
    """``--scale 1000000 --episodes 10`` must not build the million copies first: the
    memory allocated to start dealing does not grow with the scale."""
    episodes = _episodes(20)
    tracemalloc.start()
    try:
        workload = replay_workload(episodes, scale=200_000, limit=10, description="x")
        taken = [workload.take() for _ in range(11)]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000  # 200,000 x 20 copies listed up front take hundreds of MB
    assert taken[-1] is None
    got = [ep.episode for ep in taken[:10] if ep is not None]
    # Longest first (episodes 2, 5, 8... have 3 steps), the copies of one together.
    assert got == [f"e2#{k}" for k in range(1, 11)]
    assert workload.total == 10
    assert workload.total_steps == 10 * 3


def test_the_order_of_copies_is_longest_first_then_file_order() -> None:
    episodes = _episodes(5)  # steps 1, 2, 3, 1, 2
    workload = replay_workload(episodes, scale=2, description="x")
    got = []
    while (ep := workload.take()) is not None:
        got.append(ep.episode)
    assert got == ["e2#1", "e2#2", "e1#1", "e1#2", "e4#1", "e4#2", "e0#1", "e0#2", "e3#1",
                   "e3#2"]  # fmt: skip
    assert workload.total_steps == 2 * (1 + 2 + 3 + 1 + 2)


def test_progress_moves_before_the_first_episode_ends() -> None:
    run = SwarmRun(agents=4)
    run.steps = 1234
    stats = MemoryStatistics(
        entries=1234, capacity=None, stores=1234, upserts=0, deletes=0, evictions=0,
        pruned=0, merged=0, consolidations=0, retrieves=1234, access_updates=0,
        queue_depth=0, queue_capacity=1024, snapshot_version=1234, live_snapshots=0,
        retained_versions=0,
    )  # fmt: skip
    line = progress_line(run, 5094, 10.0, stats, 101_682)
    assert "episodes 0/5,094  steps 1,234/101,682  " in line


def test_an_interrupted_multi_process_swarm_reports_no_false_failure(tmp_path: Path) -> None:
    """SIGINT to ``swarm --processes 2`` once entries arrive: the agent processes die with
    the ids the server acknowledged them, so the report says the accounting is unchecked
    instead of 'FAILED: unexpected' for the stores they made (a reviewer's finding)."""
    import re

    child = subprocess.Popen(
        [sys.executable, "-m", "actormem", "swarm", "--processes", "2", "--in-memory",
         "--episodes", "100000", "--interval", "0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert child.stdout is not None
    seen = []
    for line in child.stdout:
        seen.append(line)
        found = re.search(r"entries ([\d,]+)", line)
        if line.startswith("[") and found and int(found.group(1).replace(",", "")) > 0:
            break  # the agent processes are storing
    child.send_signal(signal.SIGINT)
    rest, err = child.communicate(timeout=120)
    out = "".join(seen) + rest
    assert child.returncode == 130, err
    assert "FAILED" not in out
    assert "accounting: not checked per id" in out
    assert "lost: 0" in out.splitlines()
