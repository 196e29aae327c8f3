"""Word overlap's bit-sliced counts (``ccore.BitPlanes``, packed match sets) against the
byte counts they replace (``ccore.BITS = False``, the reference).

The kernels are checked against numpy on random sets (counts, per-chunk maxima, the
groups of one count, bitsets from group numbers, posting lists and masks); a state
machine drives two word-overlap memories with the same stores, upserts, deletes,
evictions, old snapshots and queries (filters, ``min_matched``, repeated words, writes
between a retrieve's steps), one counting in bit planes and one in bytes, and requires
identical top-k, scores (bit for bit) and ties; bad arguments are refused before C, and
the C code refuses what would break memory safety.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState, View
from actormem._index import kernels
from actormem._index.scoring import drain
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore, word_overlap_score
from actormem._index.wordoverlap import knobs as wo_knobs

from .setups import knobs_set, stepped
from .strategies import examples, run_machine

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _bits_at_every_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about the bit-sliced counts: taken at every size here (the
    default ``knobs._BITS_MIN`` leaves the small memories of the tests to the bytes)."""
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 0)


def _unpack(planes: np.ndarray[Any, Any], np_: int, n: int) -> np.ndarray[Any, Any]:
    """The counts of groups ``0 .. n - 1`` decoded from word-major planes with numpy."""
    words = ccore.words_of(n)
    grid = planes[: words * np_].reshape(words, np_)
    out = np.zeros(words * 64, np.int64)
    for j in range(np_):
        bits = np.unpackbits(grid[:, j].copy().view(np.uint8), bitorder="little")
        out += bits.astype(np.int64) << j
    return out[:n]


def _bitset(gids: list[int], n: int, room: int = 0) -> np.ndarray[Any, Any]:
    out = np.zeros(ccore.words_of(n) + room, np.uint64)
    for g in gids:
        if 0 <= g < n:
            out[g >> 6] |= np.uint64(1 << (g & 63))
    return out


sets_st = st.lists(
    st.tuples(
        st.lists(st.integers(-3, 330), max_size=60),  # group numbers, repeats, out of range
        st.integers(1, 3),  # multiplicity
        st.booleans(),  # dense (a bitset) or sparse (group numbers)
    ),
    max_size=9,
)


@settings(max_examples=examples(120), deadline=None)
@given(
    n=st.integers(0, 320),
    sets=sets_st,
    split=st.integers(1, 70),
    csa=st.booleans(),
    last=st.booleans(),
)
def test_planes_count_as_numpy(
    n: int, sets: list[tuple[list[int], int, bool]], split: int, csa: bool, last: bool
) -> None:
    # csa: the dense sets through carry-save blocks, or one by one; last: the words'
    # maxima written by the dense pass, or by a pass of their own.
    saved = wo_knobs._DENSE_CSA
    wo_knobs._DENSE_CSA = csa
    try:
        _planes_count_as_numpy(n, sets, split, last)
    finally:
        wo_knobs._DENSE_CSA = saved


