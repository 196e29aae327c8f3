"""A replica of one memory: the owner task of a node that follows a shared write log.

Theory of operation
-------------------
``open_memory(log=DSN, name=..., path=...)`` makes this process a *node* of the memory
``name``: state-machine replication over the ordered log of
:mod:`actormem._storage.pglog` (any :class:`~actormem._storage.log.WriteLog`). The state
(:class:`~actormem._engine.state.MemoryState`) changes only by applying log records, in
log seq order, with :func:`apply_ops`; nothing it reads differs between nodes:

* a record's time is the appender's clock reading, stored in the record and passed as
  ``now`` (never the applying node's clock);
* ids, texts and timestamps come from the client (the encoded entries);
* eviction, pruning and merging depend only on entry fields and the order of
  operations; access bookkeeping (``access_count``, ``last_accessed``, which feed
  eviction) is itself logged: each node batches its retrieves' hits and appends them
  as an ``access`` operation, with its next write batch or at least every
  ``access_interval`` seconds (docs/replication.md weighs this choice).

The owner loop (:meth:`Replica.run`) replaces the single-node owner of
:mod:`actormem._engine.memory`; the handle (:class:`~actormem._engine.memory.Memory`) and
the request channel are the same. One round of the loop:

1. Wait for requests, a wake-up from the ``LISTEN`` thread, or the poll timer.
2. Encode the drained write requests (and pending access hits) as one batch and append
   it (:meth:`~actormem._storage.log.WriteLog.append`, in a worker thread, retried with
   the same batch id until ``log_timeout``); the append returns every record after this
   node's applied seq up to the batch's own. With nothing to write, read new records
   instead (the correctness path; notifications are only wake-ups).
3. Apply the records in seq order to the state; commit the state's journal and the
   new applied seq to the local SQLite file in one transaction; publish; answer the
   requests of this node's batch (a store answers with its batch's seq).

With a dense or hybrid scorer, the texts a batch stores are embedded before it is
appended (as the single-node owner does before applying), and a failure fails those
stores with :class:`~actormem.EmbeddingError` before they reach the log. Records from
other nodes are embedded before they are applied; if that fails, none of them is applied
now and the next poll tries again (the node lags meanwhile; nothing is lost: the log
holds them).

A failed append (the log unreachable for ``log_timeout`` seconds) fails that batch's
callers with :class:`~actormem.StorageError` and changes nothing: the state only moves by
the log, so the memory stays usable; reads go on from the last published snapshot, and
the poll timer catches up when the log answers again. A failed local commit breaks the
memory, as in durable mode.

The local file is a checkpoint: its ``meta`` table names the memory, the log's id, the
node's id, the applied seq and the state's version; a restart loads it and reads the log
from ``applied_seq + 1``. If those records were truncated, the node starts over from the
latest snapshot in the log (:meth:`Replica.bootstrap`). The node that appends a record
whose seq is a multiple of ``snapshot_every`` writes a snapshot once it is applied and
truncates the log below it and below the lowest applied seq of the live nodes
(heartbeats every ``heartbeat_interval`` seconds).
"""

from __future__ import annotations

import json
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from typing import Any

import attrs
import outcome
import trio

from .._errors import EmbeddingError, InvalidQueryError, StorageError
from .._index.dense import entry_document
from .._storage.jsonl import entry_from_json, entry_to_json
from .._storage.log import (
    LogContentError,
    LogRecord,
    LogSnapshot,
    LogTruncatedError,
    WriteLog,
)
from .._storage.pglog import LOG_FORMAT, MEMORY_NAME_RE, PgLog, is_transient
from .._storage.sqlite import NODE_KEY, Durability, SqliteStore
from .._storage.sqlite_format import MAX_ACCESS_COUNT, encode_record
from .._util import Final
from .memory import (
    _CONSOLIDATE,
    _DELETE,
    _DELETE_KEY,
    _FLUSH,
    _STORE,
    _STORE_MANY,
    _STORE_NOWAIT,
    _SWEEP,
    _VACUUM_STEP,
    Memory,
    _close_storage,
    _drain,
    _embed_ahead,
    _embed_texts,
    _fail_unembedded,
    _owner_died,
    _Request,
    _run_into,
)
from .state import MemoryState

