"""The I/O-free state against a plain model, step by step (Hypothesis stateful testing).

The model is a list of entries in insertion order with their access bookkeeping; every
answer the state gives (top-k ids and scores, evictions, consolidation stats, old
snapshots' contents) is recomputed from the model by brute force.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.snapshot import make_filter
from actormem._engine.state import MemoryState, View
from actormem._index.wordoverlap import word_overlap_score

from .strategies import TAGS, categories, entries, examples, namespaces, queries, times

HALF_LIFE = 3 * 24 * 3600.0


@attrs.define
class Item:
    entry: MemoryEntry
    seq: int
    count: int
    last: datetime | None

    def visible_entry(self) -> MemoryEntry:
        return attrs.evolve(self.entry, access_count=self.count, last_accessed=self.last)


def evict_key(item: Item) -> tuple[bool, float, int]:
    e = item.entry
    t = (item.last or e.created_at).timestamp()
    log_rel = math.log2(e.relevance) if e.relevance > 0 else -math.inf
    return (e.validated, log_rel + t / HALF_LIFE, item.seq)


def brute_top_k(
    items: list[Item], query: str, limit: int, accept: object
) -> list[tuple[uuid.UUID, float]]:
    scored = []
    for it in items:
        if accept is not None and not accept(_FakeRec(it.entry)):  # type: ignore[operator]
            continue
        e = it.entry
        scored.append((word_overlap_score(e.memory, e.tags, e.relevance, query), it.seq, e.id))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [(i, s) for s, _, i in scored[:limit]]


class _FakeRec:
    def __init__(self, entry: MemoryEntry) -> None:
        self.entry = entry


def folded(e: MemoryEntry) -> tuple[tuple[str, ...], str, str]:
    return (e.namespace, e.category.value, " ".join(e.memory.casefold().split()))


class StateMachine(RuleBasedStateMachine):
    ids = Bundle("ids")

    @initialize(capacity=st.sampled_from([None, 1, 3, 6]), budget=st.sampled_from([0, 1, 2, 4096]))
    def setup(self, capacity: int | None, budget: int) -> None:
        scorer = WordOverlapScorer(essential_budget=budget)
        self.state = MemoryState(capacity=capacity, half_life=HALF_LIFE, scorer=scorer)
        self.capacity = capacity
        self.model: dict[uuid.UUID, Item] = {}
        self.seq = 0
        self.evictions_since = 0
        self.held: list[tuple[View, list[Item]]] = []

    # -------------------------------------------------------------- helpers

    def items(self) -> list[Item]:
        return sorted(self.model.values(), key=lambda it: it.seq)

    def publish(self) -> None:
        self.state.publish()

    def horizon(self) -> int:
        return min([self.state.published] + [v.version for v, _ in self.held])

    # -------------------------------------------------------------- writes

    @rule(target=ids, entry=entries())
    def store_new(self, entry: MemoryEntry) -> uuid.UUID:
        if entry.id in self.model:
            return multiple()  # type: ignore[return-value]
        evicted_expected = None
        if self.capacity is not None and len(self.model) >= self.capacity:
            victim = min(self.model.values(), key=evict_key)
            evicted_expected = victim.entry.id
            del self.model[victim.entry.id]
            self.evictions_since += 1
        out = self.state.store(entry)
        self.publish()
        assert out.replaced is None
        assert (out.evicted.entry.id if out.evicted else None) == evicted_expected
        self.seq += 1
        self.model[entry.id] = Item(entry, self.seq, entry.access_count, entry.last_accessed)
        return entry.id

    @rule(id=ids, data=st.data())
    def upsert(self, id: uuid.UUID, data: st.DataObject) -> None:
        entry = data.draw(entries(id=id))
        old = self.model.get(id)
        if old is None:
            # The id was deleted or evicted: this is a fresh store (may evict).
            if self.capacity is not None and len(self.model) >= self.capacity:
                victim = min(self.model.values(), key=evict_key)
                del self.model[victim.entry.id]
                self.evictions_since += 1
            self.state.store(entry)
            self.seq += 1
            self.model[id] = Item(entry, self.seq, entry.access_count, entry.last_accessed)
        else:
            out = self.state.store(entry)
            assert out.replaced is not None
            assert out.evicted is None
            kept = attrs.evolve(entry, created_at=old.entry.created_at)
            self.model[id] = Item(kept, old.seq, entry.access_count, entry.last_accessed)
        self.publish()

    @rule(id=consumes(ids))
    def delete(self, id: uuid.UUID) -> None:
        expected = id in self.model
        assert (self.state.delete(id) is not None) == expected
        self.model.pop(id, None)
        self.publish()

    @rule(id=st.uuids())
    def delete_unknown(self, id: uuid.UUID) -> None:
        if id not in self.model:
            assert self.state.delete(id) is None

    @rule(data=st.data(), when=times)
    def access(self, data: st.DataObject, when: datetime) -> None:
        if not self.model:
            return
        chosen = data.draw(st.lists(st.sampled_from(sorted(self.model)), min_size=1, max_size=3))
        hits: dict[uuid.UUID, tuple[int, datetime]] = {}
        for id in chosen:
            n = hits.get(id, (0, when))[0]
            hits[id] = (n + 1, when)
        changed = self.state.apply_access(hits, self.horizon())
        assert changed == len(hits)
        for id, (n, t) in hits.items():
            it = self.model[id]
            it.count += n
            it.last = t if it.last is None or t > it.last else it.last
        self.publish()

    @rule()
    def consolidate(self) -> None:
        before = len(self.model)
        pruned = merged = saved = 0
        for it in self.items():
            if it.entry.relevance < 0.05 and not it.entry.validated:
                del self.model[it.entry.id]
                pruned += 1
                saved += len(it.entry.memory.encode("utf-8"))
        groups: dict[object, list[Item]] = {}
        for it in self.items():
            groups.setdefault(folded(it.entry), []).append(it)
        for group in groups.values():
            if len(group) < 2:
                continue
            keep, rest = group[0], group[1:]
            tags: dict[str, None] = {}
            for it in group:
                tags.update(dict.fromkeys(it.entry.tags))
            lasts = [it.last for it in group if it.last is not None]
            new = attrs.evolve(
                keep.entry,
                created_at=min(it.entry.created_at for it in group),
                relevance=max(it.entry.relevance for it in group),
                access_count=sum(it.count for it in group),
                last_accessed=max(lasts) if lasts else None,
                tags=tuple(tags),
                validated=any(it.entry.validated for it in group),
            )
            for it in rest:
                del self.model[it.entry.id]
                merged += 1
                saved += len(it.entry.memory.encode("utf-8"))
            self.model[keep.entry.id] = Item(new, keep.seq, new.access_count, new.last_accessed)
        stats = self.state.consolidate()
        self.publish()
        assert (stats.entries_before, stats.entries_after) == (before, len(self.model))
        assert (stats.pruned, stats.merged, stats.bytes_saved) == (pruned, merged, saved)
        assert stats.evicted == self.evictions_since
        self.evictions_since = 0

    # -------------------------------------------------------------- snapshots

    @precondition(lambda self: len(self.held) < 3)
    @rule()
    def hold_snapshot(self) -> None:
        frozen = [attrs.evolve(it) for it in self.items()]
        self.held.append((self.state.view(), frozen))

    @precondition(lambda self: bool(self.held))
    @rule(i=st.integers(0, 2))
    def release_snapshot(self, i: int) -> None:
        self.held.pop(i % len(self.held))

    @rule(budget=st.sampled_from([None, 1, 3]))
    def vacuum(self, budget: int | None) -> None:
        self.state.vacuum(self.horizon(), budget)

    # -------------------------------------------------------------- reads

    @rule(
        query=queries,
        limit=st.integers(0, 5),
        namespace=st.none() | namespaces,
        category=st.none() | categories,
        tags=st.none() | st.lists(st.sampled_from(TAGS), max_size=1),
    )
    def retrieve(
        self,
        query: str,
        limit: int,
        namespace: tuple[str, ...] | None,
        category: MemoryCategory | None,
        tags: list[str] | None,
    ) -> None:
        accept = make_filter(namespace, category, tags)
        view = self.state.view()
        got = [(r.entry.id, s) for s, r in self.state.index.top_k(view, query, limit, accept)]
        assert got == brute_top_k(self.items(), query, limit, accept)
        for view, frozen in self.held:
            old = [(r.entry.id, s) for s, r in self.state.index.top_k(view, query, limit, accept)]
            assert old == brute_top_k(frozen, query, limit, accept)

    @invariant()
    def snapshots_see_their_version(self) -> None:
        view = self.state.view()
        assert len(view) == len(self.model) == len(self.state)
        want = [it.visible_entry() for it in self.items()]
        assert [view.entry(r) for r in view.records()] == want
        for id, it in self.model.items():
            rec = view.get(id)
            assert rec is not None
            assert view.entry(rec) == it.visible_entry()
        for old, frozen in self.held:
            assert len(old) == len(frozen)
            assert [old.entry(r) for r in old.records()] == [it.visible_entry() for it in frozen]

    @invariant()
    def check(self) -> None:
        self.state._check()


StateMachine.TestCase.settings = settings(
    max_examples=examples(75),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestState = StateMachine.TestCase
