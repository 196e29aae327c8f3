"""The BM25 index's storage units: a document's group and a term's posting list.

A ``_Group`` is every un-purged record of one document (text and tags) with the packed
numbers and frequencies of its terms; a ``_Term`` is one term's posting list (group
numbers ascending, frequencies), its df at the newest version and a reader-side cache of
its largest saturation (the MaxScore bound) and, for the compiled core, per block of
postings the largest frequency and smallest length (the block-max bounds). The helpers
read a prefix of a posting list as numpy arrays without keeping a buffer export across a
yield.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from ..._record import Record
from .. import kernels
from . import knobs

#: No group numbers (an empty concatenation).
_NO_NUMS = np.zeros(0, np.intp)

#: The terms of a group not yet filled in.
_NO_TERMS = array("i")

#: A group's terms are packed as ``term number << 8 | min(tf, 255)``: its term
#: frequencies without a binary search in each posting list (255: look it up there).
_TF_BITS = 8
_TF_CAP = (1 << _TF_BITS) - 1

#: ``BM25Index._first_seq`` where a group's records are not known (int64's lowest).
_NO_SEQ = -(1 << 63)

#: ``knobs._FIRST_SEQ32``'s array: int32's lowest where a group's records are not known
#: (or its lowest seq is at or below it), int32's largest for a seq above it.
_NO_SEQ32 = -(1 << 31)
_SEQ32_TOP = (1 << 31) - 1


def first_seq_floor(seq: int) -> int:
    """``seq`` as ``BM25Index._first_seq`` keeps it with ``knobs._FIRST_SEQ32``: itself
    inside int32, int32's largest above it, int32's lowest (unknown) at or below that:
    never above ``seq`` but for that mark, which the core's tie check reads as no bound
    at all (``first_bound`` in ``_cbm25.c``), so still a lower bound there. O(1)."""
    if seq > _SEQ32_TOP:
        return _SEQ32_TOP
    return seq if seq > _NO_SEQ32 else _NO_SEQ32


def first_seq_array(size: int, narrow: bool, huge: bool) -> Any:
    """A new ``BM25Index._first_seq`` of ``size`` groups, none known: int32 (``narrow``,
    ``knobs._FIRST_SEQ32``) or int64, in huge pages where ``huge`` (as
    ``kernels.huge_zeros``). O(size)."""
    first = kernels.huge_zeros(size, np.int32 if narrow else np.int64, huge)
    first[:] = _NO_SEQ32 if narrow else _NO_SEQ
    return first


def first_seqs_of(seqs: Any, narrow: bool) -> Any:
    """``seqs`` (int64 numpy) as ``first_seq_floor`` keeps each where ``narrow``, else as
    they are. O(len(seqs))."""
    return np.clip(seqs, _NO_SEQ32, _SEQ32_TOP) if narrow else seqs


#: The records of a group not yet filled in (never appended to).
_NO_RECS: list[Record] = []

#: Lengths below this are their own one-byte code (:func:`length_codes`).
_EXACT_CODES = 128


def length_code(length: int) -> int:
    """The one-byte code of a document length >= 0, as ``_cbm25.c``'s walk reads it
    (``knobs._LENGTH_CODES``): the length itself below 128; above, 16 codes per octave
    (128 + 16 (p - 7) + the four bits after the leading one, p its place), 255 from
    31,744 on. The code's lowest length (``_cbm25.bm25_code_floors``) is at most the
    length, so a saturation computed from it bounds the exact one from above. O(1)."""
    if length < _EXACT_CODES:
        return length if length > 0 else 0
    p = length.bit_length() - 1
    if p > 14:
        return 255
    return 128 + 16 * (p - 7) + ((length >> (p - 4)) & 15)


def length_codes(lengths: Any) -> Any:
    """:func:`length_code` of each of ``lengths`` (an integer numpy array), as a new
    uint8 array of the same length. O(len(lengths))."""
    x = np.asarray(lengths, np.int64)
    out = np.clip(x, 0, _EXACT_CODES - 1).astype(np.uint8)
    big = np.flatnonzero(x >= _EXACT_CODES)
    if len(big):
        y = x[big]
        p = np.frexp(y.astype(np.float64))[1].astype(np.int64) - 1  # exact below 2**53
        code = 128 + 16 * (p - 7) + ((y >> np.maximum(p - 4, 0)) & 15)
        out[big] = np.where(p > 14, 255, code).astype(np.uint8)
    return out


def _doc_key(rec: Record) -> object:
    """The key of ``rec``'s document in ``BM25Index._groups``: its text, or its text and
    tags. O(1) (the text's hash is cached; O(tags) for a tagged one)."""
    entry = rec.entry
    tags = entry.tags
    return (entry.memory, tags) if tags else entry.memory


class _Group:
    """Every un-purged record of one document (``memory`` text and tags, see
    :func:`_doc_key`).

    BM25 statistics and the score before recency and prior depend only on the document,
    so the index tokenizes a text once and posting lists hold groups, not records: agent
    memories repeat texts (the same tool call, the same fact). ``num`` is the group's
    number (its slot in the index's group table and length array; numbers grow with
    creation, so every posting list is sorted by it). With the index's term pool
    (``knobs._TERM_POOL``, the default) ``terms`` is the shared empty ``_NO_TERMS`` and
    the group's term numbers are the pool's (``BM25Index._terms_of``); else ``terms``
    are the numbers of the
    ``_Term`` of each distinct term of the document, in first-occurrence order, each
    packed with its frequency (``num << _TF_BITS | min(tf, _TF_CAP)``; the posting list
    has the exact one). ``recs`` is sorted by ``seq``; purged records leave it
    lazily (it is rebuilt once half of it is purged); ``dead`` counts the purged
    records still in it. While the group has had one record (most texts) the slot
    ``_recs`` holds that record itself (``knobs._SINGLE_RECORD``: no list of one, 80
    bytes and a tracked object less), and ``recs`` reads it as a 1-tuple; the second
    record makes it a new list (readers may hold the tuple).

    Four slots, 64 bytes (the document key and the count of unpurged records, which
    the records give, are not kept: six took 80)."""

    __slots__ = ("_recs", "dead", "num", "terms")

    def __init__(self, num: int) -> None:
        self.num = num
        self.terms = _NO_TERMS
        self._recs: list[Record] | Record = _NO_RECS
        self.dead = 0

    @property
    def recs(self) -> list[Record] | tuple[Record]:
        """The group's records by seq (a 1-tuple for a record kept alone). O(1)."""
        recs = self._recs
        return recs if isinstance(recs, list) else (recs,)

    @recs.setter
    def recs(self, recs: list[Record]) -> None:
        self._recs = recs

    @property
    def unpurged(self) -> int:
        """The group's records not purged. O(1)."""
        recs = self._recs
        return (len(recs) if isinstance(recs, list) else 1) - self.dead


def _seq(rec: Record) -> int:
    return rec.seq


class _Recs(list):  # type: ignore[type-arg]
    """A group's records by seq in its table slot (``knobs._GROUP_COLUMNS``), with the
    text they share: ``BM25Index``'s document table reads a group's text back from its
    slot (``knobs._GROUP_TABLE``). 64 bytes and the item buffer, as a list with one
    slot more."""

    __slots__ = ("text",)
    text: str


def _recs(items: list[Record], text: str) -> _Recs:
    """A new :class:`_Recs` of ``items`` (their shared text ``text``). O(len(items))."""
    out = _Recs(items)
    out.text = text
    return out


def _recs_in(item: Any) -> list[Record] | tuple[Record]:
    """The records of a live group from its slot in ``BM25Index._table``: a
    :class:`_Group`'s ``recs``, or with ``knobs._GROUP_COLUMNS`` the slot's
    :class:`_Recs` or its one record (as a 1-tuple). O(1)."""
    kind = type(item)
    if kind is _Group:
        return item.recs  # type: ignore[no-any-return]
    if kind is _Recs or kind is list:
        return item  # type: ignore[no-any-return]
    return (item,)


#: A pool's typecodes, narrowest first, with the numpy dtypes of their items and the
#: largest term number each holds.
_POOL_CODES = (("H", np.uint16, 0xFFFF), ("I", np.uint32, 0xFFFFFFFF), ("q", np.int64, 1 << 62))


def _pool_code(terms: int) -> str:
    """The narrowest pool typecode for term numbers below ``terms``. O(1)."""
    return next(code for code, _, top in _POOL_CODES if terms - 1 <= top)


def _pool_dtype(code: str) -> Any:
    return next(dtype for c, dtype, _ in _POOL_CODES if c == code)


class _TermPool:
    """Every group's term numbers (of its distinct terms, in first-occurrence order, as
    ``_Group.terms`` but without their frequencies) in one array, by group number
    (``knobs._TERM_POOL``).

    ``data`` holds the term numbers of group ``num`` at ``data[starts[num] : starts[num
    + 1]]``; ``starts`` gets one item per group made (its end), so ``len(starts) ==
    groups + 1``. ``data`` is uint16 while at most 65,536 term numbers were given
    (``'H'``; deleted terms' numbers are not reused, so a pool widened by texts since
    purged stays wide until a restore renumbers the live terms; then ``'I'``, then
    ``'q'``, each widening a new array), and ``starts`` uint32 (``'q'`` past 2**32 - 1
    items). A term's frequency in a group is its posting list's (a binary search): the
    pool does not repeat it. Both arrays only grow by appends, and a reader reads them
    through the pool within one step (never across a yield), so a compaction between two
    steps, which replaces both, is never seen half-done. A purged group's terms stay
    until :meth:`compact` drops them (its range then empty): no snapshot reads them (the
    group table's slot is None).

    Per group 4 bytes of ``starts`` and 2 per term (4 past 65,536 terms), plus the
    arrays' growth slack, where an ``array`` per group took a 64-byte object, its own
    buffer and 4 bytes a term (the number packed with the frequency)."""

    __slots__ = ("data", "dead", "starts")

    def __init__(self) -> None:
        self.data: array[int] = array("H")
        self.starts: array[int] = array("I", [0])
        #: Items of ``data`` of purged groups (dropped by :meth:`compact`).
        self.dead = 0

    def append(self, nums: list[int], code: str) -> None:
        """Add the next group's term numbers; ``code`` (``_pool_code`` of the
        vocabulary's size) widens the pool first if it is wider. O(len(nums)),
        amortized."""
        data = self.widen(code)
        data.extend(nums)
        self.ended(len(data))

    def widen(self, code: str) -> array[int]:
        """``data`` in ``code`` if that is wider (a new array), else as it is. O(pool)
        when it widens."""
        data = self.data
        if code != data.typecode and code in "Iq" and (code == "q" or data.typecode == "H"):
            data = self.data = array(code, data)
        return data

    def ended(self, end: int) -> None:
        """The next group's terms end at ``end`` (appended to ``data`` before). O(1)
        amortized."""
        if end > 0xFFFFFFFF and self.starts.typecode == "I":
            self.starts = array("q", self.starts)
        self.starts.append(end)

    def of(self, num: int) -> array[int]:
        """Group ``num``'s term numbers, as a new array. O(T)."""
        starts = self.starts
        return self.data[starts[num] : starts[num + 1]]

    def span(self, num: int) -> int:
        """Group ``num``'s count of terms. O(1)."""
        starts = self.starts
        return starts[num + 1] - starts[num]

    def purged(self, num: int, alive: Any) -> None:
        """Note that group ``num`` was purged (``alive``: the index's 0/1 marks by group
        number, ``num``'s already 0), compacting once the purged terms reach
        ``knobs._POOL_DEAD`` of the pool. Amortized O(1) per term."""
        self.dead += self.span(num)
        if self.dead and self.dead >= knobs._POOL_DEAD * len(self.data):
            self.compact(alive)

    def compact(self, alive: Any) -> None:
        """Drop the purged groups' terms (``alive[num] == 0``): new arrays, each live
        group's terms in place of order, a purged group's range empty. O(pool)."""
        groups = len(self.starts) - 1
        starts = np.array(self.starts, np.int64)
        sizes: Any = np.diff(starts)
        live = np.asarray(alive[:groups], bool)
        code = self.data.typecode
        kept = np.frombuffer(self.data, _pool_dtype(code))[np.repeat(live, sizes)]
        ends = np.zeros(groups + 1, np.int64)
        np.cumsum(np.where(live, sizes, 0), out=ends[1:])
        data = array(code)
        data.frombytes(kept.tobytes())
        self.data = data
        self.starts = array("I" if len(data) <= 0xFFFFFFFF else "q", ends.tolist())
        self.dead = 0

    @classmethod
    def from_flat(cls, nums: Any, terms: int, ends: list[int]) -> _TermPool:
        """A pool of the concatenated term numbers ``nums`` (an integer numpy array,
        each below ``terms``), group ``num``'s ending at ``ends[num + 1]`` (``ends[0]
        == 0``). O(total)."""
        pool = cls()
        code = _pool_code(terms)
        pool.data = array(code)
        pool.data.frombytes(np.asarray(nums).astype(_pool_dtype(code)).tobytes())
        pool.starts = array("I" if ends[-1] <= 0xFFFFFFFF else "q", ends)
        return pool

    @classmethod
    def from_raw(cls, code: str, data: bytes, s_code: str, starts: bytes) -> _TermPool:
        """A pool of the bytes ``data`` of term numbers of typecode ``code`` (``'H'``,
        ``'I'`` or ``'q'``, as :func:`_pool_code` gives) and ``starts``, the groups' ends
        (``s_code`` ``'I'`` or ``'q'``), as :meth:`from_flat` would make them. O(total),
        copies only."""
        pool = cls()
        pool.data = array(code)
        pool.data.frombytes(data)
        pool.starts = array(s_code)
        pool.starts.frombytes(starts)
        return pool

    def _check(self, groups: int, live: Any) -> None:
        """Assert the layout: one end per group, ascending, the dead count."""
        starts = self.starts.tolist()
        assert len(starts) == groups + 1
        assert starts[0] == 0
        assert starts[-1] == len(self.data)
        assert all(x <= y for x, y in zip(starts, starts[1:], strict=False))
        assert self.data.typecode in "HIq"
        assert self.starts.typecode in "Iq"
        dead = sum(starts[n + 1] - starts[n] for n in range(groups) if not live[n])
        assert dead == self.dead, "pool's dead count out of date"


class _Term:
    """One term's posting list: the numbers of the groups whose document has it
    (ascending: insertion order) and its frequency in each, as ``array('i')``; and its
    statistics.

    Owner writes only append to ``groups``/``tfs`` or replace them (compaction), so a
    reader that took the arrays and their length at its start can read that prefix at
    any later time."""

    __slots__ = (
        "blocks", "dead", "dense", "df", "groups", "key", "num", "ref", "seen", "tfs", "top",
    )  # fmt: skip

    def __init__(self, key: str, num: int) -> None:
        self.key = key
        #: The term's slot in the index's term table (never reused).
        self.num = num
        self.groups = array("i")
        #: Bytes while every frequency fits in one, else int32 (the array is replaced).
        self.tfs = array("B")
        #: Groups in the list whose records are all purged.
        self.dead = 0
        #: Records not retired whose document has the term: df at the newest version.
        self.df = 0
        #: Reader-side cache: the largest saturation ``tf / (tf + k1 * (1 - b + b * dl /
        #: ref))`` over the first ``seen`` postings, at the average length ``ref``.
        self.ref = 0.0
        self.top = 0.0
        self.seen = 0
        #: Reader-side cache for the compiled core's block-max bounds: per complete block
        #: of ``kernels.BM25_BLOCK`` postings of ``groups``, its largest frequency and
        #: smallest document length (int32 pairs). Extended by readers; replaced with
        #: ``groups`` by compaction, so a reader that took both together reads a pair
        #: that matches (a block of an append-only list never changes).
        self.blocks = array("i")
        #: ``knobs._DENSE_TFS``: None, or ``(bits, upto, dpos)``: the frequency of every
        #: group below ``upto`` in two bits of ``bits`` (uint8, four groups a byte, by
        #: :func:`dense_fill`), ``dpos`` the list's first posting of a group at or above
        #: ``upto``. Owner-written: the tuple is replaced, ``bits`` only written at
        #: groups at or above every published ``upto`` (or replaced), so a reader that
        #: took the tuple with the lists reads what they hold.
        self.dense: tuple[Any, int, int] | None = None

    def bound_steps(
        self,
        a_part: float,
        k_part: float,
        avgdl: float,
        lengths: Any,
        groups: array[int],
        tfs: array[int],
        end: int,
    ) -> Generator[None, None, float]:
        """A bound on the saturation ``tf / (tf + a_part + k_part * dl / avgdl)`` of the
        first ``end`` postings of ``groups``/``tfs`` (this term's arrays as the reader
        took them, which the owner may have replaced since: then nothing is published),
        with ``lengths`` the document length by group number, in slices:
        a generator that yields after every ``_BOUND_CHUNK`` postings it reads and returns
        the bound. It extends the cached largest saturation (``top`` over the first
        ``seen`` postings at ``ref``), or starts over at ``avgdl`` when that moved by more
        than ``_DRIFT`` since ``ref``, and publishes what it computed unless another
        reader published more, or the owner compacted the list, in between.

        Runtime complexity: O(postings added since the cache was made), or O(postings)
        once the average length drifted (vectorised, in slices of ``_BOUND_CHUNK``).
        """
        ref, top, seen = self.ref, self.top, self.seen
        if self.groups is not groups:
            ref, top, seen = 0.0, 0.0, 0  # the cache describes the arrays now in place
        if not ref or (k_part and not (1.0 / knobs._DRIFT <= avgdl / ref <= knobs._DRIFT)):
            ref, top, seen = avgdl, 0.0, 0
        compiled = kernels.active()
        for start in range(seen, end, knobs._BOUND_CHUNK):
            stop = min(end, start + knobs._BOUND_CHUNK)
            if compiled:  # the same operations in one pass (kernels.py)
                sat = kernels.bm25_max_sat(groups, tfs, start, stop, lengths, a_part, k_part / ref)
                top = max(top, sat)
            else:
                nums = np.frombuffer(groups, np.int32, stop)[start:]
                tf = np.frombuffer(tfs, tfs.typecode, stop)[start:].astype(np.float64)
                sats = tf / (tf + (a_part + (k_part / ref) * lengths[nums]))
                top = max(top, float(sats.max()))
                del nums  # release the buffer export at once: the owner appends to it
            if stop < end:
                yield
        if self.groups is groups and (self.ref != ref or self.seen < end):
            self.ref, self.top, self.seen = ref, top, end
        # Saturation grows with avgdl, at most in proportion (the length term shrinks).
        return top * (avgdl / ref if k_part and avgdl > ref else 1.0)

    def compact(self, alive: Any) -> None:
        """Drop the postings of purged groups (``alive[num]`` is 0), replacing the
        arrays. O(postings), vectorised: about 20 ms for a million postings (the Python
        loop it replaces took 180 ms); still one step of the owner."""
        count = len(self.groups)
        nums = np.frombuffer(self.groups, np.int32, count)
        freqs = np.frombuffer(self.tfs, self.tfs.typecode, count)
        keep = alive[nums].view(np.bool_)
        groups, tfs = array("i"), array(self.tfs.typecode)
        groups.frombytes(nums[keep].tobytes())
        tfs.frombytes(freqs[keep].tobytes())
        del nums, freqs  # release the buffer exports
        self.groups, self.tfs = groups, tfs
        self.dead = 0
        self.ref, self.top, self.seen = 0.0, 0.0, 0
        self.blocks = array("i")
        if self.dense is not None:  # a new array: readers may hold the old one
            old, upto, _ = self.dense
            self.dense = dense_make(groups, tfs, 4 * len(old), upto)


def dense_fill(bits: Any, groups: array[int], tfs: array[int], start: int, stop: int) -> None:
    """Set the two-bit codes of postings ``start..stop`` of a list in ``bits`` (uint8,
    four groups a byte: ``bits[num >> 2] >> 2 * (num & 3) & 3`` is 0 absent, 1 or 2
    the frequency, 3 three or more or below 1: sought in the list), whose codes there
    are 0 (groups not filled yet, each once: a list's groups are distinct). In C with
    the core (a fifth of numpy's time), else vectorised. O(stop - start)."""
    if stop <= start:
        return
    if kernels.bm25_core_active():  # the same bits in one pass in C
        kernels.bm25_dense_fill(bits, groups, tfs, start, stop)
        return
    nums = np.frombuffer(groups, np.int32, stop)[start:].astype(np.int64)
    tf = np.frombuffer(tfs, tfs.typecode, stop)[start:].astype(np.int64)
    codes = np.where((tf >= 1) & (tf < 3), tf, 3)  # a frequency below 1: the list's
    at = nums >> 2
    lo = int(at[0])
    # Disjoint bits: their sum per byte is their union (bincount's float sums are exact).
    add = np.bincount(at - lo, weights=codes << ((nums & 3) << 1))
    bits[lo : lo + len(add)] |= add.astype(np.uint8)
    del nums, tf, codes  # release the buffer exports at once


def dense_make(
    groups: array[int],
    tfs: array[int],
    capacity: int,
    upto: int,
    zeros: Callable[[int, Any], Any] = np.zeros,
) -> tuple[Any, int, int]:
    """A term's ``dense`` (``_Term.dense``) for the groups below ``upto`` of its list,
    room for ``capacity`` groups (``upto`` at most), its array made by ``zeros`` (as
    ``np.zeros``; the index's ``kernels.HugeSlab``). O(capacity / 4 + postings)."""
    bits = zeros((capacity + 3) // 4, np.uint8)
    dpos = int(np.searchsorted(np.frombuffer(groups, np.int32, len(groups)), upto))
    dense_fill(bits, groups, tfs, 0, dpos)
    return bits, upto, dpos


def _nums(groups: array[int], start: int, end: int) -> Any:
    """``groups[start:end]`` as a new numpy array of ``intp`` (fancy indexing with
    ``intp`` is about twice as fast as with int32), holding no buffer export."""
    return np.frombuffer(groups, np.int32, end)[start:].astype(np.intp)


def _tfs(tfs: array[int], start: int, end: int) -> Any:
    """``tfs[start:end]`` as a new numpy array of float64, holding no buffer export."""
    return np.frombuffer(tfs, tfs.typecode, end)[start:].astype(np.float64)


def _lookup(groups: array[int], tfs: array[int], n: int, nums: Any) -> tuple[Any, Any]:
    """For the sorted group numbers ``nums``: which of them are among the first ``n``
    postings (a mask) and their term frequencies there (float64). O(len(nums) log n)."""
    gv = np.frombuffer(groups, np.int32, n)
    idx = np.searchsorted(gv, nums)
    np.minimum(idx, n - 1, out=idx)
    hit = gv[idx] == nums
    tf = np.frombuffer(tfs, tfs.typecode, n)[idx[hit]].astype(np.float64)
    del gv  # release the buffer exports before the caller yields
    return hit, tf