__all__ = ["ReplicaOptions", "Replica", "apply_ops", "decode_snapshot", "encode_snapshot"]

_META_MEMORY = NODE_KEY
_META_LOG = "replica_log"
_META_NODE = "replica_node"
_META_APPLIED = "replica_applied_seq"
_META_VERSION = "replica_version"
_META_EVICTIONS = "replica_evictions"
_READ_LIMIT = 1000
#: What a malformed operation or snapshot raises while it is read: a number where an id
#: belongs (``uuid.UUID(5)``: AttributeError), ``1e400`` where an int does
#: (OverflowError), a missing field, a wrong type.
_MALFORMED = (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError)


@attrs.frozen(kw_only=True)
class ReplicaOptions(metaclass=Final):
    """Timings of a node of a replicated memory, in seconds (``open_memory(log_options=...)``).

    The defaults suit nodes on one LAN; tests shorten them.

    Attributes:
        log_timeout: How long an append may keep failing (retried with the same batch
            id) before its callers get :class:`~actormem.StorageError`; also how long
            opening rides out the server not answering, refusing connections or
            dropping them (retried with backoff; the time counts again once a
            catch-up made progress). A refusal for good (a wrong password, a database
            that does not exist) fails the open at once.
        poll_interval: The node reads the log at least this often even without a
            notification (the correctness path; notifications only wake it sooner).
        access_interval: Retrieve hits (access bookkeeping) are appended with the next
            write batch, or on their own at most this often.
        heartbeat_interval: How often the node reports its applied seq to the log.
        live_seconds: A node not heard from for this long no longer holds back
            truncation; when it comes back it starts over from the snapshot.
        snapshot_every: The node that appends a record whose seq is a multiple of this
            writes a snapshot once it applied it, and truncates the log.
    """

    log_timeout: float = 10.0
    poll_interval: float = 1.0
    access_interval: float = 1.0
    heartbeat_interval: float = 1.0
    live_seconds: float = 30.0
    snapshot_every: int = 10_000


# ---------------------------------------------------------------- the deterministic apply


def _encode_request(req: _Request) -> list[Any]:
    if req.op == _STORE or req.op == _STORE_NOWAIT:
        return ["s", entry_to_json(req.arg)]
    if req.op == _STORE_MANY:
        return ["m", [entry_to_json(e) for e in req.arg]]
    if req.op == _DELETE:
        return ["d", str(req.arg)]
    if req.op == _DELETE_KEY:
        namespace, key = req.arg
        return ["k", list(namespace), key]
    if req.op == _SWEEP:
        return ["x"]
    if req.op == _CONSOLIDATE:
        return ["c"]
    raise AssertionError(f"unknown request {req.op}")  # pragma: no cover


def _encode_access(hits: dict[uuid.UUID, tuple[int, datetime]]) -> list[Any]:
    return ["a", [[str(id), times, when.isoformat()] for id, (times, when) in hits.items()]]


def _encode_refresh(reads: dict[uuid.UUID, datetime]) -> list[Any]:
    return ["r", [[str(id), when.isoformat()] for id, when in reads.items()]]


def encode_batch(ops: list[list[Any]]) -> bytes:
    """The payload of a log record: ``{"v": LOG_FORMAT, "ops": [...]}`` as UTF-8 JSON. O(size)."""
    return json.dumps({"v": LOG_FORMAT, "ops": ops}, separators=(",", ":")).encode()


def decode_batch(where: str, seq: int, payload: bytes) -> list[list[Any]]:
    """The operations of a log record's payload.

    Raises:
        StorageError: Not a payload of this format, or of a newer actormem.
    """
    try:
        obj = json.loads(payload)
        version = obj["v"]
        ops = obj["ops"]
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise LogContentError(where, f"log record {seq} is not an actormem batch ({exc})") from exc
    if not isinstance(version, int) or version > LOG_FORMAT:
        raise LogContentError(
            where,
            f"log record {seq} was written by a newer actormem (format {version}; this one "
            f"reads up to {LOG_FORMAT}); upgrade actormem",
        )
    if not isinstance(ops, list):
        raise LogContentError(where, f"log record {seq} is not an actormem batch")
    return ops


