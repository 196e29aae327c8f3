"""Review 22b: trying to break mainjob20's C (``wo_scan``'s ``wide``, ``wo_scan_mark``,
``count_words``' multiplicity range in C) against Python's ``word in text``, with
refusals that must write nothing and leave no reference or buffer export behind."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels

from .strategies import examples

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="the index kernels are not built")

#: Rare and common bytes, Latin-1, two-byte characters whose low (or high) byte equals a
#: word byte (U+0171 / U+7100 for 'q', U+0165 / U+6500 for 'e', U+0100), surrogates (lone,
#: and one whose low byte is 'q'), and four-byte characters whose low bytes equal 'q' and 'e'.
_TEXT = (
    "qe{ a\x00\xe9\xff"
    "\u0171\u7100\u0165\u6500\u0100\u01e9"
    "\ud800\udc71\ud871"
    "\U00010071\U00010065\U0001f600\U000100e9"
)
#: Words of one byte a character (what the wide search takes) and a few wide ones.
_WORD = "qe{ a\x00\xe9\xff"


def _want(recent: list[str], lo: int, hi: int, mod: int, word: str) -> list[int]:
    return [g for g in range(lo, hi) if word in recent[g % mod]]


def _scan_mark() -> Any:
    return kernels._kernels().wo_scan_mark


@settings(max_examples=examples(400), deadline=None)
@given(
    st.lists(st.text(_TEXT, max_size=70), min_size=1, max_size=8),
    st.one_of(st.text(_WORD, max_size=6), st.text(_TEXT, max_size=3)),
    st.integers(0, 9),
    st.integers(0, 12),
    st.data(),
)
def test_scan_is_word_in_text(
    recent: list[str], word: str, lo: int, span: int, data: st.DataObject
) -> None:
    mod = data.draw(st.integers(1, len(recent)))
    hi = lo + min(span, mod)  # a ring of mod texts: at most mod groups
    want = _want(recent, lo, hi, mod, word)
    for rare in (True, False):
        for wide in (True, False):
            assert kernels.wo_scan(recent, lo, hi, mod, word, rare, wide) == want
            # Bytes not found keep their value (2 here, as a set's other groups).
            dense = np.full(hi + data.draw(st.integers(0, 3)), 2, np.uint8)
            got = _scan_mark()(recent, lo, hi, mod, word, rare, wide, dense)
            assert got == len(want)
            assert np.flatnonzero(dense == 1).tolist() == want
            assert (dense[dense != 1] == 2).all()


@settings(max_examples=examples(200), deadline=None)
@given(
    st.sampled_from(["\u0171", "\u7100", "\ud871", "\U00010071", "\U0001f600"]),
    st.text("qe{a\xe9", min_size=1, max_size=5),
    st.integers(0, 40),
    st.integers(0, 40),
)
def test_word_at_the_very_end_and_start(filler: str, word: str, before: int, after: int) -> None:
    """A word flush with a wide text's start or end (no code unit after it, the SSE2
    block's last lane), or one unit cut off it: exact-size texts, so ASan sees a read
    past the end."""
    texts = [
        filler * before + word,
        word + filler * after,
        filler * before + word + filler * after,
        filler * before + word[:-1],
        word[1:] + filler * after,
        "".join([filler] * before),  # a fresh str of exactly `before` units
    ]
    want = [g for g, t in enumerate(texts) if word in t]
    for wide in (True, False):
        assert kernels.wo_scan(texts, 0, len(texts), len(texts), word, True, wide) == want
        dense = np.zeros(len(texts), np.uint8)
        assert _scan_mark()(texts, 0, len(texts), len(texts), word, True, wide, dense) == len(want)
        assert np.flatnonzero(dense).tolist() == want


def test_short_texts_every_length() -> None:
    """Texts of 0 to 17 code units, the word everywhere and nowhere, and an empty word."""
    for filler in ("\u0171", "\U00010071"):
        for size in range(18):
            for word in ("", "q", "qq", "q" * size, "q" * (size + 1)):
                texts = ["q" * size + filler, filler + "q" * size, filler * size]
                want = _want(texts, 0, 3, 3, word)
                assert kernels.wo_scan(texts, 0, 3, 3, word, True, True) == want
                dense = np.zeros(3, np.uint8)
                assert _scan_mark()(texts, 0, 3, 3, word, True, True, dense) == len(want)
                assert np.flatnonzero(dense).tolist() == want


def _bad_denses() -> list[Any]:
    frozen = np.zeros(8, np.uint8)
    frozen.flags.writeable = False
    return [
        np.zeros(8, np.int8),
        np.zeros(8, np.bool_),
        np.zeros(8, np.uint16),
        np.zeros((2, 4), np.uint8),
        np.zeros((8, 1), np.uint8),
        np.zeros(16, np.uint8)[::2],
        np.zeros(16, np.uint8)[1::2],
        np.zeros(3, np.uint8),
        np.zeros(0, np.uint8),
        frozen,
        np.zeros((), np.uint8),
        bytes(8),
        memoryview(bytearray(8)).toreadonly(),
        memoryview(bytearray(8)).cast("c"),
        memoryview(bytearray(16)).cast("H"),
        "dense",
        None,
        1,
    ]


@pytest.mark.parametrize("call", ["c", "py"])
def test_refusals_write_nothing(call: str) -> None:
    fn = _scan_mark() if call == "c" else kernels.wo_scan_mark
    recent = ["aq", "\u0171aq", "\U00010071aq"]
    for bad in _bad_denses():
        before = bytes(bad) if isinstance(bad, (np.ndarray, memoryview)) else None
        with pytest.raises((TypeError, ValueError)):
            fn(recent, 3, 6, 3, "aq", True, True, bad)
        if before is not None:
            assert bytes(bad) == before
    bad_args: list[tuple[Any, ...]] = [
        (recent, -1, 6, 3, "aq"),
        (recent, 4, 3, 3, "aq"),
        (recent, 0, 6, 0, "aq"),
        (recent, 0, 6, -3, "aq"),
        (recent, 3, 6, 4, "aq"),
        (recent, 6, 9, 3, "aq"),  # beyond dense
        (recent, 0, 4, 3, "aq"),  # wider than the texts
        (recent, 3, 7, 3, "aq"),
        (recent, 0, 1 << 64, 3, "aq"),
        (recent, -(1 << 64), 6, 3, "aq"),
        (recent, 3, 6, 1 << 64, "aq"),
        (recent, 3.0, 6, 3, "aq"),
        (recent, 3, 6, 3, b"aq"),
        (recent, 3, 6, 3, None),
        (tuple(recent), 3, 6, 3, "aq"),
        (["aq", "aq", b"aq"], 3, 6, 3, "aq"),
        (["aq", "aq", None], 3, 6, 3, "aq"),
        ([], 0, 0, 1, "aq"),
    ]
    for args in bad_args:
        dense = np.zeros(8, np.uint8)
        with pytest.raises((TypeError, ValueError, OverflowError)):
            fn(*args, True, True, dense)
        assert not dense.any(), args
    if call == "c":
        dense = np.zeros(8, np.uint8)
        with pytest.raises(TypeError):
            fn(recent, 3, 6, 3, "aq", True, True)  # no dense
        with pytest.raises(TypeError):
            fn(recent, 3, 6, 3, "aq", True, True, dense, 1)  # one too many
        assert not dense.any()


def test_scan_refusals() -> None:
    fn = kernels._kernels().wo_scan
    recent = ["aq", "\u0171aq"]
    for args in [
        (recent, -1, 2, 2, "aq"),
        (recent, 2, 1, 2, "aq"),
        (recent, 0, 2, 3, "aq"),
        (recent, 0, 2, 0, "aq"),
        (recent, 0, 1 << 64, 2, "aq"),
        (["aq", 3], 0, 2, 2, "aq"),
        (recent, 0, 2, 2, 3),
    ]:
        with pytest.raises((TypeError, ValueError, OverflowError)):
            fn(*args, True, True)


def test_no_reference_or_export_left() -> None:
    """Neither a found nor a refused call keeps a reference to its arguments or a buffer
    export of ``dense`` (a bytearray can still be resized)."""
    recent = ["\u0171aq" * 3, "aq", "x\U00010071"]
    word = "".join(["a", "q"])
    fn = _scan_mark()
    ba = bytearray(6)
    counts = [sys.getrefcount(o) for o in (word, ba, *recent, recent)]
    for _ in range(200):
        assert fn(recent, 3, 6, 3, word, True, True, ba) == 2
        with pytest.raises(ValueError, match="dense"):
            fn(recent, 4, 7, 3, word, True, True, ba)
        with pytest.raises(ValueError, match="texts"):
            fn(recent, 0, 4, 3, word, True, True, ba)
        with pytest.raises(TypeError):
            fn(recent + [1], 0, 4, 4, word, True, True, ba)
        assert kernels.wo_scan(recent, 2, 5, 3, word, True, True) == [3, 4]
        with pytest.raises(ValueError, match="texts"):
            kernels._kernels().wo_scan(recent, 2, 6, 3, word, True, True)
    assert [sys.getrefcount(o) for o in (word, ba, *recent, recent)] == counts
    ba.extend(b"xx")  # no export left
    del ba[:]
    with pytest.raises(ValueError, match="dense"):
        fn(recent, 0, 1, 3, word, True, True, ba)


def test_huge_hi_refused_not_spun() -> None:
    """The compiled wo_scan_mark given a ``hi`` far beyond ``dense`` (and, since tidy23,
    beyond ``lo + mod``: refused for that first) refuses it at once:
    before the fix it walked every group number of ``lo:hi`` testing its text's type
    first (2**62 steps holding the GIL: a hang that no signal interrupts). Run in a
    child so that the defect fails the test instead of hanging the suite."""
    code = (
        "import numpy as np\n"
        "from actormem._index import kernels\n"
        "d = np.zeros(8, np.uint8)\n"
        "try:\n"
        "    kernels._kernels().wo_scan_mark(['aq'], 0, 1 << 62, 1, 'aq', True, True, d)\n"
        "except ValueError as e:\n"
        "    assert ('dense' in str(e) or 'texts' in str(e)) and not d.any(), e\n"
        "    print('refused')\n"
    )
    try:
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("wo_scan_mark spun over lo:hi instead of refusing hi beyond dense")
    assert done.stdout.strip() == "refused", done.stderr


_LIMIT_CHILD = """
import numpy as np
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
vocab = SubstringVocab()
post = {}
for gid, text in enumerate(["player plays", "display", "alpha one"] * 3):
    ccore.add_text(post, text, gid, vocab)
