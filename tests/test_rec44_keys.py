"""A relevance-1.0 record is its own key in the relevance order (branch bytes44, issue #20).

``state._REC_KEYS`` (read when a state is made): in the seq layout with the compiled
record, ``_by_relevance`` keys a relevance-1.0 record by the record itself (which orders
by its ``seq`` against records and ints, ``_crecord.c``), not by an int of its seq: the
record's last per-entry object. Checked here:

* the compiled record against ints: ``<``, ``<=``, ``>``, ``>=`` as its seq, an int past
  int64 above (or below) every record, ``==`` never, bools and floats refused;
* a state machine drives a state with the knob on and one with it off (the seq int
  keys) through ``test_entrybytes2``'s rules (new ids, upserts by id and key,
  relevances 1.0 / 0.5 / 0.0, ttls, deletes, consolidations, bounded memories, views
  held while runs of versions pile up, walks across writes and vacuums): the same
  structures, removals (evictions in the same order), top-k and walks, each ``_check``ed
  (on: every relevance-1.0 key *is* its record);
* the eviction order against a model (lowest ``log2(relevance) + t / half_life``,
  unvalidated first, ties by seq) across mixed relevances, deletes and upserts, and
  after a restore of the live rows into a fresh state, with the knob on and off;
* a durable memory reopened from its file: the order and the evictions after it;
* the removal of one version among a run of its id's versions across sublists, and of
  a record not in the order (ValueError, nothing changed);
* the C ``store_inserts`` (``seq_keys`` 2) and ``load_inserts`` (``rec_keys``) make the
  records keys (``store_inserts`` as the Python path does: ``test_entrybytes2``), and
  refuse a wrong flag before any change.
"""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._record import PyRecord, Record

from .setups import relevance_keys
from .strategies import examples, run_machine
from .test_entrybytes2 import TwoLayouts

compiled = pytest.mark.skipif(Record is PyRecord, reason="the compiled record is not built")
core = pytest.mark.skipif(
    state_module._store_inserts_c is None, reason="the word-overlap core is not built"
)

BASE = datetime(2026, 1, 1, tzinfo=UTC)
HALF_LIFE = 3600.0


def _state(rec_keys: bool, capacity: int | None = None, load: int | None = None) -> MemoryState:
    saved = state_module._REC_KEYS
    state_module._REC_KEYS = rec_keys
    try:
        s = MemoryState(capacity=capacity, half_life=HALF_LIFE, scorer=WordOverlapScorer())
    finally:
        state_module._REC_KEYS = saved
    if load is not None:
        s._by_relevance._reset(load)
    return s


def _rec_keys_hold(state: MemoryState) -> bool:
    """Every relevance-1.0 key is its record, every other key an int."""
    rel = state._by_relevance
    return all(
        (k is r) if r.entry.relevance == 1.0 else type(k) is int
        for ks, rs in zip(rel._keys, rel._lists, strict=True)
        for k, r in zip(ks, rs, strict=True)
    )


# -- the compiled record against ints ----------------------------------------------------


@compiled
def test_a_record_orders_against_an_int_as_its_seq() -> None:
    s = _state(True)
    s.store(MemoryEntry(category=MemoryCategory.FACT, memory="a", created_at=BASE))
    rec = next(iter(s._by_relevance))
    seq = rec.seq
    for n in (seq - 1, seq, seq + 1, -(2**70), 2**63 - 1, 2**63, 2**126 | seq, 0, -1):
        assert (rec < n) == (seq < n)
        assert (rec <= n) == (seq <= n)
        assert (rec > n) == (seq > n)
        assert (rec >= n) == (seq >= n)
        assert (n < rec) == (n < seq)
        assert (n >= rec) == (n >= seq)
        assert rec != n
        assert not rec == n  # noqa: SIM201 - identity equality: never equal to an int
    for other in (True, False, 1.0, float(seq), "1", None):
        with pytest.raises(TypeError):
            rec < other  # noqa: B015
        with pytest.raises(TypeError):
            other > rec  # noqa: B015
    assert sorted([2**64, rec, seq - 1, 2**63]) == [seq - 1, rec, 2**63, 2**64]


# -- the two layouts alike ----------------------------------------------------------------


