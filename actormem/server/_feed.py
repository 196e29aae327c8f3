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

from collections import deque
from itertools import islice

from .._entry import MemoryEntry

__all__ = ["DEFAULT_FEED_LENGTH", "RemovalFeed"]

#: Reports kept by default: about 100 MB at most (a report is ~100 bytes).
DEFAULT_FEED_LENGTH = 1_000_000


class RemovalFeed:
    """``on_remove`` callback that keeps the latest ``maxlen`` removal reports, numbered.

    Called by the memory's owner (or the thread loading its file); read by the server's
    handlers in the same trio run. O(1) per report.
    """

    def __init__(self, maxlen: int = DEFAULT_FEED_LENGTH) -> None:
        if maxlen < 1:
            raise ValueError(f"maxlen must be >= 1, got {maxlen}")
        self._reports: deque[tuple[int, str, str]] = deque(maxlen=maxlen)
        self.total = 0

    def __call__(self, entry: MemoryEntry, cause: str) -> None:
        self.total += 1
        self._reports.append((self.total, str(entry.id), cause))

    @property
    def first(self) -> int:
        """Number of the oldest report still kept (``total + 1`` when none is)."""
        return self.total - len(self._reports) + 1

    def since(self, after: int, limit: int) -> list[tuple[int, str, str]]:
        """Up to ``limit`` reports numbered above ``after``, oldest first.
        O(limit) after an O(1) seek."""
        start = max(0, after + 1 - self.first)
        return list(islice(self._reports, start, start + limit))
