"""The word-overlap index's compiled core (``_cwordoverlap.c``) against its Python path.

A state machine drives two word-overlap memories with the same writes and queries, one
with the core (``kernels.WO_CORE``) and one without, and requires identical top-k,
scores and ties, and identical index structures (posting lists, the vocabulary's ids,
3-gram lists and 1/2-character index) after every step; bad arguments are refused before
C; the C code refuses what would break memory safety; and with the core switched off
(``ACTORMEM_WO_CORE=0``) the index runs its Python path, silently.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, consumes, initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.scoring import drain
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs

from .fallback import one_entry_run
from .setups import knobs_set, stepped
from .strategies import run_machine

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)
# Short, common, long, JSON-like and non-ASCII tokens, and their substrings as queries.
WORDS = [
    "the", "a", "on", "cat", "cats", "deploy", "deployed", "redeploys", "x", "id", "do",
    "w1", "w2", '{"status":', '"ok",', '"path":"/srv/app/main.py"}', "é", "İstanbul",
    "straße", "ab", "abc", "abcd",
]  # fmt: skip
QUERY_WORDS = [*WORDS, "zz", "at", "eplo", "deploy", "status", "srv/app", "stan", "bcd", "ok"]


@pytest.fixture
def small_knobs() -> Iterator[None]:
    """Tiny budgets, so that the core stops between words and leaves words to Python."""
    with knobs_set(wo_knobs, _CHUNK=8, _JOIN=3, _DENSE=4, _STEP=2):
        yield


def _structures(state: MemoryState) -> tuple[Any, ...]:
    """What the owner's writes determine: the posting lists, the vocabulary's items and
    their live ids per 3-gram. (Readers activate short words and cache long ones in the
    vocabulary at their own pace: the core's reader takes fewer steps.)"""
    index: Any = state.index
    e, vocab = index._e, index._vocab
    post = {tok: list(lst) for tok, lst in e.post.items()}
    live = {
        g: [i for i in lst if i in vocab._items] for g, lst in vocab._grams.items() if len(g) == 3
    }
    return post, vocab._ids, vocab._refs, vocab._next_id, live, vocab._sub


class CoreAndPython(RuleBasedStateMachine):
    """Two memories, the same operations: one through the core, one through Python."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[bool, MemoryState] = {}
        self.i = 0

    @initialize(budget=st.sampled_from([0, 2, 8, 2048]))
    def make(self, budget: int) -> None:
        for core in (False, True):
            self.states[core] = MemoryState(
                capacity=None,
                half_life=3600.0,
                scorer=WordOverlapScorer(essential_budget=budget),
            )

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        for core, state in self.states.items():
            kernels.WO_CORE = core
            try:
                yield core, state
            finally:
                kernels.WO_CORE = kernels.WO_CORE_AVAILABLE

    @rule(
        target=ids,
        words=st.lists(st.sampled_from(WORDS), min_size=0, max_size=8),
        fresh=st.booleans(),
        rel=st.sampled_from([0.1, 0.5, 0.9]),
    )
    def store(self, words: list[str], fresh: bool, rel: float) -> uuid.UUID:
        self.i += 1
        if fresh:
            words = [*words, f"tok{self.i}x{self.i * 7}"]  # a new token
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory="  ".join(words) if self.i % 3 else "\t".join(w.upper() for w in words),
            relevance=rel,
            created_at=BASE + timedelta(seconds=self.i),
            id=uuid.UUID(int=self.i),
        )
        for _, state in self._each():
            state.store(entry)
            state.publish()
        return entry.id

    @rule(entry_id=consumes(ids))
    def delete(self, entry_id: uuid.UUID) -> None:
        for _, state in self._each():
            state.delete(entry_id)
            state.publish()
            state.vacuum(state.published)

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=10),
        limit=st.integers(1, 6),
    )
    def query(self, words: list[str], limit: int) -> None:
        query = " ".join(words)
        got = {}
        for core, state in self._each():
            hits = state.index.top_k(state.view(), query, limit, None)
            got[core] = [(score, rec.seq) for score, rec in hits]
        assert got[True] == got[False], query

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=10),
        limit=st.integers(1, 6),
        new=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        steps=st.integers(1, 8),
    )
    def query_with_writes_between_steps(
        self, words: list[str], limit: int, new: list[str], steps: int
    ) -> None:
        # Both read a snapshot while the owner stores and purges between their steps.
        live = [rec.entry.id for rec in self.states[False].view().records()]
        query = " ".join(words)
        gens = {}
        for core, state in self._each():
            if live:
                state.delete(live[0])
            state.publish()
            gen = state.index.top_k_steps(state.view(), query, limit, None)  # type: ignore[attr-defined]
            gens[core] = stepped(gen, steps)
        seen = self.states[False].published
        self.store(new, True, 0.5)
        got = {}
        for core, state in self._each():
            state.vacuum(seen)
            result = drain(gens[core])
            got[core] = [(score, rec.seq) for score, rec in result]
        assert got[True] == got[False], query

    @invariant()
    def same_structures(self) -> None:
        if self.states:
            for _, state in self._each():
                state._check()
            assert _structures(self.states[True]) == _structures(self.states[False])


def test_core_and_python_agree() -> None:
    run_machine(CoreAndPython, 50, 30)


@pytest.mark.usefixtures("small_knobs")
def test_core_and_python_agree_in_small_slices() -> None:
    run_machine(CoreAndPython, 40, 30)


# -- arguments ------------------------------------------------------------------------


def _args(**change: Any) -> dict[str, Any]:
    args: dict[str, Any] = {
        "words": ["abc"],
        "mults": [1],
        "start": 0,
        "budget": 10,
        "limit": 10,
        "vocab": SubstringVocab(),
        "post": {},
        "skip": {},
        "short": {},
        "counts": np.zeros(4, np.uint8),
        "n": 4,
    }
    args.update(change)
    return args


def test_bad_arguments_are_refused_before_c() -> None:
    # add_text's arguments: tests/test_storepath.py (with add_text_known's).
    assert ccore.count_words(**_args()) == (1, [])
    bad: list[tuple[type[Exception], dict[str, Any]]] = [
        (TypeError, {"words": ("abc",)}),
        (TypeError, {"mults": []}),
        (TypeError, {"words": [b"abc"]}),
        (TypeError, {"mults": [1.0]}),
        (ValueError, {"mults": [-1]}),
        (TypeError, {"post": []}),
        (TypeError, {"vocab": {}}),
        (TypeError, {"counts": np.zeros(4, np.int32)}),
        (TypeError, {"counts": [0, 0, 0, 0]}),
        (ValueError, {"counts": np.zeros((2, 2), np.uint8)}),
        (ValueError, {"counts": np.zeros(8, np.uint8)[::2]}),
        (ValueError, {"n": 5}),
        (ValueError, {"start": 2}),
        (ValueError, {"budget": -1}),
        (TypeError, {"memo": {}}),
        (TypeError, {"memo": [{}, {}]}),
        (TypeError, {"memo": [{}, [], 0]}),
        (TypeError, {"memo": [{}, {}, 0.0]}),
        (ValueError, {"epoch": -1}),
    ]
    for error, change in bad:
        with pytest.raises(error):
            ccore.count_words(**_args(**change))


def test_c_checks_memory_safety_itself() -> None:
    from actormem._index import _cwordoverlap as c

    vocab = SubstringVocab()
    with pytest.raises(TypeError, match="array"):
        c.add_text({"a": [1]}, "a", 2, vocab)
    with pytest.raises(ValueError, match="gid"):
        c.add_text({}, "a", -1, vocab)

    def call(**change: Any) -> Any:
        a = {
            "words": ["abc"],
            "mults": [1],
            "start": 0,
            "budget": 10,
            "limit": 10,
            "grams": {"abc": [0]},
            "items": {0: "abc"},
            "cache": {},
            "cache_size": 4,
            "post": {"abc": array("i", [1, 3])},
            "skip": {},
            "short": {},
            "counts": np.zeros(4, np.uint8),
            "n": 4,
        }
        a.update(change)
        return c.count_words(*a.values())

    counts = np.zeros(4, np.uint8)
    assert call(counts=counts) == (1, [])
    assert counts.tolist() == [0, 1, 0, 1]
    with pytest.raises(ValueError, match="counts"):
        call(counts=np.zeros(4, np.int32))
    with pytest.raises(ValueError, match="n beyond"):
        call(n=5)
    with pytest.raises(TypeError, match="array"):
        call(post={"abc": array("q", [1])})
    with pytest.raises(TypeError, match="array"):
        call(post={"abc": [1]})
    with pytest.raises(TypeError, match="str"):
        call(items={0: b"abc"})
    with pytest.raises(TypeError, match="str"):
        call(words=[1])
    with pytest.raises(TypeError, match="lists"):
        call(grams={"abc": (0,)})
    gram = [0]
    with pytest.raises(ValueError, match="cache"):  # verified beyond its list
        call(words=["abcd"], grams={"abc": gram, "bcd": gram}, cache={"abcd": (gram, 9, [])})
    # The word memo: a list of two dicts whose values are its own capsules.
    with pytest.raises(TypeError, match="memo"):
        call(planes=0, memo=[{}, {}], epoch=0, memo_cap=4)
    with pytest.raises(TypeError, match="memo"):
        call(planes=0, memo=[{}, {}, 0], epoch=0, memo_cap=0)
    with pytest.raises((TypeError, ValueError)):
        call(planes=0, memo=[{"abc": object()}, {}, 0], epoch=0, memo_cap=4)
    memo: list[Any] = [{}, {}, 0]
    post = {"abc": array("i", [1, 3])}
    counts = np.zeros(4, np.uint8)
    for _ in range(2):  # built, then read from the memo: the same counts
        assert call(counts=counts, post=post, planes=0, memo=memo, epoch=0, memo_cap=4) == (1, [])
    assert counts.tolist() == [0, 2, 0, 2]
    assert "abc" in memo[0]
    post["abc"].append(2)  # a new tail, read; numbers at or beyond n skipped
    post["abc"].append(7)
    counts[:] = 0
    assert call(counts=counts, post=post, planes=0, memo=memo, epoch=0, memo_cap=4) == (1, [])
    assert counts.tolist() == [0, 1, 1, 1]
    # A memo built under a larger limit, read by a call with a smaller one: its set
    # would not fit that call's buffers (found by a reviewer: a heap overflow); the
    # word is left to the caller, as that call leaves it without a memo.
    big = {"abc": array("i", range(2000))}
    memo = [{}, {}, 0]
    wide = np.zeros(2000, np.uint8)
    call(counts=wide, n=2000, post=big, limit=10_000, budget=10**6, planes=0, memo=memo,
         epoch=0, memo_cap=8)
    assert int(wide.sum()) == 2000
    assert ("abc" in memo[0] or "abc" in memo[1])
    narrow = np.zeros(2000, np.uint8)
    assert call(counts=narrow, n=1999, post=big, limit=16, budget=10**6, planes=0,
                memo=memo, epoch=0, memo_cap=8) == (1, [0])
    assert int(narrow.sum()) == 0
    assert "abc" not in memo[0]
    assert "abc" not in memo[1]
    # A posting list of another typecode reached through a memo's refresh is refused,
    # as the path without a memo refuses it, not read as int32.
    grams = {"abc": [0]}
    items = {0: "abc"}
    post = {"abc": array("i", [1])}
    memo = [{}, {}, 0]
    call(grams=grams, items=items, post=post, planes=0, memo=memo, epoch=0, memo_cap=4)
    grams["abc"].append(1)
    items[1] = "xabc"
    post["xabc"] = array("q", [2, 3])
    for kept in (memo, None):
        with pytest.raises(TypeError, match="array"):
            call(grams=grams, items=items, post=post, planes=0, memo=kept, epoch=0,
                 memo_cap=4)
    cache: dict[str, Any] = {"abcd": ({}, 9, [])}  # another list: not this one's answer
    call(words=["abcd"], grams={"abc": gram, "bcd": gram}, items={0: "abcd"}, cache=cache)
    assert cache == {"abcd": (gram, 1, [0])}
    with pytest.raises(ValueError, match="start"):
        call(start=3)
    # Group numbers beyond n or negative are skipped, never written.
    counts = np.zeros(4, np.uint8)
    call(post={"abc": array("i", [-5, 2, 9, 1 << 30])}, counts=counts, n=3)
    assert counts.tolist() == [0, 0, 1, 0]


def test_switched_off_the_index_runs_python_silently() -> None:
    out, notice = one_entry_run(
        "WordOverlapScorer", "deploy b", "ploy", "WO_CORE_AVAILABLE", {"ACTORMEM_WO_CORE": "0"}
    )
    assert out == ["False", "1"]
    assert not notice


def test_masks_equal_numpy() -> None:
    from actormem._index.wordoverlap import masks

    texts = ["", "a", "on the mr. x", "é on", "deploy:ok", "İstanbul ab", "\tx\n", "zz9 10 31"]
    out = (np.zeros(12, np.uint64), np.zeros(12, np.uint64))
    ccore.text_masks(texts, out, 2)
    lo, hi = masks._text_masks(texts)
    assert out[0][2:10].tolist() == lo.tolist()
    assert out[1][2:10].tolist() == hi.tolist()
    for i, t in enumerate(texts):
        assert int(out[0][2 + i]) | int(out[1][2 + i]) << 64 == masks._short_mask(t), t
    assert out[0][:2].tolist() == out[0][10:].tolist() == [0, 0]
    with pytest.raises(ValueError, match="start"):
        ccore.text_masks(texts, out, 5)
    with pytest.raises(TypeError, match="uint64"):
        ccore.text_masks(texts, (np.zeros(12, np.int64), out[1]), 0)
    with pytest.raises(TypeError, match="str"):
        ccore.text_masks([b"x"], out, 0)  # type: ignore[list-item]
    from actormem._index import _cwordoverlap as c

    with pytest.raises(ValueError, match="start"):
        c.text_masks(texts, masks._PAIR_LO, masks._PAIR_HI, out[0], out[1], 5)
    with pytest.raises(ValueError, match="uint64"):
        c.text_masks(texts, masks._PAIR_LO, masks._PAIR_HI, out[0], np.zeros(12), 0)
    with pytest.raises(ValueError, match="tables"):
        c.text_masks(texts, out[0], masks._PAIR_HI, out[0], out[1], 0)
