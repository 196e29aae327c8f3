"""Record versions: the unit of multi-version concurrency control (MVCC).

Theory of operation
-------------------
Every stored entry lives in one :class:`Record`, a version of that entry. The owner task
stamps each write with a new, larger version number. A record is *visible* at version
``v`` when ``born <= v < died``: it was created at or before ``v`` and not yet removed at
``v``. A snapshot is just a version number plus references to the owner's index
structures, so taking one is O(1): the structures only ever gain records that are
invisible to it (``born > v``), and lose records only once no live snapshot can see them
(``died <= oldest live snapshot version``), which the owner's vacuum guarantees.

``seq`` is the insertion order of the entry's id: the version of the store that first
inserted it (the compiled :data:`Record` keeps ``born``, ``died``, ``seq`` and
``slot`` as int64 fields, no int object; a :class:`PyRecord` born by that store shares
one int object between ``born`` and ``seq``); an upsert keeps the seq of the id it
replaces, so ties in retrieval keep the order in which ids first arrived. Seqs increase
but have gaps.

Access bookkeeping (``access_count``, ``last_accessed``) changes often and does not
touch the text, so it is kept beside the record as a short version chain
(:class:`Access`) instead of minting a new record each time.
"""

from __future__ import annotations

import importlib
import os
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ._entry import _ENTRY_FIELDS, MemoryEntry, with_access

__all__ = [
    "JOURNAL_ACCESS",
    "JOURNAL_DELETE",
    "JOURNAL_PUT",
    "NEVER",
    "Access",
    "PyEntryColumns",
    "PyRecord",
    "Record",
    "set_loose_store",
]

#: ``died`` of a record that has not been removed.
NEVER = sys.maxsize

#: Journal record kinds: a record became live, a record died, its access bookkeeping changed.
JOURNAL_DELETE, JOURNAL_PUT, JOURNAL_ACCESS = 0, 1, 2


class PyEntryColumns:
    """The store's interface over the entries themselves (a list by slot number, a free
    list of released numbers, newest first): what the engine uses without the compiled
    core (``entrycols.new_entry_columns``). ``entry(slot)`` gives back the stored object
    (no copy); with access values a :func:`~actormem._entry.with_access` copy. A released
    slot keeps its entry until the number is handed out again (``relevance`` reads it,
    as the compiled store's does). O(1) each."""

    __slots__ = ("_entries", "_free", "_released")

    def __init__(self) -> None:
        self._entries: list[MemoryEntry] = []
        self._free: list[int] = []
        self._released: set[int] = set()

    def put(self, entry: MemoryEntry) -> int:
        if type(entry) is not MemoryEntry:
            raise TypeError(f"EntryColumns.put takes a MemoryEntry, not {type(entry).__name__}")
        if self._free:
            slot = self._free.pop()
            self._released.discard(slot)
            self._entries[slot] = entry
        else:
            slot = len(self._entries)
            self._entries.append(entry)
        return slot

    def _at(self, slot: int) -> MemoryEntry:
        if type(slot) is not int:
            raise TypeError("slot must be an int")
        if not 0 <= slot < len(self._entries) or slot in self._released:
            raise IndexError("EntryColumns: no live slot of that number")
        return self._entries[slot]

    def entry(
        self,
        slot: int,
        count: int | None = None,
        last: datetime | None = None,
        expires: datetime | None = None,
    ) -> MemoryEntry:
        e = self._at(slot)
        return e if count is None else with_access(e, count, last, expires)

    def get(self, slot: int, name: str) -> Any:
        if name not in _ENTRY_FIELDS:
            raise ValueError("get: not a field of the entry")
        return getattr(self._at(slot), name)

    def text(self, slot: int) -> str:
        return self._at(slot).memory

    def text_equals(self, slot: int, text: str) -> bool:
        return self._at(slot).memory == text

    def ident(self, slot: int) -> int:
        return self._at(slot)._id

    def relevance(self, slot: int) -> float:
        if type(slot) is not int:
            raise TypeError("slot must be an int")
        if not 0 <= slot < len(self._entries):
            raise IndexError("EntryColumns: no slot of that number")
        return self._entries[slot].relevance  # released too: its last entry's

    def release(self, slot: int) -> None:
        self._at(slot)
        self._released.add(slot)
        self._free.append(slot)

    def stats(self) -> dict[str, int]:
        return {"live": len(self), "slots": len(self._entries)}

    def _check(self) -> None:
        assert self._released == set(self._free)
        assert len(self._free) == len(self._released)

    def __len__(self) -> int:
        return len(self._entries) - len(self._released)


