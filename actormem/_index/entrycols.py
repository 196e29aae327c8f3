"""Stored entries as fixed-width slots and UTF-8 text blocks, a ``MemoryEntry`` built on
read: the store of issue #20 item 6's step A (docs/benchmarks.md, "Bytes per entry, part
8" and the `cols28` and `wire29` sections after it).

The store is the compiled ``EntryColumns`` type (``_entrycols.h``, part of the word-overlap
core's module), or :class:`PyEntryColumns` (the entries themselves in a list) without
the core or with :data:`_COLS_C` False. Each ``MemoryState`` keeps one; a record holds a
slot number into it (``Record.slot``) and the store itself (``Record.cols``). Slot
numbers are ints from 0; a released slot's number is handed out again.

``new_entry_columns()`` gives an empty store for :class:`~actormem.MemoryEntry` values. Its
methods (each O(1) but for the text's length):

* ``put(entry) -> slot``: an exact ``MemoryEntry``; TypeError/ValueError otherwise, the
  store unchanged.
* ``entry(slot[, count, last[, expires]])``: a new entry equal to the stored one, the
  access bookkeeping replaced as :func:`~actormem._entry.with_access` replaces it.
* ``get(slot, name)``: one field, as ``getattr(entry(slot), name)``.
* ``text(slot)``, ``text_equals(slot, text)``, ``ident(slot)``, ``relevance(slot)``.
* ``release(slot)``: the owner's, once no reader can read the slot; the text blocks are
  compacted when over a quarter of their bytes are dead.
* ``stats()``, ``_check()``, ``len()``.

A slot that is not live raises IndexError, one that is not an int TypeError.
"""

from __future__ import annotations

from typing import Any

from .._entry import _ENTRY_FIELDS, MemoryCategory, MemoryEntry
from .._record import PyEntryColumns, set_loose_store
from . import kernels

__all__ = ["PyEntryColumns", "compiled_columns", "new_entry_columns"]

#: ``new_entry_columns`` makes the compiled ``EntryColumns`` when the core has it. False:
#: :class:`PyEntryColumns` (the entries kept as objects: the layout before step A).
_COLS_C = True


def compiled_columns() -> bool:
    """Whether the states' stores are the compiled ``EntryColumns`` (:data:`_COLS_C` and
    the core loaded): then the C ``IdTable`` and ``GroupTable`` read records' ids and
    texts from them. O(1)."""
    return _COLS_C and kernels._wo is not None


def new_entry_columns(compiled: bool | None = None) -> Any:
    """An empty store for ``MemoryEntry`` values (categories coded in
    :class:`~actormem.MemoryCategory`'s order): the compiled ``EntryColumns`` when the
    word-overlap core is loaded and ``compiled`` (default :data:`_COLS_C`) is true, else
    a :class:`PyEntryColumns`. O(1)."""
    core = kernels._wo
    if (_COLS_C if compiled is None else compiled) and core is not None:
        return core.EntryColumns(MemoryEntry, _ENTRY_FIELDS, tuple(MemoryCategory))
    return PyEntryColumns()


#: Records made without a store (``Record(entry, born, seq)``: tests, tools) go in one
#: shared store, the compiled one when the core is loaded (so the C tables read them).
set_loose_store(new_entry_columns())
