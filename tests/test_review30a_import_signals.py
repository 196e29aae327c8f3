"""review30a: ``actormem import`` into a new path, SIGTERM then SIGINT 50 ms apart.

1. Once the new file was left behind (0 entries) with "nothing imported: tm.db is
   unchanged": the first signal struck between the file's creation and the record that
   this import created it (the directory's fsync after the link), so the cleanup did
   not remove it; or the second struck inside the cleanup. Now the creation and its
   record happen with the signals only noted, and the first signal makes ``import``
   ignore the next ones while it unwinds.
2. A second signal after the message ended the process by SIGINT (returncode -2)
   instead of 143: the handlers came back before the process ended.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actormem._engine import bulk
from actormem._storage import sqlite
from actormem._storage.sqlite import SqliteStore
from actormem.cli import _main
from actormem.cli._main import main

from .test_review29a_import import _ROOT, _dump


def test_a_signal_just_after_the_link_still_removes_the_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGTERM during the directory's fsync, after the new file was linked into place
    and before ``created`` was recorded: the file was left (0 entries), "is unchanged"."""
    db = tmp_path / "new.db"
    real_fsync = sqlite._fsync

    def fsync_then_sigterm(path: str) -> None:
        real_fsync(path)
        if os.path.isdir(path) and db.exists():  # the directory's, after the link
            signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(sqlite, "_fsync", fsync_then_sigterm)
    assert main(["import", str(db), str(_dump(tmp_path))]) == 143
    err = capsys.readouterr().err
    assert err == (
        f"actormem import: interrupted (SIGTERM): nothing imported: {db} was not created\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


@pytest.mark.parametrize("where", ["close", "_remove_file", "message"])
def test_a_second_signal_during_the_cleanup_is_ignored(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    """SIGTERM stops the import before its commit; a SIGINT while the new file is closed
    and removed, or while the message is made, no longer cuts that short."""
    db = tmp_path / "new.db"
    sent: list[bool] = []

    def sigterm(store: Any, batch: Any) -> None:
        signal.raise_signal(signal.SIGTERM)
        raise AssertionError("the handler raises")

    def second(real: Any) -> Any:
        def then(*a: Any, **kw: Any) -> Any:
            if not sent:
                sent.append(True)
                signal.raise_signal(signal.SIGINT)
            return real(*a, **kw)

        return then

    monkeypatch.setattr(bulk, "_write_interruptibly", sigterm)
    if where == "message":
        monkeypatch.setattr(_main, "_import_interrupted", second(_main._import_interrupted))
    else:
        monkeypatch.setattr(SqliteStore, where, second(getattr(SqliteStore, where)))
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    assert main(["import", str(db), str(_dump(tmp_path))]) == 143
    assert sent
    err = capsys.readouterr().err
    assert err == (
        f"actormem import: interrupted (SIGTERM): nothing imported: {db} was not created\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    # In-process, the handlers are back once main() returns.
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == previous


_TWO_SIGNALS = textwrap.dedent(
    """
    import signal, sys
    from actormem._engine import bulk
    from actormem._storage.sqlite import SqliteStore
    from actormem.cli import _main

    db, dump = sys.argv[1:]
    real_close, real_main = SqliteStore.close, _main.main

    def sigterm(store, batch):
        signal.raise_signal(signal.SIGTERM)

    def close_then_sigint(self, **kw):
        signal.raise_signal(signal.SIGINT)
        return real_close(self, **kw)

    def main_then_sigint(argv):
        status = real_main(argv)
        signal.raise_signal(signal.SIGINT)
        return status

    bulk._write_interruptibly = sigterm
    SqliteStore.close = close_then_sigint
    _main.main = main_then_sigint
    _main.run_command(["import", db, dump])
    """
)


def test_the_process_ends_with_143_whatever_signal_comes_second(tmp_path: Path) -> None:
    """``run_command``: SIGTERM before the commit, SIGINT during the cleanup and again
    once ``main`` returned: status 143 (was -2, killed by SIGINT), the new file gone."""
    db = tmp_path / "new.db"
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _TWO_SIGNALS, str(db), str(_dump(tmp_path))],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 143, (done.returncode, done.stderr)
    assert done.stderr == (
        f"actormem import: interrupted (SIGTERM): nothing imported: {db} was not created\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


_DEFAULT_SIGTERM = textwrap.dedent(
    """
    import os, signal, sys
    from actormem import MemoryCategory, MemoryEntry
    from actormem._engine import bulk
    from actormem._storage import sqlite

    real_create = sqlite._create

    def create(path):
        real_create(path)
        os.kill(os.getpid(), signal.SIGTERM)  # noted while the new file is made

    sqlite._create = create
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="x")
    bulk.store_all_or_nothing(sys.argv[1], [entry], remove_if_created=True)
    print("returned")
    """
)


def test_a_default_sigterm_ends_a_library_caller_after_the_new_file_is_removed(
    tmp_path: Path,
) -> None:
    """rv30b: a program that calls ``store_all_or_nothing`` itself, SIGTERM's action the
    default one: the noted signal ended the process (``raise_signal``) before the
    cleanup, leaving the new file, its ``-wal``, ``-shm`` and lock. Now the cleanup runs
    first, then the process ends by SIGTERM as the signal would have ended it."""
    db = tmp_path / "lib.db"
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _DEFAULT_SIGTERM, str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == -signal.SIGTERM, (done.returncode, done.stdout, done.stderr)
    assert "returned" not in done.stdout
    assert list(tmp_path.iterdir()) == []
