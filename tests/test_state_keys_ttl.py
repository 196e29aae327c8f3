"""Keys, payloads, listing, namespaces and expiry of the I/O-free state against a model.

The model is a dict of live entries by id; each rule applies the same change to both,
and every invariant recomputes the answers (lookups by key, listings, namespace lists,
payload filters) from the model by brute force.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta

import attrs
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.snapshot import (
    list_namespaces_at,
    list_records,
    list_steps,
    make_filter,
    with_alive,
)
from actormem._engine.state import MemoryState

from .strategies import BASE_TIME, examples

NAMESPACES = [("a",), ("a", "b"), ("a", "c"), ("d",), ("d", "a", "b")]
KEYS = ["k1", "k2", "k3"]
IDS = [uuid.UUID(int=i) for i in range(1, 7)]
#: Payload filters, each with the answer written out by hand (independent of _json.py).
WHERE: list[tuple[dict[str, object], object]] = [
    ({"n": 1}, lambda v: v is not None and v["n"] == 1),
    ({"n": {"$gt": 1}}, lambda v: v is not None and v["n"] > 1),
    ({"n": {"$ne": 2}}, lambda v: v is not None and v["n"] != 2),  # no payload: no match
    ({"tag.x": "y"}, lambda v: v is not None and "tag" in v),
    ({"n": {"$lte": 0}}, lambda v: v is not None and v["n"] <= 0),
    ({"tag": {"x": "y"}, "n": {"$gte": 2}}, lambda v: v is not None and "tag" in v and v["n"] >= 2),
]


@attrs.define
class Model:
    entry: MemoryEntry
    expires: datetime | None


@st.composite
def payload_entries(draw: st.DrawFn) -> MemoryEntry:
    value = draw(
        st.none()
        | st.fixed_dictionaries({"n": st.integers(-1, 3)}, optional={"tag": st.just({"x": "y"})})
    )
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=draw(st.sampled_from(["alpha", "beta", "alpha beta"])),
        id=draw(st.sampled_from(IDS)),
        namespace=draw(st.sampled_from(NAMESPACES)),
        key=draw(st.none() | st.sampled_from(KEYS)),
        value=value,
        created_at=BASE_TIME + timedelta(seconds=draw(st.integers(0, 100))),
        ttl=draw(st.none() | st.sampled_from([5.0, 30.0])),
    )


class KeysTtlMachine(RuleBasedStateMachine):
    @initialize(capacity=st.sampled_from([None, 4]))
    def setup(self, capacity: int | None) -> None:
        self.state = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
        self.removed: list[tuple[uuid.UUID, str]] = []
        self.state.on_remove = lambda e, cause: self.removed.append((e.id, cause))
        self.model: dict[uuid.UUID, Model] = {}
        self.now = BASE_TIME + timedelta(seconds=200)

    def by_key(self, ns: tuple[str, ...], key: str) -> uuid.UUID | None:
        for id, m in self.model.items():
            if m.entry.namespace == ns and m.entry.key == key:
                return id
        return None

    @rule(entry=payload_entries())
    def store(self, entry: MemoryEntry) -> None:
        self.removed.clear()
        out = self.state.store(entry, self.now)
        self.state.publish()
        if entry.key is not None:
            holder = self.by_key(entry.namespace, entry.key)
            if holder is not None and holder != entry.id:
                entry = attrs.evolve(entry, id=holder)  # the key wins
        old = self.model.get(entry.id)
        if old is not None:
            created = old.entry.created_at
            entry = attrs.evolve(
                entry, created_at=created, updated_at=max(entry.updated_at, created)
            )
        elif out.evicted is not None:
            del self.model[out.evicted.entry.id]
        expires = None if entry.ttl is None else self.now + timedelta(seconds=entry.ttl)
        self.model[entry.id] = Model(attrs.evolve(entry, expires_at=expires), expires)
        assert out.record.entry.id == entry.id
        assert out.record.entry.created_at == entry.created_at
        assert (out.replaced is not None) == (old is not None)

    @rule(ns=st.sampled_from(NAMESPACES), key=st.sampled_from(KEYS))
    def delete_by_key(self, ns: tuple[str, ...], key: str) -> None:
        rec = self.state.current_by_key(ns, key)
        id = self.by_key(ns, key)
        assert (rec is None) == (id is None)
        if rec is not None:
            self.state.delete(rec.entry.id)
            self.state.publish()
            del self.model[rec.entry.id]

    @rule(seconds=st.integers(0, 20))
    def advance_and_expire(self, seconds: int) -> None:
        self.now += timedelta(seconds=seconds)
        self.removed.clear()
        done = self.state.expire(self.now)
        self.state.publish()
        gone = [
            id for id, m in self.model.items() if m.expires is not None and m.expires <= self.now
        ]
        assert done == len(gone)
        assert sorted(self.removed) == sorted((id, "expired") for id in gone)
        for id in gone:
            del self.model[id]

    @rule(id=st.sampled_from(IDS), back=st.integers(0, 10))
    def refresh(self, id: uuid.UUID, back: int) -> None:
        when = self.now - timedelta(seconds=back)
        self.state.refresh({id: when}, self.state.published)
        self.state.publish()
        m = self.model.get(id)
        if m is not None and m.entry.ttl is not None:
            new = when + timedelta(seconds=m.entry.ttl)
            if m.expires is None or new > m.expires:
                m.expires = new

    @invariant()
    def check(self) -> None:
        self.state._check()
        view = self.state.view()
        alive = view.alive(self.now)
        live = {id: m for id, m in self.model.items() if m.expires is None or m.expires > self.now}
        # Lookups by key.
        for ns in NAMESPACES:
            for key in KEYS:
                rec = view.by_key(ns, key)
                want = self.by_key(ns, key)
                assert (None if rec is None else rec.entry.id) == want
        # Every entry as the model has it (expiry as refreshed).
        for id, m in self.model.items():
            rec = view.get(id)
            assert rec is not None
            got = view.entry(rec)
            assert got.expires_at == m.expires
            assert attrs.evolve(got, expires_at=None) == attrs.evolve(m.entry, expires_at=None)
        assert len(view) == len(self.model)
        # Listing: unexpired entries under a prefix, newest updated_at first.
        for prefix in [(), ("a",), ("d", "a")]:
            for where, wanted in [(None, None), *WHERE]:
                accept = with_alive(make_filter(prefix, None, None, where), alive)
                got = list_records(view, prefix, accept, 100, 0)
                want_ids = {
                    id
                    for id, m in live.items()
                    if m.entry.namespace[: len(prefix)] == prefix
                    and (wanted is None or wanted(m.entry.value))  # type: ignore[operator]
                }
                if where is not None:  # a filter never matches an entry without a payload
                    assert all(r.entry.value is not None for r in got)
                assert {r.entry.id for r in got} == want_ids
                stamps = [r.entry.updated_at for r in got]
                assert stamps == sorted(stamps, reverse=True)
                assert list_records(view, prefix, accept, 2, 1) == got[1:3]
        # Namespaces holding an unexpired entry.
        names = sorted({m.entry.namespace for m in live.values()})
        assert list_namespaces_at(view, alive, None, None, None, 100, 0) == names
        assert list_namespaces_at(view, alive, ("*", "a"), None, None, 100, 0) == [
            n for n in names if len(n) >= 2 and n[1] == "a"
        ]
        assert list_namespaces_at(view, alive, ("d", "*"), None, None, 100, 0) == [
            n for n in names if len(n) >= 2 and n[0] == "d"
        ]
        assert (
            list_namespaces_at(view, alive, ("a",), None, None, 1, 1)
            == [n for n in names if n[0] == "a"][1:2]
        )
        assert list_namespaces_at(view, alive, None, ("b",), 1, 100, 0) == sorted(
            {n[:1] for n in names if n[-1] == "b"}
        )


TestKeysTtl = KeysTtlMachine.TestCase
TestKeysTtl.settings = settings(
    max_examples=examples(60),
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def test_listing_in_steps_is_exact_while_the_owner_writes() -> None:
    """list_steps yields between chunks; stores, upserts, deletes and vacuums between any
    two steps leave its answer that of the version it started at."""
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    ids = [uuid.UUID(int=i) for i in range(1, 2001)]

    def entry(i: int, ns: tuple[str, ...], n: int) -> MemoryEntry:
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"text {i}",
            id=ids[i],
            namespace=ns,
            key=f"k{i}",
            value={"n": n},
            created_at=BASE_TIME + timedelta(seconds=i % 97),
        )

    for i in range(1500):
        state.store(entry(i, NAMESPACES[i % 3], i % 5))
    state.publish()
    view = state.view()
    accept = make_filter(("a",), None, None, {"n": {"$gte": 2}})
    want = list_records(view, ("a",), accept, 50, 7)
    steps = list_steps(view, ("a",), accept, 50, 7)
    step = 0
    try:
        while True:
            next(steps)
            step += 1
            i = 1500 + step
            state.store(entry(i, NAMESPACES[step % 3], 4))  # new, invisible to the view
            state.store(entry(step, NAMESPACES[step % 3], 0))  # upsert of a visible one
            state.delete(ids[step + 700])
            state.publish()
            state.vacuum(view.version)  # what the view sees must survive
    except StopIteration as done:
        got = done.value
    assert step > 3  # it really yielded in between
    assert [r.entry for r in got] == [r.entry for r in want]
    state._check()


def test_ttl_is_bounded_and_expiry_never_overflows() -> None:
    """A huge ttl used to overflow ``now + ttl`` inside the owner (found by schemathesis
    through the server): the entry refuses it, and a clock at the end of datetime's range
    saturates instead of raising."""
    import pytest

    from actormem import MAX_TTL, InvalidEntryError
    from actormem._engine.state import LATEST

    with pytest.raises(InvalidEntryError, match="100 years"):
        MemoryEntry(category=MemoryCategory.FACT, memory="x", ttl=1e300)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="x", ttl=MAX_TTL)
    late = datetime.max.replace(tzinfo=BASE_TIME.tzinfo) - timedelta(days=1)
    state.store(entry, now=late)
    state.publish()
    rec = state.current(entry.id)
    assert rec is not None
    assert rec.current_expires() == LATEST
