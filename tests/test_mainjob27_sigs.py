"""Branch mainjob27: ``count_words``' candidate signatures (``knobs._CAND_SIGS``, flag 128).

A candidate token of a query word of 4 or more characters is first tested by its
signature (a bit of 32 per 3-character substring, kept per token id in the numbering's
token cache) and skipped unread when it lacks one of the word's bits. Checked here:

* the same counts and the same words left as with every candidate read, and as ``word in
  token`` over the texts, for new words (``long_word_ids``) and kept words whose gram
  list grew (``memo_refresh``), with tokens and words of every str kind, tokens released
  between calls (gram lists rebuilt), one token cache used by many calls and a fresh one;
* the signatures are in effect: an id whose item is changed behind the vocabulary's back
  after its signature was taken (which the owner never does) is skipped with the knob on
  and read with it off;
* a token cache whose signatures were taken for another item dict forgets them;
* the whole retrieve path: a stateful run of stores, deletes and retrieves gives the same
  hits and scores on both paths.
"""

from __future__ import annotations

import uuid
from array import array
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
import trio
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: ASCII, Latin-1, two bytes and four bytes a character; few letters, so that words
#: match often and share 3-grams with tokens that do not contain them.
_ALPHABET = "abcdé" + "ā😀"
_TEXT = st.lists(st.text(_ALPHABET, min_size=1, max_size=9), max_size=6).map(" ".join)
_WORDS = st.lists(st.text(_ALPHABET, min_size=3, max_size=8), min_size=1, max_size=8, unique=True)


def counted_parts(
    knob: str,
    on: bool,
    parts: list[list[str]],
    words: list[str],
    drops: list[list[int]],
    fresh: bool = False,
    current: bool = False,
) -> list[Any]:
    """count_words of ``words`` with one memo after each part of texts is added (text i
    in group i), ``knobs.<knob>`` set to ``on``; before part k > 0 the texts numbered in
    ``drops[k - 1]`` (those still held) leave: the tokens no other text has leave the
    postings and the vocabulary, the epoch bumped before each (as a purge of the last
    group holding them does), and the text is no longer checked. Counted through the
    adds' token cache (or with ``fresh``, a cache of its own kept across the calls),
    with ``current`` as given. Each call's result and counts, and the texts each group
    holds ("" for a dropped one)."""
    saved = getattr(wo_knobs, knob)
    setattr(wo_knobs, knob, on)
    try:
        post: dict[str, array[int]] = {}
        vocab = SubstringVocab()
        cache = ccore.token_cache()
        counting = ccore.token_cache() if fresh else cache
        memo: list[Any] = [{}, {}, 0]
        epoch = 0
        got: list[Any] = []
        texts: list[str] = []
        for number, part in enumerate(parts):
            for i in drops[number - 1] if 0 < number <= len(drops) else ():
                if i < len(texts) and texts[i]:
                    others = {t for j, x in enumerate(texts) if j != i for t in x.split()}
                    for tok in set(texts[i].split()) - others:
                        epoch += 1  # the memo holds lists as they were
                        del post[tok]
                        ccore.cache_forget(cache, post, tok, epoch)
                        vocab.release(tok)
                    texts[i] = ""
            ccore.add_texts_cached(post, part, len(texts), vocab, cache, epoch)
            texts.extend(part)
            n = len(texts)
            counts = np.zeros(max(n, 1), np.uint8)
            result = ccore.count_words(
                words, [1] * len(words), 0, 10_000, 64, vocab, post, {}, {}, counts, n, 0,
                memo, epoch, counting, current,
            )  # fmt: skip
            got.append((result, counts[:n].tolist()))
        vocab._check()
        return [got, texts]
    finally:
        setattr(wo_knobs, knob, saved)


def _side(
    sigs: bool, parts: list[list[str]], words: list[str], drop: list[int], fresh: bool
) -> list[Any]:
    """:func:`counted_parts` with ``knobs._CAND_SIGS`` as given, the texts numbered in
    ``drop`` leaving after the first part."""
    return counted_parts("_CAND_SIGS", sigs, parts, words, [drop], fresh)


@settings(max_examples=examples(250), deadline=None)
@given(
    st.lists(st.lists(_TEXT, max_size=8), min_size=1, max_size=4),
    _WORDS,
    st.lists(st.integers(0, 7), max_size=3),
    st.booleans(),
)
@example([["", "", "", "aaa"], ["aaa"]], ["aaa"], [3], False)  # a token gone, then back
def test_signatures_count_as_every_candidate_read(
    parts: list[list[str]], words: list[str], drop: list[int], fresh: bool
) -> None:
    on = _side(True, parts, words, drop, fresh)
    assert on == _side(False, parts, words, drop, fresh)
    assert_counts_as_tokens(on, parts, words)


def assert_counts_as_tokens(side: list[Any], parts: list[list[str]], words: list[str]) -> None:
    """Each call of :func:`counted_parts`' result ``side`` counted every word and, for
    each group whose text is kept, the words contained in one of its tokens."""
    got, texts = side
    seen = 0
    for (result, counts), part in zip(got, parts, strict=True):
        seen += len(part)
        assert result == (len(words), [])
        # A dropped text's group keeps the tokens other texts have: compare the groups
        # whose texts are kept.
        for g, text in enumerate(texts[:seen]):
            if text:
                assert counts[g] == sum(any(w in t for t in text.split()) for w in words)


