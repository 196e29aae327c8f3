"""The word-overlap core's bit kernels called directly at their edges, against numpy.

What ``tests/test_wordoverlap_bits.py`` leaves out: ``bits_add_dense`` with more planes
than ``ccore.MAX_PLANES`` (the C side takes up to 32: its generic, not unrolled, loop)
and multiplicities around the carry-save cut (8 copies through the adders, 9 by
carries), exact against sums mod ``2 ** np``; word maxima and ``bits_select`` with them
at the last partial word (lanes at and beyond ``n`` set in the planes must never count
or be selected), ranges past ``n`` and ``n = 0``; arrays C must refuse (read-only,
strided, wrong dtype); ``bits_from_masks`` over ranges inside one word and into bits
already set. Run under AddressSanitizer by ``stress/asan_kernels.sh``.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.wordoverlap import ccore

from .strategies import examples

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

FULL = (1 << 64) - 1


def _c() -> Any:
    from actormem._index import _cwordoverlap

    return _cwordoverlap


def _counts(planes: np.ndarray[Any, Any], np_: int, words: int) -> list[int]:
    """Every lane's count (64 per word) decoded from word-major planes."""
    out = []
    for w in range(words):
        pw = [int(planes[w * np_ + j]) for j in range(np_)]
        out += [sum(((pw[j] >> lane) & 1) << j for j in range(np_)) for lane in range(64)]
    return out


def _summed(
    start: np.ndarray[Any, Any],
    np_: int,
    words: int,
    sets: list[np.ndarray[Any, Any]],
    mults: list[int],
    lo: int,
) -> list[int]:
    """The counts of ``start`` plus each set's lanes times its multiplicity, over words
    ``lo`` to ``words``, mod ``2 ** np_``: what the dense adds must leave."""
    want = _counts(start, np_, words)
    for s, m in zip(sets, mults, strict=True):
        for w in range(lo, words):
            x = int(s[w])
            for lane in range(64):
                if (x >> lane) & 1:
                    want[w * 64 + lane] += m
    return [v % (1 << np_) for v in want]


def _encode(counts: list[int], np_: int) -> np.ndarray[Any, Any]:
    words = len(counts) // 64
    planes = np.zeros(words * np_, np.uint64)
    for w in range(words):
        for j in range(np_):
            v = 0
            for lane in range(64):
                v |= ((counts[w * 64 + lane] >> j) & 1) << lane
            planes[w * np_ + j] = np.uint64(v)
    return planes


@settings(max_examples=examples(60), deadline=None)
@given(
    np_=st.integers(1, 32),
    words=st.integers(0, 3),
    mults=st.lists(st.sampled_from([0, 1, 1, 1, 4, 6, 7, 8, 9, 255, 1 << 40]), max_size=24),
    seed=st.integers(0, 1 << 30),
)
def test_dense_adds_are_sums_mod_two_to_the_planes(
    np_: int, words: int, mults: list[int], seed: int
) -> None:
    c = _c()
    rng = np.random.default_rng(seed)
    sets = [rng.integers(0, FULL, words, dtype=np.uint64, endpoint=True) for _ in mults]
    start = rng.integers(0, FULL, words * np_, dtype=np.uint64, endpoint=True)
    lo = int(rng.integers(0, words + 1))
    want = _summed(start, np_, words, sets, mults, lo)
    for csa in (False, True):
        planes = np.concatenate([start, np.full(3, 0xABCD, np.uint64)])  # guard words
        c.bits_add_dense(planes, np_, lo, words, sets, mults, csa)
        assert _counts(planes, np_, words) == want
        assert planes[words * np_ :].tolist() == [0xABCD] * 3


