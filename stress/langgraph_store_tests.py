"""Run LangGraph's own store tests against actormem's LangGraph store.

Usage: ``python -m stress.langgraph_store_tests [--keep DIR] [--install-only | --no-install]
[-- PYTEST_ARGS...]``

Downloads the pinned source distributions of ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` (they ship their tests) into a temporary folder with
``pip download``, installs the pinned packages and the tests' own dependencies, and runs
their store tests in a separate pytest process (their tests are asyncio, with their own
settings) with ``stress/langgraph_store_plugin.py``, which swaps their store classes for
:class:`actormem.integrations.langgraph.ActormemStore`. Nothing of theirs is copied into
this repository. Prints one line per test file: passed, failed, deselected, and a JSON
summary on the last line. Exit status 0 when every test that ran passed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

CHECKPOINT = "langgraph-checkpoint==4.3.2"
CHECKPOINT_SQLITE = "langgraph-checkpoint-sqlite==3.1.2"
#: What their test files import besides the packages themselves.
TEST_DEPENDENCIES = ["pytest-asyncio>=1", "pytest-mock>=3", "numpy", "aiosqlite"]
#: (sdist name prefix, test files) run against the adapter.
SUITES = [
    ("langgraph_checkpoint-", ["tests/test_store.py"]),
    (
        "langgraph_checkpoint_sqlite-",
        ["tests/test_store.py", "tests/test_async_store.py", "tests/test_ttl.py"],
    ),
]
REPO = Path(__file__).resolve().parent.parent


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


def fetch(folder: Path) -> dict[str, Path]:
    """Download and unpack the two sdists; return prefix -> unpacked folder."""
    pip(
        "download",
        "--quiet",
        "--no-deps",
        "--no-binary",
        ":all:",
        "-d",
        str(folder),
        CHECKPOINT,
        CHECKPOINT_SQLITE,
    )
    out: dict[str, Path] = {}
    for archive in folder.glob("*.tar.gz"):
        with tarfile.open(archive) as tar:
            tar.extractall(folder, filter="data")
        unpacked = folder / archive.name.removesuffix(".tar.gz")
        for prefix, _ in SUITES:
            if unpacked.name.startswith(prefix) and unpacked.name[len(prefix)].isdigit():
                out[prefix] = unpacked
    return out


def run_suite(root: Path, files: list[str], extra: list[str]) -> dict[str, object]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), str(root)]))
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "stress.langgraph_store_plugin",
        "-p",
        "no:cacheprovider",
        "-q",
        "-o",
        "addopts=",
        "-o",
        "asyncio_mode=auto",
        "-o",
        "asyncio_default_fixture_loop_scope=function",
        "-W",
        "ignore::DeprecationWarning",
        "--rootdir",
        str(root),
        "-rfE",
        *files,
        *extra,
    ]
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    tail = proc.stdout.strip().splitlines()
    summary = tail[-1] if tail else proc.stderr[-2000:]
    counts = {
        k: int(v)
        for v, k in re.findall(r"(\d+) (passed|failed|deselected|error|errors|skipped)", summary)
    }
    failures = [line for line in tail if line.startswith(("FAILED", "ERROR"))]
    return {
        "root": root.name,
        "files": files,
        "counts": counts,
        "failures": failures,
        "returncode": proc.returncode,
        "summary": summary,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="download into this folder and keep it")
    parser.add_argument(
        "--no-install",
        action="store_true",
        help="do not pip install the pinned packages (already installed)",
    )
    parser.add_argument(
        "--install-only",
        action="store_true",
        help="only pip install the pinned packages and the tests' dependencies, run nothing"
        " (.ci/run installs first, then runs the tests beside its own suite with --no-install)",
    )
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.install_only and args.no_install:
        parser.error("--install-only and --no-install exclude each other")
    if not args.no_install:
        pip("install", "--quiet", CHECKPOINT, CHECKPOINT_SQLITE, *TEST_DEPENDENCIES)
    if args.install_only:
        return 0
    with tempfile.TemporaryDirectory(prefix="langgraph-store-tests-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        roots = fetch(folder)
        jobs = [(roots[prefix], name) for prefix, files in SUITES for name in files]
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as pool:  # their sleeps overlap
            results = list(pool.map(lambda j: run_suite(j[0], [j[1]], args.pytest_args), jobs))
        for result in results:
            c = result["counts"]
            errors = c.get("errors", 0) + c.get("error", 0)
            print(
                f"{result['root']}/{result['files'][0]}: {c.get('passed', 0)} passed, "
                f"{c.get('failed', 0)} failed, {errors} errors, {c.get('deselected', 0)} deselected"
            )
            for line in result["failures"]:
                print("   ", line)
    ok = all(r["returncode"] == 0 for r in results)
    print(
        json.dumps(
            {"ok": ok, "suites": [{k: r[k] for k in ("root", "files", "counts")} for r in results]}
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
