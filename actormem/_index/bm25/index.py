"""The BM25 index: storage and maintenance of the posting lists (owner side).

The owner adds, retires and purges records here and trims the change log; readers get
the statistics of their snapshot here and run the top-k in
:class:`~.search.MaxScoreSearch`. See the package documentation of
:mod:`actormem._index.bm25` for the theory of operation.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Generator, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from ..._record import NEVER, Record
from ..._util import NoPublicConstructor
from .. import kernels
from ..entrycols import compiled_columns
from ..scoring import Accept, ReadView, ScratchPool
from . import knobs
from .changelog import ChangeLog
from .postings import (
    _EXACT_CODES,
    _NO_RECS,
    _NO_SEQ32,
    _NO_TERMS,
    _TF_BITS,
    _TF_CAP,
    _doc_key,
    _Group,
    _pool_code,
    _Recs,
    _recs,
    _recs_in,
    _seq,
    _Term,
    _TermPool,
    dense_fill,
    dense_make,
    first_seq_array,
    first_seq_floor,
    length_code,
    length_codes,
)
from .search import MaxScoreSearch

if TYPE_CHECKING:
    from .scorer import BM25Scorer

__all__ = ["BM25Index"]


#: The machine's byte order is little-endian (``BM25Index._set_terms`` reads the bytes
#: of the packed terms).
_LITTLE = sys.byteorder == "little"


#: Postings from which a list's group numbers (int32) fill a whole 2 MiB page.
_HUGE_POSTINGS = kernels.HUGE_PAGE_MIN // 4


def _advise_postings(advised: dict[int, int], term: _Term) -> None:
    """Advise ``term``'s posting arrays (group numbers, frequencies) as huge pages
    (``kernels.huge_advise``) unless ``advised`` (term number to the address of its
    group numbers when last advised) shows them advised where they are now: an append
    that reallocated them moved them to memory not advised yet (knobs._HUGE_PAGES).
    O(1)."""
    groups = term.groups
    at = groups.buffer_info()[0]
    if advised.get(term.num) != at:
        advised[term.num] = at
        kernels.huge_advise(groups)
        kernels.huge_advise(term.tfs)


def _untrack(group: _Group) -> None:
    """Take ``group`` and its term array (if it has one of its own) out of the cyclic
    collector's lists (``knobs._UNTRACK``, with the compiled kernels): neither is ever
    part of a reference cycle (a group holds its records, an int array and ints; nothing
    it reaches refers to a group), so a full collection need not walk two objects per
    text. O(1)."""
    if knobs._UNTRACK and kernels.gc_untrack is not None:
        kernels.gc_untrack([group], _Group)
        if group.terms is not _NO_TERMS:
            kernels.gc_untrack([group.terms], array)


class _DocMap:
    """Document -> group number with group columns and the word-overlap core's
    ``GroupTable`` (``knobs._GROUP_TABLE``): an untagged text's number in the table,
    which keeps no text and no int (it reads the text back from the group's slot in the
    index's group table: its one record's ``entry.memory`` or its ``_Recs``'s
    ``text``), a tagged document's (a tuple) in a dict. The mapping methods the index
    uses, each O(1) (O(len(text)) for an uncached hash or a text compared)."""

    __slots__ = ("tagged", "texts")

    def __init__(self, texts: Any) -> None:
        self.texts = texts
        self.tagged: dict[object, int] = {}

    def get(self, key: object) -> int | None:
        if type(key) is tuple:
            return self.tagged.get(key)
        return self.texts.get(key)  # type: ignore[no-any-return]

    def __getitem__(self, key: object) -> int:
        return self.tagged[key] if type(key) is tuple else self.texts[key]

    def __setitem__(self, key: object, num: int) -> None:
        if type(key) is tuple:
            self.tagged[key] = num
        else:
            self.texts[key] = num

    def __delitem__(self, key: object) -> None:
        if type(key) is tuple:
            del self.tagged[key]
        else:
            del self.texts[key]

    def __len__(self) -> int:
        return len(self.texts) + len(self.tagged)

    def values(self) -> list[int]:
        return [*self.texts.values(), *self.tagged.values()]

    def items(self) -> list[tuple[object, int]]:
        return [*self.texts.items(), *self.tagged.items()]


def _doc_map(table: list[Any]) -> Any:
    """A new, empty document -> group number map over the group ``table`` (columns):
    a :class:`_DocMap` with ``knobs._GROUP_TABLE`` and the core's ``GroupTable``,
    else a dict. O(1)."""
    make = getattr(kernels.wo_core(), "GroupTable", None) if knobs._GROUP_TABLE else None
    if make is None or not compiled_columns():
        return {}
    slots = Record.__dict__["cols"], Record.__dict__["slot"], _Recs.__dict__["text"]
    return _DocMap(make(table, *slots))


class BM25Index(metaclass=NoPublicConstructor):
    """The owner-written, snapshot-read index of a :class:`BM25Scorer`.

    Built by :meth:`BM25Scorer.make_index`. ``add``, ``retire``, ``purge`` and ``vacuum``
    are for the owner task only; ``top_k``, ``top_k_terms`` and their sliced forms
    ``top_k_steps``/``top_k_terms_steps`` run in any reader (they only fill caches that
    do not depend on the snapshot). ``T`` below is the number of distinct terms of the
    record's document.

    The change log trims itself: ``purge(rec)`` tells the index that no live snapshot
    reads below ``rec.died`` (the engine purges only records dead at or below its
    horizon), and :meth:`vacuum` says so explicitly, so the log holds about the changes
    since the oldest live snapshot. With neither (a static corpus) it keeps one entry
    per add and retire. Trimming too far is never wrong: a snapshot older than the log
    counts the visible postings instead.
    """

    def __init__(self, scorer: BM25Scorer) -> None:
        self._scorer = scorer
        #: Document (text, or text and tags) -> its group. A record's group is found by
        #: its document (:meth:`_indexed`), not kept per record: a dict slot (~45 bytes
        #: a record at 1M) less.
        #: With ``knobs._GROUP_COLUMNS`` the value is the group's number, not a ``_Group``
        #: (a group is then its number throughout: :meth:`_num`, :meth:`_recs_of`).
        self._groups: Any = {}
        self._retired: set[Record] = set()
        #: Purged records still in their group's ``recs`` (which they leave lazily).
        self._gone: set[Record] = set()
        self._terms: dict[str, _Term] = {}
        #: Every term ever made, by number; None once deleted (numbers are not reused).
        self._term_table: list[_Term | None] = []
        #: Every group ever made, by number; None once all its records are purged
        #: (numbers are never reused: readers may still hold postings naming them).
        #: With ``knobs._GROUP_COLUMNS`` a slot holds the group's records themselves: its
        #: one record or a list by seq (``postings._recs_in`` reads either layout).
        self._table: list[Any] = []
        #: Document length by group number (int32; replaced, never shrunk, when it grows).
        self._lengths: Any = np.zeros(knobs._CHUNK, np.int32)
        #: 1 for a group in the table, 0 once purged (uint8, by number; owner only).
        self._alive: Any = np.zeros(knobs._CHUNK, np.uint8)
        #: The lowest seq a group's records ever had, by group number (int64; replaced
        #: with ``_lengths`` when it grows, ``_NO_SEQ`` where unknown): never above a seq
        #: in its ``recs``, so the core's heap can pass over a group tying with its worst
        #: record without reading the group's records (``knobs._TIE_SKIP``).
        #: (int32 with ``knobs._FIRST_SEQ32``: each seq as ``first_seq_floor`` keeps it.)
        self._first32 = bool(knobs._FIRST_SEQ32)
        self._first_seq: Any = first_seq_array(knobs._CHUNK, self._first32, False)
        #: Each length's one-byte code (``postings.length_code``; uint8, by group number,
        #: replaced with ``_lengths``): the core's walk reads these, 1 MB at a million
        #: groups where the lengths take 4 MB (``knobs._LENGTH_CODES``).
        self._codes: Any = np.zeros(knobs._CHUNK, np.uint8)
        #: The group count at which the owner next brings the terms' dense frequency
        #: arrays up to date (:meth:`_dense_refresh`, ``knobs._DENSE_TFS``).
        self._dense_next = 0
        #: The long posting lists' arrays advised as huge pages: their address then
        #: (``_advise_postings``; advised again once a reallocation moved them).
        self._huge_at: dict[int, int] = {}
        #: Where the dense frequency arrays are carved from (``kernels.HugeSlab``).
        self._dense_slab = kernels.HugeSlab()
        #: Retrieves' per-group scratch arrays, of ``len(_lengths)`` elements.
        self._scratch = ScratchPool()
        #: Records not retired, and the sum of their lengths: N and total at the newest version.
        self._n = 0
        self._total = 0
        #: The changes older snapshots undo for their statistics.
        self._changes = ChangeLog()
        #: Every group's packed terms by group number (``knobs._TERM_POOL``), or None:
        #: each ``_Group.terms`` is its own array (the layout before).
        self._pool: _TermPool | None = _TermPool() if knobs._TERM_POOL else None
        #: No ``_Group`` objects (``knobs._GROUP_COLUMNS``, with the pool only): a group
        #: is its number, its records are its table slot, and ``_dead`` holds by number
        #: the purged records still in a group's list (groups with none are absent).
        self._cols = self._pool is not None and knobs._GROUP_COLUMNS
        self._dead: dict[int, int] = {}
        if self._cols:  # numbers: no int objects, none kept alive by the log
            self._groups = _doc_map(self._table)
            self._changes.groups = array("q")

    def _num(self, group: Any) -> int:
        """The number of ``group`` (a ``_Group``, or its number with columns). O(1)."""
        return group if self._cols else group.num  # type: ignore[no-any-return]

    def _recs_of(self, group: Any) -> list[Record] | tuple[Record]:
        """The records of the live ``group``, by seq (purged ones included until its
        list is rebuilt). O(1)."""
        return _recs_in(self._table[group]) if self._cols else group.recs

    def _dead_of(self, group: Any) -> int:
        """The purged records still in the live ``group``'s list. O(1)."""
        return self._dead.get(group, 0) if self._cols else group.dead

    def _unpurged(self, group: Any) -> int:
        """The live ``group``'s records not purged. O(1)."""
        return len(self._recs_of(group)) - self._dead_of(group)

    def _terms_at(self, num: int) -> array[int]:
        """:meth:`_terms_of` of the live group number ``num``. O(T)."""
        return self._terms_of(num if self._cols else self._table[num])

    def _terms_of(self, group: Any) -> array[int]:
        """``group``'s packed terms, ``term number << _TF_BITS | tf``, where a ``tf`` of
        ``_TF_CAP`` says "look it up in the term's posting list": its own array
        (``min(tf, _TF_CAP)``), or from the pool, which keeps no frequency, a new array
        with every ``tf`` ``_TF_CAP``. O(T)."""
        pool = self._pool
        if pool is None:
            return group.terms  # type: ignore[no-any-return]
        code = "i" if len(self._term_table) <= knobs._NARROW else "q"
        return array(code, [t << _TF_BITS | _TF_CAP for t in pool.of(self._num(group))])

    def _nums_of(self, group: Any) -> list[int] | array[int]:
        """``group``'s term numbers, in first-occurrence order. O(T)."""
        pool = self._pool
        if pool is None:
            return [t >> _TF_BITS for t in group.terms]
        return pool.of(self._num(group))

    @property
    def scorer(self) -> BM25Scorer:
        """The configuration this index was made from."""
        return self._scorer

    def document_terms(self, rec: Record) -> Mapping[str, int]:
        """``{term: tf}`` of ``rec``'s document (a new dict). O(T log postings).

        Raises:
            KeyError: ``rec`` is not in the index (never added, or purged).
        """
        group = self._group_or_raise(rec)
        num = self._num(group)
        out = {}
        for t in self._terms_of(group):
            obj = self._term_table[t >> _TF_BITS]
            assert obj is not None  # the group's records keep its terms
            tf = t & _TF_CAP
            out[obj.key] = tf if tf < _TF_CAP else obj.tfs[bisect_left(obj.groups, num)]
        return out

    def _indexed(self, rec: Record) -> Any:
        """``rec``'s group if ``rec`` is in the index (added, not purged), else None.
        O(len(text) for an uncached hash + log(records of the text))."""
        group = self._groups.get(_doc_key(rec))
        return None if group is None else self._in_group(group, rec)

    def _in_group(self, group: Any, rec: Record) -> Any:
        """``group`` if ``rec`` is one of its indexed records, else None.
        O(log(records of the group))."""
        if rec in self._gone:
            return None
        recs = self._recs_of(group)
        seq = rec.seq
        i = bisect_left(recs, seq, key=_seq)  # by seq; versions of one id share it
        while i < len(recs) and recs[i].seq == seq:
            if recs[i] is rec:
                return group
            i += 1
        return None

    def _group_or_raise(self, rec: Record) -> Any:
        """:meth:`_indexed`, raising ``KeyError`` for a record not in the index."""
        group = self._indexed(rec)
        if group is None:
            raise KeyError(rec)
        return group

    def _records(self) -> list[Record]:
        """Every record in the index (added, not purged). O(records); for checks."""
        gone = self._gone
        recs_of = self._recs_of
        return [rec for g in self._groups.values() for rec in recs_of(g) if rec not in gone]

    def _length(self, group: Any) -> int:
        return int(self._lengths[self._num(group)])

    def tokenize(self, text: str) -> list[str]:
        """The scorer's tokenizer applied to ``text``. O(len(text))."""
        return self._scorer.tokenizer(text)

    def _new_group(self, key: object, rec: Record) -> Any:
        entry = rec.entry
        tokenize = self._scorer.tokenizer
        terms = tokenize(entry.memory)
        if entry.tags:
            terms = list(terms)
            for tag in entry.tags:
                terms.extend(tokenize(tag))
        table = self._table
        num = len(table)
        group: Any
        if self._cols:  # the number is the group; its slot and map entry come in add()
            group = num
            table.append(_NO_RECS)
        else:
            group = self._groups[key] = _Group(num)
            table.append(group)
        lengths = self._lengths
        if num >= len(lengths):  # replace, never resize: readers may hold the old one
            huge = knobs._HUGE_PAGES  # read at random: huge pages (kernels.huge_zeros)
            grown = kernels.huge_zeros(2 * len(lengths), np.int32, huge)
            grown[: len(lengths)] = lengths
            lengths = self._lengths = grown
            alive = kernels.huge_zeros(len(grown), np.uint8, huge)
            alive[: len(self._alive)] = self._alive
            self._alive = alive
            first = first_seq_array(len(grown), self._first32, huge)
            first[: len(self._first_seq)] = self._first_seq
            self._first_seq = first
            codes = kernels.huge_zeros(len(grown), np.uint8, huge)
            codes[: len(self._codes)] = self._codes
            self._codes = codes
            self._scratch.clear()  # spares of the old capacity
        length = lengths[num] = len(terms)
        self._codes[num] = length if length < _EXACT_CODES else length_code(length)
        self._alive[num] = 1
        term_table = self._term_table
        if kernels.bm25_core_active():  # the same loop in C (kernels.py)
            if type(terms) is not list:
                terms = list(terms)
            nums = kernels.bm25_add_terms(terms, self._terms, term_table, num, _Term)
            self._set_terms(group, nums)
            if num >= self._dense_next:
                self._dense_refresh()
            return group
        get = self._terms.get
        nums = []
        for term, tf in Counter(terms).items():
            obj = get(term)
            if obj is None:
                obj = self._terms[term] = _Term(term, len(term_table))
                term_table.append(obj)
            obj.groups.append(num)
            if tf > 255 and obj.tfs.typecode == "B":
                obj.tfs = array("i", obj.tfs)  # replaced: readers may hold the old one
            obj.tfs.append(tf)
            obj.df += 1  # the record being added
            nums.append(obj.num << _TF_BITS | min(tf, _TF_CAP))
        self._set_terms(group, nums)
        if num >= self._dense_next:
            self._dense_refresh()
        return group

    def _set_terms(self, group: Any, nums: list[int]) -> None:
        """Keep the new ``group``'s packed terms ``nums`` (in the pool, or as its own
        array, exactly sized) and take it out of the collector's lists. O(T)."""
        # int64 only once term numbers no longer fit in int32 with a tf.
        wide = len(self._term_table) > knobs._NARROW
        pool = self._pool
        if pool is None:
            group.terms = array("q" if wide else "i", nums)
        else:  # the term numbers alone: the posting lists have the frequencies
            data = pool.data
            if len(self._term_table) > 0x10000 and data.typecode == "H" or wide:
                data = pool.widen(_pool_code(len(self._term_table)))
            if data.typecode == "H" and _LITTLE:
                # Each packed term (below 2**24 here) as 4 bytes; its number is bytes
                # 1-2 (little-endian): a quarter of the time of a shift per term.
                raw = array("I", nums).tobytes()
                out = bytearray(len(raw) >> 1)
                out[0::2] = raw[1::4]
                out[1::2] = raw[2::4]
                data.frombytes(out)
            else:
                data.extend([t >> _TF_BITS for t in nums])
            pool.ended(len(data))
        if not self._cols:
            _untrack(group)

    def _dense_refresh(self, size: int | None = None, terms: Iterable[_Term] | None = None) -> None:
        """Bring the long lists' dense frequency arrays (``_Term.dense``) up to every
        group made so far (owner only, between two adds; ``knobs._DENSE_TFS``): a list
        of at least ``_DENSE_MIN`` postings and one group in ``_DENSE_RATIO`` gets one,
        one below half of both loses it, the others are extended by their postings
        since (in place, at groups no published ``upto`` covers; a new array once the
        lengths' capacity outgrew it). Every ``_DENSE_STEP`` new groups, and after a
        restore. ``size``: the count of groups (None: the group table's; a restore
        prepared ahead of its rows gives it before the table is made); ``terms``: those
        to refresh (None: every one; a restore prepared ahead refreshes them a few at a
        time). O(terms + postings since the last refresh + the new arrays' groups).
        """
        size = len(self._table) if size is None else size
        self._dense_next = size + knobs._DENSE_STEP
        if not knobs._DENSE_TFS:
            if knobs._HUGE_PAGES:
                for term in self._terms.values() if terms is None else terms:
                    if len(term.groups) >= _HUGE_POSTINGS:
                        _advise_postings(self._huge_at, term)
            return
        capacity = len(self._lengths)
        floor, ratio = knobs._DENSE_MIN, knobs._DENSE_RATIO
        huge = self._huge_at if knobs._HUGE_PAGES else None
        # The dense arrays share huge pages (256 KB each at 1M groups; knobs._HUGE_PAGES).
        zeros = partial(self._dense_slab.zeros, huge=huge is not None)
        for term in self._terms.values() if terms is None else terms:
            count = len(term.groups)
            if huge is not None and count >= _HUGE_POSTINGS:
                _advise_postings(huge, term)
            dense = term.dense
            if dense is None:
                if count >= floor and count * ratio >= size:
                    term.dense = dense_make(term.groups, term.tfs, capacity, size, zeros)
                continue
            if 2 * count < floor or 2 * count * ratio < size:
                term.dense = None  # readers may hold it still
                continue
            bits, upto, dpos = dense
            if 4 * len(bits) < capacity:  # grown: a new array, the old one as it is
                grown = zeros((capacity + 3) // 4, np.uint8)
                grown[: len(bits)] = bits
                bits = grown
            dense_fill(bits, term.groups, term.tfs, dpos, count)
            term.dense = (bits, size, count)

    # -- owner side ---------------------------------------------------------------------

    def add(self, rec: Record) -> None:
        """Index ``rec``, visible from ``rec.born`` on (owner only).

        Runtime complexity: O(T), without tokenizing, when an un-purged record with the
        same text and tags is indexed (O(records of that text) instead if ``rec.seq`` is
        below theirs, as after an upsert); O(len(text) + T) for a new text; plus
        O(log entries) if ``rec.born`` is older than the newest change.

        Raises:
            ValueError: ``rec`` is already in the index.
        """
        entry = rec.entry
        tags = entry.tags
        key: object = (entry.memory, tags) if tags else entry.memory
        group = self._groups.get(key)
        if group is not None and self._in_group(group, rec) is not None:
            raise ValueError(f"{rec!r} is already indexed")
        fresh = group is None
        if group is None:
            group = self._new_group(key, rec)  # counts the record in each term's df
        else:
            term_table = self._term_table
            pool = self._pool
            if pool is None:
                for t in group.terms:
                    term_table[t >> _TF_BITS].df += 1  # live: not None
            else:
                for t in pool.of(self._num(group)):
                    term_table[t].df += 1  # type: ignore[union-attr]  # live: not None
        cols = self._cols
        num = self._num(group)
        recs = self._table[num] if cols else group._recs
        if isinstance(recs, list) and not recs:
            # Most texts have one record: kept alone in the slot, where a list of one
            # took 80 bytes (its object and its item buffer); a second makes a list.
            if cols:
                self._table[num] = rec if knobs._SINGLE_RECORD else _recs([rec], entry.memory)
                if fresh:  # the slot has the text now: the table reads it back
                    self._groups[key] = num
            else:
                group._recs = rec if knobs._SINGLE_RECORD else [rec]
            self._first_seq[num] = first_seq_floor(rec.seq) if self._first32 else rec.seq
        else:
            if isinstance(recs, list):
                grown = recs
            else:
                grown = _recs([recs], entry.memory) if cols else [recs]
            if grown[-1].seq > rec.seq:
                insort(grown, rec, key=_seq)  # an upsert keeps its older seq
                seq = first_seq_floor(rec.seq) if self._first32 else rec.seq
                if seq < self._first_seq[num]:
                    self._first_seq[num] = seq
            else:
                grown.append(rec)
            if cols:
                self._table[num] = grown
            else:
                group.recs = grown
        self._n += 1
        self._total += int(self._lengths[num])
        self._changes.record(rec.born, group, 1)
        if rec.died != NEVER:  # stored already dead: unusual but consistent
            self.retire(rec)

    def retire(self, rec: Record) -> None:
        """Note that ``rec`` is invisible from ``rec.died`` on (owner only).

        Older snapshots keep seeing ``rec`` and the statistics that include it.

        Runtime complexity: O(T) (plus O(log entries) if ``rec.died`` is older than the
        newest change).

        Raises:
            KeyError: ``rec`` is not in the index.
            ValueError: ``rec`` was retired already or ``rec.died`` is not set.
        """
        group = self._group_or_raise(rec)
        if rec in self._retired or rec.died == NEVER:
            raise ValueError(f"{rec!r} is retired already or has no death version")
        self._retired.add(rec)
        term_table = self._term_table
        pool = self._pool
        if pool is None:
            for t in group.terms:
                term_table[t >> _TF_BITS].df -= 1  # live: not None
        else:
            for t in pool.of(self._num(group)):
                term_table[t].df -= 1  # type: ignore[union-attr]  # live: not None
        self._n -= 1
        self._total -= int(self._lengths[self._num(group)])
        self._changes.record(rec.died, group, -1)

    def purge(self, rec: Record) -> None:
        """Drop ``rec`` for good: no live snapshot can see it (owner only).

        Runtime complexity: amortized O(1), plus O(T) when the last record of its text
        goes: a text's record list, and a posting list, is compacted, in time linear in
        its length, once half of it is purged. Trimming the change log costs O(entries
        kept) and happens only once at least half of the log is below the horizon.

        Raises:
            KeyError: ``rec`` is not in the index.
            ValueError: ``rec`` was not retired first.
        """
        if rec not in self._retired:  # retired: in the index, not purged
            self._group_or_raise(rec)
            raise ValueError(f"{rec!r} must be retired before it is purged")
        group = self._group_or_raise(rec)
        self._retired.discard(rec)
        cols = self._cols
        num = self._num(group)
        if self._unpurged(group) == 1:  # rec is the last one unpurged
            del self._groups[_doc_key(rec)]
            if self._dead_of(group):
                self._gone.difference_update(self._recs_of(group))
            self._table[num] = None
            self._alive[num] = 0
            if cols:
                self._dead.pop(num, None)
            else:
                group.recs = []
                group.dead = 0
            term_table = self._term_table
            nums = self._nums_of(group)
            if self._pool is not None:
                self._pool.purged(num, self._alive)  # may compact: read first
            for t in nums:
                term = term_table[t]
                assert term is not None  # deleted only once its last group is purged
                term.dead += 1
                if term.dead == len(term.groups):
                    # No live snapshot sees any record with this term: df is 0 for all.
                    del self._terms[term.key]
                    term_table[t] = None
                elif 2 * term.dead > len(term.groups):
                    term.compact(self._alive)
        else:
            dead = self._dead_of(group) + 1
            gone = self._gone
            gone.add(rec)
            recs = self._recs_of(group)
            if 2 * dead > len(recs):  # a new list: readers may hold the old one
                kept = [r for r in recs if r not in gone]
                if cols:
                    kept = _recs(kept, rec.cols.text(rec.slot))
                gone.difference_update(recs)
                dead = 0
                if cols:
                    self._table[num] = kept
                else:
                    group.recs = kept
            if not cols:
                group.dead = dead
            elif dead:
                self._dead[num] = dead
            else:
                self._dead.pop(num, None)
        self._changes.purged(rec.died)

    def vacuum(self, oldest: int) -> None:
        """Forget changes that only snapshots older than ``oldest`` need to undo.

        The owner calls it with the version of its oldest live snapshot (or the current
        version when none is open), e.g. whenever it purges. A snapshot older than
        ``oldest`` that queries anyway gets exact results, computed more slowly.

        Runtime complexity: O(log L + kept) for a log of L entries of which ``kept`` are
        newer than ``oldest``.
        """
        self._changes.vacuum(oldest)

    # -- reader side --------------------------------------------------------------------

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """The ``limit`` best records for ``query`` visible in ``view`` and admitted by
        ``accept``, best first, ties by ``seq`` ascending, as ``(score, record)``.

        Each query term is weighted by its number of occurrences in the tokenized query.
        See :meth:`top_k_terms` for the complexity.
        """
        weights = Counter(self._scorer.tokenizer(query))
        return MaxScoreSearch(self, True).drained(view, weights, limit, accept)

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k` in slices: a generator that yields None after every bounded
        chunk of work (at most ``_CHUNK`` postings or candidates) and returns what
        :meth:`top_k` returns. The owner may write between two steps (see
        ``docs/slicing_protocol``): the result is that of ``view``'s version."""
        return self.top_k_terms_steps(view, Counter(self._scorer.tokenizer(query)), limit, accept)

    def statistics(
        self, view: ReadView, terms: Iterable[str] = ()
    ) -> tuple[int, float, dict[str, int]]:
        """``(N, avgdl, {term: df})`` as of ``view.version``: the corpus statistics BM25
        uses. O(|terms|) for the newest version, O(C * T) for C log entries newer
        than the view, or O(records + their postings) for a version older than the log
        (trimmed by a vacuum past it)."""
        wanted = list(dict.fromkeys(terms))
        n, total, dfs = self._statistics(view, wanted)
        avgdl = total / n if n else 0.0
        return n, avgdl, dfs

    def _statistics(self, view: ReadView, terms: list[str]) -> tuple[int, int, dict[str, int]]:
        """N, total length and ``{term: df}`` (0 for unknown terms) at ``view.version``."""
        index_terms = self._terms
        dfs: dict[str, int] = {}
        for term in terms:
            obj = index_terms.get(term)
            dfs[term] = obj.df if obj is not None else 0
        n, total = self._n, self._total
        version = view.version
        changes = self._changes
        versions = changes.versions
        lengths = self._lengths
        if version >= changes.floor:
            if not versions or versions[-1] <= version:
                return n, total, dfs  # the newest statistics: the common case
            # Undo the changes newer than the view.
            wanted = {index_terms[t].num: t for t in terms if t in index_terms}
            groups, deltas = changes.groups, changes.deltas
            for i in range(bisect_right(versions, version), len(versions)):
                group, delta = groups[i], deltas[i]
                n -= delta
                total -= delta * int(lengths[self._num(group)])
                if wanted:
                    for t in self._nums_of(group):
                        if t in wanted:
                            dfs[wanted[t]] -= delta
            return n, total, dfs
        # The log was trimmed past this version: count what the view sees.
        visible = view.visible
        gone = self._gone
        table = self._table
        n = total = 0
        for group in self._groups.values():
            for rec in self._recs_of(group):
                if rec not in gone and visible(rec):
                    n += 1
                    total += int(lengths[self._num(group)])
        for term in terms:
            obj = index_terms.get(term)
            if obj is not None:
                count = 0
                for num in obj.groups:
                    holder = table[num]
                    if holder is not None:
                        count += sum(
                            1 for rec in _recs_in(holder) if rec not in gone and visible(rec)
                        )
                dfs[term] = count
        return n, total, dfs

    def top_k_terms(
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """Like :meth:`top_k` for an already tokenized, weighted query.

        Args:
            view: The reader's snapshot.
            weights: ``{term: q_t}``, weights > 0 (others are ignored); the terms' order
                is the summation order of a score.
            limit: Number of results wanted (>= 0).
            accept: Predicate on records, or ``None``.

        Returns:
            Up to ``limit`` ``(score, record)`` pairs, score descending then ``seq``
            ascending, of the visible, accepted records that have a query term.

        Runtime complexity: MaxScore over distinct texts (groups), vectorised with
        numpy: O(q log q + C * T + P + R * q log L) plus O(log limit) per record that
        enters the result heap, where ``q`` is the number of query terms, ``C`` the log
        entries newer than the view (none for the newest snapshot), ``P`` the postings
        accumulated (the *essential* terms, the rarest, until the bounds of the other
        terms sum below a lower bound on the k-th best score), ``R`` the candidates that
        can still reach it, looked up (binary search, ``L`` the list length) in each
        other term's list and pruned term by term, and then scored exactly. The lower
        bound costs O(q log L) per group that rises among the ``limit`` best partial
        scores. With a recency or prior weight, every visible record of a surviving
        text is scored. A reader also extends the cached maximum saturations of its
        terms: O(postings added since), or O(postings) once the average length drifted
        by more than 2%. With the compiled core the driver is in C (MaxScore with a
        cost-aware split, term at a time over windows of groups, see the package
        documentation): the same result, O(q log q) per step to re-take the lists and
        split the terms, the postings of the essential (short) lists, and per group
        whose partial score can still reach the k-th score one lookup (galloping search)
        per non-essential term until it cannot.
        """
        return MaxScoreSearch(self, True).drained(view, weights, limit, accept)

    def top_k_terms_steps(
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k_terms` in slices (see :meth:`top_k_steps`); the search itself
        is :class:`~.search.MaxScoreSearch`."""
        return (yield from MaxScoreSearch(self).top_k_terms_steps(view, weights, limit, accept))

    # -- test access to the change log -----------------------------------------------

    @property
    def _log_versions(self) -> list[int]:
        return self._changes.versions

    @property
    def _vacuum_slack(self) -> int:
        return self._changes.slack

    @_vacuum_slack.setter
    def _vacuum_slack(self, slack: int) -> None:
        self._changes.slack = slack

    # -- checks -------------------------------------------------------------------------

    def _check(self, live: Iterable[Record]) -> None:
        """Assert every invariant; ``live`` is every record not yet purged.

        Runtime complexity: O(total postings + records + log entries).
        """
        live_set = set(live)
        assert live_set == set(self._records()), "indexed records differ from the live ones"
        assert all(self._indexed(rec) is not None for rec in live_set)
        # a purged record's slot in its state's entry store is released: not its text
        assert not (self._gone & live_set), "a purged record is live"
        assert self._gone == {
            rec for g in self._groups.values() for rec in self._recs_of(g) if rec not in live_set
        }, "purged records out of date"
        assert self._retired == {rec for rec in live_set if rec.died != NEVER}, (
            "retired set out of date"
        )
        tokenize = self._scorer.tokenizer
        holders: dict[str, dict[int, int]] = {}
        df: Counter[str] = Counter()
        n = total = 0
        groups = {self._group_or_raise(rec) for rec in live_set}
        assert groups == set(self._groups.values()), "groups differ from the live records'"
        table = self._table
        assert {num for num, group in enumerate(table) if group is not None} == {
            self._num(group) for group in groups
        }, "group table out of date"
        if self._cols:
            assert all(type(g) is int for g in groups), "a group is its number"
            texts = getattr(self._groups, "texts", None)
            if texts is not None:
                texts._check()
                assert all(type(k) is tuple for k in self._groups.tagged)
            assert set(self._dead) <= {self._num(g) for g in groups}, "dead counts of purged groups"
            assert all(d > 0 for d in self._dead.values()), "a zero dead count kept"
        else:
            assert not self._dead
        alive = self._alive[: len(table)].tolist()
        assert alive == [int(group is not None) for group in table], "alive marks out of date"
        assert not self._alive[len(table) :].any()
        if self._pool is not None:
            self._pool._check(len(table), self._alive)
        assert len(self._first_seq) == len(self._lengths) == len(self._alive) == len(self._codes)
        assert self._first_seq.dtype == (np.int32 if self._first32 else np.int64), "first seqs"
        size = len(table)
        assert (self._codes[:size] == length_codes(self._lengths[:size])).all(), "codes out of date"
        for group in groups:
            num = self._num(group)
            recs = self._recs_of(group)
            # (a purged record's text is not read: its entry store slot is released)
            alive = [rec for rec in recs if rec not in self._gone]
            if self._cols:
                assert self._groups[_doc_key(alive[-1])] == num
                assert table[num] is (recs if type(recs) is _Recs else recs[0])
                assert type(recs) is _Recs or (type(recs) is tuple and knobs._SINGLE_RECORD)
                assert type(recs) is tuple or recs.text == alive[0].entry.memory  # type: ignore[union-attr]
            else:
                assert self._groups[_doc_key(alive[-1])] is group
                assert table[num] is group
            assert all(x.seq <= y.seq for x, y in zip(recs, recs[1:], strict=False)), (
                "records out of seq order"
            )
            assert self._unpurged(group) == len(alive) > 0
            assert self._dead_of(group) == len(recs) - len(alive)
            first = int(self._first_seq[num])  # int32's lowest: unknown (any seq below)
            assert first <= recs[0].seq or (self._first32 and first == _NO_SEQ32), (
                "first seq above a record's"
            )
            assert 2 * self._dead_of(group) <= len(recs)
            entry = alive[0].entry
            terms = list(tokenize(entry.memory))
            for tag in entry.tags:
                terms += tokenize(tag)
            counts = Counter(terms)
            packed = self._terms_of(group)
            nums = list(self._nums_of(group))
            assert [t >> _TF_BITS for t in packed] == nums
            assert [self._term_table[t].key for t in nums] == list(counts), "stale terms"  # type: ignore[union-attr]
            if self._pool is None:
                assert [t & _TF_CAP for t in packed] == [min(c, _TF_CAP) for c in counts.values()]
            assert packed.typecode in "iq"
            assert self._cols or (group.terms is _NO_TERMS) == (self._pool is not None)
            assert dict(self.document_terms(alive[0])) == counts, "stale term frequencies"
            length = int(self._lengths[num])
            assert length == len(terms)
            assert [self._terms[t].num for t in counts] == nums
            for rec in alive:
                assert self._indexed(rec) == group if self._cols else self._indexed(rec) is group
                got = rec.entry
                assert (got.memory, got.tags) == (entry.memory, entry.tags)
                if rec.died == NEVER:
                    n += 1
                    total += length
                    df.update(counts.keys())
            for t, tf in counts.items():
                holders.setdefault(t, {})[num] = tf
        assert (n, total) == (self._n, self._total), "N or total length out of date"
        assert set(holders) == set(self._terms), "terms differ from the live documents'"
        assert sum(t is not None for t in self._term_table) == len(self._terms)
        k1, b = self._scorer.k1, self._scorer.b
        for name, term in self._terms.items():
            nums = list(term.groups)
            assert len(nums) == len(term.tfs)
            assert self._term_table[term.num] is term, f"{name!r}: not in the term table"
            assert term.tfs.typecode in "Bi"
            assert term.groups.typecode == "i"
            assert all(x < y for x, y in zip(nums, nums[1:], strict=False)), f"{name!r}: order"
            listed = {num: tf for num, tf in zip(nums, term.tfs, strict=True) if table[num]}
            assert listed == holders[name], f"{name!r}: posting list misses texts"
            assert term.dead == len(nums) - len(listed)
            assert term.dead < len(nums)
            assert 2 * term.dead <= len(nums)
            assert term.df == df[name], f"{name!r}: df out of date"
            assert term.seen <= len(nums)
            if term.seen:
                k_part = k1 * b / term.ref
                top = max(
                    tf / (tf + (k1 * (1.0 - b) + k_part * int(self._lengths[num])))
                    for num, tf in zip(nums[: term.seen], term.tfs, strict=False)
                )
                assert term.top == top, f"{name!r}: stale impact bound"
            if term.dense is not None:
                bits, upto, dpos = term.dense
                assert 0 <= dpos <= len(nums), f"{name!r}: dense dpos"
                assert upto <= 4 * len(bits), f"{name!r}: dense upto"
                assert all(num < upto for num in nums[:dpos]), f"{name!r}: dense dpos"
                assert all(num >= upto for num in nums[dpos:]), f"{name!r}: dense dpos"
                want = np.zeros(upto, np.int64)
                want[nums[:dpos]] = np.minimum(list(term.tfs)[:dpos], 3)
                got = (bits[np.arange(upto) >> 2] >> ((np.arange(upto) & 3) << 1)) & 3
                assert (got == want).all(), f"{name!r}: dense frequencies out of date"
            size = kernels.BM25_BLOCK
            cached = term.blocks.tolist()
            assert term.blocks.typecode == "i"
            assert len(cached) % 2 == 0
            assert len(cached) // 2 <= len(nums) // size, f"{name!r}: blocks beyond the list"
            for k in range(len(cached) // 2):
                lo, hi = k * size, (k + 1) * size
                assert cached[2 * k] == max(term.tfs[lo:hi]), f"{name!r}: stale block bound"
                low = min(int(self._lengths[num]) for num in nums[lo:hi])
                assert cached[2 * k + 1] == low, f"{name!r}: stale block bound"
        self._changes._check()
