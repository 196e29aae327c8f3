"""Branch mainjob11's two changes to the word-overlap core, each against the path before it.

* ``knobs._FIND_BYTES`` (``count_words``' flag 16): a candidate token and a query word of
  one byte per character are compared as bytes in C instead of by ``PyUnicode_Find``:
  the same counts and the same words left, for new words (``long_word_ids``) and for
  memo'd words whose gram list grew (``memo_refresh``), with tokens and words of every
  str kind (ASCII, Latin-1, two and four bytes a character) and near misses (a repeated
  prefix, a word longer than a token, a word at a token's end);
* ``knobs._PROBE_STRS`` (``count_words``' flag 32 with the numbering's token cache): a
  new ASCII word's probe grams taken from the cache's gram table (made by the count when
  no add made it) give the same counts and the same words left as new strs, against
  ``word in token`` too; anything but a token cache or None is refused before counting;
* ``knobs._GRAM_STRS`` (the compiled adds' flag 32): a new ASCII token's 2- and
  3-character substrings taken from the token cache's table of strs leave exactly the
  structures of the path that makes a new str each time, down to every order a reader
  could see, with short words made active between adds, tokens released (gram lists
  rebuilt or deleted) in between, texts that are not ASCII, and enough grams for the
  table to grow and its slots to be shared by several grams;
* ``knobs._SCAN_RARE`` (``kernels.wo_scan``'s ``rare``): a cached match set's new texts
  searched by the word's least common byte give ``word in text``'s groups, for texts
  and words of every kind, the rare byte at a word's start, middle and end, repeated.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples
from .test_acquire_fast import add_in_parts, assert_same_sides

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: ASCII, Latin-1 (``é``: still one byte a character), two bytes (``ā``) and four
#: (``😀``): tokens and words of every kind, few letters so that words match often.
_ALPHABET = "aabé" + "ā😀"
_TOKEN = st.text(_ALPHABET, min_size=1, max_size=10)
_WORD = st.text(_ALPHABET, min_size=3, max_size=7)


def _count(
    find_bytes: bool,
    before: list[str],
    after: list[str],
    words: list[str],
    limit: int,
) -> list[Any]:
    """count_words of ``words`` over a vocabulary of ``before`` (token i in group i),
    then again after ``after`` joined it (the memo brought up to date: its new ids
    verified); each call's result and counts, with ``knobs._FIND_BYTES`` as given."""
    saved = wo_knobs._FIND_BYTES
    wo_knobs._FIND_BYTES = find_bytes
    try:
        vocab = SubstringVocab()
        post: dict[str, array[int]] = {}
        memo: list[Any] = [{}, {}, 0]
        got: list[Any] = []
        n = 0
        for part in (before, after):
            for tok in part:
                if tok in post:
                    post[tok].append(n)
                else:
                    vocab.acquire(tok)
                    post[tok] = array("i", [n])
                n += 1
            for use_memo in (memo, None):
                counts = np.zeros(max(n, 1), np.uint8)
                result = ccore.count_words(
                    words, [1] * len(words), 0, 10_000, limit, vocab, post, {}, {}, counts, n,
                    0, use_memo, 0,
                )  # fmt: skip
                got.append((result, counts.tolist()))
        return got
    finally:
        wo_knobs._FIND_BYTES = saved


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_TOKEN, max_size=24),
    st.lists(_TOKEN, max_size=12),
    st.lists(_WORD, min_size=1, max_size=8, unique=True),
    st.sampled_from([3, 8, 64]),
)
def test_find_bytes_counts_as_pyunicode_find(
    before: list[str], after: list[str], words: list[str], limit: int
) -> None:
    assert _count(True, before, after, words, limit) == _count(
        False, before, after, words, limit
    )


def test_find_bytes_examples() -> None:
    """Near misses the byte loop must get right (a repeated prefix, a word longer than a
    token, a word at a token's end, other kinds), against ``word in token``."""
    before = ["aaab", "aab", "xaabx", "aa", "éaab", "aabé", "āaab", "baa", "aaba"]
    after = ["qaab", "aaaab", "aabaab", "aaab"]
    words = ["aab", "aaab", "aabé", "āaab", "xaabxy", "aabaab", "abaa"]
    got = _count(True, before, after, words, 64)
    assert got == _count(False, before, after, words, 64)
    sides = [before, before, before + after, before + after]
    for (result, counts), toks in zip(got, sides, strict=True):
        assert result == (len(words), [])
        assert counts == [sum(w in t for w in words) for t in toks]
    assert got[2][1][-1] == 2  # the second "aaab": "aab" and "aaab"


