"""``actormem eval locomo``: the retrieval benchmark from the command line.

The ``actormem`` command (``actormem.cli._main``) mounts :func:`add_eval_parser` on its
subparsers; ``python -m actormem.eval._cli locomo --data PATH`` runs the same thing alone.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from .._outfile import check_figures_target, write_figures
from .._util import install_hint

__all__ = ["add_eval_parser", "main", "run_eval_locomo", "run_eval_toolcalls"]

_T = TypeVar("_T")

#: Where the shared data lives relative to the project root; the CLI's default.
DEFAULT_DATA = Path("..") / "shared" / "data" / "locomo10.json"
DEFAULT_TOOL_CALLS = Path("..") / "shared" / "data" / "tool_calls.jsonl"

#: ``--split``'s choices (their conversations: ``_locomo.TUNING`` and ``HELD_OUT``).
_SPLITS = ("all", "tuning", "held-out")

#: ``eval locomo --scorer``'s choices: ``sorted(_locomo.RETRIEVERS)``; and ``eval
#: toolcalls --scorer``'s: ``_toolcalls.SCORERS``'s names in order. Written out so that
#: building the parser (every ``actormem`` command does) does not import the evaluations
#: and through them BM25 and the hybrid scorer (tests/test_mainjob13_startup.py checks
#: they match).
_LOCOMO_RETRIEVERS = ("bm25", "bm25-stem", "bm25-tuned", "dense", "hybrid")
_TOOLCALL_SCORERS = ("word-overlap", "bm25", "bm25-tuned", "dense", "hybrid")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"k must be >= 1, got {value}")
    return value


def _configure_locomo(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"path to locomo10.json (default: {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--scorer",
        choices=sorted(_LOCOMO_RETRIEVERS),
        default="bm25-tuned",
        help="retrieval configuration: bm25 (plain, the reference line), bm25-stem, "
        "bm25-tuned (default; needs PyStemmer and bm25s), dense, hybrid (need wordllama); "
        "see docs/retrieval.md",
    )
    parser.add_argument(
        "--k",
        type=_positive,
        nargs="+",
        default=[5, 10, 25, 50],
        help="cut-offs for recall@k (default: 5 10 25 50)",
    )
    parser.add_argument(
        "--split",
        choices=sorted(_SPLITS),
        default="all",
        help="conversations: all (default), tuning (conv-26..conv-44) or held-out "
        "(conv-47..conv-50)",
    )
    parser.add_argument(
        "--conversation",
        action="append",
        metavar="SAMPLE_ID",
        help="evaluate only this conversation (repeatable; overrides --split)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the result as JSON")
    parser.set_defaults(handler=run_eval_locomo)


def _configure_toolcalls(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_TOOL_CALLS,
        help=f"path to tool_calls.jsonl (default: {DEFAULT_TOOL_CALLS})",
    )
    parser.add_argument(
        "--scorer",
        choices=sorted(_TOOLCALL_SCORERS),
        action="append",
        help="scorer to measure (repeatable; default: all of them)",
    )
    parser.add_argument("--json", type=Path, metavar="OUT", help="also write the results as JSON")
    parser.set_defaults(handler=run_eval_toolcalls)


def add_eval_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``eval`` (with its subcommand ``locomo``) to an argparse ``subparsers`` object.

    Each leaf parser sets ``handler`` in its defaults: call ``args.handler(args)`` for the
    exit status.

    Returns:
        The ``eval`` parser.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "eval", help="measure retrieval quality on public benchmarks"
    )
    inner = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    locomo = inner.add_parser(
        "locomo",
        help="LoCoMo recall@k with the paper's protocol (Table 3, dialog units)",
        description="Recall@k on LoCoMo (Maharana et al., ACL 2024) with the paper's "
        "retrieval protocol, beside the paper's DRAGON figures.",
    )
    _configure_locomo(locomo)
    toolcalls = inner.add_parser(
        "toolcalls",
        help="tool-call memory recall on tau-bench trials (hit@1/3/10, MRR)",
        description="Whether retrieving with the previous tool result, or with the step's "
        "own tool input, finds a step of the same task's other trials (tau-bench, "
        "tool_calls.jsonl); tuning tasks 0-34, held-out 35-49. See docs/retrieval.md.",
    )
    _configure_toolcalls(toolcalls)
    return parser


def run_eval_locomo(args: argparse.Namespace) -> int:
    """Run the LoCoMo evaluation described by ``args``; print the table. Returns 0, or
    2 when the data cannot be read, names no such conversation, holds no question (in
    the conversations chosen), or the retriever's optional dependencies are missing
    (message on stderr)."""
    from ._locomo import HELD_OUT, RETRIEVERS, TUNING, evaluate, format_table, load_locomo

    splits = {"all": None, "tuning": TUNING, "held-out": HELD_OUT}
    expected = "LoCoMo's JSON file (locomo10.json)"
    jsonl = "looks like JSONL (one JSON value a line), not LoCoMo's JSON file"
    conversations = _read_data("locomo", args, expected, load_locomo, jsonl_hint=jsonl)
    if conversations is None:
        return 2
    wanted = args.conversation or splits[args.split]
    if wanted is not None:
        known = {c.sample_id for c in conversations}
        missing = [w for w in wanted if w not in known]
        if missing:
            _refuse("locomo", f"no conversation {', '.join(missing)}")
            return 2
        conversations = [c for c in conversations if c.sample_id in set(wanted)]
    if not any(c.questions for c in conversations):
        what = "conversations" if not conversations else "questions"
        _refuse("locomo", f"{args.data}: no {what} to evaluate")
        return 2
    try:
        retriever = RETRIEVERS[args.scorer]()
    except ImportError as exc:
        reason = str(exc)
        if "pip install" not in reason:  # the modules' own messages carry the hint
            extra = "stem" if args.scorer.startswith("bm25") else "dense"
            reason = f"{reason} ({install_hint(extra)})"
        _refuse("locomo", f"--scorer {args.scorer}: {reason}; or use --scorer bm25")
        return 2
    result = evaluate(conversations, retriever, args.k)
    # first: the table below may meet a closed pipe (| head)
    if not _json_written("locomo", args.json, result.to_json()):
        return 2
    print(format_table(result))
    return 0


def run_eval_toolcalls(args: argparse.Namespace) -> int:
    """Run the tool-call recall evaluation described by ``args``; print the table.
    Returns 0, or 2 when the data cannot be read or a scorer's optional dependencies are
    missing (message on stderr)."""
    from . import _toolcalls

    steps = _read_data("toolcalls", args, "a JSONL file", _toolcalls.load_steps)
    if steps is None:
        return 2
    names = args.scorer or list(_toolcalls.SCORERS)
    results = []
    for name in names:
        try:
            scorer = _toolcalls.SCORERS[name]()
            results.append(_toolcalls.evaluate(steps, scorer, name))
        except ImportError as exc:
            _refuse("toolcalls", f"{exc} (or leave out {name})")
            return 2
    print(_toolcalls.format_table(results))
    if not _json_written("toolcalls", args.json, [r.to_json() for r in results]):
        return 2
    return 0


def _read_data(
    benchmark: str,
    args: argparse.Namespace,
    expected: str,
    load: Callable[[Path], _T],
    *,
    jsonl_hint: str | None = None,
) -> _T | None:
    """The prelude of ``eval BENCHMARK``: ``--json``'s target checked, then ``--data``
    read with ``load``; what it loaded, or None once the refusal is on stderr (exit 2):
    a ``--json`` it cannot write, a ``--data`` that is no file to read
    (:func:`_data_refusal`; ``expected`` names what it should be), or the loader's
    OSError/ValueError. ``jsonl_hint``: the reason to give instead of the loader's when
    the file looks like JSONL (a loader of one JSON document given a JSONL file by
    mistake). Blocking, O(size of the data)."""
    if not _json_target_ok(benchmark, args.json):
        return None
    refusal = _data_refusal(args.data, expected)
    if refusal is not None:
        _refuse(benchmark, f"cannot read {args.data}: {refusal}")
        return None
    try:
        return load(args.data)
    except (OSError, ValueError) as exc:
        problem: OSError | ValueError = exc
        if jsonl_hint is not None and _looks_like_jsonl(args.data):
            problem = ValueError(jsonl_hint)
        _refuse(benchmark, f"cannot read {_reason(args.data, problem)}")
        return None


def _refuse(benchmark: str, message: str) -> None:
    """Say on stderr why ``eval BENCHMARK`` stops, as the other commands do:
    ``actormem eval BENCHMARK: error: MESSAGE``, on one line."""
    line = "; ".join(part for part in message.splitlines() if part.strip())
    print(f"actormem eval {benchmark}: error: {line}", file=sys.stderr)


#: The first bytes of an SQLite database file (a memory file).
_SQLITE_MAGIC = b"SQLite format 3\x00"


def _data_refusal(path: Path, expected: str) -> str | None:
    """Why ``--data`` ``path`` is not worth opening (one line, without the path), or None
    (then the loader says what else is wrong): a named FIFO (its open would wait for a
    writer, maybe forever), a socket, a device, or an SQLite database (a memory file
    given in its place; ``expected`` names what it should be). An anonymous pipe
    (``--data <(zcat ...)``) is read. Blocking, O(1)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # the loader's error names it (missing, not allowed)
    if stat.S_ISFIFO(mode):
        real = os.path.realpath(path)
        if os.path.lexists(real) and stat.S_ISFIFO(os.lstat(real).st_mode):
            return "is a FIFO, not a file: reading it would wait until a program writes it"
        return None
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    if stat.S_ISBLK(mode) or stat.S_ISCHR(mode):
        return "is a device, not a file"
    if not stat.S_ISREG(mode):
        return None  # a directory: the loader says so
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(_SQLITE_MAGIC))
    except OSError:
        return None
    if head == _SQLITE_MAGIC:
        return f"an SQLite database (a memory file?), not {expected}"
    return None


