"""Tiny runs of ``stress/bench_fairshare.py``, ``stress/bench_open.py``,
``stress/bench_gate_mainjob.py`` and ``stress/retrieve_waits.py``: they run and print
rows of the expected shape. No timing thresholds: benchmarks report figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stress import bench_fairshare, bench_gate_mainjob, bench_open, retrieve_waits
from tests.realdata import real_file


def _rows(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_bench_fairshare_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    data = real_file("tool_calls.jsonl").parent
    bench_fairshare.main(
        ["--data", str(data), "--n", "200", "--writers", "4", "--readers", "4",
         "--seconds", "0.2", "--rounds", "1", "--modes", "memory"]
    )  # fmt: skip
    out = capsys.readouterr().out
    rows = [r for r in _rows(out) if "phase" in r]
    assert [r["phase"] for r in rows] == ["alone", "gate", "nogate"]
    assert all(isinstance(r["stores"], int) and r["stores"] > 0 for r in rows)
    assert rows[0]["retrieves"] == 0
    assert "| memory |" in out


def test_bench_fairshare_compares_the_gates(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--phases`` runs the gate before the FIFO hand-off beside it; ``--steady`` holds
    the memory at ``n`` entries; ``--share`` sets the owner's share for the run."""
    from actormem._engine import fairshare

    monkeypatch.setattr(fairshare, "SHARE", fairshare.SHARE)  # restored after the run
    monkeypatch.setattr(fairshare, "OPEN_MIN", fairshare.OPEN_MIN)
    data = real_file("tool_calls.jsonl").parent
    bench_fairshare.main(
        ["--data", str(data), "--n", "100", "--writers", "4", "--readers", "4",
         "--seconds", "0.2", "--rounds", "2", "--modes", "memory",
         "--phases", "alone,gate,starve", "--steady", "--share", "0.5"]
    )  # fmt: skip
    out = capsys.readouterr().out
    rows = [r for r in _rows(out) if "phase" in r]
    assert [r["phase"] for r in rows] == ["alone", "gate", "starve"] * 2
    assert fairshare.SHARE == 0.5
    assert "on (FIFO)" in out
    assert "on (STARVE_MAX)" in out
    with pytest.raises(SystemExit):
        bench_fairshare.main(["--data", str(data), "--phases", "gate,alone"])


def test_bench_fairshare_runs_a_phase_without_scoring_slots(
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = real_file("tool_calls.jsonl").parent
    bench_fairshare.main(
        ["--data", str(data), "--n", "100", "--writers", "4", "--readers", "4",
         "--seconds", "0.2", "--rounds", "1", "--modes", "memory",
         "--phases", "alone,gate,noslots"]
    )  # fmt: skip
    out = capsys.readouterr().out
    rows = [r for r in _rows(out) if "phase" in r]
    assert [r["phase"] for r in rows] == ["alone", "gate", "noslots"]
    assert all(isinstance(r["retrieves"], int) and r["retrieves"] > 0 for r in rows[1:])
    assert "no scoring slots" in out


def test_bench_gate_mainjob_smoke(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two short swarm runs, the FIFO gate and the one before it; the module's state is
    put back (the swarm's clock, the gate's knobs)."""
    from actormem._engine import fairshare
    from actormem.cli import _swarm

    monkeypatch.setattr(fairshare, "SHARE", fairshare.SHARE)
    monkeypatch.setattr(fairshare, "OPEN_MIN", fairshare.OPEN_MIN)
    clock = _swarm.time
    bench_gate_mainjob.main(
        ["--pairs", "1", "--steps", "40", "--tool-calls", str(real_file("tool_calls.jsonl"))]
    )
    rows = [r for r in _rows(capsys.readouterr().out) if "gate" in r]
    assert sorted(r["gate"] for r in rows) == ["fifo", "starve"]
    assert all(r["store_p99"] is not None for r in rows)
    assert _swarm.time is clock
    assert fairshare._FIFO


def test_retrieve_waits_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    """One short swarm with every retrieve taken apart; everything the run replaced (the
    engine's methods, its knobs, ``trio.run``) is put back."""
    import trio

    from actormem._engine import fairshare

    before = [(obj, name, obj.__dict__[name]) for obj, name in retrieve_waits._PATCHED]
    run = trio.run
    data = real_file("tool_calls.jsonl").parent
    retrieve_waits.main(
        ["--runs", "1", "--steps", "40", "--agents", "4", "--data", str(data),
         "--slots", "2", "--slice", "0.001", "--share", "0.6", "--gate-off",
         "--one-step-chars", "4096"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert "retrieves 40:" in out
    assert "slowest 1%" in out
    assert "retrieves all          yields" in out
    assert "stores    all          yields 1.00" in out  # a store parks once, for its answer
    assert all(obj.__dict__[name] is value for obj, name, value in before)
    assert trio.run is run
    assert fairshare.ReadGate().enabled


def test_bench_open_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = real_file("tool_calls.jsonl").parent
    bench_open.main(
        ["--data", str(data), "--sizes", "300", "--repeats", "1", "--scratch", str(tmp_path)]
    )
    rows = [r for r in _rows(capsys.readouterr().out) if "scorer" in r]
    assert [r["scorer"] for r in rows] == ["word-overlap", "bm25"]
    for row in rows:
        assert row["entries"] == 300
        assert row["first_hit"] is not None
        assert isinstance(row["cpu_s"], float)
