"""The C kernels refuse a misaligned numpy array before reading it.

A numpy view can start at any byte (``np.frombuffer(data, np.int64, offset=1)``, a
slice of a uint8 array viewed as wider items); C reading its int32s, int64s or doubles
there is undefined behaviour. ``flat_first`` took such arrays (review23c: the engine
passes only its own aligned ones), and so did every kernel taking numpy arrays through
``_kernels_common.h``'s ``get`` or its own ``PyObject_GetBuffer``. Each now raises
ValueError naming the argument ("misaligned"), writes nothing, and gives the usual
result for an aligned copy of the same values.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore

needs_kernels = pytest.mark.skipif(
    not kernels.AVAILABLE, reason="the compiled index kernels are not built"
)
needs_core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)
needs_bm25 = pytest.mark.skipif(kernels._b is None, reason="the BM25 core is not built")


def misaligned(values: Any, dtype: Any, shift: int = 1) -> np.ndarray[Any, Any]:
    """A writable 1-D C-contiguous array of ``values`` whose data starts ``shift`` bytes
    past an aligned address (numpy's own ``flags.aligned`` is False)."""
    a = np.asarray(values, dtype)
    raw = np.zeros(a.nbytes + 16, np.uint8)
    start = (-raw.ctypes.data) % 16 + shift
    view = raw[start : start + a.nbytes].view(a.dtype)
    view[:] = a
    assert view.flags.c_contiguous
    assert view.flags.writeable
    assert view.flags.aligned == (a.itemsize == 1)
    return view


def _flat_args() -> tuple[Any, ...]:
    counts = np.array([3, 0, 1, 2, 3, 1, 0, 2], np.uint16)
    maxrel = np.linspace(0.1, 0.8, 8)
    minseq = np.arange(8, dtype=np.int64) * 3
    return counts, maxrel, minseq


@needs_core
@pytest.mark.parametrize(
    ("which", "shift"), [(0, 1), (1, 1), (1, 2), (1, 4), (2, 1), (2, 2), (2, 4)]
)
def test_flat_first_refuses_a_misaligned_array(which: int, shift: int) -> None:
    """``counts`` (uint16), ``maxrel`` (float64), ``minseq`` (int64), ``shift`` bytes
    past an aligned address."""
    arrays = list(_flat_args())
    name = ["counts", "maxrel", "minseq"][which]
    expected = ccore.flat_first(arrays[0], 8, 1, 3, arrays[1], arrays[2], None, 4)
    arrays[which] = misaligned(arrays[which], arrays[which].dtype, shift)
    with pytest.raises(ValueError, match=f"{name}: misaligned"):
        ccore.flat_first(arrays[0], 8, 1, 3, arrays[1], arrays[2], None, 4)
    # The C function itself, not only through the wrapper.
    with pytest.raises(ValueError, match=f"{name}: misaligned"):
        ccore._module().flat_first(
            arrays[0], 8, 1, 3, arrays[1], arrays[2], False, 0.0, 0, 4, False, 0.0, 0, 0
        )
    arrays[which] = arrays[which].copy()  # aligned again: the same answer
    assert ccore.flat_first(arrays[0], 8, 1, 3, arrays[1], arrays[2], None, 4) == expected


@needs_core
def test_the_uint8_counts_of_flat_first_have_no_alignment() -> None:
    counts, maxrel, minseq = _flat_args()
    odd = misaligned(counts, np.uint8)
    assert ccore.flat_first(odd, 8, 1, 3, maxrel, minseq, None, 4) == ccore.flat_first(
        counts.astype(np.uint8), 8, 1, 3, maxrel, minseq, None, 4
    )


@needs_kernels
@pytest.mark.parametrize("dtype", [np.uint16, np.int64])
def test_wo_count_dense_refuses_misaligned_counts(dtype: Any) -> None:
    from actormem._index import _ckernels

    sets = [np.array([1, 0, 1, 1, 0, 0, 0, 1], np.uint8)]
    counts = misaligned(np.zeros(8), dtype)
    with pytest.raises(ValueError, match="counts: misaligned"):
        _ckernels.wo_count_dense(counts, 0, 8, sets, [2])
    assert not counts.any()
    good = counts.copy()
    _ckernels.wo_count_dense(good, 0, 8, sets, [2])
    assert good.tolist() == [2, 0, 2, 2, 0, 0, 0, 2]


@needs_kernels
@pytest.mark.parametrize("which", ["counts", "gids", "mark"])
def test_wo_count_sparse_refuses_misaligned_arrays(which: str) -> None:
    from actormem._index import _ckernels

    arrays = {
        "counts": np.zeros(8, np.uint16),
        "gids": np.array([1, 3, 5], np.int32),
        "mark": np.zeros(8, np.uint16),
    }
    expected = {k: v.copy() for k, v in arrays.items()}
    _ckernels.wo_count_sparse(expected["counts"], expected["gids"], 0, 3, 8, 1, expected["mark"], 7)
    arrays[which] = misaligned(arrays[which], arrays[which].dtype)
    before = {k: v.copy() for k, v in arrays.items()}
    with pytest.raises(ValueError, match=f"{which}: misaligned"):
        _ckernels.wo_count_sparse(arrays["counts"], arrays["gids"], 0, 3, 8, 0, arrays["mark"], 7)
    for k, v in arrays.items():  # nothing written
        assert np.array_equal(v, before[k])
    assert expected["counts"].tolist() == [0, 1, 0, 1, 0, 1, 0, 0]  # (aligned: counted)
    assert expected["mark"].tolist() == [0, 7, 0, 7, 0, 7, 0, 0]


@needs_kernels
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_bm25_exact_refuses_misaligned_terms(dtype: Any) -> None:
    from actormem._index import _ckernels

    terms = np.array([4 << 8 | 2, 9 << 8 | 1], dtype)  # term << 8 | tf
    none = np.zeros(0, np.int32)
    query = [(1.5, none, none, 0), (2.0, none, none, 0)]
    args = ({4: 0, 9: 1}, query, 3, 1.0)
    with pytest.raises(ValueError, match="terms: misaligned"):
        _ckernels.bm25_exact(misaligned(terms, dtype), *args)
    assert _ckernels.bm25_exact(terms, *args) == 1.5 * (2 / 3) + 2.0 * (1 / 2)


@needs_core
def test_count_words_refuses_misaligned_counts() -> None:
    vocab = SubstringVocab()
    post: dict[str, Any] = {}
    for gid, text in enumerate(["player plays", "display", "alpha one"]):
        ccore.add_text(post, text, gid, vocab)
    counts = misaligned(np.zeros(8), np.uint16)
    memo: list[Any] = [{}, {}, 0]
    with pytest.raises(ValueError, match="counts: misaligned"):
        ccore.count_words(["alpha"], [1], 0, 1000, 100, vocab, post, {}, {}, counts, 3, 0, memo)
    assert not counts.any()
    assert memo == [{}, {}, 0]
    good = np.zeros(8, np.uint16)
    ccore.count_words(["alpha"], [1], 0, 1000, 100, vocab, post, {}, {}, good, 3, 0, [{}, {}, 0])
    assert good[2] == 1


@needs_core
@pytest.mark.parametrize("which", [0, 1, 2, 3])
def test_text_masks_refuses_misaligned_arrays(which: int) -> None:
    arrays = [
        np.arange(129 * 129, dtype=np.uint64),
        np.arange(129 * 129, dtype=np.uint64),
        np.zeros(4, np.uint64),
        np.zeros(4, np.uint64),
    ]
    arrays[which] = misaligned(arrays[which], np.uint64, 4)
    with pytest.raises(ValueError, match="misaligned"):
        ccore._module().text_masks(["abc", "xyz"], *arrays, 0)
    assert not arrays[2].any()
    assert not arrays[3].any()


@needs_bm25
def test_bm25_dense_fill_refuses_misaligned_groups() -> None:
    from actormem._index import _cbm25

    bits = np.zeros(4, np.uint8)
    tfs = np.array([1, 2, 3], np.uint8)
    with pytest.raises(ValueError, match="groups: misaligned"):
        _cbm25.bm25_dense_fill(bits, misaligned([0, 5, 9], np.int32, 2), tfs, 0, 3)
    assert not bits.any()
    _cbm25.bm25_dense_fill(bits, np.array([0, 5, 9], np.int32), tfs, 0, 3)
    assert bits.any()


@needs_core
def test_visit_heap_refuses_a_misaligned_index() -> None:
    """``get`` in _cwordoverlap.c (the heap's own alignment was checked in Python)."""
    idx = misaligned([0, 1, 2], np.int64, 4)
    maxrel = np.array([0.5, 0.2, 0.9])
    minseq = np.array([1, 2, 3], np.int64)
    heap = np.zeros(12, np.int64)
    with pytest.raises(ValueError, match="idx: misaligned"):
        ccore._module().visit_heap(idx, maxrel, minseq, 0.1, None, False, 0.0, 0, heap, True)
    assert not heap.any()
    assert ccore.visit_heap(idx.copy(), maxrel, minseq, 0.1, None, None, heap) == 3


@needs_bm25
def test_an_empty_buffer_is_taken_wherever_it_points() -> None:
    """An empty ``array('i')`` exports a static one-byte string, at any address: there
    is nothing to read, so it is not refused (the BM25 core's empty ``blocks`` cache is
    one; refusing it broke every BM25 query of a fresh term)."""
    from array import array

    from actormem._index import _cbm25

    bits = np.zeros(4, np.uint8)
    empty = array("i")
    assert memoryview(empty).nbytes == 0
    _cbm25.bm25_dense_fill(bits, empty, array("B"), 0, 0)
    raw = bytearray(16)
    start = (-np.frombuffer(raw, np.uint8).ctypes.data) % 8 + 1
    odd = memoryview(raw)[start:start].cast("i")  # int32, no items, at an odd address
    assert np.frombuffer(odd, np.int32).ctypes.data % 4 != 0
    _cbm25.bm25_dense_fill(bits, odd, np.zeros(0, np.uint8), 0, 0)
    assert not bits.any()
