"""A retrieve's set-up: its top relevance from ``View.first_by_relevance``
(``knobs._FIRST_PEEK``: the sorted list's first record when it is visible) against
``next(view.by_relevance(), None)``: the same record for views of every version (the
first record born later, deleted, replaced by an upsert, both relevance layouts); the
tag match skipped when the tag vocabulary has no 3-gram (``knobs._TAGS_NONE``); the
same retrieves with each knob on and off."""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_mod
from actormem._engine.state import MemoryState
from actormem._index.scoring import drain
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import examples

_BASE = datetime(2026, 1, 1, tzinfo=UTC)
_WORDS = ["alpha", "beta", "gamma", "delta", "the", "0,", "ok", "zeta"]


def _entry(i: int, ident: int, rel: float, rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=" ".join(rng.choices(_WORDS, k=rng.randint(1, 6))),
        relevance=rel,
        created_at=_BASE + timedelta(seconds=i),
        id=uuid.UUID(int=ident),
    )


def _states(seed: int, steps: int, seq_keys: bool) -> tuple[MemoryState, list[Any]]:
    """A state driven by ``seed`` (stores of few relevances, upserts of earlier ids,
    deletes, publishes) and a view taken after every publish, none vacuumed."""
    rng = random.Random(seed)
    saved = state_mod._SEQ_KEYS
    state_mod._SEQ_KEYS = seq_keys
    try:
        state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    finally:
        state_mod._SEQ_KEYS = saved
    views = [state.view()]
    ids = 0
    for i in range(steps):
        op = rng.random()
        rel = rng.choice([0.0, 0.3, 1.0, 1.0, rng.random()])
        if op < 0.55 or not ids:
            ids += 1
            state.store(_entry(i, ids, rel, rng), None)
        elif op < 0.8:  # an upsert: a new version of an earlier id
            state.store(_entry(i, rng.randint(1, ids), rel, rng), None)
        else:
            state.delete(uuid.UUID(int=rng.randint(1, ids)))
        if rng.random() < 0.3:
            state.publish()
            views.append(state.view())
    state.publish()
    views.append(state.view())
    return state, views


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(0, 80), seq_keys=st.booleans())
def test_first_by_relevance_is_by_relevances_first(seed: int, steps: int, seq_keys: bool) -> None:
    _, views = _states(seed, steps, seq_keys)
    for view in views:
        assert view.first_by_relevance() is next(view.by_relevance(), None)


def test_first_record_invisible_falls_back() -> None:
    # The sorted list's first record is born after an old view, and another is deleted
    # (died) before a later one: the views' answers are by_relevance's, not it.
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    rng = random.Random(0)
    state.store(_entry(0, 1, 0.5, rng), None)
    state.publish()
    old = state.view()
    state.store(_entry(1, 2, 1.0, rng), None)  # first by relevance, invisible to `old`
    state.publish()
    mid = state.view()
    state.delete(uuid.UUID(int=2))
    state.publish()
    new = state.view()
    first = state._by_relevance._lists[0][0]
    assert first.entry.id == uuid.UUID(int=2)
    assert old.first_by_relevance() is next(old.by_relevance()) is not first
    assert mid.first_by_relevance() is first
    assert new.first_by_relevance() is next(new.by_relevance()) is not first
    empty = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer()).view()
    assert empty.first_by_relevance() is None


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_peek_on_and_off_agree_on_retrieves(seed: int) -> None:
    # Every view of a seeded state (the first record invisible to some), queries of
    # every limit and min_matched, with and without a filter: the same hits and scores
    # with _FIRST_PEEK on and off.
    state, views = _states(seed, 160, True)
    rng = random.Random(seed)
    saved = wo_knobs._FIRST_PEEK
    try:
        for view in views:
            for q in range(6):
                query = " ".join(rng.choices([*_WORDS, "nothing"], k=rng.randint(1, 30)))
                limit = rng.choice([1, 3, 10, 1000])
                min_matched = rng.choice([0, 0, 1, 2])
                accept = (lambda rec: rec.seq % 3 != 1) if q % 2 else None
                got = {}
                for on in (True, False):
                    wo_knobs._FIRST_PEEK = on
                    steps = state.index.top_k_steps(
                        view, query, limit, accept, min_matched=min_matched
                    )
                    got[on] = [(score, rec.seq) for score, rec in drain(steps)]
                assert got[True] == got[False], (query, limit, min_matched)
    finally:
        wo_knobs._FIRST_PEEK = saved


def _vocab_state(tags: Any) -> Any:
    v = tags.vocab
    return (
        {k: list(x) for k, x in v._grams.items()},
        set(v._active),
        dict(v._cache),
        dict(v._items),
        {k: list(x) for k, x in tags.lists.items()},
    )


@settings(max_examples=examples(60), deadline=None)
@given(
    tags=st.lists(st.sampled_from(["ab", "tool:x", "alpha beta", "é", "0,", "ok ok"]), max_size=4),
    drop=st.booleans(),
    words=st.lists(st.text(st.sampled_from("ab:xé0, lphtok"), max_size=12), max_size=8),
)
def test_none_match_is_matching_steps_empty(tags: list[str], drop: bool, words: list[str]) -> None:
    # Whenever none_match says so, matching_steps answers [] without a yield and
    # changes nothing in the tag postings; a word of 1-2 characters is never answered so.
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    for i, tag in enumerate(tags):
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"text {i}",
                created_at=_BASE,
                id=uuid.UUID(int=i + 1),
                tags=[tag],
            ),
            None,
        )
        if drop:
            state.delete(uuid.UUID(int=i + 1))
    state.publish()
    state.vacuum(state.published)
    t = state.index._search._tags
    for word in words:
        if len(word) <= 2:
            assert not t.none_match(word)
        if not t.none_match(word):
            continue
        before = _vocab_state(t)
        steps = t.matching_steps(word)
        with pytest.raises(StopIteration) as stop:
            next(steps)
        assert stop.value.value == []
        assert _vocab_state(t) == before


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_tags_none_on_and_off_agree(seed: int) -> None:
    # Memories without tags, with tags and with every tag removed: queries (some equal
    # to a tag, some of 1-3 characters) give the same hits and scores with _TAGS_NONE
    # on and off.
    rng = random.Random(seed)
    saved = wo_knobs._TAGS_NONE
    try:
        for tagged in ("none", "some", "dropped"):
            state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            for i in range(60):
                entry = _entry(i, i + 1, rng.choice([0.5, 1.0]), rng)
                if tagged != "none" and i % 5 == 0:
                    entry = attrs.evolve(entry, tags=[rng.choice(["alpha beta", "ok", "zeta x"])])
                state.store(entry, None)
            if tagged == "dropped":
                for i in range(0, 60, 5):
                    state.delete(uuid.UUID(int=i + 1))
            state.publish()
            view = state.view()
            for _ in range(20):
                query = rng.choice(
                    ["alpha beta", "ok", "zeta x", "ab", "a", "", " OK ",
                     " ".join(rng.choices(_WORDS, k=rng.randint(1, 12)))]
                )  # fmt: skip
                limit = rng.choice([1, 3, 100])
                got = {}
                for on in (True, False):
                    wo_knobs._TAGS_NONE = on
                    steps = state.index.top_k_steps(view, query, limit, None)
                    got[on] = [(score, rec.seq) for score, rec in drain(steps)]
                assert got[True] == got[False], (tagged, query, limit)
    finally:
        wo_knobs._TAGS_NONE = saved
