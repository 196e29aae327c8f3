"""The default scorer: loopctl's word-overlap score, exact, from an index.

Score (loopctl ``InMemoryStore::retrieve``, ``src/memory/builtin.rs``)::

    score = 0.5 * relevance
          + 0.4 * matched / max(number of query words, 1)
          + 0.3 * (1 if any tag, lower-cased, contains the whole trimmed, lower-cased query)
          + 0.1

Query words are ``query.lower().split()``: punctuation kept, a repeated word counted each
time. A word matches when it is a substring of ``memory.lower()`` ("deploy" matches
"deploys"). From loopctl's later line: the query is trimmed before the tag test, and a
blank query gives no tag bonus (the original gave every tagged entry the bonus, since the
empty string is in every tag). Ties keep insertion order.

Theory of operation
-------------------
Per whitespace token of the lower-cased text, the index keeps a *posting list* of the
record versions containing it, and a :class:`~actormem._substring.SubstringVocab` maps a
query word to the tokens that contain it; tags get the same pair of structures. Top-k
follows MaxScore (Turtle & Flood, 1995): the score is a per-entry prior
(``0.5 * relevance + 0.1``) plus one fixed contribution per matched word, so

1. the *essential* words (the rarest, whose postings are short) and the tag matches are
   scored exhaustively from their postings;
2. every other entry matches none of the essential words, so its score is at most
   ``combine(relevance, m_rest)``, where ``m_rest`` counts the non-essential query
   words. Entries are visited in descending relevance (the snapshot's relevance order)
   and scored with substring tests of the non-essential words only, until that bound
   falls below the k-th best score. Because IEEE rounding is monotone, the bound is
   computed with the score's own formula and the stop test is exact, ties included.

Posting lists are append-only for readers: records enter at ``add`` (invisible to older
snapshots by version), stay through ``retire`` (older snapshots still see them) and
leave at ``purge`` lazily: a list is rebuilt when half of it is purged.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterable
from operator import itemgetter

import attrs

from ._record import Record
from ._scoring import Accept, ReadView
from ._substring import SubstringVocab
from ._util import Final

__all__ = ["WordOverlapScorer", "combine_word_overlap", "word_overlap_score"]


#: Words whose rarest gram is in more tokens than this skip the exact postings count.
_EXACT_DF_TOKENS = 4096


def _kth_floor(
    matched: Counter[Record],
    tagged: set[Record],
    limit: int,
    n_words: int,
    admitted: Callable[[Record], bool],
) -> float | None:
    """A score at least ``limit`` admitted candidates are sure to reach, or None.

    Takes the candidates with the most matches so far (in growing slices, so rejected
    ones cannot hide the rest) and returns the k-th best of their scores counting only
    those matches. O(C log k) for C candidates.
    """
    floor: list[float] = []

    def push(score: float) -> None:
        if len(floor) < limit:
            heapq.heappush(floor, score)
        elif score > floor[0]:
            heapq.heapreplace(floor, score)

    for rec in tagged:
        if admitted(rec):
            push(combine_word_overlap(rec.entry.relevance, matched.get(rec, 0), n_words, True))
    want, taken = limit, 0
    while taken < len(matched):
        slice_ = heapq.nlargest(want, matched.items(), key=itemgetter(1))
        for rec, count in slice_[taken:]:
            if rec not in tagged and admitted(rec):
                push(combine_word_overlap(rec.entry.relevance, count, n_words, False))
        taken = len(slice_)
        if len(floor) == limit:
            break
        want *= 4
    return floor[0] if len(floor) == limit else None


def combine_word_overlap(relevance: float, matched: int, n_words: int, tag: bool) -> float:
    """The score from its parts, in the one fixed float order every code path uses."""
    return 0.5 * relevance + 0.4 * (matched / n_words) + (0.3 if tag else 0.0) + 0.1


def word_overlap_score(memory: str, tags: Iterable[str], relevance: float, query: str) -> float:
    """loopctl's word-overlap score of one entry for ``query``, from scratch. O(q * len(memory)).

    This is the reference the index agrees with (see :class:`WordOverlapScorer`).
    """
    words = query.lower().split()
    low = memory.lower()
    matched = sum(1 for w in words if w in low)
    q = query.strip().lower()
    tag = bool(q) and any(q in t.lower() for t in tags)
    return combine_word_overlap(relevance, matched, max(len(words), 1), tag)


@attrs.frozen(kw_only=True, slots=True)
class WordOverlapScorer(metaclass=Final):
    """loopctl's built-in word-overlap score, exact, answered from an inverted index.

    See the module documentation for the formula. Scores lie in [0.1, 1.3].

    Args:
        essential_budget: Postings a retrieve visits before it starts asking, ahead of each
            further (longer) posting list, whether the entries not yet seen can still
            reach the k-th best score. Changes speed only, never results.

    Runtime complexity of a retrieve: O(P + C + V) plus O(log k) per entry that enters
    the heap, where P is the postings length of the words processed exhaustively, C the
    candidates they yield and V the entries visited in relevance order (typically about
    k). A query made only of very common words can visit many entries.
    """

    essential_budget: int = 2048

    @property
    def name(self) -> str:
        return "word-overlap"

    def make_index(self) -> _WordOverlapIndex:
        return _WordOverlapIndex(self.essential_budget)

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        return word_overlap_score(entry_text, tags, relevance, query)


class _Postings:
    """Token (or tag) vocabulary plus one posting list of records per item."""

    __slots__ = ("dead", "lists", "vocab")

    def __init__(self) -> None:
        self.vocab = SubstringVocab()
        self.lists: dict[int, list[Record]] = {}
        self.dead: dict[int, int] = {}

    def add(self, items: Iterable[str], rec: Record) -> None:
        lists = self.lists
        for item in items:
            iid = self.vocab.acquire(item)
            lst = lists.get(iid)
            if lst is None:
                lists[iid] = [rec]
            else:
                lst.append(rec)

    def purge(self, items: Iterable[str]) -> None:
        """``rec.purged`` is already True for the record that held ``items``."""
        lists, dead = self.lists, self.dead
        for item in items:
            iid = self.vocab.id_of(item)
            assert iid is not None
            if self.vocab.release(item):
                del lists[iid]
                dead.pop(iid, None)
                continue
            d = dead.get(iid, 0) + 1
            lst = lists[iid]
            if 2 * d > len(lst):
                lists[iid] = [r for r in lst if not r.purged]
                dead.pop(iid, None)
            else:
                dead[iid] = d

    def matching(self, word: str) -> list[list[Record]]:
        lists = self.lists
        return [lists[i] for i in self.vocab.lookup(word)]

    def _check(self, expected: dict[str, list[Record]]) -> None:
        self.vocab._check()
        assert set(self.lists) == {self.vocab.id_of(t) for t in expected}
        for item, recs in expected.items():
            iid = self.vocab.id_of(item)
            assert iid is not None
            lst = self.lists[iid]
            alive = [r for r in lst if not r.purged]
            assert sorted(map(id, alive)) == sorted(map(id, recs)), item
            assert len(lst) - len(alive) == self.dead.get(iid, 0)


def _tokens(rec: Record) -> set[str]:
    return set(rec.low.split())


def _tags(rec: Record) -> set[str]:
    return {t.lower() for t in rec.entry.tags}


class _WordOverlapIndex:
    """Owner-written, snapshot-read index for :class:`WordOverlapScorer`."""

    __slots__ = ("_budget", "_tags", "_words")

    def __init__(self, essential_budget: int) -> None:
        self._budget = essential_budget
        self._words = _Postings()
        self._tags = _Postings()

    def add(self, rec: Record) -> None:
        self._words.add(_tokens(rec), rec)
        if rec.entry.tags:
            self._tags.add(_tags(rec), rec)

    def retire(self, rec: Record) -> None:
        """Nothing to do: older snapshots still read ``rec`` through the postings."""

    def purge(self, rec: Record) -> None:
        self._words.purge(_tokens(rec))
        if rec.entry.tags:
            self._tags.purge(_tags(rec))

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        if limit <= 0 or len(view) == 0:
            return []
        version = view.version
        words = query.lower().split()
        n_words = max(len(words), 1)
        mult: dict[str, int] = {}
        for w in words:
            mult[w] = mult.get(w, 0) + 1
        top = next(view.by_relevance(), None)
        max_rel = top.entry.relevance if top is not None else 1.0

        def admitted(rec: Record) -> bool:
            return rec.born <= version < rec.died and (accept is None or accept(rec))

        # Entries whose tags contain the whole query: always scored (they get +0.3).
        tagged: set[Record] = set()
        q = query.strip().lower()
        if q:
            for lst in self._tags.matching(q):
                tagged.update(lst)

        # Words that occur in some token, rarest first (by postings length).
        vocab = self._words.vocab
        info: list[tuple[float, str, list[list[Record]] | None]] = []
        for w in mult:
            gsize = vocab.gram_size(w)
            if gsize == 0:
                continue  # no token contains w: it matches nothing
            if gsize <= _EXACT_DF_TOKENS:
                lists = self._words.matching(w)
                df = sum(map(len, lists))
                if df:
                    info.append((df, w, lists))
            else:
                info.append((math.inf, w, None))
        info.sort(key=lambda t: t[0])
        m_open = sum(mult[w] for _, w, _ in info)  # multiplicity of words not yet processed

        # 1. MaxScore's exhaustive part: process words rarest first, counting matches per
        # record (in C, through Counter), until the records not yet seen cannot reach the
        # k-th best score the candidates are already sure of.
        matched: Counter[Record] = Counter()
        spent = 0
        done = 0
        for df, w, lists in info:
            if spent + df > self._budget and len(matched) + len(tagged) >= limit:
                kth = _kth_floor(matched, tagged, limit, n_words, admitted)
                if kth is not None and combine_word_overlap(max_rel, m_open, n_words, False) < kth:
                    break
            if lists is None:
                lists = self._words.matching(w)
                df = sum(map(len, lists))
            spent += int(df)
            recs: Iterable[Record] = lists[0] if len(lists) == 1 else set().union(*lists)
            for _ in range(mult[w]):
                matched.update(recs)
            m_open -= mult[w]
            done += 1
        rest = [w for _, w, _ in info[done:]]
        m_rest = m_open

        heap: list[tuple[float, int, Record]] = []  # worst on top: (score, -seq, rec)

        def offer(rec: Record, base: int, tag: bool) -> None:
            low = rec.low
            count = base
            for w in rest:
                if w in low:
                    count += mult[w]
            item = (combine_word_overlap(rec.entry.relevance, count, n_words, tag), -rec.seq, rec)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)

        # Score the tagged entries, then the candidates by matched count, highest first,
        # one count at a time, until the next count cannot beat the k-th best.
        for rec in tagged:
            if admitted(rec):
                offer(rec, matched.get(rec, 0), True)
        hist = Counter(matched.values())
        counts = sorted(hist, reverse=True)
        i = 0
        while i < len(counts):
            if len(heap) == limit:
                bound = combine_word_overlap(max_rel, counts[i] + m_rest, n_words, False)
                if bound < heap[0][0]:
                    break
            # One pass takes the next counts down to where at least `limit` candidates are.
            j, have = i, 0
            while j < len(counts) and have < limit:
                have += hist[counts[j]]
                j += 1
            hi, lo = counts[i], counts[j - 1]
            for rec, count in matched.items():
                if lo <= count <= hi and rec not in tagged and admitted(rec):
                    offer(rec, count, False)
            i = j

        # 2. Everything else matched none of the processed words: visit it in descending
        # relevance while its bound can still enter the top k.
        below: float | None = None
        while True:
            restarted = False
            for rec in view.by_relevance(below=below):
                if rec in matched or rec in tagged:
                    continue
                if len(heap) == limit:
                    bound = combine_word_overlap(rec.entry.relevance, m_rest, n_words, False)
                    worst_score, worst_negseq = heap[0][0], heap[0][1]
                    if bound < worst_score:
                        break
                    if bound == worst_score and -worst_negseq < rec.seq:
                        # Nobody left at this relevance can beat the worst: later seq, and
                        # a score of at most `bound`. Jump to the next lower relevance.
                        below = rec.entry.relevance
                        restarted = True
                        break
                if accept is None or accept(rec):
                    offer(rec, 0, False)
            if not restarted:
                break

        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]

    def _check(self, live: Iterable[Record]) -> None:
        words: dict[str, list[Record]] = {}
        tags: dict[str, list[Record]] = {}
        for rec in live:
            assert not rec.purged
            for t in _tokens(rec):
                words.setdefault(t, []).append(rec)
            for t in _tags(rec):
                tags.setdefault(t, []).append(rec)
        self._words._check(words)
        self._tags._check(tags)