def test_find_bytes_flag_is_accepted_and_the_next_refused() -> None:
    from actormem._index import _cwordoverlap as c

    args: tuple[Any, ...] = (["aab"], [1], 0, 100, 10, {"aab": [0]}, {0: "xaab"}, {}, 8,
            {"xaab": array("i", [1])}, {}, {}, np.zeros(4, np.uint8), 4, 0, None, 0, 1)  # fmt: skip
    for flags in (16, 31, 63, 127, 255, 511):  # (64: mainjob23's; 128: 27's; 256: 45's)
        assert c.count_words(*args, flags) == (1, [])
    assert c.count_words(*args, 511, ccore.token_cache()) == (1, [])
    with pytest.raises(ValueError, match="unknown flags"):
        c.count_words(*args, 512)


def _probe_side(
    probe_strs: bool, lows: list[str], more: list[str], words: list[str], fresh_cache: bool
) -> list[Any]:
    """count_words of ``words`` over the texts ``lows`` added through a token cache, with
    the memo, twice (``more`` added between: memo'd words brought up to date, their new
    ids verified), through that cache (or, with ``fresh_cache``, one no add used: its
    gram table made by the count) with ``knobs._PROBE_STRS`` as given; the results and
    counts of each call."""
    saved = wo_knobs._PROBE_STRS
    wo_knobs._PROBE_STRS = probe_strs
    try:
        post: dict[str, array[int]] = {}
        vocab = SubstringVocab()
        cache = ccore.token_cache()
        memo: list[Any] = [{}, {}, 0]
        got: list[Any] = []
        n = 0
        for part in (lows, more):
            ccore.add_texts_cached(post, part, n, vocab, cache, 0)
            n += len(part)
            counts = np.zeros(max(n, 1), np.uint8)
            result = ccore.count_words(
                words, [1] * len(words), 0, 10_000, 64, vocab, post, {}, {}, counts, n, 0,
                memo, 0, ccore.token_cache() if fresh_cache else cache,
            )  # fmt: skip
            got.append((result, counts[:n].tolist()))
        vocab._check()
        return got
    finally:
        wo_knobs._PROBE_STRS = saved


_PTEXT = st.lists(st.text("abcdeé", min_size=1, max_size=9), max_size=6).map(" ".join)


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(_PTEXT, max_size=12),
    st.lists(_PTEXT, max_size=6),
    st.lists(st.text("abcdeé", min_size=3, max_size=8), min_size=1, max_size=8, unique=True),
    st.booleans(),
)
def test_probe_strs_count_as_new_strs(
    lows: list[str], more: list[str], words: list[str], fresh_cache: bool
) -> None:
    on = _probe_side(True, lows, more, words, fresh_cache)
    assert on == _probe_side(False, lows, more, words, fresh_cache)
    for (result, counts), toks in zip(on, [lows, lows + more], strict=True):
        assert result == (len(words), [])
        assert counts == [sum(any(w in t for t in low.split()) for w in words) for low in toks]


def test_probe_strs_refuse_what_is_not_a_token_cache() -> None:
    vocab = SubstringVocab()
    vocab.acquire("abcd")
    post = {"abcd": array("i", [0])}
    counts = np.zeros(1, np.uint8)

    def call(tokcache: Any) -> object:
        return ccore.count_words(
            ["abcd"], [1], 0, 100, 10, vocab, post, {}, {}, counts, 1, 0, [{}, {}, 0], 0,
            tokcache,
        )  # fmt: skip

    with pytest.raises(TypeError, match="token_cache"):
        call({})
    import datetime

    from actormem._index import _cwordoverlap as c

    capsule = datetime.datetime_CAPI  # a capsule of another name
    with pytest.raises(ValueError, match="incorrect name"):
        c.count_words(["abcd"], [1], 0, 100, 10, vocab._grams, vocab._items, {}, 8, post, {},
                      {}, counts, 1, 0, None, 0, 1, 32, capsule)  # fmt: skip
    assert counts.tolist() == [0]  # refused before anything was counted
    assert call(None) == (1, [])
    assert counts.tolist() == [1]


#: Twelve letters: ~1,700 possible 3-grams, enough to grow the table past 1,024 slots
#: and to put several grams in one slot; ``é`` makes some texts not ASCII.
_LETTERS = "abcdefghijkl"
_GTOKEN = st.text(_LETTERS + "é", min_size=1, max_size=12)
_SHORT = st.text(_LETTERS[:4], min_size=1, max_size=2)


