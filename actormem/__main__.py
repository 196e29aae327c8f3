"""``python -m actormem``: the ``actormem`` command (see :mod:`actormem.cli._main`)."""

from __future__ import annotations

import sys

from .cli._main import main

if __name__ == "__main__":
    sys.exit(main())
