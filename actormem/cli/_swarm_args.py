"""The ``swarm`` subcommand's options, scorers and workload: what the ``actormem``
parser and the swarm's child processes (``_swarm_procs.py``, ``_swarm_nodes.py``) share,
kept below all of them so that the children parse their arguments without importing the
command line's top module."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._index.dense import DenseScorer
from .._index.scoring import Scorer
from .._index.wordoverlap import WordOverlapScorer
from .._storage.jsonl import JsonlError
from ..agent._toolcalls import read_tool_calls
from ._options import InputError, Parser, int_at_least, positive_seconds
from ._swarm_data import Workload, group_episodes, replay_workload, synthetic_workload

__all__ = [
    "DEFAULT_SYNTHETIC_EPISODES",
    "PROG",
    "SCORERS",
    "add_swarm_parser",
    "swarm_parser",
    "swarm_workload",
]

PROG = "actormem"

#: Episodes the synthetic swarm replays when neither ``--episodes`` nor ``--duration`` is
#: given: about 2,100 tool calls, about ten seconds of CPU on a 2-core machine.
DEFAULT_SYNTHETIC_EPISODES = 300

#: ``--scorer`` choices. ``dense`` and ``hybrid`` need ``pip install 'actormem[dense]'``
#: (WordLlama); ``hybrid`` fuses plain BM25 with it (docs/retrieval.md).
SCORERS: dict[str, Callable[[], Scorer]]


def _bm25() -> Scorer:
    """``BM25Scorer()``, its module imported on the first call (a word-overlap run never
    loads BM25)."""
    from .._index.bm25 import BM25Scorer

    return BM25Scorer()


def _hybrid() -> Scorer:
    """``HybridScorer()``, its module imported on the first call."""
    from .._index.hybrid import HybridScorer

    return HybridScorer()


SCORERS = {
    "word-overlap": WordOverlapScorer,
    "bm25": _bm25,
    "dense": DenseScorer,
    "hybrid": _hybrid,
}


def add_swarm_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``swarm`` subcommand to ``subparsers`` and return its parser (the caller
    sets its handler)."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "swarm",
        help="many agents sharing one memory: throughput, latency and an accounting check",
        description="Run --agents concurrent agents that replay tool-call episodes against "
        "one shared memory, then print throughput, store/retrieve latency and an "
        "accounting check of every store. See docs/swarm.md.",
    )
    p.add_argument("--agents", type=int_at_least(1), default=64, help="agent tasks (default 64)")
    p.add_argument(
        "--processes",
        type=int_at_least(1),
        help="run the agents in N processes, sharing the memory through a loopback "
        "HTTP server (docs/server.md); default: one process, no server",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="run the agents (in --processes N, default 1) against a running `actormem "
        "serve` instead of a memory of the swarm's own; the accounting reads the server's "
        "removal reports",
    )
    p.add_argument("--token-file", type=Path, help="bearer token for --server")
    p.add_argument(
        "--tool-calls",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="JSONL of real tool calls to replay (repeatable); "
        "without it, a seeded synthetic generator is used",
    )
    p.add_argument(
        "--scale",
        type=int_at_least(1),
        default=1,
        help="replay the tool-call data N times with distinct episode ids (default 1)",
    )
    p.add_argument(
        "--episodes",
        type=int_at_least(1),
        help=f"stop after N episodes (default: all the data; synthetic: "
        f"{DEFAULT_SYNTHETIC_EPISODES} unless --duration is given)",
    )
    p.add_argument(
        "--duration",
        type=positive_seconds,
        metavar="SECONDS",
        help="stop after this many seconds (agents leave their episode at the next step)",
    )
    p.add_argument(
        "--steps",
        type=int_at_least(1),
        metavar="N",
        help="stop after N tool calls in all (agents leave their episode at that step)",
    )
    p.add_argument(
        "--capacity", type=int_at_least(1), help="most entries kept (default: unbounded)"
    )
    p.add_argument(
        "--top-k", type=int_at_least(0), default=3, help="entries retrieved per turn (default 3)"
    )
    p.add_argument(
        "--scorer", choices=sorted(SCORERS), default="word-overlap", help="retrieval scorer"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic data (default 0)")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--path",
        type=Path,
        metavar="FILE",
        help="SQLite file to keep the memory in (default: a fresh temporary folder)",
    )
    where.add_argument("--in-memory", action="store_true", help="keep the memory in RAM only")
    p.add_argument(
        "--reuse-path",
        action="store_true",
        help="let --path name a file that already holds entries (the run adds to them, "
        "and its consolidations may merge or prune them)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help="after the run, reopen the file and check it holds the same entries",
    )
    p.add_argument("--json", type=Path, metavar="OUT", help="write every figure as JSON")
    p.add_argument(
        "--log",
        metavar="DSN",
        help="a PostgreSQL database: run the memory replicated over a write log there "
        "(docs/replication.md); with --nodes N, over N node processes",
    )
    p.add_argument(
        "--nodes",
        type=int_at_least(1),
        default=1,
        help="node processes of the replicated memory, each with --agents agents (needs --log)",
    )
    p.add_argument(
        "--interval",
        type=positive_seconds,
        default=None,
        metavar="SECONDS",
        help="progress refresh interval (default 0.25 on a terminal, 5 otherwise)",
    )
    return p


def swarm_parser() -> argparse.ArgumentParser:
    """A parser of ``swarm ...`` argument lists alone (no handler): what a child process
    of the swarm needs to read the options its parent already checked."""
    parser = Parser(prog=PROG)
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=Parser
    )
    add_swarm_parser(sub)
    return parser


def swarm_workload(args: argparse.Namespace) -> tuple[Workload, list[dict[str, Any]]]:
    """The episodes ``swarm`` replays, from parsed ``swarm`` arguments: the real tool
    calls of ``--tool-calls`` (each file's path, SHA-256 and row count returned beside),
    or the seeded synthetic generator. O(calls).

    Raises:
        InputError: A tool-call file is malformed, or the data cannot be replayed.
    """
    if not args.tool_calls:
        limit = args.episodes
        if limit is None and args.duration is None and args.steps is None:
            limit = DEFAULT_SYNTHETIC_EPISODES
        workload = synthetic_workload(seed=args.seed, limit=limit)
        return workload, []
    calls = []
    files: list[dict[str, Any]] = []
    names_list: list[str] = []
    for path in args.tool_calls:
        try:
            some, digest = read_tool_calls(path)
        except JsonlError as exc:
            raise InputError(str(exc)) from None
        calls.extend(some)
        files.append({"path": str(path), "sha256": digest, "rows": len(some)})
        names_list.append(str(path))
    episodes = group_episodes(calls)
    names = ", ".join(names_list)
    scale = f", x{args.scale}" if args.scale > 1 else ""
    description = (
        f"real tool calls: {len(calls):,} calls in {len(episodes):,} episodes from {names}{scale}"
    )
    try:
        workload = replay_workload(
            episodes, scale=args.scale, limit=args.episodes, description=description
        )
    except ValueError as exc:
        raise InputError(f"{names}: {exc}") from None
    return workload, files
