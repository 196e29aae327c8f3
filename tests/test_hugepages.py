"""Transparent huge pages for the indexes' large arrays (``kernels.huge_advise``,
``kernels.huge_zeros``, ``bm25.knobs._HUGE_PAGES``).

The advice reaches the kernel: the 2 MiB pages inside a buffer are marked ``hg`` in
``/proc/self/smaps`` (the range aligned inward: nothing for a small buffer); a refused
advice (an invalid one) is ignored, returning 0; ``huge_zeros`` gives zeros starting on
a 2 MiB boundary, advised. Through the BM25 index, with the knob on and off: the same
top-k (scores and ties) on every path, the per-group columns 2 MiB aligned (on) and the
long posting lists advised again after a reallocation moved them; and through an
image's restore. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import random
import sys
import uuid
from array import array
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import index as bm25_index
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.bm25.postings import _NO_SEQ, _NO_SEQ32
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap import numbering as wo_numbering

from .test_bm25_core import Three

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="the C extension is not built")

HUGE = 2 << 20
#: Whether this kernel takes the advice (Linux, THP mode madvise or always).
ADVISED = sys.platform == "linux" and kernels.HUGE_PAGES_USEFUL


def _vmflags(addr: int) -> list[str]:
    """The ``VmFlags`` of the mapping of this process that holds ``addr``."""
    found = False
    with open("/proc/self/smaps", encoding="ascii") as f:
        for line in f:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(x, 16) for x in head.split("-"))
                found = lo <= addr < hi
            elif found and line.startswith("VmFlags:"):
                return line.split()[1:]
    raise AssertionError(f"no mapping holds {addr:#x}")


def _inner(addr: int) -> int:
    """The first 2 MiB boundary at or after ``addr``."""
    return -(-addr // HUGE) * HUGE


@pytest.mark.skipif(not ADVISED, reason="the kernel takes no huge page advice here")
def test_advice_reaches_the_kernel() -> None:
    buf = array("b", bytes(6 << 20))
    addr = buf.buffer_info()[0]
    got = kernels.huge_advise(buf)
    assert got >= 2 * HUGE
    assert got % HUGE == 0
    assert "hg" in _vmflags(_inner(addr))


def test_small_and_refused_advice_are_ignored() -> None:
    assert kernels.huge_advise(bytearray(100)) == 0
    assert kernels.huge_advise(np.zeros(HUGE - 1, np.uint8)) in (0, HUGE)  # aligned or not
    from actormem._index import _ckernels

    buf = bytearray(5 << 20)
    assert _ckernels.huge_advise(buf, -1) == 0  # madvise refuses: ignored, no error
    with pytest.raises(TypeError):
        kernels.huge_advise(12)


def test_without_the_extension_nothing_is_advised(monkeypatch: Any) -> None:
    monkeypatch.setattr(kernels, "_huge", None)
    assert kernels.huge_advise(bytearray(8 << 20)) == 0
    arr = kernels.huge_zeros(1 << 20, np.uint8)
    assert arr.dtype == np.uint8
    assert len(arr) == 1 << 20
    assert not arr.any()


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_huge_zeros_are_aligned_zeros(dtype: Any) -> None:
    size = (3 << 20) // np.dtype(dtype).itemsize + 5
    arr = kernels.huge_zeros(size, dtype)
    assert arr.dtype == dtype
    assert arr.shape == (size,)
    assert not arr.any()
    assert arr.flags.c_contiguous
    assert arr.flags.writeable
    assert arr.ctypes.data % HUGE == 0
    arr[-1] = 7  # the whole array is writable memory
    assert arr[-1] == 7
    if ADVISED:
        assert "hg" in _vmflags(arr.ctypes.data + HUGE)
    small = kernels.huge_zeros(100, dtype)
    assert small.shape == (100,)
    assert not small.any()
    plain = kernels.huge_zeros(size, dtype, huge=False)
    assert plain.shape == (size,)
    assert not plain.any()


def test_slab_arrays_are_disjoint_zeros_on_huge_pages(monkeypatch: Any) -> None:
    assert kernels.HugeSlab().zeros(100, np.uint8).base is None  # small: np.zeros
    monkeypatch.setattr(kernels.HugeSlab, "MIN_BYTES", 1)
    slab = kernels.HugeSlab(1 << 20)
    arrays = [slab.zeros(n, np.uint8) for n in (100, 65536, 3, 200000, 200000, 200000)]
    arrays.append(slab.zeros(1000, np.int64))
    for arr in arrays:
        assert not arr.any()
        assert arr.ctypes.data % 64 == 0
        arr[:] = 1  # writable, and no other array sees it
    for arr in arrays:
        assert (arr == 1).all()
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:], strict=False))
    if ADVISED:
        assert "hg" in _vmflags(arrays[0].ctypes.data)
    big = slab.zeros(300000, np.uint8)  # over a quarter of a slab: its own
    assert len(big) == 300000
    plain = slab.zeros(1000, np.uint8, huge=False)
    assert plain.base is None


def _spy(monkeypatch: Any) -> list[int]:
    """Record the size of every buffer ``kernels.huge_advise`` is given from now on."""
    seen: list[int] = []
    real = kernels.huge_advise

    def spy(buf: Any) -> int:
        seen.append(memoryview(buf).nbytes)
        return real(buf)

    monkeypatch.setattr(kernels, "huge_advise", spy)
    return seen


def _build(monkeypatch: Any, huge: bool) -> Three:
    monkeypatch.setattr(bm25_knobs, "_HUGE_PAGES", huge)
    three = Three(BM25Scorer())
    rng = random.Random(5)
    words = ["a", "b", "c", "d", "e", *(f"w{i}" for i in range(40))]
    for i in range(400):
        three.add(" ".join(rng.choices(words, k=rng.choice([1, 3, 8, 40]))))
        if i % 37 == 0:
            three.delete(i)
    three.check()
    return three


def test_index_results_are_the_same_with_the_knob_on_and_off(monkeypatch: Any) -> None:
    monkeypatch.setattr(bm25_knobs, "_CHUNK", 4)  # the columns grow several times
    monkeypatch.setattr(bm25_knobs, "_DENSE_STEP", 16)  # the advice's pass runs often
    monkeypatch.setattr(bm25_knobs, "_DENSE_MIN", 20)  # dense arrays for the long lists
    monkeypatch.setattr(kernels.HugeSlab, "MIN_BYTES", 1)  # theirs from the slab
    monkeypatch.setattr(kernels, "HUGE_ZEROS_MIN", 1)  # every column aligned and advised
    monkeypatch.setattr(bm25_index, "_HUGE_POSTINGS", 50)  # "a" ... "e" are long lists
    seen = _spy(monkeypatch)
    on = _build(monkeypatch, True)
    advised = len(seen)
    assert advised > 10  # the long lists, again as they were reallocated
    core = on.indexes["core"]
    assert core._lengths.ctypes.data % HUGE == 0
    assert core._codes.ctypes.data % HUGE == 0
    assert core._alive.ctypes.data % HUGE == 0
    assert core._first_seq.ctypes.data % HUGE == 0
    core._dense_refresh()  # the owner's pass, as after its next 16 adds
    advised = len(seen)
    dense = [term.dense[0] for term in core._terms.values() if term.dense is not None]
    assert dense
    assert all(bits.base is not None for bits in dense)  # carved from the slab
    for term in core._terms.values():  # every long list advised where it is now
        if len(term.groups) >= 50:
            assert core._huge_at[term.num] == term.groups.buffer_info()[0]
    off = _build(monkeypatch, False)
    assert len(seen) == advised  # nothing advised with the knob off
    assert not off.indexes["core"]._huge_at
    dense = [t.dense[0] for t in off.indexes["core"]._terms.values() if t.dense is not None]
    assert all(bits.base is None for bits in dense)  # np.zeros, as before
    for query in ["a", "b c", "w1 w2 a", "e e d w39", "zzz", "a b c d e w3"]:
        for limit in (1, 5, 50):
            assert on.query(on.view(), query, limit) == off.query(off.view(), query, limit)
    # An image restored with the knob on: aligned columns, the same results.
    monkeypatch.setattr(bm25_knobs, "_HUGE_PAGES", True)
    records = sorted(on.records, key=lambda rec: rec.seq)
    live = [rec for rec in records if rec.died > on.version]
    parts = bm25_persist.dump(core, live)
    restored = bm25_persist.restore(BM25Scorer().make_index(), parts, live)  # type: ignore[arg-type]
    restored._check(live)
    assert restored._lengths.ctypes.data % HUGE == 0
    assert restored._first_seq.ctypes.data % HUGE == 0
    unknown = _NO_SEQ32 if restored._first32 else _NO_SEQ
    assert (restored._first_seq[len(restored._table) :] == unknown).all()


def _wo_state(monkeypatch: Any, huge: bool) -> MemoryState:
    monkeypatch.setattr(wo_knobs, "_HUGE_PAGES", huge)
    rng = np.random.default_rng(9)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    for count in range(1, 1500):
        words = [WO_WORDS[int(j)] for j in rng.integers(0, len(WO_WORDS), 6)]
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=" ".join([*words, f"x{count}"]),
                created_at=BASE + timedelta(seconds=count),
                id=uuid.UUID(int=count),
            )
        )
    state.publish()
    return state


WO_WORDS = "the a of to and in is it cat dog play deploy service error log".split()
BASE = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
def test_word_overlap_same_results_with_the_knob_on_and_off(monkeypatch: Any) -> None:
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_FROM", 256)
    monkeypatch.setattr(kernels, "HUGE_ZEROS_MIN", 1)  # every column aligned and advised
    monkeypatch.setattr(wo_numbering, "_HUGE_POSTINGS", 200)  # the common words' lists
    seen = _spy(monkeypatch)
    on = _wo_state(monkeypatch, True)
    e = on.index._e  # type: ignore[attr-defined]
    assert seen  # the long lists were advised at the bitsets' upkeep
    assert e.huge_at
    for col in (e.maxrel, e.minseq, *e.masks):
        assert col.ctypes.data % HUGE == 0
    advised = len(seen)
    off = _wo_state(monkeypatch, False)
    assert len(seen) == advised  # nothing advised with the knob off
    assert not off.index._e.huge_at  # type: ignore[attr-defined]
    for query in ["the cat", "deploy service error", "x17 log", "zzz", "a of to and in"]:
        got = [
            [(s, r.seq) for s, r in st.index.top_k(st.view(), query, 10, None)]  # type: ignore[attr-defined]
            for st in (on, off)
        ]
        assert got[0] == got[1]
