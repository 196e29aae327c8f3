"""A tiny run of the benchmark harness (``python -m stress.bench``): it runs, and its JSON
has the expected shape with positive figures. No timing thresholds: benchmarks report
figures, tests assert behaviour."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stress import bench

from .realdata import needs_real_file

pytestmark = needs_real_file("locomo10.json")


def _positive(value: object) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_retrieve_scenario_at_200_entries(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = bench.run(
        ["--scenario", "retrieve", "--sizes", "200", "--json", str(out), "--budget", "0.5",
         "--repeats", "2", "--queries", "30", "--min-queries", "5"]
    )
    written = json.loads(out.read_text())
    assert written["command"].startswith("python -m stress.bench --scenario retrieve")
    for key in ("command", "machine", "options", "builds", "scenarios", "targets", "duration_s"):
        assert key in written
    for key in ("date", "cores", "memory_gib", "python"):
        assert written["machine"][key]
    assert list(written["scenarios"]) == ["retrieve"]
    rows = written["scenarios"]["retrieve"]
    assert [(r["scorer"], r["n"]) for r in rows] == [("word-overlap", 200), ("bm25", 200)]
    for row in rows:
        for key in ("p50_ms", "p99_ms", "max_ms", "cpu_p50_ms", "snapshot_p50_us",
                    "snapshot_p99_us", "longest_step_ms", "longest_step_cpu_ms"):
            assert _positive(row[key]), (key, row[key])
        assert row["p50_ms"] <= row["p99_ms"] <= row["max_ms"]
        # One step of the run cannot outlast the run (a step timed from an unset start
        # once read as 35,000 s).
        assert row["longest_step_ms"] <= written["duration_s"] * 1000
        assert 5 <= row["queries"] <= 30
        assert row["samples"] == row["queries"] * 2
        assert len(row["repeat_p50_ms"]) == 2
    # Targets at sizes not run are listed but neither met nor missed.
    assert written["targets"]
    assert all(t["met"] is None for t in written["targets"])
    assert result["scenarios"] == written["scenarios"]


def test_report_marks_missed_targets() -> None:
    targets = bench.targets(
        {"retrieve": [{"scorer": "word-overlap", "n": 100_000, "p50_ms": 0.5, "p99_ms": 7.0}]}
    )
    by_name = {t.name: t.met for t in targets}
    assert by_name["retrieve p50, word-overlap, 100k"] is True
    assert by_name["retrieve p99, word-overlap, 100k"] is False
    stalls = bench.targets(
        {"retrieve": [
            {"scorer": "bm25", "n": 1_000_000, "longest_step_ms": 6.0, "longest_step_cpu_ms": 5.5},
            {"scorer": "word-overlap", "n": 1_000_000, "longest_step_ms": 9.0,
             "longest_step_cpu_ms": 2.0},
        ]}
    )
    by_name = {t.name: t.met for t in stalls}
    assert by_name["longest retrieve step (CPU), 1M, one reader, bm25"] is False
    assert by_name["longest retrieve step (CPU), 1M, one reader, word-overlap"] is True
    assert by_name["retrieve p50, bm25, 100k"] is None


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--scenario", "retreive"], "'retreive' is not one of"),
        (["--scorers", "bm2"], "'bm2' is not one of"),
        (["--sizes", "0"], "must be >= 1"),
        (["--budget", "-1"], "must be a positive number of seconds"),
        (["--render", "/nonexistent/run.json"], "is not a file"),
        (["--durable", "bogus"], "'bogus' is not one of auto, none"),
        (["--json", "/nonexistent/dir/run.json"], "does not exist"),
    ],
)
def test_bench_refuses_bad_arguments_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_rw_repeats_combine_by_median_and_max() -> None:
    from stress._bench_rw import combine_repeats

    rows = [
        {"writers": 64, "reader_quota": quota, "writer_p99_alone_ms": alone,
         "writer_p99_with_readers_ms": both, "writer_p99_ratio": both / alone,
         "reader_p99_alone_ms": 100.0, "reader_p99_with_writers_ms": r_both,
         "reader_p99_ratio": r_both / 100.0, "longest_retrieve_step_ms": step,
         "gc_longest_ms": gc, "entries_at_start": None, "phases": {"both": {}}}
        for alone, both, r_both, quota, step, gc in (
            (10.0, 30.0, 150.0, 2, 1.0, 0.5),
            (20.0, 20.0, float("nan"), 3, 4.0, 0.2),
            (12.0, 60.0, 250.0, 2, 2.0, 0.9),
        )
    ]
    row = combine_repeats(rows)
    assert row["writer_p99_alone_ms"] == 12.0
    assert row["writer_p99_with_readers_ms"] == 30.0
    assert row["writer_p99_ratio"] == 2.5  # of the medians beside it, not a median ratio
    assert row["reader_p99_with_writers_ms"] == 200.0  # NaN (no samples) left out
    assert row["reader_p99_ratio"] == 2.0
    assert row["longest_retrieve_step_ms"] == 4.0
    assert row["gc_longest_ms"] == 0.9
    assert row["writers"] == 64
    assert isinstance(row["writers"], int)
    assert row["reader_quota"] == 2
    assert row["repeat_reader_quota"] == [2, 3, 2]
    assert row["repeats"] == 3
    assert row["repeat_writer_p99_ratio"] == [3.0, 1.0, 5.0]
    assert len(row["phases"]) == 3


def test_rw_scenario_runs_its_repeats(tmp_path: Path) -> None:
    out = tmp_path / "rw.json"
    bench.run(["--scenario", "rw", "--sizes", "300", "--budget", "0.2", "--repeats", "2",
               "--json", str(out)])
    (row,) = json.loads(out.read_text())["scenarios"]["rw"]
    assert row["n"] == 300
    assert row["repeats"] == 2
    assert len(row["repeat_writer_p99_ratio"]) == 2
    for key in ("writer_p99_ratio", "reader_p99_ratio", "longest_retrieve_step_cpu_ms"):
        assert _positive(row[key]), (key, row[key])


def test_bench_server_smoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stress import bench_server

    out = tmp_path / "server.json"
    assert bench_server.main(["--clients", "1", "--ops", "5", "--entries", "10",
                              "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    for phase in ("floor", "store", "retrieve"):
        assert report["http"][phase]["count"] == 5
    assert report["in_process"]["store"]["count"] == 5
    assert "retrieve (HTTP)" in capsys.readouterr().out


def test_peers_scenario_times_both_orders(tmp_path: Path) -> None:
    result = bench.run(
        ["--scenario", "peers", "--peer-sizes", "300", "--peers", "reference,fts5",
         "--budget", "0.2", "--repeats", "1", "--queries", "12", "--min-queries", "5",
         "--json", str(tmp_path / "bench.json")]
    )  # fmt: skip
    rows = result["scenarios"]["peers"]
    assert [row["id"] for row in rows] == ["reference", "fts5"]
    for row in rows:
        assert row["warm_queries"] == row["queries"]
        for scorer in ("word-overlap", "bm25"):
            for key in (f"{scorer}_p50_ms", f"warm_{scorer}_p50_ms", f"warm_{scorer}_cpu_p99_ms"):
                assert _positive(row[key]), key
            assert _positive(row[f"warm_ratio_p50_vs_{scorer}"])
            assert _positive(row[f"warm_cpu_ratio_p50_vs_{scorer}"])


def test_bench_export_stores_smoke(tmp_path: Path) -> None:
    """``stress.bench_export_stores`` runs end to end on a tiny memory: every export
    returns every entry (the script fails otherwise), the figures are written."""
    from stress import bench_export_stores

    from .realdata import real_file

    data = real_file("tool_calls.jsonl").parent
    real_file("locomo10.json")
    out = tmp_path / "export.json"
    assert bench_export_stores.main(["--entries", "300", "--exports", "2", "--rounds", "1",
                                      "--alone", "3", "--data", str(data),
                                      "--json", str(out)]) == 0
    (run,) = json.loads(out.read_text())
    assert run["alone"]["n"] == 3
    assert run["export_lines"]
    assert min(run["export_lines"]) >= 303
    assert run["exports"] == 2
