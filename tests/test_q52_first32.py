"""BM25's first seqs as int32 (``knobs._FIRST_SEQ32``, branch q52): each group's lowest
seq kept clipped into int32 (``postings.first_seq_floor``), never above a seq of its
group, so the core's tie skip gives the same answers as the pure-Python reference and
the brute force, with seqs inside int32, crossing its top and past it; the dump and
restore keep the layout; the knob off keeps int64 (the layout before). The bytes it
saves pay for the dense arrays at ``_DENSE_RATIO`` 10 (8 before): a list in one group
in 9 gets one at the default, not at 8, and answers as the searched list does."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import initialize

from actormem import BM25Scorer
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.bm25.postings import (
    _NO_SEQ,
    _NO_SEQ32,
    _SEQ32_TOP,
    first_seq_array,
    first_seq_floor,
    first_seqs_of,
)

from .setups import knobs_set
from .strategies import run_machine
from .test_bm25 import brute_force
from .test_bm25_core import NOW, Three, scorers
from .test_bm25_tie_skip import TIED, Ties, tiny_windows  # noqa: F401  (a fixture)
from .test_bm25q7_dense import _dense

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

I64 = st.integers(-(1 << 63), (1 << 63) - 1)


def test_the_default_is_int32() -> None:
    assert bm25_knobs._FIRST_SEQ32 is True
    index = BM25Scorer().make_index()
    assert index._first_seq.dtype == np.int32
    assert (index._first_seq == _NO_SEQ32).all()


@given(seq=I64)
def test_the_floor_is_a_lower_bound_and_exact_inside_int32(seq: int) -> None:
    low = first_seq_floor(seq)
    assert _NO_SEQ32 <= low <= _SEQ32_TOP
    assert low <= seq or low == _NO_SEQ32  # the unknown mark: below every seq it stands for
    if _NO_SEQ32 < seq <= _SEQ32_TOP:
        assert low == seq
    assert first_seqs_of(np.array([seq], np.int64), True).tolist() == [low]
    assert first_seqs_of(np.array([seq], np.int64), False).tolist() == [seq]


@pytest.mark.parametrize("narrow", [True, False])
def test_arrays_of_either_width(narrow: bool) -> None:
    first = first_seq_array(10, narrow, False)
    assert first.dtype == (np.int32 if narrow else np.int64)
    assert (first == (_NO_SEQ32 if narrow else _NO_SEQ)).all()


def _ties_from(start: int) -> type[Ties]:
    class TiesFrom(Ties):
        @initialize(name=st.sampled_from(["plain", "no length"]))
        def make(self, name: str) -> None:
            self.three = Three(scorers()[name])
            self.three.seq = start

    return TiesFrom


@pytest.mark.usefixtures("tiny_windows")
@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize(
    "start", [0, _SEQ32_TOP - 6, _SEQ32_TOP + 1, (1 << 33), _NO_SEQ32 - 8, -(1 << 40)]
)
def test_ties_agree_with_the_reference_at_any_seq(narrow: bool, start: int) -> None:
    """Seqs from 0, crossing int32's top and past it, crossing int32's lowest and far
    below it (the skip then reads the groups' records, as without it): the core, the
    reference and the brute force agree."""
    with knobs_set(bm25_knobs, _FIRST_SEQ32=narrow):
        run_machine(_ties_from(start), 25, 30)


@pytest.mark.parametrize("narrow", [True, False])
def test_kept_values_and_the_restore(narrow: bool, monkeypatch: Any) -> None:
    monkeypatch.setattr(bm25_knobs, "_CHUNK", 4)  # the arrays grow several times
    monkeypatch.setattr(bm25_knobs, "_FIRST_SEQ32", narrow)
    three = Three(scorers()["plain"])
    three.seq = _SEQ32_TOP - 5
    for i in range(30):
        three.add(TIED[i % len(TIED)])  # groups of one and of several records
    core = three.indexes["core"]
    assert core._first_seq.dtype == (np.int32 if narrow else np.int64)
    size = len(core._table)
    for num in range(size):
        slot = core._table[num]
        recs = slot if isinstance(slot, list) else [slot]
        low = min(rec.seq for rec in recs)
        kept = int(core._first_seq[num])
        assert kept == (first_seq_floor(low) if narrow else low)
    live = sorted((rec for rec in three.records if rec.died > three.version), key=lambda r: r.seq)
    core._check(three.records)
    parts = bm25_persist.dump(core, live)
    restored = bm25_persist.restore(BM25Scorer().make_index(), parts, live)  # type: ignore[arg-type]
    restored._check(live)
    assert restored._first_seq.dtype == core._first_seq.dtype
    n = len(restored._table)
    assert (restored._first_seq[n:] == (_NO_SEQ32 if narrow else _NO_SEQ)).all()
    for query in ("deploy", "deploy m3", "m1 m7"):
        for limit in (1, 3, 12):
            got = three.query(three.view(), query, limit)
            assert got  # the three paths agree (Three.query asserts it)


@pytest.mark.parametrize(("ratio", "array"), [(None, True), (10, True), (8, False)])
def test_a_list_in_one_group_in_nine_gets_an_array_at_the_default(
    ratio: int | None, array: bool
) -> None:
    """Arrays from 16 postings on, refreshed every group: ``every9`` (one group in 9)
    gets one at the default ratio (10) and not at 8 (dense44's); either way the answers
    are the brute force's."""
    assert bm25_knobs._DENSE_RATIO == 10
    with _dense(16, bm25_knobs._DENSE_RATIO if ratio is None else ratio, 1):
        three = Three(BM25Scorer())
        for i in range(450):
            three.add(" ".join([f"word{i}", "filler", *(["every9"] if i % 9 == 0 else [])]))
        index = three.indexes["core"]
        assert (index._terms["every9"].dense is not None) is array
        three.check()
        view = three.view(None)
        for query in ("every9", "every9 word18", "filler every9 word5"):
            want = brute_force(three.scorer, three.records, view.version, query, 10, now=NOW)
            assert three.query(view, query, 10) == [(s, rec.seq) for s, rec in want], query


@pytest.mark.parametrize("narrow", [True, False])
@pytest.mark.parametrize("start", [_NO_SEQ32 - 3, _NO_SEQ32, -(1 << 40)])
def test_the_unknown_mark_never_skips_a_lower_seq(narrow: bool, start: int) -> None:
    """Seqs at or below int32's lowest are all kept as that mark, which is then above
    some of them: the core must read such a group's records, not pass over it. Here an
    upsert moves the lowest seq into a new group, offered after the heap holds a tie of
    a higher seq (below int32's lowest too): that group's record must win the tie."""
    with knobs_set(bm25_knobs, _FIRST_SEQ32=narrow):
        three = Three(scorers()["plain"])
        three.seq = start
        for i in range(6):
            three.add(f"deploy m{i}")
        three.add("deploy m9", upsert=True)  # the lowest seq, in the newest group
        view = three.view()
        for limit in (1, 2, 3):
            want = brute_force(three.scorer, three.records, view.version, "deploy", limit, now=NOW)
            assert three.query(view, "deploy", limit) == [(s, rec.seq) for s, rec in want]
        three.check()
