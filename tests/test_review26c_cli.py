"""review26c (README follower, fresh clone and venv): what a new user meets first."""

from __future__ import annotations

import logging
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


def test_a_full_disk_during_a_swarm_logs_no_traceback_per_agent(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The README's swarm with --path on a 2 MiB tmpfs: the memory breaks (disk full) and
    every agent's next call fails. Each failure was logged with its three chained
    tracebacks (64 agents: 7,072 lines on stderr before the one error line). Once the
    memory is broken, its failures say the cause once, with no traceback."""
    _fill_after(monkeypatch, 2)
    argv = ["swarm", "--path", str(tmp_path / "m.db"), "--episodes", "60", "--agents", "8"]
    with caplog.at_level(logging.WARNING, logger="actormem.agent"):
        assert main([*argv, "--interval", "60"]) == 1
    failed = [r for r in caplog.records if r.name.startswith("actormem.agent")]
    assert len(failed) == 1
    assert failed[0].exc_info is None
    assert "database or disk is full" in failed[0].getMessage()
    assert capsys.readouterr().err.splitlines()[-1].endswith("database or disk is full")
    # The filter is the run's only: the hooks' logging is as before afterwards.
    assert not logging.getLogger("actormem.agent").filters
