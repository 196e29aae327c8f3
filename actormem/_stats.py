"""Frozen report values: :class:`ConsolidationStats` and :class:`MemoryStatistics`."""

from __future__ import annotations

import attrs

from ._util import Final

__all__ = ["ConsolidationStats", "MemoryStatistics"]


@attrs.frozen(kw_only=True, slots=True)
class ConsolidationStats(metaclass=Final):
    """What one :meth:`Memory.consolidate` did (loopctl's ``ConsolidationStats`` shape).

    Attributes:
        entries_before: Entries in the memory when the consolidation started.
        entries_after: Entries left when it finished.
        pruned: Entries removed because their relevance was below 0.05 (not validated).
        merged: Entries folded into an earlier duplicate (the survivors are not counted).
        evicted: Entries evicted for capacity since the previous consolidation (or since
            the memory opened), so one report accounts for every removal in between.
        bytes_saved: UTF-8 bytes of ``memory`` text of the pruned and merged entries.
    """

    entries_before: int = 0
    entries_after: int = 0
    pruned: int = 0
    merged: int = 0
    evicted: int = 0
    bytes_saved: int = 0


@attrs.frozen(kw_only=True, slots=True)
class MemoryStatistics(metaclass=Final):
    """Counters of one memory, as returned by :meth:`Memory.statistics` (sync, O(1)).

    A durable memory's counters (``stores`` to ``access_updates``, ``retrieves``
    included) continue across opens: they are saved in the file when it closes cleanly.

    Attributes:
        entries: Unexpired entries in the latest published snapshot (``len(memory)``).
        capacity: The bound on entries, or ``None`` for unbounded.
        stores: Store requests applied (new entries and upserts).
        upserts: Stores that replaced an entry with the same id.
        deletes: Successful deletes.
        evictions: Entries evicted for capacity.
        pruned: Entries pruned by consolidations.
        merged: Entries merged away by consolidations.
        consolidations: Consolidations run.
        retrieves: Retrieves served through the handle.
        access_updates: Entries whose access bookkeeping the owner updated.
        queue_depth: Requests waiting in the request channel.
        queue_capacity: Size of the request channel's buffer.
        snapshot_version: Version of the latest published snapshot.
        live_snapshots: Snapshots from :meth:`Memory.snapshot` still referenced.
        retained_versions: Record versions kept only for older snapshots (MVCC garbage
            not yet vacuumed).
        expired: Entries the owner removed because their time to live ran out.
        ttl_refreshes: Expiries pushed later by reads with ``refresh_ttl=True``.
        log_applied_seq: A node of a replicated memory: the seq of the last log record
            applied here (None: not replicated).
        log_stale_seconds: A node of a replicated memory: seconds since it last heard
            from the log (reads may miss writes made since on other nodes); None: not
            replicated, or the log never answered.
    """

    entries: int
    capacity: int | None
    stores: int
    upserts: int
    deletes: int
    evictions: int
    pruned: int
    merged: int
    consolidations: int
    retrieves: int
    access_updates: int
    queue_depth: int
    queue_capacity: int
    snapshot_version: int
    live_snapshots: int
    retained_versions: int
    expired: int = 0
    ttl_refreshes: int = 0
    log_applied_seq: int | None = None
    log_stale_seconds: float | None = None
