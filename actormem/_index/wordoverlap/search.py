"""The word-overlap index's reader: top-k over one numbering, in bounded steps.

Counts, for every group number at once, how many query words its text contains (a
numpy count array from the pool, one vectorised add per word's match set), then visits
the groups by matched count, highest first, scoring exactly only those whose bound can
still enter the top ``limit``; last the entries that match no word, in descending
relevance. See the package documentation of :mod:`actormem._index.wordoverlap`.
"""

from __future__ import annotations

import heapq
import itertools
from collections import _count_elements  # type: ignore[attr-defined]
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ..._record import Record
from .. import kernels
from ..scoring import Accept, ReadView, zeroed_steps
from . import ccore, knobs, masks
from .formula import combine_word_overlap
from .matchsets import _DENSE_SET, _NONE, _SPARSE_SET, MatchFinder
from .numbering import _Group, _Numbering, _TagPostings

__all__ = ["WordOverlapSearch"]

#: numpy's module defines a ``__getattr__``, so Python 3.11 cannot specialize an ``np.X``
#: read: the per-retrieve paths read these module names instead (the same objects; hot45).
_NDARRAY = np.ndarray
_EMPTY = np.empty
_INT64 = np.int64
_U64_DT = np.dtype(np.uint64)
_U8_DT = np.dtype(np.uint8)


