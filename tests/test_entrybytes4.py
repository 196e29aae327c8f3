"""``_by_id`` as the C ``IdTable`` (branch entrybytes4, issue #20 item 6, step 5).

``state._ID_TABLE`` (read when a state is made): the id -> newest record map is an
open-addressing table of 32-bit hash tags beside references (``_idtable.h``), the id read
back from ``rec.entry._id``, instead of a dict. Checked here:

* a state machine drives an ``IdTable`` and a dict with the same operations (sets of new
  records and of records stored already, overwrites, deletes of present and absent ids,
  bulk inserts and deletes that grow and shrink it, ids whose hashes are equal (``k`` and
  ``k + 2**61 - 1``: the same tag, told apart by the records' ids), 128-bit ids,
  iteration, iterators left open across changes) and requires the same contents, the
  table's own ``_check`` (every id reachable from its home, its tag its hash's), each
  record's reference count (one for the table, one for the model: no leak, no early
  release), and an open iterator to raise once an id came or went;
* refusals before any change: a key that is no exact int (absent for reads), a value
  that is no record of the table's class, a record under another id, a bad constructor;
* the cycle collector sees through it (a cycle through a table is collected);
* two states, one made with the knob on and one with it off, driven by
  ``test_entrybytes2``'s writes, held views and walks have identical structures,
  journals, removals and top-k, and their held views read the same records by id, by
  key and in full (``View.get`` walks ``_prev`` from the table's head); ``load`` and
  ``store_many`` fill the table as the dict; the C ``store_inserts`` refuses a table of
  other classes before any change.
"""

from __future__ import annotations

import gc
import sys
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from actormem import MemoryCategory, MemoryEntry
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._record import PyRecord, Record

from .setups import TableIterators, knob_state
from .strategies import examples, run_machine
from .test_entrybytes2 import TwoLayouts
from .test_store_batch import BASE, _rec

IdTable: Any = getattr(kernels._wo, "IdTable", None)
core = pytest.mark.skipif(IdTable is None, reason="the word-overlap core is not built")

#: Python's hash of an int is the int modulo this prime: k and k + P share a hash (a tag).
P = (1 << 61) - 1

# Ids: a few small ones (many share a home slot in a small table), pairs with one hash,
# 128-bit ones, and any.
IDS = st.one_of(
    st.integers(0, 12),
    st.sampled_from([0, 1, 5, P, P + 1, P + 5, 2 * P + 1, (1 << 128) - 1, 1 << 127]),
    st.integers(0, (1 << 128) - 1),
)


def _table() -> Any:
    return IdTable(Record.__dict__["cols"], Record.__dict__["slot"])


def _record(ident: int, n: int) -> Record:
    entry = MemoryEntry(
        category=MemoryCategory.FACT, memory=f"m{n}", id=uuid.UUID(int=ident), created_at=BASE
    )
    return Record(entry, n + 1, n + 1)


class TableVsDict(TableIterators, RuleBasedStateMachine):
    """An ``IdTable`` and a dict, the same operations."""

    def __init__(self) -> None:
        super().__init__()
        self.table = _table()
        self.model: dict[int, Record] = {}
        self.recs: list[Record] = []
        self.base: list[int] = []  # each record's reference count outside both maps
        self.iters: list[tuple[Any, int, bool]] = []  # (iterator, seen, changed)

    def _new(self, ident: int) -> Record:
        rec = _record(ident, len(self.recs))
        self.recs.append(rec)
        self.base.append(sys.getrefcount(rec))
        return rec

    def _put(self, ident: int, rec: Record) -> None:
        if ident not in self.model:
            self._changed()
        self.model[ident] = rec
        self.table[ident] = rec

    @rule(ident=IDS)
    def set_new_record(self, ident: int) -> None:
        self._put(ident, self._new(ident))

    @rule(pick=st.integers(0, 1000))
    def set_again(self, pick: int) -> None:
        """A record made before (stored, overwritten or deleted since) under its id."""
        if self.recs:
            rec = self.recs[pick % len(self.recs)]
            self._put(rec.entry._id, rec)

    @rule(ident=IDS)
    def delete(self, ident: int) -> None:
        if ident in self.model:
            self._changed()
            del self.model[ident]
            del self.table[ident]
        else:
            with pytest.raises(KeyError):
                del self.table[ident]

    @rule(ident=IDS)
    def read(self, ident: int) -> None:
        assert (ident in self.table) == (ident in self.model)
        assert self.table.get(ident) is self.model.get(ident)
        marker = object()
        assert self.table.get(ident, marker) is self.model.get(ident, marker)
        if ident in self.model:
            assert self.table[ident] is self.model[ident]
        else:
            with pytest.raises(KeyError):
                self.table[ident]

    @rule(ids=st.lists(st.integers(0, (1 << 128) - 1), min_size=20, max_size=120))
    def bulk_insert(self, ids: list[int]) -> None:
        """Enough ids to grow the table (x1.4 at a load of 0.7) a few times."""
        for ident in ids:
            self._put(ident, self._new(ident))

    @rule(keep=st.integers(0, 3))
    def bulk_delete(self, keep: int) -> None:
        """All ids but ``keep``: the table shrinks (below a load of 1/8)."""
        for ident in list(self.model)[keep:]:
            self._changed()
            del self.model[ident]
            del self.table[ident]

    @rule()
    def iterate(self) -> None:
        items = self._walked()
        assert all(k == self.model[k].entry._id for k, _ in items)  # read from the store
        assert all(self.model[k] is v for k, v in items)

    @rule()
    def drop_table(self) -> None:
        """A new table of the same contents, the old one (and its iterators) dropped:
        the invariant's reference counts then show it released each record once."""
        old = self.table
        self.table = _table()
        for k, rec in self.model.items():
            self.table[k] = rec
        self.iters.clear()
        del old

    @invariant()
    def agrees(self) -> None:
        self.table._check()
        assert len(self.table) == len(self.model)
        assert dict(self.table.items()) == self.model
        held = {id(r) for r in self.model.values()}
        for i, base in enumerate(self.base):
            rec = self.recs[i]
            places = 1 if id(rec) in held else 0
            assert sys.getrefcount(rec) == base + 2 * places, i


