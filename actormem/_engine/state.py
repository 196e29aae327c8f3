"""The I/O-free state of one memory: entries, indexes, eviction order, versions.

Theory of operation
-------------------
:class:`MemoryState` is a plain class with no trio import. One owner applies every write
to it, in order; readers only ever read it through a :class:`~actormem._engine.snapshot.View`
taken at the *published* version.

Versions (multi-version concurrency control). Every write (store, delete, consolidate,
eviction, access bookkeeping) stamps its changes with ``self.version + 1``. A record
version is visible at ``v`` iff ``born <= v < died`` (see :mod:`actormem._record`).
``publish()`` makes everything up to the current version visible to new snapshots; the
owner calls it after each batch of requests (after the group commit, in durable mode), so
a snapshot never sees half of a batch.

Structures readers share (each only gains records invisible to existing snapshots, and
loses records only when no snapshot can see them):

* ``_by_id``: ``id.int`` -> newest record version; older versions hang off ``_prev`` for old
  snapshots. A deleted id keeps its dead record here until vacuumed.
* ``_by_relevance``: every unpurged record, ordered by ``(-relevance, seq, born)``: the
  order in which the word-overlap scorer tops up results, and the index of
  consolidation's prune. Its key is ``(-relevance, seq)`` packed into one int
  (:func:`_relevance_key_seq`; for relevance 1.0 the ``seq`` int itself: the
  Python record's own, no key object), or with the compiled record
  (:func:`_relevance_key_rec`, :data:`_REC_KEYS`) for relevance 1.0 the record itself,
  which orders against records and ints as its ``seq`` (no object at all), versions of
  one id (which share the key in the order) kept in the order of their births;
  ``_SEQ_KEYS`` off: ``(-relevance, seq, born)`` packed (:func:`_relevance_key`).
* the scorer's index (posting lists), via ``add``/``retire``/``purge``.

Structures only the owner reads:

* ``_evict``: live records ordered by eviction key ``(log2(relevance) + t / half_life,
  rec)`` with ``t`` the POSIX time of ``last_accessed`` or else ``created_at``, and
  records comparing by ``seq`` on equal floats; two sorted lists, ``_evict[False]`` for
  unvalidated records and ``_evict[True]`` for validated ones, so the key needs no
  ``validated`` field (a 2-tuple: 56 bytes, not 72). ``relevance * 0.5 ** (age /
  half_life)`` at any moment ``now`` equals ``2 ** (key - now / half_life)``, a monotone
  function of the key, so the order never needs re-sorting as time passes. The first
  unvalidated record is the next to evict, or the first validated one when there is
  none: the order of ``(validated, key, seq)``. Access bookkeeping only ever raises a
  key (``last_accessed`` moves later), so a record's stored key may be stale *from
  below*; the eviction pops the front and re-files it under its fresh key until the
  front is fresh, which is then the true minimum. Retrieves thus cost the owner no
  re-sorting (about 10 µs a hit before), and each stale key is refreshed at most once
  per eviction that reaches it. An unbounded memory (``capacity=None``) evicts nothing
  and keeps no eviction order at all (``_evict`` is None): 88 bytes and two sorted-list
  operations less per entry.
* ``_dups``: hash of (namespace, category, case- and whitespace-folded text) -> the one
  record with that hash, or an insertion-ordered set (a dict) of two or more, so
  consolidation merges duplicates without scanning every entry (``_dup_keys`` lists the
  sets). Most texts are unique: a group of one costs no dict.
* ``_graveyard``: dead records in order of death, for the vacuum.
* ``_expiry``: live records that expire, ordered by ``(expires_at as POSIX time, rec)``
  (each record's key in it in ``_exkeys``).
  A read that refreshes a time to live only moves an expiry later, so, as with the
  eviction order, a stored key may be stale from below: :meth:`MemoryState.expire` pops
  the front and re-files it under its fresh key until the front is due for real.

Structures readers share for keys and namespaces (same two rules as above):

* ``_by_key``: ``(namespace, key)`` -> ``id.int`` of the newest record that took that key.
  A reader checks the record it finds at its version still carries the key (an id may
  change its key; the entry is left until the id is purged).
* ``_namespaces``: namespace -> its unpurged records in insertion order (a
  :class:`_NsRecords`: a list that purged records leave lazily, 8 bytes a record where
  an insertion-ordered dict took ~50), and ``_ns_sorted``, those namespaces in order, so
  namespace listings and prefix listings read only the namespaces concerned, never
  every entry.

Time. The state never reads a clock for anything that changes it: the owner passes
``now`` (``store``, ``expire``, ``refresh``), so a replica fed the same times makes the
same changes. Readers compare expiry times with their own clock (reads change nothing).

Vacuum: a dead record is *purged* (removed from every shared structure) once its death
version is at or below the *horizon*, the oldest version any live snapshot can read.
Deaths are queued in version order, so the vacuum pops from the front; it runs in bounded
steps so one long-held snapshot released at once cannot stall the owner.
"""

from __future__ import annotations

import logging
import math
import operator
import struct
import uuid
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping
from datetime import UTC, datetime, timedelta
from itertools import islice, repeat
from typing import Any, NamedTuple, cast

import attrs
from sortedcontainers import SortedKeyList, SortedList

from .._entry import MemoryEntry, with_access
from .._errors import InvalidEntryError, InvalidQueryError
from .._index import kernels as _kernels
from .._index import textfold
from .._index.entrycols import new_entry_columns
from .._index.images import ImageError, prepare_index, restore_index, start_restore
from .._index.kernels import gc_untrack as _gc_untrack
from .._index.persist import header_field
from .._index.scoring import Scorer, ScoringIndex
from .._index.textfold import fold, fold_hash
from .._index.wordoverlap import ccore as _ccore
from .._json import JsonObject
from .._record import (
    JOURNAL_ACCESS,
    JOURNAL_DELETE,
    JOURNAL_PUT,
    NEVER,
    Access,
    PyEntryColumns,
    PyRecord,
    Record,
)
from .._stats import ConsolidationStats
from .._util import gc_paused

__all__ = ["DEFAULT_HALF_LIFE", "MemoryState", "StoreOutcome", "View"]

#: Default half-life of relevance-weighted recency, in seconds (7 days).
DEFAULT_HALF_LIFE = 7 * 24 * 3600.0
#: Smallest ``half_life`` accepted, in seconds: with it, ``t / half_life`` stays finite for
#: every ``datetime`` (year 9999 is 2.5e11 s), so no eviction key is infinite or NaN.
MIN_HALF_LIFE = 1e-6


#: Relevance below which consolidation prunes an unvalidated entry (loopctl's 0.05).
PRUNE_BELOW = 0.05


def _utc_now() -> datetime:
    return datetime.now(UTC)


#: relevance -> its part of the relevance key, shared by every record with that
#: relevance (most keep the default 1.0). Bounded.
_REL_PART: dict[float, int] = {1.0: 0}
#: The relevance key's layout: ``seq`` and ``born`` (each below 2**63) in the low bits.
_SEQ_SHIFT = 63
_REL_SHIFT = 126
_ONE_BITS = struct.unpack("<q", struct.pack("<d", 1.0))[0]
_LOW_MAX = (1 << _REL_SHIFT) - 1
#: Every seq is at most this (the low bits of :func:`_relevance_key_seq`'s layout).
_SEQ_MAX = (1 << _SEQ_SHIFT) - 1
#: A record's ``seq``: the key of insertion order.
_SEQ = operator.attrgetter("seq")


def _rel_part(relevance: float) -> int:
    """The relevance part of the key: larger for lower relevance, as ``-relevance`` would
    order. For a float in [0, 1] its IEEE 754 bits, read as an int, order like the float
    (``+ 0.0`` folds -0.0 into 0.0). O(1)."""
    part = _REL_PART.get(relevance)
    if part is None:
        part = _new_part(_REL_PART, _REL_SHIFT, relevance)
    return part


def _new_part(cache: dict[float, int], shift: int, relevance: float) -> int:
    """A relevance's part of a key, ``shift`` bits up, kept in ``cache``: its IEEE 754
    bits subtracted from 1.0's. The cache holds at most 4,096 relevances: a full one is
    emptied but for 1.0 (the default) before the new one goes in. The compiled store
    and load take a row only when its relevance is in the cache (else the row goes the
    Python way, which caches it): when a full cache took no more, a process that had
    seen 4,096 relevances sent every row of any other relevance, the default's too if
    it came late, to the Python path for good. O(1) amortised (a clear per 4,095 new
    relevances)."""
    bits = struct.unpack("<q", struct.pack("<d", relevance + 0.0))[0]
    part: int = (_ONE_BITS - bits) << shift
    if len(cache) >= 4096:
        cache.clear()
        cache[1.0] = 0
    cache[relevance] = part
    return part


def _relevance_key(rec: Record) -> int:
    """The order ``(-relevance, seq, born)`` packed into one int (52 bytes, compared in C;
    the tuple took 64 and compared element by element): unique per record version (an
    upsert keeps ``seq`` and often the relevance), so :meth:`View.by_relevance` can
    re-seek past the last record it read without skipping another version that shares
    its relevance and seq. O(1)."""
    relevance = rec.cols.relevance(rec.slot)
    part = _REL_PART.get(relevance)  # _rel_part's lookup, inline (once per store)
    if part is None:
        part = _rel_part(relevance)
    return part | (rec.seq << _SEQ_SHIFT) | rec.born


#: relevance -> its part of the key in the seq layout (:func:`_relevance_key_seq`). Bounded;
#: 1.0's (0) from the start, as ``_REL_PART``'s.
_REL_PART_SEQ: dict[float, int] = {1.0: 0}


def _rel_part_seq(relevance: float) -> int:
    """:func:`_rel_part` for the seq layout: the same order, ``_SEQ_SHIFT`` bits up (below
    2**126). O(1)."""
    part = _REL_PART_SEQ.get(relevance)
    if part is None:
        part = _new_part(_REL_PART_SEQ, _SEQ_SHIFT, relevance)
    return part


def _relevance_key_seq(rec: Record) -> int:
    """The order ``(-relevance, seq)`` packed into one int (:data:`_SEQ_KEYS`): for
    relevance 1.0 (the default: its part is 0) the record's ``seq`` int itself, so the
    key costs no object beside the Python record's own int (48 bytes a record in
    :func:`_relevance_key`'s layout; the compiled record keeps no int, and this is its
    entry's one); else
    ``part | seq`` (below 2**126). Not unique: versions of one id share it, in the order
    by ``born`` they were added in (an equal key goes after the ones already there),
    and at most one of them is visible at any version; :meth:`View.by_relevance`
    re-seeks past them by identity. O(1)."""
    relevance = rec.cols.relevance(rec.slot)
    part = _REL_PART_SEQ.get(relevance)
    if part is None:
        part = _rel_part_seq(relevance)
    return part | rec.seq if part else rec.seq


def _relevance_key_rec(rec: Record) -> Any:
    """:func:`_relevance_key_seq` with a relevance-1.0 record keyed by the record itself
    (:data:`_REC_KEYS`): the compiled record orders by its ``seq`` against another record
    and against an int as its ``seq`` would (``_crecord.c``), so the order is the same,
    and the key costs no object at all (the int of its seq was the record's one
    per-entry object, 32 bytes). Another relevance's key is ``part | seq`` (at or above
    2**63, after every record). Keys of two versions of one id are equal in the order
    (neither is below the other) but not ``==`` (a record is equal to itself only): see
    :func:`_same_key`. O(1)."""
    relevance = rec.cols.relevance(rec.slot)
    part = _REL_PART_SEQ.get(relevance)
    if part is None:
        part = _rel_part_seq(relevance)
    return part | rec.seq if part else rec


def _same_key(a: Any, b: Any) -> bool:
    """Whether two relevance keys are equal in the order (neither below the other): ``a
    == b`` for int keys, and for :func:`_relevance_key_rec`'s records the same ``seq``.
    O(1)."""
    return not (a < b or b < a)


def _below_key_seq(relevance: float) -> int | None:
    """:func:`_below_key` for the seq layout. O(1)."""
    if relevance > 1.0:
        return None
    return _rel_part_seq(max(relevance, 0.0)) | _SEQ_MAX


def _below_key(relevance: float) -> int | None:
    """The largest key a record with relevance >= ``relevance`` can have: the records
    after it are exactly those with relevance < ``relevance``. None: every record is
    (``relevance`` above 1)."""
    if relevance > 1.0:
        return None
    return _rel_part(max(relevance, 0.0)) | _LOW_MAX


def _dup_key(
    namespace: tuple[str, ...], category: str, text_key: object, key: str | None, value: object
) -> int:
    """The duplicate key, the one formula: the hash of :func:`_normalised`'s fields with
    ``text_key`` for the folded text (the fold itself, or its
    :func:`~actormem._index.textfold.fold_hash`), the key of a record's group in
    ``_dups``. Recomputed when the record leaves (O(len(text))) rather than kept on the
    record: a slot less per record (the int lives on as the dict's key) for a few µs per
    delete, upsert or eviction. Cut to 30 bits: an int of one digit (28 bytes, not 36);
    the few more unequal records that share a key cost nothing but a group
    (consolidation compares the full :func:`_normalised` keys). The C ``dup_key``
    (``textfold._dup_key_c``) computes it for the fold hash of a text in one call. O(1)."""
    return hash((namespace, category, text_key, key, value)) & 0x3FFF_FFFF


def _dupkey(rec: Record) -> int:
    """:func:`_dup_key` of ``rec`` by its folded text. O(len(text))."""
    e = rec.entry
    return _dup_key(e.namespace, e.category._value_, fold(e.memory), e.key, e.value)


def _dupkey_hashed(rec: Record) -> int:
    """:func:`_dup_key` of ``rec`` by the folded text's
    :func:`~actormem._index.textfold.fold_hash`: the same groups as :func:`_dupkey` (equal
    folds, equal keys) without building the fold. What a state uses when the C
    ``fold_hash`` exists (``MemoryState._dupkey``); in one C call (``dup_key``) for an
    exact ``str`` text (:data:`_DUPKEY_C`). O(len(text))."""
    e = rec.entry
    memory = e.memory
    dup_c = textfold._dup_key_c
    if _DUPKEY_C and dup_c is not None and type(memory) is str:
        return dup_c(e.namespace, e.category._value_, memory, e.key, e.value)
    return _dup_key(e.namespace, e.category._value_, fold_hash(memory), e.key, e.value)


def _normalised(
    rec: Record,
) -> tuple[tuple[str, ...], str, str, str | None, JsonObject | None]:
    """The duplicate key: namespace, category, text ignoring case and runs of whitespace
    (:func:`~actormem._index.textfold.fold`), key and payload (entries with different
    keys or payloads are never duplicates)."""
    e = rec.entry
    folded = fold(e.memory)  # in C for an ASCII text (textfold.py)
    return (e.namespace, e.category._value_, folded, e.key, e.value)  # str: hash cached


