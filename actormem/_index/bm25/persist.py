"""The BM25 index's image: dump at a clean close, restore when opening a file.

A rebuild tokenizes every document (text and tags) and appends to the posting lists;
the image keeps what that produces: the terms (numbered by first appearance, as a
rebuild numbers them), each group's packed terms in document order and length, and per
term its posting list (group numbers, frequencies). Derived from the rows on restore:
the groups (distinct documents in ``seq`` order of their first record), their records,
each term's df, N and the total length, the change log (one entry per record, as
``add`` logs). The reader-side caches (bounds, block maxima) start empty. The structures
do not depend on ``k1``, ``b`` or the prior, so only the tokenizer is a parameter of
the image; an index with a tokenizer other than :class:`~actormem.Tokenizer` has none.

Restoring checks, before anything is built: the header (kind, tokenizer, the rows'
count and largest seq, the number of groups, the digest of the documents), every
array's type and length, the terms (UTF-8, distinct), each posting list (group numbers
in ``[0, groups)``, non-empty, strictly ascending; frequencies >= 1), each group's packed
terms (term numbers in range, capped frequencies in [1, 255]), that both describe the
same (term, group, frequency) triples (the count per group, and an order-independent
64-bit hash of the triples on each side), and each length against the frequencies'
sum. So no position out of range reaches the compiled core, and an image that does not
match itself is refused; a hostile one crafted to collide the hash can still give wrong
answers for these rows, never an out-of-range read. With the compiled core
(:data:`_C_CHECKS`) the numeric checks are one pass over each side in C, beside the
part that needs the rows; there the count per group is left to the hash (which covers
it), and each length is compared with its group's capped frequencies plus the lists'
part of any frequency above 255 (the exact sum once the hashes agree): no read by group
number per posting, the cache miss each that made the pass 3x slower at 1M.
"""

from __future__ import annotations

import json
import time
import unicodedata
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter
from typing import Any, NamedTuple

import numpy as np

from ..._record import Record
from ..._util import Beside
from .. import kernels, persist
from ..persist import ImageError
from ..tokenize import _WORD, Tokenizer
from ..wordoverlap import ccore
from ..wordoverlap.numbering import _StoredTexts
from . import knobs
from .changelog import ChangeLog
from .index import BM25Index, _doc_map, _DocMap, _untrack
from .postings import (
    _NO_RECS,
    _TF_BITS,
    _TF_CAP,
    _Group,
    _pool_code,
    _pool_dtype,
    _recs,
    _Term,
    _TermPool,
    first_seq_array,
    first_seq_floor,
    first_seqs_of,
    length_codes,
)
from .postings import _doc_key as _key

__all__ = ["Prepared", "dump", "handles", "prepare", "restore", "start_early"]

KIND = "bm25"

_BORN = attrgetter("born")

#: Postings checked at a time by :func:`restore`.
_CHUNK = 1 << 20


def handles(index: object) -> bool:
    return type(index) is BM25Index and type(index.scorer.tokenizer) is Tokenizer


def _stemmer_version() -> str | None:
    """The installed PyStemmer's version (None if its metadata cannot be read)."""
    import importlib.metadata  # here, not at import: ~7 ms that only an image dump needs

    try:
        return importlib.metadata.version("PyStemmer")
    except importlib.metadata.PackageNotFoundError:
        return None


def _params(index: BM25Index) -> dict[str, Any]:
    tok = index.scorer.tokenizer
    assert type(tok) is Tokenizer
    return {
        "pattern": _WORD.pattern,
        "unicode": unicodedata.unidata_version,
        "stemmer": tok.stemmer,
        # Another PyStemmer release may stem differently: its image is then refused.
        "stemmer_version": _stemmer_version() if tok.stemmer else None,
        "stopwords": persist.text_digest(sorted(tok.stopwords)),
    }


def _expect(
    index: BM25Index, records: list[Record], canon: Sequence[object] | None
) -> dict[str, Any]:
    """The header fields of the image of ``records``, whose distinct documents are
    ``canon`` (None: the fields before ``groups``, which need no groups). O(records +
    total length) (O(1) with ``canon`` None)."""
    expect: dict[str, Any] = {
        "kind": KIND,
        "params": _params(index),
        "rows": len(records),
        "max_seq": records[-1].seq if records else 0,
    }
    if canon is not None:
        texts = [k if type(k) is str else k[0] for k in canon]  # type: ignore[index]
        tagged = [json.dumps([g, k[1]]) for g, k in enumerate(canon) if type(k) is not str]  # type: ignore[index]
        expect["groups"] = len(canon)
        expect["digest"] = persist.text_digest(texts, tagged)
    return expect


def _mix(
    term: np.ndarray[Any, Any], group: np.ndarray[Any, Any], tf: np.ndarray[Any, Any], size: int
) -> int:
    """An order-independent 64-bit hash of (term, group < ``size``, capped tf) triples:
    the sum of a multiply-xorshift mix of each one's number. O(len), vectorised."""
    with np.errstate(over="ignore"):
        k = term.astype(np.uint64) * np.uint64(size) + group.astype(np.uint64)
        k = (k << np.uint64(8)) | tf.astype(np.uint64)
        k *= np.uint64(0x9E3779B97F4A7C15)
        k ^= k >> np.uint64(29)
        k *= np.uint64(0xBF58476D1CE4E5B9)
        k ^= k >> np.uint64(32)
        return int(k.sum(dtype=np.uint64))


def _flat(arrays: list[array[int]]) -> np.ndarray[Any, Any]:
    """The concatenation of int arrays of any typecodes: int32 if they all are, else
    int64. O(total)."""
    if all(a.typecode == "i" for a in arrays):
        return np.frombuffer(b"".join(arrays), np.int32)
    if not arrays:
        return np.zeros(0, np.int64)
    return np.concatenate([np.frombuffer(a, a.typecode).astype(np.int64) for a in arrays])


