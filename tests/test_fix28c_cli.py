"""fix28c: ``--json`` naming the command's own stdout, and ``eval``'s ``--data``.

* ``--json /dev/stdout`` with stdout redirected to a regular file took the rename path:
  ``swarm`` then refused at its end the file its own tables were in ("exists and is not
  a figures file", figures lost), ``eval``'s rename dropped the table printed before it,
  and with ``>>`` an earlier file's content was replaced. The figures are now written
  through the descriptor, after what was printed.
* ``eval --data`` naming a named FIFO hung (its open waits for a writer); an SQLite file
  or a JSONL file given in place of LoCoMo's JSON got a decoder's words; SIGTERM during
  ``eval`` gave Python's default death, not the one line and status 143.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from actormem._outfile import check_figures_target
from actormem.cli._main import main
from tests.serverproc import REPO

_ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def _figures_to(target: str, stdout: Path, mode: str) -> subprocess.CompletedProcess[str]:
    """A child that prints a table, then writes figures to ``target`` (as ``swarm``
    does), its stdout ``stdout`` opened with ``mode`` (``w``: ``>``, ``a``: ``>>``)."""
    code = (
        "import sys\n"
        "from actormem._outfile import check_figures_target, write_figures\n"
        "refusal = check_figures_target(sys.argv[1])\n"
        "assert refusal is None, refusal\n"
        "print('the table')\n"
        'write_figures(sys.argv[1], \'{"command": "actormem x"}\\n\')\n'
        "refusal = check_figures_target(sys.argv[1])\n"
        "assert refusal is None, refusal\n"
    )
    with open(stdout, mode) as handle:
        return subprocess.run(
            [sys.executable, "-c", code, target],
            stdout=handle,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            env=_ENV,
        )


@pytest.mark.skipif(not Path("/dev/stdout").exists(), reason="needs /dev/stdout")
@pytest.mark.parametrize("name", ["/dev/stdout", "/dev/fd/1", "FILE"])
def test_json_to_stdout_redirected_to_a_file_follows_the_table(tmp_path: Path, name: str) -> None:
    out = tmp_path / "out.txt"
    out.write_text("an earlier line\n")  # not a figures file: kept, as >> asks
    done = _figures_to(str(out) if name == "FILE" else name, out, "a")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == 'an earlier line\nthe table\n{"command": "actormem x"}\n'
    out.unlink()
    done = _figures_to(str(out) if name == "FILE" else name, out, "w")
    assert done.returncode == 0, done.stderr
    assert out.read_text() == 'the table\n{"command": "actormem x"}\n'


def test_json_in_a_folder_that_takes_no_files_says_so(tmp_path: Path) -> None:
    if not Path("/proc/self").is_dir():
        pytest.skip("needs Linux's /proc")
    assert check_figures_target("/proc/x.json") == (
        "not writable: /proc: its file system takes no new files"
    )


def test_eval_refuses_a_fifo_as_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "data"
    os.mkfifo(fifo)
    for benchmark in ("locomo", "toolcalls"):
        assert main(["eval", benchmark, "--data", str(fifo)]) == 2  # hung before
        assert capsys.readouterr().err == (
            f"actormem eval {benchmark}: error: cannot read {fifo}: is a FIFO, not a file: "
            "reading it would wait until a program writes it\n"
        )


def test_eval_names_a_memory_file_or_jsonl_given_as_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 8)
    assert main(["eval", "toolcalls", "--data", str(db)]) == 2
    assert capsys.readouterr().err == (
        f"actormem eval toolcalls: error: cannot read {db}: an SQLite database (a memory "
        "file?), not a JSONL file\n"
    )
    assert main(["eval", "locomo", "--data", str(db), "--scorer", "bm25"]) == 2
    assert capsys.readouterr().err == (
        f"actormem eval locomo: error: cannot read {db}: an SQLite database (a memory "
        "file?), not LoCoMo's JSON file (locomo10.json)\n"
    )
    rows = tmp_path / "calls.jsonl"
    rows.write_text('{"task": 1}\n{"task": 2}\n')
    assert main(["eval", "locomo", "--data", str(rows), "--scorer", "bm25"]) == 2
    assert capsys.readouterr().err == (
        f"actormem eval locomo: error: cannot read {rows}: looks like JSONL (one JSON "
        "value a line), not LoCoMo's JSON file\n"
    )


def _catches_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGTERM (Linux: /proc/PID/status)."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_sigterm_ends_eval_with_one_line_and_143() -> None:
    read, write = os.pipe()  # --data a pipe nobody writes: the command waits on it
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "actormem", "eval", "toolcalls", "--data", f"/dev/fd/{read}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_ENV,
            pass_fds=(read,),
        )
        os.close(read)
        # Once the handler is in (before the imports), SIGTERM unwinds wherever it lands.
        give_up = time.monotonic() + 120  # a guard against a hang, not a timing bound
        while child.poll() is None and not _catches_sigterm(child.pid):
            assert time.monotonic() < give_up, "the child never caught SIGTERM"
            time.sleep(0.01)
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=120)
    finally:
        os.close(write)
    assert (child.returncode, out, err) == (143, "", "actormem eval: interrupted (SIGTERM)\n")


def test_eval_locomo_gives_the_install_hint_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from actormem._util import install_hint
    from actormem.eval import _locomo

    def missing() -> object:
        raise ModuleNotFoundError(f"stemming needs PyStemmer: {install_hint('stem')}")

    monkeypatch.setitem(_locomo.RETRIEVERS, "bm25-tuned", missing)
    data = tmp_path / "locomo.json"
    qa = [{"question": "q?", "answer": "a", "evidence": ["D1:1"], "category": 1}]
    turns = [{"speaker": "A", "dia_id": "D1:1", "text": "hello"}]
    sample = {"sample_id": "conv-1", "conversation": {"session_1": turns}, "qa": qa}
    data.write_text(json.dumps([sample]))
    assert main(["eval", "locomo", "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"actormem eval locomo: error: --scorer bm25-tuned: stemming needs PyStemmer: "
        f"{install_hint('stem')}; or use --scorer bm25\n"
    )
    assert err.count("pip install") == 2  # actormem[stem] and the clone's -e, once each
