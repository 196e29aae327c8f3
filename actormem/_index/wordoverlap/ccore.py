"""The word-overlap index's compiled core (``_cwordoverlap.c``), checked.

Its calls replace Python loops of the index with the same operations on the same
structures (the posting dict of ``array('i')``, the substring vocabulary's dicts), so the
index's state after an ``add`` and the counts of a retrieve are exactly those of the
Python path, which stays the reference (``tests/test_wordoverlap_core.py`` drives both):

* :func:`add_text`: the owner's add of a new distinct text (token set, posting appends,
  the vocabulary's acquire of new tokens); :func:`add_text_known`, the same with a
  shortcut for a text whose tokens all have posting lists; and :func:`add_text_cached`,
  the same through the numbering's :func:`token_cache` (what the index calls; the purge
  tells the cache of lists it drops with :func:`cache_forget`);
* :func:`count_words`: a reader's word loop for the words with small match sets, a work
  budget per call (the reader yields between calls);
* :func:`text_masks`: the short-word masks of a batch of texts (``masks._text_masks``);
* :class:`BitPlanes` and the ``bits_*`` helpers: a retrieve's matched-word counts
  bit-sliced (``np_`` planes of 64 groups per uint64 word, ripple-carry adds) and match
  sets as packed bitsets, instead of a byte per group (``search.py``'s byte counts stay
  the reference, ``tests/test_wordoverlap_bits.py``; ``ACTORMEM_WO_BITS=0`` or
  ``BITS = False`` selects them).

:func:`core` is None when the extension is missing, ``ACTORMEM_WO_CORE=0`` or
``ACTORMEM_PURE_PYTHON=1`` is set, or ``kernels.WO_CORE`` is False; the index then runs
its Python path. Arguments are checked here (types, ranges) before they reach C; the C
code checks again what memory safety needs.
"""

from __future__ import annotations

import os
from array import array
from types import ModuleType
from typing import Any

import numpy as np

from ..._entry import MemoryEntry
from ..._record import Record
from .. import kernels, substring
from ..substring import SubstringVocab
from . import knobs, masks

__all__ = [
    "BITS",
    "MAX_PLANES",
    "BitPlanes",
    "DenseBits",
    "add_groups",
    "add_text",
    "add_text_cached",
    "add_text_known",
    "add_texts_cached",
    "cache_entries",
    "cache_forget",
    "bits_active",
    "bits_from_masks",
    "bits_rows_from_masks",
    "bits_join",
    "bits_join_slice",
    "bits_set",
    "bits_to_gids",
    "core",
    "count_words",
    "flat_first",
    "lower",
    "text_masks",
    "token_cache",
    "visit_heap",
    "visit_order",
    "visit_pop",
    "visit_select",
    "words_of",
]

_COUNTS = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int64))
_U64 = np.dtype(np.uint64)
#: numpy's module defines a ``__getattr__``, so Python 3.11 cannot specialize an ``np.X``
#: read: the hot checks read these module names instead (the same objects; hot45).
_NDARRAY = np.ndarray
#: The type of a token cache (a capsule; ``types.CapsuleType`` only from Python 3.13).
#: (Without the core, a type no argument has: every cache is refused.)
_CAPSULE: type = (
    type(kernels._wo.token_cache())
    if kernels._wo is not None and hasattr(kernels._wo, "token_cache")
    else type("NoTokenCache", (), {})
)


def core() -> ModuleType | None:
    """The compiled core while it is on, else None (run the Python path). O(1)."""
    return kernels.wo_core()


def query_words(query: str) -> tuple[str, dict[str, int], int] | None:
    """``(query.lower(), {word: times} over its split() in first-seen order, number of
    words)`` from the core's one-pass ``query_words`` for an ASCII ``query`` when
    ``knobs._QUERY_WORDS_C`` and the core has it; None otherwise (a non-ASCII query,
    no core: the caller lowers, splits and counts). With ``knobs._QUERY_INTERN`` a word
    of at most 24 characters is the str an earlier query's same word got, while the
    core's process-wide table of 8,192 slots still holds it (the same values).
    ``TypeError`` for a non-str. O(len(query))."""
    fn = getattr(core(), "query_words", None) if knobs._QUERY_WORDS_C else None
    return fn(query, 1 if knobs._QUERY_INTERN else 0) if fn is not None else None


def lower() -> Any:
    """The function ``add_many`` lowers a new text with: the core's ``lower_text``
    (``str.lower``'s value; a text that is not ASCII lowered ~2x faster, its ASCII code
    points by a table) when ``knobs._LOWER_C`` and the core has it, else ``str.lower``.
    O(1)."""
    fn = getattr(kernels.wo_core(), "lower_text", None) if knobs._LOWER_C else None
    return fn if fn is not None else str.lower


#: The entry slots ``record_setup`` reads (``state._store_setup``'s, in its order).
_ENTRY_SLOTS = "_id ttl key expires_at relevance memory namespace category value tags"
#: ``Record``'s slots in the order ``record_setup``/``store_setup`` take them: its entry
#: is slot ``slot`` of its store ``cols`` (an ``EntryColumns``).
_RECORD_SLOTS = ("cols", "born", "died", "seq", "access", "evkey", "slot")
#: Whether the core's ``record_setup`` ran (``add_groups``: once per process).
_records_fixed = False


def add_groups() -> Any:
    """The core's ``add_groups_new`` (``add_many``'s loop over records with new texts
    in one call), its record and entry classes fixed by ``record_setup`` at the first
    call, when ``knobs._ADD_GROUPS_C`` and the core has it; else None (the loop in
    Python). O(1)."""
    mod = kernels.wo_core() if knobs._ADD_GROUPS_C else None
    return _with_records(mod, "add_groups_new")


def restore_columns() -> Any:
    """The core's ``restore_columns`` (the restore's pass over the records: texts,
    relevance, seqs, tagged positions; with a tuple of expected texts, whether each
    record's text is that very object), its record and entry classes fixed as for
    :func:`add_groups`; None without the core or the function. O(1)."""
    return _with_records(kernels.wo_core(), "restore_columns")


def rows_texts() -> Any:
    """The core's ``rows_texts`` (each ``(seq, entry)`` row's text, as a tuple, ahead of
    the bulk load's records), its record and entry classes fixed as for
    :func:`add_groups`; None without the core or the function. O(1)."""
    return _with_records(kernels.wo_core(), "rows_texts")


def rows_slots() -> Any:
    """The core's ``rows_slots`` (the slot numbers of a file's ``(seq, slot)`` rows, as
    int64 bytes), or None without the core or the function. O(1)."""
    return getattr(kernels.wo_core(), "rows_slots", None)


def _with_records(mod: ModuleType | None, name: str) -> Any:
    """``mod``'s function ``name`` once ``record_setup`` fixed the record and entry
    classes (once per process), or None without ``mod`` or the function. O(1)."""
    global _records_fixed
    fn = getattr(mod, name, None)
    if mod is None or fn is None:
        return None
    if not _records_fixed:
        mod.record_setup(
            Record,
            tuple(Record.__dict__[n] for n in _RECORD_SLOTS),
            MemoryEntry,
            tuple(MemoryEntry.__dict__[n] for n in _ENTRY_SLOTS.split()),
        )
        _records_fixed = True
    return fn


