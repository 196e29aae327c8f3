"""review24b: ``actormem swarm --path F`` whose commits start failing mid-run (a disk that
fills up: SQLite's "database or disk is full"). The memory breaks as docs/durability.md
says; the command must then end with one error line and exit status 1, not an uncaught
``trio.BrokenResourceError`` traceback (the settle after the run raised it out of
``main``). Found as a new user on a 300 KiB tmpfs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actormem._errors import StorageError
from actormem._storage import sqlite as sqlite_mod
from actormem.cli import main


def _fill_after(monkeypatch: pytest.MonkeyPatch, ok: int) -> None:
    real = sqlite_mod.SqliteStore._write
    calls = [0]

    def write(self: Any, batch: Any, wait: bool, checkpoint: bool = True) -> bool:
        if batch.puts or batch.deletes:
            calls[0] += 1
            if calls[0] > ok:
                raise StorageError(self.path, "commit failed: database or disk is full")
        return bool(real(self, batch, wait, checkpoint))

    monkeypatch.setattr(sqlite_mod.SqliteStore, "_write", write)


@pytest.mark.parametrize("path", [True, False])
def test_swarm_whose_disk_fills_up_ends_with_one_error_line(
    path: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fill_after(monkeypatch, 2)
    where = ["--path", str(tmp_path / "m.db")] if path else []
    status = main(["swarm", *where, "--episodes", "6", "--agents", "4", "--interval", "60"])
    err = capsys.readouterr().err.splitlines()
    assert status == 1
    assert err[-1].startswith("actormem swarm: error: ")
    assert err[-1].endswith("commit failed: database or disk is full")
    assert "Traceback" not in err[-1]


def test_swarm_whose_disk_is_fine_still_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["swarm", "--path", str(tmp_path / "m.db"), "--episodes", "4", "--agents", "4"]
    assert main([*argv, "--interval", "60"]) == 0
    assert "error" not in capsys.readouterr().err


def test_the_agents_stop_once_the_memory_broke(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Once the memory is broken every call fails: the agents leave at their next step
    instead of replaying every remaining episode into it (on the tmpfs, 100 episodes
    logged 3,937 failed calls, each with its traceback: 60,417 lines). Each agent logs at
    most the calls of the step it was in (a retrieve, a store, an episode's consolidate)."""
    _fill_after(monkeypatch, 2)
    argv = ["swarm", "--path", str(tmp_path / "m.db"), "--episodes", "60", "--agents", "4"]
    with caplog.at_level("WARNING", logger="actormem.agent"):
        assert main([*argv, "--interval", "60"]) == 1
    failed = [r for r in caplog.records if r.name.startswith("actormem.agent")]
    assert 1 <= len(failed) <= 4 * 3
    assert capsys.readouterr().err.splitlines()[-1].endswith("database or disk is full")