def test_signatures_examples() -> None:
    """Candidates sharing the probe gram but not the word (skipped), ones containing it
    (kept), in the same call and after the gram list grew (the memo's refresh)."""
    first = ["xabcdy abcx zbcdz", "abcd éabcdé", "āabcdā", "bcda cdab"]
    more = ["qabcq abcdabcd", "abce abcde", "😀abcd😀"]
    words = ["abcd", "bcda", "abcdé", "😀abcd", "zbcd"]
    for fresh in (False, True):
        on = _side(True, [first, more], words, [], fresh)
        assert on == _side(False, [first, more], words, [], fresh)
        got, texts = on
        for (result, counts), n in zip(got, (len(first), len(first) + len(more)), strict=True):
            assert result == (len(words), [])
            assert counts == [
                sum(any(w in t for t in text.split()) for w in words) for text in texts[:n]
            ]


def _count_changed(sigs: bool) -> list[int]:
    """A word counted once (the candidates' signatures taken), then, after an id's item
    is replaced behind the vocabulary's back by one that contains the word, counted
    again as a new word (a fresh memo): the counts of that second call. ("abc"'s list,
    ids 0 and 1, is the word's shortest; the word has five 3-grams the changed token's
    signature was not taken with.)"""
    saved = wo_knobs._CAND_SIGS
    wo_knobs._CAND_SIGS = sigs
    try:
        vocab = SubstringVocab()
        post: dict[str, array[int]] = {}
        cache = ccore.token_cache()
        texts = ["abcx", "abcdefgh", "zbcdefghz", "ybcdefghy", "xbcdefghx"]
        ccore.add_texts_cached(post, texts, 0, vocab, cache, 0)

        def count() -> list[int]:
            counts = np.zeros(len(texts), np.uint8)
            assert ccore.count_words(
                ["abcdefgh"], [1], 0, 100, 64, vocab, post, {}, {}, counts, len(texts), 0,
                [{}, {}, 0], 0, cache,
            ) == (1, [])  # fmt: skip
            return counts.tolist()

        assert count() == [0, 1, 0, 0, 0]
        # "abcx" (id 0, group 0) now reads "abcdefghx": what the owner never does.
        iid = vocab._ids.pop("abcx")
        vocab._ids["abcdefghx"] = iid
        vocab._items[iid] = "abcdefghx"
        post["abcdefghx"] = post.pop("abcx")
        return count()
    finally:
        wo_knobs._CAND_SIGS = saved


def test_signatures_skip_candidates_unread() -> None:
    # With the knob the changed item is never read: its kept signature (of "abcx")
    # lacks the word's other bits, so it stays unmatched; without it, it is read and
    # matches.
    assert _count_changed(True) == [0, 1, 0, 0, 0]
    assert _count_changed(False) == [1, 1, 0, 0, 0]


def test_signatures_forgotten_for_another_item_dict() -> None:
    """A token cache that kept signatures for one vocabulary serves another (a new item
    dict) without them: the same ids, other items, counted right."""
    cache = ccore.token_cache()
    for tokens, expected in ((["abcx", "abcd"], [0, 1]), (["abcdz", "abqq"], [1, 0])):
        vocab = SubstringVocab()
        post: dict[str, array[int]] = {}
        ccore.add_texts_cached(post, tokens, 0, vocab, ccore.token_cache(), 0)
        counts = np.zeros(2, np.uint8)
        ccore.count_words(
            ["abcd"], [1], 0, 100, 64, vocab, post, {}, {}, counts, 2, 0, None, 0, cache
        )  # fmt: skip
        assert counts.tolist() == expected


_WHEN = datetime(2026, 1, 1, tzinfo=UTC)
_STEP = st.one_of(
    st.tuples(st.just("store"), st.integers(0, 11), _TEXT),
    st.tuples(st.just("delete"), st.integers(0, 11), st.just("")),
    st.tuples(st.just("retrieve"), st.integers(1, 4), _TEXT),
)


async def _memory_run(steps: list[tuple[str, int, str]], sigs: bool) -> list[Any]:
    saved = wo_knobs._CAND_SIGS
    wo_knobs._CAND_SIGS = sigs
    try:
        out: list[Any] = []
        ids = [f"00000000-0000-4000-8000-{i:012d}" for i in range(12)]
        async with open_memory(scorer=WordOverlapScorer()) as memory:
            for op, arg, text in steps:
                if op == "store" and text.strip():
                    entry = MemoryEntry(
                        category=MemoryCategory.FACT, memory=text, id=uuid.UUID(ids[arg]),
                        created_at=_WHEN,
                    )  # fmt: skip
                    await memory.store(entry)
                elif op == "delete":
                    await memory.delete(uuid.UUID(ids[arg]))
                elif op == "retrieve":
                    hits = await memory.retrieve_scored(text, arg)
                    out.append([(str(h.entry.id), h.score) for h in hits])
        return out
    finally:
        wo_knobs._CAND_SIGS = saved


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(_STEP, max_size=40))
def test_retrieves_the_same_with_and_without_signatures(
    steps: list[tuple[str, int, str]],
) -> None:
    on = trio.run(_memory_run, steps, True)
    assert on == trio.run(_memory_run, steps, False)
