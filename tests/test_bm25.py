"""BM25Scorer: the formula against a reference library, the index against a brute force."""

from __future__ import annotations

import json
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import attrs
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from actormem._entry import MemoryCategory, MemoryEntry
from actormem._index.bm25 import BM25Index, BM25Scorer
from actormem._index.tokenize import Tokenizer, stop_words
from actormem._record import NEVER, Record

from .realdata import DATA, real_file
from .strategies import examples

LOCOMO = DATA / "locomo10.json"


def need_locomo() -> Path:
    return real_file("locomo10.json")


class FakeView:
    """A snapshot as the engine would give it: a version over a list of records."""

    def __init__(self, version: int, records: Iterable[Record]) -> None:
        self.version = version
        self._records = [rec for rec in records if rec.visible(version)]

    def __len__(self) -> int:
        return len(self._records)

    def visible(self, rec: Record) -> bool:
        return rec.visible(self.version)

    def by_relevance(self) -> Iterator[Record]:
        return iter(sorted(self._records, key=lambda r: (-r.entry.relevance, r.seq)))


def entry(text: str, **kwargs: object) -> MemoryEntry:
    return MemoryEntry(category=MemoryCategory.FACT, memory=text, **kwargs)  # type: ignore[arg-type]


def brute_force(
    scorer: BM25Scorer,
    records: Iterable[Record],
    version: int,
    query: str,
    limit: int,
    accept: Callable[[Record], bool] | None = None,
    now: float = 0.0,
) -> list[tuple[float, Record]]:
    """BM25 over the records visible at ``version``, straight from the documented formula."""
    visible = [rec for rec in records if rec.visible(version)]
    docs = {}
    for rec in visible:
        terms = scorer.tokenizer(rec.entry.memory)
        for tag in rec.entry.tags:
            terms += scorer.tokenizer(tag)
        docs[rec] = terms
    n = len(visible)
    total = sum(len(terms) for terms in docs.values())
    if n == 0 or total == 0:
        return []
    avgdl = total / n
    counts = {rec: Counter(terms) for rec, terms in docs.items()}
    weights = Counter(scorer.tokenizer(query))
    idf = {}
    for term in weights:
        df = sum(1 for c in counts.values() if term in c)
        if df:
            idf[term] = weights[term] * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    results = []
    for rec in visible:
        c = counts[rec]
        if not any(term in c for term in idf):
            continue
        if accept is not None and not accept(rec):
            continue
        norm = scorer.k1 * (1.0 - scorer.b + scorer.b * len(docs[rec]) / avgdl)
        score = 0.0
        for term, wi in idf.items():
            tf = c.get(term, 0)
            if tf:
                score += wi * (tf / (tf + norm))
        if scorer.half_life is not None:
            age = max(0.0, now - rec.entry.created_at.timestamp())
            score *= 0.5 ** (age / scorer.half_life)
        if scorer.relevance_prior:
            a = scorer.relevance_prior
            score *= (1.0 - a) + a * rec.entry.relevance
        results.append((score, rec))
    results.sort(key=lambda item: (-item[0], item[1].seq))
    return results[:limit]


def build(scorer: BM25Scorer, texts: list[str]) -> tuple[BM25Index, list[Record]]:
    index = scorer.make_index()
    records = []
    for seq, text in enumerate(texts):
        rec = Record(entry(text), born=1, seq=seq)
        index.add(rec)
        records.append(rec)
    index._check(records)
    return index, records


# -- the formula against bm25s -----------------------------------------------------------


def _bm25s_scores(corpus: list[list[str]], queries: list[list[str]]) -> list[list[float]]:
    bm25s = pytest.importorskip("bm25s")
    ref = bm25s.BM25(k1=1.5, b=0.75, method="lucene", dtype="float64")
    ref.index(corpus, show_progress=False)
    vocab = ref.vocab_dict
    out = []
    for query in queries:
        ids = [vocab[t] for t in query if t in vocab]
        out.append([float(x) for x in ref.get_scores_from_ids(ids)] if ids else [0.0] * len(corpus))
    return out


