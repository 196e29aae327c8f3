"""Branch mainjob45: ``count_words`` trusts a kept word's gram list within its epoch
(``knobs._MEMO_EPOCH_ONLY``, flag 256).

A kept word's memo holds the gram list its candidates come from; before this branch each
refresh looked the gram up in the vocabulary's gram dict to check the list was still the
dict's. Only ``SubstringVocab.release`` replaces or deletes a 3-gram's list, and the owner
bumps the current numbering's epoch before every release, so for the owner's current
numbering a memo of this epoch still holds the dict's list. Checked here:

* the same counts and words left with the knob on and off, and as ``word in token`` over
  the texts, with tokens released between calls (the epoch bumped first, as the purge
  does) so that gram lists are compacted or deleted and made again;
* the trust is in effect, and only for the current numbering: a gram list replaced
  behind the memo's back *without* an epoch bump (which the owner never does) is missed
  with the knob on and ``current``, found with the knob off or ``current`` False;
* a renumbering retires the old numbering (its readers' memos look their lists up
  again), the index's numbering is current, a restored image's too;
* ``current`` that is not a bool is refused before C, and flag 512 is refused by C;
* the whole retrieve path: a stateful run of stores, deletes (renumberings at tiny
  knobs) and sliced retrieves with writes between their steps gives the same hits and
  scores on both paths, equal to the pure-Python score.
"""

from __future__ import annotations

import random
import uuid
from array import array
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.formula import word_overlap_score

from .strategies import examples
from .test_mainjob27_sigs import _TEXT, _WORDS, assert_counts_as_tokens, counted_parts

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


def _side(
    trust: bool, parts: list[list[str]], words: list[str], drops: list[list[int]]
) -> list[Any]:
    """:func:`counted_parts` with ``knobs._MEMO_EPOCH_ONLY`` as given and ``current``:
    texts leave (their tokens released, the epoch bumped first) before every part."""
    return counted_parts("_MEMO_EPOCH_ONLY", trust, parts, words, drops, current=True)


@settings(max_examples=examples(250), deadline=None)
@given(
    st.lists(st.lists(_TEXT, max_size=8), min_size=1, max_size=5),
    _WORDS,
    st.lists(st.lists(st.integers(0, 15), max_size=4), max_size=4),
)
@example([["abca", "abcb"], ["abcc"], ["abca"]], ["abc"], [[0, 1], [2]])  # a list deleted
@example([["xabc", "yabc", "zabc"], ["wabc"]], ["abc", "xab"], [[0, 1]])  # compacted
def test_epoch_only_counts_as_every_list_looked_up(
    parts: list[list[str]], words: list[str], drops: list[list[int]]
) -> None:
    on = _side(True, parts, words, drops)
    assert on == _side(False, parts, words, drops)
    assert_counts_as_tokens(on, parts, words)


def _count_replaced(trust: bool, current: bool) -> list[int]:
    """The word "abcd" counted once (its memo keeps "abc"'s list, token "xabcd"), then the gram
    list of "abc" replaced behind the memo's back by a copy, without an epoch bump (what
    the owner never does), and a new token "yabcd" (group 1) entered in the copy only:
    the counts of the second call with the same memo and epoch."""
    saved = wo_knobs._MEMO_EPOCH_ONLY
    wo_knobs._MEMO_EPOCH_ONLY = trust
    try:
        vocab = SubstringVocab()
        post: dict[str, array[int]] = {}
        cache = ccore.token_cache()
        ccore.add_texts_cached(post, ["xabcd"], 0, vocab, cache, 0)
        memo: list[Any] = [{}, {}, 0]

        def count(n: int) -> list[int]:
            counts = np.zeros(n, np.uint8)
            assert ccore.count_words(
                ["abcd"], [1], 0, 100, 64, vocab, post, {}, {}, counts, n, 0, memo, 0, cache,
                current,
            ) == (1, [])  # fmt: skip
            return counts.tolist()

        assert count(1) == [1]
        for gram in ("abc", "bcd"):  # both: whichever the memo probed
            vocab._grams[gram] = list(vocab._grams[gram])
        ccore.add_texts_cached(post, ["yabcd"], 1, vocab, cache, 0)
        return count(2)
    finally:
        wo_knobs._MEMO_EPOCH_ONLY = saved


def test_epoch_only_trusts_the_memos_list_for_the_current_numbering() -> None:
    # Trusted: the memo reads its own (now stale) list, which never got "yabcd".
    assert _count_replaced(True, True) == [1, 0]
    # Looked up: the list was replaced, the memo is rebuilt and finds "yabcd".
    assert _count_replaced(False, True) == [1, 1]
    assert _count_replaced(True, False) == [1, 1]
    assert _count_replaced(False, False) == [1, 1]


