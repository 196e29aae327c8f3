"""review29a: ``actormem import`` as a README follower ran it.

1. Two imports started at once into a path that did not exist: the one the lock refused
   deleted the file (and its -wal, -shm) the other had just created, so both failed and
   no file was left. The command noted the absent paths *before* taking the lock and
   unlinked them on any failure. Now only the file this import created under its own lock
   is removed, before the lock is released.
2. A SIGINT just after a complete import's report ended the process with 130 ("imported
   20,000 lines ..." then status 130): the handlers came back once the report returned.
3. The JSON errors: "Unterminated string starting at at column 29" (Python's message
   already ends in "at"), and a line missing its closing brace reported at "column 1"
   (the parser's position past the line's newline).
4. A Ctrl-C while FILE is read said only "interrupted (SIGINT)": it now says nothing was
   imported and the memory file is unchanged (or not created).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from actormem._engine import bulk
from actormem._engine.bulk import store_all_or_nothing
from actormem._entry import MemoryCategory, MemoryEntry
from actormem._storage.sqlite import Durability, SqliteStore
from actormem.cli import _main
from actormem.cli._main import main

_LINE = '{"category": "fact", "memory": "deploys go to blue"}\n'
_ROOT = Path(__file__).resolve().parents[1]


def _dump(tmp_path: Path) -> Path:
    dump = tmp_path / "in.jsonl"
    dump.write_text(_LINE)
    return dump


def _memories(path: Path) -> list[str]:
    store, rows = SqliteStore.open(str(path), Durability.NORMAL)
    store.close()
    return [entry.memory for _, entry in rows]


def test_an_import_refused_by_the_lock_leaves_the_holders_new_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The path is absent when the command starts; another writer creates it (and holds
    it) before this import takes the lock: the refused import removes nothing."""
    db = tmp_path / "race.db"
    held: list[SqliteStore] = []
    real_open = SqliteStore.open.__func__  # type: ignore[attr-defined]

    def another_writer_first(cls: Any, *a: Any, **kw: Any) -> Any:
        if not held:
            held.append(real_open(cls, str(db), Durability.NORMAL)[0])  # creates, holds
        return real_open(cls, *a, **kw)

    monkeypatch.setattr(SqliteStore, "open", classmethod(another_writer_first))
    try:
        assert main(["import", str(db), str(_dump(tmp_path))]) == 2
        assert "held by another memory" in capsys.readouterr().err
        assert db.exists()  # the holder's file, not the refused import's
        assert (tmp_path / "race.db-wal").exists()
    finally:
        for store in held:
            store.close()
    assert _memories(db) == []


def test_a_failed_import_keeps_a_file_another_import_created_and_filled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Absent at the start, created and filled by another import that finished before
    this one took the lock: this one, interrupted before its commit, leaves that file
    (and says it is unchanged)."""
    db = tmp_path / "race.db"
    other = MemoryEntry(memory="the other import's", category=MemoryCategory.FACT)
    real_open = SqliteStore.open.__func__  # type: ignore[attr-defined]
    done: list[bool] = []

    def another_import_first(cls: Any, *a: Any, **kw: Any) -> Any:
        if not done:
            done.append(True)
            store_all_or_nothing(db, [other])  # (through this patched open: done)
            monkeypatch.setattr(bulk, "_write_interruptibly", interrupted)  # this import's
        return real_open(cls, *a, **kw)

    def interrupted(store: Any, batch: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(SqliteStore, "open", classmethod(another_import_first))
    assert main(["import", str(db), str(_dump(tmp_path))]) == 130
    assert f"nothing imported: {db} is unchanged" in capsys.readouterr().err
    assert _memories(db) == ["the other import's"]


def test_a_failed_import_into_a_new_path_still_removes_its_own_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file it created under its lock goes, with its sidecars, before the lock is
    released (and the lock file with the lock)."""
    db = tmp_path / "new.db"

    def interrupted(store: Any, batch: Any) -> None:
        assert store.created
        assert db.exists()
        raise KeyboardInterrupt

    monkeypatch.setattr(bulk, "_write_interruptibly", interrupted)
    assert main(["import", str(db), str(_dump(tmp_path))]) == 130
    assert f"nothing imported: {db} was not created" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def test_store_close_remove_spares_a_file_that_is_no_longer_the_one_opened(
    tmp_path: Path,
) -> None:
    """``close(remove=True)`` deletes only the inode the store opened."""
    db = tmp_path / "m.db"
    store, _ = SqliteStore.open(str(db), Durability.NORMAL)
    assert store.created
    os.rename(db, tmp_path / "moved.db")
    db.write_bytes(b"another program's file")
    store.close(remove=True)
    assert db.read_bytes() == b"another program's file"


