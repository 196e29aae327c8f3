"""The compiled index kernels against the numpy reference.

Each kernel must give bit for bit what the numpy path computes (the same IEEE double
operations in the same order); a state machine drives two memories per scorer with the
same writes and queries, one answering with the kernels and one with the reference, and
requires identical top-k, scores and ties; bad arguments are refused before C; and
without the extension the package works, saying so in one line.
"""

from __future__ import annotations

import uuid
from array import array
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    rule,
)

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.scoring import drain
from actormem._index.wordoverlap import knobs as wo_knobs

from .fallback import one_entry_run
from .setups import knobs_set, stepped
from .strategies import examples, run_machine

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="the C extension is not built")

BASE = datetime(2024, 1, 1, tzinfo=UTC)


# -- kernels, one by one -------------------------------------------------------------


postings = st.integers(1, 60).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 199), min_size=n, max_size=n, unique=True).map(sorted),
        st.lists(st.integers(1, 300), min_size=n, max_size=n),
    )
)


def _lists(groups: list[int], tfs: list[int]) -> tuple[array[int], array[int]]:
    return array("i", groups), array("B" if max(tfs) < 256 else "i", tfs)


@settings(max_examples=examples(60), deadline=None)
@given(
    post=postings,
    seed=st.integers(0, 2**32 - 1),
    wi=st.floats(0.01, 20),
    b_part=st.floats(0, 2),
    a_part=st.floats(0, 2),
    tau=st.floats(-1, 5) | st.just(-np.inf),
)
def test_accumulate_equals_numpy(
    post: tuple[list[int], list[int]],
    seed: int,
    wi: float,
    b_part: float,
    a_part: float,
    tau: float,
) -> None:
    rng = np.random.default_rng(seed)
    groups, tfs = _lists(*post)
    lengths = rng.integers(1, 500, 200).astype(np.int32)
    acc0 = rng.random(200) * rng.integers(0, 2, 200)
    in_top = rng.random(200) < 0.2
    start = int(rng.integers(0, len(groups)))
    end = int(rng.integers(start, len(groups) + 1))
    # The numpy path of MaxScoreSearch, step by step.
    acc = acc0.copy()
    nums = np.frombuffer(groups, np.int32, end)[start:].astype(np.intp)
    tf = np.frombuffer(tfs, tfs.typecode, end)[start:].astype(np.float64)
    after = lengths[nums] * b_part
    after += a_part
    after += tf
    np.divide(tf, after, out=after)
    after *= wi
    after += acc[nums]
    acc[nums] = after
    hot = nums[after > tau]
    above = len(hot)
    hot = hot[~in_top[hot]]
    c_acc = acc0.copy()
    c_nums = np.empty(end - start, np.intp)
    c_hot = np.empty(end - start, np.intp)
    got, c_above = kernels.bm25_accumulate(
        groups, tfs, start, end, lengths, c_acc, wi, a_part, b_part, tau, in_top, c_nums, c_hot
    )
    assert c_acc.tobytes() == acc.tobytes()
    assert c_nums.tolist() == nums.tolist()
    assert (got, c_above) == (len(hot), above)
    assert c_hot[:got].tolist() == hot.tolist()


