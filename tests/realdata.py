"""Where the tests find the real data sets, and how they behave when they are absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

#: ``../shared/data`` beside the repository (see its README for schemas and licences).
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def real_file(name: str) -> Path:
    """A file of ``../shared/data``: skip with the reason when it is absent (a user's
    fresh clone), but fail under ``CI=true``, where the data must be there."""
    path = DATA / name
    if not path.is_file():
        reason = f"real data {path} is absent (see shared/data/README.md)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason}; CI=true requires it")
        pytest.skip(reason)
    return path


def needs_real_file(name: str) -> pytest.MarkDecorator:
    """A mark for a test or module that reads ``../shared/data/<name>``: skipped with the
    reason where it is absent (a user's fresh clone), run under ``CI=true`` (where an
    absent file then fails the test, as :func:`real_file` does)."""
    path = DATA / name
    return pytest.mark.skipif(
        not path.is_file() and os.environ.get("CI") != "true",
        reason=f"real data {path} is absent (see shared/data/README.md)",
    )
