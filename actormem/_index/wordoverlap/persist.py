"""The word-overlap index's image: dump at a clean close, restore when opening a file.

What a rebuild spends its time on is tokenizing every text into the posting lists; the
image keeps those (the tokens, and per token its group numbers) and each group's
short-word masks. Everything else is derived from the rows on restore, cheaply: the
groups (distinct texts in ``seq`` order of their first record: the numbering a rebuild
gives), their bounds (largest relevance, smallest seq), the recent texts, the tag
postings and the vocabulary of the tokens. The image is tied to the rows by the digest
of those distinct texts, in order (:func:`~actormem._index.persist.text_digest`).

Restoring checks, before anything is built: the header (kind, parameters, the rows'
count and largest seq, the number of groups, the digest), every array's type and
length, the tokens (UTF-8, distinct, non-empty, no whitespace, lower case), and the posting lists
(every group number in ``[0, groups)``, each list non-empty and strictly ascending), so
no position out of range reaches the compiled core. A hostile image that passes these
can still give wrong answers for these rows (the postings are not re-derived from the
texts: that is the rebuild it saves), never an out-of-range read.
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any

import numpy as np

from ..._record import Record
from ..._util import Beside
from .. import persist
from ..persist import ImageError
from . import ccore, knobs
from .index import _WordOverlapIndex
from .masks import _SHORT
from .numbering import _Group, _Numbering, _StoredTexts, _tags

__all__ = ["Early", "Prepared", "dump", "handles", "prepare", "restore", "start_early"]

KIND = "word-overlap"

#: ``restore`` builds the group map and each record's group number with the core's
#: ``group_texts`` (one dict probe per text, numbered by first appearance); False, or
#: without the core: ``dict(zip(texts, range(n)))`` and, when texts repeat, an update of
#: every value, the path before it (the same map; ``tests/test_decode_c.py``).
_C_GROUPS = True

#: ``restore`` hashes the texts' digest in a thread (:class:`~actormem._index.persist.LateDigest`)
#: while it checks and builds the rest, and compares it last: BLAKE2b runs without the
#: GIL, so a second core takes it (~0.3 s at 1M) off the open's wall time. The error of
#: a digest that differs is the one the header check gave (it wins over any later
#: check's, as it came before them), and the restore returns only once it matched.
#: False: the digest computed and compared in the header check, the path before it
#: (the same index, the same errors).
_DIGEST_BESIDE = True

#: ``restore`` takes the image-only part of its work (the tokens' and posting lists'
#: checks, the posting dict, the tokens' vocabulary: ~0.8 s of a 1M open) from a
#: :class:`Prepared` made ahead of the rows, in steps, by the open while it would wait
#: for the row reader (``read_file``'s ``prepare``), when it is the same image and the
#: header's group count is the rows'. The same code, checks and errors as the inline
#: part (which :class:`Prepared` also runs, all at once); a check that failed ahead is
#: raised where the inline path raises it. False: no preparation; ``prepare`` gives None.
_PREPARE_AHEAD = True

#: ``restore`` reads what it needs of every record (the texts, the relevance and seq
#: arrays, the positions with tags) in one pass of the core's ``restore_columns``
#: (~0.05 s at 1M) instead of four passes of the interpreter (the texts' list and
#: their types, two ``np.fromiter`` and the tags' loop: ~0.35-0.45 s), when every
#: record is plain (else it gives None and the passes run as before). False: the
#: passes, the path before it (the same index; ``tests/test_open18_cols.py``).
_C_COLUMNS = True

#: With :data:`_DIGEST_BESIDE`, the digest's thread starts as soon as the texts are read
#: (``restore_columns``), before the group map is made, and finds the distinct texts
#: itself (``LateDigest(texts, distinct=True)``: the core's ``texts_first`` and
#: ``texts_encode``, the GIL released, hashed by hashlib): it then runs beside
#: ``group_texts`` and the checks (~0.7 s at 1M) instead of beside the checks alone
#: (~0.3 s), which it outlasted. The same digest.
#: False: the thread started once the group map gave the distinct texts (the path
#: before it; ``tests/test_open18_cols.py``).
_DIGEST_EARLY = True

#: With :data:`_DIGEST_EARLY`, the digest's thread also gives each record's group
#: number (the core's ``texts_groups``, with the GIL released, in place of
#: ``texts_first``: the same pass over its table, writing each text's number too), and
#: the restore takes the distinct texts and the numbers from it instead of building the
#: group map itself (``group_texts``: a dict probe per text on the open's thread,
#: ~0.4-0.6 s at 1M, a dict the numbering's ``GroupTable`` replaces anyway). The same
#: groups, numbers and index. False: ``group_texts`` (the path before it;
#: ``tests/test_open20_gids.py``).
_GIDS_BESIDE = True

#: :class:`Prepared` also makes the group numbering's arrays for the header's group
#: count and writes the masks' rows of bits into it (``bits_rows_from_masks``, ~0.1-0.15
#: s at 1M, and the arrays' first touch): image data only, so it runs ahead in the
#: reader's waits with the other prepared steps instead of after the rows on the open's
#: thread; the restore uses that numbering (same image, same group count) and fills the
#: rest. False: the numbering made and its rows written by the restore (the path before
#: it; ``tests/test_open20_gids.py``).
_ROWS_AHEAD = True

#: With :data:`_DIGEST_EARLY` and :data:`_GIDS_BESIDE`, the digest's thread (the group
#: numbers, then the digest) starts at the top of the state's bulk load
#: (:func:`start_early`, from the rows' own texts, the core's ``rows_texts``) instead of
#: once the restore read the records' texts: the group numbers (~0.12-0.16 s at 1M)
#: and the hashing then run beside ``load_inserts``, and the restore no longer waits for
#: them. The restore takes it only when each record's text is the very str the rows
#: gave it (so in a bulk load; ``restore_columns`` compares the objects in its pass),
#: else stops it and starts its own. The same digest, groups, index and errors.
#: False: the thread started by the restore (the path before it;
#: ``tests/test_open25_early.py``).
_DIGEST_AT_LOAD = True

#: With :data:`_DIGEST_AT_LOAD`, for a file's rows in the store's form (``(seq, slot)``,
#: ``FoldedRows.cols``): the digest's thread takes the texts from the slots' UTF-8
#: (:class:`~actormem._index.persist.StoreDigest`: the core's ``slots_groups`` and
#: ``slots_encode``, the GIL released, the store pinned while it reads) and the restore
#: checks the records are on the rows' very slots (``restore_columns`` by slot numbers)
#: and hands the reader's hashes to the ``GroupTable`` (``index_from``): no str is made
#: of every text (the core's ``rows_texts``: ~0.4 s of the open's thread and ~290 MB at
#: 1M). Equal strict UTF-8 is equal strs: the same groups, digest, index and errors.
#: False: ``rows_texts``' strs (the path before it, the reference;
#: ``tests/test_open42_store_texts.py``).
_TEXTS_FROM_STORE = True

_MEMORY = attrgetter("entry.memory")
_RELEVANCE = attrgetter("entry.relevance")
_SEQ = attrgetter("seq")


def _params() -> dict[str, Any]:
    """What the image's structures depend on besides the texts: the tokenizer (lower
    case, whitespace split; Python's Unicode tables) and the short words of the masks."""
    import unicodedata

    short = hashlib.blake2b("\x00".join(_SHORT).encode(), digest_size=8).hexdigest()
    return {"tokenizer": "lower-split", "unicode": unicodedata.unidata_version, "short": short}


