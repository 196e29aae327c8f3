"""Okapi BM25 as an owner-maintained, snapshot-read scoring index.

Theory of operation
-------------------
:class:`BM25Scorer` is a frozen configuration; :meth:`BM25Scorer.make_index` gives a
:class:`BM25Index` that only the owner task writes (``add``/``retire``/``purge``/``vacuum``)
and that readers query through a snapshot: ``top_k`` at once, or ``top_k_steps``, a
generator that yields after every bounded slice of work so that the owner may write in
between (the slicing protocol; ``top_k`` drains it).

Texts, not records. A record's BM25 score before its recency and prior weights depends
only on its document (its ``memory`` text and tags): the term frequencies, the length,
and corpus statistics shared by all. Agent memories repeat texts (the same tool call, the
same fact), so the index keeps one ``_Group`` per distinct document: its number, the
numbers of its distinct terms, each packed with its frequency capped at 255 (an exactly
sized ``array('i')``, ``'q'`` once the vocabulary passes 2**23 terms) and its records
(sorted by ``seq``). A text is tokenized once; storing it again only appends the record to its
group. The index holds

* one ``_Group`` per document that has an un-purged record, numbered in creation order
  (numbers are never reused); a table of groups by number (None once purged), an
  int32 numpy array of document lengths by number and a uint8 one of alive marks (0
  once purged; compaction reads it);
* one ``_Term`` per term, numbered likewise (a term table maps numbers back): its
  posting list as two ``array``: the group numbers (ascending, since groups are numbered
  in creation order and appended when made) and the term frequencies (bytes until one
  exceeds 255, then int32); the number of groups in it whose records are all purged;
  ``df`` at the newest version (the records not retired whose document has the term);
  and a reader-side cache of the largest saturation in the list;
* N and the total length at the newest version, and a *change log*: one
  ``(version, group, +1 or -1)`` entry per ``add`` (at ``rec.born``) and ``retire`` (at
  ``rec.died``), sorted by version.

A reader at version ``v`` gets the statistics of its own snapshot by undoing the log
entries newer than ``v`` (none, for the newest snapshot): this is the copy-on-write read
the engine's contract asks for. ``vacuum(oldest)`` (and ``purge``) drop the entries no
live snapshot needs; a reader older than the log counts the visible postings instead
(slower, still exact). Records not visible in a snapshot stay in the groups and are
skipped by their versions (``born <= v < died``, the contract of ``ReadView``).

Posting lists only grow at the end and lose dead groups by compaction once half of a
list is dead; a group's record list is compacted the same way, so ``purge`` is amortized
O(1) per posting. Compaction, growth of the length array and the switch of a list's
frequencies to int32 *replace* the array objects, never resize them in place: a sliced
reader takes each array and its length once, at its start, and reads only that prefix
(numpy views of it are dropped before every yield, so the owner's appends never meet a
buffer export).

Top-k is MaxScore (Turtle & Flood, "Query evaluation: strategies and optimizations",
IP&M 31(6), 1995) term at a time over groups, vectorised with numpy. Each term has an
upper bound on its contribution (its weight and IDF times the largest saturation in its
list). The terms with the highest bounds (the rarest) are *essential*: their lists are
accumulated into a dense array of partial scores by group number, until the bounds of
the terms left sum below ``theta``, a lower bound on the k-th best score: the k-th best
*exact* score of the records of the groups with the highest partial scores. No group
outside the accumulator can then reach the top k. The candidates (partial score plus
the bounds left reaching ``theta``) take the next lists whole while they outnumber
those lists' postings a quarter, then are refined term by term, best bound first, by
binary search in each sorted list; those left are scored exactly, in the query's term
order and with the brute force's floating-point operations (one by one in Python, or
elementwise in numpy: the same IEEE operations), so scores equal a brute force's bit for
bit; ties break by ``seq``. The largest saturation of a list is cached by readers at a
reference average length and used, stretched by the drift of the average length since,
only as a bound (``_Term.bound_steps``); all bounds carry a relative slack of 1e-9 so that
summation order can never drop a true result.

Invariants (checked by :meth:`BM25Index._check`): every un-purged record is in exactly
the group of its document, which is listed, with its term frequency, in the posting list
of each of its terms, in ascending group order; the tables map numbers to the live
groups and terms; the dead-entry counters count dead entries and stay at most half of
their list; ``df``, N and the total length equal the counts over the records not
retired; the log is sorted by version; the cached largest saturations match their
reference.

Scoring follows Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond" (FnTIR 3(4), 2009) with Lucene's IDF and Lucene's term-frequency saturation
without the constant ``(k1 + 1)`` numerator (``BM25Similarity`` since Lucene 8); these are
exactly ``bm25s``' ``method="lucene"`` scores.
"""

