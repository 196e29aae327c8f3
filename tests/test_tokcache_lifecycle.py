"""The token cache through a state's whole life: three states (the index's add through
the token cache, through ``add_text_known`` with ``knobs._ADD_CACHED = False``, and in
Python) take the same ``store_many`` batches (duplicates, upserts by id and by
``(namespace, key)``, ttl entries, eviction at capacity), deletes, consolidations and
vacuums (the purge deletes and replaces posting lists), renumberings (a small
``_RENUMBER_MIN``), and reloads from the file's rows and the index image (a new
numbering and posting dict, a new cache). After every step they must hold the same
posting lists in the same order, pass their ``_check`` (which verifies the cache) and
answer queries alike; tokens share cache slots (``test_tokcache_collide.SHORT``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.images import dump_index
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import NEVER

from .strategies import BASE_TIME, run_machine
from .test_tokcache_collide import LONG, SHORT

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

PATHS = ("cached", "known", "python")
WORDS = ["the", "Cat", "cats", "é", "straße", *SHORT, *LONG[:2], "x\x00y"]
IDS = [uuid.UUID(int=i) for i in range(1, 9)]


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    words = draw(st.lists(st.sampled_from(WORDS), max_size=5))
    fresh = draw(st.integers(0, 2))
    words += [f"n{draw(st.integers(0, 10**6))}x{k}" for k in range(fresh)]
    key = draw(st.none() | st.sampled_from(["k1", "k2"]))
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=draw(st.sampled_from([" ", "\t", "  "])).join(words),
        id=draw(st.sampled_from(IDS)),
        namespace=draw(st.sampled_from([(), ("a",)])),
        key=key,
        created_at=BASE_TIME + timedelta(seconds=draw(st.integers(0, 50))),
        relevance=draw(st.sampled_from([0.05, 0.5, 1.0])),
        ttl=draw(st.none() | st.just(3600.0)),
    )


class Lifecycle(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.states: dict[str, MemoryState] = {}

    @initialize(capacity=st.sampled_from([None, 5]))
    def make(self, capacity: int | None) -> None:
        self.capacity = capacity
        for path in PATHS:
            self.states[path] = self._new(capacity)

    @staticmethod
    def _new(capacity: int | None) -> MemoryState:
        return MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())

    def _each(self) -> Iterator[tuple[str, MemoryState]]:
        for path in PATHS:
            kernels.WO_CORE = path != "python"
            wo_knobs._ADD_CACHED = path == "cached"
            try:
                yield path, self.states[path]
            finally:
                kernels.WO_CORE = kernels.WO_CORE_AVAILABLE
                wo_knobs._ADD_CACHED = True

    def _settle(self, state: MemoryState) -> None:
        state.publish()
        state.vacuum(state.published)

    @rule(batch=st.lists(entries(), max_size=8))
    def store_many(self, batch: list[MemoryEntry]) -> None:
        for _, state in self._each():
            state.store_many(batch, BASE_TIME)
            self._settle(state)

    @rule(entry_id=st.sampled_from(IDS))
    def delete(self, entry_id: uuid.UUID) -> None:
        for _, state in self._each():
            state.delete(entry_id)
            self._settle(state)

    @rule()
    def consolidate(self) -> None:
        got = []
        for _, state in self._each():
            got.append(state.consolidate())
            self._settle(state)
        assert got[0] == got[1] == got[2]

    @rule()
    def reload(self) -> None:
        for path, state in self._each():
            live = sorted(
                (r for r in state._by_id.values() if r.died == NEVER), key=lambda r: r.seq
            )
            view = state.view()
            rows = [(r.seq, view.entry(r)) for r in view.records()]
            image = dump_index(state.index, live)
            fresh = self._new(self.capacity)
            fresh.load(rows, image)
            self.states[path] = fresh

    @rule(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3))
    def query(self, words: list[str]) -> None:
        got = []
        for _, state in self._each():
            hits = state.index.top_k(state.view(), " ".join(words), 8, None)
            got.append([(score, r.entry.id) for score, r in hits])
        assert got[0] == got[1] == got[2]

    @invariant()
    def same(self) -> None:
        if not self.states:
            return
        seen = []
        for _, state in self._each():
            state._check()
            e: Any = state.index._e  # type: ignore[attr-defined]
            post = [(tok, list(lst)) for tok, lst in e.post.items()]
            recs = sorted((r.seq, r.entry) for r in state.view().records())
            seen.append((post, recs))
        assert seen[0] == seen[1] == seen[2]


def test_lifecycle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(Lifecycle, 25, 30)
