"""Okapi BM25 as an owner-maintained, snapshot-read scoring index.

Theory of operation
-------------------
:class:`BM25Scorer` is a frozen configuration; :meth:`BM25Scorer.make_index` gives a
:class:`BM25Index` that only the owner task writes (``add``/``retire``/``purge``/``vacuum``)
and that readers query synchronously through a snapshot (``top_k``).

Texts, not records. A record's BM25 score before its recency and prior weights depends
only on its document (its ``memory`` text and tags): the term frequencies, the length,
and corpus statistics shared by all. Agent memories repeat texts (the same tool call, the
same fact), so the index keeps one ``_Group`` per distinct document: its term
frequencies, its length and its records (sorted by ``seq``). A text is tokenized once;
storing it again only appends the record to its group. The index holds

* one ``_Group`` per document that has an un-purged record;
* one ``_Term`` per term: a posting list of groups (in insertion order) with the term
  frequency and the group's length, the number of groups in it whose records are all
  purged, ``df`` at the newest version (the records not retired whose document has the
  term), and a cache of the postings' saturations;
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
O(1) per posting.

Top-k is MaxScore (Turtle & Flood, "Query evaluation: strategies and optimizations",
IP&M 31(6), 1995) term at a time over groups. Each term has an upper bound on its
contribution (its weight and IDF times the largest saturation in its list). The terms
with the highest bounds (the rarest) are *essential*: their lists are accumulated into
partial scores per group, until the bounds of the terms left sum below ``theta``, a lower
bound on the k-th best score: the k-th best *exact* score of the records of the groups
with the highest partial scores. No group outside the accumulator can then reach the top
k. The candidates (partial score plus the bounds left reaching ``theta``) take the next
lists term at a time while they outnumber those lists' postings, then are refined term
by term, best bound first, and those left are scored exactly, in the query's term
order, so scores equal a brute force's bit for bit; ties break by ``seq``. The per-posting
saturations are cached by readers at a reference average length and used, stretched by
the drift of the average length since, only as bounds (``_Term.impacts``); all bounds
carry a relative slack of 1e-9 so that summation order can never drop a true result.

Invariants (checked by :meth:`BM25Index._check`): every un-purged record is in exactly
the group of its document, which is listed, with its term frequency, in the posting list
of each of its terms; the dead-entry counters count dead entries and stay at most half
of their list; ``df``, N and the total length equal the counts over the records not
retired; the log is sorted by version; the cached saturations match their reference.

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
from bisect import bisect_right, insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from operator import itemgetter
from typing import Any

import attrs

from ._record import NEVER, Record
from ._scoring import Accept, ReadView
from ._tokenize import Tokenizer
from ._util import Final, NoPublicConstructor

__all__ = ["BM25Index", "BM25Scorer"]

#: Relative slack on MaxScore's upper bounds, so that a different summation order of the
#: same floating-point terms can never prune a document that belongs to the top k.
_SLACK = 1e-9

#: After the essential terms, the next term is added to the candidates term at a time
#: while its posting list is shorter than this many times the number of candidates.
_UPDATE_RATIO = 4

#: A term's cached saturations are recomputed when the average document length moved by
#: more than this factor since they were made (they stay valid bounds up to it).
_DRIFT = 1.02

#: The empty saturation cache of a new or compacted term (never appended to).
_NO_SATS = array("d")


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
    memories repeat texts (the same tool call, the same fact). ``recs`` is sorted by
    ``seq``; purged records leave it lazily (it is rebuilt once half of it is purged).
    """

    __slots__ = ("dead", "key", "length", "recs", "terms", "tfs", "unpurged")

    def __init__(self, key: object, tfs: dict[str, int], length: int) -> None:
        self.key = key
        self.tfs = tfs
        self.length = length
        #: The ``_Term`` of each key of ``tfs``, in the same order.
        self.terms: list[_Term] = []
        self.recs: list[Record] = []
        self.unpurged = 0
        self.dead = 0


