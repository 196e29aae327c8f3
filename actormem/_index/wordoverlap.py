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
:class:`~actormem._index.substring.SubstringVocab` maps a query word to the tokens that contain
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
from functools import reduce
from itertools import repeat
from operator import or_
from typing import Any, cast

import attrs
import numpy as np

from .._record import Record
from .._util import Final
from .scoring import Accept, ReadView, ScratchPool, drain, zeroed_steps
from .substring import SubstringVocab

__all__ = ["WordOverlapScorer", "combine_word_overlap", "word_overlap_score"]

#: Bytes of cached word match sets kept across retrieves (least recently used dropped).
_CACHE_BYTES = 64 << 20
#: A cached match set is extended by testing the texts of up to this many new groups;
#: beyond that it is rebuilt from the posting lists.
_SCAN_NEW = 4096
#: A match set is kept as one byte per group when it holds at least 1/_DENSE of them.
_DENSE = 16
#: Python-level work items (groups, records, lists) between two yields of ``top_k_steps``.
_STEP = 128
#: Array elements one vectorised operation of ``top_k_steps`` touches between two yields.
_CHUNK = 1 << 15
#: Groups of one count whose bounds are sorted out between two yields.
_VISIT = 1 << 13
#: Postings joined and scattered into a match set between two yields (random writes).
_JOIN = 1 << 13
#: The owner renumbers the groups once this many numbers, and over half, are purged.
_RENUMBER_MIN = 4096
#: Records of the relevance walk between two yields.
_WALK_STEP = 128
#: Scratch count arrays kept per dtype for later retrieves (avoids page faults).
_POOL = 64

#: Short query words answered from a bit mask per group (``_Numbering.masks``): 64
#: characters, then 64 two-character words. Their posting unions are the largest (a
#: one-letter word is in most texts), so this turns the costliest first lookups into
#: one vectorised AND. Any other word goes through the vocabulary.
_SHORT: tuple[str, ...] = (
    *"abcdefghijklmnopqrstuvwxyz0123456789-.,'\":;!?()/_=+&$%#@*[]<>|{}",
    *"on in is at to of do my he me we it an as be by go if no or so up us am oh ok hi".split(),
    *(str(i) for i in range(10, 32)),
    *"mr ms dr tv pm vs uk la ny dc ai id na ah ha".split(),
)
assert len(_SHORT) == 128 == len(set(_SHORT)), len(_SHORT)
_SHORT_BIT = {w: i for i, w in enumerate(_SHORT)}
#: Groups whose masks the owner computes at once (:meth:`_Numbering.fill_masks`); fewer
#: are pending at any time. A retrieve that reads the masks first computes the pending
#: ones, ``_MASK_STEP`` between two yields (about 3 us each).
_MASK_BATCH = 128
_MASK_STEP = 32