def handles(index: object) -> bool:
    return type(index) is _WordOverlapIndex


def _groups(records: list[Record]) -> tuple[list[str], dict[str, None]]:
    texts = [rec.cols.text(rec.slot) for rec in records]
    return texts, dict.fromkeys(texts)


def _expect(records: list[Record], canon: Sequence[str], digest: bool = True) -> dict[str, Any]:
    """The header fields of the image of ``records``, whose distinct texts are ``canon``
    (``digest`` False: all but the digest, the last field, which the caller checks)."""
    expect = {
        "kind": KIND,
        "params": _params(),
        "rows": len(records),
        "max_seq": records[-1].seq if records else 0,
        "groups": len(canon),
    }
    if digest:
        expect["digest"] = persist.text_digest(canon)
    return expect


def dump(index: _WordOverlapIndex, records: list[Record]) -> dict[str, bytes]:
    """The image of ``index`` for ``records`` (its live records, ascending seq), group
    numbers renumbered as a rebuild from them would number them. Owner only (it fills
    the pending masks). O(postings), vectorised."""
    e = index._e
    e.fill_masks()
    _, distinct = _groups(records)
    canon = list(distinct)
    size = len(canon)
    old_of_new = np.fromiter(map(e.groups.__getitem__, canon), np.int64, size)
    remap = np.full(max(e.n, 1), -1, np.int32)
    remap[old_of_new] = np.arange(size, dtype=np.int32)
    tokens = list(e.post)
    lists = list(e.post.values())
    lens = np.fromiter(map(len, lists), np.int64, len(lists))
    new = remap[np.frombuffer(b"".join(lists), np.int32)]  # int32 throughout: 4 B a posting
    del lists
    keep = new >= 0
    counts = lens
    if not keep.all():  # postings of dead groups, or of texts no live record has
        starts = np.zeros(len(lens), np.int64)
        np.cumsum(lens[:-1], out=starts[1:])
        counts = np.add.reduceat(keep, starts, dtype=np.int64) if len(lens) else lens
        new = new[keep]
    del keep
    if len(old_of_new) > 1 and not np.all(np.diff(old_of_new) > 0):
        # The renumbering changed the order within lists: sort each (token, group) pair.
        tok = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        new = new[np.lexsort((new, tok))]
        del tok
    present = counts > 0
    kept = [t for t, p in zip(tokens, present.tolist(), strict=True) if p]
    ends = np.zeros(len(kept) + 1, np.int64)
    np.cumsum(counts[present], out=ends[1:])
    blob, tok_ends = persist.encode_strings(kept)
    arrays: dict[str, np.ndarray[Any, Any] | bytes] = {
        "tokens": blob,
        "token_ends": tok_ends,
        "post_ends": ends,
        "postings": new,
        "masks_lo": e.masks[0][old_of_new],
        "masks_hi": e.masks[1][old_of_new],
    }
    return persist.pack(_expect(records, canon), arrays)


