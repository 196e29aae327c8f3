"""A tiny run of ``python -m stress.store_engine``: it runs, the stub scorer's memory
really stores every entry, and the table has one row per cell. No timing thresholds."""

from __future__ import annotations

import pytest

from stress.store_engine import StubScorer, main

from .realdata import needs_real_file

pytestmark = needs_real_file("locomo10.json")


def test_store_engine_runs_every_cell(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--entries", "128", "--writers", "8", "--repeats", "1"])
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "scorer" not in line]
    assert [row.split("|")[1].strip() for row in rows] == ["floor", "stub", "word-overlap"]


def test_stub_index_does_nothing() -> None:
    index = StubScorer().make_index()
    assert index.top_k(None, "q", 5, None) == []
    assert StubScorer().score_entry("t", (), 1.0, "q") == 0.0