def _add_side(
    gram_strs: bool,
    lows: list[str],
    activations: list[tuple[int, str]],
    cuts: list[int],
    released: list[int],
    again: list[str],
) -> tuple[dict[str, array[int]], SubstringVocab]:
    saved = wo_knobs._GRAM_STRS
    wo_knobs._GRAM_STRS = gram_strs
    try:
        post: dict[str, array[int]] = {}
        vocab = SubstringVocab()
        cache = ccore.token_cache()
        add_in_parts(post, vocab, cache, lows, activations, cuts)
        # Tokens released (the owner's purge: gram lists rebuilt or deleted, keys gone),
        # then more texts through the same cache: grams come back as new keys.
        toks = list(post)
        for i in released:
            if toks:
                tok = toks[i % len(toks)]
                if tok in post:
                    del post[tok]
                    vocab.release(tok)
                    ccore.cache_forget(cache, post, tok, 1)
        ccore.add_texts_cached(post, again, len(lows), vocab, cache, 1)
        for _, word in activations:
            vocab.lookup(word)
        vocab._check()
        return post, vocab
    finally:
        wo_knobs._GRAM_STRS = saved


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(st.lists(_GTOKEN, max_size=8).map(" ".join), max_size=30),
    st.lists(st.tuples(st.integers(0, 30), _SHORT), max_size=4),
    st.lists(st.integers(1, 6), max_size=6),
    st.lists(st.integers(0, 1000), max_size=6),
    st.lists(st.lists(_GTOKEN, max_size=8).map(" ".join), max_size=8),
)
def test_gram_strs_leave_the_same_structures(
    lows: list[str],
    activations: list[tuple[int, str]],
    cuts: list[int],
    released: list[int],
    again: list[str],
) -> None:
    sides = {on: _add_side(on, lows, activations, cuts, released, again) for on in (False, True)}
    assert_same_sides(sides)


def test_gram_strs_many_grams_and_shared_slots() -> None:
    """Every 3-gram of twelve letters (1,728, more than the first table's 1,024 slots:
    it grows, and slots are shared), as tokens of several texts, twice: the same
    structures with the table and without; the table's strs are the dict's keys."""
    grams = [a + b + c for a in _LETTERS for b in _LETTERS for c in _LETTERS]
    lows = [" ".join(grams[i : i + 50]) for i in range(0, len(grams), 50)]
    lows += [" ".join(g + "x" + g for g in grams[i : i + 40]) for i in range(0, 400, 40)]
    sides = {on: _add_side(on, lows, [(3, "ab"), (30, "c")], [1, 2, 5], [7, 70], lows[:3])
             for on in (False, True)}  # fmt: skip
    assert_same_sides(sides)
    vocab = sides[True][1]
    assert len(vocab._grams) > 1728
    assert set(vocab._sub["ab"]) >= {"abc", "cab"}


def test_gram_strs_flag_range() -> None:
    mod: Any = kernels.wo_core()
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    assert mod.add_text_cached(post, "abcd bcde", 0, vocab, cache, 0, 63) == 2
    with pytest.raises(ValueError, match="0 to 63"):
        mod.add_text_cached(post, "cdef", 1, vocab, cache, 0, 64)
    assert "cdef" not in post
    assert set(vocab._grams) == {"abc", "bcd", "cde"}


#: Texts and words of every str kind, with the bytes ``byte_rank`` ranks rare (``q``,
#: ``{``) and common (`` ``, ``e``), so that a word's rarest byte falls at its start, end
#: and middle, and repeats in the text.
_SCAN_CHARS = "eeq{ a" + "\xe9\xff" + "\u0101" + "\U0001f600"


_kernels = pytest.mark.skipif(not kernels.AVAILABLE, reason="the index kernels are not built")


@_kernels
@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.text(_SCAN_CHARS, max_size=40), min_size=1, max_size=12),
    st.text(_SCAN_CHARS, max_size=5),
    st.integers(0, 20),
)
def test_scan_rare_is_word_in_text(recent: list[str], word: str, lo: int) -> None:
    mod = len(recent)
    hi = lo + mod  # from any place in the ring of texts, round it once
    want = [g for g in range(lo, hi) if word in recent[g % mod]]
    assert kernels.wo_scan(recent, lo, hi, mod, word, True) == want
    assert kernels.wo_scan(recent, lo, hi, mod, word, False) == want


@_kernels
def test_scan_rare_examples() -> None:
    recent = ["aqe", "eqa", "qqqaq", "e q", "", "aeqe aeq", "\xe9aq", "\u0101aq", "aq"]
    for word in ["aq", "eq", "qa", "qq", "aeq", "q", "", "aqe ", "\xe9aq", "\u0101a", "aqaq"]:
        want = [g for g in range(len(recent)) if word in recent[g]]
        assert kernels.wo_scan(recent, 0, len(recent), len(recent), word, True) == want
