"""The byte path's flat ranking picking its batches straight from the counts
(``knobs._FLAT_FIRST``: ``ccore.flat_first``) against the path before it (an index
array, a parts array, ``visit_heap`` and ``visit_select``/``visit_pop``): the same
groups, bounds and parts in the same order, and the same retrieves (top-k, scores,
ties) from two memories driven alike with the knob on and off."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import seeded_queries_agree
from .strategies import examples, run_machine
from .test_visit_select import visit_small  # noqa: F401  (a fixture)
from .test_wordoverlap_bits import CountsOldAndNew

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")


def _old_order(
    counts: np.ndarray[Any, Any],
    least: int,
    n_words: int,
    maxrel: np.ndarray[Any, Any],
    minseq: np.ndarray[Any, Any],
    kth: tuple[float, int] | None,
) -> list[tuple[Any, ...]]:
    """Every group the path before it visits, in its order (ties of bound and seq by
    group number), as ``(g, bound, seq, part)``: ``_rank_flat``'s arrays, then
    ``visit_heap`` and ``visit_pop``."""
    idx = np.flatnonzero(counts >= least)
    parts = 0.4 * (counts[idx].astype(np.float64) / n_words)
    heap = np.empty(4 * len(idx) + 1, np.int64)
    m = ccore.visit_heap(idx, maxrel, minseq, 0.0, parts, kth, heap)
    got, left = ccore.visit_pop(heap, m, m)
    assert left == 0
    return sorted(got, key=lambda t: (-t[1], t[2], t[0]))


@settings(max_examples=examples(80), deadline=None)
@given(
    data=st.data(),
    n=st.integers(0, 90),
    wide=st.booleans(),
    n_words=st.sampled_from([1, 2, 3, 7, 10, 95, 255, 300, 65535]),
    least=st.integers(1, 4),
    kth=st.one_of(
        st.none(), st.tuples(st.sampled_from([0.1, 0.35, 0.5, 0.6, 0.75, 2.0]), st.integers(-5, 40))
    ),
    batches=st.lists(st.integers(0, 40), min_size=1, max_size=6),
)
def test_flat_first_reads_as_the_heap(
    data: st.DataObject,
    n: int,
    wide: bool,
    n_words: int,
    least: int,
    kth: tuple[float, int] | None,
    batches: list[int],
) -> None:
    # Batches read one after the other (each after the last group of the one before)
    # give every group of the old path, in its order, with the same floats.
    if not wide:
        n_words = min(n_words, 255)
    dtype = np.uint16 if wide else np.uint8
    top = min(n_words, 6)
    counts = np.array(data.draw(st.lists(st.integers(0, top), min_size=n, max_size=n)), dtype)
    counts = np.concatenate((counts, np.array([top, 1, 0], dtype)))  # beyond n: not read
    rels = st.sampled_from([0.0, 0.25, 0.5, 0.7, 1.0, 1e-300, 0.1 + 0.2])
    maxrel = np.array(data.draw(st.lists(rels, min_size=n + 2, max_size=n + 2)), np.float64)
    seqs = st.integers(-5, 40)  # few values: many groups of the same bound and seq
    minseq = np.array(data.draw(st.lists(seqs, min_size=n + 2, max_size=n + 2)), np.int64)
    want = _old_order(counts[:n], least, n_words, maxrel, minseq, kth)
    got: list[tuple[Any, ...]] = []
    after: tuple[float, int, int] | None = None
    for k in [*batches, n + 1]:
        picked, more = ccore.flat_first(counts, n, least, n_words, maxrel, minseq, kth, k, after)
        assert len(picked) == min(k, len(want) - len(got))
        got += picked
        assert more == len(want) - len(got)
        if picked:
            g, b, s, _ = picked[-1]
            after = (b, s, g)
        elif k:
            break
    assert got == want
    for t in got:
        assert [type(x) for x in t] == [int, float, int, float]


def test_flat_first_parts_are_numpys() -> None:
    # Every count of every query length up to 300 words: the part and the bound are
    # the floats numpy computes (0.4 * (count / n_words), then the bound's sums).
    for n_words in range(1, 301):
        dtype = np.uint8 if n_words < 256 else np.uint16
        counts = np.arange(n_words + 1).astype(dtype)
        n = len(counts)
        maxrel = (np.arange(n) % 7) / np.float64(7.0)
        minseq = np.arange(n, dtype=np.int64)
        picked, more = ccore.flat_first(counts, n, 1, n_words, maxrel, minseq, None, n)
        assert more == 0
        idx = np.arange(1, n)
        parts = 0.4 * (counts[idx].astype(np.float64) / n_words)
        bounds = ((0.5 * maxrel[idx] + parts) + 0.0) + 0.1
        want = {int(g): (float(b), float(p)) for g, b, p in zip(idx, bounds, parts, strict=True)}
        assert {g: (b, p) for g, b, _, p in picked} == want


def test_flat_first_refuses_bad_arguments() -> None:
    # ccore's wrapper refuses before C; the C function checks its ranges itself.
    from actormem._index import _cwordoverlap as c

    counts = np.array([1, 2, 0], np.uint8)
    rel, seq = np.array([0.0, 1.0, 0.5]), np.arange(3, dtype=np.int64)
    assert ccore.flat_first(counts, 3, 1, 2, rel, seq, None, 1) == (
        [(1, ((0.5 + 0.4) + 0.0) + 0.1, 1, 0.4)],
        1,
    )
    bad: list[tuple[tuple[Any, ...], type[Exception], str]] = [
        ((counts.astype(np.int64), 3, 1, 2, rel, seq, None, 1), ValueError, "uint8"),
        ((counts.astype(np.int32), 3, 1, 2, rel, seq, None, 1), ValueError, "uint8"),
        ((list(counts), 3, 1, 2, rel, seq, None, 1), ValueError, "uint8"),
        ((counts[::2], 2, 1, 2, rel, seq, None, 1), ValueError, "contiguous"),
        ((counts, 4, 1, 2, rel, seq, None, 1), ValueError, "n beyond"),
        ((counts, -1, 1, 2, rel, seq, None, 1), ValueError, "n beyond"),
        ((counts, 3.0, 1, 2, rel, seq, None, 1), ValueError, "n beyond"),
        ((counts, 3, 1, 2, rel[:2], seq, None, 1), ValueError, "maxrel"),
        ((counts, 3, 1, 2, rel.astype(np.float32), seq, None, 1), ValueError, "maxrel"),
        ((counts, 3, 1, 2, rel, seq[:2], None, 1), ValueError, "minseq"),
        ((counts, 3, 1, 2, rel, seq.astype(np.int32), None, 1), ValueError, "minseq"),
        ((counts, 3, 1, 2, rel, list(seq), None, 1), TypeError, "minseq"),
        ((counts, 3, 0, 2, rel, seq, None, 1), ValueError, "least"),
        ((counts, 3, True, 2, rel, seq, None, 1), ValueError, "least"),
        ((counts, 3, 1, 0, rel, seq, None, 1), ValueError, "n_words"),
        ((counts, 3, 1, 1 << 16, rel, seq, None, 1), ValueError, "n_words"),
        ((counts, 3, 1, 2, rel, seq, None, -1), ValueError, "k:"),
        ((counts, 3, 1, 2, rel, seq, None, 1 << 70), ValueError, "k:"),
        ((counts, 3, 1, 2, rel, seq, (1, 2), 1), ValueError, "kth"),
        ((counts, 3, 1, 2, rel, seq, (1.0, 1 << 70), 1), ValueError, "kth"),
        ((counts, 3, 1, 2, rel, seq, [1.0, 2], 1), ValueError, "kth"),
        ((counts, 3, 1, 2, rel, seq, None, 1, (1.0, 2)), ValueError, "after"),
        ((counts, 3, 1, 2, rel, seq, None, 1, (1.0, 2, 3.0)), ValueError, "after"),
        ((counts, 3, 1, 2, rel, seq, None, 1, (1.0, 2, 1 << 70)), ValueError, "after"),
    ]
    for args, error, match in bad:
        with pytest.raises(error, match=match):
            ccore.flat_first(*args)
    # The C function itself: ranges and kinds.
    raw = (rel, seq, False, 0.0, 0, 1, False, 0.0, 0, 0)
    for n, least, n_words, k in ((4, 1, 2, 1), (-1, 1, 2, 1), (3, 0, 2, 1), (3, 1, 0, 1),
                                 (3, 1, 1 << 16, 1)):  # fmt: skip
        with pytest.raises(ValueError, match="out of range"):
            c.flat_first(counts, n, least, n_words, rel, seq, *raw[2:5], k, *raw[6:])
    with pytest.raises(ValueError, match="out of range"):
        c.flat_first(counts, 3, 1, 2, rel, seq, *raw[2:5], -1, *raw[6:])
    with pytest.raises(ValueError, match="counts"):
        c.flat_first(counts.astype(np.int64), 3, 1, 2, *raw)
    with pytest.raises(ValueError, match="maxrel"):
        c.flat_first(counts, 3, 1, 2, seq, seq, *raw[2:])
    with pytest.raises(ValueError, match="minseq"):
        c.flat_first(counts, 3, 1, 2, rel, rel, *raw[2:])
    # k 0: nothing picked, every passing group left.
    assert ccore.flat_first(counts, 3, 1, 2, rel, seq, None, 0) == ([], 2)
    assert ccore.flat_first(counts, 0, 1, 2, rel, seq, None, 5) == ([], 0)


class FlatOnAndOff(CountsOldAndNew):
    """The state machine of ``test_wordoverlap_bits``, two memories with every query
    knob at its default, counting in bytes with the flat ranking (``_BITS_MIN`` 1 << 15,
    ``_BITS_MIN_WORDS`` 0), one picking the flat visit's batches with ``flat_first``,
    one without; first batches of ``_VISIT_BATCH`` 2 (second and later batches read)."""

    KNOBS = {True: (True, 2, 1 << 15, 0), False: (False, 2, 1 << 15, 0)}
    NAMES = ("_FLAT_FIRST", "_VISIT_BATCH", "_BITS_MIN", "_BITS_MIN_WORDS")


class FlatOnAndOffDefaultBatch(FlatOnAndOff):
    KNOBS = {True: (True, 32, 1 << 15, 0), False: (False, 32, 1 << 15, 0)}


@pytest.mark.parametrize("machine", [FlatOnAndOff, FlatOnAndOffDefaultBatch])
def test_flat_on_and_off_agree(machine: type[CountsOldAndNew]) -> None:
    assert wo_knobs._FLAT_FIRST
    assert wo_knobs._VISIT_C
    assert wo_knobs._RANK_FLAT_GROUPS == 0
    run_machine(machine, 10, 20)


@pytest.mark.usefixtures("visit_small")
def test_flat_on_and_off_agree_in_small_parts() -> None:
    run_machine(FlatOnAndOff, 6, 20)


def _seeded_memory(seed: int, size: int) -> Any:
    """A memory of ``size`` entries of seeded words, relevances (few values: many ties
    of bound) and tags, some deleted and some replaced, published and vacuumed."""
    import random
    import uuid
    from datetime import UTC, datetime, timedelta

    from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
    from actormem._engine.state import MemoryState

    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)] + ["the", "a", "é", '{"k":', "0,", "ok"]
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for i in range(size):
        words = rng.choices(vocab, k=rng.randint(1, 12))
        if i % 7 == 3:  # equal texts: groups of several records
            words = ["same", "text", str(i % 4)]
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=" ".join(words),
                relevance=rng.choice([0.0, 0.3, 0.5, 0.5, 1.0, rng.random()]),
                created_at=base + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
                tags=["w1 w2"] if i % 11 == 0 else [],
            ),
            None,
        )
        if i % 64 == 63:
            state.publish()
            for _ in range(3):
                state.delete(uuid.UUID(int=rng.randint(1, i + 1)))
    state.publish()
    state.vacuum(state.published)
    return state, vocab, rng


@pytest.mark.parametrize(("seed", "size", "batch"), [(1, 600, 32), (2, 900, 2), (3, 200, 1)])
def test_flat_on_and_off_agree_on_seeded_memories(seed: int, size: int, batch: int) -> None:
    # One memory, its knob flipped between two runs of each query (read per query):
    # long queries (bytes, the flat ranking) of every limit, thresholds and filters.
    state, vocab, rng = _seeded_memory(seed, size)
    names = ("_FLAT_FIRST", "_VISIT_BATCH", "_BITS_MIN_WORDS")
    seeded_queries_agree(state, vocab, rng, wo_knobs, names, lambda on: (on, batch, 0))
