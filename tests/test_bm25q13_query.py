"""A drained BM25 query's short path to the core (``knobs._QUERY_FAST``,
``MaxScoreSearch.drained``, ``kernels.bm25_query``), its seeding and walk in one core
call (``knobs._ONE_CALL``, ``bm25_daat``'s ``more & 4096``) and the walk's scratch made
once a call (``knobs._CALL_SCRATCH``, ``more & 8192``).

The kernel: lists of 0.1-30% of up to 12,000 groups, a table of records (one or several
a group, some purged, some born after or dead before the snapshot), a filter or none,
first seqs or none, the length codes and dense arrays or not, any budget and limit:
``bm25_query`` in one call and in two give the heap (scores as bytes, seqs, records) and
the postings walked of ``Bm25Daat``'s seeding and ``drive(to_end=True)``. Through the
index (a Hypothesis driver) the knobs on and off give the pure-Python reference's and the
brute force's top-k, scores and ties, at the newest version (the short path) and an older
one (the sliced search drained); the short path is the one taken by default. Bad
``more & 4096`` arguments are refused in C and move nothing. stress/asan_kernels.sh runs
this file.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels

from .bm25_cases import (
    LISTS,
    NEEDS_CORE,
    by_daat,
    by_query,
    corpus,
    daat_case,
    group_table,
    index_agrees,
    walk_lists,
)
from .strategies import examples

pytestmark = NEEDS_CORE


@given(
    **LISTS,
    limit=st.sampled_from([1, 3, 10, 100, 200]),
    budget=st.sampled_from([1, 100, 16_384, 1 << 20]),
    version=st.integers(1, 3),
    filtered=st.booleans(),
    ties=st.booleans(),
    coded=st.booleans(),
)
@settings(max_examples=examples(60), deadline=None)
def test_query_same_as_daat(
    seed: int, nlen: int, nterms: int, top_length: int, limit: int, budget: int,
    version: int, filtered: bool, ties: bool, coded: bool,
) -> None:  # fmt: skip
    """``bm25_query`` in one call (the seeding then the walk) and in two, the walk's
    scratch made once a call or once a step: the same heap and postings walked as
    ``Bm25Daat``'s seeding and walk to the end (any seed term)."""
    case = daat_case(
        seed, nlen, nterms, top_length, codes=coded, dense=coded, ties=ties, filtered=filtered
    )
    want = by_daat(case, limit, budget, version)
    for one_call in (True, False):
        for scratch in (True, False):
            got = by_query(case, limit, budget, version, one_call=one_call, scratch=scratch)
            assert got == want


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_fast_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot, queries with repeated words: the knobs on and off give the pure-Python
    reference's top-k (``Three.query`` asserts every path equal) and the brute force's,
    scores and ties."""
    index_agrees(
        seed,
        count,
        ("_QUERY_FAST", "_ONE_CALL", "_CALL_SCRATCH"),
        ["r1 r1 c0 r2 r2 r2 c3 nope"],  # weights of 2 and 3, an unknown word
    )


def test_fast_path_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """By default a drained query at the newest version takes the short path (one
    ``bm25_query`` a query, one core call), and one at an older version does not; the
    results equal the sliced search's either way."""
    from actormem._index import _cbm25
    from actormem._index.scoring import drain

    three, old, queries = corpus(7, 120)
    core = three.indexes["core"]
    calls: list[int] = []
    daat_calls: list[int] = []
    real, real_daat = kernels.bm25_query, _cbm25.bm25_daat

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    def counted_daat(*args: Any) -> Any:
        daat_calls.append(1)
        return real_daat(*args)

    monkeypatch.setattr(kernels, "bm25_query", counted)
    monkeypatch.setattr(_cbm25, "bm25_daat", counted_daat)
    for version, taken in ((None, True), (old, False)):
        view = three.view(version)
        for query in queries:
            del calls[:], daat_calls[:]
            got = [(s, r.seq) for s, r in core.top_k(view, query, 10, None)]
            assert len(calls) == int(taken), (version, query)
            if taken:
                assert len(daat_calls) == 1
            weights = dict.fromkeys(core.scorer.tokenizer(query), 1.0)
            sliced = drain(core.top_k_terms_steps(view, weights, 10, None))
            drained = core.top_k_terms(view, weights, 10, None)
            assert [(s, r.seq) for s, r in drained] == [(s, r.seq) for s, r in sliced]
            assert got == three.query(view, query, 10)


def test_bad_seed_then_walk_refused() -> None:
    """``more & 4096`` without ``2048``, a seed, offer or sticky, or a negative
    ``seed_room``, is refused by the C code before any work: no cursor moves, the heap
    stays empty."""
    from actormem._index import _cbm25

    lengths, terms, parts = walk_lists(5, 200, 3, 300)
    slots, _ = group_table(random.Random(5), 200)
    q = len(terms)
    cursors = np.zeros(q, np.int64)
    nums, scores = np.empty(64, np.int64), np.empty(64, np.float64)
    hn = np.zeros(2, np.int64)
    offer = (
        slots, 3, None, np.empty(5, np.float64), np.empty(5, np.int64), [None] * 5, hn,
        np.empty(128, np.int64), True, None, True,
    )  # fmt: skip
    sticky = np.zeros(q, np.uint8)
    for seed, sticky_arg, offer_arg, more, room in (
        (0, sticky, offer, 4096, 0),  # no 2048
        (-1, sticky, offer, 4096 | 2048, 0),  # no seed
        (0, sticky, None, 4096 | 2048, 0),  # no offer
        (0, None, offer, 4096 | 2048, 0),  # no sticky
        (0, sticky, offer, 4096 | 2048, -1),  # a negative seed_room
    ):
        with pytest.raises(ValueError, match="4096|seed_room"):
            _cbm25.bm25_daat(  # type: ignore[call-arg]
                terms, cursors, lengths, *parts, 0.0, 100, seed, nums, scores, sticky_arg,
                offer_arg, 0, 1.0, None, more, room,
            )  # fmt: skip
        assert cursors.tolist() == [0] * q
        assert hn.tolist() == [0, 0]
    # The same arguments with every flag it needs run, to the end.
    got = _cbm25.bm25_daat(  # type: ignore[call-arg]
        terms, cursors, lengths, *parts, 0.0, 100, 0, nums, scores, sticky, offer, 0, 1.0,
        None, 4096 | 2048, 16,
    )  # fmt: skip
    assert got[1] is True
    assert 0 < int(hn[0]) <= 5