def dump(index: BM25Index, records: list[Record]) -> dict[str, bytes]:
    """The image of ``index`` for ``records`` (its live records, ascending seq), groups
    and terms renumbered as a rebuild from them would number them. Owner only.
    O(postings), vectorised, plus O(groups + terms) Python steps."""
    canon = list(dict.fromkeys(map(_key, records)))
    size = len(canon)
    old_groups = [index._groups[k] for k in canon]
    old_of_new = np.fromiter(map(index._num, old_groups), np.int64, size)
    g_ends = np.zeros(size + 1, np.int64)
    pool = index._pool
    if pool is None:
        packed = _flat([g.terms for g in old_groups])
        np.cumsum(np.fromiter((len(g.terms) for g in old_groups), np.int64, size), out=g_ends[1:])
    else:  # the groups' ranges of the pool, gathered in one index (copies: no export kept)
        starts = np.array(pool.starts, np.int64)
        lo = starts[old_of_new]
        sizes = starts[old_of_new + 1] - lo
        np.cumsum(sizes, out=g_ends[1:])
        at = np.repeat(lo - g_ends[:-1], sizes) + np.arange(g_ends[-1], dtype=np.int64)
        nums = np.frombuffer(pool.data, _pool_dtype(pool.data.typecode))[at].astype(np.int64)
        packed = nums << _TF_BITS  # frequencies from the posting lists, below
        del starts, lo, sizes, at, nums
    old_terms = packed >> _TF_BITS
    # Number the terms by first appearance, group by group, as add() would.
    uniq, first = np.unique(old_terms, return_index=True)
    order = uniq[np.argsort(first, kind="stable")]
    # int32 while a packed term fits in it (4 B a posting for the transients).
    wide = np.int32 if len(index._term_table) <= knobs._NARROW else np.int64
    new_of_old = np.full(max(len(index._term_table), 1), -1, wide)
    new_of_old[order] = np.arange(len(order), dtype=wide)
    new_packed = (new_of_old[old_terms] << _TF_BITS) | (packed & _TF_CAP)
    del packed, old_terms, first, uniq
    remap = np.full(max(len(index._table), 1), -1, np.int32)
    remap[old_of_new] = np.arange(size, dtype=np.int32)
    terms: list[_Term] = []
    for num in order.tolist():
        term = index._term_table[num]
        assert term is not None
        terms.append(term)
    lens = np.fromiter((len(t.groups) for t in terms), np.int64, len(terms))
    groups = remap[np.frombuffer(b"".join(t.groups for t in terms), np.int32)]
    tfs = np.concatenate(
        [np.frombuffer(t.tfs, t.tfs.typecode).astype(np.int32) for t in terms]
        or [np.zeros(0, np.int32)]
    )
    tok = np.repeat(np.arange(len(terms), dtype=np.int32), lens)
    keep = groups >= 0
    groups, tfs, tok = groups[keep], tfs[keep], tok[keep]
    if size > 1 and not np.all(np.diff(old_of_new) > 0):
        perm = np.lexsort((groups, tok))
        groups, tfs, tok = groups[perm], tfs[perm], tok[perm]
    p_ends = np.zeros(len(terms) + 1, np.int64)
    np.cumsum(np.bincount(tok, minlength=len(terms)), out=p_ends[1:])
    if pool is not None:  # each (group, term)'s frequency, found among the postings
        width = max(len(terms), 1)
        key = groups.astype(np.int64) * width + tok
        by_key = np.argsort(key, kind="stable")
        owner = np.repeat(np.arange(size, dtype=np.int64), np.diff(g_ends))
        want = owner * width + (new_packed >> _TF_BITS).astype(np.int64)
        found = by_key[np.searchsorted(key[by_key], want)]
        new_packed |= np.minimum(tfs[found], _TF_CAP).astype(new_packed.dtype)
        del key, by_key, owner, want, found
    blob, t_ends = persist.encode_strings([t.key for t in terms])
    narrow = len(terms) <= knobs._NARROW  # then a packed term fits in int32
    arrays: dict[str, np.ndarray[Any, Any] | bytes] = {
        "terms": blob,
        "term_ends": t_ends,
        "group_terms": new_packed.astype(np.int32 if narrow else np.int64, copy=False),
        "group_ends": g_ends,
        "lengths": index._lengths[old_of_new].astype(np.int32),
        "post_ends": p_ends,
        "postings": groups.astype(np.int32),
        "tfs": tfs,
    }
    return persist.pack(_expect(index, records, canon), arrays)


#: ``restore`` runs the image's numeric checks (the posting lists' ranges and order, the
#: frequencies, the groups' term counts, ranges and the two sides' hashes, the lengths)
#: in one pass of the core's ``bm25_image_check`` with the GIL released, in a thread
#: beside the part that needs the rows (the groups, the records' table, the document
#: map), and takes each term's list length and wide flag from it: ~0.1-0.2 s of a
#: second core at 1M where numpy's chunks took ~1.6 s of the open's thread (their
#: ``searchsorted`` for the owners alone ~1 s). The same checks, refusals and index.
#: False, or without the core: numpy's chunks on the open's thread (the path before).
_C_CHECKS = True

#: ``restore`` groups the records' texts and hashes their digest in a thread
#: (:class:`~actormem._index.persist.LateDigest` with the groups, the word-overlap
#: core's ``texts_groups``, as the word-overlap restore does) when no record has tags
#: (each document is then its text), the texts read in one pass of that core's
#: ``restore_columns``; the group table's texts mapped in one call
#: (``GroupTable.index_from``); the digest compared last (its error first, as the
#: header check's). ~1.5 s of the open's thread at 1M (a key per record, a dict probe
#: each, the digest, a setitem per group). The same groups, numbers, index and errors.
#: False, a tagged record, or without the core: the keys' dict and the digest in the
#: header check (the path before).
_GROUPS_BESIDE = True


