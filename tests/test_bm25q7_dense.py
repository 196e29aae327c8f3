"""The BM25 core's lookups into the long lists' dense frequency arrays
(``knobs._DENSE_TFS``; ``_Term.dense``, ``postings.dense_make``/``dense_fill``,
``BM25Index._dense_refresh``; ``Bm25Daat(dense_tfs=...)``, ``bm25_daat``'s ``more & 16``).

The kernel: lists of any density, frequencies 1, 2, 3 and more (the code 3 sends a lookup
to the list) in one byte or int32, an array covering any prefix of the groups (the rest
sought in the list's tail): every step of the seeding and of the walk gives the same
groups, exact scores bit for bit and ends with the arrays as without. Through the index
(a Hypothesis driver of adds, deletions, purges that compact lists, older snapshots and
queries, with the arrays' thresholds lowered so that small lists get them): the knob on
and off give the pure-Python reference's and the brute force's top-k, scores and ties,
and ``_check`` finds every array equal to its list. Bad arrays are refused by Python and
by C. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25.postings import dense_fill, dense_make, length_codes

from .bm25_cases import NEEDS_CORE
from .setups import theta_at_rank
from .strategies import examples
from .test_bm25 import brute_force
from .test_bm25_core import NOW, Three
from .test_bm25_length_codes import _exact

pytestmark = NEEDS_CORE

K1, B, SLACK_UP = 1.2, 0.75, 1.0 + 1e-9


def _lists(
    seed: int, nlen: int, nterms: int, cover: float
) -> tuple[Any, list[Any], list[Any], Any]:
    """Lengths, the terms as 7-tuples, the same with a dense array covering about
    ``cover`` of the groups (``dense_make``, as the index makes them), and the parts."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 128, nlen).astype(np.int32)
    avgdl = max(1.0, float(lengths.mean()))
    a_part, b_part = K1 * (1.0 - B), K1 * B / avgdl
    plain, dense = [], []
    for i in range(nterms):
        density = float(rng.choice([0.0, 0.01, 0.05, 0.3, 0.9, 1.0]))
        groups = np.flatnonzero(rng.random(nlen) < density).astype(np.int32)
        wide = i % 3 == 2
        tfs = rng.choice([1, 1, 1, 2, 2, 3, 7, 300 if wide else 255], len(groups))
        wi = float(rng.choice([0.0, 0.1, 1.0, 3.5]))
        if len(groups):
            sat = tfs / (tfs + (a_part + b_part * lengths[groups].astype(np.float64)))
            bound = wi * float(np.max(sat)) * SLACK_UP
        else:
            bound = 0.0
        g, tf = array("i", groups.tolist()), array("i" if wide else "B", tfs.tolist())
        term = (wi, bound, g, tf, len(groups), array("i"), 0)
        plain.append(term)
        upto = min(nlen, int(cover * nlen) + int(rng.integers(0, 5)))
        extra = int(rng.integers(0, 3)) * 4  # room beyond the groups, as the capacity
        dense.append((*term, *dense_make(g, tf, nlen + extra, upto)) if i % 4 != 3 else term)
    return lengths, plain, dense, (a_part, b_part, K1, B, avgdl, SLACK_UP)