#: The store of records made without one (``Record(entry, born, seq)``: tests, tools);
#: the compiled one once ``_index.entrycols`` is imported (:func:`set_loose_store`).
_LOOSE: Any = PyEntryColumns()


def set_loose_store(cols: Any) -> None:
    """Make ``cols`` the store of records made without one (``_index.entrycols`` at
    import: the compiled store when the core is loaded). O(1)."""
    global _LOOSE
    _LOOSE = cols
    if _crecord is not None:
        _crecord.set_loose(cols)


class Access:
    """One version of a record's access bookkeeping (count, last access, and the expiry
    a read refreshed); ``prev`` is the older version."""

    __slots__ = ("count", "expires", "last", "prev", "version")

    def __init__(
        self,
        version: int,
        count: int,
        last: datetime | None,
        prev: Access | None,
        expires: datetime | None = None,
    ) -> None:
        self.version = version
        self.count = count
        self.last = last
        self.prev = prev
        self.expires = expires


#: The compiled record type's module (:data:`Record`), or None: not built, or
#: ``ACTORMEM_PY_RECORD=1`` in the environment at import (the Python class then).
_crecord: Any = None
if os.environ.get("ACTORMEM_PY_RECORD", "") != "1":
    try:
        _crecord = importlib.import_module("actormem._crecord")
    except ImportError:  # pragma: no cover - built without the compiler
        _crecord = None

#: ``Record.evkey`` of a purged record (see :attr:`Record.purged`).
_PURGED: Any = _crecord.PURGED if _crecord is not None else (0.0, None)