def _planes_count_as_numpy(
    n: int, sets: list[tuple[list[int], int, bool]], split: int, last: bool
) -> None:
    total = sum(m for _, m, _ in sets)
    np_ = max(1, total.bit_length())
    words = ccore.words_of(n)
    planes = np.zeros(words * np_ + 3, np.uint64)
    bp = ccore.BitPlanes(planes, np_, n)
    xbits = np.zeros(words, np.uint64)
    bp.set_scratch(xbits)
    want = np.zeros(n, np.int64)
    dense: list[np.ndarray[Any, Any]] = []
    mults: list[int] = []
    for gids, m, is_dense in sets:
        uniq = sorted({g for g in gids if 0 <= g < n})
        want[uniq] += m
        if is_dense:
            # Bits at n and beyond (a later retrieve's extension) must not count.
            dense.append(_bitset([*gids, n, n + 1], n + 2, room=1))
            mults.append(m)
            continue
        arr = np.array(gids, np.int32)
        for lo in range(0, len(arr), split):  # in slices, as across yields
            bp.add_sparse(arr, lo, min(len(arr), lo + split), m)
        for lo in range(0, len(arr), split):
            bp.unmark(arr, lo, min(len(arr), lo + split))
        assert not xbits.any()  # the marks are gone for the next set
    wmax = np.full(words + 1, 7777, np.uint16)
    if last:
        bp.set_word_maxima(wmax)
    adder = bp.add_dense(dense, mults, last=last)
    for lo in range(0, words, 2):
        adder.add(lo, min(words, lo + 2))
    assert _unpack(planes, np_, n).tolist() == want.tolist()
    per_word = [int(want[w * 64 : (w + 1) * 64].max()) for w in range(words)]
    if last:
        assert wmax[:words].tolist() == per_word
        assert wmax[words] == 7777
    if not last:
        bp.set_word_maxima(wmax)
    for lo in range(0, words, 3):
        bp.word_maxima(lo, min(words, lo + 3))
    assert wmax[:words].tolist() == per_word
    assert wmax[words] == 7777
    for chunk in (64, 128):
        assert [bp.maxima_of_words(chunk, c) for c in range(-(-n // chunk))] == [
            int(want[i * chunk : (i + 1) * chunk].max()) for i in range(-(-n // chunk))
        ]
    # select below reads the word maxima; the planes alone must give the same groups
    plain = ccore.BitPlanes(planes, np_, n)
    assert [bp.count(g) for g in range(n)] == want.tolist()
    for chunk in (64, 128):
        chunks = -(-n // chunk)
        most = np.full(chunks + 1, -1, np.int64)
        bp.maxima(chunk, 0, chunks, most)
        assert most[:chunks].tolist() == [
            int(want[i * chunk : (i + 1) * chunk].max()) for i in range(chunks)
        ]
        assert most[chunks] == -1  # nothing written beyond c1
    out = np.zeros(max(1, n), np.int64)
    for c in range(total + 2):
        for glo, ghi in ((0, n), (5, max(5, n - 3)), (64, 200), (0, n + 50)):
            lo, hi = min(glo, n), min(ghi, n)
            expect = [g for g in range(lo, hi) if want[g] == c]
            for planes_of in (bp, plain):
                got = planes_of.select(c, glo, ghi, out)
                assert out[:got].tolist() == expect


@settings(max_examples=examples(100), deadline=None)
@given(
    n=st.integers(0, 300), gids=st.lists(st.integers(-2, 310), max_size=80), bit=st.integers(0, 63)
)
def test_bitsets_as_numpy(n: int, gids: list[int], bit: int) -> None:
    got = np.zeros(ccore.words_of(n) + 1, np.uint64)
    ccore.bits_set(got, np.array(gids, np.int32), n)
    assert got.tolist() == _bitset(gids, n, room=1).tolist()
    assert ccore.bits_to_gids(got, n).tolist() == sorted({g for g in gids if 0 <= g < n})
    half = len(gids) // 2
    lists = [array("i", sorted(set(gids[:half]))), array("i", gids[half:])]
    joined = np.zeros(ccore.words_of(n), np.uint64)
    ccore.bits_join(lists, n, joined)
    assert joined.tolist() == _bitset(gids, n).tolist()
    rng = np.random.default_rng(n + bit)
    masks = rng.integers(0, 1 << 63, n + 5, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = np.zeros(ccore.words_of(n + 5), np.uint64)
    lo = min(n, 3)
    hits = ccore.bits_from_masks(masks, bit, lo, n, out)
    expect = [g for g in range(lo, n) if int(masks[g]) >> bit & 1]
    assert hits == len(expect)
    assert ccore.bits_to_gids(out, n + 5).tolist() == expect


@pytest.mark.parametrize("csa", [False, True])
def test_a_long_query_carries_through_every_plane(
    csa: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 200 sets over the same groups: counts up to 200 need 8 planes and long carries.
    monkeypatch.setattr(wo_knobs, "_DENSE_CSA", csa)
    n = 130
    bp = ccore.BitPlanes(np.zeros(ccore.words_of(n) * 8, np.uint64), 8, n)
    sets = [_bitset(list(range(k % 7, n, 1 + k % 5)), n) for k in range(200)]
    bp.add_dense(sets, [1] * 199 + [0]).add(0, ccore.words_of(n))
    want = [
        sum(1 for k in range(199) if g >= k % 7 and (g - k % 7) % (1 + k % 5) == 0)
        for g in range(n)
    ]
    assert [bp.count(g) for g in range(n)] == want


@settings(max_examples=examples(200), deadline=None)
@given(
    np_=st.integers(1, ccore.MAX_PLANES),
    words=st.integers(0, 5),
    mults=st.lists(st.sampled_from([0, 1, 1, 1, 2, 3, 5, 1 << 20]), max_size=40),
    seed=st.integers(0, 1 << 30),
)
def test_carry_save_blocks_sum_as_one_by_one(
    np_: int, words: int, mults: list[int], seed: int
) -> None:
    # Any planes (counts near 2 ** np_ overflow the same way: the sums are mod 2 ** np_),
    # any number of sets (blocks of seven, of three, single ones, other multiplicities).
    from actormem._index import _cwordoverlap as c

    rng = np.random.default_rng(seed)
    full = np.iinfo(np.uint64).max
    sets = [
        rng.integers(0, full, words, dtype=np.uint64, endpoint=True)
        & rng.choice(np.array([0, full, 0x5555, full], np.uint64), words)
        for _ in mults
    ]
    start = rng.integers(0, full, words * np_, dtype=np.uint64, endpoint=True)
    lo = int(rng.integers(0, words + 1))
    got = {}
    # regs: the carry-save loop with a word's planes in registers (knobs._CSA_REGS,
    # the multiplicities above 8 added to a copy) or as before.
    for csa, regs in ((False, True), (True, False), (True, True)):
        planes = start.copy()
        c.bits_add_dense(planes, np_, lo, words, sets, mults, csa, None, 0, regs)
        got[csa, regs] = planes.tolist()
    assert got[True, True] == got[True, False] == got[False, True]
    assert got[True, True][: lo * np_] == start[: lo * np_].tolist()  # words below lo untouched


# -- the index: bit planes against byte counts ----------------------------------------

WORDS = [
    "the", "a", "on", "cat", "cats", "deploy", "deployed", "x", "id", "do", "w1", "w2",
    '{"status":', '"ok",', "é", "İstanbul", "ab", "abc", "abcd", "what", "when",
]  # fmt: skip
QUERY_WORDS = [*WORDS, "zz", "at", "eplo", "status", "stan", "bcd", "ok", "t", "wh"]


class BitsAndBytes(RuleBasedStateMachine):
    """Two memories, the same operations: one counting in bit planes, one in bytes."""

    ids = Bundle("ids")
    #: The ``ccore`` switch the two memories differ in (True for one, False for the other).
    SWITCH = "BITS"

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[bool, MemoryState] = {}
        self.i = 0
        #: Old snapshots still read (the vacuum keeps what they see).
        self.old: list[dict[bool, View]] = []

    @initialize(budget=st.sampled_from([0, 2, 8, 2048]), capacity=st.sampled_from([None, 40]))
    def make(self, budget: int, capacity: int | None) -> None:
        for bits in (False, True):
            self.states[bits] = MemoryState(
                capacity=capacity,
                half_life=3600.0,
                scorer=WordOverlapScorer(essential_budget=budget),
            )

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        for on, state in self.states.items():
            setattr(ccore, self.SWITCH, on)
            try:
                yield on, state
            finally:
                setattr(ccore, self.SWITCH, True)

    def _entry(self, words: list[str], rel: float, id: uuid.UUID | None = None) -> MemoryEntry:
        self.i += 1
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory="  ".join(words) if self.i % 3 else "\t".join(w.upper() for w in words),
            relevance=rel,
            created_at=BASE + timedelta(seconds=self.i),
            id=id or uuid.UUID(int=self.i),
            tags=["deploy the cat"] if self.i % 5 == 0 else [],
        )

    def _vacuum(self) -> None:
        for bits, state in self._each():
            horizon = min([state.published, *(v[bits].version for v in self.old)])
            state.vacuum(horizon)

    @rule(
        target=ids,
        words=st.lists(st.sampled_from(WORDS), min_size=0, max_size=8),
        fresh=st.booleans(),
        rel=st.sampled_from([0.1, 0.5, 0.9]),
    )
    def store(self, words: list[str], fresh: bool, rel: float) -> uuid.UUID:
        if fresh:
            words = [*words, f"tok{self.i}x{self.i * 7}"]  # a new token
        entry = self._entry(words, rel)
        for _, state in self._each():
            state.store(entry)
            state.publish()
        self._vacuum()
        return entry.id

    @rule(
        seed=st.integers(0, 1 << 30),
        count=st.sampled_from([30, 70, 100]),
    )
    def store_many(self, seed: int, count: int) -> None:
        # Enough texts to cross 64-group words and chunks.
        rng = np.random.default_rng(seed)
        batch = []
        for _ in range(count):
            k = int(rng.integers(1, 7))
            words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), k)]
            batch.append(self._entry([*words, f"m{self.i}"], float(rng.choice([0.2, 0.6, 1.0]))))
        for _, state in self._each():
            for entry in batch:
                state.store(entry)
            state.publish()
        self._vacuum()

    @rule(entry_id=ids, words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5))
    def upsert(self, entry_id: uuid.UUID, words: list[str]) -> None:
        entry = self._entry(words, 0.7, id=entry_id)
        for _, state in self._each():
            state.store(entry)
            state.publish()
        self._vacuum()

    @rule(entry_id=ids)
    def delete(self, entry_id: uuid.UUID) -> None:
        for _, state in self._each():
            state.delete(entry_id)
            state.publish()
        self._vacuum()

    @rule()
    def keep_snapshot(self) -> None:
        if len(self.old) < 2:
            self.old.append({bits: state.view() for bits, state in self.states.items()})

    @rule()
    def drop_snapshot(self) -> None:
        if self.old:
            self.old.pop(0)
            self._vacuum()

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=40),
        limit=st.one_of(st.integers(1, 8), st.just(1000)),  # 1000: every match, in order
        min_matched=st.sampled_from([0, 0, 1, 2, 3]),
        filtered=st.booleans(),
        old=st.booleans(),
    )
    def query(
        self, words: list[str], limit: int, min_matched: int, filtered: bool, old: bool
    ) -> None:
        query = " ".join(words)
        accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
        got = {}
        for bits, state in self._each():
            view = self.old[0][bits] if old and self.old else state.view()
            steps = state.index.top_k_steps(  # type: ignore[attr-defined]
                view, query, limit, accept, min_matched=min_matched
            )
            got[bits] = [(score, rec.seq) for score, rec in drain(steps)]
        assert got[True] == got[False], query

    @rule(
        words=st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=12),
        limit=st.integers(1, 6),
        new=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        steps=st.integers(1, 12),
    )
    def query_with_writes_between_steps(
        self, words: list[str], limit: int, new: list[str], steps: int
    ) -> None:
        # Both read a snapshot while the owner stores, deletes and purges between steps.
        live = [rec.entry.id for rec in self.states[False].view().records()]
        query = " ".join(words)
        gens = {}
        reading: dict[bool, View] = {}
        self.old.append(reading)  # the vacuum keeps what the retrieves read
        for bits, state in self._each():
            view = reading[bits] = state.view()
            gen = state.index.top_k_steps(view, query, limit, None)  # type: ignore[attr-defined]
            gens[bits] = stepped(gen, steps)
        for _, state in self._each():
            if live:
                state.delete(live[0])
            state.publish()
        self.store(new, True, 0.5)
        self.store_many(self.i, 30)
        got = {}
        for bits, _state in self._each():
            result = drain(gens[bits])
            got[bits] = [(score, rec.seq) for score, rec in result]
        self.old.remove(reading)
        assert got[True] == got[False], query

    @rule()
    def consistent(self) -> None:
        # The index's own check (cached bitsets included); a rule, not an invariant:
        # it is O(texts * words) and the runs hold a few hundred texts.
        for _, state in self._each():
            state._check()


