"""Review 24c of entrybytes6 (BM25's term numbers in one append-only pool, compacted,
widened uint16 -> uint32): the MVCC rule attacked.

* a sliced retrieve (``top_k_steps``) with writes, purges, pool compactions on every
  purge and the pool's widening past 65,536 terms between its steps, against the brute
  force at the reader's version, with and without the ``min_matched`` threshold
  (``document_terms``, a reader of the pool and of the posting lists' frequencies);
* an old snapshot held across many writes, purges and compactions, then scored (top-k,
  statistics, ``document_terms`` of each of its visible records);
* the same text stored many times (one group), upserted and deleted, then purged and
  stored again (a new group);
* the image dumped after compactions and the widening, the same bytes from either layout.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from actormem._engine.state import MemoryState
from actormem._entry import MemoryCategory, MemoryEntry
from actormem._index.bm25 import BM25Index, BM25Scorer
from actormem._index.bm25 import knobs as _bm25
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.scoring import drain
from actormem._index.thresholds import thresholded_steps
from actormem._record import Record

from .test_bm25 import brute_force

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = [f"w{i}" for i in range(30)]
#: Texts with more distinct terms than a uint16 pool can number (each under the
#: memory's length limit).
WIDE = [" ".join(f"u{i}" for i in range(lo, lo + 11_000)) for lo in range(0, 66_000, 11_000)]


def _widen(state: MemoryState, minute: int = 0) -> None:
    for i, text in enumerate(WIDE):
        state.store(_entry(text, id=uuid.UUID(int=10_000 + i), minute=minute))
    state.publish()


def _state(pool: bool = True) -> MemoryState:
    saved = _bm25._TERM_POOL
    _bm25._TERM_POOL = pool
    try:
        return MemoryState(capacity=None, half_life=86400.0, scorer=BM25Scorer())
    finally:
        _bm25._TERM_POOL = saved


def _index(state: MemoryState) -> BM25Index:
    return cast(BM25Index, state.index)


def _text(rng: random.Random) -> str:
    weights = [1.0 / (i + 1) for i in range(len(WORDS))]
    return " ".join(rng.choices(WORDS, weights, k=rng.randint(1, 12)))


def _entry(text: str, id: uuid.UUID | None = None, minute: int = 0) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=text,
        created_at=BASE + timedelta(minutes=minute),
        id=id if id is not None else uuid.uuid4(),
    )


def _write(state: MemoryState, rng: random.Random, texts: list[str], horizon: int) -> None:
    """Random stores, upserts (the same text or another) and deletes, published, then a
    vacuum up to ``horizon`` (purges what the reader cannot see)."""
    ids = [rec.entry.id for rec in state.view().records()]
    for _ in range(rng.randint(1, 6)):
        roll = rng.random()
        if roll < 0.4 or not ids:
            state.store(_entry(rng.choice(texts)))
        elif roll < 0.7:
            state.store(_entry(rng.choice(texts), id=rng.choice(ids)))
        else:
            state.delete(rng.choice(ids))
    if rng.random() < 0.2:
        texts.append(_text(rng))
    state.publish()
    state.vacuum(horizon)


def _matched_brute(
    scorer: BM25Scorer, records: list[Record], version: int, query: str, limit: int, k: int
) -> list[tuple[float, Record]]:
    terms = frozenset(scorer.tokenizer(query))

    def accept(rec: Record) -> bool:
        doc = set(scorer.tokenizer(rec.entry.memory))
        for tag in rec.entry.tags:
            doc |= set(scorer.tokenizer(tag))
        return sum(1 for t in terms if t in doc) >= k

    return brute_force(scorer, records, version, query, limit, accept)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("matched", [0, 2])
def test_sliced_retrieve_across_compactions_and_the_widening(
    seed: int, matched: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes, purges, a pool compaction on nearly every purge and the pool's widening
    (uint16 -> uint32) between the steps of one retrieve: the result is the brute
    force's at the reader's version."""
    monkeypatch.setattr(_bm25, "_CHUNK", 3)
    monkeypatch.setattr(_bm25, "_BOUND_CHUNK", 3)
    monkeypatch.setattr(_bm25, "_DENSE_CHUNK", 96)
    monkeypatch.setattr(_bm25, "_POOL_DEAD", 0.01)
    rng = random.Random(seed)
    state = _state()
    scorer = _index(state).scorer
    texts = [_text(rng) for _ in range(25)]
    for _ in range(150):
        state.store(_entry(rng.choice(texts)))
    state.publish()
    index = _index(state)
    widened = compactions = 0
    for round_ in range(6):
        for rec in rng.sample(state.view().records(), 20):
            state.delete(rec.entry.id)
        state.publish()
        view = state.view()
        records = index._records()
        query = " ".join(rng.sample(WORDS[:12], rng.randint(2, 6)))
        limit = rng.choice([1, 3, 10, 50])
        if matched:
            want = _matched_brute(scorer, records, view.version, query, limit, matched)
            steps = thresholded_steps(index, view, query, limit, None, None, matched)
        else:
            want = brute_force(scorer, records, view.version, query, limit)
            steps = index.top_k_steps(view, query, limit, None)
        pool = index._pool
        assert pool is not None
        yields = 0
        while True:
            data = pool.data
            try:
                next(steps)
            except StopIteration as stop:
                got = list(stop.value)
                break
            yields += 1
            if yields == 2 and round_ >= 2 and not widened:
                _widen(state)  # the vocabulary passes 65,536 terms
                widened += 1
            if yields <= 30 or rng.random() < 0.2:
                _write(state, rng, texts, view.version)
            compactions += pool.data is not data and pool.data.typecode == data.typecode
        assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want], (seed, round_)
        index._check(index._records())
        state.vacuum(state.published)
    assert widened == 1
    assert index._pool is not None
    assert index._pool.data.typecode == "I"
    assert compactions  # the pool was compacted under a running retrieve