#: Records a namespace list's rebuild reads per purge (see :class:`_NsRecords`).
_NS_STEP = 256


class _NsRecords:
    """One namespace's records in insertion order: every unpurged record, and purged
    ones not yet dropped (readers skip them: a purged record is invisible to every live
    view). ``recs`` is append-only for readers. Once more than a quarter of it is
    purged, the owner rebuilds it without them, :data:`_NS_STEP` records per later purge
    (so no step of the owner copies a large list), and then replaces it: amortized O(1)
    per purge, and the list holds about a third more records than ``live`` at most."""

    __slots__ = ("_at", "_next", "live", "recs")

    def __init__(self) -> None:
        self.recs: list[Record] = []
        #: Unpurged records in ``recs``.
        self.live = 0
        #: The rebuild under way (the unpurged records of ``recs[:_at]``), or None.
        self._next: list[Record] | None = None
        self._at = 0

    def add(self, rec: Record) -> None:
        self.recs.append(rec)
        self.live += 1

    def purged(self) -> bool:
        """One of ``recs`` was purged (``rec.purged`` set); True when none is left.
        O(:data:`_NS_STEP`)."""
        self.live -= 1
        recs = self.recs
        if self._next is not None:
            end = min(self._at + _NS_STEP, len(recs))
            self._next.extend([r for r in recs[self._at : end] if not r.purged])
            if end < len(recs):
                self._at = end
                return self.live == 0
            recs = self.recs = self._next  # read to the end (appends included)
            self._next = None
        if 4 * (len(recs) - self.live) > len(recs):  # (still) a quarter purged
            self._next, self._at = [], 0
        return self.live == 0


def _store_setup() -> Callable[..., int] | None:
    """The C ``store_inserts`` with its classes fixed (``store_setup``: the record's,
    the entry's and the namespace list's slots), or None without the compiled core. O(1)."""
    wo = _kernels._wo
    inserts = getattr(wo, "store_inserts", None)
    if wo is None or inserts is None:
        return None
    wo.store_setup(
        Record,
        tuple(Record.__dict__[n] for n in _ccore._RECORD_SLOTS),
        MemoryEntry,
        tuple(MemoryEntry.__dict__[n] for n in _ccore._ENTRY_SLOTS.split()),
        _NsRecords,
        (_NsRecords.__dict__["recs"], _NsRecords.__dict__["live"]),
        NEVER,
        JOURNAL_PUT,
    )
    return cast(Callable[..., int], inserts)


#: The C ``store_inserts`` (:data:`_STORE_C`), or None without the compiled core.
_store_inserts_c = _store_setup()


class StoreOutcome(NamedTuple):
    """What one store did: the record it made, the one it replaced, the one it evicted.
    (A named tuple: built once per store, in C.)"""

    record: Record
    replaced: Record | None
    evicted: Record | None


#: ``StoreOutcome(rec, replaced, evicted)`` without the named tuple's Python ``__new__``
#: (the same object: ``_outcome(StoreOutcome, (rec, replaced, evicted))``).
_outcome = tuple.__new__

#: ``MemoryState.store_many`` runs its inserts through ``_store_batch`` (one frame per
#: entry, the index's ``add_many`` per run of inserts). False: ``_store`` per entry, the
#: path before it; the same structures (``stress/bench_store64.py --old-knobs``).
_STORE_BATCH = True
#: ``_store_batch`` appends a record whose relevance key is above every key of the
#: relevance order to its last sublist itself (what ``SortedKeyList.add`` does there:
#: the bisect finds the end, no split is due, no positional index to update), without
#: ``add``'s, the key function's and ``_expand``'s calls: a burst of new records of one
#: relevance always lands there. Otherwise, and False (the path before it), ``add``;
#: the same order, sublists and maxima (``stress/bench_store64.py --old-knobs store5``).
_RELEVANCE_APPEND = True
#: A state made while this is on orders ``_by_relevance`` by :func:`_relevance_key_seq`
#: (``(-relevance, seq)``, the key of a relevance-1.0 record its ``seq`` int itself: no
#: int object per record, 48 bytes an entry at 1M) instead of :func:`_relevance_key`
#: (``(-relevance, seq, born)``, unique, an 83-bit int per record). The same records in
#: the same order (versions of one id, the only records sharing a seq, keep the order
#: by ``born`` they were added in), and the same reads. Read once per state (its
#: layout is its own for life). False: the packed key, the layout before it.
_SEQ_KEYS = True
#: A state made while this is on, in the seq layout (:data:`_SEQ_KEYS`), with the compiled
#: record and sortedcontainers' internals, keys a relevance-1.0 record in
#: ``_by_relevance`` by the record itself (:func:`_relevance_key_rec`), not by an int of
#: its seq: the record's last per-entry object (32 bytes an entry at 1M). The same
#: records in the same order, the same reads; a removal from the order finds the record
#: among its id's versions by identity (:meth:`MemoryState._relevance_remove`). Read
#: once per state. False: the seq int, the layout before it.
_REC_KEYS = True
#: A stored entry is taken out of the cyclic collector's lists (``kernels.gc_untrack``,
#: with the compiled kernels): an entry is an immutable tree of strs, tuples, numbers,
#: times and frozen JSON that never references a record, so it is never part of a
#: reference cycle, and a full collection no longer walks one object per entry (a
#: million of them at 1M). False: left tracked; the same results. Off since step A
#: (issue #20 item 6, branch wire30): the state keeps no entry object (its fields are
#: in the state's ``EntryColumns``), so the entries stored are the caller's own, left
#: as they are, and untracking them saves the collector nothing.
_UNTRACK_ENTRIES = False
#: ``store_many`` takes the records it makes in an unbounded memory out of the cyclic
#: collector's sight (``kernels.gc_untrack`` per run of ``_store_batch``'s
#: inserts, or at the end of the loop without it: a durable memory's): such a
#: record is in no reference cycle (it holds its entry, which holds only exact built-in
#: types (``MemoryEntry``'s converters make them so), and its access chain, none of
#: which refers back to it; its older version is in ``_prev``; only the eviction key
#: ``(key, rec)`` of a bounded memory would, so a bounded memory keeps them tracked). A store then
#: leaves nothing tracked behind, and the collector's full passes, whose frequency
#: follows the tracked objects that survive, come seldom and walk less. False, or
#: without the compiled core: tracked, the path before it (the same structures).
#: The compiled record (branch crec42) is never tracked (no GC header, in no cycle: its
#: eviction key is a float, not the ``(key, rec)`` tuple): this knob and
#: :data:`_UNTRACK_LOADED` then change nothing; they act on :class:`PyRecord`.
_UNTRACK_RECORDS = True
#: ``store_many`` into a state that defers its index (a durable owner's batch, see
#: :meth:`MemoryState.defer_index`) takes ``_store_batch`` too, a run's index adds
#: joining the deferred calls, and :meth:`MemoryState.flush_index` makes each run of
#: deferred adds by the index's ``add_many``. False: the plain loop of ``_store`` and an
#: ``add`` per record, the path before it; the same structures and index calls
#: (``stress/bench_store64.py --old-knobs store7``).
_DEFER_BATCH = True
#: ``_load_bulk`` of an unbounded memory takes the records it makes out of the cyclic
#: collector's sight, as ``store_many`` does (:data:`_UNTRACK_RECORDS`, whose reasons
#: hold for a loaded record): the first collections after an open of 1M entries no
#: longer walk a million records (~0.3 s). False: left tracked, the path before it.
_UNTRACK_LOADED = True
#: ``_load_bulk`` makes each row's duplicate key by the C ``dup_key`` inline
#: (:data:`_DUPKEY_C`; before it, the rows' fold hashes in one ``map`` of the C
#: ``fold_hash`` and each key's tuple built inline), no ``_dupkey_hashed`` frame per row;
#: the same keys. False: ``self._dupkey(rec)`` per record, the path before it.
_BULK_FOLDS = True
#: ``_load_bulk`` fills the empty relevance order through sortedcontainers' private
#: lists (:meth:`MemoryState._relevance_fill`: each key computed once, no sort when the
#: keys already ascend). False: ``SortedKeyList.update``, the path before it (the same
#: lists).
_RELEVANCE_FILL = True
#: The duplicate key by the fold's hash (:func:`_dupkey_hashed`, ``_store_batch``,
#: ``_load_bulk``) is the C ``dup_key`` (``textfold._dup_key_c``): the text's fold hash,
#: the tuple and its hash in one call, where the three paths each wrote the formula out
#: (an inline ``fold_c`` call, tuple, ``hash`` and cut). False: :func:`_dup_key` in
#: Python for each (the one formula; a call more per store than the inline copies it
#: replaced). The same keys.
_DUPKEY_C = True
#: ``_load_bulk`` takes the rows' fold hashes that came with them (a list with a
#: ``folds`` attribute: 8 bytes a row, native uint64, as ``sqlite_format.read_file``'s
#: split reader hands them, computed by its thread from each text's bytes) and
#: makes each duplicate key by the C ``dup_key_folded`` without folding the text again
#: (a fold outside ``[0, 2**62)``: that row's text is folded here). Used only when
#: the fold bytes are one per row and the state keys by the C ``dup_key``. False: the
#: folds ignored, the path before it (the same keys).
_LOAD_FOLDS = True
#: ``store_many`` of a list or tuple into an unbounded memory runs its plain inserts
#: (exact entries with no ttl, key, value or expiry, a new id, a known namespace, a
#: relevance key at the end of the order) by the C ``store_inserts`` (``_cwordoverlap.c``),
#: one call for each run of them, and any other entry by :meth:`MemoryState._store_batch`:
#: the same records (six slots), dicts, orders, groups, journal and index calls.
#: False, without the compiled core, or with the Python column store
#: (``entrycols._COLS_C`` False: ``store_inserts`` takes only the compiled one):
#: ``_store_batch`` for every entry, the path before it (``stress/bench_store64.py
#: --old-knobs store10``).
_STORE_C = True
#: Entries :meth:`MemoryState._store_batch_c` hands ``_store_batch`` at once after a C
#: call that inserted few (:data:`_STORE_C_FEW`): a batch the call cannot append (a
#: record of lower relevance in the order, relevances not cached) then costs about what
#: ``_store_batch`` alone does, not a frame, a run's end and an index call an entry
#: (1.6-2x the CPU, review18a).
_STORE_C_RETRY = 64
#: Inserts below which a C call counts as having inserted few (a run that long pays for
#: its stop: the next entry alone by ``_store_batch``, then the call again).
_STORE_C_FEW = 8
#: A state made while this is on keeps ``_dups`` in the C ``DupTable``
#: (``_cwordoverlap.c``, ``_duptable.h``) instead of a dict: the 30-bit duplicate key as a
#: C ``uint32`` beside a reference in an open-addressing table, 12 bytes a slot at a load
#: of 0.5-0.7, where the dict spent a ~42-byte slot and a 28-32-byte int object on each
#: key (~-50 bytes an entry at 1M); ``_link``, ``_unlink``, ``_store_batch`` and
#: ``_load_bulk`` make their group step in one call (``join`` / ``leave``), and the C
#: ``store_inserts`` without an int per key. The same keys, groups (a record or a dict
#: of two or more, in insertion order) and ``_dup_keys``; only iterating ``_dups``
#: (``_check``, tests) sees its slots' order instead of insertion order. Read once per
#: state. False, or without the compiled core: a dict, the layout before it.
_DUP_TABLE = True
#: The C ``DupTable`` type, or None without the compiled core.
_DupTable: Callable[[], Any] | None = getattr(_kernels._wo, "DupTable", None)
#: A state made while this is on keeps ``_by_id`` in the C ``IdTable`` (``_idtable.h``)
#: instead of a dict: a 32-bit tag of the id's hash beside a reference to the record in an
#: open-addressing table, 12 bytes a slot at a load of 0.5-0.7, the id read back from
#: ``rec.cols.ident(rec.slot)`` when a tag matches, where the dict spent a ~42-byte slot on each id
#: (~-20 bytes an entry at 1M, either scorer). The same mapping (``get``, ``[]``, ``in``,
#: ``del``, ``len``, ``values``, ``items``) of the same heads; readers of older versions
#: still walk ``_prev`` from the head, as before; only iteration order (slots, not
#: insertion) differs, which nothing relies on (``View.records`` sorts by seq). A value
#: must be a :class:`Record` stored under its own entry's id (refused otherwise). Read
#: once per state. False, or without the compiled core: a dict, the layout before it.
_ID_TABLE = True
#: The C ``IdTable`` type, or None without the compiled core.
_IdTable: Callable[[Any, Any], Any] | None = getattr(_kernels._wo, "IdTable", None)
#: :meth:`View.entry` takes the count, the last access and a refreshed expiry from the
#: one access node visible at the view (the newest read in its own frame; an older one
#: found by ``Record.access_node``), instead of calling ``Record.access_at`` and
#: ``Record.expires_at``, two walks and two calls; an entry never retrieved is returned
#: as is without a walk. The same entries (three per main-job retrieve). False: the two
#: calls (the path before it).
_ENTRY_WALK = True
#: ``_load_bulk`` of an unbounded state (the C ``IdTable`` and ``DupTable``, the seq
#: layout, the C duplicate key) loads its runs of plain rows (no key, value or expiry,
#: an exact ``str`` text, a known namespace and relevance part) by the C
#: ``load_inserts`` (``_cwordoverlap.c``): the record made by ``tp_alloc``, the id
#: table, the namespace list, the duplicate group and the relevance key in one C pass,
#: no frame or attribute lookups a row; any other row by the Python loop
#: (:meth:`MemoryState._load_rows`), which also raises the errors. The same records,
#: tables, lists, groups, keys, index calls and errors. False, or without the compiled
#: core: the Python loop for every row, the path before it.
_LOAD_C = True
#: The C ``load_inserts`` (``store_setup``'s classes: :data:`_store_inserts_c`'s), or None.
_load_inserts_c: Callable[..., int] | None = (
    getattr(_kernels._wo, "load_inserts", None) if _store_inserts_c is not None else None
)
#: ``load_inserts`` makes a plain row's duplicate key (a fold from the reader) from the
#: key tuple's items' hashes by ``tuplehash``'s steps (``_cwordoverlap.dkey_direct``,
#: used once checked against real tuples in the process), not by hashing a tuple and
#: an int it makes and frees (~1M of each at a 1M open). The same keys. False: the
#: tuple, the path before it (branch ``open31``).
_DKEY_DIRECT = True
#: The core's switch for :data:`_DKEY_DIRECT` (set at each bulk load), or None.
_dkey_direct_c: Callable[[bool], bool] | None = getattr(_kernels._wo, "dkey_direct", None)
#: ``_bulk_loadable`` skips the runs of plain rows without a key by the core's
#: ``next_keyed`` (one C pass, ~0.01 s at 1M, where the Python loop over every row's
#: key took ~0.1 s) and looks at the rows it stops at itself; the same answer. False, or
#: without the compiled core: the loop over every row (``tests/test_open18_cols.py``).
_KEYS_C = True
#: The C ``next_keyed`` (``store_setup``'s classes), or None.
_next_keyed_c: Callable[..., int] | None = (
    getattr(_kernels._wo, "next_keyed", None) if _store_inserts_c is not None else None
)
#: Rows the Python loop takes at once after a ``load_inserts`` call that loaded none
#: (a file of rows the C path leaves, e.g. each with a key: one call per
#: :data:`_LOAD_C_RETRY` rows, not per row); after one that loaded some, the row it
#: stopped at alone (plain rows between a few others: each run by C).
_LOAD_C_RETRY = 16
#: :meth:`MemoryState.feed_ahead` gives an unbounded state's open a :class:`_BulkFeed`:
#: the bulk load of the rows read so far, run on the open's thread while the file's row
#: reader reads on (``sqlite_format.read_file``'s ``consume``), into a scratch state
#: whose tables :meth:`MemoryState.load` takes over when the whole file turns out to be
#: those rows, bulk-loadable; anything else (a row it cannot take, an error, other rows)
#: drops the scratch and the load runs as before. The same state, index and errors.
#: False: no feed, the path before it (branch ``open28``).
_FEED_AHEAD = True
#: Rows a feed waits for before it loads the next run (a call per few chunks).
_FEED_MIN = 1024
#: The fewest bytes of the file a row takes (its id's 16-byte blob, seq, text, times):
#: the index image's row count, the feed's reserve for the tables, is believed up to
#: the file's size over this (an image can be stale or forged; it only sizes tables).
_FEED_ROW_BYTES = 32
#: The fast path reads sortedcontainers 2.x's private lists; a release without them
#: (checked once, here) takes ``add`` instead of failing every ``store_many``.
_SORTED_INTERNALS = all(
    hasattr(SortedKeyList(key=int), name)
    for name in ("_lists", "_keys", "_maxes", "_index", "_load", "_len")
)