def test_bits_and_bytes_agree() -> None:
    run_machine(BitsAndBytes, 30, 20)


@pytest.fixture
def small_knobs() -> Iterator[None]:
    """Tiny slices: every sparse set over several calls, every pass over several yields."""
    with knobs_set(
        wo_knobs, _CHUNK=8, _JOIN=3, _DENSE=4, _DENSE_BITS=4, _STEP=2, _VISIT=4, _BITS_CHUNK=64
    ):
        yield


@pytest.mark.usefixtures("small_knobs")
def test_bits_and_bytes_agree_in_small_slices() -> None:
    run_machine(BitsAndBytes, 20, 20)


class CountsOldAndNew(BitsAndBytes):
    """The same machine, two memories counting in bit planes: one adding the dense sets
    through carry-save blocks and large sparse sets as bitsets with them
    (``knobs._DENSE_CSA``, ``knobs._SPARSE_AS_DENSE`` at a threshold that leaves smaller
    sparse sets group by group), reading the counts through the words' maxima
    (``knobs._WORD_MAXIMA``), joining new sets' posting lists in batches of whole
    lists (``knobs._JOIN_LISTS``), long lists read in place (``knobs._JOIN_IN_PLACE``)
    and reading the short words' dense sets from the owner's rows of bits
    (``knobs._SHORT_ROWS``), one the path before them (each dense set through every
    plane, every sparse set group by group, every plane read, lists joined in Python
    slices, short words' sets built from the masks), the reference."""

    #: Knob values per side (True: the new path): _DENSE_CSA, _SPARSE_AS_DENSE,
    #: _WORD_MAXIMA, _JOIN_LISTS (3: batches of a few lists, here), _SHORT_ROWS (the
    #: short words' sets read from the owner's rows; both memories keep the rows, made
    #: with the knob on), _JOIN_IN_PLACE, _BITSET_FROM (a set from n / 64 groups
    #: cached as a bitset, beside _DENSE_BITS of 32; with the small slices' 4, below),
    #: _CSA_REGS, _VISIT_C, _TOKEN_BITS (4: the bitsets of lists of n / 4 numbers and
    #: more, kept from the first groups, _TOKEN_BITS_FROM 0, brought up to date every
    #: n / 8 or _MASK_BATCH numbers: 16 on both sides, so that these memories' owners
    #: keep them), _MEMO_KEEP_LEFT, _LISTS_BY_ID (the lists by token id, kept by the
    #: new side's owner only), _PREFETCH (3 lists ahead), _ADD_UNROLLED, _FIND_BYTES,
    #: _PROBE_STRS, _CAND_SIGS, _MEMO_EPOCH_ONLY.
    KNOBS = {
        True: (
            True, 128, True, 3, True, True, 64, True, True, 4, True, True, 3, True, True, True,
            True, True, 0, 16,
        ),
        False: (
            False, 0, False, 0, False, False, 0, False, False, 0, False, False, 0, False, False,
            False, False, False, 0, 16,
        ),
    }  # fmt: skip
    NAMES = (*wo_knobs._QUERY_KNOBS, "_TOKEN_BITS_FROM", "_MASK_BATCH")

    def _each(self) -> Iterator[tuple[bool, MemoryState]]:
        saved = [getattr(wo_knobs, name) for name in self.NAMES]
        for on, state in self.states.items():
            for name, value in zip(self.NAMES, self.KNOBS[on], strict=True):
                setattr(wo_knobs, name, value)
            try:
                yield on, state
            finally:
                for name, value in zip(self.NAMES, saved, strict=True):
                    setattr(wo_knobs, name, value)


def test_counts_old_and_new_agree() -> None:
    run_machine(CountsOldAndNew, 40, 25)


@pytest.mark.usefixtures("small_knobs")
def test_counts_old_and_new_agree_in_small_slices() -> None:
    run_machine(CountsOldAndNew, 20, 25)


class VisitOldAndNew(CountsOldAndNew):
    """The same machine, two memories counting in bit planes with every other knob on:
    one ordering each count's groups in C (``knobs._VISIT_C``), one with numpy, the
    reference."""

    KNOBS = {True: (True, 0), False: (False, 0)}
    NAMES = ("_VISIT_C", "_BITS_MIN")


class VisitOldAndNewInBytes(CountsOldAndNew):
    """:class:`VisitOldAndNew` over byte counts, the highest counts' groups ranked at
    once by bound (``knobs._RANK_FLAT``: a score part per group), then count by count
    (``_RANK_FLAT_GROUPS`` 3)."""

    KNOBS = {True: (True, 1 << 15, 0, 1 << 15, 3), False: (False, 1 << 15, 0, 1 << 15, 3)}
    NAMES = ("_VISIT_C", "_BITS_MIN", "_BITS_MIN_WORDS", "_RANK_FLAT", "_RANK_FLAT_GROUPS")


@pytest.mark.parametrize("machine", [VisitOldAndNew, VisitOldAndNewInBytes])
def test_visit_in_c_and_numpy_agree(machine: type[CountsOldAndNew]) -> None:
    run_machine(machine, 40, 25)


@pytest.mark.usefixtures("small_knobs")
@pytest.mark.parametrize("machine", [VisitOldAndNew, VisitOldAndNewInBytes])
def test_visit_in_c_and_numpy_agree_in_small_slices(machine: type[CountsOldAndNew]) -> None:
    # _VISIT = 4, _STEP = 2: every count's groups in several parts, batches and yields.
    run_machine(machine, 20, 25)


