"""The active words' bits (``knobs._ACTIVE_BITS``) are kept in the token cache across
adds while ``_active`` is unchanged: rebuilt for every text (O(len(_active)) each),
they cost more than the set lookups they replace once ``_active`` holds a few hundred
words (a text with a new token then took ~70% longer to add at 1,296 active words).
They are built again when ``_active`` grows or is another set."""

from __future__ import annotations

import itertools
import string
from array import array

import pytest

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
def test_the_bits_are_built_once_while_active_is_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wo_knobs, "_ACTIVE_BITS", True)
    builds = kernels._wo._active_bits_builds
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    for a, b in itertools.islice(itertools.product(string.ascii_lowercase, repeat=2), 300):
        vocab.lookup(a + b)
    start = builds()
    for i in range(5):
        ccore.add_text_cached(post, f"token{i} other{i}", i, vocab, cache, 0)
    ccore.add_texts_cached(post, [f"more{i} batch{i}" for i in range(5)], 5, vocab, cache, 0)
    assert builds() - start == 1
    vocab.lookup("zz")  # _active grows: built again, and the new word is seen
    ccore.add_text_cached(post, "fizzy", 10, vocab, cache, 0)
    assert builds() - start == 2
    assert vocab._grams["zz"] == [vocab._ids["fizzy"]]
    vocab._check()