def test_bad_current_is_refused_and_flag_512_too() -> None:
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}
    ccore.add_texts_cached(post, ["xabcd"], 0, vocab, ccore.token_cache(), 0)
    counts = np.zeros(1, np.uint8)
    for bad in (1, None, "yes", np.True_):
        with pytest.raises(TypeError, match="current"):
            ccore.count_words(
                ["abcd"], [1], 0, 100, 64, vocab, post, {}, {}, counts, 1, 0, [{}, {}, 0], 0,
                None, bad,  # type: ignore[arg-type]
            )  # fmt: skip
    assert counts.tolist() == [0]
    from actormem._index import _cwordoverlap as c

    args: tuple[Any, ...] = (["abcd"], [1], 0, 100, 64, vocab._grams, vocab._items, {}, 8,
            post, {}, {}, counts, 1, 0, [{}, {}, 0], 0, 1)  # fmt: skip
    assert c.count_words(*args, 256) == (1, [])
    assert counts.tolist() == [1]
    for flags in (512, 256 | 512):
        with pytest.raises(ValueError, match="unknown flags"):
            c.count_words(*args, flags)
    assert counts.tolist() == [1]


_BASE = datetime(2026, 1, 1, tzinfo=UTC)


def _fact(text: str, i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT, memory=text, created_at=_BASE + timedelta(seconds=i)
    )


def test_renumbering_retires_the_old_numbering(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 1)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    entries = [_fact(f"abcd{i % 3} wxyz {i}", i) for i in range(12)]
    for e in entries:
        state.store(e)
    state.publish()
    index: Any = state.index
    old = index._e
    assert old.current
    state.index.top_k(state.view(), "abcd wxyz", 3, None)  # memos in the old numbering
    for e in entries[:9]:
        state.delete(e.id)
    state.publish()
    state.vacuum(state.published)  # purges the 9: a renumbering
    assert index._e is not old
    assert index._e.current
    assert not old.current


def _reference(view: Any, query: str, limit: int) -> list[tuple[float, int]]:
    scored = [
        (word_overlap_score(r.entry.memory, r.entry.tags, r.entry.relevance, query), r.seq)
        for r in view.records()
    ]
    scored.sort(key=lambda t: (-t[0], t[1]))
    return scored[:limit]


def _sliced_run(seed: int, trust: bool) -> list[Any]:
    """Stores, deletes (a renumbering whenever half the groups are purged) and sliced
    retrieves with writes and vacuums between their steps, so that readers of a retired
    numbering count with memos built before and after its retirement. Each retrieve's
    (score, seq) list, checked against the pure-Python score on the way."""
    rng = random.Random(seed)
    words = ["abcd", "bcde", "xabc", "cdab", "abcdab", "dcba", "abab", "zzab"]
    saved = (wo_knobs._MEMO_EPOCH_ONLY, wo_knobs._RENUMBER_MIN, wo_knobs._STEP)
    wo_knobs._MEMO_EPOCH_ONLY, wo_knobs._RENUMBER_MIN, wo_knobs._STEP = trust, 1, 1
    try:
        state = MemoryState(
            capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=0)
        )
        ids: list[uuid.UUID] = []
        out: list[Any] = []
        i = 0

        def write() -> None:
            nonlocal i
            if rng.random() < 0.55 or not ids:
                text = " ".join(rng.choice(words) + rng.choice(["", "q", "é", str(i)])
                                for _ in range(rng.randint(1, 4)))  # fmt: skip
                e = _fact(text, i)
                ids.append(e.id)
                state.store(e)
            else:
                state.delete(ids.pop(rng.randrange(len(ids))))
            i += 1

        for _ in range(30):
            write()
        state.publish()
        for _ in range(30):
            view = state.view()
            query = " ".join(rng.sample(words, rng.randint(1, 4)))
            expected = _reference(view, query, 5)
            gen = state.index.top_k_steps(view, query, 5, None)  # type: ignore[attr-defined]
            steps = rng.randint(0, 3)
            while True:
                try:
                    next(gen)
                except StopIteration as stop:
                    hits = stop.value
                    break
                if steps:  # writes, purges and renumberings between the first steps
                    steps -= 1
                    for _ in range(rng.randint(0, 4)):
                        write()
                    state.publish()
                    state.vacuum(view.version)  # the retrieving view stays live
            got = [(s, r.seq) for s, r in hits]
            assert got == expected, query
            out.append(got)
            state.publish()
            state.vacuum(state.published)
        state._check()
        return out
    finally:
        wo_knobs._MEMO_EPOCH_ONLY, wo_knobs._RENUMBER_MIN, wo_knobs._STEP = saved


@pytest.mark.parametrize("seed", range(6))
def test_sliced_retrieves_the_same_with_and_without_the_trust(seed: int) -> None:
    assert _sliced_run(seed, True) == _sliced_run(seed, False)


def test_a_restored_index_counts_with_a_current_numbering() -> None:
    """An index restored from its image reads the restore's numbering, current, and its
    retrieves (memos kept across them) score as a rebuild's."""
    from actormem._index.wordoverlap import persist as wo_persist

    from .setups import messy_repeats
    from .test_index_image import _image, _loaded

    state, rows = messy_repeats(3, 40, 30, False)
    assert rows
    parts = _image(state)
    made = []
    real = wo_persist._Numbering

    def spy(*args: Any) -> Any:
        made.append(real(*args))
        return made[-1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wo_persist, "_Numbering", spy)
        restored = _loaded(WordOverlapScorer, rows, parts)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    index: Any = restored.index
    assert made
    assert index._e in made
    assert index._e.current
    queries = [" ".join(r[1].memory.split()[:2]) for r in rows[:10]] * 2  # each twice
    for query in queries:
        got = restored.index.top_k(restored.view(), query, 5, None)
        want = rebuilt.index.top_k(rebuilt.view(), query, 5, None)
        assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]
