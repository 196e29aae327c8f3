"""The word memo's absent words (``knobs._MEMO_ABSENT``): a query word that no token
contains is kept in the memo as the 3-gram of it found missing, and answered by that
gram's absence until a token brings it; and the memo without the long-word cache
(``knobs._MEMO_OWN_CACHE``). Old and new paths must give the same results."""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.scoring import drain
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import run_machine
from .test_wordoverlap_bits import BitsAndBytes, memo_fixture, small_knobs  # noqa: F401

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: Words absent at first that stores bring later (whole, or as a part of a longer
#: token), and words no store ever brings.
LATE = ["zebra", "zeb", "bra", "quux", "uux", "tok3x21", "x21", "okx", "qqqq", "qqq", "zzzzzz"]


class AbsentAndNot(BitsAndBytes):
    """Two memories, the same operations: one keeping absent words in the word memo
    (``knobs._MEMO_ABSENT``), one probing them again at every retrieve (the reference).
    Both keep the word memo itself (``ccore.MEMO``)."""

    KNOB = "_MEMO_ABSENT"

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        saved = getattr(wo_knobs, self.KNOB)
        for on, state in self.states.items():
            setattr(wo_knobs, self.KNOB, on)
            try:
                yield on, state
            finally:
                setattr(wo_knobs, self.KNOB, saved)

    @rule(words=st.lists(st.sampled_from(LATE), min_size=1, max_size=4))
    def store_late(self, words: list[str]) -> None:
        self.store(words, False, 0.5)

    @rule(
        words=st.lists(st.sampled_from([*LATE, "deploy", "cat", "the"]), min_size=1, max_size=8),
        limit=st.sampled_from([1, 3, 1000]),
    )
    def query_late(self, words: list[str], limit: int) -> None:
        query = " ".join(words)
        got = {}
        for on, state in self._each():
            steps = state.index.top_k_steps(state.view(), query, limit, None)  # type: ignore[attr-defined]
            got[on] = [(score, rec.seq) for score, rec in drain(steps)]
        assert got[True] == got[False], query


class OwnCacheAndNot(AbsentAndNot):
    """The same machine: one memory's ``count_words`` neither reads nor writes the
    long-word cache (``knobs._MEMO_OWN_CACHE``), the other keeps it (the reference)."""

    KNOB = "_MEMO_OWN_CACHE"


def test_own_cache_leaves_the_long_word_cache_alone() -> None:
    vocab = SubstringVocab()
    post: dict[str, object] = {}
    for i, tok in enumerate(["deploying", "redeploy", "cat"]):
        vocab.acquire(tok)
        post[tok] = array("i", [i])
    for flag, kept in ((True, False), (False, True)):
        vocab._cache.clear()
        wo_knobs._MEMO_OWN_CACHE = flag
        try:
            counts = np.zeros(4, np.uint8)
            got = ccore.count_words(
                ["deploy"], [1], 0, 100, 10, vocab, post, {}, {}, counts, 3, 0, [{}, {}, 0], 0
            )
        finally:
            wo_knobs._MEMO_OWN_CACHE = True
        assert got == (1, [])
        assert counts.tolist() == [1, 1, 0, 0]
        assert ("deploy" in vocab._cache) is kept


@pytest.mark.parametrize("machine", [AbsentAndNot, OwnCacheAndNot])
def test_old_and_new_agree(machine: type[AbsentAndNot]) -> None:
    run_machine(machine, 60, 25)


@pytest.mark.usefixtures("small_knobs")
@pytest.mark.parametrize("machine", [AbsentAndNot, OwnCacheAndNot])
def test_old_and_new_agree_in_small_slices(
    machine: type[AbsentAndNot], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two words per generation: markers and memos turn old and are dropped all the time.
    monkeypatch.setattr(wo_knobs, "_MEMO_WORDS", 2)
    run_machine(machine, 20, 25)


def test_an_absent_word_is_kept_until_a_token_brings_it() -> None:
    state, put, hits = memo_fixture()

    for i in range(10):
        put(i, f"deploy n{i}")
    e = state.index._e  # type: ignore[attr-defined]
    assert hits("deploy zebras zeb") == {f"deploy n{i}" for i in range(10)}
    # Both absent words are kept as one of their 3-grams that is missing.
    for word in ("zebras", "zeb"):
        marker = e.memo[0][word]
        assert type(marker) is str
        assert len(marker) == 3
        assert marker in word
        assert marker not in state.index._vocab._grams  # type: ignore[attr-defined]
    put(10, "a zebrastripe")  # brings every gram of both words
    assert hits("zebras") == {"a zebrastripe"}
    assert hits("zeb") == {"a zebrastripe"}
    assert type(e.memo[0]["zebras"]) is not str  # a memo of its match set now
    # Off: no marker is made, and a marker left from before is not trusted.
    assert hits("quuxes") == set()
    assert type(e.memo[0]["quuxes"]) is str
    wo_knobs._MEMO_ABSENT = False
    try:
        put(11, "quuxes here")
        assert hits("quuxes") == {"quuxes here"}
        assert hits("wombat") == set()
        assert "wombat" not in e.memo[0]
    finally:
        wo_knobs._MEMO_ABSENT = True


def test_markers_in_direct_calls() -> None:
    # The C call on its own: the marker is the first missing gram probed, an absent
    # 3-character word is its own marker, and a marker counts one number in the young
    # generation.
    vocab = SubstringVocab()
    post: dict[str, object] = {}
    for i, tok in enumerate(["deploy", "cat"]):
        vocab.acquire(tok)
        post[tok] = array("i", [i])
    memo: list[object] = [{}, {}, 0]
    counts = np.zeros(4, np.uint8)
    got = ccore.count_words(
        ["deploy", "dog", "depart", "cat"], [1, 1, 1, 1], 0, 100, 10, vocab, post, {}, {},
        counts, 2, 0, memo, 0,
    )  # fmt: skip
    assert got == (4, [])
    assert counts.tolist() == [1, 1, 0, 0]
    young = memo[0]
    assert isinstance(young, dict)
    assert young["dog"] == "dog"
    assert young["depart"] == "epa"  # "dep" is there (deploy); "epa", probed next, is not
    assert memo[2] == 2 + 2 + 1 + 1  # deploy's and cat's sets and arrays, two markers