@settings(max_examples=examples(300), deadline=None)
@given(
    rels=st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.7, 1.0, 1e-300]), min_size=1, max_size=60),
    seqs=st.lists(st.integers(-5, 40), min_size=60, max_size=60),
    pick=st.lists(st.integers(0, 59), max_size=80),
    part=st.sampled_from([0.0, 0.1, 0.4 / 3, 0.4]),
    own_parts=st.booleans(),
    kth=st.one_of(
        st.none(), st.tuples(st.sampled_from([0.1, 0.35, 0.5, 0.6, 2.0]), st.integers(-5, 40))
    ),
    batches=st.lists(st.integers(0, 7), min_size=1, max_size=30),
)
def test_visit_heap_orders_as_numpy(
    rels: list[float],
    seqs: list[int],
    pick: list[int],
    part: float,
    own_parts: bool,
    kth: tuple[float, int] | None,
    batches: list[int],
) -> None:
    # ccore.visit_heap/visit_pop against the numpy path's bounds, filter and lexsort.
    maxrel = np.array(rels, np.float64)
    minseq = np.array(seqs[: len(rels)], np.int64)
    idx = np.array([g % len(rels) for g in pick], np.int64)
    parts = (np.arange(len(idx)) % 3) * np.float64(0.4 / 7) if own_parts else None
    bounds = ((0.5 * maxrel[idx] + (parts if parts is not None else part)) + 0.0) + 0.1
    order = [
        (float(b), int(s), int(g), float(parts[i]) if parts is not None else part)
        for i, (b, s, g) in enumerate(zip(bounds, minseq[idx], idx, strict=True))
    ]
    if kth is not None:
        order = [o for o in order if o[0] > kth[0] or (o[0] == kth[0] and o[1] < kth[1])]
    order.sort(key=lambda o: (-o[0], o[1]))
    heap = np.full(4 * len(idx) + 3, -1, np.int64)
    m = ccore.visit_heap(idx, maxrel, minseq, part, parts, kth, heap)
    assert m == len(order)
    got = []
    for k in batches:
        picked, left = ccore.visit_pop(heap, m, k)
        assert len(picked) == min(k, m)
        assert left == m - len(picked)
        got += [(b, s, g, p) for g, b, s, p in picked]
        m = left
    got += [(b, s, g, p) for g, b, s, p in ccore.visit_pop(heap, m, m)[0]]
    # Groups of the same bound and seq may come in any order; (bound, seq) must not.
    assert [o[:2] for o in got] == [o[:2] for o in order]
    assert sorted(got, key=repr) == sorted(order, key=repr)


def test_visit_and_chunk_maxima_refuse_bad_arguments() -> None:
    # ccore's wrappers refuse before C; the C functions check sizes and group numbers.
    from actormem._index import _cwordoverlap as c

    idx, rel, seq = np.array([0, 2], np.int64), np.zeros(3), np.zeros(3, np.int64)
    heap = np.zeros(8, np.int64)
    bad: list[tuple[type[Exception], tuple[Any, ...]]] = [
        (TypeError, ([0, 2], rel, seq, 0.1, None, None, heap)),
        (ValueError, (idx.astype(np.int32), rel, seq, 0.1, None, None, heap)),
        (ValueError, (idx, rel.astype(np.float32), seq, 0.1, None, None, heap)),
        (ValueError, (idx, rel, seq, 0.1, np.zeros(3), None, heap)),  # a part per group
        (ValueError, (idx, rel, seq, 0.1, None, None, heap[:7])),
        (ValueError, (idx, rel, seq, 1, None, None, heap)),
        (ValueError, (idx, rel, seq, 0.1, None, (1, 2), heap)),
        (ValueError, (np.array([0, 3], np.int64), rel, seq, 0.1, None, None, heap)),
        (ValueError, (np.array([-1], np.int64), rel, seq, 0.1, None, None, heap)),
    ]
    for error, args in bad:
        with pytest.raises(error):
            ccore.visit_heap(*args)
    with pytest.raises(ValueError, match="beyond"):
        c.visit_heap(np.array([3], np.int64), rel, seq, 0.1, None, False, 0.0, 0, heap)
    with pytest.raises(ValueError, match="too short"):
        c.visit_heap(idx, rel, seq, 0.1, None, False, 0.0, 0, heap[:7])
    assert ccore.visit_heap(idx, rel, seq, 0.1, None, None, heap) == 2
    for m, k in ((3, 1), (-1, 1), (1, -1)):
        with pytest.raises(ValueError, match="m"):
            ccore.visit_pop(heap, m, k)
        with pytest.raises(ValueError, match="out of range"):
            c.visit_pop(heap, m, k)
    assert ccore.visit_pop(heap, 2, 5) == ([(0, 0.1 + 0.1, 0, 0.1), (2, 0.1 + 0.1, 0, 0.1)], 0)
    n = 300
    bp = ccore.BitPlanes(np.zeros(ccore.words_of(n) * 3, np.uint64), 3, n)
    with pytest.raises(ValueError, match="set_word_maxima"):
        bp.maxima_of_chunks(64)
    wmax = np.array([1, 5, 2, 0, 7], np.uint16)
    bp.set_word_maxima(wmax)
    for chunk in (0, 65, -64):
        with pytest.raises(ValueError, match="multiple of 64"):
            bp.maxima_of_chunks(chunk)
    assert bp.maxima_of_chunks(64) == [1, 5, 2, 0, 7]
    assert bp.maxima_of_chunks(128) == [5, 2, 7]
    assert bp.maxima_of_chunks(1 << 18) == [7]
    for words, per in ((6, 1), (-1, 1), (5, 0)):
        with pytest.raises(ValueError, match="out of range"):
            c.wmax_chunks(wmax, words, per)
    assert c.wmax_chunks(wmax, 4, 3) == [5, 0]


@settings(max_examples=examples(150), deadline=None)
@given(
    n=st.integers(0, 700),
    counts=st.lists(st.integers(0, 7), min_size=700, max_size=700),
    c=st.integers(0, 9),
    chunk=st.sampled_from([64, 128, 256]),
    room=st.integers(0, 300),
    data=st.data(),
)
def test_select_chunks_as_select(
    n: int, counts: list[int], c: int, chunk: int, room: int, data: st.DataObject
) -> None:
    # BitPlanes.select_chunks against select per chunk: the same groups, whole chunks
    # per call, a chunk that does not fit left for the next call.
    words = ccore.words_of(n)
    planes = np.zeros(max(1, words) * 3, np.uint64)
    for g in range(n):
        for j in range(3):
            if counts[g] >> j & 1:
                planes[(g >> 6) * 3 + j] |= np.uint64(1 << (g & 63))
    bp = ccore.BitPlanes(planes, 3, n)
    wmax = np.zeros(max(1, words), np.uint16)
    bp.set_word_maxima(wmax)
    if words:
        bp.word_maxima(0, words)
    chunks = list(range(0, max(n, 1), chunk))
    starts = data.draw(st.lists(st.sampled_from(chunks), unique=True).map(sorted))
    full = np.zeros(chunk, np.int64)
    want = []
    for start in starts:
        want += full[: bp.select(c, start, start + chunk, full)].tolist()
    out = np.full(chunk + room, -7, np.int64)
    got, at = [], 0
    while at < len(starts):
        k, done = bp.select_chunks(c, starts[at:], chunk, out)
        assert done > 0 or not starts[at:]
        got += out[:k].tolist()
        at += done
    assert got == want
    with pytest.raises(ValueError, match="out too short"):
        bp.select_chunks(c, starts, chunk, out[: chunk - 1])
    for bad in ([1], [-chunk]):
        with pytest.raises(ValueError, match="multiple"):
            bp.select_chunks(c, bad, chunk, out)


