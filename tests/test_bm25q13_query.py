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
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25.postings import dense_make, length_codes

from .setups import each_setting
from .strategies import examples
from .test_bm25q6_lookups import agree_with_brute_force, corpus
from .test_bm25q9_walk import _lists
from .test_bm25q12_whole import _table

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

#: Bm25Daat's bools after ``codes`` (the search's defaults but the CPU-dependent ones).
_FLAGS = {
    "lookup_codes": True, "prefetch_seeds": True, "sparse_clear": True,
    "prefetch_offers": True, "dense_tfs": True, "sparse_quarter": True,
    "scalar_no_prefetch": True, "walk_ones": True, "mark_cut": True, "scan_marks": True,
}  # fmt: skip


def _with_dense(terms: list[Any], nlen: int) -> list[Any]:
    """Each term with its dense frequency array (``bits, upto, dpos``) over its groups
    below two thirds of ``nlen`` (those above are sought in the list)."""
    return [(*term[:7], *dense_make(term[2], term[3], nlen, 2 * nlen // 3)) for term in terms]


def _by_daat(
    terms: list[Any], lengths: Any, parts: Any, codes: Any, table: list[Any], first: Any,
    limit: int, budget: int, accept: Any, version: int, seed: int,
) -> tuple[list[Any], int]:  # fmt: skip
    """The query through ``Bm25Daat`` as ``search._core_steps`` drives a drained one: the
    best records (score as bytes, seq, record id) and the postings walked."""
    from actormem._index import _cbm25

    daat = kernels.Bm25Daat(
        terms, lengths, parts, max(limit, 4096), True, False, 0.8, True, True, True, False,
        True, codes, **_FLAGS,
    )  # fmt: skip
    daat.offer_to(table, version, accept, limit, max(limit, 128), columns=True)
    before = _cbm25.bm25_walked()
    daat.drive(budget, seed, max(limit, 128), first)
    assert daat.drive(budget, first=first, to_end=True)
    best = [(np.float64(s).tobytes(), r.seq, id(r)) for s, r in daat.best()]
    return best, _cbm25.bm25_walked() - before


def _by_query(
    terms: list[Any], lengths: Any, parts: Any, codes: Any, table: list[Any], first: Any,
    limit: int, budget: int, accept: Any, version: int, seed: int, one_call: bool,
    scratch: bool,
) -> tuple[list[Any], int]:  # fmt: skip
    """The same query through ``kernels.bm25_query`` (``scratch``: the walk's scratch
    made once a call)."""
    from actormem._index import _cbm25

    prefetch, more = kernels.daat_flags(
        False, True, True, True, False, True, *_FLAGS.values()
    )  # fmt: skip
    flags = (prefetch, more | (kernels.CALL_SCRATCH if scratch else 0))
    before = _cbm25.bm25_walked()
    got = kernels.bm25_query(
        terms, lengths, parts, max(limit, 4096), flags, 0.8, codes,
        (table, version, accept, limit, first, True), [seed], max(limit, 128), budget,
        one_call,
    )  # fmt: skip
    best = [(np.float64(s).tobytes(), r.seq, id(r)) for s, r in got]
    return best, _cbm25.bm25_walked() - before


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 6),
    top_length=st.sampled_from([128, 40_000]),
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
    lengths, terms, parts = _lists(seed, nlen, nterms, top_length)
    codes = length_codes(lengths) if coded else None
    if coded:
        terms = _with_dense(terms, nlen)
    slots, first = _table(random.Random(seed), nlen)
    accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
    start = random.Random(seed).randrange(len(terms))
    args = (terms, lengths, parts, codes, slots, first if ties else None, limit, budget)
    want = _by_daat(*args, accept, version, start)
    for one_call in (True, False):
        for scratch in (True, False):
            assert _by_query(*args, accept, version, start, one_call, scratch) == want


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_fast_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot, queries with repeated words: the knobs on and off give the pure-Python
    reference's top-k (``Three.query`` asserts every path equal) and the brute force's,
    scores and ties."""
    three, old, queries = corpus(seed, count)
    queries.append("r1 r1 c0 r2 r2 r2 c3 nope")  # weights of 2 and 3, an unknown word
    each_setting(
        bm25_knobs,
        ("_QUERY_FAST", "_ONE_CALL", "_CALL_SCRATCH"),
        lambda on: agree_with_brute_force(three, old, queries, on),
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

    lengths, terms, parts = _lists(5, 200, 3, 300)
    slots, _ = _table(random.Random(5), 200)
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