class View:
    """A read-only view of a :class:`MemoryState` at one version. O(1) to make.

    Valid only while the owner cannot vacuum records it sees: either used synchronously
    (as ``retrieve`` does) or registered with the state (as public snapshots are).
    """

    __slots__ = ("_len", "_state", "version")

    def __init__(self, state: MemoryState, version: int, length: int) -> None:
        self._state = state
        self.version = version
        self._len = length

    def __len__(self) -> int:
        return self._len

    def visible(self, rec: Record) -> bool:
        return rec.born <= self.version < rec.died

    def get(self, id: uuid.UUID) -> Record | None:
        """The record of ``id`` visible here, or None. O(versions kept for that id)."""
        return self._get(id.int)

    def _get(self, ident: int) -> Record | None:
        """:meth:`get` by the id's int. O(versions kept for that id)."""
        rec = self._state._by_id.get(ident)
        v = self.version
        if rec is not None and rec.born > v:
            older = self._state._prev.get
            while rec is not None and rec.born > v:
                rec = older(rec)
        if rec is None or rec.died <= v:
            return None
        return rec

    def entry(self, rec: Record) -> MemoryEntry:
        """``rec.entry`` with the access bookkeeping (and refreshed expiry) as of this view.
        O(length of the record's access chain newer than the view)."""
        if _ENTRY_WALK:
            # Record.access_at and Record.expires_at from one node of the chain (the
            # newest, in the common case, without the walk's call): it gives all three
            # values; an entry never retrieved has none.
            # Step A: the entry is built from the store (cols.entry), once, with the
            # chain's values when it has any (no copy of a built entry).
            a = rec.access
            if a is None:
                return rec.cols.entry(rec.slot)  # type: ignore[no-any-return]
            if a.version > self.version:
                a = rec.access_node(self.version)
                if a is None:
                    return rec.cols.entry(rec.slot)  # type: ignore[no-any-return]
            return rec.cols.entry(rec.slot, a.count, a.last, a.expires)  # type: ignore[no-any-return]
        count, last = rec.access_at(self.version)
        expires = rec.expires_at(self.version)
        e = rec.entry
        if count == e.access_count and last == e.last_accessed and expires == e.expires_at:
            return e
        return with_access(e, count, last, expires)

    def alive(self, now: datetime) -> Callable[[Record], bool] | None:
        """A predicate: the record has not expired at ``now`` (as of this view); None
        when no record of this memory ever had an expiry (every record passes). O(1)."""
        if not self._state._ever_expiring:
            return None
        v = self.version

        def alive(rec: Record) -> bool:
            expires = rec.expires_at(v)
            return expires is None or expires > now

        return alive

    def live_count(self, now: datetime) -> int:
        """How many records visible here have not expired at ``now`` (what ``len`` of a
        memory or a snapshot reports).

        O(1) when no record of the memory ever had an expiry. When this view is the
        working version (nothing applied since it was published), O(k) for the k records
        at the front of the expiry order due by ``now`` (those expired but not yet swept
        by the owner, plus keys stale from below: normally none). Otherwise (an older
        view: a snapshot kept while writes went on, or the published version while a
        durable batch commits) O(n + older versions walked).
        """
        state = self._state
        if not state._ever_expiring:
            return self._len
        v = self.version
        if v == state.version:
            # _expiry holds exactly the live records that expire, keyed by an expiry at
            # or before their own (stale from below): walk the keys due by now.
            limit = now.timestamp()
            gone = 0
            for due, due_rec in state._expiry:
                if due > limit:
                    break
                expires = due_rec.expires_at(v)
                if expires is not None and expires <= now:
                    gone += 1
            return self._len - gone
        older = state._prev.get
        count = 0
        for newest in list(state._by_id.values()):
            rec: Record | None = newest
            while rec is not None and rec.born > v:  # too new: an older one may be seen
                rec = older(rec)
            if rec is not None and rec.died > v:
                expires = rec.expires_at(v)
                if expires is None or expires > now:
                    count += 1
        return count

    def by_key(self, namespace: tuple[str, ...], key: str) -> Record | None:
        """The visible record with ``(namespace, key)``, or None. O(versions of the id),
        and of the key's earlier holders for a view older than the last change of hands
        (``MemoryState._key_prev``)."""
        state = self._state
        id = state._by_key.get((namespace, key))
        if id is None:
            return None
        rec = state._by_id.get(id)
        v = self.version
        if rec is not None and rec.born > v:
            # The id's versions since this view; the oldest of them that took the key
            # from another id (before it: that id's, which the loop then walks, only
            # its versions older than the hop).
            older = state._prev.get
            key_prev = state._key_prev
            bound = NEVER
            while True:
                hop = None
                while rec is not None and rec.born > v:
                    if rec.born < bound and rec in key_prev:
                        e = rec.entry  # it took its own key: this one?
                        if e.key == key and e.namespace == namespace:
                            hop = rec
                    rec = older(rec)
                if rec is not None and rec.died > v:
                    e = rec.entry
                    if e.key == key and e.namespace == namespace:
                        return rec
                if hop is None:
                    return None
                bound = hop.born
                rec = state._by_id.get(key_prev[hop])
        if rec is None or rec.died <= v:
            return None
        e = rec.entry
        return rec if e.key == key and e.namespace == namespace else None

    def in_namespace(self, prefix: tuple[str, ...]) -> Iterator[Record | None]:
        """Visible records whose namespace starts with ``prefix`` (segment by segment),
        namespace by namespace in sorted order, each in insertion order, with a None
        after every 256 records read (a point where the caller may checkpoint).

        Safe to consume across checkpoints while the view is registered as a live
        snapshot: it lists the namespaces up front and copies each one's records (a C
        copy) before reading them, so the owner may add and purge meanwhile (what it
        adds is invisible by version, what it purges was invisible). O(namespaces under
        the prefix + their unpurged records)."""
        state = self._state
        v = self.version
        n = len(prefix)
        names = []
        for ns in state._ns_sorted.irange(minimum=prefix):
            if ns[:n] != prefix:
                break
            names.append(ns)
        read = 0
        for ns in names:
            records = state._namespaces.get(ns)
            if records is None:  # purged meanwhile: nothing in it was visible here
                continue
            for rec in records.recs.copy():  # purged ones fail the visibility test
                if rec.born <= v < rec.died:
                    yield rec
                read += 1
                if read % 256 == 0:
                    yield None

    def namespaces(
        self, alive: Callable[[Record], bool] | None, under: tuple[str, ...] = ()
    ) -> Iterator[tuple[str, ...]]:
        """The namespaces starting with ``under`` that hold a visible record ``alive``
        admits, sorted. Synchronous use only (see :meth:`in_namespace`).
        O(log N + namespaces under ``under`` + records skipped before a visible one)."""
        state = self._state
        v = self.version
        n = len(under)
        for ns in state._ns_sorted.irange(minimum=under):
            if ns[:n] != under:
                break
            for rec in state._namespaces[ns].recs:
                if rec.born <= v < rec.died and (alive is None or alive(rec)):
                    yield ns
                    break

    def records(self) -> list[Record]:
        """Every visible record, in insertion order (``seq``). O(n log n)."""
        out = self.visible_in(list(self._state._by_id.values()))
        out.sort(key=_SEQ)
        return out

    def visible_in(self, newest: Iterable[Record]) -> list[Record]:
        """For each record of ``newest`` (an id's newest record, as the id map held it
        at or after this view's version: ``list(state._by_id.values())`` or a piece of
        it), the version of it this view sees, where it sees one; in ``newest``'s order.
        A piece at a time, between checkpoints, as long as this view's version is held
        (a snapshot): the versions it sees are not vacuumed meanwhile, and an id's
        newer records only come before the ones given. O(len(newest) + older versions
        walked)."""
        v = self.version
        older = self._state._prev.get
        out: list[Record] = []
        add = out.append
        for rec in newest:
            r: Record | None = rec
            while r is not None and r.born > v:  # too new: an older one may be seen
                r = older(r)
            if r is not None and r.died > v:
                add(r)
        return out

    def visible_ids(self) -> set[int]:
        """The ``entry._id`` (the id's 128-bit int) of every visible record: the same set
        as ``{r.cols.ident(r.slot) for r in self.records()}`` without the list, the ``_get`` call
        per id and the sort by ``seq``. O(n + older versions walked)."""
        v = self.version
        older = self._state._prev.get
        out: set[int] = set()
        add = out.add
        for newest in list(self._state._by_id.values()):
            rec: Record | None = newest
            while rec is not None and rec.born > v:  # too new: an older one may be seen
                rec = older(rec)
            if rec is not None and rec.died > v:
                add(rec.cols.ident(rec.slot))
        return out

    def first_by_relevance(self) -> Record | None:
        """The record :meth:`by_relevance` yields first (the visible record of highest
        relevance, ties by ``seq``), or None when none is visible. O(1) when the sorted
        list's first record is visible (a retrieve's usual case: the word-overlap
        scorer's bound needs the top relevance only), else :meth:`by_relevance`'s first
        chunks."""
        lists = self._state._by_relevance._lists
        if lists:
            rec: Record = lists[0][0]
            if rec.born <= self.version < rec.died:
                return rec
        return next(self.by_relevance(), None)

    def by_relevance(self, below: float | None = None) -> Iterator[Record]:
        """Visible records, highest relevance first, ties by ``seq`` (see ``ReadView``).

        Safe to consume across checkpoints: it reads the sorted list in chunks (16, 64,
        ..., 1024 records), each a fresh ``irange_key`` from the key after the last record
        read, so the owner may insert and remove records between two steps; records
        inserted later are invisible by version, and removed ones (purged) were invisible.
        O(log n) per chunk, amortized O(1) per record.
        """
        v = self.version
        state = self._state
        keys = state._by_relevance
        relkey = state._relkey
        min_key = None if below is None else state._below(below)
        size = 16
        if not state._seq_keys:  # unique keys: re-seek after the last one read
            while True:
                chunk = list(
                    islice(keys.irange_key(min_key=min_key, inclusive=(False, True)), size)
                )
                for rec in chunk:
                    if rec.born <= v < rec.died:
                        yield rec
                if len(chunk) < size:
                    return
                min_key = relkey(chunk[-1])
                size = min(4 * size, 1024)
        # The seq layout: versions of one id share a key, so the re-seek includes the
        # last key read and skips the records of that key already read, by identity.
        # Those are the first of its run (between two chunks the owner only purges
        # records and inserts new ones, which go after the equal keys there), so they
        # are among the first len(read) records of the range.
        read: list[Record] = []  # records of key min_key already read, in order
        inclusive = False
        while True:
            n_read = len(read)
            chunk = list(
                islice(keys.irange_key(min_key=min_key, inclusive=(inclusive, True)), size + n_read)
            )
            full = len(chunk) == size + n_read
            if n_read:  # drop the leading records read before
                skip = 0
                if n_read == 1:  # the usual case: the last record read alone
                    skip = int(bool(chunk) and chunk[0] is read[0])
                else:
                    ids = {id(r) for r in read}
                    while skip < len(chunk) and id(chunk[skip]) in ids:
                        skip += 1
                del chunk[:skip]
            for rec in chunk:
                if rec.born <= v < rec.died:
                    yield rec
            if not full:
                return
            tail = len(chunk) - 1
            last_rec = chunk[tail]
            last = relkey(last_rec)
            if min_key is None or not _same_key(last, min_key):
                read = []
            seq = last_rec.seq  # an equal key has an equal seq: relkey only then
            while (
                tail > 0 and chunk[tail - 1].seq == seq and _same_key(relkey(chunk[tail - 1]), last)
            ):
                tail -= 1
            read += chunk[tail:]
            min_key, inclusive = last, True
            size = min(4 * size, 1024)


#: The latest expiry the state computes: datetime's own maximum, in UTC.
LATEST = datetime.max.replace(tzinfo=UTC)


def expiry(when: datetime, ttl: float) -> datetime:
    """``when + ttl`` seconds, or :data:`LATEST` where that is past year 9999 (a clock
    near the end of ``datetime``'s range must not crash the owner). O(1)."""
    try:
        return when + timedelta(seconds=ttl)
    except OverflowError:
        return LATEST