def _seq(rec: Record) -> int:
    return rec.seq


class _Term:
    """One term's posting list: the groups whose document has it, with its frequency and
    their length, in insertion order; and its statistics."""

    __slots__ = ("dead", "df", "dls", "groups", "key", "ref", "sats", "tfs", "top")

    def __init__(self, key: str) -> None:
        self.key = key
        self.groups: list[_Group] = []
        #: ``tfs[i]`` and ``dls[i]``: the term frequency and the length of ``groups[i]``.
        self.tfs: list[int] = []
        self.dls: list[int] = []
        #: Groups in the list whose records are all purged.
        self.dead = 0
        #: Records not retired whose document has the term: df at the newest version.
        self.df = 0
        #: Reader-side cache: the saturation ``tf / (tf + k1 * (1 - b + b * dl / ref))``
        #: of a prefix of the list at the average length ``ref``, and its maximum.
        self.sats = _NO_SATS
        self.ref = 0.0
        self.top = 0.0

    def impacts(self, a_part: float, k_part: float, avgdl: float) -> float:
        """Bring ``sats`` up to the whole list; return how many times a saturation at
        ``avgdl`` can exceed the cached one (>= 1). O(new postings), or O(postings) when
        ``avgdl`` moved by more than ``_DRIFT`` since the cache was made."""
        ref = self.ref
        if not ref or (k_part and not (1.0 / _DRIFT <= avgdl / ref <= _DRIFT)):
            ref = self.ref = avgdl
            self.sats = array("d")
            self.top = 0.0
        sats = self.sats
        start = len(sats)
        if start < len(self.groups):
            b_part = k_part / ref
            new = [
                tf / (tf + (a_part + b_part * dl))
                for tf, dl in zip(self.tfs[start:], self.dls[start:], strict=True)
            ]
            sats.fromlist(new)
            self.top = max(self.top, max(new))
        # Saturation grows with avgdl, at most in proportion (the length term shrinks).
        return avgdl / ref if k_part and avgdl > ref else 1.0

    def compact(self) -> None:
        keep = [i for i, group in enumerate(self.groups) if group.unpurged]
        groups, tfs, dls = self.groups, self.tfs, self.dls
        self.groups = [groups[i] for i in keep]
        self.tfs = [tfs[i] for i in keep]
        self.dls = [dls[i] for i in keep]
        self.dead = 0
        self.sats, self.ref, self.top = _NO_SATS, 0.0, 0.0