#: (the thread's holder, shared with BM25's restore)
Early = persist.Early


def start_early(index: object, rows: list[Any]) -> Early | None:
    """The digest's thread for a restore into ``index`` (a new word-overlap index, else
    None) of the records a bulk load will make of ``rows`` (``(seq, entry)``), started
    now from the rows' texts (:data:`_DIGEST_AT_LOAD`), or None: the knob (or those it
    needs) off, no core, fewer texts than the thread is for, a row not plain (the
    core's ``rows_texts``). The caller passes it to :func:`restore` and stops it on any
    path that does not reach it. O(len(rows)) now, the rest on the thread."""
    if not (
        _DIGEST_AT_LOAD and _DIGEST_BESIDE and _DIGEST_EARLY and _GIDS_BESIDE and _C_COLUMNS
    ) or not handles(index):
        return None
    if len(rows) < persist._LATE_MIN_TEXTS or not persist._encoder():
        return None
    cols = getattr(rows, "cols", None)  # rows (seq, slot) in that store: texts made from it
    store = persist.store_rows(rows, ccore.rows_slots()) if _TEXTS_FROM_STORE else None
    if store is not None:
        return Early(None, store)
    fn = ccore.rows_texts()
    texts = (
        (fn(rows) if cols is None else fn(rows, cols, getattr(rows, "hashes", b"")))
        if fn is not None and isinstance(rows, list)
        else None
    )
    return Early(texts) if texts is not None else None