@settings(max_examples=examples(80), deadline=None)
@given(
    n=st.integers(0, 200),
    np_=st.integers(1, 16),
    extra=st.integers(0, 2),  # words past n's last one that the planes also hold
    seed=st.integers(0, 1 << 30),
)
def test_word_maxima_and_select_ignore_lanes_at_and_beyond_n(
    n: int, np_: int, extra: int, seed: int
) -> None:
    c = _c()
    rng = np.random.default_rng(seed)
    words = -(-n // 64)
    total = words + extra
    # Counts of every lane, those at and beyond n the largest (a later retrieve's groups).
    top = (1 << np_) - 1
    counts = rng.integers(0, max(1, top // 2) + 1, total * 64).tolist()
    for g in range(n, total * 64):
        counts[g] = top
    planes = _encode(counts, np_)
    wmax = np.full(total + 1, 7777, np.uint16)
    c.bits_word_maxima(planes, np_, n, 0, words, wmax)
    per_word = [max(counts[w * 64 : min(n, (w + 1) * 64)]) for w in range(words)]
    assert wmax[:words].tolist() == per_word
    assert wmax[words:].tolist() == [7777] * (extra + 1)
    # The dense pass's maxima: no sets, words up to `total` (past n's: maxima 0).
    wmax2 = np.full(total + 1, 7777, np.uint16)
    c.bits_add_dense(planes.copy(), np_, 0, total, [], [], True, wmax2, n)
    assert wmax2[:total].tolist() == per_word + [0] * extra
    assert wmax2[total] == 7777
    out = np.full(total * 64 + 1, -1, np.int64)
    for cnt in sorted({*counts[: n + 1], 0, 1, top, top + 1}):
        for glo, ghi in ((0, n), (0, n + 70), (max(0, n - 1), n + 1), (n, n + 64), (63, 65)):
            lo, hi = min(glo, n), min(ghi, n)
            expect = [g for g in range(lo, hi) if counts[g] == cnt]
            room = np.full(max(1, hi - lo) + 1, -1, np.int64)
            for w in (None, wmax):
                got = c.bits_select(planes, np_, cnt, glo, ghi, n, room, w)
                assert room[:got].tolist() == expect
                assert room[got:].tolist() == [-1] * (len(room) - got)
    del out


def test_n_zero() -> None:
    c = _c()
    planes = np.full(4, FULL, np.uint64)
    wmax = np.full(2, 9, np.uint16)
    c.bits_word_maxima(planes, 2, 0, 0, 0, wmax)
    assert wmax.tolist() == [9, 9]
    c.bits_add_dense(planes, 2, 0, 1, [np.full(1, FULL, np.uint64)], [1], True, wmax, 0)
    assert wmax.tolist() == [0, 9]  # the word holds no group below n
    assert c.bits_select(planes, 2, 0, 0, 64, 0, np.zeros(1, np.int64), wmax) == 0
    assert c.bits_select(planes, 2, 3, 0, 0, 0, np.zeros(0, np.int64)) == 0


def test_arrays_c_refuses() -> None:
    c = _c()
    planes = np.zeros(6, np.uint64)  # 2 words, 3 planes, 128 groups
    ro = np.zeros(2, np.uint16)
    ro.setflags(write=False)
    strided = np.zeros(4, np.uint16)[::2]
    for bad in (ro, strided, np.zeros(2, np.int16), [0, 0]):
        with pytest.raises((ValueError, TypeError, BufferError)):
            c.bits_word_maxima(planes, 3, 128, 0, 2, bad)
        with pytest.raises((ValueError, TypeError, BufferError)):
            c.bits_add_dense(planes, 3, 0, 2, [], [], True, bad, 128)
    for bad in (strided, np.zeros(2, np.int16)):
        with pytest.raises((ValueError, TypeError, BufferError)):
            c.bits_select(planes, 3, 0, 0, 128, 128, np.zeros(128, np.int64), bad)
    with pytest.raises(ValueError, match="not a contiguous"):  # a strided set
        c.bits_add_dense(planes, 3, 0, 2, [np.zeros(4, np.uint64)[::2]], [1], True)
    short = [np.zeros(2, np.uint64), np.zeros(1, np.uint64)]
    with pytest.raises(ValueError, match="shorter than whi"):  # through the carry-save path
        c.bits_add_dense(planes, 3, 0, 2, short, [1, 1], True)
    ro_planes = np.zeros(6, np.uint64)
    ro_planes.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        c.bits_add_dense(ro_planes, 3, 0, 2, [], [], True)
    wide = np.zeros(34, np.uint64)
    with pytest.raises(ValueError, match="out of range"):  # 17 planes: maxima hold 16 bits
        c.bits_word_maxima(wide, 17, 128, 0, 2, np.zeros(2, np.uint16))
    assert planes.tolist() == [0] * 6


@settings(max_examples=examples(60), deadline=None)
@given(
    n=st.integers(0, 200),
    lo=st.integers(0, 200),
    width=st.integers(0, 70),
    bit=st.integers(0, 63),
    seed=st.integers(0, 1 << 30),
)
def test_masks_to_bits_in_any_range(n: int, lo: int, width: int, bit: int, seed: int) -> None:
    c = _c()
    rng = np.random.default_rng(seed)
    lo = min(lo, n)
    hi = min(n, lo + width)
    masks = rng.integers(0, FULL, n + 1, dtype=np.uint64, endpoint=True)
    words = -(-n // 64)
    before = rng.integers(0, FULL, words + 1, dtype=np.uint64, endpoint=True)
    out = before.copy()
    hits = c.bits_from_masks(masks, bit, lo, hi, out)
    on = [g for g in range(lo, hi) if (int(masks[g]) >> bit) & 1]
    assert hits == len(on)
    want = [int(x) for x in before]
    for g in on:
        want[g >> 6] |= 1 << (g & 63)
    assert [int(x) for x in out] == want


@settings(max_examples=examples(60), deadline=None)
@given(
    n=st.integers(0, 200),
    lo=st.integers(0, 200),
    width=st.integers(0, 140),
    room=st.integers(0, 2),
    seed=st.integers(0, 1 << 30),
)
def test_masks_to_rows_in_any_range(n: int, lo: int, width: int, room: int, seed: int) -> None:
    # Every short word's row: bit g set for each g in lo:hi whose mask has the word's
    # bit, on top of what the rows held; the counts grow by the bits set.
    c = _c()
    rng = np.random.default_rng(seed)
    lo = min(lo, n)
    hi = min(n, lo + width)
    masks = tuple(rng.integers(0, FULL, n, dtype=np.uint64, endpoint=True) for _ in range(2))
    stride = -(-n // 64) + room
    rows = rng.integers(0, FULL, 128 * stride + room, dtype=np.uint64, endpoint=True)
    before = rows.copy()
    counts = rng.integers(0, 1000, 128, dtype=np.int64)
    counts_before = counts.copy()
    ccore.bits_rows_from_masks(masks, rows, stride, counts, lo, hi)
    want = [int(x) for x in before]
    for b in range(128):
        on = [g for g in range(lo, hi) if (int(masks[b >> 6][g]) >> (b & 63)) & 1]
        assert counts[b] == counts_before[b] + len(on), b
        for g in on:
            want[b * stride + (g >> 6)] |= 1 << (g & 63)
    assert [int(x) for x in rows] == want
    # The C function refuses what would write out of bounds by itself.
    with pytest.raises(ValueError):
        c.bits_rows_from_masks(masks[0], masks[1], rows, stride, counts, lo, n + 1)
    with pytest.raises(ValueError):
        c.bits_rows_from_masks(masks[0], masks[1], rows[: -1 - room], stride + 1, counts, 0, n)
    with pytest.raises(ValueError):
        c.bits_rows_from_masks(masks[0], masks[1], rows, stride, counts[:127], 0, n)
    if n > 64:
        with pytest.raises(ValueError):
            c.bits_rows_from_masks(masks[0], masks[1], rows, -(-n // 64) - 1, counts, 0, n)


def test_masks_to_rows_refused_before_c() -> None:
    masks = (np.zeros(10, np.uint64), np.zeros(10, np.uint64))
    rows, counts = np.zeros(128, np.uint64), np.zeros(128, np.int64)
    ccore.bits_rows_from_masks(masks, rows, 1, counts, 0, 10)
    for bad in (
        lambda: ccore.bits_rows_from_masks(masks[0], rows, 1, counts, 0, 10),  # type: ignore[arg-type]
        lambda: ccore.bits_rows_from_masks(masks, rows, 1, counts, 0, 11),
        lambda: ccore.bits_rows_from_masks(masks, rows, 1, counts, 5, 4),
        lambda: ccore.bits_rows_from_masks(masks, rows, 0, counts, 0, 10),
        lambda: ccore.bits_rows_from_masks(masks, rows[:127], 1, counts, 0, 10),
        lambda: ccore.bits_rows_from_masks(masks, rows, 1, counts[:5], 0, 10),
        lambda: ccore.bits_rows_from_masks(masks, rows.astype(np.int64), 1, counts, 0, 10),
        lambda: ccore.bits_rows_from_masks(masks, rows, 1, counts.astype(np.uint64), 0, 10),
    ):
        with pytest.raises((TypeError, ValueError)):
            bad()


@settings(max_examples=examples(60), deadline=None)
@given(
    nums=st.lists(st.integers(-3, 300), max_size=120),
    n=st.integers(0, 290),
    start=st.integers(0, 130),
    width=st.integers(0, 130),
    seed=st.integers(0, 1 << 30),
)
def test_a_slice_joined_in_place(
    nums: list[int], n: int, start: int, width: int, seed: int
) -> None:
    # bits_join_slice: the bits of lst[start:stop] below n, on top of what bits held;
    # the same as bits_join of the copied slice.
    rng = np.random.default_rng(seed)
    lst = array("i", nums)
    start = min(start, len(lst))
    stop = min(len(lst), start + width)
    before = rng.integers(0, FULL, ccore.words_of(n) + 1, dtype=np.uint64, endpoint=True)
    got, want = before.copy(), before.copy()
    ccore.bits_join_slice(lst, start, stop, n, got)
    ccore.bits_join([lst[start:stop]], n, want)
    assert (got == want).all()
    for bad in (
        lambda: ccore.bits_join_slice(lst, start, len(lst) + 1, n, got),
        lambda: ccore.bits_join_slice(lst, -1, stop, n, got),
        lambda: ccore.bits_join_slice(lst, start, stop, n + 64, got[: ccore.words_of(n)]),
        lambda: ccore.bits_join_slice(array("q", nums), start, stop, n, got),
        lambda: ccore.bits_join_slice(lst, start, stop, -1, got),
    ):
        with pytest.raises((TypeError, ValueError)):
            bad()
    c = _c()
    with pytest.raises(ValueError):
        c.bits_join_slice(lst, start, len(lst) + 1, n, got)
    with pytest.raises(ValueError):
        c.bits_join_slice(lst, 0, 0, 64 * len(got) + 1, got)


# -- the token cache against a posting dict whose lookups run Python code --------------


def _slot(tok: str, bits: int = 8) -> int:
    """The slot of ``tok`` in a token cache of 2 ** bits slots (_cwordoverlap.c's hash)."""
    h = 0xCBF29CE484222325
    for b in tok.encode():
        h = ((h ^ b) * 0x100000001B3) & FULL
    return (h ^ (h >> 29)) & ((1 << bits) - 1)


def test_a_lookup_that_reenters_the_cache_is_refused() -> None:
    # A key's __eq__ runs during add_text_cached's dict lookup: a second add through the
    # same cache there (with a larger dict it would grow the table) freed the slots the
    # first call still wrote to. Now the cache refuses while in use.
    from actormem._index.substring import SubstringVocab
    from actormem._index.wordoverlap import ccore

    cache = ccore.token_cache()
    big = {f"t{i}": array("i", [0]) for i in range(2000)}
    seen: list[BaseException] = []

    class Key:
        def __hash__(self) -> int:
            return hash("zz")

        def __eq__(self, other: object) -> bool:
            if other == "zz":
                for again in (
                    lambda: ccore.add_text_cached(big, "t1", 1, SubstringVocab(), cache, 0),
                    lambda: ccore.cache_forget(cache, big, "t1", 1),
                ):
                    try:
                        again()
                    except RuntimeError as err:
                        seen.append(err)
                return True
            return False

    post = {"a": array("i", [0]), Key(): array("i", [0])}
    assert ccore.add_text_cached(post, "a zz", 1, SubstringVocab(), cache, 0) == 0
    assert [str(e) for e in seen] == ["the token cache is in use"] * 2
    assert [lst.tolist() for lst in post.values()] == [[0, 1], [0, 1]]
    assert [lst.tolist() for lst in big.values()] == [[0]] * 2000
    # Usable afterwards: the call cleared its mark.
    assert ccore.add_text_cached(post, "a", 2, SubstringVocab(), cache, 0) == 0
    assert post["a"].tolist() == [0, 1, 2]


def test_a_lookup_that_drops_a_list_taken_earlier() -> None:
    # A key's __eq__ deletes post["a"] after "a" was looked up and cached; a token in
    # "a"'s slot then replaces it: the call's borrowed pointer to a's list, appended to
    # last, pointed to freed memory (ASan with PYTHONMALLOC=malloc). Now it holds it.
    from actormem._index.substring import SubstringVocab
    from actormem._index.wordoverlap import ccore

    other = next(f"b{i}" for i in range(100_000) if _slot(f"b{i}") == _slot("a"))
    cache = ccore.token_cache()
    post: dict[Any, array[int]] = {}

    class Key:
        def __hash__(self) -> int:
            return hash("zz")

        def __eq__(self, o: object) -> bool:
            post.pop("a", None)
            return o == "zz"

    post["a"] = array("i", [0])
    post[Key()] = array("i", [0])
    post[other] = array("i", [0])
    assert ccore.add_text_cached(post, f"a zz {other}", 1, SubstringVocab(), cache, 0) == 0
    assert "a" not in post
    assert [lst.tolist() for lst in post.values()] == [[0, 1], [0, 1]]


def test_a_huge_n_is_refused_by_c_itself() -> None:
    # n near PY_SSIZE_T_MAX: words_of(n) computed as (n + 63) / 64 overflowed to a
    # negative count that passed every "bits long enough" check, and a group number
    # below n (every one) was written ~2**24 words past a one-word bitset (a crash).
    c = _c()
    big = (1 << 63) - 1
    one = np.zeros(1, np.uint64)
    far = array("i", [1 << 30])
    for n in (big, big - 62, big - 63):
        with pytest.raises(ValueError, match="out of range"):
            c.bits_join_slice(far, 0, 1, n, one)
        with pytest.raises(ValueError, match="out of range"):
            c.bits_join([far], n, one)
        with pytest.raises(ValueError, match="out of range"):
            c.bits_set(one, np.array([1 << 30], np.int32), 0, 1, n)
        with pytest.raises(ValueError, match="out of range"):
            c.bits_unmark(one, np.array([1 << 30], np.int32), 0, 1, n)
        with pytest.raises(ValueError, match="too short|out of range"):
            c.bits_add_sparse(np.zeros(3, np.uint64), 3, one, np.array([5], np.int32), 0, 1, n, 1)
        with pytest.raises(ValueError, match="too short|out of range"):
            c.bits_maxima(np.zeros(3, np.uint64), 3, n, 64, 0, 1, np.zeros(1, np.int64))
    assert one.tolist() == [0]


@settings(max_examples=examples(120), deadline=None)
@given(
    np_=st.integers(1, 32),
    words=st.integers(0, 4),
    longer=st.integers(0, 2),  # words of each set past `whi` (never read)
    mults=st.lists(st.sampled_from([0, 1, 8, 9, 10, 255, 1 << 40, FULL]), max_size=12),
    cut=st.integers(0, 300),  # n: any lane, at, before or past the words' last one
    regs=st.booleans(),
    seed=st.integers(0, 1 << 30),
)
def test_carry_save_with_planes_in_registers_and_word_maxima(
    np_: int, words: int, longer: int, mults: list[int], cut: int, regs: bool, seed: int
) -> None:
    # The carry-save pass (csa) in either form (regs: knobs._CSA_REGS, the sets of a
    # multiplicity above 8 added to a copy of the word's planes), with the words'
    # maxima of the lanes below n: sums mod 2 ** np_ as numpy's, guard words after the
    # planes and the maxima untouched, a set's words past whi never read.
    c = _c()
    rng = np.random.default_rng(seed)
    n = min(cut, words * 64 + 70)
    sets = [rng.integers(0, FULL, words + longer, dtype=np.uint64, endpoint=True) for _ in mults]
    start = rng.integers(0, FULL, words * np_, dtype=np.uint64, endpoint=True)
    lo = int(rng.integers(0, words + 1))
    want = _summed(start, np_, words, sets, mults, lo)
    planes = np.concatenate([start, np.full(3, 0xABCD, np.uint64)])
    with_max = np_ <= 16
    wmax = np.full(words + 2, 7777, np.uint16) if with_max else None
    c.bits_add_dense(planes, np_, lo, words, sets, mults, True, wmax, n, regs)
    assert _counts(planes, np_, words) == want
    assert planes[words * np_ :].tolist() == [0xABCD] * 3
    if wmax is not None:
        expect = [7777] * lo + [
            max(want[w * 64 : min(n, (w + 1) * 64)], default=0) if w * 64 < n else 0
            for w in range(lo, words)
        ]
        assert wmax[:words].tolist() == expect
        assert wmax[words:].tolist() == [7777, 7777]
