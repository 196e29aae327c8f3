"""``ccore.flat_first`` passing over groups by their count once its best ``k`` are kept
(``knobs._FLAT_CUT``: a count whose best bound, over the largest ``maxrel``, is below
the worst kept; sixteen byte counts at a time with SSE2) against the scan that computes
every matched group's bound: the same groups, floats and ``m``, batch after batch; and
the same retrieves from a memory with it and a smaller first batch
(``knobs._FLAT_BATCH``) on and off."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import seeded_queries_agree
from .strategies import examples
from .test_mainjob14_flat import _seeded_memory

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")

_RELS = [0.0, 0.25, 0.5, 1.0, 1e-300, 0.1 + 0.2, float("nan"), float("-inf"), float("inf")]


def _both(*args: Any) -> tuple[Any, Any]:
    """flat_first's answer with the cut and without, as reprs (NaN floats compare)."""
    on = ccore.flat_first(*args, cut=True)
    off = ccore.flat_first(*args, cut=False)
    return repr(on), repr(off)


@settings(max_examples=examples(150), deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 300),
    wide=st.booleans(),
    n_words=st.sampled_from([1, 2, 3, 7, 48, 255, 300, 65535]),
    least=st.integers(1, 300),
    k=st.integers(0, 40),
    sparse=st.sampled_from([0.0, 0.05, 0.4, 1.0]),
    rels=st.lists(st.sampled_from(_RELS), min_size=1, max_size=4),
    kth=st.one_of(st.none(), st.tuples(st.sampled_from([0.1, 0.5, 0.6, 0.75]), st.integers(0, 9))),
    batches=st.lists(st.integers(0, 40), min_size=1, max_size=4),
)
def test_cut_reads_as_the_full_scan(
    data: st.DataObject,
    n: int,
    wide: bool,
    n_words: int,
    least: int,
    k: int,
    sparse: float,
    rels: list[float],
    kth: tuple[float, int] | None,
    batches: list[int],
) -> None:
    # Random counts (runs of zeros and of low counts, so whole 16-count blocks are
    # passed over, and blocks whose first reaching count is anywhere in them), few
    # relevances (ties of bound; NaN and infinities too) and few seqs (ties of seq):
    # the first batch, and the batches after it (with `after`, kth: no cut), agree.
    if not wide:
        n_words = min(n_words, 255)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    dtype = np.uint16 if wide else np.uint8
    top = min(n_words, 600 if wide else 255)
    size = n + int(rng.integers(0, 20))  # beyond n: not read
    counts = rng.integers(0, top + 1, size) * (rng.random(size) < sparse)
    low = rng.random(size) < 0.5
    counts[low] = np.minimum(counts[low], 2)
    counts = counts.astype(dtype)
    maxrel = np.array(rng.choice(rels, size + 1), np.float64)
    minseq = rng.integers(0, 10, size + 1).astype(np.int64)
    least = least if rng.random() < 0.2 else least % 4 + 1
    on, off = _both(counts, n, least, n_words, maxrel, minseq, kth, k)
    assert on == off
    # Batch after batch, as _visit_flat reads them.
    for cut in (True, False):
        got: list[Any] = []
        after: tuple[float, int, int] | None = None
        for b in batches:
            picked, more = ccore.flat_first(
                counts, n, least, n_words, maxrel, minseq, None, b, after, cut=cut
            )
            got.append((picked, more))
            if not picked:
                break
            g, bound, s, _ = picked[-1]
            after = (bound, s, g)
        if cut:
            first = repr(got)
        else:
            assert repr(got) == first


def test_cut_on_the_main_jobs_shape() -> None:
    # Relevances all 1.0 (the main job's), ~5,000 groups, 40% matched with low counts
    # and a few high ones late: the cut rises while the scan goes on.
    rng = np.random.default_rng(7)
    for trial in range(40):
        n = int(rng.integers(1, 6000))
        counts = (rng.integers(1, 4, n) * (rng.random(n) < 0.4)).astype(np.uint8)
        hot = rng.integers(0, n, int(rng.integers(0, 60)))
        counts[hot] = rng.integers(3, 48, len(hot))
        maxrel = np.ones(n, np.float64)
        if trial % 3 == 1:
            maxrel[rng.integers(0, n, 5)] = 0.5
        minseq = np.sort(rng.integers(0, n, n)).astype(np.int64)
        for k in (1, 3, 32):
            on, off = _both(counts, n, 1, 48, maxrel, minseq, None, k)
            assert on == off


def test_cut_knob_is_the_default() -> None:
    # None reads the knob; the knob is on by default.
    assert wo_knobs._FLAT_CUT is True
    counts = np.array([3, 1, 0, 2, 3, 1] * 5, np.uint8)
    rel, seq = np.ones(30), np.arange(30, dtype=np.int64)
    want = ccore.flat_first(counts, 30, 1, 3, rel, seq, None, 2, cut=False)
    assert ccore.flat_first(counts, 30, 1, 3, rel, seq, None, 2) == want
    assert want[1] == 25 - 2


@pytest.mark.parametrize(("seed", "size", "batch"), [(4, 700, 32), (5, 900, 2), (6, 300, 1)])
def test_cut_on_and_off_agree_on_seeded_memories(seed: int, size: int, batch: int) -> None:
    # One memory, _FLAT_CUT and _FLAT_BATCH flipped between two runs of each query:
    # long queries (byte counts, the flat ranking) of every limit, thresholds and
    # filters.
    state, vocab, rng = _seeded_memory(seed, size)
    names = ("_FLAT_CUT", "_FLAT_BATCH", "_VISIT_BATCH", "_BITS_MIN_WORDS")
    values = lambda on: (on, 8 if on else 0, batch, 0)  # noqa: E731
    seeded_queries_agree(state, vocab, rng, wo_knobs, names, values)
