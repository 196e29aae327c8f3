"""The README's snippets that need no server run as written and print what they say."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def snippet_after(heading: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rest = text[text.index(heading) :]
    start = rest.index("```python\n") + len("```python\n")
    return rest[start : rest.index("```", start)]


def test_keys_values_ttl_filters_snippet() -> None:
    code = snippet_after("### Keys, JSON values, time to live, filters")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['Lyon']", "True", "True", "[('users', 'ada')]"]


def test_use_snippet() -> None:
    code = snippet_after("## Use")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "deploys go to the blue cluster" in done.stdout