for limit in (1 << 62, (1 << 62) + 1, (1 << 61) + 1, 1 << 32, (1 << 63) - 1):
    counts = np.zeros(16, np.uint8)
    memo = [{}, {}, 0]
    for m in (None, memo):
        try:
            ccore.count_words(
                ["play", "alpha", "one"], [1, 1, 1], 0, 1000, limit, vocab, post, {}, {},
                counts, 9, 0, m,
            )
        except ValueError as e:
            assert "out of range" in str(e), e
            assert not counts.any() and memo == [{}, {}, 0]
        else:
            raise AssertionError(limit)
    # The C function itself, past the wrapper.
    from actormem._index import _cwordoverlap as c
    for m in (None, memo):
        try:
            c.count_words(
                ["play", "alpha", "one"], [1, 1, 1], 0, 1000, limit, vocab._grams,
                vocab._items, {}, 8, post, {}, {}, counts, 9, 0, m, 0, 1, 0,
            )
        except ValueError as e:
            assert "out of range" in str(e), e
            assert not counts.any() and memo == [{}, {}, 0]
        else:
            raise AssertionError(limit)
print("refused")
"""


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
def test_count_words_huge_limit_refused() -> None:
    """count_words' ``limit`` sizes its C buffers (``limit + 1`` pointers and numbers, a
    table of at least ``2 * limit``): a huge one overflowed those sizes into a few bytes
    allocated, then written past (a segfault, or ASan's heap-buffer-overflow), through
    the Python wrapper, which only tested ``limit >= 0``. Refused, nothing written (in a
    child: the defect crashes the interpreter)."""
    done = subprocess.run(
        [sys.executable, "-c", _LIMIT_CHILD], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "refused"
