"""BM25Index's fast paths (shared texts, the change log, cached saturations, MaxScore's
phases) against the brute force of test_bm25, on workloads built to reach each of them."""

from __future__ import annotations

import math
import random
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from actormem._index.bm25 import BM25Index, BM25Scorer
from actormem._record import NEVER, Record

from .test_bm25 import FakeView, brute_force, entry

BASE = datetime(2024, 1, 1, tzinfo=UTC)
NOW = (BASE + timedelta(days=3)).timestamp()


def _stats_by_counting(
    scorer: BM25Scorer, records: list[Record], version: int, terms: list[str]
) -> tuple[int, float, dict[str, int]]:
    visible = [rec for rec in records if rec.visible(version)]
    docs = []
    for rec in visible:
        terms_of = scorer.tokenizer(rec.entry.memory)
        for tag in rec.entry.tags:
            terms_of += scorer.tokenizer(tag)
        docs.append(Counter(terms_of))
    n = len(visible)
    total = sum(sum(doc.values()) for doc in docs)
    return n, total / n if n else 0.0, {t: sum(1 for doc in docs if t in doc) for t in terms}


class Workload:
    """An index and its records under a random mix of owner calls, as the engine makes."""

    def __init__(self, scorer: BM25Scorer, rng: random.Random, texts: list[str]) -> None:
        self.scorer = scorer
        self.rng = rng
        self.texts = texts
        self.index: BM25Index = scorer.make_index()
        self.version = 0
        self.records: list[Record] = []  # not purged
        self.live: dict[int, Record] = {}
        self.next_seq = 0

    def store(self, upsert: bool = False) -> Record:
        rng = self.rng
        self.version += 1
        seq = None
        old = None
        if upsert and self.live:
            seq = rng.choice(sorted(self.live))
            old = self.live[seq]
            old.died = self.version
            self.index.retire(old)
        if seq is None:
            seq = self.next_seq
            self.next_seq += 1
        tags = (rng.choice(["infra", "ops"]),) if rng.random() < 0.15 else ()
        e = entry(
            rng.choice(self.texts),
            tags=tags,
            relevance=rng.random(),
            created_at=BASE + timedelta(minutes=rng.randint(0, 3000)),
        )
        rec = Record(e, born=self.version, seq=seq)
        self.index.add(rec)
        self.records.append(rec)
        self.live[seq] = rec
        return rec

    def delete(self, count: int) -> None:
        self.version += 1
        for seq in self.rng.sample(sorted(self.live), min(count, len(self.live))):
            rec = self.live.pop(seq)
            rec.died = self.version
            self.index.retire(rec)

    def purge(self, horizon: int) -> None:
        for rec in list(self.records):
            if rec.died <= horizon:
                self.index.purge(rec)
                self.records.remove(rec)

    def check_query(
        self, version: int, query: str, limit: int, accept: object = None
    ) -> list[tuple[float, Record]]:
        got = self.index.top_k(FakeView(version, self.records), query, limit, accept)  # type: ignore[arg-type]
        want = brute_force(
            self.scorer,
            self.records,
            version,
            query,
            limit,
            accept,  # type: ignore[arg-type]
            now=NOW,
        )
        assert got == want, (version, query, limit)
        return got


def _zipf_texts(rng: random.Random, count: int, vocabulary: int) -> list[str]:
    words = [f"w{i}" for i in range(vocabulary)]
    weights = [1.0 / (i + 1) for i in range(vocabulary)]
    return [" ".join(rng.choices(words, weights, k=rng.randint(1, 20))) for _ in range(count)]


@pytest.mark.parametrize("weighted", [False, True], ids=["bm25-only", "with-recency-and-prior"])
def test_repeated_texts_filters_and_snapshots(weighted: bool) -> None:
    """Many records per text (so per group), upserts, deletes, purges, old snapshots,
    and filters that reject most records of the best texts."""
    rng = random.Random(11 + weighted)
    scorer = BM25Scorer(
        half_life=86_400.0 if weighted else None,
        relevance_prior=0.6 if weighted else 0.0,
        clock=lambda: NOW,
    )
    texts = _zipf_texts(rng, 40, 30)
    w = Workload(scorer, rng, texts)
    words = [f"w{i}" for i in range(32)]
    filters = [None, lambda r: r.seq % 3 != 1, lambda r: r.seq % 11 == 0, lambda r: False]
    snapshots: list[int] = []
    for step in range(500):
        roll = rng.random()
        if roll < 0.65:
            w.store(upsert=rng.random() < 0.2)
        elif roll < 0.75:
            w.delete(rng.randint(1, 4))
        elif roll < 0.8:
            snapshots.append(w.version)
        elif roll < 0.85 and snapshots:
            snapshots.pop(0)
            horizon = min(snapshots, default=w.version)
            w.purge(horizon)
            w.index.vacuum(horizon)
        else:
            version = rng.choice([w.version, *snapshots])
            query = " ".join(rng.choices(words, k=rng.randint(1, 7)))
            w.check_query(version, query, rng.choice([1, 3, 10, 40]), rng.choice(filters))
        if step % 50 == 0:
            w.index._check(w.records)
    w.index._check(w.records)


