"""BM25Index.top_k_steps, the sliced retrieve of the slicing protocol: the owner writes
(stores, upserts, deletes, vacuums that purge texts and compact posting lists) between
any two steps, and the result stays that of the reader's version."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from actormem._engine.state import MemoryState
from actormem._entry import MemoryCategory, MemoryEntry
from actormem._index import kernels
from actormem._index.bm25 import BM25Index, BM25Scorer
from actormem._index.bm25 import knobs as _bm25
from actormem._index.scoring import ReadView, drain
from actormem._record import NEVER, Record

from .test_bm25 import brute_force

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = [f"w{i}" for i in range(30)]


def _text(rng: random.Random) -> str:
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights, k=rng.randint(1, 12)))


def _entry(rng: random.Random, texts: list[str], id: uuid.UUID | None = None) -> MemoryEntry:
    tags = (rng.choice(["infra", "ops"]),) if rng.random() < 0.1 else ()
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=rng.choice(texts),
        tags=tags,
        relevance=rng.random(),
        created_at=BASE + timedelta(minutes=rng.randint(0, 3000)),
        id=id if id is not None else uuid.uuid4(),
    )


def _write(state: MemoryState, rng: random.Random, texts: list[str], horizon: int) -> None:
    """A random batch of owner writes, published, then a vacuum up to ``horizon``."""
    ids = [rec.entry.id for rec in state.view().records()]
    for _ in range(rng.randint(1, 6)):
        roll = rng.random()
        if roll < 0.45 or not ids:
            state.store(_entry(rng, texts))
        elif roll < 0.7:
            state.store(_entry(rng, texts, id=rng.choice(ids)))  # upsert
        else:
            state.delete(rng.choice(ids))
    if rng.random() < 0.2:
        texts.append(_text(rng))  # a new text, maybe new terms
    state.publish()
    state.vacuum(horizon)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("chunk", "few"), [(3, 64), (2, 0), (2048, 64)])
def test_steps_with_writes_between_them(
    seed: int, chunk: int, few: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_bm25, "_CHUNK", chunk)  # many slices: writes land everywhere
    monkeypatch.setattr(_bm25, "_BOUND_CHUNK", chunk)  # bounds brought up to date in slices
    monkeypatch.setattr(_bm25, "_DENSE_CHUNK", 32 * chunk)
    monkeypatch.setattr(_bm25, "_FEW", few)  # 0: survivors scored by the numpy path
    rng = random.Random(seed)
    weighted = seed % 2 == 1
    scorer = BM25Scorer(
        half_life=3600.0 if weighted else None,
        relevance_prior=0.5 if weighted else 0.0,
        clock=lambda: (BASE + timedelta(days=3)).timestamp(),
    )
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer)
    texts = [_text(rng) for _ in range(25)]
    for _ in range(150):
        state.store(_entry(rng, texts))
    state.publish()
    purged_while_reading = 0
    for round_ in range(8):
        # Deaths the reader does not see, purged (texts dropped, lists compacted)
        # only while it runs.
        view, index, records, query, limit = _round(state, rng, texts, 25)

        def accept(rec: object) -> bool:
            return hash(rec) % 3 != 0

        acc = accept if round_ % 3 == 2 else None
        # The brute force sees dead records too, so give it every record it could. (Not
        # index.top_k first: the stepped run must bring the terms' bounds up to date
        # itself, yielding in the middle, as a cold query does.)
        want = brute_force(scorer, records, view.version, query, limit, acc, now=scorer.clock())
        steps = index.top_k_steps(view, query, limit, acc)
        gone = index._table.count(None)
        yields = 0
        while True:
            try:
                next(steps)
            except StopIteration as stop:
                got = stop.value
                break
            yields += 1
            if yields <= 25 or rng.random() < 0.1:  # writes in every phase, kept quick
                _write(state, rng, texts, view.version)
        assert got == want, (seed, round_, query, limit)
        assert index.top_k(view, query, limit, acc) == want
        purged_while_reading += index._table.count(None) > gone
        if chunk == 3 and want:
            assert yields > 0
        index._check(_live(state))
        state.vacuum(state.published)
    if chunk == 3:
        assert purged_while_reading  # texts were dropped under a running retrieve


def _round(
    state: MemoryState, rng: random.Random, texts: list[str], deaths: int
) -> tuple[ReadView, BM25Index, list[Record], str, int]:
    """A round's start for a reader the owner writes under: ``deaths`` random records
    deleted and up to 30 stored, published (the dead purged only by a later vacuum);
    returns the view, the index, the view's records, and a query of 1-6 of the commoner
    words with its limit."""
    for rec in rng.sample(state.view().records(), deaths):
        state.delete(rec.entry.id)
    for _ in range(rng.randint(0, 30)):
        state.store(_entry(rng, texts))
    state.publish()
    view = state.view()
    records = view.records()
    query = " ".join(rng.sample(WORDS[:12], rng.randint(1, 6)))
    return view, _index(state), records, query, rng.choice([1, 3, 10, 50])


def _index(state: MemoryState) -> BM25Index:
    return cast(BM25Index, state.index)


def _live(state: MemoryState) -> list[Record]:
    """Every record the index holds: the ones not yet purged."""
    return _index(state)._records()


def test_steps_of_an_empty_or_unmatched_query() -> None:
    state = MemoryState(capacity=None, half_life=86400.0, scorer=BM25Scorer())
    index = _index(state)
    assert drain(index.top_k_steps(state.view(), "w1", 5, None)) == []
    state.store(MemoryEntry(category=MemoryCategory.FACT, memory="w1 w2"))
    state.publish()
    view = state.view()
    assert drain(index.top_k_steps(view, "nothing", 5, None)) == []
    assert drain(index.top_k_steps(view, "w1", 0, None)) == []
    ((score, rec),) = drain(index.top_k_steps(view, "w1", 5, None))
    assert rec.entry.memory == "w1 w2"
    assert score > 0


def test_term_frequencies_beyond_a_byte() -> None:
    """A posting list stores frequencies in bytes until one exceeds 255, then in int32;
    scores stay the brute force's, before and after the switch and under purges."""
    scorer = BM25Scorer()
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer)
    texts = ["w1 w2", "w1 " * 255 + "w3", "w1 " * 300 + "w2", "w2 " * 256, "w1 w3 w3"]
    for text in texts:
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=text))
    state.publish()
    index = _index(state)
    assert index._terms["w1"].tfs.typecode == "i"  # 300 > 255
    assert index._terms["w3"].tfs.typecode == "B"
    view = state.view()
    for query in ["w1", "w2", "w3 w1", "w2 w2 w3"]:
        want = brute_force(scorer, view.records(), view.version, query, 10)
        assert index.top_k(view, query, 10, None) == want
        distinct = " ".join(dict.fromkeys(query.split()))
        assert index.top_k_terms(view, dict.fromkeys(query.split(), 1.0), 10, None) == (
            brute_force(scorer, view.records(), view.version, distinct, 10)
        )
    rec = view.records()[2]
    assert index.document_terms(rec) == {"w1": 300, "w2": 1}
    for rec in view.records()[:3]:
        state.delete(rec.entry.id)
    state.publish()
    state.vacuum(state.published)
    index._check(index._records())
    view = state.view()
    assert index.top_k(view, "w1 w2 w3", 10, None) == brute_force(
        scorer, view.records(), view.version, "w1 w2 w3", 10
    )


