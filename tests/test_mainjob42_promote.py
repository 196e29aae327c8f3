"""mainjob42: the ``actormem`` process moves what its start-up built to the collector's
oldest generation without walking it.

* ``_util.to_oldest_generation``: every tracked object ends in generation 2, the young
  count starts again from 0, nothing is left frozen; an application's own freeze is left
  as it is (nothing moved);
* ``python -m actormem swarm``: right after the command line's imports (still paused,
  numpy and trio loaded, the command not started) and right after the tool calls are
  read, each knob off leaving its step out; the same accounting and operations either
  way;
* a library user (``import actormem``, ``actormem.cli.main`` in-process) is not promoted;
* ``_swarm._TALLY_BY_SETS``: the swarm's accounting tallied from set sizes when every id
  arrived once and none has a gap, else per id: the same accounting either way.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import types
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem.cli._swarm as swarm_mod
from actormem import MemoryCategory, MemoryEntry, _util
from actormem.cli._swarm import CAUSES, Removals, check_accounting

from .strategies import examples
from .test_mainjob12_paths import accountings

ROOT = Path(__file__).resolve().parent.parent

#: Records, at the process's exit, each call of ``to_oldest_generation``: its caller,
#: what was imported then, whether the collector was paused, what it returned, and
#: whether the objects it should have moved were then in generation 2 (the command
#: line's ``build_parser`` function; for the swarm's call, its ``files`` list).
SITECUSTOMIZE = """
import atexit, gc, json, os, sys

if "MJ42_REPORT" in os.environ:
    import actormem._util as u
    import actormem.cli as c

    c._PROMOTE_IMPORTS = os.environ.get("MJ42_IMPORTS", "1") == "1"
    _calls = []
    _orig = u.to_oldest_generation

    def _in_gen2(obj):
        return any(o is obj for o in gc.get_objects(generation=2))

    def to_oldest_generation():
        caller = sys._getframe(1)
        main = sys.modules.get("actormem.cli._main")
        seen = {
            "caller": caller.f_code.co_name,
            "main_imported": main is not None and hasattr(main, "run_command"),
            "numpy": "numpy" in sys.modules,
            "trio": "trio" in sys.modules,
            "paused": not gc.isenabled(),
            "swarm_done": bool(main is not None and getattr(main, "_swarm_done", False)),
        }
        if main is not None and os.environ.get("MJ42_WORKLOAD") == "0":
            main._PROMOTE_WORKLOAD = False
        seen["returned"] = _orig()
        seen["young_count"] = gc.get_count()[0]
        if main is not None and hasattr(main, "build_parser"):
            seen["parser_in_gen2"] = _in_gen2(main.build_parser)
        files = caller.f_locals.get("files")
        if files is not None:
            seen["files_in_gen2"] = _in_gen2(files)
        _calls.append(seen)
        return seen["returned"]

    u.to_oldest_generation = to_oldest_generation

    def _report():
        with open(os.environ["MJ42_REPORT"], "w") as f:
            json.dump(_calls, f)

    atexit.register(_report)