@settings(max_examples=examples(60), deadline=None)
@given(
    post=postings,
    seed=st.integers(0, 2**32 - 1),
    wi=st.floats(0.01, 20),
    theta=st.floats(0, 10),
)
def test_refine_and_bound_equal_numpy(
    post: tuple[list[int], list[int]], seed: int, wi: float, theta: float
) -> None:
    rng = np.random.default_rng(seed)
    groups, tfs = _lists(*post)
    count = int(rng.integers(1, len(groups) + 1))
    lengths = rng.integers(1, 500, 200).astype(np.int32)
    cands = np.unique(rng.integers(0, 200, int(rng.integers(0, 80)))).astype(np.int32)
    partial = rng.random(len(cands)) * 3
    a_part, b_part, up, rest = 0.3, 0.01, 1.0 + 1e-9, float(rng.random())
    # The numpy path (_lookup, then the update and the test).
    part = partial.copy()
    gv = np.frombuffer(groups, np.int32, count)
    idx = np.minimum(np.searchsorted(gv, cands), count - 1)
    hit = gv[idx] == cands
    tf = np.frombuffer(tfs, tfs.typecode, count)[idx[hit]].astype(np.float64)
    part[hit] += wi * (tf / (tf + (a_part + b_part * lengths[cands[hit]])))
    keep = part * up + rest >= theta
    c_part = partial.copy()
    c_keep = np.empty(len(cands), np.bool_)
    kept = kernels.bm25_refine(
        groups, tfs, count, cands, c_part, lengths, wi, a_part, b_part, up, rest, theta, c_keep
    )
    assert c_part.tobytes() == part.tobytes()
    assert c_keep.tolist() == keep.tolist()
    assert kept == int(keep.sum())
    # The largest saturation of a list's range (_Term.bound_steps).
    start = int(rng.integers(0, count))
    nums = np.frombuffer(groups, np.int32, count)[start:]
    tfv = np.frombuffer(tfs, tfs.typecode, count)[start:].astype(np.float64)
    sats = tfv / (tfv + (a_part + 0.7 * lengths[nums]))
    assert kernels.bm25_max_sat(groups, tfs, start, count, lengths, a_part, 0.7) == float(
        sats.max()
    )


@settings(max_examples=examples(60), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), norm=st.floats(0.01, 5), theta=st.floats(-1, 3))
def test_exact_and_keep_equal_python(seed: int, norm: float, theta: float) -> None:
    rng = np.random.default_rng(seed)
    num = 7
    # Query terms 0..5 (some absent from the group), each list holding group `num`.
    query: list[tuple[float, array[int], array[int], int]] = []
    for _ in range(6):
        groups = sorted({*rng.integers(0, 50, 5).tolist(), num})
        tfs = rng.integers(1, 400, len(groups)).tolist()
        query.append((float(rng.random() * 4), *_lists(groups, tfs), len(groups)))
    term_nums = rng.permutation(9)[: int(rng.integers(1, 9))].tolist()  # 6-8: not queried
    position = {t: p for p, t in enumerate(rng.permutation(9)[:6].tolist())}
    terms, want, hits = [], 0.0, []
    for t in term_nums:
        pos = position.get(t)
        tf_real = None
        if pos is not None:
            _, groups, tfs, count = query[pos]
            tf_real = tfs[groups.index(num)]
        tf = min(tf_real if tf_real is not None else int(rng.integers(1, 300)), 255)
        terms.append(t << 8 | tf)
        if pos is not None:
            hits.append((pos, tf))
    for pos, tf in sorted(hits):  # the reference's loop (_Exact.exact_of)
        wi, groups, tfs, count = query[pos]
        if tf == 255:
            tf = tfs[groups.index(num)]
        want += wi * (tf / (tf + norm))
    for code in "iq":
        assert kernels.bm25_exact(array(code, terms), position, query, num, norm) == want
    acc = rng.random(60) * 2
    nums = rng.integers(0, 60, 40).astype(np.intp)
    out = np.empty(40, np.intp)
    got = kernels.bm25_keep(acc, nums, 3, 40, 1.0 + 1e-9, 0.25, theta, out)
    assert out[:got].tolist() == nums[3:][acc[nums[3:]] * (1.0 + 1e-9) + 0.25 >= theta].tolist()


