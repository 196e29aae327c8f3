"""The BM25 core's lookups over length codes, its seeding's and offers' prefetches and its
windows' sparse clear (``knobs._LOOKUP_CODES``, ``_PREFETCH_SEEDS``, ``_SPARSE_CLEAR``,
``_PREFETCH_OFFERS``; ``Bm25Daat(lookup_codes=..., prefetch_seeds=..., sparse_clear=...,
prefetch_offers=...)``, ``bm25_daat``'s ``more`` flags).

The kernel: with every length below 128 (each its own code) any mix of the three gives
the seeding's and the walk's steps bit for bit as none of them (groups, exact scores,
cursors, ends); with longer texts (the lookups' partial scores upper bounds) every group
whose exact score reaches theta comes back once, with that score bit for bit. Through the
index (a Hypothesis driver of texts up to 300 words, deletions and an older snapshot): the
knobs on and off give the pure-Python reference's and the brute force's top-k, scores and
ties. Bad flags are refused by Python and by C. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

from array import array
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25.postings import length_codes

from .bm25_cases import NEEDS_CORE, agree_with_brute_force, bad_flags_refused, corpus
from .setups import knobs_set, theta_at_rank
from .strategies import examples
from .test_bm25_length_codes import _exact, _lists, walk

pytestmark = NEEDS_CORE

KNOBS = ("_LOOKUP_CODES", "_PREFETCH_SEEDS", "_SPARSE_CLEAR", "_PREFETCH_OFFERS")


def _steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    simd: bool, codes: Any, more: tuple[bool, bool, bool], seed: int,
) -> list[Any]:  # fmt: skip
    """A seeding step of term ``seed`` (``-1``: none), then the walk to its end: each
    step's groups, scores (as bytes), end and cursors."""
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, True, 0.8, True, True, True, simd, True, codes,
        *more,
    )  # fmt: skip
    return walk(daat, theta, budget, seed, room)


MORE = st.tuples(st.booleans(), st.booleans(), st.booleans())


def test_sparse_clear_leaves_no_score_behind() -> None:
    """Two terms on the same groups, one every 4,096 (each window of the walk holds one
    posting, at its first slot): theta above one group's score, so that a slot left
    uncleared (the group before's partial score) would mark the next window's group and
    return it; with or without the sparse clear, no group comes back."""
    nlen = 4096 * 6
    lengths = np.full(nlen, 10, np.int32)
    groups = list(range(0, nlen, 4096))
    parts = (0.3, 0.9 / 10.0, 1.2, 0.75, 10.0, 1.0 + 1e-9)
    sat = 1.0 / (1.0 + (parts[0] + parts[1] * 10.0))
    term = (1.0, sat * parts[5], array("i", groups), array("B", [1] * len(groups)), len(groups),
            array("i"), 0)  # fmt: skip
    codes = length_codes(lengths)
    for flags in ((False, False, False), (False, False, True), (True, True, True)):
        got = _steps([term, term], lengths, parts, 4096, 2.5 * sat, 1 << 20, True, codes, flags, -1)
        assert [nums for nums, _, _, _ in got] == [[]] * len(got), flags


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 5),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0, np.inf]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    simd=st.booleans(),
    more=MORE,
    seed_term=st.integers(-1, 4),
    rank=st.sampled_from([0, 1, 3, 20]),
)
@settings(max_examples=examples(150), deadline=None)
def test_short_lengths_same_steps(
    seed: int, nlen: int, nterms: int, room: int, theta: float, budget: int, simd: bool,
    more: tuple[bool, bool, bool], seed_term: int, rank: int,
) -> None:  # fmt: skip
    """Lengths below 128: the codes' lookups are the lengths' own operations, the
    prefetch changes no value and the sparse clear zeroes every slot the walk wrote, so
    every step is the same bit for bit (sparse windows: lists of 1-5% of 12,000 groups;
    dense ones: 30-100%). ``rank`` > 0: theta is the rank-th best exact score, so that
    a group sits exactly at it."""
    lengths, terms, parts = _lists(seed, nlen, nterms, 128)
    codes = length_codes(lengths)
    theta = theta_at_rank(_exact(terms, lengths, parts), rank, theta)
    seed_term = min(seed_term, nterms - 1)
    args = (terms, lengths, parts, room, theta, budget, simd, codes)
    want = _steps(*args, (False, False, False), seed_term)
    assert _steps(*args, more, seed_term) == want


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 5),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([0.0, 0.3, 1.0, 2.5, 5.0]),
    simd=st.booleans(),
    more=MORE,
    rank=st.sampled_from([0, 1, 3, 20]),
)
@settings(max_examples=examples(120), deadline=None)
def test_long_lengths_every_group_at_theta(
    seed: int, nlen: int, nterms: int, room: int, theta: float, simd: bool,
    more: tuple[bool, bool, bool], rank: int,
) -> None:  # fmt: skip
    """Lengths up to 40,000 (codes below them): the lookups' partial scores are upper
    bounds, so every group whose exact score reaches theta (``rank`` > 0: the rank-th
    best, a group exactly at it) comes back once with that score bit for bit, with the
    knobs on as off."""
    lengths, terms, parts = _lists(seed, nlen, nterms, 40_000)
    codes = length_codes(lengths)
    exact = _exact(terms, lengths, parts)
    theta = theta_at_rank(_exact(terms, lengths, parts), rank, theta)
    want = {num: s for num, s in exact.items() if s >= theta}
    for flags in ((False, False, False), more):
        got: dict[int, float] = {}
        for nums, scores, _, _ in _steps(
            terms, lengths, parts, room, theta, 1 << 20, simd, codes, flags, -1
        ):
            for num, score in zip(nums, np.frombuffer(scores).tolist(), strict=True):
                assert num not in got
                assert score == exact[num]
                got[num] = score
        assert {num: s for num, s in got.items() if s >= theta} == want


