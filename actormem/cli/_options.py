"""Argument types and option groups that several ``actormem`` subcommands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

__all__ = ["add_memory_location", "int_at_least"]


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


def add_memory_location(parser: argparse.ArgumentParser) -> argparse._MutuallyExclusiveGroup:
    """``--path FILE`` or ``--in-memory`` (the default), exclusive; the group is returned
    so that a subcommand can add another way to reach a memory (``mcp --server``)."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--path", type=Path, help="the memory's SQLite file (created if absent)")
    where.add_argument(
        "--in-memory", action="store_true", help="a memory without a file (the default)"
    )
    return where
