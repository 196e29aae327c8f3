"""A tiny run of ``stress/bench_wocore.py``: both paths built and queried, their top-10s
compared (the script fails if they differ), and the JSON shaped as documented. No timing
thresholds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actormem._index import kernels
from stress import bench_wocore

from .realdata import real_file

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


@pytest.fixture(autouse=True)
def _knobs_left_as_they_were() -> Iterator[None]:
    """The benchmark runs in this process: afterwards every knob and switch it turns is
    as before (a later test reading the defaults failed when ``_BITS_MIN`` stayed 0)."""
    before = bench_wocore.switches()
    yield
    assert bench_wocore.switches() == before


def test_the_benchmark_runs_and_compares(tmp_path: Path) -> None:
    data = real_file("tool_calls.jsonl").parent
    real_file("locomo10.json")
    out = tmp_path / "wocore.json"
    args = ["--data", str(data), "--sizes", "600", "--queries", "5", "--json", str(out)]
    assert bench_wocore.main(args) == 0
    cells = json.loads(out.read_text())["cells"]
    assert [c.get("queries_of") for c in cells] == [None, "questions", "tool results"]
    assert set(cells[0]["store_per_cpu_s"]) == set(cells[0]["add_tokens_us"]) == {"python", "core"}
    assert all(c["queries"] == 5 for c in cells[1:])


def test_the_bits_comparison_runs_and_compares(tmp_path: Path) -> None:
    data = real_file("tool_calls.jsonl").parent
    real_file("locomo10.json")
    out = tmp_path / "bits.json"
    args = ["--bits", "--data", str(data), "--sizes", "600", "--queries", "5", "--json", str(out)]
    assert bench_wocore.main(args) == 0
    cells = json.loads(out.read_text())["cells"]
    assert [c["queries_of"] for c in cells] == ["questions", "tool results"]
    assert all(c["queries"] == 5 and {"bytes", "bits"} <= set(c) for c in cells)


def test_the_counts_comparison_with_stores_runs_and_compares(tmp_path: Path) -> None:
    data = real_file("tool_calls.jsonl").parent
    real_file("locomo10.json")
    out = tmp_path / "counts.json"
    args = ["--counts", "--stores", "--knobs", "_SHORT_ROWS,_JOIN_IN_PLACE", "--data", str(data)]
    args += ["--sizes", "600", "--queries", "5", "--json", str(out)]
    assert bench_wocore.main(args) == 0
    cells = json.loads(out.read_text())["cells"]
    assert [c.get("queries_of") for c in cells] == [None, "questions", "tool results"]
    assert set(cells[0]["store_per_cpu_s"]) == {"old", "new"}
    assert all(c["queries"] == 5 for c in cells[1:])
    with pytest.raises(SystemExit):
        bench_wocore.main(["--counts", "--knobs", "_NOT_A_KNOB", "--data", str(data)])