class WordOverlapSearch:
    """Top-k for a word-overlap index (reader side: runs in the reader's task).

    Args:
        tags: The index's tag postings (the owner's).
        finder: Finds the query words' match sets.
    """

    __slots__ = ("_finder", "_tags")

    def __init__(self, tags: _TagPostings, finder: MatchFinder) -> None:
        self._tags = tags
        self._finder = finder

    @staticmethod
    def _take(e: _Numbering, dtype: Any, n: int) -> Generator[None, None, np.ndarray[Any, Any]]:
        """A zeroed array of at least ``n`` elements of ``dtype`` from the numbering's
        :class:`~actormem._index.scoring.ScratchPool`. Give it back with :meth:`_give`. O(n)
        in steps."""
        return (yield from e.scratch.take_steps(dtype, n, len(e.maxrel)))

    @staticmethod
    def _give(e: _Numbering, arr: np.ndarray[Any, Any]) -> None:
        e.scratch.give(arr, len(e.maxrel))

    @staticmethod
    def _add_counts(
        counts: np.ndarray[Any, Any],
        kind: int,
        data: Any,
        n: int,
        m: int,
        mark: np.ndarray[Any, Any] | None,
        word: int,
    ) -> Generator[None, None, None]:
        """Add ``m`` to ``counts[g]`` once for every group ``g < n`` of a match set
        from :meth:`MatchFinder.match_steps`. ``mark`` (a per-group word number, needed
        only for a sparse set over ``_CHUNK`` numbers) removes the repeats across
        chunks. O(n) or O(set) in chunks of ``_CHUNK``."""
        dt = counts.dtype.type
        if kind == _DENSE_SET:
            for start in range(0, n, knobs._CHUNK):
                stop = min(n, start + knobs._CHUNK)
                part = data[start:stop]
                counts[start:stop] += part if m == 1 else part * dt(m)
                yield
        elif len(data) <= knobs._CHUNK:
            counts[data[data < n]] += dt(m)  # a repeated number is counted once
        else:
            assert mark is not None
            for start in range(0, len(data), knobs._JOIN):  # random writes: knobs._JOIN at a time
                gids = data[start : start + knobs._JOIN]
                gids = gids[gids < n]
                gids = gids[mark[gids] != word]
                mark[gids] = word
                counts[gids] += dt(m)
                yield

    @staticmethod
    def _add_sparse_compiled(
        counts: np.ndarray[Any, Any],
        data: np.ndarray[Any, Any],
        n: int,
        m: int,
        mark: np.ndarray[Any, Any] | None,
        word: int,
    ) -> Generator[None, None, None]:
        """:meth:`_add_counts` of a sparse set (int32 group numbers) by the compiled
        kernel: the same counts, ``_JOIN`` numbers between two yields."""
        if len(data) <= knobs._CHUNK:
            kernels.wo_count_sparse(counts, data, 0, len(data), n, m, None, word)
            return
        assert mark is not None
        for start in range(0, len(data), knobs._JOIN):
            stop = min(len(data), start + knobs._JOIN)
            kernels.wo_count_sparse(counts, data, start, stop, n, m, mark, word)
            yield

    @staticmethod
    def _visit(
        idx: np.ndarray[Any, Any],
        part: float | np.ndarray[Any, Any],
        maxrel: np.ndarray[Any, Any],
        minseq: np.ndarray[Any, Any],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
    ) -> Generator[None, None, None]:
        """Score the records of groups ``idx`` (all of one matched count, whose score
        part is ``part``; or of any counts, ``part`` then an array of each group's part)
        into ``heap`` while they can enter: the best ``limit`` groups by (bound,
        smallest seq) first, picked with ``numpy.partition``, then ever larger batches.
        ``progress[0]`` counts Python iterations, for a yield every ``_STEP``."""
        parts = part if type(part) is _NDARRAY else None
        if len(idx) > knobs._VISIT:
            # In parts (any order is exact: each part stops only where it can't enter).
            for start in range(0, len(idx), knobs._VISIT):
                yield from WordOverlapSearch._visit(
                    idx[start : start + knobs._VISIT],
                    part if parts is None else parts[start : start + knobs._VISIT],
                    maxrel,
                    minseq,
                    glist,
                    heap,
                    limit,
                    push,
                    admitted,
                    tagged,
                    progress,
                )
            return
        if knobs._VISIT_C and ccore.core() is not None:
            yield from WordOverlapSearch._visit_c(
                idx, part, maxrel, minseq, glist, heap, limit, push, admitted, tagged, progress
            )
            return
        # combine_word_overlap(maxrel, count, n_words, False), term by term.
        bounds = ((0.5 * maxrel[idx] + part) + 0.0) + 0.1
        seqs = minseq[idx]
        if len(heap) == limit:
            kth, kth_seq = heap[0][0], -heap[0][1]
            keep = (bounds > kth) | ((bounds == kth) & (seqs < kth_seq))
            if not keep.all():
                idx, bounds, seqs = idx[keep], bounds[keep], seqs[keep]
                if parts is not None:
                    parts = parts[keep]
        if not len(idx):
            return
        uniform = bool(bounds.min() == bounds.max())
        yield
        batch = limit if limit > knobs._VISIT_BATCH else knobs._VISIT_BATCH
        while len(idx):
            size = len(idx)
            rest: np.ndarray[Any, Any] | None = None
            if size <= batch:
                sel = np.lexsort((seqs, -bounds))
            else:
                if uniform:
                    cand = np.argpartition(seqs, batch - 1)[:batch]
                else:
                    kth = np.partition(bounds, size - batch)[size - batch]
                    above = np.flatnonzero(bounds > kth)
                    ties = np.flatnonzero(bounds == kth)
                    need = batch - len(above)
                    if need < len(ties):
                        ties = ties[np.argpartition(seqs[ties], need - 1)[:need]]
                    cand = np.concatenate((above, ties))
                sel = cand[np.lexsort((seqs[cand], -bounds[cand]))]
                rest = np.ones(size, bool)
                rest[sel] = False
            # Each group's score part: one for all, or the group's own (any counts).
            part_of = itertools.repeat(part) if parts is None else parts[sel].tolist()
            for g, bound, mseq, gpart in zip(
                idx[sel].tolist(), bounds[sel].tolist(), seqs[sel].tolist(), part_of, strict=False
            ):
                progress[0] += 1
                if not progress[0] % knobs._STEP:
                    yield
                if len(heap) == limit:
                    worst = heap[0]
                    if bound < worst[0] or (bound == worst[0] and mseq > -worst[1]):
                        return  # neither this group nor any later one can enter
                item = glist[g]
                if item is None:
                    continue
                # The owner only appends (invisible) records to a group's list, or
                # replaces it whole.
                recs = item.recs if type(item) is _Group else (item,)
                for rec in recs:
                    progress[0] += 1
                    if not progress[0] % knobs._STEP:
                        yield
                    # combine_word_overlap(rel, c, n_words, False), term by term.
                    score = ((0.5 * rec.cols.relevance(rec.slot) + gpart) + 0.0) + 0.1
                    if len(heap) == limit:
                        worst = heap[0]
                        if score < worst[0] or (score == worst[0] and rec.seq > -worst[1]):
                            continue
                    if rec not in tagged and admitted(rec):
                        push(rec, score)
            if rest is None:
                return
            idx, bounds, seqs = idx[rest], bounds[rest], seqs[rest]
            if parts is not None:
                parts = parts[rest]
            batch *= 4
            yield

    @staticmethod
    def _offer_picked(
        picked: list[tuple[int, float, int, float]],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
        step: int,
        done: int,
    ) -> Generator[None, None, tuple[int, bool]]:
        """One batch of :meth:`_visit_c` or :meth:`_visit_flat`: each picked group
        ``(g, bound, smallest seq, its part)``, in order, stops the visit when the heap
        is full and its bound cannot beat the worst; else its records are scored
        (``combine_word_overlap`` term by term) and offered. Yields every ``step`` units
        of work (groups and records, counted on from ``done``, written to
        ``progress[0]`` at each yield and at a stop). Returns the new count and whether
        the visit stopped. O(groups + records of the batch)."""
        full = len(heap) == limit  # the heap only fills (never shrinks) within a retrieve
        for g, bound, mseq, gpart in picked:
            done += 1
            if not done % step:
                progress[0] = done
                yield
            if full:
                worst = heap[0]
                if bound < worst[0] or (bound == worst[0] and mseq > -worst[1]):
                    progress[0] = done
                    return done, True  # neither this group nor any later one can enter
            item = glist[g]
            if item is None:
                continue
            # The owner only appends (invisible) records to a group's list, or
            # replaces it whole.
            recs: Any = item.recs if type(item) is _Group else (item,)  # records
            for rec in recs:
                done += 1
                if not done % step:
                    progress[0] = done
                    yield
                # combine_word_overlap(rel, c, n_words, False), term by term.
                score = ((0.5 * rec.cols.relevance(rec.slot) + gpart) + 0.0) + 0.1
                if full:
                    worst = heap[0]
                    if score < worst[0] or (score == worst[0] and rec.seq > -worst[1]):
                        continue
                if rec not in tagged and admitted(rec):
                    push(rec, score)
                    full = len(heap) == limit
        return done, False

    @staticmethod
    def _visit_c(
        idx: np.ndarray[Any, Any],
        part: float | np.ndarray[Any, Any],
        maxrel: np.ndarray[Any, Any],
        minseq: np.ndarray[Any, Any],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
    ) -> Generator[None, None, None]:
        """:meth:`_visit` of at most ``_VISIT`` groups with their order kept in C
        (``knobs._VISIT_C``): the bounds filtered by the heap's worst and put in a binary
        heap by (bound, smallest seq) in one call, then batches of ``max(limit, 32)``
        groups, four times more each time, taken out of it in that order: the same
        groups scored in the same order as the numpy path's. O(len(idx) + visited *
        log len(idx))."""
        if type(part) is _NDARRAY:
            parts: np.ndarray[Any, Any] | None = part
            one = 0.0
        else:
            parts, one = None, float(part)
        kth = (float(heap[0][0]), -heap[0][1]) if len(heap) == limit else None
        room = _EMPTY(4 * len(idx), _INT64)
        # With _VISIT_SELECT the groups stay in no order until a second batch is read.
        unordered = knobs._VISIT_SELECT
        m = ccore.visit_heap(idx, maxrel, minseq, one, parts, kth, room, not unordered)
        if not m:
            return
        yield
        batch = limit if limit > knobs._VISIT_BATCH else knobs._VISIT_BATCH
        # The loop of _visit with its counters local: the heap only fills (never
        # shrinks) within a retrieve, and progress[0] is written back at each yield
        # and return (the same yields).
        step, done = knobs._STEP, progress[0]
        first = True
        while m:
            if not unordered:
                picked, m = ccore.visit_pop(room, m, batch)
            elif first:
                picked, m = ccore.visit_select(room, m, batch)
            else:
                ccore.visit_order(room, m)
                unordered = False
                picked, m = ccore.visit_pop(room, m, batch)
            first = False
            done, stop = yield from WordOverlapSearch._offer_picked(
                picked, glist, heap, limit, push, admitted, tagged, progress, step, done
            )
            if stop:
                return  # neither the last group read nor any later one can enter
            progress[0] = done
            batch *= 4
            yield
        progress[0] = done

    def top_k_steps(
        self,
        e: _Numbering,
        view: ReadView,
        query: str,
        limit: int,
        accept: Accept,
        min_matched: int = 0,
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """The index's ``top_k`` over the numbering ``e`` (the one current at the
        start), yielding after every bounded chunk of work: at most ``_CHUNK``
        array elements per vectorised operation and ``_STEP`` Python iterations between
        two yields, at any size (see the module documentation). Writes between the
        yields do not change the result. With ``min_matched`` > 0, only records whose
        text contains at least that many query words (counted as in the score) are
        returned (``thresholds.py``)."""
        if limit <= 0 or len(view) == 0:
            return []
        got = ccore.query_words(query) if knobs._QUERY_ONCE else None
        if got is not None:
            low, mult, n_words = got  # the lines below' values, in one C pass
            n_words = n_words if n_words > 1 else 1
        else:
            low = query.lower()
            words = low.split()
            n_words = max(len(words), 1)
            mult = {}
            if knobs._QUERY_ONCE:
                _count_elements(mult, words)  # the loop below, in C: same counts, same order
            else:
                for w in words:
                    mult[w] = mult.get(w, 0) + 1
        first = getattr(view, "first_by_relevance", None) if knobs._FIRST_PEEK else None
        top = first() if first is not None else next(view.by_relevance(), None)
        max_rel = top.cols.relevance(top.slot) if top is not None else 1.0
        n = e.n
        # Taken now: the owner may replace the arrays (grow) between the yields.
        at_start = (e.glist, e.maxrel[:n], e.minseq[:n], e.groups)

        # Entries whose tags contain the whole query: always scored (they get +0.3).
        tagged: set[Record] = set()
        # Equal: no code point lowers to whitespace or from it (tests/test_mainjob6_paths.py
        # checks every code point), so stripping commutes with lowering.
        q = low.strip() if knobs._QUERY_ONCE else query.strip().lower()
        if q and not (knobs._TAGS_NONE and self._tags.none_match(q)):
            for lst in (yield from self._tags.matching_steps(q)):
                for start in range(0, len(lst), knobs._STEP * 4):
                    tagged.update(lst[start : start + knobs._STEP * 4])
                    yield

        if (
            ccore.bits_active()
            and n_words.bit_length() <= ccore.MAX_PLANES
            and (n >= knobs._BITS_MIN or n_words < knobs._BITS_MIN_WORDS)
        ):
            return (
                yield from self._top_k_bits(
                    e, view, mult, n_words, limit, accept, min_matched, tagged, max_rel, at_start
                )
            )

        # Matched words per group number, vectorised.
        dtype: Any = np.uint8 if n_words < 256 else np.uint16 if n_words < 65536 else np.int64
        # Pooled arrays, viewed to the `n` groups this retrieve sees (beyond `n` a
        # pooled array holds another retrieve's garbage).
        counts_all: np.ndarray[Any, Any] = yield from self._take(e, dtype, n)
        counts = counts_all[:n]
        mark_all: np.ndarray[Any, Any] | None = None
        mark: np.ndarray[Any, Any] | None = None
        compiled = kernels.active()
        # With the kernels, dense sets are added in one pass after the loop (a set only
        # gains numbers at or above this retrieve's `n`, so deferring changes nothing).
        dense: list[np.ndarray[Any, Any]] = []
        dense_mult: list[int] = []

        def add_word(number: int, w: str, m: int) -> Generator[None, None, None]:
            """Add the match set of query word ``w`` (the ``number``-th distinct one,
            ``m`` times in the query) to ``counts``."""
            nonlocal mark_all, mark
            kind, data = yield from self._finder.match_steps(e, w, n)
            if kind == _NONE:
                return
            if kind == _SPARSE_SET and len(data) > knobs._CHUNK and mark_all is None:
                mark_all = yield from self._take(e, np.uint16, n)
                mark = mark_all[:n]
            if compiled and kind == _DENSE_SET:
                dense.append(data)
                dense_mult.append(m)
            elif compiled and number <= 0xFFFF and data.dtype == np.int32:
                yield from self._add_sparse_compiled(counts, data, n, m, mark, number)
            else:
                yield from self._add_counts(counts, kind, data, n, m, mark, number)
            yield

        if ccore.core() is not None:
            yield from self._core_words(
                e, mult, n, counts, 0, lambda i, w, m: add_word(i + 1, w, m),
                (dense, dense_mult) if compiled else None,
            )  # fmt: skip
        else:
            for number, (w, m) in enumerate(mult.items(), 1):
                yield from add_word(number, w, m)
        if dense:
            # About 8 * _CHUNK byte additions between two yields, whatever the words.
            # (min and max written out: builtin calls cost ~1,000 instructions each.)
            step = knobs._CHUNK * 8 // (len(dense) if len(dense) > 8 else 8)
            step = step if step > 256 else 256
            adder = kernels.DenseCounts(counts, dense, dense_mult)
            for lo in range(0, n, step):
                adder.add(lo, n if n < lo + step else lo + step)
                yield
            del adder
            del dense
        if mark_all is not None:
            self._give(e, mark_all)

        # The largest count per chunk of knobs._CHUNK groups, a chunk between two yields.
        tops: list[tuple[int, int]] = []  # (first group number, largest count) per chunk
        flat = n <= knobs._RANK_FLAT
        if not (flat and self._flat_first_on(counts, n_words)):
            # (_FLAT_FIRST: the flat visit of every matched group leaves no count for
            # the loop below it, which alone reads `tops`.)
            for start in range(0, n, knobs._CHUNK):
                most = int(counts[start : start + knobs._CHUNK].max())
                if most:
                    tops.append((start, most))
                yield

        def select(c: int, start: int) -> np.ndarray[Any, Any]:
            found = np.flatnonzero(counts[start : start + knobs._CHUNK] == c)
            found += start
            return found

        result = yield from self._rank_steps(
            view, n_words, limit, accept, min_matched, tagged, max_rel, at_start, tops, select,
            lambda g: int(counts[g]), counts if flat else None,
        )  # fmt: skip
        self._give(e, counts_all)
        return result

    def _core_words(
        self,
        e: _Numbering,
        mult: dict[str, int],
        n: int,
        counts: np.ndarray[Any, Any],
        n_planes: int,
        add_word: Callable[[int, str, int], Generator[None, None, None]],
        dense: tuple[list[np.ndarray[Any, Any]], list[int]] | None = None,
    ) -> Generator[None, None, None]:
        """The query words (``mult``: word -> multiplicity) with small match sets counted
        in C into ``counts`` (byte counts, or with ``n_planes`` > 0 a
        :class:`~.ccore.BitPlanes`' planes), a budget per call; the C code hands back
        the others (short, cached or common words), each given to ``add_word(its index,
        word, multiplicity)``. With ``dense`` (the lists of dense sets and their
        multiplicities that ``add_word`` appends a dense set to) and
        ``knobs._LEFT_CACHED``, a left word whose set is cached dense for the ``n``
        groups in this path's form is appended there directly, marked most recently
        used as :meth:`MatchCache.get` does: what ``add_word`` would do with the set
        ``match_steps`` returns for it. O(words + their postings) in steps."""
        words, mults = list(mult), list(mult.values())
        if not knobs._LEFT_CACHED:
            dense = None
        # knobs._LEFT_EXTEND: a left word's cached byte set a few groups short is
        # extended here, as MatchFinder._extend would with _SCAN_MARK (byte path only).
        extend = (
            dense is not None
            and not n_planes
            and knobs._LEFT_EXTEND
            and knobs._SCAN_MARK
            and kernels.active()
        )
        # match_steps' cached dense set of this path: bytes, or bits (uint64 words).
        form = _U64_DT if n_planes else _U8_DT
        short = masks._SHORT_BIT
        small, cmin = knobs._JOIN, self._finder.cache_min  # postings of a word for C
        small = cmin if cmin < small else small
        at = 0
        while at < len(words):
            at, left = ccore.count_words(
                words,
                mults,
                at,
                knobs._JOIN,
                small,
                self._finder.vocab,
                e.post,
                e.cache.entries,
                masks._SHORT_BIT,
                counts,
                n,
                n_planes,
                e.memo if ccore.MEMO else None,
                e.epoch,
                e.tokcache,
                e.current,
            )
            for i in left:
                if dense is not None:
                    w = words[i]
                    entries = e.cache.entries
                    hit = entries.get(w)
                    if (
                        hit is not None
                        and hit[1]
                        and hit[0] >= n
                        and hit[2].dtype == form
                        and not (n_planes and w in short)  # bits: the rows come first
                    ):
                        del entries[w]
                        entries[w] = hit  # most recently used last (MatchCache.get)
                        dense[0].append(hit[2])
                        dense[1].append(mults[i])
                        continue
                    if (
                        extend
                        and hit is not None
                        and hit[1]
                        and n - hit[0] <= knobs._STEP  # one of _extend's steps
                        and e.n - knobs._SCAN_NEW <= hit[0]  # its texts still kept
                        and len(hit[2]) >= n  # room in place
                        and hit[2].dtype == _U8_DT
                        and w not in short  # (a short word's set comes from the masks)
                    ):
                        data = hit[2]
                        kernels.wo_scan_mark(
                            e.recent, hit[0], n, knobs._SCAN_NEW, w, knobs._SCAN_RARE,
                            knobs._SCAN_RARE and knobs._SCAN_WIDE, data,
                        )  # fmt: skip
                        e.cache.remember(w, n, True, data)  # as _extend: now covering n
                        dense[0].append(data)
                        dense[1].append(mults[i])
                        continue
                yield from add_word(i, words[i], mults[i])
            yield

    def _count_bits(
        self,
        e: _Numbering,
        mult: dict[str, int],
        n: int,
        bp: ccore.BitPlanes,
        xbits: np.ndarray[Any, Any],
        maxima: bool = False,
    ) -> Generator[None, None, None]:
        """Add every query word's match set (``mult``: word -> multiplicity) into the
        bit-sliced counts ``bp`` over the groups below ``n``: the words with small sets
        in C (``count_words``), sparse sets group by group (``add_sparse``, each once,
        then ``unmark``) or, from ``n / knobs._SPARSE_AS_DENSE`` numbers, as new bitsets
        with the dense ones, dense bitsets in one pass at the end (a set only gains numbers
        at or above this retrieve's ``n``, so deferring changes nothing). ``xbits``: room
        for the marks of a sparse set (``words_of(n)``, garbage; zeroed here when first
        needed). With ``maxima``, last the largest count of each 64-group word
        (``bp.set_word_maxima``), in the dense pass or a pass of its own. O(words +
        postings + n / 64 * planes) in steps."""
        ready = False
        dense: list[np.ndarray[Any, Any]] = []
        dense_mult: list[int] = []
        taken: list[np.ndarray[Any, Any]] = []  # bitsets from e.bitsets
        words_n, words_cap = ccore.words_of(n), ccore.words_of(len(e.maxrel))

        def add_word(w: str, m: int) -> Generator[None, None, None]:
            nonlocal ready
            kind, data = yield from self._finder.match_steps(e, w, n, True)
            if kind == _NONE:
                return
            if kind == _DENSE_SET:
                dense.append(data)
                dense_mult.append(m)
                return
            if data.dtype != np.int32:
                data = data.astype(np.int32)
            size = len(data)
            if knobs._SPARSE_AS_DENSE > 0 and size * knobs._SPARSE_AS_DENSE >= n:
                # Large: as a bitset, added with the dense sets (the same counts).
                as_bits = yield from e.bitsets.take_steps(np.uint64, words_n, words_cap)
                taken.append(as_bits)
                for start in range(0, size, knobs._JOIN):  # random writes: _JOIN at a time
                    ccore.bits_set(as_bits, data, n, start, min(size, start + knobs._JOIN))
                    yield
                dense.append(as_bits)
                dense_mult.append(m)
                return
            if not ready:
                for start in range(0, len(xbits), knobs._CHUNK):
                    xbits[start : start + knobs._CHUNK] = 0
                    yield
                bp.set_scratch(xbits)
                ready = True
            for start in range(0, size, knobs._JOIN):  # random writes: _JOIN at a time
                bp.add_sparse(data, start, min(size, start + knobs._JOIN), m)
                if size > knobs._JOIN:
                    yield
            for start in range(0, size, knobs._CHUNK):
                bp.unmark(data, start, min(size, start + knobs._CHUNK))
                if size > knobs._CHUNK:
                    yield
            yield

        planes, n_planes = bp.count_words_args()
        yield from self._core_words(
            e, mult, n, planes, n_planes, lambda i, w, m: add_word(w, m), (dense, dense_mult)
        )
        top = ccore.words_of(n)
        if dense:
            # About 2 * _CHUNK words of each set between two yields, fewer with more sets.
            step = max(64, knobs._CHUNK * 2 // max(8, len(dense)))
            adder = bp.add_dense(dense, dense_mult, last=maxima)
            for lo in range(0, top, step):
                adder.add(lo, min(top, lo + step))
                yield
            del adder
            del dense
        elif maxima:
            for lo in range(0, top, knobs._CHUNK):
                bp.word_maxima(lo, min(top, lo + knobs._CHUNK))
                yield
        for as_bits in taken:
            e.bitsets.give(as_bits, words_cap)

    def _top_k_bits(
        self,
        e: _Numbering,
        view: ReadView,
        mult: dict[str, int],
        n_words: int,
        limit: int,
        accept: Accept,
        min_matched: int,
        tagged: set[Record],
        max_rel: float,
        at_start: tuple[Any, ...],
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """The rest of :meth:`top_k_steps` with the matched-word counts bit-sliced
        (:class:`~.ccore.BitPlanes`): the same counts as the byte path's, the groups of a
        count visited in chunks of whole 64-group words, so the same top-k, scores and
        ties. O(words + postings + n / 64 * planes per count visited), in bounded
        steps."""
        n = len(at_start[1])
        n_planes = n_words.bit_length()
        # Planes from the pool, zeroed for the `n` groups this retrieve sees; after the
        # room for MAX_PLANES planes, a sparse set's words (`_count_bits`).
        # room for MAX_PLANES planes, a sparse set's words (`_count_bits`), then the
        # words' largest counts (uint16, a quarter of a uint64 each).
        words_cap = ccore.words_of(len(e.maxrel))
        cap = words_cap * (ccore.MAX_PLANES + 1) + (words_cap + 3) // 4
        words_n = ccore.words_of(n)
        planes_all: np.ndarray[Any, Any] = yield from e.scratch.take_steps(
            np.uint64, words_n * n_planes, cap
        )
        if len(planes_all) < cap:  # a spare given back by a retrieve that began before a growth
            planes_all = yield from zeroed_steps(cap, np.uint64)
        bp = ccore.BitPlanes(planes_all[: words_cap * ccore.MAX_PLANES], n_planes, n)
        xbits = planes_all[words_cap * ccore.MAX_PLANES :][:words_n]
        # Counts below 2 ** 16 (MAX_PLANES planes) fit the word maxima.
        by_words = bool(knobs._WORD_MAXIMA) and n_planes <= 16
        if by_words:
            wmax = planes_all[words_cap * (ccore.MAX_PLANES + 1) :].view(np.uint16)[:words_n]
            bp.set_word_maxima(wmax)
        yield from self._count_bits(e, mult, n, bp, xbits, by_words)

        # The largest count per chunk of knobs._BITS_CHUNK groups (whole words), a chunk
        # between two yields; then the groups of a count a chunk per call. The chunks and
        # batches need not be the byte path's: _visit's result does not depend on the
        # order it sees the groups in.
        # No wider than this retrieve's groups: the room below is a chunk of int64s, and
        # 64 concurrent readers of a small memory each holding 2 MiB doubled the main
        # job's RSS.
        chunk = min(-(-knobs._BITS_CHUNK // 64) * 64, max(1, words_n) * 64)
        chunks = -(-n // chunk)
        if by_words and knobs._VISIT_C:  # every chunk's largest count in one call
            tops = [(i * chunk, m) for i, m in enumerate(bp.maxima_of_chunks(chunk)) if m]
        else:
            tops = yield from self._tops(bp, chunk, chunks, by_words)
        # Room for a chunk's groups, pooled (only the pages written are touched).
        found_buf = yield from e.scratch.take_steps(np.int64, 0, chunk)
        if len(found_buf) < chunk:
            found_buf = np.empty(chunk, np.int64)

        def select(c: int, start: int) -> np.ndarray[Any, Any]:
            got = bp.select(c, start, start + chunk, found_buf)
            return found_buf[:got].copy()

        def select_many(c: int, starts: list[int]) -> list[np.ndarray[Any, Any]]:
            found, at = [], 0
            while at < len(starts):  # as many whole chunks as found_buf holds, a call
                got, done = bp.select_chunks(c, starts[at:], chunk, found_buf)
                found.append(found_buf[:got].copy())
                at += done
            return found

        result = yield from self._rank_steps(
            view, n_words, limit, accept, min_matched, tagged, max_rel, at_start, tops, select,
            bp.count, select_many=select_many if by_words and knobs._VISIT_C else None,
        )  # fmt: skip
        e.scratch.give(found_buf, chunk)
        words_cap = ccore.words_of(len(e.maxrel))
        e.scratch.give(planes_all, words_cap * (ccore.MAX_PLANES + 1) + (words_cap + 3) // 4)
        return result

    @staticmethod
    def _tops(
        bp: ccore.BitPlanes, chunk: int, chunks: int, by_words: bool
    ) -> Generator[None, None, list[tuple[int, int]]]:
        """(first group, largest count) of each of the ``chunks`` chunks of ``chunk``
        groups whose largest count is not 0: from the words' largest counts with
        ``by_words``, else from the planes, a chunk between two yields. O(n / 64 *
        planes)."""
        most = np.zeros(max(1, chunks), np.int64)
        for c0 in range(chunks):
            if by_words:  # from the words' largest counts, an eighth of a plane's bytes
                most[c0] = bp.maxima_of_words(chunk, c0)
            else:
                bp.maxima(chunk, c0, c0 + 1, most)
                yield
        return [(i * chunk, m) for i, m in enumerate(most[:chunks].tolist()) if m]

    @staticmethod
    def _flat_first_on(counts: np.ndarray[Any, Any], n_words: int) -> bool:
        """Whether the flat ranking picks its groups with ``ccore.flat_first``
        (``knobs._FLAT_FIRST``): the compiled core, byte or uint16 counts, the groups
        of every matched count at once (``_RANK_FLAT_GROUPS`` 0), and at most
        ``_CHUNK`` of them (one call reads every count: no more than a step may touch;
        ``_RANK_FLAT`` is no larger at the default knobs). O(1)."""
        return (
            knobs._FLAT_FIRST
            and len(counts) <= knobs._CHUNK
            and knobs._VISIT_C
            and knobs._RANK_FLAT_GROUPS <= 0
            and n_words <= 0xFFFF
            and counts.dtype.itemsize <= 2
            and ccore.core() is not None
        )

    @staticmethod
    def _visit_flat(
        counts: np.ndarray[Any, Any],
        n_words: int,
        least: int,
        maxrel: np.ndarray[Any, Any],
        minseq: np.ndarray[Any, Any],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
    ) -> Generator[None, None, None]:
        """:meth:`_visit` of every group whose count is at least ``least``, each with
        its own part ``0.4 * (count / n_words)``, the batches picked straight from
        ``counts`` (``knobs._FLAT_FIRST``): ``ccore.flat_first`` gives the first
        ``max(limit, _VISIT_BATCH)`` groups (``_FLAT_BATCH`` for ``_VISIT_BATCH`` when
        smaller) in visit order (filtered by the heap's worst
        when it is full), then, only if they were all read and more are left, the next
        four times as many after the last one read, and so on. The same groups can
        enter as :meth:`_visit`'s, so the same top-k, scores and ties. O(n + groups
        read * log batch) per batch."""
        n = len(counts)
        first = knobs._VISIT_BATCH
        if 0 < knobs._FLAT_BATCH < first:  # a smaller first batch (later ones grow 4x)
            first = knobs._FLAT_BATCH
        batch = limit if limit > first else first
        step, done = knobs._STEP, progress[0]
        after: tuple[float, int, int] | None = None
        while True:
            kth = (float(heap[0][0]), -heap[0][1]) if len(heap) == limit else None
            picked, more = ccore.flat_first(
                counts, n, least, n_words, maxrel, minseq, kth, batch, after
            )
            if not picked:
                break
            yield
            done, stop = yield from WordOverlapSearch._offer_picked(
                picked, glist, heap, limit, push, admitted, tagged, progress, step, done
            )
            if stop:
                return  # neither the last group read nor any later one can enter
            if not more:
                break
            g, bound, mseq, _ = picked[-1]
            after = (bound, mseq, g)
            batch *= 4
            progress[0] = done
        progress[0] = done

    @staticmethod
    def _rank_flat(
        counts: np.ndarray[Any, Any],
        n_words: int,
        least: int,
        maxrel: np.ndarray[Any, Any],
        minseq: np.ndarray[Any, Any],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
    ) -> Generator[None, None, int]:
        """The highest counts of :meth:`_rank_steps`' count loop in one visit
        (``knobs._RANK_FLAT``): the groups of the highest counts, down to the count
        ``c0`` (at least ``least``) from which there are at least
        ``knobs._RANK_FLAT_GROUPS`` of them (0: from ``least``, every matched group), each with its
        own score part ``0.4 * (count / n_words)`` (the same float as the loop's),
        visited by (bound, smallest seq) whatever its count. :meth:`_visit` stops only
        where no later group of the set can enter, so the order within the set changes
        nothing; the loop goes on below ``c0`` as before. Returns ``c0`` (``least`` when
        no group has ``least`` or more). O(groups) in ``_CHUNK`` steps."""
        c0 = least
        if knobs._RANK_FLAT_GROUPS > 0:
            # Groups per count (at most n_words), a chunk between two yields.
            hist = np.zeros(n_words + 1, np.int64)
            for start in range(0, len(counts), knobs._CHUNK):
                hist += np.bincount(counts[start : start + knobs._CHUNK], minlength=n_words + 1)
                yield
            above = np.cumsum(hist[::-1])[::-1]  # above[c]: groups with a count of c or more
            if least >= len(above) or not above[least]:
                return least
            enough = np.flatnonzero(above[least:] >= knobs._RANK_FLAT_GROUPS)
            c0 = least + int(enough[-1]) if len(enough) else least
        if WordOverlapSearch._flat_first_on(counts, n_words):
            yield from WordOverlapSearch._visit_flat(
                counts, n_words, c0, maxrel, minseq, glist, heap, limit, push, admitted,
                tagged, progress,
            )  # fmt: skip
            return c0
        found: list[np.ndarray[Any, Any]] = []
        for start in range(0, len(counts), knobs._CHUNK):
            got = np.flatnonzero(counts[start : start + knobs._CHUNK] >= c0)
            got += start
            found.append(got)
            yield
        idx = found[0] if len(found) == 1 else np.concatenate(found)
        if len(idx):
            parts = 0.4 * (counts[idx].astype(np.float64) / n_words)
            yield
            yield from WordOverlapSearch._visit(
                idx, parts, maxrel, minseq, glist, heap, limit, push, admitted, tagged, progress
            )
        return c0

    def _rank_steps(
        self,
        view: ReadView,
        n_words: int,
        limit: int,
        accept: Accept,
        min_matched: int,
        tagged: set[Record],
        max_rel: float,
        at_start: tuple[Any, ...],
        tops: list[tuple[int, int]],
        select: Callable[[int, int], np.ndarray[Any, Any]],
        count_of: Callable[[int], int],
        flat: np.ndarray[Any, Any] | None = None,
        select_many: Callable[[int, list[int]], list[np.ndarray[Any, Any]]] | None = None,
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """The top ``limit`` from the matched-word counts of every group of the numbering
        (``at_start``: its group list, bounds below ``n`` and text dict as the retrieve
        began):
        the ``tagged`` records first, then the groups by count, highest first, while a
        count's best bound can still enter (``tops``: the first group number and largest
        count of each chunk; ``select(c, start)``: the group numbers of count ``c`` in
        the chunk from ``start``, as an array), last the entries that match no word, in
        descending relevance. ``count_of(g)``: group ``g``'s count. ``flat`` (the
        counts as an array, or None): the groups of every count visited at once, by
        bound (:meth:`_rank_flat`), instead of count by count. ``select_many(c,
        starts)`` (or None): the groups of count ``c`` in the chunks from ``starts`` as
        a few arrays, in fewer calls than ``select`` per chunk. Whatever the counts'
        form, the same counts give the same top-k, scores and ties. O(groups visited),
        in bounded steps."""
        version = view.version
        glist, maxrel, minseq, groups = at_start

        def admitted(rec: Record) -> bool:
            return rec.born <= version < rec.died and (accept is None or accept(rec))

        heap: list[tuple[float, int, Record]] = []  # worst on top: (score, -seq, rec)

        def push(rec: Record, score: float) -> None:
            item = (score, -rec.seq, rec)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)

        done = 0
        for rec in list(tagged):
            if admitted(rec):
                count = count_of(groups[rec.cols.text(rec.slot)])
                if count >= min_matched:  # min_matched (thresholds.py)
                    rel = rec.cols.relevance(rec.slot)
                    push(rec, combine_word_overlap(rel, count, n_words, True))
            done += 1
            if not done % knobs._STEP:
                yield

        # Groups by matched count, highest first, while the count's best bound can still
        # enter; a count's groups in sets of about knobs._VISIT, each by bound then
        # smallest seq.
        top_count = max(most for _, most in tops) if tops else 0
        least = min_matched if min_matched > 1 else 1  # min_matched: thresholds.py
        progress = [0]
        if flat is not None:
            top_count = -1 + (
                yield from self._rank_flat(
                    flat, n_words, least, maxrel, minseq, glist, heap, limit,
                    push, admitted, tagged, progress,
                )
            )  # fmt: skip  # the loop below goes on under the counts visited
        for c in range(top_count, least - 1, -1):
            if len(heap) == limit and combine_word_overlap(max_rel, c, n_words, False) < heap[0][0]:
                break
            part = 0.4 * (c / n_words)
            pending: list[np.ndarray[Any, Any]] = []
            size = 0
            starts = [start for start, most in tops if most >= c]
            founds: Any
            if select_many is not None and starts:
                founds = select_many(c, starts)
            else:
                founds = map(select, itertools.repeat(c), starts)
            total = len(founds) if type(founds) is list else len(starts)
            for k, found in enumerate(founds):
                pending.append(found)
                size += len(found)
                if size < knobs._VISIT and k + 1 < total:
                    continue
                yield
                idx = pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, size = [], 0
                yield from self._visit(
                    idx, part, maxrel, minseq, glist, heap, limit, push, admitted, tagged, progress
                )

        # Entries that match no word: visit them in descending relevance while their
        # bound can still enter the top k.
        below: float | None = None
        seen = 0
        while min_matched <= 0 and not (  # min_matched: thresholds.py
            len(heap) == limit and combine_word_overlap(max_rel, 0, n_words, False) < heap[0][0]
        ):
            restarted = False
            for rec in view.by_relevance(below=below):
                seen += 1
                if not seen % knobs._WALK_STEP:
                    yield  # by_relevance re-seeks across yields (the snapshot's contract)
                if len(heap) == limit:
                    # The bound of this and every later entry that matches no word.
                    bound = combine_word_overlap(rec.cols.relevance(rec.slot), 0, n_words, False)
                    worst_score, worst_negseq = heap[0][0], heap[0][1]
                    if bound < worst_score:
                        break
                    if bound == worst_score and -worst_negseq < rec.seq:
                        # Nobody left at this relevance can beat the worst: later seq, and
                        # a score of at most `bound`. Jump to the next lower relevance.
                        below = rec.cols.relevance(rec.slot)
                        restarted = True
                        break
                if rec in tagged or count_of(groups[rec.cols.text(rec.slot)]):
                    continue
                if accept is None or accept(rec):
                    push(rec, combine_word_overlap(rec.cols.relevance(rec.slot), 0, n_words, False))
            if not restarted:
                break

        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]
