"""mainjob13: the main job's process outside its run.

* a word-overlap process (``import actormem``, the command line, a whole swarm) never
  imports BM25, the hybrid scorer, the date parser, the tokenizer or the evaluations,
  while ``actormem.BM25Scorer`` and friends still resolve, and BM25 / hybrid swarms and
  ``min_matched`` on them still work;
* the evaluations' option names written out in ``eval/_cli.py`` match their tables;
* ``read_tool_calls`` gives the same calls, texts, digest and errors with the file read
  once (``_READ_ONCE``) as streamed;
* (the fast exit: ``tests/test_mainjob13_exit.py``)
* the collector paused around the imports (``_PAUSE_GC_ON_IMPORT``) is back on after.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem
from actormem._storage.jsonl import JsonlError
from actormem.agent import _toolcalls
from actormem.eval import _cli as eval_cli

from .realdata import real_file
from .strategies import examples

ROOT = Path(__file__).resolve().parent.parent

LAZY = (
    "actormem._index.bm25",
    "actormem._index.bm25.index",
    "actormem._index.bm25.scorer",
    "actormem._index.hybrid",
    "actormem._index.dates",
    "actormem._index.tokenize",
    "actormem.eval._locomo",
    "actormem.eval._toolcalls",
    "actormem._engine.bulk",  # only ``actormem import`` stores in bulk (startup25)
)


def _python(code: str, *, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120, check=False,
    )


def test_word_overlap_swarm_imports_no_lazy_module(tmp_path: Path) -> None:
    """A whole word-overlap swarm on tool calls (in memory, then durable), run in a fresh
    interpreter through the command line, leaves every lazy module unimported."""
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 3}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}"}, "result": f"text {i} of file"}) + "\n"
            for i in range(30)
        ),
        encoding="utf-8",
    )
    code = (
        "import sys, json\n"
        "from actormem.cli._main import main\n"
        f"lazy = {LAZY!r}\n"
        "before = [m for m in lazy if m in sys.modules]\n"
        f"a = main(['swarm', '--agents', '3', '--tool-calls', {str(calls)!r}, '--in-memory',"
        "           '--interval', '600'])\n"
        f"b = main(['swarm', '--agents', '3', '--tool-calls', {str(calls)!r},"
        f"           '--path', {str(tmp_path / 'm.db')!r}, '--interval', '600'])\n"
        "after = [m for m in lazy if m in sys.modules]\n"
        "print(json.dumps([before, after, a, b, 'numpy' in sys.modules]))\n"
    )
    done = _python(code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    before, after, a, b, _ = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == []
    assert a == 0
    assert b == 0


def test_import_actormem_leaves_lazy_modules_and_resolves_names() -> None:
    code = (
        "import sys, json\n"
        "import actormem, actormem.cli._main\n"
        f"lazy = {LAZY!r}\n"
        "before = [m for m in lazy if m in sys.modules]\n"
        "from actormem._index.bm25 import BM25Scorer\n"
        "from actormem._index.hybrid import HybridScorer\n"
        "from actormem._index.tokenize import Tokenizer, stop_words\n"
        "import gc\n"
        "same = [actormem.BM25Scorer is BM25Scorer, actormem.HybridScorer is HybridScorer,\n"
        "        actormem.Tokenizer is Tokenizer, actormem.stop_words is stop_words,\n"
        "        all(n in dir(actormem) for n in actormem.__all__), gc.isenabled(),\n"
        "        'import_pause' not in dir(actormem)]\n"
        "print(json.dumps([before, same]))\n"
    )
    done = _python(code)
    assert done.returncode == 0, done.stderr
    before, same = json.loads(done.stdout)
    assert before == []
    assert all(same), same


def test_from_actormem_import_lazy_names() -> None:
    from actormem import BM25Scorer, HybridScorer, Tokenizer, stop_words
    from actormem._index import bm25, hybrid, tokenize

    assert BM25Scorer is bm25.BM25Scorer
    assert HybridScorer is hybrid.HybridScorer
    assert (Tokenizer, stop_words) == (tokenize.Tokenizer, tokenize.stop_words)
    assert actormem.BM25Scorer is BM25Scorer
    with pytest.raises(AttributeError):
        actormem.NoSuchName  # noqa: B018


def test_eval_names_match_their_tables() -> None:
    from actormem.eval import _locomo
    from actormem.eval import _toolcalls as eval_toolcalls

    assert sorted(eval_cli._LOCOMO_RETRIEVERS) == sorted(_locomo.RETRIEVERS)
    assert list(eval_cli._TOOLCALL_SCORERS) == list(eval_toolcalls.SCORERS)
    assert set(eval_cli._SPLITS) == {"all", "tuning", "held-out"}


@pytest.mark.parametrize("scorer", ["bm25", "hybrid-missing-ok"])
def test_swarm_scorers_still_build(scorer: str) -> None:
    from actormem.cli._swarm_args import SCORERS

    if scorer == "bm25":
        from actormem._index.bm25 import BM25Scorer

        assert type(SCORERS["bm25"]()) is BM25Scorer
    else:  # the hybrid needs wordllama: it builds, or says what is missing, as before
        try:
            made = SCORERS["hybrid"]()
        except ImportError:
            return
        from actormem._index.hybrid import HybridScorer

        assert type(made) is HybridScorer


def test_bm25_swarm_runs(tmp_path: Path) -> None:
    from actormem.cli._main import main

    status = main(["swarm", "--agents", "2", "--steps", "30", "--in-memory", "--scorer",
                   "bm25", "--interval", "600", "--json", str(tmp_path / "r.json")])
    assert status == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["accounting"]["lost"] == 0


def test_min_matched_on_bm25_and_word_overlap() -> None:
    """``min_matched`` through the lazily found index kinds: the same hits as a filter
    on the query's terms, for BM25, and taken by word overlap."""
    from actormem import BM25Scorer, MemoryCategory, MemoryEntry, open_memory
    from actormem._index import thresholds

    texts = ["alpha beta", "alpha gamma", "beta gamma delta", "alpha beta gamma"]

    async def run(scorer: object) -> list[list[str]]:
        async with open_memory(scorer=scorer) as memory:  # type: ignore[arg-type]
            for text in texts:
                await memory.store(MemoryEntry.new(MemoryCategory.FACT, text))
            got = []
            for need in (1, 2, 3):
                hits = await memory.retrieve("alpha beta gamma", 10, min_matched=need)
                got.append(sorted(e.memory for e in hits))
            return got

    bm25 = trio.run(run, BM25Scorer())
    assert bm25 == [sorted(texts), ["alpha beta", "alpha beta gamma", "alpha gamma",
                                    "beta gamma delta"], ["alpha beta gamma"]]
    assert trio.run(run, actormem.WordOverlapScorer())[2] == ["alpha beta gamma"]
    assert not thresholds.matches_terms(object())
    assert thresholds.matches_terms(BM25Scorer().make_index())