def _compare_with_reference(texts: list[str], queries: list[str], tokenizer: Tokenizer) -> None:
    scorer = BM25Scorer(tokenizer=tokenizer)
    index, records = build(scorer, texts)
    corpus = [tokenizer(t) for t in texts]
    # bm25s refuses empty documents; they never score, so compare the others only.
    keep = [i for i, doc in enumerate(corpus) if doc]
    assert len(keep) == len(corpus), "test corpus should have no empty documents"
    ref = _bm25s_scores(corpus, [tokenizer(q) for q in queries])
    view = FakeView(1, records)
    compared = 0
    for query, ref_scores in zip(queries, ref, strict=True):
        got = index.top_k(view, query, len(records), None)
        scores = {rec.seq: score for score, rec in got}
        for seq, expected in enumerate(ref_scores):
            assert scores.get(seq, 0.0) == pytest.approx(expected, abs=1e-6, rel=0), (query, seq)
            compared += expected > 0
        # The index returns exactly the documents that share a term with the query.
        assert set(scores) == {seq for seq, s in enumerate(ref_scores) if s > 0}
    assert compared > 100


def _locomo_units(limit: int) -> tuple[list[str], list[str]]:
    data = json.loads(need_locomo().read_text(encoding="utf-8"))
    texts, queries = [], []
    for sample in data[:2]:
        conv = sample["conversation"]
        for key in sorted(k for k in conv if k.startswith("session_") and k[8:].isdigit()):
            for turn in conv[key]:
                text = f'{turn["speaker"]} said, "{turn["text"]}"'
                if "blip_caption" in turn:
                    text += f" and shared {turn['blip_caption']}"
                texts.append(text)
        queries += [qa["question"] for qa in sample["qa"][:40]]
    return texts[:limit], queries


@pytest.mark.parametrize("stemmed", [False, True], ids=["plain", "stemmed"])
def test_scores_equal_bm25s_on_real_documents(stemmed: bool) -> None:
    tokenizer = Tokenizer()
    if stemmed:
        pytest.importorskip("Stemmer")
        tokenizer = Tokenizer(stemmer="english", stopwords=stop_words("english", "nltk"))
    texts, queries = _locomo_units(400)
    texts = [t for t in texts if tokenizer(t)]
    _compare_with_reference(texts, queries, tokenizer)


def test_scores_equal_bm25s_on_generated_documents() -> None:
    rng = random.Random(6)
    words = [f"w{i}" for i in range(60)]
    texts = [" ".join(rng.choices(words, k=rng.randint(1, 30))) for _ in range(300)]
    queries = [" ".join(rng.choices(words, k=rng.randint(1, 6))) for _ in range(50)]
    _compare_with_reference(texts, queries, Tokenizer())


