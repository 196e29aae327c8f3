"""BM25's groups as columns (branch bytes25, issue #20 item 6, step 3 of ``entrybytes2``'s
plan).

``bm25.knobs._GROUP_COLUMNS`` (read when an index is made, with the term pool): no
``_Group`` object per distinct text. ``BM25Index._table[num]`` holds the group's records
themselves (its one record, or a list by seq; None once purged), ``_groups`` maps a
document to the group's number, and ``_dead`` holds the purged records still in a
group's list for the groups that have any. Checked here:

* two states (columns / a ``_Group`` per text, both with the term pool) driven by
  ``test_entrybytes2``'s writes, held views, upserts, deletes, consolidations and walks,
  with pool compactions on nearly every purge: after each step the same groups (numbers,
  records, purged counts, terms), terms, lengths, posting lists and statistics,
  ``_check`` on both, and a held view's top-k the same on both and the brute force's;
* the compiled core's record heap (``Bm25Daat.offer_to(..., columns=True)``) reads a
  slot's records, and refuses a ``columns`` that is not a bool;
* an image dumped from either layout is the same bytes and restores into either,
  equal to a rebuild; the image of other rows is refused.
"""

from __future__ import annotations

import uuid
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant

from actormem import BM25Scorer, MemoryCategory, MemoryEntry
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.bm25.index import BM25Index, _DocMap
from actormem._index.bm25.postings import _Group
from actormem._index.persist import ImageError
from actormem._record import Record

from .setups import stored_texts
from .strategies import run_machine
from .test_bm25 import brute_force
from .test_bm25_core import _term
from .test_entrybytes6 import TwoTermLayouts, _group_terms, _structures
from .test_store_batch import BASE


def _new(columns: bool, capacity: int | None = None, table: bool = True) -> MemoryState:
    saved = knobs._GROUP_COLUMNS, knobs._TERM_POOL, knobs._GROUP_TABLE
    knobs._GROUP_COLUMNS, knobs._TERM_POOL, knobs._GROUP_TABLE = columns, True, table
    try:
        s = MemoryState(capacity=capacity, half_life=3600.0, scorer=BM25Scorer())
    finally:
        knobs._GROUP_COLUMNS, knobs._TERM_POOL, knobs._GROUP_TABLE = saved
    s.journal = []
    return s


def _index(state: MemoryState) -> BM25Index:
    return cast(BM25Index, state.index)


class TwoGroupLayouts(TwoTermLayouts):
    """test_entrybytes6's machine with the two states' indexes made with and without
    group columns (both with the term pool); the columns' document map is the core's
    table (``TABLE``) or a dict."""

    TABLE = True

    @initialize(capacity=st.sampled_from([None, None, None, 4, 9]), load=st.sampled_from([4, 9]))
    def make(self, capacity: int | None, load: int) -> None:
        self.views = {True: [], False: []}
        self.walks = {True: [], False: []}
        for on in (True, False):
            s = _new(on, capacity, self.TABLE)
            s._by_relevance._reset(load)
            s.on_remove = lambda e, cause, on=on: self.removed[on].append((e.id, cause))
            self.states[on] = s

    @invariant()
    def same_structures(self) -> None:
        if not self.states:
            return
        seen = [_structures(state) for _, state in self._each()]
        assert seen[0] == seen[1]
        assert self.removed[True] == self.removed[False]
        on, off = _index(self.states[True]), _index(self.states[False])
        assert on._cols
        assert on._pool is not None
        assert not off._cols
        assert off._pool is not None
        assert not any(type(g) is _Group for g in on._table)
        assert all(type(g) is _Group for g in off._table if g is not None)
        assert all(type(g) is int for g in on._groups.values())
        table = self.TABLE and kernels.wo_core() is not None
        assert (type(on._groups) is _DocMap) is table
        assert type(off._groups) is dict
        assert list(on._changes.groups) == [g.num for g in off._changes.groups]


class TwoGroupLayoutsDict(TwoGroupLayouts):
    TABLE = False


@pytest.mark.parametrize("machine", [TwoGroupLayouts, TwoGroupLayoutsDict])
def test_two_group_layouts_agree(monkeypatch: pytest.MonkeyPatch, machine: Any) -> None:
    monkeypatch.setattr(knobs, "_POOL_DEAD", 0.01)  # compact on nearly every purge
    run_machine(machine, 20, 25)


def _state(columns: bool, texts: list[str], scorer: BM25Scorer | None = None) -> MemoryState:
    saved = knobs._GROUP_COLUMNS, knobs._TERM_POOL
    knobs._GROUP_COLUMNS, knobs._TERM_POOL = columns, True
    try:
        s = MemoryState(capacity=None, half_life=3600.0, scorer=scorer or BM25Scorer())
    finally:
        knobs._GROUP_COLUMNS, knobs._TERM_POOL = saved
    return stored_texts(s, texts)