def restore(
    index: _WordOverlapIndex,
    parts: Mapping[str, bytes],
    records: list[Record],
    prepared: Prepared | None = None,
    early_at_load: Early | None = None,
) -> _WordOverlapIndex:
    """Fill the new, empty ``index`` from the image ``parts`` so that it equals one that
    added ``records`` (ascending seq) one by one. O(records + postings), vectorised
    but for O(tokens + records sharing a text) Python steps.

    ``prepared``: :func:`prepare`'s work on these very ``parts`` (maybe unfinished: it
    is finished here), used in place of the image-only part when its group count is
    the rows'; then its index (new and empty but for the tokens' vocabulary) is filled
    and returned instead of ``index``.

    ``early_at_load``: :func:`start_early`'s thread for the rows these records were
    made of; taken when each record's text is the very str of its row (else stopped,
    and the restore starts its own); ended here on every path.

    Raises:
        ImageError: See the module documentation. ``index`` may be partly filled.
    """
    assert index._e.n == 0, "restore into a new index"
    early: persist.LateDigest | None = None
    try:  # the load's thread: taken below, or stopped
        columns_c = ccore.restore_columns() if _C_COLUMNS else None
        ahead = early_at_load if early_at_load is not None and not early_at_load.taken else None
        got: Any = None
        stored: _StoredTexts | None = None
        if columns_c is not None and type(records) is list:
            if ahead is not None and ahead.store is not None:
                # no text made: whether each record is on the very slot of its row
                got = columns_c(records, ahead.store[1], ahead.store[0])
                if got is not None and got[4] is True:
                    hashes = ahead.store[2]
                    stored = _StoredTexts(records, hashes if hashes else None)
                else:
                    got = columns_c(records)  # another store or slots: the texts made
            else:
                # with the load's texts: whether each record's text is the very str there
                got = columns_c(records) if ahead is None else columns_c(records, ahead.texts)
        cols: tuple[Any, bytes, bytes, list[int]] | None = got[:4] if got is not None else None
        same = stored is not None or (
            got is not None and ahead is not None and len(got) > 4 and got[4] is True
        )
        texts: Sequence[str] = (
            stored
            if stored is not None
            else cols[0]
            if cols is not None
            else list(map(_MEMORY, records))
        )
        count = len(texts)
        if cols is not None and _DIGEST_BESIDE and _DIGEST_EARLY:
            if ahead is not None and same:  # the digest of these very texts
                ahead.taken = True
                early = ahead.digest  # started with groups (start_early)
            else:
                # beside the group map (the core's columns, so its digest: without it
                # the caller would find the distinct texts and feed them, the group
                # map's work twice)
                early = persist.LateDigest(texts, distinct=True, groups=_GIDS_BESIDE)
    finally:
        if early_at_load is not None and not early_at_load.taken:
            early_at_load.stop()
    try:  # until the try below, which ends `late`, took the early digest over
        grouped = early.groups() if early is not None and _GIDS_BESIDE else None
        gmap: dict[str, int] | None
        gids_c: np.ndarray[Any, Any] | None
        if stored is not None and grouped is None:  # (the thread failed: its error)
            raise ImageError("the texts' groups were not found from the rows' store")
        canon: Sequence[str]
        if grouped is not None:  # the thread's: the distinct texts' mask, the numbers
            mask, raw_gids = grouped
            gids_c = np.frombuffer(raw_gids, np.int64)
            size = mask.count(1)
            if stored is not None:  # no str made: the records' slots, their hashes
                canon = stored if size == count else stored.firsts(mask)
            else:
                canon = texts if size == count else list(compress(texts, mask))
            gmap = None  # the numbering makes its GroupTable, or _restore_checked a dict
        else:
            assert type(texts) is list
            gmap, gids_c = _group_map(texts, cols is not None)
            size = len(gmap)
            canon = texts if size == count else list(gmap)
        if prepared is not None and (
            prepared.parts is not parts
            or prepared.groups != size
            or type(prepared.index) is not type(index)
            or prepared.index._e.n != 0
        ):
            prepared = None  # another image or index, or a group count not the rows'
        if not _DIGEST_BESIDE:  # (no early digest then)
            _, arrays = persist.unpack(parts, _expect(records, canon))
            return _restore_checked(
                index, parts, records, texts, gmap, gids_c, canon, arrays, prepared, cols
            )
        late = early if early is not None else persist.LateDigest(canon)
    except BaseException:
        if early is not None:
            early.stop()
        raise
    try:
        _, arrays = persist.unpack(parts, _expect(records, canon, digest=False), late)
        restored = _restore_checked(
            index, parts, records, texts, gmap, gids_c, canon, arrays, prepared, cols
        )
        first = late.first_error()  # waits for the digest
    except ImageError:
        first = late.first_error()
        if first is not None:  # the digest's check came first
            raise first from None
        raise
    finally:
        late.stop()  # no-op once the digest is in; else (another error) joins the thread
    if first is not None:
        raise first
    return restored


