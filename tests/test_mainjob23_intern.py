"""A retrieve's query words taken from the core's process-wide table of strs
(``wordoverlap.knobs._QUERY_INTERN``, ``query_words(query, 1)``) against a new str per
word and query: the same text, words, counts and order; equal words of two queries one
object with the table, two without; the same hits, scores and ties either way; a bad
second argument refused. And ``count_words`` with ``knobs._SHORT_UNREAD``: the short
words' dict of ``masks`` not read for words of 3 or more characters, any other dict
read."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore, masks
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import stores_and_retrieves
from .strategies import examples

core = ccore.core()
needs_core = pytest.mark.skipif(
    core is None or not hasattr(core, "query_words"), reason="compiled core not built"
)

# Words of 1-30 characters (the table keeps those of at most 24), both cases.
_WORD = st.text(alphabet="aAbBcz09._-", min_size=1, max_size=30)
_QUERY = st.lists(_WORD, max_size=40).flatmap(
    lambda ws: st.sampled_from([" ", "\t", "\n ", "  "]).map(lambda sep: sep.join(ws))
)


def _python(query: str) -> tuple[str, dict[str, int], int]:
    low = query.lower()
    words = low.split()
    return low, dict(Counter(words)), len(words)


def _same(got: Any, want: tuple[str, dict[str, int], int]) -> None:
    assert got == want
    assert list(got[1]) == list(want[1])  # first-seen order
    assert all(type(w) is str for w in got[1])


@needs_core
@settings(max_examples=examples(300), deadline=None)
@given(queries=st.lists(_QUERY, min_size=1, max_size=4))
def test_interned_words_equal_new_ones(queries: list[str]) -> None:
    for q in queries:
        _same(core.query_words(q, 1), _python(q))
        _same(core.query_words(q, 0), _python(q))
        _same(core.query_words(q), _python(q))
    # The same query again at once: its short words are the table's (no other call
    # ran between, and its distinct words of one query may share a slot: the later
    # one is kept, so only the words that are still there are compared).
    first = list(core.query_words(queries[-1], 1)[1])
    again = list(core.query_words(queries[-1], 1)[1])
    fresh = list(core.query_words(queries[-1], 0)[1])
    assert first == again == fresh
    for a, b, c in zip(first, again, fresh, strict=True):
        assert c is not a  # without the table: a new str
        if len(a) > 24:
            assert b is not a  # never kept


@needs_core
def test_repeated_query_shares_its_words() -> None:
    q = "Deploy the blue service then deploy THE green one " + "x" * 25
    a = list(core.query_words(q, 1)[1])
    b = list(core.query_words(q.upper(), 1)[1])
    assert a == b
    assert [x is y for x, y in zip(a, b, strict=True)] == [True] * (len(a) - 1) + [False]
    c = list(core.query_words(q, 0)[1])
    assert c == a
    assert not any(x is y for x, y in zip(a, c, strict=True))


@needs_core
def test_many_words_sharing_slots() -> None:
    # 60,000 distinct words through 8,192 slots: every slot is taken over many times;
    # every word handed out is the word asked for.
    rng = random.Random(23)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789"
    pool = ["".join(rng.choices(letters, k=rng.randint(1, 26))) for _ in range(60_000)]
    for start in range(0, len(pool), 300):
        chunk = pool[start : start + 300] + rng.sample(pool[: start + 300], 40)
        q = " ".join(w.upper() if rng.random() < 0.3 else w for w in chunk)
        _same(core.query_words(q, 1), _python(q))


@needs_core
def test_refusals() -> None:
    for bad in ("1", 1.0, None, True):
        with pytest.raises(TypeError):
            core.query_words("abc", bad)
    with pytest.raises(TypeError):
        core.query_words("abc", 1, 2)
    with pytest.raises(TypeError):
        core.query_words()
    with pytest.raises(TypeError):
        core.query_words(b"abc", 1)
    assert core.query_words("é Deploy", 1) is None


_WORDS = ["deploy", "Deploy", "DEPLOY", "blue", "the", "Then", "rust", "go", "a", "ab", "x.y"]
_LONG = ["k" * 24, "K" * 25, "service-" * 4]
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


async def _run(seed: int, ops: int) -> list[Any]:
    return await stores_and_retrieves(seed, ops, _WORDS + _LONG)


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 150))
def test_same_results_either_way(seed: int, ops: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wo_knobs, "_QUERY_INTERN", True)
        on = trio.run(_run, seed, ops)
        mp.setattr(wo_knobs, "_QUERY_INTERN", False)
        off = trio.run(_run, seed, ops)
    assert on == off


# ---------------------------------------------------------------- knobs._SHORT_UNREAD


def _count(words: list[str], short: dict[str, int], memo: bool) -> tuple[Any, ...]:
    vocab = SubstringVocab()
    post: dict[str, Any] = {}
    texts = ["the theme of the day", "an ox and the cat", "bar baz theft", "x the y", "ab abc"]
    for gid, text in enumerate(texts):
        ccore.add_text(post, text, gid, vocab)
    counts = np.zeros(64, np.uint8)
    kept: list[Any] | None = [{}, {}, 0] if memo else None
    at, left = ccore.count_words(
        words, [1] * len(words), 0, 1000, 100, vocab, post, {}, short, counts, len(texts), 0,
        kept,
    )  # fmt: skip
    return at, left, counts.tolist()


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
@pytest.mark.parametrize("memo", [False, True])
def test_short_unread_only_for_the_module_dict(memo: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    words = ["the", "theme", "an", "ab", "abc", "ox", "cat", "zzz", "baz"]
    got = {}
    for on in (False, True):
        monkeypatch.setattr(wo_knobs, "_SHORT_UNREAD", on)
        # masks' own dict: unread for 3+ characters when on, the same answers.
        got[on] = _count(words, masks._SHORT_BIT, memo)
        # Any other dict is read, on or off: its 3-character word is left to the caller.
        mine = dict(masks._SHORT_BIT, the=0, cat=1)
        at, left, counts = _count(words, mine, memo)
        assert at == len(words)
        assert [words[i] for i in left] == ["the", "an", "ab", "ox", "cat"]
        assert counts == _count([w for w in words if w not in ("the", "cat")], {}, memo)[2]
    assert got[False] == got[True]
    assert [words[i] for i in got[True][1]] == ["an", "ab", "ox"]
    assert all(1 <= len(w) <= 2 for w in masks._SHORT_BIT)


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 150))
def test_same_results_short_unread_either_way(seed: int, ops: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wo_knobs, "_SHORT_UNREAD", True)
        on = trio.run(_run, seed, ops)
        mp.setattr(wo_knobs, "_SHORT_UNREAD", False)
        off = trio.run(_run, seed, ops)
    assert on == off
