"""review22a: a tool-call line whose input is nested deep, but not too deep for the JSON
parser, was read and then failed later with a bare RecursionError (no file, no line),
either in the reader's own encoding of the input or, a few levels shallower, in the
swarm's agents (``Episode.first_query``), as a traceback of nested exception groups.
The reader now refuses an input nested deeper than ``MAX_VALUE_DEPTH`` (the limit an
entry's value has) with a ``JsonlError`` naming the file and the line, whatever the
depth of the caller's stack, with every knob of the reader on or off.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._json import MAX_VALUE_DEPTH
from actormem._storage.jsonl import JsonlError
from actormem.agent import _toolcalls
from actormem.agent._toolcalls import read_tool_calls, tool_call
from actormem.cli import _main

from .strategies import examples


def _line(value: str) -> str:
    return (
        '{"source":"s","episode":"e","step":0,"tool":"t","input":' + value + ',"result":"r"}\n'
    )


def _nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "0" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


_KNOBS = [(a, b, c) for a in (True, False) for b in (True, False) for c in (True, False)]


@pytest.mark.parametrize("knobs", _KNOBS)
def test_deep_input_refused_naming_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knobs: tuple[bool, ...]
) -> None:
    once, slots, whole = knobs
    monkeypatch.setattr(_toolcalls, "_ENCODE_PARSED_ONCE", once)
    monkeypatch.setattr(_toolcalls, "_CALLS_BY_SLOTS", slots)
    monkeypatch.setattr(_toolcalls, "_READ_ONCE", whole)
    path = tmp_path / "calls.jsonl"
    # Every depth up to past the parser's limit, wherever this test's stack puts the
    # window where the parser takes a line and the encoder then runs out of stack.
    limit = sys.getrecursionlimit()
    for depth in [MAX_VALUE_DEPTH + 1, 300, *range(limit - 200, limit + 5)]:
        path.write_text(_line("1") + _line(_nested(depth, "list")))
        with pytest.raises(JsonlError, match=r"calls\.jsonl:2: .*nested"):
            read_tool_calls(path)


@settings(max_examples=examples(20), deadline=None)
@given(depth=st.integers(0, 400), kind=st.sampled_from(["list", "dict"]))
def test_depth_limit_either_way(depth: int, kind: str) -> None:
    value = json.loads(_nested(depth, kind))
    obj = {"source": "s", "episode": "e", "step": 0, "tool": "t", "input": value, "result": "r"}
    for parsed in (True, False):
        if depth > MAX_VALUE_DEPTH:
            with pytest.raises(ValueError, match="nested"):
                _toolcalls._tool_call(obj, parsed)
        else:
            assert _toolcalls._tool_call(obj, parsed).input == value
    if depth > MAX_VALUE_DEPTH:
        with pytest.raises(ValueError, match="nested"):
            tool_call(obj)


def test_brackets_in_strings_do_not_count(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text(_line(json.dumps({"q": "[{" * 500})))
    calls, _ = read_tool_calls(path)
    assert calls[0].input == {"q": "[{" * 500}


def test_swarm_reports_a_deep_input_as_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text(_line(_nested(MAX_VALUE_DEPTH + 1, "list")))
    status = _main.main(["swarm", "--tool-calls", str(path), "--agents", "2"])
    assert status != 0
    assert "calls.jsonl:1" in capsys.readouterr().err