class SmallOldAndNew(CountsOldAndNew):
    """The same machine, two memories: one as a small numbering is retrieved now (byte
    counts below ``knobs._BITS_MIN`` groups, the groups of the highest counts ranked at
    once by bound, ``knobs._RANK_FLAT``; short words' small sets cached,
    ``knobs._CACHE_SHORT_WORDS``), one the path before them (bit planes at every size,
    the groups ranked count by count, only large sets cached), the reference."""

    #: _RANK_FLAT_GROUPS 3 here: the highest counts of these small memories at once,
    #: the lower ones count by count.
    #: _BITS_MIN_WORDS 0: the bytes for these short queries too.
    KNOBS = {True: (1 << 15, 0, 1 << 15, 3, True), False: (0, 0, 0, 3, False)}
    NAMES = (
        "_BITS_MIN",
        "_BITS_MIN_WORDS",
        "_RANK_FLAT",
        "_RANK_FLAT_GROUPS",
        "_CACHE_SHORT_WORDS",
    )


class SmallOldAndNewAtOnce(SmallOldAndNew):
    """:class:`SmallOldAndNew` with every matched group ranked at once (the default)."""

    KNOBS = {True: (1 << 15, 0, 1 << 15, 0, True), False: (0, 0, 0, 0, False)}


def test_small_old_and_new_agree() -> None:
    run_machine(SmallOldAndNew, 40, 25)


def test_small_old_and_new_agree_every_group_at_once() -> None:
    run_machine(SmallOldAndNewAtOnce, 40, 25)


@pytest.mark.usefixtures("small_knobs")
def test_small_old_and_new_agree_in_small_slices() -> None:
    # _VISIT = 4: the flat ranking's groups in several parts and batches.
    run_machine(SmallOldAndNew, 20, 25)


@pytest.mark.parametrize("bits_min", [0, 1 << 15])
@pytest.mark.parametrize("flat", [0, 1 << 15])
@pytest.mark.parametrize("groups", [0, 1, 5, 64, 1 << 20])
@pytest.mark.parametrize("words_min", [0, 32])
def test_small_numberings_take_the_bytes_and_the_flat_ranking(
    bits_min: int, flat: int, groups: int, words_min: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Which path a retrieve of a small memory takes follows the knobs: the bit planes
    # only from _BITS_MIN groups or for a query of fewer than _BITS_MIN_WORDS words
    # (6 here), the flat ranking only on the byte path up to
    # _RANK_FLAT groups (every matched group at once, or its highest counts down to
    # _RANK_FLAT_GROUPS groups: one count, a few, all); every combination gives the
    # same results.
    from actormem._index.wordoverlap import search

    monkeypatch.setattr(wo_knobs, "_BITS_MIN", bits_min)
    monkeypatch.setattr(wo_knobs, "_BITS_MIN_WORDS", words_min)
    monkeypatch.setattr(wo_knobs, "_RANK_FLAT", flat)
    monkeypatch.setattr(wo_knobs, "_RANK_FLAT_GROUPS", groups)
    taken: list[str] = []
    for name in ("_top_k_bits", "_rank_flat"):
        real = getattr(search.WordOverlapSearch, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            taken.append(_name)
            return (yield from _real(*args, **kw))

        wrapped = staticmethod(spy) if name == "_rank_flat" else spy
        monkeypatch.setattr(search.WordOverlapSearch, name, wrapped)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    texts = [f"deploy the cat n{i} {WORDS[i % len(WORDS)]}" for i in range(300)]
    for i, text in enumerate(texts):
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=text,
                relevance=(i % 7) / 7,
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
            )
        )
    state.publish()
    query = "deploy cat n1 what the zz"
    got = drain(state.index.top_k_steps(state.view(), query, 5, None))  # type: ignore[attr-defined]
    # From scratch: the score of every text, best first, ties by the earlier store.
    scored = [(-word_overlap_score(t, [], (i % 7) / 7, query), i) for i, t in enumerate(texts)]
    want_top = [(-s, texts[i]) for s, i in sorted(scored)[:5]]
    assert [(s, r.entry.memory) for s, r in got] == want_top
    bits = ccore.bits_active() and (bits_min == 0 or words_min > 6)
    paths = (["_top_k_bits"] if bits else []) + (["_rank_flat"] if flat and not bits else [])
    assert taken == paths


class MemoAndNot(BitsAndBytes):
    """The same machine, two memories: one keeping the small match sets of
    ``count_words`` across retrieves (``ccore.MEMO``, the word memo), one finding them
    again every time (the reference). Stores between queries grow the memo's posting
    arrays and gram lists, deletes with the vacuum purge (the epoch), old snapshots read
    the memo with a smaller bound."""

    SWITCH = "MEMO"


def test_memo_and_no_memo_agree() -> None:
    run_machine(MemoAndNot, 60, 25)


@pytest.mark.usefixtures("small_knobs")
def test_memo_and_no_memo_agree_in_small_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    # Two words per generation: the memo's generations turn over all the time.
    monkeypatch.setattr(wo_knobs, "_MEMO_WORDS", 2)
    run_machine(MemoAndNot, 20, 25)


def memo_fixture() -> tuple[MemoryState, Callable[[int, str], None], Callable[[str], set[str]]]:
    """A word-overlap memory state, ``put(i, text)`` (stored as the i-th entry and
    published) and ``hits(query)`` (the texts of every match)."""
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())

    def put(i: int, text: str) -> None:
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=text,
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
            )
        )
        state.publish()

    def hits(query: str) -> set[str]:
        got = drain(state.index.top_k_steps(state.view(), query, 100, None, min_matched=1))  # type: ignore[attr-defined]
        return {rec.entry.memory for _, rec in got}

    return state, put, hits