class PyRecord:
    """One version of one entry (the Python class; :data:`Record` is the compiled one
    when it is built, with the same attributes, methods and order).

    Attributes:
        slot: The entry's slot number in ``cols`` (issue #20 item 6, step A: the entry is
            kept as columns, not as an object). :attr:`entry` builds the entry as stored
            (its ``access_count``/``last_accessed`` are the values at store time); a
            field is read with ``cols.get(slot, name)`` (or ``text``, ``relevance``...).
        cols: The state's entry store (``entrycols.new_entry_columns()``); the owner
            releases ``slot`` when it purges the record.
        born: Version that made this record visible.
        died: Version that removed it (delete, upsert, eviction, prune, merge), or
            :data:`NEVER`.
        seq: Insertion order of the entry's id (kept across upserts).
        access: Newest :class:`Access` version, or ``None`` if never retrieved since store.
        purged: Set by the owner when no snapshot can see the record any more.

    The older record version of the same id (the upsert chain) is kept by the state
    (``MemoryState._prev``), not here, and ``purged`` shares the ``evkey`` slot (a purged
    record has no eviction key): seven slots, 96 bytes a record (six took 80; the
    store's reference is step A's, until step B moves records into columns).
    """

    __slots__ = ("access", "born", "cols", "died", "evkey", "seq", "slot")

    def __init__(self, entry: MemoryEntry, born: int, seq: int, cols: Any = None) -> None:
        _check_int("born", born)
        _check_int("seq", seq)
        if cols is None:
            cols = _LOOSE
        self.cols = cols
        self.slot: int = cols.put(entry)
        self.born = born
        self.died = NEVER
        self.seq = seq
        self.access: Access | None = None
        #: Owner-private: the record's key in the eviction order, or None when not live
        #: or the memory is unbounded (no eviction order); ``_PURGED`` once purged.
        self.evkey: tuple[float, PyRecord] | None = None

    @classmethod
    def on_slot(cls, cols: Any, slot: int, born: int, seq: int) -> PyRecord:
        """A record of the entry already in ``cols`` at ``slot`` (a file's row the
        compiled reader put there: ``sqlite_format.FoldedRows.cols``), as
        ``Record(entry, born, seq, cols)`` would make it after its ``put``. The slot is
        the record's from now on (released when it is purged). TypeError for a number
        that is not an int, OverflowError outside int64, ValueError for a slot below 0.
        O(1)."""
        _check_int("slot", slot)
        _check_int("born", born)
        _check_int("seq", seq)
        if slot < 0:
            raise ValueError("Record.on_slot: slot must be >= 0")
        if cols is None:
            raise TypeError("Record.on_slot: cols must be an entry store")
        rec = cls.__new__(cls)
        rec.cols = cols
        rec.slot = slot
        rec.born = born
        rec.died = NEVER
        rec.seq = seq
        rec.access = None
        rec.evkey = None
        return rec

    @property
    def entry(self) -> MemoryEntry:
        """The entry as stored, built from the store (a new object with the compiled
        store; equal to the one stored). O(fields + len(text))."""
        return self.cols.entry(self.slot)  # type: ignore[no-any-return]

    @property
    def purged(self) -> bool:
        """True once the owner dropped the record from every structure (no snapshot sees
        it). O(1)."""
        return self.evkey is _PURGED

    @purged.setter
    def purged(self, value: bool) -> None:
        if value:
            self.evkey = _PURGED
        elif self.evkey is _PURGED:
            self.evkey = None

    def __lt__(self, other: PyRecord) -> bool:
        """Order by ``seq``: breaks ties of equal floats in the eviction keys
        (``(key, rec)`` tuples; live records have distinct ``seq``). O(1)."""
        return self.seq < other.seq

    def __le__(self, other: PyRecord) -> bool:
        """Order by ``seq`` (see :meth:`__lt__`; sortedcontainers' checks use ``<=``)."""
        return self.seq <= other.seq

    def visible(self, version: int) -> bool:
        """Whether this record is visible at ``version``. O(1)."""
        return self.born <= version < self.died

    def access_node(self, version: int) -> Access | None:
        """The newest :class:`Access` of this record made at or before ``version``, or
        None (then the entry's own values hold). O(length of the chain newer than it)."""
        a = self.access
        while a is not None and a.version > version:
            a = a.prev
        return a

    def access_at(self, version: int) -> tuple[int, datetime | None]:
        """``(access_count, last_accessed)`` as of ``version``. O(length of the chain)."""
        a = self.access_node(version)
        if a is None:
            cols, s = self.cols, self.slot
            return cols.get(s, "access_count"), cols.get(s, "last_accessed")
        return a.count, a.last

    def current_access(self) -> tuple[int, datetime | None]:
        """``(access_count, last_accessed)`` as of the newest version. O(1)."""
        a = self.access
        if a is None:
            cols, s = self.cols, self.slot
            return cols.get(s, "access_count"), cols.get(s, "last_accessed")
        return a.count, a.last

    def expires_at(self, version: int) -> datetime | None:
        """``expires_at`` as of ``version`` (refreshed by reads). O(length of the chain)."""
        a = self.access_node(version)
        if a is None or a.expires is None:
            return self.cols.get(self.slot, "expires_at")  # type: ignore[no-any-return]
        return a.expires

    def current_expires(self) -> datetime | None:
        """``expires_at`` as of the newest version. O(1)."""
        a = self.access
        if a is None or a.expires is None:
            return self.cols.get(self.slot, "expires_at")  # type: ignore[no-any-return]
        return a.expires

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        died = "never" if self.died == NEVER else self.died
        return f"<Record slot={self.slot} seq={self.seq} born={self.born} died={died}>"


_INT64 = 1 << 63


def _check_int(what: str, v: object) -> None:
    """The compiled record's refusal of a number: TypeError for anything but an int
    (bool too), OverflowError outside int64. O(1)."""
    if type(v) is bool or not isinstance(v, int):
        raise TypeError(f"Record: {what} must be an int, not {type(v).__name__}")
    if not -_INT64 <= v < _INT64:
        raise OverflowError(f"Record: {what} out of the int64 range")


def _compiled(ctype: Any) -> Any:
    """The compiled record type with :class:`PyRecord`'s methods written in Python set
    on it (the type has the storage, the constructor, ``on_slot``, ``evkey``,
    ``purged``, ``visible`` and the order by ``seq``). O(1)."""
    for name in (
        "entry",
        "access_node",
        "access_at",
        "current_access",
        "expires_at",
        "current_expires",
        "__repr__",
    ):
        setattr(ctype, name, PyRecord.__dict__[name])
    ctype.__doc__ = PyRecord.__doc__
    ctype.__slots__ = PyRecord.__slots__  # the attributes' names, as the class has them
    return ctype


if TYPE_CHECKING:
    Record = PyRecord
else:
    #: One version of one entry: the compiled type (int64 ``born``/``died``/``seq``/
    #: ``slot``, no GC header: 80 bytes and no int object of its own), or
    #: :class:`PyRecord` without it. The same attributes, methods and order.
    Record = _compiled(_crecord.Record) if _crecord is not None else PyRecord

if _crecord is not None:
    _crecord.set_loose(_LOOSE)