from __future__ import annotations

import heapq
import math
import time
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Callable, Generator, Iterable, Mapping
from operator import itemgetter
from typing import Any

import attrs
import numpy as np

from .._record import NEVER, Record
from .._util import Final, NoPublicConstructor
from .scoring import Accept, ReadView, ScratchPool, drain
from .tokenize import Tokenizer

__all__ = ["BM25Index", "BM25Scorer"]

#: Relative slack on MaxScore's upper bounds, so that a different summation order of the
#: same floating-point terms can never prune a document that belongs to the top k.
_SLACK = 1e-9

#: Postings or candidates processed between two yields of a sliced retrieve (about
#: 0.05-0.1 ms of vectorised work), and the initial size of the length array.
_CHUNK = 4096

#: Slots of the dense accumulator scanned between two yields (about 0.1 ms).
_DENSE_CHUNK = 65536

#: Postings read between two yields while a reader brings a term's cached largest
#: saturation up to date (about 0.05 ms).
_BOUND_CHUNK = 8192

#: A term's cached saturations are recomputed when the average document length moved by
#: more than this factor since they were made (they stay valid bounds up to it).
_DRIFT = 1.02

#: Up to this many texts are scored exactly one by one (binary searches in Python),
#: more at once with numpy: the same floating-point operations either way.
_FEW = 64

#: Texts scored exactly one by one between two yields.
_FEW_STEP = 4

#: After the essential terms, the next term is accumulated whole while its posting list
#: is shorter than the candidates over this ratio (else looked up for each candidate).
_UPDATE_RATIO = 0.25

#: No group numbers (an empty concatenation).
_NO_NUMS = np.zeros(0, np.intp)

#: The terms of a group not yet filled in.
_NO_TERMS = array("i")

#: A group's terms are packed as ``term number << 8 | min(tf, 255)``: its term
#: frequencies without a binary search in each posting list (255: look it up there).
_TF_BITS = 8
_TF_CAP = (1 << _TF_BITS) - 1

#: Term numbers below this pack into int32 (``array('i')``); groups made after the
#: vocabulary outgrew it pack into int64 (``array('q')``).
_NARROW = 1 << (31 - _TF_BITS)

#: The records of a group not yet filled in (never appended to).
_NO_RECS: list[Record] = []


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a float, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def _unit_interval(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    _non_negative(instance, attribute, value)
    if value > 1:
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value!r}")


def _positive_or_none(
    instance: object, attribute: attrs.Attribute[Any], value: float | None
) -> None:
    if value is None:
        return
    _non_negative(instance, attribute, value)
    if value == 0:
        raise ValueError(f"{attribute.name} must be > 0 or None, got {value!r}")