class MemoryState:
    """Entries, indexes and eviction order of one memory. Not thread-safe; no I/O.

    Args:
        capacity: Most entries kept, or ``None`` for unbounded.
        half_life: Seconds after which an entry's relevance-weighted recency halves.
        scorer: The scorer whose index is maintained (word overlap by default).
        clock: Returns the current UTC datetime (for ``last_accessed``).

    Raises:
        InvalidQueryError: ``capacity`` < 1 or ``half_life`` not a finite number of
            seconds >= :data:`MIN_HALF_LIFE`.
    """

    def __init__(
        self,
        *,
        capacity: int | None,
        half_life: float,
        scorer: Scorer,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if capacity is not None:
            if isinstance(capacity, bool) or not isinstance(capacity, int):
                raise TypeError(f"capacity must be an int or None, not {type(capacity).__name__}")
            if capacity < 1:
                raise InvalidQueryError(f"capacity must be >= 1 or None, got {capacity}")
        if isinstance(half_life, bool) or not isinstance(half_life, (int, float)):
            raise TypeError(
                f"half_life must be a number of seconds, not {type(half_life).__name__}"
            )
        if not (math.isfinite(half_life) and half_life >= MIN_HALF_LIFE):
            raise InvalidQueryError(
                f"half_life must be a finite number of seconds >= {MIN_HALF_LIFE:g}, "
                f"got {half_life!r}"
            )
        self.capacity = capacity
        self.half_life = float(half_life)
        self.scorer = scorer
        self.index: ScoringIndex = scorer.make_index()
        self.clock = clock
        self.version = 0
        self.published = 0
        self._published_len = 0
        self._seq = 0
        self._live = 0
        #: The entries' store (issue #20 item 6, step A): each record keeps a slot
        #: number into it (``Record.slot``), released when the record is purged.
        self._cols = new_entry_columns()
        #: ``id.int`` -> newest record (int keys: hashed and compared in C, unlike UUIDs;
        #: the int is the UUID's own, so it costs no memory).
        #: A dict, or the C ``IdTable`` (:data:`_ID_TABLE`, fixed for the state's life).
        self._by_id: MutableMapping[int, Record] = (
            _IdTable(Record.__dict__["cols"], Record.__dict__["slot"])
            if _ID_TABLE and _IdTable is not None and type(self._cols) is not PyEntryColumns
            else {}
        )
        #: The relevance order's layout (:data:`_SEQ_KEYS`, fixed for the state's life):
        #: its key function, the key below a relevance, and the relevance parts' cache.
        self._seq_keys = _SEQ_KEYS
        #: Relevance-1.0 records keyed by themselves (:data:`_REC_KEYS`).
        self._rec_keys = (
            _REC_KEYS and self._seq_keys and _SORTED_INTERNALS and Record is not PyRecord
        )
        self._relkey: Callable[[Record], Any] = (
            (_relevance_key_rec if self._rec_keys else _relevance_key_seq)
            if self._seq_keys
            else _relevance_key
        )
        self._below: Callable[[float], int | None] = (
            _below_key_seq if self._seq_keys else _below_key
        )
        self._rel_parts: dict[float, int] = _REL_PART_SEQ if self._seq_keys else _REL_PART
        self._by_relevance: SortedKeyList = SortedKeyList(key=self._relkey)
        #: Eviction orders of unvalidated (index 0/False) and validated (1/True) records;
        #: None when unbounded (nothing is ever evicted, so no order is kept).
        self._evict: tuple[SortedList, SortedList] | None = (
            None if capacity is None else (SortedList(), SortedList())
        )
        #: record -> the older unpurged version of its id (the upsert chain readers of
        #: older snapshots walk from ``_by_id``), for the records that have one: kept here
        #: and not in a slot of every record (most have none, and old versions are
        #: purged soon). The purge of the older version drops its entry.
        self._prev: dict[Record, Record] = {}
        #: record -> the id that held its key before it took it (another id's: a key
        #: changes hands once its holder is deleted, evicted or re-keyed), for the
        #: records that took one so: views older than the record find the key's holder
        #: at their version there (``View.by_key``). The record's purge drops its entry.
        self._key_prev: dict[Record, int] = {}
        #: ``_key_prev``'s records by birth: vacuum drops an entry once no view is older
        #: than its record.
        self._key_prev_order: deque[Record] = deque()
        #: dupkey -> the one record with it, or an insertion-ordered set of two or more:
        #: a dict, or the C ``DupTable`` (:data:`_DUP_TABLE`, fixed for the state's life;
        #: ``_dup_table`` says which).
        self._dup_table = _DUP_TABLE and _DupTable is not None
        self._dups: MutableMapping[int, Record | dict[Record, None]] = (
            _DupTable() if self._dup_table and _DupTable is not None else {}
        )
        self._dup_keys: set[int] = set()  # keys of _dups groups with two or more records
        #: The duplicate key function, one for the state's life (keys are recomputed when
        #: records leave): by the fold's hash in C when it exists, else by the fold.
        self._dupkey: Callable[[Record], int] = (
            _dupkey_hashed if textfold._FOLD_HASH and textfold._fold_hash_c is not None else _dupkey
        )
        self._graveyard: deque[Record] = deque()
        #: (namespace, key) -> id.int of the newest record that took the key.
        self._by_key: dict[tuple[tuple[str, ...], str], int] = {}
        #: namespace -> its unpurged records; the namespaces, sorted.
        self._namespaces: dict[tuple[str, ...], _NsRecords] = {}
        self._ns_sorted: SortedList = SortedList()
        #: Live records that expire, by (expiry as POSIX time, rec); stale from below.
        self._expiry: SortedList = SortedList()
        #: A live record's key in ``_expiry`` (kept here, not on the record: a slot less
        #: on every record, for the few that expire).
        self._exkeys: dict[Record, tuple[float, Record]] = {}
        #: Whether any record ever had an expiry (readers then check expiry times).
        self._ever_expiring = False
        self._evictions_since_consolidate = 0
        #: Called as ``on_remove(entry, cause)`` for every entry that leaves the memory.
        self.on_remove: Callable[[MemoryEntry, str], None] | None = None
        #: Changes since the last :meth:`take_journal`, for a durable backend; None: off.
        self.journal: list[tuple[int, Record]] | None = None
        #: Index calls held back by :meth:`defer_index` until :meth:`flush_index`: a
        #: record to ``add``, a 1-tuple ``(record,)`` to ``retire``; None: not deferring.
        self._deferred: list[Record | tuple[Record]] | None = None
        # Counters for statistics().
        self.stores = 0
        self.upserts = 0
        self.deletes = 0
        self.evictions = 0
        self.pruned = 0
        self.merged = 0
        self.consolidations = 0
        self.access_updates = 0
        self.expired = 0
        self.ttl_refreshes = 0

    # ------------------------------------------------------------------ reading

    def __len__(self) -> int:
        """Live entries at the working (possibly unpublished) version. O(1)."""
        return self._live

    def view(self) -> View:
        """A view at the published version. O(1)."""
        return View(self, self.published, self._published_len)

    def current_by_key(self, namespace: tuple[str, ...], key: str) -> Record | None:
        """The live record with ``(namespace, key)`` at the working version, or None. O(1)."""
        id = self._by_key.get((namespace, key))
        rec = None if id is None else self._by_id.get(id)
        if rec is None or rec.died != NEVER:
            return None
        e = rec.entry
        return rec if e.key == key and e.namespace == namespace else None

    def current(self, id: uuid.UUID) -> Record | None:
        """The live record of ``id`` at the working version, or None. O(1)."""
        rec = self._by_id.get(id.int)
        if rec is None or rec.died != NEVER:
            return None
        return rec

    @property
    def retained(self) -> int:
        """Dead record versions not yet vacuumed. O(1)."""
        return len(self._graveyard)

    # ------------------------------------------------------------------ writing

    def take_journal(self) -> list[tuple[int, Record]]:
        """The changes recorded since the last call, oldest first, and start afresh. O(1)."""
        journal = self.journal or []
        if self.journal is not None:
            self.journal = []
        return journal

    def defer_index(self) -> None:
        """Hold back the scoring index's ``add``/``retire`` calls of the writes that follow
        until :meth:`flush_index`, which makes them in the same order.

        The durable owner uses it to index a batch while the thread of its group commit
        starts (see ``_memory._in_thread_while``): nothing else in the state reads the
        index, and readers see no record of the batch before it is published. O(1).
        """
        assert self._deferred is None
        self._deferred = []

    def flush_index(self) -> None:
        """Make the index calls held back since :meth:`defer_index` (none if not
        deferring), oldest first, and stop deferring. O(their cost)."""
        ops, self._deferred = self._deferred, None
        if not ops:
            return
        index = self.index
        # _DEFER_BATCH: each run of adds in one ``add_many`` call (add of each in order).
        add_many = getattr(index, "add_many", None) if _DEFER_BATCH else None
        born_dead: set[Record] = set()
        run: list[Record] = []
        for op in ops:
            if isinstance(op, tuple):  # a retire
                if run:
                    self._deferred_adds(run, add_many, born_dead)
                    run = []
                rec = op[0]
                if rec not in born_dead:
                    index.retire(rec)
            else:
                run.append(op)
        if run:
            self._deferred_adds(run, add_many, born_dead)

    def _deferred_adds(
        self,
        recs: list[Record],
        add_many: Callable[[list[Record]], None] | None,
        born_dead: set[Record],
    ) -> None:
        """:meth:`flush_index`'s adds of ``recs`` in order (by ``add_many`` if given);
        a record removed later in the same batch goes into ``born_dead``: ``add`` saw its
        ``died`` set and retired it (the ScoringIndex contract), so its ``retire`` is
        skipped. O(the adds)."""
        if add_many is None:
            add = self.index.add
            for rec in recs:
                add(rec)
        else:
            add_many(recs)
        for rec in recs:
            if rec.died != NEVER:
                born_dead.add(rec)

    def publish(self) -> None:
        """Make every applied write visible to new snapshots. O(1)."""
        assert self._deferred is None, "flush_index() before publish()"
        self.published = self.version
        self._published_len = self._live

    def _evkey(self, rec: Record) -> tuple[float, Record]:
        e = rec.entry
        _, last = rec.current_access()
        t = (last or e.created_at).timestamp()
        rel = e.relevance
        log_rel = math.log2(rel) if rel > 0.0 else -math.inf
        return (log_rel + t / self.half_life, rec)

    def _link(self, rec: Record) -> None:
        """Enter a new live record into every structure."""
        e = rec.entry
        if _UNTRACK_ENTRIES and _gc_untrack is not None and type(e) is MemoryEntry:
            _gc_untrack([e], MemoryEntry)
        self._by_id[e._id] = rec
        self._by_relevance.add(rec)
        if e.key is not None:
            slot = (e.namespace, e.key)
            holder = self._by_key.get(slot)
            if holder is not None and holder != e._id:
                self._key_prev[rec] = holder  # older views find the key there
                self._key_prev_order.append(rec)
            self._by_key[slot] = e._id
        records = self._namespaces.get(e.namespace)
        if records is None:
            records = self._namespaces[e.namespace] = _NsRecords()
            self._ns_sorted.add(e.namespace)
        records.recs.append(rec)  # records.add(rec), inline
        records.live += 1
        access = rec.access  # rec.current_expires(), inline
        expires = e.expires_at if access is None or access.expires is None else access.expires
        if expires is not None:
            self._ever_expiring = True
            exkey = self._exkeys[rec] = (expires.timestamp(), rec)
            self._expiry.add(exkey)
        if self._evict is not None:
            rec.evkey = self._evkey(rec)
            self._evict[rec.cols.get(rec.slot, "validated")].add(rec.evkey)  # validated: 0 or 1
        key = self._dupkey(rec)
        dups = self._dups
        if self._dup_table:  # the steps below in one C call
            if dups.join(key, rec):  # type: ignore[attr-defined]
                self._dup_keys.add(key)
        elif (group := dups.get(key)) is None:
            dups[key] = rec  # a group of one is the record itself (no dict per text)
        elif isinstance(group, dict):
            group[rec] = None
        else:
            dups[key] = {group: None, rec: None}
            self._dup_keys.add(key)
        if self._deferred is None:
            self.index.add(rec)
        else:
            self._deferred.append(rec)
        self._live += 1
        if self.journal is not None:
            self.journal.append((JOURNAL_PUT, rec))

    def _dup_group(self, key: int) -> dict[Record, None]:
        """The records whose duplicate key is ``key``, in insertion order. O(1)."""
        group = self._dups[key]
        return group if isinstance(group, dict) else {group: None}

    def _unlink(self, rec: Record, cause: str | None) -> None:
        """Kill a live record at the working version (older snapshots keep seeing it).

        ``cause`` (``"replaced"``, ``"evicted"``, ``"deleted"``, ``"pruned"``,
        ``"merged"``, ``"expired"``) is reported to :attr:`on_remove`; None when the entry lives on
        (a merge survivor rewritten)."""
        rec.died = self.version
        if self._evict is not None:
            assert rec.evkey is not None
            self._evict[rec.cols.get(rec.slot, "validated")].remove(rec.evkey)
            rec.evkey = None
        exkey = self._exkeys.pop(rec, None)
        if exkey is not None:
            self._expiry.remove(exkey)
        key = self._dupkey(rec)
        dups = self._dups
        if self._dup_table:  # the steps below in one C call
            if dups.leave(key, rec):  # type: ignore[attr-defined]
                self._dup_keys.discard(key)
        elif isinstance(group := dups[key], dict):
            del group[rec]
            if len(group) == 1:
                dups[key] = next(iter(group))
                self._dup_keys.discard(key)
        else:
            del dups[key]
        if self._deferred is None:
            self.index.retire(rec)
        else:
            self._deferred.append((rec,))
        self._graveyard.append(rec)
        self._live -= 1
        if self.journal is not None:
            self.journal.append((JOURNAL_DELETE, rec))
        if cause is not None and self.on_remove is not None:
            self.on_remove(rec.entry, cause)

    def store(self, entry: MemoryEntry, now: datetime | None = None) -> StoreOutcome:
        """Insert ``entry``, or replace the live entry with its id, or with its
        ``(namespace, key)`` (taking that entry's id), keeping ``created_at``.

        Storing a new id into a full memory first evicts the entry with the lowest
        relevance-weighted recency (unvalidated ones first). An entry with a ``ttl`` and
        no ``expires_at`` expires at ``now + ttl``: ``now`` is the owner's time of the
        write (the state reads no clock). O(T + log n) for T distinct tokens in the text.
        The entry goes into the entries' column store before anything changes: a put
        that fails (MemoryError) leaves the state as it was.

        Raises:
            TypeError: ``entry`` is not a MemoryEntry.
            InvalidEntryError: ``entry`` has a ``ttl`` to apply and ``now`` is None.
        """
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"store() takes a MemoryEntry, not {type(entry).__name__}")
        if entry.ttl is not None and entry.expires_at is None:
            if now is None:
                raise InvalidEntryError(
                    "an entry with a ttl needs the time of the write, and the memory's "
                    "clock() did not return a timezone-aware datetime"
                )
            entry = with_access(
                entry,
                entry.access_count,
                entry.last_accessed,
                expiry(now, entry.ttl),
            )
        return self._store(entry, None)

    def store_many(self, entries: Iterable[MemoryEntry], now: datetime | None = None) -> None:
        """:meth:`store` of each of ``entries`` in order, the outcomes dropped: the same
        checks, errors and result, with less work per entry (a ``store_many`` request's
        loop). An entry that raises stops the loop; the ones before it stay stored.
        O(sum of the stores).

        Raises:
            TypeError, InvalidEntryError: As :meth:`store`, for the first entry that does.
        """
        add_many = getattr(self.index, "add_many", None)
        deferred = self._deferred
        if not _STORE_BATCH or add_many is None or (deferred is not None and not _DEFER_BATCH):
            store_one = self._store
            # The records made, untracked at the end (_UNTRACK_RECORDS; an error
            # leaves the ones before it tracked, which is only the path before it).
            made: list[Record] | None = (
                [] if _UNTRACK_RECORDS and _gc_untrack is not None and self._evict is None else None
            )
            for entry in entries:
                if type(entry) is MemoryEntry and entry.ttl is None:
                    out = store_one(entry, None)  # store()'s path for an entry without a ttl
                else:
                    out = self.store(entry, now)
                if made is not None:
                    made.append(out[0])
            if made and _gc_untrack is not None:
                _gc_untrack(made, Record)
            return
        # Deferring (a durable owner's batch, _DEFER_BATCH): a run's adds join the
        # deferred index calls, which flush_index makes by add_many.
        sink = add_many if deferred is None else deferred.extend
        by_relevance = self._by_relevance
        if (
            _STORE_C
            and _store_inserts_c is not None
            and not isinstance(self._cols, PyEntryColumns)  # (entrycols._COLS_C False)
            and (type(entries) is list or type(entries) is tuple)
            and self._evict is None
            and self._dup_key_c() is not None
            and _RELEVANCE_APPEND
            and _SORTED_INTERNALS
            and type(by_relevance) is SortedKeyList
        ):
            self._store_batch_c(entries, now, sink, _store_inserts_c)
        else:
            self._store_batch(entries, now, sink)

    def _store_batch_c(
        self,
        entries: list[MemoryEntry] | tuple[MemoryEntry, ...],
        now: datetime | None,
        add_many: Callable[[list[Record]], None],
        inserts: Callable[..., int],
    ) -> None:
        """:meth:`_store_batch` with each run of plain inserts made by the C
        ``inserts`` (:data:`_STORE_C`; its doc lists what is plain) and every other
        entry by :meth:`_store_batch` (with the next ones up to :data:`_STORE_C_RETRY`
        when the call inserted fewer than :data:`_STORE_C_FEW`), after the run before
        it is ended (its index adds made): the same structures, journal and index calls in the same
        order; an error stops the loop with the entries before it stored and their
        adds made, as there. The caller checked what the C call needs: an unbounded
        memory, the C duplicate key, the relevance order's lists. O(sum of the
        stores)."""
        by_relevance = self._by_relevance
        untrack_entry = _gc_untrack if _UNTRACK_ENTRIES else None
        untrack = _gc_untrack if _UNTRACK_RECORDS else None  # unbounded: the caller's test
        run: list[Record] = []
        run_entries: list[MemoryEntry] = []
        n = len(entries)
        i = 0
        try:
            while i < n:
                done = 0
                if not by_relevance._index:  # no positional index to keep (add's case)
                    before = len(run)
                    try:
                        i = inserts(
                            entries, i, self.version + 1, self._by_id, self._prev,
                            self._rel_parts, by_relevance._lists, by_relevance._keys,
                            by_relevance._maxes, by_relevance._load << 1, self._namespaces,
                            self._dups, self._dup_keys, self.journal, run, run_entries,
                            2 if self._rec_keys else self._seq_keys, self._cols,
                        )  # fmt: skip
                    finally:
                        done = len(run) - before  # one record a version, as the loop's
                        if done:
                            self.version = self._seq = self.version + done
                            self._live += done
                            self.stores += done
                            by_relevance._len += done
                    if i >= n:
                        break
                if run:
                    self._end_run(run, run_entries, add_many, untrack, untrack_entry)
                    run = []
                    run_entries = []
                # The entry the call stopped at, and after a call that inserted few
                # (_STORE_C_FEW: an order the batch does not append to, relevances not
                # cached) the next _STORE_C_RETRY - 1 too, by _store_batch in one frame
                # and one add_many a run: never one frame and one index call an entry.
                step = 1 if done >= _STORE_C_FEW else _STORE_C_RETRY
                self._store_batch(entries[i : i + step], now, add_many)
                i += step
        finally:
            if run:
                self._end_run(run, run_entries, add_many, untrack, untrack_entry)

    def _store_batch(
        self,
        entries: Iterable[MemoryEntry],
        now: datetime | None,
        add_many: Callable[[list[Record]], None],
    ) -> None:
        """:meth:`store_many`'s loop with the inserts' work inline (``_STORE_BATCH``): an
        entry without a ttl whose id is not live and whose key (if any) is free, into a
        memory not full, is :meth:`_store` and :meth:`_link` in one frame, its index add
        deferred to one ``add_many`` call for each run of such entries (before any other
        entry's store, and at the end): the same structures, index calls in the same
        order, the same result. Any other entry takes :meth:`store`. An insert's
        fallible steps (the namespace's lookup, the duplicate key) come before any change
        for it, so an error there leaves it out and the entries before it stored, as the
        C ``store_inserts`` does (:meth:`_store_batch_c`)."""
        by_id = self._by_id
        by_key = self._by_key
        by_relevance = self._by_relevance
        by_relevance_add = by_relevance.add
        # SortedKeyList's own lists (sortedcontainers 2.x): the end of the order.
        rel_append = _RELEVANCE_APPEND and _SORTED_INTERNALS and type(by_relevance) is SortedKeyList
        rel_keys: list[list[int]] = by_relevance._keys if rel_append else []
        rel_maxes: list[int] = by_relevance._maxes if rel_append else []
        rel_split = by_relevance._load << 1 if rel_append else 0  # longer: split
        rel_part = self._rel_parts
        seq_keys = self._seq_keys
        rec_keys = self._rec_keys
        namespaces = self._namespaces
        dups = self._dups
        dup_join = cast(Any, dups).join if self._dup_table else None
        dupkey = self._dupkey
        dup_c = self._dup_key_c()
        capacity = self.capacity
        journal = self.journal
        evict = self._evict
        untrack_entry = _gc_untrack if _UNTRACK_ENTRIES else None
        untrack = _gc_untrack if _UNTRACK_RECORDS and evict is None else None
        run: list[Record] = []  # linked records whose index add is due
        run_entries: list[MemoryEntry] = []  # their entries, untracked with the run
        try:
            for entry in entries:
                if (
                    type(entry) is not MemoryEntry
                    or entry.ttl is not None
                    or (entry.key is not None and (entry.namespace, entry.key) in by_key)
                    or (capacity is not None and self._live >= capacity)
                ):
                    if run:
                        self._end_run(run, run_entries, add_many, untrack, untrack_entry)
                        run = []
                        run_entries = []
                    self.store(entry, now)
                    continue
                ident = entry._id
                old = by_id.get(ident)
                if old is not None and old.died == NEVER:  # an upsert
                    if run:
                        self._end_run(run, run_entries, add_many, untrack, untrack_entry)
                        run = []
                        run_entries = []
                    self.store(entry, now)
                    continue
                # _store's insert, inline (_link's untracking of the entry at the run's end).
                # Its fallible steps first (the namespace's and the duplicate key's hashes,
                # the put into the column store): an error there leaves the entry out and
                # the state whole (the store too: a put before a failing key is undone).
                namespace = entry.namespace
                records = namespaces.get(namespace)
                version = self.version + 1
                memory = entry.memory
                if dup_c is not None and type(memory) is str:  # _dupkey_hashed's C call
                    dkey = dup_c(namespace, entry.category._value_, memory, entry.key, entry.value)
                    rec = Record(entry, version, version, self._cols)
                else:
                    rec = Record(entry, version, version, self._cols)
                    try:
                        dkey = dupkey(rec)
                    except BaseException:
                        self._cols.release(rec.slot)
                        raise
                self.version = self._seq = version
                if old is not None:
                    self._prev[rec] = old
                # _link, inline (the index add deferred to the run's add_many)
                by_id[ident] = rec
                part = rel_part.get(entry.relevance) if rel_append else None
                key: Any
                if part is None:
                    key = 0
                elif seq_keys:  # _relevance_key_seq's (_relevance_key_rec's: the record)
                    key = part | version if part else rec if rec_keys else version
                else:
                    key = part | (version << _SEQ_SHIFT) | version
                if (
                    part is not None
                    and rel_maxes
                    and key > rel_maxes[-1]
                    and len(rel_keys[-1]) < rel_split
                    and not by_relevance._index
                ):  # SortedKeyList.add's append at the end, inline (_relevance_key's key)
                    by_relevance._lists[-1].append(rec)
                    rel_keys[-1].append(key)
                    rel_maxes[-1] = key
                    by_relevance._len += 1
                else:
                    by_relevance_add(rec)
                if entry.key is not None:
                    by_key[(entry.namespace, entry.key)] = ident
                if records is None:
                    records = namespaces[namespace] = _NsRecords()
                    self._ns_sorted.add(namespace)
                records.recs.append(rec)
                records.live += 1
                expires = entry.expires_at  # a new record has no access yet
                if expires is not None:
                    self._ever_expiring = True
                    exkey = self._exkeys[rec] = (expires.timestamp(), rec)
                    self._expiry.add(exkey)
                if evict is not None:
                    rec.evkey = self._evkey(rec)
                    evict[entry.validated].add(rec.evkey)
                if dup_join is not None:  # _DUP_TABLE: the steps below in one C call
                    if dup_join(dkey, rec):
                        self._dup_keys.add(dkey)
                elif (group := dups.get(dkey)) is None:
                    dups[dkey] = rec
                elif isinstance(group, dict):
                    group[rec] = None
                else:
                    dups[dkey] = {group: None, rec: None}
                    self._dup_keys.add(dkey)
                run.append(rec)
                run_entries.append(entry)
                self._live += 1
                if journal is not None:
                    journal.append((JOURNAL_PUT, rec))
                self.stores += 1
        finally:
            if run:
                self._end_run(run, run_entries, add_many, untrack, untrack_entry)

    @staticmethod
    def _end_run(
        run: list[Record],
        entries: list[MemoryEntry],
        add_many: Callable[[list[Record]], None],
        untrack: Callable[[list[Any], type], int] | None,
        untrack_entry: Callable[[list[Any], type], int] | None,
    ) -> None:
        """:meth:`_store_batch`'s end of a run of inserts: its records and entries out
        of the collector's sight (when given), then their index adds. O(len(run))."""
        if untrack_entry is not None:
            untrack_entry(entries, MemoryEntry)  # exact MemoryEntry: _store_batch's test
        if untrack is not None:
            untrack(run, Record)
        add_many(run)

    def _store(self, entry: MemoryEntry, new_seq: int | None) -> StoreOutcome:
        """:meth:`store`'s work (``new_seq``: :meth:`restore`'s saved seq, or None). The
        entry goes into the column store (the record made) before any change: a put that
        raises (MemoryError, or a refused entry) leaves the state as it was, no entry
        unlinked or evicted. O(T + log n)."""
        version = self.version + 1
        if new_seq is not None and version <= new_seq:
            version = new_seq  # restore: versions may jump; born and seq one int object
        if entry.key is not None:
            other_id = self._by_key.get((entry.namespace, entry.key))
            if other_id is not None and other_id != entry._id:
                other = self._by_id.get(other_id)
                if (
                    other is not None
                    and other.died == NEVER
                    and other.cols.get(other.slot, "key") == entry.key
                    and other.cols.get(other.slot, "namespace") == entry.namespace
                ):
                    entry = attrs.evolve(entry, id=other.entry.id)  # the key wins
        old = self._by_id.get(entry._id)
        replaced = old if old is not None and old.died == NEVER else None
        if replaced is not None:
            created = replaced.cols.get(replaced.slot, "created_at")
            if entry.created_at != created:
                entry = attrs.evolve(
                    entry, created_at=created, updated_at=max(entry.updated_at, created)
                )
            seq = replaced.seq
        else:
            # A new id's seq is the version that stores it (so seqs order ids by first
            # arrival), unless restored: then born and seq are one int object, not two.
            seq = version if new_seq is None else new_seq
        rec = Record(entry, version, seq, self._cols)  # the put: nothing changed before it
        self.version = version
        evicted = None
        if replaced is not None:
            self._unlink(replaced, "replaced")
            self.upserts += 1
        else:
            if self.capacity is not None and self._live >= self.capacity:
                evicted = self._evict_one()
            self._seq = seq
        if old is not None:
            self._prev[rec] = old
        self._link(rec)
        self.stores += 1
        return _outcome(StoreOutcome, (rec, replaced, evicted))

    def restore(self, entry: MemoryEntry, seq: int) -> StoreOutcome:
        """Store ``entry``, read back from a file, under its saved insertion number ``seq``
        (which orders ties and the file's rows), instead of the next one. O(as store).

        Raises:
            ValueError: ``seq`` is not above every number given out so far (a file's rows
                are restored in ascending ``seq``), or ``entry``'s id is live already.
        """
        if seq <= self._seq:
            raise ValueError(f"restore(): seq {seq} is not above {self._seq}")
        old = self._by_id.get(entry._id)
        if old is not None and old.died == NEVER:
            raise ValueError(f"restore(): id {entry.id} is stored already")
        return self._store(entry, seq)  # versions may jump: then its version is seq

    def load(
        self,
        rows: Iterable[tuple[int, MemoryEntry]],
        image: Mapping[str, bytes] | None = None,
        prepared: Any = None,
        fed: _BulkFeed | None = None,
    ) -> list[int]:
        """Rebuild this empty state from a file's ``(seq, entry)`` rows, in ascending seq;
        return the seqs that eviction dropped while loading (a ``capacity`` below the
        file's count), for the caller to delete from the file.

        The narrow entry point storage needs: it decodes rows, the engine restores them.
        Turns the journal on, leaves the state published and its store counters at zero
        (loading is not storing). O(n (T + log n)).

        ``image``: the file's index image (``actormem._index.images``), used instead of
        adding every record to the index when the rows load in bulk and it describes
        exactly them; otherwise (stale, foreign, corrupt) the index is rebuilt and one
        line logged. Then O(n log n + image size). ``prepared``: :meth:`prepare_image`'s
        object for ``image`` (its steps maybe run ahead, while the rows were read), or None.
        ``fed``: :meth:`feed_ahead`'s feed, which may have loaded the first rows of
        ``rows`` while they were read (used only if it fits them; else ignored), or None.

        The library never calls ``gc.freeze()`` (process-wide: a reference cycle alive
        then, of the application or of the memory's own owner, would never be collected
        after the memory closes); an application that keeps a large memory open for
        long may freeze after opening it (docs/design.md, "Garbage collection").

        Raises:
            ValueError: As :meth:`restore`.
        """
        assert len(self) == 0
        self.journal = []
        with gc_paused():  # what loading builds lives on: nothing for the collector
            # A list is loaded in bulk when it can be; another iterable (the dense
            # index's rows, whose vectors are offered chunk by chunk) row by row.
            run = None
            # the rows in the store's form (the compiled reader put each entry in it):
            # (seq, slot), each record made on its slot
            cols = getattr(rows, "cols", None)
            if fed is not None and isinstance(rows, list):
                run = fed.take(self, rows)
            if run is not None:  # the first rows loaded as they were read: the rest now
                assert isinstance(rows, list)
                if image is None:
                    records = run.finish(self)
                    add = self.index.add
                    for rec in records:  # the adds _load_bulk makes, in the rows' order
                        add(rec)
                else:
                    fresh = self.scorer.make_index()
                    early = start_restore(fresh, rows)
                    try:
                        records = run.finish(self)
                        self._index_from_image(image, records, prepared, fresh, early)
                    finally:
                        if early is not None:
                            early.stop()
            elif isinstance(rows, list) and self._bulk_loadable(rows, cols):
                if cols is not None:
                    self._cols = cols  # (empty: nothing of this state is in its own)
                if image is None:
                    self._load_bulk(rows)
                else:
                    # the restore's thread started from the rows, beside the load
                    fresh = self.scorer.make_index()
                    early = start_restore(fresh, rows)
                    try:
                        records = self._load_bulk(rows, index=False)
                        self._index_from_image(image, records, prepared, fresh, early)
                    finally:
                        if early is not None:
                            early.stop()  # (a no-op once the restore ended it)
            elif cols is not None:  # each entry built from the rows' store, put in ours
                for seq, slot in rows:
                    self.restore(cols.entry(slot), seq)
            else:
                for seq, entry in rows:
                    self.restore(entry, seq)  # keeps the file's seq, hence the order of ties
        evicted = [rec.seq for kind, rec in self.take_journal() if kind == JOURNAL_DELETE]
        self.stores = self.upserts = 0
        self.publish()
        return evicted

    def _bulk_loadable(self, rows: list[Any], cols: Any = None) -> bool:
        """Whether restoring ``rows`` one by one would only insert: nothing evicted (they
        fit the capacity), no two live under one ``(namespace, key)`` (which would make
        a store an upsert). Then :meth:`_load_bulk` gives the same state. ``cols``: as
        :func:`_keys_unique`'s. O(n)."""
        if self.capacity is not None and len(rows) > self.capacity:
            return False
        return _keys_unique(rows, 0, len(rows), set(), cols)

    def feed_ahead(self) -> _BulkFeed | None:
        """A :class:`_BulkFeed` for this empty state's open (its ``consume``), or None
        (:data:`_FEED_AHEAD` off, a bounded state, no compiled ``load_inserts`` for it).
        Touches nothing of this state. O(1)."""
        if not _FEED_AHEAD or self.capacity is not None or len(self) or self._seq:
            return None
        if self._load_c(False, self._dup_key_c() if _BULK_FOLDS else None) is None:
            return None
        return _BulkFeed(self)

    def prepare_image(self, image: Mapping[str, bytes]) -> Any:
        """The image-only part of restoring this (empty) state's index from ``image``,
        to step through ahead of the rows (``images.prepare_index``: ``step()`` runs one
        bounded step and tells whether steps remain; it never raises an ``Exception``),
        or None (no such part for this scorer). Touches nothing of the state: it may
        run in another thread while nothing else uses the state. O(1)."""
        return prepare_index(self.scorer.make_index(), image)

    def _index_from_image(
        self,
        image: Mapping[str, bytes],
        records: list[Record],
        prepared: Any = None,
        fresh: Any = None,
        early: Any = None,
    ) -> None:
        """The index restored from ``image`` for ``records`` (every record, in seq
        order), or, if the image does not fit them, rebuilt by adding each (logged).
        ``prepared``: :meth:`prepare_image`'s object for ``image``, or None. ``fresh``:
        a new empty index of the scorer to restore into (None: one made here);
        ``early``: ``images.start_restore``'s object for ``fresh`` and the rows, or None."""
        try:
            self.index = cast(
                "ScoringIndex",
                restore_index(
                    fresh if fresh is not None else self.scorer.make_index(),
                    image,
                    records,
                    prepared,
                    early,
                ),
            )
        except Exception as exc:  # the image is untrusted: whatever it does, rebuild
            logging.getLogger("actormem").warning(
                "actormem: the file's index image was not used (%s);"
                " building the index from the rows",
                exc,
                exc_info=not isinstance(exc, ImageError),  # a check missed it: a bug
            )
            add = self.index.add
            for rec in records:
                add(rec)

    def _load_bulk(
        self, rows: list[tuple[int, MemoryEntry]], *, index: bool = True
    ) -> list[Record]:
        """:meth:`restore` of every row, for rows :meth:`_bulk_loadable` admits: the
        same records, index calls and structures, but the sorted orders (relevance,
        eviction, expiry) are sorted once at the end instead of one insertion per row.
        The journal gets no puts (:meth:`load` discards them; it keeps the deletes).

        Runtime complexity: O(n log n) sorting in C, plus the index's ``add`` per row
        (none with ``index=False``: the caller fills the index). Returns the records.

        Raises:
            ValueError: As :meth:`restore` (seqs not ascending, an id twice); the state is
                then unusable, as after a failed :meth:`restore` halfway through a load.
        """
        run = _BulkRun(self, len(rows), index)
        run.feed(rows, getattr(rows, "folds", None), getattr(rows, "cols", None))
        return run.finish(self)

    def _load_c(self, bounded: bool, dup_c: Any) -> Callable[..., int] | None:
        """The C ``load_inserts`` for this load (:data:`_LOAD_C`), or None: only for an
        unbounded state in the seq layout whose ids and groups are the C tables and
        whose duplicate keys are the C ``dup_key``'s (the formula it computes). O(1)."""
        if (
            not _LOAD_C
            or _load_inserts_c is None
            or bounded
            or not self._seq_keys
            or dup_c is None
            or not self._dup_table
            or type(self._by_id) is dict
            or not _SORTED_INTERNALS
        ):
            return None
        return _load_inserts_c

    def _load_rows(
        self,
        rows: list[tuple[int, MemoryEntry]],
        at: int,
        stop: int,
        fold_iter: Iterable[Any],
        last: int,
        records: list[Record],
        exact: list[MemoryEntry],
        new_ns: list[tuple[str, ...]],
        expiry_keys: list[tuple[float, Record]],
        evict_keys: tuple[list[tuple[float, Record]], list[tuple[float, Record]]],
        keys: list[int] | None,
        dup_f: Any,
        dup_c: Any,
        dup_join: Any,
        add: Any,
        cols: Any = None,
    ) -> int:
        """:meth:`_load_bulk`'s loop over ``rows[at:stop]`` (``fold_iter`` their folds, or
        Nones), ``last`` the seq before them; each row's record appended to ``records``
        (its relevance key to ``keys`` unless None). ``cols``: None, the rows are
        ``(seq, entry)``; else ``(seq, slot)`` in that store (the state's), each record
        made on its slot. Returns ``stop``. O(stop - at).

        Raises:
            ValueError: As :meth:`restore`.
        """
        by_id = self._by_id
        by_key = self._by_key
        namespaces = self._namespaces
        dups = self._dups
        bounded = self._evict is not None
        untrack = None  # no entry is kept (the state's store holds its fields)
        relkey = self._relkey
        part = rows if at == 0 and stop == len(rows) else rows[at:stop]
        item: Any
        for (seq, item), row_fold in zip(part, fold_iter, strict=False):
            if seq <= last:
                raise ValueError(f"restore(): seq {seq} is not above {last}")
            last = seq
            entry = item if cols is None else cols.entry(item)
            ident = entry._id
            if ident in by_id:
                raise ValueError(f"restore(): id {entry.id} is stored already")
            if cols is None:
                rec = Record(entry, seq, seq, self._cols)
            else:  # the entry in the store already: the record on its slot
                rec = Record.on_slot(cols, item, seq, seq)
            if untrack is not None and type(entry) is MemoryEntry:  # as _link, at the end
                exact.append(entry)
            records.append(rec)
            by_id[ident] = rec
            if entry.key is not None:
                by_key[(entry.namespace, entry.key)] = ident
            group = namespaces.get(entry.namespace)
            if group is None:
                group = namespaces[entry.namespace] = _NsRecords()
                new_ns.append(entry.namespace)
            group.recs.append(rec)  # group.add(rec), inline
            group.live += 1
            expires = entry.expires_at  # rec.current_expires(): a new record has no access
            if expires is not None:
                exkey = self._exkeys[rec] = (expires.timestamp(), rec)
                expiry_keys.append(exkey)
            if bounded:
                rec.evkey = self._evkey(rec)
                evict_keys[entry.validated].append(rec.evkey)
            memory = entry.memory
            if dup_f is not None and type(memory) is str:
                key = dup_f(
                    entry.namespace, entry.category._value_, memory, entry.key, entry.value,
                    row_fold,
                )  # fmt: skip
            elif dup_c is not None and type(memory) is str:
                key = dup_c(entry.namespace, entry.category._value_, memory, entry.key, entry.value)
            else:
                key = self._dupkey(rec)
            if dup_join is not None:  # _DUP_TABLE: the steps below in one C call
                if dup_join(key, rec):
                    self._dup_keys.add(key)
            elif (same := dups.get(key)) is None:
                dups[key] = rec
            elif isinstance(same, dict):
                same[rec] = None
            else:
                dups[key] = {same: None, rec: None}
                self._dup_keys.add(key)
            if add is not None:
                add(rec)
            if keys is not None:
                keys.append(relkey(rec))
        return stop

    def _dup_key_c(self) -> Callable[[Any, Any, str, Any, Any], int] | None:
        """The C ``dup_key`` a batch or a load calls inline for an exact ``str`` text (what
        :func:`_dupkey_hashed` calls), when this state keys by the fold hash and
        :data:`_DUPKEY_C` is on; else None (``self._dupkey(rec)`` per record). O(1)."""
        return textfold._dup_key_c if _DUPKEY_C and self._dupkey is _dupkey_hashed else None

    def _relevance_fill(self, records: list[Record], keys: list[int] | None = None) -> None:
        """``self._by_relevance.update(records)``; into an empty list, with each key
        computed once (``update`` computes it for the sort and again for the key lists)
        and no sort when the keys already ascend (every relevance equal, as loaded
        records in seq order mostly are) (``_RELEVANCE_FILL``). ``keys``: the records'
        keys (``self._relkey`` of each, one a record) already computed, or None.
        O(n log n), O(n) sorted."""
        by_relevance = self._by_relevance
        if not (
            _RELEVANCE_FILL
            and _SORTED_INTERNALS
            and type(by_relevance) is SortedKeyList
            and not len(by_relevance)
            and records
        ):
            by_relevance.update(records)
            return
        if keys is None or len(keys) != len(records):
            keys = list(map(self._relkey, records))
        # Keys are unique (seq; loaded records are one per id), so the order is theirs
        # alone (a stable sort keeps equal ones in the order given); one linear pass tells
        # whether they already ascend, and only then is anything sorted (once).
        if any(map(operator.ge, keys, islice(keys, 1, None))):
            order = sorted(range(len(keys)), key=keys.__getitem__)
            records = list(map(records.__getitem__, order))
            keys = list(map(keys.__getitem__, order))
        load = by_relevance._load
        by_relevance._lists.extend(records[i : i + load] for i in range(0, len(records), load))
        by_relevance._keys.extend(keys[i : i + load] for i in range(0, len(keys), load))
        by_relevance._maxes.extend(chunk[-1] for chunk in by_relevance._keys)
        by_relevance._len = len(records)
        del by_relevance._index[:]

    def _relevance_remove(self, rec: Record) -> None:
        """``self._by_relevance.remove(rec)`` for :func:`_relevance_key_rec`'s keys, whose
        ``remove`` would stop at the first version of the id (keys of versions are
        equal in the order but not ``==``): the first key not below ``rec``'s, then the
        records from there (its id's versions, in the order of their births) by
        identity. ValueError when ``rec`` is not in the order. O(log n + versions)."""
        order = self._by_relevance
        key = self._relkey(rec)
        maxes = order._maxes
        pos = bisect_left(maxes, key)
        if pos < len(maxes):
            lists = order._lists
            idx = bisect_left(order._keys[pos], key)
            while pos < len(lists):
                sub = lists[pos]
                while idx < len(sub):
                    other = sub[idx]
                    if other is rec:
                        order._delete(pos, idx)
                        return
                    if other.seq != rec.seq:
                        raise ValueError(f"{rec!r} not in the relevance order")
                    idx += 1
                pos += 1
                idx = 0
        raise ValueError(f"{rec!r} not in the relevance order")

    def _evict_one(self) -> Record:
        """Evict the live record with the smallest fresh eviction key, unvalidated first.

        Stored keys are lower bounds of the fresh ones (access bookkeeping only raises a
        key and does not re-sort; see :meth:`apply_access`), so the front is popped and
        re-filed under its fresh key until the front's stored key is fresh: then no
        other record's fresh key can be smaller. O(log n) amortized per access since."""
        assert self._evict is not None, "unbounded: nothing to evict"
        unvalidated, validated = self._evict
        order = unvalidated or validated
        while True:
            stale = order[0]
            rec: Record = stale[1]
            fresh = self._evkey(rec)
            if fresh[0] == stale[0]:
                break
            del order[0]
            rec.evkey = fresh
            order.add(fresh)
        self._unlink(rec, "evicted")
        self.evictions += 1
        self._evictions_since_consolidate += 1
        return rec

    def delete(self, id: uuid.UUID) -> Record | None:
        """Remove the live entry ``id``; return its record, or None if absent. O(T + log n)."""
        if not isinstance(id, uuid.UUID):
            raise TypeError(f"delete() takes a uuid.UUID, not {type(id).__name__}")
        rec = self.current(id)
        if rec is None:
            return None
        self.version += 1
        self._unlink(rec, "deleted")
        self.deletes += 1
        return rec

    def apply_access(self, hits: Mapping[Any, tuple[int, datetime]], horizon: int) -> int:
        """Add retrieve hits to access bookkeeping; return how many entries changed.

        ``hits`` maps id -> (times returned, latest retrieve time), each id a
        :class:`uuid.UUID` or its 128-bit int (``MemoryEntry._id``), or each key a hit's
        :class:`Record` (one no longer live stands for its id). Ids no longer live
        are ignored. O(h) for h ids: the eviction order is not re-sorted (see
        :meth:`_evict_one`), except for an entry whose key went down.
        """
        if not hits:
            return 0
        kinds = 0  # 1: an id, 2: a live record, 4: a record no longer live
        for key in hits:
            kinds |= (2 if key.died == NEVER else 4) if type(key) is Record else 1
        if kinds & 4 or kinds == 3:
            # Some hits' records are no longer live (an upsert or a delete since the
            # retrieve), or records beside ids (a knob switched with hits pending): by
            # id, as the reader would have noted them, so that two records of one id
            # make one update, in the order the id came first.
            hits = _merged_by_id(hits)
        self.version += 1
        changed = 0
        by_id = self._by_id
        id: Any
        for id, (times, when) in hits.items():
            if type(id) is Record:
                rec: Record | None = id  # live (see above): the id's current record
            else:
                rec = by_id.get(id if type(id) is int else id.int)
            if rec is None or rec.died != NEVER:  # as current(): live records only
                continue
            # rec.current_access() and rec.current_expires(), inline.
            prev = rec.access
            if prev is None:
                cols, s = rec.cols, rec.slot
                count = cols.get(s, "access_count")
                last = cols.get(s, "last_accessed")
                expires = cols.get(s, "expires_at")
            else:
                count, last, expires = prev.count, prev.last, prev.expires
                if expires is None:
                    expires = rec.cols.get(rec.slot, "expires_at")
            newest = when if last is None or when > last else last
            if prev is not None and prev.version <= horizon:
                prev.prev = None  # no snapshot needs anything older than prev
            rec.access = Access(self.version, count + times, newest, prev, expires)
            if (
                last is None
                and self._evict is not None
                and newest < rec.cols.get(rec.slot, "created_at")
            ):
                # The key went down (a retrieve dated before created_at): keys in the
                # eviction order may only be stale from below, so re-sort it now.
                assert rec.evkey is not None
                order = self._evict[rec.cols.get(rec.slot, "validated")]
                order.remove(rec.evkey)
                rec.evkey = self._evkey(rec)
                order.add(rec.evkey)
            # Otherwise the key only rose: its entry in the eviction order is left stale
            # (a lower bound), and refreshed if it ever reaches the front (_evict_one).
            if self.journal is not None:
                self.journal.append((JOURNAL_ACCESS, rec))
            changed += 1
        self.access_updates += changed
        return changed

    def next_expiry(self) -> float | None:
        """A lower bound of the earliest expiry of a live record (POSIX time), or None
        when none expires: when the owner should next call :meth:`expire`. O(1)."""
        return self._expiry[0][0] if self._expiry else None

    def expire(self, now: datetime) -> int:
        """Remove every live record whose expiry is at or before ``now`` (cause
        ``"expired"``); return how many. ``now`` is the owner's time (see the module
        docs). O(log n) per expired record, plus one per stale key re-filed."""
        order = self._expiry
        limit = now.timestamp()
        done = 0
        while order and order[0][0] <= limit:
            stale = order[0]
            rec: Record = stale[1]
            fresh = rec.current_expires()
            assert fresh is not None
            if fresh.timestamp() > stale[0]:  # refreshed since: re-file, look again
                del order[0]
                exkey = self._exkeys[rec] = (fresh.timestamp(), rec)
                order.add(exkey)
                continue
            if done == 0:
                self.version += 1
            self._unlink(rec, "expired")
            done += 1
        self.expired += done
        return done

    def refresh(self, reads: dict[uuid.UUID, datetime], horizon: int) -> int:
        """Push the expiry of each read entry that has a ``ttl`` to its read's time plus
        the ttl (never earlier than it was); return how many changed.

        ``reads`` maps id -> the latest time it was read with ``refresh_ttl=True``; ids no
        longer live, or without a ttl, are skipped. The expiry order is left stale from
        below (see :meth:`expire`). O(r) for r ids.
        """
        if not reads:
            return 0
        self.version += 1
        changed = 0
        for id, when in reads.items():
            rec = self.current(id)
            if rec is None or rec.cols.get(rec.slot, "ttl") is None:
                continue
            old = rec.current_expires()
            new = expiry(when, rec.cols.get(rec.slot, "ttl"))
            if old is not None and new <= old:
                continue
            count, last = rec.current_access()
            prev = rec.access
            if prev is not None and prev.version <= horizon:
                prev.prev = None
            rec.access = Access(self.version, count, last, prev, new)
            if self.journal is not None:
                self.journal.append((JOURNAL_ACCESS, rec))
            changed += 1
        self.ttl_refreshes += changed
        return changed

    def consolidate(self) -> ConsolidationStats:
        """Prune and merge (see :meth:`Memory.consolidate`). O((p + d) log n) for p pruned
        and d duplicate entries: neither step scans the whole memory."""
        self.version += 1
        before = self._live
        pruned = merged = saved = 0
        # Prune: relevance < PRUNE_BELOW, not validated. The tail of the relevance order.
        low = [
            r
            for r in self._by_relevance.irange_key(
                min_key=self._below(PRUNE_BELOW), inclusive=(False, True)
            )
            if r.died == NEVER and not r.cols.get(r.slot, "validated")
        ]
        for rec in low:
            self._unlink(rec, "pruned")
            pruned += 1
            saved += len(rec.cols.text(rec.slot).encode("utf-8"))
        # Merge exact duplicates (same namespace, category, folded text).
        groups = [list(self._dup_group(key)) for key in self._dup_keys]
        for group in groups:
            by_key: dict[tuple[Any, ...], list[Record]] = {}
            for rec in group:
                by_key.setdefault(_normalised(rec), []).append(rec)
            for recs in by_key.values():
                if len(recs) < 2:
                    continue
                recs.sort(key=lambda r: r.seq)
                keep = recs[0]
                entries = [r.entry for r in recs]
                accesses = [r.current_access() for r in recs]
                tags: dict[str, None] = {}
                for e in entries:
                    tags.update(dict.fromkeys(e.tags))
                lasts = [last for _, last in accesses if last is not None]
                merged_entry = attrs.evolve(
                    keep.entry,
                    created_at=min(e.created_at for e in entries),
                    relevance=max(e.relevance for e in entries),
                    access_count=sum(c for c, _ in accesses),
                    last_accessed=max(lasts) if lasts else None,
                    tags=tuple(tags),
                    validated=any(e.validated for e in entries),
                    expires_at=keep.current_expires(),
                )
                for rec in recs[1:]:
                    self._unlink(rec, "merged")
                    merged += 1
                    saved += len(rec.cols.text(rec.slot).encode("utf-8"))
                self._unlink(keep, None)
                new = Record(merged_entry, self.version, keep.seq, self._cols)
                self._prev[new] = keep
                self._link(new)
        stats = ConsolidationStats(
            entries_before=before,
            entries_after=self._live,
            pruned=pruned,
            merged=merged,
            evicted=self._evictions_since_consolidate,
            bytes_saved=saved,
        )
        self._evictions_since_consolidate = 0
        self.pruned += pruned
        self.merged += merged
        self.consolidations += 1
        return stats

    # ------------------------------------------------------------------ vacuum

    def vacuum(self, horizon: int, budget: int | None = None) -> int:
        """Purge dead records no snapshot at or after ``horizon`` can see; return how many.

        ``horizon`` must be at most the published version and at most every live
        snapshot's version. At most ``budget`` records are purged (None: all).
        O(T + log n) per purged record.
        """
        assert horizon <= self.published
        assert self._deferred is None
        grave = self._graveyard
        done = 0
        while grave and grave[0].died <= horizon and (budget is None or done < budget):
            rec = grave.popleft()
            self._purge(rec)
            done += 1
        order = self._key_prev_order
        while order and order[0].born <= horizon:  # no view older than it: not needed
            self._key_prev.pop(order.popleft(), None)
        index_vacuum = getattr(self.index, "vacuum", None)
        if index_vacuum is not None:
            index_vacuum(horizon)  # optional: scorers with per-version statistics (BM25)
        return done

    def _purge(self, rec: Record) -> None:
        rec.purged = True
        if self._rec_keys:
            self._relevance_remove(rec)
        else:
            self._by_relevance.remove(rec)
        self.index.purge(rec)
        e = rec.entry
        if self._namespaces[e.namespace].purged():
            del self._namespaces[e.namespace]
            self._ns_sorted.remove(e.namespace)
        id = e._id
        head = self._by_id.get(id)
        prev = self._prev
        if head is rec and rec not in prev and e.key is not None:
            if self._by_key.get((e.namespace, e.key)) == id:
                del self._by_key[(e.namespace, e.key)]  # the id's last version goes
        if head is rec:
            del self._by_id[id]
        else:
            cur = head
            while cur is not None and prev.get(cur) is not rec:
                cur = prev.get(cur)
            if cur is not None:
                del prev[cur]
        prev.pop(rec, None)
        if self._key_prev:
            self._key_prev.pop(rec, None)
        cols = rec.cols
        # A retrieve's hits noted by record (memory._ACCESS_BY_REC) may still hold it
        # (apply_access reads its id), and a scorer's lists until their own vacuum (its
        # relevance): both kept here, not read from a slot that may be reused.
        rec.cols = _PurgedCols(id, cols.relevance(rec.slot))
        cols.release(rec.slot)  # no snapshot sees it: its slot may be reused

    # ------------------------------------------------------------------ checks

    def _check(self) -> None:
        """Assert every invariant of every structure. O(n log n); for tests."""
        assert self._deferred is None
        if type(self._by_id) is not dict:  # _ID_TABLE: the C table's own layout
            cast(Any, self._by_id)._check()
        live = [r for r in self._by_id.values() if r.died == NEVER]
        assert len(live) == self._live
        assert self.capacity is None or self._live <= self.capacity
        assert self.published <= self.version
        unpurged: list[Record] = []
        for key, head in self._by_id.items():
            assert head.cols.ident(head.slot) == key
            r: Record | None = head
            newer: Record | None = None
            while r is not None:
                assert not r.purged
                assert r.cols.ident(r.slot) == key
                if newer is not None:
                    assert r.died <= newer.born, "versions of one id overlap"
                    assert r.seq == newer.seq or r.died != NEVER
                unpurged.append(r)
                newer, r = r, self._prev.get(r)
        assert {id(k) for k in self._prev} <= {id(r) for r in unpurged}, "stale _prev"
        assert all(not r.purged for r in self._prev.values())
        assert {id(k) for k in self._key_prev} <= {id(r) for r in unpurged}, "stale _key_prev"
        assert all(r.cols.get(r.slot, "key") is not None for r in self._key_prev)
        assert {id(r) for r in self._key_prev} <= {id(r) for r in self._key_prev_order}
        graveyard = list(self._graveyard)
        assert all(a.died <= b.died for a, b in zip(graveyard, graveyard[1:], strict=False))
        assert all(r.died != NEVER and not r.purged for r in graveyard)
        assert {id(r) for r in unpurged if r.died != NEVER} == {id(r) for r in graveyard}
        if all(r.cols is self._cols for r in unpurged):  # (a scratch's records: its store)
            assert len(self._cols) == len(unpurged), "a slot of the store no record holds"
        # Relevance order holds exactly the unpurged records.
        self._by_relevance._check()
        assert sorted(map(id, self._by_relevance)) == sorted(map(id, unpurged))
        assert self._by_relevance.key is self._relkey
        # Records of one key are versions of one id, in the order of their births.
        order = list(self._by_relevance)
        for a, b in zip(order, order[1:], strict=False):
            if _same_key(self._relkey(a), self._relkey(b)):
                assert a.cols.ident(a.slot) == b.cols.ident(b.slot)
                assert a.born < b.born
        if self._rec_keys:  # a relevance-1.0 record's key is the record itself
            assert all(
                k is r
                for sub_k, sub_r in zip(
                    self._by_relevance._keys, self._by_relevance._lists, strict=True
                )
                for k, r in zip(sub_k, sub_r, strict=True)
                if r.cols.relevance(r.slot) == 1.0
            )
        elif self._seq_keys:  # a relevance-1.0 record's key is its seq (int) itself
            assert all(
                k == r.seq and (k is r.seq or type(r) is not PyRecord)
                for sub_k, sub_r in zip(
                    self._by_relevance._keys, self._by_relevance._lists, strict=True
                )
                for k, r in zip(sub_k, sub_r, strict=True)
                if r.cols.relevance(r.slot) == 1.0
            )
        # Eviction order (bounded memories only) holds exactly the live records, each
        # under a key at most its fresh key (access only raises keys; _evict_one
        # refreshes the front).
        if self._evict is None:
            assert self.capacity is None
            assert all(r.evkey is None for r in unpurged)
        for validated, order in enumerate(self._evict or ()):
            order._check()
            mine = [r for r in live if r.cols.get(r.slot, "validated") == validated]
            # each record's own key (the compiled record's evkey is a new, equal tuple)
            assert sorted((k, id(r)) for k, r in order) == sorted(
                (r.evkey[0], id(r)) for r in mine if r.evkey is not None
            )
            assert all(r.evkey is not None and r.evkey[1] is r for r in mine)
        for r in live if self._evict is not None else ():
            assert r.evkey is not None
            assert r.evkey[1] is r
            assert r.evkey[0] <= self._evkey(r)[0]
        # Duplicate groups hold exactly the live records, by their hash.
        dup_total = 0
        assert self._dup_table == (type(self._dups) is not dict)
        if self._dup_table:
            cast(Any, self._dups)._check()  # its own layout
        assert self._dup_keys == {k for k, g in self._dups.items() if isinstance(g, dict)}
        for dupkey in self._dups:
            group = self._dup_group(dupkey)
            assert len(group) >= 2 or dupkey not in self._dup_keys
            for r in group:
                assert r.died == NEVER
                assert self._dupkey(r) == dupkey
            dup_total += len(group)
        assert dup_total == self._live
        # Keys: each live keyed record is found under its key; no two share one.
        keys = [
            (r.cols.get(r.slot, "namespace"), r.cols.get(r.slot, "key"))
            for r in live
            if r.cols.get(r.slot, "key") is not None
        ]
        assert len(keys) == len(set(keys)), "two live entries share a (namespace, key)"
        for r in live:
            e = r.entry
            if e.key is not None:
                assert self._by_key[(e.namespace, e.key)] == e._id
        # Namespaces index: exactly the unpurged records, by namespace.
        assert list(self._ns_sorted) == sorted(self._namespaces)
        by_ns: dict[tuple[str, ...], set[int]] = {}
        for r in unpurged:
            by_ns.setdefault(r.cols.get(r.slot, "namespace"), set()).add(id(r))
        assert {
            ns: {id(r) for r in group.recs if not r.purged}
            for ns, group in self._namespaces.items()
        } == by_ns
        for ns_group in self._namespaces.values():
            assert ns_group.live == sum(not r.purged for r in ns_group.recs) > 0
            dead = len(ns_group.recs) - ns_group.live
            assert ns_group._next is not None or 4 * dead <= len(ns_group.recs)
        # Expiry order: exactly the live records that expire, keys at most the fresh ones.
        self._expiry._check()
        expiring = [r for r in live if r.current_expires() is not None]
        assert sorted(map(id, self._expiry)) == sorted(id(self._exkeys[r]) for r in expiring)
        assert len(self._exkeys) == len(expiring)
        for r in expiring:
            exkey = self._exkeys[r]
            assert exkey[1] is r
            fresh = r.current_expires()
            assert fresh is not None
            assert exkey[0] <= fresh.timestamp()
        assert self._ever_expiring or not expiring
        self.index._check([r for r in self._by_relevance])