#: With :data:`_GROUPS_BESIDE`, for a file's rows in the store's form (``(seq, slot)``,
#: ``FoldedRows.cols``), the texts' digest thread starts at the top of the state's bulk
#: load (:func:`start_early`) and reads the slots' strict UTF-8
#: (:class:`~actormem._index.persist.StoreDigest`, as word overlap's
#: ``_TEXTS_FROM_STORE``): its groups and digest run beside the load instead of after
#: it (the restore waited ~0.3-0.5 s for the groups at 1M), the restore checks the
#: records are on the rows' very slots (``restore_columns`` by slot numbers) and makes
#: no str of every text (``restore_columns``' list, ~0.3 s), and the group table maps
#: the ASCII texts by the reader's hashes (``index_from``: no second str of each). Equal
#: strict UTF-8 is equal strs: the same groups, digest, index and errors. False: the
#: thread started by the restore from a str of every text (the path before it, the
#: reference; ``tests/test_open44_bm25_store.py``).
_TEXTS_FROM_STORE = True


def start_early(index: object, rows: list[Any]) -> persist.Early | None:
    """The digest's thread for a restore into ``index`` (a new BM25 index with an image,
    else None) of the records a bulk load will make of ``rows`` (``(seq, slot)`` rows in
    the store's form), started now from the store's UTF-8 (:data:`_TEXTS_FROM_STORE`),
    or None: the knobs off, no core, fewer texts than the thread is for, rows not in the
    store's form. The caller passes it to :func:`restore` and stops it on any path that
    does not reach it. O(len(rows)) now, the rest on the thread."""
    if not (_GROUPS_BESIDE and _TEXTS_FROM_STORE) or not handles(index):
        return None
    if len(rows) < persist._LATE_MIN_TEXTS or not persist._encoder():
        return None
    if ccore.restore_columns() is None:
        return None
    store = persist.store_rows(rows, ccore.rows_slots())
    return persist.Early(None, store) if store is not None else None


def _texts(
    records: list[Record], early: persist.Early | None = None
) -> tuple[tuple[Sequence[str], bytes] | None, persist.LateDigest | None]:
    """Every record's text and the bytes of their seqs (int64), by the word-overlap
    core's ``restore_columns``, when no record has tags and every one is plain
    (:data:`_GROUPS_BESIDE`), else None; and the digest's thread for them (None: none).
    ``early``: :func:`start_early`'s thread, taken (``early.taken``) when each record is
    on its row's very slot (the texts then a lazy ``_StoredTexts``, no str made), else
    left to the caller to stop; without it the texts are strs and the thread starts
    here. O(len(records))."""
    if not _GROUPS_BESIDE or type(records) is not list:
        return None, None
    fn = ccore.restore_columns()
    try:
        if early is not None and early.store is not None and not early.taken and fn is not None:
            store, slots, hashes = early.store
            got = fn(records, slots, store)
            if got is not None and not got[3] and got[4] is True:
                early.taken = True
                texts = _StoredTexts(records, hashes if hashes else None)
                return (texts, got[2]), early.digest
        got = fn(records) if fn is not None else None
    except RuntimeError:  # the core's record classes not set up
        return None, None
    if got is None or got[3]:
        return None, None
    return (got[0], got[2]), persist.LateDigest(got[0], distinct=True, groups=True)


class _Arrays(NamedTuple):
    """The image's numeric arrays, as :func:`unpack` read them (views of the parts),
    and the count of terms."""

    packed: np.ndarray[Any, Any]  # group_terms: int32 or int64
    g_ends: np.ndarray[Any, Any]  # group_ends: int64, groups + 1
    postings: np.ndarray[Any, Any]  # int32
    p_ends: np.ndarray[Any, Any]  # post_ends: int64, count + 1
    tfs: np.ndarray[Any, Any]  # int32, one a posting
    lengths: np.ndarray[Any, Any]  # int32, one a group
    terms: int  # the count of terms


def _sides_numpy(a: _Arrays) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The numeric checks of :func:`restore` by numpy in chunks (without the core, or
    :data:`_C_CHECKS` off), in :func:`_sides`' order. O(postings), vectorised."""
    packed, g_ends, postings, p_ends, tfs, lengths, count = a
    size = len(lengths)
    persist.check_lists(p_ends, postings, size, "postings")
    if len(tfs) and int(tfs.min()) < 1:
        raise ImageError("a term frequency below 1")
    if g_ends[0] != 0 or g_ends[-1] != len(packed) or np.any(np.diff(g_ends) < 0):
        raise ImageError("group term offsets out of order or range")
    if not np.array_equal(np.bincount(postings, minlength=size), np.diff(g_ends)):
        raise ImageError("groups and posting lists disagree")
    # In chunks, so that the transients stay small (a 1M-entry file has ~30M postings).
    group_side = post_side = 0
    sums = np.zeros(size, np.float64)
    for start in range(0, len(packed), _CHUNK):
        stop = min(len(packed), start + _CHUNK)
        at = np.arange(start, stop, dtype=np.int64)
        part = packed[start:stop]
        nums = part >> _TF_BITS  # (non-negative as checked next, for int32 too)
        capped = part & _TF_CAP
        if int(nums.min()) < 0 or int(nums.max()) >= count or int(capped.min()) < 1:
            raise ImageError("a group's term out of range")
        owner = np.searchsorted(g_ends, at, side="right") - 1
        group_side += _mix(nums, owner, capped, size)
        freqs = tfs[start:stop]
        term_of = np.searchsorted(p_ends, at, side="right") - 1
        post_side += _mix(term_of, postings[start:stop], np.minimum(freqs, _TF_CAP), size)
        sums += np.bincount(postings[start:stop], weights=freqs, minlength=size)
    if group_side % (1 << 64) != post_side % (1 << 64):
        raise ImageError("groups and posting lists disagree")
    if not np.array_equal(sums, lengths.astype(np.float64)):
        raise ImageError("a document length differs from its frequencies' sum")
    dfs = np.diff(p_ends)
    wide = (np.maximum.reduceat(tfs, p_ends[:-1]) > 255) if count else np.zeros(0, bool)
    return dfs, wide.astype(np.uint8)