def _group_map(
    texts: list[str], all_str: bool
) -> tuple[dict[str, int], np.ndarray[Any, Any] | None]:
    """The group map of ``texts`` (each distinct text's number, by first appearance)
    and, from the core, each text's number (int64), else None. ``all_str``: every text
    is known to be an exact ``str``. O(len(texts))."""
    count = len(texts)
    mod = ccore.core() if _C_GROUPS else None
    if mod is not None and (all_str or set(map(type, texts)) <= {str}):
        # The group map numbered by first appearance, and each record's number, in one
        # probe per text.
        gmap, raw_gids = mod.group_texts(texts)
        return gmap, np.frombuffer(raw_gids, np.int64)
    # One dict build when every text is distinct (its value is then the group
    # number); its keys are the distinct texts in order of first appearance either way.
    return dict(zip(texts, range(count), strict=True)), None


def _restore_checked(
    index: _WordOverlapIndex,
    parts: Mapping[str, bytes],
    records: list[Record],
    texts: Sequence[str],
    gmap: dict[str, int] | None,
    gids_c: np.ndarray[Any, Any] | None,
    canon: Sequence[str],
    arrays: dict[str, np.ndarray[Any, Any]],
    prepared: Prepared | None = None,
    cols: tuple[Any, bytes, bytes, list[int]] | None = None,
) -> _WordOverlapIndex:
    """The rest of :func:`restore`, once the header matched (the digest maybe still to
    be compared): the arrays' checks, then the index built. O(records + postings).
    ``prepared``: the image-only part done ahead, for these parts and group count.
    ``cols``: ``restore_columns(records)`` (texts, relevance, seqs, tagged), or None.
    ``gmap`` None (:data:`_GIDS_BESIDE`): ``gids_c`` given, the groups are ``canon``'s
    texts in order; the map is made only if the numbering keeps a dict.

    Raises:
        ImageError: See the module documentation.
    """
    count = len(texts)
    size = len(gmap) if gmap is not None else len(canon)
    if prepared is None:
        prepared = Prepared(index, parts, size, arrays)
    prepared.finish()  # raises the first check that failed, as the inline path did
    index = prepared.index
    lo, hi = prepared.lo, prepared.hi

    ahead = prepared.numbering  # made for this group count, its masks' rows written
    e = ahead if ahead is not None else _Numbering(_capacity(size))
    if gmap is None:
        assert gids_c is not None
        # The numbering's GroupTable is made over glist, the dict given unused; a dict
        # numbering (knobs._GROUP_TABLE off, no core) keeps this one.
        gmap = {} if type(e.groups) is not dict else dict(zip(canon, range(size), strict=True))
    if cols is not None:
        rel = np.frombuffer(cols[1], np.float64)
        seqs = np.frombuffer(cols[2], np.int64)
    else:
        rel = np.fromiter(map(_RELEVANCE, records), np.float64, count)
        seqs = np.fromiter(map(_SEQ, records), np.int64, count)
    if size == count:  # every text once: each group is its record
        # the map kept, or a GroupTable made over it (hashing the rows' own texts)
        e.set_glist(list(records), gmap, canon)
        e.maxrel[:size] = rel
        e.minseq[:size] = seqs
    else:
        if gids_c is not None:
            gids = gids_c
        else:
            # gmap's values are each group's last record: those get their group number
            # by position, the other records (as many as there are duplicates) by lookup.
            lasts = np.fromiter(gmap.values(), np.int64, size)
            gmap.update(zip(canon, range(size), strict=True))  # no resize, unlike a new dict
            gids = np.empty(count, np.int64)
            gids[lasts] = np.arange(size, dtype=np.int64)
            is_last = np.zeros(count, bool)
            is_last[lasts] = True
            others = np.flatnonzero(~is_last)
            gids[others] = np.fromiter(
                map(gmap.__getitem__, map(texts.__getitem__, others.tolist())),
                np.int64,
                len(others),
            )
        # Groups are numbered by first appearance: a record opens its group iff its
        # number exceeds every earlier one.
        first = np.ones(count, bool)
        first[1:] = gids[1:] > np.maximum.accumulate(gids)[:-1]
        glist: list[Record | _Group | None] = list(compress(records, first.tolist()))
        later = np.flatnonzero(~first)
        for i, g in zip(later.tolist(), gids[later].tolist(), strict=True):
            rec, item = records[i], glist[g]
            if type(item) is _Group:
                item.recs.append(rec)
                item.unpurged += 1
            else:
                assert isinstance(item, Record)
                glist[g] = _Group(canon[g], [item, rec])  # its text: the rows' str
        e.set_glist(glist, gmap, canon)
        maxrel = rel[first]
        np.maximum.at(maxrel, gids[later], rel[later])
        e.maxrel[:size] = maxrel
        e.minseq[:size] = seqs[first]  # records come in ascending seq
    if ahead is None:
        e.masks[0][:size] = lo
        e.masks[1][:size] = hi
    e.n = e.masked = size
    if ahead is None:
        e.write_rows(0, size)
    for gid in range(max(0, size - knobs._SCAN_NEW), size):
        e.recent[gid % knobs._SCAN_NEW] = canon[gid].lower()
    e.post = prepared.post
    e.sync_ids(index._vocab)
    tag_postings = index._tags
    if cols is not None:
        for rec in map(records.__getitem__, cols[3]):
            tag_postings.add(_tags(rec), rec)
    else:
        for rec in records:
            if rec.cols.get(rec.slot, "tags"):
                tag_postings.add(_tags(rec), rec)
    index._e.current = False
    index._e = e
    return index


