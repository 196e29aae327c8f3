"""A retrieve's query lowered, split and counted by one C call
(``wordoverlap.knobs._QUERY_WORDS_C``, ``ccore.query_words``) against ``str.lower``,
``str.split`` and the counter before it: the same text, words, counts and order; the
same hits, scores and ties either way; a non-ASCII query left to Python, a non-str
refused."""

from __future__ import annotations

import random
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import stores_and_retrieves
from .strategies import examples

core = ccore.core()
needs_core = pytest.mark.skipif(
    core is None or not hasattr(core, "query_words"), reason="compiled core not built"
)

# Every ASCII whitespace str.split() knows, letters of both cases, punctuation.
_ASCII = st.lists(
    st.sampled_from(list("aAbBzZ09.-_ \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f") + ["Deploy", "THE"]),
    max_size=80,
).map("".join)


def _python(query: str) -> tuple[str, dict[str, int], int]:
    low = query.lower()
    words = low.split()
    return low, dict(Counter(words)), len(words)


@needs_core
@settings(max_examples=examples(300), deadline=None)
@given(query=_ASCII)
def test_query_words_equals_lower_split_count(query: str) -> None:
    got = core.query_words(query)
    assert got is not None
    low, mult, n = got
    want = _python(query)
    assert (low, mult, n) == want
    assert list(mult) == list(want[1])  # first-seen order
    assert type(low) is str
    assert all(type(w) is str for w in mult)


@needs_core
def test_query_words_long_and_repeated() -> None:
    rng = random.Random(18)
    for size in (1, 2, 3, 255, 256, 4096):
        q = " ".join(rng.choice(["a", "B", "ab", "AB", "x" * 40]) for _ in range(size))
        assert core.query_words(q) == _python(q)
        assert list(core.query_words(q)[1]) == list(_python(q)[1])


@needs_core
def test_query_words_refusals_and_non_ascii() -> None:
    assert core.query_words("é Deploy") is None
    assert core.query_words("a\x85b") is None  # NEL: not ASCII, split by str.split
    for bad in (b"abc", None, 3, ["a"]):
        with pytest.raises(TypeError):
            core.query_words(bad)

    class S(str):
        pass

    with pytest.raises(TypeError):
        core.query_words(S("abc"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wo_knobs, "_QUERY_WORDS_C", False)
        assert ccore.query_words("abc") is None


_WORDS = ["deploy", "Deploy", "DEPLOY", "blue", "the", "Then", "rust", "go", "a", "ab", "é", "x.y"]
_NOW = datetime(2026, 12, 6, tzinfo=UTC)


async def _run(seed: int, ops: int) -> list[Any]:
    return await stores_and_retrieves(seed, ops, _WORDS)


@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), ops=st.integers(1, 120))
def test_same_results_either_way(seed: int, ops: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(wo_knobs, "_QUERY_WORDS_C", True)
        on = trio.run(_run, seed, ops)
        mp.setattr(wo_knobs, "_QUERY_WORDS_C", False)
        off = trio.run(_run, seed, ops)
    assert on == off
