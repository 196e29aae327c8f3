"""``_dups`` as the C ``DupTable`` (branch entrybytes3, issue #20 item 6, step 1).

``state._DUP_TABLE`` (read when a state is made): the duplicate key -> group map is an
open-addressing table of ``uint32`` keys beside references (``_duptable.h``) instead of
a dict of int keys. Checked here:

* a state machine drives a ``DupTable`` and a dict with the same operations (sets,
  overwrites, deletes of present and absent keys, the state's ``join`` / ``leave`` group
  steps against their Python form, bulk inserts and deletes that grow and shrink it,
  keys that share home slots, iteration, iterators left open across changes) and
  requires the same contents, the table's own ``_check`` (every key reachable from its
  home), each value's reference count (one for the table, one for the model: no leak,
  no early release), and an open iterator to raise once a key came or went;
* bad keys: absent for reads, refused for writes before any change;
* the cycle collector sees through it (a cycle through a table is collected);
* two states, one made with the knob on and one with it off, driven by
  ``test_entrybytes2``'s writes (``store_many`` through the C ``store_inserts`` and
  ``_store_batch``, upserts, deletes, consolidations, held views) have identical
  structures, journals, removals and top-k, and pass ``_check``; ``load`` of rows
  with duplicate texts makes the same groups either way.
"""

from __future__ import annotations

import gc
import sys
import uuid
import weakref
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

from .setups import TableIterators, knob_state
from .strategies import examples, run_machine
from .test_entrybytes2 import TwoLayouts
from .test_store_batch import BASE

DupTable: Any = getattr(kernels._wo, "DupTable", None)
core = pytest.mark.skipif(DupTable is None, reason="the word-overlap core is not built")

# Keys: a few small ones (many share a home slot in a small table), the edges, and any.
KEYS = st.one_of(
    st.integers(0, 12),
    st.sampled_from([0, 1, (1 << 30) - 1, (1 << 30) - 2, 1 << 29]),
    st.integers(0, (1 << 30) - 1),
)


class Val:
    """A value whose references the test counts (and that can be weakly referenced)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __repr__(self) -> str:
        return f"Val({self.n})"


class TableVsDict(TableIterators, RuleBasedStateMachine):
    """A ``DupTable`` and a dict, the same operations; the state's group steps in their
    Python form on the dict (``MemoryState._link`` / ``_unlink`` with the knob off)."""

    def __init__(self) -> None:
        super().__init__()
        self.table = DupTable()
        self.model: dict[int, Any] = {}
        self.multi: set[int] = set()  # the model's _dup_keys: keys of dict groups
        self.vals: list[Val] = []
        self.base: list[int] = []  # each value's reference count outside both maps
        self.iters: list[tuple[Any, int, bool]] = []  # (iterator, changes seen, changed)
        self.changes = 0

    def _val(self) -> Val:
        v = Val(len(self.vals))
        self.vals.append(v)
        self.base.append(sys.getrefcount(v))
        return v

    def _put(self, key: int, v: Val) -> None:
        """``v`` under ``key`` in both maps (a group there replaced)."""
        if key not in self.model:
            self._changed()
        if isinstance(self.model.get(key), dict):
            self.multi.discard(key)
        self.model[key] = v
        self.table[key] = v

    @rule(key=KEYS)
    def set_new_value(self, key: int) -> None:
        self._put(key, self._val())

    @rule(key=KEYS, pick=st.integers(0, 1000))
    def set_existing_value(self, key: int, pick: int) -> None:
        """A value the table holds elsewhere already (picked by index: a value drawn by
        Hypothesis would be referenced by it too)."""
        if not self.vals:
            return
        self._put(key, self.vals[pick % len(self.vals)])

    @rule(key=KEYS)
    def delete(self, key: int) -> None:
        if key in self.model:
            self._changed()
            self.multi.discard(key)
            del self.model[key]
            del self.table[key]
        else:
            with pytest.raises(KeyError):
                del self.table[key]

    @rule(key=KEYS)
    def read(self, key: int) -> None:
        assert (key in self.table) == (key in self.model)
        assert _same(self.table.get(key), self.model.get(key))
        marker = object()
        assert _same(self.table.get(key, marker), self.model.get(key, marker))
        if key in self.model:
            assert _same(self.table[key], self.model[key])
        else:
            with pytest.raises(KeyError):
                self.table[key]

    @rule(key=KEYS)
    def join(self, key: int) -> None:
        """``_link``'s step, a new record joining ``key``'s group."""
        rec = self._val()
        if key not in self.model:
            self._changed()
        group = self.model.get(key)
        made_pair = False
        if group is None:
            self.model[key] = rec
        elif isinstance(group, dict):
            group[rec] = None
        else:
            self.model[key] = {group: None, rec: None}
            made_pair = True
        assert self.table.join(key, rec) is made_pair
        if made_pair:
            self.multi.add(key)

    @rule(key=KEYS, pick=st.integers(0, 100))
    def leave(self, key: int, pick: int) -> None:
        """``_unlink``'s step, a record of ``key``'s group leaving it."""
        if key not in self.model:
            with pytest.raises(KeyError):
                self.table.leave(key, Val(-1))
            return
        group = self.model[key]
        if isinstance(group, dict):
            rec = list(group)[pick % len(group)]
            del group[rec]
            left_one = len(group) == 1
            if left_one:
                self.model[key] = next(iter(group))
                self.multi.discard(key)
        else:
            rec, left_one = group, False
            self._changed()
            del self.model[key]
        assert self.table.leave(key, rec) is left_one

    @rule(keys=st.lists(st.integers(0, (1 << 30) - 1), min_size=20, max_size=120))
    def bulk_insert(self, keys: list[int]) -> None:
        """Enough keys to grow the table (x1.4 at a load of 0.7) a few times."""
        for key in keys:
            self._put(key, self._val())

    @rule(keep=st.integers(0, 3))
    def bulk_delete(self, keep: int) -> None:
        """All keys but ``keep``: the table shrinks (below a load of 1/8)."""
        for key in list(self.model)[keep:]:
            self._changed()
            self.multi.discard(key)
            del self.model[key]
            del self.table[key]

    @rule()
    def iterate(self) -> None:
        """Whole iterations while nothing changes: the model's contents."""
        assert all(_same(self.model[k], v) for k, v in self._walked())

    @rule()
    def drop_table(self) -> None:
        """A new table of the same contents, the old one (and its open iterators)
        dropped: the invariant's reference counts then show it released each value
        once (a group's dict copied: the old one dies with the old table)."""
        old = self.table
        self.table = DupTable()
        for k, g in self.model.items():
            self.table[k] = dict(g) if isinstance(g, dict) else g
        self.iters.clear()
        del old

    @invariant()
    def agrees(self) -> None:
        self.table._check()
        assert len(self.table) == len(self.model)
        assert dict(self.table.items()) == self.model
        assert all(_same(self.model[k], g) for k, g in self.table.items())
        assert self.multi == {k for k, g in self.model.items() if isinstance(g, dict)}
        # References: one per place in the model, one per place in the table.
        places = self._places()  # (a helper: its loop variables hold no value here)
        for i, base in enumerate(self.base):
            assert sys.getrefcount(self.vals[i]) == base + 2 * places[i], (i, places[i])

    def _places(self) -> list[int]:
        """How many places of the model hold each value."""
        places = [0] * len(self.vals)
        for g in self.model.values():
            for v in g if isinstance(g, dict) else (g,):
                places[v.n] += 1
        return places


