"""The main job as a benchmark: ``actormem swarm`` on the real tool calls, in memory and
durable, measured by CPU time.

Usage (from the project root)::

    python -m stress.bench_mainjob [--tool-calls FILE ...] [--modes memory,durable]
        [--pairs 3] [--against DIR] [--agents 64] [--scale 1] [--steps N] [--json OUT]

Each run is one child process, ``python -m actormem swarm --tool-calls FILE ... --json
OUT`` with ``--in-memory`` (mode ``memory``) or a fresh durable file in a temporary folder
(mode ``durable``, the swarm's default), started from a scratch working directory with
``PYTHONPATH`` naming the checkout to measure (``python -m`` puts the working directory
first on ``sys.path``, so a run from a checkout would import that checkout whatever
``PYTHONPATH`` says). Per run it reports:

* ``ops_per_cpu_s``: memory operations (stores + retrieves + consolidations) per
  CPU-second of the whole child process (user + system of every thread, from
  ``os.wait4``: start-up and loading the data included, about 0.7 s);
* ``ops_per_run_cpu_s``: the same over the swarm's own ``cpu_s`` (the run only), when the
  checkout's swarm reports it (older ones do not: ``None``);
* ``ops_per_s`` (wall clock), retrieve and store p50 / p99 (ms, as the agents see them:
  queueing behind the other 63 agents included), and ``lost`` (the swarm's per-id
  accounting; 0 in a sound run).

Bytecode: the children read compiled bytecode from a cache of the benchmark's own
(``PYTHONPYCACHEPREFIX``, a temporary folder; ``PYTHONDONTWRITEBYTECODE`` is dropped for
them), filled by one short unmeasured swarm per side and mode before the first pair, as
an installed package has its ``.pyc`` files. Without it, in an environment that sets
``PYTHONDONTWRITEBYTECODE`` (these machines do), every run compiled the package's ~80
modules from source: importing the command took 0.44-0.50 s of CPU against 0.31-0.35 s
with the bytecode cached (load ~6), 2-3% of a run's process CPU that no installed
deployment pays. ``--source-each-run`` keeps the environment as it is
(the figures before 2026-12-05 04:00 UTC were taken that way).

``--pairs N`` runs every mode N times. With ``--against DIR`` (another checkout, e.g. an
older commit in a ``git worktree``), each pair is one run of this checkout and one of
DIR, back to back, the order alternating from pair to pair (so a drift of the machine's
load hits both sides alike); the summary gives each side's median and the median of the
per-pair ratios ``this / against``. On a shared machine only such ratios of runs made
side by side mean much; the CPU figures move far less than the wall-clock ones.

Output: one JSON object per run on stdout as it ends, then a markdown table per mode and
the summary; ``--json OUT`` writes everything (runs, summary, command, machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Run as a script (`python stress/bench_mainjob.py`): the project root, for `stress`.
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from stress._bench_args import output_file, positive_int  # noqa: E402

#: The real tool calls (``../shared/data`` beside the repository).
DATA = ROOT.parent / "shared" / "data"
DEFAULT_FILES = (DATA / "tool_calls.jsonl", DATA / "tool_lookups.jsonl")
MODES = ("memory", "durable")
#: Figures of a run that the summary takes medians and ratios of.
FIGURES = (
    "ops_per_cpu_s",
    "ops_per_run_cpu_s",
    "ops_per_s",
    "retrieve_p50_ms",
    "retrieve_p99_ms",
    "store_p50_ms",
    "store_p99_ms",
)


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise argparse.ArgumentTypeError(f"modes are a comma-separated subset of {MODES}")
    return list(dict.fromkeys(modes))


def _checkout(text: str) -> Path:
    path = Path(text).resolve()
    if not (path / "actormem" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a checkout (no actormem/__init__.py)")
    return path


def _data_file(text: str) -> Path:
    path = Path(text).resolve()
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return path


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m stress.bench_mainjob",
        description="The main job (actormem swarm on real tool calls) by CPU time.",
    )
    p.add_argument("--tool-calls", type=_data_file, action="append", default=None,
                   help="tool-call files (default: the two of ../shared/data)")
    p.add_argument("--synthetic", action="store_true",
                   help="the swarm's seeded synthetic data instead of tool calls (tests)")
    p.add_argument("--modes", type=_modes, default=list(MODES), help="memory,durable")
    p.add_argument("--pairs", type=positive_int, default=1, help="runs per mode and side")
    p.add_argument("--against", type=_checkout, default=None,
                   help="another checkout to run interleaved with this one")
    p.add_argument("--agents", type=positive_int, default=64)
    p.add_argument("--scale", type=positive_int, default=1)
    p.add_argument("--steps", type=positive_int, default=None, help="stop after N tool calls")
    p.add_argument("--episodes", type=positive_int, default=None)
    p.add_argument("--json", type=output_file, default=None)
    p.add_argument("--source-each-run", action="store_true",
                   help="no bytecode cache: the children inherit the environment as is")
    return p


def swarm_argv(args: argparse.Namespace, mode: str, out: Path) -> list[str]:
    """The ``actormem swarm`` arguments of one run."""
    argv = ["swarm", "--agents", str(args.agents), "--json", str(out), "--interval", "600"]
    if not args.synthetic:
        for path in args.tool_calls or DEFAULT_FILES:
            argv += ["--tool-calls", str(path)]
        argv += ["--scale", str(args.scale)]
    if mode == "memory":
        argv.append("--in-memory")
    for option in ("steps", "episodes"):
        value = getattr(args, option)
        if value is not None:
            argv += [f"--{option}", str(value)]
    return argv


def run_once(
    checkout: Path, args: argparse.Namespace, mode: str, pycache: Path | None = None
) -> dict[str, Any]:
    """One swarm run of ``checkout`` in a child process; its figures (see the module
    docs). With ``pycache``, the child reads and writes its bytecode there. Raises
    RuntimeError when the child fails or imports another checkout."""
    with tempfile.TemporaryDirectory(prefix="bench-mainjob-") as scratch:
        out = Path(scratch) / "swarm.json"
        env = {**os.environ, "PYTHONPATH": str(checkout), "TMPDIR": scratch}
        env.pop("PYTHONSAFEPATH", None)
        if pycache is not None:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = str(pycache)
        where = subprocess.run(
            [sys.executable, "-c", "import actormem; print(actormem.__file__)"],
            cwd=scratch, env=env, capture_output=True, text=True, check=True,
        ).stdout.strip()
        if not Path(where).resolve().is_relative_to(checkout):
            raise RuntimeError(f"{checkout}: the child imported actormem from {where}")
        command = [sys.executable, "-m", "actormem", *swarm_argv(args, mode, out)]
        started = time.perf_counter()
        child = subprocess.Popen(
            command, cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        assert child.stdout is not None
        with child.stdout:
            output = child.stdout.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait again
        wall = time.perf_counter() - started
        if child.returncode != 0 or not out.stat().st_size:
            tail = output.decode(errors="replace")[-2000:]
            raise RuntimeError(f"swarm of {checkout} exited {child.returncode}:\n{tail}")
        report = json.loads(out.read_text())
    cpu = usage.ru_utime + usage.ru_stime
    throughput, latency = report["throughput"], report["latency_ms"]
    run_cpu = throughput.get("cpu_s")
    operations = throughput["operations"]

    def ms(op: str, name: str) -> float | None:
        figures = latency.get(op)
        return None if figures is None else figures[name]

    return {
        "checkout": str(checkout),
        "mode": mode,
        "operations": operations,
        "process_cpu_s": cpu,
        "ops_per_cpu_s": operations / cpu,
        "run_cpu_s": run_cpu,
        "ops_per_run_cpu_s": operations / run_cpu if run_cpu else None,
        "elapsed_s": report["elapsed_s"],
        "process_wall_s": wall,
        "ops_per_s": throughput["operations_per_s"],
        "retrieve_p50_ms": ms("retrieve", "p50"),
        "retrieve_p99_ms": ms("retrieve", "p99"),
        "store_p50_ms": ms("store", "p50"),
        "store_p99_ms": ms("store", "p99"),
        "lost": report["accounting"]["lost"],
        "max_rss_mib": usage.ru_maxrss / 1024,
    }


def warm_up(checkouts: Any, args: argparse.Namespace, pycache: Path) -> None:
    """Fill ``pycache`` with the bytecode of every module the runs import: one short
    swarm (4 steps) per checkout and mode, not measured."""
    short = argparse.Namespace(**{**vars(args), "steps": 4})
    for checkout in dict.fromkeys(checkouts):
        for mode in args.modes:
            run_once(checkout, short, mode, pycache)


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def summarize(runs: list[dict[str, Any]], sides: list[str]) -> list[dict[str, Any]]:
    """Per mode and side the median of every figure, and per mode with two sides the
    median of the per-pair ratios (this / against)."""
    rows: list[dict[str, Any]] = []
    for mode in dict.fromkeys(r["mode"] for r in runs):
        by_side = {s: [r for r in runs if r["mode"] == mode and r["side"] == s] for s in sides}
        for side, mine in by_side.items():
            row: dict[str, Any] = {"mode": mode, "side": side, "runs": len(mine)}
            row.update({f: _median([r[f] for r in mine]) for f in FIGURES})
            row["lost"] = sum(r["lost"] for r in mine)
            rows.append(row)
        if len(sides) == 2:
            ratio: dict[str, Any] = {"mode": mode, "side": "ratio (median of pairs)"}
            pairs = list(zip(by_side[sides[0]], by_side[sides[1]], strict=True))
            ratio["runs"] = len(pairs)
            for f in FIGURES:
                ratio[f] = _median(
                    [a[f] / b[f] if a[f] and b[f] else None for a, b in pairs]
                )
            ratio["lost"] = None
            rows.append(ratio)
    return rows


def _cell(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(rows: list[dict[str, Any]]) -> str:
    """The summary as a markdown table."""
    head = ("mode", "side", "runs", "ops/CPU-s (process)", "ops/CPU-s (run)", "ops/s (wall)",
            "retrieve p50 / p99 ms", "store p50 / p99 ms", "lost")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        ratio = r["side"].startswith("ratio")
        d = 2 if ratio else 1
        lines.append("| " + " | ".join([
            r["mode"], r["side"], str(r["runs"]),
            _cell(r["ops_per_cpu_s"], 2 if ratio else 0),
            _cell(r["ops_per_run_cpu_s"], 2 if ratio else 0),
            _cell(r["ops_per_s"], 2 if ratio else 0),
            f"{_cell(r['retrieve_p50_ms'], d)} / {_cell(r['retrieve_p99_ms'], d)}",
            f"{_cell(r['store_p50_ms'], d)} / {_cell(r['store_p99_ms'], d)}",
            _cell(r["lost"]),
        ]) + " |")
    return "\n".join(lines)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, run every pair, print and return the results (see the module docs)."""
    p = parser()
    args = p.parse_args(argv)
    if args.synthetic and args.tool_calls:
        p.error("--synthetic and --tool-calls exclude each other")
    if not args.synthetic and args.tool_calls is None:
        missing = [str(f) for f in DEFAULT_FILES if not f.is_file()]
        if missing:
            p.error(f"no tool calls at {', '.join(missing)}: pass --tool-calls FILE")
    sides = {"this": ROOT}
    if args.against is not None:
        sides["against"] = args.against
    names = list(sides)
    started = time.perf_counter()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-mainjob-pycache-") as cache:
        pycache = None if args.source_each_run else Path(cache)
        if pycache is not None:
            warm_up(sides.values(), args, pycache)
        for pair in range(args.pairs):
            for mode in args.modes:
                order = names if pair % 2 == 0 else names[::-1]
                for side in order:
                    figures = run_once(sides[side], args, mode, pycache)
                    result = {"side": side, "pair": pair, **figures}
                    print(json.dumps(result), flush=True)
                    runs.append(result)
    summary = summarize(runs, names)
    print(table(summary))
    report = {
        "command": shlex.join(["python", "-m", "stress.bench_mainjob", *(argv or sys.argv[1:])]),
        "machine": {
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "cores": os.cpu_count(),
            "load_average": list(os.getloadavg()),
            "python": platform.python_version(),
        },
        "sides": {k: str(v) for k, v in sides.items()},
        "bytecode": "inherited" if args.source_each_run else "cached",
        "swarm_argv": {m: swarm_argv(args, m, Path("OUT")) for m in args.modes},
        "runs": runs,
        "summary": summary,
        "duration_s": time.perf_counter() - started,
    }
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


if __name__ == "__main__":
    run()
