"""The BM25 core's windowed walk with and without its tight loop (``bm25_daat``'s flag 4,
``knobs._TIGHT_WALK``; flag 16, ``knobs._SIMD_WALK``: eight postings at a time where the
CPU has AVX-512), called directly: random sorted posting lists (bytes or int32
frequencies, empty lists, lists sharing groups), windows as narrow as one group or as
wide as ``WINDOW``, any theta and budget, with and without the length prefetch: every
step's groups, scores (bit for bit), cursors and end must be the same. And a list out
of order or a group beyond the lengths is refused with a ValueError on both loops, never
read or written out of bounds (stress/asan_kernels.sh runs this file)."""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels

from .strategies import examples

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

K1, B = 1.2, 0.75
SLACK_UP = 1.0 + 1e-9
THETAS = st.sampled_from([-np.inf, 0.0, 1e-3, 0.3, 1.0, 2.5, 5.0, 1e9, np.inf])


def _lists(seed: int, nlen: int, nterms: int, wide: list[bool]) -> tuple[Any, list[Any]]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, nlen).astype(np.int32)
    avgdl = max(1.0, float(lengths.mean()))
    a_part, b_part = K1 * (1.0 - B), K1 * B / avgdl
    terms = []
    for i in range(nterms):
        density = float(rng.choice([0.0, 0.001, 0.05, 0.3, 0.9, 1.0]))
        groups = np.flatnonzero(rng.random(nlen) < density).astype(np.int32)
        top = 100_000 if wide[i] else 255
        tfs = rng.integers(0 if wide[i] else 1, top + 1, len(groups))
        wi = float(rng.choice([0.0, 0.1, 1.0, 3.5]))
        if len(groups):
            dl = lengths[groups].astype(np.float64)
            sat = tfs / (tfs + (a_part + b_part * dl))
            bound = wi * float(np.max(sat)) * SLACK_UP
        else:
            bound = 0.0
        code = "i" if wide[i] else "B"
        terms.append(
            (wi, bound, array("i", groups.tolist()), array(code, tfs.tolist()), len(groups),
             array("i"), 0)
        )  # fmt: skip
    parts = (a_part, b_part, K1, B, avgdl, SLACK_UP)
    return lengths, [terms, parts]


def _run(
    terms: list[Any], lengths: Any, parts: Any, room: int, thetas: list[float], budget: int,
    prefetch: bool, tight: bool, simd: bool = False,
) -> list[Any]:  # fmt: skip
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, prefetch, 1.0, False, tight, False, simd
    )  # fmt: skip
    got: list[Any] = []
    for theta in thetas * 200:
        try:
            nums, scores, done = daat.step(theta, budget)
        except ValueError as e:
            got.append(("error", "beyond lengths" in str(e)))
            return got
        got.append((nums.tolist(), scores.tobytes(), done, daat._cursors.tolist()))
        if done:
            return got
    return got


@settings(max_examples=examples(300), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.sampled_from([1, 2, 63, 64, 65, 700, 4096, 4097, 9000]),
    wide=st.lists(st.booleans(), min_size=1, max_size=5),
    room=st.sampled_from([1, 2, 3, 64, 100, 4095, 4096, 5000]),
    thetas=st.lists(THETAS, min_size=1, max_size=3),
    budget=st.sampled_from([1, 7, 100, 10_000]),
    prefetch=st.booleans(),
    shrink=st.integers(0, 3),
    simd=st.booleans(),
)
def test_tight_walk_same_steps(
    seed: int, nlen: int, wide: list[bool], room: int, thetas: list[float], budget: int,
    prefetch: bool, shrink: int, simd: bool,
) -> None:  # fmt: skip
    """Step by step, the tight loop (``simd``: eight postings at a time where the CPU
    has AVX-512, ``knobs._SIMD_WALK``) gives the same groups, scores, cursors and ends as
    the loop before it; with the lengths cut short (``shrink``), the same refusal."""
    lengths, (terms, parts) = _lists(seed, nlen, len(wide), wide)
    if shrink:  # groups beyond the lengths: both loops must refuse them
        lengths = lengths[: max(0, nlen - shrink * 50)].copy()
    want = _run(terms, lengths, parts, room, thetas, budget, prefetch, False)
    got = _run(terms, lengths, parts, room, thetas, budget, prefetch, True, simd)
    assert got == want


