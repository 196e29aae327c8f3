"""Okapi BM25 as an owner-maintained, snapshot-read scoring index.

Theory of operation
-------------------
:class:`BM25Scorer` is a frozen configuration; :meth:`BM25Scorer.make_index` gives a
:class:`BM25Index` that only the owner task writes (``add``/``retire``/``purge``/``vacuum``)
and that readers query synchronously through a snapshot (``top_k``).

The index holds

* one ``_Doc`` per record not yet purged: its term frequencies, its length in terms
  (after stop words), its insertion number ``docno`` (increasing), and two flags;
* one ``_Term`` per term: a posting list (docs in increasing ``docno``, with the term
  frequency), an upper bound on the term frequency and a lower bound on the length of the
  docs in the list, the number of purged docs still in the list, and the *history* of the
  term's document frequency;
* the histories of the number of documents and of their total length.

A *history* is a short list of ``(version, value)`` steps: ``add(rec)`` adds 1 at
``rec.born``, ``retire(rec)`` subtracts 1 at ``rec.died``, so the value at version ``v``
(the last step at or before ``v``) counts exactly the records visible at ``v``
(``born <= v < died``). A reader therefore sees N, avgdl and every df of its own
snapshot, whatever the owner did since: this is the copy-on-write read the engine's
contract asks for, with the steps as the copies. ``vacuum(oldest)`` drops the steps that
no live snapshot can reach; if a history was trimmed past a reader's version anyway, the
reader counts the visible postings instead (slower, still exact).

Posting lists only grow at the end (``docno`` increases) and lose purged docs by
compaction once half of a list is purged, so ``purge`` is amortized O(1) per posting.
Records not visible in a snapshot stay in the lists and are skipped by ``view.visible``.

Invariants (checked by :meth:`BM25Index._check`): every posting list is strictly
increasing in ``docno`` and holds each un-purged doc that has the term, with its term
frequency; the bounds bound the list; each history is increasing in version and its
newest value equals the count over the un-retired docs.

Scoring follows Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond" (FnTIR 3(4), 2009) with Lucene's IDF and Lucene's term-frequency saturation
without the constant ``(k1 + 1)`` numerator (``BM25Similarity`` since Lucene 8); these are
exactly ``bm25s``' ``method="lucene"`` scores. Top-k uses MaxScore (Turtle & Flood,
"Query evaluation: strategies and optimizations", IP&M 31(6), 1995) document at a time.
"""

from __future__ import annotations

import heapq
import math
import time
from bisect import bisect_right
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
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


class _History:
    """Values of a counter by version: ``values[i]`` holds from ``versions[i]`` on."""

    __slots__ = ("trimmed", "values", "versions")

    def __init__(self) -> None:
        self.versions: list[int] = []
        self.values: list[int] = []
        self.trimmed = False

    def change(self, version: int, delta: int) -> None:
        """Add ``delta`` from ``version`` on. O(1) at the newest version, else O(len)."""
        versions, values = self.versions, self.values
        if versions and versions[-1] == version:
            values[-1] += delta
            return
        if not versions or versions[-1] < version:
            versions.append(version)
            values.append((values[-1] if values else 0) + delta)
            return
        pos = bisect_right(versions, version)  # an out-of-order change: rare
        if pos and versions[pos - 1] == version:
            start = pos - 1
        else:
            versions.insert(pos, version)
            values.insert(pos, (values[pos - 1] if pos else 0) + delta)
            start = pos + 1
        for i in range(start, len(values)):
            values[i] += delta

    def at(self, version: int) -> int | None:
        """Value at ``version``, or ``None`` if trimmed away. O(log len)."""
        versions = self.versions
        if len(versions) == 1 and versions[0] <= version:
            return self.values[0]
        pos = bisect_right(versions, version)
        if pos:
            return self.values[pos - 1]
        return None if self.trimmed else 0

    def newest(self) -> int:
        return self.values[-1] if self.values else 0

    def trim(self, oldest: int) -> None:
        """Forget the values no version ``>= oldest`` reads. O(dropped steps)."""
        pos = bisect_right(self.versions, oldest)
        if pos > 1:
            del self.versions[: pos - 1]
            del self.values[: pos - 1]
            self.trimmed = True


class _Doc:
    __slots__ = ("docno", "length", "purged", "rec", "retired", "stamp", "tfs")

    def __init__(self, rec: Record, docno: int, tfs: dict[str, int], length: int) -> None:
        self.rec = rec
        self.docno = docno
        self.tfs = tfs
        self.length = length
        self.stamp = rec.entry.created_at.timestamp()
        self.retired = False
        self.purged = False


