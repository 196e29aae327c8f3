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
answers for these rows, never an out-of-range read.
"""

from __future__ import annotations

import json
import unicodedata
from array import array
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._record import Record
from .. import kernels, persist
from ..persist import ImageError
from ..tokenize import _WORD, Tokenizer
from . import knobs
from .changelog import ChangeLog
from .index import BM25Index, _doc_map, _untrack
from .postings import (
    _NO_RECS,
    _NO_SEQ,
    _TF_BITS,
    _TF_CAP,
    _Group,
    _pool_dtype,
    _recs,
    _Term,
    _TermPool,
    length_codes,
)
from .postings import _doc_key as _key

__all__ = ["dump", "handles", "restore"]

KIND = "bm25"

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


def _expect(index: BM25Index, records: list[Record], canon: list[object]) -> dict[str, Any]:
    texts = [k if type(k) is str else k[0] for k in canon]  # type: ignore[index]
    tagged = [json.dumps([g, k[1]]) for g, k in enumerate(canon) if type(k) is not str]  # type: ignore[index]
    return {
        "kind": KIND,
        "params": _params(index),
        "rows": len(records),
        "max_seq": records[-1].seq if records else 0,
        "groups": len(canon),
        "digest": persist.text_digest(texts, tagged),
    }


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


def restore(index: BM25Index, parts: Mapping[str, bytes], records: list[Record]) -> BM25Index:
    """Fill the new, empty ``index`` from the image ``parts`` so that it equals one that
    added ``records`` (ascending seq) one by one. O(records + postings), vectorised
    but for O(records + groups + terms) Python steps.

    Raises:
        ImageError: See the module documentation. ``index`` may be partly filled.
    """
    assert not index._table, "restore into a new index"
    keys = list(map(_key, records))
    gmap: dict[object, int] = {}
    for k in keys:
        if k not in gmap:
            gmap[k] = len(gmap)
    canon = list(gmap)
    size = len(canon)
    _, arrays = persist.unpack(parts, _expect(index, records, canon))
    t_ends = persist.need(arrays, "term_ends", "<i8")
    names = persist.decode_strings(persist.need(arrays, "terms", "|u1").tobytes(), t_ends)
    count = len(names)
    if len(set(names)) != count:
        raise ImageError("a term listed twice")
    p_ends = persist.need(arrays, "post_ends", "<i8", count + 1)
    postings = persist.need(arrays, "postings", "<i4")
    persist.check_lists(p_ends, postings, size, "postings")
    tfs = persist.need(arrays, "tfs", "<i4", len(postings))
    if len(tfs) and int(tfs.min()) < 1:
        raise ImageError("a term frequency below 1")
    g_ends = persist.need(arrays, "group_ends", "<i8", size + 1)
    narrow = count <= knobs._NARROW
    packed = persist.need(arrays, "group_terms", "<i4" if narrow else "<i8", len(postings))
    lengths = persist.need(arrays, "lengths", "<i4", size)
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

    gids = list(map(gmap.__getitem__, keys))
    sizes = np.bincount(np.array(gids, np.int64), minlength=size) if size else np.zeros(0, np.int64)
    code, width = ("i", 4) if narrow else ("q", 8)
    raw_terms = memoryview(parts["group_terms"])
    bounds = (g_ends * width).tolist()
    table: list[Any] = []
    cap = knobs._CHUNK
    while cap < size:
        cap *= 2
    first = kernels.huge_zeros(cap, np.int64, knobs._HUGE_PAGES)
    first[:] = _NO_SEQ
    cols = index._cols
    if index._pool is not None:  # one array of every group's term numbers
        index._pool = _TermPool.from_flat(packed >> _TF_BITS, count, g_ends.tolist())
    if cols:  # no group objects: each slot gets its records below
        table = [_NO_RECS] * len(canon)
    elif index._pool is not None:
        for num in range(len(canon)):
            group = _Group(num)
            _untrack(group)
            table.append(group)
    for num in range(len(table), len(canon)):
        group = _Group(num)
        terms = array(code)
        terms.frombytes(raw_terms[bounds[num] : bounds[num + 1]])
        group.terms = terms
        _untrack(group)
        table.append(group)
    for rec, g in zip(records, gids, strict=True):
        group = table[g]
        recs = group if cols else group._recs
        if not isinstance(recs, list):
            recs = _recs([recs, rec], rec.cols.text(rec.slot)) if cols else [recs, rec]
        elif recs:
            recs.append(rec)
            continue
        else:
            recs = (
                rec
                if knobs._SINGLE_RECORD
                else _recs([rec], rec.cols.text(rec.slot))
                if cols
                else [rec]
            )  # as BM25Index.add
            first[g] = rec.seq  # the records come by seq
        if cols:
            table[g] = recs
        else:
            group._recs = recs
    dfs = np.add.reduceat(sizes[postings], p_ends[:-1]).tolist() if count else []
    wide = np.maximum.reduceat(tfs, p_ends[:-1]).tolist() if count else []
    raw_groups = memoryview(parts["postings"])
    raw_tfs = memoryview(parts["tfs"])
    small = tfs.astype(np.uint8).tobytes() if count else b""
    starts = p_ends.tolist()
    term_table: list[_Term | None] = []
    for num, name in enumerate(names):
        term = _Term(name, num)
        lo, hi = starts[num], starts[num + 1]
        term.groups.frombytes(raw_groups[4 * lo : 4 * hi])
        if wide[num] > 255:
            term.tfs = array("i")
            term.tfs.frombytes(raw_tfs[4 * lo : 4 * hi])
        else:
            term.tfs.frombytes(small[lo:hi])
        term.df = dfs[num]
        term_table.append(term)
    index._first_seq = first
    huge = knobs._HUGE_PAGES  # read at random: huge pages (kernels.huge_zeros)
    index._lengths = kernels.huge_zeros(cap, np.int32, huge)
    index._lengths[:size] = lengths
    index._codes = kernels.huge_zeros(cap, np.uint8, huge)
    index._codes[:size] = length_codes(lengths)
    index._alive = kernels.huge_zeros(cap, np.uint8, huge)
    index._alive[:size] = 1
    index._table = list(table)
    if cols:  # numbers, in the core's table where it can (the slots carry the texts)
        index._groups = _doc_map(index._table)
        for num, k in enumerate(canon):
            index._groups[k] = num
    else:
        index._groups = dict(zip(canon, table, strict=True))
    index._term_table = term_table
    index._terms = {name: term for name, term in zip(names, term_table, strict=True)}  # type: ignore[misc]
    index._n = len(records)
    index._total = int((lengths.astype(np.int64) * sizes).sum())
    changes = ChangeLog()
    changes.versions = [rec.born for rec in records]
    changes.groups = array("q", gids) if cols else [table[g] for g in gids]
    changes.deltas = [1] * len(records)
    index._changes = changes
    index._dense_refresh()  # the long lists' dense frequencies (knobs._DENSE_TFS)
    return index