def _same(a: Any, b: Any) -> bool:
    """The same record, or equal groups (the model's and the table's are two dicts)."""
    return a == b and list(a) == list(b) if isinstance(a, dict) else a is b


@core
def test_table_agrees_with_a_dict() -> None:
    run_machine(TableVsDict, 60, 40)


@core
def test_bad_keys_are_absent_for_reads_and_refused_for_writes() -> None:
    t = DupTable()
    t[3] = "x"
    before = dict(t.items())
    for bad in (-1, 1 << 30, 1 << 64, "3", 3.0, None, (3,)):
        assert t.get(bad) is None
        assert t.get(bad, "d") == "d"
        assert bad not in t
        with pytest.raises(KeyError):
            t[bad]
        with pytest.raises(KeyError):
            del t[bad]
        with pytest.raises(KeyError):
            t.leave(bad, "x")
    for bad in (-1, 1 << 30, 1 << 64):
        with pytest.raises(ValueError, match=r"\[0, 2\*\*30\)"):
            t[bad] = 1
        with pytest.raises(ValueError, match=r"\[0, 2\*\*30\)"):
            t.join(bad, 1)
    for bad in ("3", 3.0, None):
        with pytest.raises(TypeError, match="ints"):
            t[bad] = 1
        with pytest.raises(TypeError, match="ints"):
            t.join(bad, 1)
    with pytest.raises(ValueError, match="n < 0"):
        t.reserve(-1)
    with pytest.raises(TypeError):
        t.reserve("5")
    with pytest.raises(TypeError):
        DupTable(4)
    with pytest.raises(TypeError):
        t.get()
    with pytest.raises(TypeError):
        t.join(1)
    with pytest.raises(TypeError):
        hash(t)
    with pytest.raises(TypeError):
        type("Sub", (DupTable,), {})  # final
    assert dict(t.items()) == before
    t._check()
    # True is the int 1, as in a dict.
    t[True] = "one"
    assert t[1] == "one"
    assert 1 in t
    # A group that does not hold the record leaves it alone.
    t.join(7, "a")
    t.join(7, "b")
    with pytest.raises(KeyError):
        t.leave(7, "c")
    assert t[7] == {"a": None, "b": None}