def _pair_table() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The mask bits (low and high 64) of a character pair ``(a, b)`` at ``a * 129 + b``
    (code points above 127 as 128): those of the :data:`_SHORT` character ``a`` and of
    the :data:`_SHORT` 2-character word ``ab``."""
    lo = np.zeros(129 * 129, np.uint64)
    hi = np.zeros(129 * 129, np.uint64)
    for w, bit in _SHORT_BIT.items():
        half = lo if bit < 64 else hi
        value = np.uint64(1 << (bit & 63))
        if len(w) == 1:
            half[ord(w) * 129 : ord(w) * 129 + 129] |= value
        else:
            half[ord(w[0]) * 129 + ord(w[1])] |= value
    return lo, hi


_PAIR_LO, _PAIR_HI = _pair_table()

# What :meth:`_WordOverlapIndex._match` returns: the kind of a word's match set.
_NONE, _DENSE_SET, _SPARSE_SET = range(3)


def _short_mask(token: str) -> int:
    """The 128-bit mask of the :data:`_SHORT` words ``token`` contains: the reference
    for :func:`_text_masks`. O(len(token))."""
    return sum(1 << bit for bit, w in enumerate(_SHORT) if w in token)


def _text_masks(
    texts: list[str],
) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The :func:`_short_mask` of each of ``texts`` (lower-cased) as a whole, the low
    and high 64 bits in two arrays, vectorised: a :data:`_SHORT` word has no whitespace,
    so the mask of a text is the union of its tokens' masks. Each text is followed by a
    newline, so every character (and that newline) starts a pair. O(total length) in
    numpy: about 3 us for a text of 240 characters in a batch of 128."""
    joined = "\n".join(texts) + "\n\n"
    codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), np.uint32)
    codes = np.minimum(codes, 128)
    pairs = codes[:-1] * 129
    pairs += codes[1:]
    lens = np.fromiter(map(len, texts), np.int64, len(texts))
    lens += 1
    starts = np.cumsum(lens)
    starts -= lens
    return (
        np.bitwise_or.reduceat(_PAIR_LO[pairs], starts),
        np.bitwise_or.reduceat(_PAIR_HI[pairs], starts),
    )


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

    def matching_steps(self, word: str) -> Generator[None, None, list[list[Record]]]:
        """The posting lists of the items containing ``word`` (lists the owner may append
        invisible records to). O(candidates), in bounded steps."""
        ids = yield from self.vocab.lookup_steps(word)
        out: list[list[Record]] = []
        get = self.lists.get
        for start in range(0, len(ids), _STEP * 4):
            out.extend(filter(None, map(get, ids[start : start + _STEP * 4])))
            yield
        return out

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
        "masked",
        "masks",
        "maxrel",
        "minseq",
        "n",
        "pdead",
        "pending",
        "post",
        "recent",
        "scratch",
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
        #: Per group number below ``masked``, the :data:`_SHORT` words its text
        #: contains (bits 0-63 in ``masks[0]``, 64-127 in ``masks[1]``); those of the
        #: fewer than ``_MASK_BATCH`` numbers from ``masked`` to ``n`` are pending,
        #: their lower-cased texts in ``pending``.
        self.masks = (np.zeros(capacity, np.uint64), np.zeros(capacity, np.uint64))
        self.masked = 0
        self.pending: list[str] = []
        #: Token -> group numbers, ascending (appended in order; compaction keeps order).
        self.post: dict[str, array[int]] = {}
        self.pdead: dict[str, int] = {}  # token -> purged group numbers in its list
        #: Lower-cased text of group number ``g`` at ``g % _SCAN_NEW``, for the last
        #: ``_SCAN_NEW`` numbers: what extending a cached match set reads.
        self.recent: list[str] = [""] * _SCAN_NEW
        #: word -> (groups covered, dense?, byte per group or group numbers).
        self.cache: dict[str, tuple[int, bool, np.ndarray[Any, Any]]] = {}
        self.cache_bytes = 0
        #: Spare count arrays of the current capacity (see ``_take``).
        self.scratch = ScratchPool(_POOL)

    def grow(self) -> None:
        """Double the arrays' capacity (new arrays: readers keep the old ones). O(n)."""
        cap = 2 * len(self.maxrel)
        n = self.n
        maxrel = np.zeros(cap, np.float64)
        minseq = np.zeros(cap, np.int64)
        maxrel[:n] = self.maxrel[:n]
        minseq[:n] = self.minseq[:n]
        lo, hi = np.zeros(cap, np.uint64), np.zeros(cap, np.uint64)
        lo[:n], hi[:n] = self.masks[0][:n], self.masks[1][:n]
        self.maxrel, self.minseq, self.masks = maxrel, minseq, (lo, hi)
        self.scratch.clear()

    def fill_masks(self, most: int | None = None) -> None:
        """Compute the pending masks (numbers ``masked`` to ``n``), or the first
        ``most`` of them. Writes only numbers no reader reads from the masks yet (the
        owner and readers both call it; each call is atomic). O(their text length),
        vectorised."""
        pending = self.pending
        if not pending:
            return
        if most is not None and most < len(pending):
            texts, self.pending = pending[:most], pending[most:]
        else:
            texts, self.pending = pending, []
        start = self.masked
        stop = start + len(texts)
        lo, hi = _text_masks(texts)
        self.masks[0][start:stop] = lo
        self.masks[1][start:stop] = hi
        self.masked = stop


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
            pending = e.pending
            pending.append(low)
            if len(pending) >= _MASK_BATCH:
                e.fill_masks()
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
        old.fill_masks()
        live_ids = [gid for gid, g in enumerate(old.glist) if g is not None]
        size = len(live_ids)
        e = _Numbering(max(64, 1 << (2 * size).bit_length()))
        old_ids = np.array(live_ids, np.int64)
        remap = np.full(old.n, -1, np.int32)
        remap[old_ids] = np.arange(size, dtype=np.int32)
        e.maxrel[:size] = old.maxrel[old_ids]
        e.minseq[:size] = old.minseq[old_ids]
        e.masks[0][:size] = old.masks[0][old_ids]
        e.masks[1][:size] = old.masks[1][old_ids]
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
        e.n = e.masked = size
        for gid in range(max(0, size - _SCAN_NEW), size):
            e.recent[gid % _SCAN_NEW] = texts[gid].lower()
        for tok, lst in old.post.items():
            ids = remap[np.frombuffer(lst, np.int32)]
            kept = array("i")
            kept.frombytes(ids[ids >= 0].tobytes())
            e.post[tok] = kept
        self._e = e

    # ------------------------------------------------------------------ reader side

    def _match(self, e: _Numbering, w: str, n: int) -> Generator[None, None, tuple[int, Any]]:
        """The groups numbered below ``n`` whose text contains ``w``, as one of
        ``(_NONE, None)``; ``(_DENSE_SET, a byte per group)`` (read ``[:n]``);
        ``(_SPARSE_SET, group numbers)`` (unsorted, possibly repeated or ``>= n``).
        May include purged groups. O(groups added since) for a cached word; else O(n)
        vectorised for a :data:`_SHORT` word (from the masks), O(postings of the tokens
        containing ``w``) for another; all in bounded steps."""
        bit = _SHORT_BIT.get(w)
        cache = e.cache
        hit = cache.get(w)
        if hit is not None:
            del cache[w]
            cache[w] = hit  # most recently used last
            upto, dense, data = hit
            if upto >= n:
                return (_DENSE_SET if dense else _SPARSE_SET), data
            if bit is not None:
                dense, ext = yield from self._short_set(e, w, bit, n, upto, dense, data)
                return (_DENSE_SET if dense else _SPARSE_SET), ext
            if n - upto <= _SCAN_NEW:
                extended = yield from self._extend(e, w, n, upto, dense, data)
                if extended is not None:
                    return (_DENSE_SET if dense else _SPARSE_SET), extended
        if bit is not None:
            dense, found = yield from self._short_set(e, w, bit, n, 0, False, None)
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
        for start in range(0, end, _STEP):
            toks = filter(None, map(item_of, ids[start : min(end, start + _STEP)]))
            got = list(filter(None, map(post.get, toks)))
            got_lens = list(map(len, got))
            lists += got
            lens += got_lens
            total += sum(got_lens)
            yield
        if not lists:
            return _NONE, None
        dense = total * _DENSE >= n
        out: np.ndarray[Any, Any]
        parts: list[np.ndarray[Any, Any]] = []
        if dense:  # room to extend in place; paged in before the random writes below
            out = yield from zeroed_steps(n + n // 4, np.uint8)
        slices: list[array[int]] = []
        size = 0
        for k, (lst, length) in enumerate(zip(lists, lens, strict=True)):
            for start in range(0, length, _JOIN):
                # A long list is read in slices (copies); newer numbers are dropped below.
                piece = lst if length <= _JOIN else lst[start : start + _JOIN]
                slices.append(piece)
                size += len(piece)
                if (
                    size < _JOIN
                    and len(slices) < _STEP // 2
                    and (k + 1 < len(lists) or start + _JOIN < length)
                ):
                    continue
                gids = np.frombuffer(b"".join(slices), np.int32)
                gids = gids[gids < n]
                if dense:
                    out[gids] = 1
                else:
                    parts.append(gids)
                slices, size = [], 0
                yield
        if not dense:
            out = np.concatenate(parts) if len(parts) != 1 else parts[0]
        if total >= self._cache_min:
            self._remember(e, w, n, dense, out)
        return (_DENSE_SET if dense else _SPARSE_SET), out

    def _short_set(
        self,
        e: _Numbering,
        w: str,
        bit: int,
        n: int,
        upto: int,
        dense: bool,
        data: np.ndarray[Any, Any] | None,
    ) -> Generator[None, None, tuple[bool, np.ndarray[Any, Any]]]:
        """``(dense?, set)``: the match set of the :data:`_SHORT` word ``w`` (mask bit
        ``bit``) below ``n``, from the masks: with ``data`` (a cached set for groups
        below ``upto``) that set extended, else new (a new set is returned sparse, as
        group numbers, and remembered dense or sparse). O(n - upto) vectorised, in
        chunks, after computing the pending masks below ``n`` (the owner's work)."""
        while e.masked < n:
            e.fill_masks(_MASK_STEP)
            yield
        masks = e.masks[bit >> 6]
        one = np.uint64(1 << (bit & 63))
        if data is None:
            out = np.zeros(n + n // 4, np.uint8)  # room to extend in place
            hits = 0
            # The set's group numbers, collected while it may still turn out sparse
            # (one flatnonzero over all n at the end was a ~2 ms step at 1M).
            parts: list[np.ndarray[Any, Any]] | None = []
            for start in range(0, n, _CHUNK):
                stop = min(n, start + _CHUNK)
                part = (masks[start:stop] & one) != 0
                out[start:stop] = part
                got = int(np.count_nonzero(part))
                hits += got
                if parts is not None:
                    if hits * _DENSE >= n:
                        parts = None  # dense whatever follows
                    elif got:
                        gids = np.flatnonzero(part)
                        gids += start
                        parts.append(gids.astype(np.int32))
                yield
            if parts is None:
                if hits >= self._cache_min:
                    self._remember(e, w, n, True, out)
                return True, out
            gids = np.concatenate(parts) if parts else np.zeros(0, np.int32)
            if hits >= self._cache_min:
                self._remember(e, w, n, False, gids)
            return False, gids
        new: list[np.ndarray[Any, Any]] = []
        for start in range(upto, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            found = np.flatnonzero((masks[start:stop] & one) != 0)
            found += start
            new.append(found.astype(np.int32))
            yield
        added = np.concatenate(new) if new else np.zeros(0, np.int32)
        ext = yield from self._put_and_remember(e, w, n, upto, dense, data, added)
        return dense, ext

    def _extend(
        self,
        e: _Numbering,
        w: str,
        n: int,
        upto: int,
        dense: bool,
        data: np.ndarray[Any, Any],
    ) -> Generator[None, None, np.ndarray[Any, Any] | None]:
        """A cached match set of ``w`` for groups below ``upto``, extended to ``n`` by
        testing the recent texts, and remembered; None if the owner overwrote texts this
        needed meanwhile. A dense set is written in place when it has room (readers of
        it read below their own ``n``, and every writer writes the same truth).
        O(n - upto) Python steps, plus O(upto) copied in chunks when a dense set grows."""
        recent = e.recent
        new: list[int] = []
        for start in range(upto, n, _STEP):
            if e.n - _SCAN_NEW > start:
                return None  # the owner has overwritten the texts to read
            for g in range(start, min(n, start + _STEP)):
                if w in recent[g % _SCAN_NEW]:
                    new.append(g)
            yield
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
        if dense:
            if len(data) >= n:
                ext = data
            else:
                ext = np.zeros(n + n // 2, np.uint8)
                for start in range(0, upto, 4 * _CHUNK):
                    stop = min(upto, start + 4 * _CHUNK)
                    ext[start:stop] = data[start:stop]
                    yield
            ext[added] = 1
        else:
            ext = np.concatenate((data, np.asarray(added, np.int32)))
        self._remember(e, w, n, dense, ext)
        return ext

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

    @staticmethod
    def _take(e: _Numbering, dtype: Any, n: int) -> Generator[None, None, np.ndarray[Any, Any]]:
        """A zeroed array of at least ``n`` elements of ``dtype`` from the numbering's
        :class:`~actormem._index.scoring.ScratchPool`. Give it back with :meth:`_give`. O(n)
        in steps."""
        return (yield from e.scratch.take_steps(dtype, n, len(e.maxrel)))

    @staticmethod
    def _give(e: _Numbering, arr: np.ndarray[Any, Any]) -> None:
        e.scratch.give(arr, len(e.maxrel))

    @staticmethod
    def _add_counts(
        counts: np.ndarray[Any, Any],
        kind: int,
        data: Any,
        n: int,
        m: int,
        mark: np.ndarray[Any, Any] | None,
        word: int,
    ) -> Generator[None, None, None]:
        """Add ``m`` to ``counts[g]`` once for every group ``g < n`` of a match set from
        :meth:`_match`. ``mark`` (a per-group word number, needed only for a sparse set
        over ``_CHUNK`` numbers) removes the repeats across chunks. O(n) or O(set) in
        chunks of ``_CHUNK``."""
        dt = counts.dtype.type
        if kind == _DENSE_SET:
            for start in range(0, n, _CHUNK):
                stop = min(n, start + _CHUNK)
                part = data[start:stop]
                counts[start:stop] += part if m == 1 else part * dt(m)
                yield
        elif len(data) <= _CHUNK:
            counts[data[data < n]] += dt(m)  # a repeated number is counted once
        else:
            assert mark is not None
            for start in range(0, len(data), _JOIN):  # random writes: _JOIN at a time
                gids = data[start : start + _JOIN]
                gids = gids[gids < n]
                gids = gids[mark[gids] != word]
                mark[gids] = word
                counts[gids] += dt(m)
                yield

    @staticmethod
    def _visit(
        idx: np.ndarray[Any, Any],
        part: float,
        maxrel: np.ndarray[Any, Any],
        minseq: np.ndarray[Any, Any],
        glist: list[Record | _Group | None],
        heap: list[tuple[float, int, Record]],
        limit: int,
        push: Any,
        admitted: Any,
        tagged: set[Record],
        progress: list[int],
    ) -> Generator[None, None, None]:
        """Score the records of groups ``idx`` (all of one matched count, whose score
        part is ``part``) into ``heap`` while they can enter: the best ``limit`` groups
        by (bound, smallest seq) first, picked with ``numpy.partition``, then ever
        larger batches. ``progress[0]`` counts Python iterations, for a yield every
        ``_STEP``."""
        if len(idx) > _VISIT:
            # In parts (any order is exact: each part stops only where it can't enter).
            for start in range(0, len(idx), _VISIT):
                yield from _WordOverlapIndex._visit(
                    idx[start : start + _VISIT],
                    part,
                    maxrel,
                    minseq,
                    glist,
                    heap,
                    limit,
                    push,
                    admitted,
                    tagged,
                    progress,
                )
            return
        # combine_word_overlap(maxrel, count, n_words, False), term by term.
        bounds = ((0.5 * maxrel[idx] + part) + 0.0) + 0.1
        seqs = minseq[idx]
        if len(heap) == limit:
            kth, kth_seq = heap[0][0], -heap[0][1]
            keep = (bounds > kth) | ((bounds == kth) & (seqs < kth_seq))
            if not keep.all():
                idx, bounds, seqs = idx[keep], bounds[keep], seqs[keep]
        if not len(idx):
            return
        uniform = bool(bounds.min() == bounds.max())
        yield
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
            for g, bound, mseq in zip(
                idx[sel].tolist(), bounds[sel].tolist(), seqs[sel].tolist(), strict=True
            ):
                progress[0] += 1
                if not progress[0] % _STEP:
                    yield
                if len(heap) == limit:
                    worst = heap[0]
                    if bound < worst[0] or (bound == worst[0] and mseq > -worst[1]):
                        return  # neither this group nor any later one can enter
                item = glist[g]
                if item is None:
                    continue
                # The owner only appends (invisible) records to a group's list, or
                # replaces it whole.
                recs = item.recs if type(item) is _Group else (item,)
                for rec in recs:
                    progress[0] += 1
                    if not progress[0] % _STEP:
                        yield
                    # combine_word_overlap(rel, c, n_words, False), term by term.
                    score = ((0.5 * rec.entry.relevance + part) + 0.0) + 0.1
                    if len(heap) == limit:
                        worst = heap[0]
                        if score < worst[0] or (score == worst[0] and rec.seq > -worst[1]):
                            continue
                    if rec not in tagged and admitted(rec):
                        push(rec, score)
            if rest is None:
                return
            idx, bounds, seqs = idx[rest], bounds[rest], seqs[rest]
            batch *= 4
            yield

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        result: list[tuple[float, Record]] = drain(self.top_k_steps(view, query, limit, accept))
        return result

    #: ``top_k_steps`` takes ``min_matched=`` (see ``thresholds.py``).
    supports_min_matched = True

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept, *, min_matched: int = 0
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k`, yielding after every bounded chunk of work: at most ``_CHUNK``
        array elements per vectorised operation and ``_STEP`` Python iterations between
        two yields, at any size (see the module documentation). Writes between the
        yields do not change the result. With ``min_matched`` > 0, only records whose
        text contains at least that many query words (counted as in the score) are
        returned."""
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
            for lst in (yield from self._tags.matching_steps(q)):
                for start in range(0, len(lst), _STEP * 4):
                    tagged.update(lst[start : start + _STEP * 4])
                    yield

        # Matched words per group number, vectorised.
        dtype: Any = np.uint8 if n_words < 256 else np.uint16 if n_words < 65536 else np.int64
        # Pooled arrays, viewed to the `n` groups this retrieve sees (beyond `n` a
        # pooled array holds another retrieve's garbage).
        counts_all: np.ndarray[Any, Any] = yield from self._take(e, dtype, n)
        counts = counts_all[:n]
        mark_all: np.ndarray[Any, Any] | None = None
        mark: np.ndarray[Any, Any] | None = None
        for number, (w, m) in enumerate(mult.items(), 1):
            kind, data = yield from self._match(e, w, n)
            if kind == _NONE:
                continue
            if kind == _SPARSE_SET and len(data) > _CHUNK and mark_all is None:
                mark_all = yield from self._take(e, np.uint16, n)
                mark = mark_all[:n]
            yield from self._add_counts(counts, kind, data, n, m, mark, number)
            yield
        if mark_all is not None:
            self._give(e, mark_all)

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
                if count >= min_matched:  # min_matched (thresholds.py)
                    push(rec, combine_word_overlap(rec.entry.relevance, count, n_words, True))
            done += 1
            if not done % _STEP:
                yield

        # Groups by matched count, highest first, while the count's best bound can still
        # enter; a count's groups in sets of about _CHUNK, each by bound then smallest seq.
        tops: list[tuple[int, int]] = []  # (first group number, largest count) per chunk
        top_count = 0
        for start in range(0, n, _CHUNK):
            most = int(counts[start : start + _CHUNK].max())
            if most:
                tops.append((start, most))
                top_count = max(top_count, most)
            yield
        progress = [0]
        for c in range(top_count, max(min_matched, 1) - 1, -1):  # min_matched: thresholds.py
            if len(heap) == limit and combine_word_overlap(max_rel, c, n_words, False) < heap[0][0]:
                break
            part = 0.4 * (c / n_words)
            pending: list[np.ndarray[Any, Any]] = []
            size = 0
            starts = [start for start, most in tops if most >= c]
            for k, start in enumerate(starts):
                found = np.flatnonzero(counts[start : start + _CHUNK] == c)
                found += start
                pending.append(found)
                size += len(found)
                if size < _VISIT and k + 1 < len(starts):
                    continue
                yield
                idx = pending[0] if len(pending) == 1 else np.concatenate(pending)
                pending, size = [], 0
                yield from self._visit(
                    idx, part, maxrel, minseq, glist, heap, limit, push, admitted, tagged, progress
                )

        # Entries that match no word: visit them in descending relevance while their
        # bound can still enter the top k.
        below: float | None = None
        seen = 0
        while min_matched <= 0 and not (  # min_matched: thresholds.py
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
        self._give(e, counts_all)

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
            if gid < e.masked:
                mask = reduce(or_, map(_short_mask, text.lower().split()), 0)
                assert int(e.masks[0][gid]) | int(e.masks[1][gid]) << 64 == mask, text
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
        assert e.n - _MASK_BATCH < e.masked <= e.n
        assert len(e.pending) == e.n - e.masked
        for item, low in zip(e.glist[e.masked :], e.pending, strict=True):
            assert item is None or _text_of(item).lower() == low
        self._tags._check(tags)
        assert e.cache_bytes == sum(d.nbytes for _, _, d in e.cache.values())
        for w, (upto, dense, data) in e.cache.items():
            got = set(np.flatnonzero(data).tolist() if dense else data.tolist())
            for g in range(upto):
                grp = e.glist[g]
                if grp is not None:
                    assert (g in got) == (w in _text_of(grp).lower()), (w, g)
