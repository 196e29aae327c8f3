"""The word-overlap index's compiled core (``_cwordoverlap.c``), checked.

Two calls replace Python loops of the index with the same operations on the same
structures (the posting dict of ``array('i')``, the substring vocabulary's dicts), so the
index's state after an ``add`` and the counts of a retrieve are exactly those of the
Python path, which stays the reference (``tests/test_wordoverlap_core.py`` drives both):

* :func:`add_text`: the owner's add of a new distinct text (token set, posting appends,
  the vocabulary's acquire of new tokens);
* :func:`count_words`: a reader's word loop for the words with small match sets, a work
  budget per call (the reader yields between calls);
* :func:`text_masks`: the short-word masks of a batch of texts (``masks._text_masks``).

:func:`core` is None when the extension is missing, ``ACTORMEM_WO_CORE=0`` or
``ACTORMEM_PURE_PYTHON=1`` is set, or ``kernels.WO_CORE`` is False; the index then runs
its Python path. Arguments are checked here (types, ranges) before they reach C; the C
code checks again what memory safety needs.
"""

from __future__ import annotations

from array import array
from types import ModuleType
from typing import Any

import numpy as np

from .. import kernels, substring
from ..substring import SubstringVocab
from . import masks

__all__ = ["add_text", "core", "count_words", "text_masks"]

_COUNTS = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.int64))


def core() -> ModuleType | None:
    """The compiled core while it is on, else None (run the Python path). O(1)."""
    return kernels.wo_core()


def _module() -> ModuleType:
    mod = core()
    if mod is None:
        raise RuntimeError("the compiled word-overlap core is not available")
    return mod


def add_text(post: dict[str, array[int]], low: str, gid: int, vocab: SubstringVocab) -> int:
    """Index the lower-cased text ``low`` as the new group number ``gid``: each distinct
    token of ``low.split()`` gets ``gid`` appended to its posting list, a new token is
    acquired by ``vocab`` and gets ``array('i', [gid])``. Returns the new tokens' count.
    O(tokens), plus O(len(token)) per new token.

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``gid`` beyond int32.
    """
    if type(post) is not dict or type(low) is not str or type(vocab) is not SubstringVocab:
        raise TypeError("post must be a dict, low a str, vocab a SubstringVocab")
    if type(gid) is not int or not 0 <= gid < 1 << 31:
        raise ValueError("gid must be an int in [0, 2**31)")
    fresh: int = _module().add_text(post, low, gid, vocab)
    return fresh


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

    Raises:
        TypeError, ValueError: An argument of the wrong type or range.
    """
    if type(words) is not list or type(mults) is not list or len(words) != len(mults):
        raise TypeError("words and mults must be lists of the same length")
    if type(post) is not dict or type(skip) is not dict or type(short) is not dict:
        raise TypeError("post, skip and short must be dicts")
    if type(vocab) is not SubstringVocab:
        raise TypeError("vocab must be a SubstringVocab")
    if not all(type(w) is str for w in words) or not all(type(m) is int for m in mults):
        raise TypeError("words must be str and mults int")
    if mults and not 0 <= min(mults) <= max(mults) < 1 << 31:
        raise ValueError("multiplicities must be in [0, 2**31)")
    if type(counts) is not np.ndarray or counts.dtype not in _COUNTS:
        raise TypeError("counts must be a numpy array of uint8, uint16 or int64")
    if counts.ndim != 1 or not counts.flags.c_contiguous or not counts.flags.writeable:
        raise ValueError("counts must be 1-D, contiguous and writable")
    if not (0 <= start <= len(words) and budget >= 0 and limit >= 0 and 0 <= n <= len(counts)):
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
    )
    return got


_U64 = np.dtype(np.uint64)


def text_masks(
    texts: list[str], out: tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]], start: int
) -> None:
    """:func:`~.masks._text_masks` of ``texts`` (lower-cased) written to ``out[0]`` and
    ``out[1]`` (the low and high 64 bits) from ``start`` on. O(total length).

    Raises:
        TypeError, ValueError: An argument of the wrong type, or ``out`` too short.
    """
    if type(texts) is not list or not all(type(t) is str for t in texts):
        raise TypeError("texts must be a list of str")
    for arr in out:
        if type(arr) is not np.ndarray or arr.dtype != _U64 or arr.ndim != 1:
            raise TypeError("masks must be 1-D numpy arrays of uint64")
        if not arr.flags.c_contiguous or not arr.flags.writeable:
            raise ValueError("masks must be contiguous and writable")
        if not 0 <= start <= len(arr) - len(texts):
            raise ValueError("start beyond the masks")
    _module().text_masks(texts, masks._PAIR_LO, masks._PAIR_HI, out[0], out[1], start)
