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
inserted it (a record born by that store shares the int object: no second int per
record); an upsert keeps the seq of the id it replaces, so ties in retrieval keep the
order in which ids first arrived. Seqs increase but have gaps.

Access bookkeeping (``access_count``, ``last_accessed``) changes often and does not
touch the text, so it is kept beside the record as a short version chain
(:class:`Access`) instead of minting a new record each time.
"""

from __future__ import annotations

import sys
from datetime import datetime

from ._entry import MemoryEntry

__all__ = ["JOURNAL_ACCESS", "JOURNAL_DELETE", "JOURNAL_PUT", "NEVER", "Access", "Record"]

#: ``died`` of a record that has not been removed.
NEVER = sys.maxsize

#: Journal record kinds: a record became live, a record died, its access bookkeeping changed.
JOURNAL_DELETE, JOURNAL_PUT, JOURNAL_ACCESS = 0, 1, 2


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


#: ``Record.evkey`` of a purged record (see :attr:`Record.purged`).
_PURGED: tuple[float, Record] = (0.0, None)  # type: ignore[assignment]


class Record:
    """One version of one entry.

    Attributes:
        entry: The entry as stored (its ``access_count``/``last_accessed`` are the values
            at store time; see :meth:`entry_at`).
        born: Version that made this record visible.
        died: Version that removed it (delete, upsert, eviction, prune, merge), or
            :data:`NEVER`.
        seq: Insertion order of the entry's id (kept across upserts).
        access: Newest :class:`Access` version, or ``None`` if never retrieved since store.
        purged: Set by the owner when no snapshot can see the record any more.

    The older record version of the same id (the upsert chain) is kept by the state
    (``MemoryState._prev``), not here, and ``purged`` shares the ``evkey`` slot (a purged
    record has no eviction key): six slots, 80 bytes a record where eight took 96.
    """

    __slots__ = ("access", "born", "died", "entry", "evkey", "seq")

    def __init__(self, entry: MemoryEntry, born: int, seq: int) -> None:
        self.entry = entry
        self.born = born
        self.died = NEVER
        self.seq = seq
        self.access: Access | None = None
        #: Owner-private: the record's key in the eviction order, or None when not live
        #: or the memory is unbounded (no eviction order); ``_PURGED`` once purged.
        self.evkey: tuple[float, Record] | None = None

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

    def __lt__(self, other: Record) -> bool:
        """Order by ``seq``: breaks ties of equal floats in the eviction keys
        (``(key, rec)`` tuples; live records have distinct ``seq``). O(1)."""
        return self.seq < other.seq

    def __le__(self, other: Record) -> bool:
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
            return self.entry.access_count, self.entry.last_accessed
        return a.count, a.last

    def current_access(self) -> tuple[int, datetime | None]:
        """``(access_count, last_accessed)`` as of the newest version. O(1)."""
        a = self.access
        if a is None:
            return self.entry.access_count, self.entry.last_accessed
        return a.count, a.last

    def expires_at(self, version: int) -> datetime | None:
        """``expires_at`` as of ``version`` (refreshed by reads). O(length of the chain)."""
        a = self.access_node(version)
        if a is None or a.expires is None:
            return self.entry.expires_at
        return a.expires

    def current_expires(self) -> datetime | None:
        """``expires_at`` as of the newest version. O(1)."""
        a = self.access
        if a is None or a.expires is None:
            return self.entry.expires_at
        return a.expires

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        died = "never" if self.died == NEVER else self.died
        return f"<Record {self.entry.id} seq={self.seq} born={self.born} died={died}>"