async def _embed_records(index: Any, decoded: list[list[list[Any]]]) -> None:
    """Embed, ahead of :func:`apply_ops`, the new texts the decoded records store (for
    an index with vectors), as the single-node owner does for a batch.

    Raises:
        EmbeddingError: The embedder failed (nothing offered; apply nothing now).
    """
    if getattr(index, "missing", None) is None:
        return
    docs: list[str] = []
    for ops in decoded:
        for op in ops:
            try:
                if op[0] == "s":
                    docs.append(entry_document(entry_from_json(op[1])))
                elif op[0] == "m":
                    docs.extend(entry_document(entry_from_json(obj)) for obj in op[1])
            except _MALFORMED:
                continue  # apply_ops refuses the record with the reason
    failed = await _embed_texts(index, index.missing(docs))
    if failed is not None:
        raise failed


def _aware(text: str) -> datetime:
    """A logged read time: RFC 3339 with an offset (a naive one would fail a comparison
    later, or not, depending on the state: never applied)."""
    when = datetime.fromisoformat(text)
    if when.utcoffset() is None:
        raise ValueError(f"time {text!r} has no UTC offset")
    return when


def _hit_count(value: object) -> int:
    """A logged access count: an int in 0..2**63-1 (a negative one made an entry with a
    negative ``access_count``, which every other way in refuses)."""
    if type(value) is not int or not 0 <= value <= MAX_ACCESS_COUNT:
        raise ValueError(f"access count {value!r} is not an int in 0..2**63-1")
    return value


def apply_ops(state: MemoryState, ops: list[list[Any]], now: datetime, horizon: int) -> list[Any]:
    """Apply one log record's operations to ``state``, in order; return each one's result.

    Deterministic: the result and the new state depend only on ``state``, ``ops`` and
    ``now`` (the record's time: every time-dependent rule uses it, never a clock). First
    the entries whose time to live ran out by ``now`` are removed (as the single-node
    owner does before each batch), then the operations run; a store's ``ttl`` counts
    from ``now``. ``horizon`` (the oldest version a live snapshot
    reads) only decides which old access versions may be dropped, never what is visible
    at the new version. Results: None for a store or an access batch, a bool for a
    delete, :class:`~actormem.ConsolidationStats` for a consolidation, the number of
    entries expired for a sweep. Operations: ``["s", entry]`` store, ``["m", [entry,
    ...]]`` store many, ``["d", id]`` delete, ``["k", namespace, key]`` delete by key,
    ``["c"]`` consolidate, ``["x"]`` sweep expired entries, ``["a", [[id, times, when],
    ...]]`` access hits, ``["r", [[id, when], ...]]`` time-to-live refreshes by reads.
    O(as the ops).

    Raises:
        ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError: A
            malformed operation (a foreign or corrupt log).
    """
    swept = state.expire(now) if state.next_expiry() is not None else 0
    results: list[Any] = []
    for op in ops:
        kind = op[0]
        if kind == "s":
            state.store(entry_from_json(op[1]), now)
            results.append(None)
        elif kind == "m":
            for obj in op[1]:
                state.store(entry_from_json(obj), now)
            results.append(None)
        elif kind == "d":
            results.append(state.delete(uuid.UUID(op[1])) is not None)
        elif kind == "k":
            rec = state.current_by_key(tuple(op[1]), op[2])
            results.append(rec is not None and state.delete(rec.entry.id) is not None)
        elif kind == "x":
            results.append(swept + state.expire(now))
            swept = 0
        elif kind == "r":
            reads = {uuid.UUID(i): _aware(w) for i, w in op[1]}
            state.refresh(reads, horizon)
            results.append(None)
        elif kind == "c":
            results.append(state.consolidate())
        elif kind == "a":
            hits = {uuid.UUID(i): (_hit_count(t), _aware(w)) for i, t, w in op[1]}
            state.apply_access(hits, horizon)
            results.append(None)
        else:
            raise ValueError(f"unknown operation {kind!r}")
    return results