@pytest.mark.skipif(not kernels.bm25_core_active(), reason="the BM25 core is not built")
def test_the_core_heap_reads_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unweighted query's groups go to the core's heap of records, which reads each
    slot's records (one record, or a list with purged and invisible ones) with columns:
    the same top-k as the objects' layout and the brute force, at the newest view and at
    one held from before deletes and upserts."""
    calls: list[bool] = []
    offer_to = kernels.Bm25Daat.offer_to

    def spy(self: Any, *args: Any, columns: bool = False) -> None:
        calls.append(columns)
        offer_to(self, *args, columns=columns)

    monkeypatch.setattr(kernels.Bm25Daat, "offer_to", spy)
    texts = [f"alpha {i % 6} beta w{i % 3}" + " gamma" * (i % 5) for i in range(60)]
    states = {on: _state(on, texts) for on in (True, False)}
    held = {on: s.view() for on, s in states.items()}
    for s in states.values():
        for i in range(0, 60, 4):
            s.delete(uuid.UUID(int=i + 1))
        for i in range(1, 60, 5):  # upserts: a text's group gets a second record
            s.store(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=texts[(i + 7) % 60],
                    id=uuid.UUID(int=i + 1),
                    created_at=BASE,
                )
            )
        s.publish()
    got = {}
    for on, s in states.items():
        index = _index(s)
        for view in (held[on], s.view()):
            for query in ("alpha beta", "w1 gamma", "3 tag"):
                for limit in (1, 4, 30):
                    top = index.top_k(view, query, limit, None)
                    want = brute_force(index.scorer, index._records(), view.version, query, limit)
                    assert [(x, r.seq) for x, r in top] == [(x, r.seq) for x, r in want]
                    got.setdefault(on, []).append([(x, r.entry.id, r.seq) for x, r in top])
    assert got[True] == got[False]
    assert set(calls) == {True, False}  # the heap in C, read in both layouts


@pytest.mark.skipif(not kernels.bm25_core_active(), reason="the BM25 core is not built")
def test_the_core_heap_reads_slots_directly() -> None:
    """``offer_to(..., columns=True)``: a slot that is a record is that group's one
    record, a list its records; the same heap as the same records in ``_Group``s. A
    ``columns`` not a bool is refused before C, and nothing is kept."""
    lengths = np.ones(128, np.int32)
    parts = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0 + 1e-9)
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="x", created_at=BASE)
    slots: list[Any] = [None] * 64
    seq = 0
    for num in range(0, 64, 3):
        recs = []
        for _ in range(1 + num % 4):
            recs.append(Record(entry, born=1, seq=seq))
            seq += 1
        slots[num] = recs if len(recs) > 1 or num % 2 else recs[0]
    slots[9] = None  # purged
    groups: list[Any] = []
    for num, slot in enumerate(slots):
        if slot is None:
            groups.append(None)
            continue
        group = _Group(num)
        group._recs = slot
        groups.append(group)
    best = []
    for columns, table in ((True, slots), (False, groups)):
        daat = kernels.Bm25Daat([_term()], lengths, parts, 4, True)
        for bad in (1, None, "yes"):
            with pytest.raises(TypeError, match="columns"):
                daat.offer_to(table, 1, None, 10, 1, columns=bad)  # type: ignore[arg-type]
            assert daat._offer is None
        daat.offer_to(table, 1, None, 10, 1, columns=columns)
        while not daat.drive(1000):
            pass
        best.append([(score, rec.seq) for score, rec in daat.best()])
    assert best[0] == best[1]
    assert len(best[0]) == 10


@pytest.mark.parametrize("dups", [False, True])
def test_the_image_round_trips_between_group_layouts(dups: bool) -> None:
    """An image dumped from either group layout (after purges, compactions and upserts)
    is the same bytes and restores into either, equal to a rebuild from the same
    records; an image of other rows is refused."""
    texts = [f"alpha {i % 5 if dups else i} beta w{i % 3}" for i in range(40)]
    texts[7] += " w1" * 300  # a frequency past the packed byte
    images = []
    for src in (True, False):
        s = _state(src, texts)
        for i in range(0, 40, 3):  # purged groups, then compacted
            s.delete(uuid.UUID(int=i + 1))
        s.publish()
        s.vacuum(s.published)
        recs = sorted(_index(s)._records(), key=lambda r: r.seq)
        parts = bm25_persist.dump(_index(s), recs)
        images.append(parts)
        for dst in (True, False):
            fresh = _index(_new(dst))
            rebuilt = _index(_new(dst))
            for r in recs:
                rebuilt.add(r)
            out = bm25_persist.restore(fresh, parts, recs)
            assert out._cols is dst
            out._check(recs)
            assert _group_terms(out) == _group_terms(rebuilt)
            if dst:  # the log keeps numbers in an array: no int object a record
                assert out._changes.groups.typecode == "q"
                assert list(out._changes.groups) == list(rebuilt._changes.groups)
            for query in ("alpha beta", "w1 3", "tag x alpha"):
                top = out.top_k(s.view(), query, 5, None)
                want = rebuilt.top_k(s.view(), query, 5, None)
                assert [(x, r.seq) for x, r in top] == [(x, r.seq) for x, r in want]
            with pytest.raises(ImageError):
                bm25_persist.restore(_index(_new(dst)), parts, recs[:-1])
    assert images[0] == images[1]  # the same image from either layout


def test_past_the_small_ints() -> None:
    """Group numbers past CPython's cached small ints (the map's numbers are new int
    objects each time): the same structures in both layouts, ``_check`` on both."""
    texts = [f"alpha {i} beta w{i % 3}" for i in range(700)] + ["alpha 3 beta w0"] * 5
    states = {on: _state(on, texts) for on in (True, False)}
    for s in states.values():
        for i in range(0, 700, 7):
            s.delete(uuid.UUID(int=i + 1))
        s.publish()
        s.vacuum(s.published)
    assert _structures(states[True]) == _structures(states[False])
    index = _index(states[True])
    assert len(index._groups) == 600 + 1  # the tagged texts: i % 4 == 0, in the dict