"""


def _calls_file(tmp_path: Path) -> Path:
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 5}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}", "n": [i, i + 1]},
                        "result": f"text {i} of file {i % 7}"}) + "\n"
            for i in range(60)
        ),
        encoding="utf-8",
    )  # fmt: skip
    return calls


def _run(tmp_path: Path, args: list[str], **env_over: str) -> tuple[list[dict], dict]:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env["MJ42_REPORT"] = str(tmp_path / "seen.json")
    env.update(env_over)
    out = tmp_path / "swarm.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, *args, "--json", str(out)], capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen: list[dict] = json.loads((tmp_path / "seen.json").read_text())
    report: dict = json.loads(out.read_text())
    return seen, report


def _swarm(tmp_path: Path, *extra: str) -> list[str]:
    return ["-m", "actormem", "swarm", "--agents", "4", "--interval", "600",
            "--tool-calls", str(_calls_file(tmp_path)), *extra]  # fmt: skip


@pytest.mark.parametrize("mode", [["--in-memory"], []], ids=["memory", "durable"])
def test_the_swarm_promotes_its_imports_and_its_tool_calls(
    tmp_path: Path, mode: list[str]
) -> None:
    seen, report = _run(tmp_path, _swarm(tmp_path, *mode))
    imports, workload = seen
    assert imports["caller"] == "run_command"
    # Right after the command line's imports, still paused, before the command ran.
    assert imports["main_imported"]
    assert imports["numpy"]
    assert imports["trio"]
    assert imports["paused"]
    assert not imports["swarm_done"]
    assert imports["returned"] is True
    assert imports["young_count"] == 0
    assert imports["parser_in_gen2"] is True
    # Right after the tool calls were read, still paused.
    assert workload["caller"] == "cmd_swarm"
    assert workload["paused"]
    assert workload["returned"] is True
    assert workload["files_in_gen2"] is True
    assert report["accounting"]["lost"] == 0


def test_the_knobs_off_leave_the_young_collections_to_walk_them(tmp_path: Path) -> None:
    seen_on, on = _run(tmp_path, _swarm(tmp_path, "--in-memory"))
    seen_off, off = _run(tmp_path, _swarm(tmp_path, "--in-memory"), MJ42_IMPORTS="0")
    assert [s["caller"] for s in seen_on] == ["run_command", "cmd_swarm"]
    assert [s["caller"] for s in seen_off] == ["cmd_swarm"]
    # The same run either way: the accounting and the operations.
    assert on["accounting"] == off["accounting"]
    assert on["accounting"]["lost"] == 0
    assert on["throughput"]["operations"] == off["throughput"]["operations"]
    assert on["data_files"] == off["data_files"]


def test_the_workload_knob_off(tmp_path: Path) -> None:
    """The spy turns ``_PROMOTE_WORKLOAD`` off at the imports' call: no second call."""
    seen, report = _run(tmp_path, _swarm(tmp_path, "--in-memory"), MJ42_WORKLOAD="0")
    assert [s["caller"] for s in seen] == ["run_command"]
    assert report["accounting"]["lost"] == 0


def test_a_library_user_is_not_promoted_at_import(tmp_path: Path) -> None:
    """``import actormem`` and ``actormem.cli.main`` in-process: the imports are not
    promoted (the swarm's own tool calls still are)."""
    calls = _calls_file(tmp_path)
    out = tmp_path / "lib.json"
    code = (
        "import actormem\n"
        "from actormem import open_memory\n"
        "from actormem.cli import main\n"
        f"assert main(['swarm', '--agents', '2', '--in-memory', '--interval', '600',"
        f" '--tool-calls', {str(calls)!r}, '--json', {str(out)!r}]) == 0\n"
    )
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    env["MJ42_REPORT"] = str(tmp_path / "seen.json")
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env,
        cwd=tmp_path, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert [s["caller"] for s in seen] == ["cmd_swarm"]


def _young(objs: list[object]) -> bool:
    ids = {id(o) for o in objs}
    return len(ids & {id(o) for o in gc.get_objects(generation=0)}) == len(ids)


def test_to_oldest_generation_moves_every_tracked_object() -> None:
    was = gc.isenabled()
    gc.disable()
    try:
        made = [[i] for i in range(2_000)]
        assert _young(made)
        assert gc.get_count()[0] > 0
        assert _util.to_oldest_generation() is True
        assert gc.get_count()[0] == 0
        assert gc.get_freeze_count() == 0
        in_gen2 = {id(o) for o in gc.get_objects(generation=2)}
        assert all(id(o) in in_gen2 for o in made)
        younger = {id(o) for g in (0, 1) for o in gc.get_objects(generation=g)}
        assert not younger & {id(o) for o in made}
    finally:
        if was:
            gc.enable()


def test_a_frozen_heap_is_left_as_it_is() -> None:
    """The application's own freeze: nothing moved, nothing unfrozen."""
    was = gc.isenabled()
    gc.disable()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        made = [[i] for i in range(500)]
        assert _util.to_oldest_generation() is False
        assert gc.get_freeze_count() == frozen
        assert _young(made)
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


def test_cycles_made_before_are_still_collected_by_a_full_collection() -> None:
    """What was promoted is not hidden: a cycle among it goes at the next full
    collection."""
    import weakref

    class Node:
        pass

    was = gc.isenabled()
    gc.disable()
    try:
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]
        gone = weakref.ref(a)
        del a, b
        assert _util.to_oldest_generation() is True
        gc.collect(1)  # a young or middle collection does not walk generation 2
        assert gone() is not None
        gc.collect()
        assert gone() is None
    finally:
        if was:
            gc.enable()


