"""Branch open33: the texts' groups (the core's ``texts_groups`` / ``texts_first``, the
restore's digest thread) take an ASCII text's cached hash when not every text has one.

Since wire32 the row reader hashes only the ASCII texts it puts in the entries' store
(``FoldedRows.hashes``, set on the texts ``rows_texts`` makes), so at 1M one text in
eight came without a hash and the table hashed every text's data again (~0.4 s of the
digest thread, which the open's thread waits for). Now (``texts_ascii_hashes``, on by
default) an ASCII str goes by str's hash (its cached one, else computed from its bytes
as str's hash does, without the GIL) and only the others by the data's own hash: equal
strs have one kind, so each value takes one way.
With the knob on and off: the same mask and numbers as a reference written out here,
whatever mix of cached and uncached, ASCII and not.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from tests.strategies import examples

from .test_open20_gids import _copies, _reference_groups

wo: Any = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "texts_groups"),
    reason="the word overlap core is not built",
)

_TEXT = st.text(
    alphabet=st.sampled_from("ab \u00e9\u20ac\U0001f600") | st.characters(max_codepoint=0x7F),
    max_size=10,
)


@pytest.fixture
def knob() -> Iterator[Any]:
    was = wo.texts_ascii_hashes(True)
    try:
        yield wo.texts_ascii_hashes
    finally:
        wo.texts_ascii_hashes(was)


def _fresh(texts: list[str]) -> list[str]:
    """New str objects equal to ``texts`` (no hash cached on them)."""
    return ["".join(list(t)) for t in texts]


@needs_c
@settings(max_examples=examples(200), deadline=None)
@given(texts=st.lists(_TEXT, max_size=60), seed=st.integers(0, 2**32))
def test_groups_alike_with_some_hashes_cached(texts: list[str], seed: int) -> None:
    rng = random.Random(seed)
    base = _copies(texts, rng)
    want_mask, want_gids = _reference_groups(base)
    was = wo.texts_ascii_hashes(True)
    try:
        for on in (True, False):
            wo.texts_ascii_hashes(on)
            own = _fresh(base)
            for t in own:  # some hashes cached (as the reader's), the rest not
                if rng.random() < 0.5:
                    hash(t)
            got = wo.texts_groups(tuple(own))
            assert got is not None
            assert got[0] == want_mask
            assert list(memoryview(got[1]).cast("q")) == want_gids
            assert wo.texts_first(tuple(_fresh(base))) == want_mask
    finally:
        wo.texts_ascii_hashes(was)


@needs_c
def test_an_ascii_text_cached_and_its_uncached_copy_are_one_group(knob: Any) -> None:
    for on in (True, False):
        knob(on)
        cached = "".join(["tool result ", "42"])
        hash(cached)
        copy = "".join(["tool result ", "4", "2"])  # equal, its hash not cached
        wide = "".join(["r\u00e9sum\u00e9 ", "42"])  # not ASCII: by its data
        wide_copy = "".join(["r\u00e9sum\u00e9 ", "4", "2"])
        got = wo.texts_groups((cached, wide, copy, wide_copy, "x"))
        assert got is not None
        assert got[0] == bytes([1, 1, 0, 0, 1])
        assert list(memoryview(got[1]).cast("q")) == [0, 1, 0, 1, 2]


@needs_c
def test_an_unreadable_item_still_gives_none(knob: Any) -> None:
    class Sub(str):
        pass

    for on in (True, False):
        knob(on)
        fresh = "".join(["a", "b"])  # uncached: the ASCII pass runs and meets Sub
        assert wo.texts_groups((fresh, Sub("ab"))) is None
        assert wo.texts_first((fresh, 3)) is None


@needs_c
def test_the_knob_refuses_a_non_bool_and_returns_what_it_was(knob: Any) -> None:
    assert knob(False) is True
    assert knob(True) is False
    with pytest.raises(TypeError, match="texts_ascii_hashes"):
        knob(1)
    assert knob(True) is True