def _module() -> ModuleType:
    mod = core()
    if mod is None:
        raise RuntimeError("the compiled word-overlap core is not available")
    return mod


def _check_add(post: object, low: object, gid: object, vocab: object) -> None:
    """The checks of :func:`add_text` and :func:`add_text_known`'s arguments."""
    if type(post) is not dict or type(low) is not str or type(vocab) is not SubstringVocab:
        raise TypeError("post must be a dict, low a str, vocab a SubstringVocab")
    if type(gid) is not int or not 0 <= gid < 1 << 31:
        raise ValueError("gid must be an int in [0, 2**31)")


def add_text(post: dict[str, array[int]], low: str, gid: int, vocab: SubstringVocab) -> int:
    """Index the lower-cased text ``low`` as the new group number ``gid``: each distinct
    token of ``low.split()`` gets ``gid`` appended to its posting list, a new token is
    acquired by ``vocab`` and gets ``array('i', [gid])``. Returns the new tokens' count.
    O(tokens), plus O(len(token)) per new token.

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``gid`` beyond int32.
    """
    _check_add(post, low, gid, vocab)
    fresh: int = _module().add_text(post, low, gid, vocab)
    return fresh


def add_text_known(post: dict[str, array[int]], low: str, gid: int, vocab: SubstringVocab) -> int:
    """:func:`add_text`, the same structures and result, with a shortcut: when every
    token of ``low`` has a posting list already (most texts, once a memory holds a few
    thousand), one lookup per token and one append per distinct list, without the token
    set; at the first new token, :func:`add_text`'s work on the same split (its set
    order gives new tokens their vocabulary ids). Returns the new tokens' count.
    O(tokens), plus O(len(token)) per new token.

    Raises:
        TypeError, ValueError: As :func:`add_text`.
    """
    _check_add(post, low, gid, vocab)
    _sync_grow()
    fresh: int = _module().add_text_known(post, low, gid, vocab)
    return fresh


def token_cache() -> object:
    """A new, empty token cache for :func:`add_text_cached` (a capsule: a table of 2**8
    slots, 8 KiB, grown and emptied as the posting dict it serves grows, to at least
    twice its tokens and at most 2**15 slots, 1 MiB: a small memory keeps a small
    table). O(1)."""
    return _module().token_cache()


def _check_cache(cache: object, epoch: object) -> None:
    if type(cache) is not _CAPSULE:
        raise TypeError("cache must be a token_cache()")
    if type(epoch) is not int or not 0 <= epoch < 1 << 62:
        raise ValueError("epoch must be an int in [0, 2**62)")


#: ``knobs._GROW_DIRECT`` as last handed to the core's ``set_grow_direct`` (its default).
_grow_set = True


def _sync_grow() -> None:
    """Hand ``knobs._GROW_DIRECT`` to the core (``set_grow_direct``) when it changed
    since the last call: the compiled adds read it there. O(1)."""
    global _grow_set
    on = bool(knobs._GROW_DIRECT)
    if on != _grow_set:
        mod = kernels.wo_core()
        if mod is not None and hasattr(mod, "set_grow_direct"):
            mod.set_grow_direct(on)
            _grow_set = on


def _add_flags() -> int:
    """The compiled adds' ``flags`` from the knobs: 1 ``knobs._ACQUIRE_FAST``, 2
    ``knobs._UNTRACK``, 4 ``knobs._CACHE_UCS``, 8 ``knobs._ACTIVE_BITS``, 16
    ``knobs._SCAN_ONE``, 32 ``knobs._GRAM_STRS``; ``knobs._GROW_DIRECT`` handed over on
    the way. O(1)."""
    _sync_grow()
    return (
        int(knobs._ACQUIRE_FAST)
        | int(knobs._UNTRACK) << 1
        | int(knobs._CACHE_UCS) << 2
        | int(knobs._ACTIVE_BITS) << 3
        | int(knobs._SCAN_ONE) << 4
        | int(knobs._GRAM_STRS) << 5
    )


def has_acquire_all() -> bool:
    """Whether :func:`acquire_all` runs (the core is on and has it). O(1)."""
    mod = kernels.wo_core()
    return mod is not None and hasattr(mod, "acquire_all")


def acquire_all(vocab: SubstringVocab, toks: set[str] | list[str]) -> int | None:
    """``vocab.acquire(tok)`` for each ``tok`` of ``toks`` in its iteration order, in one
    call into C: the vocabulary :func:`add_text` leaves for the same tokens in the same
    order (with the compiled adds' knobs: ``knobs._ACQUIRE_FAST``, ``knobs._UNTRACK``,
    ``knobs._GRAM_STRS``), but no posting list made. Returns the number of new items, or
    None when the core (or this function in it) is not available: then nothing was done.
    O(sum of len(tok)).

    Raises:
        TypeError: ``vocab`` is not a :class:`SubstringVocab`, ``toks`` not an exact set
            or list, or an item not an exact ``str`` (the items before it acquired).
    """
    if type(vocab) is not SubstringVocab:
        raise TypeError("vocab must be a SubstringVocab")
    if type(toks) is not set and type(toks) is not list:
        raise TypeError("toks must be a set or a list")
    mod = kernels.wo_core()
    fn = getattr(mod, "acquire_all", None) if mod is not None else None
    if fn is None:
        return None
    fresh: int = fn(vocab, toks, _add_flags())
    return fresh


def add_text_cached(
    post: dict[str, array[int]],
    low: str,
    gid: int,
    vocab: SubstringVocab,
    cache: object,
    epoch: int,
) -> int:
    """:func:`add_text_known`, the same structures and result, through ``cache`` (the
    numbering's :func:`token_cache`, which serves ``post`` at ``epoch``): an ASCII text's
    tokens are read from its bytes, a token in the cache costs no ``str`` and no dict
    lookup, and ``gid`` is written into a posting list's buffer when it has room. New
    tokens are acquired in the order :func:`add_text` gives them. A cache that last
    served another dict or epoch is emptied first. Returns the new tokens' count.
    O(len(low)), plus O(len(token)) per new token.

    Raises:
        TypeError, ValueError: As :func:`add_text`, or ``cache`` is not a token cache, or
            ``epoch`` is not an int in [0, 2**62).
    """
    # The checks of _check_add and _check_cache, inline: this runs once per new text.
    if type(post) is not dict or type(low) is not str or type(vocab) is not SubstringVocab:
        raise TypeError("post must be a dict, low a str, vocab a SubstringVocab")
    if type(gid) is not int or not 0 <= gid < 1 << 31:
        raise ValueError("gid must be an int in [0, 2**31)")
    if type(cache) is not _CAPSULE:
        raise TypeError("cache must be a token_cache()")
    if type(epoch) is not int or not 0 <= epoch < 1 << 62:
        raise ValueError("epoch must be an int in [0, 2**62)")
    mod = kernels.wo_core()
    if mod is None:
        raise RuntimeError("the compiled word-overlap core is not available")
    fresh: int = mod.add_text_cached(post, low, gid, vocab, cache, epoch, _add_flags())
    return fresh


