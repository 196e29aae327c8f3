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
Matching depends only on the text, so the index numbers each distinct lower-cased text
(a *group* of the record versions that carry it) with a group number, never reused, and
keeps per group number the largest relevance and the smallest ``seq`` of its records
(numpy arrays: upper and lower bounds, never lowered by a purge). Per whitespace token of
the lower-cased texts it keeps a *posting list* (``array('i')`` of group numbers), and a
:class:`~actormem._substring.SubstringVocab` maps a query word to the tokens that contain
it; tags get a vocabulary and posting lists of records.

A retrieve counts, for every group number at once, how many query words its text
contains: per distinct word, the set of matching groups is the union of the posting
lists of the tokens that contain the word (joined in C, as one numpy array), added to a
numpy count array. The sets of words with long postings (the common words of questions:
*what*, *the*, *do*, names) are cached, as a byte per group or as sorted group numbers,
and extended for groups added since by testing ``word in text``; so a repeated common
word costs one vectorised add. Then the groups are visited by matched count, highest
first: within one count the score's bound is a function of the group's largest
relevance, and the best ``limit`` groups by (bound, smallest seq) are picked with
``numpy.partition``, scored exactly record by record into a heap, and the next batch
taken only while its bound can still enter the top ``limit``. Entries that match no word
are visited in descending relevance through the view, as long as their bound can still
enter. Bounds are computed with the score's own float operations in its own order, so
the stop tests are exact, ties included.