@core
def test_table_agrees_with_a_dict() -> None:
    run_machine(TableVsDict, 40, 40)


@core
def test_refusals_change_nothing() -> None:
    t = _table()
    recs = [_record(i, i) for i in range(20)]
    for r in recs:
        t[r.entry._id] = r
    before = dict(t.items())

    class Sub(int):
        def __eq__(self, other: object) -> bool:
            raise AssertionError("no Python code runs in a lookup")

        __hash__ = int.__hash__

    # Reads: no exact int, absent.
    for key in ("3", 3.0, None, uuid.UUID(int=3), Sub(3), True, (3,)):
        assert key not in t
        assert t.get(key) is None
        assert t.get(key, "d") == "d"
        with pytest.raises(KeyError):
            t[key]
        with pytest.raises(KeyError):
            del t[key]
    # Writes: refused before any change.
    with pytest.raises(TypeError, match="keys are ints"):
        t["3"] = recs[3]
    with pytest.raises(TypeError, match="keys are ints"):
        t[Sub(3)] = recs[3]
    with pytest.raises(TypeError, match="values are"):
        t[3] = object()
    with pytest.raises(TypeError, match="values are"):
        t[3] = recs[3].entry
    with pytest.raises(ValueError, match="not the record's id"):
        t[4] = recs[3]
    with pytest.raises(ValueError, match="not the record's id"):
        t[1000] = recs[3]
    assert dict(t.items()) == before
    t._check()
    with pytest.raises(ValueError, match="n < 0"):
        t.reserve(-1)
    with pytest.raises(TypeError):
        t.reserve("1")
    with pytest.raises(TypeError):
        t.get()
    # The constructor: two object slots of plain classes.
    for args in ((), (Record.__dict__["entry"],), (1, 2), (Record.__dict__["entry"], MemoryEntry)):
        with pytest.raises(TypeError):
            IdTable(*args)
    with pytest.raises(TypeError):
        IdTable(Record.__dict__["cols"], Record.__dict__["slot"], extra=1)
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)