def test_the_memo_is_kept_and_brought_up_to_date() -> None:
    # A repeated word is answered from the memo (the memo holds it), and texts stored
    # after the memo was built, including ones with new tokens containing the word, are
    # counted; a purge that rewrites a posting list makes the memo stale (epoch).
    state, put, hits = memo_fixture()

    for i in range(20):
        put(i, f"deploy n{i}" if i % 2 else f"other n{i}")
    e = state.index._e  # type: ignore[attr-defined]
    assert hits("deploy") == {f"deploy n{i}" for i in range(1, 20, 2)}
    assert "deploy" in e.memo[0]
    put(20, "redeployed service")  # a new token containing the word
    put(21, "deploy again")  # a new number in a held list
    assert hits("deploy") == {f"deploy n{i}" for i in range(1, 20, 2)} | {
        "redeployed service",
        "deploy again",
    }
    epoch = e.epoch
    for i in range(1, 12, 2):
        state.delete(uuid.UUID(int=i + 1))
    state.publish()
    state.vacuum(state.published)
    assert e.epoch > epoch
    want = {f"deploy n{i}" for i in range(13, 20, 2)} | {"redeployed service", "deploy again"}
    assert hits("deploy") == want
    put(22, "deploy later")  # appended to the list that replaced the one the memo held
    assert hits("deploy") == want | {"deploy later"}


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("limit", [5, 6])
def test_a_long_word_left_for_its_size_keeps_its_lookup(
    keep: bool, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    # count_words (with the memo, which keeps the long-word cache to itself) leaves a
    # word of 4 or more characters whose postings (6 in 5 tokens) reach its limit after
    # it verified its candidates; with knobs._MEMO_KEEP_LEFT the ids are kept in the
    # vocabulary's long-word cache, the entry lookup_steps would keep, and lookup_steps
    # answers from it: the same ids as a lookup of its own.
    monkeypatch.setattr(wo_knobs, "_MEMO_KEEP_LEFT", keep)
    vocab, post = SubstringVocab(), {}
    texts = ["player plays", "display", "playful", "alpha", "plays again", "play it"]
    for gid, text in enumerate(texts):
        ccore.add_text(post, text, gid, vocab)
    counts = np.zeros(64, np.uint8)
    memo: list[Any] = [{}, {}, 0]
    at, left = ccore.count_words(
        ["play", "alpha"], [1, 1], 0, 1000, limit, vocab, post, {}, {}, counts, 6, 0, memo
    )
    assert (at, left) == (2, [0])
    assert ("play" in vocab._cache) == keep
    assert "alpha" not in vocab._cache  # counted here: the memo holds it
    fresh = SubstringVocab()
    for gid, text in enumerate(texts):
        ccore.add_text({}, text, gid, fresh)
    want = sorted(map(fresh.item_of, drain(fresh.lookup_steps("play"))))
    assert sorted(map(vocab.item_of, drain(vocab.lookup_steps("play")))) == want
    if keep:
        best, end, ids = vocab._cache["play"]
        assert end == len(best)
        assert sorted(map(vocab.item_of, ids)) == want


# -- arguments ------------------------------------------------------------------------


def test_bad_arguments_are_refused_before_c() -> None:
    n = 100
    ok = np.zeros(ccore.words_of(n) * 3, np.uint64)
    bad_ctor: list[tuple[type[Exception], Any, Any, Any]] = [
        (TypeError, list(ok), 3, n),
        (ValueError, ok.astype(np.int64), 3, n),
        (ValueError, ok[::2], 3, n),
        (ValueError, ok, 4, n),  # too short for 4 planes
        (ValueError, ok, 0, n),
        (ValueError, ok, ccore.MAX_PLANES + 1, n),
        (ValueError, ok, 3, -1),
        (ValueError, ok, 3, 200),
    ]
    for error, planes, np_, size in bad_ctor:
        with pytest.raises(error):
            ccore.BitPlanes(planes, np_, size)
    bp = ccore.BitPlanes(ok, 3, n)
    gids = np.array([1, 2, 3], np.int32)
    with pytest.raises(ValueError, match="set_scratch"):
        bp.add_sparse(gids, 0, 3, 1)
    with pytest.raises(ValueError, match="set_scratch"):
        bp.unmark(gids, 0, 3)
    with pytest.raises(ValueError, match="xbits"):
        bp.set_scratch(np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="xbits"):
        bp.set_scratch(np.zeros(2, np.int64))
    bp.set_scratch(np.zeros(2, np.uint64))
    with pytest.raises(ValueError, match="gids"):
        bp.add_sparse(gids.astype(np.int64), 0, 3, 1)
    with pytest.raises(ValueError, match="lo, hi"):
        bp.add_sparse(gids, 2, 4, 1)
    with pytest.raises(ValueError, match="lo, hi"):
        bp.unmark(gids, 0, 4)
    with pytest.raises(ValueError, match="m must"):
        bp.add_sparse(gids, 0, 3, -1)
    with pytest.raises(ValueError, match="chunk"):
        bp.maxima(63, 0, 1, np.zeros(2, np.int64))
    with pytest.raises(ValueError, match="c0, c1"):
        bp.maxima(64, 0, 3, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="out"):
        bp.maxima(64, 0, 2, np.zeros(1, np.int64))
    with pytest.raises(ValueError, match="out"):
        bp.select(1, 0, 100, np.zeros(99, np.int64))
    with pytest.raises(ValueError, match="c must"):
        bp.select(-1, 0, 100, np.zeros(100, np.int64))
    with pytest.raises(IndexError):
        bp.count(100)
    with pytest.raises(ValueError, match="set too short"):
        bp.add_dense([np.zeros(1, np.uint64)], [1])
    with pytest.raises(ValueError, match="multiplicit"):
        bp.add_dense([np.zeros(2, np.uint64)], [-1])
    with pytest.raises(TypeError):
        bp.add_dense((np.zeros(2, np.uint64),), [1])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="wlo"):
        bp.add_dense([np.zeros(2, np.uint64)], [1]).add(0, 3)
    with pytest.raises(ValueError, match="set_word_maxima"):
        bp.add_dense([np.zeros(2, np.uint64)], [1], last=True)
    with pytest.raises(ValueError, match="set_word_maxima"):
        bp.word_maxima(0, 1)
    with pytest.raises(ValueError, match="set_word_maxima"):
        bp.maxima_of_words(64, 0)
    with pytest.raises(ValueError, match="wmax"):
        bp.set_word_maxima(np.zeros(1, np.uint16))  # 100 groups: 2 words
    with pytest.raises(ValueError, match="wmax"):
        bp.set_word_maxima(np.zeros(2, np.uint32))
    with pytest.raises(ValueError, match="wmax"):
        bp.set_word_maxima(np.zeros(4, np.uint16)[::2])
    bp.set_word_maxima(np.zeros(2, np.uint16))
    with pytest.raises(ValueError, match="wlo, whi"):
        bp.word_maxima(0, 3)
    with pytest.raises(ValueError, match="wlo, whi"):
        bp.word_maxima(2, 1)
    with pytest.raises(ValueError, match="chunk"):
        bp.maxima_of_words(100, 0)
    with pytest.raises(ValueError, match="beyond the chunks"):
        bp.maxima_of_words(64, 2)
    with pytest.raises(ValueError, match="bits too short"):
        ccore.bits_set(np.zeros(1, np.uint64), gids, 100)
    with pytest.raises(ValueError, match="lo, hi"):
        ccore.bits_set(np.zeros(2, np.uint64), gids, 100, 2, 4)
    with pytest.raises(ValueError, match="lo, hi"):
        ccore.bits_set(np.zeros(2, np.uint64), gids, 100, -1, 2)
    with pytest.raises(ValueError, match="lo and hi"):
        ccore.bits_set(np.zeros(2, np.uint64), gids, 100, 0, 2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="array"):
        ccore.bits_join([[1, 2]], 10, np.zeros(1, np.uint64))  # type: ignore[list-item]
    with pytest.raises(ValueError, match="bit must"):
        ccore.bits_from_masks(np.zeros(4, np.uint64), 64, 0, 4, np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="n out of range"):  # 200 groups need 4 words
        ccore.count_words([], [], 0, 1, 1, SubstringVocab(), {}, {}, {}, ok, 200, 3)
    with pytest.raises(TypeError, match="uint64"):
        ccore.count_words(
            [], [], 0, 1, 1, SubstringVocab(), {}, {}, {}, ok[:1].astype(np.uint8), 1, 3
        )


