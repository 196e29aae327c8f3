"""Argument types and option groups that several ``actormem`` subcommands share."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from .._outfile import check_figures_target, write_figures

__all__ = [
    "InputError",
    "Parser",
    "add_memory_location",
    "check_json_target",
    "int_at_least",
    "positive_seconds",
    "positive_seconds_or_none",
    "write_json",
]


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``actormem swarm: error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


class InputError(Exception):
    """Bad input found before anything was written; the message is the whole error line
    (the command prints it and exits with status 2)."""


def int_at_least(low: int) -> Callable[[str], int]:
    """An argparse type: an integer >= ``low``, else a usage error naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, got {value}")
        return value

    return parse


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds > 0, else a usage error naming it."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text}")
    return value


def positive_seconds_or_none(text: str) -> float | None:
    """An argparse type: :func:`positive_seconds`, or ``none`` (any case) for no limit
    (None)."""
    if text.strip().lower() == "none":
        return None
    return positive_seconds(text)


def add_memory_location(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """``--path FILE`` or ``--in-memory`` (the default), exclusive; the group is returned
    so that a subcommand can add another way to reach a memory (``mcp --server``)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path", type=Path, help="the memory's SQLite file (created if absent)")
    where.add_argument(
        "--in-memory", action="store_true", help="a memory without a file (the default)"
    )
    return where


def check_json_target(path: Path) -> None:
    """Refuse a ``--json`` target that cannot be written, or must not be replaced (not
    a figures file: :func:`~actormem._outfile.check_figures_target`), before the run
    spends minutes.

    Raises:
        InputError: Why, naming ``--json`` and the path.
    """
    if str(path) == "-":  # the usual "stdout" would otherwise be a file named "-"
        raise InputError(
            "--json -: the figures go to a file (stdout carries the tables): name one, "
            "or --json /dev/stdout to have them after the tables"
        )
    refusal = check_figures_target(path)
    if refusal is not None:
        raise InputError(f"--json {path}: {refusal}")


def write_json(path: Path, report: Any) -> None:
    """Write the figures ``report`` to ``path`` as indented JSON, atomically
    (:func:`~actormem._outfile.write_figures`).

    Raises:
        InputError: The disk or the folder refused (checked before the run, the disk
            can still fill up), or ``path`` became a file not to replace meanwhile.
    """
    try:
        write_figures(path, json.dumps(report, indent=2) + "\n")
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise InputError(f"--json {path}: {reason}") from None
