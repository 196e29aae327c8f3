"""The BM25 core's walk run to its end in one call (``knobs._WHOLE_DRIVE``;
``Bm25Daat.drive(to_end=True)``, ``bm25_daat``'s ``more & 2048``): after the seeding, a
query that is drained (``BM25Index.top_k``, ``top_k_terms``) takes every step of the walk
in C, the terms split again at the heap's theta between two steps, instead of one call a
step from Python.

The kernel: lists of 0.1-30% of up to 12,000 groups, a table of records (one or several
a group, some purged, some born after or dead before the snapshot), a filter or none,
first seqs or none, any budget and limit: the heap (scores as bytes, seqs, records), the
cursors and the postings walked the same as the step-by-step drive's. Through the index
(a Hypothesis driver) the knob on and off give the pure-Python reference's and the brute
force's top-k, scores and ties, at the newest version and an older one; a drained query
and a sliced one (an owner writing between the slices) agree. Bad arguments are refused
before C and move nothing. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.scoring import drain

from .bm25_cases import (
    LISTS,
    NEEDS_CORE,
    Case,
    corpus,
    daat_case,
    group_table,
    heap,
    index_agrees,
    walk_lists,
)
from .setups import bad_more_refused
from .strategies import examples
from .test_bm25_core import read_sliced

pytestmark = NEEDS_CORE


def _drive(
    case: Case, limit: int, budget: int, version: int, to_end: bool
) -> tuple[list[Any], list[int], int]:
    """One query through the core's heap as ``search._core_steps`` drives it, seeded by
    the term of the highest bound: the best records (:func:`~tests.bm25_cases.heap`),
    the cursors and the postings walked."""
    from actormem._index import _cbm25

    terms = case.terms
    daat = kernels.Bm25Daat(
        terms, case.lengths, case.parts, max(limit, 4096), True, False, 0.8, True, True, True,
        False, True, None, prefetch_seeds=True, sparse_clear=True, prefetch_offers=True,
    )  # fmt: skip
    daat.offer_to(case.table, version, case.accept, limit, max(limit, 128), columns=True)
    before = _cbm25.bm25_walked()
    seed = max(range(len(terms)), key=lambda i: terms[i][1])
    daat.drive(budget, seed, max(limit, 128), case.first)
    while not daat.drive(budget, first=case.first, to_end=to_end):
        assert not to_end, "to_end returned before the end"
    return heap(daat.best()), daat._cursors.tolist(), _cbm25.bm25_walked() - before


@given(
    **LISTS,
    limit=st.sampled_from([1, 3, 10, 100]),
    budget=st.sampled_from([1, 100, 16_384, 1 << 20]),
    version=st.integers(1, 3),
    filtered=st.booleans(),
    ties=st.booleans(),
)
@settings(max_examples=examples(60), deadline=None)
def test_to_end_same_as_steps(
    seed: int, nlen: int, nterms: int, top_length: int, limit: int, budget: int,
    version: int, filtered: bool, ties: bool,
) -> None:  # fmt: skip
    """The walk to its end in one call: the same heap, cursors and postings walked as one
    call a step (a budget of one posting: a step a window)."""
    case = daat_case(seed, nlen, nterms, top_length, ties=ties, filtered=filtered)
    steps = _drive(case, limit, budget, version, False)
    whole = _drive(case, limit, budget, version, True)
    assert whole == steps


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_whole_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot: the knob on and off give the pure-Python reference's top-k (``Three.query``
    asserts every path equal) and the brute force's, scores and ties."""
    index_agrees(seed, count, ("_WHOLE_DRIVE",))


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(20, 200), limit=st.sampled_from([1, 5]))
@settings(max_examples=examples(10), deadline=None)
def test_drained_and_sliced_agree(seed: int, count: int, limit: int) -> None:
    """A drained query (the walk in one call) and the same query in slices with the owner
    adding texts between two (the walk a call a step) give the same top-k at the
    snapshot's version, and a filter is applied the same way on both."""
    three, _, queries = corpus(seed, count)
    rng = random.Random(seed)
    core = three.indexes["core"]
    for query in queries:
        version = three.version
        view = three.view(version)
        accept = (lambda rec: rec.seq % 2 == 0) if rng.random() < 0.5 else None
        drained = [(s, r.seq) for s, r in core.top_k(view, query, limit, accept)]
        assert drained == three.query(view, query, limit, accept)
        sliced = read_sliced(
            three, version, query, limit, 1, lambda: three.add(rng.choice(queries))
        )  # fmt: skip
        if accept is None:
            assert all(got == drained for got in sliced.values()), (query, sliced)
        terms = dict.fromkeys(core.scorer.tokenizer(query), 1.0)
        got = drain(core.top_k_terms_steps(view, terms, limit, accept))
        assert [(s, r.seq) for s, r in core.top_k_terms(view, terms, limit, accept)] == [
            (s, r.seq) for s, r in got
        ]


# --------------------------------------------------------------------------- refusals


def test_bad_to_end_refused() -> None:
    """``to_end`` not a bool, or with a seed, is refused before C; nothing moves."""
    lengths, terms, parts = walk_lists(3, 100, 2, 300)
    slots, first = group_table(random.Random(3), 100)
    daat = kernels.Bm25Daat(terms, lengths, parts, 16, True)
    with pytest.raises(ValueError, match="offer_to"):
        daat.drive(100, to_end=True)
    daat.offer_to(slots, 3, None, 5, 8, columns=True)
    for bad in (1, None, "yes"):
        with pytest.raises(TypeError, match="to_end"):
            daat.drive(100, to_end=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        daat.drive(100, 0, 8, to_end=True)
    assert daat._cursors.tolist() == [0, 0]
    assert daat._seeds.tolist() == [0, 0]
    assert int(daat._offer[6][0]) == 0  # type: ignore[index]
    assert daat.drive(100, to_end=True)
    bad_more_refused(daat, lengths, parts)
