"""The word-overlap index: the owner's side (posting-list storage and maintenance).

The owner adds and purges records here; readers call ``top_k``/``top_k_steps``, which
hand over to :class:`~.search.WordOverlapSearch` with the numbering current at their
start. See the package documentation of :mod:`actormem._index.wordoverlap`.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Generator, Iterable
from functools import reduce
from itertools import repeat
from operator import or_
from typing import Any, cast

import numpy as np

from ..._record import Record
from ..scoring import Accept, ReadView, drain
from ..substring import SubstringVocab
from . import ccore, knobs
from .masks import _short_mask
from .matchsets import MatchFinder
from .numbering import _Group, _Numbering, _TagPostings, _tags, _text_of
from .search import WordOverlapSearch

__all__ = ["_WordOverlapIndex"]


class _WordOverlapIndex:
    """Owner-written, snapshot-read index for :class:`WordOverlapScorer`.

    Memory per distinct text: a map entry (a dict item, or 11-16 bytes of the C
    ``GroupTable``: ``knobs._GROUP_TABLE``) and a slot in the group list, 16 bytes of
    bounds, 4 bytes per distinct token in posting lists, a :class:`_Group` only for a
    text stored more than once; plus the token vocabulary.
    """

    __slots__ = ("_e", "_search", "_tags", "_vocab")

    def __init__(self, cache_min_postings: int) -> None:
        self._e = _Numbering(64)
        #: Tokens, each acquired once while its posting list has a live group number.
        self._vocab = SubstringVocab()
        self._tags = _TagPostings()  # lower-cased tag -> records
        self._search = WordOverlapSearch(self._tags, MatchFinder(self._vocab, cache_min_postings))

    # ------------------------------------------------------------------ owner side

    def add(self, rec: Record) -> None:
        """Index ``rec``. O(tokens of the text) for a new text (plus the vocabulary's
        cost for new tokens), O(1) for a text already indexed."""
        e = self._e
        text = rec.cols.text(rec.slot)
        rel = rec.cols.relevance(rec.slot)
        groups = e.groups
        gid = groups.get(text)
        if gid is None:
            gid = e.n
            if gid == len(e.maxrel):
                e.grow()
            e.maxrel[gid] = rel
            e.minseq[gid] = rec.seq
            if type(groups) is dict:
                groups[text] = gid
                e.glist.append(rec)
            else:  # knobs._GROUP_TABLE: glist.append(rec) and text -> gid in one step
                groups.append(rec)
            low = text.lower()
            e.recent[gid % knobs._SCAN_NEW] = low
            e.n = gid + 1
            post = e.post
            if ccore.core() is not None:  # the same, compiled (ccore.py)
                if knobs._ADD_CACHED:
                    cache = e.tokcache
                    if cache is None:
                        cache = e.tokcache = ccore.token_cache()
                    ccore.add_text_cached(post, low, gid, self._vocab, cache, e.epoch)
                elif knobs._ADD_KNOWN:
                    ccore.add_text_known(post, low, gid, self._vocab)
                else:
                    ccore.add_text(post, low, gid, self._vocab)
            else:
                self._add_tokens(post, low, gid)
            pending = e.pending
            pending.append(low)
            if len(pending) >= knobs._MASK_BATCH:
                e.fill_masks()
                e.token_bits()
                e.sync_ids(self._vocab)
            elif e.n >= e.tbits_due:  # readers may keep `pending` short
                e.token_bits()
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
        if rec.cols.get(rec.slot, "tags"):
            self._tags.add(_tags(rec), rec)

    def _add_group(
        self,
        rec: Record,
        first: int,
        lows: list[str],
        rels: list[float],
        seqs: list[int],
        lower: Any,
        scan: int,
    ) -> None:
        """:meth:`add_many`'s loop body for one record: every record without the
        compiled runs, else those ``add_groups_new`` leaves (a text seen before, tags).
        O(len(text))."""
        e = self._e
        groups = e.groups
        glist = e.glist
        entry = rec.entry
        text = entry.memory
        rel = entry.relevance
        gid = groups.get(text)
        if gid is None:
            low = lower(text)  # the fallible step first, as add_groups_new
            gid = first + len(lows)
            if type(groups) is dict:
                groups[text] = gid
                glist.append(rec)
            else:  # knobs._GROUP_TABLE: the number is len(glist), as add's
                groups.append(rec)
            e.recent[gid % scan] = low
            lows.append(low)
            rels.append(rel)
            seqs.append(rec.seq)
        else:
            if gid >= first:  # new in this batch: its bounds are not written yet
                at = gid - first
                if rel > rels[at]:
                    rels[at] = rel
                if rec.seq < seqs[at]:
                    seqs[at] = rec.seq
            else:
                if rel > e.maxrel[gid]:
                    e.maxrel[gid] = rel
                if rec.seq < e.minseq[gid]:
                    e.minseq[gid] = rec.seq
            item = glist[gid]
            if type(item) is _Group:
                item.recs.append(rec)
                item.unpurged += 1
            else:
                assert isinstance(item, Record)
                glist[gid] = _Group(text, [item, rec])
        if entry.tags:
            self._tags.add(_tags(rec), rec)

    def add_many(self, recs: list[Record]) -> None:
        """:meth:`add` of each of ``recs`` in order: the same structures, with the groups'
        bookkeeping in one loop and the new texts' tokens in one compiled call
        (``knobs._ADD_MANY``; otherwise, or without the compiled core, ``add`` each).
        O(sum of the adds)."""
        if not (knobs._ADD_MANY and knobs._ADD_CACHED) or ccore.core() is None:
            for rec in recs:
                self.add(rec)
            return
        e = self._e
        scan = knobs._SCAN_NEW
        lower = ccore.lower()  # knobs._LOWER_C: str.lower's value
        first = e.n  # the batch's first new group number
        lows: list[str] = []
        rels: list[float] = []
        seqs: list[int] = []
        # knobs._ADD_GROUPS_C: runs of records with new texts in one C call; the record
        # it stops at (a text seen before, tags) and, without it, every record by the
        # loop's body
        groups_c = ccore.add_groups() if type(recs) is list else None
        i = 0
        n = len(recs)
        while i < n:
            if groups_c is not None:
                i = groups_c(
                    recs, i, e.groups, e.glist, e.recent, scan, first, lows, rels, seqs, lower
                )
                if i >= n:
                    break
            self._add_group(recs[i], first, lows, rels, seqs, lower, scan)
            i += 1
        if not lows:
            return
        stop = first + len(lows)
        while stop > len(e.maxrel):
            e.grow()  # copies the first e.n bounds: the batch's are written below
        e.maxrel[first:stop] = rels
        e.minseq[first:stop] = seqs
        e.n = stop
        cache = e.tokcache
        if cache is None:
            cache = e.tokcache = ccore.token_cache()
        ccore.add_texts_cached(e.post, lows, first, self._vocab, cache, e.epoch)
        # The pending masks filled where add's would be: each time _MASK_BATCH are due.
        batch = knobs._MASK_BATCH
        done = 0
        while done < len(lows):
            room = max(batch - len(e.pending), 1)
            e.pending += lows[done : done + room]
            done += room
            if len(e.pending) >= batch:
                e.fill_masks()
                e.token_bits()
                e.sync_ids(self._vocab)
        if e.n >= e.tbits_due:  # readers may keep `pending` short
            e.token_bits()

    def _add_tokens(self, post: dict[str, array[int]], low: str, gid: int) -> None:
        """The reference of :func:`ccore.add_text`: ``gid`` appended to the posting list of
        each distinct token of ``low``, a new token acquired with a list of its own."""
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

    def retire(self, rec: Record) -> None:
        """Nothing to do: older snapshots still read ``rec`` through the postings."""

    def purge(self, rec: Record) -> None:
        """Drop ``rec``. O(1), or O(tokens) when its text leaves; amortized O(1) per
        posting for the compactions."""
        e = self._e
        text = rec.cols.text(rec.slot)
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
                lst = post.get(tok)
                if lst is None:  # only behind a restored image that lacked it (persist.py)
                    continue
                d = pdead.get(tok, 0) + 1
                if d == len(lst):
                    e.epoch += 1  # the word memo holds lists as they were (numbering.py)
                    del post[tok]
                    e.forget_id(self._vocab.id_of(tok), None)
                    if e.tokcache is not None:
                        ccore.cache_forget(e.tokcache, post, tok, e.epoch)
                    pdead.pop(tok, None)
                    self._vocab.release(tok)
                elif 2 * d > len(lst):
                    e.epoch += 1
                    post[tok] = kept = array("i", [g for g in lst if glist[g] is not None])
                    e.forget_id(self._vocab.id_of(tok), kept)
                    if e.tokcache is not None:
                        ccore.cache_forget(e.tokcache, post, tok, e.epoch)
                    pdead.pop(tok, None)
                else:
                    pdead[tok] = d
            if e.dead >= knobs._RENUMBER_MIN and 2 * e.dead > e.n:
                self._renumber()
        else:
            assert type(group) is _Group
            group.dead += 1
            if 2 * group.dead > len(group.recs):
                group.recs = [r for r in group.recs if not r.purged]
                group.dead = 0
        if rec.cols.get(rec.slot, "tags"):
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
        by_dict = type(e.groups) is dict
        for old_gid in live_ids:
            item = old.glist[old_gid]
            assert item is not None
            if type(item) is _Group:
                copy = _Group(item.text, item.recs)  # the readers of `old` keep theirs
                copy.unpurged, copy.dead = item.unpurged, item.dead
                item = copy
            if by_dict:
                e.groups[_text_of(item)] = len(e.glist)
            e.glist.append(item)
            texts.append(_text_of(item))
        if not by_dict:  # knobs._GROUP_TABLE: every text at once, one allocation
            e.groups.index_from(0)
        e.n = e.masked = size
        e.write_rows(0, size)
        for gid in range(max(0, size - knobs._SCAN_NEW), size):
            e.recent[gid % knobs._SCAN_NEW] = texts[gid].lower()
        for tok, lst in old.post.items():
            ids = remap[np.frombuffer(lst, np.int32)]
            kept = array("i")
            kept.frombytes(ids[ids >= 0].tobytes())
            e.post[tok] = kept
        e.sync_ids(self._vocab)
        old.current = False  # its readers' memos look their gram lists up again
        self._e = e

    # ------------------------------------------------------------------ reader side

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        result: list[tuple[float, Record]] = drain(self.top_k_steps(view, query, limit, accept))
        return result

    #: ``top_k_steps`` takes ``min_matched=`` (see ``thresholds.py``).
    supports_min_matched = True

    def one_step_ok(self, query: str, entries: int = 0) -> bool:
        """Whether a retrieve of ``query`` over a view of ``entries`` entries is small
        enough to run its steps in one task step (``knobs._ONE_STEP_GROUPS``,
        ``_ONE_STEP_CHARS`` and ``_ONE_STEP_ENTRIES``): the numbering has at most that
        many groups, the query that many characters and the view that many entries (a
        group holds every record of its text, each tested by the retrieve's filter).
        O(1)."""
        return (
            self._e.n <= knobs._ONE_STEP_GROUPS
            and len(query) <= knobs._ONE_STEP_CHARS
            and entries <= knobs._ONE_STEP_ENTRIES
        )

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept, *, min_matched: int = 0
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k`, yielding after every bounded chunk of work (see
        :meth:`WordOverlapSearch.top_k_steps`). Writes between the yields do not change
        the result: the numbering is taken at the call (``knobs._DIRECT_STEPS``: the
        search's own generator, one level less for every step to pass through) or at
        the first step, and kept. ``min_matched``: see
        :mod:`actormem._index.thresholds`."""
        if knobs._DIRECT_STEPS:
            return self._search.top_k_steps(self._e, view, query, limit, accept, min_matched)
        return self._wrapped_steps(view, query, limit, accept, min_matched)

    def _wrapped_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept, min_matched: int
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k_steps` as a generator of its own (the numbering taken at the
        first step): the path before ``knobs._DIRECT_STEPS``."""
        return (
            yield from self._search.top_k_steps(self._e, view, query, limit, accept, min_matched)
        )

    def _check(self, live: Iterable[Record]) -> None:
        e = self._e
        by_text: dict[str, list[Record]] = {}
        tags: dict[str, list[Record]] = {}
        for rec in live:
            assert not rec.purged
            by_text.setdefault(rec.cols.text(rec.slot), []).append(rec)
            for t in _tags(rec):
                tags.setdefault(t, []).append(rec)
        if type(e.groups) is not dict:  # knobs._GROUP_TABLE: the C table's own layout
            assert e.groups.glist is e.glist
            e.groups._check()
        assert set(e.groups) == set(by_text)
        assert len(e.glist) == e.n <= len(e.maxrel) == len(e.minseq)
        assert sum(g is not None for g in e.glist) == len(e.groups) == e.n - e.dead
        assert not (e.dead >= knobs._RENUMBER_MIN and 2 * e.dead > e.n)
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
                alive = [item]
            assert sorted(map(id, alive)) == sorted(map(id, recs)), text
            assert all(r.cols.relevance(r.slot) <= e.maxrel[gid] for r in recs)
            assert all(r.seq >= e.minseq[gid] for r in recs)
            if gid >= e.n - knobs._SCAN_NEW:
                assert e.recent[gid % knobs._SCAN_NEW] == text.lower()
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
        # byid (knobs._LISTS_BY_ID): a slot is None or the list its token has in post
        items = self._vocab.items
        for iid, slot in enumerate(e.byid):
            assert slot is None or e.post.get(items.get(iid, "")) is slot, iid
        assert e.n - knobs._MASK_BATCH < e.masked <= e.n
        if e.rows is not None:  # the masks below `masked` as rows of bits, and their counts
            stride = len(e.rows) // 128
            assert stride == ccore.words_of(len(e.maxrel))
            flags = np.unpackbits(e.rows.view(np.uint8), bitorder="little").reshape(128, -1)
            for b in range(128):
                row = flags[b, : e.masked].astype(bool)
                want = (e.masks[b >> 6][: e.masked] >> np.uint64(b & 63)) & np.uint64(1) != 0
                assert (row == want).all(), b
                assert not flags[b, e.masked :].any(), b
                assert e.rowcount[b] == int(want.sum()), b
        assert len(e.pending) == e.n - e.masked
        for item, low in zip(e.glist[e.masked :], e.pending, strict=True):
            assert item is None or _text_of(item).lower() == low
        self._tags._check(tags)
        if e.tokcache is not None:  # the token cache never holds a list post no longer has
            post_id, epoch, cached = ccore.cache_entries(e.tokcache)
            if post_id == id(e.post) and epoch == e.epoch:  # else it empties at its next use
                for tok, lst in cached:
                    assert e.post.get(tok) is lst, tok
        for key, (lst, covered, bits) in e.tbits.items():  # the long lists' bitsets
            assert key == id(lst)
            assert 0 <= covered <= len(lst)
            assert len(bits) == ccore.words_of(len(e.maxrel))
            assert len(lst) >= e.tbits_min
            held = set(np.flatnonzero(np.unpackbits(bits.view(np.uint8), bitorder="little")))
            assert set(lst[:covered]) <= held <= set(lst)
        e.cache._check()
        for w, (upto, dense, data) in e.cache.entries.items():
            if dense and data.dtype == np.uint64:  # a bitset (ccore.BitPlanes' sets)
                data = np.unpackbits(data.view(np.uint8), bitorder="little")
            got = set(np.flatnonzero(data).tolist() if dense else data.tolist())
            for g in range(upto):
                grp = e.glist[g]
                if grp is not None:
                    assert (g in got) == (w in _text_of(grp).lower()), (w, g)
