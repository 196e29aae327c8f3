"""Argument types shared by the benchmark scripts: a bad value is an argparse error
(usage, one line, exit status 2), not a traceback from deep inside a run. The number
types are the ``actormem`` CLI's own."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import Any

try:
    from actormem.cli._options import int_at_least
    from actormem.cli._options import positive_seconds as _positive_seconds
except ImportError:  # a checkout before 3b39ff1, measured by --against
    from actormem.cli._main import _int_at_least as int_at_least  # type: ignore[no-redef]
    from actormem.cli._main import _positive_seconds  # type: ignore[no-redef]

__all__ = [
    "add_paired_args",
    "distinct",
    "existing_dir",
    "existing_file",
    "make_scratch_dir",
    "output_file",
    "positive_int",
    "positive_ints",
    "positive_seconds",
]

#: An int >= 1.
positive_int = int_at_least(1)
#: A finite number of seconds > 0.
positive_seconds = _positive_seconds


def positive_ints(text: str) -> list[int]:
    """A comma-separated list of :data:`positive_int`, at least one."""
    values = [positive_int(x.strip()) for x in text.split(",") if x.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}")
    return values


def add_paired_args(parser: argparse.ArgumentParser, sizes: list[int], data: Path) -> None:
    """The options of the A/B benchmarks (``bench_kernels``, ``bench_bm25_core``,
    ``bench_wocore``): ``--sizes`` (default ``sizes``), ``--queries`` per set,
    ``--seed``, ``--data`` (default ``data``) and ``--json``."""
    parser.add_argument("--sizes", type=positive_ints, default=sizes)
    parser.add_argument("--queries", type=positive_int, default=200, help="queries per set")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=data)
    parser.add_argument("--json", type=output_file, default=None)


def existing_dir(text: str) -> Path:
    """A path naming an existing directory this process may create files in."""
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is not an existing directory")
    if not os.access(path, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text!r} is not a writable directory")
    return path


def existing_file(text: str) -> Path:
    """A path naming an existing file."""
    path = Path(text)
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{text!r} is not a file")
    return path


def output_file(text: str) -> Path:
    """A file path this process can write, checked before a long run, not after: its
    folder exists, it is not a folder, and opening it for appending works (which
    creates it, empty, if it was not there; an existing file is left as it is until the
    run writes it)."""
    path = Path(text)
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder of {text!r} does not exist")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    try:
        with path.open("a"):
            pass
    except OSError as exc:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {exc.strerror}") from None
    return path


def distinct(values: list[Any], option: str, parser: argparse.ArgumentParser) -> None:
    """A usage error through ``parser`` if a value of ``option`` is repeated (a repeated
    cell would run twice into one file and be merged in the table)."""
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        parser.error(f"{option}: each value once, got {', '.join(repeated)} more than once")


def make_scratch_dir(parser: argparse.ArgumentParser, parent: Path | None, prefix: str) -> Path:
    """A new folder in ``parent`` (None: the system's temporary folder); a usage error
    through ``parser`` if it cannot be made (``--dir`` passes :func:`existing_dir` but
    root ignores permission bits, and some folders, like ``/proc``, refuse anyway)."""
    try:
        return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    except OSError as exc:
        parser.error(f"--dir: cannot create a folder in {str(parent)!r}: {exc.strerror}")