def _keys_unique(
    rows: list[Any],
    at: int,
    stop: int,
    keys: set[tuple[tuple[str, ...], str]],
    cols: Any = None,
) -> bool:
    """Whether no two of ``rows[at:stop]``, nor one of them and a pair already in
    ``keys``, share a ``(namespace, key)``; the pairs seen are added to ``keys`` (the
    check of :meth:`MemoryState._bulk_loadable`, in runs). ``cols``: None, the rows are
    ``(seq, entry)``; else the store they are ``(seq, slot)`` in. O(stop - at)."""
    # a list or the reader's list subclass (its folds): its storage, as load_inserts
    skip = _next_keyed_c if _KEYS_C and isinstance(rows, list) else None
    while at < stop:
        if skip is not None:
            # past the plain rows without a key
            at = skip(rows, at) if cols is None else skip(rows, at, cols)
            if at >= stop:
                break
        if cols is None:
            entry = rows[at][1]
            key, ns = entry.key, entry.namespace
        else:  # the store's form: (seq, slot)
            slot = rows[at][1]
            key = cols.get(slot, "key")
            ns = cols.get(slot, "namespace") if key is not None else None
        at += 1
        if key is not None:
            pair = (ns, key)
            if pair in keys:
                return False
            keys.add(pair)
    return True