def test_c_checks_memory_safety_itself() -> None:
    from actormem._index import _cwordoverlap as c

    planes = np.zeros(6, np.uint64)  # 2 words of 3 planes: groups 0..127
    with pytest.raises(ValueError, match="planes too short"):
        c.bits_add_dense(planes, 3, 0, 3, [], [])
    with pytest.raises(ValueError, match="np"):
        c.bits_add_dense(planes, 0, 0, 1, [], [])
    with pytest.raises(ValueError, match="set shorter"):
        c.bits_add_dense(planes, 3, 0, 2, [np.zeros(1, np.uint64)], [1])
    xbits, one = np.zeros(2, np.uint64), np.array([1], np.int32)
    with pytest.raises(ValueError, match="planes too short"):
        c.bits_add_sparse(planes, 3, xbits, one, 0, 1, 200, 1)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_add_sparse(planes, 3, np.zeros(1, np.uint64), one, 0, 1, 128, 1)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_add_sparse(planes, 3, xbits, one, 0, 2, 128, 1)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_unmark(np.zeros(1, np.uint64), one, 0, 1, 128)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_unmark(xbits, one, 1, 0, 128)
    with pytest.raises(ValueError, match="out too short"):
        c.bits_select(planes, 3, 0, 0, 128, 128, np.zeros(10, np.int64))
    with pytest.raises(ValueError, match="planes too short"):
        c.bits_select(planes, 3, 0, 0, 200, 200, np.zeros(200, np.int64))
    with pytest.raises(ValueError, match="out of range"):
        c.bits_maxima(planes, 3, 128, 64, 0, 3, np.zeros(3, np.int64))
    with pytest.raises(ValueError, match="planes too short"):
        c.bits_count(planes, 3, 128)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_set(np.zeros(1, np.uint64), np.array([1], np.int32), 0, 1, 65)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_from_masks(np.zeros(4, np.uint64), 64, 0, 4, np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="n out of range"):
        c.bits_join([], 65, np.zeros(1, np.uint64))
    with pytest.raises(ValueError, match="planes"):
        c.bits_add_dense(np.zeros(6, np.int64), 3, 0, 1, [], [])
    with pytest.raises(ValueError, match="wmax too short"):
        c.bits_add_dense(planes, 3, 0, 2, [], [], True, np.zeros(1, np.uint16), 128)
    with pytest.raises(ValueError, match="wmax"):
        c.bits_add_dense(planes, 3, 0, 2, [], [], True, np.zeros(2, np.uint64), 128)
    with pytest.raises(ValueError, match="out of range"):
        c.bits_add_dense(planes, 3, 0, 2, [], [], True, np.zeros(2, np.uint16), -1)
    with pytest.raises(ValueError, match="np <= 16"):
        c.bits_add_dense(np.zeros(34, np.uint64), 17, 0, 2, [], [], True, np.zeros(2, np.uint16))
    with pytest.raises(ValueError, match="out of range"):
        c.bits_word_maxima(planes, 3, 64, 0, 2, np.zeros(2, np.uint16))  # 64 groups: 1 word
    with pytest.raises(ValueError, match="wmax too short"):
        c.bits_word_maxima(planes, 3, 128, 0, 2, np.zeros(1, np.uint16))
    with pytest.raises(ValueError, match="planes too short"):
        c.bits_word_maxima(planes[:5], 3, 128, 0, 2, np.zeros(2, np.uint16))
    with pytest.raises(ValueError, match="wmax too short"):
        c.bits_select(planes, 3, 0, 0, 128, 128, np.zeros(128, np.int64), np.zeros(1, np.uint16))
    # Numbers beyond n or negative are skipped, never written.
    bits = np.zeros(2, np.uint64)
    c.bits_set(bits, np.array([-5, 3, 64, 1 << 30], np.int32), 0, 4, 64)
    assert bits.tolist() == [8, 0]


@pytest.mark.parametrize("budget", [0, 2048])
def test_every_match_of_many_groups(budget: int) -> None:
    # Hundreds of groups (several 64-group words and chunks), queries with repeated
    # words: the whole ranking (limit beyond the matches) is the byte path's.
    rng = np.random.default_rng(budget)
    states = {
        bits: MemoryState(
            capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=budget)
        )
        for bits in (False, True)
    }
    for i in range(700):
        words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), int(rng.integers(1, 9)))]
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join([*words, f"n{i % 50}"]),
            relevance=float(rng.choice([0.25, 0.5, 1.0])),
            created_at=BASE + timedelta(seconds=i),
            id=uuid.UUID(int=i + 1),
        )
        for state in states.values():
            state.store(entry)
    for state in states.values():
        state.publish()
    queries = [
        "the",
        "the the cat a",
        "deploy x id w1 w2 ab abc eplo",
        "n1 n1 n1 the a a",
        "n17 n17 n17 abcd",
    ]
    queries += [" ".join(QUERY_WORDS * 3), "zz", "a b c d e f g h i j k l m n o p q r s t"]
    for query in queries:
        for limit, min_matched in ((1000, 0), (7, 0), (1000, 2), (3, 1)):
            got = {}
            for bits, state in states.items():
                ccore.BITS = bits
                try:
                    steps = state.index.top_k_steps(  # type: ignore[attr-defined]
                        state.view(), query, limit, None, min_matched=min_matched
                    )
                    got[bits] = [(score, rec.seq) for score, rec in drain(steps)]
                finally:
                    ccore.BITS = True
            assert got[True] == got[False], (query, limit, min_matched)


def test_a_small_memory_borrows_room_for_its_own_groups_only() -> None:
    # The room a retrieve reads a count's groups into is at most its groups rounded up
    # to a whole 64-group word, not a whole _BITS_CHUNK: 64 readers of a small memory
    # each holding 2 MiB of it doubled the main job's RSS.
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    for i in range(100):
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"{WORDS[i % len(WORDS)]} n{i}",
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
            )
        )
    state.publish()
    index = state.index
    assert ccore.BITS
    got = list(drain(index.top_k_steps(state.view(), "n1 the cat", 5, None)))  # type: ignore[attr-defined]
    assert got
    spares = index._e.scratch._spares.get(np.dtype(np.int64), [])  # type: ignore[attr-defined]
    assert spares, "the room is given back to the pool"
    assert max(len(a) for a in spares) <= ccore.words_of(100) * 64


