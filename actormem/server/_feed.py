"""The removals a served memory reported, for clients that account for every store.

Theory of operation
-------------------
A memory tells its ``on_remove`` callback of every entry it removes (evicted, pruned,
merged, deleted, replaced, expired), in the order its owner applied them. A client of a
server cannot see that callback, yet a swarm that checks "every acknowledged store is
present or was reported removed" needs it. :class:`RemovalFeed` is that callback for
``actormem serve``: it numbers each report (1, 2, ...) and keeps the latest ``maxlen`` of
them; ``GET /v1/removals?after=n`` returns those numbered above ``n``. A reader that
fell behind by more than ``maxlen`` reports learns so (``first`` > ``after + 1``) rather
than getting a silently incomplete list.
"""

from __future__ import annotations

import uuid
from array import array

from .._entry import MemoryEntry

__all__ = ["DEFAULT_FEED_LENGTH", "RemovalFeed"]

#: Reports kept by default: 19 MB once full (a report is 18 bytes: its id's 16 bytes and
#: a 2-byte cause code, in two flat rings, plus their growth slack; 18.9 MB measured with
#: tracemalloc at 1M reports. The deque of tuples before took 189 MB).
DEFAULT_FEED_LENGTH = 1_000_000


class RemovalFeed:
    """``on_remove`` callback that keeps the latest ``maxlen`` removal reports, numbered.

    Called by the memory's owner (or the thread loading its file); read by the server's
    handlers in the same trio run. The reports live in two rings (ids as 16 bytes each,
    causes as codes into a table of the causes seen), grown up to ``maxlen`` reports:
    18 bytes a report. O(1) per report.
    """

    def __init__(self, maxlen: int = DEFAULT_FEED_LENGTH) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be >= 1, got {maxlen}")
        self._maxlen = maxlen
        self._ids = bytearray()  # report n's id at [16 * ((n - 1) % maxlen), +16)
        self._causes: array[int] = array("H")  # its cause's code at (n - 1) % maxlen
        self._names: list[str] = []  # code -> cause
        self._codes: dict[str, int] = {}  # cause -> code
        self.total = 0

    def __call__(self, entry: MemoryEntry, cause: str) -> None:
        code = self._codes.get(cause)
        if code is None:
            code = self._codes[cause] = len(self._names)
            self._names.append(cause)
        slot = self.total % self._maxlen
        if self.total < self._maxlen:
            self._ids += entry.id.bytes
            self._causes.append(code)
        else:
            self._ids[16 * slot : 16 * slot + 16] = entry.id.bytes
            self._causes[slot] = code
        self.total += 1

    @property
    def first(self) -> int:
        """Number of the oldest report still kept (``total + 1`` when none is)."""
        return max(1, self.total - self._maxlen + 1)

    def since(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` reports numbered above ``after``, oldest first, as
        ``(number, id, cause)``. O(limit): the seek is arithmetic on the ring."""
        ids, causes, names, maxlen = self._ids, self._causes, self._names, self._maxlen
        out: list[tuple[int, str, str]] = []
        lo = max(after + 1, self.first)
        for n in range(lo, min(self.total, lo + limit - 1) + 1):
            slot = (n - 1) % maxlen
            uid = uuid.UUID(bytes=bytes(ids[16 * slot : 16 * slot + 16]))
            out.append((n, str(uid), names[causes[slot]]))
        return out