class RecKeysAgainstSeqInts(TwoLayouts):
    """``test_entrybytes2``'s machine: side True a state with ``_REC_KEYS`` on, side
    False one with it off (both in the seq layout)."""

    def _new_state(self, on: bool, capacity: int | None, load: int) -> MemoryState:
        s = _state(on, capacity, load)
        s.journal = []
        return s

    def _layouts(self, on: MemoryState, off: MemoryState) -> None:
        assert on._rec_keys
        assert on._relkey is state_module._relevance_key_rec
        assert _rec_keys_hold(on)
        assert not off._rec_keys
        assert off._relkey is state_module._relevance_key_seq
        assert relevance_keys(on._by_relevance)[0] == [
            [("rec", k) if k < 2**63 else k for k in sub]
            for sub in relevance_keys(off._by_relevance)[0]
        ]


@compiled
def test_record_keys_and_seq_ints_agree() -> None:
    run_machine(RecKeysAgainstSeqInts, 30, 30)


# -- the eviction order against a model ----------------------------------------------------


class _Model:
    """The live entries of a bounded memory by id: (validated, relevance, created_at,
    arrival); the victim is the lowest (validated, log2(relevance) + t / half_life,
    arrival), as ``MemoryState._evkey`` and the eviction orders define it."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.live: dict[uuid.UUID, tuple[bool, float, datetime, int]] = {}
        self.arrivals = 0
        self.evicted: list[uuid.UUID] = []

    def store(self, e: MemoryEntry) -> None:
        old = self.live.get(e.id)
        if old is not None:  # an upsert keeps its created_at and its arrival (seq)
            self.live[e.id] = (e.validated, e.relevance, old[2], old[3])
            return
        if len(self.live) >= self.capacity:
            victim = min(self.live, key=lambda i: self._key(self.live[i]))
            del self.live[victim]
            self.evicted.append(victim)
        self.arrivals += 1
        self.live[e.id] = (e.validated, e.relevance, e.created_at, self.arrivals)

    @staticmethod
    def _key(v: tuple[bool, float, datetime, int]) -> tuple[bool, float, int]:
        validated, rel, created, arrival = v
        log_rel = math.log2(rel) if rel > 0.0 else -math.inf
        return (validated, log_rel + created.timestamp() / HALF_LIFE, arrival)

    def by_relevance(self) -> list[uuid.UUID]:
        return sorted(self.live, key=lambda i: (-self.live[i][1], self.live[i][3]))


_RELS = [1.0, 1.0, 1.0, 0.5, 0.25, 0.0]

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("new"),
            st.sampled_from(_RELS),
            st.integers(0, 20_000),  # seconds after BASE: keys cross between relevances
            st.booleans(),
        ),
        st.tuples(st.just("upsert"), st.integers(0, 99), st.sampled_from(_RELS), st.booleans()),
        st.tuples(st.just("delete"), st.integers(0, 99)),
    ),
    max_size=60,
)


def _drive(state: MemoryState, model: _Model, steps: list[Any], ids: list[uuid.UUID]) -> None:
    for step in steps:
        if step[0] == "new":
            _, rel, secs, validated = step
            ident = uuid.UUID(int=len(ids) + 1)
            ids.append(ident)
            e = MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"m{len(ids)}",
                id=ident,
                relevance=rel,
                created_at=BASE + timedelta(seconds=secs),
                validated=validated,
            )
        elif step[0] == "upsert":
            live = sorted(model.live)
            if not live:
                continue
            ident = live[step[1] % len(live)]
            e = MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"u{step[1]}",
                id=ident,
                relevance=step[2],
                created_at=BASE,  # the stored version's created_at wins
                validated=step[3],
            )
        else:
            live = sorted(model.live)
            if not live:
                continue
            ident = live[step[1] % len(live)]
            assert state.delete(ident)
            del model.live[ident]
            state.publish()
            state.vacuum(state.published)
            continue
        state.store(e)
        model.store(e)
        state.publish()
        state.vacuum(state.published)


def _order(state: MemoryState) -> list[uuid.UUID]:
    return [r.entry.id for r in state.view().by_relevance()]


@compiled
@settings(max_examples=examples(80), deadline=None)
@given(
    rec_keys=st.booleans(),
    capacity=st.integers(1, 8),
    load=st.sampled_from([4, 1000]),
    before=ops,
    after=ops,
)
def test_eviction_order_is_the_models_across_a_restore(
    rec_keys: bool, capacity: int, load: int, before: list[Any], after: list[Any]
) -> None:
    state = _state(rec_keys, capacity, load)
    evicted: list[uuid.UUID] = []
    state.on_remove = lambda e, cause: cause == "evicted" and evicted.append(e.id)  # type: ignore[func-returns-value]
    model = _Model(capacity)
    ids: list[uuid.UUID] = []
    _drive(state, model, before, ids)
    state._check()
    assert evicted == model.evicted
    assert _order(state) == model.by_relevance()
    assert state._rec_keys == rec_keys
    assert _rec_keys_hold(state) or not rec_keys
    # Restored from the live rows (a file's, in seq order) into a fresh state, then
    # driven on: the same evictions as the model's.
    rows = sorted((r.seq, r.entry) for r in state._by_relevance if r.died == state_module.NEVER)
    restored = _state(rec_keys, capacity, load)
    restored.load(rows)
    restored._check()
    assert _order(restored) == model.by_relevance()
    if rec_keys:
        assert _rec_keys_hold(restored)
    evicted.clear()
    model.evicted.clear()
    restored.on_remove = state.on_remove
    _drive(restored, model, after, ids)
    restored._check()
    assert evicted == model.evicted
    assert _order(restored) == model.by_relevance()


@compiled
@pytest.mark.parametrize("rec_keys", [True, False])
def test_a_durable_memory_reopened_keeps_the_order_and_evictions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rec_keys: bool
) -> None:
    monkeypatch.setattr(state_module, "_REC_KEYS", rec_keys)
    db = tmp_path / "m.db"
    capacity = 12
    model = _Model(capacity)
    entries = [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"entry {i}",
            id=uuid.UUID(int=i + 1),
            relevance=_RELS[i % len(_RELS)],
            created_at=BASE + timedelta(seconds=(i * 7919) % 9000),
            validated=i % 9 == 4,
        )
        for i in range(30)
    ]

    evicted: list[uuid.UUID] = []

    def removed(e: MemoryEntry, cause: str) -> None:
        if cause == "evicted":
            evicted.append(e.id)

    def opened() -> Any:
        return open_memory(
            path=db, capacity=capacity, half_life=HALF_LIFE, scorer=WordOverlapScorer(),
            on_remove=removed,
        )  # fmt: skip

    async def first() -> None:
        async with opened() as memory:
            for e in entries[:20]:
                await memory.store(e)
                model.store(e)
            for e in entries[:20:5]:  # deletes (whether live or evicted)
                if e.id in model.live:
                    assert await memory.delete(e.id)
                    del model.live[e.id]
            for e in entries[1:20:3]:  # updates of the live ones, another relevance
                if e.id in model.live:
                    new = MemoryEntry(
                        category=MemoryCategory.FACT,
                        memory=e.memory + " v2",
                        id=e.id,
                        relevance=_RELS[(e.id.int + 2) % len(_RELS)],
                        created_at=e.created_at,
                        validated=e.validated,
                    )
                    await memory.store(new)
                    model.store(new)

    async def second() -> None:
        async with opened() as memory:
            state = memory._state
            state._check()
            assert state._rec_keys == rec_keys
            assert _rec_keys_hold(state) or not rec_keys
            assert _order(state) == model.by_relevance()
            for e in entries[20:]:
                await memory.store(e)
                model.store(e)
            assert not await memory.delete(uuid.uuid4())  # a round trip: all applied
            state._check()
            assert _order(state) == model.by_relevance()

    trio.run(first)
    assert evicted == model.evicted
    evicted.clear()
    model.evicted.clear()
    trio.run(second)
    assert evicted == model.evicted
    assert len(evicted) >= 5


# -- removal among versions ----------------------------------------------------------------


@compiled
@settings(max_examples=examples(60), deadline=None)
@given(
    load=st.sampled_from([4, 5, 1000]),
    before=st.integers(0, 12),
    versions=st.integers(2, 30),
    after=st.integers(0, 12),
    drop=st.lists(st.integers(0, 29), unique=True),
)
def test_one_version_leaves_its_run_by_identity(
    load: int, before: int, versions: int, after: int, drop: list[int]
) -> None:
    """Views hold every version of one id (a run of equal keys across sublists); the
    vacuum then purges the versions no view holds any more, in any order."""
    s = _state(True, load=load)
    for i in range(before):
        s.store(MemoryEntry(category=MemoryCategory.FACT, memory=f"b{i}", id=uuid.UUID(int=i + 1)))
    views = []
    for j in range(versions):
        s.store(MemoryEntry(category=MemoryCategory.FACT, memory=f"x{j}", id=uuid.UUID(int=10_000)))
        s.publish()
        views.append(s.view())
    for i in range(after):
        s.store(
            MemoryEntry(category=MemoryCategory.FACT, memory=f"a{i}", id=uuid.UUID(int=i + 500))
        )
    s.publish()
    s._check()
    for j in sorted({d % versions for d in drop}, reverse=True):
        views.pop(j)
        s.vacuum(min((v.version for v in views), default=s.published))
        s._check()
        for view in views:
            assert [r.entry.memory for r in view.by_relevance()] == [
                r.entry.memory for r in _model_records(s, view)
            ]
    assert _rec_keys_hold(s)


def _model_records(state: MemoryState, view: Any) -> list[Any]:
    recs = [r for r in state._by_relevance if view.visible(r)]
    recs.sort(key=lambda r: (-r.entry.relevance, r.seq))
    return recs


@compiled
def test_removing_a_record_not_in_the_order_changes_nothing() -> None:
    s = _state(True, load=4)
    for i in range(10):
        s.store(MemoryEntry(category=MemoryCategory.FACT, memory=f"t{i}", id=uuid.UUID(int=i + 1)))
    stranger = _state(True)
    stranger.store(MemoryEntry(category=MemoryCategory.FACT, memory="t", id=uuid.UUID(int=3)))
    other = next(iter(stranger._by_relevance))  # the same seq as none, or as one of s's
    before = relevance_keys(s._by_relevance), list(s._by_relevance)
    with pytest.raises(ValueError, match="not in the relevance order"):
        s._relevance_remove(other)
    assert (relevance_keys(s._by_relevance), list(s._by_relevance)) == before
    s._check()


# -- the C paths ----------------------------------------------------------------------------


@compiled
@core
def test_store_inserts_refuses_a_wrong_seq_keys_before_any_change() -> None:
    wo: Any = kernels._wo
    s = _state(True)
    s.store_many([MemoryEntry(category=MemoryCategory.FACT, memory="a")], None)
    rel = s._by_relevance
    run: list[Any] = []
    args = [
        [MemoryEntry(category=MemoryCategory.FACT, memory="b")], 0,
        s.version + 1, s._by_id, s._prev, s._rel_parts, rel._lists, rel._keys, rel._maxes,
        8, s._namespaces, s._dups, s._dup_keys, s.journal, run, [],
    ]  # fmt: skip
    before = (dict(s._by_id), relevance_keys(rel), list(rel))
    for wrong in (3, 1, 0, -2, 2.0, None):
        with pytest.raises(TypeError, match="seq_keys"):
            wo.store_inserts(*args, wrong, s._cols)
    assert (dict(s._by_id), relevance_keys(rel), list(rel)) == before
    assert wo.store_inserts(*args, 2, s._cols) == 1
    assert rel._keys[-1][-1] is run[0] is rel._lists[-1][-1] is rel._maxes[-1]


@compiled
@core
@pytest.mark.parametrize("rec_keys", [True, False])
def test_load_inserts_makes_record_keys(rec_keys: bool) -> None:
    fn = state_module._load_inserts_c
    assert fn is not None
    s = _state(True)
    s.store(MemoryEntry(category=MemoryCategory.FACT, memory="first", id=uuid.UUID(int=999)))
    rows = [
        (i + 2, MemoryEntry(category=MemoryCategory.FACT, memory=f"r{i}", id=uuid.UUID(int=i + 1)))
        for i in range(5)
    ]
    records: list[Any] = []
    keys: list[Any] = []
    got = fn(
        rows, 0, None, 1, s._by_id, s._namespaces, s._dups, s._dup_keys, records, None,
        s._rel_parts, keys, s._cols, rec_keys,
    )  # fmt: skip
    assert got == 5
    if rec_keys:
        assert all(k is r for k, r in zip(keys, records, strict=True))
    else:
        assert keys == [r.seq for r in records]
