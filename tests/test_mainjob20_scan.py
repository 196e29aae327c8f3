"""Branch mainjob20's changes to a cached match set's extension, each against the path
before it.

* ``knobs._SCAN_WIDE`` (``kernels.wo_scan``'s ``wide``): a word of one byte per
  character searched in texts of two or four bytes per character in C gives ``word in
  text``'s groups, for texts and words of every kind, the rare byte at a word's start,
  middle and end, repeated, and every place of an 8-unit block (the SSE2 loop and its
  tail);
* ``knobs._SCAN_MARK`` (``kernels.wo_scan_mark``): the groups found set to 1 in a dense
  set in place, and nothing else written; a refused call writes nothing; seeded
  workloads give the same hits and scores with either knob on or off, and reach the
  marking path.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index import kernels
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="the index kernels are not built")

#: Bytes ``byte_rank`` ranks rare (``q``, ``{``) and common (`` ``, ``e``), Latin-1
#: (one byte a character), two bytes (``ā``, and ``ű``, whose low byte is ``q``'s) and
#: four (``😀``).
_CHARS = "eeq{ a" + "\xe9\xff" + "\u0101\u0171" + "\U0001f600"


def _want(recent: list[str], lo: int, hi: int, word: str) -> list[int]:
    return [g for g in range(lo, hi) if word in recent[g % len(recent)]]


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.text(_CHARS, max_size=40), min_size=1, max_size=12),
    st.text(_CHARS, max_size=5),
    st.integers(0, 20),
)
def test_scan_wide_is_word_in_text(recent: list[str], word: str, lo: int) -> None:
    mod = len(recent)
    hi = lo + mod  # from any place in the ring of texts, round it once
    want = _want(recent, lo, hi, word)
    for rare, wide in ((True, True), (True, False), (False, True), (False, False)):
        assert kernels.wo_scan(recent, lo, hi, mod, word, rare, wide) == want
        dense = np.zeros(hi + 3, np.uint8)
        assert kernels.wo_scan_mark(recent, lo, hi, mod, word, rare, wide, dense) == len(want)
        assert np.flatnonzero(dense).tolist() == want


def test_scan_wide_every_place_of_a_block() -> None:
    """The word at every offset of texts of two and four bytes a character, 1 to 40
    units long (the 8-unit loop, its tail, a match that starts in one block and ends
    in the next), and one unit short of a match at each place."""
    for filler in ("\u0101", "\U0001f600", "\u0171"):
        for word in ("q", "aq", "qe{", "eeeq", "q{ae\xe9"):
            for size in range(len(word), 41):
                for at in range(size - len(word) + 1):
                    text = filler * at + word + filler * (size - at - len(word))
                    near = filler * at + word[:-1] + filler * (size - at - len(word) + 1)
                    recent = [text, near, filler * size]
                    got = kernels.wo_scan(recent, 0, 3, 3, word, True, True)
                    assert got == _want(recent, 0, 3, word) == [0], (filler, word, at)


def test_scan_mark_writes_only_what_it_finds() -> None:
    recent = ["\u0101aq", "zz", "aq", "\U0001f600aq"]
    dense = np.full(10, 7, np.uint8)
    dense[1] = 0
    assert kernels.wo_scan_mark(recent, 4, 8, 4, "aq", True, True, dense) == 3
    assert dense.tolist() == [7, 0, 7, 7, 1, 7, 1, 1, 7, 7]


def test_scan_mark_refusals_write_nothing() -> None:
    recent = ["aq", "aq"]
    with pytest.raises(TypeError):
        kernels.wo_scan_mark(("aq",), 0, 1, 1, "aq", True, True, np.zeros(2, np.uint8))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kernels.wo_scan_mark(recent, 0, 1, 1, b"aq", True, True, np.zeros(2, np.uint8))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        kernels.wo_scan_mark(recent, 0, 1, 1, "aq", True, True, bytearray(2))  # type: ignore[arg-type]
    for bad in (
        np.zeros(2, np.int32),
        np.zeros(1, np.uint8),
        np.zeros((2, 2), np.uint8),
        np.zeros(4, np.uint8)[::2],
    ):
        with pytest.raises(ValueError, match="dense"):
            kernels.wo_scan_mark(recent, 0, 2, 2, "aq", True, True, bad)
        assert not bad.any()
    frozen = np.zeros(2, np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        kernels.wo_scan_mark(recent, 0, 2, 2, "aq", True, True, frozen)
    with pytest.raises(ValueError, match="out of range"):
        kernels.wo_scan_mark(recent, 1, 0, 2, "aq", True, True, np.zeros(2, np.uint8))
    with pytest.raises(ValueError, match="out of range"):
        kernels.wo_scan_mark(recent, 0, 2, 3, "aq", True, True, np.zeros(2, np.uint8))
    # The compiled function checks the texts before it writes any byte.
    dense = np.zeros(3, np.uint8)
    with pytest.raises(TypeError):
        kernels._kernels().wo_scan_mark(["aq", "aq", 1], 0, 3, 3, "aq", True, True, dense)
    assert not dense.any()


_WORDS = ["deploy", "blue", "the", "then", "rust", "go", "a", "ab", "é", "x.y", "dépl", "ā"]
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


async def _run(seed: int, ops: int) -> list[Any]:
    rng = random.Random(seed)
    out: list[Any] = []
    # A small budget: words of a few postings are cached, then extended by later stores'
    # texts. Queries of 32 words or more take the byte counts (dense sets of a byte per
    # group), fewer the bit planes.
    scorer = WordOverlapScorer(essential_budget=rng.choice([2, 8]))
    async with open_memory(clock=lambda: _NOW, scorer=scorer) as memory:
        for _ in range(ops):
            if rng.random() < 0.7:
                words = rng.choices(_WORDS, k=rng.randint(0, 8))
                if rng.random() < 0.5:
                    words.append(rng.choice(["\u2014", "\u0171", "\U0001f600"]))  # wide texts
                await memory.store(
                    MemoryEntry(
                        id=uuid.UUID(int=rng.getrandbits(128), version=4),
                        category=rng.choice(list(MemoryCategory)),
                        memory=" ".join(words) if words else "the",
                        relevance=rng.choice([0.2, 0.5, 1.0]),
                    )
                )
            else:
                size = rng.choice([rng.randint(0, 12), rng.randint(32, 48)])
                query = " ".join(rng.choices(_WORDS + ["zz"], k=size))
                hits = await memory.retrieve_scored(query, rng.choice([1, 3, 100]))
                out.append([(h.entry.id, h.score) for h in hits])
    return out


def _runs(seed: int, ops: int, marks: list[int]) -> list[list[Any]]:
    real = kernels.wo_scan_mark

    def counted(*args: Any) -> int:
        marks.append(1)
        return real(*args)

    results = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "wo_scan_mark", counted)
        for wide, mark in ((True, True), (False, False), (True, False), (False, True)):
            mp.setattr(wo_knobs, "_SCAN_WIDE", wide)
            mp.setattr(wo_knobs, "_SCAN_MARK", mark)
            results.append(trio.run(_run, seed, ops))
    return results


@settings(max_examples=examples(8), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 150))
def test_same_results_either_way(seed: int, ops: int) -> None:
    on, *others = _runs(seed, ops, [])
    for off in others:
        assert on == off


def test_workload_reaches_the_marking_path() -> None:
    marks: list[int] = []
    on, *others = _runs(7, 400, marks)
    assert marks  # the cached dense sets were extended in place
    assert sum(map(len, on)) > 100
    for off in others:
        assert on == off


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize("start", [0, 1])
def test_lean_mult_checks_refuse_the_same(
    lean: bool, start: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``knobs._LEAN_MULT_CHECKS``: a multiplicity out of ``[0, 2**31)`` anywhere in the
    list (before ``start`` too, after words that would count) is refused with the same
    ``ValueError`` before any word is counted or kept; the limits themselves pass."""
    from actormem._index.substring import SubstringVocab
    from actormem._index.wordoverlap import ccore

    monkeypatch.setattr(wo_knobs, "_LEAN_MULT_CHECKS", lean)
    vocab = SubstringVocab()
    post: dict[str, Any] = {}
    for gid, text in enumerate(["player plays", "display", "alpha one"]):
        ccore.add_text(post, text, gid, vocab)
    for bad in (-1, 1 << 31, 1 << 70, -(1 << 70)):
        for at in (0, 1, 2):
            mults = [1, 2, 3]
            mults[at] = bad
            counts = np.zeros(8, np.uint8)
            memo: list[Any] = [{}, {}, 0]
            with pytest.raises(ValueError, match="multiplicities"):
                ccore.count_words(
                    ["play", "alpha", "one"], mults, start, 1000, 100, vocab, post, {}, {},
                    counts, 3, 0, memo,
                )  # fmt: skip
            assert not counts.any()
            assert memo == [{}, {}, 0]
    counts16 = np.zeros(8, np.uint16)
    got = ccore.count_words(
        ["play", "alpha"], [0, (1 << 31) - 1], 0, 1000, 100, vocab, post, {}, {}, counts16, 3
    )
    assert got == (2, [])
    assert counts16[:3].tolist() == [0, 0, ((1 << 31) - 1) & 0xFFFF]
