"""A tiny run of ``stress/bench_store64.py``: its runs store every entry (the child
asserts the memory's length), both sides of ``--against`` really import their own
checkout's package, and ``--state`` fills two states with the same entries. No timing
thresholds: benchmarks report figures, tests assert behaviour."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from stress import bench_store64

from .realdata import needs_real_file

pytestmark = needs_real_file("locomo10.json")

ROOT = Path(bench_store64.__file__).resolve().parent.parent


def test_runs_alternate_and_store_everything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.json"
    args = ["--entries", "96", "--writers", "8", "--chunk", "5", "--repeats", "2"]
    args += ["--modes", "memory,normal", "--apis", "store,store_many", "--dir", str(tmp_path)]
    assert bench_store64.main([*args, "--against", str(ROOT), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())
    assert len(runs) == 2 * 4 * 2  # repeats x cells x sides
    assert [r["side"] for r in runs[:2]] == ["old", "new"]  # which goes first alternates
    assert [r["side"] for r in runs[8:10]] == ["new", "old"]
    for r in runs:
        for key in ("entries_per_s", "entries_per_cpu_s", "loop_us_per_entry"):
            assert math.isfinite(r[key]), (key, r)
            assert r[key] > 0, (key, r)
    table = capsys.readouterr().out
    assert "| memory | store_many | new |" in table


def test_state_mode_compares_both_paths(capsys: pytest.CaptureFixture[str]) -> None:
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    before = (knobs._ADD_KNOWN, knobs._ADD_CACHED, textfold._FOLD_HASH, textfold._fold_ascii)
    assert bench_store64.main(["--state", "700"]) == 0
    after = (knobs._ADD_KNOWN, knobs._ADD_CACHED, textfold._FOLD_HASH, textfold._fold_ascii)
    assert after == before  # switched back on
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row.startswith("| 700 |")


@pytest.mark.parametrize(("flag", "knob_set"), [([], "batch"), (["store5"], "store5")])
def test_old_knobs_runs_this_checkout_with_the_knobs_off(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flag: list[str],
    knob_set: str,
) -> None:
    seen: list[str | None] = []
    run = bench_store64._run

    def spy(tree: Path, cell: dict[str, str], args: object, knobs_off: str | None = None) -> object:
        assert tree == ROOT
        seen.append(knobs_off)
        return run(tree, cell, args, knobs_off)  # type: ignore[arg-type]

    monkeypatch.setattr(bench_store64, "_run", spy)
    args = ["--entries", "40", "--writers", "4", "--chunk", "5", "--repeats", "1"]
    args += ["--modes", "memory", "--apis", "store_many", "--old-knobs", *flag]
    assert bench_store64.main(args) == 0
    assert seen == [knob_set, None]  # old first, with the knobs off
    assert "| memory | store_many | new |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        bench_store64.main([*args, "--against", str(ROOT)])


def test_switch_batch_turns_the_knobs() -> None:
    from actormem._engine import state
    from actormem._index.wordoverlap import knobs
    from actormem._storage import sqlite_format

    bench_store64._switch_batch(False)
    try:
        assert [state._STORE_BATCH, knobs._ADD_MANY, sqlite_format._ENCODE_DIRECT] == [False] * 3
    finally:
        bench_store64._switch_batch(True)
    assert [state._STORE_BATCH, knobs._ADD_MANY, sqlite_format._ENCODE_DIRECT] == [True] * 3


def test_switch_store5_turns_the_knobs() -> None:
    from actormem._engine import state
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    def now() -> list[bool]:
        return [
            knobs._ACQUIRE_FAST,
            knobs._UNTRACK,
            textfold._FOLD_DIRECT,
            state._RELEVANCE_APPEND,
        ]

    bench_store64._switch_store5(False)
    try:
        assert now() == [False] * 4
    finally:
        bench_store64._switch_store5(True)
    assert now() == [True] * 4


def test_switch_store8_turns_the_knobs() -> None:
    from actormem._engine import state
    from actormem._index import textfold
    from actormem._index.wordoverlap import knobs

    def now() -> list[bool]:
        return [
            knobs._SCAN_ONE,
            knobs._LOWER_C,
            knobs._LEAN_TEXT_CHECKS,
            knobs._MASKS_BY_KIND,
            textfold._FOLD_TABLE,
            state._DUPKEY_C,
        ]

    bench_store64._switch_store8(False)
    try:
        assert now() == [False] * 6
    finally:
        bench_store64._switch_store8(True)
    assert now() == [True] * 6


def test_gc_freeze_reaches_the_child_and_unfreezes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gc

    seen: list[list[str]] = []
    run = bench_store64.subprocess.run

    def spy(cmd: list[str], **kw: object) -> object:
        seen.append(cmd)
        return run(cmd, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(bench_store64.subprocess, "run", spy)
    args = ["--entries", "40", "--writers", "4", "--chunk", "5", "--repeats", "1"]
    args += ["--modes", "memory", "--apis", "store_many", "--gc-freeze"]
    assert bench_store64.main(args) == 0
    assert len(seen) == 1
    assert "--gc-freeze" in seen[0]
    # In this process: a child run freezes for its timed part only.
    bench_store64.main([*args[:-1], "--child", "--gc-freeze", "--mode", "memory"])
    assert gc.get_freeze_count() == 0
