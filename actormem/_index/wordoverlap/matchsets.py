"""A query word's match set: the group numbers whose text contains the word.

:class:`MatchFinder` finds it from the token vocabulary and posting lists (the union of
the lists of the tokens containing the word, joined in C as one numpy array), or, for a
short word, from the per-text masks; :class:`MatchCache` keeps the sets of words with
long postings across retrieves (when dense, one byte per group, or one bit for the
bit-sliced counts of ``ccore.BitPlanes``; else group numbers), each extended for the
groups added since by testing ``word in text`` or from the masks, so a repeated common
word costs one vectorised add.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Generator
from itertools import accumulate
from typing import TYPE_CHECKING, Any

import numpy as np

from .. import kernels
from ..scoring import zeroed_steps
from ..substring import SubstringVocab
from . import ccore, knobs, masks

if TYPE_CHECKING:
    from .numbering import _Numbering

__all__ = ["MatchCache", "MatchFinder"]

# What :meth:`MatchFinder.match_steps` returns: the kind of a word's match set.
_NONE, _DENSE_SET, _SPARSE_SET = range(3)


#: What :class:`MatchCache` counts for an entry beside its set's bytes: the tuple, the
#: array object, the key and the dict slot (~300 bytes on CPython 3.11). A short word's
#: set (``knobs._CACHE_SHORT_WORDS``) may be a single group number (4 bytes): counted
#: by its bytes alone, 64 MiB held ~16 million such entries, some 5 GB.
_ENTRY_BYTES = 320


def _cost(data: np.ndarray[Any, Any]) -> int:
    """What a cached set counts against ``knobs._CACHE_BYTES``. O(1)."""
    return data.nbytes + _ENTRY_BYTES


def _bits_from() -> int:
    """With the bit-sliced counts, a match set of at least ``n / _bits_from()`` groups
    is a bitset (``knobs._DENSE_BITS``, or ``knobs._BITSET_FROM`` when larger). O(1)."""
    return max(knobs._DENSE_BITS, knobs._BITSET_FROM)


class MatchCache:
    """Match sets of query words for one numbering, least recently used dropped past
    ``knobs._CACHE_BYTES`` (each entry counted with its overhead, ``_ENTRY_BYTES``).
    Readers write it (each call is atomic between yields)."""

    __slots__ = ("entries", "nbytes")

    def __init__(self) -> None:
        #: word -> (groups covered, dense?, byte per group (uint8) or bit per group
        #: (uint64 words) when dense, else group numbers (int32)).
        self.entries: dict[str, tuple[int, bool, np.ndarray[Any, Any]]] = {}
        self.nbytes = 0

    def get(self, w: str) -> tuple[int, bool, np.ndarray[Any, Any]] | None:
        """The cached set of ``w``, marked most recently used, or None. O(1)."""
        entries = self.entries
        hit = entries.pop(w, None)
        if hit is not None:
            entries[w] = hit  # most recently used last
        return hit

    def remember(self, w: str, n: int, dense: bool, data: np.ndarray[Any, Any]) -> None:
        """Keep ``data``, the match set of ``w`` for the groups below ``n``, unless a
        set for more groups is cached already. Amortized O(1)."""
        cache = self.entries
        old = cache.pop(w, None)
        if old is not None:
            if old[0] > n:
                cache[w] = old  # a later retrieve knows more
                return
            self.nbytes -= _cost(old[2])
        cache[w] = (n, dense, data)
        self.nbytes += _cost(data)
        while self.nbytes > knobs._CACHE_BYTES and len(cache) > 1:
            oldest = next(iter(cache))
            self.nbytes -= _cost(cache.pop(oldest)[2])

    def _check(self) -> None:
        assert self.nbytes == sum(_cost(d) for _, _, d in self.entries.values())


class MatchFinder:
    """Finds match sets (reader side; shares the owner's token vocabulary).

    Args:
        vocab: The tokens of the indexed texts (the owner's, read between its writes).
        cache_min: Postings from which a word's set is cached (``essential_budget``).
    """

    __slots__ = ("_cache_min", "_vocab")

    def __init__(self, vocab: SubstringVocab, cache_min: int) -> None:
        self._vocab = vocab
        self._cache_min = cache_min

    @property
    def vocab(self) -> SubstringVocab:
        """The token vocabulary (the owner's)."""
        return self._vocab

    @property
    def cache_min(self) -> int:
        """Postings from which a word's match set is cached."""
        return self._cache_min

    def match_steps(
        self, e: _Numbering, w: str, n: int, bits: bool = False
    ) -> Generator[None, None, tuple[int, Any]]:
        """The groups numbered below ``n`` whose text contains ``w``, as one of
        ``(_NONE, None)``; ``(_DENSE_SET, a byte per group)`` (read ``[:n]``), or with
        ``bits`` (the compiled core on) ``(_DENSE_SET, a bitset)`` (uint64 words, bit
        ``g & 63`` of word ``g >> 6``; bits at ``n`` and beyond may be set);
        ``(_SPARSE_SET, group numbers)`` (int32, unsorted, possibly repeated or ``>= n``).
        May include purged groups. O(groups added since) for a cached word; else O(n)
        vectorised for a :data:`~.masks._SHORT` word (from the masks), O(postings of the tokens
        containing ``w``) for another; all in bounded steps."""
        bit = masks._SHORT_BIT.get(w)
        if bit is not None and bits and knobs._SHORT_ROWS and e.rows is not None:
            while e.masked < n:  # the owner's work: the rows follow the masks
                e.fill_masks(knobs._MASK_STEP)
                yield
            rows = e.rows
            if rows is not None and int(e.rowcount[bit]) * _bits_from() >= n:
                # Dense: the owner's row (bits of the groups masked after `n` may be set).
                stride = len(rows) // 128
                return _DENSE_SET, rows[bit * stride : (bit + 1) * stride]
        hit = e.cache.get(w)
        if hit is not None and hit[1] and (hit[2].dtype == np.uint64) != bits:
            hit = None  # dense in the other path's form: found again, and replaced
        if hit is not None:
            upto, dense, data = hit
            if upto >= n:
                return (_DENSE_SET if dense else _SPARSE_SET), data
            if bit is not None:
                dense, ext = yield from self._short_set(e, w, bit, n, upto, dense, data, bits)
                return (_DENSE_SET if dense else _SPARSE_SET), ext
            if n - upto <= knobs._SCAN_NEW:
                extended = yield from self._extend(e, w, n, hit)
                if extended is not None:
                    return (_DENSE_SET if dense else _SPARSE_SET), extended
        if bit is not None:
            dense, found = yield from self._short_set(e, w, bit, n, 0, False, None, bits)
            return (_DENSE_SET if dense else _SPARSE_SET), found
        ids = yield from self._vocab.lookup_steps(w)
        item_of = self._vocab.item_of
        post = e.post
        lists: list[array[int]] = []
        # Each list's length when read: any prefix holds every group below `n` (the
        # owner only appends newer numbers, dropped below). Counted as read, per step:
        # at 1M a common substring has ~10^5 lists, and one pass over them was 2 ms.
        lens: list[int] = []
        total = 0
        end = len(ids)  # `ids` may be a gram list the owner appends to
        by_id = knobs._LISTS_BY_ID and ccore.core() is not None
        for start in range(0, end, knobs._STEP):
            if by_id:  # the same lists, read through the owner's slots in C
                items = self._vocab.items
                stop = min(end, start + knobs._STEP)
                total += ccore.lists_of_ids(ids, start, stop, e.byid, items, post, lists, lens)
                yield
                continue
            toks = filter(None, map(item_of, ids[start : min(end, start + knobs._STEP)]))
            got = list(filter(None, map(post.get, toks)))
            got_lens = list(map(len, got))
            lists += got
            lens += got_lens
            total += sum(got_lens)
            yield
        if not lists:
            return _NONE, None
        dense = total * (_bits_from() if bits else knobs._DENSE) >= n
        out: np.ndarray[Any, Any]
        parts: list[np.ndarray[Any, Any]] = []
        if dense and bits:  # room to extend in place
            out = yield from zeroed_steps(ccore.words_of(n + n // 4), np.uint64)
        elif dense:  # room to extend in place; paged in before the random writes below
            out = yield from zeroed_steps(n + n // 4, np.uint8)
        left = total  # postings still to join
        if (
            bits
            and dense
            and knobs._TOKEN_BITS > 0
            and e.tbits
            and not (knobs._LISTS_BY_ID and max(lens) < e.tbits_min)  # none long enough
        ):
            # The long lists the owner keeps as bitsets: ORed in, not joined.
            lists, lens = yield from self._or_token_bits(e, lists, lens, n, out)
            left = sum(lens)
        if bits and dense and left <= knobs._JOIN:  # one slice, joined in C
            ccore.bits_join(lists, n, out)
            lists, lens = [], []  # done
        elif total <= knobs._JOIN and kernels.active():  # one slice, joined in C
            if dense:
                kernels.wo_join(lists, n, None, out)
            else:
                room = np.empty(sum(map(len, lists)), np.int32)  # the lists as they are now
                out = room[: kernels.wo_join(lists, n, room, None)]
            lists, lens = [], []  # done
        if lists and knobs._JOIN_LISTS > 0 and kernels.active() and (bits or not dense):
            # Whole lists joined in C a batch at a time (at most _JOIN postings as read
            # and _JOIN_LISTS lists); a list longer than _JOIN alone, in slices below.
            yield from self._join_batches(lists, lens, n, out if dense else None, parts)
            lists, lens = [], []  # done
        slices: list[array[int]] = []
        size = 0
        for k, (lst, length) in enumerate(zip(lists, lens, strict=True)):
            for start in range(0, length, knobs._JOIN):
                # A long list is read in slices (copies); newer numbers are dropped below.
                piece = lst if length <= knobs._JOIN else lst[start : start + knobs._JOIN]
                slices.append(piece)
                size += len(piece)
                if (
                    size < knobs._JOIN
                    and len(slices) < knobs._STEP // 2
                    and (k + 1 < len(lists) or start + knobs._JOIN < length)
                ):
                    continue
                gids = np.frombuffer(b"".join(slices), np.int32)
                gids = gids[gids < n]
                if dense and bits:
                    ccore.bits_set(out, gids, n)
                elif dense:
                    out[gids] = 1
                else:
                    parts.append(gids)
                slices, size = [], 0
                yield
        if not dense and parts:
            out = np.concatenate(parts) if len(parts) != 1 else parts[0]
        if total >= self._cache_min or (knobs._CACHE_SHORT_WORDS and len(w) <= 2):
            e.cache.remember(w, n, dense, out)
        return (_DENSE_SET if dense else _SPARSE_SET), out

    @staticmethod
    def _or_token_bits(
        e: _Numbering,
        lists: list[array[int]],
        lens: list[int],
        n: int,
        out: np.ndarray[Any, Any],
    ) -> Generator[None, None, tuple[list[array[int]], list[int]]]:
        """OR into the bitset ``out`` (uint64, over at least ``n`` groups) the bitsets
        the owner keeps of those posting ``lists`` (``lens``: their lengths when read)
        that have one (``e.tbits``, ``knobs._TOKEN_BITS``), each first given the
        postings the owner added since its upkeep (the same truth written by every
        reader; ``covered`` raised); returns the other lists and their lengths, to be
        joined. Bits at ``n`` and beyond may be set in ``out``, of groups the lists
        hold. O(lists + n / 64 per bitset + the postings set), in steps."""
        tbits, least = e.tbits, e.tbits_min
        words = ccore.words_of(n)
        rest: list[array[int]] = []
        rest_lens: list[int] = []
        for lst, length in zip(lists, lens, strict=True):
            entry = tbits.get(id(lst)) if length >= least else None
            if entry is None or entry[0] is not lst or len(entry[2]) < words:
                rest.append(lst)
                rest_lens.append(length)
                continue
            bitset = entry[2]
            room = len(bitset) * 64
            for start in range(entry[1], length, knobs._CHUNK):
                stop = min(length, start + knobs._CHUNK)
                ccore.bits_join_slice(lst, start, stop, room, bitset)
                entry[1] = max(entry[1], stop)
                yield
            np.bitwise_or(out[:words], bitset[:words], out=out[:words])
            yield
        return rest, rest_lens

    @staticmethod
    def _join_batches(
        lists: list[array[int]],
        lens: list[int],
        n: int,
        bits: np.ndarray[Any, Any] | None,
        parts: list[np.ndarray[Any, Any]],
    ) -> Generator[None, None, None]:
        """The group numbers below ``n`` of the posting ``lists`` (``lens``: their
        lengths when first read, which bound a step's work: the owner only appends newer
        numbers, dropped here) set in the bitset ``bits`` (uint64), or with ``bits``
        None appended to ``parts`` as int32 arrays: whole lists a C call at a time, up
        to ``knobs._JOIN`` postings and ``knobs._JOIN_LISTS`` lists between two yields;
        a list longer than ``_JOIN`` by itself, a ``_JOIN`` slice per yield. The same
        set as :meth:`match_steps`' slices of at most ``_STEP // 2`` lists (the order of
        a sparse set's numbers may differ; it is unordered). O(postings + lists / C)
        in steps."""
        join, most = knobs._JOIN, max(1, knobs._JOIN_LISTS)
        ends = list(accumulate(lens))  # postings before each list's end
        i, count = 0, len(lists)
        while i < count:
            length = lens[i]
            if length > join and bits is not None and knobs._JOIN_IN_PLACE:
                # A long list: read in place by C, _CHUNK postings (sequential reads,
                # writes into a bitset of n / 8 bytes) between two yields.
                lst, step = lists[i], knobs._CHUNK
                for start in range(0, length, step):
                    ccore.bits_join_slice(lst, start, min(length, start + step), n, bits)
                    yield
                i += 1
                continue
            if length > join:  # a long list: slices (copies)
                lst = lists[i]
                for start in range(0, length, join):
                    gids = np.frombuffer(lst[start : start + join], np.int32)
                    gids = gids[gids < n]
                    if bits is not None:
                        ccore.bits_set(bits, gids, n)
                    else:
                        parts.append(gids)
                    yield
                i += 1
                continue
            before = ends[i] - length
            j = min(bisect_right(ends, before + join, i), i + most, count)
            j = max(j, i + 1)
            batch = lists[i:j]
            if bits is not None:
                ccore.bits_join(batch, n, bits)
            else:
                room = np.empty(sum(map(len, batch)), np.int32)  # the lists as they are now
                parts.append(room[: kernels.wo_join(batch, n, room, None)])
            i = j
            yield

    def _short_set(
        self,
        e: _Numbering,
        w: str,
        bit: int,
        n: int,
        upto: int,
        dense: bool,
        data: np.ndarray[Any, Any] | None,
        bits: bool = False,
    ) -> Generator[None, None, tuple[bool, np.ndarray[Any, Any]]]:
        """``(dense?, set)``: the match set of the :data:`~.masks._SHORT` word ``w`` (mask bit
        ``bit``) below ``n``, from the masks: with ``data`` (a cached set for groups
        below ``upto``) that set extended, else new (a new set is returned sparse, as
        group numbers, and remembered dense or sparse; dense as a bitset with ``bits``).
        O(n - upto) vectorised, in chunks, after computing the pending masks below ``n``
        (the owner's work)."""
        while e.masked < n:
            e.fill_masks(knobs._MASK_STEP)
            yield
        masks = e.masks[bit >> 6]
        one = np.uint64(1 << (bit & 63))
        if data is None and bits:
            return (yield from self._short_bits(e, w, masks, bit & 63, n))
        if data is None:
            out = np.zeros(n + n // 4, np.uint8)  # room to extend in place
            hits = 0
            # The set's group numbers, collected while it may still turn out sparse
            # (one flatnonzero over all n at the end was a ~2 ms step at 1M).
            parts: list[np.ndarray[Any, Any]] | None = []
            for start in range(0, n, knobs._CHUNK):
                stop = min(n, start + knobs._CHUNK)
                part = (masks[start:stop] & one) != 0
                out[start:stop] = part
                got = int(np.count_nonzero(part))
                hits += got
                if parts is not None:
                    if hits * knobs._DENSE >= n:
                        parts = None  # dense whatever follows
                    elif got:
                        gids = np.flatnonzero(part)
                        gids += start
                        parts.append(gids.astype(np.int32))
                yield
            return self._remember_new(e, w, n, hits, out, parts)
        new: list[np.ndarray[Any, Any]] = []
        for start in range(upto, n, knobs._CHUNK):
            stop = min(n, start + knobs._CHUNK)
            found = np.flatnonzero((masks[start:stop] & one) != 0)
            found += start
            new.append(found.astype(np.int32))
            yield
        added = np.concatenate(new) if new else np.zeros(0, np.int32)
        ext = yield from self._put_and_remember(e, w, n, upto, dense, data, added)
        return dense, ext

    def _remember_new(
        self,
        e: _Numbering,
        w: str,
        n: int,
        hits: int,
        out: np.ndarray[Any, Any],
        parts: list[np.ndarray[Any, Any]] | None,
    ) -> tuple[bool, np.ndarray[Any, Any]]:
        """``(dense?, set)`` of a short word's new match set below ``n`` (``hits``
        groups): ``out`` (dense) when ``parts`` is None, else the group numbers of
        ``parts`` joined; remembered when it has ``cache_min`` groups or more. O(set)."""
        if parts is None:
            if hits >= self._cache_min:
                e.cache.remember(w, n, True, out)
            return True, out
        gids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
        if hits >= self._cache_min:
            e.cache.remember(w, n, False, gids)
        return False, gids

    def _short_bits(
        self, e: _Numbering, w: str, masks_: np.ndarray[Any, Any], bit: int, n: int
    ) -> Generator[None, None, tuple[bool, np.ndarray[Any, Any]]]:
        """:meth:`_short_set` of a new set for the bit-sliced counts: a bitset when
        dense, else group numbers; remembered. O(n) in chunks of ``_CHUNK``."""
        out = np.zeros(ccore.words_of(n + n // 4), np.uint64)  # room to extend in place
        one = np.uint64(1 << bit)
        hits = 0
        parts: list[np.ndarray[Any, Any]] | None = []
        for start in range(0, n, knobs._CHUNK):
            stop = min(n, start + knobs._CHUNK)
            got = ccore.bits_from_masks(masks_, bit, start, stop, out)
            hits += got
            if parts is not None:
                if hits * _bits_from() >= n:
                    parts = None  # dense whatever follows
                elif got:
                    gids = np.flatnonzero((masks_[start:stop] & one) != 0)
                    gids += start
                    parts.append(gids.astype(np.int32))
            yield
        return self._remember_new(e, w, n, hits, out, parts)

    def _extend(
        self, e: _Numbering, w: str, n: int, hit: tuple[int, bool, np.ndarray[Any, Any]]
    ) -> Generator[None, None, np.ndarray[Any, Any] | None]:
        """``hit``, a cached match set ``(upto, dense, data)`` of ``w`` for the groups
        below ``upto``, extended to ``n`` by testing the recent texts, and remembered;
        None if the owner overwrote texts this needed meanwhile. A dense set is written in
        place when it has room (readers of it read below their own ``n``, and every writer
        writes the same truth).
        O(n - upto) Python steps, plus O(upto) copied in chunks when a dense set grows."""
        upto, dense, data = hit
        recent = e.recent
        new: list[int] = []
        compiled = kernels.active()
        rare, wide = knobs._SCAN_RARE, knobs._SCAN_RARE and knobs._SCAN_WIDE
        # In place: the bytes of the groups found set as the scan finds them (the same
        # truth _put_and_remember writes there), no list.
        mark = compiled and knobs._SCAN_MARK and dense and data.dtype == np.uint8 and len(data) >= n
        for start in range(upto, n, knobs._STEP):
            if e.n - knobs._SCAN_NEW > start:
                return None  # the owner has overwritten the texts to read
            stop = start + knobs._STEP
            stop = n if n < stop else stop  # min(n, ...) without the call
            if mark:
                kernels.wo_scan_mark(recent, start, stop, knobs._SCAN_NEW, w, rare, wide, data)
            elif compiled:  # the same tests, without the interpreter's loop (kernels.py)
                new += kernels.wo_scan(recent, start, stop, knobs._SCAN_NEW, w, rare, wide)
            else:
                for g in range(start, stop):
                    if w in recent[g % knobs._SCAN_NEW]:
                        new.append(g)
            yield
        if mark:
            e.cache.remember(w, n, True, data)
            return data
        return (yield from self._put_and_remember(e, w, n, upto, dense, data, new))

    def _put_and_remember(
        self,
        e: _Numbering,
        w: str,
        n: int,
        upto: int,
        dense: bool,
        data: np.ndarray[Any, Any],
        added: Any,
    ) -> Generator[None, None, np.ndarray[Any, Any]]:
        """``data``, the cached match set of ``w`` below ``upto``, with the group numbers
        ``added`` (all in ``[upto, n)``) put in, remembered for ``n``, and returned. A
        dense set full up is copied into one half as large again, in chunks; a sparse
        one is concatenated. O(len(added)), plus O(upto) when a dense set grows."""
        ext: np.ndarray[Any, Any]
        if dense and data.dtype == np.uint64:  # a bitset (ccore.BitPlanes' sets)
            if len(data) >= ccore.words_of(n):
                ext = data
            else:
                ext = np.zeros(ccore.words_of(n + n // 2), np.uint64)
                words = ccore.words_of(upto)
                for start in range(0, words, 4 * knobs._CHUNK):
                    stop = min(words, start + 4 * knobs._CHUNK)
                    ext[start:stop] = data[start:stop]
                    yield
            ccore.bits_set(ext, np.asarray(added, np.int32), n)
        elif dense:
            if len(data) >= n:
                ext = data
            else:
                ext = np.zeros(n + n // 2, np.uint8)
                for start in range(0, upto, 4 * knobs._CHUNK):
                    stop = min(upto, start + 4 * knobs._CHUNK)
                    ext[start:stop] = data[start:stop]
                    yield
            ext[added] = 1
        else:
            ext = np.concatenate((data, np.asarray(added, np.int32)))
        e.cache.remember(w, n, dense, ext)
        return ext
