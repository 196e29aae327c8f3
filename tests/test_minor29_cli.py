"""minor29: a folder that does not exist is named in one message by every command.

``serve``, ``import`` and ``mcp`` (a memory file's folder, the storage's StorageError)
said ``m.db: the directory does not exist``, while ``swarm --path`` and ``--json`` said
``no such directory: nodir``; both now come from ``_outfile.missing_directory``, which
also names the missing folder of a symbolic link's target (the storage named none, and
``--json`` named the link's own folder, which exists).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from actormem._outfile import missing_directory
from actormem.cli import main


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["serve", "--path", "nodir/m.db"], "nodir/m.db"),
        (["mcp", "--path", "nodir/m.db"], "nodir/m.db"),
        (["import", "nodir/m.db", "x.jsonl"], "nodir/m.db"),
        (["swarm", "--episodes", "2", "--path", "nodir/m.db"], "--path nodir/m.db"),
        (["swarm", "--episodes", "2", "--json", "nodir/o.json"], "--json nodir/o.json"),
        (["eval", "toolcalls", "--json", "nodir/o.json"], "--json nodir/o.json"),
    ],
)
def test_every_command_names_a_missing_folder_alike(
    argv: list[str], shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_text('{"category": "fact", "memory": "x"}\n')
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.endswith(f": error: {shown}: no such directory: nodir\n"), err
    assert not (tmp_path / "nodir").exists()


def test_a_link_into_a_missing_folder_names_that_folder(tmp_path: Path) -> None:
    link = tmp_path / "m.db"
    os.symlink(tmp_path / "gone" / "m.db", link)
    assert missing_directory(link) == f"no such directory: {tmp_path / 'gone'}"
    assert missing_directory(tmp_path / "sub" / "m.db") == f"no such directory: {tmp_path / 'sub'}"
    assert missing_directory(tmp_path / "m2.db") is None
    assert missing_directory("m.db") in (None, "no such directory: .")  # a bare name
