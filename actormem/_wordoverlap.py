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
from typing import Any

import attrs

from ._record import NEVER, Record
from ._scoring import Accept, ReadView
from ._substring import SubstringVocab
from ._util import Final

__all__ = ["WordOverlapScorer", "combine_word_overlap", "word_overlap_score"]


#: Words whose rarest gram is in more tokens than this skip the exact postings count.
_EXACT_DF_TOKENS = 4096


def _kth_floor(
    matched: Counter[Any],
    tagged: set[Record],
    groups: dict[str, Any],
    limit: int,
    n_words: int,
    max_rel: float,
    admitted: Callable[[Record], bool],
) -> float | None:
    """A score at least ``limit`` admitted entries are sure to reach, or None.

    Takes the text groups with the most matches so far (by a histogram of the counts,
    then one pass; lower counts join while fewer than ``limit`` entries are admitted) and
    returns the k-th best of their entries' scores counting only those matches. O(G) for
    G candidate groups, plus their entries.
    """
    floor: list[float] = []

    def push(score: float) -> None:
        if len(floor) < limit:
            heapq.heappush(floor, score)
        elif score > floor[0]:
            heapq.heapreplace(floor, score)

    for rec in tagged:
        if admitted(rec):
            base = matched.get(groups[rec.low], 0)
            push(combine_word_overlap(rec.entry.relevance, base, n_words, True))
    hist = Counter(matched.values())
    counts = sorted(hist, reverse=True)
    hi = None
    i = 0
    while i < len(counts) and len(floor) < limit:
        have = 0
        j = i
        while j < len(counts) and have < limit:
            have += hist[counts[j]]
            j += 1
        lo = counts[j - 1]
        for group, count in [
            item for item in matched.items() if item[1] >= lo and (hi is None or item[1] < hi)
        ]:
            if (
                len(floor) == limit
                and combine_word_overlap(max_rel, count, n_words, False) <= floor[0]
            ):
                continue  # no entry of this group can raise the floor
            for rec in group.recs:
                if rec not in tagged and admitted(rec):
                    push(combine_word_overlap(rec.entry.relevance, count, n_words, False))
        hi = lo
        i = j
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
        essential_budget: Postings (distinct texts) a retrieve counts before it starts
            asking, ahead of each further (longer) posting list, whether the entries not
            yet seen can still reach the k-th best score. Changes speed only, never
            results.

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
        """The posting lists of the items containing ``word``. O(candidates), in C."""
        return list(filter(None, map(self.lists.get, self.vocab.lookup(word))))

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


def _tags(rec: Record) -> set[str]:
    return {t.lower() for t in rec.entry.tags}


class _Group:
    """Every unpurged record version whose lower-cased text is ``low``.

    Matching depends only on the text, so posting lists hold groups, not records: an
    agent memory repeats texts (the same tool call, the same fact) and each distinct text
    is indexed once. ``recs`` is append-only for readers; purged records leave it lazily
    (the list is rebuilt when half of it is purged).
    """

    __slots__ = ("dead", "low", "min_seq", "purged", "recs", "unpurged")

    def __init__(self, low: str) -> None:
        self.low = low
        self.recs: list[Record] = []
        #: A lower bound of the records' ``seq`` (exact until a purge), for tie pruning.
        self.min_seq = NEVER
        self.unpurged = 0
        self.dead = 0
        self.purged = False


def _by_count_then_seq(item: tuple[_Group, int]) -> tuple[int, int]:
    return (-item[1], item[0].min_seq)


