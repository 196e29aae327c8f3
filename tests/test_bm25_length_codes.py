"""The BM25 core's walk over one-byte length codes (``knobs._LENGTH_CODES``,
``Bm25Daat(codes=...)``, ``BM25Index._codes``).

The codes: below 128 a length is its own code; above, the code's lowest length (the C
table, ``_cbm25.bm25_code_floors``) is at most the length and the next code's is above
it; the scalar and vectorised codes agree; the index keeps them through growth and an
image's restore. The walk: with every length below 128 it gives every step's groups,
scores (bit for bit), cursors and ends as the walk over the lengths; with longer ones
(partial scores that are upper bounds) every group scoring at or above theta with the
brute force's exact score; through the index, long texts (up to thousands of words, a
term repeated past 255) give the reference's and the brute force's top-k, scores and
ties with the knob on and off. Bad codes are refused before C (and by C).
stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import random
from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.bm25.postings import length_code, length_codes

from .strategies import examples
from .test_bm25 import brute_force
from .test_bm25_core import NOW, PATHS, Three

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

K1, B = 1.2, 0.75
SLACK_UP = 1.0 + 1e-9


def _floors() -> list[int]:
    from actormem._index import _cbm25  # type: ignore[attr-defined]

    got: list[int] = _cbm25.bm25_code_floors()
    return got


EDGES = [0, 1, 127, 128, 129, 135, 136, 255, 256, 1000, 4095, 4096, 31743, 31744, 32767,
         32768, 10**6, 2**31 - 1]  # fmt: skip


@given(st.lists(st.integers(0, 2**31 - 1) | st.sampled_from(EDGES), max_size=50))
@settings(max_examples=examples(200), deadline=None)
def test_codes_bound_lengths_from_below(lengths: list[int]) -> None:
    floors = _floors()
    assert floors == sorted(floors)
    assert len(set(floors)) == 256
    lengths = lengths + EDGES
    vector = length_codes(np.array(lengths, np.int32)).tolist()
    for n, code in zip(lengths, vector, strict=True):
        assert code == length_code(n)
        assert floors[code] <= n
        if code < 255:
            assert n < floors[code + 1]
        if n < 128:
            assert code == n


def test_index_keeps_codes_through_growth_and_restore(monkeypatch: Any) -> None:
    monkeypatch.setattr(bm25_knobs, "_CHUNK", 4)  # the arrays grow several times
    three = Three(BM25Scorer())
    rng = random.Random(3)
    for i in range(300):
        three.add(" ".join(rng.choices(["a", "b", "c", "d"], k=rng.choice([1, 5, 130, 700]))))
        if i % 50 == 0:
            three.delete(i)
    three.check()  # BM25Index._check: codes of every length, as long as the lengths
    index = three.indexes["core"]
    size = len(index._table)
    assert (index._codes[:size] == length_codes(index._lengths[:size])).all()
    records = sorted(three.records, key=lambda rec: rec.seq)
    live = [rec for rec in records if rec.died > three.version]
    parts = bm25_persist.dump(index, live)
    restored = bm25_persist.restore(BM25Scorer().make_index(), parts, live)  # type: ignore[arg-type]
    restored._check(live)
    assert len(restored._codes) == len(restored._lengths)


# --------------------------------------------------------------------------- the kernel


def _lists(
    seed: int,
    nlen: int,
    nterms: int,
    top_length: int,
    densities: tuple[float, ...] = (0.0, 0.01, 0.05, 0.3, 0.9, 1.0),
    weights: tuple[float, ...] = (0.0, 0.1, 1.0, 3.5),
) -> tuple[Any, list[Any], Any]:
    """``nterms`` posting lists over ``nlen`` groups of lengths below ``top_length``,
    each on a share of the groups drawn from ``densities`` with a weight drawn from
    ``weights`` (every third of wide term frequencies), their bounds, and the
    lengths and score parts the kernel takes."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, top_length, nlen).astype(np.int32)
    avgdl = max(1.0, float(lengths.mean()))
    a_part, b_part = K1 * (1.0 - B), K1 * B / avgdl
    terms = []
    for i in range(nterms):
        density = float(rng.choice(densities))
        groups = np.flatnonzero(rng.random(nlen) < density).astype(np.int32)
        wide = i % 3 == 2
        tfs = rng.integers(1, (100_000 if wide else 255) + 1, len(groups))
        wi = float(rng.choice(weights))
        if len(groups):
            sat = tfs / (tfs + (a_part + b_part * lengths[groups].astype(np.float64)))
            bound = wi * float(np.max(sat)) * SLACK_UP
        else:
            bound = 0.0
        terms.append(
            (wi, bound, array("i", groups.tolist()), array("i" if wide else "B", tfs.tolist()),
             len(groups), array("i"), 0)
        )  # fmt: skip
    return lengths, terms, (a_part, b_part, K1, B, avgdl, SLACK_UP)