@settings(max_examples=examples(60), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.uint8, np.uint16, np.int64]),
    words=st.integers(0, 6),
)
def test_counting_equals_numpy(seed: int, dtype: Any, words: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 300))
    sets = [(rng.random(n + 10) < rng.random()).astype(np.uint8) for _ in range(words)]
    mults = [int(m) for m in rng.integers(1, 4, words)]
    counts = np.zeros(n, dtype)
    for s, m in zip(sets, mults, strict=True):
        counts += s[:n] * dtype(m)
    got = np.zeros(n, dtype)
    adder = kernels.DenseCounts(got, sets, mults)
    cuts = sorted({0, n, *rng.integers(0, n + 1, 3).tolist()})
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        adder.add(lo, hi)
    assert got.tolist() == counts.tolist()
    # Sparse sets: repeats and numbers >= n are counted once / not at all, as numpy does.
    gids = rng.integers(0, n + 20, int(rng.integers(0, 400))).astype(np.int32)
    want = counts.copy()
    want[gids[gids < n]] += dtype(3)
    once = counts.copy()
    kernels.wo_count_sparse(once, gids, 0, len(gids), n, 3, None, 1)
    assert once.tolist() == want.tolist()
    marked = counts.copy()
    mark = np.zeros(n, np.uint16)
    for lo in range(0, len(gids), 7):  # in slices, the mark removing repeats across them
        kernels.wo_count_sparse(marked, gids, lo, min(len(gids), lo + 7), n, 3, mark, 5)
    assert marked.tolist() == want.tolist()


@settings(max_examples=examples(60), deadline=None)
@given(
    texts=st.lists(st.text(alphabet="ab \u00e9\U0001f600x", max_size=12), min_size=1, max_size=9),
    word=st.text(alphabet="ab\u00e9\U0001f600", min_size=1, max_size=3),
    lo=st.integers(0, 20),
    span=st.integers(0, 20),
)
def test_scan_equals_the_text_tests(texts: list[str], word: str, lo: int, span: int) -> None:
    mod = len(texts)
    hi = lo + min(span, mod)  # a ring of mod texts: at most mod groups
    want = [g for g in range(lo, hi) if word in texts[g % mod]]
    assert kernels.wo_scan(texts, lo, hi, mod, word) == want


@settings(max_examples=examples(60), deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 99), min_size=1, max_size=20), max_size=6),
    n=st.integers(0, 100),
)
def test_join_equals_numpy(lists: list[list[int]], n: int) -> None:
    arrays = [array("i", lst) for lst in lists]
    joined = np.frombuffer(b"".join(arrays), np.int32)  # the reference's join
    want = joined[joined < n]
    room = np.empty(len(joined), np.int32)
    assert room[: kernels.wo_join(arrays, n, room, None)].tolist() == want.tolist()
    dense = np.zeros(n + 3, np.uint8)
    assert kernels.wo_join(arrays, n, None, dense) == 0
    expect = np.zeros(n + 3, np.uint8)
    expect[want] = 1
    assert dense.tolist() == expect.tolist()


