"""Branch store5's store path (issue #20's store target), each against the path before it.

* ``vocab_acquire_fast`` (``knobs._ACQUIRE_FAST``, through ``ccore.add_text_cached``
  and ``ccore.add_texts_cached``): a new token's grams acquired without its key set
  leave exactly the structures of the key-set path, down to the order of ``_grams``
  and of every ``_sub`` set (what a short word's activation reads), with short words
  active or not, tokens that repeat a gram, and tokens with none, one or many new grams;
  and the same as the pure-Python ``SubstringVocab.acquire``;
* ``knobs._UNTRACK``: the posting lists, gram lists and ``_sub`` sets the compiled add
  makes are not tracked by the cyclic collector (tracked with the knob off), and the
  structures are the same;
* ``fold_hash_direct`` (``textfold._FOLD_DIRECT``) is ``fold_hash`` and the Python
  reference on any text, and the state's duplicate groups do not depend on the knob.
"""

from __future__ import annotations

import gc
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels, textfold
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import relevance_keys
from .strategies import EXAMPLES_SCALE, PROFILE_SCALES, examples
from .test_storepath import _structures, texts

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: Few letters, so tokens share grams, repeat grams ("aaaa") and bring several new ones.
_TOKENS = st.text("abcé", min_size=1, max_size=9)
_SHORT = st.text("abcé", min_size=1, max_size=2)


def _ordered(vocab: SubstringVocab) -> tuple[Any, ...]:
    """The structures with every order a reader could see: the dicts' insertion order
    and the sets' iteration order (the same in one process for the same insertions)."""
    return (
        list(vocab._ids.items()),
        list(vocab._items.items()),
        list(vocab._grams.items()),
        [(k, list(v)) for k, v in vocab._sub.items()],
        vocab._next_id,
        vocab._refs,
    )


def assert_same_sides(sides: dict[bool, tuple[dict[str, array[int]], SubstringVocab]]) -> None:
    """The two sides' (posting lists, vocabulary) are equal: the structures, every order a
    reader could see, and the posting lists item by item in the dict's order."""
    assert _structures(*sides[True]) == _structures(*sides[False])
    assert _ordered(sides[True][1]) == _ordered(sides[False][1])
    assert {t: list(a) for t, a in sides[True][0].items()} == {
        t: list(a) for t, a in sides[False][0].items()
    }


def _texts_of(draw_tokens: list[list[str]]) -> list[str]:
    return [" ".join(tokens) for tokens in draw_tokens]


def add_in_parts(
    post: dict[str, array[int]],
    vocab: SubstringVocab,
    cache: Any,
    lows: list[str],
    activations: list[tuple[int, str]],
    cuts: list[int],
) -> None:
    """Add ``lows`` (group numbers from 0) in parts of ``cuts`` texts (one text through
    ``add_text_cached``, more through ``add_texts_cached``), the rest in one part; before
    the part starting at text ``when``, ``vocab.lookup(word)`` for each ``(when,
    word)`` of ``activations`` (short words made active between adds)."""
    at = 0
    for cut in [*cuts, len(lows)]:
        for when, word in activations:
            if when == at:
                vocab.lookup(word)
        part = lows[at : at + cut]
        if len(part) == 1:
            ccore.add_text_cached(post, part[0], at, vocab, cache, 0)
        else:
            ccore.add_texts_cached(post, part, at, vocab, cache, 0)
        at += len(part)
        if at >= len(lows):
            break


@core
@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(st.lists(_TOKENS, max_size=6), max_size=16),
    st.lists(st.tuples(st.integers(0, 16), _SHORT), max_size=4),
    st.lists(st.integers(1, 5), max_size=6),
)
def test_acquire_fast_leaves_the_key_set_paths_structures(
    token_lists: list[list[str]], activations: list[tuple[int, str]], cuts: list[int]
) -> None:
    lows = _texts_of(token_lists)
    sides = {}
    for fast in (False, True):
        post: dict[str, array[int]] = {}
        vocab = SubstringVocab()
        cache = ccore.token_cache()
        wo_knobs._ACQUIRE_FAST = wo_knobs._UNTRACK = fast
        try:
            add_in_parts(post, vocab, cache, lows, activations, cuts)
            for _, word in activations:
                vocab.lookup(word)
        finally:
            wo_knobs._ACQUIRE_FAST = wo_knobs._UNTRACK = True
        vocab._check()
        sides[fast] = (post, vocab)
    assert_same_sides(sides)