def add_texts_cached(
    post: dict[str, array[int]],
    lows: list[str],
    gid: int,
    vocab: SubstringVocab,
    cache: object,
    epoch: int,
) -> int:
    """:func:`add_text_cached` of ``lows[i]`` as the group number ``gid + i``, for each
    ``i`` in order, in one call into C (a batch of new texts): the same structures and
    the new tokens' total. An error stops the loop; the texts before it stay added.
    O(sum of len(low)), plus O(len(token)) per new token.

    Raises:
        TypeError, ValueError: As :func:`add_text_cached`, or ``lows`` is not a list of
            str, or a group number ``gid + i`` is beyond int32.
    """
    if type(post) is not dict or type(lows) is not list or type(vocab) is not SubstringVocab:
        raise TypeError("post must be a dict, lows a list, vocab a SubstringVocab")
    # knobs._LEAN_TEXT_CHECKS: the C loop makes this test (the same TypeError) on its
    # copy of the list before it adds any text.
    if not knobs._LEAN_TEXT_CHECKS and not all(type(low) is str for low in lows):
        raise TypeError("lows must be a list of str")
    if type(gid) is not int or not (0 <= gid < 1 << 31 and gid + len(lows) <= 1 << 31):
        raise ValueError("gid must be an int in [0, 2**31), gid + len(lows) at most 2**31")
    _check_cache(cache, epoch)
    fresh: int = _module().add_texts_cached(post, lows, gid, vocab, cache, epoch, _add_flags())
    return fresh


def cache_forget(cache: object, post: dict[str, array[int]], token: str, epoch: int) -> None:
    """The owner deleted or replaced ``post[token]`` and bumped the numbering's epoch to
    ``epoch``: ``token`` leaves ``cache``, which serves ``post`` at ``epoch`` from now on
    (emptied instead if its epoch was not ``epoch - 1``). O(len(token)).

    Raises:
        TypeError, ValueError: As :func:`add_text_cached`, or ``token`` is not a str.
    """
    if type(post) is not dict or type(token) is not str:
        raise TypeError("post must be a dict and token a str")
    _check_cache(cache, epoch)
    _module().cache_forget(cache, post, token, epoch)


def cache_entries(cache: object) -> tuple[int, int, list[tuple[str, array[int]]]]:
    """What ``cache`` holds, for consistency checks: the ``id()`` of the posting dict and
    the epoch it serves, and its ``(token, posting list)`` entries. O(slots).

    Raises:
        TypeError: ``cache`` is not a token cache.
    """
    if type(cache) is not _CAPSULE:
        raise TypeError("cache must be a token_cache()")
    got: tuple[int, int, list[tuple[str, array[int]]]] = _module().cache_entries(cache)
    return got


def _ints_in_range(mults: list[Any]) -> bool:
    """Whether every exact ``int`` of ``mults`` is in ``[0, 2**31)``: the C
    ``count_words``' range test, which leaves any other type to its type test (a
    ``TypeError`` from ``start`` on, nothing before it), so that both paths of
    ``knobs._LEAN_MULT_CHECKS`` refuse a float or a str alike. ``min`` and ``max`` first
    (all in range: so are the ints), the ints alone when they fail. O(len(mults))."""
    try:
        if 0 <= min(mults) <= max(mults) < 1 << 31:
            return True
    except TypeError:  # a str beside the numbers: not comparable
        pass
    return all(0 <= m < 1 << 31 for m in mults if type(m) is int)