def _steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    on: bool, seed: int, codes: bool,
) -> list[Any]:  # fmt: skip
    """A seeding step of term ``seed`` (``-1``: none), then the walk to its end: each
    step's groups, scores (as bytes) and end."""
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, True, 0.8, True, True, True, True, True,
        length_codes(lengths) if codes else None, codes, True, True, True, on,
    )  # fmt: skip
    got: list[Any] = []
    if seed >= 0:
        nums, scores, done = daat.step(theta, budget, seed, room)
        got.append((nums.tolist(), scores.tobytes(), done))
    for _ in range(10_000):
        nums, scores, done = daat.step(theta, budget)
        got.append((nums.tolist(), scores.tobytes(), done))
        if done:
            break
    return got


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 5),
    cover=st.sampled_from([0.0, 0.3, 0.9, 1.0]),
    room=st.sampled_from([1, 7, 64, 4096]),
    theta=st.sampled_from([-np.inf, 0.0, 0.3, 1.0, 2.5, 5.0, np.inf]),
    budget=st.sampled_from([1, 100, 1 << 20]),
    seed_term=st.integers(-1, 4),
    rank=st.sampled_from([0, 1, 3, 20]),
    codes=st.booleans(),
)
@settings(max_examples=examples(150), deadline=None)
def test_dense_arrays_same_steps(
    seed: int, nlen: int, nterms: int, cover: float, room: int, theta: float, budget: int,
    seed_term: int, rank: int, codes: bool,
) -> None:  # fmt: skip
    """The arrays give each lookup the list's own frequency (or send it to the list), so
    every step is the same bit for bit: its groups, their exact scores and its end, with
    the arrays given and read, given and not read (the knob off), and not given.
    ``rank`` > 0: theta is the rank-th best exact score, a group exactly at it."""
    lengths, plain, dense, parts = _lists(seed, nlen, nterms, cover)
    theta = theta_at_rank(_exact(plain, lengths, parts), rank, theta)
    seed_term = min(seed_term, nterms - 1)
    args = (lengths, parts, room, theta, budget)
    want = _steps(plain, *args, False, seed_term, codes)
    assert _steps(dense, *args, True, seed_term, codes) == want
    assert _steps(dense, *args, False, seed_term, codes) == want
    assert _steps(plain, *args, True, seed_term, codes) == want


def test_dense_array_answers_lookups() -> None:
    """A designed case: one rare walked term, one common looked-up term whose array
    covers half the groups (the other half sought in its tail), frequencies 1, 2, 3 and 9
    (the last two from the list): the groups at theta are the brute force's."""
    nlen = 4096 * 3
    lengths = np.full(nlen, 10, np.int32)
    parts = (K1 * (1.0 - B), K1 * B / 10.0, K1, B, 10.0, SLACK_UP)
    rare = array("i", range(0, nlen, 5))
    common = array("i", range(nlen))
    ctf = array("B", [(1, 2, 3, 9)[g % 4] for g in range(nlen)])
    sat = 9.0 / (9.0 + parts[0] + parts[1] * 10.0)
    rare_t = (3.0, 3.0 * (1.0 / (1.0 + parts[0] + parts[1] * 10.0)) * SLACK_UP, rare,
              array("B", [1] * len(rare)), len(rare), array("i"), 0)  # fmt: skip
    common_t = (0.2, 0.2 * sat * SLACK_UP, common, ctf, nlen, array("i"), 0)
    bits = dense_make(common, ctf, nlen, nlen // 2)
    exact = _exact([rare_t, common_t], lengths, parts)
    for theta in (0.0, exact[0], exact[3], exact[5]):
        want = {num for num, s in exact.items() if s >= theta}
        for terms, on in (([rare_t, common_t], False), ([rare_t, (*common_t, *bits)], True)):
            got = {}
            for nums, scores, _ in _steps(
                terms, lengths, parts, 4096, theta, 1 << 20, on, -1, False
            ):
                got.update(zip(nums, np.frombuffer(scores).tolist(), strict=True))
            assert all(s == exact[num] for num, s in got.items())
            assert {num for num, s in got.items() if s >= theta} == want


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 3_000),
    wide=st.booleans(),
    start=st.integers(0, 50),
)
@settings(max_examples=examples(60), deadline=None)
def test_dense_fill_in_c_as_numpy(seed: int, nlen: int, wide: bool, start: int) -> None:
    """``dense_fill``'s C pass and its numpy one set the same bits, from any posting on,
    frequencies 1 to 2**31 - 1 (and a 0: the list's own, sent to the list as a 3)."""
    rng = np.random.default_rng(seed)
    groups = np.flatnonzero(rng.random(nlen) < rng.random()).astype(np.int32)
    top = 2**31 - 1 if wide else 255
    tfs = rng.choice([0, 1, 1, 2, 3, 4, top], len(groups))
    g, tf = array("i", groups.tolist()), array("i" if wide else "B", tfs.tolist())
    start = min(start, len(g))
    size = (nlen + 3) // 4 + int(rng.integers(0, 3))
    c_bits = np.zeros(size, np.uint8)
    kernels.bm25_dense_fill(c_bits, g, tf, start, len(g))
    np_bits = np.zeros(size, np.uint8)
    with _no_core():
        dense_fill(np_bits, g, tf, start, len(g))
    assert (c_bits == np_bits).all()
    nums = groups[start:]
    codes = (c_bits[nums >> 2] >> ((nums & 3) << 1)) & 3
    assert codes.tolist() == [v if v in (1, 2) else 3 for v in tfs[start:].tolist()]


