"""The BM25 core's windows cleared by their postings up to a quarter of their width
(``Bm25Daat(sparse_quarter=...)``, ``bm25_daat``'s ``more & 32``; the library always
asks for it since tidy25 removed the neutral ``knobs._SPARSE_QUARTER``), not an eighth,
and its scalar walk over the codes without a prefetch (``knobs._SCALAR_NO_PREFETCH``;
``scalar_no_prefetch``, ``more & 64``).

The kernel: with lists of 1-30% of up to 12,000 groups (windows of 4,096 with 40 to
1,200 postings: both sides of an eighth and of a quarter), lengths below 128 or up to
40,000, one-byte and int32 frequencies, windows of 1 to 4,096, any budget and a seeding
step first, the walk's prefetch asked for or not, every step is the same bit for bit
with either knob on as with both off; a designed case
(each window holding a sixth of its width in postings, at the same offsets window after
window, theta above one group's score) returns no group: a slot left behind would
return one. Through the index (a Hypothesis driver) the prefetch knob on and off give the
pure-Python reference's and the brute force's top-k, scores and ties. A bad flag is
refused by Python and by C (bad flags). stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.bm25.postings import length_codes

from .bm25_cases import NEEDS_CORE, bad_flags_refused, index_agrees
from .setups import theta_at_rank
from .strategies import examples
from .test_bm25_length_codes import _exact, walk
from .test_bm25_length_codes import _lists as _code_lists

pytestmark = NEEDS_CORE


def _lists(seed: int, nlen: int, nterms: int, top_length: int) -> tuple[Any, list[Any], Any]:
    """Terms on 1-30% of ``nlen`` groups (``test_bm25_length_codes._lists``, no empty or
    full list, no zero weight)."""
    return _code_lists(
        seed, nlen, nterms, top_length, (0.01, 0.05, 0.1, 0.15, 0.2, 0.3), (0.1, 1.0, 3.5)
    )


def _steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    quarter: bool, seed: int, nopf: bool = False, prefetch: bool = True,
) -> list[Any]:  # fmt: skip
    """A seeding step of term ``seed`` (``-1``: none), then the walk to its end: each
    step's groups, scores (as bytes), end and cursors."""
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, prefetch, 0.8, True, True, True, True, True,
        length_codes(lengths), lookup_codes=True, prefetch_seeds=True, sparse_clear=True,
        prefetch_offers=True, dense_tfs=True, sparse_quarter=quarter,
        scalar_no_prefetch=nopf,
    )  # fmt: skip
    return walk(daat, theta, budget, seed, room)


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 5),
    top_length=st.sampled_from([128, 40_000]),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    seed_term=st.integers(-1, 4),
    rank=st.sampled_from([0, 1, 3, 20]),
    quarter=st.booleans(),
    nopf=st.booleans(),
    prefetch=st.booleans(),
)
@settings(max_examples=examples(100), deadline=None)
def test_quarter_same_steps(
    seed: int, nlen: int, nterms: int, top_length: int, room: int, theta: float,
    budget: int, seed_term: int, rank: int, quarter: bool, nopf: bool, prefetch: bool,
) -> None:  # fmt: skip
    """Every step (groups, exact scores as bytes, end, cursors) the same with windows
    cleared by their postings up to a quarter of their width as up to an eighth.
    ``rank`` > 0: theta is the rank-th best exact score, a group exactly at it."""
    lengths, terms, parts = _lists(seed, nlen, nterms, top_length)
    theta = theta_at_rank(_exact(terms, lengths, parts), rank, theta)
    seed_term = min(seed_term, nterms - 1)
    args = (terms, lengths, parts, room, theta, budget)
    want = _steps(*args, False, seed_term, False, True)
    assert _steps(*args, quarter, seed_term, nopf, prefetch) == want


def test_quarter_leaves_no_score_behind() -> None:
    """Two terms on the same groups, every sixth (683 postings a window of 4,096: above
    an eighth of it, below a quarter, so cleared by its postings only with the knob),
    the same offsets in every window: theta above one group's score (two terms' parts)
    but below two groups' worth, so that a slot left uncleared would mark the next
    window's group there and return it. No group comes back, knob on or off."""
    nlen = 4096 * 5
    lengths = np.full(nlen, 10, np.int32)
    groups = [g for g in range(nlen) if (g % 4096) % 6 == 0]
    parts = (0.3, 0.9 / 10.0, 1.2, 0.75, 10.0, 1.0 + 1e-9)
    sat = 1.0 / (1.0 + (parts[0] + parts[1] * 10.0))
    term = (1.0, sat * parts[5], array("i", groups), array("B", [1] * len(groups)), len(groups),
            array("i"), 0)  # fmt: skip
    for quarter in (False, True):
        got = _steps([term, term], lengths, parts, 4096, 2.5 * sat, 1 << 20, quarter, -1)
        assert [nums for nums, _, _, _ in got] == [[]] * len(got), quarter
        # and at a theta one group reaches, every group comes back once
        got = _steps([term, term], lengths, parts, 4096, 1.5 * sat, 1 << 20, quarter, -1)
        assert [num for nums, _, _, _ in got for num in nums] == groups, quarter


# --------------------------------------------------------------------------- the index


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_quarter_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot: the prefetch knob on and off give the pure-Python reference's top-k
    (``Three.query`` asserts every path equal) and the brute force's, scores and ties."""
    index_agrees(seed, count, ("_SCALAR_NO_PREFETCH",))


# --------------------------------------------------------------------------- refusals


def test_bad_quarter_flag_refused() -> None:
    bad_flags_refused(
        _lists(3, 100, 2, 300),
        ("sparse_quarter", "scalar_no_prefetch"),
        {"sparse_clear": True, "sparse_quarter": True, "scalar_no_prefetch": True},
        100,
    )