def test_bad_arguments_are_refused_before_c() -> None:
    groups, tfs = array("i", [0, 3, 9]), array("B", [1, 2, 3])
    lengths = np.ones(10, np.int32)
    acc = np.zeros(10)
    top = np.zeros(10, np.bool_)
    out = np.empty(3, np.intp)
    good = (groups, tfs, 0, 3, lengths, acc, 1.0, 0.1, 0.1, 0.0, top, out, out.copy())
    assert kernels.bm25_accumulate(*good) == (3, 3)
    bad: list[tuple[int, Any]] = [
        (0, array("q", [0, 3, 9])),  # not int32 postings
        (1, [1, 2, 3]),  # not an array
        (3, 4),  # beyond the list
        (2, 3 + 1),  # start after end
        (4, lengths.astype(np.int64)),
        (5, np.zeros(10, np.float32)),
        (5, np.zeros(20)[::2]),  # not contiguous
        (11, np.empty(2, np.intp)),  # too short for the range
    ]
    for at, value in bad:
        args = list(good)
        args[at] = value
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_accumulate(*args)
    frozen = np.zeros(10)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        kernels.bm25_accumulate(*good[:5], frozen, *good[6:])
    with pytest.raises(ValueError, match="shorter"):
        kernels.DenseCounts(np.zeros(5, np.uint8), [np.zeros(4, np.uint8)], [1])
    with pytest.raises(TypeError):
        kernels.DenseCounts(np.zeros(5, np.int32), [], [])
    with pytest.raises(ValueError, match="lo, hi"):
        kernels.DenseCounts(np.zeros(5, np.uint8), [], []).add(0, 6)
    with pytest.raises(ValueError, match="too short"):
        kernels.wo_join([array("i", [1, 2])], 5, np.empty(1, np.int32), None)
    with pytest.raises(ValueError, match="exactly one"):
        kernels.wo_join([], 5, None, None)
    with pytest.raises(TypeError):
        kernels.wo_join([array("q", [1])], 5, np.empty(1, np.int32), None)
    with pytest.raises(ValueError, match="mod"):
        kernels.wo_scan(["a"], 0, 3, 2, "a")
    with pytest.raises(TypeError):
        kernels.wo_scan(("a",), 0, 1, 1, "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="word"):
        kernels.wo_count_sparse(
            np.zeros(5, np.uint8), np.zeros(1, np.int32), 0, 1, 5, 1, None, 70000
        )


def test_c_checks_memory_safety_itself() -> None:
    # Past the Python checks (called directly), C still refuses what would read or
    # write out of bounds.
    from actormem._index import _ckernels  # type: ignore[attr-defined]

    lengths = np.ones(4, np.int32)
    acc = np.zeros(4)
    top = np.zeros(4, np.bool_)
    out = np.empty(1, np.intp)
    with pytest.raises(ValueError, match="group number"):
        _ckernels.bm25_accumulate(
            array("i", [7]), array("B", [1]), 0, 1, lengths, acc, 1.0, 0.0, 0.0, 0.0, top, out,
            out.copy(),
        )  # fmt: skip
    with pytest.raises(ValueError, match="start/end"):
        _ckernels.bm25_accumulate(
            array("i", [1]), array("B", [1]), 0, 2, lengths, acc, 1.0, 0.0, 0.0, 0.0, top, out,
            out.copy(),
        )  # fmt: skip
    with pytest.raises(ValueError, match="candidate"):
        _ckernels.bm25_refine(
            array("i", [1]), array("B", [1]), 1, np.array([9], np.int32), np.zeros(1), lengths,
            1.0, 0.0, 0.0, 1.0, 0.0, 0.0, np.zeros(1, np.bool_),
        )  # fmt: skip
    with pytest.raises(TypeError, match="str"):
        _ckernels.wo_scan(["a", 1], 0, 2, 2, "a")
    with pytest.raises(ValueError, match="capacity"):
        _ckernels.wo_join([array("i", [1, 2])], 5, np.empty(1, np.int32), None)
    with pytest.raises(ValueError, match="set length"):
        _ckernels.wo_count_dense(np.zeros(5, np.uint8), 0, 5, [np.zeros(2, np.uint8)], [1])


def test_without_the_extension_the_index_works_and_says_so() -> None:
    out, notice = one_entry_run(
        "BM25Scorer", "a b", "a", "AVAILABLE", {"ACTORMEM_PURE_PYTHON": "1"}
    )
    assert out == ["False", "1"]
    assert len(notice) == 1
    # The name README and docs/design.md give this path.
    assert "using the numpy path" in notice[0]


@pytest.mark.skipif(not kernels.AVAILABLE, reason="the compiled kernels are not built")
def test_pure_python_switch_set_to_0_is_off() -> None:
    # As ACTORMEM_WO_CORE=0 and ACTORMEM_BM25_CORE=0: 0 means off, not "set".
    out, notice = one_entry_run(
        "BM25Scorer", "a b", "a", "AVAILABLE", {"ACTORMEM_PURE_PYTHON": "0"}
    )
    assert out == ["True", "1"]
    assert notice == []


# -- both paths driven by the same operations ----------------------------------------

WORDS = ["the", "a", "on", "cat", "cats", "deploy", "deployed", "x", "id", "do", "w1", "w2"]


@pytest.fixture
def small_knobs() -> Iterator[None]:
    """Tiny chunks, so that every slicing path (and its kernel calls) runs."""
    with (
        knobs_set(bm25_knobs, _CHUNK=4, _BOUND_CHUNK=4, _DENSE_CHUNK=16, _FEW=2),
        knobs_set(wo_knobs, _CHUNK=8, _JOIN=4, _DENSE=4, _RENUMBER_MIN=1, _STEP=2),
    ):
        yield


class TwoPaths(RuleBasedStateMachine):
    """One memory per path and scorer, the same writes; every query compared."""

    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.states: dict[tuple[str, bool], MemoryState] = {}
        self.i = 0

    @initialize(scorer=st.sampled_from(["word-overlap", "bm25"]), budget=st.sampled_from([0, 8]))
    def make(self, scorer: str, budget: int) -> None:
        for compiled in (False, True):
            self.states[scorer, compiled] = MemoryState(
                capacity=None,
                half_life=3600.0,
                scorer=WordOverlapScorer(essential_budget=budget)
                if scorer == "word-overlap"
                else BM25Scorer(),
            )

    @rule(
        target=ids,
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=6),
        rel=st.sampled_from([0.1, 0.5, 0.9]),
    )
    def store(self, words: list[str], rel: float) -> uuid.UUID:
        self.i += 1
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory=" ".join(words),
            relevance=rel,
            created_at=BASE + timedelta(seconds=self.i),
            id=uuid.UUID(int=self.i),
        )
        for state in self.states.values():
            state.store(entry)
            state.publish()
        return entry.id

    @rule(entry_id=consumes(ids))
    def delete(self, entry_id: uuid.UUID) -> None:
        for state in self.states.values():
            state.delete(entry_id)
            state.publish()
            state.vacuum(state.published)

    @rule(
        words=st.lists(st.sampled_from([*WORDS, "zz", "at"]), min_size=1, max_size=8),
        limit=st.integers(1, 6),
    )
    def query(self, words: list[str], limit: int) -> None:
        query = " ".join(words)
        got = {}
        for (_, compiled), state in self.states.items():
            kernels.ENABLED = compiled
            try:
                hits = state.index.top_k(state.view(), query, limit, None)
            finally:
                kernels.ENABLED = kernels.AVAILABLE
            got[compiled] = [(score, rec.seq) for score, rec in hits]
        assert got[True] == got[False], query

    @rule(
        words=st.lists(st.sampled_from([*WORDS, "zz"]), min_size=1, max_size=8),
        limit=st.integers(1, 6),
        new=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        steps=st.integers(1, 6),
    )
    def query_with_writes_between_steps(
        self, words: list[str], limit: int, new: list[str], steps: int
    ) -> None:
        # Both paths read a snapshot while the owner stores, purges (renumbering word
        # overlap's groups) and compacts between their steps.
        first = next(iter(self.states.values()))
        live = [rec.entry.id for rec in first.view().records()]
        for state in self.states.values():
            if live:
                state.delete(live[0])  # purged below, while the queries are under way
            state.publish()
        query = " ".join(words)
        gens = {}
        for key, state in self.states.items():
            kernels.ENABLED = key[1]  # read at a retrieve's first step
            gen = state.index.top_k_steps(state.view(), query, limit, None)  # type: ignore[attr-defined]
            gens[key] = stepped(gen, steps)
        kernels.ENABLED = kernels.AVAILABLE
        seen = first.published  # the views' version
        self.store(new, 0.5)
        for state in self.states.values():
            state.vacuum(seen)  # purges the deleted entry, nothing a view still sees
        got = {}
        for key, gen in gens.items():
            result = drain(gen)
            got[key[1]] = [(score, rec.seq) for score, rec in result]
        assert got[True] == got[False], query

    @invariant()
    def checked(self) -> None:
        for state in self.states.values():
            state._check()


@pytest.mark.usefixtures("small_knobs")
def test_kernels_and_reference_agree_on_every_query() -> None:
    run_machine(TwoPaths, 40, 30)