@contextmanager
def _no_core() -> Iterator[None]:
    saved = kernels.BM25_CORE
    kernels.BM25_CORE = False
    try:
        yield
    finally:
        kernels.BM25_CORE = saved


# --------------------------------------------------------------------------- the index


@contextmanager
def _dense(minimum: int, ratio: int, step: int) -> Iterator[None]:
    saved = (bm25_knobs._DENSE_TFS, bm25_knobs._DENSE_MIN, bm25_knobs._DENSE_RATIO,
             bm25_knobs._DENSE_STEP)  # fmt: skip
    bm25_knobs._DENSE_MIN, bm25_knobs._DENSE_RATIO = minimum, ratio
    bm25_knobs._DENSE_STEP = step
    try:
        yield
    finally:
        (bm25_knobs._DENSE_TFS, bm25_knobs._DENSE_MIN, bm25_knobs._DENSE_RATIO,
         bm25_knobs._DENSE_STEP) = saved  # fmt: skip


@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 120),
    minimum=st.sampled_from([1, 2, 8]),
    ratio=st.sampled_from([1, 2, 4]),
    step=st.sampled_from([1, 3, 16]),
    churn=st.sampled_from([0.15, 0.7]),
)
@settings(max_examples=examples(8), deadline=None)
def test_index_dense_agrees_with_reference(
    seed: int, count: int, minimum: int, ratio: int, step: int, churn: float
) -> None:
    """Adds of one to 300 words (common words repeated: frequencies 1 to 3 and more),
    deletions, purges (lists compacted, arrays remade), the knob turned off and on again
    while adding, an older snapshot: the arrays match their lists (``_check``) and the
    knob on and off give the reference's and the brute force's top-k, scores and ties."""
    rng = random.Random(seed)
    with _dense(minimum, ratio, step):
        three = Three(BM25Scorer())
        common = [f"c{i}" for i in range(4)]
        rare = [f"r{i}" for i in range(40)]
        queries = ["r1 r2 c0", "c0 c1 c2", " ".join(rare[:12] + common), rng.choice(rare)]
        old = 0
        for i in range(count):
            bm25_knobs._DENSE_TFS = rng.random() > 0.1  # off now and then while adding
            k = rng.choice([1, 3, 9, 140, 300]) if i % 7 == 0 else rng.randint(1, 8)
            words = rng.choices(common, k=k) + rng.choices(rare, k=rng.randint(0, 3))
            three.add(" ".join(words))
            if rng.random() < churn:
                three.delete(rng.randrange(1 << 16))
            if rng.random() < churn / 3:  # never past the older snapshot queried below
                three.purge(old if old else three.version - 1)
            if i == count // 2:
                old = three.version
            if i % 40 == 39 or i == count - 1:
                bm25_knobs._DENSE_TFS = True
                three.check()
                for on in (True, False):
                    bm25_knobs._DENSE_TFS = on
                    for version in (None, old or None):
                        view = three.view(version)
                        for query in queries:
                            for limit in (1, 10):
                                got = three.query(view, query, limit)
                                want = brute_force(
                                    three.scorer, three.records, view.version, query, limit,
                                    now=NOW,
                                )  # fmt: skip
                                assert got == [(s, rec.seq) for s, rec in want], (on, query)


def _codes_below(bits: Any, upto: int) -> Any:
    nums = np.arange(upto)
    return (bits[nums >> 2] >> ((nums & 3) << 1)) & 3