@pytest.mark.parametrize("flags", [0, 1, 4, 5, 20, 21])
def test_list_out_of_order_refused_by_both_loops(flags: int) -> None:
    """A posting list out of order (a group below the window's first) is refused by the
    walk with or without its tight loop; before, the loop without it wrote the group's
    partial score before the window's score array (heap-buffer-overflow under ASan)."""
    common = (0.5, 0.5, 1.2, 0.75, 1.0, 1.0)
    nums, scores = np.empty(8, np.int64), np.empty(8)
    # the last two in one window of 8 groups, long enough for the eight-lane loop: the
    # fault in a lane, or after eight good ones
    for groups in ([5, 3], [5, 0], [4000, 1, 2], [*range(10, 17), 3, *range(40, 60)],
                   [*range(10, 18), 3, *range(40, 60)]):  # fmt: skip
        unordered = (
            1.0, 2.0, array("i", groups), array("B", [1] * len(groups)), len(groups),
            array("i"), 0,
        )  # fmt: skip
        with pytest.raises(ValueError, match="out of order"):
            kernels._core().bm25_daat(
                [unordered], np.zeros(1, np.int64), np.ones(8192, np.int32), *common,
                -np.inf, 100, -1, nums, scores, np.zeros(1, np.uint8), None, flags,
            )  # fmt: skip


@pytest.mark.parametrize(("tight", "simd"), [(False, False), (True, False), (True, True)])
def test_sparse_windows_leave_no_partial_score_behind(tight: bool, simd: bool) -> None:
    """Windows of 64 groups, each walking 8 postings of one list at the same offsets:
    no group's contribution reaches theta alone, so a score slot left uncleared after a
    window (its partial score added to the next window's group at that offset) would
    find groups, and none may be found."""
    lengths = np.full(8192, 10, np.int32)
    a_part, b_part = K1 * (1.0 - B), K1 * B / 10.0
    parts = (a_part, b_part, K1, B, 10.0, SLACK_UP)
    groups = array("i", range(0, 8192, 8))
    term = (1.0, 10.0, groups, array("B", [1] * len(groups)), len(groups), array("i"), 0)
    one = 1.0 / (1.0 + (a_part + b_part * 10.0))
    daat = kernels.Bm25Daat(
        [term], lengths, parts, 64, True, True, 1.0, False, tight, False, simd
    )  # fmt: skip
    found: list[int] = []
    for _ in range(1000):
        nums, _, done = daat.step(1.5 * one, 10_000)
        found += nums.tolist()
        if done:
            break
    assert done
    assert found == []


@pytest.mark.parametrize("wide", [False, True])
def test_eight_lanes_with_a_group_twice(wide: bool) -> None:
    """A list with a group twice among eight postings (neither loop refuses it: the
    group is not below the window's first): the eight-lane walk gathers the group's
    partial score into two lanes and scatters both back, one add lost, so it must leave
    such eight to the scalar loop. The partial score of the group (two postings, two
    adds) reaches theta only whole: the same groups found with and without the lanes."""
    lengths = np.full(64, 10, np.int32)
    a_part, b_part = K1 * (1.0 - B), K1 * B / 10.0
    parts = (a_part, b_part, K1, B, 10.0, SLACK_UP)
    one = 1.0 / (1.0 + (a_part + b_part * 10.0))
    code = "i" if wide else "B"
    for groups in ([0, 0, 1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7, 7, 9], [3, 4, 5, 6, 3, 7, 8, 9]):
        term = (1.0, 10.0, array("i", groups), array(code, [1] * len(groups)), len(groups),
                array("i"), 0)  # fmt: skip
        runs = [
            _run([term], lengths, parts, 64, [1.5 * one], 10_000, False, tight, simd)
            for tight, simd in [(False, False), (True, False), (True, True)]
        ]
        assert runs[1] == runs[0]
        assert runs[2] == runs[0]
        assert runs[0][0][0]  # the group twice is found
