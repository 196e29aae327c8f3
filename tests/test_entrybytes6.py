"""BM25's per-group term arrays as ranges of one pool (branch entrybytes6, issue #20
item 6, step 2 of ``entrybytes2``'s plan).

``bm25.knobs._TERM_POOL`` (read when an index is made): every group's packed terms live
in one append-only array of the index (``postings._TermPool``), group ``num``'s at
``data[starts[num]:starts[num + 1]]``, not in an ``array`` per group; a purged group's
terms are dropped by a compaction once ``knobs._POOL_DEAD`` of the pool is theirs.
Checked here:

* two states (pool / an array per group) driven by ``test_entrybytes2``'s writes, held
  views, upserts, deletes, consolidations and walks, with compactions on every purge
  (``_POOL_DEAD`` tiny): after each step the same groups, terms, lengths, posting lists
  and statistics, ``_check`` on both (the pool's own layout and dead count), and the same
  top-k (scores, records) on every held view as the brute force's;
* the pool's compaction keeps each live group's terms and empties a purged one's;
  widening (int32 -> int64 terms) keeps the terms; ``starts`` past 2**32 - 1 widens;
* the image dumped from either layout restores into either, equal to a rebuild; the
  image of other rows is refused.
"""

from __future__ import annotations

import uuid
from array import array
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from actormem import BM25Scorer, MemoryCategory, MemoryEntry
from actormem._engine.state import MemoryState
from actormem._index.bm25 import knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.bm25.index import BM25Index
from actormem._index.bm25.postings import _NO_TERMS, _pool_code, _TermPool
from actormem._index.persist import ImageError

from .setups import stored_texts
from .strategies import examples, run_machine
from .test_bm25 import brute_force
from .test_entrybytes2 import TwoLayouts
from .test_store_batch import BASE

QUERIES = ["cat", "the deploy", "a x1 cat", "straße é t", "deploy deploy cat v1", "zzz"]


def _new(pool: bool, capacity: int | None = None) -> MemoryState:
    saved = knobs._TERM_POOL
    knobs._TERM_POOL = pool
    try:
        s = MemoryState(capacity=capacity, half_life=3600.0, scorer=BM25Scorer())
    finally:
        knobs._TERM_POOL = saved
    s.journal = []
    return s


def _index(state: MemoryState) -> BM25Index:
    return cast(BM25Index, state.index)


def _structures(state: MemoryState) -> tuple[Any, ...]:
    """The index by what both layouts must agree on (``_check``s the state first)."""
    state._check()
    index = _index(state)
    table = index._table
    groups: list[Any] = []
    for num, item in enumerate(table):  # either group layout (knobs._GROUP_COLUMNS)
        if item is None:
            groups.append(None)
            continue
        g = num if index._cols else item
        recs = index._recs_of(g)
        groups.append(
            (
                num,
                index._dead_of(g),
                [r.seq for r in recs],
                list(index._nums_of(g)),
                index.document_terms(next(r for r in recs if r not in index._gone)),
            )
        )
    terms = {
        name: (t.num, t.groups.tolist(), t.tfs.tolist(), t.df, t.dead)
        for name, t in index._terms.items()
    }
    size = len(table)
    return (
        groups,
        terms,
        index._lengths[:size].tolist(),
        index._alive[:size].tolist(),
        index._first_seq[:size].tolist(),
        (index._n, index._total),
        sorted((str(k), index._num(g)) for k, g in index._groups.items()),
    )


def _group_terms(index: Any) -> list[list[int]]:
    """Each live group's term numbers, by group number, in either group layout."""
    return [
        list(index._nums_of(num if index._cols else g))
        for num, g in enumerate(index._table)
        if g is not None
    ]