def _steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    simd: bool, codes: Any,
) -> list[Any]:  # fmt: skip
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, True, 1.0, True, True, True, simd, True, codes
    )  # fmt: skip
    return walk(daat, theta, budget)


def walk(daat: Any, theta: float, budget: int, seed: int = -1, room: int = 0) -> list[Any]:
    """A seeding step of term ``seed`` with ``room`` (``-1``: none), then ``daat``'s walk
    to its end: each step's groups, scores (as bytes), end and cursors (the seeds after
    the seeding step). At most 10,000 steps."""
    got: list[Any] = []
    if seed >= 0:
        nums, scores, done = daat.step(theta, budget, seed, room)
        got.append((nums.tolist(), scores.tobytes(), done, daat._seeds.tolist()))
    for _ in range(10_000):
        nums, scores, done = daat.step(theta, budget)
        got.append((nums.tolist(), scores.tobytes(), done, daat._cursors.tolist()))
        if done:
            break
    return got


def _exact(terms: list[Any], lengths: Any, parts: Any) -> dict[int, float]:
    """Every group's exact score, term by term in the query's order (the reference's
    operations)."""
    _, _, k1, b, avgdl, _ = parts
    scores: dict[int, float] = {}
    for wi, _, groups, tfs, count, _, _ in terms:
        for g, tf in zip(groups[:count], tfs[:count], strict=True):
            norm = k1 * ((1.0 - b) + b * float(lengths[g]) / avgdl)
            scores[g] = scores.get(g, 0.0) + wi * (tf / (tf + norm))
    return scores


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 9_000),
    nterms=st.integers(1, 5),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0, np.inf]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    simd=st.booleans(),
    pad=st.sampled_from([0, 1, 3, 4]),
)
@settings(max_examples=examples(120), deadline=None)
def test_short_lengths_walk_the_same_steps(
    seed: int, nlen: int, nterms: int, room: int, theta: float, budget: int, simd: bool, pad: int
) -> None:
    """Lengths below 128 are their own codes: the same steps bit for bit (the codes one
    longer than the lengths or not a multiple of four: the scalar walk only)."""
    lengths, terms, parts = _lists(seed, nlen, nterms, 128)
    codes = np.zeros(nlen + pad, np.uint8)
    codes[:nlen] = length_codes(lengths)
    want = _steps(terms, lengths, parts, room, theta, budget, simd, None)
    assert _steps(terms, lengths, parts, room, theta, budget, simd, codes) == want


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 9_000),
    nterms=st.integers(1, 5),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([0.0, 0.3, 1.0, 2.5, 5.0]),
    simd=st.booleans(),
    pad=st.sampled_from([0, 1, 4]),
)
@settings(max_examples=examples(120), deadline=None)
def test_long_lengths_find_every_group_at_theta(
    seed: int, nlen: int, nterms: int, room: int, theta: float, simd: bool, pad: int
) -> None:
    """With lengths up to 40,000 the walk's partial scores are upper bounds: every group
    whose exact score reaches theta comes back, once, with that score bit for bit, as
    without the codes; groups below theta may come back too."""
    lengths, terms, parts = _lists(seed, nlen, nterms, 40_000)
    codes = np.zeros(nlen + pad, np.uint8)
    codes[:nlen] = length_codes(lengths)
    exact = _exact(terms, lengths, parts)
    found = {}
    for use in (None, codes):
        got: dict[int, float] = {}
        for nums, scores, _, _ in _steps(terms, lengths, parts, room, theta, 1 << 20, simd, use):
            for num, score in zip(nums, np.frombuffer(scores).tolist(), strict=True):
                assert num not in got
                assert score == exact[num]
                got[num] = score
        found[use is None] = {num: s for num, s in got.items() if s >= theta}
        assert found[use is None] == {num: s for num, s in exact.items() if s >= theta}
    assert found[True] == found[False]