#: :func:`_sides`' errors by the core's code.
_CHECK_ERRORS = {
    1: "postings: list offsets out of order or range",
    3: "postings: a list out of order or with repeats",
    4: "a term frequency below 1",
    5: "group term offsets out of order or range",
    7: "a group's term out of range",
    8: "groups and posting lists disagree",
    9: "a document length differs from its frequencies' sum",
}


def _sides(a: _Arrays) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The image's numeric checks (see the module documentation) on its arrays ``a``:
    the posting lists against the groups (``len(a.lengths)``), the frequencies,
    the groups' packed terms against the lists and the lengths. Returns each term's
    list length (int64) and whether a frequency of it exceeds 255 (uint8, 0 or 1).
    By the core in one pass without the GIL (:data:`_C_CHECKS`), else numpy's chunks:
    the same checks in the same order. O(postings + groups + terms).

    Raises:
        ImageError: The first check that fails.
    """
    dfs, wide, _, _ = _checked(a, 0, False)
    return dfs, wide


def _checked(
    a: _Arrays, pool_width: int, small: bool
) -> tuple[Any, Any, bytes | None, bytes | None]:
    """:func:`_sides`, and from the core (None without it) the bytes of the pool's term
    numbers in ``pool_width`` bytes each (0: none) and of the one-byte frequencies
    (``small``): ``kernels.bm25_image_check``'s. O(postings + groups + terms)."""
    if not (_C_CHECKS and kernels.bm25_core_active()):
        dfs, wide = _sides_numpy(a)
        return dfs, wide, None, None
    packed, g_ends, postings, p_ends, tfs, lengths, count = a
    dfs = np.zeros(count, np.int64)
    wide = np.zeros(count, np.uint8)
    if len(p_ends) != count + 1 or len(g_ends) != len(lengths) + 1:
        raise ImageError("offsets of the wrong length")
    code, pool, one_byte = kernels.bm25_image_check(
        packed, g_ends, postings, p_ends, tfs, lengths, None, dfs, wide, pool_width, small
    )
    if code == 2:  # as persist.check_lists words it
        raise ImageError(f"postings: a value outside [0, {len(lengths)})")
    if code:
        raise ImageError(_CHECK_ERRORS.get(code, "the image's checks failed"))
    return dfs, wide, pool, one_byte


def _image_side(
    a: _Arrays, pool: bool
) -> tuple[Any, Any, tuple[str, bytes, str, bytes] | None, bytes]:
    """The image-only arrays of :func:`restore` (in the thread beside with
    :data:`_C_CHECKS`: numpy's copies release the GIL): :func:`_sides`' checks and its
    list lengths and wide flags, then with ``pool`` the term pool's typecodes and bytes
    (its term numbers, its group ends: ``_TermPool.from_raw``), and every frequency as
    a byte (the lists' ``array('B')``, where none exceeds 255). O(postings + groups).

    Raises:
        ImageError: As :func:`_sides`.
    """
    code = _pool_code(a.terms) if pool else ""
    width = np.dtype(_pool_dtype(code)).itemsize if pool else 0
    dfs, wide, data, small = _checked(a, width, a.terms > 0)
    packed, g_ends, tfs = a.packed, a.g_ends, a.tfs
    raw: tuple[str, bytes, str, bytes] | None = None
    if pool:
        if data is None:
            data = (packed >> _TF_BITS).astype(_pool_dtype(code)).tobytes()
        s_code = "I" if int(g_ends[-1]) <= 0xFFFFFFFF else "q"
        starts = g_ends.astype(np.uint32 if s_code == "I" else np.int64).tobytes()
        raw = (code, data, s_code, starts)
    if small is None:
        small = tfs.astype(np.uint8).tobytes() if a.terms else b""
    return dfs, wide, raw, small


def restore(
    index: BM25Index,
    parts: Mapping[str, bytes],
    records: list[Record],
    early: persist.Early | None = None,
    prepared: Prepared | None = None,
) -> BM25Index:
    """Fill the new, empty ``index`` from the image ``parts`` so that it equals one that
    added ``records`` (ascending seq) one by one. O(records + postings), vectorised
    (the numeric checks in a thread beside, :data:`_C_CHECKS`) but for O(records +
    groups + terms) Python steps (O(terms + records sharing a document) with
    :data:`_GROUPS_BESIDE`).

    ``early``: :func:`start_early`'s thread for the rows these records were made of;
    taken when each record is on its row's very slot (else stopped, and the restore
    starts its own); ended here on every path. ``prepared``: :func:`prepare`'s checks
    for ``parts``, taken when they fit (else stopped); ended here on every path.

    Raises:
        ImageError: See the module documentation. ``index`` may be partly filled.
    """
    assert not index._table, "restore into a new index"
    try:
        try:
            cols, late = _texts(records, early)
        finally:
            if early is not None and not early.taken:
                early.stop()
        try:
            restored = _restore_late(index, parts, records, cols, late, prepared)
            first = late.first_error() if late is not None else None  # waits for the digest
        except ImageError:
            first = late.first_error() if late is not None else None
            if first is not None:  # the digest's check came first
                raise first from None
            raise
        finally:
            if late is not None:
                late.stop()  # no-op once the digest is in; else joins the thread
    finally:
        if prepared is not None:
            prepared.stop()  # (a no-op once taken)
    if first is not None:
        raise first
    return restored