def test_an_old_snapshot_scored_after_many_compactions(monkeypatch: pytest.MonkeyPatch) -> None:
    """A snapshot held across thousands of writes, purges of what it cannot see, pool
    compactions and the widening: its top-k, statistics and each visible record's
    document terms are what they were when it was taken."""
    monkeypatch.setattr(_bm25, "_POOL_DEAD", 0.01)
    rng = random.Random(7)
    state = _state()
    index = _index(state)
    scorer = index.scorer
    texts = [_text(rng) for _ in range(40)]
    for i in range(200):
        state.store(_entry(texts[i % 40], minute=i))
    state.publish()
    old = state.view()
    old_records = list(index._records())
    queries = ["w0 w1", "w2 w3 w4", "w5", "w1 w7 w9 w11"]
    before = {q: index.top_k(old, q, 20, None) for q in queries}
    stats = index.statistics(old, WORDS)
    docs = {rec.seq: dict(index.document_terms(rec)) for rec in old.records()}
    pool = index._pool
    assert pool is not None
    first = pool.data
    for r in range(300):
        _write(state, rng, texts, old.version)
        if r == 150:
            _widen(state)
    assert pool.data is not first
    assert pool.data.typecode == "I"
    index._check(index._records())
    for q in queries:
        got = index.top_k(old, q, 20, None)
        assert got == before[q]
        want = brute_force(scorer, old_records, old.version, q, 20)
        assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]
        want2 = _matched_brute(scorer, old_records, old.version, q, 20, 2)
        got2 = drain(thresholded_steps(index, old, q, 20, None, None, 2))
        assert [(s, r.seq) for s, r in got2] == [(s, r.seq) for s, r in want2]
    assert index.statistics(old, WORDS) == stats
    for rec in old.records():
        assert dict(index.document_terms(rec)) == docs[rec.seq]
        assert docs[rec.seq] == dict(Counter(scorer.tokenizer(rec.entry.memory)))


def test_one_text_many_times_upserted_deleted_purged_and_back() -> None:
    """Equal texts share a group (one range of the pool); upserts of the same text,
    deletes, its purge (the range dropped by a compaction) and the text stored again
    (a new group, new range): the frequencies read from the posting lists stay right."""
    state = _state()
    index = _index(state)
    scorer = index.scorer
    text = "alpha beta beta gamma " + "delta " * 300  # a frequency past the packed byte
    ids = [uuid.UUID(int=i + 1) for i in range(6)]
    for id in ids:
        state.store(_entry(text, id=id))
    for i in range(40):
        state.store(_entry(f"filler{i} beta", minute=i))
    state.publish()
    num = index._num(index._group_or_raise(state.view().records()[0]))
    assert index._table[num] is not None  # one group (a number, with group columns)
    assert len(index._recs_of(index._groups[text])) == 6
    for id in ids[:3]:
        state.store(_entry(text, id=id, minute=5))  # upserts: the same text
    state.publish()
    state.vacuum(state.published)
    for id in ids:
        state.delete(id)
    state.publish()
    state.vacuum(state.published)  # the group is purged; the pool compacted
    assert index._table[num] is None
    state.store(_entry(text, id=ids[0], minute=9))
    state.publish()
    view = state.view()
    rec = next(r for r in view.records() if r.entry.id == ids[0])
    assert index._num(index._group_or_raise(rec)) != num
    assert dict(index.document_terms(rec)) == {"alpha": 1, "beta": 2, "gamma": 1, "delta": 300}
    for q in ("delta beta", "alpha", "beta filler3"):
        got = index.top_k(view, q, 10, None)
        want = brute_force(scorer, index._records(), view.version, q, 10)
        assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]
    index._check(index._records())


