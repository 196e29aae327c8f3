"""The store path, part 6 (branch store7, issue #20's store target).

* ``state._DEFER_BATCH``: a state machine drives two states through the durable
  owner's batches (``defer_index``, any mix of ``store_many`` lists, single stores and
  deletes, ``flush_index``), one with the knob on (``store_many`` through
  ``_store_batch``, the deferred adds by ``add_many``), one off (``_store`` per entry,
  an ``add`` per deferred record), and requires identical structures, journals,
  removals, errors and top-k after every step: upserts, keys, evictions, ttls, records
  stored and deleted in one batch (their deferred ``retire`` skipped);
* ``kernels.gc_untrack`` (the one untracking function, for a list of one exact type)
  leaves the same tracking as before on both ``store_many`` paths and the bulk load.
"""

from __future__ import annotations

import gc
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import BM25Scorer
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import PyRecord, Record

from .strategies import run_machine
from .test_store_batch import BASE, TwoPaths, _snapshot, items

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


class TwoPathsDeferred(TwoPaths):
    """test_store_batch's two states, every write inside a durable owner's batch
    (``defer_index`` ... ``flush_index``): one with ``_DEFER_BATCH``, one without."""

    def _side(self, on: bool) -> None:
        state_module._DEFER_BATCH = on

    @rule(
        ops=st.lists(
            st.one_of(
                st.tuples(st.just("many"), st.lists(items(), max_size=12)),
                st.tuples(st.just("one"), items()),
                st.tuples(st.just("delete"), st.integers(0, 50)),
            ),
            max_size=5,
        )
    )
    def batch(self, ops: list[tuple[str, Any]]) -> None:
        """One owner batch: the ops applied to each state between ``defer_index`` and
        ``flush_index`` (the same entries to both)."""
        made: list[tuple[str, Any]] = []
        for op, arg in ops:
            if op == "many":
                made.append((op, [self._entry(item) for item in arg]))
            elif op == "one":
                entry = self._entry(arg)
                made.append((op, entry if isinstance(entry, MemoryEntry) else None))
            elif self.ids:
                made.append((op, self.ids[arg % len(self.ids)]))
        outcomes = []
        for _, state in self._each():
            seen: list[str | None] = []
            state.defer_index()
            try:
                for op, arg in made:
                    try:
                        if op == "many":
                            state.store_many(arg, BASE + timedelta(seconds=self.i))
                        elif op == "one" and arg is not None:
                            state.store(arg, BASE + timedelta(seconds=self.i))
                        elif op == "delete":
                            state.delete(arg)
                        seen.append(None)
                    except TypeError as exc:
                        seen.append(str(exc))
            finally:
                state.flush_index()
            outcomes.append(seen)
        assert outcomes[0] == outcomes[1]

    @rule(batch=st.lists(items(), max_size=12))
    def store_many(self, batch: list[dict[str, Any]]) -> None:
        self.batch([("many", batch)])


@core
def test_deferred_batch_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small enough that the lists fill masks and renumber the groups.
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoPathsDeferred, 40, 30)
    assert _snapshot is not None


def test_deferred_batch_without_the_core_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled core, ``add_many`` adds one record after another."""
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(kernels, "WO_CORE", False)
    run_machine(TwoPathsDeferred, 15, 20)


def _entries(n: int, start: int = 0) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"text {i} shared words",
            created_at=BASE,
            id=uuid.UUID(int=i + 1),
        )
        for i in range(start, start + n)
    ]


@pytest.mark.parametrize("scorer", [WordOverlapScorer(), BM25Scorer()], ids=lambda s: s.name)
@pytest.mark.parametrize("on", [True, False])
def test_deferred_store_many_gives_the_same_index(scorer: Any, on: bool) -> None:
    """A durable owner's batch through either path: the same top-k as stores without
    deferral, for an index with ``add_many`` (word overlap) and one without (BM25)."""
    plain = MemoryState(capacity=None, half_life=3600.0, scorer=scorer)
    deferred = MemoryState(capacity=None, half_life=3600.0, scorer=scorer)
    batch = _entries(30)
    plain.store_many(batch)
    saved = state_module._DEFER_BATCH
    state_module._DEFER_BATCH = on
    try:
        deferred.defer_index()
        deferred.store_many(batch[:20])
        deferred.delete(batch[3].id)
        deferred.store_many(batch[20:])
        deferred.flush_index()
    finally:
        state_module._DEFER_BATCH = saved
    plain.delete(batch[3].id)
    for s in (plain, deferred):
        s.publish()
        s._check()
    for query in ["text", "shared words", "7", "zzz"]:
        got = [
            [(score, rec.entry.id) for score, rec in s.index.top_k(s.view(), query, 5, None)]
            for s in (plain, deferred)
        ]
        assert got[0] == got[1]


@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("defer", [True, False])
@pytest.mark.parametrize("batch", [True, False])
def test_untracked_entries_and_records_on_every_path(
    monkeypatch: pytest.MonkeyPatch, defer: bool, batch: bool
) -> None:
    """The records of a ``store_many`` leave the collector on the batched path, the
    plain loop and the deferred path alike (one ``gc_untrack`` per run); the entries
    stay as the caller made them (step A: the state keeps none, ``_UNTRACK_ENTRIES``
    off)."""
    monkeypatch.setattr(state_module, "_STORE_BATCH", batch)
    s = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    entries = _entries(12)
    if defer:
        s.defer_index()
    s.store_many(entries[:6])
    s.store(entries[6])  # a single store: _link's untracking of its entry
    s.store_many(entries[7:])
    if defer:
        s.flush_index()
    assert all(gc.is_tracked(e) for e in entries)
    recs = [s._by_id[e._id] for e in entries]
    # The single store's record stays tracked: only store_many untracks its records
    # (the compiled record is never tracked: no GC header, tests/test_crec42_record.py).
    single = Record is PyRecord
    assert [gc.is_tracked(r) for r in recs] == [False] * 6 + [single] + [False] * 5
    loaded = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    rows = list(enumerate(_entries(5, 20), start=1))
    loaded.load(rows)
    assert all(gc.is_tracked(e) for _, e in rows)