def _looks_like_jsonl(path: Path) -> bool:
    """Whether ``path``'s first line is a whole JSON object by itself and more follows
    (a JSONL file given where one JSON document is expected). O(first line)."""
    try:
        with open(path, "rb") as handle:
            first = handle.readline(1 << 20)
            rest = handle.read(64)
        value = json.loads(first)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(value, dict) and bool(rest.strip())


def _reason(path: Path, exc: OSError | ValueError) -> str:
    """``path`` and why it cannot be read, once: an OSError's own words without its
    ``[Errno N]`` and repeated name; a ValueError's message as it is when it names the
    file already (``tool_calls.jsonl:3: ...``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{path}: {exc.strerror}"
    text = str(exc)
    return text if text.startswith(f"{path}:") else f"{path}: {text}"


def _json_target_ok(benchmark: str, path: Path | None) -> bool:
    """Whether ``--json`` is absent or can take the results (checked before the work,
    :func:`~actormem._outfile.check_figures_target`); if not, says why on stderr."""
    refusal = None if path is None else check_figures_target(path)
    if refusal is not None:
        _refuse(benchmark, f"--json {path}: {refusal}")
    return refusal is None


def _json_written(benchmark: str, path: Path | None, payload: Any) -> bool:
    """Write ``payload`` to ``--json`` atomically, if given; False (said on stderr) when
    the disk or the folder refused it."""
    if path is None:
        return True
    try:
        write_figures(path, json.dumps(payload, indent=2) + "\n")
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        _refuse(benchmark, f"--json {path}: {reason}")
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m actormem.eval._cli locomo ...``: the ``eval`` command on its own."""
    parser = argparse.ArgumentParser(prog="python -m actormem.eval._cli")
    inner = parser.add_subparsers(dest="benchmark", metavar="BENCHMARK", required=True)
    _configure_locomo(inner.add_parser("locomo", help="LoCoMo recall@k"))
    _configure_toolcalls(inner.add_parser("toolcalls", help="tool-call memory recall"))
    args = parser.parse_args(argv)
    status: int = args.handler(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
