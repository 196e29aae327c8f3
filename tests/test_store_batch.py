"""The batched store path (branch store4, issue #20's store target).

* ``ccore.add_texts_cached`` (a batch of new texts in one compiled call) leaves exactly
  what ``add_text_cached`` per text leaves, whatever the batches' cuts; bad arguments
  are refused before C, and the C code refuses what memory safety needs itself;
* a state machine drives two states with the same ``store_many`` lists (new ids, the
  same text twice, upserts by id and by key, ttls, expiries, evictions in a bounded
  memory, an item that is not an entry), deletes and publishes: one through
  ``_store_batch`` and the index's ``add_many`` (``state._STORE_BATCH``,
  ``knobs._ADD_MANY``), one through ``_store`` per entry, and requires identical
  structures, journals, removals, errors and top-k after every step;
* ``encode_record``'s direct row (``sqlite_format._ENCODE_DIRECT``) is the row before it.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import Access
from actormem._storage import sqlite_format

from .strategies import examples, run_machine
from .test_storepath import _structures, texts

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)


@core
@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(texts() | st.text("ab \t\u2003é", max_size=12), max_size=24),
    st.lists(st.integers(0, 6), max_size=8),
)
def test_add_texts_cached_is_add_text_cached_per_text(lows: list[str], cuts: list[int]) -> None:
    lows = [t.lower() for t in lows]
    one: tuple[dict[str, array[int]], SubstringVocab] = ({}, SubstringVocab())
    many: tuple[dict[str, array[int]], SubstringVocab] = ({}, SubstringVocab())
    cache_one, cache_many = ccore.token_cache(), ccore.token_cache()
    want = [
        ccore.add_text_cached(one[0], low, gid, one[1], cache_one, 0)
        for gid, low in enumerate(lows)
    ]
    got = 0
    at = 0
    for cut in [*cuts, len(lows)]:
        part = lows[at : at + cut]
        got += ccore.add_texts_cached(many[0], part, at, many[1], cache_many, 0)
        at += len(part)
        if at >= len(lows):
            break
    assert got == sum(want)
    assert _structures(*many) == _structures(*one)


@core
def test_add_texts_cached_examples() -> None:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    assert ccore.add_texts_cached(post, [], 0, vocab, cache, 0) == 0
    assert ccore.add_texts_cached(post, ["a b a", "b c", "é a"], 5, vocab, cache, 0) == 4
    assert {t: list(v) for t, v in post.items()} == {"a": [5, 7], "b": [5, 6], "c": [6], "é": [7]}
    assert ccore.add_texts_cached(post, ["c"], (1 << 31) - 1, vocab, cache, 0) == 0
    assert post["c"][-1] == (1 << 31) - 1


@core
def test_add_texts_cached_refuses_bad_arguments_before_c() -> None:
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    add = ccore.add_texts_cached
    with pytest.raises(TypeError):
        add([], ["a"], 0, vocab, cache, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        add({}, ("a",), 0, vocab, cache, 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="str"):
        add({}, ["a", b"b"], 0, vocab, cache, 0)  # type: ignore[list-item]
    with pytest.raises(TypeError):
        add({}, ["a"], 0, object(), cache, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gid"):
        add({}, ["a"], -1, vocab, cache, 0)
    with pytest.raises(ValueError, match="gid"):
        add({}, [], 1 << 31, vocab, cache, 0)
    with pytest.raises(ValueError, match="gid"):
        add({}, ["a", "b"], (1 << 31) - 1, vocab, cache, 0)
    with pytest.raises(TypeError, match="cache"):
        add({}, ["a"], 0, vocab, object(), 0)
    with pytest.raises(ValueError, match="epoch"):
        add({}, ["a"], 0, vocab, cache, -1)


@core
def test_add_texts_cached_c_checks_memory_safety_itself() -> None:
    from actormem._index import _cwordoverlap as c

    vocab = SubstringVocab()
    cache = c.token_cache()
    with pytest.raises(TypeError):
        c.add_texts_cached({}, ("a",), 0, vocab, cache, 0)
    with pytest.raises(TypeError, match="str"):
        c.add_texts_cached({}, ["a", 1], 0, vocab, cache, 0)
    with pytest.raises(ValueError, match="gid"):
        c.add_texts_cached({}, ["a"], -1, vocab, cache, 0)
    with pytest.raises(ValueError, match="gid"):
        c.add_texts_cached({}, ["a", "b"], (1 << 31) - 1, vocab, cache, 0)
    with pytest.raises((TypeError, ValueError)):
        c.add_texts_cached({}, ["a"], 0, vocab, c.add_text_known, 0)
    with pytest.raises(TypeError, match="array"):
        c.add_texts_cached({"a": [1]}, ["b", "a"], 2, vocab, cache, 0)
    post: dict[str, Any] = {}
    # An error stops the loop: the texts before it stay added.
    with pytest.raises(TypeError, match="array"):
        c.add_texts_cached(post | {"z": [1]}, ["a", "z"], 0, vocab, cache, 1)


# -- two states, the same writes ------------------------------------------------------

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["the", "a", "cat", "Cats", "deploy", "é", "straße", "ab", "x1"]


@st.composite
def items(draw: Any) -> dict[str, Any]:
    return {
        "words": draw(st.lists(st.sampled_from(WORDS), max_size=5)),
        "fresh": draw(st.booleans()),
        "reuse": draw(st.integers(0, 3)),  # 0: a new id, else an earlier one
        "key": draw(st.sampled_from([None, None, "k1", "k2"])),
        "ns": draw(st.sampled_from([(), (), ("a",), ("a", "b")])),
        "rel": draw(st.sampled_from([1.0, 1.0, 0.5, 0.0])),
        "ttl": draw(st.sampled_from([None, None, None, 60.0])),
        "expires": draw(st.sampled_from([None, None, None, 30])),
        "tags": draw(st.sampled_from([(), (), ("t",)])),
        "bad": draw(st.integers(0, 40)) == 0,  # not an entry: store_many raises there
    }


class TwoPaths(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.states: dict[bool, MemoryState] = {}
        self.removed: dict[bool, list[tuple[uuid.UUID, str]]] = {True: [], False: []}
        self.i = 0
        self.ids: list[uuid.UUID] = []

    @initialize(capacity=st.sampled_from([None, None, 4, 9]))
    def make(self, capacity: int | None) -> None:
        for on in (True, False):
            s = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
            s.journal = []
            s.on_remove = lambda e, cause, on=on: self.removed[on].append((e.id, cause))
            self.states[on] = s

    def _side(self, on: bool) -> None:
        """The knobs that tell the two states' paths apart, set for side ``on`` (True
        also puts them back after a step). Subclasses compare other knobs."""
        state_module._STORE_BATCH = on
        wo_knobs._ADD_MANY = on

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        for on, state in self.states.items():
            self._side(on)
            try:
                yield on, state
            finally:
                self._side(True)

    def _entry(self, item: dict[str, Any]) -> Any:
        if item["bad"]:
            return "not an entry"
        self.i += 1
        words = [*item["words"], *([f"t{self.i}"] if item["fresh"] else [])]
        if item["reuse"] and self.ids:
            ident = self.ids[-item["reuse"] % len(self.ids)]
        else:
            ident = uuid.UUID(int=self.i)
            self.ids.append(ident)
        created = BASE + timedelta(seconds=self.i)
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join(words),
            created_at=created,
            id=ident,
            key=item["key"],
            namespace=item["ns"],
            relevance=item["rel"],
            ttl=item["ttl"],
            expires_at=None
            if item["expires"] is None
            else created + timedelta(seconds=item["expires"]),
            tags=item["tags"],
        )

    @rule(batch=st.lists(items(), max_size=12))
    def store_many(self, batch: list[dict[str, Any]]) -> None:
        entries = [self._entry(item) for item in batch]
        errors = []
        for _, state in self._each():
            try:
                state.store_many(entries, BASE + timedelta(seconds=self.i))
                errors.append(None)
            except TypeError as exc:
                errors.append(str(exc))
        assert errors[0] == errors[1]

    @rule(pick=st.integers(0, 50))
    def delete(self, pick: int) -> None:
        if self.ids:
            ident = self.ids[pick % len(self.ids)]
            for _, state in self._each():
                state.delete(ident)

    @rule()
    def publish(self) -> None:
        for _, state in self._each():
            state.publish()
            state.vacuum(state.published)

    @rule(words=st.lists(st.sampled_from([*WORDS, "at"]), min_size=1, max_size=3))
    def query(self, words: list[str]) -> None:
        got = []
        for _, state in self._each():
            state.publish()
            hits = state.index.top_k(state.view(), " ".join(words), 5, None)
            got.append([(score, rec.entry.id, rec.seq) for score, rec in hits])
        assert got[0] == got[1]

    @invariant()
    def same_structures(self) -> None:
        if not self.states:
            return
        seen = [_snapshot(state) for _, state in self._each()]
        assert seen[0] == seen[1]
        assert self.removed[True] == self.removed[False]


def _rec(rec: Any) -> tuple[Any, ...]:
    # a purged record (kept in a namespace list until its lazy rebuild) has released its
    # slot in the entry store (step A, wire29): its entry is gone, its numbers compared
    return (None if rec.purged else rec.entry, rec.seq, rec.born, rec.died)


def _group(g: Any) -> Any:
    return [_rec(r) for r in g] if isinstance(g, dict) else _rec(g)


def _snapshot(state: MemoryState) -> tuple[Any, ...]:
    state._check()
    e: Any = state.index._e  # type: ignore[attr-defined]
    n = e.n
    glist = [
        None if g is None else (_rec(g) if not hasattr(g, "recs") else [_rec(r) for r in g.recs])
        for g in e.glist
    ]
    return (
        [_rec(r) for r in state._by_relevance],
        {k: _rec(r) for k, r in state._by_id.items()},
        dict(state._by_key),
        {k: [_rec(r) for r in ns.recs] + [ns.live] for k, ns in state._namespaces.items()},
        list(state._ns_sorted),
        {k: _group(g) for k, g in state._dups.items()},
        set(state._dup_keys),
        [k[0] for k in state._expiry],
        None if state._evict is None else [[k[0] for k in order] for order in state._evict],
        [(kind, _rec(r)) for kind, r in state.journal or []],
        (state.version, state._seq, state._live, state.stores, state.upserts, state.evictions),
        _structures(e.post, state.index._vocab),  # type: ignore[attr-defined]
        dict(e.groups),
        glist,
        e.maxrel[:n].tolist(),
        e.minseq[:n].tolist(),
        (e.masked, list(e.pending), list(e.recent)),
    )


@core
def test_two_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small enough that the lists fill masks and renumber the groups.
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoPaths, 40, 30)


def test_store_many_without_the_core_agrees(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the compiled core, ``add_many`` adds one record after another."""
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    saved = kernels.WO_CORE
    kernels.WO_CORE = False
    try:
        run_machine(TwoPaths, 15, 20)
    finally:
        kernels.WO_CORE = saved