# ------------------------------------------------------------ the accounting's tallies


def _pool(draw: Any, n: int) -> list[uuid.UUID]:
    return [uuid.UUID(int=draw(st.integers(0, 2**128 - 1))) for _ in range(n)]


@st.composite
def _accounting_scenarios(draw: Any) -> dict[str, Any]:
    """A sound run (every id once, each removed one reported once, the rest present)
    with a few perturbations, or an arbitrary one (ids repeated, lost, over-reported)."""
    pool = list(dict.fromkeys(_pool(draw, draw(st.integers(1, 24)))))
    pick = st.sampled_from(pool)
    if draw(st.booleans()):
        order = draw(st.permutations(pool))
        cut = draw(st.integers(0, len(order)))
        initial, stored = order[:cut], order[cut:]
        stored = stored[: draw(st.integers(0, len(stored)))]
        arrived = [*initial, *stored]
        gone = draw(st.lists(st.sampled_from(arrived), unique=True)) if arrived else []
        during = [(i, draw(st.sampled_from(CAUSES))) for i in gone]
        present = [i for i in arrived if i not in gone]
        # Perturbations: an id stored again, one lost, one reported twice, one unknown.
        if arrived and draw(st.integers(0, 5)) == 0:
            stored = [*stored, draw(st.sampled_from(arrived))]
        if present and draw(st.integers(0, 5)) == 0:
            present.remove(draw(st.sampled_from(present)))
        if arrived and draw(st.integers(0, 5)) == 0:
            during.append((draw(st.sampled_from(arrived)), draw(st.sampled_from(CAUSES))))
        if draw(st.integers(0, 5)) == 0:
            present.append(uuid.UUID(int=draw(st.integers(0, 2**128 - 1))))
        uncertain = draw(st.lists(pick, max_size=2)) if draw(st.integers(0, 5)) == 0 else []
        before = draw(st.lists(st.tuples(pick, st.sampled_from(CAUSES)), max_size=2))
    else:
        initial = draw(st.lists(pick, max_size=6, unique=True))
        stored = draw(st.lists(pick, max_size=14))
        present = draw(st.lists(pick, max_size=12, unique=True))
        before = draw(st.lists(st.tuples(pick, st.sampled_from(CAUSES)), max_size=3))
        during = draw(st.lists(st.tuples(pick, st.sampled_from(CAUSES)), max_size=12))
        uncertain = draw(st.lists(pick, max_size=4))
    return {
        "initial": initial, "stored": stored, "present": list(dict.fromkeys(present)),
        "before": before, "during": during, "uncertain": uncertain,
        "growth": draw(st.lists(st.integers(0, 3), min_size=5, max_size=5)),
    }  # fmt: skip


def _counters(values: list[int]) -> Any:
    fields = ("upserts", "evictions", "pruned", "merged", "deletes")
    return types.SimpleNamespace(**dict(zip(fields, values, strict=True)))


_fast_used: list[bool] = []


@settings(max_examples=examples(400), deadline=None)
@given(_accounting_scenarios())
def test_the_tallies_by_sets_are_the_per_id_tallies(scenario: dict[str, Any]) -> None:
    """``_swarm._TALLY_BY_SETS`` on and off, by ints and by UUIDs: the same accounting,
    named ids and their order included."""
    real = swarm_mod._tally_by_sets

    def spied(*args: Any) -> bool:
        _fast_used.append(real(*args))
        return _fast_used[-1]

    results = accountings(scenario, [
        {"_TALLY_BY_SETS": by_sets, "_ACCOUNT_BY_INT": by_int, "_tally_by_sets": spied}
        for by_sets in (True, False) for by_int in (True, False)
    ])  # fmt: skip
    assert results[0] == results[2]
    assert results[1] == results[3]
    assert results[0] == results[1]


def test_the_tallies_by_sets_were_taken_and_refused() -> None:
    """The property above ran both ways: some scenarios tallied by sets, some not."""
    if not _fast_used:
        test_the_tallies_by_sets_are_the_per_id_tallies()
    assert True in _fast_used
    assert False in _fast_used


