"""The suite's choice of temporary folder (``tests/conftest.py``, docs/testing.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from . import conftest


def test_a_small_dev_shm_is_not_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container's 64 MB ``/dev/shm`` would fill up: the system's folder instead."""
    monkeypatch.delenv("ACTORMEM_TEST_TMP", raising=False)
    monkeypatch.setattr(conftest.os.path, "isdir", lambda path: True)
    monkeypatch.setattr(conftest.os, "access", lambda path, mode: True)

    class _Small:
        f_bavail, f_frsize = 64 * 256, 4096  # 64 MB free

    monkeypatch.setattr(conftest.os, "statvfs", lambda path: _Small())
    assert conftest._test_tmp() is None


def test_a_relative_choice_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TMPDIR is inherited by subprocesses that may run in another folder."""
    (tmp_path / "here").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACTORMEM_TEST_TMP", "here")
    assert conftest._test_tmp() == os.path.join(str(tmp_path), "here")
