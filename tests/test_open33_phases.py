"""``stress/bench_open.py --phases`` (branch ``open33``): a tiny run gives, besides the
usual figures, each named step of a word-overlap open as thread CPU and wall seconds,
and leaves the rows without it as they were. No timing thresholds: figures only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stress import bench_open
from tests.realdata import real_file

#: the steps every restored open takes (rows_texts and the feed only from 50,000 texts
#: and from a feed's size on: not in this tiny file)
_RESTORED = (
    "prep_step", "acquire_all", "start_early", "restore", "restore_checked",
    "restore_columns", "set_glist", "run_finish", "groups_wait", "digest_wait",
)  # fmt: skip


def _rows(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _run(tmp_path: Path, *extra: str) -> None:
    data = real_file("tool_calls.jsonl").parent
    bench_open.main(
        ["--data", str(data), "--sizes", "1200", "--repeats", "2", "--scorers",
         "word-overlap", "--scratch", str(tmp_path), *extra]
    )  # fmt: skip


def test_phases_name_the_restored_opens_steps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path, "--phases")
    rows = [r for r in _rows(capsys.readouterr().out) if "scorer" in r]
    assert [r["repeat"] for r in rows] == [0, 1]
    restored = rows[1]
    assert restored["image"] is True
    for name in _RESTORED:
        cpu, wall = restored[f"c_{name}"], restored[f"w_{name}"]
        assert isinstance(cpu, float), name
        assert isinstance(wall, float), name
        assert min(cpu, wall) >= 0.0, name
    assert restored["c_restore_columns"] <= restored["c_restore"]  # (inside it)
    assert rows[0]["image"] is False  # the rebuild: no restore, so no restore's steps
    assert "c_restore" not in rows[0]


def test_without_phases_no_step_is_timed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _run(tmp_path)
    rows = [r for r in _rows(capsys.readouterr().out) if "scorer" in r]
    assert len(rows) == 2
    assert not any(key.startswith(("c_", "w_")) for row in rows for key in row)
    assert rows[1]["image"] is True
    assert isinstance(rows[1]["path_cpu_s"], float)
