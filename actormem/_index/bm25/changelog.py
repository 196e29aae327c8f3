"""The BM25 index's change log: what an older snapshot undoes to get its statistics.

One ``(version, group, +1 or -1)`` entry per ``add`` (at ``rec.born``) and ``retire`` (at
``rec.died``), in three parallel lists sorted by version. A reader at version ``v`` undoes
the entries newer than ``v`` from the newest N, total length and df. The owner trims the
entries at or below the *horizon* (the highest version below which no live snapshot
reads); a reader older than the log (``version < floor``) counts visible postings instead.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import Any

from ..._record import NEVER

__all__ = ["ChangeLog"]


class ChangeLog:
    """The change log of one :class:`~actormem._index.bm25.BM25Index` (owner-written)."""

    __slots__ = ("deltas", "floor", "groups", "horizon", "slack", "versions")

    def __init__(self) -> None:
        self.versions: list[int] = []
        #: Each entry's group: a ``_Group``, or with ``knobs._GROUP_COLUMNS`` its number
        #: (the index makes this an ``array('q')``: no int object an entry).
        self.groups: Any = []
        self.deltas: list[int] = []
        #: Every change at a version above this one is in the log.
        self.floor = -NEVER
        #: Highest version below which no live snapshot reads, as far as the index knows.
        self.horizon = 0
        #: Log entries below the horizon tolerated before a purge trims (tests lower it to 0).
        self.slack = 64

    def record(self, version: int, group: Any, delta: int) -> None:
        """Log a change of ``group``'s record count by ``delta`` at ``version``. O(1),
        or O(log entries) for a version older than the newest change (rare)."""
        versions = self.versions
        if not versions or versions[-1] <= version:
            versions.append(version)
            self.groups.append(group)
            self.deltas.append(delta)
        else:  # an out-of-order change: rare
            pos = bisect_right(versions, version)
            versions.insert(pos, version)
            self.groups.insert(pos, group)
            self.deltas.insert(pos, delta)

    def trim(self) -> None:
        """Drop the log entries at or below the horizon. O(log length + kept entries)."""
        versions = self.versions
        cut = bisect_right(versions, self.horizon)
        if cut:
            self.floor = max(self.floor, versions[cut - 1])
            del versions[:cut]
            del self.groups[:cut]
            del self.deltas[:cut]

    def purged(self, died: int) -> None:
        """A record dead from ``died`` on was purged: no live snapshot reads below
        ``died``. Trims once more than ``slack`` entries, and half of the log, are
        below the horizon. Amortized O(1)."""
        if died > self.horizon:
            self.horizon = died
        versions = self.versions
        if versions and versions[0] <= self.horizon:
            cut = bisect_right(versions, self.horizon)
            if cut > self.slack and 2 * cut >= len(versions):
                self.trim()

    def vacuum(self, oldest: int) -> None:
        """No live snapshot is older than ``oldest``: trim. O(log L + kept)."""
        if oldest > self.horizon:
            self.horizon = oldest
        self.trim()

    def _check(self) -> None:
        versions = self.versions
        assert len(versions) == len(self.groups) == len(self.deltas)
        assert all(x <= y for x, y in zip(versions, versions[1:], strict=False)), "log out of order"
        assert all(v > self.floor for v in versions)