def test_short_rows_follow_growth_renumbering_and_the_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The owner's rows of short-word bits (knobs._SHORT_ROWS) stay the masks' transpose
    # through growth, a renumbering after deletes and a restore from the index image
    # (the index's _check compares them), and a retrieve reading them ranks as the
    # byte counts do; masks computed once without the core drop the rows for good.
    from actormem._index.wordoverlap import persist as wo_persist
    from actormem._index.wordoverlap.index import _WordOverlapIndex

    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 16)
    rng = np.random.default_rng(7)
    states = {
        bits: MemoryState(
            capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=2)
        )
        for bits in (False, True)
    }
    entries = []
    for i in range(700):
        words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), int(rng.integers(1, 6)))]
        entries.append(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=" ".join([*words, f"m{i}"]),
                relevance=float(rng.choice([0.2, 0.6, 1.0])),
                created_at=BASE + timedelta(seconds=i),
                id=uuid.UUID(int=i + 1),
            )
        )
    for state in states.values():
        for entry in entries:
            state.store(entry)
        state.publish()
        for entry in entries[:400]:
            state.delete(entry.id)
        state.publish()
        state.vacuum(state.published)
    index: Any = states[True].index
    assert index._e.rows is not None
    assert index._e.n < 700  # renumbered
    states[True]._check()

    def agree() -> None:
        for query in ("a on x", "do t the", "w1 ab cat", "é x id"):
            got = {}
            for bits, state in states.items():
                monkeypatch.setattr(ccore, "BITS", bits)
                steps = state.index.top_k_steps(state.view(), query, 7, None)  # type: ignore[attr-defined]
                got[bits] = [(score, rec.seq) for score, rec in drain(steps)]
            assert got[True] == got[False], query

    agree()
    records = sorted(states[True].view().records(), key=lambda rec: rec.seq)
    restored = _WordOverlapIndex(2)
    wo_persist.restore(restored, wo_persist.dump(index, records), records)
    assert restored._e.rows is not None
    restored._check(records)
    fresh = MemoryEntry(
        category=MemoryCategory.FACT,
        memory="a new text on x",
        relevance=0.9,
        created_at=BASE + timedelta(seconds=900),
        id=uuid.UUID(int=900),
    )
    monkeypatch.setattr(kernels, "WO_CORE", False)
    states[True].store(fresh)  # masks of a new group computed in Python
    states[True].publish()
    index._e.fill_masks()
    monkeypatch.setattr(kernels, "WO_CORE", True)
    assert index._e.rows is None
    states[True]._check()
    states[False].store(fresh)
    states[False].publish()
    agree()


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("sliced", [False, True])
@pytest.mark.parametrize("renumber", [False, True])
def test_rows_and_in_place_joins_under_writes_at_every_step(
    seed: int, sliced: bool, renumber: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A retrieve reading the owner's short-word rows (knobs._SHORT_ROWS), joining
    # long posting lists in place (knobs._JOIN_IN_PLACE) and ORing the owner's bitsets
    # of the longest lists (knobs._TOKEN_BITS: lists of n / 2 numbers and more, kept
    # from the first groups, brought up to date by the reader when the owner has added
    # since) while the owner, after every step, stores texts holding the same words
    # (masks computed, rows and list bitsets written, growth), deletes and purges
    # (lists replaced, a renumbering): its answer is its snapshot's, the one the path
    # before them gives for the same snapshot once the owner is done.
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 8)
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 8)
    monkeypatch.setattr(wo_knobs, "_MASK_STEP", 3)
    monkeypatch.setattr(wo_knobs, "_DENSE_BITS", 2)
    monkeypatch.setattr(wo_knobs, "_JOIN", 4)
    monkeypatch.setattr(wo_knobs, "_JOIN_LISTS", 3)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS", 2)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_FROM", 0)
    # The owner sets the kept lists' new postings every 4 groups, or the readers do.
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_STEP", 4 if seed % 2 else 1 << 20)
    if sliced:
        monkeypatch.setattr(wo_knobs, "_CHUNK", 8)
        monkeypatch.setattr(wo_knobs, "_STEP", 2)
        monkeypatch.setattr(wo_knobs, "_BITS_CHUNK", 64)
    rng = np.random.default_rng(seed)
    state = MemoryState(
        capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=0)
    )
    count = 0

    def entry() -> MemoryEntry:
        nonlocal count
        count += 1
        k = int(rng.integers(1, 6))
        words = [WORDS[int(j)] for j in rng.integers(0, len(WORDS), k)]
        return MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join([*words, f"m{count}"]),
            relevance=float(rng.choice([0.2, 0.6, 1.0])),
            created_at=BASE + timedelta(seconds=count),
            id=uuid.UUID(int=count),
        )

    for _ in range(int(rng.integers(60, 200))):
        state.store(entry())
    state.publish()
    live = [rec.entry.id for rec in state.view().records()]
    # Two thirds purged: the owner renumbers at the first vacuum (one third: it grows).
    for i in rng.permutation(len(live))[: (2 if renumber else 1) * len(live) // 3].tolist():
        state.delete(live[i])
    state.publish()
    view = state.view()
    queries = ["a on x", "do t the", "w1 ab cat a", "id x o", "cat cats the a on"]
    gens = {q: state.index.top_k_steps(view, q, 5, None) for q in queries}  # type: ignore[attr-defined]
    got: dict[str, list[tuple[float, int]]] = {}
    while gens:
        for q in list(gens):
            try:
                next(gens[q])
            except StopIteration as stop:
                got[q] = [(score, rec.seq) for score, rec in stop.value]
                del gens[q]
        for _ in range(int(rng.integers(0, 12))):
            state.store(entry())
        alive = [rec.entry.id for rec in state.view().records()]
        if alive and rng.random() < 0.5:
            state.delete(alive[int(rng.integers(0, len(alive)))])
        state.publish()
        state.vacuum(min(state.published, view.version))
    state._check()
    for name in ("_SHORT_ROWS", "_JOIN_IN_PLACE", "_TOKEN_BITS"):
        monkeypatch.setattr(wo_knobs, name, False)
    for q in queries:
        for bits in (True, False):
            monkeypatch.setattr(ccore, "BITS", bits)
            want = drain(state.index.top_k_steps(view, q, 5, None))  # type: ignore[attr-defined]
            assert got[q] == [(score, rec.seq) for score, rec in want], (q, bits)


def test_a_mid_sized_set_is_cached_as_a_bitset(monkeypatch: pytest.MonkeyPatch) -> None:
    # knobs._BITSET_FROM: a match set of n / 128 to n / 32 groups is built and cached as
    # a bitset (read as it is by later retrieves), else as group numbers; the same top-k.
    got = {}
    for on in (0, 128):
        monkeypatch.setattr(wo_knobs, "_BITSET_FROM", on)
        state = MemoryState(
            capacity=None, half_life=3600.0, scorer=WordOverlapScorer(essential_budget=2)
        )
        for i in range(2000):
            words = ["zebra"] if i % 64 == 0 else []  # 32 of 2,000 texts: n / 62.5
            state.store(
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=" ".join([*words, "cat" if i % 3 else "dog", f"m{i}"]),
                    relevance=0.5,
                    created_at=BASE + timedelta(seconds=i),
                    id=uuid.UUID(int=i + 1),
                )
            )
        state.publish()
        index: Any = state.index
        got[on] = [
            [(score, rec.seq) for score, rec in index.top_k(state.view(), q, 40, None)]
            for q in ("zebra cat", "zebra dog zebra", "zebra cat")  # the last: cached
        ]
        hit = index._e.cache.get("zebra")
        assert hit is not None
        assert hit[2].dtype == (np.uint64 if on else np.int32)
    assert got[0] == got[128]