def test_a_sound_run_and_a_lost_id() -> None:
    """By hand: 3 stores, one merged (reported), one lost; the lost one named."""
    a, b, c = (uuid.UUID(int=n) for n in (1, 2, 3))
    removals = Removals()
    removals.start_run()
    removals.log.append((b, "merged"))
    for shown, lost in (([a, c], []), ([a], [str(c)])):
        present = [MemoryEntry(id=i, category=MemoryCategory.FACT, memory="x") for i in shown]
        memory = types.SimpleNamespace(
            statistics=lambda: _counters([0] * 5), snapshot=lambda p=present: p
        )
        got = []
        for by_sets in (True, False):
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(swarm_mod, "_TALLY_BY_SETS", by_sets)
                got.append(
                    check_accounting(
                        memory,  # type: ignore[arg-type]
                        initial=[], stored=[a, b, c], removals=removals,
                        before=_counters([0] * 5),
                    ).to_json()
                )  # fmt: skip
        assert got[0] == got[1]
        assert got[0]["stores"]["tracked"] == 3
        assert got[0]["stores"]["merged"] == 1
        assert got[0]["stores"]["present"] == len(shown)
        assert got[0]["stores"]["lost"] == len(lost)
        assert got[0]["lost_ids"] == lost


# ------------------------------------------------------- the tool calls' lines decoded


_PIECES = [
    '{"source":"s","episode":"e","step":0,"tool":"t","input":{"q":"a b"},"result":"r"}',
    '{"source":"s","episode":"e2","step":3,"tool":"t","input":[1,2.5],"result":"\\ud83d\\ude00"}',
    '{"source":"s","episode":"e","step":1,"tool":"t","input":1,"result":"x \U0001f600 y"}',
    '{"source":"s","episode":"e","step":2,"tool":"t","input":"\u00e9\u4e2d","result":"\u2028"}',
    '{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"r","reward":1}',
    "", "   ", "{}", "[1]", "not json", '{"a": 1} extra', "\ufeff{}", "\U0001f600",
]  # fmt: skip
_RAW = [b"\xff", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\r", b"\xef\xbb\xbf"]


def _read_three_ways(path: Path) -> list[Any]:
    from actormem._storage.jsonl import JsonlError
    from actormem.agent import _toolcalls

    out: list[Any] = []
    for read_once, by_line in ((True, True), (True, False), (False, True)):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_toolcalls, "_READ_ONCE", read_once)
            mp.setattr(_toolcalls, "_DECODE_BY_LINE", by_line)
            try:
                calls, digest = _toolcalls.read_tool_calls(path)
            except JsonlError as exc:
                out.append(("error", str(exc)))
                continue
            out.append(("ok", digest, [(c, c.text, type(c.reward)) for c in calls]))
    return out


@settings(max_examples=examples(150), deadline=None)
@given(
    parts=st.lists(
        st.one_of(st.sampled_from(_PIECES).map(lambda t: t.encode("utf-8", "surrogatepass")),
                  st.sampled_from(_RAW)),
        max_size=10,
    ),
    ending=st.sampled_from([b"\n", b"\r\n"]),
    bom=st.booleans(),
    last=st.booleans(),
)  # fmt: skip
def test_lines_decoded_apart_read_as_the_whole_text(
    tmp_path_factory: pytest.TempPathFactory, parts: list[bytes], ending: bytes, bom: bool,
    last: bool,
) -> None:  # fmt: skip
    """``_toolcalls._DECODE_BY_LINE`` on and off, and the streaming reader: the same
    calls, texts and digest, or the same error (a line that is not UTF-8, not JSON, not
    a tool call), for lines with characters beyond U+FFFF, byte-order marks and bytes
    cut inside a character."""
    body = ending.join(parts) + (ending if last else b"")
    path = tmp_path_factory.mktemp("calls") / "c.jsonl"
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + body)
    by_line, whole, streamed = _read_three_ways(path)
    assert by_line == whole
    assert by_line == streamed


def test_the_shared_tool_calls_decoded_apart() -> None:
    shared = ROOT.parent / "shared" / "data"
    for name in ("tool_calls.jsonl", "tool_lookups.jsonl"):
        if not (shared / name).is_file():
            pytest.skip(f"no {shared / name}")
        by_line, whole, _ = _read_three_ways(shared / name)
        assert by_line == whole
        assert by_line[0] == "ok"
