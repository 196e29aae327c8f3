"""Argument types shared by the benchmark scripts: a bad value is an argparse error
(usage, one line, exit status 2), not a traceback from deep inside a run."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["existing_dir", "positive_float", "positive_int", "positive_ints"]


def positive_int(text: str) -> int:
    """An int >= 1 (``_`` separators allowed)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of :func:`positive_int`, at least one."""
    values = [positive_int(x.strip()) for x in text.split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    return values


def positive_float(text: str) -> float:
    """A finite float > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text}")
    return value


def existing_dir(text: str) -> Path:
    """A path naming an existing directory."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing directory")
    return path
