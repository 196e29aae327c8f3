"""The BM25 core's seeks with and without their interpolated start (``bm25_daat``'s flag
8, ``knobs._INTERP_SEEK``), called directly: random sorted posting lists whose groups are
spread evenly, in clusters or skewed towards one end (so that a guess lands before,
after or far from the target), bytes or int32 frequencies, empty lists; both drivers (the
windowed one of the cost-aware split and the split by bound's), the seeding steps, any
theta and budget: every step's groups, scores (bit for bit), cursors and end must be the
same. Lists out of order are searched without reading out of bounds either way
(stress/asan_kernels.sh runs this file)."""

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
THETAS = st.sampled_from([-np.inf, 0.0, 1e-3, 0.3, 1.0, 2.5, 5.0, 1e9])


def _groups(rng: Any, nlen: int, shape: str) -> Any:
    density = float(rng.choice([0.0, 0.002, 0.05, 0.3, 0.9, 1.0]))
    if shape == "even":
        keep = rng.random(nlen) < density
    elif shape == "clusters":  # dense runs with gaps: guesses land far from the target
        keep = np.zeros(nlen, bool)
        for _ in range(int(rng.integers(1, 6))):
            lo = int(rng.integers(0, nlen))
            keep[lo : lo + int(rng.integers(1, 2 + nlen // 4))] = True
        keep &= rng.random(nlen) < max(density, 0.3)
    else:  # skewed: dense at the start, sparse after
        keep = rng.random(nlen) < (1.0 - np.arange(nlen) / nlen) ** 8
    return np.flatnonzero(keep).astype(np.int32)


def _lists(seed: int, nlen: int, shapes: list[str], wide: list[bool]) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 40, nlen).astype(np.int32)
    avgdl = max(1.0, float(lengths.mean()))
    a_part, b_part = K1 * (1.0 - B), K1 * B / avgdl
    terms = []
    for shape, big in zip(shapes, wide, strict=True):
        groups = _groups(rng, nlen, shape)
        tfs = rng.integers(1, (100_000 if big else 255) + 1, len(groups))
        wi = float(rng.choice([0.1, 1.0, 3.5]))
        bound = 0.0
        if len(groups):
            dl = lengths[groups].astype(np.float64)
            bound = wi * float(np.max(tfs / (tfs + (a_part + b_part * dl)))) * SLACK_UP
        blocks = array("i")
        nblocks = len(groups) // kernels.BM25_BLOCK
        if nblocks:
            out = np.empty(2 * nblocks, np.int32)
            kernels.bm25_blocks(array("i", groups.tolist()), array("i", tfs.tolist()),
                                lengths, 0, nblocks, out)  # fmt: skip
            blocks.frombytes(out.tobytes())
        terms.append(
            (wi, bound, array("i", groups.tolist()), array("i" if big else "B", tfs.tolist()),
             len(groups), blocks, nblocks)
        )  # fmt: skip
    return lengths, terms, (a_part, b_part, K1, B, avgdl, SLACK_UP)


def _run(
    terms: list[Any], lengths: Any, parts: Any, room: int, thetas: list[float], budget: int,
    split: bool, seed_term: int, interp: bool, ahead: bool = False,
) -> list[Any]:  # fmt: skip
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, split, split, 1.0, True, split, interp, False, ahead
    )  # fmt: skip
    got: list[Any] = []
    if seed_term >= 0:
        nums, scores, done = daat.step(-np.inf, budget, seed_term % len(terms), room)
        got.append((nums.tolist(), scores.tobytes(), done, daat._seeds.tolist()))
    for theta in thetas * 100:
        nums, scores, done = daat.step(theta, budget)
        got.append((nums.tolist(), scores.tobytes(), done, daat._cursors.tolist()))
        if done:
            return got
    return got


@settings(max_examples=examples(200), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.sampled_from([1, 64, 65, 700, 4097, 9000]),
    shapes=st.lists(st.sampled_from(["even", "clusters", "skewed"]), min_size=1, max_size=5),
    room=st.sampled_from([1, 3, 64, 4096]),
    thetas=st.lists(THETAS, min_size=1, max_size=3),
    budget=st.sampled_from([1, 100, 10_000]),
    split=st.booleans(),
    seed_term=st.integers(-1, 4),
    data=st.data(),
)
def test_interp_seek_same_steps(
    seed: int, nlen: int, shapes: list[str], room: int, thetas: list[float], budget: int,
    split: bool, seed_term: int, data: Any,
) -> None:  # fmt: skip
    """Step by step, seeks from an interpolated start give the same groups, scores,
    cursors and ends as seeks galloping from the cursor."""
    wide = data.draw(st.lists(st.booleans(), min_size=len(shapes), max_size=len(shapes)))
    lengths, terms, parts = _lists(seed, nlen, shapes, wide)
    args = (terms, lengths, parts, room, thetas, budget, split, seed_term)
    ahead = data.draw(st.booleans())  # the lookups prefetched ahead (knobs._PREFETCH_LOOKUPS)
    assert _run(*args, interp=True, ahead=ahead) == _run(*args, interp=False)  # type: ignore[misc]


@pytest.mark.parametrize("flags", [2, 8, 10, 15])
def test_lists_out_of_order_searched_in_bounds(flags: int) -> None:
    """A non-essential list out of order (only ever sought, never walked) is searched
    within its postings whatever the guess: an error or some result, never a read out of
    bounds (the ASan build checks that)."""
    rng = np.random.default_rng(7)
    nums, scores = np.empty(64, np.int64), np.empty(64)
    lengths = np.ones(5000, np.int32)
    walked = (5.0, 5.0, array("i", range(0, 5000, 7)), array("B", [1] * 715), 715, array("i"), 0)
    for _ in range(20):
        groups = rng.integers(0, 5000, int(rng.integers(65, 400))).astype(np.int32)
        messy = (0.1, 0.1, array("i", groups.tolist()), array("B", [1] * len(groups)),
                 len(groups), array("i"), 0)  # fmt: skip
        try:
            kernels._core().bm25_daat(
                [messy, walked], np.zeros(2, np.int64), lengths, 0.3, 0.9, 1.2, 0.75, 1.0,
                1.0, 1.0, 10_000, -1, nums, scores, np.zeros(2, np.uint8), None, flags,
            )  # fmt: skip
        except ValueError:
            pass


def test_interp_seek_flag_is_a_bool() -> None:
    """``interp_seek`` of the wrong type is refused before C; the C code refuses flags
    beyond its six."""
    term = (1.0, 1.0, array("i", [0, 1]), array("B", [1, 1]), 2, array("i"), 0)
    parts = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0)
    with pytest.raises(TypeError, match="interp_seek"):
        kernels.Bm25Daat([term], np.ones(4, np.int32), parts, 4, True, interp_seek=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prefetch"):
        kernels._core().bm25_daat(
            [term], np.zeros(1, np.int64), np.ones(4, np.int32), *parts, 0.0, 10, -1,
            np.empty(4, np.int64), np.empty(4), np.zeros(1, np.uint8), None, 64,
        )  # fmt: skip
