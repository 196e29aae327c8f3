"""review26c (README follower, fresh clone and venv): what a new user meets first."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from actormem.cli import main

from .test_review24b_broken import _fill_after  # the same full disk, one place


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


def _ignoring_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_a_swarm_started_with_sigint_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """A shell without job control (a script: ``actormem swarm --path a.db & ...``) starts
    background commands with SIGINT ignored, so that a Ctrl-C meant for the foreground
    leaves them alone (Python keeps SIG_IGN, as does nohup-style use). The swarm's trio
    signal receiver replaced that disposition: a Ctrl-C in the terminal interrupted the
    background run. It now honours an ignored SIGINT (as the bulk load already does)."""
    import signal
    import subprocess
    import sys

    argv = [sys.executable, "-m", "actormem", "swarm", "--duration", "3", "--agents", "4"]
    proc = subprocess.Popen(
        [*argv, "--interval", "0.1", "--path", str(tmp_path / "m.db")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_ignoring_sigint,
    )
    assert proc.stdout is not None
    for line in proc.stdout:  # the first progress line: the run is under way
        if line.startswith("[") and "steps" in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert "interrupted" not in err + out
    assert proc.returncode == 0, err
    assert "lost: 0" in out


def test_a_server_started_with_sigint_ignored_keeps_ignoring_it(tmp_path: Path) -> None:
    """``actormem serve ... &`` in a script: SIGINT is ignored, and stays so (SIGTERM
    still stops the server, committing)."""
    import signal
    import subprocess
    import sys
    import urllib.request

    pytest.importorskip("hypercorn")
    argv = [sys.executable, "-m", "actormem", "serve", "--path", str(tmp_path / "m.db")]
    proc = subprocess.Popen(
        [*argv, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_ignoring_sigint,
    )
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        url = first.split(" on ", 1)[1].split()[0]
        proc.send_signal(signal.SIGINT)
        with urllib.request.urlopen(f"{url}/readyz", timeout=30) as answer:  # still serving
            assert answer.status == 200
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        assert "SIGINT" not in out
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_query_with_a_path_and_no_text_asks_for_the_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``actormem query m.db`` (the text forgotten): argparse gives the one positional to
    TEXT, and the command said "give a memory file PATH or --server URL", though the
    user gave the PATH. It now names what is missing."""
    import trio

    from actormem import MemoryCategory, MemoryEntry, open_memory

    db = tmp_path / "m.db"

    async def make() -> None:
        async with open_memory(path=db) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploys go to blue"))

    trio.run(make)
    assert main(["query", str(db)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "TEXT" in err[0]
    assert "PATH or --server" not in err[0]
    # Neither given: the message about PATH stands.
    assert main(["query", "deploy"]) == 2
    assert "PATH or --server URL" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["save_counters", "close"])
def test_ctrl_c_after_the_import_committed_does_not_deny_it(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C after the import's transaction committed, while the file is closed (its
    counters saved, its WAL checkpointed: a second at 5,649 entries under load). Found:
    ``actormem import: interrupted (SIGINT): nothing imported: m.db is unchanged``, exit
    130, though every line was in the file (and a new file was then deleted).
    docs/cli.md: a signal once the transaction has committed no longer stops it."""
    import signal

    from actormem._storage.sqlite import SqliteStore

    real = getattr(SqliteStore, where)
    fired: list[bool] = []

    def interrupted(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not fired:
            fired.append(True)
            signal.raise_signal(signal.SIGINT)
        return real(self, *args, **kwargs)

    lines = tmp_path / "in.jsonl"
    lines.write_text('{"category": "fact", "memory": "deploys go to blue"}\n')
    db = tmp_path / "m.db"
    monkeypatch.setattr(SqliteStore, where, interrupted)
    status = main(["import", str(db), str(lines)])
    out, err = capsys.readouterr()
    assert fired
    assert "unchanged" not in err
    assert status == 0
    assert "imported 1 lines" in out
    assert db.exists()


def test_ctrl_c_during_an_import_into_a_new_file_says_it_was_not_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Interrupted before its commit, an import into a path that did not exist removes
    the new file; it said "nothing imported: new.db is unchanged" of a file that is not
    there (``stats new.db``: no such file)."""
    from actormem._engine import bulk

    def interrupted(store: Any, batch: Any) -> None:
        raise KeyboardInterrupt

    lines = tmp_path / "in.jsonl"
    lines.write_text('{"category": "fact", "memory": "deploys go to blue"}\n')
    db = tmp_path / "new.db"
    monkeypatch.setattr(bulk, "_write_interruptibly", interrupted)
    assert main(["import", str(db), str(lines)]) == 130
    err = capsys.readouterr().err
    assert not db.exists()
    assert "unchanged" not in err
    assert f"nothing imported: {db} was not created" in err


def test_swarm_json_dash_is_refused_not_written_to_a_file_named_dash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json -`` (stdout, by the usual convention) wrote the figures to a file named
    ``-`` in the current directory, silently. It is refused up front, naming the ways."""
    monkeypatch.chdir(tmp_path)
    assert main(["swarm", "--episodes", "2", "--json", "-"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "/dev/stdout" in err[0]
    assert not (tmp_path / "-").exists()
