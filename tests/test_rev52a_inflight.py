"""Review rev52a of p99_52's three cuts (``knobs._LEFT_EXTEND``, ``knobs._DIRECT_STEPS``,
``scoring._LEAN_TAKE``): retrieves kept in flight over one memory (made and not started,
stepped part way, closed early) while the owner stores, upserts, deletes, evicts, vacuums
and renumbers between their steps, and newer retrieves extend the cached match sets the
older ones read; every finished retrieve's top-k, scores and ties equal to the
from-scratch reference over its own view. Small ``_STEP`` and ``_SCAN_NEW`` so that a
left word's cached set is often exactly one step short, one more, or past the kept
texts."""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState, View
from actormem._index import scoring
from actormem._index.scoring import ScratchPool, drain
from actormem._index.wordoverlap import ccore, word_overlap_score
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import knobs_set
from .strategies import run_machine

pytestmark = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")

BASE = datetime(2026, 1, 1, tzinfo=UTC)
# Words of every class: common ones (cached dense), substrings of each other, case
# variants, non-ASCII (one folding to two letters), short ones in the masks and not.
WORDS = [
    "the", "then", "deploy", "Deploy", "deployed", "cat", "cats", "status", "é", "É",
    "İstanbul", "ß", "SS", "ab", "abc", "zz", "x", "on", '{"k":1}', "what", "when",
]  # fmt: skip
QUERY_WORDS = [*WORDS, "eplo", "at", "stan", "bcd", "ss", "i̇stanbul", "wh", "hen"]


def _brute(view: View, query: str, limit: int, accept: Any) -> list[tuple[float, int]]:
    """The reference: every record of ``view`` scored from scratch, (-score, seq) order."""
    scored = []
    for rec in view.records():
        if accept is not None and not accept(rec):
            continue
        e = rec.entry
        scored.append((word_overlap_score(e.memory, e.tags, e.relevance, query), rec.seq))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return scored[:limit]


