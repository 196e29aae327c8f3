"""The actor: one owner task applies every write; readers score snapshots themselves.

Theory of operation
-------------------
:func:`~actormem._engine.lifecycle.serve_memory` (``lifecycle.py``: opening, serving and closing)
creates a :class:`~actormem._engine.state.MemoryState` and a bounded trio memory channel,
hands out a :class:`Memory` handle, and runs the *owner loop* defined here:

1. Wait for a request (``await receive()``: an idle memory uses no CPU).
2. Drain every request already queued (up to ``_MAX_BATCH``) without waiting: one batch.
3. Apply the batch to the state synchronously, in arrival order, plus the access
   bookkeeping that retrieves left in a shared buffer.
4. Publish the new version, then fill each request's one-shot reply box (an outcome)
   and reschedule its parked caller; the owner never awaits a client.
5. Vacuum a bounded number of dead record versions no snapshot can see.

Clients put small :class:`_Request` messages on the channel. When the owner lags,
the buffer fills and ``store`` waits (backpressure) while ``store_nowait`` raises
:class:`trio.WouldBlock`. Reads never touch the channel: ``retrieve`` takes a view of the
published version (O(1)) and scores it in the caller's task without a checkpoint, so the
owner cannot change anything in the middle, and a reader never waits for a writer.

Durable mode (``open_memory(path=...)``, see ``docs/durability.md``). Before serving, the
owner's state is rebuilt from the SQLite file (:mod:`actormem._storage.sqlite`). Between steps 3
and 4 the owner hands the batch's journal to the store: one transaction per batch (group
commit), run in a worker thread (:func:`_in_thread_while`) while the owner indexes the
batch (``MemoryState.defer_index``), or, for a small batch of a ``normal`` memory, written
by the owner itself on the loop (:data:`_INLINE_COMMIT`, :func:`_commit_inline`: the
same transaction, no schedule point). The thread is never abandoned: the owner waits for
it, shielded from cancellation, so a transaction is never left half-done, and a batch
whose commit started is committed, published and answered even if the owner is being
cancelled. Nothing is published or acknowledged before its commit returned. A failed
commit (disk full, I/O error) fails the batch's callers with
:class:`~actormem.StorageError`, breaks the memory (later calls raise
:class:`trio.BrokenResourceError` from that error) and stops the owner quietly: the
in-memory state already holds the batch, so it can no longer match the file. Reads
never touch the file.

With a dense or hybrid scorer, step 3 starts by embedding the batch's new texts
(:func:`_embed_ahead`: one call, in a worker thread for long texts). If the embedder
fails, the stores that needed those vectors are answered with
:class:`~actormem.EmbeddingError` and left out of the batch; the rest is applied.

Domain errors travel back in the reply. Anything else raised while applying a batch is a
bug: the owner fails every pending request with :class:`trio.BrokenResourceError`
(chained from the bug), marks the memory broken, and re-raises so the bug surfaces in the
nursery. A cancelled or closed owner answers pending requests with
:class:`trio.ClosedResourceError`.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import uuid
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import numpy as np
import outcome
import trio
from trio import current_time as _current_time
from trio import lowlevel as _lowlevel

from .._entry import (
    MemoryCategory,
    MemoryEntry,
    ScoredEntry,
    check_entry_batch,
    check_entry_built,
    check_lookup_key,
)
from .._errors import (
    ActorMemError,
    EmbeddingError,
    InvalidEntryError,
    InvalidQueryError,
    StorageError,
)
from .._index.dense import entry_document, text_hash
from .._index.scoring import Scorer
from .._index.thresholds import matches_terms
from .._index.wordoverlap import WordOverlapScorer
from .._record import Record
from .._stats import ConsolidationStats, MemoryStatistics
from .._storage import sqlite as sqlite_store
from .._storage.sqlite import Batch, Durability, SqliteStore
from .._storage.sqlite_format import MAX_ACCESS_COUNT
from .._util import NoPublicConstructor, gc_paused
from .fairshare import ReadGate, ScoringSlots
from .snapshot import (
    Snapshot,
    VersionHolds,
    check_listing,
    check_query,
    check_thresholds,
    list_namespaces_at,
    list_records_sliced,
    make_filter,
    run_retrieve_sliced,
    scan_sliced,
    with_alive,
)
from .state import MemoryState, View

# (`_current_time`, `_lowlevel`: trio's module defines a __getattr__, so CPython 3.11
# cannot specialize a `trio.X` read and each is a generic lookup; the hot paths read
# these names instead: the same objects, trio.lowlevel's attributes still patchable.)

__all__ = ["DEFAULT_QUEUE_SIZE", "Follower", "Memory"]

_T = TypeVar("_T")

#: Default size of the request channel's buffer (requests waiting for the owner).
DEFAULT_QUEUE_SIZE = 1024
_MAX_BATCH = 512
#: Retrieves of one memory that score at once (``None``: no limit). More wait for a
#: token, first come first served, before they meet the fair-share gate and take their
#: snapshot (retrieves of dense and hybrid indexes, which embed the query, perhaps in a
#: worker thread, are not limited). The loop is shared in slices either way; the limit
#: decides among whom. Without it, with 64 agents each scoring a slice in turn, a
#: retrieve of ``s`` slices waited ``s`` rounds of every other reader's slice, so the
#: retrieves with the most slices made the tail (the main job's slowest 1% had 11.4 slice
#: boundaries on average against 3.8 for all). Read when a memory is made, so benchmarks
#: compare in one process; figures in docs/benchmarks.md ("The main job: scoring slots").
SCORING_SLOTS: int | None = 8
_VACUUM_STEP = 256
#: The owner turns the cyclic collector off (``_util.gc_paused``, shared with the loads
#: in other threads) from applying a batch to answering it, a durable batch's group
#: commit wait included: the batch's journal, rows and replies die at its end, before
#: any collection could promote them, so the young collections drop by more than half
#: and the full ones that their promotions set off do not come (a 64,000-entry
#: benchmark process of 64 writers: young 349 -> 155 durable, 263 -> 155 in memory;
#: full 3 -> 2 durable, the one in the timed part gone). Nothing lives on that a
#: collection would free: a cycle made during the batch is collected after it; the
#: pause lasts one batch (at most ``_MAX_BATCH`` requests, and the commit's write),
#: not an embedding wait. False: collections wherever allocations set them off, the
#: path before it.
_GC_PAUSE = True

#: A durable ``normal`` memory's owner commits a small batch itself, on the event loop
#: (``SqliteStore.inline_ok``: at most :data:`INLINE_ROWS` row changes; the store then
#: checkpoints beside the writer, ``sqlite._CHECKPOINT_BESIDE``, or else in its worker
#: thread's commits only, with no batch on the loop when one is due), instead of
#: handing it to a worker thread and waiting for it: the same transaction, the same
#: acknowledgement after ``COMMIT`` returned. The hand-off (waking the thread, the
#: GIL passed back and forth for each statement, the wake-up of the loop when it is
#: done) cost more CPU than the transaction of a few rows. ``full`` durability (an
#: fsync in every commit) and larger batches keep the thread. Read at every commit.
#: False: every commit in the worker thread, SQLite's own automatic checkpoint
#: (``wal_autocheckpoint``), the path before it.
_INLINE_COMMIT = True
#: The most row changes (puts, deletes, access updates, vectors) a commit made on the
#: event loop may hold.
INLINE_ROWS = 64

#: A retrieve's hits are noted for the owner's access bookkeeping by the id's int
#: (``MemoryEntry._id``), not by a ``UUID`` read per hit (``entry.id`` builds one, and
#: its hash is a Python call at each dict operation); the owner looks the ints up
#: directly (``MemoryState.apply_access`` takes either). A replicated memory's node
#: encodes the buffer's ids for its log, so it keeps UUIDs. The same counts and times.
#: False: UUID keys (the path before it).
_ACCESS_BY_INT = True
#: With ``_ACCESS_BY_INT``, a retrieve's hits are noted by their :class:`Record` (a
#: dict keyed by identity) rather than by the id's int: no entry read per hit in the
#: reader, no lookup in the id table per hit in the owner, which updates the record
#: itself while it is live (``MemoryState.apply_access``; one no longer live, upserted
#: or deleted since, is taken by its id, and one id's records merged, as before). The
#: same counts, times, journal and ``access_updates``. False: by the id's int (the
#: path before it).
_ACCESS_BY_REC = True
#: ``retrieve`` builds its entries from the hits directly instead of a
#: :class:`ScoredEntry` per hit that it then unwraps: the same entries, in the same
#: order. False: through ``retrieve_scored`` (the path before it).
_RETRIEVE_DIRECT = True
#: ``_horizon`` walks the registry's weak references itself (``WeakSet.__iter__`` is a
#: Python generator with an iteration guard per call, and the owner asks at every
#: batch with access hits and every vacuum step): the same oldest version. False:
#: ``list(self._snapshots)`` (the path before it).
_HORIZON_REFS = True
#: A memory's scoring slots (``SCORING_SLOTS``) are a :class:`~.fairshare.ScoringSlots`
#: instead of a :class:`trio.CapacityLimiter`: the same first-come-first-served slots,
#: the same cancellation (a retrieve cancelled while waiting takes none) and the same
#: wake-up of the waiters when the memory closes or breaks, for less per retrieve: a
#: slot taken and given back by a set operation (no ``WouldBlock`` raised for a retrieve
#: that waits, no ``contextlib.suppress`` around the give-back), a wait parked once (no
#: :class:`trio.CancelScope` per wait for the close, no parking lot). Read when a memory
#: is made. False: the limiter (the path before it).
_OWN_SLOTS = True
#: A retrieve or listing under way holds its view's version in the memory's
#: :class:`~.snapshot.VersionHolds` (a dict update at its start and its end) instead of
#: registering a :class:`Snapshot` in the memory's ``WeakSet`` (an object, a weak
#: reference and its callback per retrieve): the same oldest version for the vacuum,
#: the same ``live_snapshots``. Read when a memory is made. False: a snapshot per
#: retrieve (the path before it). Off: in the main job's callgrind it made no
#: difference beyond a run's spread (13,331 M without it, 13,353 M with it; repeats
#: differ by ~1%), docs/benchmarks.md (``mainjob14``).
_HOLDS_BY_VERSION = False
#: The owner applies each run of consecutive ``store``/``store_nowait`` requests of a
#: batch whose entries are exact :class:`MemoryEntry` objects without a ``ttl`` by one
#: ``MemoryState.store_many`` call, for an index with ``add_many`` (word overlap), instead
#: of one ``MemoryState.store`` per request: the inserts of a run go through the state's
#: batched insert (``state._STORE_C``: one C call a run, one ``add_many`` a run), and a
#: ``store_many`` is documented as exactly that many ``store`` calls in a row (upserts,
#: keys, evictions by ``store`` itself): the same state, versions, journal and removal
#: callbacks, in the same order; each request answered as before. The main job stores
#: one entry per request, 64 agents at a time. False: one ``store`` per request (the
#: path before it).
_STORE_RUNS = True
#: The owner waits for its next request without a cancel scope when no entry expires
#: (``trio.move_on_at(inf)`` never fires: a ``CancelScope`` entered and left per batch
#: for nothing). The same requests, batches and sweeps. False: the scope at every wait
#: (the path before it).
_WAIT_UNSCOPED = True

#: ``store`` calls :meth:`Memory._check_storable` only for a durable or replicated
#: memory (in memory it checks nothing): one call a store fewer. False: every store
#: (the path before it; the same checks).
_CHECK_DURABLE_ONLY = True

#: A retrieve's access note takes the clock's reading as it is when it is an exact
#: ``datetime`` whose ``tzinfo`` is ``datetime.UTC`` (the default clock's), without
#: ``_now``'s call, ``isinstance`` and ``utcoffset()`` (any other reading gets them, and
#: their ``TypeError``). The same times. False: ``_now`` (the path before it).
_CLOCK_FAST = True

#: The owner's batch asks :func:`_needs_time` of its requests in a loop of its own, a
#: flush (which needs no time) skipped: a generator step a request fewer (and a call a
#: flush). The same answer. False: ``any(_needs_time(req) for req in batch)`` (the
#: path before it).
_TIME_SCAN = True

#: A retrieve with no filter and no threshold (the main job's: every keyword argument
#: left at its default) skips ``check_thresholds`` and ``make_filter`` (whose answer
#: for no filter is None: accept every record) and their ``_check_time`` calls. Any
#: argument given takes both, with their errors. False: both at every retrieve (the
#: path before it).
_PLAIN_RETRIEVE = True

_STORE, _DELETE, _CONSOLIDATE, _FLUSH, _STORE_NOWAIT, _STORE_MANY, _DELETE_KEY, _SWEEP = range(8)


class _Request:
    """One request, and its one-shot reply box.

    The caller queues it and parks its task with
    :func:`trio.lowlevel.wait_task_rescheduled`; the owner fills the box once,
    synchronously, with :meth:`set`, which reschedules the parked task with the outcome
    (no :class:`trio.Event` per request). A caller cancelled while parked is aborted by
    trio (``__call__`` is the abort function): it forgets its task, so the owner's later
    :meth:`set` stores the outcome and wakes nobody. ``waits`` is False for requests
    nobody awaits (``store_nowait``, the access-flush wake-up).
    """

    __slots__ = ("arg", "op", "result", "task", "waits")

    def __init__(self, op: int, arg: Any, waits: bool) -> None:
        self.op = op
        self.arg = arg
        self.waits = waits
        self.result: outcome.Outcome[Any] | None = None
        #: The caller's task while it is parked waiting for :attr:`result`, else None.
        self.task: trio.lowlevel.Task | None = None

    @trio.lowlevel.enable_ki_protection  # no KeyboardInterrupt between result and wake-up
    def set(self, result: outcome.Outcome[Any]) -> None:
        """Answer once (later calls are ignored); wake the caller if it is parked."""
        if self.result is None:
            self.result = result
            task = self.task
            if task is not None:
                self.task = None
                _lowlevel.reschedule(task, result)

    @trio.lowlevel.enable_ki_protection
    def __call__(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        """The abort function of the caller's wait: always succeeds (the request stays
        queued and may still be applied; its answer is dropped)."""
        self.task = None
        return _lowlevel.Abort.SUCCEEDED

    @trio.lowlevel.enable_ki_protection  # ``task`` is set only if the park happens
    async def wait(self) -> Any:
        """Park until :meth:`set`, then return the outcome's value (or raise its error).

        KeyboardInterrupt-protected, so it cannot strike between recording the task and
        parking; it arrives at the park instead, through the abort like a cancel."""
        if self.result is not None:  # answered while the caller waited for room
            return self.result.unwrap()
        self.task = _lowlevel.current_task()
        return await _lowlevel.wait_task_rescheduled(self)


_FLUSH_REQUEST = _Request(_FLUSH, None, False)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class Follower(Protocol):
    """What a memory needs of its log follower when it is a node of a replicated memory
    (``open_memory(log=...)``): :class:`~actormem._engine.replica.Replica`, which builds
    on this module, so the memory knows it only by this shape."""

    #: Seq of the last log record applied and published here.
    applied: int

    def stale_seconds(self) -> float | None:
        """Seconds since the log was last known to be read up to date, or None."""

    async def wait_applied(self, memory: Memory, seq: int) -> None:
        """Return once log record ``seq`` is applied here."""

    async def run(self, memory: Memory, receive: trio.MemoryReceiveChannel[_Request]) -> None:
        """The node's owner loop, in place of :func:`_run_owner`."""

    def close_log(self) -> None:
        """Close the log's connection, for a node whose owner loop never ran (``run``
        closes it otherwise). Idempotent. Blocking."""


