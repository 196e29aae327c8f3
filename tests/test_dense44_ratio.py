"""The ratio of the BM25 dense frequency arrays (``knobs._DENSE_RATIO``, dense44): a
long list gets an array while at least one group in 8 has its term (16 before), keeps
it while one in 16 does, and drops it below; the lists between one in 16 and one in 8
(at 1M on the bench's texts 54 lists, *what* among them, ~14 MB) are searched instead. The
arrays never change results: the top-k with the ratio at 8 and at 16 are the brute
force's.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import pytest

from actormem import BM25Scorer
from actormem._index.bm25 import knobs as bm25_knobs

from .bm25_cases import NEEDS_CORE
from .test_bm25 import brute_force
from .test_bm25_core import NOW, Three
from .test_bm25q7_dense import _dense

pytestmark = NEEDS_CORE


def _small(ratio: int | None = None) -> AbstractContextManager[None]:
    """Arrays from 16 postings on, refreshed every new group; ``ratio``: the knob's
    value, None for its default."""
    return _dense(16, bm25_knobs._DENSE_RATIO if ratio is None else ratio, 1)


_EVERY = (("every5", 5), ("every12", 12), ("every20", 20))


def _build(count: int) -> Three:
    """``count`` texts: ``every5`` in one in 5 (above 1/8), ``every12`` in one in 12
    (between 1/16 and 1/8), ``every20`` in one in 20 (below 1/16), ``word{i}`` each."""
    three = Three(BM25Scorer())
    for i in range(count):
        words = [f"word{i}", "filler"]
        words += [name for name, k in _EVERY if i % k == 0]
        three.add(" ".join(words))
    return three


def _dense_terms(three: Three) -> set[str]:
    index = three.indexes["core"]
    return {t for t in ("every5", "every12", "every20") if index._terms[t].dense is not None}


def test_default_ratio_is_ten() -> None:
    """8 at dense44; 10 since q52 (tests/test_q52_first32.py)."""
    assert bm25_knobs._DENSE_RATIO == 10


@pytest.mark.parametrize(("ratio", "want"), [
    (None, {"every5"}), (8, {"every5"}), (16, {"every5", "every12"}),
])  # fmt: skip
def test_arrays_for_lists_at_one_group_in_ratio(ratio: int | None, want: set[str]) -> None:
    """At 400 groups: the default (10) and 8 give an array to the list in one group in 5 only;
    16 also to the one in 12; neither to the one in 20. Queries over the arrays and the
    searched lists give the brute force's top-k."""
    with _small(ratio):
        three = _build(400)
        assert _dense_terms(three) == want
        three.check()
        for query in ("every5 every12", "every12 every20 word7", "every5 filler", "every12"):
            view = three.view(None)
            got = three.query(view, query, 10)
            want_top = brute_force(three.scorer, three.records, view.version, query, 10, now=NOW)
            assert got == [(s, rec.seq) for s, rec in want_top], query


def test_array_kept_down_to_half_the_ratio() -> None:
    """A list that got its array keeps it while one group in 16 has the term (twice the
    ratio, 8 here), and drops it below: then searched as any other list."""
    with _small(8):
        three = Three(BM25Scorer())
        for i in range(160):  # "w" in one group in 4: an array
            three.add(f"w word{i}" if i % 4 == 0 else f"word{i}")
        index = three.indexes["core"]
        assert index._terms["w"].dense is not None
        for i in range(160, 600):  # 40 of 600 groups: one in 15, kept
            three.add(f"word{i}")
        assert index._terms["w"].dense is not None
        for i in range(600, 700):  # 40 of 700: one in 17.5, dropped
            three.add(f"word{i}")
        assert index._terms["w"].dense is None
        three.check()
        view = three.view(None)
        want = brute_force(three.scorer, three.records, view.version, "w word3", 10, now=NOW)
        assert three.query(view, "w word3", 10) == [(s, rec.seq) for s, rec in want]