def test_statistics_of_old_snapshots_through_the_log_and_by_counting() -> None:
    rng = random.Random(3)
    scorer = BM25Scorer()
    w = Workload(scorer, rng, _zipf_texts(rng, 30, 12))
    w.index._vacuum_slack = 0
    checkpoints = []
    for _ in range(12):
        for _ in range(rng.randint(3, 30)):
            w.store(upsert=rng.random() < 0.3)
        w.delete(rng.randint(0, 5))
        checkpoints.append(w.version)
    terms = [f"w{i}" for i in range(14)]
    for version in checkpoints:  # every change since is undone from the log
        assert w.index.statistics(FakeView(version, w.records), terms) == _stats_by_counting(
            scorer, w.records, version, terms
        )
        w.check_query(version, "w0 w3 w7 w11", 5)
    horizon = checkpoints[len(checkpoints) // 2]
    w.purge(horizon)
    w.index.vacuum(horizon)
    assert w.index._log_versions[0] > horizon
    w.index._check(w.records)
    for version in checkpoints:
        # Below the horizon the log no longer reaches: the index counts (the purged
        # records, dead at or below the horizon, no longer count, as for the engine's
        # snapshots, which never see them).
        assert w.index.statistics(FakeView(version, w.records), terms) == _stats_by_counting(
            scorer, w.records, version, terms
        )
        if version >= horizon:
            w.check_query(version, "w1 w2 w9", 4)


def test_versions_out_of_order() -> None:
    """The contract does not promise increasing versions; the log sorts what arrives."""
    scorer = BM25Scorer()
    index = scorer.make_index()
    records = []
    for seq, (born, text) in enumerate([(5, "a b"), (2, "a"), (9, "b c"), (1, "a a c"), (7, "c")]):
        rec = Record(entry(text), born=born, seq=seq)
        index.add(rec)
        records.append(rec)
    for rec, died in zip(records[:3], (8, 3, 10), strict=True):
        rec.died = died
        index.retire(rec)
    late = Record(entry("a c"), born=4, seq=9)
    late.died = 6
    index.add(late)  # stored already dead
    records.append(late)
    index._check(records)
    for version in range(12):
        view = FakeView(version, records)
        assert index.statistics(view, ["a", "b", "c"]) == _stats_by_counting(
            scorer, records, version, ["a", "b", "c"]
        )
        for query in ("a", "b c", "c c a"):
            assert index.top_k(view, query, 3, None) == brute_force(
                scorer, records, version, query, 3
            )


def test_cached_saturations_follow_the_average_length() -> None:
    """Saturations are cached at a reference average length; results stay exact as it
    drifts a little (cache kept, bounds stretched) or a lot (cache rebuilt)."""
    rng = random.Random(5)
    for k1, b in [(1.5, 0.75), (0.0, 0.75), (1.2, 0.0), (0.9, 1.0)]:
        scorer = BM25Scorer(k1=k1, b=b)
        w = Workload(scorer, rng, _zipf_texts(rng, 60, 25))
        for _ in range(80):
            w.store()
        queries = ["w0 w1", "w2 w5 w9", "w0 w3 w4 w6 w7 w8", "w17 w0"]
        for query in queries:
            w.check_query(w.version, query, 5)
        w.index._check(w.records)  # checks every cached saturation against its reference
        for lengths in ([1] * 3, [40] * 2, [1] * 40, [60] * 30):  # small, then large drifts
            w.texts = [" ".join(rng.choices(["w0", "w1", "w3", "w20"], k=n)) for n in lengths]
            for _ in lengths:
                w.store()
            for query in queries:
                w.check_query(w.version, query, rng.choice([1, 5, 20]))
            w.index._check(w.records)


def test_upserts_keep_records_of_a_text_in_seq_order() -> None:
    """An upsert keeps its id's older seq; ties on a shared text still break by seq."""
    scorer = BM25Scorer()
    index = scorer.make_index()
    records = []
    version = 0
    for seq in range(6):
        version += 1
        rec = Record(entry("same words here"), born=version, seq=seq)
        index.add(rec)
        records.append(rec)
    for seq in (4, 1, 3):  # rewrite ids 4, 1, 3 with the same text: seqs arrive out of order
        version += 1
        old = next(r for r in records if r.seq == seq and r.died == NEVER)
        old.died = version
        index.retire(old)
        rec = Record(entry("same words here"), born=version, seq=seq)
        index.add(rec)
        records.append(rec)
    index._check(records)
    for v in range(1, version + 1):
        for limit in (1, 2, 4, 10):
            got = index.top_k(FakeView(v, records), "words", limit, None)
            assert got == brute_force(scorer, records, v, "words", limit)
    got = index.top_k(FakeView(version, records), "same", 3, None)
    assert [rec.seq for _, rec in got] == [0, 1, 2]


def test_long_queries_over_a_skewed_corpus() -> None:
    """Queries of many terms, common and rare, so that MaxScore stops the exhaustive
    phase early and refines or updates many candidates."""
    rng = random.Random(9)
    scorer = BM25Scorer()
    w = Workload(scorer, rng, _zipf_texts(rng, 600, 200))
    for _ in range(900):
        w.store()
    words = [f"w{i}" for i in range(200)]
    weights = [1.0 / (i + 1) ** 0.7 for i in range(200)]
    for _ in range(60):
        query = " ".join(rng.choices(words, weights, k=rng.randint(4, 16)))
        w.check_query(w.version, query, rng.choice([1, 5, 10, 30]))
    weights_query = {"w0": 0.25, "w7": 3.0, "w40": 1.5, "w150": 0.5, "nothing": 2.0, "w3": -1.0}
    view = FakeView(w.version, w.records)
    for limit in (1, 7, 50):
        got = w.index.top_k_terms(view, weights_query, limit, None)
        assert got == _weighted_brute_force(scorer, w.records, w.version, weights_query, limit)


def _weighted_brute_force(
    scorer: BM25Scorer, records: list[Record], version: int, weights: dict[str, float], limit: int
) -> list[tuple[float, Record]]:
    """brute_force with arbitrary query weights (as RM3 expansion gives), no recency."""
    visible = [rec for rec in records if rec.visible(version)]
    counts = {}
    for rec in visible:
        terms = scorer.tokenizer(rec.entry.memory)
        for tag in rec.entry.tags:
            terms += scorer.tokenizer(tag)
        counts[rec] = Counter(terms)
    n = len(visible)
    avgdl = sum(sum(c.values()) for c in counts.values()) / n
    idf = {}
    for term, weight in weights.items():
        df = sum(1 for c in counts.values() if term in c)
        if weight > 0 and df:
            idf[term] = weight * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    results = []
    for rec, c in counts.items():
        if not any(term in c for term in idf):
            continue
        norm = scorer.k1 * (1.0 - scorer.b + scorer.b * sum(c.values()) / avgdl)
        score = 0.0
        for term, wi in idf.items():
            tf = c.get(term, 0)
            if tf:
                score += wi * (tf / (tf + norm))
        results.append((score, rec))
    results.sort(key=lambda item: (-item[0], item[1].seq))
    return results[:limit]


@pytest.mark.parametrize("k1", [0.0, 1.5])
def test_ties_across_texts_and_lazy_exact_scores(k1: float) -> None:
    """Texts that are permutations of each other score exactly alike: the survivors are
    scored lazily by partial score, so ties across texts must still break by seq; with
    k1 = 0 the candidates' lookups take the per-hit path (a miss would divide 0 by 0)."""
    rng = random.Random(13)
    scorer = BM25Scorer(k1=k1)
    words = ["red", "green", "blue", "cyan", "gold"]
    texts = []
    for _ in range(40):
        chosen = rng.sample(words, 3)
        texts += [" ".join(chosen), " ".join(reversed(chosen))]  # same score, two texts
    fillers = [f"x{i}" for i in range(30)]
    texts += [" ".join(rng.choices(fillers, k=rng.randint(1, 8))) for _ in range(200)]
    w = Workload(scorer, rng, texts)
    for _ in range(500):
        w.store()
    w.delete(40)
    for query in ("red blue", "gold cyan green", "red x1 x2 x3 green", "x0 x5 blue blue"):
        for limit in (1, 3, 10, 25):
            w.check_query(w.version, query, limit)
            w.check_query(w.version - 1, query, limit)
