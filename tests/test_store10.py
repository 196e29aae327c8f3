"""The state's plain inserts in one C call (branch store10, issue #20's store target).

``state._STORE_C``: ``store_many`` of a list or tuple into an unbounded memory makes each
run of plain inserts by the C ``store_inserts`` (``_cwordoverlap.c``) and every other
entry by ``_store_batch``; ``wordoverlap.knobs._ADD_GROUPS_C``: the index's ``add_many``
makes each run of records with new texts and no tags by the C ``add_groups_new``, any
other by the loop's body. Checked here against both knobs off:

* ``test_store_batch``'s two-state machine (new ids, the same text twice, upserts by id
  and by key, ttls, expiries, namespaces, values, relevances, deletes and re-stores of
  dead ids, bounded memories with evictions, an item that is not an entry), lists and
  tuples, the relevance order's sublists split every few records: identical
  structures, journals, removals, errors, top-k with scores after every step, and
  besides every record's six slots, ``_prev`` and the order's private lists;
* a batch that crosses the order's splits at the default load, 3,000 entries;
* an entry whose namespace cannot be hashed, midway through a batch: the same error,
  the entries before it stored and indexed, nothing of it (both paths do an entry's
  fallible steps before changing anything);
* without the compiled call (``_store_inserts_c`` None) the same state;
* ``store_inserts``, ``store_setup``, ``add_groups_new`` and ``record_setup`` refuse
  wrong arguments with TypeError, nothing changed.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import attrs
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import relevance_keys
from .strategies import run_machine
from .test_store_batch import BASE, TwoPaths, _snapshot

core = pytest.mark.skipif(
    state_module._store_inserts_c is None, reason="the word-overlap core is not built"
)


def _slots(rec: Any) -> tuple[Any, ...]:
    ev = rec.evkey
    evkey = None if ev is None else (ev[0], ev[1].seq, ev[1].born) if ev[1] is not None else ev
    access = rec.access
    acc = None if access is None else (access.version, access.count, access.last, access.expires)
    return (rec.entry, rec.born, rec.died, rec.seq, acc, evkey, rec.born is rec.seq)


def _full(state: MemoryState) -> tuple[Any, ...]:
    rel = state._by_relevance
    return (
        _snapshot(state),
        {k: _slots(r) for k, r in state._by_id.items()},
        [(_slots(k), _slots(v)) for k, v in state._prev.items()],
        [[_slots(r) for r in sub] for sub in rel._lists],
        relevance_keys(rel),
        rel._len,
        len(rel),
        {k: (ns.live, len(ns.recs)) for k, ns in state._namespaces.items()},
    )


def _new(capacity: int | None = None, load: int | None = 4) -> MemoryState:
    s = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
    s.journal = []
    if load is not None:
        s._by_relevance._reset(load)  # split the order's sublists every few records
    return s


def _set_knobs(on: bool) -> None:
    state_module._STORE_C = on
    wo_knobs._ADD_GROUPS_C = on


class TwoPathsStore10(TwoPaths):
    """test_store_batch's two states, one with ``_STORE_C`` and ``_ADD_GROUPS_C`` on,
    one with them off."""

    @initialize(capacity=st.sampled_from([None, None, None, 4, 9]))
    def make(self, capacity: int | None) -> None:
        for on in (True, False):
            s = _new(capacity)
            s.on_remove = lambda e, cause, on=on: self.removed[on].append((e.id, cause))
            self.states[on] = s
        self.tuples = False

    def _side(self, on: bool) -> None:
        _set_knobs(on)

    def _entry(self, item: dict[str, Any]) -> Any:
        entry = super()._entry(item)
        if isinstance(entry, MemoryEntry) and self.i % 5 == 0:
            entry = attrs.evolve(entry, value={"n": self.i % 2})
        return entry

    @rule(tuples=st.booleans())
    def shape(self, tuples: bool) -> None:
        self.tuples = tuples

    @rule(batch=st.lists(st.sampled_from(["a b", "the cat", "x"]), min_size=1, max_size=20))
    def plain_run(self, batch: list[str]) -> None:
        """A run of plain entries (the C call's), a dead id among them if any."""
        entries = []
        for text in batch:
            self.i += 1
            ident = uuid.UUID(int=self.i)
            self.ids.append(ident)
            entries.append(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=f"{text} w{self.i % 7}",
                    created_at=BASE + timedelta(seconds=self.i),
                    id=ident,
                )
            )
        dead = [i for i in self.ids[: -len(batch)] if self.states[True].current(i) is None]
        if dead:
            entries.insert(len(entries) // 2, attrs.evolve(entries[0], id=dead[0]))
        for _, state in self._each():
            state.store_many(tuple(entries) if self.tuples else entries, None)

    @rule()
    def same_everything(self) -> None:
        if self.states:
            seen = [_full(state) for _, state in self._each()]
            assert seen[0] == seen[1]


@core
@pytest.mark.parametrize("retry", [1, state_module._STORE_C_RETRY])
def test_store10_states_agree(monkeypatch: pytest.MonkeyPatch, retry: int) -> None:
    # retry 1: the C call tried again at every entry after the one it stopped at (its
    # short batches stop it often); the default hands a stretch to _store_batch.
    monkeypatch.setattr(state_module, "_STORE_C_RETRY", retry)
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoPathsStore10, 20, 20)