def _need_sides(arrays: dict[str, np.ndarray[Any, Any]], count: int, size: int) -> _Arrays:
    """The image's numeric arrays for ``count`` terms and ``size`` groups, each of its
    type and length (:func:`~actormem._index.persist.need`, in :func:`restore`'s order).
    O(1): views.

    Raises:
        ImageError: An array missing, or of another type or length.
    """
    p_ends = persist.need(arrays, "post_ends", "<i8", count + 1)
    postings = persist.need(arrays, "postings", "<i4")
    tfs = persist.need(arrays, "tfs", "<i4", len(postings))
    g_ends = persist.need(arrays, "group_ends", "<i8", size + 1)
    narrow = count <= knobs._NARROW
    packed = persist.need(arrays, "group_terms", "<i4" if narrow else "<i8", len(postings))
    lengths = persist.need(arrays, "lengths", "<i4", size)
    return _Arrays(packed, g_ends, postings, p_ends, tfs, lengths, count)


#: ``restore``'s numeric checks (:func:`_image_side`, :data:`_C_CHECKS`: in a thread
#: beside) start as soon as the file's image is read, ahead of the rows
#: (:func:`prepare`, ``read_file``'s ``prepare``: the header's group count, the term
#: count from the image's ``term_ends``), instead of once the rows are loaded: the open
#: waited ~0.3-0.5 s at 1M for that thread after the rows' part of the restore. The
#: restore takes the thread only for these very parts, the rows' group count and the
#: index's term pool setting, after its own checks of the arrays' types and lengths (the
#: same arrays): the same checks, errors and index. False: the thread started by the
#: restore (the path before it; ``tests/test_open44_bm25_store.py``).
_CHECKS_AHEAD = True

#: With :data:`_CHECKS_AHEAD`, the image-only part of the index is built ahead of the
#: rows too, in :class:`Prepared`'s steps (the reader's waits for a chunk), once the
#: checks' thread is in: the terms decoded, each term's posting list and frequencies
#: copied out of the image (~160 MB at 1M), the term pool, the lengths' arrays and the
#: long lists' dense frequencies (``BM25Index._dense_refresh``), in the prepared index
#: the restore then fills from the rows and returns (its df corrected for documents of
#: several records): ~0.5 s of the open's thread at 1M after the read. Only when every
#: image check passed ahead (else the restore runs them itself, in its order): the same
#: index and errors. False: all of it in the restore (the path before it;
#: ``tests/test_open44_bm25_store.py``). **Off by default**: measured at load 6-7 on the
#: 2-core Intel VM (branch open44) it took ~0.25-0.3 s off the load but added ~0.4 s to
#: the read (its steps ahead of the rows' own consumption) and made the row reader's
#: thread wait 0.3-0.5 s with every chunk full; the open's path CPU was no lower. To be
#: measured on an idle machine (docs/benchmarks.md, "Opening a 1M file, part 24").
_TERMS_AHEAD = False

#: Postings copied per step of :class:`Prepared` (a step ~1-4 ms), and the seconds a
#: step sleeps (the GIL released) while the checks' thread it waits for runs.
_PREP_POSTINGS = 1 << 18
_PREP_POLL = 0.002


def _capacity(size: int) -> int:
    """The groups' arrays' capacity for ``size`` groups (:func:`_build_rows`'s). O(log)."""
    cap = knobs._CHUNK
    while cap < size:
        cap *= 2
    return cap


class _Ready(NamedTuple):
    """What :class:`Prepared` built of the image alone, in its index: the terms' names
    and table (df: each list's length), the numeric arrays."""

    names: list[str]
    term_table: list[_Term | None]
    sides: _Arrays


class _PrepState:
    """What :class:`Prepared`'s steps read and make (the steps hold this, not it)."""

    __slots__ = ("beside", "groups", "index", "parts", "pool", "ready", "terms", "waiting")

    def __init__(self, index: BM25Index, parts: Mapping[str, bytes]) -> None:
        self.index = index
        self.parts = parts
        self.pool = index._pool is not None
        groups = persist.header_field(parts, "groups")
        self.groups: int | None = groups if type(groups) is int and groups >= 0 else None
        self.terms: int | None = None
        self.ready: _Ready | None = None
        self.beside: Beside | None = None
        self.waiting = False


class Prepared(persist.Stepped):
    """The image-only part of :func:`restore` run ahead of the rows from an image
    ``parts``: the numeric checks (:func:`_image_side`) in a thread, started by the first
    :meth:`step` (``read_file``'s prepared work), then (:data:`_TERMS_AHEAD`) in bounded
    steps, once the thread is in, the term table, pool, lengths and dense frequencies in
    :attr:`index` (a new, empty index of the scorer). Steps never raise: an image it
    cannot read or check is left to the restore's own checks, in their order. The
    restore takes what fits it (:meth:`ready_for`, :meth:`take`); whoever holds it ends
    it: the restore, :meth:`stop`, or dropping it (which stops the thread). O(1) a step
    but for the thread's O(postings + groups); O(postings) over all steps."""

    __slots__ = ("_st",)

    def __init__(self, index: BM25Index, parts: Mapping[str, bytes]) -> None:
        # (the steps hold the state, not this object: dropping it stops them)
        self._st = _PrepState(index, parts)
        super().__init__(_prep_steps(self._st))

    @property
    def index(self) -> BM25Index:
        """The new index the steps fill (the restore's, when it takes them)."""
        return self._st.index

    @property
    def waiting(self) -> bool:
        """Whether the next step only waits for the checks' thread (the reader's idle
        time is then better spent on the rows read so far)."""
        return self._st.waiting

    @property
    def state(self) -> _PrepState:
        """What the steps read and made: the image ``parts``, the header's ``groups``
        (None: not a count), ``pool`` (the index keeps a term pool), ``terms`` (the
        image's count, once the thread started), ``beside`` (the checks' thread, until
        taken), ``ready`` (the image-only part built, :data:`_TERMS_AHEAD`, else None)."""
        return self._st

    # step(): one step (the first starts the checks' thread; ~1-4 ms), whether steps
    # remain; never raises an Exception (an error leaves ready None: the restore's own
    # checks find it)

    def ready_for(self, parts: Mapping[str, bytes], groups: int, pool: bool) -> _Ready | None:
        """The image-only part built ahead (:attr:`index` holds it; the remaining steps
        run first), when it is of ``parts`` (the very object) for ``groups`` groups and
        the term pool ``pool`` and every image check passed; else None. O(the steps
        left)."""
        st = self._st
        if parts is not st.parts or groups != st.groups or pool != st.pool:
            return None
        if st.index._table or st.index._n:
            return None
        self.run_out()  # (waiting for the checks' thread)
        return st.ready

    def take(self, parts: Mapping[str, bytes], groups: int, pool: bool) -> Beside | None:
        """The checks' thread, when it checks ``parts`` (the very object) for ``groups``
        groups with the term pool ``pool`` and no step took it (then the caller ends it),
        else None (it is stopped). O(1) (a thread not taken is joined)."""
        st = self._st
        beside, st.beside = st.beside, None
        if beside is None:
            return None
        if parts is st.parts and groups == st.groups and pool == st.pool:
            self._close()
            return beside
        beside.stop()
        return None

    def _close(self) -> None:
        steps, self._steps = self._steps, None
        if steps is not None:
            steps.close()  # type: ignore[attr-defined]

    def stop(self) -> None:
        """End the steps and the thread if no restore took them (joins it). Idempotent."""
        self._close()
        beside, self._st.beside = self._st.beside, None
        if beside is not None:
            beside.stop()

    def __del__(self) -> None:
        self.stop()