class Memory(metaclass=NoPublicConstructor):
    """Handle to a running memory; get one from :func:`open_memory` or :func:`serve_memory`.

    Many tasks may share one handle. Writes (``store``, ``delete``, ``consolidate``) are
    applied by the owner task in arrival order; reads (``retrieve``, ``get``, ``snapshot``,
    ``len``) read the latest published snapshot in the caller's task.

    In durable mode (``open_memory(path=...)``) a write returns only once the group
    commit holding it is in the file; reads still never touch the file.

    After the memory is closed every call raises :class:`trio.ClosedResourceError`; if the
    owner died of a bug, or a durable memory's commit failed, every pending and later
    call raises :class:`trio.BrokenResourceError` whose ``__cause__`` is the bug or the
    :class:`~actormem.StorageError`. An async call from a task whose cancel scope is
    cancelled raises :class:`trio.Cancelled` instead: when the scope around
    :func:`open_memory` is cancelled, its owner may stop (and close the memory) before
    the writers in the block run again, and they see the cancellation, not the close.
    """

    def __init__(
        self, state: MemoryState, send: trio.MemorySendChannel[_Request], queue_size: int
    ) -> None:
        self._state = state
        self._send = send
        self._queue_size = queue_size
        self._closed = False
        self._broken: BaseException | None = None
        #: Retrieve hits not yet applied: id (its int, or a UUID, see _ACCESS_BY_INT) ->
        #: (times returned, latest retrieve time).
        self._pending_access: dict[Any, tuple[int, datetime]] = {}
        #: Reads asked to refresh a time to live: id -> latest read time.
        self._pending_refresh: dict[uuid.UUID, datetime] = {}
        #: Entries the current batch's sweep removed (for ``sweep_expired``'s answer).
        self._swept = 0
        #: Whether the owner removes expired entries on its own (False: a read-only
        #: opening, such as the CLI's ``export`` and ``stats``, leaves the file as it is;
        #: reads still hide expired entries).
        self._auto_sweep = True
        self._snapshots: weakref.WeakSet[Snapshot] = weakref.WeakSet()
        #: The versions retrieves and listings under way read (_HOLDS_BY_VERSION), or
        #: None (they register a snapshot in _snapshots).
        self._holds: VersionHolds | None = VersionHolds() if _HOLDS_BY_VERSION else None
        self._retrieves = 0
        #: Durable backend hook: awaited with each batch's journal before publishing.
        #: Durable mode: ``await _commit(journal, meanwhile)`` writes the batch's journal
        #: as one transaction, calling ``meanwhile()`` (the deferred indexing) during it.
        self._commit: (
            Callable[[list[tuple[int, Record]], Callable[[], None]], Awaitable[None]] | None
        ) = None
        #: The SQLite store of a durable memory (None: in-memory).
        self._storage: SqliteStore | None = None
        #: The trio time by which the access updates its store holds back must be
        #: committed (``sqlite._DEFER_ACCESS``): the owner wakes for it. ``inf``: none.
        self._access_due = math.inf
        #: Whether its timer (``_access_timer``) runs.
        self._access_timer = False
        #: A node of a replicated memory (``open_memory(log=...)``): its log follower.
        self._replica: Follower | None = None
        #: Where readers wait between slices while writes are pending (fairshare.py).
        self._gate = ReadGate()
        #: Tokens of the retrieves scoring now (``SCORING_SLOTS``), or None.
        self._slots: ScoringSlots | trio.CapacityLimiter | None = (
            None
            if SCORING_SLOTS is None
            else ScoringSlots(SCORING_SLOTS)
            if _OWN_SLOTS
            else trio.CapacityLimiter(SCORING_SLOTS)
        )
        #: The cancel scopes of the retrieves waiting for a slot: cancelled when the
        #: memory closes or breaks, so that they raise then, not once a slot is free.
        self._slot_waits: set[trio.CancelScope] = set()
        #: The scope of a durable memory's idle checkpoints (``_idle_checkpoints``),
        #: while they run: cancelled when the memory closes.
        self._idle_scope: trio.CancelScope | None = None

    # ------------------------------------------------------------ lifecycle helpers

    @property
    def failure(self) -> BaseException | None:
        """What broke the memory, or ``None`` while it works: the
        :class:`~actormem.StorageError` of a failed commit, or the bug that ended its
        owner task. A broken memory refuses every call (``trio.BrokenResourceError``);
        every write it acknowledged before is committed. O(1)."""
        return self._broken

    def _raise_if_unusable(self) -> None:
        if self._broken is not None:
            raise trio.BrokenResourceError(_broken_message(self._broken)) from self._broken
        if self._closed:
            raise trio.ClosedResourceError("the memory is closed")

    async def _call(self, op: int, arg: Any) -> Any:
        # A caller cancelled before it starts sends nothing, and gets Cancelled even if
        # the memory is closed: its owner, cancelled by the same scope, may have stopped
        # first (a closed memory is reported to callers the cancellation does not
        # reach). After that, the wait for the reply is the one schedule point (no
        # extra task step to enqueue).
        await _lowlevel.checkpoint_if_cancelled()
        if self._closed or self._broken is not None:
            self._raise_if_unusable()
        request = _Request(op, arg, True)
        gate = self._gate
        gate.enter()  # readers yield the loop to writes in flight (fairshare.py)
        try:
            try:
                try:
                    self._send.send_nowait(request)
                except trio.WouldBlock:
                    await self._send.send(request)  # backpressure: wait for room
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await _lowlevel.checkpoint_if_cancelled()
                self._raise_if_unusable()
                raise
            try:
                return await request.wait()
            except trio.ClosedResourceError:
                # Not applied: the owner stopped, cancelled, before it applied the
                # request; it answered while this caller, no longer parked (its request
                # was taken from the channel), had not run since its own scope was
                # cancelled. That caller gets Cancelled, as the others in the scope.
                await _lowlevel.checkpoint_if_cancelled()
                raise
        finally:
            gate.leave()

    async def aclose(self) -> None:
        """Close the memory: requests already queued are still applied and answered, then
        the owner stops. Later calls raise :class:`trio.ClosedResourceError`. Idempotent."""
        self._close()
        await _lowlevel.checkpoint()

    def _close(self) -> None:
        self._closed = True
        self._send.close()
        self._stop_slot_waits()
        if self._idle_scope is not None:
            self._idle_scope.cancel()

    def _stop_slot_waits(self) -> None:
        """The memory is closed or broken: the retrieves waiting for a scoring slot
        raise now (each takes no slot). O(waiting)."""
        for waiting in self._slot_waits:
            waiting.cancel()
        if type(self._slots) is ScoringSlots:
            self._slots.stop_waiters()

    # ------------------------------------------------------------ writes

    async def store(self, entry: MemoryEntry) -> int | None:
        """Store ``entry``; return once the owner has applied (and published) it.

        Returns None, or for a replicated memory (``open_memory(log=...)``) the log seq
        of the batch holding the store: another node's :meth:`wait_applied` with it
        waits until that node sees the store (causal reads).

        An entry whose id is already stored replaces it (upsert), keeping the stored
        ``created_at``. Storing a new id into a full memory evicts the entry with the
        lowest relevance-weighted recency first. Waits while the request channel is full
        (backpressure). A caller cancelled after its request was queued gets
        :class:`trio.Cancelled`, and the store may or may not have been applied (in
        durable mode: committed whole, or not at all).

        Runtime complexity (owner side): O(T + log n) for T distinct tokens.

        Raises:
            TypeError: ``entry`` is not a :class:`MemoryEntry`.
            InvalidEntryError: Durable or replicated mode: ``access_count`` exceeds
                ``2**63 - 1``.
            StorageError: Durable mode: the group commit holding this store failed; the
                memory is now broken. Replicated mode: the log did not take the batch
                within ``log_timeout`` (the memory stays usable; the store may still
                appear later if the log committed it without answering).
            EmbeddingError: A dense or hybrid scorer's embedder failed on the entry's
                text: nothing is stored; the memory stays usable.
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
        """
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"store() takes a MemoryEntry, not {type(entry).__name__}")
        check_entry_built(entry)
        if not _CHECK_DURABLE_ONLY or self._storage is not None or self._replica is not None:
            self._check_storable(entry)  # it checks nothing in memory
        seq: int | None = await self._call(_STORE, entry)
        return seq

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Store every entry of ``entries``, in order, as one request with one reply.

        The owner applies the whole list in one batch, entry after entry, exactly as that
        many :meth:`store` calls in a row (upserts by id, evictions when full; a later
        entry with the same id as an earlier one replaces it). No other request is
        applied in the middle, and in durable mode the list is committed in one group
        commit: after a crash it is in the file whole or not at all. Returns once it is
        applied and published (durable: committed). Every entry is checked before
        anything is queued, so a bad one stores nothing. An empty list is still a request
        (it returns once the owner has answered it).

        Runtime complexity (owner side): the sum of the stores, O(sum(T) + m log n) for
        m entries.

        Raises:
            TypeError: ``entries`` is a single entry, a str, not iterable, or holds
                something other than a :class:`MemoryEntry` (the message gives its index).
            InvalidEntryError: Durable or replicated mode: an ``access_count`` exceeds
                ``2**63 - 1``.
            StorageError: Durable mode: the group commit failed; the memory is now broken.
                Replicated mode: as :meth:`store` (the list is one log record: applied
                whole on every node, or not at all).
            EmbeddingError: A dense or hybrid scorer's embedder failed on a new text of
                the list: none of the list is stored; the memory stays usable.
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
        """
        batch = check_entry_batch(entries)
        if self._storage is not None or self._replica is not None:  # else nothing to check
            for entry in batch:
                self._check_storable(entry)
        await self._call(_STORE_MANY, batch)

    def _check_storable(self, entry: MemoryEntry) -> None:
        durable = self._storage is not None or self._replica is not None  # any node may be
        if durable and entry.access_count > MAX_ACCESS_COUNT:
            raise InvalidEntryError(
                f"a durable memory keeps access_count in 64 bits; {entry.access_count} is too large"
            )

    def store_nowait(self, entry: MemoryEntry) -> None:
        """Queue ``entry`` for storing without waiting; not acknowledged.

        The owner applies it in order with every other request; a later ``await``-ed call
        from the same task is applied after it (in durable mode, committed in the same
        group commit or an earlier one: once that call returns, this store is durable).
        With a dense or hybrid scorer whose embedder fails on the entry's text, the
        store is dropped (nobody waits for its :class:`EmbeddingError`).

        Raises:
            TypeError: ``entry`` is not a :class:`MemoryEntry`.
            InvalidEntryError: Durable mode: ``access_count`` exceeds ``2**63 - 1``.
            trio.WouldBlock: The request channel is full (the owner lags); nothing queued.
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
        """
        if not isinstance(entry, MemoryEntry):
            raise TypeError(f"store_nowait() takes a MemoryEntry, not {type(entry).__name__}")
        self._check_storable(entry)
        self._raise_if_unusable()
        try:
            self._send.send_nowait(_Request(_STORE_NOWAIT, entry, False))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._raise_if_unusable()
            raise

    async def delete(self, id: uuid.UUID) -> bool:
        """Remove the entry ``id``; True if it was there. O(T + log n) on the owner.

        Raises:
            TypeError: ``id`` is not a :class:`uuid.UUID`.
        """
        if not isinstance(id, uuid.UUID):
            raise TypeError(f"delete() takes a uuid.UUID, not {type(id).__name__}")
        return bool(await self._call(_DELETE, id))

    async def delete_key(self, namespace: Iterable[str], key: str) -> bool:
        """Remove the live entry with ``(namespace, key)``; True if there was one.
        O(T + log n) on the owner.

        Raises:
            TypeError: ``key`` is not a str or ``namespace`` not a sequence of str.
            InvalidQueryError: A pair no entry can hold (an empty key or segment, a key
                or segment over its length limit: :func:`~actormem._entry.check_lookup_key`).
        """
        ns = check_lookup_key(namespace, key)
        return bool(await self._call(_DELETE_KEY, (ns, key)))

    async def sweep_expired(self) -> int:
        """Remove every expired entry now; return how many. The owner does this by
        itself when the earliest expiry comes (and before each batch); this is for
        callers that want it at once. O(log n) per expired entry."""
        result: int = await self._call(_SWEEP, None)
        return result

    async def consolidate(self) -> ConsolidationStats:
        """Prune and merge, as one write applied in order with every other request.

        * Prune: entries with relevance < 0.05 that are not validated (0.05 stays).
        * Merge: entries with the same namespace and category whose texts are equal
          ignoring case and runs of whitespace. The earliest-stored entry survives with
          its id and text; it takes the earliest ``created_at``, the highest relevance,
          the summed access counts, the latest ``last_accessed``, the union of tags (its
          own first) and ``validated`` if any was.

        Stores that arrive meanwhile queue behind it and are applied right after: none
        is lost. Runtime complexity: O((p + d) log n) for p pruned and d duplicated
        entries; no full scan.
        """
        result: ConsolidationStats = await self._call(_CONSOLIDATE, None)
        return result

    async def wait_applied(self, seq: int) -> None:
        """Wait until this node of a replicated memory has applied log record ``seq``
        (a seq that :meth:`store` returned on any node); then reads here see that
        store and everything before it. Returns at once for a memory that is not
        replicated, or when ``seq`` is applied already. Cancel it to bound the wait.

        Raises:
            TypeError: ``seq`` is not an int.
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
        """
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise TypeError(f"wait_applied() takes an int seq, not {type(seq).__name__}")
        await _lowlevel.checkpoint_if_cancelled()  # a cancelled caller: Cancelled
        self._raise_if_unusable()
        if self._replica is None:
            await _lowlevel.checkpoint()
            return
        await self._replica.wait_applied(self, seq)

    # ------------------------------------------------------------ reads

    def snapshot(self) -> Snapshot:
        """An immutable :class:`Snapshot` of the latest published version. O(1), sync.

        When some entry has a time to live, the memory's clock is read once: the snapshot
        judges expiry at that time (an entry expired by then is absent from all its
        reads, ``len`` included).

        Raises:
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
            TypeError: The clock did not return a timezone-aware datetime.
        """
        self._raise_if_unusable()
        state = self._state
        now = self._now() if state._ever_expiring else None
        snap: Snapshot = Snapshot._create(state, state.view(), self._snapshots, now)
        return snap

    def scan(self, snapshot: Snapshot | None = None) -> AsyncGenerator[MemoryEntry, None]:
        """The entries of ``snapshot`` (default: a :meth:`snapshot` taken now), as
        iterating it gives them (unexpired, insertion order), read in the caller's task
        a slice at a time for a long read (an export, a scan of every entry): whenever
        about :data:`~actormem._index.scoring.RETRIEVE_SLICE` (0.1 ms) has run, the
        caller's own work between entries included, it reaches the memory's fair-share
        gate as a retrieve's slices do, so while writes are in flight the owner and its
        writers take their share of the loop. Iterating a snapshot instead builds every
        entry in one step (a list, O(n) objects), and many such readers at once held a
        server's stores for seconds (16 exports of 100,000 entries: docs/server.md).
        The iterator holds the snapshot (its versions are kept) until it is exhausted or
        closed: close it when stopping early (``contextlib.aclosing``).

        ::

            async with contextlib.aclosing(memory.scan()) as entries:
                async for entry in entries:
                    ...

        Runtime complexity: O(n log n) in all for n entries (the order by insertion:
        pieces of 512 sorted, then merged as the entries are asked for), each slice
        ~0.1 ms but for a copy of the id map's values at the start (one C list copy,
        ~10 ms at 100,000).

        Raises:
            TypeError: ``snapshot`` is not a :class:`Snapshot`.
            ValueError: ``snapshot`` is another memory's.
            trio.ClosedResourceError, trio.BrokenResourceError: No snapshot given and the
                memory is closed or broken (a snapshot taken before stays readable).
        """
        if snapshot is None:
            snapshot = self.snapshot()
        elif type(snapshot) is not Snapshot:
            raise TypeError(f"scan() takes a Snapshot, not {type(snapshot).__name__}")
        elif snapshot not in self._snapshots:
            # Its memory told by the registry, not the state: a replica's bootstrap
            # replaces the state, and a snapshot taken before stays this memory's.
            raise ValueError("scan() takes a snapshot of this memory, not of another")
        return scan_sliced(snapshot, self._gate)

    async def get(self, id: uuid.UUID, *, refresh_ttl: bool = False) -> MemoryEntry | None:
        """The entry ``id`` in the latest snapshot, or None (also when it has expired).
        O(1); never waits for the owner.

        Args:
            id: The entry's id.
            refresh_ttl: Push the entry's expiry to now plus its ``ttl`` (applied by the
                owner with its next batch; the entry returned shows the old expiry).

        Raises:
            TypeError: ``id`` is not a :class:`uuid.UUID`.
        """
        if not isinstance(id, uuid.UUID):
            raise TypeError(f"get() takes a uuid.UUID, not {type(id).__name__}")
        await _lowlevel.checkpoint()
        self._raise_if_unusable()
        view = self._state.view()
        return self._read_one(view, view.get(id), refresh_ttl)

    async def get_by_key(
        self, namespace: Iterable[str], key: str, *, refresh_ttl: bool = False
    ) -> MemoryEntry | None:
        """The entry with ``(namespace, key)`` in the latest snapshot, or None (also when
        it has expired). O(1); never waits for the owner. ``refresh_ttl`` as :meth:`get`.

        Raises:
            TypeError: ``key`` is not a str or ``namespace`` not a sequence of str.
            InvalidQueryError: A pair no entry can hold (an empty key or segment, a key
                or segment over its length limit: :func:`~actormem._entry.check_lookup_key`).
        """
        ns = check_lookup_key(namespace, key)
        await _lowlevel.checkpoint()
        self._raise_if_unusable()
        view = self._state.view()
        return self._read_one(view, view.by_key(ns, key), refresh_ttl)

    def _read_one(self, view: View, rec: Record | None, refresh_ttl: bool) -> MemoryEntry | None:
        if rec is None:
            return None
        expires = rec.expires_at(view.version)
        if expires is not None:
            now = self._now()
            if expires <= now:
                return None
            if refresh_ttl:
                self._note_refresh([rec], now)
        return view.entry(rec)

    def _alive(self, view: View) -> Callable[[Record], bool] | None:
        """The expiry test of reads now (None, and no clock read, if nothing expires)."""
        return view.alive(self._now()) if self._state._ever_expiring else None

    def _now(self) -> datetime:
        return self._checked_now(self._state.clock())

    @staticmethod
    def _checked_now(now: object) -> datetime:
        """``now`` (a reading of the memory's clock) if it is a timezone-aware datetime.

        Raises:
            TypeError: It is not.
        """
        if not isinstance(now, datetime) or now.utcoffset() is None:
            raise TypeError(f"clock() must return a timezone-aware datetime, got {now!r}")
        return now

    def _note_refresh(self, recs: Iterable[Record], now: datetime) -> None:
        buf = self._pending_refresh
        was_empty = not buf and not self._pending_access
        for rec in recs:
            if rec.cols.get(rec.slot, "ttl") is not None:
                buf[rec.entry.id] = now
        if was_empty and buf:
            self._wake_owner()

    def _wake_owner(self) -> None:
        try:
            self._send.send_nowait(_FLUSH_REQUEST)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def list_entries(
        self,
        namespace: Iterable[str] | None = None,
        *,
        where: Mapping[str, Any] | None = None,
        category: MemoryCategory | Iterable[MemoryCategory] | None = None,
        tags: Iterable[str] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool = False,
    ) -> list[MemoryEntry]:
        """Entries matching the filters without a query: newest ``updated_at`` first
        (ties: the later stored first), skipping ``offset``, at most ``limit``.

        Reads the latest published snapshot in the caller's task, in slices with a
        checkpoint between them as a retrieve does (the result is that of the snapshot
        taken at the start). Does not count as an access (no ``access_count`` change).

        Args:
            namespace: Keep entries whose namespace starts with these segments.
            where: A payload filter (see :meth:`retrieve_scored`).
            category, tags: As :meth:`retrieve_scored`.
            limit: Most entries (>= 0). offset: Entries to skip first (>= 0).
            refresh_ttl: Refresh the expiry of the entries returned (see :meth:`get`).

        Runtime complexity: O(m log(offset + limit)) for m entries under the namespace
        prefix (only the namespaces under the prefix are read, never the whole memory).

        Raises:
            TypeError, InvalidQueryError: A bad filter, limit or offset.
        """
        accept = make_filter(namespace, category, tags, where)
        check_listing(limit, offset)
        prefix = () if namespace is None else tuple(namespace)
        await _lowlevel.checkpoint()
        self._raise_if_unusable()
        view = self._state.view()
        alive = self._alive(view)
        accept = with_alive(accept, alive)
        recs = await list_records_sliced(
            self._state, view, prefix, accept, limit, offset, self._registry(), self._gate
        )
        if refresh_ttl and alive is not None:
            self._note_refresh(recs, self._now())
        return [view.entry(rec) for rec in recs]

    async def list_namespaces(
        self,
        *,
        prefix: Iterable[str] | None = None,
        suffix: Iterable[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces that hold at least one (unexpired) entry, sorted.

        Args:
            prefix: Keep namespaces starting with these segments; ``"*"`` matches any one.
            suffix: Keep namespaces ending with these segments; ``"*"`` matches any one.
            max_depth: Cut each namespace to its first ``max_depth`` segments (then
                duplicates are dropped).
            limit: Most namespaces (>= 0). offset: Namespaces to skip first (>= 0).

        Runtime complexity: O(log N + M) for N distinct namespaces of which M start with
        the prefix's segments before its first ``"*"`` (a sorted index of namespaces is
        kept; the entries are not scanned).

        Raises:
            TypeError, InvalidQueryError: Bad arguments (an empty segment in ``prefix``
                or ``suffix`` included: no namespace holds one).
        """
        check_listing(limit, offset)
        await _lowlevel.checkpoint()
        self._raise_if_unusable()
        view = self._state.view()
        return list_namespaces_at(view, self._alive(view), prefix, suffix, max_depth, limit, offset)

    async def retrieve_scored(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: Iterable[str] | None = None,
        category: MemoryCategory | Iterable[MemoryCategory] | None = None,
        tags: Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        refresh_ttl: bool = False,
        min_seq: int | None = None,
        min_score: float | None = None,
        min_matched: int = 0,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> list[ScoredEntry]:
        """The ``limit`` best entries for ``query``, best first, with their scores.

        Scores the latest published snapshot in the caller's task (never waits for the
        owner). With the built-in scorers the scoring runs in slices of about
        :data:`~actormem._index.scoring.RETRIEVE_SLICE` (0.1 ms) with a checkpoint between them,
        so other tasks (writers, the owner, other readers) run meanwhile (a small
        word-overlap retrieve, up to 8,192 texts and entries and a 2,048-character
        query, runs in one step: ``docs/design.md``, "Sliced retrieves"); the result is
        still exactly that of the snapshot taken at the start. Ties keep insertion order.
        Without thresholds (the default) there is no minimum: with the default word-overlap
        scorer every entry has a score of at least 0.1, so with fewer than ``limit``
        entries all of them come back, matching or not; ``limit=0`` gives ``[]``.
        ``min_score`` and ``min_matched`` return only entries that match (see
        ``docs/retrieval.md``, "Thresholds", for what the numbers mean per scorer). The
        entries returned get their ``access_count`` and ``last_accessed`` updated by the
        owner later, in a batch (the returned values are those of the snapshot).

        Args:
            query: Text, at most :data:`~actormem.MAX_QUERY_CHARS` code points.
            limit: Most results (k), an int >= 0.
            namespace: Keep entries whose namespace starts with these segments.
            category: Keep entries of this category (or of any of these).
            tags: Keep entries carrying every one of these tags.
            where: Keep entries whose payload (``value``) matches: a mapping of dotted
                paths to a value (equality; a nested object matches field by field) or
                to operators ``{"$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte": v}``.
                Entries without a payload never match. See :mod:`actormem._json`.
            refresh_ttl: Refresh the expiry of the entries returned (see :meth:`get`).
            min_seq: A replicated memory: first wait until this node applied log
                record ``min_seq`` (see :meth:`wait_applied`), then score.
            min_score: Keep entries scoring at least this (None: no minimum). Word
                overlap scores lie in [0.1, 1.3] (0.6 for an entry of relevance 1 that
                matches no word); BM25 scores are > 0 and unbounded; dense scores are
                cosines in [-1, 1]; hybrid scores are fused ranks, below 1 / 31.
            min_matched: Keep entries whose text matches at least this many query terms
                (0: no minimum): for word overlap, query words (``query.lower().split()``,
                repeats counted) contained in the lower-cased text; for BM25 and hybrid,
                distinct tokenized query terms in the document. Refused by the dense
                scorer.
            created_after: Keep entries created at or after this timezone-aware time.
            created_before: Keep entries created strictly before this time.

        Expired entries are never returned, even before the owner removed them.

        Runtime complexity: see the scorer (word overlap: O(P + V log k)).

        Raises:
            TypeError: Wrong argument types; or the memory's ``clock`` returned something
                other than a timezone-aware datetime (no access is recorded).
            InvalidQueryError: Negative limit, over-long query, empty filter segment,
                malformed payload filter (an "Invalid filter key", an unknown operator),
                a naive datetime, a non-finite ``min_score``, a negative ``min_matched``,
                or ``min_matched`` with the dense scorer.
            trio.ClosedResourceError, trio.BrokenResourceError: See the class docs.
        """
        hits, view = await self._retrieve_hits(
            query, limit, namespace, category, tags, where, refresh_ttl, min_seq, min_score,
            min_matched, created_after, created_before,
        )  # fmt: skip
        return [ScoredEntry(entry=view.entry(rec), score=score) for score, rec in hits]

    async def _retrieve_hits(
        self,
        query: str,
        limit: int,
        namespace: Iterable[str] | None,
        category: MemoryCategory | Iterable[MemoryCategory] | None,
        tags: Iterable[str] | None,
        where: Mapping[str, Any] | None,
        refresh_ttl: bool,
        min_seq: int | None,
        min_score: float | None,
        min_matched: int,
        created_after: datetime | None,
        created_before: datetime | None,
    ) -> tuple[list[tuple[float, Record]], View]:
        """:meth:`retrieve_scored`'s work: the hits (score, record), best first, and the
        view they were read in (their entries are ``view.entry(rec)``); the accesses
        noted. The same arguments, checks and errors."""
        check_query(query, limit)
        if not (_PLAIN_RETRIEVE and min_score is None and type(min_matched) is int) or min_matched:
            check_thresholds(min_score, min_matched)
        accept: Any
        if (
            _PLAIN_RETRIEVE
            and namespace is None
            and category is None
            and tags is None
            and where is None
            and created_after is None
            and created_before is None
        ):
            accept = None  # make_filter's answer for no filter, without its calls
        else:
            accept = make_filter(namespace, category, tags, where, created_after, created_before)
        if min_matched and not matches_terms(self._state.index):
            raise InvalidQueryError(
                "min_matched= needs a scorer that matches terms (word overlap, BM25, hybrid)"
            )
        if min_seq is not None:
            await self.wait_applied(min_seq)
        # Wait for a scoring slot (SCORING_SLOTS) first, then meet the gate. Not for an
        # index that embeds the query (dense, hybrid), perhaps in a worker thread: the
        # slots would also cap the embeddings under way.
        slots = self._slots
        if slots is not None and getattr(self._state.index, "query_index", None) is not None:
            slots = None
        borrower = object()  # a token per retrieve, whatever task runs it
        waited = False
        if type(slots) is ScoringSlots:  # _OWN_SLOTS
            try:
                if not slots.take(borrower):
                    waited = True
                    await self._wait_in_line(slots, borrower)  # a schedule point
                hits, view, alive = await self._score(
                    query, limit, accept, min_score, min_matched, waited
                )
            finally:
                # Whatever was raised where (a cancel while waiting, a KeyboardInterrupt
                # just after the take): the slot is given back if it was taken.
                slots.give_back(borrower)
        else:
            try:
                if slots is not None:
                    try:
                        slots.acquire_on_behalf_of_nowait(borrower)
                    except trio.WouldBlock:
                        waited = True
                    if waited:
                        await self._wait_for_slot(slots, borrower)  # a schedule point
                hits, view, alive = await self._score(
                    query, limit, accept, min_score, min_matched, waited
                )
            finally:
                if slots is not None:
                    # Whatever was raised where (a cancel while waiting, a
                    # KeyboardInterrupt just after the acquire): the slot is given back
                    # if it was taken.
                    with contextlib.suppress(RuntimeError):  # not held by this borrower
                        slots.release_on_behalf_of(borrower)
        self._retrieves += 1
        if hits:
            self._note_access(hits)
            if refresh_ttl and alive is not None:
                self._note_refresh([rec for _, rec in hits], self._now())
        return hits, view

    async def _wait_in_line(self, slots: ScoringSlots, borrower: object) -> None:
        """:meth:`_wait_for_slot` with :class:`~.fairshare.ScoringSlots`
        (``_OWN_SLOTS``): the same checks, the same errors, the same order; the memory's
        close or break wakes the waiters through ``slots.stop_waiters``."""
        await _lowlevel.checkpoint_if_cancelled()  # as the limiter's acquire; first,
        self._raise_if_unusable()  # as every call: a cancelled caller gets Cancelled
        if not await slots.wait(borrower):  # stopped: the memory closed or broke
            await _lowlevel.checkpoint_if_cancelled()  # Cancelled first, as _score
            self._raise_if_unusable()
            raise trio.ClosedResourceError("the memory is closed")  # pragma: no cover

    async def _wait_for_slot(
        self, slots: ScoringSlots | trio.CapacityLimiter, borrower: object
    ) -> None:
        """Wait for a scoring slot for ``borrower``, first come first served. A closed or
        broken memory raises at once, and wakes the retrieves waiting when it closes or
        breaks (they take no slot), not once the retrieves holding the slots have scored
        (as it did before there were slots)."""
        await _lowlevel.checkpoint_if_cancelled()  # a cancelled caller: Cancelled
        self._raise_if_unusable()
        with trio.CancelScope() as waiting:
            self._slot_waits.add(waiting)
            try:
                await slots.acquire_on_behalf_of(borrower)
            finally:
                self._slot_waits.discard(waiting)
        if waiting.cancelled_caught:  # only _stop_slot_waits cancels it
            await _lowlevel.checkpoint_if_cancelled()  # Cancelled first, as _score
            self._raise_if_unusable()
            raise trio.ClosedResourceError("the memory is closed")  # pragma: no cover

    async def _score(
        self,
        query: str,
        limit: int,
        accept: Any,
        min_score: float | None,
        min_matched: int,
        yielded: bool,
    ) -> tuple[list[tuple[float, Record]], View, Callable[[Record], bool] | None]:
        """:meth:`retrieve_scored`'s scoring, from meeting the gate: the hits, the view
        they were scored in and its liveness predicate. ``yielded``: the caller passed a
        schedule point just before."""
        # While the gate would park a reader (closed, or readers parked before this one
        # wait for their turn), park first (before any scoring). Otherwise only a cancel
        # point now: the schedule point is the first slice boundary, or one at the end for
        # a retrieve shorter than a slice (run_retrieve_sliced), so a sliced retrieve
        # costs one task step and one scheduling round less.
        gate = self._gate
        parked = gate.would_park()
        if parked:
            await gate.checkpoint()
        else:
            await _lowlevel.checkpoint_if_cancelled()
        if self._closed or self._broken is not None:
            # Cancelled before closed, as _call: the park may end (the task rescheduled)
            # just before its scope is cancelled and the owner, cancelled by the same
            # scope, closes the memory; such a caller gets Cancelled, which its scope
            # absorbs, not ClosedResourceError escaping it in an ExceptionGroup.
            await _lowlevel.checkpoint_if_cancelled()
            self._raise_if_unusable()
        state = self._state
        view = state.view()
        alive = self._alive(view)
        accept = with_alive(accept, alive)
        hits = await run_retrieve_sliced(
            state, view, query, limit, accept, self._registry(), min_score, min_matched,
            gate, yielded=parked or yielded,
        )  # fmt: skip
        return hits, view, alive

    async def retrieve(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: Iterable[str] | None = None,
        category: MemoryCategory | Iterable[MemoryCategory] | None = None,
        tags: Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        refresh_ttl: bool = False,
        min_seq: int | None = None,
        min_score: float | None = None,
        min_matched: int = 0,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> list[MemoryEntry]:
        """The ``limit`` best entries for ``query``, best first (see :meth:`retrieve_scored`)."""
        if _RETRIEVE_DIRECT:
            hits, view = await self._retrieve_hits(
                query, limit, namespace, category, tags, where, refresh_ttl, min_seq,
                min_score, min_matched, created_after, created_before,
            )  # fmt: skip
            entry = view.entry
            return [entry(rec) for _, rec in hits]
        scored = await self.retrieve_scored(
            query,
            limit,
            namespace=namespace,
            category=category,
            tags=tags,
            where=where,
            refresh_ttl=refresh_ttl,
            min_seq=min_seq,
            min_score=min_score,
            min_matched=min_matched,
            created_after=created_after,
            created_before=created_before,
        )
        return [s.entry for s in scored]

    def _note_access(self, hits: list[tuple[float, Record]]) -> None:
        buf = self._pending_access
        was_empty = not buf and not self._pending_refresh
        if _CLOCK_FAST:
            # A datetime in UTC needs none of _now's checks; anything else gets them.
            now = self._state.clock()
            if type(now) is not datetime or now.tzinfo is not UTC:
                now = self._checked_now(now)
        else:
            now = self._now()
        # _ACCESS_BY_INT: keyed by the id's int (a node of a replicated memory: by UUID,
        # which its log encodes); the owner's apply_access takes either.
        # _ACCESS_BY_REC: keyed by the hit's record (no entry read here, no id lookup in
        # the owner); apply_access merges records that died since by id.
        by_int = _ACCESS_BY_INT and self._replica is None
        keys: list[Any]
        if by_int and _ACCESS_BY_REC:
            keys = [rec for _, rec in hits]
        elif by_int:
            keys = [rec.cols.ident(rec.slot) for _, rec in hits]
        else:
            keys = [rec.entry.id for _, rec in hits]
        for key in keys:
            prev = buf.get(key)
            if prev is None:
                buf[key] = (1, now)
            else:  # the latest time, as if each retrieve had been applied on its own
                buf[key] = (prev[0] + 1, now if now > prev[1] else prev[1])
        if was_empty:
            # Wake the owner once per batch of hits. If the channel is full the owner has
            # work queued and drains the buffer on its next wake-up anyway.
            self._wake_owner()

    def __len__(self) -> int:
        """Unexpired entries in the latest published snapshot (an entry whose expiry has
        passed by the memory's clock is not counted, even before the owner sweeps it).

        O(1) when no entry ever had a time to live; otherwise one clock reading plus
        O(k) for the k entries due but not yet swept (normally none), or O(n) while a
        durable memory commits a batch (see :meth:`View.live_count`).

        Raises:
            TypeError: The clock did not return a timezone-aware datetime.
        """
        state = self._state
        if not state._ever_expiring:
            return state._published_len
        return state.view().live_count(self._now())

    def is_empty(self) -> bool:
        """Whether the latest published snapshot holds no unexpired entry. As ``len``."""
        return len(self) == 0

    def statistics(self) -> MemoryStatistics:
        """Frozen counters (see :class:`MemoryStatistics`); ``entries`` is ``len(self)``.
        O(1) but for ``entries`` (see :meth:`__len__`), sync."""
        state = self._state
        return MemoryStatistics(
            entries=len(self),
            capacity=state.capacity,
            stores=state.stores,
            upserts=state.upserts,
            deletes=state.deletes,
            evictions=state.evictions,
            pruned=state.pruned,
            merged=state.merged,
            consolidations=state.consolidations,
            retrieves=self._retrieves,
            access_updates=state.access_updates,
            expired=state.expired,
            ttl_refreshes=state.ttl_refreshes,
            queue_depth=self._send.statistics().current_buffer_used,
            queue_capacity=self._queue_size,
            snapshot_version=state.published,
            live_snapshots=len(self._snapshots) + (0 if self._holds is None else self._holds.count),
            retained_versions=state.retained,
            log_applied_seq=None if self._replica is None else self._replica.applied,
            log_stale_seconds=None if self._replica is None else self._replica.stale_seconds(),
        )

    def __repr__(self) -> str:
        status = "broken" if self._broken else "closed" if self._closed else "open"
        where = "" if self._storage is None else f" path={self._storage.path!r}"
        entries, capacity = self._repr_len(), self._state.capacity
        return f"<actormem.Memory {status} entries={entries} capacity={capacity}{where}>"

    def _repr_len(self) -> int:
        try:
            return len(self)
        except TypeError:  # a bad clock: repr never raises
            return self._state._published_len

    # ------------------------------------------------------------ owner side

    def _next_sweep(self) -> float:
        """The trio time at which the earliest expiry comes (``inf``: none expires)."""
        nxt = self._state.next_expiry()
        if nxt is None or not self._auto_sweep:
            return math.inf
        now = self._state.clock()
        if not isinstance(now, datetime) or now.utcoffset() is None:
            return math.inf
        return _current_time() + max(0.0, nxt - now.timestamp())

    def _registry(self) -> weakref.WeakSet[Snapshot] | VersionHolds:
        """Where a retrieve or listing under way registers its view (_HOLDS_BY_VERSION)."""
        holds = self._holds
        return self._snapshots if holds is None else holds

    def _horizon(self) -> int:
        horizon = self._state.published
        if self._holds is not None:
            horizon = self._holds.oldest(horizon)
        if _HORIZON_REFS:
            # The WeakSet's own set of weak references, copied (a callback may drop one
            # meanwhile); a dead reference is a snapshot gone, as WeakSet's iteration
            # skips it.
            for ref in list(self._snapshots.data):  # type: ignore[attr-defined]
                snap = ref()
                if snap is not None and snap.version < horizon:
                    horizon = snap.version
            return horizon
        for snap in list(self._snapshots):
            if snap.version < horizon:
                horizon = snap.version
        return horizon

    def _apply(self, req: _Request, now: datetime | None) -> Any:
        state = self._state
        if req.op == _STORE or req.op == _STORE_NOWAIT:
            state.store(req.arg, now)
            return None
        if req.op == _STORE_MANY:
            state.store_many(req.arg, now)
            return None
        if req.op == _DELETE:
            return state.delete(req.arg) is not None
        if req.op == _DELETE_KEY:
            rec = state.current_by_key(*req.arg)
            return rec is not None and state.delete(rec.entry.id) is not None
        if req.op == _SWEEP:  # counts what this batch's own sweep removed too
            swept, self._swept = self._swept, 0
            return swept + (0 if now is None else state.expire(now))
        if req.op == _CONSOLIDATE:
            return state.consolidate()
        raise AssertionError(f"unknown request {req.op}")  # pragma: no cover

    def _apply_batch(self, batch: list[_Request]) -> list[tuple[_Request, outcome.Outcome[Any]]]:
        """Apply ``batch`` in order; the answers to give once it is committed and published."""
        state = self._state
        self._swept = 0
        # The owner's time for this batch, read only when some entry expires or a store
        # has a ttl (the state reads no clock). A clock returning junk only fails the
        # stores that need a time (and skips the sweep).
        now: datetime | None = None
        if state.next_expiry() is not None:
            timed = True
        elif _TIME_SCAN:
            # _needs_time of every request but a flush (which never needs the time), in
            # this loop: no generator step a request.
            timed = False
            for req in batch:
                if req.op != _FLUSH and _needs_time(req):
                    timed = True
                    break
        else:
            timed = any(_needs_time(req) for req in batch)
        if timed:
            now = state.clock()
            if not isinstance(now, datetime) or now.utcoffset() is None:
                now = None
            elif self._auto_sweep and state.next_expiry() is not None:
                self._swept = state.expire(now)
        if self._pending_access:
            hits, self._pending_access = self._pending_access, {}
            state.apply_access(hits, self._horizon())
        if self._pending_refresh:
            reads, self._pending_refresh = self._pending_refresh, {}
            state.refresh(reads, self._horizon())
        store = state.store
        replies: list[tuple[_Request, outcome.Outcome[Any]]] = []
        if _STORE_RUNS and getattr(state.index, "add_many", None) is not None:
            batch = self._apply_store_runs(batch, now, replies)
        for req in batch:
            op = req.op
            if op == _FLUSH:
                continue
            try:
                if op == _STORE or op == _STORE_NOWAIT:
                    store(req.arg, now)
                    result: outcome.Outcome[Any] = outcome.Value(None)
                else:
                    result = outcome.Value(self._apply(req, now))
            except ActorMemError as exc:
                result = outcome.Error(exc)
            if req.waits:
                replies.append((req, result))
        return replies

    def _apply_store_runs(
        self,
        batch: list[_Request],
        now: datetime | None,
        replies: list[tuple[_Request, outcome.Outcome[Any]]],
    ) -> list[_Request]:
        """:meth:`_apply_batch`'s loop when some store requests come in runs
        (:data:`_STORE_RUNS`): each run of two or more consecutive ``store`` /
        ``store_nowait`` requests of plain entries (exact :class:`MemoryEntry`, no
        ``ttl``; ``_FLUSH`` requests between them skipped) applied by one
        ``state.store_many``, every other request by :meth:`_apply`, in order; the
        answers appended to ``replies`` as the loop does. Returns the requests left to
        the caller's loop: none (all applied here). An :class:`ActorMemError` inside a
        run (none is known for plain entries) is the answer of the request whose entry
        the state had not counted as stored (``state.stores``); the run goes on after it.
        O(the stores)."""
        state = self._state
        store = state.store
        n = len(batch)
        i = 0
        while i < n:
            req = batch[i]
            op = req.op
            if op == _FLUSH:
                i += 1
                continue
            if op == _STORE or op == _STORE_NOWAIT:
                run: list[_Request] = []
                entries: list[MemoryEntry] = []
                j = i
                while j < n:
                    r = batch[j]
                    rop = r.op
                    if rop == _FLUSH:
                        j += 1
                        continue
                    if rop != _STORE and rop != _STORE_NOWAIT:
                        break
                    e = r.arg
                    if type(e) is not MemoryEntry or e.ttl is not None:
                        break
                    run.append(r)
                    entries.append(e)
                    j += 1
                if len(run) >= 2:
                    self._store_run(run, entries, now, replies)
                    i = j
                    continue
            try:
                if op == _STORE or op == _STORE_NOWAIT:
                    store(req.arg, now)
                    result: outcome.Outcome[Any] = outcome.Value(None)
                else:
                    result = outcome.Value(self._apply(req, now))
            except ActorMemError as exc:
                result = outcome.Error(exc)
            if req.waits:
                replies.append((req, result))
            i += 1
        return []

    def _store_run(
        self,
        run: list[_Request],
        entries: list[MemoryEntry],
        now: datetime | None,
        replies: list[tuple[_Request, outcome.Outcome[Any]]],
    ) -> None:
        """Apply the store requests ``run`` (their ``entries``) by ``store_many``; see
        :meth:`_apply_store_runs`. O(the stores)."""
        state = self._state
        done = 0
        while done < len(run):
            before = state.stores
            try:
                state.store_many(entries[done:] if done else entries, now)
            except ActorMemError as exc:
                # The store that raised is the first one not counted; an error after the
                # run's last store was counted (an index's add_many failing late) is the
                # last store's, as it would be one store at a time.
                failed = min(done + state.stores - before, len(run) - 1)
                for req in run[done:failed]:
                    if req.waits:
                        replies.append((req, outcome.Value(None)))
                req = run[failed]
                if req.waits:
                    replies.append((req, outcome.Error(exc)))
                done = failed + 1
                continue
            for req in run[done:] if done else run:
                if req.waits:
                    replies.append((req, outcome.Value(None)))
            return


async def _run_owner(memory: Memory, receive: trio.MemoryReceiveChannel[_Request]) -> None:
    state = memory._state
    inflight: list[_Request] = []
    try:
        while True:
            inflight = []
            try:
                sweep_at = memory._next_sweep()
                if _WAIT_UNSCOPED and sweep_at == math.inf:
                    inflight = [await receive.receive()]  # no sweep due: no deadline
                else:
                    with trio.move_on_at(sweep_at):
                        inflight = [await receive.receive()]
                if not inflight:
                    inflight = [_FLUSH_REQUEST]  # the earliest expiry came: sweep
            except trio.EndOfChannel:
                break
            _drain(receive, inflight)
            failed = await _embed_ahead(state.index, inflight)
            if failed is not None:
                inflight = _fail_unembedded(state.index, inflight, failed)
            # _GC_PAUSE: no collection while a batch is applied (and, durable, committed):
            # its journal, rows and replies die before the next one, unpromoted.
            with gc_paused() if _GC_PAUSE else contextlib.nullcontext():
                if memory._commit is not None:
                    state.defer_index()  # indexed while the commit is written (see commit)
                replies = memory._apply_batch(inflight)
                if memory._commit is not None:
                    # Durable mode: the batch is one group commit; nothing is published
                    # or acknowledged before it is on disk.
                    try:
                        await memory._commit(state.take_journal(), state.flush_index)
                    except StorageError as exc:
                        _fail_storage(memory, replies, inflight, receive, exc)
                        inflight = []
                        return
                state.publish()
                for req, result in replies:
                    req.set(result)
            inflight = []
            # Vacuum in bounded steps; yield to queued requests between steps.
            while state.vacuum(memory._horizon(), _VACUUM_STEP) == _VACUUM_STEP:
                if receive.statistics().current_buffer_used:
                    break
                await trio.lowlevel.checkpoint()
    except BaseException as exc:
        _owner_died(memory, exc, inflight, receive)
        raise
    finally:
        memory._close()
        receive.close()


#: (Read at import: trio's module has a ``__getattr__``, which keeps Python 3.11 from
#: specializing a ``trio.X`` read in a hot loop; hot45.)
_EMPTY_OR_CLOSED = (trio.WouldBlock, trio.EndOfChannel)


def _drain(receive: trio.MemoryReceiveChannel[_Request], inflight: list[_Request]) -> None:
    """Add the requests already queued to ``inflight``, up to ``_MAX_BATCH`` in all,
    without waiting: one batch."""
    while len(inflight) < _MAX_BATCH:
        try:
            inflight.append(receive.receive_nowait())
        except _EMPTY_OR_CLOSED:
            break


def _owner_died(
    memory: Memory,
    exc: BaseException,
    inflight: list[_Request],
    receive: trio.MemoryReceiveChannel[_Request],
) -> BaseException:
    """The owner stops on ``exc``: cancelled (the memory is closed) or a bug (it is
    broken). No new requests from here on (blocked senders get an error), then every
    request already taken or still queued is answered with the error returned: nobody
    waits forever."""
    if isinstance(exc, trio.Cancelled):
        error: BaseException = trio.ClosedResourceError(
            "the memory was closed (its owner was cancelled) before answering"
        )
        memory._closed = True
    else:
        memory._broken = exc
        error = trio.BrokenResourceError(_broken_message(exc))
        error.__cause__ = exc
        _log_broken(exc)
    memory._send.close()
    _fail_pending(inflight, receive, error)
    return error


def _stored_entries(batch: list[_Request]) -> Iterator[MemoryEntry]:
    """The entries ``batch`` stores, in order."""
    for req in batch:
        if req.op == _STORE or req.op == _STORE_NOWAIT:
            yield req.arg
        elif req.op == _STORE_MANY:
            yield from req.arg


async def _embed_ahead(index: Any, batch: list[_Request]) -> EmbeddingError | None:
    """Embed the new texts of ``batch``'s stores before it is applied, for an index with
    vectors (dense, hybrid): in one call, in a worker thread (so the event loop runs
    meanwhile) unless the embedder is the built-in model and they total fewer than
    ``index.inline_chars`` characters (``index.inline_ok``), then
    offered to the index, whose ``add`` finds them. Nothing to do for other indexes.

    Returns the embedder's failure (nothing offered), or None. A cancelled owner does
    not wait for the worker thread (the embedding is pure: its result is dropped), so a
    slow embedder never holds up cancellation.
    """
    missing = getattr(index, "missing", None)
    if missing is None:
        return None
    return await _embed_texts(index, missing(entry_document(e) for e in _stored_entries(batch)))


async def _embed_texts(index: Any, texts: list[str]) -> EmbeddingError | None:
    """Embed ``texts`` (new to ``index``) and offer their vectors: see :func:`_embed_ahead`."""
    if not texts:
        return None
    try:
        if index.inline_ok(texts):
            vectors = index.embed(texts)
        else:
            vectors = await trio.to_thread.run_sync(index.embed, texts, abandon_on_cancel=True)
    except EmbeddingError as exc:
        return exc
    index.offer(texts, vectors)
    return None


def _fail_unembedded(index: Any, batch: list[_Request], failed: EmbeddingError) -> list[_Request]:
    """The embedding of ``batch``'s new texts failed: answer each store, store_many or
    store_nowait that has a text without a vector with an :class:`EmbeddingError`
    (a store_nowait is dropped: nobody waits for it) and return the rest of the batch,
    in order, to be applied as usual. O(entries in the batch)."""
    kept: list[_Request] = []
    for req in batch:
        if req.op == _STORE or req.op == _STORE_NOWAIT:
            entries: Iterable[MemoryEntry] = (req.arg,)
        elif req.op == _STORE_MANY:
            entries = req.arg
        else:
            kept.append(req)
            continue
        if not index.missing(entry_document(entry) for entry in entries):
            kept.append(req)  # every text has a vector already (e.g. stored before)
            continue
        if req.waits:
            error = EmbeddingError(f"nothing stored: {failed}")
            error.__cause__ = failed.__cause__
            req.set(outcome.Error(error))
    return kept


def _fail_storage(
    memory: Memory,
    replies: list[tuple[_Request, outcome.Outcome[Any]]],
    inflight: list[_Request],
    receive: trio.MemoryReceiveChannel[_Request],
    exc: StorageError,
) -> None:
    """A commit failed: its batch's callers get ``exc``, everyone else a broken memory."""
    memory._broken = exc
    _log_broken(exc)
    for req, _ in replies:
        req.set(outcome.Error(exc))
    error = trio.BrokenResourceError(_broken_message(exc))
    error.__cause__ = exc
    _fail_pending(inflight, receive, error)


def _broken_message(exc: BaseException) -> str:
    """What a call on a memory broken by ``exc`` is told."""
    if isinstance(exc, StorageError):
        return f"the memory's storage failed, it can no longer commit: {exc}"
    return "the memory's owner task died"


def _log_broken(exc: BaseException) -> None:
    """Say once, on the ``actormem`` logger, that the memory just broke: a program whose
    calls do not see the error (a server, a background sweep's failed commit) still
    leaves a trace."""
    logging.getLogger("actormem").error(
        "actormem: the memory is broken and refuses every call from now on: %s",
        _broken_message(exc),
    )


def _fail_pending(
    inflight: list[_Request], receive: trio.MemoryReceiveChannel[_Request], error: BaseException
) -> None:
    for req in inflight:
        if req.waits:
            req.set(outcome.Error(error))
    while True:
        try:
            req = receive.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
            break
        if req.waits:
            req.set(outcome.Error(error))


def _needs_time(req: _Request) -> bool:
    if req.op == _SWEEP:
        return True
    if req.op == _STORE_MANY:
        return any(e.ttl is not None and e.expires_at is None for e in req.arg)
    if req.op != _STORE and req.op != _STORE_NOWAIT:
        return False
    entry: MemoryEntry = req.arg
    return entry.ttl is not None and entry.expires_at is None


def _validate_options(queue_size: int) -> None:
    if isinstance(queue_size, bool) or not isinstance(queue_size, int):
        raise TypeError(f"queue_size must be an int, not {type(queue_size).__name__}")
    if queue_size < 1:
        raise InvalidQueryError(f"queue_size must be >= 1, got {queue_size}")


def _check_storage_options(
    path: str | os.PathLike[str] | None, durability: Durability | str
) -> tuple[str | None, Durability]:
    if isinstance(durability, str) and not isinstance(durability, Durability):
        try:
            durability = Durability(durability)
        except ValueError:
            values = ", ".join(repr(d.value) for d in Durability)
            raise InvalidQueryError(
                f"durability must be one of {values}, got {durability!r}"
            ) from None
    if not isinstance(durability, Durability):
        raise TypeError(f"durability must be a Durability or str, not {type(durability).__name__}")
    if path is None:
        return None, durability
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str, an os.PathLike or None, not {type(path).__name__}")
    fspath = os.fspath(path)
    if not isinstance(fspath, str):
        raise TypeError("path must be a str path, not bytes")
    if not fspath or fspath == ":memory:":
        raise InvalidQueryError(
            f"path must name a file, got {fspath!r} (use path=None for in-memory)"
        )
    return fspath, durability


def _make_memory(
    capacity: int | None,
    half_life: float,
    scorer: Scorer | None,
    queue_size: int,
    clock: Callable[[], datetime] | None,
    on_remove: Callable[[MemoryEntry, str], None] | None = None,
) -> tuple[Memory, trio.MemoryReceiveChannel[_Request]]:
    _validate_options(queue_size)
    if on_remove is not None and not callable(on_remove):
        raise TypeError(f"on_remove must be callable, not {type(on_remove).__name__}")
    state = MemoryState(
        capacity=capacity,
        half_life=half_life,
        scorer=scorer if scorer is not None else WordOverlapScorer(),
        clock=clock if clock is not None else _utc_now,
    )
    state.on_remove = on_remove
    send, receive = trio.open_memory_channel[_Request](queue_size)
    return Memory._create(state, send, queue_size), receive


#: The counters of :meth:`Memory.statistics` kept in a durable memory's file: those of
#: the state, and ``retrieves`` (the handle's).
_STATE_COUNTERS = (
    "stores",
    "upserts",
    "deletes",
    "evictions",
    "pruned",
    "merged",
    "consolidations",
    "access_updates",
)


def _counters(memory: Memory) -> dict[str, int]:
    state = memory._state
    counters = {name: getattr(state, name) for name in _STATE_COUNTERS}
    counters["retrieves"] = memory._retrieves
    return counters


def _restore_counters(memory: Memory, saved: dict[str, int]) -> None:
    """Continue the counters saved in the file (loading's evictions add to them)."""
    state = memory._state
    for name in _STATE_COUNTERS:
        setattr(state, name, getattr(state, name) + saved.get(name, 0))
    memory._retrieves += saved.get("retrieves", 0)


def _run_into(box: list[Any], fn: Callable[..., Any], *args: Any) -> None:
    """``box.append(fn(*args))``, for ``trio.to_thread.run_sync`` when ``fn`` opens
    something the caller must close on an error: the result is in the caller's hands
    (``box``, made before the call) from the moment the thread made it, so an exception
    on the event loop after the thread finished and before the caller's next statement
    (a ``KeyboardInterrupt``: trio raises it at any bytecode of unprotected code) cannot
    drop it unclosed. Blocking (it is ``fn``'s)."""
    box.append(fn(*args))


async def _close_storage(
    store: SqliteStore,
    counters: dict[str, int] | None = None,
    image: dict[str, bytes] | None = None,
) -> None:
    """Save ``image`` (the index image, unless None) and ``counters`` (unless None: a
    broken memory's are not trusted) and close."""

    def close() -> None:
        try:
            if counters is not None:  # a clean close: the access updates held back
                store.flush_accesses()
            if image is not None:
                store.write_image(image)
            if counters is not None:
                store.save_counters(counters)
        finally:
            store.close()

    with trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(close)


def _load(
    store: SqliteStore,
    state: MemoryState,
    entries: list[tuple[int, MemoryEntry]],
    ahead: list[Any] | None = None,
) -> None:
    """Rebuild ``state`` from a file's rows and delete what eviction dropped, restoring
    the index from the file's image when it describes the rows; with a dense or hybrid
    index, reuse the file's vectors of this model and store the ones computed now.
    ``ahead``: ``[(image, prepared)]`` when the open prepared the image's part while
    reading the rows (``MemoryState.prepare_image``), used for that very image only.
    Blocking."""
    index: Any = state.index
    image, store.image = store.image, None  # not kept for the session
    if getattr(index, "stored_vector", None) is None:
        before = state.index
        prepared = None
        if ahead and image is not None and ahead[0][0] is image:
            prepared = ahead[0][1]
        dropped = state.load(entries, image, prepared)
        # A restored index is a new object; a rebuilt one (no image, or refused) is not.
        store.image_fresh = image is not None and state.index is not before
        store.delete_seqs(dropped)
        return
    stored = store.read_vectors(index.model_name, index.dim)
    computed: list[tuple[int, bytes, bytes]] = []
    dropped = state.load(_embedded_ahead(index, entries, stored, computed))
    # Vectors of rows that are gone (written while they lived, by an older actormem or a
    # foreign program) are deleted with the new ones' insertion; deleting their entry
    # rows too changes nothing (there are none).
    orphans = set(stored).difference(seq for seq, _ in entries)
    if computed or orphans:
        store.write(Batch([(seq,) for seq in sorted(orphans)], [], [], vectors=computed))
    store.delete_seqs(dropped)


def _embedded_ahead(
    index: Any,
    rows: list[tuple[int, MemoryEntry]],
    stored: dict[int, tuple[bytes, bytes]],
    computed: list[tuple[int, bytes, bytes]],
    chunk: int = 512,
) -> Iterator[tuple[int, MemoryEntry]]:
    """``rows``, with the vectors of each ``chunk`` of them offered to ``index`` before
    they are loaded: the file's (``stored``, by seq) when made from the same text, else
    embedded in one call and appended to ``computed`` as ``(seq, text_hash, bytes)`` for
    the file."""
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        reuse: dict[str, bytes] = {}
        for seq, entry in part:
            saved = stored.get(seq)
            if saved is not None:
                text = entry_document(entry)
                if saved[0] == text_hash(text):
                    reuse[text] = saved[1]
        fresh = [t for t in index.missing(reuse) if t in reuse]
        if fresh:
            index.offer_stored(fresh, [reuse[t] for t in fresh])
        texts: list[str] = index.missing(entry_document(entry) for _, entry in part)
        if texts:
            vectors = index.embed(texts)
            index.offer(texts, vectors)
            by_text = {t: v for t, v in zip(texts, vectors, strict=True)}
            for seq, entry in part:
                text = entry_document(entry)
                vec = by_text.get(text)
                if vec is not None:
                    computed.append((seq, text_hash(text), np.asarray(vec, "<f4").tobytes()))
        yield from part


def _attach_store(memory: Memory, store: SqliteStore) -> None:
    """Make ``memory`` durable over ``store`` (opened and loaded): each batch's journal
    becomes one transaction, written in a worker thread by :func:`_in_thread_while`
    while the owner indexes the batch, or, when :data:`_INLINE_COMMIT` and
    ``store.inline_ok`` allow, by the owner itself (:func:`_commit_inline`)."""
    inline = _INLINE_COMMIT and store.durability is Durability.NORMAL
    if inline:
        store.take_checkpoints()  # no checkpoint inside a commit made on the loop
    # Both bounds of the held-back access updates are read here, once, as the knob is:
    # the store keeps ACCESS_PENDING (defer_accesses), the commit below the delay.
    defer = sqlite_store._DEFER_ACCESS
    if defer:
        store.defer_accesses(sqlite_store.ACCESS_PENDING)
    delay = sqlite_store.ACCESS_DELAY
    checkpoints = _Checkpoints(memory, store)
    # The closure holds the memory weakly: the memory holds the closure (``_commit``),
    # and a cycle between them kept every closed durable memory (its state, indexes and
    # entries) until a full collection, which the load's gc.freeze() may put off for good.
    memory_ref = weakref.ref(memory)

    async def commit(journal: list[tuple[int, Record]], meanwhile: Callable[[], None]) -> None:
        memory = memory_ref()
        assert memory is not None  # its owner commits through it
        flush = False  # (a store that holds nothing back writes every access update)
        if defer:  # access updates held back: written once due (sqlite._DEFER_ACCESS)
            now = _current_time()
            flush = now >= memory._access_due
        if not journal and not flush:
            meanwhile()
            return
        batch = store.prepare(
            journal, getattr(memory._state.index, "stored_vector", None), flush=flush
        )
        if defer:
            if not store.pending_accesses:
                memory._access_due = math.inf
            elif memory._access_due == math.inf:  # the first held back since the last
                memory._access_due = now + delay
                if not memory._access_timer:
                    memory._access_timer = True
                    trio.lowlevel.spawn_system_task(
                        _access_timer, memory, name="actormem access timer"
                    )
            if not len(batch) and not batch.vectors:  # only access updates, held back
                meanwhile()
                return
        on_loop = inline and _INLINE_COMMIT and store.inline_ok(batch, INLINE_ROWS)
        done = on_loop and _commit_inline(store.write_inline, batch, meanwhile)
        ended = checkpoints.ended
        if (
            not done
            and on_loop
            and ended is not None
            and not ended.is_set()
            and sqlite_store._CHECKPOINT_RESTARTS
        ):
            # Locked, most likely by the store's own checkpoint beside (its FULL step,
            # sqlite._CHECKPOINT_RESTARTS, holds the write lock for a few frames and
            # its fsyncs): wait for it here rather than wake a thread to wait for it.
            with trio.CancelScope(shield=True):
                await ended.wait()
            done = _commit_inline(store.write_inline, batch, meanwhile)
        if not done:
            gate = memory._gate
            gate.commit_started()
            try:
                await _in_thread_while(store.write, batch, meanwhile)
            finally:
                gate.commit_ended()
        checkpoints.last_write = _current_time()
        if store.checkpoint_due():  # beside the writer: the batch is answered at once
            checkpoints.start()

    memory._storage = store
    memory._commit = commit


class _Checkpoints:
    """A durable memory's checkpoints beside the writer (:func:`_attach_store`): starts
    them in a worker thread, not waited for, and on their end starts the idle
    checkpoints when one left frames. Holds its memory weakly, so that nothing of the
    commit path keeps a closed memory alive in a reference cycle."""

    __slots__ = ("_memory", "ended", "last_write", "store")

    def __init__(self, memory: Memory, store: SqliteStore) -> None:
        self._memory = weakref.ref(memory)
        self.store = store
        #: Set once the last checkpoint beside the writer started here has ended.
        self.ended: trio.Event | None = None
        #: The trio time of the last commit (the idle checkpoints wait for a quiet spell).
        self.last_write = _current_time()

    def start(self) -> bool:
        """Start a checkpoint beside the writer in a worker thread, not waited for;
        False if no thread could be had (its failure is ignored: the next commit, or
        idle checkpoint, retries). On the loop. O(1)."""
        ended = trio.Event()
        try:
            trio.lowlevel.start_thread_soon(
                self.store.checkpoint_beside(),
                _ended(ended, self.over),
                name="actormem checkpoint",
            )
        except Exception:
            self.store.checkpoint_not_started()
            return False
        self.ended = ended
        return True

    def over(self) -> None:
        """On the loop, once a checkpoint beside ended: if it left frames in the WAL (a
        reader pinned them) or failed, start the idle checkpoints unless they run. O(1)."""
        memory = self._memory()
        if (
            memory is not None
            and sqlite_store._IDLE_CHECKPOINTS
            and memory._idle_scope is None
            and not memory._closed
            and self.store.checkpoint_left_frames()
        ):
            scope = memory._idle_scope = trio.CancelScope()
            try:
                trio.lowlevel.spawn_system_task(
                    _idle_checkpoints, memory, self, scope, name="actormem idle checkpoint"
                )
            except RuntimeError:  # the run is ending: the close copies the WAL
                memory._idle_scope = None


async def _access_timer(memory: Memory) -> None:
    """Wake an idle owner once the access updates its store holds back are due
    (``memory._access_due``), so that it commits them: a system task, one at a time,
    started when the first update is held back and ended once it woke the owner or
    none is held back any more. A busy owner commits them with its next batch anyway;
    a deadline on the owner's own wait instead cost a cancel scope at every batch.
    A wake-up that finds the queue full or closed is dropped (the owner is busy, or
    gone: its close writes them)."""
    try:
        while memory._access_due != math.inf:
            await trio.sleep_until(memory._access_due)
            if _current_time() >= memory._access_due:
                memory._wake_owner()
                break
    finally:
        memory._access_timer = False


async def _idle_checkpoints(
    memory: Memory, checkpoints: _Checkpoints, scope: trio.CancelScope
) -> None:
    """A durable memory's checkpoints while it commits nothing (``sqlite.IDLE_CHECKPOINT``):
    a system task, started once a checkpoint beside the writer left frames in the WAL
    (a reader's) or failed. Once no commit came for ``IDLE_CHECKPOINT`` seconds, it
    starts another PASSIVE checkpoint beside (``checkpoints.start``: a worker thread it
    does not wait for but through ``checkpoints.ended``); while that one leaves frames
    too, again after twice as long each time, up to ``IDLE_CHECKPOINT_MAX``. It ends
    when a checkpoint (its own or a commit's) copied every frame, when no thread can be
    had, or when the memory closes (``memory._close`` cancels ``scope``; a checkpoint it
    started is finished first by the store's close, which takes the checkpoint's lock).
    Never blocks the owner: it only starts threads, and reads the store's state on the
    loop."""
    store = checkpoints.store
    delay = sqlite_store.IDLE_CHECKPOINT
    retried_at = -math.inf
    try:
        with scope:
            while not memory._closed and memory._broken is None:
                ended = checkpoints.ended
                if ended is not None and not ended.is_set():
                    await ended.wait()  # a checkpoint runs (a commit's or ours)
                    continue
                if not store.checkpoint_left_frames():
                    return
                last_write = checkpoints.last_write
                if last_write >= retried_at:  # a commit since the last retry
                    delay = sqlite_store.IDLE_CHECKPOINT
                wake = max(last_write, retried_at) + delay
                if _current_time() < wake:
                    await trio.sleep_until(wake)
                    continue
                if not store.idle_checkpoint_due() or not checkpoints.start():
                    return
                retried_at = _current_time()
                delay = min(2 * delay, sqlite_store.IDLE_CHECKPOINT_MAX)
    finally:
        if memory._idle_scope is scope:
            memory._idle_scope = None


def _ended(
    event: trio.Event, after: Callable[[], None] | None = None
) -> Callable[[outcome.Outcome[None]], None]:
    """The delivery of a checkpoint beside the writer, called in its thread: set
    ``event`` on the loop, then call ``after`` there (the store keeps the checkpoint's
    result, ``SqliteStore.checkpoint_due``, and it raises nothing); nothing once the
    loop is gone."""
    token = trio.lowlevel.current_trio_token()

    def on_loop() -> None:
        event.set()
        if after is not None:
            after()

    def deliver(result: outcome.Outcome[None]) -> None:
        try:
            token.run_sync_soon(on_loop)
        except trio.RunFinishedError:
            pass

    return deliver


def _commit_inline(fn: Callable[[_T], bool], arg: _T, meanwhile: Callable[[], None]) -> bool:
    """:func:`_in_thread_while` without the thread: ``fn(arg)``, then ``meanwhile()``;
    raise what ``meanwhile`` or else ``fn`` raised (``meanwhile`` runs after a failed
    ``fn`` too). ``fn`` returning False (nothing done: the database is locked by another
    program) returns False without calling ``meanwhile``: the caller hands the batch
    to the thread then. No schedule point: nothing else runs on the loop meanwhile, so
    no cancellation comes between the commit and the batch's publishing."""
    try:
        done = fn(arg)
    except BaseException:
        meanwhile()
        raise
    if done:
        meanwhile()
    return done


async def _in_thread_while(
    fn: Callable[[_T], None], arg: _T, meanwhile: Callable[[], None]
) -> None:
    """Run ``fn(arg)`` in a worker thread and ``meanwhile()`` here at the same time; wait
    (shielded from cancellation, like ``trio.to_thread.run_sync``) for the thread, then
    raise what ``meanwhile`` or else ``fn`` raised.

    The group commit overlaps with indexing the batch this way: the indexing runs while
    the OS wakes the worker (which hides a lone store's indexing), and the worker writes
    whenever it holds the GIL (SQLite releases it while it works). With a large batch
    the worker mostly waits for the indexing to end (docs/benchmarks.md, "Where a batch
    of 64 goes"). The thread comes from trio's thread cache
    (``trio.lowlevel.start_thread_soon``) and starts at once, not at the next checkpoint.
    """
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    result: list[outcome.Outcome[None]] = []

    def deliver(got: outcome.Outcome[None]) -> None:  # in the worker thread
        result.append(got)
        token.run_sync_soon(done.set)

    trio.lowlevel.start_thread_soon(lambda: fn(arg), deliver, name="actormem group commit")
    try:
        meanwhile()
    finally:
        with trio.CancelScope(shield=True):
            await done.wait()
    result[0].unwrap()