@attrs.frozen(kw_only=True)
class BM25Scorer(metaclass=Final):
    """Okapi BM25 ranking, maintained incrementally by the memory's owner task.

    The document of an entry is its ``memory`` text followed by its tags, tokenized by
    ``tokenizer``. For a query with term weights ``q_t`` (the number of times ``t`` occurs
    in the tokenized query), at the retrieving snapshot's version::

        idf(t)   = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))
        bm25(d)  = sum over query terms t in d of
                   (q_t * idf(t)) * tf / (tf + k1 * (1 - b + b * dl / avgdl))
        score(d) = bm25(d) * recency(d) * prior(d)
        recency(d) = 0.5 ** (max(0, now - created_at) / half_life)   (1 if half_life is None)
        prior(d)   = (1 - relevance_prior) + relevance_prior * entry.relevance

    where N is the number of entries visible in the snapshot, ``df_t`` those of them whose
    document has ``t``, ``tf`` the count of ``t`` in ``d``, ``dl`` the length of ``d`` in
    terms and ``avgdl`` the mean ``dl`` over the N entries; ``now`` and ``created_at`` are
    POSIX seconds. The IDF is Lucene's (always positive); the saturation
    ``tf / (tf + k1 * ...)`` is Robertson & Zaragoza's (2009) without the constant factor
    ``k1 + 1``, as in Lucene's ``BM25Similarity`` and ``bm25s``' ``"lucene"`` method, whose
    scores these equal. Both recency and prior lie in (0, 1], so they only lower a score.

    Only entries sharing at least one term with the query are returned.

    Attributes:
        k1: Term-frequency saturation, >= 0 (1.5).
        b: Length normalisation in [0, 1] (0.75).
        tokenizer: Text to terms; a :class:`~actormem.Tokenizer` (Unicode ``\\w+``,
            case-folded, no stemming, no stop words by default) or any callable
            ``str -> list[str]`` that is a pure function of its argument.
        half_life: Recency half-life in seconds, or ``None`` (default: no recency weighting).
        relevance_prior: Weight in [0, 1] of the entry's ``relevance`` as a prior; 0
            (default) ignores it, 1 multiplies the score by the relevance.
        clock: POSIX time source for ``now`` (``time.time``); tests inject their own.

    Raises:
        ValueError: ``k1`` negative, ``b`` or ``relevance_prior`` outside [0, 1],
            ``half_life`` not positive, or any of them not finite.
        TypeError: A numeric field is not a number.
    """

    k1: float = attrs.field(default=1.5, validator=_non_negative)
    b: float = attrs.field(default=0.75, validator=_unit_interval)
    tokenizer: Callable[[str], list[str]] = attrs.field(factory=Tokenizer)
    half_life: float | None = attrs.field(default=None, validator=_positive_or_none)
    relevance_prior: float = attrs.field(default=0.0, validator=_unit_interval)
    clock: Callable[[], float] = attrs.field(default=time.time, eq=False, repr=False)

    @property
    def name(self) -> str:
        """Short id for reports: ``"bm25"``."""
        return "bm25"

    def make_index(self) -> BM25Index:
        """A new, empty :class:`BM25Index` for this configuration. O(1)."""
        index: BM25Index = BM25Index._create(self)
        return index

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        """Not available: BM25 depends on the whole corpus (df, N, avgdl).

        Raises:
            NotImplementedError: Always; compare against a brute force over the corpus.
        """
        raise NotImplementedError("BM25 scores depend on corpus statistics")


class _Group:
    """Every un-purged record whose document (``memory`` text and tags) is ``key``.

    BM25 statistics and the score before recency and prior depend only on the document,
    so the index tokenizes a text once and posting lists hold groups, not records: agent
    memories repeat texts (the same tool call, the same fact). ``num`` is the group's
    number (its slot in the index's group table and length array; numbers grow with
    creation, so every posting list is sorted by it). ``terms`` are the numbers of the
    ``_Term`` of each distinct term of the document, in first-occurrence order, each
    packed with its frequency (``num << _TF_BITS | min(tf, _TF_CAP)``; the posting list
    has the exact one). ``recs`` is sorted by ``seq``; purged records leave it
    lazily (it is rebuilt once half of it is purged).
    """

    __slots__ = ("dead", "key", "num", "recs", "terms", "unpurged")

    def __init__(self, key: object, num: int) -> None:
        self.key = key
        self.num = num
        self.terms = _NO_TERMS
        self.recs: list[Record] = _NO_RECS
        self.unpurged = 0
        self.dead = 0


def _seq(rec: Record) -> int:
    return rec.seq