class BM25Index(metaclass=NoPublicConstructor):
    """The owner-written, snapshot-read index of a :class:`BM25Scorer`.

    Built by :meth:`BM25Scorer.make_index`. ``add``, ``retire``, ``purge`` and ``vacuum``
    are for the owner task only; ``top_k`` and ``top_k_terms`` run in any reader,
    synchronously (they only fill caches that do not depend on the snapshot). ``T``
    below is the number of distinct terms of the record's document.

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
        #: Records not retired, and the sum of their lengths: N and total at the newest version.
        self._n = 0
        self._total = 0
        #: The change log, sorted by version: ``(version, group, +1 or -1)`` per add/retire.
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
        """``{term: tf}`` of ``rec``'s document (read-only; do not mutate). O(1).

        Raises:
            KeyError: ``rec`` is not in the index (never added, or purged).
        """
        return self._group_of[rec].tfs

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
        tfs = dict(Counter(terms))
        length = len(terms)
        group = self._groups[key] = _Group(key, tfs, length)
        index_terms = self._terms
        objs = list(map(index_terms.get, tfs))
        if None in objs:
            for i, term in enumerate(tfs):
                if objs[i] is None:
                    objs[i] = index_terms[term] = _Term(term)
        group.terms = objs  # type: ignore[assignment]  # no None left
        for obj, tf in zip(group.terms, tfs.values(), strict=True):
            obj.groups.append(group)
            obj.tfs.append(tf)
            obj.dls.append(length)
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
            group = self._new_group(key, rec)
        recs = group.recs
        if recs and recs[-1].seq > rec.seq:
            insort(recs, rec, key=_seq)  # an upsert keeps its older seq
        else:
            recs.append(rec)
        group.unpurged += 1
        self._group_of[rec] = group
        for term in group.terms:
            term.df += 1
        self._n += 1
        self._total += group.length
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
        for term in group.terms:
            term.df -= 1
        self._n -= 1
        self._total -= group.length
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
            group.recs = []
            group.dead = 0
            for name, term in zip(group.tfs, group.terms, strict=True):
                term.dead += 1
                if term.dead == len(term.groups):
                    # No live snapshot sees any record with this term: df is 0 for all.
                    del self._terms[name]
                elif 2 * term.dead > len(term.groups):
                    term.compact()
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
        return self.top_k_terms(view, Counter(self._scorer.tokenizer(query)), limit, accept)

    def statistics(
        self, view: ReadView, terms: Iterable[str] = ()
    ) -> tuple[int, float, dict[str, int]]:
        """``(N, avgdl, {term: df})`` as of ``view.version``: the corpus statistics BM25
        uses. O(|terms|) for the newest version, O(C * |terms|) for C log entries newer
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
        if version >= self._log_floor:
            if not versions or versions[-1] <= version:
                return n, total, dfs  # the newest statistics: the common case
            # Undo the changes newer than the view.
            groups, deltas = self._log_groups, self._log_deltas
            for i in range(bisect_right(versions, version), len(versions)):
                group, delta = groups[i], deltas[i]
                n -= delta
                total -= delta * group.length
                tfs = group.tfs
                for term in terms:
                    if term in tfs:
                        dfs[term] -= delta
            return n, total, dfs
        # The log was trimmed past this version: count what the view sees.
        visible = view.visible
        group_of = self._group_of
        n = total = 0
        for rec, group in group_of.items():
            if visible(rec):
                n += 1
                total += group.length
        for term in terms:
            obj = index_terms.get(term)
            if obj is not None:
                dfs[term] = sum(
                    1
                    for group in obj.groups
                    for rec in group.recs
                    if rec in group_of and visible(rec)
                )
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

        Runtime complexity: MaxScore, term at a time, over distinct texts (groups):
        O(q log q + C * q + P log P + A + R * q) plus O(log limit) per record that
        enters the result heap, where ``q`` is the number of query terms, ``C`` the log
        entries newer than the view (none for the newest snapshot), ``P`` the postings
        accumulated (the *essential* terms, the rarest, until the bounds of the other
        terms sum below a lower bound on the k-th best score; then the next terms while
        their lists are shorter than a few times the candidates), ``A`` the groups those
        postings reach (scanned once to pick the candidates), and ``R`` the candidates
        refined and scored, best bound first, until the bound falls below the k-th best
        score. The lower bound costs O(q) per group that rises among the ``limit`` best
        partial scores. With a recency or prior weight, every visible record of a
        candidate text is scored. A reader also extends the cached saturations of its
        terms: O(postings added since), or O(postings) once the average length drifted
        by more than 2%.
        """
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
        up = 1.0 + _SLACK
        # The query in its own order, the summation order: (term, weight * idf).
        query: list[tuple[str, float]] = []
        # (bound on the term's contribution, weight * idf, term), for MaxScore.
        order: list[tuple[float, float, _Term]] = []
        # Cached saturations are exact at their term's reference avgdl and at most
        # `stretch` times too low at this one (see _Term.impacts).
        stretch = 1.0
        for term in wanted:
            df = dfs[term]
            if df <= 0:
                continue
            wi = weights[term] * math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            query.append((term, wi))
            obj = index_terms[term]
            hi = obj.impacts(a_part, k1 * b, avgdl)
            if hi > stretch:
                stretch = hi
            order.append((wi * obj.top * hi * up, wi, obj))
        if not query:
            return []
        order.sort(key=itemgetter(0), reverse=True)
        # rest[i]: bound on the total contribution of the terms order[i:].
        rest = [0.0] * (len(order) + 1)
        for i in range(len(order) - 1, -1, -1):
            rest[i] = rest[i + 1] + order[i][0]
        scale = stretch * up  # partial sums times this bound the exact partial sums

        version = view.version
        half_life = scorer.half_life
        alpha = scorer.relevance_prior
        weighted = half_life is not None or bool(alpha)
        now = scorer.clock() if half_life is not None else 0.0
        exact: dict[_Group, float] = {}

        def score_of(group: _Group) -> float:
            """The text's BM25 score, term by term in the query's order (memoized)."""
            score = exact.get(group)
            if score is None:
                norm = k1 * (1.0 - b + b * group.length / avgdl)
                score = 0.0
                tfs = group.tfs
                for term, wi in query:
                    tf = tfs.get(term, 0)
                    if tf:
                        score += wi * (tf / (tf + norm))
                exact[group] = score
            return score

        def weigh(score: float, rec: Record) -> float:
            """A record's score from its text's: recency, then prior."""
            if half_life is not None:
                score *= 0.5 ** (max(0.0, now - rec.entry.created_at.timestamp()) / half_life)
            if alpha:
                score *= (1.0 - alpha) + alpha * rec.entry.relevance
            return score

        found: dict[_Group, list[float]] = {}

        def scores_in(group: _Group) -> list[float]:
            """Exact scores of up to ``limit`` of the text's visible, accepted records,
            best first (memoized)."""
            values = found.get(group)
            if values is None:
                values = []
                if weighted:
                    score = score_of(group)
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
                    values = [score_of(group)] * count if count else []
                found[group] = values
            return values

        def kth_score(groups: list[_Group]) -> float:
            """The k-th best exact score of the records of ``groups`` (-inf if fewer)."""
            if weighted:
                values = [v for group in groups for v in scores_in(group)]
                if len(values) < limit:
                    return -math.inf
                values.sort(reverse=True)
                return values[limit - 1]
            have = 0
            for score, count in sorted(
                ((score_of(group), len(scores_in(group))) for group in groups), reverse=True
            ):
                have += count
                if have >= limit:
                    return score
            return -math.inf

        # 1. Essential terms, the highest bounds first, accumulated text by text until the
        # remaining terms' bounds sum below theta, a lower bound on the k-th best score:
        # the k-th best exact score among the records of the texts with the highest
        # partial scores, kept in `top` (`tau`: the lowest partial score there).
        acc: dict[_Group, float] = {}
        theta = -math.inf
        top: list[_Group] = []
        tau = -math.inf
        size = limit
        done = 0
        for _, wi, obj in order:
            if rest[done] < theta:
                break
            get = acc.get
            hot: list[_Group] = []
            for group, sat in zip(obj.groups, obj.sats):  # noqa: B905 - equal lengths
                value = get(group, 0.0) + wi * sat
                acc[group] = value
                if value > tau:
                    hot.append(group)
            done += 1
            if not hot:
                continue  # `top` is unchanged
            pool = set(top)
            pool.update(hot)
            new_top = sorted(pool, key=acc.__getitem__, reverse=True)[:size]
            if new_top != top:
                top = new_top
                while True:
                    kth = kth_score(top)
                    if kth > -math.inf or size >= len(acc):
                        break
                    size *= 2  # too few visible, accepted records among them: look wider
                    top = sorted(acc, key=acc.__getitem__, reverse=True)[:size]
                if kth > theta:
                    theta = kth
            tau = acc[top[-1]] if len(top) == size else -math.inf

        # 2. Candidates: the texts whose partial score plus the bounds of the other terms
        # reaches theta. While they outnumber the postings of the next term, that term
        # is added to them term at a time (cheaper than looking it up in each); then
        # each is refined term by term in the order of the bounds (MaxScore), best
        # bound first, and scored exactly.
        remaining = rest[done]
        candidates = {g: s for g, s in acc.items() if s * scale + remaining >= theta}
        while done < len(order) and len(order[done][2].groups) < _UPDATE_RATIO * len(candidates):
            _, wi, obj = order[done]
            for group, sat in zip(obj.groups, obj.sats):  # noqa: B905 - equal lengths
                if group in candidates:
                    candidates[group] += wi * sat
            done += 1
            remaining = rest[done]
            candidates = {g: s for g, s in candidates.items() if s * scale + remaining >= theta}
        others = [(obj.key, wi, rest[done + j + 1]) for j, (_, wi, obj) in enumerate(order[done:])]
        b_part = k1 * b / avgdl
        heap: list[tuple[float, int, Record]] = []  # (score, -seq, rec): worst on top
        for group, partial in sorted(candidates.items(), key=itemgetter(1), reverse=True):
            cut = theta if len(heap) < limit or heap[0][0] < theta else heap[0][0]
            partial *= stretch
            if partial * up + remaining < cut:
                break
            if others:
                tfs = group.tfs
                norm = a_part + b_part * group.length
                for term, wi, bound in others:
                    tf = tfs.get(term)
                    if tf:
                        partial += wi * (tf / (tf + norm))
                    if partial * up + bound < cut:
                        break
                else:
                    bound = -1.0
                if bound >= 0.0:
                    continue  # pruned
            score = score_of(group)
            if not weighted:
                if len(heap) == limit and score < heap[0][0]:
                    continue
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
            if len(heap) == limit and score * up < heap[0][0]:
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
        holders: dict[str, set[_Group]] = {}
        df: Counter[str] = Counter()
        n = total = 0
        groups = set(self._group_of.values())
        assert groups == set(self._groups.values()), "groups differ from the live records'"
        for group in groups:
            assert self._groups[group.key] is group
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
            assert group.tfs == Counter(terms), "stale term frequencies"
            assert group.length == len(terms)
            assert [self._terms[t] for t in group.tfs] == group.terms
            for rec in alive:
                assert self._group_of[rec] is group
                assert (rec.entry.memory, rec.entry.tags) == (entry.memory, entry.tags)
                if rec.died == NEVER:
                    n += 1
                    total += group.length
                    df.update(group.tfs.keys())
            for t in group.tfs:
                holders.setdefault(t, set()).add(group)
        assert (n, total) == (self._n, self._total), "N or total length out of date"
        assert set(holders) == set(self._terms), "terms differ from the live documents'"
        for name, term in self._terms.items():
            assert len(set(map(id, term.groups))) == len(term.groups), f"{name!r}: repeated"
            listed = {group for group in term.groups if group.unpurged}
            assert listed == holders[name], f"{name!r}: posting list misses texts"
            assert term.dead == len(term.groups) - len(listed)
            assert term.dead < len(term.groups)
            assert 2 * term.dead <= len(term.groups)
            assert term.df == df[name], f"{name!r}: df out of date"
            assert list(term.tfs) == [group.tfs[name] for group in term.groups]
            assert list(term.dls) == [group.length for group in term.groups]
            assert len(term.sats) <= len(term.groups)
            if term.sats:
                k_part = self._scorer.k1 * self._scorer.b / term.ref
                a_part = self._scorer.k1 * (1.0 - self._scorer.b)
                for group, sat in zip(term.groups, term.sats, strict=False):
                    tf = group.tfs[name]
                    assert sat == tf / (tf + (a_part + k_part * group.length)), "stale impact"
                assert term.top == max(term.sats), f"{name!r}: stale impact bound"
        versions = self._log_versions
        assert len(versions) == len(self._log_groups) == len(self._log_deltas)
        assert all(x <= y for x, y in zip(versions, versions[1:], strict=False)), "log out of order"
        assert all(v > self._log_floor for v in versions)
