"""The compiled adds' active words as bits (``knobs._ACTIVE_BITS``, branch mainjob7): a
new ASCII token's 1/2-character substrings tested against bits built from the
vocabulary's ``_active`` set once a call, instead of made and looked up in the set.
Both sides must leave the same structures in the same orders (ids, gram lists, ``_sub``
sets, posting lists), with the fast acquire on and off, single and batched adds, active
words made between adds (some that nothing contains, so their key is fresh), words that
are not ASCII, and keys of ``_active`` that are ``str`` subclasses (the bits are not
used then)."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples
from .test_acquire_fast import _ordered, add_in_parts, assert_same_sides

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: ASCII letters (one of them DEL, the top of the bits' range) and one that is not, so
#: tokens share grams and short words.
_ALPHABET = "abc\x7fé"
_TOKENS = st.text(_ALPHABET, min_size=1, max_size=9)
_SHORT = st.text(_ALPHABET + "z", min_size=1, max_size=2)


class _Str(str):
    """A str subclass, as a key of ``_active`` (the bits then stand aside)."""

    __slots__ = ()


def _run(
    lows: list[str],
    activations: list[tuple[int, str]],
    cuts: list[int],
    bits: bool,
    fast: bool,
    odd_key: bool,
) -> tuple[dict[str, array[int]], SubstringVocab]:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    if odd_key:
        vocab._active.add(_Str("zz"))  # contained by no token: only the bits notice it
    cache = ccore.token_cache()
    old = wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST
    wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST = bits, fast
    try:
        add_in_parts(post, vocab, cache, lows, activations, cuts)
    finally:
        wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST = old
    return post, vocab


@core
@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.lists(_TOKENS, max_size=6), max_size=14),
    st.lists(st.tuples(st.integers(0, 14), _SHORT), max_size=5),
    st.lists(st.integers(1, 5), max_size=6),
    st.booleans(),
    st.booleans(),
)
def test_active_bits_leave_the_same_structures(
    token_lists: list[list[str]],
    activations: list[tuple[int, str]],
    cuts: list[int],
    fast: bool,
    odd_key: bool,
) -> None:
    lows = [" ".join(tokens) for tokens in token_lists]
    sides: dict[bool, Any] = {}
    for bits in (False, True):
        post, vocab = _run(lows, activations, cuts, bits, fast, odd_key)
        if not odd_key:
            vocab._check()
        sides[bits] = (post, vocab)
    assert_same_sides(sides)


@core
@pytest.mark.parametrize("fast", [False, True])
def test_active_bits_examples(fast: bool) -> None:
    """Active words of one and two characters, one at the bits' top (DEL), one that no
    token contains (its key fresh when a token brings it), one not ASCII: a new token's
    id in each list it belongs to, once, and in no other."""
    got = []
    for bits in (False, True):
        post: dict[str, array[int]] = {}
        vocab = SubstringVocab()
        cache = ccore.token_cache()
        old = wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST
        wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST = bits, fast
        try:
            ccore.add_text_cached(post, "abab xb\x7f", 0, vocab, cache, 0)
            for word in ("ab", "b", "\x7f", "qz", "é"):
                vocab.lookup(word)
            ccore.add_texts_cached(post, ["zabqzab b\x7fb", "cééc"], 1, vocab, cache, 0)
        finally:
            wo_knobs._ACTIVE_BITS, wo_knobs._ACQUIRE_FAST = old
        vocab._check()
        ids = vocab._ids
        assert vocab._grams["ab"] == [ids["abab"], ids["zabqzab"]]
        assert vocab._grams["qz"] == [ids["zabqzab"]]  # fresh: nothing had it before
        assert vocab._grams["\x7f"] == [ids["xb\x7f"], ids["b\x7fb"]]
        # (a text's new tokens come in its token set's order)
        assert sorted(vocab._grams["b"][-2:]) == sorted([ids["zabqzab"], ids["b\x7fb"]])
        assert vocab._grams.get("é", []) == [ids["cééc"]]
        got.append(_ordered(vocab))
    assert got[0] == got[1]