@core
@settings(max_examples=examples(200), deadline=None)
@given(st.lists(texts() | st.text("ab \t\u2003é", max_size=12), max_size=24))
def test_acquire_fast_is_the_python_vocabulary(lows: list[str]) -> None:
    lows = [t.lower() for t in lows]
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    ccore.add_texts_cached(post, lows, 0, vocab, ccore.token_cache(), 0)
    ref = SubstringVocab()
    ref_post: dict[str, list[int]] = {}
    for gid, low in enumerate(lows):
        for tok in set(low.split()):
            if tok in ref_post:
                ref_post[tok].append(gid)
            else:
                ref.acquire(tok)
                ref_post[tok] = [gid]
    # The ids may come in another order than the reference's (its own token sets), so
    # compare by item: each item's grams and its posting list.
    assert {t: list(a) for t, a in post.items()} == ref_post
    assert set(vocab._ids) == set(ref._ids)
    by_item = {g: sorted(vocab._items[i] for i in lst) for g, lst in vocab._grams.items()}
    ref_by_item = {g: sorted(ref._items[i] for i in lst) for g, lst in ref._grams.items()}
    assert by_item == ref_by_item
    assert vocab._sub == ref._sub


@core
def test_acquire_fast_examples() -> None:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    # "aaaa": the gram "aaa" twice, one new gram; "abcab": "abc", "bca", "cab" new.
    assert ccore.add_texts_cached(post, ["aaaa abcab", "abca"], 0, vocab, cache, 0) == 3
    assert vocab._grams["aaa"] == [vocab._ids["aaaa"]]
    assert vocab._grams["abc"] == [vocab._ids["abcab"], vocab._ids["abca"]]
    assert vocab._sub["bc"] == {"abc", "bca"}
    assert post["abca"] == array("i", [1])
    vocab.lookup("ab")  # active: a new token's "ab" goes to its own list
    assert ccore.add_text_cached(post, "xaby", 2, vocab, cache, 0) == 1
    assert vocab._grams["ab"][-1] == vocab._ids["xaby"]
    assert vocab._grams["ab"].count(vocab._ids["xaby"]) == 1
    vocab._check()


@core
@pytest.mark.parametrize("untrack", [False, True])
def test_untrack_knob(untrack: bool) -> None:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    wo_knobs._UNTRACK = untrack
    try:
        ccore.add_texts_cached(post, ["alpha beta", "beta gamma"], 0, vocab, ccore.token_cache(), 0)
        ccore.add_text_cached(post, "delta", 2, vocab, ccore.token_cache(), 0)
    finally:
        wo_knobs._UNTRACK = True
    made = [*post.values(), *vocab._grams.values(), *vocab._sub.values()]
    assert len(made) == 4 + 11 + 24
    assert {gc.is_tracked(x) for x in made} == {not untrack}
    gc.collect()  # the collector is not upset by them
    assert post["beta"] == array("i", [0, 1])
    assert vocab._grams["lta"] == [vocab._ids["delta"]]
    vocab._check()


@pytest.mark.skipif(textfold._fold_hash_direct is None, reason="the core is not built")
@settings(max_examples=examples(500), deadline=None)
@given(st.text() | st.text("aBß İΣσς ǅ\u00a0\u2003\u0130ﬁ\t\n", max_size=30))
def test_fold_hash_direct_is_fold_hash(text: str) -> None:
    assert textfold._fold_hash_direct is not None
    assert textfold._fold_hash_c is not None
    assert textfold._fold_hash_direct(text) == textfold._fold_hash_c(text)
    assert textfold._fold_hash_direct(text) == textfold.fold_hash_python(text)


@pytest.mark.skipif(textfold._fold_hash_direct is None, reason="the core is not built")
def test_fold_hash_direct_refuses_a_non_str() -> None:
    assert textfold._fold_hash_direct is not None
    with pytest.raises(TypeError):
        textfold._fold_hash_direct(b"x")  # type: ignore[arg-type]


@pytest.mark.skipif(textfold._fold_hash_direct is None, reason="the core is not built")
def test_fold_knob_chooses_the_function_and_keeps_the_groups() -> None:
    memos = ["Straße  Café", "STRASSE café", "ǅemal", "džemal", "plain", "PLAIN "]
    groups = []
    for direct in (False, True):
        textfold._FOLD_DIRECT = direct
        textfold._FOLD_TABLE = False  # its own choice: tests/test_store8.py
        try:
            want = textfold._fold_hash_direct if direct else textfold._fold_hash_c
            assert textfold.fold_hash_c() is want
            state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            state.store_many([MemoryEntry(memory=m, category=MemoryCategory.FACT) for m in memos])
            groups.append(sorted(len(state._dup_group(k)) for k in state._dups))
        finally:
            textfold._FOLD_DIRECT = True
            textfold._FOLD_TABLE = True
    assert groups[0] == groups[1] == [1, 1, 2, 2]