class _Term:
    """One term's posting list: the numbers of the groups whose document has it
    (ascending: insertion order) and its frequency in each, as ``array('i')``; and its
    statistics.

    Owner writes only append to ``groups``/``tfs`` or replace them (compaction), so a
    reader that took the arrays and their length at its start can read that prefix at
    any later time."""

    __slots__ = ("dead", "df", "groups", "key", "num", "ref", "seen", "tfs", "top")

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
        if not ref or (k_part and not (1.0 / _DRIFT <= avgdl / ref <= _DRIFT)):
            ref, top, seen = avgdl, 0.0, 0
        for start in range(seen, end, _BOUND_CHUNK):
            stop = min(end, start + _BOUND_CHUNK)
            nums = np.frombuffer(groups, np.int32, stop)[start:]
            tf = np.frombuffer(tfs, tfs.typecode, stop)[start:].astype(np.float64)
            sats = tf / (tf + (a_part + (k_part / ref) * lengths[nums]))
            top = max(top, float(sats.max()))
            del nums  # release the buffer export at once: the owner appends to the array
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
        self._groups: dict[object, _Group] = {}
        self._group_of: dict[Record, _Group] = {}
        self._retired: set[Record] = set()
        self._terms: dict[str, _Term] = {}
        #: Every term ever made, by number; None once deleted (numbers are not reused).
        self._term_table: list[_Term | None] = []
        #: Every group ever made, by number; None once all its records are purged
        #: (numbers are never reused: readers may still hold postings naming them).
        self._table: list[_Group | None] = []
        #: Document length by group number (int32; replaced, never shrunk, when it grows).
        self._lengths: Any = np.zeros(_CHUNK, np.int32)
        #: 1 for a group in the table, 0 once purged (uint8, by number; owner only).
        self._alive: Any = np.zeros(_CHUNK, np.uint8)
        #: Retrieves' per-group scratch arrays, of ``len(_lengths)`` elements.
        self._scratch = ScratchPool()
        #: Records not retired, and the sum of their lengths: N and total at the newest version.
        self._n = 0
        self._total = 0
        #: The change log, in three parallel lists sorted by version.
        self._log_versions: list[int] = []
        self._log_groups: list[_Group] = []
        self._log_deltas: list[int] = []
        #: Every change at a version above this one is in the log.
        self._log_floor = -NEVER
        #: Highest version below which no live snapshot reads, as far as the index knows.
        self._horizon = 0
        #: Log entries below the horizon tolerated before a purge trims (tests lower it to 0).
        self._vacuum_slack = 64

    @property
    def scorer(self) -> BM25Scorer:
        """The configuration this index was made from."""
        return self._scorer

    def document_terms(self, rec: Record) -> Mapping[str, int]:
        """``{term: tf}`` of ``rec``'s document (a new dict). O(T log postings).

        Raises:
            KeyError: ``rec`` is not in the index (never added, or purged).
        """
        group = self._group_of[rec]
        num = group.num
        out = {}
        for t in group.terms:
            obj = self._term_table[t >> _TF_BITS]
            assert obj is not None  # the group's records keep its terms
            tf = t & _TF_CAP
            out[obj.key] = tf if tf < _TF_CAP else obj.tfs[bisect_left(obj.groups, num)]
        return out

    def _length(self, group: _Group) -> int:
        return int(self._lengths[group.num])

    def tokenize(self, text: str) -> list[str]:
        """The scorer's tokenizer applied to ``text``. O(len(text))."""
        return self._scorer.tokenizer(text)

    def _new_group(self, key: object, rec: Record) -> _Group:
        entry = rec.entry
        tokenize = self._scorer.tokenizer
        terms = tokenize(entry.memory)
        if entry.tags:
            terms = list(terms)
            for tag in entry.tags:
                terms.extend(tokenize(tag))
        table = self._table
        num = len(table)
        group = self._groups[key] = _Group(key, num)
        table.append(group)
        lengths = self._lengths
        if num >= len(lengths):  # replace, never resize: readers may hold the old one
            grown = np.zeros(2 * len(lengths), np.int32)
            grown[: len(lengths)] = lengths
            lengths = self._lengths = grown
            alive = np.zeros(len(grown), np.uint8)
            alive[: len(self._alive)] = self._alive
            self._alive = alive
            self._scratch.clear()  # spares of the old capacity
        lengths[num] = len(terms)
        self._alive[num] = 1
        get = self._terms.get
        term_table = self._term_table
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
        # Exactly sized; int64 only once term numbers no longer fit in int32 with a tf.
        group.terms = array("i" if len(term_table) <= _NARROW else "q", nums)
        return group

    def _log(self, version: int, group: _Group, delta: int) -> None:
        versions = self._log_versions
        if not versions or versions[-1] <= version:
            versions.append(version)
            self._log_groups.append(group)
            self._log_deltas.append(delta)
        else:  # an out-of-order change: rare
            pos = bisect_right(versions, version)
            versions.insert(pos, version)
            self._log_groups.insert(pos, group)
            self._log_deltas.insert(pos, delta)

    def _trim(self) -> None:
        """Drop the log entries at or below the horizon. O(log length + kept entries)."""
        versions = self._log_versions
        cut = bisect_right(versions, self._horizon)
        if cut:
            self._log_floor = max(self._log_floor, versions[cut - 1])
            del versions[:cut]
            del self._log_groups[:cut]
            del self._log_deltas[:cut]

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
        if rec in self._group_of:
            raise ValueError(f"{rec!r} is already indexed")
        entry = rec.entry
        tags = entry.tags
        key: object = (entry.memory, tags) if tags else entry.memory
        group = self._groups.get(key)
        if group is None:
            group = self._new_group(key, rec)  # counts the record in each term's df
        else:
            term_table = self._term_table
            for t in group.terms:
                term_table[t >> _TF_BITS].df += 1  # type: ignore[union-attr]  # live: not None
        recs = group.recs
        if not recs:
            group.recs = [rec]  # exactly sized: most texts have one record
        elif recs[-1].seq > rec.seq:
            insort(recs, rec, key=_seq)  # an upsert keeps its older seq
        else:
            recs.append(rec)
        group.unpurged += 1
        self._group_of[rec] = group
        self._n += 1
        self._total += int(self._lengths[group.num])
        versions = self._log_versions
        if not versions or versions[-1] <= rec.born:
            versions.append(rec.born)
            self._log_groups.append(group)
            self._log_deltas.append(1)
        else:
            self._log(rec.born, group, 1)
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
        group = self._group_of[rec]
        if rec in self._retired or rec.died == NEVER:
            raise ValueError(f"{rec!r} is retired already or has no death version")
        self._retired.add(rec)
        term_table = self._term_table
        for t in group.terms:
            term_table[t >> _TF_BITS].df -= 1  # type: ignore[union-attr]  # live: not None
        self._n -= 1
        self._total -= int(self._lengths[group.num])
        self._log(rec.died, group, -1)

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
        group = self._group_of[rec]
        if rec not in self._retired:
            raise ValueError(f"{rec!r} must be retired before it is purged")
        del self._group_of[rec]
        self._retired.discard(rec)
        group.unpurged -= 1
        if group.unpurged == 0:
            del self._groups[group.key]
            self._table[group.num] = None
            self._alive[group.num] = 0
            group.recs = []
            group.dead = 0
            term_table = self._term_table
            for t in group.terms:
                t >>= _TF_BITS
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
            group.dead += 1
            if 2 * group.dead > len(group.recs):
                group_of = self._group_of
                group.recs = [r for r in group.recs if r in group_of]
                group.dead = 0
        if rec.died > self._horizon:
            self._horizon = rec.died
        versions = self._log_versions
        if versions and versions[0] <= self._horizon:
            cut = bisect_right(versions, self._horizon)
            if cut > self._vacuum_slack and 2 * cut >= len(versions):
                self._trim()

    def vacuum(self, oldest: int) -> None:
        """Forget changes that only snapshots older than ``oldest`` need to undo.

        The owner calls it with the version of its oldest live snapshot (or the current
        version when none is open), e.g. whenever it purges. A snapshot older than
        ``oldest`` that queries anyway gets exact results, computed more slowly.

        Runtime complexity: O(log L + kept) for a log of L entries of which ``kept`` are
        newer than ``oldest``.
        """
        if oldest > self._horizon:
            self._horizon = oldest
        self._trim()

    # -- reader side --------------------------------------------------------------------

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """The ``limit`` best records for ``query`` visible in ``view`` and admitted by
        ``accept``, best first, ties by ``seq`` ascending, as ``(score, record)``.

        Each query term is weighted by its number of occurrences in the tokenized query.
        See :meth:`top_k_terms` for the complexity.
        """
        return drain(self.top_k_steps(view, query, limit, accept))

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
        versions = self._log_versions
        lengths = self._lengths
        if version >= self._log_floor:
            if not versions or versions[-1] <= version:
                return n, total, dfs  # the newest statistics: the common case
            # Undo the changes newer than the view.
            wanted = {index_terms[t].num: t for t in terms if t in index_terms}
            groups, deltas = self._log_groups, self._log_deltas
            for i in range(bisect_right(versions, version), len(versions)):
                group, delta = groups[i], deltas[i]
                n -= delta
                total -= delta * int(lengths[group.num])
                if wanted:
                    for t in group.terms:
                        t >>= _TF_BITS
                        if t in wanted:
                            dfs[wanted[t]] -= delta
            return n, total, dfs
        # The log was trimmed past this version: count what the view sees.
        visible = view.visible
        group_of = self._group_of
        table = self._table
        n = total = 0
        for rec, group in group_of.items():
            if visible(rec):
                n += 1
                total += int(lengths[group.num])
        for term in terms:
            obj = index_terms.get(term)
            if obj is not None:
                count = 0
                for num in obj.groups:
                    holder = table[num]
                    if holder is not None:
                        count += sum(1 for rec in holder.recs if rec in group_of and visible(rec))
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
        by more than 2%.
        """
        return drain(self.top_k_terms_steps(view, weights, limit, accept))

    def top_k_terms_steps(  # noqa: C901 - one algorithm, kept in one place
        self, view: ReadView, weights: Mapping[str, float], limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k_terms` in slices (see :meth:`top_k_steps`)."""
        if limit <= 0:
            return []
        scorer = self._scorer
        k1, b = scorer.k1, scorer.b
        index_terms = self._terms
        wanted = [t for t, w in weights.items() if w > 0 and t in index_terms]
        if not wanted:
            return []
        n, total, dfs = self._statistics(view, wanted)
        if n == 0 or total == 0:
            return []
        avgdl = total / n
        a_part = k1 * (1.0 - b)
        b_part = k1 * b / avgdl
        up = 1.0 + _SLACK
        # Everything the owner may replace is taken once, here: the group table (only
        # appended to; slots of groups no live snapshot sees become None), the length
        # array (replaced on growth) and each term's arrays with their length.
        table = self._table
        lengths = self._lengths
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
        for obj, post in taken:
            ref = obj.ref
            if obj.seen == post[3] and ref and 1.0 / _DRIFT <= avgdl / ref <= _DRIFT:
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
        order.sort(key=itemgetter(0), reverse=True)
        # rest[i]: bound on the total contribution of the terms order[i:].
        rest = [0.0] * (len(order) + 1)
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + order[i][0]

        version = view.version
        half_life = scorer.half_life
        alpha = scorer.relevance_prior
        weighted = half_life is not None or bool(alpha)
        now = scorer.clock() if half_life is not None else 0.0
        norm_a = 1.0 - b

        def exact_scores(nums: Any) -> Any:
            """BM25 of the groups ``nums`` (sorted), term by term in the query's order,
            with the brute force's floating-point operations (so, bit for bit)."""
            norm = k1 * (norm_a + b * lengths[nums] / avgdl)
            score = np.zeros(len(nums))
            for wi, groups, tfs, count in query:
                hit, tf = _lookup(groups, tfs, count, nums)
                score[hit] += wi * (tf / (tf + norm[hit]))
            return score

        exact: dict[int, float] = {}
        get_position = position.get

        def exact_of(num: int) -> float:
            """BM25 of group ``num`` as :func:`exact_scores` computes it, for a few
            groups (binary searches in the query's lists; memoized)."""
            score = exact.get(num)
            if score is None:
                score = 0.0
                group = table[num]
                if group is not None:  # else purged: no record to score
                    norm = k1 * (1.0 - b + b * int(lengths[num]) / avgdl)
                    # The group's own terms and frequencies (no binary search unless a
                    # frequency is too high to pack), summed in the query's order.
                    hits = []
                    for t in group.terms:
                        pos = get_position(t >> _TF_BITS)
                        if pos is not None:
                            hits.append((pos, t & _TF_CAP))
                    hits.sort()
                    for pos, tf in hits:
                        wi, groups, tfs, count = query[pos]
                        if tf == _TF_CAP:
                            tf = tfs[bisect_left(groups, num, 0, count)]
                        score += wi * (tf / (tf + norm))
                exact[num] = score
            return score

        def weigh(score: float, rec: Record) -> float:
            """A record's score from its text's: recency, then prior."""
            if half_life is not None:
                score *= 0.5 ** (max(0.0, now - rec.entry.created_at.timestamp()) / half_life)
            if alpha:
                score *= (1.0 - alpha) + alpha * rec.entry.relevance
            return score

        found: dict[int, list[float]] = {}

        def scores_in(num: int, score: float) -> list[float]:
            """Exact scores of up to ``limit`` of the text's visible, accepted records,
            best first (memoized)."""
            values = found.get(num)
            if values is None:
                group = table[num]
                values = []
                if group is not None:
                    if weighted:
                        values = [
                            weigh(score, rec)
                            for rec in group.recs
                            if rec.born <= version < rec.died and (accept is None or accept(rec))
                        ]
                        values.sort(reverse=True)
                        del values[limit:]
                    else:
                        count = 0
                        for rec in group.recs:
                            if rec.born <= version < rec.died and (accept is None or accept(rec)):
                                count += 1
                                if count == limit:
                                    break
                        values = [score] * count
                found[num] = values
            return values

        def kth_score(nums: Any) -> float:
            """The k-th best exact score of the records of groups ``nums`` (-inf if fewer)."""
            pairs = sorted(((exact_of(num), num) for num in nums.tolist()), reverse=True)
            values: list[float] = []
            for score, num in pairs:
                values += scores_in(num, score)
                if not weighted and len(values) >= limit:
                    break
            if len(values) < limit:
                return -math.inf
            values.sort(reverse=True)
            return values[limit - 1]

        # 1. Essential terms, the highest bounds first, accumulated into a dense array of
        # partial scores by group number, until the remaining terms' bounds sum below
        # theta, a lower bound on the k-th best score: the k-th best exact score among
        # the records of the texts with the highest partial scores, kept in `top` (`tau`:
        # the lowest partial score there).
        # Borrowed from the pool (memory already paged in), viewed to `size_g` groups.
        capacity = len(lengths)
        acc_base = yield from self._scratch.take_steps(np.float64, size_g, capacity)
        top_base = yield from self._scratch.take_steps(np.bool_, size_g, capacity)
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
            for start in range(0, count, _CHUNK):
                nums = _nums(groups, start, min(count, start + _CHUNK))
                tf = _tfs(tfs, start, min(count, start + _CHUNK))
                # before + wi * (tf / (tf + (a_part + b_part * dl))), in place.
                after = lengths[nums] * b_part
                after += a_part
                after += tf
                np.divide(tf, after, out=after)
                after *= wi
                after += acc[nums]
                acc[nums] = after
                parts.append(nums)
                hot = nums[after > tau]
                if len(hot):
                    hot = hot[~in_top[hot]]  # groups already in `top` only rose
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
                    for i, num in enumerate([num for num in top.tolist() if num not in exact]):
                        exact_of(num)  # memoized for kth_score
                        if i % _FEW_STEP == _FEW_STEP - 1:
                            yield
                    kth = kth_score(top)
                    if kth > -math.inf or len(top) < size:  # then `top` holds every group
                        break
                    size *= 2  # too few visible, accepted records among them: look wider
                    found_parts = []  # the `size` best of each window, in slices
                    for lo in range(0, size_g, _DENSE_CHUNK):
                        window = acc[lo : lo + _DENSE_CHUNK]
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
        # _UPDATE_RATIO, that term is accumulated whole (cheaper than looking it up for
        # each); then each other term, best bound first, is looked up for them (binary
        # search in its sorted list), and those that can no longer reach theta are
        # dropped (MaxScore).
        while True:
            # In slices of about 4 * _CHUNK: at a million entries `parts` can be long.
            kept, pieces, held = [], [], 0
            for i, part in enumerate(parts):
                for start in range(0, len(part), 4 * _CHUNK):
                    pieces.append(part[start : start + 4 * _CHUNK])
                    held += len(pieces[-1])
                    if held >= 4 * _CHUNK or i == len(parts) - 1:
                        piece = pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
                        kept.append(piece[acc[piece] * up + rest[done] >= theta])
                        pieces, held = [], 0
                        yield
            if pieces:  # an empty last part
                piece = np.concatenate(pieces)
                kept.append(piece[acc[piece] * up + rest[done] >= theta])
            every = kept[0] if len(kept) == 1 else np.concatenate([*kept, _NO_NUMS])
            if not (done < len(order) and order[done][4] * _UPDATE_RATIO < len(every)):
                break
            _, wi, groups, tfs, count = order[done]
            for start in range(0, count, _CHUNK):
                nums = _nums(groups, start, min(count, start + _CHUNK))
                tf = _tfs(tfs, start, min(count, start + _CHUNK))
                acc[nums] += wi * (tf / (tf + (a_part + b_part * lengths[nums])))
                yield
            parts = [every]  # the candidates only: distinct, maybe unsorted
            sorted_parts = False
            done += 1
        if len(parts) == 1 and sorted_parts:  # one chunk of one list: sorted and distinct
            cands = every
        elif len(every) <= 2 * _CHUNK:  # a short sort (a longer one would be one long step)
            every.sort()
            cands = every[np.concatenate(([True], every[1:] != every[:-1]))]
        else:
            # Distinct, sorted: through a dense mark (O(groups), no sort), in slices.
            found_parts = []
            for lo in range(0, size_g, _DENSE_CHUNK):
                window = acc[lo : lo + _DENSE_CHUNK]
                keep = window * up + rest[done] >= theta
                keep &= window > 0.0
                found_parts.append(np.flatnonzero(keep) + lo)
                del window, keep
                yield
            cands = np.concatenate(found_parts)
        if len(cands) <= 4 * _CHUNK:
            partial = acc[cands]
        else:
            partial = np.empty(len(cands))
            for start in range(0, len(cands), 4 * _CHUNK):
                partial[start : start + 4 * _CHUNK] = acc[cands[start : start + 4 * _CHUNK]]
                yield
        # int32 from here: binary searches in the (int32) posting lists need no cast.
        cands = cands.astype(np.int32)
        yield
        del acc, parts, in_top, every, kept
        # At the capacity now: arrays of one the index has grown past are dropped.
        self._scratch.give(acc_base, len(self._lengths))
        self._scratch.give(top_base, len(self._lengths))
        for j in range(done, len(order)):
            if not len(cands):
                break
            _, wi, groups, tfs, count = order[j]
            kept_cands, kept_partial = [], []
            for start in range(0, len(cands), _CHUNK):
                chunk = cands[start : start + _CHUNK]
                part = partial[start : start + _CHUNK]  # a view: ours to change
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
        if len(cands) <= _FEW:
            for i, num in enumerate(cands.tolist()):
                ranked.append((exact_of(num), num))
                if i % _FEW_STEP == _FEW_STEP - 1:
                    yield
        else:
            for start in range(0, len(cands), max(1, _CHUNK // 16)):
                chunk = cands[start : start + max(1, _CHUNK // 16)]
                ranked += zip(exact_scores(chunk).tolist(), chunk.tolist(), strict=True)
                yield
        ranked.sort(key=itemgetter(0), reverse=True)
        steps = 0
        for score, num in ranked:
            steps += 1
            if steps % _CHUNK == 0:
                yield
            if len(heap) == limit and score * up < heap[0][0]:
                break
            group = table[num]
            if group is None:
                continue
            if not weighted:
                if len(heap) == limit and score < heap[0][0]:
                    break
                for rec in group.recs:  # by seq: later ones only tie or lose
                    if len(heap) == limit:
                        worst, worst_negseq, _ = heap[0]
                        if score < worst or (score == worst and -rec.seq <= worst_negseq):
                            break
                    if rec.born <= version < rec.died and (accept is None or accept(rec)):
                        if len(heap) < limit:
                            heapq.heappush(heap, (score, -rec.seq, rec))
                        else:
                            heapq.heapreplace(heap, (score, -rec.seq, rec))
                continue
            for rec in group.recs:
                if rec.born <= version < rec.died and (accept is None or accept(rec)):
                    s = weigh(score, rec)
                    if len(heap) < limit:
                        heapq.heappush(heap, (s, -rec.seq, rec))
                    elif s > heap[0][0] or (s == heap[0][0] and -rec.seq > heap[0][1]):
                        heapq.heapreplace(heap, (s, -rec.seq, rec))
        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]

    # -- checks -------------------------------------------------------------------------

    def _check(self, live: Iterable[Record]) -> None:
        """Assert every invariant; ``live`` is every record not yet purged.

        Runtime complexity: O(total postings + records + log entries).
        """
        live_set = set(live)
        assert live_set == set(self._group_of), "indexed records differ from the live ones"
        assert self._retired == {rec for rec in live_set if rec.died != NEVER}, (
            "retired set out of date"
        )
        tokenize = self._scorer.tokenizer
        holders: dict[str, dict[int, int]] = {}
        df: Counter[str] = Counter()
        n = total = 0
        groups = set(self._group_of.values())
        assert groups == set(self._groups.values()), "groups differ from the live records'"
        table = self._table
        assert {num for num, group in enumerate(table) if group is not None} == {
            group.num for group in groups
        }, "group table out of date"
        alive = self._alive[: len(table)].tolist()
        assert alive == [int(group is not None) for group in table], "alive marks out of date"
        assert not self._alive[len(table) :].any()
        for group in groups:
            assert self._groups[group.key] is group
            assert table[group.num] is group
            recs = group.recs
            assert all(x.seq <= y.seq for x, y in zip(recs, recs[1:], strict=False)), (
                "records out of seq order"
            )
            alive = [rec for rec in recs if rec in self._group_of]
            assert group.unpurged == len(alive) > 0
            assert group.dead == len(recs) - len(alive)
            assert 2 * group.dead <= len(recs)
            entry = alive[0].entry
            terms = list(tokenize(entry.memory))
            for tag in entry.tags:
                terms += tokenize(tag)
            counts = Counter(terms)
            nums = [t >> _TF_BITS for t in group.terms]
            assert [self._term_table[t].key for t in nums] == list(counts), "stale terms"  # type: ignore[union-attr]
            assert [t & _TF_CAP for t in group.terms] == [min(c, _TF_CAP) for c in counts.values()]
            assert group.terms.typecode in "iq"
            assert dict(self.document_terms(alive[0])) == counts, "stale term frequencies"
            length = int(self._lengths[group.num])
            assert length == len(terms)
            assert [self._terms[t].num for t in counts] == nums
            for rec in alive:
                assert self._group_of[rec] is group
                assert (rec.entry.memory, rec.entry.tags) == (entry.memory, entry.tags)
                if rec.died == NEVER:
                    n += 1
                    total += length
                    df.update(counts.keys())
            for t, tf in counts.items():
                holders.setdefault(t, {})[group.num] = tf
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
        versions = self._log_versions
        assert len(versions) == len(self._log_groups) == len(self._log_deltas)
        assert all(x <= y for x, y in zip(versions, versions[1:], strict=False)), "log out of order"
        assert all(v > self._log_floor for v in versions)