# ----------------------------------------------------------------- reading tool calls


def _record(rng: random.Random) -> object:
    kind = rng.random()
    if kind < 0.05:
        return [1, 2]  # not an object
    rec: dict[str, object] = {
        "source": rng.choice(["s", "", "tau"]) if rng.random() < 0.1 else "s",
        "episode": f"e{rng.randrange(5)}",
        "step": rng.choice([0, 1, 7, -1, True]) if rng.random() < 0.1 else rng.randrange(9),
        "tool": rng.choice(["read", "grep", "ünï"]),
        "input": rng.choice([{"p": "x", "a": [1, 2.5, None]}, "plain", {"z": "\u2028"}, []]),
        "result": "r" * rng.randrange(0, 700) + rng.choice(["", "é", "\ud83d\ude00"]),
    }
    if rng.random() < 0.3:
        rec["reward"] = rng.choice([1, 0.5, None, "x", 10**400])
    if rng.random() < 0.05:
        del rec["tool"]
    return rec


def _line(rng: random.Random) -> str:
    value = _record(rng)
    text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    roll = rng.random()
    if roll < 0.04:
        return "  " + text  # leading whitespace: json.loads takes it
    if roll < 0.08:
        return text + " \t"
    if roll < 0.10:
        return text + " {}"  # extra data
    if roll < 0.12:
        return text[: len(text) // 2]  # cut short
    if roll < 0.14:
        return "   "
    if roll < 0.15:
        return "[" * 5000 + "]" * 5000  # deeper than the stack allows? (or a list)
    if roll < 0.16:
        return "NaN"
    return text


def _both(path: Path) -> tuple[object, object]:
    out = []
    for knob in (True, False):
        old = _toolcalls._READ_ONCE
        _toolcalls._READ_ONCE = knob
        try:
            calls, digest = _toolcalls.read_tool_calls(path)
            out.append(("ok", [(c, c.text, type(c.reward), type(c.step)) for c in calls], digest))
        except JsonlError as exc:
            out.append(("error", str(exc)))
        finally:
            _toolcalls._READ_ONCE = old
    return out[0], out[1]


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), lines=st.integers(0, 12),
       ending=st.sampled_from(["\n", "\r\n"]), bom=st.booleans(), last=st.booleans())
def test_read_once_matches_streaming(
    tmp_path_factory: pytest.TempPathFactory, seed: int, lines: int, ending: str, bom: bool,
    last: bool,
) -> None:
    rng = random.Random(seed)
    body = ending.join(_line(rng) for _ in range(lines)) + (ending if last else "")
    path = tmp_path_factory.mktemp("calls") / "c.jsonl"
    path.write_bytes(("\ufeff" if bom else "").encode() + body.encode("utf-8", "surrogatepass"))
    fast, slow = _both(path)
    assert fast == slow


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n\n",
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"r"}',
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"\xff"}\n',
        b'\xef\xbb\xbf{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"r"}\n',
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"r"}\n\xef\xbb\xbf{}\n',
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":{"a":NaN},"result":"r"}\n',
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"r"}\x0b\n',
        b'{"a": 1' + b"9" * 5000 + b"}\n",
        b'{"source":"s","episode":"e","step":0,"tool":"t","input":1,"result":"x\\u2028y"}\r\n',
    ],
)
def test_read_once_edge_cases(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.jsonl"
    path.write_bytes(content)
    fast, slow = _both(path)
    assert fast == slow


def test_read_once_missing_and_directory(tmp_path: Path) -> None:
    for path in (tmp_path / "absent.jsonl", tmp_path):
        fast, slow = _both(path)
        assert fast == slow
        assert fast[0] == "error"


def test_read_once_shared_data() -> None:
    path = real_file("tool_lookups.jsonl")
    fast, slow = _both(path)
    assert fast == slow


def test_import_pause_off_and_on() -> None:
    import gc

    from actormem import _util

    for knob in (True, False):
        old = _util._PAUSE_GC_ON_IMPORT
        _util._PAUSE_GC_ON_IMPORT = knob
        try:
            assert gc.isenabled()
            with _util.import_pause():
                assert gc.isenabled() is not knob
            assert gc.isenabled()
        finally:
            _util._PAUSE_GC_ON_IMPORT = old