def _plain(n: int, start: int = 0, namespace: tuple[str, ...] = ()) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"entry {i % 97} about w{i}",
            created_at=BASE + timedelta(seconds=i),
            id=uuid.UUID(int=i + 1),
            namespace=namespace,
        )
        for i in range(start, start + n)
    ]


def _both(fill: Any) -> list[tuple[Any, ...]]:
    out = []
    for on in (True, False):
        _set_knobs(on)
        try:
            out.append(fill())
        finally:
            _set_knobs(True)
    return out


@core
def test_a_long_batch_crosses_the_splits() -> None:
    entries = _plain(3000)

    def fill() -> tuple[Any, ...]:
        s = _new(load=None)
        s.store_many(entries[:1], None)  # the order's first sublist
        s.store_many(entries[1:], None)
        assert len(s._by_relevance._lists) > 1
        return _full(s)

    on, off = _both(fill)
    assert on == off


class _Unhashable:
    def __hash__(self) -> int:
        raise RuntimeError("no hash")


@core
def test_an_error_midway_leaves_the_same_state() -> None:
    entries = _plain(40)
    bad = entries[25]
    object.__setattr__(bad, "namespace", (_Unhashable(),))

    def fill() -> tuple[Any, ...]:
        s = _new()
        s.store_many(_plain(3, start=100), None)
        with pytest.raises(RuntimeError, match="no hash"):
            s.store_many(entries, None)
        assert s.current(bad.id) is None
        assert len(s) == 3 + 25
        s.publish()
        hits = s.index.top_k(s.view(), "entry about", 5, None)
        return (_full(s), [(score, rec.seq) for score, rec in hits])

    on, off = _both(fill)
    assert on == off