def test_index_dense_after_restore_and_growth(monkeypatch: pytest.MonkeyPatch) -> None:
    """The arrays follow the lengths' growth (a new array, the old one as it was, still
    right for a reader's ``upto``), drop a list that fell below half the thresholds, and
    an image's restore remakes them (``_check`` compares them with the lists)."""
    from actormem._index.bm25 import persist

    monkeypatch.setattr(bm25_knobs, "_CHUNK", 64)  # the lengths grow at 64, 128, ...
    with _dense(4, 4, 5):
        three = Three(BM25Scorer())
        for i in range(60):
            three.add(f"c0 c0 c1 q{i}" if i % 2 else f"c0 r{i} r{i} r{i}")
        index = three.indexes["core"]
        held = index._terms["c0"].dense
        assert held is not None
        assert index._terms["c1"].dense is not None
        bits, upto, dpos = held
        before = _codes_below(bits, upto)
        for i in range(300):
            three.add(f"c0 x{i}")
        assert index._terms["c0"].dense is not None
        assert index._terms["c0"].dense[0] is not bits
        assert (_codes_below(bits, upto) == before).all()  # a reader's groups unchanged
        assert index._terms["c1"].dense is None  # 30 of 360 groups
        three.check()
        records = three.records
        parts = persist.dump(index, records)
        fresh = BM25Scorer().make_index()
        persist.restore(fresh, parts, records)
        fresh._check(records)
        assert fresh._terms["c0"].dense is not None


# --------------------------------------------------------------------------- refusals


def test_bad_dense_refused() -> None:
    """Python refuses a bad array, upto or dpos before C; C refuses them too."""
    from actormem._index import _cbm25  # type: ignore[attr-defined]

    lengths = np.full(64, 3, np.int32)
    g, tf = array("i", range(0, 64, 2)), array("B", [1] * 32)
    base = (1.0, 1.0, g, tf, 32, array("i"), 0)
    parts = (0.3, 0.3, K1, B, 3.0, SLACK_UP)
    bits = np.zeros(16, np.uint8)
    bad: list[tuple[Any, ...]] = [
        (bits, 65, 0), (bits, -1, 0), (bits, 64, 33), (bits, 64, -1),
        (bits.astype(np.int32), 64, 0), (list(bits), 64, 0), (bits[::2], 32, 0),
        (bits, 64.0, 0),
    ]  # fmt: skip
    for extra in bad:
        with pytest.raises((TypeError, ValueError)):
            kernels.Bm25Daat([(*base, *extra)], lengths, parts, 16, True, dense_tfs=True)
    with pytest.raises(TypeError):
        kernels.Bm25Daat([(*base, bits)], lengths, parts, 16, True)
    with pytest.raises(TypeError):
        kernels.Bm25Daat([base], lengths, parts, 16, True, dense_tfs=1)  # type: ignore[arg-type]
    daat = kernels.Bm25Daat([(*base, bits, 64, 32)], lengths, parts, 16, True, dense_tfs=True)
    assert daat._more & 16
    for extra in ((bits, 65, 0), (bits, 64, 33), (bits.astype(np.int32), 64, 0)):
        with pytest.raises(ValueError, match="dense"):
            _cbm25.bm25_daat(
                [(*base, *extra)], np.zeros(1, np.int64), lengths, *parts, 0.0, 16, -1,
                np.empty(16, np.int64), np.empty(16), np.zeros(1, np.uint8), None, 4, 1.0,
                None, 16,
            )  # fmt: skip
    g8 = array("i", [0, 4, 63])
    for args in ((bits, g8, tf, 0, 4), (bits, g8, tf, -1, 2), (bits, g8, tf, 2, 1),
                 (bits[:15], g8, tf, 0, 3), (bits.astype(np.int8), g8, tf, 0, 3)):  # fmt: skip
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_dense_fill(*args)  # type: ignore[arg-type]
        with pytest.raises((TypeError, ValueError)):
            _cbm25.bm25_dense_fill(*args)
    assert not bits.any()  # nothing written by a refusal
    with pytest.raises(ValueError, match="beyond"):
        _cbm25.bm25_dense_fill(bits[:15], array("i", [0, 4, 60]), tf, 0, 3)
    assert not bits.any()
    with pytest.raises(TypeError):
        _cbm25.bm25_daat(
            [(*base, bits)], np.zeros(1, np.int64), lengths, *parts, 0.0, 16, -1,
            np.empty(16, np.int64), np.empty(16), np.zeros(1, np.uint8), None, 4, 1.0, None,
            16,
        )  # fmt: skip