def _prep_steps(st: _PrepState) -> Iterator[None]:
    """:class:`Prepared`'s steps over ``st`` (see it). O(postings) over all."""
    size = st.groups
    if size is None or not (_C_CHECKS and kernels.bm25_core_active()):
        return
    _, arrays = persist.unpack(st.parts, {})
    t_ends = persist.need(arrays, "term_ends", "<i8")
    count = len(t_ends) - 1
    sides = _need_sides(arrays, count, size)
    st.terms = count
    st.beside = Beside(_image_side, sides, st.pool, name="actormem image checks")
    if not _TERMS_AHEAD:
        return
    yield
    names = persist.decode_strings(persist.need(arrays, "terms", "|u1").tobytes(), t_ends)
    if len(set(names)) != count:
        return  # (the restore raises it)
    yield
    while True:  # the thread's result, without holding the reader up
        beside = st.beside
        if beside is None:
            return  # taken by a restore, or stopped
        if not beside.alive():
            break
        st.waiting = True
        time.sleep(_PREP_POLL)
        yield
    st.waiting = False
    st.beside = None
    dfs, wide, pool_raw, small = beside.result()
    index = st.index
    if pool_raw is not None:  # one array of every group's term numbers, in pieces
        code, data, s_code, starts = pool_raw
        pool = _TermPool.from_raw(code, b"", s_code, starts)
        view = memoryview(data)
        for at in range(0, len(data), 4 * _PREP_POSTINGS):
            pool.data.frombytes(view[at : at + 4 * _PREP_POSTINGS])
            yield
        index._pool = pool
    term_table: list[_Term | None] = []
    for _ in _terms_of(term_table, names, sides.p_ends, st.parts, dfs, wide, small):
        yield
    cap = _capacity(size)
    huge = knobs._HUGE_PAGES  # read at random: huge pages (kernels.huge_zeros)
    index._lengths = kernels.huge_zeros(cap, np.int32, huge)
    index._lengths[:size] = sides.lengths
    index._codes = kernels.huge_zeros(cap, np.uint8, huge)
    index._alive = kernels.huge_zeros(cap, np.uint8, huge)
    index._alive[:size] = 1
    yield
    for at in range(0, size, _PREP_POSTINGS // 4):
        stop = min(size, at + _PREP_POSTINGS // 4)
        index._codes[at:stop] = length_codes(sides.lengths[at:stop])
        yield
    index._term_table = term_table
    index._terms = dict(zip(names, term_table, strict=True))  # type: ignore[arg-type]
    # the long lists' dense frequencies (knobs._DENSE_TFS), a few lists a step
    batch: list[_Term] = []
    todo = 0
    for term in term_table:
        assert term is not None
        batch.append(term)
        todo += len(term.groups)
        if todo >= _PREP_POSTINGS // 4:
            index._dense_refresh(size, batch)
            batch = []
            todo = 0
            yield
    index._dense_refresh(size, batch)
    st.ready = _Ready(names, term_table, sides)


def _terms_of(
    table: list[_Term | None],
    names: list[str],
    p_ends: np.ndarray[Any, Any],
    parts: Mapping[str, bytes],
    dfs: np.ndarray[Any, Any],
    wide: np.ndarray[Any, Any],
    small: bytes,
) -> Iterator[None]:
    """Append to ``table`` a :class:`_Term` of each of ``names`` (its df ``dfs``' value),
    its posting list and frequencies copied from the image ``parts`` (``p_ends``' lists;
    ``wide``: int32 frequencies, else one byte each from ``small``), yielding after
    each :data:`_PREP_POSTINGS` postings or so. O(terms + postings)."""
    raw_groups = memoryview(parts["postings"])
    raw_tfs = memoryview(parts["tfs"])
    starts = p_ends.tolist()
    dfs_l = dfs.tolist()
    wide_l = wide.tolist()
    copied = 0
    for num, name in enumerate(names):
        term = _Term(name, num)
        lo_, hi_ = starts[num], starts[num + 1]
        term.groups.frombytes(raw_groups[4 * lo_ : 4 * hi_])
        if wide_l[num]:
            term.tfs = array("i")
            term.tfs.frombytes(raw_tfs[4 * lo_ : 4 * hi_])
        else:
            term.tfs.frombytes(small[lo_:hi_])
        term.df = dfs_l[num]
        table.append(term)
        copied += hi_ - lo_
        if copied >= _PREP_POSTINGS:
            copied = 0
            yield


def prepare(index: BM25Index, parts: Mapping[str, bytes]) -> Prepared | None:
    """:class:`Prepared` for a restore into the new, empty ``index`` from the image
    ``parts`` (nothing started yet), or None: :data:`_CHECKS_AHEAD` or
    :data:`_C_CHECKS` off, no compiled core, another index kind. O(header size)."""
    if not (_CHECKS_AHEAD and _C_CHECKS and kernels.bm25_core_active()) or not handles(index):
        return None
    return Prepared(index, parts)


def _restore_late(
    index: BM25Index,
    parts: Mapping[str, bytes],
    records: list[Record],
    cols: tuple[Sequence[str], bytes] | None,
    late: persist.LateDigest | None,
    prepared: Prepared | None = None,
) -> BM25Index:
    """:func:`restore` but the digest's comparison, when ``late`` hashes it (``cols``:
    :func:`_texts`' columns, None: the keys grouped here and the digest checked with
    the header; ``prepared``: :func:`prepare`'s checks, taken if they fit).
    O(records + postings)."""
    head: dict[str, Any] = {}
    if late is not None:  # the header's fields the rows give without their groups first
        head, arrays = persist.unpack(parts, _expect(index, records, None))
    gmap: dict[object, int] | None = None
    gids_np: np.ndarray[Any, Any] | None = None
    mask: bytes | None = None
    grouped = late.groups() if late is not None else None
    stored = cols[0] if cols is not None and type(cols[0]) is _StoredTexts else None
    if stored is not None and grouped is None:  # (the thread failed: its error)
        raise ImageError("the texts' groups were not found from the rows' store")
    if grouped is not None:  # the thread's: the first-appearance mask, the numbers
        assert cols is not None
        mask, raw_gids = grouped
        gids_np = np.frombuffer(raw_gids, np.int64)
        texts = cols[0]
        size = mask.count(1)
        # the distinct documents, made only where needed (a tag or the old layouts)
        canon: Sequence[Any] | None = texts if size == len(texts) else None
    else:
        keys = cols[0] if cols is not None else list(map(_key, records))
        gmap = {}
        for k in keys:
            if k not in gmap:
                gmap[k] = len(gmap)
        canon = list(gmap)
        size = len(canon)
    if late is None:
        _, arrays = persist.unpack(parts, _expect(index, records, canon))
    else:  # then the groups, as unpack() would have; the digest last (restore)
        if head.get("groups") != size:
            have = head.get("groups")
            raise ImageError(f"groups: the image has {have!r}, the rows and scorer need {size!r}")
        late.have = head.get("digest")
        late.header_passed = True
    pool = index._pool is not None
    ready = prepared.ready_for(parts, size, pool) if prepared is not None else None
    if ready is not None:  # the image-only part built ahead, in the prepared index
        assert prepared is not None
        index = prepared.index
        build = _build_rows(index, records, gmap, gids_np, cols, size)
        _fill_rows(index, parts, records, cols, ready.sides, build, canon, mask)
        return index
    t_ends = persist.need(arrays, "term_ends", "<i8")
    names = persist.decode_strings(persist.need(arrays, "terms", "|u1").tobytes(), t_ends)
    count = len(names)
    if len(set(names)) != count:
        raise ImageError("a term listed twice")
    sides = _need_sides(arrays, count, size)
    if _C_CHECKS and kernels.bm25_core_active():
        # the checks started ahead of the rows (prepare), when they are these very ones
        beside = prepared.take(parts, size, pool) if prepared is not None else None
        if beside is None:
            beside = Beside(_image_side, sides, pool, name="actormem image checks")
    else:
        beside = None
        dfs, wide_np, pool_raw, small = _image_side(sides, pool)
    try:
        build = _build_rows(index, records, gmap, gids_np, cols, size)
    except BaseException:
        if beside is not None:
            beside.stop()
        raise
    if beside is not None:
        dfs, wide_np, pool_raw, small = beside.result()
    if pool_raw is not None:  # one array of every group's term numbers
        index._pool = _TermPool.from_raw(*pool_raw)
    term_table: list[_Term | None] = []
    for _ in _terms_of(term_table, names, sides.p_ends, parts, dfs, wide_np, small):
        pass
    cap = len(build[1])
    huge = knobs._HUGE_PAGES  # read at random: huge pages (kernels.huge_zeros)
    index._lengths = kernels.huge_zeros(cap, np.int32, huge)
    index._lengths[:size] = sides.lengths
    index._codes = kernels.huge_zeros(cap, np.uint8, huge)
    index._codes[:size] = length_codes(sides.lengths)
    index._alive = kernels.huge_zeros(cap, np.uint8, huge)
    index._alive[:size] = 1
    index._term_table = term_table
    index._terms = dict(zip(names, term_table, strict=True))  # type: ignore[arg-type]
    _fill_rows(index, parts, records, cols, sides, build, canon, mask)
    index._dense_refresh()  # the long lists' dense frequencies (knobs._DENSE_TFS)
    return index


def _fill_rows(
    index: BM25Index,
    parts: Mapping[str, bytes],
    records: list[Record],
    cols: tuple[Sequence[str], bytes] | None,
    sides: _Arrays,
    build: tuple[list[Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]],
    canon: Sequence[Any] | None,
    mask: bytes | None,
) -> None:
    """What :func:`_restore_late` makes of the rows (``build``: :func:`_build_rows`') in
    ``index``, whose term table, pool and lengths are in: each term's df counting every
    record of its groups, the groups' own term arrays (without group columns), the
    group table and map, N, the total length, the change log. O(records)."""
    table, first, gids, sizes = build
    g_ends, packed, lengths, count = sides.g_ends, sides.packed, sides.lengths, sides.terms
    texts: Sequence[Any] = cols[0] if cols is not None else ()
    stored = texts if type(texts) is _StoredTexts else None
    size = len(lengths)
    narrow = count <= knobs._NARROW
    if size != len(records):  # each record of a group counts in its terms' df
        multi = np.flatnonzero(sizes > 1)
        lo, hi = g_ends[multi], g_ends[multi + 1]
        lens = hi - lo
        at = np.repeat(lo - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        extra = np.repeat(sizes[multi] - 1, lens)
        more = np.bincount(packed[at] >> _TF_BITS, weights=extra, minlength=count)
        term_table = index._term_table
        for num, add in zip(np.flatnonzero(more).tolist(), more[more > 0].tolist(), strict=True):
            term = term_table[num]
            assert term is not None
            term.df += int(add)
    code = "i" if narrow else "q"
    if not index._cols:  # the groups' own term arrays (the pool's groups have none)
        raw_terms = memoryview(parts["group_terms"])
        width = 4 if narrow else 8
        bounds = (g_ends * width).tolist()
        for num, group in enumerate(table):
            if index._pool is None:
                terms = array(code)
                terms.frombytes(raw_terms[bounds[num] : bounds[num + 1]])
                group.terms = terms
            _untrack(group)
    index._first_seq = first
    index._table = list(table)
    if index._cols:  # numbers, in the core's table where it can (the slots carry the texts)
        index._groups = _doc_map(index._table)
        if cols is not None and isinstance(index._groups, _DocMap):
            # no tags: every slot's text, its number (an ASCII text by the reader's hash
            # of it, with no str made, when the texts came from the store)
            index._groups.texts.index_from(0, None, _group_hashes(stored, mask, size))
        else:
            if canon is None:
                assert mask is not None
                canon = list(compress(texts, mask))
            for num, k in enumerate(canon):
                index._groups[k] = num
    else:
        if canon is None:
            assert mask is not None
            canon = list(compress(texts, mask))
        index._groups = dict(zip(canon, table, strict=True))
    index._n = len(records)
    index._total = int((lengths.astype(np.int64) * sizes).sum())
    changes = ChangeLog()
    changes.versions = list(map(_BORN, records))
    if index._cols:
        changes.groups = array("q")
        changes.groups.frombytes(gids.tobytes())
    else:
        changes.groups = [table[g] for g in gids.tolist()]
    changes.deltas = [1] * len(records)
    index._changes = changes


def _group_hashes(stored: _StoredTexts | None, mask: bytes | None, size: int) -> bytes | None:
    """The reader's hashes of the groups' texts (``GroupTable.index_from``'s): those of
    ``stored``'s records where ``mask`` marks a group's first, or None (no store, no
    hashes). O(len(stored))."""
    if stored is None or stored.hashes is None or mask is None:
        return None
    if size == len(stored):
        return stored.hashes
    keep = np.frombuffer(mask, np.uint8).astype(bool)
    firsts: bytes = np.frombuffer(stored.hashes, np.int64)[keep].tobytes()
    return firsts


def _build_rows(
    index: BM25Index,
    records: list[Record],
    gmap: dict[object, int] | None,
    gids_np: np.ndarray[Any, Any] | None,
    cols: tuple[Sequence[str], bytes] | None,
    size: int,
) -> tuple[list[Any], np.ndarray[Any, Any], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The part of :func:`restore` that needs the rows and not the image's arrays: the
    group table (with group columns each slot its records, else a ``_Group`` each,
    their ``terms`` left to the caller), the lowest seq by group (its capacity the
    arrays'), each record's group number and each group's record count (int64).
    ``gmap`` (documents to numbers) or ``gids_np`` (the numbers) gives the groups.
    O(records), O(records sharing a document) Python steps with ``gids_np``, columns and
    ``knobs._SINGLE_RECORD``."""
    n = len(records)
    if gids_np is None:
        assert gmap is not None
        keys = cols[0] if cols is not None else list(map(_key, records))
        gids = np.fromiter(map(gmap.__getitem__, keys), np.int64, n)
    else:
        gids = gids_np
    sizes = np.bincount(gids, minlength=size) if size else np.zeros(0, np.int64)
    cap = knobs._CHUNK
    while cap < size:
        cap *= 2
    first32 = index._first32
    first = first_seq_array(cap, first32, knobs._HUGE_PAGES)
    cols_layout = index._cols
    if cols_layout and knobs._SINGLE_RECORD and cols is not None:
        # Each group's first record in its slot, as add() leaves a group of one; the
        # records of a repeated document (few) after, as add() would make them.
        seqs = np.frombuffer(cols[1], np.int64)
        opens = np.ones(n, bool)
        if n > 1:
            opens[1:] = gids[1:] > np.maximum.accumulate(gids)[:-1]
        table: list[Any] = list(compress(records, opens.tolist()))
        first[:size] = first_seqs_of(seqs[opens], first32)
        later = np.flatnonzero(~opens)
        for i, g in zip(later.tolist(), gids[later].tolist(), strict=True):
            rec, slot = records[i], table[g]
            if isinstance(slot, list):
                slot.append(rec)
            else:
                table[g] = _recs([slot, rec], rec.cols.text(rec.slot))
        return table, first, gids, sizes
    if cols_layout:  # no group objects: each slot gets its records below
        table = [_NO_RECS] * size
    else:
        table = []
        for num in range(size):
            group = _Group(num)
            table.append(group)
    for rec, g in zip(records, gids.tolist(), strict=True):
        group = table[g]
        recs = group if cols_layout else group._recs
        if not isinstance(recs, list):
            recs = _recs([recs, rec], rec.cols.text(rec.slot)) if cols_layout else [recs, rec]
        elif recs:
            recs.append(rec)
            continue
        else:
            recs = (
                rec
                if knobs._SINGLE_RECORD
                else _recs([rec], rec.cols.text(rec.slot))
                if cols_layout
                else [rec]
            )  # as BM25Index.add
            first[g] = first_seq_floor(rec.seq) if first32 else rec.seq  # by seq
        if cols_layout:
            table[g] = recs
        else:
            group._recs = recs
    return table, first, gids, sizes