def test_ctrl_c_after_the_commit_in_main_is_a_complete_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process (handlers restored when the import returns): a KeyboardInterrupt once
    the import has committed and reported leaves status 0 and the file."""
    db = tmp_path / "new.db"
    real = bulk.store_all_or_nothing

    def then_ctrl_c(*a: Any, **kw: Any) -> Any:
        real(*a, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(bulk, "store_all_or_nothing", then_ctrl_c)
    assert main(["import", str(db), str(_dump(tmp_path))]) == 0
    out, err = capsys.readouterr()
    assert "imported 1 lines" in out
    assert "interrupted" not in err
    assert _memories(db) == ["deploys go to blue"]


_AFTER_COMMIT = textwrap.dedent(
    """
    import signal, sys
    from actormem._engine import bulk
    from actormem.cli import _main

    db, dump, name, where = sys.argv[1:]
    signum = getattr(signal, name)
    real_import, real_main = bulk.store_all_or_nothing, _main.main

    def import_then_signal(*a, **kw):
        result = real_import(*a, **kw)
        signal.raise_signal(signum)
        return result

    def main_then_signal(argv):
        status = real_main(argv)
        signal.raise_signal(signum)
        return status

    if where == "import":
        bulk.store_all_or_nothing = import_then_signal
    else:
        _main.main = main_then_signal
    _main.run_command(["import", db, dump])
    """
)


@pytest.mark.parametrize("where", ["import", "main"])
@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_signal_after_the_commit_does_not_end_the_process_with_130(
    tmp_path: Path, name: str, where: str
) -> None:
    """The process (``run_command``): a signal just after the import returned, or after
    ``main`` returned, while the process exits, leaves status 0."""
    db = tmp_path / "new.db"
    env = dict(os.environ, PYTHONPATH=str(_ROOT))
    done = subprocess.run(
        [sys.executable, "-c", _AFTER_COMMIT, str(db), str(_dump(tmp_path)), name, where],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "imported 1 lines" in done.stdout
    assert "interrupted" not in done.stderr
    assert _memories(db) == ["deploys go to blue"]


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"category": "fact", "memory": "abc', "Unterminated string starting at column 32"),
        ('{"category": "fact", "memory": "a\x01"}', "Invalid control character at column 34"),
        ('{"category": "fact"', "Expecting ',' delimiter at column 20 (the end of the line)"),
        ('{"category": "fact"} x', "Extra data at column 22"),
    ],
)
def test_json_errors_say_the_column_of_the_line_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    dump = tmp_path / "bad.jsonl"
    dump.write_text(_LINE + line + "\n" + _LINE)
    assert main(["import", str(tmp_path / "m.db"), str(dump)]) == 2
    err = capsys.readouterr().err
    assert f"bad.jsonl:2: not JSON: {said}" in err, err
    assert " at at " not in err


def test_ctrl_c_while_the_file_is_read_says_nothing_was_imported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(*a: Any, **kw: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(_main, "read_import_file", interrupted)
    db = tmp_path / "new.db"
    assert main(["import", str(db), str(_dump(tmp_path))]) == 130
    err = capsys.readouterr().err
    assert err == f"actormem import: interrupted (SIGINT): nothing imported: {db} was not created\n"
    assert not db.exists()
