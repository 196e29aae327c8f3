"""Branch store5's store path against the path before it, through the whole engine.

* store_many's inline relevance append (``state._RELEVANCE_APPEND``) against
  ``SortedKeyList.add``: the state machine of ``test_store_batch`` (upserts by id and
  by key in one batch, ttls, expiries, evictions at capacity, deletes, vacuums,
  queries) over relevance orders of tiny sublists (so that appends reach the split
  bound and deletes join sublists), with the positional index built between batches:
  after every step the two states' orders have the same sublists, keys and maxima, not
  only the same records in order;
* the compiled adds' fast acquire and untracked lists (``knobs._ACQUIRE_FAST``,
  ``knobs._UNTRACK``) against the key-set path with tracked lists, under the same
  machine (deletes release tokens, vacuums purge, queries activate short words), with
  full collections between the steps: identical structures and top-k.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import relevance_keys
from .strategies import run_machine
from .test_store_batch import TwoPaths

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


def _order(state: MemoryState) -> tuple[Any, ...]:
    rel: Any = state._by_relevance
    rel._check()
    return (relevance_keys(rel), rel._len, [len(x) for x in rel._lists])


class TinySublists(TwoPaths):
    @initialize(capacity=st.sampled_from([None, 3, 7]), load=st.sampled_from([4, 5, 8]))
    def make_tiny(self, capacity: int | None, load: int) -> None:
        TwoPaths.make(self, capacity)
        for state in self.states.values():
            state._by_relevance._reset(load)

    @rule(at=st.integers(0, 100))
    def positional_index(self, at: int) -> None:
        for _, state in self._each():
            rel = state._by_relevance
            if len(rel):
                rel[at % len(rel)]  # builds the positional index (_index)

    @invariant()
    def same_sublists(self) -> None:
        if self.states:
            assert _order(self.states[True]) == _order(self.states[False])


# The base class's @initialize rule is replaced by make_tiny (one initialize per run).
TinySublists.make = None  # type: ignore[assignment,method-assign]


@core
def test_relevance_append_through_the_store_path(monkeypatch: pytest.MonkeyPatch) -> None:
    assert state_module._RELEVANCE_APPEND
    assert state_module._SORTED_INTERNALS
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    run_machine(TinySublists, 40, 30)


class FastAcquire(TwoPaths):
    """The same machine, the two sides differing only in the store5 add knobs."""

    def _side(self, on: bool) -> None:
        wo_knobs._ACQUIRE_FAST = wo_knobs._UNTRACK = on

    @rule()
    def collect(self) -> None:
        gc.collect()

    @invariant()
    def same_orders(self) -> None:
        if self.states:
            a, b = (self.states[on].index._vocab for on in (True, False))  # type: ignore[attr-defined]
            assert list(a._grams.items()) == list(b._grams.items())
            assert [(k, list(v)) for k, v in a._sub.items()] == [
                (k, list(v)) for k, v in b._sub.items()
            ]


@pytest.fixture
def frozen_heap() -> Iterator[None]:
    """The test process's older objects moved out of the collector's passes
    (``gc.freeze``) while the machine runs: its ``collect`` rule then walks what the
    machine made, not the whole suite's heap (in the full suite a pass took ~0.3 s and
    the test ran into the 300 s limit on a loaded machine)."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@core
@pytest.mark.usefixtures("frozen_heap")
def test_fast_acquire_through_the_store_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(FastAcquire, 30, 30)
