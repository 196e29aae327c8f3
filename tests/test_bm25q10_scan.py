"""The BM25 core's scalar walk without marks: a window's marks found after its walk from
its scores (``knobs._SCAN_MARKS``; ``Bm25Daat(scan_marks=...)``, ``bm25_daat``'s ``more &
1024``): a sparse window's in the pass that clears its postings' slots (a marked group's
score kept aside for its lookups), a dense window's by a scan of its scores against the
window's cut.

The kernel: lists of 0.1-30% of up to 12,000 groups, most frequencies 1, windows of 1 to
4,096 groups (so both sparse and dense windows, widths not a multiple of 64), the sparse
clear off, at an eighth or at a quarter, any budget and a seeding step first, theta fixed
or exactly the 1st/3rd/20th best exact score, a term of weight 0 or below 0 at times:
every step (groups, exact scores as bytes, end, cursors) the same with the scan as
without, and as with every knob of the walk off. Designed: one term, theta exactly a
group's ``partial * up`` (it comes back) and one ulp above (it does not), in a sparse and
in a dense window; a group met by two lists in a sparse window comes back once, with its
score. The walked postings' counter counts them. Through the index (a Hypothesis driver)
the scan on and off give the pure-Python reference's and the brute force's top-k, scores
and ties. A bad flag is refused by Python and by C. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels

from .bm25_cases import LISTS, NEEDS_CORE, bad_flags_refused, index_agrees, walk_lists, walk_steps
from .setups import theta_at_rank
from .strategies import examples
from .test_bm25_length_codes import _exact

pytestmark = NEEDS_CORE


def _steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    seed: int, scan: bool, knobs: bool = True, clear: int = 2, prefetch: bool = False,
    ones: bool = True,
) -> list[Any]:  # fmt: skip
    """``bm25_cases.walk_steps``; ``knobs`` False: the walk's table, cut and scan all
    off; ``prefetch``: the walk's prefetch asked for (the eight-lane walk, where the CPU
    has AVX-512, or the scalar loop with it; the scan's loop has none); ``ones`` False:
    no table of parts (every part computed)."""
    return walk_steps(
        terms, lengths, parts, room, theta, budget, seed, knobs and ones, knobs, prefetch,
        scan, clear,
    )  # fmt: skip


@given(
    **LISTS,
    room=st.sampled_from([1, 7, 100, 1000, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0, np.inf]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    seed_term=st.integers(-1, 5),
    rank=st.sampled_from([0, 1, 3, 20]),
    clear=st.sampled_from([0, 1, 2]),
    weight=st.sampled_from([None, 0.0, -0.5]),
    prefetch=st.booleans(),
)
@settings(max_examples=examples(100), deadline=None)
def test_scan_same_steps(
    seed: int, nlen: int, nterms: int, top_length: int, room: int, theta: float,
    budget: int, seed_term: int, rank: int, clear: int, weight: float | None,
    prefetch: bool,
) -> None:  # fmt: skip
    """Every step the same with the scan as without it, and as with the walk's knobs off.
    ``rank`` > 0: theta is the rank-th best exact score, a group exactly at it;
    ``weight``: the last term's weight replaced (0: a part of 0.0; below 0: the scan
    is not taken)."""
    lengths, terms, parts = walk_lists(seed, nlen, nterms, top_length)
    if weight is not None:
        wi, _, *rest = terms[-1]
        terms[-1] = (weight, max(weight, 0.0) * 2.0, *rest)
    theta = theta_at_rank(_exact(terms, lengths, parts), rank, theta)
    seed_term = min(seed_term, nterms - 1)
    args = (terms, lengths, parts, room, theta, budget, seed_term)
    want = _steps(*args, False, True, clear, prefetch)
    assert _steps(*args, True, True, clear, prefetch) == want
    assert _steps(*args, False, False, clear, prefetch) == want
    assert _steps(*args, True, True, clear, not prefetch) == want
    assert _steps(*args, True, True, clear, prefetch, False) == want


def _one_term(nlen: int, step: int, wi: float, wide: bool) -> tuple[Any, Any, Any]:
    lengths = np.arange(1, nlen + 1, dtype=np.int32)  # below 128: the walk's part exact
    avgdl = float(lengths.mean())
    parts = (1.2 * 0.25, 1.2 * 0.75 / avgdl, 1.2, 0.75, avgdl, 1.0 + 1e-9)
    groups = list(range(0, nlen, step))
    tfs = [1 if i % 4 else 2 for i in range(len(groups))]
    bound = wi * max(tf / (tf + (parts[0] + parts[1] * float(lengths[g])))
                     for g, tf in zip(groups, tfs, strict=True)) * parts[5]  # fmt: skip
    term = (wi, bound, array("i", groups), array("i" if wide else "B", tfs), len(groups),
            array("i"), 0)  # fmt: skip
    return lengths, term, parts


@pytest.mark.parametrize("wi", [1e-300, 0.37, 3.5, 1e6])
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize(
    ("step", "room"),
    [(3, 4096), (1, 128), (1, 100)],  # a sparse window; dense ones, 64-slot words and a tail
)
def test_scan_marks_exactly_at_theta(wi: float, wide: bool, step: int, room: int) -> None:
    """One term (``rest`` 0), lengths below 128: each group's part p, computed here with
    the walk's operations, comes back at theta ``p * up`` and not at the next double
    above it, with the scan on and off. Frequencies 1 and 2."""
    lengths, term, parts = _one_term(120, step, wi, wide)
    for g, tf in list(zip(term[2], term[3], strict=True))[::5]:
        part = wi * (float(tf) / (float(tf) + (parts[0] + parts[1] * float(lengths[g]))))
        at = part * parts[5]
        for scan in (False, True):
            for prefetch in (False, True):
                how = (g, scan, prefetch)
                got = _steps([term], lengths, parts, room, at, 1 << 20, -1, scan, True, 2, prefetch)
                assert g in [num for nums, _, _, _ in got for num in nums], how
                above = math.nextafter(at, math.inf)
                got = _steps(
                    [term], lengths, parts, room, above, 1 << 20, -1, scan, True, 2, prefetch
                )
                assert g not in [num for nums, _, _, _ in got for num in nums], how


def test_sparse_group_of_two_lists_once() -> None:
    """Two lists sharing every tenth group of 4,000 (a sparse window): a shared group's
    score is both parts, each comes back once, the others are below theta."""
    nlen = 4000
    lengths = np.full(nlen, 10, dtype=np.int32)
    parts = (1.2 * 0.25, 1.2 * 0.75 / 10.0, 1.2, 0.75, 10.0, 1.0 + 1e-9)
    a = list(range(0, nlen, 10))
    b = list(range(0, nlen, 10)) + list(range(5, nlen, 97))
    b.sort()
    one = 1.0 / (1.0 + (parts[0] + parts[1] * 10.0))
    terms = [
        (1.0, one * 1.01, array("i", a), array("B", [1] * len(a)), len(a), array("i"), 0),
        (1.0, one * 1.01, array("i", b), array("B", [1] * len(b)), len(b), array("i"), 0),
    ]
    theta = 1.5 * one  # above one part, below two
    for scan in (False, True):
        got = _steps(terms, lengths, parts, 4096, theta, 1 << 20, -1, scan)
        nums = [num for step, _, _, _ in got for num in step]
        assert nums == a, scan
        scores = b"".join(s for _, s, _, _ in got)
        assert set(np.frombuffer(scores, np.float64).tolist()) == {one + one}


def test_walked_counts_postings() -> None:
    """The walked postings' counter grows by each window's essential postings: one list
    of 500 postings, theta -inf (every group kept), windows of up to 4,096 groups."""
    from actormem._index import _cbm25  # type: ignore[attr-defined]

    lengths, term, parts = _one_term(1500, 3, 1.0, False)
    for scan in (False, True):
        before = _cbm25.bm25_walked()
        got = _steps([term], lengths, parts, 4096, -np.inf, 1 << 20, -1, scan)
        assert _cbm25.bm25_walked() - before == 500
        assert [num for nums, _, _, _ in got for num in nums] == list(range(0, 1500, 3))


# --------------------------------------------------------------------------- the index


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200))
@settings(max_examples=examples(10), deadline=None)
def test_index_scan_agrees_with_reference(seed: int, count: int) -> None:
    """Texts of one to 300 words, common and rare words, a deletion and an older
    snapshot: the scan on and off (the cut on and off) give the pure-Python reference's
    top-k (``Three.query`` asserts every path equal) and the brute force's, scores and
    ties."""
    index_agrees(seed, count, ("_SCAN_MARKS", "_MARK_CUT"))


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200), amd=st.booleans())
@settings(max_examples=examples(10), deadline=None)
def test_index_scalar_on_amd_agrees(seed: int, count: int, amd: bool) -> None:
    """``knobs._SCALAR_ON_AMD`` on and off, the CPU taken as AMD's or not (on an AMD CPU
    with AVX-512 the eight-lane walk or the scalar loop, with the scan on or off): the
    brute force's top-k, scores and ties."""
    index_agrees(seed, count, ("_SCALAR_ON_AMD", "_SCAN_MARKS"), CPU_IS_AMD=amd)


def test_cpu_vendor(tmp_path: Any) -> None:
    """The vendor from the first ``vendor_id`` line; ``""`` without one or a file."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n")
    assert kernels._cpu_vendor(str(info)) == "AuthenticAMD"
    info.write_text("processor\t: 0\nvendor_id : GenuineIntel\nvendor_id : Other\n")
    assert kernels._cpu_vendor(str(info)) == "GenuineIntel"
    info.write_text("processor\t: 0\n")
    assert kernels._cpu_vendor(str(info)) == ""
    assert kernels._cpu_vendor(str(tmp_path / "absent")) == ""


# --------------------------------------------------------------------------- refusals


def test_bad_scan_flag_refused() -> None:
    bad_flags_refused(
        walk_lists(3, 100, 2, 300),
        ("scan_marks",),
        {"mark_cut": True, "scan_marks": True},
        512 | 1024,
    )