class TwoTermLayouts(TwoLayouts):
    """test_entrybytes2's writes, held views and walks into two BM25 states, one whose
    index keeps its groups' terms in a pool, one an array per group."""

    @initialize(capacity=st.sampled_from([None, None, None, 4, 9]), load=st.sampled_from([4, 9]))
    def make(self, capacity: int | None, load: int) -> None:
        self.views = {True: [], False: []}
        self.walks = {True: [], False: []}
        for on in (True, False):
            s = _new(on, capacity)
            s._by_relevance._reset(load)
            s.on_remove = lambda e, cause, on=on: self.removed[on].append((e.id, cause))
            self.states[on] = s

    def _side(self, on: bool) -> None:
        pass  # the layout is the index's own, fixed when it was made

    @rule(pick=st.integers(0, 9), query=st.sampled_from(QUERIES))
    def query_held(self, pick: int, query: str) -> None:
        """A held view's top-k, the same on both sides and the brute force's."""
        got = []
        for on, state in self._each():
            views = self.views[on] or [state.view()]
            view = views[pick % len(views)]
            hits = state.index.top_k(view, query, 6, None)
            want = brute_force(
                state.index.scorer,  # type: ignore[arg-type]
                _index(state)._records(),
                view.version,
                query,
                6,
            )
            assert [(s, r.seq) for s, r in hits] == [(s, r.seq) for s, r in want]
            got.append([(s, r.entry.id, r.seq) for s, r in hits])
        assert got[0] == got[1]

    @invariant()
    def same_structures(self) -> None:
        if not self.states:
            return
        seen = [_structures(state) for _, state in self._each()]
        assert seen[0] == seen[1]
        assert self.removed[True] == self.removed[False]
        on, off = _index(self.states[True]), _index(self.states[False])
        assert on._pool is not None
        assert off._pool is None
        assert on._cols or all(g.terms is _NO_TERMS for g in on._table if g is not None)
        assert all(g.terms is not _NO_TERMS for g in off._table if g is not None)


def test_two_term_layouts_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knobs, "_POOL_DEAD", 0.01)  # compact on nearly every purge
    run_machine(TwoTermLayouts, 20, 25)


def _pool_of(groups: list[list[int]]) -> _TermPool:
    pool = _TermPool()
    for nums in groups:
        pool.append(nums, "H")
    return pool


@pytest.mark.parametrize("wide_at", [None, 0, 3])
@settings(max_examples=examples(80), deadline=None)
@given(
    groups=st.lists(st.lists(st.integers(0, 2**16 - 1), max_size=5), max_size=12),
    dead=st.lists(st.booleans(), max_size=12),
)
def test_pool_compaction_keeps_the_live_terms(
    wide_at: int | None, groups: list[list[int]], dead: list[bool]
) -> None:
    """Compaction (after widening to int64 along the way, or not) keeps each live
    group's terms in place of order and leaves a purged group's range empty."""
    pool = _TermPool()
    for i, nums in enumerate(groups):
        pool.append(nums, "I" if wide_at is not None and i >= wide_at else "H")
    assert [pool.of(i).tolist() for i in range(len(groups))] == groups
    assert [pool.span(i) for i in range(len(groups))] == list(map(len, groups))
    alive = [0 if d else 1 for d in dead[: len(groups)]]
    alive += [1] * (len(groups) - len(alive))
    pool.dead = sum(len(g) for g, a in zip(groups, alive, strict=True) if not a)
    pool._check(len(groups), alive)
    code = pool.data.typecode
    pool.compact(alive)
    pool._check(len(groups), alive)
    assert pool.data.typecode == code
    assert pool.dead == 0
    assert len(pool.data) == sum(len(g) for g, a in zip(groups, alive, strict=True) if a)
    for i, (nums, a) in enumerate(zip(groups, alive, strict=True)):
        assert pool.of(i).tolist() == (nums if a else [])
    pool.append([7, 8], "H")  # appends go on after a compaction
    assert pool.of(len(groups)).tolist() == [7, 8]