class _BulkRun:
    """:meth:`MemoryState._load_bulk` in runs: :meth:`feed` each run of rows (in
    ascending seq, one run after the other), then :meth:`finish`. The state ``state``
    is filled by the runs; ``reserve``: the rows expected (the tables sized once for
    them; more still fit). ``index``: each record added to the state's index as it is
    made (else the caller fills the index)."""

    __slots__ = (
        "add", "bounded", "dup_c", "dup_join", "evict_keys", "exact", "expiry_keys",
        "keys", "last", "load_c", "new_ns", "records", "state", "untrack",
    )  # fmt: skip

    def __init__(self, state: MemoryState, reserve: int, index: bool = True) -> None:
        assert state._deferred is None
        self.state = state
        self.dup_join: Any = None
        self.reserve(reserve)
        if state._dup_table:
            self.dup_join = cast(Any, state._dups).join
        self.add = state.index.add if index else None
        self.evict_keys: tuple[list[tuple[float, Record]], list[tuple[float, Record]]] = (
            [], [],
        )  # fmt: skip
        self.expiry_keys: list[tuple[float, Record]] = []
        self.new_ns: list[tuple[str, ...]] = []
        self.records: list[Record] = []
        self.bounded = state._evict is not None
        # No entry is kept (the state's store holds its fields): none to untrack.
        self.untrack: Any = None
        self.exact: list[MemoryEntry] = []
        self.last = state._seq
        # _BULK_FOLDS: _dupkey_hashed's C call inline (its condition: a str text).
        self.dup_c = state._dup_key_c() if _BULK_FOLDS else None
        # _LOAD_C: runs of plain rows by the C load_inserts, the others by _load_rows
        self.load_c = state._load_c(self.bounded, self.dup_c)
        if self.load_c is not None and _dkey_direct_c is not None:
            _dkey_direct_c(bool(_DKEY_DIRECT))
        self.keys: list[int] | None = [] if self.load_c is not None else None

    def reserve(self, rows: int) -> None:
        """Room in the id and duplicate tables for ``rows`` more rows (one allocation
        each; the C tables only). O(the tables' size)."""
        state = self.state
        if type(state._by_id) is not dict:  # _ID_TABLE: one allocation for the rows' ids
            cast(Any, state._by_id).reserve(rows)
        if state._dup_table:  # one allocation for the rows' keys (at most one key a row)
            cast(Any, state._dups).reserve(rows)

    def feed(self, rows: list[Any], folds: Any = None, cols: Any = None) -> None:
        """Load ``rows`` (their seqs above every row fed before), ``folds`` their fold
        hashes (bytes of 8 a row, as ``sqlite_format.FoldedRows.folds``) or None.
        ``cols``: None, the rows are ``(seq, entry)``; else they are ``(seq, slot)`` in
        that store, which must be the state's own (``sqlite_format.FoldedRows.cols``:
        each record made on its slot). O(len(rows)).

        Raises:
            ValueError: As :meth:`MemoryState.restore` (seqs not ascending, an id twice);
                the state is then unusable.
        """
        state = self.state
        if cols is not None and cols is not state._cols:
            raise ValueError("rows of another store than the state's")
        by_id = state._by_id
        namespaces = state._namespaces
        dups = state._dups
        records = self.records
        exact = self.exact
        untrack = self.untrack
        add = self.add
        load_c = self.load_c
        keys = self.keys
        last = self.last
        dup_c = self.dup_c
        # _LOAD_FOLDS: each row's fold hash as the reader computed it (2**64-1: none)
        dup_f = textfold._dup_key_folded_c if dup_c is not None and _LOAD_FOLDS else None
        if dup_f is None:
            folds = None
        fold_view: Any = None
        if isinstance(folds, bytes) and len(folds) == 8 * len(rows):
            fold_view = memoryview(folds).cast("Q")
        else:
            dup_f = None
        # load_inserts takes exact bytes only (a subclass: TypeError, where _load_rows
        # reads any bytes): other folds are not passed, and it folds those texts itself.
        c_folds = folds if fold_view is not None and type(folds) is bytes else None
        n = len(rows)
        at = 0
        while at < n:
            stop = n
            if load_c is not None:
                got = load_c(
                    rows, at, c_folds, last, by_id,
                    namespaces, dups, state._dup_keys, records,
                    exact if untrack is not None else None, state._rel_parts, keys,
                    state._cols, state._rec_keys,
                )  # fmt: skip
                loaded = got > at
                if loaded:
                    last = self.last = rows[got - 1][0]
                    if add is not None:  # the index's adds, in the rows' order
                        for rec in records[len(records) - (got - at) :]:
                            add(rec)
                    at = got
                    if at >= n:
                        break
                # this row by the loop (after a call that loaded none, some more)
                stop = min(n, at + (1 if loaded else _LOAD_C_RETRY))
            fold_iter = fold_view[at:stop] if fold_view is not None else repeat(None)
            at = state._load_rows(
                rows, at, stop, fold_iter, last, records, exact, self.new_ns,
                self.expiry_keys, self.evict_keys, keys, dup_f, dup_c, self.dup_join, add,
                cols,
            )  # fmt: skip
            last = self.last = rows[at - 1][0]

    def finish(self, state: MemoryState) -> list[Record]:
        """The load's end on ``state`` (the state fed, or the one that took its tables,
        :meth:`_BulkFeed.take`): the sorted orders filled, the counters set. Returns the
        records, in the rows' order. O(n log n), O(n) sorted."""
        records = self.records
        if self.untrack is not None and self.exact:
            self.untrack(self.exact, MemoryEntry)
        if _UNTRACK_LOADED and _UNTRACK_RECORDS and _gc_untrack is not None and not self.bounded:
            _gc_untrack(records, Record)  # as store_many's: in no cycle when unbounded
        state._relevance_fill(records, self.keys)
        state._ns_sorted.update(self.new_ns)
        if self.expiry_keys:
            state._ever_expiring = True
            state._expiry.update(self.expiry_keys)
        if state._evict is not None:
            state._evict[0].update(self.evict_keys[0])
            state._evict[1].update(self.evict_keys[1])
        state._live += len(records)
        state.stores += len(records)
        if records:
            state.version = state._seq = self.last
        return records