def test_lookup_codes_prune_no_group_at_theta() -> None:
    """Lengths nearly all above 128 (the codes' floors up to 1/16 below them): the
    groups at theta are the brute force's either way, and the codes' lookups let no fewer
    groups reach the exact scores (upper bounds: never below the lengths')."""
    lengths, terms, parts = _lists(7, 5_000, 3, 40_000)
    assert (lengths >= 128).mean() > 0.9
    codes = length_codes(lengths)
    exact = _exact(terms, lengths, parts)
    for theta in (0.0, 0.5, 1.5):
        seen = {}
        for flags in ((False, False, False), (True, False, False)):
            got = [
                (num, score)
                for nums, scores, _, _ in _steps(
                    terms, lengths, parts, 4096, theta, 1 << 20, True, codes, flags, -1
                )
                for num, score in zip(nums, np.frombuffer(scores).tolist(), strict=True)
            ]
            assert all(score == exact[num] for num, score in got)
            seen[flags[0]] = {num for num, _ in got}
            assert {num for num, s in got if s >= theta} == {
                num for num, s in exact.items() if s >= theta
            }
        assert seen[False] <= seen[True]


# --------------------------------------------------------------------------- the index


def _knobs(on: tuple[bool, ...]) -> AbstractContextManager[None]:
    return knobs_set(bm25_knobs, **dict(zip(KNOBS, on, strict=True)))


@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 200),
    sides=st.lists(st.tuples(*[st.booleans()] * 4), min_size=1, max_size=3),
)
@settings(max_examples=examples(12), deadline=None)
def test_index_knobs_agree_with_reference(
    seed: int, count: int, sides: list[tuple[bool, ...]]
) -> None:
    """Texts of one to 300 words (codes above 128 for some), common and rare words, a
    deletion and an older snapshot: each side's knobs (and all on, all off) give the
    pure-Python reference's top-k (``Three.query`` asserts every path equal) and the
    brute force's, scores and ties by seq."""
    three, old, queries = corpus(seed, count)
    for on in [(True,) * 4, (False,) * 4, *sides]:
        with _knobs(on):
            agree_with_brute_force(three, old, queries, on)


# --------------------------------------------------------------------------- refusals


def test_bad_flags_refused() -> None:
    names = ("lookup_codes", "prefetch_seeds", "sparse_clear", "prefetch_offers")
    bad_flags_refused(_lists(3, 100, 2, 300), names, dict.fromkeys(names, True), 15, "bools")