@pytest.mark.parametrize("core", [False, True])
@pytest.mark.parametrize("seed", range(4))
def test_bounds_brought_up_to_date_in_slices_by_interleaved_readers(
    seed: int, core: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A term's cached largest saturation is extended (new postings) or recomputed (the
    average length drifted by more than 2%) a few postings per step; readers at other
    versions interleave their own updates of the same cache, and the owner compacts the
    list, in between. Every reader gets its version's exact result and the cache stays
    a true maximum over the postings it covers."""
    monkeypatch.setattr(_bm25, "_BOUND_CHUNK", 4)
    monkeypatch.setattr(kernels, "BM25_CORE", core)  # the core's driver takes fewer steps
    rng = random.Random(seed)
    scorer = BM25Scorer()
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer)
    index = _index(state)
    short = [f"w0 w{i}" for i in range(1, 30)]
    long = [" ".join(["w0"] + [f"x{i}"] * 8) for i in range(30)]
    for text in short:
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=text))
    state.publish()
    old_view = state.view()
    for text in long:  # the average length more than doubles: every cache is stale
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=text))
    state.publish()
    new_view = state.view()
    views = [old_view, new_view]
    readers = []
    for view in views * 2:
        query = "w0 " + " ".join(rng.sample([f"w{i}" for i in range(1, 30)], 2))
        want = brute_force(scorer, view.records(), view.version, query, 5)
        readers.append((index.top_k_steps(view, query, 5, None), want))
    results: list[object] = [None] * len(readers)
    stepped = 0
    while any(r is None for r in results):
        i = rng.randrange(len(readers))
        if results[i] is not None:
            continue
        try:
            next(readers[i][0])
            stepped += 1
        except StopIteration as stop:
            results[i] = stop.value
        if rng.random() < 0.1:  # texts nobody sees any more: purged, lists compacted
            for rec in rng.sample(new_view.records(), 2):
                if rec.died == NEVER and rec.born > new_view.version:
                    state.delete(rec.entry.id)
            state.store(MemoryEntry(category=MemoryCategory.FACT, memory=rng.choice(short)))
            state.publish()
            state.vacuum(old_view.version)
    assert stepped > (50 if kernels.bm25_core_active() else 100)  # 68: bounds in one step
    for (_, want), got in zip(readers, results, strict=True):
        assert got == want
    index._check(_live(state))


def test_wide_packing_of_a_groups_terms(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's terms pack their numbers with their frequencies; once term numbers no
    longer fit in int32 so packed, new groups use int64. Both kinds, and frequencies
    beyond the packed byte, score as the brute force does."""
    monkeypatch.setattr(_bm25, "_NARROW", 3)
    scorer = BM25Scorer()
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer)
    texts = ["w1 w2", "w1 w3 w3", "w4 " * 300 + "w1", "w2 w5 w5 w5", "w6 " * 255 + "w2"]
    for text in texts:
        state.store(MemoryEntry(category=MemoryCategory.FACT, memory=text))
    state.publish()
    index = _index(state)
    codes = [index._terms_of(index._group_or_raise(rec)).typecode for rec in state.view().records()]
    if index._pool is None:  # an array per group (knobs._TERM_POOL off)
        assert codes[0] == "i"
        assert codes[-1] == "q"
    else:  # one pool, widened as a whole
        assert codes == ["q"] * len(texts)
        assert index._pool.data.typecode == "H"  # term numbers alone: 6 terms
    view = state.view()
    for query in ["w1", "w2 w5", "w3 w4 w1", "w6 w2", "w4 w4 w5"]:
        assert index.top_k(view, query, 10, None) == brute_force(
            scorer, view.records(), view.version, query, 10
        )
    assert index.document_terms(view.records()[2]) == {"w4": 300, "w1": 1}
    assert index.document_terms(view.records()[4]) == {"w6": 255, "w2": 1}
    for rec in view.records()[:2]:
        state.delete(rec.entry.id)
    state.publish()
    state.vacuum(state.published)
    index._check(_live(state))
    view = state.view()
    assert index.top_k(view, "w1 w2 w3 w6", 10, None) == brute_force(
        scorer, view.records(), view.version, "w1 w2 w3 w6", 10
    )