Readers take the group count and the arrays once, at the start, and only read group
numbers below that count; posting lists and group record lists are append-only for
readers and are compacted by replacing them (a posting list when half of its group
numbers are purged). :meth:`_WordOverlapIndex.top_k_steps` yields between bounded chunks
of work (see ``notes/slicing_protocol.md``); writes between the yields are invisible to it.
"""

from __future__ import annotations

import heapq
from array import array
from collections import deque
from collections.abc import Generator, Iterable
from itertools import repeat
from typing import Any, cast

import attrs
import numpy as np

from ._record import Record
from ._scoring import Accept, ReadView, drain
from ._substring import SubstringVocab
from ._util import Final

__all__ = ["WordOverlapScorer", "combine_word_overlap", "word_overlap_score"]

#: Bytes of cached word match sets kept across retrieves (least recently used dropped).
_CACHE_BYTES = 64 << 20
#: A cached match set is extended by testing the texts of up to this many new groups;
#: beyond that it is rebuilt from the posting lists.
_SCAN_NEW = 4096
#: A match set is kept as one byte per group when it holds at least 1/_DENSE of them.
_DENSE = 16
#: Work items (groups, records, postings) between two yields of ``top_k_steps``.
_STEP = 512
#: The owner renumbers the groups once this many numbers, and over half, are purged.
_RENUMBER_MIN = 4096
#: Records of the relevance walk between two yields.
_WALK_STEP = 512


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
        essential_budget: Postings (group numbers over the tokens that contain a query
            word) from which a word's match set is cached across retrieves. Changes
            speed and memory only, never results.

    Runtime complexity of a retrieve: O(q * G) vectorised (numpy) for q distinct query
    words and G group numbers (distinct texts ever indexed since the last rebuild), plus
    O(P) for the postings of the words whose match sets are not cached, plus O(V log k)
    in Python for the V records scored exactly (typically a few times k).
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


def _tags(rec: Record) -> set[str]:
    return {t.lower() for t in rec.entry.tags}


class _TagPostings:
    """Tag vocabulary plus one posting list of records per lower-cased tag."""

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


class _Group:
    """Two or more unpurged record versions with the same text (one version is kept
    bare, as its :class:`~actormem._record.Record`, without a group object).

    ``recs`` is append-only for readers; purged records leave it lazily (the list is
    replaced when half of it is purged).
    """

    __slots__ = ("dead", "recs", "text", "unpurged")

    def __init__(self, text: str, recs: list[Record]) -> None:
        self.text = text
        self.recs = recs
        self.unpurged = len(recs)
        self.dead = 0


def _text_of(item: Record | _Group) -> str:
    return item.text if type(item) is _Group else item.entry.memory  # type: ignore[union-attr]


class _Numbering:
    """Everything that depends on the group numbers; replaced whole when the owner
    renumbers (see :meth:`_WordOverlapIndex._renumber`), so a reader that took it at
    its start keeps a consistent set. Only the owner writes it, and only the newest."""

    __slots__ = (
        "cache",
        "cache_bytes",
        "dead",
        "glist",
        "groups",
        "maxrel",
        "minseq",
        "n",
        "pdead",
        "post",
        "recent",
    )

    def __init__(self, capacity: int) -> None:
        self.groups: dict[str, int] = {}  # text -> its group number
        #: Group number -> its record (one version) or :class:`_Group` (several), or
        #: None once it is purged (numbers are not reused until a renumbering).
        self.glist: list[Record | _Group | None] = []
        self.n = 0  # group numbers handed out
        self.dead = 0  # purged group numbers
        #: Per group number: the largest relevance and the smallest seq of its records
        #: ever added (bounds; replaced, not resized, on growth).
        self.maxrel = np.zeros(capacity, np.float64)
        self.minseq = np.zeros(capacity, np.int64)
        #: Token -> group numbers, ascending (appended in order; compaction keeps order).
        self.post: dict[str, array[int]] = {}
        self.pdead: dict[str, int] = {}  # token -> purged group numbers in its list
        #: Lower-cased text of group number ``g`` at ``g % _SCAN_NEW``, for the last
        #: ``_SCAN_NEW`` numbers: what extending a cached match set reads.
        self.recent: list[str] = [""] * _SCAN_NEW
        #: word -> (groups covered, dense?, byte per group or group numbers).
        self.cache: dict[str, tuple[int, bool, np.ndarray[Any, Any]]] = {}
        self.cache_bytes = 0

    def grow(self) -> None:
        cap = 2 * len(self.maxrel)
        maxrel = np.zeros(cap, np.float64)
        minseq = np.zeros(cap, np.int64)
        maxrel[: self.n] = self.maxrel[: self.n]
        minseq[: self.n] = self.minseq[: self.n]
        self.maxrel, self.minseq = maxrel, minseq


class _WordOverlapIndex:
    """Owner-written, snapshot-read index for :class:`WordOverlapScorer`.

    Memory per distinct text: a dict item and a slot in the group list, 16 bytes of
    bounds, 4 bytes per distinct token in posting lists, a :class:`_Group` only for a
    text stored more than once; plus the token vocabulary.
    """

    __slots__ = ("_cache_min", "_e", "_tags", "_vocab")

    def __init__(self, cache_min_postings: int) -> None:
        self._cache_min = cache_min_postings
        self._e = _Numbering(64)
        #: Tokens, each acquired once while its posting list has a live group number.
        self._vocab = SubstringVocab()
        self._tags = _TagPostings()  # lower-cased tag -> records

    # ------------------------------------------------------------------ owner side

    def add(self, rec: Record) -> None:
        """Index ``rec``. O(tokens of the text) for a new text (plus the vocabulary's
        cost for new tokens), O(1) for a text already indexed."""
        e = self._e
        text = rec.entry.memory
        rel = rec.entry.relevance
        gid = e.groups.get(text)
        if gid is None:
            gid = e.n
            if gid == len(e.maxrel):
                e.grow()
            e.maxrel[gid] = rel
            e.minseq[gid] = rec.seq
            e.groups[text] = gid
            e.glist.append(rec)
            low = text.lower()
            e.recent[gid % _SCAN_NEW] = low
            e.n = gid + 1
            post = e.post
            toks = set(low.split())
            lists = list(map(post.get, toks))
            if None in lists:
                acquire = self._vocab.acquire
                for tok, lst in zip(toks, lists, strict=True):
                    if lst is None:
                        acquire(tok)
                        post[tok] = array("i", (gid,))
                    else:
                        lst.append(gid)
            else:
                appends = map(array.append, cast("list[array[int]]", lists), repeat(gid))
                deque(appends, maxlen=0)  # the appends, run in C
        else:
            if rel > e.maxrel[gid]:
                e.maxrel[gid] = rel
            if rec.seq < e.minseq[gid]:
                e.minseq[gid] = rec.seq
            item = e.glist[gid]
            if type(item) is _Group:
                item.recs.append(rec)
                item.unpurged += 1
            else:
                assert isinstance(item, Record)
                e.glist[gid] = _Group(text, [item, rec])
        if rec.entry.tags:
            self._tags.add(_tags(rec), rec)

    def retire(self, rec: Record) -> None:
        """Nothing to do: older snapshots still read ``rec`` through the postings."""

    def purge(self, rec: Record) -> None:
        """Drop ``rec``. O(1), or O(tokens) when its text leaves; amortized O(1) per
        posting for the compactions."""
        e = self._e
        text = rec.entry.memory
        gid = e.groups[text]
        glist = e.glist
        group = glist[gid]
        if type(group) is _Group:
            group.unpurged -= 1
            gone = group.unpurged == 0
        else:
            assert group is rec
            gone = True
        if gone:
            del e.groups[text]
            glist[gid] = None
            e.dead += 1
            post, pdead = e.post, e.pdead
            for tok in set(text.lower().split()):
                d = pdead.get(tok, 0) + 1
                lst = post[tok]
                if d == len(lst):
                    del post[tok]
                    pdead.pop(tok, None)
                    self._vocab.release(tok)
                elif 2 * d > len(lst):
                    post[tok] = array("i", [g for g in lst if glist[g] is not None])
                    pdead.pop(tok, None)
                else:
                    pdead[tok] = d
            if e.dead >= _RENUMBER_MIN and 2 * e.dead > e.n:
                self._renumber()
        else:
            assert type(group) is _Group
            group.dead += 1
            if 2 * group.dead > len(group.recs):
                group.recs = [r for r in group.recs if not r.purged]
                group.dead = 0
        if rec.entry.tags:
            self._tags.purge(_tags(rec))

    def _renumber(self) -> None:
        """Number the live groups 0, 1, ... in their old order, in a new
        :class:`_Numbering` (new group objects sharing the record lists; posting lists
        remapped with numpy; cached match sets dropped). Readers of the old one keep it.
        O(G + T) vectorised, plus O(T) Python steps, for G group numbers and T tokens;
        runs when half the numbers are purged, so amortized O(1 + T/G) per purge."""
        old = self._e
        live_ids = [gid for gid, g in enumerate(old.glist) if g is not None]
        size = len(live_ids)
        e = _Numbering(max(64, 1 << (2 * size).bit_length()))
        old_ids = np.array(live_ids, np.int64)
        remap = np.full(old.n, -1, np.int32)
        remap[old_ids] = np.arange(size, dtype=np.int32)
        e.maxrel[:size] = old.maxrel[old_ids]
        e.minseq[:size] = old.minseq[old_ids]
        texts: list[str] = []
        for old_gid in live_ids:
            item = old.glist[old_gid]
            assert item is not None
            if type(item) is _Group:
                copy = _Group(item.text, item.recs)  # the readers of `old` keep theirs
                copy.unpurged, copy.dead = item.unpurged, item.dead
                item = copy
            e.groups[_text_of(item)] = len(e.glist)
            e.glist.append(item)
            texts.append(_text_of(item))
        e.n = size
        for gid in range(max(0, size - _SCAN_NEW), size):
            e.recent[gid % _SCAN_NEW] = texts[gid].lower()
        for tok, lst in old.post.items():
            ids = remap[np.frombuffer(lst, np.int32)]
            kept = array("i")
            kept.frombytes(ids[ids >= 0].tobytes())
            e.post[tok] = kept
        self._e = e

    # ------------------------------------------------------------------ reader side

    def _match(
        self, e: _Numbering, w: str, n: int
    ) -> Generator[None, None, tuple[bool, np.ndarray[Any, Any] | None]]:
        """The groups numbered below ``n`` whose text contains ``w``: ``(True, a byte
        per group)`` or ``(False, group numbers)`` (unsorted, possibly repeated: add them
        with one fancy-indexed ``+=``, which counts a repeated number once);
        ``(False, None)`` for none.
        May include purged groups. O(postings of the tokens containing ``w``), or
        O(groups added since) for a cached word; vectorised."""
        cache = e.cache
        hit = cache.get(w)
        if hit is not None:
            del cache[w]
            cache[w] = hit  # most recently used last
            upto, dense, data = hit
            if upto >= n:
                return dense, (data[:n] if dense else data[data < n])
            if n - upto <= _SCAN_NEW:
                recent = e.recent
                new: list[int] = []
                whole = True
                for g in range(upto, n):
                    if not g % _STEP:
                        yield
                        if e.n - _SCAN_NEW > g:
                            whole = False  # the owner has overwritten the texts to read
                            break
                    if w in recent[g % _SCAN_NEW]:
                        new.append(g)
            else:
                whole = False
            if whole:
                if dense:
                    ext = np.zeros(n, np.uint8)
                    ext[:upto] = data
                    ext[new] = 1
                else:
                    ext = np.concatenate((data, np.array(new, np.int32)))
                self._remember(e, w, n, dense, ext)
                return dense, ext
        lists = list(filter(None, map(e.post.get, self._vocab.lookup_items(w))))
        if not lists:
            return False, None
        gids = np.frombuffer(b"".join(lists), np.int32)
        total = len(gids)
        if e.n != n:
            gids = gids[gids < n]  # groups added after this retrieve started
        yield
        out: np.ndarray[Any, Any]
        dense = total * _DENSE >= n
        if dense:
            out = np.zeros(n, np.uint8)
            out[gids] = 1
        else:
            out = gids
        if total >= self._cache_min:
            self._remember(e, w, n, dense, out)
        return dense, out

    def _remember(
        self, e: _Numbering, w: str, n: int, dense: bool, data: np.ndarray[Any, Any]
    ) -> None:
        cache = e.cache
        old = cache.pop(w, None)
        if old is not None:
            if old[0] > n:
                cache[w] = old  # a later retrieve knows more
                return
            e.cache_bytes -= old[2].nbytes
        cache[w] = (n, dense, data)
        e.cache_bytes += data.nbytes
        while e.cache_bytes > _CACHE_BYTES and len(cache) > 1:
            oldest = next(iter(cache))
            e.cache_bytes -= cache.pop(oldest)[2].nbytes

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        result: list[tuple[float, Record]] = drain(self.top_k_steps(view, query, limit, accept))
        return result

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k`, yielding after every bounded chunk of work (see the module
        documentation). Writes between the yields do not change the result."""
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
        e = self._e
        n = e.n
        glist = e.glist
        maxrel = e.maxrel[:n]
        minseq = e.minseq[:n]
        groups = e.groups

        def admitted(rec: Record) -> bool:
            return rec.born <= version < rec.died and (accept is None or accept(rec))

        # Entries whose tags contain the whole query: always scored (they get +0.3).
        tagged: set[Record] = set()
        q = query.strip().lower()
        if q:
            for lst in self._tags.matching(q):
                tagged.update(lst)

        # Matched words per group number, vectorised.
        dtype: Any = np.uint8 if n_words < 256 else np.uint16 if n_words < 65536 else np.int64
        counts: np.ndarray[Any, Any] = np.zeros(n, dtype)
        for w, m in mult.items():
            dense, data = yield from self._match(e, w, n)
            if data is None:
                continue
            if dense:
                if m == 1:
                    counts += data
                else:
                    counts += data.astype(dtype) * dtype(m)
            else:
                counts[data] += dtype(m)
            yield

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
                count = int(counts[groups[rec.entry.memory]])
                push(rec, combine_word_overlap(rec.entry.relevance, count, n_words, True))
            done += 1
            if not done % _STEP:
                yield

        # Groups by matched count, highest first; within a count, by bound then min seq.
        for c in range(int(counts.max()) if n else 0, 0, -1):
            if len(heap) == limit and combine_word_overlap(max_rel, c, n_words, False) < heap[0][0]:
                break
            at = counts == c
            if not at.any():
                continue
            idx = np.flatnonzero(at)
            part = 0.4 * (c / n_words)
            bounds = ((0.5 * maxrel[idx] + part) + 0.0) + 0.1
            seqs = minseq[idx]
            uniform = bool(bounds.min() == bounds.max())
            batch = max(limit, 32)
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
                stop = False
                for k, (g, bound, mseq) in enumerate(
                    zip(idx[sel].tolist(), bounds[sel].tolist(), seqs[sel].tolist(), strict=True)
                ):
                    if len(heap) == limit:
                        worst = heap[0]
                        if bound < worst[0] or (bound == worst[0] and mseq > -worst[1]):
                            stop = True  # neither this group nor any later one can enter
                            break
                    item = glist[g]
                    if item is None:
                        continue
                    recs = item.recs if type(item) is _Group else (item,)
                    for rec in recs:
                        # combine_word_overlap(rel, c, n_words, False), term by term.
                        score = ((0.5 * rec.entry.relevance + part) + 0.0) + 0.1
                        if len(heap) == limit:
                            worst = heap[0]
                            if score < worst[0] or (score == worst[0] and rec.seq > -worst[1]):
                                continue
                        if rec not in tagged and admitted(rec):
                            push(rec, score)
                    if not (k + 1) % _STEP:
                        yield
                if stop or rest is None:
                    break
                idx, bounds, seqs = idx[rest], bounds[rest], seqs[rest]
                batch *= 4
                yield

        # Entries that match no word: visit them in descending relevance while their
        # bound can still enter the top k.
        below: float | None = None
        seen = 0
        while not (
            len(heap) == limit and combine_word_overlap(max_rel, 0, n_words, False) < heap[0][0]
        ):
            restarted = False
            for rec in view.by_relevance(below=below):
                seen += 1
                if not seen % _WALK_STEP:
                    yield  # by_relevance re-seeks across yields (the snapshot's contract)
                if len(heap) == limit:
                    # The bound of this and every later entry that matches no word.
                    bound = combine_word_overlap(rec.entry.relevance, 0, n_words, False)
                    worst_score, worst_negseq = heap[0][0], heap[0][1]
                    if bound < worst_score:
                        break
                    if bound == worst_score and -worst_negseq < rec.seq:
                        # Nobody left at this relevance can beat the worst: later seq, and
                        # a score of at most `bound`. Jump to the next lower relevance.
                        below = rec.entry.relevance
                        restarted = True
                        break
                if rec in tagged or counts[groups[rec.entry.memory]]:
                    continue
                if accept is None or accept(rec):
                    push(rec, combine_word_overlap(rec.entry.relevance, 0, n_words, False))
            if not restarted:
                break

        heap.sort(key=lambda item: (-item[0], -item[1]))
        return [(score, rec) for score, _, rec in heap]

    def _check(self, live: Iterable[Record]) -> None:
        e = self._e
        by_text: dict[str, list[Record]] = {}
        tags: dict[str, list[Record]] = {}
        for rec in live:
            assert not rec.purged
            by_text.setdefault(rec.entry.memory, []).append(rec)
            for t in _tags(rec):
                tags.setdefault(t, []).append(rec)
        assert set(e.groups) == set(by_text)
        assert len(e.glist) == e.n <= len(e.maxrel) == len(e.minseq)
        assert sum(g is not None for g in e.glist) == len(e.groups) == e.n - e.dead
        assert not (e.dead >= _RENUMBER_MIN and 2 * e.dead > e.n)
        words: dict[str, list[int]] = {}
        for text, recs in by_text.items():
            gid = e.groups[text]
            item = e.glist[gid]
            assert item is not None
            assert _text_of(item) == text
            if type(item) is _Group:
                alive = [r for r in item.recs if not r.purged]
                assert item.unpurged == len(recs)
                assert item.dead == len(item.recs) - len(alive)
                assert 2 * item.dead <= len(item.recs)
            else:
                alive = [item]  # type: ignore[list-item]
            assert sorted(map(id, alive)) == sorted(map(id, recs)), text
            assert all(r.entry.relevance <= e.maxrel[gid] for r in recs)
            assert all(r.seq >= e.minseq[gid] for r in recs)
            if gid >= e.n - _SCAN_NEW:
                assert e.recent[gid % _SCAN_NEW] == text.lower()
            for t in set(text.lower().split()):
                words.setdefault(t, []).append(gid)
        self._vocab._check(words)
        assert set(e.post) == set(words)
        for t, gids in words.items():
            lst = e.post[t]
            assert list(lst) == sorted(lst), t
            alive_gids = [g for g in lst if e.glist[g] is not None]
            assert alive_gids == sorted(gids), t
            assert len(lst) - len(alive_gids) == e.pdead.get(t, 0), t
            assert 2 * (len(lst) - len(alive_gids)) <= len(lst), t
        assert set(e.pdead) <= set(e.post)
        self._tags._check(tags)
        assert e.cache_bytes == sum(d.nbytes for _, _, d in e.cache.values())
        for w, (upto, dense, data) in e.cache.items():
            got = set(np.flatnonzero(data).tolist() if dense else data.tolist())
            for g in range(upto):
                grp = e.glist[g]
                if grp is not None:
                    assert (g in got) == (w in _text_of(grp).lower()), (w, g)
