"""SubstringVocab answers exactly which items contain a word, through add/remove churn."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._substring import SubstringVocab

alphabet = st.sampled_from("abcé{}\":_-")
items = st.text(alphabet, min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
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