def test_the_image_after_compactions_and_the_widening(monkeypatch: pytest.MonkeyPatch) -> None:
    """The image of a pool compacted and widened to uint32 is the array layout's, bytes
    for bytes, and restores into either layout equal to a rebuild."""
    monkeypatch.setattr(_bm25, "_POOL_DEAD", 0.01)
    images = []
    views = []
    for pool in (True, False):
        rng = random.Random(3)
        state = _state(pool)
        texts = [_text(rng) for _ in range(20)]
        for i in range(80):
            state.store(_entry(texts[i % 20], id=uuid.UUID(int=i + 1), minute=i))
        _widen(state)
        for i in range(0, 80, 3):
            state.delete(uuid.UUID(int=i + 1))
        state.publish()
        state.vacuum(state.published)
        index = _index(state)
        if pool:
            assert index._pool is not None
            assert index._pool.data.typecode == "I"
        recs = sorted(index._records(), key=lambda r: r.seq)
        images.append(bm25_persist.dump(index, recs))
        views.append((state, recs))
    assert images[0] == images[1]
    state, recs = views[0]
    for dst in (True, False):
        fresh = _state(dst).index
        out = bm25_persist.restore(fresh, images[0], recs)  # type: ignore[arg-type]
        out._check(recs)
        if dst:
            assert out._pool is not None
            assert out._pool.data.typecode == "I"
        for q in ("w0 w1", "u5 w2", "u65999"):
            got = out.top_k(state.view(), q, 5, None)
            want = _index(state).top_k(state.view(), q, 5, None)
            assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]


def test_the_shifted_copy_of_a_big_endian_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    """``index._LITTLE`` False (a big-endian machine): the shift per term, not the byte
    copy, fills a uint16 pool with the same term numbers, and scores the same."""
    from actormem._index.bm25 import index as index_mod

    rng = random.Random(11)
    texts = [_text(rng) + f" x{i} " + "w1 " * (i * 40) for i in range(12)]
    pools = []
    for little in (True, False):
        monkeypatch.setattr(index_mod, "_LITTLE", little)
        state = _state()
        for text in texts:
            state.store(_entry(text))
        state.publish()
        index = _index(state)
        assert index._pool is not None
        assert index._pool.data.typecode == "H"
        index._check(index._records())
        pools.append((index._pool.data.tolist(), index._pool.starts.tolist()))
        view = state.view()
        got = index.top_k(view, "w1 x3 w2", 5, None)
        want = brute_force(index.scorer, index._records(), view.version, "w1 x3 w2", 5)
        assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]
    assert pools[0] == pools[1]


def test_the_pool_stays_wide_once_65536_term_numbers_were_given() -> None:
    """Term numbers are never reused: a pool widened by texts since purged (their terms
    deleted, the live vocabulary a few terms) stays uint32 (it never narrows), and only a
    restore from the image, which numbers the live terms alone, makes it uint16 again (as
    the docs now say: "term numbers given", not "the vocabulary")."""
    state = _state()
    index = _index(state)
    state.store(_entry("alpha beta", id=uuid.UUID(int=1)))
    _widen(state)
    for i in range(len(WIDE)):
        state.delete(uuid.UUID(int=10_000 + i))
    state.publish()
    state.vacuum(state.published)
    assert len(index._terms) == 2  # the live vocabulary
    assert index._pool is not None
    assert index._pool.data.typecode == "I"
    state.store(_entry("gamma alpha", id=uuid.UUID(int=2)))
    state.publish()
    assert index._pool.data.typecode == "I"
    recs = sorted(index._records(), key=lambda r: r.seq)
    out = bm25_persist.restore(_state().index, bm25_persist.dump(index, recs), recs)  # type: ignore[arg-type]
    out._check(recs)
    assert out._pool is not None
    assert out._pool.data.typecode == "H"
