"""The owner's upkeep of the long posting lists' bitsets (knobs._TOKEN_BITS) comes with
its adds, not only when a full batch of masks is pending: a retrieve that reads the
short-word rows computes the pending masks itself (``_Numbering.fill_masks``), and with a
retrieve every few stores the owner never saw ``_MASK_BATCH`` of them pending, so no list
ever got its bitset (the knob silently off) and kept ones were never brought up to date
or dropped (a replaced list pinned by its stale entry)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.scoring import drain
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = "the a of to and in is it cat dog play deploy service error log".split()


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("every", [1, 10, 100])
def test_bitsets_kept_with_retrieves_between_the_stores(
    many: bool, every: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_FROM", 512)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_STEP", 64)
    rng = np.random.default_rng(every)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    index = state.index
    drained = 0
    count = 0

    def entry() -> MemoryEntry:
        nonlocal count
        count += 1
        words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), 6)]
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join([*words, f"x{count}"]),
            created_at=BASE + timedelta(seconds=count),
            id=uuid.UUID(int=count),
        )

    while count < 4000:
        if many:
            state.store_many([entry() for _ in range(every)])
        else:
            for _ in range(every):
                state.store(entry())
        state.publish()
        before = len(index._e.pending)  # type: ignore[attr-defined]
        got = drain(index.top_k_steps(state.view(), "the cat a of play", 3, None))  # type: ignore[attr-defined]
        assert got
        drained += before > 0 and not index._e.pending  # type: ignore[attr-defined]
    e = index._e  # type: ignore[attr-defined]
    assert drained  # the readers computed the pending masks
    assert e.tbits, "no list got its bitset"
    least = -(-e.n // wo_knobs._TOKEN_BITS)
    longest = [lst for lst in e.post.values() if len(lst) >= 2 * least]
    assert longest
    assert all(id(lst) in e.tbits for lst in longest)
    for lst, covered, bits in e.tbits.values():
        # At most _TOKEN_BITS_STEP groups' postings left for the readers to set.
        assert all(g >= e.n - wo_knobs._TOKEN_BITS_STEP for g in lst[covered:])
        assert len(bits) == ccore.words_of(len(e.maxrel))
    index._check(state.view().records())  # type: ignore[attr-defined]
