"""review25c: ``actormem import`` into a new file on a read-only file system.

The import fails (the directory is not writable: a StorageError, status 2 expected), and
its cleanup of the new path's files then unlinks paths that were never created. On a
read-only mount Linux answers ``unlink`` of a missing file with EROFS, not ENOENT, and
the cleanup suppressed only FileNotFoundError: the command ended in a traceback, status
1, instead of its one-line error. Reproduction: on a read-only mount ``actormem import
/ro/new.db dump.jsonl``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, NoReturn

import pytest

import actormem._engine.bulk as bulk
from actormem._errors import StorageError
from actormem.cli._main import main

_LINE = '{"category": "fact", "memory": "deploys go to blue"}\n'


def test_import_cleanup_on_read_only_fs_keeps_the_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dump = tmp_path / "dump.jsonl"
    dump.write_text(_LINE)
    target = tmp_path / "ro" / "new.db"
    target.parent.mkdir()

    def refuse(path: Any, entries: Any, **kw: Any) -> NoReturn:  # a read-only dir's refusal
        raise StorageError(str(path), "the directory is not writable")

    real_unlink = os.unlink

    def unlink_erofs(path: Any, *a: Any, **kw: Any) -> None:  # a read-only mount (Linux)
        if str(path).startswith(str(target.parent)):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(bulk, "store_all_or_nothing", refuse)
    monkeypatch.setattr(os, "unlink", unlink_erofs)
    status = main(["import", str(target), str(dump)])
    _, err = capsys.readouterr()
    assert status == 2, err
    assert err.startswith("actormem import: error: "), err
    assert err.count("\n") == 1, err
    assert "Traceback" not in err
