"""Stored entries as fixed-width slots and UTF-8 text blocks, a ``MemoryEntry`` built on
read: the store of issue #20 item 6's step A (docs/benchmarks.md, "Bytes per entry, part
8" and the `cols28` section after it).

The store is the compiled ``EntryColumns`` type (``_entrycols.h``, part of the word-overlap
core's module). Not yet used by the engine: a record still holds its ``MemoryEntry``;
the wiring (a record keeping a slot number, every reader of ``rec.entry`` reading the
store) is the step's remaining part. Slot numbers are ints from 0; a released slot's
number is handed out again.

``new_entry_columns()`` gives an empty store for :class:`~actormem.MemoryEntry` values, or
None without the compiled core. Its methods (each O(1) but for the text's length):

* ``put(entry) -> slot``: an exact ``MemoryEntry``; TypeError/ValueError otherwise, the
  store unchanged.
* ``entry(slot[, count, last[, expires]])``: a new entry equal to the stored one, the
  access bookkeeping replaced as :func:`~actormem._entry.with_access` replaces it.
* ``text(slot)``, ``text_equals(slot, text)``, ``ident(slot)``, ``relevance(slot)``.
* ``release(slot)``: the owner's, once no reader can read the slot; the text blocks are
  compacted when over a quarter of their bytes are dead.
* ``stats()``, ``_check()``, ``len()``.

A slot that is not live raises IndexError, one that is not an int TypeError.
"""

from __future__ import annotations

from typing import Any

from .._entry import _ENTRY_FIELDS, MemoryCategory, MemoryEntry
from . import kernels

__all__ = ["new_entry_columns"]


def new_entry_columns() -> Any | None:
    """An empty ``EntryColumns`` for ``MemoryEntry`` values (categories coded in
    :class:`~actormem.MemoryCategory`'s order), or None when the compiled word-overlap
    core is not loaded. O(1)."""
    core = kernels._wo
    if core is None:
        return None
    return core.EntryColumns(MemoryEntry, _ENTRY_FIELDS, tuple(MemoryCategory))
