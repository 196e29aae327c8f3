"""cli27: the messages of the ``actormem`` command and of the storage layer, as a user
meets them.

* A storage error names the memory file as the user gave it (``mem.db``, not
  ``/tmp/x/mem.db``): the open's refusals, a store's later errors (a commit after the
  file was moved away), ``export --salvage``, and paths that begin with the file's
  (``mem.db.lock``) inside the reason.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actormem import StorageError, open_memory
from actormem._storage.salvage import Salvage
from actormem._storage.sqlite import Durability, SqliteStore
from actormem.cli._main import main

try:
    import resource
except ImportError:  # not POSIX
    resource = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent
NOT_DB = "not an actormem database (not an SQLite file), or corrupted"


# ------------------------------------------------ 1. the path as the user gave it


@pytest.mark.parametrize(
    "argv",
    [
        ["stats", "sub/notes.txt"],
        ["query", "sub/notes.txt", "deploy"],
        ["export", "sub/notes.txt"],
        ["export", "--salvage", "sub/notes.txt"],
        ["import", "sub/notes.txt", "empty.jsonl"],
        ["swarm", "--episodes", "2", "--path", "sub/notes.txt"],
    ],
)
def test_cli_storage_errors_name_the_relative_path_as_given(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.txt").write_text("hello\n")
    (tmp_path / "empty.jsonl").write_text("")
    status = main(argv)
    err = capsys.readouterr().err
    assert status == 2
    assert err.splitlines()[-1] == f"actormem {argv[0]}: error: sub/notes.txt: {NOT_DB}", err
    assert str(tmp_path) not in err


async def test_open_memory_names_the_path_as_given_also_inside_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.db-wal").write_bytes(b"x")  # a log without its database
    with pytest.raises(StorageError) as info:
        async with open_memory(path="./m.db"):
            pass
    assert str(info.value) == (
        "./m.db: the database is missing but its log ./m.db-wal exists; move it away"
    )
    assert info.value.path == "./m.db"
    # an absolute path stays absolute
    with pytest.raises(StorageError) as info:
        async with open_memory(path=str(tmp_path / "m.db")):
            pass
    assert info.value.path == str(tmp_path / "m.db")


async def test_a_held_file_is_named_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    async with open_memory(path="m.db"):
        with pytest.raises(StorageError) as info:
            async with open_memory(path="m.db"):
                pass
    assert str(info.value).startswith("m.db: held by another memory"), str(info.value)


def test_a_store_s_later_errors_name_the_path_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    store, _ = SqliteStore.open("m.db", Durability.NORMAL)
    try:
        assert store.path == str(tmp_path / "m.db")  # the work is on the absolute path
        assert store.name == "m.db"
        os.rename("m.db", "moved.db")
        with pytest.raises(StorageError) as info:
            store._check_identity()
        assert str(info.value).startswith("m.db: the database file was removed or moved")
    finally:
        os.rename("moved.db", "m.db")
        store.close()


def test_salvage_names_the_path_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageError) as info:
        list(Salvage("gone.db").entries())
    assert str(info.value) == "gone.db: no such file"