@core
def test_sizes_and_growth() -> None:
    t = _table()
    empty = t.__sizeof__()
    t.reserve(1000)
    assert t.__sizeof__() - empty == 12 * (1000 * 10 // 7 + 1)  # 12 B a slot, load 0.7
    recs = [_record(i, i) for i in range(1000)]
    for r in recs:
        t[r.entry._id] = r
    assert t.__sizeof__() - empty == 12 * (1000 * 10 // 7 + 1)  # no growth after reserve
    t._check()
    for r in recs[:990]:
        del t[r.entry._id]
    t._check()
    assert t.__sizeof__() - empty < 12 * 100  # shrunk below a load of 1/8
    assert sorted(t) == [r.entry._id for r in recs[990:]]


@core
def test_a_cycle_through_a_table_is_collected() -> None:
    def tables() -> int:
        return sum(type(o) is IdTable for o in gc.get_objects())

    gc.collect()
    before = tables()
    # the Python record (the compiled one is outside the collector: no cycle may go
    # through it, and the engine makes none; tests/test_crec42_record.py)
    t = IdTable(PyRecord.__dict__["cols"], PyRecord.__dict__["slot"])
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="m7", id=uuid.UUID(int=7))
    rec = PyRecord(entry, 8, 8)
    t[7] = rec
    rec.access = t  # type: ignore[assignment]  # rec -> table -> rec
    assert tables() == before + 1
    del rec, t
    gc.collect()
    assert tables() == before


# -- two states, the same writes -------------------------------------------------------


def _new(table: bool, capacity: int | None = None, load: int = 4) -> MemoryState:
    return knob_state(state_module, "_ID_TABLE", table, capacity, load)


class TwoIdMaps(TwoLayouts):
    """test_entrybytes2's writes, held views and walks into two states, one whose
    ``_by_id`` is an ``IdTable``, one whose ``_by_id`` is a dict."""

    def _new_state(self, on: bool, capacity: int | None, load: int) -> MemoryState:
        return _new(on, capacity, load)

    @rule()
    def read_views(self) -> None:
        """Every held view reads the same records by id, by key and in full: the heads
        from the table, older versions through ``_prev``."""
        got = []
        for on, state in self._each():
            out = []
            for view in self.views[on]:
                out.append([None if (r := view.get(i)) is None else _rec(r) for i in self.ids])
                out.append([_rec(r) for r in view.records()])
                out.append(
                    [
                        None if (r := view.by_key(ns, k)) is None else _rec(r)
                        for (ns, k) in list(state._by_key)
                    ]
                )
            got.append(out)
        assert got[0] == got[1]

    def _layouts(self, on: MemoryState, off: MemoryState) -> None:
        assert type(on._by_id) is IdTable
        assert type(off._by_id) is dict


@core
def test_two_id_maps_agree() -> None:
    run_machine(TwoIdMaps, 15, 25)


@core
@settings(max_examples=examples(30), deadline=None)
@given(
    ids=st.lists(st.sampled_from([1, 2, 3, P + 1, P + 2, (1 << 128) - 1]), max_size=30),
    capacity=st.sampled_from([None, None, 10]),
)
def test_load_and_store_fill_the_table_as_the_dict(ids: list[int], capacity: int | None) -> None:
    """``load`` (its ``reserve``; an id twice is its ValueError either way) and
    ``store_many`` (the C ``store_inserts``, upserts by ``store``) of the same entries
    make the same heads with the table as with a dict."""
    entries = [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"t{i % 4}",
            id=uuid.UUID(int=ident),
            created_at=BASE + timedelta(seconds=i),
        )
        for i, ident in enumerate(ids)
    ]
    rows = [(i + 1, e) for i, e in enumerate(entries)]
    got = []
    for on in (True, False):
        loaded, stored = _new(on, capacity), _new(on, capacity)
        try:
            loaded.load(rows)
            outcome: Any = sorted((k, _rec(r)) for k, r in loaded._by_id.items())
            loaded._check()
        except ValueError as err:
            outcome = str(err)
        stored.store_many(entries, BASE)
        stored._check()
        got.append((outcome, sorted((k, _rec(r)) for k, r in stored._by_id.items())))
    assert got[0] == got[1]


@core
def test_store_inserts_refuses_a_table_of_other_classes() -> None:
    """The C ``store_inserts`` fills an ``IdTable`` as a dict (the knob's states agree
    above); a table made over other slots is refused before any change."""
    s = _new(True)
    entries = [
        MemoryEntry(category=MemoryCategory.FACT, memory=f"w{i}", id=uuid.UUID(int=i + 1),
                    created_at=BASE)
        for i in range(20)
    ]  # fmt: skip
    s.store_many(entries[:1], None)  # the order's first sublist
    s.store_many(entries[1:], None)
    s._check()
    assert type(s._by_id) is IdTable
    assert len(s._by_id) == 20
    wo: Any = kernels._wo
    rel = s._by_relevance
    other = IdTable(PyRecord.__dict__["born"], MemoryEntry.__dict__["_id"])
    before = (len(s._by_id), len(s._dups), len(s.journal or []))
    with pytest.raises(TypeError, match="IdTable of other classes"):
        wo.store_inserts(
            [MemoryEntry(category=MemoryCategory.FACT, memory="x", created_at=BASE)], 0,
            s.version + 1, other, s._prev, s._rel_parts, rel._lists, rel._keys,
            rel._maxes, 8, s._namespaces, s._dups, s._dup_keys, s.journal, [], [], True,
            s._cols,
        )  # fmt: skip
    assert (len(s._by_id), len(s._dups), len(s.journal or [])) == before
    assert len(other) == 0
    s._check()
