"""count_words refuses a word that is not a str (or a multiplicity that is not an int)
before it counts any word, with knobs._LEAN_WORD_CHECKS on too: the C loop tested each
word as it came to it, so the words before the bad one were already counted into the
caller's array and kept in its memo when the TypeError came (the wrapper's test, which
the knob skips, refused the call before any of it)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
@pytest.mark.parametrize("lean", [False, True])
@pytest.mark.parametrize(
    ("words", "mults"),
    [(["alpha", b"x"], [1, 1]), (["alpha", "play"], [1, True]), (["play", "alpha", 3], [1, 1, 1])],
)
def test_a_refused_call_counts_nothing(
    lean: bool, words: list[Any], mults: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wo_knobs, "_LEAN_WORD_CHECKS", lean)
    vocab: SubstringVocab = SubstringVocab()
    post: dict[str, Any] = {}
    for gid, text in enumerate(["player plays", "display", "alpha one"]):
        ccore.add_text(post, text, gid, vocab)
    counts = np.zeros(64, np.uint8)
    memo: list[Any] = [{}, {}, 0]
    with pytest.raises(TypeError, match="words must be str and mults int"):
        ccore.count_words(words, mults, 0, 1000, 100, vocab, post, {}, {}, counts, 3, 0, memo)
    assert not counts.any()
    assert memo == [{}, {}, 0]
    assert not vocab._cache
