"""A fresh interpreter's one-entry index: how the tests of the compiled cores check the
switched-off and missing paths (an environment variable or a hidden module is read at
import, so each case needs its own process)."""

from __future__ import annotations

import os
import subprocess
import sys


def one_entry_run(
    scorer: str,
    text: str,
    query: str,
    flag: str,
    env: dict[str, str] | None = None,
    prelude: str = "",
) -> tuple[list[str], list[str]]:
    """Run ``prelude``, then store ``text`` (a FACT) in a ``MemoryState`` with
    ``actormem.<scorer>()``, publish, and print ``kernels.<flag>`` and the number of hits
    of ``query`` (top 3), in a new interpreter with ``env`` added to this environment.
    Returns (its stdout's words, its non-blank stderr lines).

    Raises:
        subprocess.CalledProcessError: The interpreter failed.
    """
    code = (
        prelude + "import actormem._index.kernels as k, actormem;"
        "from actormem._engine.state import MemoryState;"
        f"s = MemoryState(capacity=None, half_life=60.0, scorer=actormem.{scorer}());"
        f"s.store(actormem.MemoryEntry(category=actormem.MemoryCategory.FACT, memory={text!r}));"
        "s.publish();"
        f"print(k.{flag}, len(s.index.top_k(s.view(), {query!r}, 3, None)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split(), [line for line in done.stderr.splitlines() if line.strip()]
