"""Bytes per entry (issue #20, item 6, branch ``entrybytes``): a record has six slots
(the upsert chain in ``MemoryState._prev``, ``purged`` in the ``evkey`` slot), BM25 finds a
record's group by its document instead of a record -> group dict, and keeps a group's
single record alone in its slot (``knobs._SINGLE_RECORD``). Random owner histories (repeated
texts, upserts, deletes, purges under held snapshots, reads at old snapshots) give the
same answers on both layouts, and every structure's invariants hold. A stored entry is
taken out of the cyclic collector's lists (``state._UNTRACK_ENTRIES``), and so are
BM25's groups and their term arrays (``knobs._UNTRACK``).
"""

from __future__ import annotations

import gc
import random
import sys
import uuid
from collections.abc import Callable
from typing import Any, TypeVar, cast

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import BM25Scorer, knobs
from actormem._index.bm25.index import BM25Index
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._record import NEVER, Record

T = TypeVar("T")

WORDS = ["deploy", "blue", "green", "cluster", "fix", "error", "cache", "retry"]


def _with_single(flag: bool, call: Callable[[], T]) -> T:
    saved = knobs._SINGLE_RECORD
    knobs._SINGLE_RECORD = flag
    try:
        return call()
    finally:
        knobs._SINGLE_RECORD = saved


def _text(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS[: rng.randint(2, len(WORDS))], k=rng.randint(1, 5)))


@pytest.mark.parametrize("seed", range(12))
def test_bm25_single_records_answer_as_lists(seed: int) -> None:
    rng = random.Random(seed)
    states = {
        flag: MemoryState(capacity=None, half_life=86400.0, scorer=BM25Scorer())
        for flag in (True, False)
    }
    ids: list[uuid.UUID] = []
    texts = [_text(rng) for _ in range(6)]  # few texts: groups of several records
    held: list[dict[bool, int]] = []
    for _ in range(300):
        op = rng.random()
        if op < 0.5 or not ids:
            if ids and rng.random() < 0.3:
                ident = rng.choice(ids)  # an upsert: the old seq, maybe another group
            else:
                ident = uuid.uuid4()
                ids.append(ident)
            entry = MemoryEntry(
                category=MemoryCategory.FACT,
                memory=rng.choice(texts) if rng.random() < 0.7 else _text(rng),
                id=ident,
            )
            for flag, state in states.items():
                _with_single(flag, lambda s=state, e=entry: s.store(e))  # type: ignore[misc]
        elif op < 0.65:
            ident = rng.choice(ids)
            for flag, state in states.items():
                _with_single(flag, lambda s=state, i=ident: s.delete(i))  # type: ignore[misc]
        elif op < 0.8:
            for state in states.values():
                state.publish()
            if rng.random() < 0.5:
                held.append({flag: s.published for flag, s in states.items()})
            elif held:
                held.pop(0)
            for flag, state in states.items():
                horizon = min([h[flag] for h in held] + [state.published])
                _with_single(flag, lambda s=state, h=horizon: s.vacuum(h))  # type: ignore[misc]
        else:
            query = _text(rng)
            limit = rng.randint(1, 8)
            answers = []
            old = bool(held) and rng.random() < 0.5
            for flag, state in states.items():
                state.publish()
                view = state.view()
                if old:
                    view = type(view)(state, held[0][flag], len(state))
                got = state.index.top_k(view, query, limit, None)
                answers.append([(score, rec.seq, rec.entry.id) for score, rec in got])
            assert answers[0] == answers[1]
    for state in states.values():
        state.publish()
        state._check()
    # A group's own slot (``_recs``, or its table slot with bm25 knobs._GROUP_COLUMNS).
    on, off = (cast(BM25Index, states[flag].index) for flag in (True, False))
    assert any(type(_slot(on, g)) is Record for g in on._groups.values())
    assert all(isinstance(_slot(off, g), list) for g in off._groups.values())  # a _Recs: a list


def _slot(index: BM25Index, group: Any) -> Any:
    return index._table[group] if index._cols else group._recs


def _entry(text: str) -> MemoryEntry:
    return MemoryEntry(category=MemoryCategory.FACT, memory=text)


def test_bm25_finds_groups_by_document() -> None:
    index = BM25Scorer().make_index()
    recs = [Record(_entry("same words here"), born=1, seq=seq) for seq in range(1, 41)]
    for rec in recs:
        index.add(rec)
    with pytest.raises(ValueError, match="already indexed"):
        index.add(recs[7])
    stranger = Record(_entry("same words here"), born=1, seq=99)
    with pytest.raises(KeyError):
        index.retire(stranger)
    with pytest.raises(KeyError):
        index.document_terms(stranger)
    with pytest.raises(ValueError, match="retired before"):
        index.purge(recs[0])
    for k, rec in enumerate(recs[:30]):
        rec.died = 2 + k
        index.retire(rec)
        index.purge(rec)
        with pytest.raises(KeyError):
            index.purge(rec)
        index._check(recs[k + 1 :])
        group = index._indexed(recs[-1])
        assert group is not None
        assert 2 * index._dead_of(group) <= len(index._recs_of(group))  # compacted as before
    assert index._records() == recs[30:]
    for k, rec in enumerate(recs[30:]):
        rec.died = 100 + k
        index.retire(rec)
        index.purge(rec)
    index._check([])
    assert not index._gone
    assert not index._groups
    index.add(stranger)  # the text again: a new group
    assert index.document_terms(stranger) == {"same": 1, "words": 1, "here": 1}