@pytest.mark.parametrize("codes", [True, False])
def test_long_texts_agree(codes: bool, monkeypatch: Any) -> None:
    """Through the index: texts of one to 2,000 words (codes above 128: upper bounds),
    a term repeated past 255 (int32 frequencies), copies, a deletion and an older
    snapshot: the reference's and the brute force's top-k, scores and ties, the codes'
    walk on and off (the "core" path; "core-offer" walks the loop before)."""
    monkeypatch.setattr(bm25_knobs, "_LENGTH_CODES", codes)
    monkeypatch.setitem(PATHS, "core", (True, True, True, True, True, 0.8, True, True))
    rng = random.Random(29)
    three = Three(BM25Scorer())
    common = [f"c{i}" for i in range(5)]
    rare = [f"r{i}" for i in range(80)]
    old = 0
    for i in range(1_800):
        k = rng.choice([1, 3, 8, 20, 130, 400, 2_000]) if i % 9 == 0 else rng.randint(1, 9)
        words = rng.choices(common, k=k) + rng.choices(rare, k=rng.randint(0, 3))
        if i % 1_000 == 700:
            words += ["r5"] * 300
        if i % 101 == 0:
            words = ["r2", "r3", "c0"] * rng.choice([1, 50])
        three.add(" ".join(words))
        if i == 1_300:
            old = three.version
            three.delete(33)
    three.check()
    for version in (None, old):
        for query in ("r2 r3 c0", "r5 r2 c1 c2", " ".join(rare[:25] + common), "c0 c1"):
            for limit in (1, 10, 40):
                view = three.view(version)
                got = three.query(view, query, limit)
                want = brute_force(three.scorer, three.records, view.version, query, limit, now=NOW)
                assert got == [(score, rec.seq) for score, rec in want], (query, limit)


# --------------------------------------------------------------------------- refusals


def test_bad_codes_refused_before_c() -> None:
    lengths, terms, parts = _lists(1, 100, 2, 300)
    args = (terms, lengths, parts, 16, True, True, 1.0, True, True, True, True, True)
    with pytest.raises(TypeError):
        kernels.Bm25Daat(*args, [1] * 100)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="codes must be"):
        kernels.Bm25Daat(*args, np.zeros(100, np.int32))
    with pytest.raises(ValueError, match="codes shorter"):
        kernels.Bm25Daat(*args, np.zeros(99, np.uint8))
    with pytest.raises(ValueError, match="codes must be"):
        kernels.Bm25Daat(*args, np.zeros((2, 50), np.uint8))


def test_c_refuses_short_codes() -> None:
    from actormem._index import _cbm25

    lengths, terms, parts = _lists(2, 100, 2, 300)
    flags = (True, True, 1.0, True, True, True, True, True)
    daat = kernels.Bm25Daat(terms, lengths, parts, 16, *flags)
    with pytest.raises(ValueError, match="codes"):
        _cbm25.bm25_daat(
            daat._terms, daat._cursors, lengths, *parts, 0.0, 100, -1, daat._nums, daat._scores,
            daat._sticky, None, daat._prefetch, 1.0, np.zeros(99, np.uint8),
        )  # fmt: skip
    with pytest.raises(ValueError, match="codes"):
        _cbm25.bm25_daat(
            daat._terms, daat._cursors, lengths, *parts, 0.0, 100, -1, daat._nums, daat._scores,
            daat._sticky, None, daat._prefetch, 1.0, np.zeros(100, np.int32),
        )  # fmt: skip


def test_drive_checks_each_new_first() -> None:
    """``drive`` reuses its offer arguments while ``first`` is the same array, and checks
    a new one (the owner replaces it on growth; int64 or int32) before C."""
    lengths, terms, parts = _lists(3, 300, 3, 300)
    flags = (True, True, 0.8, True, True, True, True, True)
    daat = kernels.Bm25Daat(terms, lengths, parts, 64, *flags, length_codes(lengths))
    daat.offer_to([None] * 300, 1, None, 5, 8)  # purged groups: nothing to offer
    first = np.zeros(300, np.int64)
    daat.drive(10, 0, 4, first)
    daat.drive(10, first=first)
    daat.drive(10, first=first)
    daat.drive(10, first=np.zeros(300, np.int32))  # int32 too (bm25 knobs._FIRST_SEQ32)
    for bad in (np.zeros(300, np.int16), np.zeros(300, np.uint32)):
        with pytest.raises(ValueError, match="first must be"):
            daat.drive(10, first=bad)
    with pytest.raises(TypeError):
        daat.drive(10, first=[0] * 300)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="budget"):
        daat.drive(0, first=first)
    while not daat.drive(10, first=None):
        pass
    assert daat.best() == []
