"""The token cache under the collisions its hashing allows (``_cwordoverlap.c``'s token
cache is direct-mapped: a slot per hash, a token's first 8 bytes and length kept in it).

Tokens are chosen, at import, to share slots: short ones, long ones with the same length
and the same first 8 bytes (told apart only by the bytes after them), and ones with NUL
bytes (which the zero-padded first word alone would not tell apart). A state machine
adds texts of them (repeated tokens, new tokens, several separators, non-ASCII texts
whose tokens enter the cache too) through ``add_text_cached``, ``add_text_known`` and a
plain Python model, and changes the posting dict as the purge does (delete or replace a
list, bump the epoch, tell the cache) or behind the cache's back (an epoch bump alone),
and requires the same posting lists and vocabulary from all three after every step and
a cache that only ever holds the posting dict's own lists.
"""

from __future__ import annotations

import tracemalloc
from array import array
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore

from .strategies import run_machine

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

_U64 = (1 << 64) - 1
_SLOTS = 1 << 15


def _slot(tok: str) -> int:
    """The token cache's slot of an ASCII token (``tok_hash`` and ``tok_slot``)."""
    h = 0xCBF29CE484222325
    for b in tok.encode("ascii"):
        h = ((h ^ b) * 0x100000001B3) & _U64
    h ^= h >> 29
    return h % _SLOTS


def _same_slot(first: str, make: Any, count: int) -> list[str]:
    """``first`` and ``count - 1`` more tokens ``make(i)`` in ``first``'s slot."""
    want, out, i = _slot(first), [first], 0
    while len(out) < count:
        tok = make(i)
        if tok != first and _slot(tok) == want:
            out.append(tok)
        i += 1
    return out


SHORT = _same_slot("s", lambda i: f"s{i}", 3)
#: 14 bytes each, the same first 8 ("longtoke"), the same slot: only the tail differs.
LONG = _same_slot("longtoke000000", lambda i: f"longtoke{i:06x}", 3)
#: 8 and more bytes sharing their first 8: told apart by the length alone.
EIGHT = ["abcdefgh", "abcdefgh0", "abcdefgh00"]
NUL = ["a", "a\x00", "a\x00\x00", "\x00", "\x00\x00a", "a\x00\x00\x00\x00\x00\x00\x00\x00"]
POOL = [*SHORT, *LONG, *EIGHT, *NUL, "plain", "é", "ß"]
SEPS = [" ", "  ", "\t", "\n\x1c", "\u2003"]


def test_the_chosen_tokens_collide() -> None:
    assert len({_slot(t) for t in SHORT}) == 1
    assert len({_slot(t) for t in LONG}) == 1
    assert len({t[:8] for t in LONG}) == 1
    assert len({len(t) for t in LONG}) == 1


class Collisions(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.gid = 0
        self.epoch = 0
        self.cache = ccore.token_cache()
        self.cached: tuple[dict[str, array[int]], SubstringVocab] = ({}, SubstringVocab())
        self.known: tuple[dict[str, array[int]], SubstringVocab] = ({}, SubstringVocab())
        self.model: dict[str, list[int]] = {}

    @initialize()
    def start(self) -> None:
        pass

    @rule(
        toks=st.lists(st.sampled_from(POOL), max_size=12),
        seps=st.lists(st.sampled_from(SEPS), min_size=13, max_size=13),
        bulk=st.integers(0, 3),
    )
    def add(self, toks: list[str], seps: list[str], bulk: int) -> None:
        toks = toks * (1 + 30 * bulk)  # past the stack tables (64 refs, 128 slots)
        low = seps[0] + "".join(t + seps[1 + i % 12] for i, t in enumerate(toks))
        gid, self.gid = self.gid, self.gid + 1
        post, vocab = self.cached
        fresh = ccore.add_text_cached(post, low, gid, vocab, self.cache, self.epoch)
        post, vocab = self.known
        assert ccore.add_text_known(post, low, gid, vocab) == fresh
        split = set(low.split())
        assert fresh == len(split - self.model.keys())
        for tok in split:
            self.model.setdefault(tok, []).append(gid)

    @rule(tok=st.sampled_from(POOL), told=st.booleans())
    def delete(self, tok: str, told: bool) -> None:
        if tok not in self.model:
            return
        del self.model[tok]
        self.epoch += 1
        for side in (self.cached, self.known):
            post, vocab = side
            del post[tok]
            vocab.release(tok)
        if told:
            ccore.cache_forget(self.cache, self.cached[0], tok, self.epoch)

    @rule(tok=st.sampled_from(POOL), told=st.booleans(), keep=st.integers(0, 3))
    def replace(self, tok: str, told: bool, keep: int) -> None:
        if tok not in self.model:
            return
        kept = self.model[tok][-keep:] if keep else self.model[tok][:1]
        self.model[tok] = kept
        self.epoch += 1
        for post, _ in (self.cached, self.known):
            post[tok] = array("i", kept)
        if told:
            ccore.cache_forget(self.cache, self.cached[0], tok, self.epoch)

    @invariant()
    def agree(self) -> None:
        want = self.model
        for post, vocab in (self.cached, self.known):
            assert {t: list(lst) for t, lst in post.items()} == want
            assert vocab._ids.keys() == want.keys()
        assert list(self.cached[0]) == list(self.known[0])  # the order tokens entered in
        post = self.cached[0]
        post_id, epoch, entries = ccore.cache_entries(self.cache)
        if post_id == id(post) and epoch == self.epoch:  # else it empties at its next use
            for tok, lst in entries:
                assert post.get(tok) is lst, tok
            assert len({tok for tok, _ in entries}) == len(entries)


def test_collisions() -> None:
    run_machine(Collisions, 80, 40)


def _traced(make: Any) -> tuple[Any, int]:
    """``make()`` and the bytes of Python-allocator memory it holds on return."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        got = make()
        return got, tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_a_small_vocabulary_keeps_a_small_cache() -> None:
    """The table grows with the posting dict (a memory of a few hundred tokens, e.g. one
    conversation, does not pay the full table's megabyte: its slots are scattered, so
    nearly every page of it would be touched)."""
    vocab = SubstringVocab()
    post: dict[str, array[int]] = {}

    texts = [" ".join(f"w{gid}x{k}" for k in range(10)) for gid in range(20)]
    for gid, low in enumerate(texts):  # 200 tokens with their lists, before tracing
        ccore.add_text_known(post, low, gid, vocab)

    def small() -> object:  # the cache, filled with them (each list one append longer)
        cache = ccore.token_cache()
        for gid, low in enumerate(texts, 20):
            ccore.add_text_cached(post, low, gid, vocab, cache, 0)
        return cache

    cache, size = _traced(small)
    assert size < 64 * 1024
    assert len(ccore.cache_entries(cache)[2]) > 0  # it is used
    # It grows as tokens come (emptied when it does: only a cache), to the full table.
    for gid in range(40, 3040):
        low = " ".join(f"w{gid}x{k}" for k in range(10))
        ccore.add_text_cached(post, low, gid, vocab, cache, 0)
    entries = ccore.cache_entries(cache)[2]
    assert len(entries) > 8192  # more slots than a small table has
    for tok, lst in entries:
        assert post[tok] is lst
    assert post["w3039x9"] == array("i", [3039])
    ccore.add_text_cached(post, "w5x1 w3039x9", 3040, vocab, cache, 0)
    assert post["w5x1"] == array("i", [5, 25, 3040])
    assert post["w3039x9"] == array("i", [3039, 3040])