class _BulkFeed:
    """An unbounded state's bulk load run while its file is read
    (:meth:`MemoryState.feed_ahead`; :data:`_FEED_AHEAD`): called as
    ``sqlite_format.read_file``'s ``consume`` with the rows read so far (the list the
    reader fills) and their fold hashes, it loads the new ones into a scratch state of
    the same kind (:class:`_BulkRun`, no index). :meth:`take` hands the scratch's tables
    to the real state when the file's rows are that very list, all bulk-loadable
    (:meth:`MemoryState._bulk_loadable`); anything else ends the feed for good (a row
    sharing a key, a load error, another list), and the state loads as if it had none.
    Never raises an ``Exception`` while feeding. Not thread-safe: the open's thread."""

    __slots__ = ("_keys", "_run", "_scratch", "at", "failed", "hint", "rows", "taken")

    def __init__(self, state: MemoryState) -> None:
        self._scratch = MemoryState(
            capacity=None, half_life=state.half_life, scorer=state.scorer, clock=state.clock
        )
        self._run: _BulkRun | None = None
        self._keys: set[tuple[tuple[str, ...], str]] = set()
        #: the list fed from (the reader's), and how many of its rows are loaded
        self.rows: list[Any] | None = None
        self.at = 0
        self.failed = False
        #: whether :meth:`take` handed the feed's load over
        self.taken = False
        #: the rows expected (:meth:`expect`), or None: not known (yet)
        self.hint: int | None = None

    def expect(self, image: Mapping[str, bytes], file_bytes: int) -> None:
        """The rows to size the tables for: the index image's header's ``rows``, believed
        up to ``file_bytes`` / :data:`_FEED_ROW_BYTES` (a stale or forged image only
        sizes the tables: a load's one reserve, as ``_load_bulk``'s for the rows; rows
        fed before it grew the tables by doubling). O(header size + the tables)."""
        rows = header_field(image, "rows")
        if type(rows) is int and rows >= 0 and self.hint is None and not self.failed:
            self.hint = min(rows, max(0, file_bytes) // _FEED_ROW_BYTES)
            if self._run is not None:
                try:
                    self._run.reserve(max(0, self.hint - self.at))
                except Exception:  # (MemoryError) the feed ends; the load reserves its own
                    self._fail()

    def __call__(self, rows: list[Any], folds: bytearray) -> bool:
        """Load ``rows[self.at:]`` (``folds``: 8 bytes a row of ``rows``, or fewer: none
        used) if at least :data:`_FEED_MIN` are new: whether it loaded any. O(new rows)."""
        if self.failed:
            return False
        if self.rows is None:
            self.rows = rows
        elif rows is not self.rows:
            self._fail()
            return False
        at, n = self.at, len(rows)
        if n - at < _FEED_MIN:
            return False
        try:
            if self._run is None:
                self._run = _BulkRun(self._scratch, self.hint or 0, index=False)
            self._feed(rows, at, n, bytes(folds[8 * at : 8 * n]) if len(folds) == 8 * n else None)
        except Exception:  # the load will meet it again, and raise or rebuild as before
            self._fail()
            return False
        return True

    @property
    def cols(self) -> Any:
        """The store the reader may put the rows' entries in (rows ``(seq, slot)``,
        ``sqlite_format.read_file``'s ``consume.cols``): the scratch state's, whose
        records are made on those slots and handed over by :meth:`take`; None once the
        feed ended. O(1)."""
        return None if self.failed or self._scratch is None else self._scratch._cols

    def _feed(self, rows: list[Any], at: int, n: int, folds: bytes | None) -> None:
        run = self._run
        assert run is not None
        cols = getattr(rows, "cols", None)
        if not _keys_unique(rows, at, n, self._keys, cols):
            raise ValueError("two rows share a (namespace, key)")
        run.feed(rows[at:n] if at or n != len(rows) else rows, folds, cols)
        self.at = n

    def _fail(self) -> None:
        self.failed = True
        self._run = None
        self._keys = set()
        self._scratch = None  # type: ignore[assignment]  # its records freed

    def take(self, state: MemoryState, rows: list[tuple[int, MemoryEntry]]) -> _BulkRun | None:
        """The feed's load of ``rows`` (a file's rows, in seq order) for the empty
        ``state`` it was made for: the rows it has not loaded loaded now, the scratch's
        tables moved into ``state``; :meth:`_BulkRun.finish` on ``state`` is the rest.
        None (``state`` untouched, the feed ended) when ``rows`` are not the list it fed
        from (the reader's list, returned as the file's rows),
        when not all bulk-loadable, or on any error. O(rows not fed yet)."""
        run = self._run
        if (
            self.failed
            or run is None
            or self.rows is None
            or rows is not self.rows
            or len(rows) < self.at
            or len(state)
            or state._seq
            or state.capacity is not None
            or state._deferred is not None
        ):
            self._fail()
            return None
        folds: Any = getattr(rows, "folds", None)
        n = len(rows)
        try:
            if self.at < n:
                whole = isinstance(folds, bytes) and len(folds) == 8 * n
                self._feed(rows, self.at, n, folds[8 * self.at :] if whole else None)
        except Exception:  # the load's own path raises it (or loads row by row)
            self._fail()
            return None
        scratch = self._scratch
        state._cols = scratch._cols  # (the records' store; the state's own is empty)
        state._by_id = scratch._by_id
        state._dups = scratch._dups
        state._dup_keys = scratch._dup_keys
        state._by_key = scratch._by_key
        state._namespaces = scratch._namespaces
        state._exkeys = scratch._exkeys
        run.state = state
        self._run = None
        self._scratch = None  # type: ignore[assignment]
        self.failed = True  # taken: no second take
        self.taken = True
        return run


class _PurgedCols:
    """The store of a purged record (``MemoryState._purge``): its slot released, its id
    kept for the hits still noted by the record (``apply_access``) and its relevance
    for a scorer's lists not vacuumed yet; ``ident`` and ``relevance`` answer them,
    every other read of the store raises ``IndexError`` as a released slot does."""

    __slots__ = ("_id", "_rel")

    def __init__(self, id: int, rel: float) -> None:
        self._id = id
        self._rel = rel

    def ident(self, slot: int) -> int:
        return self._id

    def relevance(self, slot: int) -> float:
        return self._rel

    def __getattr__(self, name: str) -> Any:
        raise IndexError("EntryColumns: no live slot of that number (the record is purged)")


def _merged_by_id(hits: Mapping[Any, tuple[int, datetime]]) -> dict[int, tuple[int, datetime]]:
    """Hits noted by record (``MemoryState.apply_access``; or by the id's int or UUID) as
    the reader notes them by id: by the id's int, the counts of one id's keys summed,
    the latest time kept, each id where it came first. O(h)."""
    out: dict[int, tuple[int, datetime]] = {}
    for key, (times, when) in hits.items():
        kind = type(key)
        id = key.cols.ident(key.slot) if kind is Record else key if kind is int else key.int
        prev = out.get(id)
        if prev is None:
            out[id] = (times, when)
        else:
            out[id] = (prev[0] + times, when if when > prev[1] else prev[1])
    return out
