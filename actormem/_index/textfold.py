"""The duplicate key's text: case folded, runs of whitespace as one space.

:func:`fold` is ``" ".join(text.casefold().split())``. An ASCII text (most texts agents
store) is folded in one pass by the word-overlap core's ``fold_ascii``
(``_cwordoverlap.c``), which returns the text itself when it is already folded; any
other text, or every text where the core is not built (``ACTORMEM_PURE_PYTHON=1``), by
:func:`fold_python`, the reference (``tests/test_storepath.py`` and
``tests/test_state.py`` drive both).
"""

from __future__ import annotations

from collections.abc import Callable

from . import kernels

__all__ = ["fold", "fold_python"]


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