class _Term:
    __slots__ = ("dead", "df", "docs", "max_tf", "min_len", "tfs")

    def __init__(self) -> None:
        self.docs: list[_Doc] = []
        self.tfs: list[int] = []
        self.dead = 0
        self.max_tf = 0
        self.min_len = NEVER
        self.df = _History()

    def compact(self) -> None:
        docs: list[_Doc] = []
        tfs: list[int] = []
        for doc, tf in zip(self.docs, self.tfs, strict=True):
            if not doc.purged:
                docs.append(doc)
                tfs.append(tf)
        self.docs, self.tfs, self.dead = docs, tfs, 0
        self.max_tf = max(tfs, default=0)
        self.min_len = min((doc.length for doc in docs), default=NEVER)


class BM25Index(metaclass=NoPublicConstructor):
    """The owner-written, snapshot-read index of a :class:`BM25Scorer`.

    Built by :meth:`BM25Scorer.make_index`. ``add``, ``retire``, ``purge`` and ``vacuum``
    are for the owner task only; ``top_k`` and ``top_k_terms`` run in any reader,
    synchronously. ``T`` below is the number of distinct terms of the record's document.

    Histories trim themselves: ``purge(rec)`` tells the index that no live snapshot
    reads below ``rec.died`` (the engine purges only records dead at or below its
    horizon), and once as many steps were added as there are multi-step histories, the
    index vacuums to the highest such version, so history space stays proportional to the
    changes since the oldest live snapshot. Calling :meth:`vacuum` explicitly is optional.
    Trimming too far is never wrong: a snapshot older than a history's first step counts
    the visible postings instead.
    """

    def __init__(self, scorer: BM25Scorer) -> None:
        self._scorer = scorer
        self._docs: dict[Record, _Doc] = {}
        self._terms: dict[str, _Term] = {}
        self._count = _History()
        self._total = _History()
        #: Histories with more than one step: the only ones a vacuum can shorten.
        self._dirty: set[_History] = set()
        self._next_docno = 0
        #: Highest version below which no live snapshot reads, as far as the index knows.
        self._horizon = 0
        #: History steps created since the last vacuum.
        self._steps = 0
        #: Extra steps tolerated before a purge vacuums (tests lower it to 0).
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
        return self._docs[rec].tfs

    def tokenize(self, text: str) -> list[str]:
        """The scorer's tokenizer applied to ``text``. O(len(text))."""
        return self._scorer.tokenizer(text)

    def _document(self, rec: Record) -> list[str]:
        entry = rec.entry
        tokenize = self._scorer.tokenizer
        terms = tokenize(entry.memory)
        for tag in entry.tags:
            terms.extend(tokenize(tag))
        return terms

    def _step(self, history: _History, version: int, delta: int) -> None:
        steps = len(history.versions)
        history.change(version, delta)
        if len(history.versions) > steps:
            self._steps += 1
            if steps:
                self._dirty.add(history)

    # -- owner side ---------------------------------------------------------------------

    def add(self, rec: Record) -> None:
        """Index ``rec``, visible from ``rec.born`` on (owner only).

        Runtime complexity: O(len(text) + T) amortized.

        Raises:
            ValueError: ``rec`` is already in the index.
        """
        if rec in self._docs:
            raise ValueError(f"{rec!r} is already indexed")
        terms = self._document(rec)
        tfs = dict(Counter(terms))
        doc = _Doc(rec, self._next_docno, tfs, len(terms))
        self._next_docno += 1
        self._docs[rec] = doc
        born = rec.born
        for term, tf in tfs.items():
            entry = self._terms.get(term)
            if entry is None:
                entry = self._terms[term] = _Term()
            entry.docs.append(doc)
            entry.tfs.append(tf)
            if tf > entry.max_tf:
                entry.max_tf = tf
            if doc.length < entry.min_len:
                entry.min_len = doc.length
            self._step(entry.df, born, 1)
        self._step(self._count, born, 1)
        self._step(self._total, born, doc.length)
        if rec.died != NEVER:  # stored already dead: unusual but consistent
            self.retire(rec)

    def retire(self, rec: Record) -> None:
        """Note that ``rec`` is invisible from ``rec.died`` on (owner only).

        Older snapshots keep seeing ``rec`` and the statistics that include it.

        Runtime complexity: O(T) (amortized; O(T + steps) if versions arrive out of order).

        Raises:
            KeyError: ``rec`` is not in the index.
            ValueError: ``rec`` was retired already or ``rec.died`` is not set.
        """
        doc = self._docs[rec]
        if doc.retired or rec.died == NEVER:
            raise ValueError(f"{rec!r} is retired already or has no death version")
        doc.retired = True
        died = rec.died
        for term in doc.tfs:
            self._step(self._terms[term].df, died, -1)
        self._step(self._count, died, -1)
        self._step(self._total, died, -doc.length)

    def purge(self, rec: Record) -> None:
        """Drop ``rec`` for good: no live snapshot can see it (owner only).

        Runtime complexity: amortized O(T): a posting list is compacted, in time linear in
        its length, once half of it is purged.

        Raises:
            KeyError: ``rec`` is not in the index.
            ValueError: ``rec`` was not retired first.
        """
        doc = self._docs[rec]
        if not doc.retired:
            raise ValueError(f"{rec!r} must be retired before it is purged")
        del self._docs[rec]
        doc.purged = True
        for term in doc.tfs:
            entry = self._terms[term]
            entry.dead += 1
            if entry.dead == len(entry.docs):
                # No live snapshot sees any doc with this term: its df is 0 for all of them.
                del self._terms[term]
                self._dirty.discard(entry.df)
            elif 2 * entry.dead > len(entry.docs):
                entry.compact()
        if rec.died > self._horizon:
            self._horizon = rec.died
        if self._steps > self._vacuum_slack + len(self._dirty):
            self.vacuum(self._horizon)

    def vacuum(self, oldest: int) -> None:
        """Forget statistics that only snapshots older than ``oldest`` could read.

        The owner calls it with the version of its oldest live snapshot (or the current
        version when none is open), e.g. whenever it purges. A snapshot older than
        ``oldest`` that queries anyway gets exact results, computed more slowly.

        Runtime complexity: O(histories changed since the last vacuum + steps dropped).
        """
        if oldest > self._horizon:
            self._horizon = oldest
        self._steps = 0
        keep: set[_History] = set()
        for history in self._dirty:
            history.trim(oldest)
            if len(history.versions) > 1:
                keep.add(history)
        self._dirty = keep

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
        uses. O(|terms| log steps), or O(postings) for a trimmed-away version."""
        n, total = self._corpus_at(view)
        avgdl = total / n if n else 0.0
        return n, avgdl, {term: self._df_at(term, view) for term in terms}

    def _corpus_at(self, view: ReadView) -> tuple[int, int]:
        version = view.version
        n = self._count.at(version)
        total = self._total.at(version)
        if n is None or total is None:
            visible = [doc for doc in self._docs.values() if view.visible(doc.rec)]
            return len(visible), sum(doc.length for doc in visible)
        return n, total

    def _df_at(self, term: str, view: ReadView) -> int:
        entry = self._terms.get(term)
        if entry is None:
            return 0
        df = entry.df.at(view.version)
        if df is None:
            df = sum(1 for doc in entry.docs if view.visible(doc.rec))
        return df

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

        Runtime complexity: MaxScore, document at a time: O(P * q + q log q) where ``q``
        is the number of query terms and ``P`` the number of postings in the lists still
        *essential*; a list stops being essential once the sum of its and the cheaper
        lists' score bounds falls below the k-th best score, so the long lists of common
        terms are mostly skipped. Each candidate costs O(q) and O(log limit).
        """
        if limit <= 0:
            return []
        scorer = self._scorer
        k1, b = scorer.k1, scorer.b
        n, total = self._corpus_at(view)
        if n == 0 or total == 0:
            return []
        avgdl = total / n
        # (term, weight * idf, upper bound on its contribution)
        query: list[tuple[str, float, _Term]] = []
        for term, weight in weights.items():
            entry = self._terms.get(term)
            if entry is None or not weight > 0:
                continue
            df = self._df_at(term, view)
            if df == 0:
                continue
            query.append((term, weight * math.log(1.0 + (n - df + 0.5) / (df + 0.5)), entry))
        if not query:
            return []
        bounded = []
        for term, wi, entry in query:
            max_tf = entry.max_tf
            norm = k1 * (1.0 - b + b * entry.min_len / avgdl)
            bound = wi * (max_tf / (max_tf + norm)) * (1.0 + _SLACK) if max_tf else 0.0
            bounded.append((bound, term, wi, entry))
        bounded.sort(key=lambda item: item[0])
        prefix = [0.0]
        for bound, *_ in bounded:
            prefix.append(prefix[-1] + bound)
        lists = [entry.docs for _, _, _, entry in bounded]
        counts = [entry.tfs for _, _, _, entry in bounded]
        wis = [wi for _, _, wi, _ in bounded]
        cursors = [0] * len(bounded)
        essential_from = 0  # lists before this index are non-essential
        half_life = scorer.half_life
        alpha = scorer.relevance_prior
        now = scorer.clock() if half_life is not None else 0.0
        visible = view.visible
        heap: list[tuple[float, int, int, Record]] = []  # (score, -seq, docno, rec): worst on top
        theta = -math.inf
        nlists = len(lists)
        while essential_from < nlists:
            candidate = NEVER
            for i in range(essential_from, nlists):
                c = cursors[i]
                docs = lists[i]
                if c < len(docs):
                    docno = docs[c].docno
                    if docno < candidate:
                        candidate = docno
            if candidate == NEVER:
                break
            doc: _Doc | None = None
            tf_at: list[tuple[int, int]] = []
            for i in range(essential_from, nlists):
                c = cursors[i]
                docs = lists[i]
                if c < len(docs) and docs[c].docno == candidate:
                    doc = docs[c]
                    tf_at.append((i, counts[i][c]))
                    cursors[i] = c + 1
            assert doc is not None
            rec = doc.rec
            if not visible(rec):
                continue
            norm = k1 * (1.0 - b + b * doc.length / avgdl)
            if theta > -math.inf:
                partial = 0.0
                for i, tf in tf_at:
                    partial += wis[i] * (tf / (tf + norm))
                if partial * (1.0 + _SLACK) + prefix[essential_from] < theta:
                    continue
            if accept is not None and not accept(rec):
                continue
            score = 0.0
            tfs = doc.tfs
            for term, wi, _ in query:
                tf = tfs.get(term, 0)
                if tf:
                    score += wi * (tf / (tf + norm))
            if half_life is not None:
                score *= 0.5 ** (max(0.0, now - doc.stamp) / half_life)
            if alpha:
                score *= (1.0 - alpha) + alpha * rec.entry.relevance
            item = (score, -rec.seq, candidate, rec)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)
            else:
                continue
            if len(heap) == limit:
                theta = heap[0][0]
                while essential_from < nlists and prefix[essential_from + 1] < theta:
                    essential_from += 1
        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, _, rec in heap]

    # -- checks -------------------------------------------------------------------------

    def _check(self, live: Iterable[Record]) -> None:
        """Assert every invariant; ``live`` is every record not yet purged.

        Runtime complexity: O(total postings + total history steps).
        """
        live_set = set(live)
        assert live_set == set(self._docs), "indexed records differ from the live ones"
        expected: dict[str, int] = Counter()
        for rec, doc in self._docs.items():
            assert doc.rec is rec
            assert not doc.purged
            assert doc.retired == (rec.died != NEVER), f"{rec!r}: retired flag out of date"
            assert doc.length == sum(doc.tfs.values())
            for term in doc.tfs:
                expected[term] += 0
                if not doc.retired:
                    expected[term] += 1
        assert set(expected) == set(self._terms), "terms differ from the live documents'"
        for term, entry in self._terms.items():
            docnos = [doc.docno for doc in entry.docs]
            assert all(x < y for x, y in zip(docnos, docnos[1:], strict=False)), (
                f"{term!r}: unsorted"
            )
            assert entry.dead == sum(doc.purged for doc in entry.docs)
            assert entry.dead < len(entry.docs)
            assert 2 * entry.dead <= len(entry.docs)
            for doc, tf in zip(entry.docs, entry.tfs, strict=True):
                if not doc.purged:
                    assert doc.tfs.get(term) == tf, f"{term!r}: stale tf"
                    assert tf <= entry.max_tf
                    assert doc.length >= entry.min_len
            listed = {doc.rec for doc in entry.docs if not doc.purged}
            holders = {rec for rec, doc in self._docs.items() if term in doc.tfs}
            assert listed == holders, f"{term!r}: posting list misses documents"
            self._check_history(entry.df, expected[term])
        active = [doc for doc in self._docs.values() if not doc.retired]
        self._check_history(self._count, len(active))
        self._check_history(self._total, sum(doc.length for doc in active))

    def _check_history(self, history: _History, newest: int) -> None:
        versions = history.versions
        assert len(versions) == len(history.values)
        assert all(x < y for x, y in zip(versions, versions[1:], strict=False)), (
            "history out of order"
        )
        assert history.newest() == newest, "history disagrees with the documents"
        assert all(value >= 0 for value in history.values)
        if len(versions) > 1:
            assert history in self._dirty, "a multi-step history escapes vacuum"