@core
def test_sizes_and_growth() -> None:
    t = DupTable()
    assert t.__sizeof__() < 100  # no arrays until the first key
    for k in range(1000):
        t[k * 7919 % (1 << 30)] = k
    t._check()
    assert 1000 / 0.7 * 12 <= t.__sizeof__() - DupTable().__sizeof__() <= 2000 * 12 + 100
    t.reserve(9000)  # 10,000 keys at a load of 0.7
    t._check()
    assert t.__sizeof__() - DupTable().__sizeof__() <= (10000 / 0.7 + 2) * 12
    for k in range(1000):
        del t[k * 7919 % (1 << 30)]
    t._check()
    assert len(t) == 0
    assert t.__sizeof__() - DupTable().__sizeof__() <= 8 * 12


@core
def test_a_cycle_through_a_table_is_collected() -> None:
    t = DupTable()
    t[1] = t
    t[2] = {"group": t}
    assert t in gc.get_referents(t)
    it = iter(t)
    t[3] = it  # the iterator holds the table too
    v = Val(0)
    t[4] = v
    ref = weakref.ref(v)
    del t, it, v
    gc.collect()
    assert ref() is None


# -- two states, the same writes -------------------------------------------------------


def _new(table: bool, capacity: int | None = None, load: int = 4) -> MemoryState:
    return knob_state(state_module, "_DUP_TABLE", table, capacity, load)


class TwoDupMaps(TwoLayouts):
    """test_entrybytes2's writes, held views and walks into two states, one whose
    ``_dups`` is a ``DupTable``, one whose ``_dups`` is a dict."""

    def _new_state(self, on: bool, capacity: int | None, load: int) -> MemoryState:
        return _new(on, capacity, load)

    def _layouts(self, on: MemoryState, off: MemoryState) -> None:
        assert type(on._dups) is DupTable
        assert type(off._dups) is dict


@core
def test_two_dup_maps_agree() -> None:
    run_machine(TwoDupMaps, 25, 25)


def _groups(state: MemoryState) -> dict[int, Any]:
    """``_dups`` by key: a record's seq, or a group's seqs in insertion order."""
    return {k: [r.seq for r in g] if isinstance(g, dict) else g.seq for k, g in state._dups.items()}


@core
@settings(max_examples=examples(30), deadline=None)
@given(
    texts=st.lists(st.sampled_from(["a b", "A  b", "c", "é", "É", "d e f"]), max_size=40),
    capacity=st.sampled_from([None, None, 10]),
    merge=st.booleans(),
)
def test_load_and_store_make_the_same_groups(
    texts: list[str], capacity: int | None, merge: bool
) -> None:
    """``load`` of rows with duplicate texts (the bulk path's ``reserve`` and ``join``),
    and ``store_many`` of the same entries (the C ``store_inserts``), make the same
    groups with the table as with a dict; a consolidation merges the same records."""
    rows = [
        (
            i + 1,
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=t,
                id=uuid.UUID(int=i + 1),
                created_at=BASE + timedelta(seconds=i),
            ),
        )
        for i, t in enumerate(texts)
    ]
    got = []
    for on in (True, False):
        loaded, stored = _new(on, capacity), _new(on, capacity)
        loaded.load(rows)
        stored.store_many([e for _, e in rows], BASE)
        for s in (loaded, stored):
            if merge:
                s.consolidate()
            s._check()
        got.append((_groups(loaded), set(loaded._dup_keys), _groups(stored), set(stored._dup_keys)))
    assert got[0] == got[1]


@core
def test_store_inserts_fills_a_table_as_a_dict() -> None:
    """The C ``store_inserts`` with each map: the same groups, one int in ``_dup_keys``
    per new pair; a map of another type is refused before any change."""
    entries = [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"w{i % 7}",
            id=uuid.UUID(int=i + 1),
            created_at=BASE,
        )
        for i in range(60)
    ]
    states = {on: _new(on) for on in (True, False)}
    for s in states.values():
        s.store_many(entries[:1], None)  # the order's first sublist
        s.store_many(entries[1:], None)
        s._check()
        assert len(s._dup_keys) == 7
    assert _groups(states[True]) == _groups(states[False])
    assert states[True]._dup_keys == states[False]._dup_keys
    wo: Any = kernels._wo
    s = states[True]
    rel = s._by_relevance
    before = (len(s._by_id), len(s._dups))
    for wrong in ({}.items(), [], None):
        with pytest.raises(TypeError, match="wrong argument types"):
            wo.store_inserts(
                [MemoryEntry(category=MemoryCategory.FACT, memory="x", created_at=BASE)], 0,
                s.version + 1, s._by_id, s._prev, s._rel_parts, rel._lists, rel._keys,
                rel._maxes, 8, s._namespaces, wrong, s._dup_keys, s.journal, [], [], True,
                s._cols,
            )  # fmt: skip
    assert (len(s._by_id), len(s._dups)) == before