def count_words(
    words: list[str],
    mults: list[int],
    start: int,
    budget: int,
    limit: int,
    vocab: SubstringVocab,
    post: dict[str, array[int]],
    skip: dict[str, Any],
    short: dict[str, int],
    counts: np.ndarray[Any, Any],
    n: int,
    planes: int = 0,
    memo: list[Any] | None = None,
    epoch: int = 0,
    tokcache: object | None = None,
    current: bool = False,
) -> tuple[int, list[int]]:
    """From ``words[start:]`` (distinct query words; ``mults`` their multiplicities),
    for each word of 3 or more characters not in ``short`` or ``skip`` whose candidate
    tokens number at most ``limit`` and whose posting lists hold fewer than ``limit``
    group numbers in all (the vocabulary's long-word cache read and kept as
    :meth:`SubstringVocab.lookup_steps` does): ``counts[g] += mult`` once per distinct
    group number ``g < n`` of the lists of the tokens that contain it. Every other word
    is left to the caller. Stops once the work (candidates + postings + 1 per word)
    reaches ``budget``. Returns (the index of the next word, the indexes of the words
    left). O(budget + limit).

    With ``memo`` (a numbering's word memo: a list of two dicts, the young and the old
    generation, and the young one's count of numbers; only ever written by this call) the
    match set of such a word is kept across calls in C (the posting arrays of the tokens
    containing it, how much of each was read, the distinct group numbers read) and
    brought up to date from the arrays' new tails and the gram list's new ids, which the
    owner only appends while the numbering's ``epoch`` stays the same (a purge that
    replaces or deletes a list bumps it). The same counts; a repeated word costs O(its
    tokens / 8 + new postings + its set) instead of its lookup and posting join. A
    generation turns old at ``knobs._MEMO_WORDS`` words or 128 times as many numbers
    (the old one dropped). With ``knobs._MEMO_ABSENT`` a word that no token contains is
    kept in the memo too, as the 3-gram of it found missing from the vocabulary, and
    answered by one probe of that gram until a token brings it (instead of probing up to
    eight of its grams again at every call). With ``knobs._MEMO_OWN_CACHE`` the
    vocabulary's long-word cache is neither read nor written for the words looked up
    here (the memo keeps their answers); with ``knobs._MEMO_KEEP_LEFT`` too, a word of 4
    or more characters left to the caller for its postings has the ids it verified kept
    in that cache, where the caller's :meth:`SubstringVocab.lookup_steps` finds them.
    With ``knobs._ADD_UNROLLED`` the counts are added four numbers a step (the same
    counts). With ``knobs._FIND_BYTES`` a candidate token and a word of one byte per
    character are compared as bytes (the same answers as ``word in token``). With
    ``knobs._PROBE_STRS`` and ``tokcache`` (the numbering's :func:`token_cache`) a new
    ASCII word's probe 3-grams are the strs of that cache's gram table (hashes kept,
    the dict's own keys when the owner's adds made them), not new strs (the same
    lookups). With ``knobs._SHORT_UNREAD`` and ``short`` being
    :data:`masks._SHORT_BIT` (whose words have 1-2 characters), ``short`` is not looked
    up for the words of 3 or more characters (the only ones looked up there). With
    ``knobs._CAND_SIGS`` and ``tokcache`` a candidate token is first tested by its
    signature (a bit per 3-character substring, kept per token id in ``tokcache``):
    one lacking a bit of the word's cannot contain it and is skipped unread (the same
    answers; ``vocab``'s ids are never reused and an id's item never changes, which
    the kept signatures rely on). With ``knobs._MEMO_EPOCH_ONLY`` and ``current`` (the
    caller's word that ``memo`` is the owner's current numbering's: the owner bumps
    ``epoch`` before it releases any token of ``vocab``, the only way a 3-gram's list
    is replaced or deleted) a kept word's gram list is not looked up again in the gram
    dict while its memo's epoch is ``epoch`` (the same counts).

    Raises:
        TypeError, ValueError: An argument of the wrong type or range.
    """
    if memo is not None and (
        type(memo) is not list
        or len(memo) != 3
        or type(memo[0]) is not dict
        or type(memo[1]) is not dict
        or type(memo[2]) is not int
    ):
        raise TypeError("memo must be None or a list of two dicts and an int")
    if type(epoch) is not int or not 0 <= epoch < 1 << 62:
        raise ValueError("epoch must be an int in [0, 2**62)")
    if type(current) is not bool:
        raise TypeError("current must be a bool")
    if type(words) is not list or type(mults) is not list or len(words) != len(mults):
        raise TypeError("words and mults must be lists of the same length")
    if type(post) is not dict or type(skip) is not dict or type(short) is not dict:
        raise TypeError("post, skip and short must be dicts")
    if type(vocab) is not SubstringVocab:
        raise TypeError("vocab must be a SubstringVocab")
    if tokcache is not None and type(tokcache) is not _CAPSULE:
        raise TypeError("tokcache must be None or a token_cache()")
    # With knobs._LEAN_WORD_CHECKS the C loop refuses a word that is not a str or a
    # multiplicity that is not an int itself (the same TypeError, before it reads them).
    if not knobs._LEAN_WORD_CHECKS and (
        not all(type(w) is str for w in words) or not all(type(m) is int for m in mults)
    ):
        raise TypeError("words must be str and mults int")
    # With knobs._LEAN_MULT_CHECKS the C function tests every int multiplicity's range
    # (the same ValueError) before it counts any word.
    if not knobs._LEAN_MULT_CHECKS and mults and not _ints_in_range(mults):
        raise ValueError("multiplicities must be in [0, 2**31)")
    if type(counts) is not _NDARRAY or counts.dtype not in (_COUNTS if not planes else (_U64,)):
        raise TypeError("counts must be a numpy array of uint8, uint16 or int64 (uint64 planes)")
    if counts.ndim != 1 or not counts.flags.c_contiguous or not counts.flags.writeable:
        raise ValueError("counts must be 1-D, contiguous and writable")
    if type(planes) is not int or not 0 <= planes <= MAX_PLANES:
        raise ValueError("planes out of range")
    room = len(counts) // planes * 64 if planes else len(counts)
    if not (0 <= start <= len(words) and budget >= 0 and 0 <= limit < 1 << 31 and 0 <= n <= room):
        raise ValueError("start, budget, limit or n out of range")
    got: tuple[int, list[int]] = _module().count_words(
        words,
        mults,
        start,
        budget,
        limit,
        vocab._grams,
        vocab._items,
        vocab._cache,
        substring._CACHE_SIZE,
        post,
        skip,
        short,
        counts,
        n,
        planes,
        memo,
        epoch,
        max(1, knobs._MEMO_WORDS),
        (1 if knobs._MEMO_ABSENT else 0)
        | (2 if knobs._MEMO_OWN_CACHE else 0)
        | (4 if knobs._MEMO_KEEP_LEFT else 0)
        | (8 if knobs._ADD_UNROLLED else 0)
        | (16 if knobs._FIND_BYTES else 0)
        | (32 if knobs._PROBE_STRS else 0)
        # The words of masks._SHORT_BIT have 1-2 characters (asserted there): C need
        # not look a longer word up in it. Any other dict is read.
        | (64 if knobs._SHORT_UNREAD and short is masks._SHORT_BIT else 0)
        | (128 if knobs._CAND_SIGS else 0)
        | (256 if knobs._MEMO_EPOCH_ONLY and current else 0),
        tokcache,
    )
    return got


def text_masks(
    texts: list[str], out: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], start: int
) -> None:
    """:func:`~.masks._text_masks` of ``texts`` (lower-cased) written to ``out[0]`` and
    ``out[1]`` (the low and high 64 bits) from ``start`` on. O(total length).

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``out`` too short.
    """
    if type(texts) is not list:
        raise TypeError("texts must be a list of str")
    # knobs._LEAN_TEXT_CHECKS: the C function tests every text (the same TypeError)
    # before it writes any mask.
    if not knobs._LEAN_TEXT_CHECKS and not all(type(t) is str for t in texts):
        raise TypeError("texts must be a list of str")
    for arr in out:
        if type(arr) is not np.ndarray or arr.dtype != _U64 or arr.ndim != 1:
            raise TypeError("masks must be 1-D numpy arrays of uint64")
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            raise ValueError("masks must be contiguous and writable")
        if not 0 <= start <= len(arr) - len(texts):
            raise ValueError("start beyond the masks")
    _module().text_masks(
        texts, masks._PAIR_LO, masks._PAIR_HI, out[0], out[1], start, knobs._MASKS_BY_KIND
    )


# ---------------------------------------------------------------- bit-sliced counts

#: Whether retrieves use the bit-sliced counts (:class:`BitPlanes`, packed match sets)
#: when the core is on: ``ACTORMEM_WO_BITS=0`` (or setting this False) keeps the byte
#: counts of the path before them, the reference the tests compare with.
BITS = os.environ.get("ACTORMEM_WO_BITS", "1") != "0"
#: Whether retrieves keep the match sets of the words :func:`count_words` counts across
#: retrieves (its ``memo``): ``ACTORMEM_WO_MEMO=0`` (or setting this False) recomputes
#: them every time, the path before the memo, the reference the tests compare with.
MEMO = os.environ.get("ACTORMEM_WO_MEMO", "1") != "0"
#: The most planes a retrieve uses: queries of 2**16 words or more take the byte path.
MAX_PLANES = 16


def bits_active() -> bool:
    """Whether retrieves starting now count with :class:`BitPlanes`. O(1)."""
    return BITS and core() is not None


def words_of(n: int) -> int:
    """64-bit words of a bitset over ``n`` groups. O(1)."""
    return (n + 63) >> 6


def _bitset(name: str, value: Any, n: int, writable: bool = False) -> None:
    """Check ``value`` is a uint64 bitset over at least ``n`` groups."""
    _need(kernels._array_of(name, value, _U64, writable) >= words_of(n), f"{name} too short")


def _gids(gids: Any, lo: int, hi: int) -> None:
    _need(0 <= lo <= hi <= kernels._array_of("gids", gids, _I32), "lo, hi beyond gids")


