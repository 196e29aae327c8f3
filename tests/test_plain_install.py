"""The README's first command installs only the core dependencies (`pip install -e .`):
the CLI must work without any optional extra, and a command that needs one must say
which, in one line. Each run hides the extras' packages from a child interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Top-level packages of the optional extras (server, client, mcp, langchain, langgraph,
#: postgres, dense, stem) and of the test extra.
OPTIONAL = (
    "fastapi",
    "starlette",
    "hypercorn",
    "httpx",
    "prometheus_client",
    "mcp",
    "mcp_types",
    "langchain_core",
    "langgraph",
    "psycopg",
    "wordllama",
    "schemathesis",
    "bm25s",
    "Stemmer",
    "stop_words",
    "pydantic",
)

PRELUDE = f"""
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {OPTIONAL!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
from actormem.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        # This checkout's package, not whichever one the environment installed.
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["serve", "--help"]])
def test_cli_starts_without_extras(args: list[str], tmp_path: Path) -> None:
    done = run(*args, tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr


def test_main_job_runs_without_extras(tmp_path: Path) -> None:
    done = run("swarm", "--episodes", "20", "--agents", "4", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "lost: 0" in done.stdout


@pytest.mark.parametrize(
    ("args", "extra"),
    [
        (["serve", "--port", "0"], "server"),
        (["mcp"], "mcp"),
        (["query", "--server", "http://127.0.0.1:9", "x"], "client"),
    ],
)
def test_a_command_that_needs_an_extra_names_it(
    args: list[str], extra: str, tmp_path: Path
) -> None:
    done = run(*args, tmp_path=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    # Both ways to install it: from the index, and in a clone (editable).
    assert f"pip install 'actormem[{extra}]'" in done.stderr
    assert f"pip install -e '.[{extra}]'" in done.stderr
