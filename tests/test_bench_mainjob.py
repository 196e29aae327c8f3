"""A tiny run of the main-job benchmark (``python -m stress.bench_mainjob``): its child
swarms run from a scratch directory on the checkout named, every figure comes back, and
``--against`` pairs the two sides run for run. Synthetic data, so no data set is needed.
No timing thresholds: benchmarks report figures, tests assert behaviour."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stress import bench_hooks, bench_mainjob


def test_pairs_against_a_checkout_report_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mainjob.json"
    # This checkout against itself: the harness's pairing, not a speed-up, is tested.
    report = bench_mainjob.run(
        ["--synthetic", "--episodes", "3", "--agents", "3", "--modes", "memory,durable",
         "--against", str(bench_mainjob.ROOT), "--json", str(out)]
    )
    assert json.loads(out.read_text()) == report
    assert report["bytecode"] == "cached"
    runs = report["runs"]
    assert [(r["mode"], r["side"]) for r in runs] == [
        ("memory", "this"), ("memory", "against"), ("durable", "this"), ("durable", "against")
    ]
    for r in runs:
        assert r["lost"] == 0
        assert r["operations"] > 0
        assert r["process_cpu_s"] > r["run_cpu_s"] > 0  # start-up is outside the run
        assert r["ops_per_cpu_s"] == pytest.approx(r["operations"] / r["process_cpu_s"])
        assert r["ops_per_run_cpu_s"] > r["ops_per_cpu_s"]
        for op in ("retrieve", "store"):
            assert 0 < r[f"{op}_p50_ms"] <= r[f"{op}_p99_ms"]
    sides = [(row["mode"], row["side"]) for row in report["summary"]]
    assert sides == [
        ("memory", "this"), ("memory", "against"), ("memory", "ratio (median of pairs)"),
        ("durable", "this"), ("durable", "against"), ("durable", "ratio (median of pairs)"),
    ]
    assert all(row["ops_per_cpu_s"] > 0 for row in report["summary"])
    assert "| memory | ratio (median of pairs) | 1 |" in capsys.readouterr().out
    # In memory means no file: only the durable run names a temporary folder.
    assert "--in-memory" in report["swarm_argv"]["memory"]
    assert "--in-memory" not in report["swarm_argv"]["durable"]


def test_children_read_bytecode_from_the_benchmarks_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The environment may forbid writing bytecode; the run's cache is written all the same,
    # under the checkout's own path (the prefix mirrors absolute paths), and nothing beside
    # the sources.
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    args = bench_mainjob.parser().parse_args(["--synthetic", "--episodes", "1"])
    cache = tmp_path / "pycache"
    result = bench_mainjob.run_once(bench_mainjob.ROOT, args, "memory", cache)
    assert result["lost"] == 0
    mirror = cache / bench_mainjob.ROOT.relative_to(bench_mainjob.ROOT.anchor)
    compiled = {p.name.split(".")[0] for p in (mirror / "actormem" / "_engine").glob("*.pyc")}
    assert {"memory", "state", "fairshare"} <= compiled


def test_source_each_run_keeps_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "mainjob.json"
    report = bench_mainjob.run(
        ["--synthetic", "--episodes", "1", "--agents", "2", "--modes", "memory",
         "--source-each-run", "--json", str(out)]
    )
    assert report["bytecode"] == "inherited"
    assert [r["lost"] for r in report["runs"]] == [0]


def test_child_importing_another_checkout_is_refused(tmp_path: Path) -> None:
    # No actormem in it: the child finds the installed one, which is not this folder.
    fake = tmp_path / "checkout"
    fake.mkdir()
    args = bench_mainjob.parser().parse_args(["--synthetic", "--episodes", "1"])
    with pytest.raises(RuntimeError, match="imported actormem from"):
        bench_mainjob.run_once(fake, args, "memory")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--modes", "disk"], "modes are a comma-separated subset"),
        (["--against", "/nonexistent"], "is not a checkout"),
        (["--synthetic", "--tool-calls", __file__], "exclude each other"),
    ],
)
def test_bad_arguments_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        bench_mainjob.run(argv)
    assert stopped.value.code == 2
    assert message in capsys.readouterr().err


def test_bench_hooks_measures_both_hooks(tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 2}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}"}, "result": "line\\none " * i}) + "\n"
            for i in range(7)
        )
    )
    result = bench_hooks.run(["--tool-calls", str(calls), "--repeats", "2"])
    assert result["calls"] == 7
    assert result["memory_block_us"] > 0
    assert result["after_tool_call_us"] > 0
