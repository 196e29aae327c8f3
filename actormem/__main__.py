"""``python -m actormem``: the ``actormem`` command (see :mod:`actormem.cli._main`)."""

from __future__ import annotations

from .cli import run_command

if __name__ == "__main__":
    run_command()
