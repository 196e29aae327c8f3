"""hot45: the hot paths read trio's and numpy's names through module-level names (CPython
3.11 cannot specialize an attribute read on a module that defines ``__getattr__``), and
``query_words`` sizes its dict up front. The same objects and the same values."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import trio

from actormem._engine import fairshare, memory
from actormem._index import kernels, scoring
from actormem._index.wordoverlap import ccore, search


def test_module_names_are_the_same_objects() -> None:
    for mod in (fairshare, memory):
        assert mod._lowlevel is trio.lowlevel
        assert mod._current_time is trio.current_time
    assert memory._EMPTY_OR_CLOSED == (trio.WouldBlock, trio.EndOfChannel)
    assert kernels._NDARRAY is np.ndarray
    assert ccore._NDARRAY is np.ndarray
    assert search._NDARRAY is np.ndarray
    assert search._EMPTY is np.empty
    assert search._INT64 is np.int64
    assert search._U64_DT == np.dtype(np.uint64)
    assert search._U8_DT == np.dtype(np.uint8)
    assert scoring._DTYPE is np.dtype


def _expected(query: str) -> tuple[str, dict[str, int], int]:
    words = query.lower().split()
    return query.lower(), dict(collections.Counter(words)), len(words)


@pytest.mark.parametrize("distinct", [0, 1, 5, 6, 11, 35, 200])
@pytest.mark.parametrize("intern", [0, 1])
def test_query_words_presized_same_items_and_order(distinct: int, intern: int) -> None:
    qw = pytest.importorskip("actormem._index._cwordoverlap").query_words
    words = [f"W{i % 7}x{i}" for i in range(distinct)]
    query = " ".join(words + words[: distinct // 2] + ["Tail"] * 3)
    low, mult, n = qw(query, intern)
    exp_low, exp_mult, exp_n = _expected(query)
    assert (low, n) == (exp_low, exp_n)
    assert mult == exp_mult
    assert list(mult) == list(exp_mult)  # first-seen order
