"""The word-overlap index's token cache (``_cwordoverlap.c``, its "token cache" block).

* ``ccore.add_text_cached`` (an ASCII text's tokens read from its bytes and looked up in
  the numbering's token cache, posting appends written into the arrays' buffers) leaves
  exactly the structures ``add_text_known`` and the Python path ``_add_tokens`` leave
  (Hypothesis drives all three with the same texts), with the cache kept across calls;
* a state machine drives three memories with the same stores and deletes (so the purge
  deletes and replaces posting lists, and tells the cache): through the cache, through
  ``add_text_known`` (``knobs._ADD_CACHED = False``) and through Python, and requires
  identical index structures and top-k after every step;
* a cache that was not told of a change (another dict, another epoch) is emptied, never
  read stale; an array with an exported buffer, of another typecode, or full, is
  appended to as ``array.append`` does (or refused as it refuses);
* bad arguments are refused before C, and the C code refuses what memory safety needs.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.index import _WordOverlapIndex

from .strategies import examples, run_machine
from .test_storepath import _structures, texts

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


@settings(max_examples=examples(150), deadline=None)
@given(st.lists(texts() | st.text("ab \t\u2003é", max_size=12), max_size=16))
def test_every_compiled_add_leaves_what_python_leaves(lows: list[str]) -> None:
    """``add_text_cached``, ``add_text_known`` and ``add_text`` against ``_add_tokens``."""
    index = _WordOverlapIndex(10)
    sides = {name: ({}, SubstringVocab()) for name in ("cached", "known", "text", "python")}
    cache = ccore.token_cache()
    for gid, text in enumerate(lows):
        low = text.lower()
        post, vocab = sides["cached"]
        fresh = ccore.add_text_cached(post, low, gid, vocab, cache, 0)
        post, vocab = sides["known"]
        assert ccore.add_text_known(post, low, gid, vocab) == fresh
        post, vocab = sides["text"]
        assert ccore.add_text(post, low, gid, vocab) == fresh
        post, vocab = sides["python"]
        index._vocab = vocab
        index._add_tokens(post, low, gid)
    want = _structures(*sides["python"])
    assert _structures(*sides["cached"]) == want
    assert _structures(*sides["known"]) == want
    assert _structures(*sides["text"]) == want
    for lst in sides["cached"][0].values():
        assert lst.typecode == "i"


def test_add_text_cached_examples() -> None:
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}
    cache = ccore.token_cache()
    assert ccore.add_text_cached(post, "a b a", 0, vocab, cache, 0) == 2
    assert ccore.add_text_cached(post, "b  a\tb\x1c", 1, vocab, cache, 0) == 0  # from the cache
    assert post == {"a": array("i", [0, 1]), "b": array("i", [0, 1])}
    assert ccore.add_text_cached(post, "a b new a new", 2, vocab, cache, 0) == 1
    assert post["new"] == array("i", [2])
    assert ccore.add_text_cached(post, "", 3, vocab, cache, 0) == 0
    many = " ".join(["a", "b", "new"] * 300)  # more tokens than the stack table holds
    assert ccore.add_text_cached(post, many, 4, vocab, cache, 0) == 0
    assert ccore.add_text_cached(post, many + " é new2", 5, vocab, cache, 0) == 2
    assert post["a"] == post["b"] == array("i", [0, 1, 2, 4, 5])
    assert ccore.add_text_cached(post, "é\u2003a", 6, vocab, cache, 0) == 0  # non-ASCII
    assert post["é"] == array("i", [5, 6])
    assert vocab._ids.keys() == {"a", "b", "new", "new2", "é"}
    # Thousands of appends to one list: it grows by array.append, in place between.
    for gid in range(7, 3000):
        ccore.add_text_cached(post, "grow a", gid, vocab, cache, 0)
    assert post["grow"] == array("i", range(7, 3000))


def test_a_change_the_cache_was_not_told_of_empties_it() -> None:
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}
    cache = ccore.token_cache()
    ccore.add_text_cached(post, "a b", 0, vocab, cache, 0)
    # The owner replaces a's list and bumps the epoch without telling the cache.
    post["a"] = array("i", [0])
    ccore.add_text_cached(post, "a b", 1, vocab, cache, 1)
    assert post == {"a": array("i", [0, 1]), "b": array("i", [0, 1])}
    # Told of it (the purge's way): the token leaves, the others stay.
    post["b"] = array("i", [1])
    ccore.cache_forget(cache, post, "b", 2)
    ccore.add_text_cached(post, "a b", 2, vocab, cache, 2)
    assert post == {"a": array("i", [0, 1, 2]), "b": array("i", [1, 2])}
    # Two changes, one told: emptied.
    post["a"], post["b"] = array("i", [2]), array("i", [2])
    ccore.cache_forget(cache, post, "b", 4)
    ccore.add_text_cached(post, "a b", 3, vocab, cache, 4)
    assert post == {"a": array("i", [2, 3]), "b": array("i", [2, 3])}
    # Another posting dict (a restored image): emptied too.
    other = {tok: array("i", lst) for tok, lst in post.items()}
    ccore.add_text_cached(other, "a b", 4, vocab, cache, 4)
    assert other == {"a": array("i", [2, 3, 4]), "b": array("i", [2, 3, 4])}
    assert post == {"a": array("i", [2, 3]), "b": array("i", [2, 3])}


def test_appends_as_array_append_does() -> None:
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    post: dict[str, array[int]] = {"q": array("q", [1]), "i": array("i", [1])}
    ccore.add_text_cached(post, "q i", 2, vocab, cache, 0)
    assert post == {"q": array("q", [1, 2]), "i": array("i", [1, 2])}
    assert post["q"].typecode == "q"
    view = memoryview(post["i"])  # an exported buffer: array.append refuses to resize
    with pytest.raises(BufferError):
        post["i"].append(3)
    with pytest.raises(BufferError):
        ccore.add_text_cached(post, "i", 3, vocab, cache, 0)
    view.release()
    ccore.add_text_cached(post, "i", 3, vocab, cache, 0)
    assert post["i"] == array("i", [1, 2, 3])


def test_bad_arguments_are_refused_before_c() -> None:
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    add = ccore.add_text_cached
    with pytest.raises(TypeError):
        add([], "a", 0, vocab, cache, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        add({}, b"a", 0, vocab, cache, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        add({}, "a", 0, object(), cache, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gid"):
        add({}, "a", 1 << 31, vocab, cache, 0)
    with pytest.raises(TypeError, match="cache"):
        add({}, "a", 0, vocab, object(), 0)
    with pytest.raises(ValueError, match="epoch"):
        add({}, "a", 0, vocab, cache, -1)
    with pytest.raises(TypeError):
        ccore.cache_forget(cache, {}, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="cache"):
        ccore.cache_forget(None, {}, "a", 1)
    with pytest.raises(ValueError, match="epoch"):
        ccore.cache_forget(cache, {}, "a", 1 << 62)


def test_c_checks_memory_safety_itself() -> None:
    from actormem._index import _cwordoverlap as c

    vocab = SubstringVocab()
    cache = c.token_cache()
    memo = c.add_text_known  # any object that is not the cache's capsule
    with pytest.raises((TypeError, ValueError)):
        c.add_text_cached({}, "a", 0, vocab, memo, 0)
    with pytest.raises(TypeError, match="array"):
        c.add_text_cached({"a": [1]}, "a", 2, vocab, cache, 0)
    with pytest.raises(TypeError, match="array"):
        c.add_text_cached({"é": [1]}, "é", 2, vocab, cache, 0)
    with pytest.raises(ValueError, match="gid"):
        c.add_text_cached({}, "a", -1, vocab, cache, 0)
    with pytest.raises(TypeError):
        c.cache_forget(cache, {}, b"a", 0)


# -- three memories, the same writes --------------------------------------------------

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["the", "a", "cat", "Cats", "deploy", '{"k":', "é", "İx", "straße", "ab", "abc", "x1"]
PATHS = ("cached", "known", "python")


class ThreePaths(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, MemoryState] = {}
        self.i = 0

    @initialize()
    def make(self) -> None:
        for path in PATHS:
            self.states[path] = MemoryState(
                capacity=None, half_life=3600.0, scorer=WordOverlapScorer()
            )

    def _each(self) -> Iterator[MemoryState]:
        for path, state in self.states.items():
            kernels.WO_CORE = path != "python"
            wo_knobs._ADD_CACHED = path == "cached"
            try:
                yield state
            finally:
                kernels.WO_CORE = kernels.WO_CORE_AVAILABLE
                wo_knobs._ADD_CACHED = True

    @rule(
        target=ids,
        words=st.lists(st.sampled_from(WORDS), max_size=8),
        fresh=st.integers(0, 2),
        sep=st.sampled_from([" ", "  ", "\t", "\u2003"]),
    )
    def store(self, words: list[str], fresh: int, sep: str) -> uuid.UUID:
        self.i += 1
        words = [*words, *(f"t{self.i}x{k}" for k in range(fresh))]  # new tokens
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory=sep.join(words),
            created_at=BASE + timedelta(seconds=self.i),
            id=uuid.UUID(int=self.i),
        )
        for state in self._each():
            state.store(entry)
            state.publish()
        return entry.id

    @rule(entry_id=consumes(ids))
    def delete(self, entry_id: uuid.UUID) -> None:
        for state in self._each():
            state.delete(entry_id)
            state.publish()
            state.vacuum(state.published)

    @rule(words=st.lists(st.sampled_from([*WORDS, "at", "eplo"]), min_size=1, max_size=4))
    def query(self, words: list[str]) -> None:
        got = []
        for state in self._each():
            hits = state.index.top_k(state.view(), " ".join(words), 5, None)
            got.append([(score, rec.seq) for score, rec in hits])
        assert got[0] == got[1] == got[2]

    @invariant()
    def same_structures(self) -> None:
        if not self.states:
            return
        seen = []
        for state in self._each():
            state._check()
            index: Any = state.index
            seen.append(_structures(index._e.post, index._vocab))
        assert seen[0] == seen[1] == seen[2]


def test_three_paths_agree() -> None:
    run_machine(ThreePaths, 30, 40)


def test_the_index_check_finds_a_stale_cache() -> None:
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    for i, text in enumerate(["alpha beta", "beta gamma"]):
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=i + 1)))
    state.publish()
    state._check()
    e: Any = state.index._e  # type: ignore[attr-defined]
    assert e.tokcache is not None
    e.post["beta"] = array("i", e.post["beta"])  # replaced behind the cache's back
    with pytest.raises(AssertionError, match="beta"):
        state._check()
    e.epoch += 1  # as the purge does: the cache empties at its next use
    state._check()
    state.store(MemoryEntry(category=MemoryCategory.FACT, memory="beta", id=uuid.UUID(int=9)))
    state._check()
    assert list(e.post["beta"]) == [0, 1, 2]
