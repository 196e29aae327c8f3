"""WordOverlapScorer's index: top_k_steps under writes between its yields, the numpy
paths (cached match sets, their extension, dense and sparse sets, count levels) against
the reference score."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce
from operator import or_

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState, View
from actormem._index import substring as _substring
from actormem._index.scoring import Accept, drain
from actormem._index.wordoverlap import ccore, word_overlap_score
from actormem._index.wordoverlap import index as _wo_index
from actormem._index.wordoverlap import knobs as _wordoverlap
from actormem._index.wordoverlap import masks as _masks
from actormem._record import Record

BASE = datetime(2026, 1, 1, tzinfo=UTC)
VOCAB = [
    "what",
    "did",
    "the",
    "then",
    "they",
    "do",
    "at",
    "a",
    "I",
    "Caroline",
    "Melanie",
    "deploy",
    "deploys",
    "x.y",
    "é",
    "É",
    "İstanbul",
    "go",
    "goes",
    "ab",
    "abc",
    "rust",
]
TAGS = ["infra", "deploy", "blue team", "x"]
RELS = [0.0, 0.5, 0.8, 1.0, 1.0, 1.0]


def make_entry(rng: random.Random, i: int, id: uuid.UUID | None = None) -> MemoryEntry:
    words = rng.choices(VOCAB, k=rng.randint(0, 7))
    if rng.random() < 0.3:
        words.append(f"id{rng.randint(0, 10**6)}")  # a new token
    text = " ".join(words) if rng.random() < 0.9 else rng.choice(["the", "a b", "x.y"])
    return MemoryEntry(
        id=id or uuid.UUID(int=rng.getrandbits(64)),
        category=rng.choice(list(MemoryCategory)),
        memory=text,
        tags=rng.sample(TAGS, k=rng.randint(0, 2)),
        created_at=BASE + timedelta(seconds=i),
        relevance=rng.choice(RELS),
        namespace=rng.choice([(), ("t",)]),
    )


def make_query(rng: random.Random) -> str:
    if rng.random() < 0.1:
        return rng.choice(["", "  ", "blue team", "deploy", "zzz"])
    return " ".join(rng.choices(VOCAB + ["e", "th", "ca", "zz", "id1"], k=rng.randint(1, 6)))


def reference(view: View, query: str, limit: int, accept: Accept) -> list[tuple[float, int]]:
    scored = []
    for rec in view.records():
        if accept is not None and not accept(rec):
            continue
        e = rec.entry
        scored.append((word_overlap_score(e.memory, e.tags, e.relevance, query), rec.seq))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return scored[:limit]


def in_t(rec: Record) -> bool:
    return rec.entry.namespace == ("t",)


def write(rng: random.Random, state: MemoryState, ids: list[uuid.UUID], i: int) -> None:
    op = rng.random()
    if op < 0.5 or not ids:
        e = make_entry(rng, i)
        ids.append(e.id)
        state.store(e)
    elif op < 0.75:
        state.store(make_entry(rng, i, id=rng.choice(ids)))  # upsert
    else:
        state.delete(ids.pop(rng.randrange(len(ids))))


@pytest.mark.parametrize("seed", range(8))
def test_top_k_steps_with_writes_between_yields(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    monkeypatch.setattr(_wordoverlap, "_STEP", rng.choice([1, 2, 3]))
    monkeypatch.setattr(_wordoverlap, "_SCAN_NEW", rng.choice([2, 5, 64]))
    monkeypatch.setattr(_wordoverlap, "_DENSE", rng.choice([1, 16, 10**9]))
    monkeypatch.setattr(_wordoverlap, "_RENUMBER_MIN", rng.choice([1, 3, 4096]))
    monkeypatch.setattr(_wordoverlap, "_CHUNK", rng.choice([16, 64, 1 << 15]))
    monkeypatch.setattr(_wordoverlap, "_JOIN", rng.choice([3, 64, 1 << 13]))
    monkeypatch.setattr(_wordoverlap, "_VISIT", rng.choice([5, 64, 1 << 13]))
    monkeypatch.setattr(_substring, "_STEP", rng.choice([4, 64, 512]))
    monkeypatch.setattr(_wordoverlap, "_MASK_BATCH", rng.choice([1, 3, 128]))
    monkeypatch.setattr(_wordoverlap, "_MASK_STEP", rng.choice([1, 2, 32]))
    if rng.random() < 0.3:  # every word through the vocabulary, none from the masks
        monkeypatch.setattr(_masks, "_SHORT_BIT", {})
    budget = rng.choice([0, 1, 5, 10**9])
    state = MemoryState(
        capacity=rng.choice([None, 40]),
        half_life=3600.0,
        scorer=WordOverlapScorer(essential_budget=budget),
    )
    ids: list[uuid.UUID] = []
    i = 0
    for _ in range(60):
        write(rng, state, ids, i)
        i += 1
    state.publish()
    for _ in range(25):
        view = state.view()
        query = make_query(rng)
        limit = rng.choice([1, 3, 10, 100])
        accept = rng.choice([None, in_t])
        expected = reference(view, query, limit, accept)
        got_sync = state.index.top_k(view, query, limit, accept)
        assert [(s, r.seq) for s, r in got_sync] == expected
        gen = state.index.top_k_steps(view, query, limit, accept)  # type: ignore[attr-defined]
        steps = 0
        vacuumed = False
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                got = stop.value
                break
            steps += 1
            if steps > 60:  # tiny chunks make many steps: write between the first ones
                continue
            for _ in range(rng.randint(0, 3)):
                write(rng, state, ids, i)
                i += 1
            if rng.random() < 0.5:
                state.publish()
                state.vacuum(view.version)  # the retrieving view stays live
                vacuumed = True
            if rng.random() < 0.3:  # another reader, newer, between the yields
                other = state.view()
                q2 = make_query(rng)
                assert [(s, r.seq) for s, r in state.index.top_k(other, q2, 5, None)] == reference(
                    other, q2, 5, None
                )
        assert [(s, r.seq) for s, r in got] == expected, query
        if vacuumed:
            # Once per retrieve, not after each vacuum between its yields (those were
            # 90% of the test's time): the state after every write and vacuum made
            # between them, with the retrieving view still live.
            state._check()
        state.publish()
        state.vacuum(state.published)
        state._check()


def test_level_batches_ties_and_large_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    # Many texts with the same count and relevance: the level is bigger than one batch,
    # ties go to the smallest seq; mixed relevances take the non-uniform partition.
    for rels in ([1.0], [0.2, 0.9, 1.0, 0.55]):
        state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
        for i in range(300):
            state.store(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=f"the cat {i} " + ("sat" if i % 3 else "ran"),
                    created_at=BASE + timedelta(seconds=i),
                    relevance=rels[i % len(rels)],
                )
            )
        state.publish()
        view = state.view()
        for query in ["the cat sat", "cat", "ran 1", "zz", "the the cat", "1 2 3"]:
            for limit in (1, 10, 50, 299, 400):
                got = state.index.top_k(view, query, limit, None)
                assert [(s, r.seq) for s, r in got] == reference(view, query, limit, None)


def _fact(text: str, i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT, memory=text, created_at=BASE + timedelta(seconds=i)
    )


def test_cached_word_extension_survives_overwritten_recent_texts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_wordoverlap, "_STEP", 1)
    monkeypatch.setattr(_wordoverlap, "_SCAN_NEW", 4)
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=0)
    )
    for i in range(10):
        state.store(_fact(f"the {i}" if i % 2 else f"other {i}", i))
    state.publish()
    state.index.top_k(state.view(), "the", 5, None)  # caches "the"
    for i in range(10, 13):
        state.store(_fact(f"then {i}", i))
    state.publish()
    view = state.view()
    expected = reference(view, "the", 20, None)
    gen = state.index.top_k_steps(view, "the", 20, None)  # type: ignore[attr-defined]
    next(gen)  # inside the extension of the cached set, over the 3 new texts
    for i in range(13, 23):  # overwrite every recent text the reader has to read
        state.store(_fact(f"zz {i}", i))
    state.publish()
    got = drain(gen)
    assert [(s, r.seq) for s, r in got] == expected
    state._check()


@pytest.mark.parametrize("query", ["the cat", "a", "do 1", "then", "cat the 1"])
def test_renumbering_between_yields_keeps_the_readers_numbering(
    query: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_wordoverlap, "_STEP", 1)
    monkeypatch.setattr(_wordoverlap, "_RENUMBER_MIN", 1)
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=0)
    )
    texts = ["the cat", "then a dog", "a cat sat", "they ran", "what did the cat do"]
    entries = [_fact(f"{texts[i % 5]} {i}", i) for i in range(20)]
    for e in entries:
        state.store(e)
    state.publish()
    state.index.top_k(state.view(), "the", 3, None)  # cache a match set
    for e in entries[:15]:
        state.delete(e.id)
    state.publish()
    view = state.view()
    index = state.index
    numbering = index._e  # type: ignore[attr-defined]
    expected = reference(view, query, 4, None)
    gen = index.top_k_steps(view, query, 4, None)  # type: ignore[attr-defined]
    next(gen)
    state.vacuum(view.version)  # purges the 15 deleted: a renumbering
    assert index._e is not numbering  # type: ignore[attr-defined]
    state.store(_fact("the cat again", 99))  # written to the new numbering
    got = drain(gen)
    assert [(s, r.seq) for s, r in got] == expected
    state.publish()
    view = state.view()
    assert [(s, r.seq) for s, r in index.top_k(view, query, 4, None)] == reference(
        view, query, 4, None
    )
    state._check()


@pytest.mark.parametrize("bits_min", [0, 1 << 15])  # the bit planes, the byte counts
@pytest.mark.parametrize("tiny", [False, True])
def test_work_between_yields_is_bounded(
    tiny: bool, bits_min: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_wordoverlap, "_BITS_MIN", bits_min)
    monkeypatch.setattr(_wordoverlap, "_BITS_MIN_WORDS", 0)  # these short queries too
    # With tiny chunk constants, a retrieve over many texts yields at least once per
    # chunk of group numbers in every pass over them (so no step touches more than a
    # chunk), and the results stay exact. Work is counted in yields, never timed.
    if tiny:
        monkeypatch.setattr(_wordoverlap, "_CHUNK", 8)
        monkeypatch.setattr(_wordoverlap, "_JOIN", 4)
        monkeypatch.setattr(_wordoverlap, "_VISIT", 4)
        monkeypatch.setattr(_wordoverlap, "_STEP", 2)
        monkeypatch.setattr(_wordoverlap, "_WALK_STEP", 2)
        monkeypatch.setattr(_wordoverlap, "_BITS_CHUNK", 64)
        monkeypatch.setattr(_substring, "_STEP", 4)
    # A pass over the counts: chunks of 8 byte counts, or of one 64-bit word of planes.
    unit = 64 if ccore.bits_active() and 400 >= _wordoverlap._BITS_MIN else 8
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    rng = random.Random(7)
    for i in range(400):
        state.store(make_entry(rng, i))
    state.publish()
    view = state.view()
    groups = state.index._e.n  # type: ignore[attr-defined]
    for query in ["a", "the cat at", "what did Caroline do", "zz", "ab abc a", "x.y É"]:
        for limit in (1, 10, 400):
            gen = state.index.top_k_steps(view, query, limit, None)  # type: ignore[attr-defined]
            yields = 0
            while True:
                try:
                    next(gen)
                except StopIteration as stop:
                    got = stop.value
                    break
                yields += 1
            assert [(s, r.seq) for s, r in got] == reference(view, query, limit, None)
            if tiny and query.split():
                # A pass over the counts for their largest, chunk by chunk.
                assert yields >= groups // unit
            if tiny and query == "a":
                # And one for the match set of "a" (from the masks), chunk by chunk.
                assert yields >= groups // unit + groups // 8


def test_short_words_come_from_the_masks() -> None:
    # A one- or two-character word of the table is answered from the masks, exact,
    # including texts added after its match set was cached (extension from the masks).
    scorer = WordOverlapScorer(essential_budget=0)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=scorer)
    texts = ["on the go", "gone", "a b", "in it", "É x", "2023 10", "nothing"]
    for i, t in enumerate(texts):
        state.store(_fact(t, i))
    state.publish()
    for query in ["on", "go", "a", "in", "é", "10", "o", "-"]:
        assert (query in _masks._SHORT_BIT) == (query != "é")
        view = state.view()
        got = state.index.top_k(view, query, 10, None)
        assert [(s, r.seq) for s, r in got] == reference(view, query, 10, None)
    for i, t in enumerate(["only", "go on", "10 a"], len(texts)):
        state.store(_fact(t, i))
    state.publish()
    for query in ["on", "go", "a", "10"]:
        view = state.view()
        got = state.index.top_k(view, query, 10, None)
        assert [(s, r.seq) for s, r in got] == reference(view, query, 10, None)
    state._check()
    assert _masks._short_mask("on") == 1 << _masks._SHORT_BIT["o"] | (
        1 << _masks._SHORT_BIT["n"]
    ) | (1 << _masks._SHORT_BIT["on"])


def test_text_masks_match_the_tokens_masks() -> None:
    # The vectorised mask of a whole text is the union of its tokens' masks: whitespace
    # of any kind separates, characters beyond ASCII (and lone surrogates) match nothing.
    texts = [
        "", "on", "o n", "a\nb", "x\u2028on", "\u00e9on \u00c9", "\ud800on", "10 31\t32",
        "ny-dc", "  ", "\U0001f600ok", "id=42;", "a" * 300,
    ]
    rng = random.Random(7)
    alphabet = "abon1023.,-=;() \t\n\u00e9\u00ff\u2028\U0001f600"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))) for _ in range(500)]
    for size in (1, 2, len(texts)):
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            lo, hi = _masks._text_masks(batch)
            for text, low, high in zip(batch, lo.tolist(), hi.tolist(), strict=True):
                want = reduce(or_, map(_masks._short_mask, text.split()), 0)
                assert low | high << 64 == want, repr(text)


def test_pending_masks_are_computed_by_the_next_retrieve() -> None:
    # Masks are computed per batch of texts; a retrieve that reads them first computes
    # the pending ones, in steps.
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    batch = _wordoverlap._MASK_BATCH
    for i in range(batch + 5):
        state.store(_fact(f"text {i} on" if i % 2 else f"gone {i}", i))
    state.publish()
    index = state.index
    assert isinstance(index, _wo_index._WordOverlapIndex)
    assert index._e.masked == batch
    assert len(index._e.pending) == 5
    state._check()
    view = state.view()
    got = index.top_k(view, "gone", 300, None)  # not a short word: masks not read
    assert [(s, r.seq) for s, r in got] == reference(view, "gone", 300, None)
    assert index._e.masked == batch
    assert len(index._e.pending) == 5
    got = index.top_k(view, "on", 300, None)
    assert [(s, r.seq) for s, r in got] == reference(view, "on", 300, None)
    assert index._e.masked == batch + 5
    assert not index._e.pending
    state._check()
