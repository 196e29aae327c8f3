"""Small things a new user met: ``--version``, ``eval``'s errors and its ``--json``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from actormem.cli._main import main

from .test_locomo import TINY

ROOT = Path(__file__).resolve().parent.parent


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"actormem {version('actormem')}\n"


def test_eval_json_is_written_when_stdout_is_a_closed_pipe(tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(TINY), encoding="utf-8")
    out_json = tmp_path / "result.json"
    read_end, write_end = os.pipe()
    os.close(read_end)  # `| head` that has gone: the table meets EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "actormem", "eval", "locomo", "--data", str(data),
             "--scorer", "bm25", "--k", "1", "--json", str(out_json)],
            stdout=write_end, stderr=subprocess.PIPE, text=True, check=False, cwd=ROOT,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.returncode == 141, done.stderr
    assert done.stderr == ""
    result = json.loads(out_json.read_text(encoding="utf-8"))
    assert result["conversations"] == [c["sample_id"] for c in TINY]
    assert result["questions"]["overall"] == sum(len(c["qa"]) for c in TINY)


def test_eval_missing_package_names_the_extra(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actormem._index import tokenize

    data = tmp_path / "locomo.json"
    data.write_text(json.dumps(TINY), encoding="utf-8")
    for module in ("Stemmer", "stop_words", "bm25s"):
        monkeypatch.setitem(sys.modules, module, None)  # import raises ImportError
    tokenize._stem_function.cache_clear()
    try:
        status = main(["eval", "locomo", "--data", str(data), "--scorer", "bm25-tuned"])
    finally:
        tokenize._stem_function.cache_clear()
    err = capsys.readouterr().err
    assert status == 2
    assert "pip install 'actormem[stem]'" in err
    assert "pip install -e '.[stem]'" in err
    assert err.count("\n") == 1


def test_an_interrupt_inside_trio_is_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KeyboardInterrupt raised inside the trio run (where trio may wrap it in an
    exception group) ends ``stats`` with one line and 130."""
    from actormem._engine.memory import Memory

    main(["import", str(tmp_path / "m.sqlite"), str(_calls(tmp_path))])
    capsys.readouterr()

    def interrupted(self: Memory) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Memory, "statistics", interrupted)
    assert main(["stats", str(tmp_path / "m.sqlite")]) == 130
    assert capsys.readouterr() == ("", "actormem stats: interrupted (SIGINT)\n")


def _calls(tmp_path: Path) -> Path:
    path = tmp_path / "calls.jsonl"
    path.write_text(
        json.dumps({"source": "s", "episode": "e", "step": 0, "tool": "t", "input": {},
                    "result": "r"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    return path


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("command", ["export", "stats", "query"])
def test_a_full_disk_on_stdout_is_one_line(command: str, tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    lines = tmp_path / "in.jsonl"
    lines.write_text('{"category": "fact", "memory": "hello"}\n', encoding="utf-8")
    assert main(["import", str(db), str(lines)]) == 0
    args = [sys.executable, "-m", "actormem", command, str(db)]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*args, *(["hello"] if command == "query" else [])],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"actormem {command}: error: no space left on device ([Errno 28] No space left on device)"
    ]


def test_swarm_nodes_with_a_log_that_does_not_answer_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    argv = ["swarm", "--nodes", "2", "--log", "postgresql://u:secret@127.0.0.1:1/x"]
    assert main([*argv, "--episodes", "2"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("actormem swarm: error: postgresql://u@127.0.0.1:1/x: cannot connect")
    assert "secret" not in err[0]


def test_server_option_with_a_bad_url_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("httpx", reason="the client extra is not installed")
    assert main(["stats", "--server", "notaurl"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("actormem stats: error: --server: ")


def test_client_refuses_a_query_it_cannot_send() -> None:
    pytest.importorskip("httpx", reason="the client extra is not installed")
    from actormem import InvalidQueryError
    from actormem.client import Client

    with (
        Client("http://127.0.0.1:9") as client,
        pytest.raises(InvalidQueryError, match="surrogate"),
    ):
        client.retrieve("caf\udcff", 1)  # refused before any request is made


def test_a_closed_client_says_so() -> None:
    pytest.importorskip("httpx", reason="the client extra is not installed")
    import asyncio

    from actormem import TransportError
    from actormem.client import AsyncClient, Client

    client = Client("http://127.0.0.1:9")
    client.close()
    with pytest.raises(TransportError, match="the client is closed"):
        client.count()

    async def main() -> None:
        async with AsyncClient("http://127.0.0.1:9") as aclient:
            pass
        with pytest.raises(TransportError, match="the client is closed"):
            await aclient.count()

    asyncio.run(main())