def test_pool_widens_and_purges_compact() -> None:
    pool = _pool_of([[1, 2], [3]])
    assert pool.data.typecode == "H"
    assert pool.starts.typecode == "I"
    pool.append([2**16], "I")  # a term number past uint16: the whole pool widens
    assert pool.data.typecode == "I"
    pool.append([5], "H")  # never narrowed again
    pool.append([2**40], "q")
    assert pool.data.typecode == "q"
    assert [pool.of(i).tolist() for i in range(5)] == [[1, 2], [3], [2**16], [5], [2**40]]
    assert [_pool_code(n) for n in (1, 2**16, 2**16 + 1, 2**32, 2**32 + 1)] == list("HHIIq")
    pool = _pool_of([[1, 2], [3], [4, 5, 6]])
    pool.purged(1, [1, 0, 1])  # 1 purged term of 6, below a quarter: kept
    assert pool.dead == 1
    assert pool.data.tolist() == [1, 2, 3, 4, 5, 6]
    pool._check(3, [1, 0, 1])
    pool.purged(0, [0, 0, 1])  # 3 of 6: compacted
    assert pool.dead == 0
    assert pool.data.tolist() == [4, 5, 6]
    assert pool.starts.tolist() == [0, 0, 0, 3]
    pool._check(3, [0, 0, 1])


def test_pool_starts_widen_past_32_bits() -> None:
    """``starts`` is uint32 until the pool's length would not fit (shown with a stand-in
    for the data, not 4G items)."""

    class Long(array):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 2**32 + super().__len__()

    pool = _TermPool()
    pool.data = Long("i")
    pool.append([1], "H")
    assert pool.starts.typecode == "q"
    assert pool.starts.tolist() == [0, 2**32 + 1]


def _image_state(pool: bool, texts: list[str]) -> MemoryState:
    s = _new(pool)
    return stored_texts(s, texts)


@pytest.mark.parametrize("dups", [False, True])
def test_the_image_round_trips_between_layouts(dups: bool) -> None:
    """An image dumped from either layout (after purges and a compaction) restores into
    either, equal to a rebuild from the same records; an image of other rows is refused."""
    texts = [f"alpha {i % 5 if dups else i} beta w{i % 3}" for i in range(40)]
    texts[7] += " w1" * 300  # a frequency past the packed byte
    images = []
    for src in (True, False):
        s = _image_state(src, texts)
        for i in range(0, 40, 3):  # purged groups in the pool, then compacted
            s.delete(uuid.UUID(int=i + 1))
        s.publish()
        s.vacuum(s.published)
        recs = sorted(_index(s)._records(), key=lambda r: r.seq)
        parts = bm25_persist.dump(_index(s), recs)
        images.append(parts)
        for dst in (True, False):
            fresh = _new(dst).index
            rebuilt = _new(dst).index
            for r in recs:
                rebuilt.add(r)  # type: ignore[attr-defined]
            out = bm25_persist.restore(fresh, parts, recs)  # type: ignore[arg-type]
            assert (out._pool is not None) is dst
            out._check(recs)
            assert _group_terms(out) == _group_terms(rebuilt)
            for query in ("alpha beta", "w1 3", "tag x alpha"):
                top = out.top_k(s.view(), query, 5, None)
                want = rebuilt.top_k(s.view(), query, 5, None)  # type: ignore[attr-defined]
                assert [(x, r.seq) for x, r in top] == [(x, r.seq) for x, r in want]
            with pytest.raises(ImageError):
                bm25_persist.restore(_new(dst).index, parts, recs[:-1])  # type: ignore[arg-type]
    assert images[0] == images[1]  # the same image from either layout


@pytest.mark.parametrize("code", ["I", "q"])
def test_a_wide_pool_takes_the_shifted_terms(code: str) -> None:
    """A pool already widened (past 65,536 terms, here set by hand) takes each new
    group's term numbers by shifts, not the narrow path's byte copy: the same terms,
    frequencies and top-k as the layout of an array per group."""
    texts = [f"alpha {i % 7} beta w{i % 3}" + " w2" * (i % 4) for i in range(30)]
    texts[3] += " w1" * 300
    states = [_new(True), _new(False)]
    pool = _index(states[0])._pool
    assert pool is not None
    pool.data = array(code)
    for s in states:
        for i, text in enumerate(texts):
            s.store(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=text,
                    id=uuid.UUID(int=i + 1),
                    created_at=BASE,
                )
            )
        s.publish()
    assert pool.data.typecode == code
    assert _structures(states[0]) == _structures(states[1])
    for query in ("alpha beta", "w1 w2", "3 w0"):
        got = [[(x, r.seq) for x, r in s.index.top_k(s.view(), query, 5, None)] for s in states]
        assert got[0] == got[1]
