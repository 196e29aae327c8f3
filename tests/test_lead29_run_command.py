"""A process that runs the CLI in-process (``runpy``, catching its SystemExit) and goes
on: its later in-process commands are a plain caller's, not the ending process's. Seen
in the suite: after ``stress.commit_replay.record`` ran ``actormem swarm`` that way, an
in-process ``import`` left SIGINT and SIGTERM ignored in the test process (the ending
process's rule after a committed import), and a later test's child inherited them."""

from __future__ import annotations

import json
import runpy
import signal
import sys
from pathlib import Path

import pytest

from actormem.cli import _main


def test_run_command_caught_leaves_a_plain_caller(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["actormem", "stats", str(tmp_path / "none.db")])
    with pytest.raises(SystemExit):
        runpy.run_module("actormem", run_name="__main__")
    assert _main._ending_process is False
    lines = tmp_path / "a.jsonl"
    lines.write_text(json.dumps({"category": "fact", "memory": "blue cluster"}) + "\n")
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert _main.main(["import", str(tmp_path / "m.db"), str(lines)]) == 0
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    capsys.readouterr()