# -- the durable row ------------------------------------------------------------------


def encoded_both_ways(rec: Any, knob: str) -> list[Any]:
    """``sqlite_format.encode_record(rec)`` with the module's switch ``knob`` on, then
    off (put back on after)."""
    rows = []
    for on in (True, False):
        setattr(sqlite_format, knob, on)
        try:
            rows.append(sqlite_format.encode_record(rec))
        finally:
            setattr(sqlite_format, knob, True)
    return rows


@settings(max_examples=examples(100), deadline=None)
@given(
    ident=st.integers(0, (1 << 128) - 1),
    count=st.sampled_from([0, 3, 2**63 - 1]),
    accessed=st.booleans(),
    expires=st.booleans(),
    value=st.sampled_from([None, {"a": 1}]),
    updated=st.booleans(),
    micro=st.integers(0, 999_999),
)
def test_encode_record_direct_is_the_row_before(
    ident: int, count: int, accessed: bool, expires: bool, value: Any, updated: bool, micro: int
) -> None:
    from actormem._record import Record

    created = BASE + timedelta(microseconds=micro)
    entry = MemoryEntry(
        category=MemoryCategory.FACT,
        memory="m é",
        id=uuid.UUID(int=ident),
        created_at=created,
        updated_at=created + timedelta(seconds=5) if updated else None,
        access_count=count,
        last_accessed=created if accessed else None,
        expires_at=created + timedelta(days=1) if expires else None,
        ttl=60.0 if expires else None,
        value=value,
        key="k" if value else None,
        tags=("x", "y"),
        namespace=("n",),
    )
    rec = Record(entry, 3, 2)
    rows = encoded_both_ways(rec, "_ENCODE_DIRECT")
    assert rows[0] == rows[1]
    assert rows[0][1] == str(uuid.UUID(int=ident))
    # A record with access bookkeeping takes the path before it.
    rec.access = Access(4, count, created + timedelta(seconds=1), None, None)
    assert sqlite_format.encode_record(rec)[8] == min(count, sqlite_format.MAX_ACCESS_COUNT)