def test_pruned_top_k_equals_brute_force() -> None:
    """Small limits over a skewed vocabulary make MaxScore drop lists; results stay exact."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(40)]
    weights = [1.0 / (i + 1) for i in range(40)]  # Zipf-like: long and short lists
    texts = [" ".join(rng.choices(words, weights, k=rng.randint(1, 25))) for _ in range(400)]
    scorer = BM25Scorer()
    index, records = build(scorer, texts)
    # Retire a third, so invisible postings sit inside the lists.
    for rec in records[::3]:
        rec.died = 2
        index.retire(rec)
    for version in (1, 2):
        view = FakeView(version, records)
        for _ in range(60):
            query = " ".join(rng.choices(words, weights, k=rng.randint(1, 8)))
            limit = rng.choice([1, 2, 5, 10])
            assert index.top_k(view, query, limit, None) == brute_force(
                scorer, records, version, query, limit
            )


# -- behaviour ---------------------------------------------------------------------------


def test_rare_word_outweighs_common_word() -> None:
    index, records = build(
        BM25Scorer(),
        ["the deploy uses the blue cluster", "the grafana dashboard", "the the the", "a b"],
    )
    got = index.top_k(FakeView(1, records), "the grafana", 10, None)
    assert [rec.seq for _, rec in got] == [1, 2, 0]


def test_snapshot_sees_its_own_statistics() -> None:
    scorer = BM25Scorer()
    index = scorer.make_index()
    a = Record(entry("alpha beta"), born=1, seq=0)
    b = Record(entry("alpha gamma delta"), born=2, seq=1)
    index.add(a)
    old = FakeView(1, [a])
    before = index.top_k(old, "alpha", 5, None)
    index.add(b)
    a.died = 3
    index.retire(a)
    assert index.top_k(old, "alpha", 5, None) == before
    assert index.statistics(old, ["alpha"]) == (1, 2.0, {"alpha": 1})
    new = FakeView(3, [a, b])
    assert index.statistics(new, ["alpha", "beta"]) == (1, 3.0, {"alpha": 1, "beta": 0})
    assert [rec for _, rec in index.top_k(new, "alpha beta", 5, None)] == [b]
    index.vacuum(3)
    # A snapshot older than the vacuum horizon still gets exact answers (by counting).
    assert index.statistics(FakeView(2, [a, b]), ["alpha"]) == (2, 2.5, {"alpha": 2})
    index.purge(a)
    index._check([b])
    assert index.top_k(new, "alpha beta", 5, None) == brute_force(
        scorer, [a, b], 3, "alpha beta", 5
    )


def test_ties_break_by_seq_and_accept_filters() -> None:
    index, records = build(BM25Scorer(), ["x y", "x y", "x y", "z"])
    view = FakeView(1, records)
    assert [r.seq for _, r in index.top_k(view, "x", 2, None)] == [0, 1]
    got = index.top_k(view, "x", 5, lambda rec: rec.seq != 0)
    assert [r.seq for _, r in got] == [1, 2]
    assert index.top_k(view, "x", 0, None) == []
    assert index.top_k(view, "nothing here", 5, None) == []


def test_recency_and_relevance_prior_follow_the_formula() -> None:
    base = datetime(2024, 1, 1, tzinfo=UTC)
    now = (base + timedelta(days=10)).timestamp()
    scorer = BM25Scorer(half_life=86_400.0, relevance_prior=0.5, clock=lambda: now)
    index = scorer.make_index()
    rng = random.Random(1)
    records = []
    for seq in range(120):
        text = " ".join(rng.choices(["ant", "bee", "cat", "dog", "eel"], k=rng.randint(1, 5)))
        created = base + timedelta(hours=rng.randint(0, 300))
        rec = Record(entry(text, created_at=created, relevance=rng.random()), born=1, seq=seq)
        index.add(rec)
        records.append(rec)
    view = FakeView(1, records)
    for query in ["ant", "bee cat", "dog dog eel", "ant bee cat dog eel"]:
        got = index.top_k(view, query, 7, None)
        assert got == brute_force(scorer, records, 1, query, 7, now=now)
    # Fresh beats stale at equal text; the half-life halves the score.
    fresh = Record(entry("yak", created_at=base + timedelta(days=10)), born=2, seq=500)
    stale = Record(entry("yak", created_at=base + timedelta(days=9)), born=2, seq=501)
    index.add(fresh)
    index.add(stale)
    (s1, r1), (s2, r2) = index.top_k(FakeView(2, [*records, fresh, stale]), "yak", 2, None)
    assert (r1, r2) == (fresh, stale)
    assert s2 == pytest.approx(s1 / 2)


def test_tags_are_part_of_the_document() -> None:
    index, records = build(BM25Scorer(), ["deploy notes"])
    tagged = Record(entry("other text", tags=("infra",)), born=1, seq=9)
    index.add(tagged)
    got = index.top_k(FakeView(1, [*records, tagged]), "infra", 3, None)
    assert [rec for _, rec in got] == [tagged]


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="k1"):
        BM25Scorer(k1=-1)
    with pytest.raises(ValueError, match="b"):
        BM25Scorer(b=1.5)
    with pytest.raises(ValueError, match="half_life"):
        BM25Scorer(half_life=0)
    with pytest.raises(ValueError, match="relevance_prior"):
        BM25Scorer(relevance_prior=2)
    with pytest.raises(TypeError):
        BM25Scorer(k1="1")  # type: ignore[arg-type]
    with pytest.raises(NotImplementedError):
        BM25Scorer().score_entry("a", (), 1.0, "a")
    with pytest.raises(TypeError):
        BM25Scorer(1.2)  # type: ignore[misc]  # keyword-only
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        BM25Scorer().k1 = 2  # type: ignore[misc]
    with pytest.raises(TypeError):

        class Sub(BM25Scorer):  # type: ignore[misc]
            pass


def test_tokenizer() -> None:
    pytest.importorskip("Stemmer")
    pytest.importorskip("stop_words")
    assert Tokenizer()("Grafana's D8:6 ÉTÉ snake_case") == [
        "grafana",
        "s",
        "d8",
        "6",
        "été",
        "snake_case",
    ]
    assert Tokenizer(stemmer="english")("Running dashboards") == ["run", "dashboard"]
    stop = Tokenizer(stopwords=["The", "a"])
    assert stop("The cat and a dog") == ["cat", "and", "dog"]
    assert "the" in stop_words("english")
    assert len(stop_words("english", "nltk")) == 179
    with pytest.raises(ValueError, match="source"):
        stop_words("english", "nowhere")
    assert Tokenizer(stemmer="english", stopwords=["x"]).name == "words+english+stop1"
    with pytest.raises(ValueError, match="Snowball"):
        Tokenizer(stemmer="klingon")
    with pytest.raises(TypeError):
        Tokenizer(stopwords="the")  # type: ignore[arg-type]


def test_index_refuses_owner_misuse() -> None:
    index = BM25Scorer().make_index()
    rec = Record(entry("a"), born=1, seq=0)
    index.add(rec)
    with pytest.raises(ValueError, match="already"):
        index.add(rec)
    with pytest.raises(ValueError, match="retired"):
        index.purge(rec)
    with pytest.raises(ValueError, match="death"):
        index.retire(rec)
    with pytest.raises(TypeError):
        BM25Index()


# -- the index against a brute force, under stores, upserts, deletes and evictions -----------

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu", "the"]
texts = st.lists(st.sampled_from(WORDS), max_size=6).map(" ".join)
queries = st.lists(st.sampled_from([*WORDS, "zzz"]), min_size=1, max_size=4).map(" ".join)


class BM25Machine(RuleBasedStateMachine):
    """Drives the owner's calls on a BM25Index and a plain list of records side by side."""

    ids = Bundle("ids")

    @initialize(
        k1=st.sampled_from([0.0, 0.9, 1.5]),
        b=st.sampled_from([0.0, 0.75, 1.0]),
        slack=st.sampled_from([0, 3, 64]),
    )
    def setup(self, k1: float, b: float, slack: int) -> None:
        self.scorer = BM25Scorer(k1=k1, b=b)
        self.index = self.scorer.make_index()
        self.index._vacuum_slack = slack  # how eagerly purges trim the statistics
        self.version = 0
        self.records: list[Record] = []  # every record not yet purged
        self.current: dict[int, Record] = {}  # id -> its visible record
        self.snapshots: list[int] = []
        self.next_id = 0

    def _kill(self, rec: Record) -> None:
        rec.died = self.version
        self.index.retire(rec)

    @rule(target=ids, text=texts)
    def store(self, text: str) -> int:
        self.version += 1
        ident = self.next_id
        self.next_id += 1
        rec = Record(entry(text), born=self.version, seq=ident)
        self.index.add(rec)
        self.records.append(rec)
        self.current[ident] = rec
        return ident

    @rule(batch=st.lists(texts, min_size=2, max_size=8))
    def store_many(self, batch: list[str]) -> None:
        """One version that stores several records, as a batch write would."""
        self.version += 1
        for text in batch:
            rec = Record(entry(text), born=self.version, seq=self.next_id)
            self.index.add(rec)
            self.records.append(rec)
            self.current[self.next_id] = rec
            self.next_id += 1

    @rule(ident=ids, text=texts)
    def upsert(self, ident: int, text: str) -> None:
        old = self.current.get(ident)
        self.version += 1
        if old is not None:
            self._kill(old)
        rec = Record(entry(text), born=self.version, seq=ident)
        self.index.add(rec)
        self.records.append(rec)
        self.current[ident] = rec

    @rule(ident=consumes(ids))
    def delete(self, ident: int) -> None:
        rec = self.current.pop(ident, None)
        if rec is not None:
            self.version += 1
            self._kill(rec)

    @precondition(lambda self: len(self.current) > 3)
    @rule(count=st.integers(1, 3))
    def evict(self, count: int) -> None:
        """Eviction removes several records in one version, lowest seq first."""
        self.version += 1
        for ident in sorted(self.current)[:count]:
            self._kill(self.current.pop(ident))

    @rule()
    def open_snapshot(self) -> None:
        self.snapshots.append(self.version)

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def close_snapshot(self, data: st.DataObject) -> None:
        self.snapshots.pop(data.draw(st.integers(0, len(self.snapshots) - 1)))

    @rule(vacuum=st.booleans())
    def purge(self, vacuum: bool) -> None:
        """Purge what no open snapshot sees (older snapshots may remain open)."""
        for rec in list(self.records):
            if rec.died != NEVER and not any(rec.visible(v) for v in self.snapshots):
                self.index.purge(rec)
                self.records.remove(rec)
        if vacuum:
            self.index.vacuum(min(self.snapshots, default=self.version))

    @rule(
        data=st.data(),
        query=queries,
        limit=st.integers(0, 6),
        filtered=st.booleans(),
    )
    def query(self, data: st.DataObject, query: str, limit: int, filtered: bool) -> None:
        version = data.draw(st.sampled_from([self.version, *self.snapshots]))
        accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
        view = FakeView(version, self.records)
        got = self.index.top_k(view, query, limit, accept)
        assert got == brute_force(self.scorer, self.records, version, query, limit, accept)

    @invariant()
    def check(self) -> None:
        self.index._check(self.records)