def _capacity(size: int) -> int:
    """The numbering's capacity for ``size`` groups, as ``add()`` grows it. O(log size)."""
    cap = 64
    while cap < size:
        cap *= 2
    return cap


#: :class:`Prepared` acquires the image's tokens into the new index's vocabulary by one
#: ``ccore.acquire_all`` call over the tokens' set (the compiled store's acquire:
#: ``vocab_acquire_fast``, its gram strs' table, new lists and sets untracked), in the
#: set's order, as ``add_text`` on the joined tokens did: the same items, ids, gram
#: lists and ``_sub`` sets, without the posting list ``add_text`` made per token only to
#: drop it (~0.5 s of the open's thread at 1M before; branch ``open27``). False:
#: ``add_text`` (the path before it).
_VOCAB_ALL = True

#: Tokens acquired per step of :meth:`Prepared.step` with :data:`_VOCAB_ALL` (~3 µs
#: each: ~6 ms a step; the whole vocabulary in one step before branch ``open27``).
_VOCAB_STEP = 2048

#: Posting lists made per step of :meth:`Prepared.step` (~10 ms at most each; 16384
#: before branch ``open27``).
_PREP_LISTS = 4096

#: :class:`Prepared` checks the posting lists' values and order, reads the masks and
#: makes their numbering (the rows of bits: ``bits_rows_from_masks`` without the GIL) in
#: a thread of its own (:meth:`Prepared._numeric`, "actormem image prep"), while the
#: open's thread makes the posting lists and the vocabulary: ~0.2 s of the open's
#: thread at 1M (numpy's loops, the rows, the new arrays' page faults) moved to the
#: second core, idle but for the row reader then. The same checks in the same order,
#: the same preparation. False: all of it in the steps (the path before, branch open29).
_PREP_BESIDE = True

#: Groups whose masks' rows of bits are written per step of :meth:`Prepared.step` with
#: :data:`_ROWS_AHEAD` (~8 ms at most; all of them in one step before ``open27``): the
#: steps run while the row reader's thread reads on (``read_file``'s ``prepare``), and a
#: long one made it wait with every chunk full. A multiple of 64 (a word of each row).
_PREP_ROWS = 65536


