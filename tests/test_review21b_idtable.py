"""review21b: the C ``IdTable``'s items iterator and the cycle collector.

``IdTableIter_next`` (kind items) built its pair by ``PyTuple_New(2)`` while holding the
record and its id only as borrowed references. A tuple is a collected object: its
allocation may run the cycle collector, whose finalizers may delete that very id from the
table, releasing the table's reference (the record's last): the pair then held a freed
record (a segfault or a record without its slots). Fixed by taking both references before
the allocation, as ``dict``'s iterator does. A state machine drives a table and a dict
model with stores, deletes and ``next`` of an items iterator while a garbage cycle whose
finalizer deletes ids waits for the collector (threshold 1: the tuple's allocation runs it).
"""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actormem import MemoryCategory, MemoryEntry
from actormem._index import kernels
from actormem._record import Record

from .strategies import examples
from .test_store_batch import BASE

IdTable: Any = getattr(kernels._wo, "IdTable", None)
pytestmark = pytest.mark.skipif(IdTable is None, reason="the word-overlap core is not built")


def _table() -> Any:
    return IdTable(Record.__dict__["cols"], Record.__dict__["slot"])


def _record(ident: int, n: int = 0) -> Record:
    entry = MemoryEntry(
        category=MemoryCategory.FACT, memory=f"m{n}", id=uuid.UUID(int=ident), created_at=BASE
    )
    return Record(entry, n + 1, n + 1)


class _Bomb:
    """Garbage (a cycle) whose finalizer deletes ids from a table."""

    def __init__(self, table: Any, ids: list[int]) -> None:
        self.me = self
        self.table = table
        self.ids = ids

    def __del__(self) -> None:
        for ident in self.ids:
            try:
                del self.table[ident]
            except KeyError:
                pass


def _next_under_collector(it: Any, table: Any, doomed: list[int]) -> Any:
    """next(it) with garbage whose finalizer deletes ``doomed`` from ``table`` waiting
    for the collector, which the first collected allocation runs (threshold 1; the
    2-tuples' free list drained first, else a pair comes from it without the collector).
    """
    old = gc.get_threshold()
    was = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        _Bomb(table, doomed)
        drain = [divmod(i, 7) for i in range(2_500)]  # 2-tuples alive: the free list empty
        gc.set_threshold(1)
        gc.enable()
        try:
            return next(it)
        finally:
            gc.set_threshold(*old)
            del drain
    finally:
        if not was:
            gc.disable()
        gc.collect()  # the finalizer if the collector did not run


def test_items_pair_survives_a_finalizer_deleting_its_id() -> None:
    table = _table()
    table[12345] = _record(12345)  # the table's reference is the record's only one
    it = table.items()
    key, rec = _next_under_collector(it, table, [12345])
    assert key == 12345
    assert rec.entry._id == 12345  # a freed record has no entry (or crashes here)
    assert len(table) == 0
    with pytest.raises(RuntimeError):
        next(it)


class ItemsUnderFinalizers(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.table = _table()
        self.model: dict[int, Record] = {}
        self.n = 0
        self.it: Any = None
        self.stale = False

    @rule(ident=st.integers(0, 40))
    def store(self, ident: int) -> None:
        self.n += 1
        rec = _record(ident, self.n)
        if ident not in self.model:
            self.stale = True
        self.model[ident] = rec
        self.table[ident] = rec
        del rec  # the table and the model hold it

    @rule(ident=st.integers(0, 40))
    def delete(self, ident: int) -> None:
        if ident in self.model:
            self.stale = True
            del self.model[ident]
            del self.table[ident]

    @rule()
    def open_items(self) -> None:
        self.it = self.table.items()
        self.stale = False

    @rule(data=st.data())
    def next_while_a_finalizer_deletes(self, data: st.DataObject) -> None:
        if self.it is None:
            return
        doomed = data.draw(st.lists(st.integers(0, 40), max_size=4))
        # The model lets go of the doomed records first: the table's is their last one.
        for ident in doomed:
            self.model.pop(ident, None)
        try:
            pair = _next_under_collector(self.it, self.table, doomed)
        except StopIteration:
            self.it = None
            return
        except RuntimeError:
            assert self.stale
            self.it = None
            return
        key, rec = pair
        assert rec.entry._id == key
        if key in doomed:
            assert key not in self.table
        self.stale = True  # the finalizer may have deleted ids

    @invariant()
    def same(self) -> None:
        assert len(self.table) == len(self.model)
        for ident, rec in self.model.items():
            assert self.table.get(ident) is rec
        self.table._check()


ItemsUnderFinalizers.TestCase.settings = settings(
    max_examples=examples(12), stateful_step_count=20, deadline=None
)


class TestItemsUnderFinalizers(ItemsUnderFinalizers.TestCase):  # type: ignore[misc,valid-type]
    """The test process's older objects moved out of the collector's passes
    (``gc.freeze``, as ``frozen_heap`` in tests/test_store5_paths.py) while the machine
    runs: each ``next`` under the collector runs two full passes, which then walk what
    the machine made, not the whole suite's heap (33 passes were 17 of its 19 s)."""

    def setUp(self) -> None:
        super().setUp()
        gc.collect()
        gc.freeze()

    def tearDown(self) -> None:
        gc.unfreeze()
        super().tearDown()


# ---- an entry's id from pickle state (MemoryEntry.__setstate__)


class _IntSub(int):
    pass


def _state_with_id(ident: object) -> dict[str, object]:
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="bye", created_at=BASE)
    state = entry.__getstate__()
    state["_id"] = ident
    return state


@pytest.mark.parametrize(
    ("ident", "error"),
    [
        (_IntSub(12345), TypeError),
        (True, TypeError),
        ("12345", TypeError),
        (-1, ValueError),
        (1 << 128, ValueError),
    ],
)
def test_setstate_refuses_an_id_the_constructor_refuses(ident: object, error: type) -> None:
    """An int subclass as ``_id`` (a crafted pickle) made an entry the state's IdTable
    refuses only inside ``_store``: at capacity after evicting the live entry (the memory
    lost one entry and stored none; with the dict the store was an upsert)."""
    entry = MemoryEntry.__new__(MemoryEntry)
    with pytest.raises(error):
        entry.__setstate__(_state_with_id(ident))


def test_setstate_keeps_an_exact_id_and_a_store_at_capacity_works() -> None:
    from actormem import WordOverlapScorer
    from actormem._engine.state import MemoryState

    state = MemoryState(capacity=1, half_life=3600.0, scorer=WordOverlapScorer())
    state.store(MemoryEntry(category=MemoryCategory.FACT, memory="hello", created_at=BASE))
    entry = MemoryEntry.__new__(MemoryEntry)
    entry.__setstate__(_state_with_id(12345))
    assert type(entry._id) is int
    assert entry.id == uuid.UUID(int=12345)
    state.store(entry)
    assert state._live == 1
    assert state._by_id[12345].entry == entry
    state._check()
