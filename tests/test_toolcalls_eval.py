"""``actormem eval toolcalls``: the protocol on a hand-made file, and on the real data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actormem.eval._cli import main
from actormem.eval._toolcalls import SCORERS, evaluate, load_steps

from .realdata import real_file


def write_rows(path: Path) -> None:
    rows = [
        # task 1: both trials look up the same user, then book.
        ("task1-trial0", 0, "get_user", {"user_id": "ann_7"}, "ann lives in austin"),
        ("task1-trial0", 1, "book", {"flight": "HAT1"}, "booked HAT1"),
        ("task1-trial1", 0, "get_user", {"user_id": "ann_7"}, "ann lives in austin"),
        ("task1-trial1", 1, "book", {"flight": "HAT1"}, "booked HAT1 again"),
        # task 40 (held out): unrelated user; one trial only in task 41 (no query).
        ("task40-trial0", 0, "get_user", {"user_id": "bob_2"}, "bob lives in boston"),
        ("task40-trial1", 0, "get_user", {"user_id": "bob_2"}, "bob lives in boston"),
        ("task41-trial0", 0, "cancel", {"id": "R1"}, "cancelled"),
    ]
    with path.open("w") as f:
        for episode, step, tool, inp, result in rows:
            f.write(
                json.dumps(
                    {
                        "source": "tau-bench/x",
                        "episode": episode,
                        "step": step,
                        "tool": tool,
                        "input": inp,
                        "result": result,
                    }
                )
                + "\n"
            )
        f.write(
            json.dumps(
                {
                    "source": "other",
                    "episode": "e",
                    "step": 0,
                    "tool": "t",
                    "input": {},
                    "result": "",
                }
            )
            + "\n"
        )


def test_protocol_on_a_hand_made_file(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    write_rows(path)
    steps = load_steps(path)
    assert len(steps) == 7  # the non-tau-bench row is left out
    result = evaluate(steps, SCORERS["bm25"](), "bm25")
    # Tuning: 4 input queries, 2 result queries (step 1 of each trial); held-out: 2 inputs.
    assert result.queries == {"tuning": {"input": 4, "result": 2}, "held-out": {"input": 2}}
    # The other trial of the same task holds the same call: found first every time.
    assert result.hit["tuning"]["input"] == {1: 100.0, 3: 100.0, 10: 100.0}
    assert result.mrr["held-out"]["input"] == 100.0


def test_cli_prints_every_scorer_asked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "calls.jsonl"
    write_rows(path)
    out = tmp_path / "out.json"
    assert (
        main(
            [
                "toolcalls",
                "--data",
                str(path),
                "--scorer",
                "word-overlap",
                "--scorer",
                "bm25",
                "--json",
                str(out),
            ]
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "word-overlap  tuning" in text
    assert "bm25          held-out" in text
    assert [r["scorer"] for r in json.loads(out.read_text())] == ["word-overlap", "bm25"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "tau-bench/x", "episode": "nope"}\n')
    assert main(["toolcalls", "--data", str(bad)]) == 2
    assert "bad.jsonl:1" in capsys.readouterr().err


def test_real_tool_calls_bm25_finds_other_trials() -> None:
    steps = load_steps(real_file("tool_calls.jsonl"))
    result = evaluate(steps, SCORERS["bm25"](), "bm25")
    # The step's own input finds another trial's step of the task in the top 10 far more
    # often than chance (50 tasks).
    assert result.hit["tuning"]["input"][10] > 50.0
    assert result.hit["held-out"]["input"][10] > 50.0