class Prepared(persist.Stepped):
    """The image-only part of :func:`restore` (what needs no row: the tokens decoded and
    checked, the posting lists checked against the group count, the masks' lengths, with
    :data:`_ROWS_AHEAD` a new numbering holding the masks and their rows of bits
    (:attr:`numbering`), the posting dict, the tokens' vocabulary in a new index), run
    in bounded steps
    (:meth:`step`) or at once (:meth:`finish`), the checks in the inline path's order.
    The first check that fails (or any other ``Exception``) ends the steps; it is kept
    and raised by :meth:`finish`, where :func:`restore` reaches that check. O(tokens +
    postings + groups) over all steps.

    ``groups``: the group count the lists are checked against (the rows'; ahead of the
    rows, the header's, which :func:`restore` compares with the rows' before using
    this). ``arrays``: :func:`~actormem._index.persist.unpack`'s (None: unpacked here
    without expectations; the header's own fields are :func:`restore`'s to check).
    """

    def __init__(
        self,
        index: _WordOverlapIndex,
        parts: Mapping[str, bytes],
        groups: int | None,
        arrays: dict[str, np.ndarray[Any, Any]] | None = None,
    ) -> None:
        self.index = index
        self.parts = parts
        self.groups = groups
        self.tokens: list[str] = []
        self.post: dict[str, array[int]] = {}
        self.lo: Any = None
        self.hi: Any = None
        #: (:data:`_ROWS_AHEAD`) a new numbering for ``groups`` groups, its masks set and
        #: their rows of bits written; else None
        self.numbering: _Numbering | None = None
        self._arrays = arrays
        super().__init__(self._run())

    # step(): one step (~10-40 ms; the vocabulary's, ~0.4 s at 1M, is one), whether
    # steps remain; never raises an Exception (kept for finish)

    def finish(self) -> None:
        """Run the remaining steps; raise the first check's error, if one failed."""
        self.run_out()
        if self.error is not None:
            raise self.error

    def _run(self) -> Iterator[None]:
        size = self.groups
        if type(size) is not int or size < 0:
            raise ImageError("groups: not a count")  # restore never uses this one
        arrays = self._arrays
        if arrays is None:
            _, arrays = persist.unpack(self.parts, {})
        tok_ends = persist.need(arrays, "token_ends", "<i8")
        tokens = persist.decode_strings(persist.need(arrays, "tokens", "|u1").tobytes(), tok_ends)
        distinct = set(tokens)
        if len(distinct) != len(tokens):
            raise ImageError("a token listed twice")
        joined = " ".join(tokens)  # one pass each over all tokens, in C
        if joined.split() != tokens:
            raise ImageError("a token empty or holding whitespace")
        if joined.lower() != joined:
            raise ImageError("a token not in lower case (the tokenizer lower-cases)")
        yield
        ends = persist.need(arrays, "post_ends", "<i8", len(tokens) + 1)
        postings = persist.need(arrays, "postings", "<i4")
        if _PREP_BESIDE:
            yield from self._run_beside(tokens, distinct, joined, ends, postings, size, arrays)
            return
        yield from persist.check_lists_steps(ends, postings, size, "postings")
        self.lo = persist.need(arrays, "masks_lo", "<u8", size)
        self.hi = persist.need(arrays, "masks_hi", "<u8", size)
        yield
        if _ROWS_AHEAD:
            e = _Numbering(_capacity(size))
            e.masks[0][:size] = self.lo
            e.masks[1][:size] = self.hi
            # in ranges of groups (OR and counts: the same rows as in one call)
            for at in range(0, size, _PREP_ROWS):
                e.write_rows(at, min(size, at + _PREP_ROWS))
                yield
            self.numbering = e
            yield
        yield from self._lists(tokens, ends)
        yield from self._vocab(tokens, distinct, joined)

    def _run_beside(
        self,
        tokens: list[str],
        distinct: set[str],
        joined: str,
        ends: np.ndarray[Any, Any],
        postings: np.ndarray[Any, Any],
        size: int,
        arrays: dict[str, np.ndarray[Any, Any]],
    ) -> Iterator[None]:
        """:meth:`_run`'s steps after the tokens' with :data:`_PREP_BESIDE`: the lists'
        offsets checked here (the slices below are then bounded), the rest of the lists'
        checks, the masks and their numbering in a thread (:meth:`_numeric`), the posting
        lists and the vocabulary here meanwhile; the thread's result taken at the last
        step (waited for, without the GIL, if it is not in). The same checks in the same
        order (the lists and the vocabulary cannot fail a check), so the same first
        error; the same posting lists, vocabulary, masks, rows of bits and counts."""
        persist.check_offsets(ends, postings, "postings")
        beside = Beside(
            self._numeric, ends, postings, size, arrays, name="actormem image prep"
        )  # fmt: skip
        try:
            yield
            yield from self._lists(tokens, ends)
            yield from self._vocab(tokens, distinct, joined)
        except Exception:
            beside.result()  # a check of the thread's came first inline: raised instead
            raise
        except BaseException:  # closed (GeneratorExit), interrupted: the thread joined
            beside.stop()
            raise
        self.lo, self.hi, self.numbering = beside.result()

    @staticmethod
    def _numeric(
        ends: np.ndarray[Any, Any],
        postings: np.ndarray[Any, Any],
        size: int,
        arrays: dict[str, np.ndarray[Any, Any]],
    ) -> tuple[Any, Any, _Numbering | None]:
        """The numeric part of the preparation, for a thread beside the open's (numpy's
        loops and the rows' loop run without the GIL): the posting lists' values and
        order checked, the masks read, and (:data:`_ROWS_AHEAD`) a new numbering for
        ``size`` groups holding them and their rows of bits. Returns ``(lo, hi,
        numbering or None)``. O(postings + groups).

        Raises:
            ImageError: The first check that fails, as :meth:`_run`'s inline steps."""
        for _ in persist.check_lists_steps(ends, postings, size, "postings"):
            pass
        lo = persist.need(arrays, "masks_lo", "<u8", size)
        hi = persist.need(arrays, "masks_hi", "<u8", size)
        if not _ROWS_AHEAD:
            return lo, hi, None
        e = _Numbering(_capacity(size))
        e.masks[0][:size] = lo
        e.masks[1][:size] = hi
        e.write_rows(0, size, nogil=True)  # one call: the same rows and counts
        return lo, hi, e

    def _lists(self, tokens: list[str], ends: np.ndarray[Any, Any]) -> Iterator[None]:
        """The posting lists (:attr:`post`), :data:`_PREP_LISTS` a step; ``ends``' offsets
        checked. O(postings)."""
        raw = memoryview(self.parts["postings"])  # slices of it copy nothing until frombytes
        bounds = (ends * 4).tolist()
        post = self.post
        for at in range(0, len(tokens), _PREP_LISTS):
            stop = at + _PREP_LISTS
            for tok, start, end in zip(
                tokens[at:stop], bounds[at:stop], bounds[at + 1 : stop + 1], strict=False
            ):
                lst = array("i")
                lst.frombytes(raw[start:end])
                post[tok] = lst
            yield

    def _vocab(self, tokens: list[str], distinct: set[str], joined: str) -> Iterator[None]:
        """The tokens' vocabulary in the new index (:data:`_VOCAB_ALL`: a step each
        :data:`_VOCAB_STEP` tokens), then :attr:`tokens` set. O(tokens)."""
        vocab = self.index._vocab
        if tokens and _VOCAB_ALL and ccore.has_acquire_all():
            # The same vocabulary as the add below (the tokens acquired in the order of
            # their set, which is the order add_text takes them in), without its posting
            # lists, through the store's faster acquire; in slices, a step each.
            order = list(distinct)
            for at in range(0, len(order), _VOCAB_STEP):
                ccore.acquire_all(vocab, order[at : at + _VOCAB_STEP])
                if at + _VOCAB_STEP < len(order):
                    yield
        elif tokens and ccore.core() is not None:
            # The compiled add acquires each token it has no list for (all of them here).
            ccore.add_text({}, joined, 0, vocab)
        else:
            for tok in tokens:
                vocab.acquire(tok)
        self.tokens = tokens


def prepare(index: _WordOverlapIndex, parts: Mapping[str, bytes]) -> Prepared | None:
    """:class:`Prepared` for the new, empty ``index`` and the image ``parts`` ahead of the
    rows (nothing run yet), checked against the header's group count; None when
    :data:`_PREPARE_AHEAD` is off. O(1)."""
    if not _PREPARE_AHEAD:
        return None
    groups = persist.header_field(parts, "groups")
    return Prepared(index, parts, groups if type(groups) is int else None)
