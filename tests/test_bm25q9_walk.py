"""The BM25 core's scalar walk over the length codes with fewer instructions a posting:
a posting of frequency 1 takes its part from a table by code made once a step
(``knobs._WALK_ONES``; ``Bm25Daat(walk_ones=...)``, ``bm25_daat``'s ``more & 256``), and a
group is marked by comparing its partial score with the least score that reaches theta
(``knobs._MARK_CUT``; ``mark_cut``, ``more & 512``), not by ``score * up + rest >= theta``.

The kernel: lists of 0.1-30% of up to 12,000 groups, most frequencies 1 (some 2-255, a
third of the lists int32), lengths below 128 or up to 40,000, windows of 1 to 4,096, any
budget and a seeding step first, theta fixed or exactly the 1st/3rd/20th best exact
score, the walk's prefetch asked for or not: every step (groups, exact scores as bytes,
end, cursors) is the same with either knob on as with both off. Designed: one term, theta
exactly a group's ``partial * up`` (it comes back) and one ulp above (it does not), at
scores of every scale. Through the index (a Hypothesis driver) the four on/off pairs give
the pure-Python reference's and the brute force's top-k, scores and ties. A bad flag is
refused by Python and by C. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .bm25_cases import LISTS, NEEDS_CORE, bad_flags_refused, index_agrees, walk_lists, walk_steps
from .setups import theta_at_rank
from .strategies import examples
from .test_bm25_length_codes import _exact

pytestmark = NEEDS_CORE


@given(
    **LISTS,
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0, np.inf]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    seed_term=st.integers(-1, 5),
    rank=st.sampled_from([0, 1, 3, 20]),
    ones=st.booleans(),
    cut=st.booleans(),
    prefetch=st.booleans(),
)
@settings(max_examples=examples(100), deadline=None)
def test_walk_same_steps(
    seed: int, nlen: int, nterms: int, top_length: int, room: int, theta: float,
    budget: int, seed_term: int, rank: int, ones: bool, cut: bool, prefetch: bool,
) -> None:  # fmt: skip
    """Every step the same with the knobs as with both off. ``rank`` > 0: theta is the
    rank-th best exact score, a group exactly at it."""
    lengths, terms, parts = walk_lists(seed, nlen, nterms, top_length)
    theta = theta_at_rank(_exact(terms, lengths, parts), rank, theta)
    seed_term = min(seed_term, nterms - 1)
    args = (terms, lengths, parts, room, theta, budget, seed_term)
    want = walk_steps(*args, False, False, prefetch)
    assert walk_steps(*args, ones, cut, prefetch) == want


@pytest.mark.parametrize("wi", [1e-300, 0.37, 1.0, 3.5, 1e6])
@pytest.mark.parametrize("wide", [False, True])
def test_cut_marks_exactly_at_theta(wi: float, wide: bool) -> None:
    """One term (no non-essential bound: ``rest`` 0), lengths below 128 (each its own
    code, so the walk's part is the exact one): each group's part p, computed here with
    the walk's operations, comes back at theta ``p * up`` and not at the next double
    above it (every other group's part differs from it). Frequencies 1 and 2."""
    nlen = 120
    lengths = np.arange(1, nlen + 1, dtype=np.int32)
    avgdl = float(lengths.mean())
    parts = (1.2 * 0.25, 1.2 * 0.75 / avgdl, 1.2, 0.75, avgdl, 1.0 + 1e-9)
    groups = list(range(0, nlen, 3))
    tfs = [1 if i % 4 else 2 for i in range(len(groups))]
    bound = wi * max(tf / (tf + (parts[0] + parts[1] * float(lengths[g])))
                     for g, tf in zip(groups, tfs, strict=True)) * parts[5]  # fmt: skip
    term = (wi, bound, array("i", groups), array("i" if wide else "B", tfs), len(groups),
            array("i"), 0)  # fmt: skip
    for g, tf in list(zip(groups, tfs, strict=True))[::5]:
        part = wi * (float(tf) / (float(tf) + (parts[0] + parts[1] * float(lengths[g]))))
        at = part * parts[5]
        for ones in (False, True):
            for cut in (False, True):
                got = walk_steps([term], lengths, parts, 4096, at, 1 << 20, -1, ones, cut)
                assert g in [num for nums, _, _, _ in got for num in nums], (g, ones, cut)
                above = math.nextafter(at, math.inf)
                got = walk_steps([term], lengths, parts, 4096, above, 1 << 20, -1, ones, cut)
                assert g not in [num for nums, _, _, _ in got for num in nums], (g, ones, cut)


# --------------------------------------------------------------------------- the index


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_walk_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot: the four on/off pairs of the knobs give the pure-Python reference's top-k
    (``Three.query`` asserts every path equal) and the brute force's, scores and ties."""
    index_agrees(seed, count, ("_WALK_ONES", "_MARK_CUT"))


# --------------------------------------------------------------------------- refusals


def test_bad_walk_flags_refused() -> None:
    bad_flags_refused(
        walk_lists(3, 100, 2, 300),
        ("walk_ones", "mark_cut"),
        {"sparse_clear": True, "walk_ones": True, "mark_cut": True},
        4 | 256 | 512,
    )
