"""The index image of whichever index kind has one: :func:`dump_index` and
:func:`restore_index` dispatch to ``wordoverlap/persist.py`` or ``bm25/persist.py``, which
build on the container and digest of ``persist.py`` (``docs/durability.md``, "The index
image").

BM25's image module (and with it the BM25 index) is imported on the first image of an
index that is not a word-overlap one, so a word-overlap process never loads BM25.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from .._record import Record
from .persist import Early, ImageError
from .wordoverlap import persist as wo_persist

__all__ = ["ImageError", "dump_index", "prepare_index", "restore_index", "start_restore"]


def dump_index(index: object, records: list[Record]) -> dict[str, bytes] | None:
    """The image of ``index`` describing ``records`` (every live record, ascending
    ``seq``: the file's rows), or None for an index kind without an image (dense,
    hybrid, a BM25 with a custom tokenizer). The owner must not change the index
    meanwhile. O(index size), vectorised."""
    kind: Any = index  # checked by each module's handles()
    if wo_persist.handles(kind):
        parts: dict[str, bytes] = wo_persist.dump(kind, records)
        return parts
    from .bm25 import persist as bm25_persist

    if bm25_persist.handles(kind):
        parts = bm25_persist.dump(kind, records)
        return parts
    return None


def prepare_index(fresh: object, parts: Mapping[str, bytes]) -> Any:
    """The image-only part of :func:`restore_index` for the new, empty index ``fresh``
    and the image ``parts``, to run in steps ahead of the rows (an object whose
    ``step()`` runs one bounded step and tells whether steps remain, and never raises
    an ``Exception``), or None (an index kind without it, or its knob off). Hand it to
    :func:`restore_index` with the same ``parts``. O(1); its steps O(image size)."""
    if wo_persist.handles(fresh):
        return wo_persist.prepare(cast("Any", fresh), parts)
    if not type(fresh).__module__.startswith(f"{__package__}.bm25."):
        return None  # (BM25's module not loaded for another kind)
    from .bm25 import persist as bm25_persist

    return bm25_persist.prepare(cast("Any", fresh), parts)


def start_restore(fresh: object, rows: list[Any]) -> Any:
    """What :func:`restore_index` into the new, empty index ``fresh`` can start from a
    bulk load's ``(seq, entry)`` rows before their records exist (the texts' digest
    thread: word overlap's, or BM25's from rows in the store's form), or None (an index
    kind without it, its knob off, rows not plain). Hand it to :func:`restore_index` as
    ``early``, or call its ``stop()`` on a path that does not reach it. O(len(rows));
    the rest on a thread."""
    if wo_persist.handles(fresh):
        return wo_persist.start_early(fresh, rows)
    if not type(fresh).__module__.startswith(f"{__package__}.bm25."):
        return None  # (BM25's module not loaded for another kind)
    from .bm25 import persist as bm25_persist

    return bm25_persist.start_early(fresh, rows)


def restore_index(
    fresh: object,
    parts: Mapping[str, bytes],
    records: list[Record],
    prepared: Any = None,
    early: Any = None,
) -> object:
    """An index equal (same results, same invariants) to ``fresh`` after ``add`` of each
    of ``records`` (ascending ``seq``), restored from the image ``parts``; ``fresh`` is
    a new empty index of the scorer (it may be filled and returned). O(records +
    image size), mostly vectorised.

    ``prepared``: :func:`prepare_index`'s object for ``parts`` (maybe unfinished), or
    None; what it did is not done again (its index may be the one returned).
    ``early``: :func:`start_restore`'s object for the rows ``records`` were made of, or
    None; used if it fits them, ended here either way.

    Raises:
        ImageError: The image does not describe ``records`` for this index's kind and
            parameters, or is corrupt. ``fresh`` may then be partly filled: discard it.
    """
    kind: Any = fresh  # checked by each module's handles()
    if wo_persist.handles(kind):
        prep = prepared if isinstance(prepared, wo_persist.Prepared) else None
        ahead = early if isinstance(early, wo_persist.Early) else None
        return wo_persist.restore(kind, parts, records, prep, ahead)
    from .bm25 import persist as bm25_persist

    if bm25_persist.handles(kind):
        ahead = early if isinstance(early, Early) else None
        if early is not None and ahead is None:
            early.stop()
        prep_bm25 = prepared if isinstance(prepared, bm25_persist.Prepared) else None
        return bm25_persist.restore(kind, parts, records, ahead, prep_bm25)
    if early is not None:
        early.stop()
    raise ImageError(f"no image for a {type(fresh).__name__}")
