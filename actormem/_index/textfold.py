"""The duplicate key's text: case folded, runs of whitespace as one space.

:func:`fold` is ``" ".join(text.casefold().split())``. An ASCII text (most texts agents
store) is folded in one pass by the word-overlap core's ``fold_ascii``
(``_cwordoverlap.c``), which returns the text itself when it is already folded; any
other text, or every text where the core is not built (``ACTORMEM_PURE_PYTHON=1``), by
:func:`fold_python`, the reference (``tests/test_storepath.py`` and
``tests/test_state.py`` drive both).

:func:`fold_hash` is a hash of the fold, equal for equal folds, computed in C without
building the fold (``fold_hash`` in the same core; :func:`fold_hash_python` the
reference, ``tests/test_fold_hash.py``): what the state's duplicate key uses.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import kernels

__all__ = ["fold", "fold_hash", "fold_hash_python", "fold_python"]


def fold_python(text: str) -> str:
    """``" ".join(text.casefold().split())``, with a fast path: a printable text (so its
    only whitespace is U+0020: every other character ``str.split`` splits on is
    unprintable) with no double space and no space at either end is already so.
    O(len(text))."""
    t = text.casefold()
    if t.isprintable() and "  " not in t and t[:1] != " " and t[-1:] != " ":
        return t
    return " ".join(t.split())


_fold_ascii: Callable[[str], str | None] | None = getattr(kernels._wo, "fold_ascii", None)


def fold(text: str) -> str:
    """:func:`fold_python` of ``text``, in C for an ASCII text that is exactly a
    ``str`` (a subclass, or any other text, takes the Python path). O(len(text))."""
    if _fold_ascii is not None and type(text) is str:
        folded = _fold_ascii(text)
        if folded is not None:
            return folded
    return fold_python(text)


#: The C ``fold_hash`` (``_cwordoverlap.c``), or None without the core.
_fold_hash_c: Callable[[str], int] | None = getattr(kernels._wo, "fold_hash", None)
#: Whether a new ``MemoryState`` keys its duplicate groups by :func:`fold_hash` (when
#: the C function exists) rather than by the hash of the :func:`fold` string, the path
#: before it (``stress/bench_store64.py --state`` compares both). Read once per state.
_FOLD_HASH = True
#: The C ``fold_hash_direct``: ``fold_hash``'s value, a text that is not ASCII folded
#: code point by code point instead of through ``str.casefold()`` (13% of the real
#: texts, ~40k instructions a 600-character text). Read at each call. False (or a core
#: without it): ``fold_hash``, the path before it (``stress/bench_store64.py
#: --old-knobs`` compares both).
_FOLD_DIRECT = True
_fold_hash_direct: Callable[[str], int] | None = getattr(kernels._wo, "fold_hash_direct", None)
#: With :data:`_FOLD_DIRECT`, the C ``fold_hash_table``: ``fold_hash_direct``'s value, an
#: ASCII text's whitespace and case read from one 256-byte table (a load a byte instead
#: of the range tests). False: ``fold_hash_direct``, the path before it. Read at each call;
#: the same values, so it may be flipped under a live memory.
_FOLD_TABLE = True
_fold_hash_table: Callable[[str], int] | None = getattr(kernels._wo, "fold_hash_table", None)
#: The C ``dup_key(namespace, category, text, key, value)``: the state's duplicate key
#: (``state._dup_key`` of the text's :func:`fold_hash`) in one call; None without the core.
_dup_key_c: Callable[[Any, Any, str, Any, Any], int] | None = getattr(kernels._wo, "dup_key", None)
#: The C ``dup_key_folded(namespace, category, text, key, value, fold)``: ``dup_key``'s
#: value with the text's fold hash given (``fold`` in ``[0, 2**62)``; any other int: computed
#: from the text); None without the core.
_dup_key_folded_c: Callable[[Any, Any, str, Any, Any, int], int] | None = getattr(
    kernels._wo, "dup_key_folded", None
)


def fold_hash_c() -> Callable[[str], int] | None:
    """The C fold hash :data:`_FOLD_DIRECT` and :data:`_FOLD_TABLE` choose, or None
    without the core. O(1)."""
    if _FOLD_DIRECT and _fold_hash_direct is not None:
        if _FOLD_TABLE and _fold_hash_table is not None:
            return _fold_hash_table
        return _fold_hash_direct
    return _fold_hash_c


_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_U64 = (1 << 64) - 1


def fold_hash_python(text: str) -> int:
    """The reference of :func:`fold_hash`: FNV-1a (64 bits) over the code points of
    :func:`fold_python` of ``text``, then ``h ^ (h >> 31)`` cut to 62 bits.
    O(len(text)) Python steps."""
    h = _FNV_OFFSET
    for ch in fold_python(text):
        h = ((h ^ ord(ch)) * _FNV_PRIME) & _U64
    h ^= h >> 31
    return h & ((1 << 62) - 1)


def fold_hash(text: str) -> int:
    """A hash in [0, 2**62) of :func:`fold` of ``text``, equal for texts whose folds are
    equal (the duplicate key's group; consolidation compares the folds themselves), in C
    without building the fold for a ``str`` (:func:`fold_hash_python` otherwise, the same
    value). O(len(text))."""
    fn = fold_hash_c()
    if fn is not None and type(text) is str:
        return fn(text)
    return fold_hash_python(text)