class InFlight(RuleBasedStateMachine):
    """One memory, up to three retrieves in flight, the owner writing between steps."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.i = 0
        #: (generator, view, query, limit, accept) of the retrieves in flight.
        self.flying: list[tuple[Generator[None, None, Any], View, str, int, Any]] = []
        self.kept: list[View] = []  # old snapshots read now and then
        self.asked: list[str] = ["the deploy cat", "é ß abc"]  # queries asked, to ask again

    @initialize(budget=st.sampled_from([0, 2, 8]), capacity=st.sampled_from([None, 30]))
    def make(self, budget: int, capacity: int | None) -> None:
        self.state = MemoryState(
            capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=budget)
        )

    def _entry(self, words: list[str], rel: float, id: uuid.UUID | None = None) -> MemoryEntry:
        self.i += 1
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join(words) if self.i % 3 else "\t".join(w.upper() for w in words),
            relevance=rel,
            created_at=BASE + timedelta(seconds=self.i),
            id=id or uuid.UUID(int=self.i),
            tags=["deploy the cat"] if self.i % 7 == 0 else [],
        )

    def _vacuum(self) -> None:
        views = [f[1] for f in self.flying] + self.kept
        self.state.vacuum(min([self.state.published, *(v.version for v in views)]))

    # ---------------------------------------------------------------- owner writes

    @rule(
        target=ids,
        words=st.lists(st.sampled_from(WORDS), min_size=0, max_size=6),
        rel=st.sampled_from([0.1, 0.5, 0.9]),
    )
    def store(self, words: list[str], rel: float) -> uuid.UUID:
        entry = self._entry([*words, f"u{self.i}"], rel)
        self.state.store(entry)
        self.state.publish()
        self._vacuum()
        return entry.id

    @rule(seed=st.integers(0, 1 << 30), count=st.sampled_from([1, 2, 3, 4, 4, 5, 9, 20]))
    def store_many(self, seed: int, count: int) -> None:
        # Counts around _STEP (4): the cached sets one step short, exactly, or more.
        rng = np.random.default_rng(seed)
        for _ in range(count):
            k = int(rng.integers(1, 6))
            words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), k)]
            self.state.store(self._entry([*words, f"m{self.i}"], float(rng.choice([0.2, 1.0]))))
        self.state.publish()
        self._vacuum()

    @rule(entry_id=ids, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
    def upsert(self, entry_id: uuid.UUID, words: list[str]) -> None:
        self.state.store(self._entry(words, 0.7, id=entry_id))
        self.state.publish()
        self._vacuum()

    @rule(entry_id=ids)
    def delete(self, entry_id: uuid.UUID) -> None:
        self.state.delete(entry_id)
        self.state.publish()
        self._vacuum()

    @rule(count=st.integers(1, 12))
    def delete_oldest(self, count: int) -> None:
        # Many purges at once: the numbering renumbered (_RENUMBER_MIN is small here).
        for rec in list(self.state.view().records())[:count]:
            self.state.delete(rec.entry.id)
        self.state.publish()
        self._vacuum()

    # ---------------------------------------------------------------- readers

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=8),
        limit=st.one_of(st.integers(1, 5), st.just(1000)),
        steps=st.integers(0, 3),
        filtered=st.booleans(),
    )
    def begin(self, words: list[str], limit: int, steps: int, filtered: bool) -> None:
        if len(self.flying) >= 3:
            return
        self._begin(" ".join(words), limit, steps, filtered)

    @rule(which=st.integers(0, 7), limit=st.sampled_from([2, 1000]), steps=st.integers(0, 2))
    def begin_again(self, which: int, limit: int, steps: int) -> None:
        # A query asked before: its words' cached sets now a few groups short.
        self._begin(self.asked[-1 - which % len(self.asked)], limit, steps, False)

    @rule(
        count=st.integers(1, 5),
        which=st.integers(0, 7),
        steps=st.integers(0, 2),
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=4),
    )
    def store_few_and_ask_again(self, count: int, which: int, steps: int, words: list[str]) -> None:
        # _STEP (4) groups or one fewer or one more stored since a query's sets were cached.
        query = self.asked[-1 - which % len(self.asked)]
        for k in range(count):
            self.state.store(self._entry([*words[k % len(words) :], "the", f"f{self.i}"], 0.5))
        self.state.publish()
        self._vacuum()
        self._begin(query, 3, steps, False)

    def _begin(self, query: str, limit: int, steps: int, filtered: bool) -> None:
        if len(self.flying) >= 3:
            return
        self.asked.append(query)
        view = self.state.view()
        accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
        gen = self.state.index.top_k_steps(view, query, limit, accept)  # type: ignore[attr-defined]
        self.flying.append((gen, view, query, limit, accept))
        self._advance(len(self.flying) - 1, steps)

    def _advance(self, k: int, steps: int) -> None:
        gen, view, query, limit, accept = self.flying[k]
        for _ in range(steps):
            try:
                next(gen)
            except StopIteration as stop:
                del self.flying[k]
                self._compare(stop.value, view, query, limit, accept)
                self._vacuum()  # after the reference read the view
                return

    def _compare(self, hits: Any, view: View, query: str, limit: int, accept: Any) -> None:
        got = [(score, rec.seq) for score, rec in hits]
        assert got == _brute(view, query, limit, accept), query

    @rule(which=st.integers(0, 2), steps=st.integers(1, 4))
    def advance(self, which: int, steps: int) -> None:
        if self.flying:
            self._advance(which % len(self.flying), steps)

    @rule(which=st.integers(0, 2))
    def finish(self, which: int) -> None:
        if self.flying:
            self._advance(which % len(self.flying), 1 << 30)

    @rule(which=st.integers(0, 2))
    def cancel(self, which: int) -> None:
        if self.flying:
            gen = self.flying.pop(which % len(self.flying))[0]
            gen.close()  # a retrieve cancelled at a checkpoint (or never started)
            self._vacuum()

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=8),
        limit=st.one_of(st.integers(1, 5), st.just(1000)),
        old=st.booleans(),
    )
    def retrieve_now(self, words: list[str], limit: int, old: bool) -> None:
        # Drained at once: extends the cached sets the retrieves in flight read.
        view = self.kept[0] if old and self.kept else self.state.view()
        query = " ".join(words)
        self.asked.append(query)
        hits = drain(self.state.index.top_k_steps(view, query, limit, None))  # type: ignore[attr-defined]
        self._compare(hits, view, query, limit, None)

    @rule()
    def keep_snapshot(self) -> None:
        if len(self.kept) < 2:
            self.kept.append(self.state.view())

    @rule()
    def drop_snapshot(self) -> None:
        if self.kept:
            self.kept.pop(0)
            self._vacuum()

    @rule()
    def consistent(self) -> None:
        self.state._check()

    def teardown(self) -> None:
        while self.flying:
            self._advance(0, 1 << 30)


@pytest.fixture(params=["bytes", "bits", "mixed", "tiny_cache"])
def small(request: pytest.FixtureRequest) -> Iterator[str]:
    extra: dict[str, Any] = {}
    if request.param == "bits":
        extra = {"_BITS_MIN": 0}
    elif request.param == "mixed":  # both forms of a word's set cached in turn
        extra = {"_BITS_MIN": 20, "_BITS_MIN_WORDS": 3}
    else:  # the byte counts (where _LEFT_EXTEND applies)
        extra = {"_BITS_MIN": 1 << 15, "_BITS_MIN_WORDS": 0}
    if request.param == "tiny_cache":  # cached sets dropped as others are remembered
        extra["_CACHE_BYTES"] = 1200
    with knobs_set(wo_knobs, _STEP=4, _SCAN_NEW=16, _RENUMBER_MIN=6, _MASK_BATCH=8, **extra):
        yield request.param


def test_in_flight_retrieves_match_the_reference(small: str) -> None:
    assert wo_knobs._LEFT_EXTEND
    assert wo_knobs._DIRECT_STEPS
    assert scoring._LEAN_TAKE
    run_machine(InFlight, 60, 40)


def test_lean_take_keeps_byte_orders_and_sizes_apart() -> None:
    # Spares of dtypes with the same scalar type or the same size never answer for
    # each other's types: a big-endian uint64 spare is no np.uint64 spare, nor an int64
    # one a uint64 one.
    pool = ScratchPool()
    big = np.ones(100, np.dtype(">u8"))
    signed = np.ones(100, np.int64)
    pool.give(big, 100)
    pool.give(signed, 100)
    got = drain(pool.take_steps(np.uint64, 10, 100))
    assert got is not big
    assert got is not signed
    assert got.dtype == np.dtype(np.uint64)
    again = drain(pool.take_steps(np.dtype(">u8"), 10, 100))
    assert again is big
    assert not again[:10].any()
    again = drain(pool.take_steps(np.int64, 10, 100))
    assert again is signed


def test_lean_take_of_an_unhashable_dtype_spec() -> None:
    # A structured dtype spelled as a list or dict (unhashable) is taken as np.dtype
    # takes it, as before _LEAN_TAKE, not refused by the type lookup.
    pool = ScratchPool()
    for spec in ([("a", "<i4")], {"names": ["a"], "formats": ["<i4"]}):
        got = drain(pool.take_steps(spec, 3, 5))
        assert got.dtype == np.dtype(spec)
        assert len(got) == 5


@pytest.mark.parametrize("direct", [True, False])
def test_made_before_a_renumbering_stepped_after(
    monkeypatch: pytest.MonkeyPatch, direct: bool
) -> None:
    # Generators made over a view, the owner renumbering (the texts deleted before the
    # view, purged once an older snapshot goes) and storing (new groups, the cached sets
    # extended by a newer retrieve) before their first step: each answers for its own
    # view, whichever numbering it took; one made and never started, closed.
    monkeypatch.setattr(wo_knobs, "_DIRECT_STEPS", direct)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 1 << 15)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN_WORDS", 0)
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=0)
    )

    def entry(i: int, text: str) -> MemoryEntry:
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=text,
            relevance=(i % 4) / 4,
            created_at=BASE + timedelta(seconds=i),
            id=uuid.UUID(int=i + 1),
        )

    for i in range(40):
        state.store(entry(i, f"the {WORDS[i % len(WORDS)]} deploy item{i}"))
    state.publish()
    query = "the deploy é item1"
    drain(state.index.top_k_steps(state.view(), query, 5, None))  # type: ignore[attr-defined]
    older = state.view()  # held: the deletes below not purged yet
    for i in range(30):
        state.delete(uuid.UUID(int=i + 1))
    state.publish()
    view = state.view()
    first = state.index._e  # type: ignore[attr-defined]
    gen = state.index.top_k_steps(view, query, 5, None)  # type: ignore[attr-defined]
    unused = state.index.top_k_steps(view, "deploy", 5, None)  # type: ignore[attr-defined]
    del older
    state.vacuum(view.version)  # the 30 purged: renumbered
    assert state.index._e is not first  # type: ignore[attr-defined]
    for i in range(40, 43):
        state.store(entry(i, f"the deploy é late{i}"))
    state.publish()
    newer = state.view()
    fresh = drain(state.index.top_k_steps(newer, query, 5, None))  # type: ignore[attr-defined]
    assert [(s, r.seq) for s, r in fresh] == _brute(newer, query, 5, None)
    unused.close()
    hits = drain(gen)
    assert [(s, r.seq) for s, r in hits] == _brute(view, query, 5, None)
    state._check()