@core
def test_without_the_compiled_call(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = _plain(50) + _plain(10, start=60, namespace=("a",))
    on = _new()
    on.store_many(entries, None)
    monkeypatch.setattr(state_module, "_store_inserts_c", None)
    off = _new()
    off.store_many(entries, None)
    assert _full(on) == _full(off)


@core
def test_store_inserts_refuses_wrong_arguments() -> None:
    wo: Any = kernels._wo
    s = _new()
    s.store_many(_plain(2), None)
    rel = s._by_relevance
    args = [
        _plain(3, start=10), 0, s.version + 1, s._by_id, s._prev, state_module._REL_PART,
        rel._lists, rel._keys, rel._maxes, 8, s._namespaces, s._dups, s._dup_keys,
        s.journal, [], [], s._seq_keys, s._cols,
    ]  # fmt: skip
    before = _full(s)
    with pytest.raises(TypeError, match="18 arguments"):
        wo.store_inserts(*args[:17])
    for at, wrong in [
        (0, iter([])), (3, []), (6, ()), (13, {}), (14, None), (1, 0.0), (9, "8"), (16, 1),
        (17, []),
    ]:  # fmt: skip
        bad = list(args)
        bad[at] = wrong
        with pytest.raises(TypeError):
            wo.store_inserts(*bad)
    bad = list(args)
    bad[1] = -1
    with pytest.raises(ValueError, match="start < 0"):
        wo.store_inserts(*bad)
    bad = list(args)
    bad[6] = [None]
    bad[7] = [[]]
    bad[8] = [0]
    with pytest.raises(TypeError, match="sublists"):
        wo.store_inserts(*bad)
    assert _full(s) == before
    with pytest.raises(TypeError):
        wo.store_setup(int, (), int, (), int, (), 1, 1)
    with pytest.raises(TypeError):
        wo.store_setup(
            state_module.Record, tuple(MemoryEntry.__dict__[n] for n in ("ttl",) * 6),
            MemoryEntry, tuple(MemoryEntry.__dict__[n] for n in ("ttl",) * 10),
            state_module._NsRecords, (state_module._NsRecords.__dict__["recs"],) * 2,
            state_module.NEVER, 1,
        )  # fmt: skip
    # The classes fixed at import still work.
    s.store_many(_plain(3, start=20), None)
    s._check()


@core
def test_add_groups_new_refuses_wrong_arguments() -> None:
    wo: Any = kernels._wo
    fn = ccore.add_groups()
    assert fn is wo.add_groups_new
    s = _new()
    s.store_many(_plain(2), None)
    recs = [s.current(e.id) for e in _plain(2)]
    lows: list[str] = []
    args = [recs, 0, {}, [], [""] * 8, 8, 0, lows, [], [], str.lower]
    with pytest.raises(TypeError, match="11 arguments"):
        fn(*args[:10])
    for at, wrong in [(0, tuple(recs)), (2, []), (4, ()), (5, 8.0), (7, None), (10, 3)]:
        bad = list(args)
        bad[at] = wrong
        with pytest.raises(TypeError):
            fn(*bad)
    for at in (1, 6):
        bad = list(args)
        bad[at] = -1
        with pytest.raises(ValueError, match="< 0"):
            fn(*bad)
    bad = list(args)
    bad[10] = lambda text: b"x"
    with pytest.raises(TypeError, match="must return a str"):
        fn(*bad)
    assert args[2] == {}
    assert args[3] == []
    assert lows == []
    # A recent list too short for the group number: left to the caller.
    bad = list(args)
    bad[4] = []
    assert fn(*bad) == 0
    assert fn(*args) == 2
    assert lows == [r.entry.memory.lower() for r in recs]
    with pytest.raises(TypeError):
        wo.record_setup(int, (), int, ())
    with pytest.raises(TypeError, match="other classes"):
        wo.record_setup(
            state_module._NsRecords, (state_module._NsRecords.__dict__["recs"],) * 7,
            MemoryEntry, tuple(MemoryEntry.__dict__[n] for n in ("ttl",) * 10),
        )  # fmt: skip


@core
@pytest.mark.parametrize("texts", [1, 7, 300])
def test_grown_posting_lists_are_appends(texts: int) -> None:
    """``knobs._GROW_DIRECT``: the posting lists, their capacities (``sys.getsizeof``)
    and the vocabulary equal ``array.append``'s, for lists grown from 1 to 300 items."""
    import sys

    def fill() -> tuple[Any, ...]:
        s = _new()
        for lo in range(0, texts * 3, 3):
            s.store_many(
                [
                    attrs.evolve(e, memory=f"tok common w{e.id.int} {'x' * (e.id.int % 3)}")
                    for e in _plain(3, start=lo)
                ],
                None,
            )
        post = s.index._e.post  # type: ignore[attr-defined]
        return (
            {t: (lst.tolist(), sys.getsizeof(lst)) for t, lst in post.items()},
            _full(s),
        )

    on = fill()
    wo_knobs._GROW_DIRECT = False
    try:
        off = fill()
    finally:
        wo_knobs._GROW_DIRECT = True
    assert on == off
    assert len(on[0]["tok"][0]) == texts * 3
