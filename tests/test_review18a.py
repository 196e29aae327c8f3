"""Review 18a: what a malformed file or entry gave as a traceback instead of a clear error.

* a JSONL line holding an integer of more than 4,300 digits (Python's int-string limit):
  ``json.loads`` raises a plain ValueError, which ``json_lines`` let through (a traceback
  from ``actormem swarm --tool-calls`` and ``actormem import``);
* a tool call whose ``reward`` is an integer too large for a float: OverflowError from
  ``tool_call`` (both the inline and the checked way), not the "not a tool call" error;
* an entry whose ``relevance`` or ``ttl`` is such an integer: OverflowError from the
  constructor, not the InvalidEntryError its docs promise (``actormem import`` showed a
  traceback).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._engine import state as state_module
from actormem._errors import InvalidEntryError
from actormem._index.wordoverlap.index import _WordOverlapIndex
from actormem._storage.jsonl import JsonlError, json_lines
from actormem.agent import _toolcalls
from actormem.agent._toolcalls import read_tool_calls, tool_call
from actormem.cli import main

from .test_store10 import _full, _new

HUGE = int("9" * 400)  # a JSON number json.loads reads as an int, too large for a float
CALL = {"source": "s", "episode": "e", "step": 0, "tool": "t", "input": {}, "result": "r"}


def test_an_integer_over_the_digit_limit_is_a_jsonl_error(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text('{"input": {"x": ' + "9" * 5000 + "}}\n")
    with pytest.raises(JsonlError, match=r"calls\.jsonl:1: not JSON: .*4300"):
        list(json_lines(path))


@pytest.mark.parametrize("fast", [True, False])
def test_a_reward_too_large_for_a_float_is_not_a_tool_call(
    fast: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_toolcalls, "_FAST_TOOL_CALL", fast)
    for reward in (HUGE, -HUGE):
        with pytest.raises(ValueError, match="'reward' must be finite"):
            tool_call({**CALL, "reward": reward})
    assert tool_call({**CALL, "reward": 10**300}).reward == 1e300


def test_read_tool_calls_names_the_line_of_a_huge_reward(tmp_path: Path) -> None:
    path = tmp_path / "calls.jsonl"
    path.write_text(json.dumps({**CALL, "reward": HUGE}) + "\n")
    said = r"calls\.jsonl:1: not a tool call: 'reward' must be finite"
    with pytest.raises(JsonlError, match=said):
        read_tool_calls(path)


@pytest.mark.parametrize("field", ["relevance", "ttl"])
def test_an_entry_with_a_huge_integer_is_refused(field: str) -> None:
    with pytest.raises(InvalidEntryError, match=field):
        MemoryEntry(category=MemoryCategory.FACT, memory="x", **{field: HUGE})


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ('{"category": "fact", "memory": "x", "relevance": ' + "9" * 400 + "}", "relevance"),
        ('{"category": "fact", "memory": "x", "ttl": ' + "9" * 400 + "}", "ttl"),
        (json.dumps({**CALL, "reward": HUGE}), "'reward' must be finite"),
        ('{"category": "fact", "memory": ' + "9" * 5000 + "}", "not JSON"),
    ],
    ids=["relevance", "ttl", "reward", "digits"],
)
def test_import_and_swarm_say_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, said: str
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(line + "\n")
    assert main(["import", str(tmp_path / "m.db"), str(data)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert said in err
    assert "in.jsonl:1" in err
    if "reward" in said or "not JSON" in said:
        assert main(["swarm", "--tool-calls", str(data), "--agents", "1"]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        assert said in err


def test_the_public_submodules_are_attributes_of_the_package_as_before() -> None:
    """Before the lazy imports (mainjob9), ``import actormem`` made ``actormem.client``,
    ``actormem.context`` and ``actormem.profile`` attributes (the package imported them):
    ``import actormem; actormem.client.Client(url)`` (docs/server.md's spelling) worked.
    They are still reached on first access, and not imported by ``import actormem``."""
    code = (
        "import sys, actormem\n"
        "assert 'actormem.client' not in sys.modules\n"
        "assert actormem.client.Client is sys.modules['actormem.client'].Client\n"
        "assert actormem.context.Message is actormem.Message\n"
        "assert actormem.profile.ProfileMemory is actormem.ProfileMemory\n"
        "try:\n"
        "    actormem.clients\n"
        "except AttributeError as exc:\n"
        "    assert 'clients' in str(exc)\n"
        "else:\n"
        "    raise AssertionError('no AttributeError')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(state_module._store_inserts_c is None, reason="the core is not built")
@pytest.mark.parametrize("mix", ["lower-first", "alternating"])
def test_a_batch_the_c_call_cannot_append_is_not_one_frame_an_entry(
    mix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """store10's C call appends only records whose relevance key goes at the end of the
    order: once a record of lower relevance is in, a batch at relevance 1.0 (or mixing two
    relevances) stopped it at nearly every entry, and each stop ended the run and stored
    one entry by ``_store_batch``: an index ``add_many`` call an entry instead of one a
    batch, 1.6-2x the CPU of the path before (``_STORE_C`` off). After a call that
    inserted few, ``_store_batch`` now takes the next entries in one frame; the state is
    the same."""
    calls: list[int] = []
    real = _WordOverlapIndex.add_many

    def counting(self: _WordOverlapIndex, recs: list[Any]) -> None:
        calls.append(len(recs))
        real(self, recs)

    monkeypatch.setattr(_WordOverlapIndex, "add_many", counting)
    states = {}
    for on in (True, False):
        monkeypatch.setattr(state_module, "_STORE_C", on)
        s = _new(load=None)
        s.store_many([_plain(0, 0.5)], None)
        rels = [1.0] * 2000 if mix == "lower-first" else [1.0, 0.5] * 1000
        calls.clear()
        s.store_many([_plain(i + 1, r) for i, r in enumerate(rels)], None)
        if on:
            assert len(calls) <= 2000 // state_module._STORE_C_RETRY + 4, len(calls)
        s._check()
        states[on] = _full(s)
    assert states[True] == states[False]


def _plain(i: int, relevance: float) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=f"text {i} w{i % 13}",
        relevance=relevance,
        id=uuid.UUID(int=i + 1),
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i),
    )
