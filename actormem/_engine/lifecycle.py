"""Opening a memory, running its owner task and closing it: :func:`open_memory` and
:func:`serve_memory`.

A memory is built by :mod:`~actormem._engine.memory` (the handle and the owner loop);
in durable mode its file is opened and loaded here first, in worker threads; with
``log=...`` it becomes a node of a replicated memory (:mod:`~actormem._engine.replica`,
which builds on the memory module: this module sits above both, so neither imports the
other's caller). At the end the owner loop returns, and a durable memory's file is closed,
keeping the index image at a clean close (``docs/durability.md``).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import trio

from .._entry import MemoryEntry
from .._errors import InvalidQueryError, StorageError
from .._index.images import dump_index
from .._index.scoring import Scorer
from .._record import NEVER, Record
from .._storage.sqlite import Durability, Opening, SqliteStore
from .._util import gc_paused, to_oldest_generation
from .memory import (
    DEFAULT_QUEUE_SIZE,
    Memory,
    _attach_store,
    _check_storage_options,
    _close_storage,
    _counters,
    _load,
    _make_memory,
    _Request,
    _restore_counters,
    _run_into,
    _run_owner,
)
from .state import DEFAULT_HALF_LIFE, MemoryState

if TYPE_CHECKING:  # the replica's module is imported only for a node (log=...)
    from .replica import ReplicaOptions

__all__ = ["open_memory", "serve_memory"]

#: The collector stays paused from reading a file's rows to the end of the load (one
#: ``gc_paused`` around both), so it never scans the decoded entries: the load untracks
#: them before it resumes. False: each phase pauses it alone (the path before it),
#: and the young collection that follows the read visits every entry (~0.5 s at 1M).
_ONE_GC_PAUSE = True

#: After a file's load, while the collector is still paused, every object it tracks is
#: moved to its oldest generation at once (``gc.freeze()`` then ``gc.unfreeze()``: two
#: list splices, nothing left frozen), so that the young collection that would follow
#: the pause does not walk the load's containers (the state's and the index's dicts and
#: lists, ~6M references at 1M: ~0.1-0.2 s before the first answer) and the next
#: middle one does not walk them again; full collections still see everything. Not
#: when the application froze objects itself (``gc.unfreeze()`` would undo its freeze),
#: nor for a state below :data:`_PROMOTE_MIN` entries. The process's other young
#: objects go to the oldest generation as well (a cycle among them is collected by the
#: next full collection instead of a young one). False: the young collection walks them
#: (the path before).
_PROMOTE_LOADED = True
_PROMOTE_MIN = 10_000

#: A file's state is loaded while its ``quick_check`` still runs beside, on the second
#: core (``SqliteStore.open_read`` and ``Opening.finish``: the check is joined, and a
#: file it refuses left unchanged, before the file is opened for writing), instead of
#: sharing that core with the row reader's thread while the rows are read. False:
#: ``SqliteStore.open`` then the load (the path before; the same state and errors).
_LOAD_BEFORE_CHECK = True


async def _open_memory(
    path: str | os.PathLike[str] | None,
    durability: Durability | str,
    capacity: int | None,
    half_life: float,
    scorer: Scorer | None,
    queue_size: int,
    clock: Callable[[], datetime] | None,
    on_remove: Callable[[MemoryEntry, str], None] | None,
    log: str | None = None,
    name: str | None = None,
    log_options: ReplicaOptions | None = None,
    into: list[tuple[Memory, trio.MemoryReceiveChannel[_Request]]] | None = None,
) -> tuple[Memory, trio.MemoryReceiveChannel[_Request]]:
    """Build a memory; in durable mode open its file and load it (in worker threads);
    with ``log``, make it a node of the replicated memory ``name``.

    ``into`` gets ``(memory, receive)`` as soon as the memory is made, before anything
    is opened: the caller closes what the memory holds (:func:`_release`) if an
    exception (a ``KeyboardInterrupt``: trio raises it at any bytecode of unprotected
    code) strikes after this returned and before the caller's own ``try``. Whatever
    this opened and did not attach to the memory is closed here when it raises."""
    fspath, durability = _check_storage_options(path, durability)
    if log is None and (name is not None or log_options is not None):
        raise InvalidQueryError("name and log_options go with log= (a replicated memory)")
    memory, receive = _make_memory(capacity, half_life, scorer, queue_size, clock, on_remove)
    if into is not None:
        into.append((memory, receive))
    if log is not None:
        from .replica import open_replica  # only a node needs it (and pglog, log)

        await open_replica(memory, log, name, fspath, durability, log_options)
        return memory, receive
    if fspath is None:
        return memory, receive
    # Threads are not abandoned on cancellation (trio's default), so a cancelled open
    # still hands back the store, and the next checkpoint closes it.
    ahead: list[Any] = []  # the index image's part prepared while the rows are read
    # the state's bulk load of the rows read so far, while the rest are read
    # (not for a dense or hybrid index: it loads once the store is made, from its vectors)
    state = memory._state
    vectors = getattr(state.index, "stored_vector", None) is not None
    fed = state.feed_ahead() if _LOAD_BEFORE_CHECK and not vectors else None
    prepare = partial(_prepare, memory._state, ahead, fed, fspath)
    # Each step inside the try that closes what the steps before it opened, and each
    # thread's result in a list made before the thread started (_run_into, or `made`
    # filled by _load_opening): an interrupt between a thread's end and the next
    # statement (the second Ctrl-C) finds what it opened there, and it is closed, up to
    # the store's attachment to the memory (from then on the caller closes it).
    opened: list[Any] = []  # [(the Opening or the store, the rows)]
    made: list[SqliteStore] = []  # the store, once made (_LOAD_BEFORE_CHECK)
    check_beside = _LOAD_BEFORE_CHECK
    try:
        with gc_paused() if _ONE_GC_PAUSE else contextlib.nullcontext():
            if check_beside:
                await trio.to_thread.run_sync(
                    _run_into, opened, SqliteStore.open_read, fspath, durability, prepare, fed
                )
                opening, entries = opened[0]
                await trio.to_thread.run_sync(
                    _load_opening, opening, memory._state, entries, ahead, made, fed
                )
                fed = None  # (its scratch freed)
            else:
                await trio.to_thread.run_sync(
                    _run_into, opened, SqliteStore.open, fspath, durability, prepare
                )
                store, entries = opened[0]
                made.append(store)
                await trio.to_thread.run_sync(_load, store, memory._state, entries, ahead)
            del entries
            opened[0] = opened[0][:1]  # the rows freed now (the opener kept for the except)
            if _PROMOTE_LOADED and len(memory._state) >= _PROMOTE_MIN:
                # Still paused: no young collection walks the load's containers (~0.1-0.2
                # s at 1M, on the way to the first answer), and none hides them for good.
                to_oldest_generation()
        store = made[0]
        _restore_counters(memory, store.saved_counters)
        _attach_store(memory, store)
    except BaseException:
        if check_beside and opened:
            opened[0][0].abort()  # a no-op once finished
        if not check_beside and opened and not made:
            made.append(opened[0][0])
        if made:
            memory._storage = None  # (if attached: not the caller's to close again)
            await _close_storage(made[0])
        raise
    return memory, receive


async def _release(memory: Memory) -> None:
    """Close what ``memory`` holds when its owner task did not close it (an exception
    between the open and the owner's start): its file, and a replica's log connection.
    Shielded; idempotent (both closes are), so it may follow the owner's own close."""
    try:
        if memory._storage is not None:
            await _close_storage(memory._storage)
    finally:
        if memory._replica is not None:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(memory._replica.close_log)


def _load_opening(
    opening: Opening,
    state: MemoryState,
    entries: list[tuple[int, MemoryEntry]],
    ahead: list[Any],
    made: list[SqliteStore],
    fed: Any = None,
) -> None:
    """:func:`_load` for a file :meth:`SqliteStore.open_read` read: the state loaded
    while the file's ``quick_check`` may still run beside (:data:`_LOAD_BEFORE_CHECK`),
    then the store made (``opening.finish()``: the check joined, its error raised,
    before the file is opened for writing), appended to ``made``, and the evicted rows
    deleted. A dense or hybrid index needs the store first (its vectors): made first.
    ``fed``: ``MemoryState.feed_ahead``'s feed the read handed the rows to, or None.
    Blocking."""
    if getattr(state.index, "stored_vector", None) is not None:
        made.append(opening.finish())
        _load(made[0], state, entries, ahead)
        return
    image = opening.image
    prepared = None
    if ahead and image is not None and ahead[0][0] is image:
        prepared = ahead[0][1]
    before = state.index
    dropped = state.load(entries, image, prepared, fed)
    store = opening.finish()
    made.append(store)
    store.image = None  # not kept for the session (as _load)
    # A restored index is a new object; a rebuilt one (no image, or refused) is not.
    store.image_fresh = image is not None and state.index is not before
    store.delete_seqs(dropped)


def _prepare(
    state: MemoryState, ahead: list[Any], fed: Any, path: str, image: dict[str, bytes]
) -> Any:
    """``read_file``'s ``prepare``: the image-only part of restoring ``state``'s index
    from ``image`` (``MemoryState.prepare_image``), kept in ``ahead`` for the load; the
    rows ``fed`` (the state's feed, or None) sizes its tables for, from the image."""
    if fed is not None:
        try:
            size = os.path.getsize(path)
        except OSError:
            size = 0
        fed.expect(image, size)
    prepared = state.prepare_image(image)
    ahead[:] = [(image, prepared)]
    return prepared


async def _serve(memory: Memory, receive: trio.MemoryReceiveChannel[_Request]) -> None:
    """The owner loop, then closing a durable memory's file (shielded)."""
    try:
        if memory._replica is not None:
            await memory._replica.run(memory, receive)
        else:
            await _run_owner(memory, receive)
    finally:
        if memory._storage is not None:
            counters = _counters(memory) if memory._broken is None else None
            image = None
            if memory._broken is None and memory._replica is None:
                image = _index_image(memory._state, memory._storage)
            try:
                await _close_storage(memory._storage, counters, image)
            except StorageError:
                if memory._broken is None:
                    raise
                # Closing after a failed commit: the callers already have the error.


def _index_image(state: MemoryState, store: SqliteStore) -> dict[str, bytes] | None:
    """The image of ``state``'s index to keep beside the rows at a clean close, or None:
    the file's image is still fresh, no image is wanted (``store.keep_image`` False: a
    file removed after its close), the memory is empty, or its index has no image
    (dense, hybrid, a custom tokenizer). Runs on the event loop: readers may still fill
    the index's caches, never while this runs. O(index size), vectorised."""
    if store.image_fresh or not store.keep_image or not len(state):
        return None
    records = sorted((r for r in state._by_id.values() if r.died == NEVER), key=_seq_of)
    try:
        return dump_index(state.index, records)
    except Exception:  # a bug here must not keep the file from closing
        logging.getLogger("actormem").exception("actormem: saving the index image failed")
        return None


def _seq_of(rec: Record) -> int:
    return rec.seq


async def serve_memory(
    *,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | str = Durability.NORMAL,
    capacity: int | None = None,
    half_life: float = DEFAULT_HALF_LIFE,
    scorer: Scorer | None = None,
    queue_size: int = DEFAULT_QUEUE_SIZE,
    clock: Callable[[], datetime] | None = None,
    on_remove: Callable[[MemoryEntry, str], None] | None = None,
    log: str | None = None,
    name: str | None = None,
    log_options: ReplicaOptions | None = None,
    task_status: trio.TaskStatus[Memory] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a memory's owner task; the form for ``memory = await nursery.start(serve_memory)``.

    Returns when the memory is closed (:meth:`Memory.aclose`) and every queued request
    was answered (and, in durable mode, the file is closed). See :func:`open_memory` for
    the arguments.

    Raises:
        TypeError, InvalidQueryError: A bad option (raised from ``nursery.start``).
        StorageError: The file cannot be opened (raised from ``nursery.start``).
    """
    opened: list[tuple[Memory, trio.MemoryReceiveChannel[_Request]]] = []
    try:
        await _open_memory(
            path, durability, capacity, half_life, scorer, queue_size, clock, on_remove,
            log, name, log_options, opened,
        )  # fmt: skip
        memory, receive = opened[0]
        task_status.started(memory)
        await _serve(memory, receive)
    except BaseException:
        # Before the owner loop's try (an exception, a KeyboardInterrupt, anywhere from
        # the open to there) nothing else closes the file or the log; after it, the
        # loop's own close ran and closing again is a no-op.
        if opened:
            await _release(opened[0][0])
        raise


@asynccontextmanager
async def open_memory(
    *,
    path: str | os.PathLike[str] | None = None,
    durability: Durability | str = Durability.NORMAL,
    capacity: int | None = None,
    half_life: float = DEFAULT_HALF_LIFE,
    scorer: Scorer | None = None,
    queue_size: int = DEFAULT_QUEUE_SIZE,
    clock: Callable[[], datetime] | None = None,
    on_remove: Callable[[MemoryEntry, str], None] | None = None,
    log: str | None = None,
    name: str | None = None,
    log_options: ReplicaOptions | None = None,
) -> AsyncIterator[Memory]:
    """Open a memory: ``async with open_memory(path="memory.db") as memory: ...``.

    Starts the owner task in a nursery of its own; on exit, closes the memory, lets the
    owner answer what is queued, and waits for it (no task outlives the block). A
    cancellation or ``KeyboardInterrupt`` during the open closes whatever it had opened
    (the file and its lock, a node's log connection) before it propagates
    (``docs/durability.md``, "Cancellation").

    With ``path=None`` (the default) the memory lives in this process only. With a path
    it is durable: the file (SQLite, WAL mode; created if missing) is locked, validated
    and loaded before the block starts, every write is acknowledged only after the
    group commit holding it returned. Access bookkeeping (hits, ``refresh_ttl``
    expiries) is held back and committed later, with the first commit once 4,096
    entries' changes wait or the oldest is 1 s old, and at a clean close: a crash may
    lose that much of it, never a write (``docs/durability.md``, "Access counts").
    Reads never touch the file. See ``docs/durability.md``.

    Args:
        path: The database file, or ``None`` for a memory without a file. A new file is
            created with mode 0600; ``<path>.lock`` exists while the memory is open.
        durability: What an acknowledged write survives (durable mode only):

            * ``"normal"`` (:attr:`Durability.NORMAL`, the default): WAL with
              ``synchronous=NORMAL``. Survives a crash or kill of the process; an OS
              crash or power loss may roll back the most recent commits (never
              corrupts).
            * ``"full"`` (:attr:`Durability.FULL`): WAL with ``synchronous=FULL``, one
              fsync per group commit. Also survives power loss.
        capacity: Most entries kept (an int >= 1), or ``None`` for unbounded: then nothing
            is ever evicted and memory grows until you delete or consolidate. A file with
            more entries loads as if its entries had been stored, in insertion order, into
            a memory of this capacity: whenever it is full, the usual eviction order picks
            the entry to drop (so the last entries loaded stay); those evictions are
            committed before the block starts.
        half_life: Seconds for an entry's relevance-weighted recency
            ``relevance * 0.5 ** (age / half_life)`` to halve (default 7 days); age counts
            from ``last_accessed``, else ``created_at``. Orders eviction. At least 1e-6.
        scorer: How retrieve ranks entries; :class:`~actormem.WordOverlapScorer` by default.
        queue_size: Buffer of the request channel (>= 1): how many write requests may wait
            for the owner before ``store`` blocks and ``store_nowait`` raises.
        clock: Returns the current timezone-aware datetime, used for ``last_accessed``
            (tests pass a fake one); ``datetime.now(UTC)`` by default. A retrieve whose
            clock returns anything else raises ``TypeError`` (and updates nothing).
        on_remove: Called as ``on_remove(entry, cause)`` by the owner, synchronously,
            for every entry that leaves the memory, with ``cause`` one of
            ``"replaced"`` (an upsert), ``"evicted"``, ``"deleted"``, ``"pruned"``,
            ``"merged"`` (folded into an earlier duplicate) or ``"expired"`` (its time
            to live ran out: removed by the owner's sweep). It runs when the owner
            applies the change, before the change is committed or published, and also
            for evictions while loading a file. It must be quick and must not raise:
            an exception in it is a bug and breaks the memory.
        log: A PostgreSQL connection string (``"postgresql://host/db"``): this memory
            is then one *node* of the replicated memory ``name``, following the ordered
            write log kept in that database (see ``docs/replication.md``; needs
            ``actormem[postgres]``). ``path`` is the node's local checkpoint (optional:
            without it the node replays the log's snapshot and records at every start).
            A write returns once its batch is in the log and applied here;
            ``store`` returns the batch's seq. Every node must use the same
            ``capacity`` and ``half_life`` (those the log was created with).
        name: The replicated memory's name (a letter, then up to 62 letters, digits,
            ``_`` or ``-``); required with ``log``.
        log_options: Timeouts and intervals of a node
            (:class:`~actormem._engine.replica.ReplicaOptions`); the defaults suit a LAN.

    Runtime complexity: opening a file is O(file size) (validation, ``quick_check`` and
    one scan) plus O(n (T + log n)) to rebuild the indexes, or O(n log n + image size)
    when the file keeps an image of the index that describes its rows (written at a clean
    close, checked before it is used, never trusted: ``docs/durability.md``).

    Raises:
        TypeError, InvalidQueryError: A bad option (nothing is started).
        StorageError: The file cannot be used: directory missing or not writable, held by
            another memory (in this or another process), not an actormem database, written
            by a newer schema version, or corrupted. The file is left unchanged. With
            ``log``: the server does not answer within ``log_options.log_timeout``, the
            log was written by a newer actormem, or the file is the checkpoint of another
            memory (nothing is changed in either).
    """
    opened: list[tuple[Memory, trio.MemoryReceiveChannel[_Request]]] = []
    body_error: BaseException | None = None
    served = False  # the owner task started: its end closes the file
    try:
        # The open inside the try: `opened` holds the memory from the moment it is made
        # (the store is attached to it by then), so an interrupt right after the open
        # returned still finds it.
        await _open_memory(
            path, durability, capacity, half_life, scorer, queue_size, clock, on_remove,
            log, name, log_options, opened,
        )  # fmt: skip
        memory, receive = opened[0]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve, memory, receive, name="actormem owner")
            served = True
            try:
                yield memory
            except BaseException as exc:
                body_error = exc
                raise
            finally:
                memory._close()
    except BaseExceptionGroup as group:
        # The nursery wraps what the body raised; hand the caller its own exception back
        # when nothing else went wrong (an owner crash keeps the group).
        if body_error is not None and len(group.exceptions) == 1:
            if group.exceptions[0] is body_error:
                raise body_error from body_error.__cause__
        raise
    finally:
        if not served and opened:
            # An exception (a KeyboardInterrupt, which trio raises at any bytecode of
            # this unprotected code) before the owner started: nothing else closes the
            # file (its lock would stay held for the rest of the process) or a
            # replica's log connection. Closing twice is harmless (both are idempotent).
            await _release(opened[0][0])
