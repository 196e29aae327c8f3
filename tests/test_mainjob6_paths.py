"""The main job's cheaper paths (branch ``mainjob6``), each against the path before it:
a query lowered once and counted in C (``knobs._QUERY_ONCE``), ``count_words`` leaving
the per-word type tests to C (``knobs._LEAN_WORD_CHECKS``), memory lines kept by text
(``_hooks._LINE_MEMO``) and entries copied by the slots' setters
(``_entry._ACCESS_SETTERS``). Old and new must give the same results."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

from actormem import _entry
from actormem._entry import MemoryEntry, with_access
from actormem._index import kernels
from actormem._index.scoring import drain
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem.agent import _hooks

from .strategies import entries, examples, run_machine
from .test_memo_absent import LATE, AbsentAndNot
from .test_wordoverlap_bits import memo_fixture, small_knobs  # noqa: F401

needs_core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


def test_lowering_commutes_with_stripping_for_every_code_point() -> None:
    # What `_QUERY_ONCE` relies on: `query.strip().lower() == query.lower().strip()`
    # holds when no code point lowers to or from whitespace.
    for i in range(sys.maxunicode + 1):
        c = chr(i)
        low = c.lower()
        if c.isspace():
            assert low == c, hex(i)
        else:
            assert not any(x.isspace() for x in low), hex(i)


@given(st.text(alphabet=st.sampled_from([" ", "\t", "\u2028", "\u0130", "A", "b", "\u1e9e"])))
@settings(max_examples=examples(200))
def test_strip_lower_equal(text: str) -> None:
    assert text.lower().strip() == text.strip().lower()


#: Queries with upper case, odd whitespace and a tag ("deploy the cat") inside.
_ODD = ["Deploy", "THE", "cat", "\u0130", "\tcat ", " deploy the cat ", "\u2028", "Zebra"]


class QueryOnceAndNot(AbsentAndNot):
    """Two memories, the same operations: one lowering each query once and counting its
    words in C (``knobs._QUERY_ONCE``), the other as before (the reference)."""

    KNOB = "_QUERY_ONCE"

    @rule(
        words=st.lists(st.sampled_from([*LATE, *_ODD]), min_size=0, max_size=8),
        sep=st.sampled_from([" ", "  ", "\t", "\n"]),
        limit=st.sampled_from([1, 3, 1000]),
    )
    def query_odd(self, words: list[str], sep: str, limit: int) -> None:
        query = sep + sep.join(words) + sep
        got = {}
        for on, state in self._each():
            steps = state.index.top_k_steps(state.view(), query, limit, None)  # type: ignore[attr-defined]
            got[on] = [(score, rec.seq) for score, rec in drain(steps)]
        assert got[True] == got[False], query


class LeanChecksAndNot(AbsentAndNot):
    """The same machine: one memory's ``count_words`` leaves the word type tests to C
    (``knobs._LEAN_WORD_CHECKS``), the other makes them in Python too (the reference)."""

    KNOB = "_LEAN_WORD_CHECKS"


@needs_core
@pytest.mark.parametrize("machine", [QueryOnceAndNot, LeanChecksAndNot])
def test_old_and_new_agree(machine: type[AbsentAndNot]) -> None:
    run_machine(machine, 50, 25)


@needs_core
@pytest.mark.usefixtures("small_knobs")
def test_query_once_agrees_in_small_slices() -> None:
    run_machine(QueryOnceAndNot, 20, 25)


@needs_core
@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize(
    ("words", "mults"),
    [(["deploy", 3], [1, 1]), (["deploy", "cat"], [1, True]), (["cat", b"x"], [1, 2])],
)
def test_bad_words_refused_either_way(
    lean: bool, words: list[object], mults: list[object], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wo_knobs, "_LEAN_WORD_CHECKS", lean)
    vocab = SubstringVocab()
    counts = np.zeros(8, np.uint8)
    with pytest.raises(TypeError, match="words must be str and mults int"):
        ccore.count_words(words, mults, 0, 1000, 100, vocab, {}, {}, {}, counts, 4)  # type: ignore[arg-type]


@needs_core
@pytest.mark.parametrize("lean", [False, True])
def test_bad_multiplicities_refused_either_way(lean: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_LEAN_WORD_CHECKS", lean)
    counts = np.zeros(8, np.uint8)
    for bad in (-1, 1 << 31, 1 << 70):
        with pytest.raises(ValueError, match="multiplicities"):
            ccore.count_words(["cat"], [bad], 0, 1000, 100, SubstringVocab(), {}, {}, {}, counts, 4)


class _Text(str):
    """A str subclass whose lines are not memoised (it could redefine == and hash)."""


@given(texts=st.lists(st.text(max_size=40) | st.sampled_from(["relevant memory: x", "a\\b\nc"])))
@settings(max_examples=examples(200))
def test_memory_lines_equal_with_and_without_the_memo(texts: list[str]) -> None:
    saved = _hooks._LINE_MEMO, _hooks._LINE_MEMO_SIZE, _hooks._LINE_MEMO_CHARS
    try:
        _hooks._LINE_MEMO = False
        want = [_hooks.memory_line(t) for t in texts]
        # Emptied often; texts over 20 code points not kept.
        _hooks._LINE_MEMO, _hooks._LINE_MEMO_SIZE, _hooks._LINE_MEMO_CHARS = True, 3, 20
        _hooks._lines.clear()
        for _ in range(2):  # misses, then hits
            assert [_hooks.memory_line(t) for t in texts] == want
            assert [_hooks.memory_line(_Text(t)) for t in texts] == want
        assert len(_hooks._lines) <= 3
        assert all(type(k) is str and len(k) <= 20 for k in _hooks._lines)
        block = _hooks.memory_block(texts)
        _hooks._LINE_MEMO = False
        assert block == _hooks.memory_block(texts)
    finally:
        _hooks._LINE_MEMO, _hooks._LINE_MEMO_SIZE, _hooks._LINE_MEMO_CHARS = saved
        _hooks._lines.clear()


@given(
    entry=entries(),
    count=st.integers(0, 1 << 40),
    last=st.none() | st.just(datetime(2026, 12, 5, tzinfo=UTC)),
    expires=st.none() | st.just(datetime(2027, 1, 1, tzinfo=UTC) + timedelta(seconds=1)),
)
@settings(max_examples=examples(200))
def test_with_access_equal_both_ways(
    entry: MemoryEntry, count: int, last: datetime | None, expires: datetime | None
) -> None:
    saved = _entry._ACCESS_SETTERS
    got = {}
    try:
        for on in (False, True):
            _entry._ACCESS_SETTERS = on
            got[on] = with_access(entry, count, last, expires)
    finally:
        _entry._ACCESS_SETTERS = saved
    for name in _entry._ENTRY_FIELDS:
        assert getattr(got[True], name) == getattr(got[False], name), name
    assert got[True] == got[False]
    assert got[True].access_count == count
    assert got[True].expires_at == (entry.expires_at if expires is None else expires)
