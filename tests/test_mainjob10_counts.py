"""``count_words`` adding a word's match set four numbers a step (``knobs._ADD_UNROLLED``,
count_words' flag 8) against one number a step (the path before it): the same counts in
byte, 16-bit and 64-bit counts, wrap-around included, with and without the word memo,
over sets of every length mod 4; and whole memories retrieving the same with the knob on
and off (the machine of ``tests/test_wordoverlap_bits.py``)."""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples, run_machine
from .test_wordoverlap_bits import BitsAndBytes

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

WORDS = ["cat", "dog", "cow", "catalog", "dogma", "cowboy", "scatter", "bulldog"]
DTYPES = [np.uint8, np.uint16, np.int64]


def _vocab_and_post(
    tokens: dict[str, list[int]],
) -> tuple[SubstringVocab, dict[str, array[int]]]:
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}
    for tok, groups in tokens.items():
        vocab.acquire(tok)
        post[tok] = array("i", groups)
    return vocab, post


def _count(
    unrolled: bool,
    tokens: dict[str, list[int]],
    words: list[str],
    mults: list[int],
    dtype: Any,
    n: int,
    memo: list[Any] | None,
    start: np.ndarray[Any, Any],
) -> tuple[np.ndarray[Any, Any], tuple[int, list[int]]]:
    saved = wo_knobs._ADD_UNROLLED
    wo_knobs._ADD_UNROLLED = unrolled
    try:
        vocab, post = _vocab_and_post(tokens)
        counts = start.astype(dtype)
        got = ccore.count_words(
            words, mults, 0, 1 << 20, 1 << 12, vocab, post, {}, {}, counts, n, 0, memo, 0
        )
        if memo is not None:  # again, from the memo's kept sets
            got = ccore.count_words(
                words, mults, 0, 1 << 20, 1 << 12, vocab, post, {}, {}, counts, n, 0, memo, 0
            )
        return counts, got
    finally:
        wo_knobs._ADD_UNROLLED = saved


@settings(max_examples=examples(150), deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from(DTYPES),
    with_memo=st.booleans(),
)
def test_unrolled_counts_equal_the_loop(data: st.DataObject, dtype: Any, with_memo: bool) -> None:
    n = data.draw(st.integers(1, 300), label="n")
    tokens = data.draw(
        st.dictionaries(
            st.sampled_from(WORDS),
            # Numbers up to n + 20: those at or above n are not counted; duplicates across
            # tokens are counted once per word (lengths of every residue mod 4).
            st.lists(st.integers(0, n + 20), min_size=0, max_size=40, unique=True).map(sorted),
            min_size=1,
        ),
        label="tokens",
    )
    words = data.draw(st.lists(st.sampled_from(WORDS), min_size=1, unique=True), label="words")
    mults = data.draw(
        st.lists(st.integers(0, 300), min_size=len(words), max_size=len(words)), label="mults"
    )
    start = np.array(
        data.draw(st.lists(st.integers(0, 255), min_size=n, max_size=n), label="start")
    )
    got = {
        on: _count(on, tokens, words, mults, dtype, n, [{}, {}, 0] if with_memo else None, start)
        for on in (True, False)
    }
    assert got[True][1] == got[False][1]
    assert got[True][0].dtype == got[False][0].dtype
    assert got[True][0].tolist() == got[False][0].tolist()


def test_unrolled_counts_wrap_like_the_loop() -> None:
    # Byte counts wrap at 256 the same way; a set of 4k + 1, + 2, + 3 numbers (the
    # tail after the four-number steps).
    for size in range(0, 13):
        groups = list(range(0, 2 * size, 2))
        tokens = {"catalog": groups, "scatter": groups[::3]}
        start = np.full(30, 250)
        got = [_count(on, tokens, ["cat"], [9], np.uint8, 30, None, start) for on in (True, False)]
        assert got[0][0].tolist() == got[1][0].tolist()
        expected = [(250 + 9 * (g in groups)) % 256 for g in range(30)]
        assert got[0][0].tolist() == expected


def test_flag_8_is_refused_nowhere_and_512_is() -> None:
    from actormem._index import _cwordoverlap as c

    counts = np.zeros(8, np.uint8)
    args: tuple[Any, ...] = (["cat"], [2], 0, 100, 10, {"cat": [0]}, {0: "cat"}, {}, 8,
            {"cat": array("i", [1, 2, 3, 4, 5])}, {}, {}, counts, 8, 0, None, 0, 1)  # fmt: skip
    assert c.count_words(*args, 8) == (1, [])
    assert counts.tolist() == [0, 2, 2, 2, 2, 2, 0, 0]
    with pytest.raises(ValueError, match="unknown flags"):
        c.count_words(*args, 512)  # 16, 32: mainjob11's; 64: 23's; 128: 27's; 256: 45's


class UnrolledAndNot(BitsAndBytes):
    """Two memories, the same operations, counting in bytes: one adding a match set
    four numbers a step (``knobs._ADD_UNROLLED``), one a number a step (the reference)."""

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        saved = (wo_knobs._ADD_UNROLLED, ccore.BITS)
        for on, state in self.states.items():
            wo_knobs._ADD_UNROLLED = on
            ccore.BITS = False
            try:
                yield on, state
            finally:
                wo_knobs._ADD_UNROLLED, ccore.BITS = saved


def test_memories_retrieve_the_same() -> None:
    run_machine(UnrolledAndNot, 20, 20)
