"""The word-overlap index's storage: what depends on the group numbers, and the tags.

A *group* is one distinct text and the record versions that carry it (a bare
:class:`~actormem._record.Record` while there is one). :class:`_Numbering` holds, per
group number, the group, the bounds (largest relevance, smallest seq), the short-word
masks, and per token the posting list of group numbers; the owner replaces it whole when
it renumbers, so a reader keeps the one it took at its start. :class:`_TagPostings`
holds the records per lower-cased tag (tags are few and not renumbered).
"""

from __future__ import annotations

from array import array
from collections.abc import Generator, Iterable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ..._record import Record
from .. import kernels
from ..entrycols import compiled_columns
from ..scoring import ScratchPool
from ..substring import SubstringVocab
from . import ccore, knobs
from .masks import _text_masks
from .matchsets import MatchCache


def _tags(rec: Record) -> set[str]:
    return {t.lower() for t in rec.cols.get(rec.slot, "tags")}


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

    def none_match(self, word: str) -> bool:
        """Whether :meth:`matching_steps` of ``word`` is surely ``[]``, found without it:
        a word of 3 or more characters (shorter ones may activate a short word in the
        vocabulary) and no 3-gram in the vocabulary at all (no tag ever added, as in the
        main job); ``matching_steps`` would then read one missing gram and yield
        nothing. False says nothing. O(1)."""
        return len(word) > 2 and not self.vocab._grams

    def matching_steps(self, word: str) -> Generator[None, None, list[list[Record]]]:
        """The posting lists of the items containing ``word`` (lists the owner may append
        invisible records to). O(candidates), in bounded steps."""
        ids = yield from self.vocab.lookup_steps(word)
        out: list[list[Record]] = []
        get = self.lists.get
        for start in range(0, len(ids), knobs._STEP * 4):
            out.extend(filter(None, map(get, ids[start : start + knobs._STEP * 4])))
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


class _StoredTexts(Sequence[str]):
    """The texts of ``records`` (records on slots of an entries' store), each read from
    its slot as a str only when asked (a restore that took its digest and groups from
    the store's UTF-8 makes no str of every text; branch open42), with ``hashes``: the
    reader's str hash of each record's text (the bytes of an int64 array, -1 none) or
    None, which :meth:`_Numbering.set_glist` hands to ``GroupTable.index_from``.
    O(len(text)) an item."""

    __slots__ = ("hashes", "records")

    def __init__(self, records: list[Any], hashes: bytes | None) -> None:
        assert hashes is None or len(hashes) == 8 * len(records)
        self.records = records
        self.hashes = hashes

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.records)))]
        rec = self.records[i]
        return rec.cols.text(rec.slot)

    def firsts(self, mask: bytes) -> _StoredTexts:
        """The items where ``mask`` (a byte an item) is 1, their hashes with them.
        O(len(self))."""
        keep = np.frombuffer(mask, np.uint8).astype(bool)
        records = [r for r, k in zip(self.records, keep.tolist(), strict=True) if k]
        if self.hashes is None:
            return _StoredTexts(records, None)
        return _StoredTexts(records, np.frombuffer(self.hashes, np.int64)[keep].tobytes())


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
    return item.text if type(item) is _Group else item.cols.text(item.slot)  # type: ignore[union-attr]


def _group_map(glist: list[Record | _Group | None], table: bool) -> Any:
    """A new, empty text -> group number map over ``glist``: the core's ``GroupTable``
    (the texts read back from ``glist``; ``knobs._GROUP_TABLE``) when ``table`` and the
    core has it, else a dict. ``TypeError`` for a ``glist`` that is no list. O(1)."""
    if type(glist) is not list:
        raise TypeError("glist must be a list")
    mod = ccore.core() if table else None
    make = getattr(mod, "GroupTable", None)
    if make is None or not compiled_columns():
        return {}
    return make(glist, Record.__dict__["cols"], Record.__dict__["slot"], _Group.__dict__["text"])


#: Postings from which a list (int32 group numbers) fills a whole 2 MiB page.
_HUGE_POSTINGS = kernels.HUGE_PAGE_MIN // 4