BM25Machine.TestCase.settings = settings(
    max_examples=examples(150),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestBM25Index = BM25Machine.TestCase


# -- the same, through the engine's MemoryState (the owner's real calls) ------------------


class EngineBM25Machine(RuleBasedStateMachine):
    """MemoryState with a BM25Scorer against a dict model; evictions follow the engine."""

    ids = Bundle("engine_ids")

    @initialize(capacity=st.sampled_from([None, 4, 8]))
    def setup(self, capacity: int | None) -> None:
        from actormem._engine.state import MemoryState

        self.scorer = BM25Scorer()
        self.state = MemoryState(capacity=capacity, half_life=3600.0, scorer=self.scorer)
        self.model: dict[object, tuple[MemoryEntry, int]] = {}  # id -> (entry, seq)
        self.snapshots: list[tuple[object, list[tuple[MemoryEntry, int]]]] = []
        self.published: list[tuple[MemoryEntry, int]] = []

    def _store(self, e: MemoryEntry) -> None:
        outcome = self.state.store(e)
        if outcome.evicted is not None:
            del self.model[outcome.evicted.entry.id]
        self.model[e.id] = (e, outcome.record.seq)

    @rule(target=ids, text=texts)
    def store(self, text: str) -> object:
        e = entry(text)
        self._store(e)
        return e.id

    @rule(ident=ids, text=texts)
    def upsert(self, ident: object, text: str) -> None:
        if ident in self.model:
            old, _ = self.model[ident]
            self._store(attrs.evolve(old, memory=text))

    @rule(ident=consumes(ids))
    def delete(self, ident: object) -> None:
        if self.state.delete(ident) is not None:  # type: ignore[arg-type]
            del self.model[ident]

    @rule()
    def publish(self) -> None:
        self.state.publish()
        self.published = list(self.model.values())

    @rule()
    def open_snapshot(self) -> None:
        self.snapshots.append((self.state.view(), list(self.published)))

    @precondition(lambda self: self.snapshots)
    @rule(data=st.data())
    def close_snapshot(self, data: st.DataObject) -> None:
        self.snapshots.pop(data.draw(st.integers(0, len(self.snapshots) - 1)))

    @rule()
    def vacuum(self) -> None:
        horizon = min([v.version for v, _ in self.snapshots], default=self.state.published)
        self.state.vacuum(horizon)

    @rule(data=st.data(), query=queries, limit=st.integers(0, 6))
    def query(self, data: st.DataObject, query: str, limit: int) -> None:
        choices = [(self.state.view(), self.published), *self.snapshots]
        view, items = data.draw(st.sampled_from(choices))
        got = [(s, r.entry.id) for s, r in self.state.index.top_k(view, query, limit, None)]
        fake = [Record(e, born=0, seq=seq) for e, seq in items]
        want = [(s, r.entry.id) for s, r in brute_force(self.scorer, fake, 0, query, limit)]
        assert got == want

    @invariant()
    def check(self) -> None:
        self.state._check()


EngineBM25Machine.TestCase.settings = settings(
    max_examples=examples(60),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestBM25InEngine = EngineBM25Machine.TestCase
