"""Branch open29: the numeric part of the word-overlap image's preparation in a thread
beside the open's (issue #20, item 5).

``wordoverlap.persist._PREP_BESIDE``: ``Prepared`` checks the posting lists' offsets
itself, then hands the lists' value and order checks, the masks and their numbering
(the rows of bits, ``bits_rows_from_masks(..., nogil=True)``) to a thread ("actormem
image prep"), and makes the posting lists and the vocabulary meanwhile; the thread's
result is taken at its last step. Required: the same preparation (vocabulary, posting
lists, masks, rows of bits and counts), the same first error for every refused image,
the same restored state as a rebuild, and no thread left behind on any path.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._index import kernels
from actormem._index.images import ImageError, restore_index
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import persist as wo_persist
from tests.strategies import examples

from .setups import RESTORE_CASES, restores_as_rebuilt, stale_and_foreign_refused_alike
from .test_index_image import _file_rows, _image, _live, _loaded, _messy, _mutations
from .test_open27_vocab import _shape
from .test_open_beside import _no_threads_left

wo = kernels._wo
needs_c = pytest.mark.skipif(wo is None, reason="the word overlap core is not built")

KNOBS = ((wo_persist, "_PREP_BESIDE"),)
NAME = "actormem image prep"


def _prep_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME]


def _prepared(parts: dict[str, bytes], on: bool, mp: pytest.MonkeyPatch) -> Any:
    mp.setattr(wo_persist, "_PREP_BESIDE", on)
    prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
    assert prep is not None
    while prep.step():
        pass
    return prep


@pytest.mark.parametrize("seed", [3, 8, 21])
def test_the_preparation_beside_equals_the_one_in_steps(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    state = _messy(WordOverlapScorer, seed, 90, 25)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, _file_rows(state), None))
    got = {}
    for on in (True, False):
        prep = _prepared(parts, on, monkeypatch)
        assert prep.error is None
        e = prep.numbering
        assert e is not None
        got[on] = (
            _shape(prep.index._vocab),
            {t: list(a) for t, a in prep.post.items()},
            prep.tokens,
            prep.lo.tolist(),
            prep.hi.tolist(),
            [m.tolist() for m in e.masks],
            None if e.rows is None else e.rows.tolist(),
            e.rowcount.tolist(),
        )
        restored = restore_index(WordOverlapScorer().make_index(), parts, records, prep)
        assert restored._e is e  # the numbering made beside is the one taken
    assert got[True] == got[False]
    assert not _prep_threads()


def test_the_numbering_is_made_in_the_thread_beside(monkeypatch: pytest.MonkeyPatch) -> None:
    parts = _image(_messy(WordOverlapScorer, 4, 40, 10))
    made_in: list[str] = []
    real = wo_persist._Numbering

    def spy(capacity: int) -> Any:
        made_in.append(threading.current_thread().name)
        return real(capacity)

    monkeypatch.setattr(wo_persist, "_Numbering", spy)
    for on in (True, False):
        del made_in[:]
        prep = _prepared(parts, on, monkeypatch)
        assert prep.numbering is not None
        assert made_in == ([NAME] if on else [threading.current_thread().name])
    assert not _prep_threads()


def _error(parts: dict[str, bytes], records: list[Any], prep: Any) -> str:
    with pytest.raises(ImageError) as info:
        restore_index(WordOverlapScorer().make_index(), parts, records, prep)
    return str(info.value)


def test_refused_images_give_the_same_first_error_beside(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _messy(WordOverlapScorer, 11, 60, 25)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, _file_rows(state), None))
    # two checks failing at once, the thread's (a value out of range) and a later one
    # of its own (the masks' length): the thread's first, as inline
    post = np.frombuffer(parts["postings"], "<i4").copy()
    post[-1] = 10**6
    lo = parts["masks_lo"][:-8]
    two = {**parts, "postings": post.tobytes(), "masks_lo": lo}
    checks = [*_mutations(parts), ("postings and masks", two)]
    assert len(checks) > 20
    for name, bad in checks:
        want = {}
        for on in (True, False):
            prep = _prepared(bad, on, monkeypatch)
            stepped = str(prep.error) if prep.error is not None else None
            want[on] = (stepped, _error(bad, records, prep))
        assert want[True] == want[False], name
    assert not _prep_threads()


@pytest.mark.parametrize("steps", [0, 1, 2, 3])
def test_a_preparation_dropped_midway_leaves_no_thread(
    monkeypatch: pytest.MonkeyPatch, steps: int
) -> None:
    parts = _image(_messy(WordOverlapScorer, 6, 60, 10))
    monkeypatch.setattr(wo_persist, "_PREP_BESIDE", True)
    monkeypatch.setattr(wo_persist, "_PREP_LISTS", 2)  # many steps after the thread's start
    prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
    assert prep is not None
    for _ in range(steps):
        assert prep.step()
    del prep
    gc.collect()  # the steps' generator closed: the thread joined
    assert not _prep_threads()
    _no_threads_left()


@needs_c
@settings(max_examples=examples(15), deadline=None)
@given(**RESTORE_CASES)
def test_the_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    def nothing_left(restored: Any, rebuilt: Any, mp: pytest.MonkeyPatch, on: Any) -> None:
        assert not _prep_threads()

    restores_as_rebuilt(seed, n, ops, dups, KNOBS, nothing_left, copies=True)
    _no_threads_left()


def test_stale_and_foreign_images_give_the_same_error_with_the_knob_on_and_off() -> None:
    stale_and_foreign_refused_alike(KNOBS)
    assert not _prep_threads()


@needs_c
@settings(max_examples=examples(40), deadline=None)
@given(
    groups=st.integers(0, 3000),
    seed=st.integers(0, 2**32),
    density=st.sampled_from([0.0, 0.01, 0.2, 0.9]),
    lo_hi=st.tuples(st.integers(0, 3000), st.integers(0, 3000)),
)
def test_rows_of_bits_without_the_gil_are_the_same(
    groups: int, seed: int, density: float, lo_hi: tuple[int, int]
) -> None:
    rng = np.random.default_rng(seed)
    masks = tuple(
        np.where(rng.random((groups, 64)) < density, 1, 0).astype(np.uint64)
        @ (np.uint64(1) << np.arange(64, dtype=np.uint64))
        if groups
        else np.zeros(0, np.uint64)
        for _ in range(2)
    )
    lo, hi = sorted(min(groups, x) for x in lo_hi)
    stride = ccore.words_of(max(groups, 1))
    out = {}
    for nogil in (False, True):
        rows = np.zeros(128 * stride, np.uint64)
        counts = np.zeros(128, np.int64)
        ccore.bits_rows_from_masks(masks, rows, stride, counts, lo, hi, nogil)
        out[nogil] = (rows.tolist(), counts.tolist())
    assert out[True] == out[False]
    with pytest.raises(ValueError, match="beyond masks"):
        ccore.bits_rows_from_masks(masks, rows, stride, counts, 0, groups + 1, True)
    if wo is not None:  # the core's own check, past the wrapper's
        with pytest.raises(ValueError, match="out of range"):
            wo.bits_rows_from_masks(*masks, rows, stride, counts, 0, groups + 1, True)