class _Numbering:
    """Everything that depends on the group numbers; replaced whole when the owner
    renumbers (see ``_WordOverlapIndex._renumber``), so a reader that took it at
    its start keeps a consistent set. Only the owner writes it, and only the newest."""

    __slots__ = (
        "cache",
        "current",
        "dead",
        "epoch",
        "glist",
        "groups",
        "huge_at",
        "masked",
        "masks",
        "maxrel",
        "memo",
        "minseq",
        "n",
        "pdead",
        "pending",
        "post",
        "bitsets",
        "recent",
        "rowcount",
        "rows",
        "scratch",
        "tbits",
        "tbits_due",
        "tbits_min",
        "tbits_next",
        "tbits_step",
        "tokcache",
        "byid",
    )

    def __init__(self, capacity: int) -> None:
        #: Group number -> its record (one version) or :class:`_Group` (several), or
        #: None once it is purged (numbers are not reused until a renumbering).
        self.glist: list[Record | _Group | None] = []
        #: Text -> its group number: a dict, or (``knobs._GROUP_TABLE``) the core's
        #: ``GroupTable`` over :attr:`glist`, which keeps no text and no int (a new text
        #: goes in with ``groups.append(item)``, its item appended to ``glist`` too).
        self.groups: Any = _group_map(self.glist, knobs._GROUP_TABLE)
        self.n = 0  # group numbers handed out
        self.dead = 0  # purged group numbers
        #: Per group number: the largest relevance and the smallest seq of its records
        #: ever added (bounds; replaced, not resized, on growth).
        zeros = partial(kernels.huge_zeros, huge=knobs._HUGE_PAGES)  # knobs._HUGE_PAGES
        self.maxrel = zeros(capacity, np.float64)
        self.minseq = zeros(capacity, np.int64)
        #: Per group number below ``masked``, the :data:`_SHORT` words its text
        #: contains (bits 0-63 in ``masks[0]``, 64-127 in ``masks[1]``); those of the
        #: fewer than ``knobs._MASK_BATCH`` numbers from ``masked`` to ``n`` are pending,
        #: their lower-cased texts in ``pending``.
        self.masks = (zeros(capacity, np.uint64), zeros(capacity, np.uint64))
        self.masked = 0
        self.pending: list[str] = []
        #: With ``knobs._SHORT_ROWS`` and the compiled core, the masks below ``masked``
        #: as 128 rows of bits (row ``b``: the groups whose text contains the
        #: :data:`_SHORT` word ``b``, ``words_of(capacity)`` uint64 words at
        #: ``b * words_of(capacity)``), and per row its bits set; else None (also once
        #: masks were computed without the core: the rows would be stale).
        self.rows: np.ndarray[Any, Any] | None = None
        self.rowcount = np.zeros(128, np.int64)
        if knobs._SHORT_ROWS and ccore.core() is not None:
            self.rows = zeros(128 * ccore.words_of(capacity), np.uint64)
        #: Token -> group numbers, ascending (appended in order; compaction keeps order).
        self.post: dict[str, array[int]] = {}
        self.pdead: dict[str, int] = {}  # token -> purged group numbers in its list
        #: Lower-cased text of group number ``g`` at ``g % _SCAN_NEW``, for the last
        #: ``knobs._SCAN_NEW`` numbers: what extending a cached match set reads.
        self.recent: list[str] = [""] * knobs._SCAN_NEW
        #: Cached match sets of query words, for these numbers.
        self.cache = MatchCache()
        #: The small match sets ``ccore.count_words`` keeps (young and old generation,
        #: and the young one's numbers), valid while ``epoch`` stays: the owner bumps it
        #: when it replaces or deletes a posting list (until then it only appends).
        self.memo: list[Any] = [{}, {}, 0]
        self.epoch = 0
        #: Whether this is the index's numbering the owner writes (False once a
        #: renumbering or a restore replaced it): only then does every release of a
        #: vocabulary token bump :attr:`epoch` first, which ``count_words`` may rely on
        #: (``knobs._MEMO_EPOCH_ONLY``).
        self.current = True
        #: Spare count arrays of the current capacity (see ``search``).
        self.scratch = ScratchPool(knobs._POOL)
        #: The owner's token cache (``ccore.token_cache``: token -> posting list, for
        #: ``ccore.add_text_cached``), made at the first add through it; None before.
        #: The purge tells it of every list it deletes or replaces.
        self.tokcache: object | None = None
        #: Spare bitsets over the current capacity (``words_of(capacity)`` uint64): a
        #: retrieve's large sparse match sets added as dense ones (see ``search``).
        self.bitsets = ScratchPool(knobs._POOL, 32 << 20)
        #: With ``knobs._TOKEN_BITS``, the long posting lists' bitsets: ``id(list)`` ->
        #: ``[list, covered, bitset]``, the bitset (``words_of(capacity)`` uint64) holding
        #: the bits of ``list[:covered]`` at least (a reader that needs more sets the
        #: list's next postings and raises ``covered``: the same truth), never a number
        #: the list lacks. A list the purge replaces is a new object: its old entry no
        #: longer matches (``entry[0] is not`` the list read), and the next
        #: :meth:`token_bits` drops it. Replaced whole by the owner, never shrunk in place.
        self.tbits: dict[int, list[Any]] = {}
        #: With ``knobs._HUGE_PAGES``, the long posting lists advised as huge pages at
        #: :meth:`token_bits`'s upkeep: ``id(list)`` -> its address then (advised again
        #: once a reallocation moved it; a stale id costs one more advice at most).
        self.huge_at: dict[int, int] = {}
        #: Lists shorter than this have no entry in :attr:`tbits`.
        self.tbits_min = 1 << 62
        #: Group numbers handed out at the owner's next :meth:`token_bits` (at least
        #: ``knobs._TOKEN_BITS_FROM``).
        self.tbits_next = 0
        #: Group numbers handed out at the owner's next setting of the new postings of
        #: the lists in :attr:`tbits` (``knobs._TOKEN_BITS_STEP`` apart).
        self.tbits_step = 0
        #: ``n`` from which the owner's next :meth:`token_bits` call has work (an upkeep
        #: or a setting of the kept lists' new postings): the owner's adds call it then,
        #: whoever computed the pending masks (a reader's :meth:`fill_masks` empties
        #: :attr:`pending`, so a call only at a full batch of them could never come).
        self.tbits_due = 0
        #: With ``knobs._LISTS_BY_ID``, the posting list of each token by its vocabulary
        #: id: ``byid[i]`` is ``post.get(items.get(i))`` for every ``i < len(byid)``
        #: (None for an id without a list when it was read; such a slot, and the ids
        #: beyond, are looked up in the dicts by readers). Extended by the owner
        #: (:meth:`sync_ids`); a slot changed where the purge replaces or deletes a list.
        self.byid: list[array[int] | None] = []

    def set_glist(
        self,
        glist: list[Record | _Group | None],
        groups: dict[str, int],
        texts: Sequence[str] | None = None,
    ) -> None:
        """Take ``glist`` (a restore's, whose items carry distinct texts) and its map
        ``groups`` (text -> number, as a dict): a ``GroupTable`` is made over ``glist``
        when this numbering was made with one, else the dict is kept. ``texts``: each
        item's text as a str the caller has (a restore's, read from the rows), or None:
        the table hashes those (checked equal to the items' texts) where it would make
        a str of each from the store; or a :class:`_StoredTexts` of them, whose hashes
        the table takes for the ASCII texts instead of a str's (none made of them).
        ``ValueError`` / ``TypeError`` (nothing taken) when an item carries no text or a
        text twice. O(len(glist))."""
        if type(self.groups) is dict:
            self.glist, self.groups = glist, groups
            return
        table = _group_map(glist, True)
        if type(texts) is _StoredTexts and len(texts) == len(glist):
            table.index_from(0, None, texts.hashes)
        else:
            table.index_from(0, texts if type(texts) is list and len(texts) == len(glist) else None)
        self.glist, self.groups = glist, table

    def grow(self) -> None:
        """Double the arrays' capacity (new arrays: readers keep the old ones). O(n)."""
        cap = 2 * len(self.maxrel)
        n = self.n
        zeros = partial(kernels.huge_zeros, huge=knobs._HUGE_PAGES)
        maxrel = zeros(cap, np.float64)
        minseq = zeros(cap, np.int64)
        maxrel[:n] = self.maxrel[:n]
        minseq[:n] = self.minseq[:n]
        lo, hi = zeros(cap, np.uint64), zeros(cap, np.uint64)
        lo[:n], hi[:n] = self.masks[0][:n], self.masks[1][:n]
        self.maxrel, self.minseq, self.masks = maxrel, minseq, (lo, hi)
        if self.rows is not None:  # new rows: readers keep the old ones
            old_stride, stride = ccore.words_of(cap // 2), ccore.words_of(cap)
            rows = zeros(128 * stride, np.uint64)
            used = ccore.words_of(self.masked)
            rows.reshape(128, stride)[:, :used] = self.rows.reshape(128, old_stride)[:, :used]
            self.rows = rows
        self.scratch.clear()
        self.bitsets.clear()
        if self.tbits:  # new bitsets: readers keep the old ones
            words, old = ccore.words_of(cap), ccore.words_of(cap // 2)
            fresh = {}
            for key, (lst, covered, bits) in self.tbits.items():
                grown = np.zeros(words, np.uint64)
                grown[:old] = bits[:old]
                fresh[key] = [lst, covered, grown]
            self.tbits = fresh

    def token_bits(self) -> None:
        """The owner's upkeep of :attr:`tbits` (with ``knobs._TOKEN_BITS`` and the
        compiled core), once ``n`` reaches :attr:`tbits_next` and
        ``knobs._TOKEN_BITS_FROM``: every posting list of at
        least ``n / knobs._TOKEN_BITS`` numbers gets its bitset, or its bitset's missing
        postings set; the entries of other lists (replaced, deleted or now short) are
        dropped; the next upkeep is due ``n / 8`` numbers later. O(tokens + the long
        lists' new postings), about every ``n / 8`` stores (a new list's bitset:
        O(n / 64 + its postings)). Between two, every ``knobs._TOKEN_BITS_STEP`` numbers,
        the kept lists' new postings are set: O(kept lists + their new postings)."""
        ratio = knobs._TOKEN_BITS
        n = self.n
        if ratio <= 0 or ccore.core() is None:
            self.tbits_due = n + max(knobs._MASK_BATCH, n // 8)  # looked at again then
            return
        cap = len(self.maxrel)
        if n < max(self.tbits_next, knobs._TOKEN_BITS_FROM):
            if n >= self.tbits_step and self.tbits:  # the kept lists' new postings
                for kept in self.tbits.values():
                    lst, covered, bits = kept
                    if covered < len(lst):
                        ccore.bits_join_slice(lst, covered, len(lst), len(bits) * 64, bits)
                        kept[1] = len(lst)
                self.tbits_step = n + max(1, knobs._TOKEN_BITS_STEP)
            self._tbits_due()
            return
        words = ccore.words_of(cap)
        least = max(1, -(-n // ratio))
        old = self.tbits
        fresh: dict[int, list[Any]] = {}
        huge = self.huge_at if knobs._HUGE_PAGES else None
        for lst in self.post.values():
            length = len(lst)
            if length < least:
                continue
            if huge is not None and length >= _HUGE_POSTINGS:
                at = lst.buffer_info()[0]
                if huge.get(id(lst)) != at:  # new, or moved by a reallocation
                    huge[id(lst)] = at
                    kernels.huge_advise(lst)
            entry = old.get(id(lst))
            if entry is None or entry[0] is not lst:
                entry = [lst, 0, np.zeros(words, np.uint64)]
            if entry[1] < length:
                ccore.bits_join_slice(lst, entry[1], length, cap, entry[2])
                entry[1] = length
            fresh[id(lst)] = entry
        self.tbits, self.tbits_min = fresh, least
        self.tbits_next = n + max(knobs._MASK_BATCH, n // 8)
        self.tbits_step = n + max(1, knobs._TOKEN_BITS_STEP)
        self._tbits_due()

    def sync_ids(self, vocab: SubstringVocab) -> None:
        """The owner's extension of :attr:`byid` to every id ``vocab`` (the index's
        tokens) has handed out, with ``knobs._LISTS_BY_ID``. O(ids added since), in C
        iterators."""
        byid, limit = self.byid, vocab.id_limit
        if knobs._LISTS_BY_ID and len(byid) < limit:
            found = map(vocab.item_of, range(len(byid), limit))
            byid += map(self.post.get, found)  # type: ignore[arg-type]  # None: no list

    def forget_id(self, iid: int | None, lst: array[int] | None) -> None:
        """The owner replaced (``lst``) or deleted (None) the posting list of the token
        of id ``iid`` (None: not in the vocabulary): its slot of :attr:`byid`, if it has
        one, follows. O(1)."""
        byid = self.byid
        if iid is not None and iid < len(byid):
            byid[iid] = lst

    def _tbits_due(self) -> None:
        """:attr:`tbits_due` after a :meth:`token_bits` call. O(1)."""
        due = max(self.tbits_next, knobs._TOKEN_BITS_FROM)
        if self.tbits:
            due = min(due, self.tbits_step)
        self.tbits_due = due

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
        if ccore.core() is not None:
            ccore.text_masks(texts, self.masks, start)  # the same, compiled
        else:
            lo, hi = _text_masks(texts)
            self.masks[0][start:stop] = lo
            self.masks[1][start:stop] = hi
        self.masked = stop
        self.write_rows(start, stop)

    def write_rows(self, start: int, stop: int, nogil: bool = False) -> None:
        """Bring :attr:`rows` up to the masks of groups ``start:stop`` (computed just
        now; the owner's, or a reader's :meth:`fill_masks`). Without the compiled core
        the rows are dropped for good (they would miss these groups). ``nogil``: the
        core's loop runs without the GIL (only for a numbering no other thread sees
        yet: ``persist.Prepared``'s, made beside the open). O(stop - start)."""
        if self.rows is None:
            return
        if ccore.core() is None:
            self.rows = None
            return
        stride = len(self.rows) // 128
        ccore.bits_rows_from_masks(
            self.masks, self.rows, stride, self.rowcount, start, stop, nogil
        )
