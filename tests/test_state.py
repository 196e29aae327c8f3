"""MemoryState paths the state machine reaches only by chance: duplicate groups, eviction ties."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs
import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState, _relevance_key
from actormem._index.textfold import fold, fold_python
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._record import NEVER


def _state() -> MemoryState:
    return MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())


def test_folded_matches_split_join() -> None:
    for text in [
        "",
        " ",
        "a",
        " a",
        "a ",
        "a  b",
        "a b",
        "a\nb",
        "A\u00a0B",
        "STRASSE ß",
        "x\x1cy",
        "tab\tsep",
        "\u2003em",
        "ok text, fine.",
    ]:
        want = " ".join(text.casefold().split())
        assert fold(text) == want, text
        assert fold_python(text) == want, text


def test_duplicate_groups_grow_and_shrink_back_to_a_record() -> None:
    state = _state()
    a, b, c = (
        MemoryEntry.new(MemoryCategory.FACT, t) for t in ("Same  text", "same text", "SAME\ttext")
    )
    other = MemoryEntry.new(MemoryCategory.FACT, "other")
    ra = state.store(a).record
    state.store(other)
    assert state._dups[state._dupkey(ra)] is ra  # a group of one
    assert not state._dup_keys
    rb = state.store(b).record
    assert state._dups[state._dupkey(ra)] == {ra: None, rb: None}
    assert state._dup_keys == {state._dupkey(ra)}
    state.store(c)
    state._check()
    state.delete(a.id)
    state._check()
    assert type(state._dups[state._dupkey(ra)]) is dict  # two left
    state.delete(c.id)
    state._check()
    assert state._dups[state._dupkey(ra)] is rb  # back to the record
    assert not state._dup_keys
    state.delete(b.id)
    state._check()
    assert state._dupkey(ra) not in state._dups


def test_consolidate_merges_a_group_and_leaves_the_survivor_single() -> None:
    state = _state()
    a, b = (MemoryEntry.new(MemoryCategory.FACT, t) for t in ("x  y", "X y"))
    state.store(a)
    state.store(b)
    state.store(MemoryEntry.new(MemoryCategory.INSIGHT, "x y"))  # other category: kept
    stats = state.consolidate()
    state._check()
    assert stats.merged == 1
    assert len(state) == 2
    survivor = state.current(a.id)
    assert survivor is not None
    assert state._dups[state._dupkey(survivor)] is survivor
    assert not state._dup_keys


def test_eviction_ties_break_by_seq_and_validated_go_last() -> None:
    when = datetime(2025, 1, 1, tzinfo=UTC)

    def entry(text: str, validated: bool = False) -> MemoryEntry:
        e = MemoryEntry(category=MemoryCategory.FACT, memory=text, created_at=when)
        return e.as_validated() if validated else e

    # Equal keys (same time and relevance): the earliest seq goes first.
    state = MemoryState(capacity=2, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    a, b, c = (entry(t) for t in "abc")
    state.store(a)
    state.store(b)
    assert state.store(c).evicted.entry == a  # type: ignore[union-attr]
    state._check()
    # Only validated records: the earliest seq goes; then an unvalidated one goes
    # first although it is the newest.
    state = MemoryState(capacity=2, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    w1, w2 = entry("w1", validated=True), entry("w2", validated=True)
    state.store(w1)
    state.store(w2)
    u = entry("u")
    assert state.store(u).evicted.entry == w1  # type: ignore[union-attr]
    assert state.store(entry("u2")).evicted.entry == u  # type: ignore[union-attr]
    state._check()


def test_eviction_refreshes_keys_that_access_left_stale() -> None:
    """Access raises keys without re-sorting the eviction order; the eviction still takes
    the entry with the smallest fresh key, and a key that went down is re-sorted at once."""
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    state = MemoryState(capacity=3, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    a, b, c = (
        MemoryEntry(category=MemoryCategory.FACT, memory=t, created_at=t0 + timedelta(hours=i))
        for i, t in enumerate("abc")
    )
    for e in (a, b, c):
        state.store(e)
    # a and b retrieved later than c was created: both keys rise above c's, both stale.
    state.apply_access({a.id: (1, t0 + timedelta(days=2)), b.id: (1, t0 + timedelta(days=1))}, 0)
    stale = [key[1].entry for key in state._evict[False]]
    assert stale == [a, b, c]  # the order was not re-sorted
    state._check()
    assert state.store(MemoryEntry.new(MemoryCategory.FACT, "d")).evicted.entry == c  # type: ignore[union-attr]
    state._check()
    # Popping c refreshed nothing else; next goes b (older access than a), then a.
    assert state.store(MemoryEntry.new(MemoryCategory.FACT, "e")).evicted.entry == b  # type: ignore[union-attr]
    assert [key[1].entry for key in state._evict[False]][0] == a
    state._check()
    # A retrieve dated before created_at lowers the key: re-sorted at once.
    f = MemoryEntry(category=MemoryCategory.FACT, memory="f", created_at=t0 + timedelta(days=30))
    g = MemoryEntry(category=MemoryCategory.FACT, memory="g", created_at=t0 + timedelta(days=40))
    state = MemoryState(capacity=2, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
    state.store(f)
    state.store(g)
    state.apply_access({g.id: (1, t0)}, 0)
    assert [key[1].entry for key in state._evict[False]] == [g, f]
    state._check()
    assert state.store(MemoryEntry.new(MemoryCategory.FACT, "h")).evicted.entry == g  # type: ignore[union-attr]
    state._check()


def test_relevance_keys_order_like_the_tuples_they_pack() -> None:
    state = _state()
    rels = [1.0, 0.5, 1.0, 0.0, -0.0, 0.5, 0.25, 5e-324, 0.05, 0.04999999999999999]
    recs = [
        state.store(MemoryEntry.new(MemoryCategory.FACT, f"t{i}").with_relevance(r)).record
        for i, r in enumerate(rels)
    ]
    upserted = state.store(attrs.evolve(recs[1].entry, memory="t1 again")).record
    recs.append(upserted)  # same relevance and seq as recs[1], a later born
    order = [r.entry.memory for r in state._by_relevance]
    expected = sorted(recs, key=lambda r: (-r.entry.relevance, r.seq, r.born))
    assert order == [r.entry.memory for r in expected]
    assert len({_relevance_key(r) for r in recs}) == len(recs)
    state.publish()
    view = state.view()
    for below in (2.0, 1.0, 0.5, 0.05, 5e-324, 0.0, -0.0, -1.0):
        got = [r.entry.memory for r in view.by_relevance(below=below)]
        want = [r.entry.memory for r in expected if r.entry.relevance < below and r.died == NEVER]
        assert got == want, below
    state._check()


def test_duplicate_key_folds_ascii_and_unicode_alike() -> None:
    from actormem._engine.state import _normalised
    from actormem._record import Record

    def key(text: str) -> tuple[object, ...]:
        return _normalised(Record(MemoryEntry.new(MemoryCategory.FACT, text), 1, 1))

    assert key("Hello  World") == key("hello world") == key(" HELLO\tworld\n")
    assert key("STRASSE") == key("straße")  # casefold, not lower
    assert key("Σίσυφος") == key("ΣΊΣΥΦΟΣ")
    assert key("a b") != key("ab")


def test_seq_is_the_storing_version_and_shares_its_int() -> None:
    """A new id's seq is the version that stored it (one int object for born and seq);
    an upsert keeps the seq; seqs increase across deletes and access versions."""
    state = _state()
    a, b = (MemoryEntry.new(MemoryCategory.FACT, t * 300) for t in "ab")
    ra = state.store(a).record
    state.apply_access({a.id: (1, datetime(2030, 1, 1, tzinfo=UTC))}, 0)
    rb = state.store(b).record
    assert ra.born is ra.seq
    assert rb.born is rb.seq
    assert ra.seq < rb.seq
    assert rb.seq == state.version
    upsert = state.store(attrs.evolve(a, memory="a2")).record
    assert upsert.seq == ra.seq
    assert upsert.born > rb.seq
    state.publish()
    state._check()


def test_unbounded_memories_keep_no_eviction_order() -> None:
    state = _state()
    assert state.capacity is None
    assert state._evict is None
    rec = state.store(MemoryEntry.new(MemoryCategory.FACT, "x")).record
    state.apply_access({rec.entry.id: (1, datetime(2000, 1, 1, tzinfo=UTC))}, 0)
    assert rec.evkey is None
    state.delete(rec.entry.id)
    state.publish()
    state._check()


def test_restore_keeps_the_saved_seq_and_refuses_disorder() -> None:
    state = _state()
    a, b, c = (MemoryEntry.new(MemoryCategory.FACT, t) for t in "abc")
    assert state.restore(a, 5).record.seq == 5
    with pytest.raises(ValueError, match="not above 5"):
        state.restore(b, 5)
    with pytest.raises(ValueError, match="stored already"):
        state.restore(a, 9)
    rb = state.restore(b, 9).record
    assert rb.seq == 9  # the version jumped to the saved seq
    assert rb.born is rb.seq
    assert state.store(c).record.seq == 10
    state.delete(c.id)  # version 11
    # Not above the working version: kept as given, in its own int.
    re = state.restore(MemoryEntry.new(MemoryCategory.FACT, "e"), 11).record
    assert re.seq == 11
    assert re.born == 12
    state.publish()
    state._check()


@pytest.mark.parametrize("upserted", [0, 14, 15, 16, 17, 63, 64, 80, 99])
def test_by_relevance_sees_every_version_across_chunk_boundaries(upserted: int) -> None:
    # An upsert keeps seq and, here, the relevance: the two versions sit side by side in
    # the relevance order. Wherever a chunk of by_relevance ends, a view must see its
    # own version of every id (regression: the re-seek skipped the newer version).
    state = _state()
    entries = [
        MemoryEntry.new(MemoryCategory.FACT, f"e{i}").with_relevance(0.5) for i in range(100)
    ]
    for e in entries:
        state.store(e)
    state.publish()
    old = state.view()
    renewed = attrs.evolve(entries[upserted], memory="renewed")
    state.store(renewed)
    state.publish()
    new = state.view()
    assert [r.entry.id for r in old.by_relevance()] == [e.id for e in entries]
    got = list(new.by_relevance())
    assert [r.entry.id for r in got] == [e.id for e in entries]
    assert got[upserted].entry.memory == "renewed"


def test_namespace_lists_drop_purged_records_lazily_and_views_keep_theirs() -> None:
    state = _state()
    a = [MemoryEntry.new(MemoryCategory.FACT, f"a{i}").with_namespace("a") for i in range(100)]
    b = [MemoryEntry.new(MemoryCategory.FACT, f"b{i}").with_namespace("b") for i in range(3)]
    for e in a + b:
        state.store(e)
    state.publish()
    old = state.view()  # held: nothing it sees may be purged
    for e in a[:60]:
        state.delete(e.id)
    state.publish()
    assert state.vacuum(old.version) == 0
    assert [r.entry for r in old.in_namespace(("a",)) if r is not None] == a
    state.vacuum(state.published)  # the old view is released
    state._check()
    group = state._namespaces[("a",)]
    assert group.live == 40
    assert len(group.recs) < 60  # compacted once a quarter was purged
    new = state.view()
    assert [r.entry for r in new.in_namespace(("a",)) if r is not None] == a[60:]
    assert list(new.namespaces(None)) == [("a",), ("b",)]
    for e in b:
        state.delete(e.id)
    state.publish()
    state.vacuum(state.published)
    state._check()
    assert ("b",) not in state._namespaces
    assert list(state._ns_sorted) == [("a",)]
    # An upsert appends its new version; the dead one leaves with the vacuum.
    state.store(attrs.evolve(a[99], memory="changed"))
    state.publish()
    state.vacuum(state.published)
    state._check()
    assert [r.entry.memory for r in state.view().in_namespace(("a",)) if r is not None][-1] == (
        "changed"
    )


def test_a_load_leaves_the_collector_alone() -> None:
    # A process-wide gc.freeze() would keep a closed memory alive through any reference
    # cycle alive at the time (the owner's commit closure is one): the application's call.
    import gc

    rows = [(i + 1, MemoryEntry.new(MemoryCategory.FACT, f"t{i}")) for i in range(3)]
    before = gc.get_freeze_count()
    state = _state()
    state.load(rows)
    assert gc.get_freeze_count() == before
    assert gc.isenabled()
    state._check()


def test_namespace_list_rebuilds_in_steps_across_stores_and_views(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actormem._engine import state as state_module

    monkeypatch.setattr(state_module, "_NS_STEP", 3)
    state = _state()
    live: list[MemoryEntry] = []
    for i in range(40):
        e = MemoryEntry.new(MemoryCategory.FACT, f"x{i}")
        state.store(e)
        live.append(e)
    state.publish()
    group = state._namespaces[()]
    replaced = 0
    for i in range(80):  # delete the oldest, store a new one, purge, list
        state.delete(live.pop(0).id)
        e = MemoryEntry.new(MemoryCategory.FACT, f"y{i}")
        state.store(e)
        live.append(e)
        state.publish()
        held = state.view()
        before = group.recs
        state.vacuum(state.published)
        replaced += group.recs is not before
        state._check()
        assert [r.entry for r in held.in_namespace(()) if r is not None] == live
    assert replaced >= 2
    assert len(group.recs) <= 80  # 40 live: rebuilt, not grown by every purge