def encode_snapshot(state: MemoryState, seq: int) -> bytes:
    """The published state after log record ``seq``: every entry with its insertion
    number and access bookkeeping, and the state's version. O(n log n)."""
    view = state.view()
    rows = [[rec.seq, entry_to_json(view.entry(rec))] for rec in view.records()]
    body = {
        "v": LOG_FORMAT,
        "seq": seq,
        "version": state.version,
        "evictions": state._evictions_since_consolidate,
        "entries": rows,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def decode_snapshot(
    where: str, payload: bytes, make_state: Callable[[], MemoryState]
) -> tuple[MemoryState, int]:
    """A new state rebuilt from a snapshot payload, and the seq it reflects. O(n (T + log n)).

    Raises:
        StorageError: Not a snapshot of this format.
    """
    try:
        obj = json.loads(payload)
        if obj["v"] > LOG_FORMAT:
            raise LogContentError(
                where, f"the snapshot was written by a newer actormem ({obj['v']})"
            )
        state = make_state()
        state.load((int(s), entry_from_json(e)) for s, e in obj["entries"])
        state.version = state.published = max(state.version, int(obj["version"]))
        state._evictions_since_consolidate = int(obj["evictions"])
        return state, int(obj["seq"])
    except (*_MALFORMED, RecursionError) as exc:
        raise LogContentError(where, f"the snapshot cannot be read ({exc})") from exc


# ---------------------------------------------------------------- the node


class Replica:
    """The replication side of one node's memory (see the module docs).

    Attributes:
        applied: Seq of the last log record applied and published here (it moves only
            at the publish, so a reader that sees it sees the records' effects).
    """

    def __init__(
        self,
        log: WriteLog,
        store: SqliteStore | None,
        node_id: uuid.UUID,
        applied: int,
        options: ReplicaOptions,
    ) -> None:
        self.log = log
        self.store = store
        self.node_id = node_id
        self.applied = applied
        self.options = options
        #: batch id -> the requests of this node's batch, one per op (None: access op).
        self._mine: dict[uuid.UUID, list[_Request | None]] = {}
        self._changed = trio.Event()
        self._last_contact: float | None = None
        self._last_access = -math.inf
        self._last_heartbeat = -math.inf
        self._snapshot_due = False
        self._closed = False
        #: The request the LISTEN thread queues to wake the owner (not an access flush).
        self._wake_request = _Request(_FLUSH, None, False)
        #: The last error talking to the log (None once it answers again).
        self.log_error: StorageError | None = None
        #: If set (``actormem swarm --nodes``): log seq -> (``time.time()`` when it was
        #: published here, whether it was this node's own record).
        self.trace: dict[int, tuple[float, bool]] | None = None

    # ------------------------------------------------------------ handle side

    async def wait_applied(self, memory: Memory, seq: int) -> None:
        """Wait until this node has applied and published log record ``seq``."""
        while self.applied < seq:
            memory._raise_if_unusable()
            await self._changed.wait()
        await trio.lowlevel.checkpoint()

    def close_log(self) -> None:
        """Close the log's connection (see :class:`~actormem._engine.memory.Follower`)."""
        self.log.close()

    def stale_seconds(self) -> float | None:
        """Seconds since this node last heard from the log (None: never)."""
        if self._last_contact is None:
            return None
        return max(0.0, trio.current_time() - self._last_contact)

    # ------------------------------------------------------------ talking to the log

    async def _log_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        result = await trio.to_thread.run_sync(fn, *args)
        self._last_contact = trio.current_time()
        self.log_error = None
        return result

    async def _append(self, batch_id: uuid.UUID, when: datetime, payload: bytes) -> Any:
        """Append, retrying with the same batch id (stored once) until ``log_timeout``."""
        deadline = trio.current_time() + self.options.log_timeout
        delay = 0.05
        while True:
            try:
                return await self._log_call(self.log.append, batch_id, when, payload, self.applied)
            except LogTruncatedError:
                raise
            except StorageError as exc:
                self.log_error = exc
                if trio.current_time() + delay > deadline:
                    raise
            await trio.sleep(delay)
            delay = min(delay * 2, 1.0)

    # ------------------------------------------------------------ applying

    async def _apply(self, memory: Memory, records: list[LogRecord]) -> None:
        """Apply ``records`` (in seq order, from ``applied + 1``), commit, publish, answer."""
        records = [r for r in records if r.seq > self.applied]
        if not records:
            return
        state = memory._state
        horizon = memory._horizon()
        replies: list[tuple[_Request, outcome.Outcome[Any]]] = []
        where = self.log.where
        for expected, rec in enumerate(records, self.applied + 1):
            # Checked before anything is applied: the log checks only the first record,
            # and a hole further on (a row deleted by hand) raised a plain StorageError
            # midway, which a poll took for the log being unreachable: the records
            # before the hole, applied to the state but not published, were applied
            # again at the next poll (an access batch counted twice), every poll.
            if rec.seq != expected:
                raise LogContentError(where, f"log record {expected} is missing")
        decoded = [decode_batch(where, rec.seq, rec.payload) for rec in records]
        await _embed_records(state.index, decoded)
        applied = self.applied  # self.applied moves only when the records are published
        for rec, ops in zip(records, decoded, strict=True):
            try:
                results = apply_ops(state, ops, rec.appended_at, horizon)
            except _MALFORMED as exc:
                raise LogContentError(
                    where, f"log record {rec.seq} cannot be applied ({exc})"
                ) from exc
            applied = rec.seq
            waiters = self._mine.pop(rec.batch_id, None)
            if self.trace is not None:
                self.trace[rec.seq] = (0.0, waiters is not None)
            if waiters is not None:
                if rec.seq % self.options.snapshot_every == 0:
                    self._snapshot_due = True
                for req, result in zip(waiters, results, strict=True):
                    if req is not None and req.waits:
                        value = rec.seq if req.op == _STORE else result
                        replies.append((req, outcome.Value(value)))
        await self._commit_local(state, applied)
        state.publish()
        self.applied = applied
        for req, answer in replies:
            req.set(answer)
        if self.trace is not None:
            now = time.time()
            for rec in records:
                self.trace[rec.seq] = (now, self.trace[rec.seq][1])
        self._notify()
        while state.vacuum(memory._horizon(), _VACUUM_STEP) == _VACUUM_STEP:
            await trio.lowlevel.checkpoint()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    def _meta(self, state: MemoryState, applied: int) -> list[tuple[str, str]]:
        return [
            (_META_EVICTIONS, str(state._evictions_since_consolidate)),
            (_META_MEMORY, self.log.memory),
            (_META_LOG, self.log.log_id),
            (_META_NODE, str(self.node_id)),
            (_META_APPLIED, str(applied)),
            (_META_VERSION, str(state.version)),
        ]

    async def _commit_local(self, state: MemoryState, applied: int, *, clear: bool = False) -> None:
        """The state's journal and the applied seq, in one local transaction."""
        journal = state.take_journal()
        store = self.store
        if store is None:
            return
        batch = store.prepare(journal)
        batch = attrs.evolve(batch, meta=self._meta(state, applied), clear=clear)
        if clear:
            batch = attrs.evolve(
                batch,
                deletes=[],
                accesses=[],
                puts=[encode_record(r) for r in state.view().records()],
            )
        await trio.to_thread.run_sync(store.write, batch)

    async def bootstrap(self, memory: Memory) -> None:
        """Start over from the log's latest snapshot (the records this node needs were
        truncated): replace the state, and the local file's rows, in one transaction."""
        snap = await self._log_call(self.log.latest_snapshot)
        where = self.log.where
        if snap is None or snap.seq <= self.applied:
            raise LogContentError(
                where, f"the log was truncated after seq {self.applied} but holds no later snapshot"
            )
        old = memory._state

        def make_state() -> MemoryState:
            fresh = MemoryState(
                capacity=old.capacity, half_life=old.half_life, scorer=old.scorer, clock=old.clock
            )
            fresh.on_remove = old.on_remove
            return fresh

        state, seq = decode_snapshot(where, snap.payload, make_state)
        if self.store is None:
            state.journal = None
        await self._commit_local(state, seq, clear=True)
        memory._state = state
        self.applied = seq
        self._notify()

    async def catch_up(self, memory: Memory, until: int = 0) -> None:
        """Read and apply the log until nothing is left (and at least up to ``until``).

        Raises:
            StorageError: The log cannot be read (the caller decides whether it is fatal).
        """
        while True:
            try:
                records = await self._log_call(self.log.read, self.applied, _READ_LIMIT)
            except LogTruncatedError:
                await self.bootstrap(memory)
                continue
            await self._apply(memory, records)
            if len(records) < _READ_LIMIT and self.applied >= until:
                return

    # ------------------------------------------------------------ the owner loop

    async def run(self, memory: Memory, receive: trio.MemoryReceiveChannel[_Request]) -> None:
        """The node's owner loop (see the module docs); returns when the memory closes."""
        token = trio.lowlevel.current_trio_token()
        stop = threading.Event()
        stopped = trio.Event()

        def wake() -> None:  # in the listener thread
            try:
                token.run_sync_soon(self._wake, memory)
            except trio.RunFinishedError:  # pragma: no cover - the run ended first
                pass

        def listener_done(_: outcome.Outcome[None]) -> None:
            try:
                token.run_sync_soon(stopped.set)
            except trio.RunFinishedError:  # pragma: no cover
                pass

        trio.lowlevel.start_thread_soon(
            lambda: self.log.listen(wake, stop.is_set), listener_done, name="actormem listen"
        )
        inflight: list[_Request] = []
        try:
            while True:
                inflight = []
                closing = False
                with trio.move_on_after(self._next_timeout(memory)) as timer:
                    try:
                        inflight.append(await receive.receive())
                    except trio.EndOfChannel:
                        closing = True
                    else:
                        _drain(receive, inflight)
                if closing:
                    # A clean close: log the access hits still buffered (or give up
                    # after log_timeout, as for any append).
                    self._last_access = -math.inf
                    await self._round(memory, [], False)
                    break
                read = timer.cancelled_caught or any(r is self._wake_request for r in inflight)
                await self._round(memory, [r for r in inflight if r.op != _FLUSH], read)
                inflight = []
        except BaseException as exc:
            error = _owner_died(memory, exc, inflight, receive)
            for waiters in self._mine.values():
                for req in waiters:
                    if req is not None and req.waits:
                        req.set(outcome.Error(error))
            if not isinstance(exc, StorageError):
                raise
        finally:
            memory._close()
            receive.close()
            self._notify()
            stop.set()
            with trio.CancelScope(shield=True):
                await stopped.wait()
                await trio.to_thread.run_sync(self.log.close)

    def _wake(self, memory: Memory) -> None:
        """A notification: have the owner read the log (unless it is busy anyway)."""
        try:
            memory._send.send_nowait(self._wake_request)
        except (trio.WouldBlock, trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    def _next_timeout(self, memory: Memory) -> float:
        """Until the next poll of the log, or sooner when access hits wait to be sent."""
        timeout = self.options.poll_interval
        if memory._pending_access or memory._pending_refresh:
            due = self._last_access + self.options.access_interval - trio.current_time()
            timeout = min(timeout, max(due, 0.0))
        return timeout

    async def _round(self, memory: Memory, writes: list[_Request], read: bool) -> None:
        """Append what was asked (and due access hits); else read the log if ``read``
        (a notification or the poll timer; a retrieve's wake-up alone reads nothing)."""
        now = trio.current_time()
        ops: list[list[Any]] = []
        waiters: list[_Request | None] = []
        hits = memory._pending_access
        reads = memory._pending_refresh
        due = now - self._last_access >= self.options.access_interval
        if (hits or reads) and (writes or due):
            memory._pending_access = {}
            memory._pending_refresh = {}
            self._last_access = now
            if hits:
                ops.append(_encode_access(hits))
                waiters.append(None)
            if reads:
                ops.append(_encode_refresh(reads))
                waiters.append(None)
        failed = await _embed_ahead(memory._state.index, writes)
        if failed is not None:
            writes = _fail_unembedded(memory._state.index, writes, failed)
        for req in writes:
            if req.op == _STORE_MANY and not req.arg:
                # Nothing to log: answered now. (GET /readyz sends one per probe; logged,
                # each probe appended a record every node applied, without end.)
                req.set(outcome.Value(None))
                continue
            ops.append(_encode_request(req))
            waiters.append(req)
        if ops:
            await self._append_round(memory, ops, waiters, hits, reads)
        elif read:
            try:
                await self.catch_up(memory)
            except LogTruncatedError:  # pragma: no cover - catch_up bootstraps
                raise
            except StorageError as exc:
                if self._is_fatal(exc):
                    raise
                self.log_error = exc
            except EmbeddingError:
                pass  # nothing applied: the next poll reads and embeds them again
        if now - self._last_heartbeat >= self.options.heartbeat_interval:
            self._last_heartbeat = now
            try:
                await self._log_call(self.log.heartbeat, self.node_id, self.applied)
            except StorageError as exc:
                self.log_error = exc
        if self._snapshot_due:
            self._snapshot_due = False
            await self.write_snapshot(memory)

    def _is_fatal(self, exc: StorageError) -> bool:
        """The log's content or the local file failed, not the way to the log."""
        return isinstance(exc, LogContentError) or exc.path != self.log.where

    async def _append_round(
        self,
        memory: Memory,
        ops: list[list[Any]],
        waiters: list[_Request | None],
        hits: dict[uuid.UUID, tuple[int, datetime]],
        reads: dict[uuid.UUID, datetime],
    ) -> None:
        batch_id = uuid.uuid4()
        when = memory._state.clock()
        self._mine[batch_id] = waiters
        try:
            seq, records = await self._append(batch_id, when, encode_batch(ops))
        except LogTruncatedError:
            await self.bootstrap(memory)
            await self.catch_up(memory)
            return
        except StorageError as exc:
            # Not stored (or stored and not confirmed: then applied later, unanswered).
            del self._mine[batch_id]
            for req in waiters:
                if req is not None and req.waits:
                    req.set(outcome.Error(exc))
            for id, (times, last) in hits.items():  # keep the hits for the next append
                prev = memory._pending_access.get(id)
                if prev is not None:
                    times, last = times + prev[0], max(last, prev[1])
                memory._pending_access[id] = (times, last)
            for id, when in reads.items():
                prev_read = memory._pending_refresh.get(id)
                memory._pending_refresh[id] = when if prev_read is None else max(when, prev_read)
            return
        try:
            await self._apply(memory, records)
        except EmbeddingError:
            return  # the batch is in the log; the next poll applies it and answers
        if self.applied < seq:  # pragma: no cover - append returns up to its own seq
            await self.catch_up(memory, seq)

    async def write_snapshot(self, memory: Memory) -> int:
        """Write a snapshot at the applied seq and truncate the log below what every
        live node and the snapshot have; return the records dropped (0 when the log
        cannot be reached: the next snapshot tries again)."""
        payload = encode_snapshot(memory._state, self.applied)
        try:
            await self._log_call(self.log.put_snapshot, LogSnapshot(self.applied, payload))
            await self._log_call(self.log.heartbeat, self.node_id, self.applied)
            return int(await self._log_call(self.log.truncate, self.options.live_seconds))
        except StorageError as exc:
            self.log_error = exc
            return 0


# ---------------------------------------------------------------- opening a node


def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name must be a str naming the memory, not {type(name).__name__}")
    if not MEMORY_NAME_RE.fullmatch(name):
        raise InvalidQueryError(
            f"name must be a letter then up to 62 letters, digits, '_' or '-', got {name!r}"
        )
    return name


async def _riding_out(
    options: ReplicaOptions,
    step: Callable[[], Awaitable[Any]],
    progress: Callable[[], object] = lambda: None,
) -> None:
    """Run ``step`` of a node's open, again after a failure of the way to the log
    (:func:`~actormem._storage.pglog.is_transient`: a connection dropped, refused,
    terminated) with backoff (50 ms doubling to 1 s), as long as the failures since the
    last ``progress()`` change have lasted less than ``log_timeout``: a running node
    rides out such an outage for that long, and so does its open. Any other error
    (the server refusing for good, the log's content, the local file) is raised at once.

    Raises:
        StorageError: The outage lasted ``log_timeout`` (its last error), or not transient.
    """
    deadline = trio.current_time() + options.log_timeout
    delay = 0.05
    seen = progress()
    while True:
        try:
            await step()
            return
        except LogContentError:
            raise
        except StorageError as exc:
            if not is_transient(exc):
                raise
            if progress() != seen:  # a catch-up that applied some records: a new outage
                seen = progress()
                deadline = trio.current_time() + options.log_timeout
                delay = 0.05
            if trio.current_time() + delay > deadline:
                raise
        await trio.sleep(delay)
        delay = min(delay * 2, 1.0)


async def open_replica(
    memory: Memory,
    log: object,
    name: object,
    fspath: str | None,
    durability: Durability,
    options: ReplicaOptions | None,
) -> None:
    """Make the new ``memory`` this process's node of memory ``name`` over the log at
    ``log`` (a DSN): load its checkpoint ``fspath`` (if any) and catch up with the log;
    see ``open_memory``. Nothing is changed when it raises.

    Raises:
        TypeError, InvalidQueryError: A bad option, including a ``capacity`` or
            ``half_life`` other than the memory's (fixed when its log was created).
        StorageError: The log does not answer within ``log_timeout`` (connections
            dropped, refused or terminated are retried until then: :func:`_riding_out`),
            the server refuses for good (a wrong password, a database that does not
            exist: at once), or the log was written by a newer actormem; the file
            belongs to another memory or log, or is a memory that is not a replica; as
            ``open_memory(path=...)``.
    """
    if not isinstance(log, str):
        raise TypeError(f"log must be a PostgreSQL connection string, not {type(log).__name__}")
    if name is None:
        raise InvalidQueryError("name is required with log= (the memory's name in the log)")
    name = _check_name(name)
    dsn = log
    if options is not None and not isinstance(options, ReplicaOptions):
        raise TypeError(f"log_options must be a ReplicaOptions, not {type(options).__name__}")
    options = options if options is not None else ReplicaOptions()
    state = memory._state
    config: dict[str, object] = {"capacity": state.capacity, "half_life": state.half_life}
    # Each open inside the try that closes it, its result in a list made before its
    # thread started (_run_into): an interrupt between a thread's end and the next
    # statement (a KeyboardInterrupt: trio raises it at any bytecode of unprotected code)
    # finds what was opened there, and it is closed.
    logs: list[Any] = []  # [the log connection]
    files: list[Any] = []  # [(the checkpoint store, its rows)]
    try:
        connect = partial(PgLog.open, dsn, name, config, connect_timeout=options.log_timeout)
        await _riding_out(options, lambda: trio.to_thread.run_sync(_run_into, logs, connect))
        wlog = logs[0]
        if wlog.config != config:
            raise InvalidQueryError(
                f"memory {name!r} was created with capacity={wlog.config.get('capacity')!r}, "
                f"half_life={wlog.config.get('half_life')!r}; every node must use the same, "
                f"got capacity={state.capacity!r}, half_life={state.half_life!r}"
            )
        node_id = uuid.uuid4()
        applied = 0
        meta: dict[str, str] = {}
        store: SqliteStore | None = None
        if fspath is not None:
            # node=True: the one opener that may open a node's checkpoint
            opener = partial(SqliteStore.open, fspath, durability, node=True)
            await trio.to_thread.run_sync(_run_into, files, opener)
            opened, entries = files[0]
            store = opened
            meta = await trio.to_thread.run_sync(opened.read_meta)
            if _META_MEMORY in meta:
                if meta[_META_MEMORY] != name or meta.get(_META_LOG) != wlog.log_id:
                    raise StorageError(
                        opened.path,
                        f"a checkpoint of memory {meta[_META_MEMORY]!r} (log "
                        f"{meta.get(_META_LOG)}), not of memory {name!r} (log {wlog.log_id}); "
                        "use another path",
                    )
                node_id = uuid.UUID(meta[_META_NODE])
                applied = int(meta[_META_APPLIED])
                version = int(meta[_META_VERSION])
            elif entries:
                raise StorageError(
                    opened.path,
                    f"holds a memory that is not a replica of {name!r}; open it without "
                    "log=, or give this node a new path",
                )
            else:
                version = 0
            state.load(entries)
            state.version = state.published = max(state.version, version)
            state._evictions_since_consolidate = int(meta.get(_META_EVICTIONS, 0))
            del entries
            files[0] = files[0][:1]  # the rows freed now (the store kept for the except)
        else:
            state.journal = None
        replica = Replica(wlog, store, node_id, applied, options)
        memory._replica = replica
        memory._storage = store
        if store is not None and _META_MEMORY not in meta:
            await replica._commit_local(state, 0)  # claim the new file for this memory
        await _riding_out(options, partial(replica.catch_up, memory), lambda: replica.applied)
    except BaseException:
        # Closed here: not the caller's to close again.
        memory._replica = None
        memory._storage = None
        try:
            if files:
                await _close_storage(files[0][0])
        finally:
            if logs:
                with trio.CancelScope(shield=True):
                    await trio.to_thread.run_sync(logs[0].close)
        raise
