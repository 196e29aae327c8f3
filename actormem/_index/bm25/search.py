"""The BM25 index's reader: MaxScore top-k over the posting lists, in bounded steps.

With the compiled core (``kernels.bm25_core_active()``) the search is
:meth:`MaxScoreSearch._core_steps`: document at a time in C, with block-max windows; the
Python term-at-a-time search below stays the reference.

See the package documentation of :mod:`actormem._index.bm25` (MaxScore, Turtle & Flood
1995; the exact scores equal a brute force's bit for bit). :class:`MaxScoreSearch` runs
one query against a :class:`~actormem._index.bm25.BM25Index`; :class:`_Exact` holds the
query's exact scoring (per text, memoized, and per record with recency and prior).
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Generator, Mapping
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._record import Record
from .. import kernels
from ..scoring import Accept, ReadView, drain
from . import knobs
from .postings import _NO_NUMS, _TF_BITS, _TF_CAP, _lookup, _nums, _recs_in, _tfs

if TYPE_CHECKING:
    from .index import BM25Index
    from .scorer import BM25Scorer

__all__ = ["MaxScoreSearch"]

#: One query term as a retrieve took it: (weight * idf, group numbers, frequencies, length).
_Post = tuple[float, "array[int]", "array[int]", int]


class _Exact:
    """Exact scores for one retrieve: of a text (group) at the snapshot's statistics,
    term by term in the query's order with the brute force's floating-point operations,
    and of its records (recency, then prior). Memoized per group number."""

    __slots__ = (
        "accept",
        "alpha",
        "avgdl",
        "b",
        "compiled",
        "exact",
        "found",
        "half_life",
        "k1",
        "lengths",
        "limit",
        "now",
        "position",
        "query",
        "table",
        "terms_of",
        "version",
        "weighted",
    )

    def __init__(
        self,
        *,
        scorer: BM25Scorer,
        view: ReadView,
        accept: Accept,
        limit: int,
        avgdl: float,
        table: list[Any],
        lengths: Any,
        query: list[_Post],
        position: dict[int, int],
        compiled: bool,
        terms_of: Callable[[int], array[int]],
    ) -> None:
        self.compiled = compiled
        #: A live group's packed terms by number (``BM25Index._terms_at``: the pool is read
        #: when called, so a compaction between two steps is never seen).
        self.terms_of = terms_of
        self.k1, self.b = scorer.k1, scorer.b
        self.version = view.version
        self.accept = accept
        self.limit = limit
        self.avgdl = avgdl
        self.table = table
        self.lengths = lengths
        self.query = query
        self.position = position
        self.half_life = scorer.half_life
        self.alpha = scorer.relevance_prior
        self.weighted = self.half_life is not None or bool(self.alpha)
        self.now = scorer.clock() if self.half_life is not None else 0.0
        #: Exact score by group number (:meth:`exact_of`).
        self.exact: dict[int, float] = {}
        #: Up to ``limit`` record scores by group number (:meth:`scores_in`).
        self.found: dict[int, list[float]] = {}

    def exact_scores(self, nums: Any) -> Any:
        """BM25 of the groups ``nums`` (sorted), term by term in the query's order,
        with the brute force's floating-point operations (so, bit for bit).
        O(len(nums) * q log L), vectorised."""
        k1, b = self.k1, self.b
        norm = k1 * ((1.0 - b) + b * self.lengths[nums] / self.avgdl)
        score = np.zeros(len(nums))
        for wi, groups, tfs, count in self.query:
            hit, tf = _lookup(groups, tfs, count, nums)
            score[hit] += wi * (tf / (tf + norm[hit]))
        return score

    def exact_of(self, num: int) -> float:
        """BM25 of group ``num`` as :meth:`exact_scores` computes it, for a few
        groups (binary searches in the query's lists; memoized). O(T log q)."""
        exact = self.exact
        score = exact.get(num)
        if score is None:
            score = 0.0
            group = self.table[num]
            if group is not None:  # else purged: no record to score
                k1, b = self.k1, self.b
                norm = k1 * (1.0 - b + b * int(self.lengths[num]) / self.avgdl)
                if self.compiled:  # the same operations in C (kernels.py)
                    score = kernels.bm25_exact(
                        self.terms_of(num), self.position, self.query, num, norm
                    )
                    exact[num] = score
                    return score
                # The group's own terms and frequencies (no binary search unless a
                # frequency is too high to pack), summed in the query's order.
                get_position = self.position.get
                hits = []
                for t in self.terms_of(num):
                    pos = get_position(t >> _TF_BITS)
                    if pos is not None:
                        hits.append((pos, t & _TF_CAP))
                hits.sort()
                query = self.query
                for pos, tf in hits:
                    wi, groups, tfs, count = query[pos]
                    if tf == _TF_CAP:
                        tf = tfs[bisect_left(groups, num, 0, count)]
                    score += wi * (tf / (tf + norm))
            exact[num] = score
        return score

    def weigh(self, score: float, rec: Record) -> float:
        """A record's score from its text's: recency, then prior. O(1)."""
        half_life, alpha = self.half_life, self.alpha
        if half_life is not None:
            created = rec.cols.get(rec.slot, "created_at").timestamp()
            score *= 0.5 ** (max(0.0, self.now - created) / half_life)
        if alpha:
            score *= (1.0 - alpha) + alpha * rec.cols.relevance(rec.slot)
        return score

    def scores_in(self, num: int, score: float) -> list[float]:
        """Exact scores of up to ``limit`` of the text's visible, accepted records,
        best first (memoized). O(records of the text)."""
        values = self.found.get(num)
        if values is None:
            group = self.table[num]
            values = []
            version, accept, limit = self.version, self.accept, self.limit
            if group is not None:
                if self.weighted:
                    values = [
                        self.weigh(score, rec)
                        for rec in _recs_in(group)
                        if rec.born <= version < rec.died and (accept is None or accept(rec))
                    ]
                    values.sort(reverse=True)
                    del values[limit:]
                else:
                    count = 0
                    for rec in _recs_in(group):
                        if rec.born <= version < rec.died and (accept is None or accept(rec)):
                            count += 1
                            if count == limit:
                                break
                    values = [score] * count
            self.found[num] = values
        return values

    def offer(self, heap: list[tuple[float, int, Record]], group: Any, score: float) -> None:
        """Offer the visible, accepted records of ``group`` (its slot in the group table,
        ``postings._recs_in``), whose text scores
        ``score``, to ``heap``: the ``limit`` best ``(score, -seq, rec)`` so far, worst
        on top (a higher score, then a lower seq, wins). O(records of the text log
        limit), O(limit log limit) without weights (records are by seq: later ones only
        tie or lose)."""
        version, accept, limit = self.version, self.accept, self.limit
        if not self.weighted:
            if len(heap) == limit and score < heap[0][0]:
                return
            for rec in _recs_in(group):
                if len(heap) == limit:
                    worst, worst_negseq, _ = heap[0]
                    if score < worst or (score == worst and -rec.seq <= worst_negseq):
                        return
                if rec.born <= version < rec.died and (accept is None or accept(rec)):
                    if len(heap) < limit:
                        heapq.heappush(heap, (score, -rec.seq, rec))
                    else:
                        heapq.heapreplace(heap, (score, -rec.seq, rec))
            return
        for rec in _recs_in(group):
            if rec.born <= version < rec.died and (accept is None or accept(rec)):
                s = self.weigh(score, rec)
                if len(heap) < limit:
                    heapq.heappush(heap, (s, -rec.seq, rec))
                elif s > heap[0][0] or (s == heap[0][0] and -rec.seq > heap[0][1]):
                    heapq.heapreplace(heap, (s, -rec.seq, rec))

    def kth_score(self, nums: Any) -> float:
        """The k-th best exact score of the records of groups ``nums`` (-inf if fewer)."""
        limit = self.limit
        pairs = sorted(((self.exact_of(num), num) for num in nums.tolist()), reverse=True)
        values: list[float] = []
        for score, num in pairs:
            values += self.scores_in(num, score)
            if not self.weighted and len(values) >= limit:
                break
        if len(values) < limit:
            return -math.inf
        values.sort(reverse=True)
        return values[limit - 1]


#: What :meth:`MaxScoreSearch._terms_steps` returns: ``(terms, bounds, parts, lengths,
#: codes, dense)``.
_ShortTerms = tuple[
    list[Any], list[float], tuple[float, float, float, float, float, float], Any, Any, bool
]


def _query_flags(dense: bool, count: int) -> tuple[int, int]:
    """The short path's ``bm25_daat`` flags (``kernels.daat_flags`` from the knobs, with
    ``CALL_SCRATCH`` and ``SPARSE_MARKS`` where those knobs ask) for a query of ``count``
    terms. O(1)."""
    flags = kernels.daat_flags(
        knobs._PREFETCH_WALK, knobs._PREFETCH_SEEK, knobs._TIGHT_WALK,
        knobs._INTERP_SEEK,
        knobs._SIMD_WALK and not (knobs._SCALAR_ON_AMD and kernels.CPU_IS_AMD),
        knobs._PREFETCH_LOOKUPS, knobs._LOOKUP_CODES, knobs._PREFETCH_SEEDS,
        knobs._SPARSE_CLEAR, knobs._PREFETCH_OFFERS, dense, True,
        knobs._SCALAR_NO_PREFETCH, knobs._WALK_ONES, knobs._MARK_CUT, knobs._SCAN_MARKS,
    )  # fmt: skip
    if knobs._CALL_SCRATCH:
        flags = (flags[0], flags[1] | kernels.CALL_SCRATCH)
    sparse_marks = knobs._SPARSE_MARKS and count <= knobs._SPARSE_MARKS_TERMS
    if sparse_marks and not kernels.CPU_HAS_AVX512:
        flags = (flags[0], flags[1] | kernels.SPARSE_MARKS)
    return flags


def _drain_room() -> int:
    """The width of a drained query's windows on the short path (:meth:`MaxScoreSearch.
    _fast`): ``knobs._DRAIN_WINDOW`` where it is wider than the sliced path's and the CPU
    takes it (an AMD CPU, with ``_DRAIN_WINDOW_AMD_ONLY``), else the sliced path's
    (``_CHUNK``, a quarter of it without ``_WIDE_WINDOWS``). The walk's steps (between
    two, the core splits the terms again) are then ``4 *`` the wider of it and
    ``_CHUNK`` postings of work. O(1)."""
    room = knobs._CHUNK if knobs._WIDE_WINDOWS else knobs._CHUNK // 4
    if knobs._DRAIN_WINDOW > room and (kernels.CPU_IS_AMD or not knobs._DRAIN_WINDOW_AMD_ONLY):
        room = knobs._DRAIN_WINDOW
    return room


class MaxScoreSearch:
    """One top-k query over a :class:`~actormem._index.bm25.BM25Index` (reader side)."""

    __slots__ = ("_index", "_whole")

    def __init__(self, index: BM25Index, whole: bool = False) -> None:
        self._index = index
        #: The caller runs the query to its end with no owner between two steps (a
        #: drain): the core may then take the walk's steps in one call
        #: (``knobs._WHOLE_DRIVE``).
        self._whole = whole

    def drained(
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """``BM25Index.top_k_terms``: the query run to its end, no owner between two of
        its steps. With ``knobs._QUERY_FAST`` and the core's record heap (see there) the
        short path, else :meth:`top_k_terms_steps` drained: the same result. O(as
        ``top_k_terms``)."""
        if knobs._QUERY_FAST:
            found = self._fast(view, weights, limit, accept)
            if found is not None:
                return found
        return drain(self.top_k_terms_steps(view, weights, limit, accept))

    def _fast(
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> list[tuple[float, Record]] | None:
        """:meth:`top_k_terms_steps`'s core path with the record heap in C, for a
        drained query, in one pass: the same statistics, weights, bounds (slack
        included), terms and ``bm25_daat`` calls (``kernels.bm25_query``); None where
        that path would not be taken (then nothing was changed but a term's cached
        bound, as the sliced path would change it). O(q) + the core's work."""
        index = self._index
        scorer = index.scorer
        if not (
            limit > 0 and self._whole and knobs._WHOLE_DRIVE and knobs._COST_SPLIT
            and knobs._C_OFFER and knobs._NO_BLOCKS and limit <= knobs._C_OFFER_MAX
            and scorer.half_life is None and not scorer.relevance_prior
            and kernels.bm25_core_active()
        ):  # fmt: skip
            return None
        changes = index._changes
        versions = changes.versions
        version = view.version
        if version < changes.floor or (versions and versions[-1] > version):
            return None  # older statistics: the sliced path undoes the log
        taken = drain(self._terms_steps(weights))
        if taken is None:
            return []
        terms, bounds, parts, lengths, codes, dense = taken
        room = _drain_room()
        flags = _query_flags(dense, len(terms))
        seeds = sorted(range(len(terms)), key=bounds.__getitem__)[-knobs._SEEDS :]
        first = index._first_seq if knobs._TIE_SKIP else None
        return kernels.bm25_query(
            terms, lengths, parts, max(limit, room), flags, float(knobs._SPLIT_ROOM),
            codes if knobs._LENGTH_CODES else None,
            (index._table, version, accept, limit, first, index._cols),
            seeds, max(limit, knobs._SEED_ROOM), 4 * max(room, knobs._CHUNK) + 64 * len(terms),
            knobs._ONE_CALL,
        )  # fmt: skip

    def _terms_steps(
        self, weights: Mapping[str, float]
    ) -> Generator[None, None, _ShortTerms | None]:
        """The short paths' (:meth:`_fast`, drained, and :meth:`_fast_steps`) set-up of
        a query's terms, one code for both: the index's statistics, each term of a
        positive ``weights`` entry and a positive df with its idf-weighted weight, lists,
        block bounds and dense array (all taken before the first yield, as the owner may
        replace them between two), then each term's bound (slack included), cached or
        brought up to date in slices (``bound_steps``). Returns ``(terms, bounds, parts,
        lengths, codes, dense)`` as ``kernels.bm25_query`` takes them, or None when there
        is nothing to search (an empty index, or no term matched). O(q), plus the
        bounds' work.
        """
        index = self._index
        n, total = index._n, index._total
        if n == 0 or total == 0:
            return None
        scorer = index.scorer
        index_terms = index._terms
        k1, b = scorer.k1, scorer.b
        avgdl = total / n
        a_part = k1 * (1.0 - b)
        up = 1.0 + knobs._SLACK
        lengths = index._lengths
        codes = index._codes
        dense = knobs._DENSE_TFS
        drift = knobs._DRIFT
        log = math.log
        taken = []
        for term, w in weights.items():
            if not w > 0:
                continue
            obj = index_terms.get(term)
            if obj is None:
                continue
            df = obj.df
            if df <= 0:
                continue
            wi = w * log(1.0 + (n - df + 0.5) / (df + 0.5))
            groups = obj.groups
            taken.append((obj, wi, groups, obj.tfs, len(groups), obj.blocks, obj.dense))
        terms: list[kernels.DaatTerm] = []
        bounds: list[float] = []
        for obj, wi, groups, tfs, count, blocks, held in taken:
            ref = obj.ref
            if obj.seen == count and ref and 1.0 / drift <= avgdl / ref <= drift:
                bound = obj.top * (avgdl / ref if avgdl > ref else 1.0)  # cached, as is
            else:  # the bound may take many postings to bring up to date: in slices
                bound = yield from obj.bound_steps(
                    a_part, k1 * b, avgdl, lengths, groups, tfs, count
                )
            bound = wi * bound * up
            bounds.append(bound)
            if dense and held is not None:
                terms.append((wi, bound, groups, tfs, count, blocks, 0, *held))
            else:
                terms.append((wi, bound, groups, tfs, count, blocks, 0))
        if not terms:
            return None
        parts = (a_part, k1 * b / avgdl, float(k1), float(b), avgdl, up)
        return terms, bounds, parts, lengths, codes, dense

    def _fast_ok(self, view: ReadView, limit: int) -> bool:
        """Whether the short path's conditions hold for a query of ``limit`` on ``view``
        (:meth:`_fast`'s, the drain aside): the core's record heap, no recency and no
        prior, and the index's newest statistics for the view. O(1)."""
        scorer = self._index.scorer
        if not (
            limit > 0 and knobs._COST_SPLIT and knobs._C_OFFER and knobs._NO_BLOCKS
            and limit <= knobs._C_OFFER_MAX and scorer.half_life is None
            and not scorer.relevance_prior and kernels.bm25_core_active()
        ):  # fmt: skip
            return False
        changes = self._index._changes
        versions = changes.versions
        return not (view.version < changes.floor or (versions and versions[-1] > view.version))

    def _fast_steps(
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> Generator[None, float | None, list[tuple[float, Record]]]:
        """:meth:`_fast` in slices (``knobs._SLICED_FAST``; :meth:`_fast_ok` holds): the
        same statistics, weights, bounds, terms and core calls, the owner free to write
        between two yields. Everything the owner may replace (the group table, the
        lengths and their codes, each term's lists, block bounds and dense array) is
        taken before the first yield, as :meth:`top_k_terms_steps` takes it; the bounds
        are brought up to date in slices (``bound_steps``), then
        :func:`~actormem._index.kernels.bm25_query_steps` makes the calls (a value sent
        at a yield: the caller's slice's end, see there). O(as ``top_k_terms``)."""
        index = self._index
        table = index._table
        taken = yield from self._terms_steps(weights)
        if taken is None:
            return []
        terms, bounds, parts, lengths, codes, dense = taken
        room = knobs._CHUNK if knobs._WIDE_WINDOWS else knobs._CHUNK // 4
        seeds = sorted(range(len(terms)), key=bounds.__getitem__)[-knobs._SEEDS :]
        tie = knobs._TIE_SKIP

        def first_of() -> Any:  # the owner's array as of each call
            return index._first_seq if tie else None

        steps = kernels.bm25_query_steps(
            terms, lengths, parts, max(limit, room), _query_flags(dense, len(terms)),
            float(knobs._SPLIT_ROOM), codes if knobs._LENGTH_CODES else None,
            (table, view.version, accept, limit, index._cols), first_of, seeds,
            max(limit, knobs._SEED_ROOM), 4 * knobs._CHUNK + 64 * len(terms),
            time.perf_counter,
        )  # fmt: skip
        return (yield from steps)

    def _core_steps(
        self,
        ex: _Exact,
        bounds: list[float],
        blocks: list[array[int]],
        codes: Any,
        denses: list[tuple[Any, int, int] | None],
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """The top-k of :meth:`top_k_terms_steps` by the compiled core (``_cbm25.c``):
        MaxScore over the query's lists in the C code, each step about ``4 *
        knobs._CHUNK`` postings of work. With ``knobs._COST_SPLIT`` (the default) the
        terms are split cost-aware (the long lists of common terms are looked up, the
        short ones walked) and the walk is term at a time over windows of groups; else
        MaxScore's split by bound and document at a time with block-max windows (the
        driver before, kept for side-by-side benchmarks). The groups it finds may reach
        ``theta`` come back with their exact scores (bit for bit the reference's),
        best first, and their records enter the heap here, which raises ``theta`` (the
        k-th best record score); with ``knobs._C_OFFER`` an unweighted query's heap is
        the core's own, in C, and theta rises within a step. ``ex`` holds the query as
        taken at the start,
        ``bounds`` its terms' bounds (slack included), ``blocks`` their block caches,
        extended here first, ``codes`` the lengths' one-byte codes taken with them,
        ``denses`` their dense frequency arrays (``_Term.dense``), taken with them."""
        scorer = self._index.scorer
        lengths, table, limit, avgdl = ex.lengths, ex.table, ex.limit, ex.avgdl
        size = kernels.BM25_BLOCK
        terms: list[kernels.DaatTerm] = []
        # The windowed walk of the cost-aware split never reads the block bounds: they are
        # only built for the split by bound (knobs._NO_BLOCKS).
        skip = knobs._COST_SPLIT and knobs._NO_BLOCKS
        dense = knobs._DENSE_TFS and knobs._COST_SPLIT
        for (wi, groups, tfs, count), bound, cache, held in zip(
            ex.query, bounds, blocks, denses, strict=True
        ):
            wanted = 0 if skip else count // size
            while len(cache) // 2 < wanted:  # extend the cache, in slices
                first = len(cache) // 2
                stop = min(wanted, first + max(1, knobs._BOUND_CHUNK // size))
                out = np.empty(2 * (stop - first), np.int32)
                kernels.bm25_blocks(groups, tfs, lengths, first, stop, out)
                cache.frombytes(out.tobytes())  # no yield since `first`: still the end
                if stop < wanted:
                    yield
            if dense and held is not None:
                terms.append((wi, bound, groups, tfs, count, cache, wanted, *held))
            else:
                terms.append((wi, bound, groups, tfs, count, cache, wanted))
        k1, b = scorer.k1, scorer.b
        parts = (k1 * (1.0 - b), k1 * b / avgdl, float(k1), float(b), avgdl, 1.0 + knobs._SLACK)
        # A step re-takes every list's buffers (O(terms)): long queries get longer steps.
        budget = 4 * knobs._CHUNK + 64 * len(terms)
        c_offer = (
            knobs._COST_SPLIT and knobs._C_OFFER and not ex.weighted and limit <= knobs._C_OFFER_MAX
        )
        # The groups a step may find, and so the width of the walk's windows: with the
        # heap in C a window's groups are offered at once, so nothing caps them but the
        # work of a slice (knobs._WIDE_WINDOWS).
        room = knobs._CHUNK if c_offer and knobs._WIDE_WINDOWS else knobs._CHUNK // 4
        daat = kernels.Bm25Daat(
            terms, lengths, parts, max(limit, room), knobs._COST_SPLIT, knobs._PREFETCH_WALK,
            float(knobs._SPLIT_ROOM), knobs._PREFETCH_SEEK, knobs._TIGHT_WALK, knobs._INTERP_SEEK,
            knobs._SIMD_WALK and not (knobs._SCALAR_ON_AMD and kernels.CPU_IS_AMD),
            knobs._PREFETCH_LOOKUPS, codes if knobs._LENGTH_CODES else None,
            knobs._LOOKUP_CODES, knobs._PREFETCH_SEEDS, knobs._SPARSE_CLEAR,
            knobs._PREFETCH_OFFERS, dense, True, knobs._SCALAR_NO_PREFETCH,
            knobs._WALK_ONES, knobs._MARK_CUT, knobs._SCAN_MARKS,
        )  # fmt: skip
        seed_room = max(limit, knobs._SEED_ROOM) if knobs._COST_SPLIT else 0
        seeds = sorted(range(len(terms)), key=bounds.__getitem__)[-knobs._SEEDS :]
        if c_offer:
            # The whole driver in C: the groups found enter the core's heap of records,
            # best first after every window (theta rises within a step), one call per
            # slice (docs/design.md, "The record heap in the BM25 core").
            index = self._index
            daat.offer_to(
                table, ex.version, ex.accept, limit, len(seeds) * seed_room, columns=index._cols
            )
            # The owner's array as of each call (it may replace it between two): a tie
            # with the heap's worst is passed over by the groups' first seqs.
            tie = knobs._TIE_SKIP
            for seed in seeds:
                daat.drive(budget, seed, seed_room, index._first_seq if tie else None)
                yield
            to_end = self._whole and knobs._WHOLE_DRIVE
            while not daat.drive(budget, first=index._first_seq if tie else None, to_end=to_end):
                yield
            return daat.best()
        heap: list[tuple[float, int, Record]] = []  # (score, -seq, rec): worst on top
        up = parts[5]
        # A first theta: the exact scores of the groups in the first slice of the lists
        # of the terms with the highest bounds (the rarest), their records offered best
        # first. Documents at a time in number order would raise it only slowly.
        offered: set[int] = set()

        def offer_best_first(nums: Any, scores: Any, remember: bool) -> None:
            # A step's groups, best first, until one is below the heap's worst; each
            # group once (the seeds' steps remember what they offered).
            if len(nums) > 1:
                best = np.argsort(-scores, kind="stable")
                nums, scores = nums[best], scores[best]
            for num, score in zip(nums.tolist(), scores.tolist(), strict=True):
                if len(heap) == limit and score * up < heap[0][0]:
                    break
                if num in offered:
                    continue
                if remember:
                    offered.add(num)
                group = table[num]
                if group is not None:  # else purged: no record to score
                    ex.offer(heap, group, score)

        for seed in seeds:
            # one step of each (with the cost-aware split, of a few groups)
            nums, scores, _ = daat.step(-math.inf, budget, seed, seed_room)
            offer_best_first(nums, scores, True)
            yield
        theta = heap[0][0] if len(heap) == limit else -math.inf
        while True:
            nums, scores, done = daat.step(theta, budget)
            offer_best_first(nums, scores, False)
            if len(heap) == limit:
                theta = heap[0][0]
            if done:
                break
            yield
        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]

    def top_k_terms_steps(  # noqa: C901 - one algorithm, kept in one place
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """``BM25Index.top_k_terms`` in slices: yields None after every bounded chunk
        of work (at most ``knobs._CHUNK`` postings or candidates); the owner may write
        in between. See ``BM25Index.top_k_terms`` for the arguments, result and
        complexity."""
        if limit <= 0:
            return []
        if knobs._SLICED_FAST and not self._whole and self._fast_ok(view, limit):
            return (yield from self._fast_steps(view, weights, limit, accept))
        index = self._index
        compiled = kernels.active()
        core = kernels.bm25_core_active()
        scorer = index.scorer
        k1, b = scorer.k1, scorer.b
        index_terms = index._terms
        wanted = [t for t, w in weights.items() if w > 0 and t in index_terms]
        if not wanted:
            return []
        n, total, dfs = index._statistics(view, wanted)
        if n == 0 or total == 0:
            return []
        avgdl = total / n
        a_part = k1 * (1.0 - b)
        b_part = k1 * b / avgdl
        up = 1.0 + knobs._SLACK
        # Everything the owner may replace is taken once, here: the group table (only
        # appended to; slots of groups no live snapshot sees become None), the length
        # array (replaced on growth) and each term's arrays with their length.
        table = index._table
        lengths = index._lengths
        codes = index._codes  # replaced with the lengths: of the same length
        size_g = len(table)
        # The query in its own order, the summation order: (weight * idf, groups, tfs, n).
        query: list[tuple[float, array[int], array[int], int]] = []
        # (bound on the term's contribution, weight * idf, groups, tfs, n), for MaxScore.
        order: list[tuple[float, float, array[int], array[int], int]] = []
        position: dict[int, int] = {}  # a query term's place in `query`, by term number
        # Cached maximum saturations are exact at their term's reference avgdl and at
        # most avgdl / ref times too low at this one (see _Term.bound_steps).
        # Every term's postings and their length are taken before the first yield (the
        # bounds below may yield), so no list holds a group appended after `size_g`.
        taken = []
        for term in wanted:
            df = dfs[term]
            if df <= 0:
                continue
            obj = index_terms[term]
            wi = weights[term] * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            taken.append((obj, (wi, obj.groups, obj.tfs, len(obj.groups))))
        # The core's block bounds, taken with their lists (compaction replaces both).
        blocks = [obj.blocks for obj, _ in taken] if core else []
        # Their dense frequency arrays, taken with them too (knobs._DENSE_TFS).
        denses = [obj.dense for obj, _ in taken] if core else []
        for obj, post in taken:
            ref = obj.ref
            if obj.seen == post[3] and ref and 1.0 / knobs._DRIFT <= avgdl / ref <= knobs._DRIFT:
                bound = obj.top * (avgdl / ref if avgdl > ref else 1.0)  # cached, as is
            else:  # the bound may take many postings to bring up to date: in slices
                bound = yield from obj.bound_steps(
                    a_part, k1 * b, avgdl, lengths, post[1], post[2], post[3]
                )
            position[obj.num] = len(query)
            query.append(post)
            order.append((post[0] * bound * up, *post))
        if not query:
            return []
        ex = _Exact(
            scorer=scorer,
            view=view,
            accept=accept,
            limit=limit,
            avgdl=avgdl,
            table=table,
            lengths=lengths,
            query=query,
            position=position,
            compiled=compiled,
            terms_of=index._terms_at,
        )
        if core:
            bounds = [bound for bound, *_ in order]  # in the query's order still
            return (yield from self._core_steps(ex, bounds, blocks, codes, denses))
        order.sort(key=itemgetter(0), reverse=True)
        # rest[i]: bound on the total contribution of the terms order[i:].
        rest = [0.0] * (len(order) + 1)
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + order[i][0]

        # 1. Essential terms, the highest bounds first, accumulated into a dense array of
        # partial scores by group number, until the remaining terms' bounds sum below
        # theta, a lower bound on the k-th best score: the k-th best exact score among
        # the records of the texts with the highest partial scores, kept in `top` (`tau`:
        # the lowest partial score there).
        # Borrowed from the pool (memory already paged in), viewed to `size_g` groups.
        capacity = len(lengths)
        acc_base = yield from index._scratch.take_steps(np.float64, size_g, capacity)
        top_base = yield from index._scratch.take_steps(np.bool_, size_g, capacity)
        acc, in_top = acc_base[:size_g], top_base[:size_g]
        yield
        yield
        parts: list[Any] = []
        theta = -math.inf
        top: Any = np.zeros(0, np.intp)
        tau = -math.inf
        size = limit
        done = 0
        for _, wi, groups, tfs, count in order:
            if rest[done] < theta:
                break
            changed = False
            for start in range(0, count, knobs._CHUNK):
                stop = min(count, start + knobs._CHUNK)
                if compiled:  # the same operations in one pass (kernels.py)
                    nums = np.empty(stop - start, np.intp)
                    hot = np.empty(stop - start, np.intp)
                    got, above = kernels.bm25_accumulate(
                        groups, tfs, start, stop, lengths, acc, wi, a_part, b_part, tau,
                        in_top, nums, hot,
                    )  # fmt: skip
                    hot = hot[:got] if above else hot[:0]
                else:
                    nums = _nums(groups, start, stop)
                    tf = _tfs(tfs, start, stop)
                    # before + wi * (tf / (tf + (a_part + b_part * dl))), in place.
                    after = lengths[nums] * b_part
                    after += a_part
                    after += tf
                    np.divide(tf, after, out=after)
                    after *= wi
                    after += acc[nums]
                    acc[nums] = after
                    hot = nums[after > tau]
                    above = len(hot)
                    if above:
                        hot = hot[~in_top[hot]]  # groups already in `top` only rose
                parts.append(nums)
                if above:
                    in_top[top] = False
                    pool = np.concatenate((top, hot))
                    if len(pool) > size:
                        pool = pool[np.argpartition(-acc[pool], size - 1)[:size]]
                    top = pool
                    in_top[top] = True
                    tau = float(acc[top].min()) if len(top) == size else -math.inf
                    changed = True
                yield
            done += 1
            if changed:
                while True:
                    for i, num in enumerate([num for num in top.tolist() if num not in ex.exact]):
                        ex.exact_of(num)  # memoized for kth_score
                        if i % knobs._FEW_STEP == knobs._FEW_STEP - 1:
                            yield
                    kth = ex.kth_score(top)
                    if kth > -math.inf or len(top) < size:  # then `top` holds every group
                        break
                    size *= 2  # too few visible, accepted records among them: look wider
                    found_parts = []  # the `size` best of each window, in slices
                    for lo in range(0, size_g, knobs._DENSE_CHUNK):
                        window = acc[lo : lo + knobs._DENSE_CHUNK]
                        nz = np.flatnonzero(window)
                        if len(nz) > size:
                            nz = nz[np.argpartition(-window[nz], size - 1)[:size]]
                        found_parts.append(nz + lo)
                        del window
                        yield
                    everything = np.concatenate(found_parts)
                    in_top[top] = False
                    top = everything[
                        np.argpartition(-acc[everything], min(size, len(everything)) - 1)[:size]
                    ]
                    in_top[top] = True
                    tau = float(acc[top].min()) if len(top) == size else -math.inf
                if kth > theta:
                    theta = kth
                yield

        sorted_parts = True
        # 2. Candidates: the texts whose partial score plus the bounds of the other terms
        # reaches theta. While they outnumber the postings of the next term over
        # knobs._UPDATE_RATIO, that term is accumulated whole (cheaper than looking it up for
        # each); then each other term, best bound first, is looked up for them (binary
        # search in its sorted list), and those that can no longer reach theta are
        # dropped (MaxScore).
        while True:
            # In slices of about 4 * knobs._CHUNK: at a million entries `parts` can be long.
            kept, pieces, held = [], [], 0
            for part in parts if compiled else ():  # the same filter in C (kernels.py)
                for start in range(0, len(part), 4 * knobs._CHUNK):
                    stop = min(len(part), start + 4 * knobs._CHUNK)
                    out = np.empty(stop - start, np.intp)
                    got = kernels.bm25_keep(acc, part, start, stop, up, rest[done], theta, out)
                    kept.append(out[:got])
                    yield
            for i, part in enumerate(() if compiled else parts):
                for start in range(0, len(part), 4 * knobs._CHUNK):
                    pieces.append(part[start : start + 4 * knobs._CHUNK])
                    held += len(pieces[-1])
                    if held >= 4 * knobs._CHUNK or i == len(parts) - 1:
                        piece = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
                        kept.append(piece[acc[piece] * up + rest[done] >= theta])
                        pieces, held = [], 0
                        yield
            if pieces:  # an empty last part
                piece = np.concatenate(pieces)
                kept.append(piece[acc[piece] * up + rest[done] >= theta])
            every = kept[0] if len(kept) == 1 else np.concatenate([*kept, _NO_NUMS])
            if not (done < len(order) and order[done][4] * knobs._UPDATE_RATIO < len(every)):
                break
            _, wi, groups, tfs, count = order[done]
            for start in range(0, count, knobs._CHUNK):
                stop = min(count, start + knobs._CHUNK)
                if compiled:  # the same operations (a sum commutes) in C, nothing hot
                    spare = np.empty(stop - start, np.intp)
                    kernels.bm25_accumulate(
                        groups, tfs, start, stop, lengths, acc, wi, a_part, b_part, math.inf,
                        in_top, spare, spare,
                    )  # fmt: skip
                else:
                    nums = _nums(groups, start, stop)
                    tf = _tfs(tfs, start, stop)
                    acc[nums] += wi * (tf / (tf + (a_part + b_part * lengths[nums])))
                yield
            parts = [every]  # the candidates only: distinct, maybe unsorted
            sorted_parts = False
            done += 1
        if len(parts) == 1 and sorted_parts:  # one chunk of one list: sorted and distinct
            cands = every
        elif len(every) <= 2 * knobs._CHUNK:  # a short sort (a longer one would be one long step)
            every.sort()
            cands = every[np.concatenate(([True], every[1:] != every[:-1]))]
        else:
            # Distinct, sorted: through a dense mark (O(groups), no sort), in slices.
            found_parts = []
            for lo in range(0, size_g, knobs._DENSE_CHUNK):
                window = acc[lo : lo + knobs._DENSE_CHUNK]
                keep = window * up + rest[done] >= theta
                keep &= window > 0.0
                found_parts.append(np.flatnonzero(keep) + lo)
                del window, keep
                yield
            cands = np.concatenate(found_parts)
        if len(cands) <= 4 * knobs._CHUNK:
            partial = acc[cands]
        else:
            partial = np.empty(len(cands))
            for start in range(0, len(cands), 4 * knobs._CHUNK):
                partial[start : start + 4 * knobs._CHUNK] = acc[
                    cands[start : start + 4 * knobs._CHUNK]
                ]
                yield
        # int32 from here: binary searches in the (int32) posting lists need no cast.
        cands = cands.astype(np.int32)
        yield
        del acc, parts, in_top, every, kept
        # At the capacity now: arrays of one the index has grown past are dropped.
        index._scratch.give(acc_base, len(index._lengths))
        index._scratch.give(top_base, len(index._lengths))
        for j in range(done, len(order)):
            if not len(cands):
                break
            _, wi, groups, tfs, count = order[j]
            kept_cands, kept_partial = [], []
            for start in range(0, len(cands), knobs._CHUNK):
                chunk = cands[start : start + knobs._CHUNK]
                part = partial[start : start + knobs._CHUNK]  # a view: ours to change
                if compiled:  # the same operations in one pass (kernels.py)
                    keep = np.empty(len(chunk), np.bool_)
                    kernels.bm25_refine(
                        groups, tfs, count, chunk, part, lengths, wi, a_part, b_part, up,
                        rest[j + 1], theta, keep,
                    )  # fmt: skip
                else:
                    hit, tf = _lookup(groups, tfs, count, chunk)
                    part[hit] += wi * (tf / (tf + (a_part + b_part * lengths[chunk[hit]])))
                    keep = part * up + rest[j + 1] >= theta
                kept_cands.append(chunk[keep])
                kept_partial.append(part[keep])
                yield
            if len(kept_cands) == 1:
                cands, partial = kept_cands[0], kept_partial[0]
            else:
                cands, partial = np.concatenate(kept_cands), np.concatenate(kept_partial)

        # 3. The survivors, scored exactly, best first; their records enter a heap.
        heap: list[tuple[float, int, Record]] = []  # (score, -seq, rec): worst on top
        ranked: list[tuple[float, int]] = []
        if len(cands) <= knobs._FEW:
            for i, num in enumerate(cands.tolist()):
                ranked.append((ex.exact_of(num), num))
                if i % knobs._FEW_STEP == knobs._FEW_STEP - 1:
                    yield
        else:
            for start in range(0, len(cands), max(1, knobs._CHUNK // 16)):
                chunk = cands[start : start + max(1, knobs._CHUNK // 16)]
                ranked += zip(ex.exact_scores(chunk).tolist(), chunk.tolist(), strict=True)
                yield
        ranked.sort(key=itemgetter(0), reverse=True)
        steps = 0
        for score, num in ranked:
            steps += 1
            if steps % knobs._CHUNK == 0:
                yield
            if len(heap) == limit and score * up < heap[0][0]:
                break
            group = table[num]
            if group is not None:
                ex.offer(heap, group, score)
        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]