def _relevance_lists(state: MemoryState) -> tuple[Any, ...]:
    rel: Any = state._by_relevance
    rel._check()
    return ([list(map(id, x)) for x in rel._lists], relevance_keys(rel), rel._len)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from([1.0, 0.5, 0.25]), st.booleans()), max_size=12),
        max_size=8,
    ),
    st.sampled_from([4, 1000]),
    st.booleans(),
)
def test_relevance_append_is_sorted_key_list_add(
    batches: list[list[tuple[float, bool]]], load: int, index_first: bool
) -> None:
    from actormem._engine import state as state_module

    entries = [
        [
            MemoryEntry(
                memory=f"text {b} {i}",
                category=MemoryCategory.FACT,
                relevance=rel,
                key=f"k{i % 3}" if keyed else None,
            )
            for i, (rel, keyed) in enumerate(batch)
        ]
        for b, batch in enumerate(batches)
    ]
    sides = []
    for append in (False, True):
        state_module._RELEVANCE_APPEND = append
        try:
            state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            state._by_relevance._reset(load)
            for batch in entries:
                if index_first and len(state._by_relevance):
                    state._by_relevance[len(state._by_relevance) // 2]  # the positional index
                state.store_many(batch)
                sides.append(_relevance_lists(state))
        finally:
            state_module._RELEVANCE_APPEND = True
    old, new = sides[: len(sides) // 2], sides[len(sides) // 2 :]
    # The records are other objects in each run: the keys (seq and born included),
    # maxima, lengths and sublist sizes after every batch.
    assert [(k, n) for _, k, n in new] == [(k, n) for _, k, n in old]
    assert [[len(x) for x in lists] for lists, *_ in new] == [
        [len(x) for x in lists] for lists, *_ in old
    ]


def test_relevance_append_falls_back_without_sortedcontainers_internals(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sortedcontainers release without the private lists the fast append reads makes
    ``store_many`` take ``SortedKeyList.add``: the same order, no AttributeError."""
    from actormem._engine import state as state_module

    entries = [
        MemoryEntry(memory=f"text {i}", category=MemoryCategory.FACT, relevance=0.5)
        for i in range(40)
    ]
    from sortedcontainers import SortedKeyList

    adds = 0
    real_add = SortedKeyList.add

    def counting_add(self: SortedKeyList, value: object) -> None:
        nonlocal adds
        adds += 1
        real_add(self, value)

    monkeypatch.setattr(SortedKeyList, "add", counting_add)
    orders, added = [], []
    for internals in (True, False):
        monkeypatch.setattr(state_module, "_SORTED_INTERNALS", internals)
        adds = 0
        state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
        state.store_many(entries[:20])
        state.store_many(entries[20:])
        state._check()
        orders.append([rec.entry.memory for rec in state._by_relevance])
        added.append(adds)
    assert orders[0] == orders[1]
    assert len(orders[0]) == 40
    assert added[0] < 40  # the fast append took most of them
    assert added[1] == 40  # without the internals, every record through add


@core
@pytest.mark.parametrize("flags", [-1, 64, 127, 255, -(1 << 31)])
def test_add_cached_refuses_unknown_flags(flags: int) -> None:
    """The C adds' ``flags`` are 0 to 63 (1 acquire fast, 2 untrack, 4 the token cache for
    texts that are not ASCII, branch store6; 8 the active words' bits, mainjob7; 16 the
    one-pass scan, store8; 32 the gram strs' table, mainjob11): any other value is
    refused before anything is added, for one text and for a batch."""
    mod = kernels.wo_core()
    assert mod is not None
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    with pytest.raises(ValueError, match="flags"):
        mod.add_text_cached(post, "alpha beta", 0, vocab, cache, 0, flags)
    with pytest.raises(ValueError, match="flags"):
        mod.add_texts_cached(post, ["alpha beta", "gamma"], 0, vocab, cache, 0, flags)
    assert post == {}
    assert len(vocab) == 0
    for good in range(64):
        mod.add_text_cached(post, "alpha beta", good, vocab, cache, 0, good)
    assert post["alpha"] == array("i", range(64))
    vocab._check()


@pytest.mark.skipif(textfold._fold_hash_direct is None, reason="the core is not built")
def test_fold_hash_direct_every_code_point() -> None:
    """Every code point (surrogates, astral planes, characters whose casefold is several,
    such as ß, ŉ, ǰ, ﬃ), alone and inside texts of each string kind (UCS-1, UCS-2,
    UCS-4) and beside whitespace: ``fold_hash_direct`` is ``fold_hash`` (str.casefold)."""
    direct, through = textfold._fold_hash_direct, textfold._fold_hash_c
    assert direct is not None
    assert through is not None
    # Under AddressSanitizer (EXAMPLES_SCALE below the ci profile's, ~80 s for all 5.6M
    # texts) a stride of the code points, but always those below U+0800 and those whose
    # casefold is not one character; the plain suite (~1.6 s) checks them all.
    stride = 1 if EXAMPLES_SCALE >= PROFILE_SCALES["ci"] else max(2, round(1 / EXAMPLES_SCALE))
    wrong = []
    for c in range(0x110000):
        ch = chr(c)
        if c % stride and c >= 0x800 and len(ch.casefold()) == 1:
            continue
        for text in (ch, f"A {ch}é", f"\u0100{ch} \u2003", f"{ch}\U0001f600{ch}", ch * 3):
            if direct(text) != through(text):
                wrong.append((hex(c), text))
    assert wrong == []
    assert direct("STRASSE  x") == direct("straße\u2003X") == through("Strasse x")
