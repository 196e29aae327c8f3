"""SubstringVocab answers exactly which items contain a word, through add/remove churn."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.substring import SubstringVocab

from .strategies import examples

alphabet = st.sampled_from("abcé{}\":_-")
items = st.text(alphabet, min_size=1, max_size=30)


@settings(max_examples=examples(300), deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), items), max_size=60),
    words=st.lists(st.text(alphabet, min_size=1, max_size=25), min_size=1, max_size=10),
)
def test_lookup_matches_brute_force(ops: list[tuple[bool, str]], words: list[str]) -> None:
    vocab = SubstringVocab()
    counts: dict[str, int] = {}
    for add, item in ops:
        if add or not counts.get(item):
            vocab.acquire(item)
            counts[item] = counts.get(item, 0) + 1
        else:
            vocab.release(item)
            counts[item] -= 1
        vocab._check([i for i, n in counts.items() for _ in range(n)])
    present = {i for i, n in counts.items() if n}
    for word in words:
        got = {vocab.item(i) for i in vocab.lookup(word)} - {None}  # removed ids may linger
        assert got == {i for i in present if word in i}
        assert vocab.gram_size(word) >= len(got)


@settings(max_examples=examples(300), deadline=None)
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "lookup", "steps"]),
            st.text(alphabet, min_size=1, max_size=12),
        ),
        max_size=80,
    ),
    step=st.sampled_from([1, 4, 512]),
)
def test_short_words_stay_exact_once_active(
    ops: list[tuple[str, str]], step: int
) -> None:
    # Words of 1 or 2 characters are answered from the 3-grams' lists once, then kept
    # exact (active) through later adds and removes; lookups interleave with the churn.
    import actormem._index.substring as substring

    old_step = substring._STEP
    substring._STEP = step
    try:
        vocab = SubstringVocab()
        counts: dict[str, int] = {}
        for kind, text in ops:
            if kind == "add" or (kind == "remove" and not counts.get(text)):
                vocab.acquire(text)
                counts[text] = counts.get(text, 0) + 1
            elif kind == "remove":
                vocab.release(text)
                counts[text] -= 1
            else:
                word = text[:2] if len(text) % 2 else text[:1]
                if kind == "lookup":
                    ids = vocab.lookup(word)
                else:
                    gen = vocab.lookup_steps(word)
                    while True:
                        try:
                            next(gen)
                        except StopIteration as stop:
                            ids = stop.value
                            break
                got = {vocab.item(i) for i in ids} - {None}
                assert got == {i for i, n in counts.items() if n and word in i}, word
            vocab._check([i for i, n in counts.items() for _ in range(n)])
    finally:
        substring._STEP = old_step