class _WordOverlapIndex:
    """Owner-written, snapshot-read index for :class:`WordOverlapScorer`."""

    __slots__ = ("_budget", "_groups", "_tags", "_words")

    def __init__(self, essential_budget: int) -> None:
        self._budget = essential_budget
        self._groups: dict[str, _Group] = {}
        self._words = _Postings()  # token -> groups
        self._tags = _Postings()  # lower-cased tag -> records

    def add(self, rec: Record) -> None:
        group = self._groups.get(rec.low)
        if group is None:
            group = self._groups[rec.low] = _Group(rec.low)
            self._words.add(set(rec.low.split()), group)  # type: ignore[arg-type]
        group.recs.append(rec)
        group.unpurged += 1
        if rec.seq < group.min_seq:
            group.min_seq = rec.seq
        if rec.entry.tags:
            self._tags.add(_tags(rec), rec)

    def retire(self, rec: Record) -> None:
        """Nothing to do: older snapshots still read ``rec`` through the postings."""

    def purge(self, rec: Record) -> None:
        group = self._groups[rec.low]
        group.unpurged -= 1
        if group.unpurged == 0:
            group.purged = True
            del self._groups[rec.low]
            self._words.purge(set(rec.low.split()))
        else:
            group.dead += 1
            if 2 * group.dead > len(group.recs):
                group.recs = [r for r in group.recs if not r.purged]
                group.dead = 0
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
        groups = self._groups

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
        info: list[tuple[float, str, list[list[_Group]] | None]] = []
        for w in mult:
            gsize = vocab.gram_size(w)
            if gsize == 0:
                continue  # no token contains w: it matches nothing
            if gsize <= _EXACT_DF_TOKENS:
                lists: list[list[_Group]] = self._words.matching(w)  # type: ignore[assignment]
                size = sum(map(len, lists))
                if size:
                    info.append((size, w, lists))
            else:
                info.append((math.inf, w, None))
        info.sort(key=lambda t: t[0])
        m_open = sum(mult[w] for _, w, _ in info)  # multiplicity of words not yet processed

        # 1. MaxScore's exhaustive part: process words rarest first, counting matches per
        # text group (in C, through Counter), until the entries not yet seen cannot reach
        # the k-th best score the candidates are already sure of.
        matched: Counter[_Group] = Counter()
        spent = 0
        done = 0
        for df, w, maybe_lists in info:
            if spent + df > self._budget and len(matched) + len(tagged) >= limit:
                kth = _kth_floor(matched, tagged, groups, limit, n_words, max_rel, admitted)
                if kth is not None and combine_word_overlap(max_rel, m_open, n_words, False) < kth:
                    break
            if maybe_lists is None:
                maybe_lists = self._words.matching(w)  # type: ignore[assignment]
                assert maybe_lists is not None
                df = float(sum(map(len, maybe_lists)))
            spent += int(df)
            found: Iterable[_Group] = (
                maybe_lists[0] if len(maybe_lists) == 1 else set().union(*maybe_lists)
            )
            for _ in range(mult[w]):
                matched.update(found)
            m_open -= mult[w]
            done += 1
        rest = [w for _, w, _ in info[done:]]
        m_rest = m_open

        heap: list[tuple[float, int, Record]] = []  # worst on top: (score, -seq, rec)

        def push(rec: Record, score: float) -> None:
            item = (score, -rec.seq, rec)
            if len(heap) < limit:
                heapq.heappush(heap, item)
            elif item[:2] > heap[0][:2]:
                heapq.heapreplace(heap, item)

        def full_count(low: str, base: int) -> int:
            for w in rest:
                if w in low:
                    base += mult[w]
            return base

        def offer_group(group: _Group, base: int) -> None:
            count = full_count(group.low, base)
            # combine_word_overlap(rel, count, n_words, False), term by term in its order.
            part = 0.4 * (count / n_words)
            for rec in group.recs:
                if len(heap) == limit:
                    worst = heap[0]
                    bound = ((0.5 * max_rel + part) + 0.0) + 0.1
                    if bound < worst[0] or (bound == worst[0] and group.min_seq > -worst[1]):
                        return  # no entry of this group can enter any more
                    score = ((0.5 * rec.entry.relevance + part) + 0.0) + 0.1
                    if score < worst[0] or (score == worst[0] and rec.seq > -worst[1]):
                        continue
                else:
                    score = ((0.5 * rec.entry.relevance + part) + 0.0) + 0.1
                if rec not in tagged and admitted(rec):
                    push(rec, score)

        # Score the tagged entries, then the groups by matched count, highest first.
        for rec in tagged:
            if admitted(rec):
                count = full_count(rec.low, matched.get(groups[rec.low], 0))
                push(rec, combine_word_overlap(rec.entry.relevance, count, n_words, True))
        if matched:
            hist = Counter(matched.values())
            counts = sorted(hist, reverse=True)
            # Pass 1: the highest counts, down to where at least `limit` groups are.
            have = 0
            for c1 in counts:
                have += hist[c1]
                if have >= limit:
                    break
            first = [item for item in matched.items() if item[1] >= c1]
            first.sort(key=_by_count_then_seq)
            for group, count in first:
                offer_group(group, count)
            # Pass 2: lower counts whose bound can still reach the k-th best.
            c_min = 0
            if len(heap) == limit:
                worst = heap[0][0]
                c_min = c1
                while c_min > 0 and not (
                    combine_word_overlap(max_rel, c_min - 1 + m_rest, n_words, False) < worst
                ):
                    c_min -= 1
            if c_min < c1:
                for group, count in [item for item in matched.items() if c_min <= item[1] < c1]:
                    offer_group(group, count)

        # 2. Everything else matched none of the processed words: visit it in descending
        # relevance while its bound can still enter the top k.
        below: float | None = None
        while True:
            restarted = False
            for rec in view.by_relevance(below=below):
                if rec in tagged or groups[rec.low] in matched:
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
                    push(
                        rec,
                        combine_word_overlap(
                            rec.entry.relevance, full_count(rec.low, 0), n_words, False
                        ),
                    )
            if not restarted:
                break

        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]

    def _check(self, live: Iterable[Record]) -> None:
        by_low: dict[str, list[Record]] = {}
        tags: dict[str, list[Record]] = {}
        for rec in live:
            assert not rec.purged
            by_low.setdefault(rec.low, []).append(rec)
            for t in _tags(rec):
                tags.setdefault(t, []).append(rec)
        assert set(self._groups) == set(by_low)
        words: dict[str, list[_Group]] = {}
        for low, recs in by_low.items():
            group = self._groups[low]
            assert group.low == low
            assert not group.purged
            alive = [r for r in group.recs if not r.purged]
            assert sorted(map(id, alive)) == sorted(map(id, recs)), low
            assert group.unpurged == len(recs)
            assert group.dead == len(group.recs) - len(alive)
            assert 2 * group.dead <= len(group.recs)
            for t in set(low.split()):
                words.setdefault(t, []).append(group)
        self._words._check(words)  # type: ignore[arg-type]
        self._tags._check(tags)