# The kernels' own argument checks and dtypes: one way to refuse a bad argument.
_need = kernels._need
_check_int_arrays = kernels._check_int_arrays
_I32, _I64 = kernels._I32, kernels._I64
#: One past the largest C ssize_t / int64: ints from here on would reach C's argument
#: parsing and raise OverflowError there instead of the documented ValueError.
_SSIZE = 1 << 63
_U16 = np.dtype(np.uint16)


class BitPlanes:
    """A retrieve's matched-word count per group number, bit-sliced (``_cwordoverlap.c``):
    ``planes`` (uint64) holds for each 64 groups ``np_`` words, word ``j`` bit ``g & 63``
    being bit ``j`` of group ``g``'s count. Adding a set of groups is a ripple-carry add
    of its 64-bit words into the planes (AND/XOR per plane, about two planes per word
    on average), so a dense match set costs ``n / 64`` word operations instead of ``n``
    byte additions, and reads an eighth of the memory. The arrays are checked here,
    once; each method checks its own arguments before C.

    Args:
        planes: uint64, 1-D, contiguous, writable, at least ``words_of(n) * np_`` zeros
            (or counts so far).
        np_: Planes, 1 to :data:`MAX_PLANES`; counts must stay below ``2 ** np_``
            (``np_ = (words in the query).bit_length()``).
        n: The groups counted (numbers ``0 .. n - 1``).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """

    __slots__ = ("_c", "_n", "_np", "_planes", "_wmax", "_xbits")

    def __init__(self, planes: np.ndarray[Any, Any], np_: int, n: int) -> None:
        _need(type(np_) is int and 1 <= np_ <= MAX_PLANES, "np_ must be in [1, MAX_PLANES]")
        _need(type(n) is int and n >= 0, "n must be an int >= 0")
        have = kernels._array_of("planes", planes, _U64, writable=True)
        _need(have >= words_of(n) * np_, "planes too short for n groups")
        self._c = _module()
        self._planes, self._np, self._n = planes, np_, n
        self._xbits: np.ndarray[Any, Any] | None = None
        self._wmax: np.ndarray[Any, Any] | None = None

    @property
    def planes(self) -> np.ndarray[Any, Any]:
        """The planes array."""
        return self._planes

    def set_scratch(self, xbits: np.ndarray[Any, Any]) -> None:
        """Give the marks of :meth:`add_sparse`: ``xbits``, uint64, ``words_of(n)``
        zeros (:meth:`unmark` leaves them zero again). O(1)."""
        _bitset("xbits", xbits, self._n, writable=True)
        self._xbits = xbits

    def add_sparse(self, gids: np.ndarray[Any, Any], lo: int, hi: int, m: int) -> None:
        """Add ``m`` to the count of each group number ``g < n`` of ``gids[lo:hi]``
        (int32) not added since the last :meth:`unmark` of it (repeats count once, also
        across calls: one set over several calls). O(hi - lo), about two plane words
        each.

        Raises:
            ValueError: No scratch given, or a bad range or ``m``.
        """
        _need(self._xbits is not None, "set_scratch first")
        _gids(gids, lo, hi)
        _need(type(m) is int and 0 <= m < 1 << 63, "m must be an int >= 0")
        self._c.bits_add_sparse(self._planes, self._np, self._xbits, gids, lo, hi, self._n, m)

    def unmark(self, gids: np.ndarray[Any, Any], lo: int, hi: int) -> None:
        """Clear :meth:`add_sparse`'s marks of ``gids[lo:hi]`` once its whole set is
        added (zeroes their words of the scratch). O(hi - lo).

        Raises:
            ValueError: No scratch given, or a bad range.
        """
        _need(self._xbits is not None, "set_scratch first")
        _gids(gids, lo, hi)
        self._c.bits_unmark(self._xbits, gids, lo, hi, self._n)

    def set_word_maxima(self, wmax: np.ndarray[Any, Any]) -> None:
        """Give room for the largest count of each 64-group word: ``wmax``, uint16, at
        least ``words_of(n)`` elements (garbage until written by :meth:`word_maxima` or
        a last :meth:`add_dense`; :meth:`select` and :meth:`maxima_of_words` read it).
        O(1).

        Raises:
            ValueError: A bad array.
        """
        have = kernels._array_of("wmax", wmax, _U16, writable=True)
        _need(have >= words_of(self._n), "wmax too short")
        self._wmax = wmax

    def add_dense(
        self, sets: list[np.ndarray[Any, Any]], mults: list[int], last: bool = False
    ) -> DenseBits:
        """An adder of the bitsets ``sets`` (uint64, over at least ``n`` groups), each
        its multiplicity of ``mults`` times, a range of words at a time. With ``last``
        (no count changes after it; :meth:`set_word_maxima` first) each range's word
        maxima are written in the same pass. O(sets).

        Raises:
            ValueError: ``last`` without :meth:`set_word_maxima`.
        """
        _need(not last or self._wmax is not None, "set_word_maxima first")
        return DenseBits(self, sets, mults, last)

    def word_maxima(self, wlo: int, whi: int) -> None:
        """Write the largest count of the words ``wlo:whi`` (64 groups each, those below
        ``n``) to the word maxima (:meth:`set_word_maxima`). O((whi - wlo) * np_).

        Raises:
            ValueError: No word maxima given, or a bad range.
        """
        _need(self._wmax is not None, "set_word_maxima first")
        _need(type(wlo) is int and type(whi) is int, "wlo and whi must be ints")
        _need(0 <= wlo <= whi <= words_of(self._n), "wlo, whi out of range")
        self._c.bits_word_maxima(self._planes, self._np, self._n, wlo, whi, self._wmax)

    def maxima_of_words(self, chunk: int, c: int) -> int:
        """:meth:`maxima` of chunk ``c`` alone, from the word maxima (written for every
        word of the chunk by then). O(chunk / 64).

        Raises:
            ValueError: No word maxima, ``chunk`` not a positive multiple of 64, or
                ``c`` beyond the chunks.
        """
        wmax = self._wmax
        _need(wmax is not None, "set_word_maxima first")
        assert wmax is not None
        _need(type(chunk) is int and chunk > 0 and chunk % 64 == 0, "chunk: a multiple of 64")
        _need(type(c) is int and 0 <= c < -(-self._n // chunk), "c beyond the chunks")
        per = chunk // 64
        part = wmax[c * per : min((c + 1) * per, words_of(self._n))]
        return int(part.max())

    def maxima_of_chunks(self, chunk: int) -> list[int]:
        """:meth:`maxima_of_words` of every chunk in one call: the largest count of each
        chunk of ``chunk`` groups (a multiple of 64) below ``n``, from the word maxima
        (written for every word by then). O(n / 64).

        Raises:
            ValueError: No word maxima, or ``chunk`` not a positive multiple of 64.
        """
        wmax = self._wmax
        _need(wmax is not None, "set_word_maxima first")
        _need(
            type(chunk) is int and 0 < chunk < _SSIZE and chunk % 64 == 0,
            "chunk: a multiple of 64",
        )
        got: list[int] = self._c.wmax_chunks(wmax, words_of(self._n), chunk // 64)
        return got

    def count_words_args(self) -> tuple[np.ndarray[Any, Any], int]:
        """(planes, np_) for :func:`count_words`'s ``counts`` and ``planes``."""
        return self._planes, self._np

    def maxima(self, chunk: int, c0: int, c1: int, out: np.ndarray[Any, Any]) -> None:
        """``out[i]`` (int64) = the largest count of the groups below ``n`` in chunk ``i``
        (groups ``i * chunk`` to ``(i + 1) * chunk - 1``), for ``c0 <= i < c1``.
        O((c1 - c0) * chunk / 64 * np_).

        Raises:
            ValueError: ``chunk`` not a positive multiple of 64, or chunks beyond ``n``.
        """
        _need(type(chunk) is int and chunk > 0 and chunk % 64 == 0, "chunk: a multiple of 64")
        chunks = -(-self._n // chunk)
        _need(0 <= c0 <= c1 <= chunks, "c0, c1 beyond the chunks")
        _need(kernels._array_of("out", out, _I64, writable=True) >= c1, "out too short")
        self._c.bits_maxima(self._planes, self._np, self._n, chunk, c0, c1, out)

    def select(self, c: int, glo: int, ghi: int, out: np.ndarray[Any, Any]) -> int:
        """Write the group numbers ``g`` in ``glo:ghi`` (and below ``n``) whose count is
        ``c`` to ``out`` (int64), ascending; how many. O((ghi - glo) / 64 * np_); with
        word maxima (:meth:`set_word_maxima`, written by then for the words read) the
        words whose largest count is below ``c`` are skipped unread: O((ghi - glo) / 64
        + words read * np_).

        Raises:
            ValueError: A bad range, or ``out`` shorter than ``ghi - glo``.
        """
        _need(type(c) is int and 0 <= c < 1 << 63, "c must be an int >= 0")
        _need(0 <= glo <= ghi, "glo, ghi out of range")
        room = kernels._array_of("out", out, _I64, writable=True)
        _need(room >= min(ghi, self._n) - min(glo, self._n), "out too short")
        got: int = self._c.bits_select(
            self._planes, self._np, c, glo, ghi, self._n, out, self._wmax
        )
        return got

    def select_chunks(
        self, c: int, starts: list[int], chunk: int, out: np.ndarray[Any, Any]
    ) -> tuple[int, int]:
        """:meth:`select` of the chunks of ``chunk`` groups (a positive multiple of 64)
        from each of ``starts`` (multiples of ``chunk``) in turn, into ``out`` (int64)
        one after the other while a chunk's groups fit, read through the word maxima
        (:meth:`set_word_maxima`, written for every word by then): ``(groups written,
        chunks done)``; a chunk that does not fit is left whole for the next call (the
        first always fits when ``out`` holds ``chunk``). O(chunks * chunk / 64 + words
        read * np_).

        Raises:
            ValueError: No word maxima, a bad ``chunk`` or start, or ``out`` shorter
                than ``chunk``.
        """
        _need(self._wmax is not None, "set_word_maxima first")
        _need(type(c) is int and 0 <= c < 1 << 63, "c must be an int >= 0")
        _need(
            type(chunk) is int and 0 < chunk < _SSIZE and chunk % 64 == 0,
            "chunk: a multiple of 64",
        )
        _need(type(starts) is list, "starts must be a list")
        # Beyond a C ssize_t, C's argument parsing would raise OverflowError.
        _need(not starts or max(starts) < _SSIZE, "a start beyond the groups' range")
        _need(kernels._array_of("out", out, _I64, writable=True) >= chunk, "out too short")
        _need(out.flags.aligned, "out must be aligned")
        got: tuple[int, int] = self._c.bits_select_chunks(
            self._planes, self._np, c, starts, chunk, self._n, out, self._wmax
        )
        return got

    def count(self, g: int) -> int:
        """The count of group ``g``. O(np_).

        Raises:
            IndexError: ``g`` not below ``n`` (as the byte counts' ``counts[:n][g]``).
        """
        if not 0 <= g < self._n:
            raise IndexError("group number beyond the counted groups")
        got: int = self._c.bits_count(self._planes, self._np, g)
        return got


class DenseBits:
    """Adds packed match sets into :class:`BitPlanes`, a range of words at a time (the
    sets are checked once, here; :meth:`add` checks its range)."""

    __slots__ = ("_last", "_mults", "_planes", "_sets")

    def __init__(
        self,
        planes: BitPlanes,
        sets: list[np.ndarray[Any, Any]],
        mults: list[int],
        last: bool = False,
    ) -> None:
        if type(sets) is not list or type(mults) is not list:
            raise TypeError("sets and mults must be lists")
        _need(len(sets) == len(mults), "one multiplicity per set")
        for s in sets:
            _bitset("set", s, planes._n)
        for m in mults:
            _need(type(m) is int and 0 <= m < 1 << 63, "multiplicities must be ints >= 0")
        self._planes, self._sets, self._mults = planes, list(sets), list(mults)
        self._last = bool(last)

    def add(self, wlo: int, whi: int) -> None:
        """Add the sets' words ``wlo:whi``: with ``knobs._DENSE_CSA`` the sets of
        multiplicity 1 seven at a time through carry-save adders (about 3 word
        operations per set and word, plus ``5 np_`` per seven), else each through every
        plane (``3 np_``); the same counts. A last adder writes the words' maxima too.
        O((whi - wlo) * sets * np_) at worst.

        Raises:
            ValueError: Not ``0 <= wlo <= whi <= words_of(n)``.
        """
        p = self._planes
        _need(0 <= wlo <= whi <= words_of(p._n), "wlo, whi out of range")
        p._c.bits_add_dense(
            p._planes,
            p._np,
            wlo,
            whi,
            self._sets,
            self._mults,
            bool(knobs._DENSE_CSA),
            p._wmax if self._last else None,
            p._n,
            bool(knobs._CSA_REGS),
        )


def bits_set(
    bits: np.ndarray[Any, Any],
    gids: np.ndarray[Any, Any],
    n: int,
    lo: int = 0,
    hi: int | None = None,
) -> None:
    """Set the bits of the group numbers ``g < n`` of ``gids[lo:hi]`` (int32; ``hi``
    None: to the end) in ``bits`` (uint64, over at least ``n`` groups). O(hi - lo).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """
    _need(type(n) is int and n >= 0, "n must be an int >= 0")
    _bitset("bits", bits, n, writable=True)
    if hi is None:
        hi = kernels._array_of("gids", gids, _I32)
    _need(type(lo) is int and type(hi) is int, "lo and hi must be ints")
    _gids(gids, lo, hi)
    _module().bits_set(bits, gids, lo, hi, n)


def bits_join(lists: list[array[int]], n: int, bits: np.ndarray[Any, Any]) -> None:
    """Set the bits of the group numbers ``g < n`` of the posting ``lists``
    (``array('i')``) in ``bits`` (uint64, over at least ``n`` groups); the next lists
    prefetched ``knobs._PREFETCH`` ahead. O(postings).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """
    if type(lists) is not list:
        raise TypeError("lists must be a list")
    _check_int_arrays(lists)
    _need(type(n) is int and n >= 0, "n must be an int >= 0")
    _bitset("bits", bits, n, writable=True)
    _module().bits_join(lists, n, bits, _prefetch())


def lists_of_ids(
    ids: list[int],
    start: int,
    stop: int,
    byid: list[array[int] | None],
    items: dict[int, str],
    post: dict[str, array[int]],
    lists: list[array[int]],
    lens: list[int],
) -> int:
    """The posting lists of the tokens ``ids[start:stop]`` (vocabulary ids; ``stop``
    clamped to ``len(ids)``) appended to ``lists`` and their lengths to ``lens``, in
    order; returns the sum of those lengths. A token's list is ``byid[id]`` (the owner's
    :attr:`~.numbering._Numbering.byid`) where that slot exists and is not None, else
    ``post[items[id]]``; ids without one, and empty lists, are skipped: the same lists
    as ``filter(None, map(post.get, filter(None, map(items.get, ids[start:stop]))))``
    when every slot agrees with the dicts. O(stop - start).

    Raises:
        TypeError, ValueError: An argument of the wrong type, an item that is not a
            ``str``, a list that is not an ``array``, or ``lists``/``lens`` that are
            ``ids`` or ``byid``.
    """
    for name, value, kind in (
        ("ids", ids, list),
        ("byid", byid, list),
        ("items", items, dict),
        ("post", post, dict),
        ("lists", lists, list),
        ("lens", lens, list),
    ):
        if type(value) is not kind:
            raise TypeError(f"{name} must be a {kind.__name__}")
    _need(type(start) is int and type(stop) is int, "start, stop must be ints")
    _need(
        lists is not lens and all(x is not y for x in (lists, lens) for y in (ids, byid)),
        "lists and lens must be two other lists",
    )
    total: int = _module().lists_of_ids(
        ids, start, stop, byid, items, post, lists, lens, _prefetch()
    )
    return total


def _prefetch() -> int:
    """How far ahead the joins prefetch (``knobs._PREFETCH``, 0 to 16). O(1)."""
    ahead = knobs._PREFETCH
    return min(16, ahead) if type(ahead) is int and ahead > 0 else 0


def bits_join_slice(
    lst: array[int], start: int, stop: int, n: int, bits: np.ndarray[Any, Any]
) -> None:
    """:func:`bits_join` of ``lst[start:stop]`` (``array('i')``) alone, read in place
    (no copy). O(stop - start).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """
    _check_int_arrays([lst])
    _need(type(start) is int and type(stop) is int, "start, stop must be ints")
    _need(0 <= start <= stop <= len(lst), "start, stop beyond the list")
    _need(type(n) is int and n >= 0, "n must be an int >= 0")
    _bitset("bits", bits, n, writable=True)
    _module().bits_join_slice(lst, start, stop, n, bits)


def bits_from_masks(
    masks_: np.ndarray[Any, Any], bit: int, lo: int, hi: int, bits: np.ndarray[Any, Any]
) -> int:
    """Set bit ``g`` of ``bits`` for each ``g`` in ``lo:hi`` whose short-word mask
    ``masks_[g]`` (uint64) has bit ``bit`` (0-63); how many. O(hi - lo).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """
    _need(type(bit) is int and 0 <= bit < 64, "bit must be in [0, 64)")
    _need(0 <= lo <= hi <= kernels._array_of("masks", masks_, _U64), "lo, hi beyond masks")
    _bitset("bits", bits, hi, writable=True)
    got: int = _module().bits_from_masks(masks_, bit, lo, hi, bits)
    return got


def bits_rows_from_masks(
    masks_: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]],
    rows: np.ndarray[Any, Any],
    stride: int,
    counts: np.ndarray[Any, Any],
    lo: int,
    hi: int,
    nogil: bool = False,
) -> None:
    """The short-word masks (``masks_``: the low and high 64 bits, uint64) of the groups
    ``lo:hi`` as rows of bits: for each short word ``b`` (0-127) a group's mask holds,
    set bit ``g`` of row ``b`` (``rows[b * stride:(b + 1) * stride]``, uint64) and add
    one to ``counts[b]`` (int64). O(hi - lo + bits set). ``nogil``: the loop runs
    without the GIL, for arrays no other thread touches meanwhile (a numbering being
    made beside the open: ``persist.Prepared``).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size.
    """
    _need(type(masks_) is tuple and len(masks_) == 2, "masks must be a pair of arrays")
    size = min(kernels._array_of("masks", m, _U64) for m in masks_)
    _need(type(lo) is int and type(hi) is int and 0 <= lo <= hi <= size, "lo, hi beyond masks")
    _need(type(stride) is int and stride >= words_of(hi), "stride below the groups")
    _need(kernels._array_of("rows", rows, _U64, True) >= 128 * stride, "rows too short")
    _need(kernels._array_of("counts", counts, _I64, True) >= 128, "counts too short")
    if nogil:
        _module().bits_rows_from_masks(masks_[0], masks_[1], rows, stride, counts, lo, hi, True)
    else:
        _module().bits_rows_from_masks(masks_[0], masks_[1], rows, stride, counts, lo, hi)


def bits_to_gids(bits: np.ndarray[Any, Any], n: int) -> np.ndarray[Any, Any]:
    """The group numbers ``g < n`` whose bit is set in ``bits`` (uint64), ascending
    (numpy; for checks and tests). O(n)."""
    flags = np.unpackbits(bits.view(np.uint8), bitorder="little")[:n]
    return np.flatnonzero(flags)


def visit_heap(
    idx: np.ndarray[Any, Any],
    maxrel: np.ndarray[Any, Any],
    minseq: np.ndarray[Any, Any],
    part: float,
    parts: np.ndarray[Any, Any] | None,
    kth: tuple[float, int] | None,
    heap: np.ndarray[Any, Any],
    order: bool = True,
) -> int:
    """The groups ``idx`` (int64) to visit, as a binary heap in ``heap`` (int64, at least
    ``4 * len(idx)``) ordered by bound, highest first, then smallest seq: group ``g``'s
    bound ``((0.5 * maxrel[g] + p) + 0.0) + 0.1`` (``maxrel`` float64; ``p`` is
    ``parts[i]`` (float64, one per group of ``idx``), or ``part`` when ``parts`` is
    None: the same floats as numpy's), its seq ``minseq[g]`` (int64). With ``kth``
    (``(bound, seq)`` of the heap's worst) only the groups whose bound is above it, or
    equal with a smaller seq. Returns how many are in the heap; take them in order with
    :func:`visit_pop`. With ``order`` False the groups are left in ``idx``'s order,
    not a heap: take the first ones with :func:`visit_select`, then :func:`visit_order`
    before :func:`visit_pop`. O(len(idx)).

    Raises:
        TypeError, ValueError: An argument of the wrong type or size, or a group number
            beyond ``maxrel`` or ``minseq``.
    """
    count = kernels._array_of("idx", idx, _I64)
    kernels._array_of("maxrel", maxrel, kernels._F64)
    kernels._array_of("minseq", minseq, _I64)
    if parts is not None:
        _need(kernels._array_of("parts", parts, kernels._F64) == count, "parts: one per group")
    _need(kernels._array_of("heap", heap, _I64, writable=True) >= 4 * count, "heap too short")
    _need(heap.flags.aligned, "heap must be aligned")  # C reads it as structs of doubles
    _need(type(part) is float, "part must be a float")
    if kth is None:
        has_kth, bound, seq = False, 0.0, 0
    else:
        bound, seq = kth
        has_kth = True
        _need(
            type(kth) is tuple
            and type(bound) is float
            and type(seq) is int
            and -_SSIZE <= seq < _SSIZE,
            "kth: (float, int) with an int64 seq",
        )
    _need(type(order) is bool, "order must be a bool")
    got: int = _module().visit_heap(
        idx, maxrel, minseq, part, parts, has_kth, bound, seq, heap, order
    )
    return got


def flat_first(
    counts: np.ndarray[Any, Any],
    n: int,
    least: int,
    n_words: int,
    maxrel: np.ndarray[Any, Any],
    minseq: np.ndarray[Any, Any],
    kth: tuple[float, int] | None,
    k: int,
    after: tuple[float, int, int] | None = None,
    cut: bool | None = None,
) -> tuple[list[Any], int]:
    """The first ``min(k, m)`` of the ``m`` groups ``g < n`` whose matched count
    (``counts``: uint8 or uint16, at least ``n``) is at least ``least``, in visit order,
    straight from the counts (no index array, parts array or buffer of all ``m``):
    highest bound first, then smallest seq (``minseq``, int64), then smallest ``g``. A
    group's score part is ``0.4 * (count / n_words)`` and its bound ``((0.5 * maxrel[g]
    + part) + 0.0) + 0.1`` (``maxrel`` float64): the floats numpy gives for the same
    expressions. With ``kth`` (``(bound, seq)`` of the heap's worst) only the groups
    whose bound is above it, or equal with a smaller seq (as :func:`visit_heap`); with
    ``after`` (``(bound, seq, g)`` of the last group read) only the groups after it in
    that order, so the next batch is read by calling again. Returns
    :func:`visit_pop`'s ``(g, bound, seq, part)`` tuples and ``m`` less those.
    ``cut`` (a bool; None: ``knobs._FLAT_CUT``): without ``kth`` and ``after``, once ``k``
    groups are kept, the groups of a count too low to beat the worst kept (whatever
    their ``maxrel``) are passed over by their count alone: the same result.
    O(n + m log k).

    Raises:
        TypeError, ValueError: An argument of the wrong type, size or range.
    """
    _need(type(counts) is _NDARRAY and counts.dtype in _COUNTS[:2], "counts: uint8 or uint16")
    size = kernels._array_of("counts", counts, counts.dtype)
    _need(type(n) is int and 0 <= n <= size, "n beyond counts")
    _need(kernels._array_of("maxrel", maxrel, kernels._F64) >= n, "maxrel shorter than n")
    _need(kernels._array_of("minseq", minseq, _I64) >= n, "minseq shorter than n")
    _need(type(least) is int and 1 <= least < _SSIZE, "least: an int >= 1")
    _need(type(n_words) is int and 1 <= n_words <= 0xFFFF, "n_words: an int in 1-65535")
    _need(type(k) is int and 0 <= k < _SSIZE, "k: an int >= 0")
    if kth is None:
        has_kth, bound, seq = False, 0.0, 0
    else:
        _need(type(kth) is tuple and len(kth) == 2, "kth: (float, int)")
        bound, seq = kth
        has_kth = True
        _need(
            type(bound) is float and type(seq) is int and -_SSIZE <= seq < _SSIZE,
            "kth: (float, int) with an int64 seq",
        )
    if after is None:
        has_after, a_bound, a_seq, a_g = False, 0.0, 0, 0
    else:
        _need(type(after) is tuple and len(after) == 3, "after: (float, int, int)")
        a_bound, a_seq, a_g = after
        has_after = True
        _need(
            type(a_bound) is float
            and type(a_seq) is int
            and type(a_g) is int
            and -_SSIZE <= a_seq < _SSIZE
            and -_SSIZE <= a_g < _SSIZE,
            "after: (float, int, int) with int64 ints",
        )
    _need(cut is None or type(cut) is bool, "cut: a bool or None")
    got: tuple[list[Any], int] = _module().flat_first(
        counts, n, least, n_words, maxrel, minseq, has_kth, bound, seq, k,
        has_after, a_bound, a_seq, a_g, knobs._FLAT_CUT if cut is None else cut,
    )  # fmt: skip
    return got


def _heap_holds(heap: np.ndarray[Any, Any], m: int) -> None:
    """Refuse a ``heap`` that is not a writable, aligned int64 array of at least ``4 * m``
    items (the groups :func:`visit_heap` left in it). O(1)."""
    _need(kernels._array_of("heap", heap, _I64, writable=True) >= 4 * m, "m beyond the heap")
    _need(heap.flags.aligned, "heap must be aligned")


def visit_pop(heap: np.ndarray[Any, Any], m: int, k: int) -> tuple[list[Any], int]:
    """The first ``min(k, m)`` groups of the heap of ``m`` from :func:`visit_heap`, in
    order, taken out of it: ``(g, bound, seq, part)`` tuples; and how many are left.
    O(k log m).

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``m`` beyond the heap.
    """
    _need(type(m) is int and type(k) is int and m >= 0 and 0 <= k < _SSIZE, "m, k: ints >= 0")
    _heap_holds(heap, m)
    got: tuple[list[Any], int] = _module().visit_pop(heap, m, k)
    return got


def visit_select(heap: np.ndarray[Any, Any], m: int, k: int) -> tuple[list[Any], int]:
    """:func:`visit_pop`'s answer from the ``m`` groups :func:`visit_heap` left in no
    order (``order=False``): the first ``min(k, m)`` in order (highest bound, then
    smallest seq; groups of the same bound and seq in some order), taken out of it,
    and how many are left, in no order (:func:`visit_order` makes them a heap).
    O(m + k log k): no heap of all ``m`` when only the first few are read.

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``m`` beyond the heap.
    """
    _need(type(m) is int and type(k) is int and m >= 0 and 0 <= k < _SSIZE, "m, k: ints >= 0")
    _heap_holds(heap, m)
    got: tuple[list[Any], int] = _module().visit_select(heap, m, k)
    return got


def visit_order(heap: np.ndarray[Any, Any], m: int) -> None:
    """Make the ``m`` groups of ``heap`` left in no order (by :func:`visit_heap` with
    ``order=False`` or by :func:`visit_select`) the heap :func:`visit_pop` reads. O(m).

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``m`` beyond the heap.
    """
    _need(type(m) is int and 0 <= m < _SSIZE, "m: an int >= 0")
    _heap_holds(heap, m)
    _module().visit_order(heap, m)
