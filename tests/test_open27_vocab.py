"""Branch open27: the image's tokens acquired into the vocabulary in one C call
(issue #20, item 5).

``wordoverlap.persist._VOCAB_ALL``: ``Prepared`` (the image-only part of the
word-overlap restore, run ahead of the rows) fills the new index's ``SubstringVocab``
with ``ccore.acquire_all(vocab, set(tokens))`` instead of ``add_text`` on the joined
tokens, which made a posting list per token only to drop it and took the slow acquire.
Required: the very same vocabulary (items, ids, reference counts, the gram dict's keys in
order with their lists, the ``_sub`` dict's keys in order with each set's iteration
order), with every setting of the compiled adds' knobs; the same restored state as a
rebuild with the knob on and off; a stale or foreign image refused alike.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore, knobs
from actormem._index.wordoverlap import persist as wo_persist
from tests.strategies import examples

from .setups import RESTORE_CASES, restores_as_rebuilt, stale_and_foreign_refused_alike
from .test_index_image import _image, _messy

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "acquire_all"), reason="the word overlap core is not built"
)

KNOBS = ((wo_persist, "_VOCAB_ALL"),)

#: The compiled adds' knobs acquire_all reads (through ccore._add_flags()).
ADD_KNOBS = ("_ACQUIRE_FAST", "_UNTRACK", "_GRAM_STRS")


def _shape(v: SubstringVocab) -> tuple[Any, ...]:
    """Everything of ``v`` that an order or a value could differ in."""
    return (
        list(v._ids.items()),
        list(v._items.items()),
        list(v._refs.items()),
        [(g, list(lst)) for g, lst in v._grams.items()],
        [(k, list(s)) for k, s in v._sub.items()],
        list(v._dead.items()),
        sorted(v._active),
        v._next_id,
    )


def _by_add_text(tokens: list[str], before: list[str]) -> SubstringVocab:
    """The path before: ``before`` acquired one by one, then ``add_text`` over the
    joined tokens (as ``Prepared`` called it), its posting dict dropped."""
    v = SubstringVocab()
    for tok in before:
        v.acquire(tok)
    ccore.add_text({}, " ".join(tokens), 0, v)
    return v


# Tokens as the tokenizer leaves them (lower case, no whitespace): short ones (the 1/2
# character items and their parts), ones sharing grams, non-ASCII ones.
_TOKEN = st.text(alphabet=st.sampled_from("abcdeé\u4e2d\U0001f600xyz0"), min_size=1, max_size=9)


@needs_c
@settings(max_examples=examples(60), deadline=None)
@given(
    tokens=st.lists(_TOKEN, min_size=1, max_size=60, unique=True),
    before=st.lists(_TOKEN, max_size=8),
    add_knobs=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_acquire_all_gives_add_texts_vocabulary(
    tokens: list[str], before: list[str], add_knobs: tuple[bool, bool, bool]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for name, on in zip(ADD_KNOBS, add_knobs, strict=True):
            mp.setattr(knobs, name, on)
        want = _by_add_text(tokens, before)
        got = SubstringVocab()
        for tok in before:
            got.acquire(tok)
        fresh = ccore.acquire_all(got, set(tokens))
    assert fresh == len(set(tokens) - set(before))
    assert _shape(got) == _shape(want)
    got._check()
    # and each lookup answers as the Python vocabulary's (acquire one by one)
    ref = SubstringVocab()
    for tok in before:
        ref.acquire(tok)
    for tok in set(tokens):
        ref.acquire(tok)
    for word in {*tokens, *(t[:2] for t in tokens), *(t[1:4] for t in tokens)}:
        assert sorted(got.lookup(word)) == sorted(ref.lookup(word))


@needs_c
def test_acquire_all_takes_a_list_in_its_order_and_counts_repeats() -> None:
    toks = ["abc", "bcd", "abc", "x", "ab"]
    got = SubstringVocab()
    assert ccore.acquire_all(got, toks) == 4
    want = SubstringVocab()  # the compiled acquire, one token at a time, in the list's order
    for tok in toks:
        ccore.add_text({}, tok, 0, want)
    assert _shape(got) == _shape(want)
    assert got._refs == {0: 2}  # "abc" twice: two users
    assert list(got._ids) == ["abc", "bcd", "x", "ab"]


@needs_c
def test_acquire_all_refuses_bad_arguments() -> None:
    v = SubstringVocab()
    with pytest.raises(TypeError):
        ccore.acquire_all(object(), {"abc"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ccore.acquire_all(v, ("abc",))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ccore.acquire_all(v, frozenset({"abc"}))  # type: ignore[arg-type]
    assert len(v) == 0
    with pytest.raises(TypeError):
        ccore.acquire_all(v, ["abc", 3, "bcd"])  # type: ignore[list-item]
    assert list(v._ids) == ["abc"]  # the items before it acquired
    with pytest.raises(ValueError, match="flags"):
        wo.acquire_all(v, ["xyz"], 64)
    with pytest.raises(TypeError):
        wo.acquire_all(v, ("xyz",), 0)
    assert list(v._ids) == ["abc"]


def test_acquire_all_without_the_core_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "wo_core", lambda: None)
    v = SubstringVocab()
    assert ccore.acquire_all(v, {"abc"}) is None
    assert len(v) == 0


@needs_c
@pytest.mark.parametrize("seed", [3, 8])
def test_a_preparation_builds_the_same_vocabulary_with_the_knob_on_and_off(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    state = _messy(WordOverlapScorer, seed, 80, 20)
    parts = _image(state)
    shapes = {}
    spy = mock.Mock(wraps=ccore.add_text)
    monkeypatch.setattr(ccore, "add_text", spy)
    for on in (True, False):
        monkeypatch.setattr(wo_persist, "_VOCAB_ALL", on)
        prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
        assert prep is not None
        prep.finish()
        assert prep.tokens
        shapes[on] = _shape(prep.index._vocab)
        prep.index._vocab._check()
    assert shapes[True] == shapes[False]
    assert spy.call_count == 1  # only the path before calls add_text


@needs_c
@settings(max_examples=examples(15), deadline=None)
@given(**RESTORE_CASES)
def test_the_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    def vocab_as_rebuilt(restored: Any, rebuilt: Any, mp: pytest.MonkeyPatch, on: Any) -> None:
        a, b = restored.index._vocab, rebuilt.index._vocab
        a._check()
        assert set(a._ids) == set(b._ids)
        for tok in a._ids:
            assert sorted(a._items[i] for i in a.lookup(tok[:3])) == sorted(
                b._items[i] for i in b.lookup(tok[:3])
            )

    restores_as_rebuilt(seed, n, ops, dups, KNOBS, vocab_as_rebuilt, copies=True)


@needs_c
def test_stale_and_foreign_images_give_the_same_error_with_the_knob_on_and_off() -> None:
    stale_and_foreign_refused_alike(KNOBS)