@pytest.mark.parametrize("scorer", [WordOverlapScorer, BM25Scorer])
def test_upsert_chains_live_beside_the_records(scorer: Callable[[], object]) -> None:
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer())  # type: ignore[arg-type]
    first = _entry("deploy uses the blue cluster")
    state.store(first)
    state.publish()
    views = [state.view()]
    for k in range(3):
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=f"v{k} blue", id=first.id))
        state.publish()
        views.append(state.view())
    texts = [v.get(first.id).entry.memory for v in views]  # type: ignore[union-attr]
    assert texts == ["deploy uses the blue cluster", "v0 blue", "v1 blue", "v2 blue"]
    assert len(state._prev) == 3  # every older version still readable
    state._check()
    state.vacuum(views[2].version)  # the two oldest versions go
    assert [v.get(first.id) is None for v in views] == [True, True, False, False]
    assert len(state._prev) == 1
    state._check()
    state.vacuum(state.published)
    assert not state._prev
    rec = views[-1].get(first.id)
    assert rec is not None
    assert not rec.purged
    assert rec.died == NEVER
    state.delete(first.id)
    state.publish()
    state.vacuum(state.published)
    assert rec.purged
    assert rec.evkey is not None  # the mark shares the slot
    rec.purged = False
    assert not rec.purged
    assert rec.evkey is None
    state._check()


def test_a_record_takes_96_bytes() -> None:
    rec = Record(_entry("x"), born=1, seq=1)
    assert len(Record.__slots__) == 7  # step A: the entry store and the slot number
    assert sys.getsizeof(rec) <= 96  # GC header, object header, seven slots


@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("untrack", [True, False])
@pytest.mark.parametrize("many", [True, False])
def test_stored_entries_leave_the_collector(
    monkeypatch: pytest.MonkeyPatch, untrack: bool, many: bool
) -> None:
    monkeypatch.setattr(state_module, "_UNTRACK_ENTRIES", untrack)
    state = MemoryState(capacity=None, half_life=86400.0, scorer=WordOverlapScorer())
    batch = [_entry(f"text {i}") for i in range(5)]
    assert all(gc.is_tracked(e) for e in batch)
    if many:
        state.store_many(batch)
    else:
        for e in batch:
            state.store(e)
    # step A: the state keeps no entry object (the store holds its fields); with the
    # knob off (the default since) the caller's entries are left as they are
    if not untrack:
        assert all(gc.is_tracked(e) for e in batch)
    loaded = MemoryState(capacity=None, half_life=86400.0, scorer=WordOverlapScorer())
    rows = [(seq, _entry(f"row {seq}")) for seq in range(1, 4)]
    loaded.load(rows)
    assert all(gc.is_tracked(e) for _, e in rows)  # the load never untracks them
    state.publish()
    assert state.view().get(batch[2].id).entry == batch[2]  # type: ignore[union-attr]
    state._check()


@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
def test_gc_untrack_refuses_other_types() -> None:
    """One call for a list of objects of exactly one type; anything else is refused
    before any object is untracked (the two functions it replaced: an object and its
    type, and a list without a type check)."""
    untrack: Any = kernels.gc_untrack
    assert untrack is not None
    entries = [_entry("x"), _entry("y")]
    for objs, cls in [
        (entries[0], MemoryEntry),  # an object, not a list
        (tuple(entries), MemoryEntry),
        (_ListOf(entries), MemoryEntry),  # a list's subclass
        (entries, 3),
        (entries, object),  # not exactly of the type
        ([*entries, []], MemoryEntry),
        ([[], *entries], list[int]),  # a generic alias is not a type
    ]:
        with pytest.raises(TypeError):
            untrack(objs, cls)
        assert all(gc.is_tracked(e) for e in entries)  # refused before any was untracked
    with pytest.raises(TypeError):
        untrack(entries)
    assert untrack(entries, MemoryEntry) == 2
    assert not any(gc.is_tracked(e) for e in entries)
    assert untrack(entries, MemoryEntry) == 0  # already out
    assert untrack([5, 6], int) == 0  # not a tracked type
    assert untrack([], MemoryEntry) == 0


class _ListOf(list):  # type: ignore[type-arg]
    pass


@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("untrack", [True, False])
def test_bm25_groups_leave_the_collector(monkeypatch: pytest.MonkeyPatch, untrack: bool) -> None:
    monkeypatch.setattr(knobs, "_UNTRACK", untrack)
    monkeypatch.setattr(knobs, "_GROUP_COLUMNS", False)  # group objects (none with columns)
    state = MemoryState(capacity=None, half_life=86400.0, scorer=BM25Scorer())
    for text in ["deploy blue", "deploy green", "deploy blue"]:
        state.store(_entry(text))
    state.publish()
    groups = list(cast(BM25Index, state.index)._groups.values())
    assert len(groups) == 2
    assert [gc.is_tracked(g) for g in groups] == [not untrack] * 2
    pool = cast(BM25Index, state.index)._pool
    if pool is None:  # bm25 knobs._TERM_POOL off: an array per group
        assert [gc.is_tracked(g.terms) for g in groups] == [not untrack] * 2
    got = state.index.top_k(state.view(), "deploy blue", 3, None)
    assert [rec.entry.memory for _, rec in got] == ["deploy blue", "deploy blue", "deploy green"]
    state._check()
