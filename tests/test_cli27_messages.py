"""cli27: the messages of the ``actormem`` command and of the storage layer, as a user
meets them.

* A storage error names the memory file as the user gave it (``mem.db``, not
  ``/tmp/x/mem.db``): the open's refusals, a store's later errors (a commit after the
  file was moved away), ``export --salvage``, and paths that begin with the file's
  (``mem.db.lock``) inside the reason.
* ``--json OUT`` (``swarm``, ``eval``) replaced any file, a memory database or a source
  file given by mistake, and wrote it in place (a full disk left half a file): now an
  existing ``OUT`` that is not a figures file is refused before the run (status 2, one
  line), and the figures are written to a file beside it renamed over it.
* A file of a newer actormem: held by a running memory, ``stats``/``query``/``export``
  said ``live read: ... a consistent read-only snapshot`` before refusing it; an index
  image of a newer actormem (a hash or format this one does not know) was logged as
  damage ("does not match its marker"). Now the refusal comes alone, and the warning
  says a newer actormem wrote the image, that the file is intact, and to upgrade.
* At the front door: ``query mem.db`` (text left out) was told to give a PATH;
  ``swarm --path nodir/m.db`` printed its banner before the refusal; a ``--token-file``
  that cannot be read was a traceback (``swarm --server``) or ``[Errno 2] ...`` without
  the option (``serve``), and one given to ``swarm`` without ``--server`` was ignored;
  ``eval``'s data errors named the file twice, with ``[Errno N]`` or a ``KeyError`` repr.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from actormem import MemoryCategory, MemoryEntry, StorageError, open_memory
from actormem._outfile import write_figures
from actormem._storage.salvage import Salvage
from actormem._storage.sqlite import Durability, SqliteStore
from actormem._storage.sqlite_format import (
    APPLICATION_ID,
    IMAGE_KEY,
    SCHEMA_VERSION,
    image_marker,
)
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


# ------------------------------------- 2. --json OUT: atomic, and never over a stranger

SQLITE_HEADER = b"SQLite format 3\x00" + bytes(84)
STRANGERS = {
    "mem.db": SQLITE_HEADER + bytes(4096 - len(SQLITE_HEADER)),  # a memory database
    "setup.py": b"from setuptools import setup\nsetup()\n",  # a source file
    "package.json": b'{"name": "app", "version": "1.0.0"}\n',  # another program's JSON
    "notes.json": b"[1, 2, 3]\n",
}


@pytest.mark.parametrize("name", sorted(STRANGERS))
def test_swarm_json_refuses_to_overwrite_a_file_that_is_not_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    target = tmp_path / name
    target.write_bytes(STRANGERS[name])
    status = main(["swarm", "--episodes", "2", "--in-memory", "--json", str(target)])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")  # refused before the run printed anything
    assert err == (
        f"actormem swarm: error: --json {target}: exists and is not a figures file written "
        "by actormem; not overwritten (remove it or pick another name)\n"
    )
    assert target.read_bytes() == STRANGERS[name]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no probe left


def test_swarm_json_replaces_an_earlier_figures_file_and_an_empty_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out.json"
    for before in (b"", None):  # an empty file (touch), then the first run's figures
        if before is not None:
            target.write_bytes(before)
        assert main(["swarm", "--episodes", "2", "--in-memory", "--json", str(target)]) == 0
        report = json.loads(target.read_text(encoding="utf-8"))
        assert report["command"].startswith("actormem swarm ")
    capsys.readouterr()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def _limited_file_size(limit: int) -> None:  # in the child, before exec
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.skipif(resource is None, reason="needs RLIMIT_FSIZE")
def test_swarm_json_that_cannot_be_written_whole_leaves_the_earlier_one(tmp_path: Path) -> None:
    """The figures (some KB) do not fit under a 1 KB file size limit, as on a full disk:
    the earlier figures file stays whole (before: truncated, then cut at 1 KB)."""
    target = tmp_path / "out.json"
    earlier = json.dumps({"command": "actormem swarm --episodes 1", "lost": 0}).encode()
    target.write_bytes(earlier)
    done = subprocess.run(
        [sys.executable, "-m", "actormem", "swarm", "--episodes", "2", "--in-memory",
         "--json", "out.json"],
        cwd=tmp_path, capture_output=True, text=True, check=False,
        preexec_fn=lambda: _limited_file_size(1024),
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1] == "actormem swarm: error: --json out.json: File too large"
    assert target.read_bytes() == earlier
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file


def test_write_figures_keeps_the_mode_and_writes_a_device_in_place(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text('{"command": "actormem swarm"}')  # an earlier figures file
    target.chmod(0o640)
    write_figures(target, '{"command": "actormem swarm --episodes 2"}\n')
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert json.loads(target.read_text()) == {"command": "actormem swarm --episodes 2"}
    write_figures(os.devnull, "{}\n")  # a rename would have replaced the device node
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


def test_eval_json_refuses_a_stranger_before_evaluating(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "setup.py"
    target.write_bytes(STRANGERS["setup.py"])
    missing = tmp_path / "missing.json"  # not read: the refusal comes first
    for benchmark in ("locomo", "toolcalls"):
        status = main(["eval", benchmark, "--data", str(missing), "--json", str(target)])
        err = capsys.readouterr().err
        assert status == 2
        assert err == (
            f"actormem eval {benchmark}: error: --json {target}: exists and is not a figures "
            "file written by actormem; not overwritten (remove it or pick another name)\n"
        )
    assert target.read_bytes() == STRANGERS["setup.py"]


def test_eval_json_target_in_a_missing_folder_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "nodir" / "out.json"
    status = main(["eval", "toolcalls", "--data", str(tmp_path / "x"), "--json", str(target)])
    assert status == 2
    assert capsys.readouterr().err == (
        f"actormem eval toolcalls: error: --json {target}: no such directory: {target.parent}\n"
    )


# ------------------------------------------ 3. a file written by a newer actormem


def _held(path: Path) -> subprocess.Popen[str]:
    """A process holding ``path``'s lock file (as a running memory would) until killed."""
    code = (
        "import fcntl, os, sys, time\n"
        "fd = os.open(sys.argv[1] + '.lock', os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "held\n"
    return proc


def _newer_schema(path: Path) -> bytes:
    """Make ``path`` a file of schema version SCHEMA_VERSION + 1 (a newer actormem's);
    its bytes."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value)")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    return path.read_bytes()


@pytest.mark.parametrize(
    "argv",
    [["stats", "new.db"], ["query", "new.db", "deploy"], ["export", "new.db"]],
)
def test_a_held_file_of_a_newer_actormem_gets_its_error_alone(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    """A newer actormem holding its file: the live read refuses the version, in one
    line; before, ``live read: ... this is a consistent read-only snapshot`` came first,
    promising a snapshot that was never read."""
    monkeypatch.chdir(tmp_path)
    before = _newer_schema(tmp_path / "new.db")
    holder = _held(tmp_path / "new.db")
    try:
        status = main(argv)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == (
        f"actormem {argv[0]}: error: new.db: written by a newer actormem (schema_version "
        f"{SCHEMA_VERSION + 1}; this version reads {SCHEMA_VERSION}); upgrade actormem\n"
    )
    assert (tmp_path / "new.db").read_bytes() == before


async def _file_with_image(path: Path) -> None:
    async with open_memory(path=path) as memory:
        await memory.store(MemoryEntry(category=MemoryCategory.FACT, memory="deploy blue"))
    assert _image_parts(path), "the clean close wrote no index image"


def _image_parts(path: Path) -> dict[str, bytes]:
    conn = sqlite3.connect(path)
    try:
        return dict(conn.execute("SELECT name, data FROM index_image"))
    finally:
        conn.close()


def _set_image(path: Path, parts: dict[str, bytes], marker: str) -> None:
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM index_image")
    conn.executemany("INSERT INTO index_image VALUES (?, ?)", parts.items())
    conn.execute("UPDATE meta SET value = ? WHERE key = ?", (marker, IMAGE_KEY))
    conn.commit()
    conn.close()


async def _warnings_of_open(path: Path, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="actormem"):
        async with open_memory(path=path) as memory:
            hits = await memory.retrieve("deploy", 1)
            assert [h.memory for h in hits] == ["deploy blue"]  # the rows are read
    return [r.getMessage() for r in caplog.records if r.name == "actormem"]


async def test_an_image_of_a_newer_actormem_s_hash_is_said_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: "the index image does not match its marker in the file", as if the file
    were damaged; the image is a newer actormem's (a hash this one does not know)."""
    path = tmp_path / "m.db"
    await _file_with_image(path)
    _set_image(path, _image_parts(path), "xxh9:" + "0123456789abcdef" * 2)
    [warning] = await _warnings_of_open(path, caplog)
    assert "written by a newer actormem" in warning, warning
    assert "upgrade actormem" in warning
    assert "does not match" not in warning


async def test_an_image_of_a_newer_format_is_said_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A newer image format under a marker of this actormem's hash: before, "not an
    image of format 2"."""
    path = tmp_path / "m.db"
    await _file_with_image(path)
    parts = _image_parts(path)
    header = json.loads(parts["header"])
    header["format"] += 1
    parts["header"] = json.dumps(header).encode()
    _set_image(path, parts, image_marker(parts))
    [warning] = await _warnings_of_open(path, caplog)
    assert f"an image of format {header['format']}, written by a newer actormem" in warning
    assert "upgrade actormem" in warning


# ----------------------------------------- 4. what a new user met at the front door


def test_query_with_the_text_left_out_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``actormem query mem.db``: argparse takes the one word for TEXT (PATH is optional
    for --server); before, the error said to "give a memory file PATH", which was given."""
    monkeypatch.chdir(tmp_path)
    assert main(["query", "mem.db"]) == 2
    assert capsys.readouterr().err == (
        "actormem query: error: no query text: give it after the memory file, "
        "actormem query mem.db TEXT (or --server URL TEXT)\n"
    )
    assert main(["query"]) == 2
    assert "required: TEXT" in capsys.readouterr().err


def test_swarm_path_in_a_missing_folder_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["swarm", "--episodes", "2", "--path", "nodir/m.db"]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # before: the run's banner first, then the storage's refusal
    assert err == "actormem swarm: error: --path nodir/m.db: no such directory: nodir\n"


@pytest.mark.parametrize(
    ("argv", "want"),
    [
        # before: a traceback ending in FileNotFoundError
        (
            ["swarm", "--episodes", "2", "--server", "http://127.0.0.1:9", "--token-file", "nope"],
            "actormem swarm: error: --token-file: nope: No such file or directory\n",
        ),
        # before: silently unused
        (
            ["swarm", "--episodes", "2", "--token-file", "tok"],
            "actormem swarm: error: --token-file is the bearer token for --server: "
            "give --server URL\n",
        ),
        # before: "--token-file: 'utf-8' codec can't decode byte 0xff in position 0: ..."
        (
            ["stats", "--server", "http://127.0.0.1:9", "--token-file", "bin.tok"],
            "actormem stats: error: --token-file: bin.tok: the token file is not UTF-8 text\n",
        ),
        # before: "--token-file: [Errno 21] Is a directory: 'sub'"
        (
            ["export", "--server", "http://127.0.0.1:9", "--token-file", "sub"],
            "actormem export: error: --token-file: sub: Is a directory\n",
        ),
        # before: "actormem serve: error: [Errno 2] No such file or directory: 'nope'"
        (
            ["serve", "--token-file", "nope"],
            "actormem serve: error: --token-file: nope: No such file or directory\n",
        ),
    ],
)
def test_token_file_errors_are_one_line_naming_the_option_and_the_file(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    want: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tok").write_text("secret\n")
    (tmp_path / "bin.tok").write_bytes(b"\xff\xfe")
    (tmp_path / "sub").mkdir()
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", want)


@pytest.mark.parametrize(
    ("benchmark", "content", "want"),
    [
        # before: "cannot read nope: [Errno 2] No such file or directory: 'nope'"
        ("locomo", None, "cannot read nope: No such file or directory"),
        # before: "cannot read d.jsonl: d.jsonl:1: not a tool-call row (KeyError('source'))"
        (
            "toolcalls",
            '{"step": 0}\n',
            "cannot read d.jsonl:1: not a tool-call row (missing 'source')",
        ),
    ],
)
def test_eval_data_errors_name_the_file_once(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    benchmark: str,
    content: str | None,
    want: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    name = "nope"
    if content is not None:
        name = "d.jsonl"
        Path(name).write_text(content)
    assert main(["eval", benchmark, "--data", name]) == 2
    assert capsys.readouterr().err == f"actormem eval {benchmark}: error: {want}\n"


@pytest.mark.parametrize(
    "argv",
    [["import", "dump.jsonl", "mem.db"], ["swarm", "--episodes", "2", "--tool-calls", "mem.db"]],
)
def test_a_memory_file_given_as_the_jsonl_file_is_named_so(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    """``import dump.jsonl mem.db``, the two swapped: before, ``mem.db:1: not UTF-8
    (invalid start byte)``; the file read as JSON Lines is a database."""
    monkeypatch.chdir(tmp_path)
    Path("mem.db").write_bytes(STRANGERS["mem.db"])
    Path("dump.jsonl").write_text('{"category": "fact", "memory": "x"}\n')
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"actormem {argv[0]}: error: mem.db: an SQLite database (a memory file?), "
        "not a JSONL file\n"
    )
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
