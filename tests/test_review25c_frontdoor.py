"""review25c: the front door as a new user meets it (fresh clone, fresh venv, README).

Defects found:

* A FIFO (or other non-regular file) given as the memory file makes ``stats`` (and
  ``query``/``export``) block forever instead of refusing it in one line (status 2);
  ended by SIGTERM it prints no ``interrupted`` line and leaves ``FIFO.lock`` behind.
* ``actormem swarm --path FIFO`` hangs the same way and ignores SIGTERM and SIGINT
  (only SIGKILL ends it); ``import FIFO dump.jsonl`` hangs too (SIGTERM is taken).
* docs/cli.md shows ``actormem stats: error: notes.txt: not an actormem database ...``
  (the path as given); the command printed the absolute path instead (fixed by cli27:
  the storage layer's errors name the file as the opener gave it).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actormem.cli._main import main

#: Generous: a refusal takes well under a second; this only detects a hang.
_HANG = 30  # s: a refusal takes well under a second; a hang is what this catches


def _cli(tmp_path: Path, *argv: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "actormem", *argv],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs mkfifo")
@pytest.mark.parametrize(
    "command",
    [
        ["stats"],
        ["query", "{}", "deploy"],
        ["export"],
        # swarm --path FIFO: hangs, and ignores SIGTERM and SIGINT (only SIGKILL ends it)
        ["swarm", "--episodes", "2", "--interval", "100", "--path", "{}"],
        ["import", "{}", "/dev/null"],
    ],
)
def test_fifo_as_memory_file_is_refused_not_waited_on(
    tmp_path: Path, command: list[str]
) -> None:
    fifo = tmp_path / "mem.db"
    os.mkfifo(fifo)
    argv = [a.format() if a != "{}" else "mem.db" for a in command]
    if "mem.db" not in argv:
        argv.append("mem.db")
    proc = _cli(tmp_path, *argv)
    try:
        out, err = proc.communicate(timeout=_HANG)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=_HANG)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        left = sorted(p.name for p in tmp_path.iterdir())
        pytest.fail(
            f"actormem {' '.join(argv)} on a FIFO hung (no refusal); after SIGTERM: "
            f"status {proc.returncode}, stderr {err!r}, files left {left}"
        )
    assert proc.returncode == 2, (proc.returncode, err)
    assert err.count("\n") == 1, err
    assert "mem.db" in err, err
    assert not (tmp_path / "mem.db.lock").exists()


def test_not_a_database_error_names_the_path_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/cli.md: "actormem stats: error: notes.txt: not an actormem database (not an
    # SQLite file), or corrupted"; the other errors ("no such file", "is a directory")
    # do name the path as given.
    monkeypatch.chdir(tmp_path)
    Path("notes.txt").write_text("hello\n")
    status = main(["stats", "notes.txt"])
    _, err = capsys.readouterr()
    assert status == 2
    assert err == (
        "actormem stats: error: notes.txt: not an actormem database "
        "(not an SQLite file), or corrupted\n"
    ), err
