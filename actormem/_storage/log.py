"""The narrow interface between a replicated memory and the ordered write log it follows.

Theory of operation
-------------------
A replicated memory (``open_memory(log=..., name=...)``, see ``docs/replication.md``) is
state-machine replication: every node applies one totally ordered log of write batches
to the same I/O-free state. The engine (:mod:`actormem._engine.replica`) needs only the
few blocking calls of :class:`WriteLog`; :mod:`actormem._storage.pglog` implements them
on PostgreSQL. Another engine (NATS JetStream: a replicated stream per memory,
compare-and-append through the expected last sequence, dedup by message id) would be a
second implementation of the same protocol; the engine would not change.

A log holds, per memory, records numbered ``1, 2, 3, ...`` without gaps (``seq``), each
with the unique id of the batch (a retried append is stored once), the appender's
clock reading, and an opaque payload (the engine's encoded batch). Below the latest
*snapshot* (an opaque payload, tagged with the seq it reflects) the log may be
truncated; a reader that asks for records the log no longer holds gets
:class:`LogTruncatedError` and starts over from the snapshot.

Every method blocks (the engine runs them in worker threads, one at a time, except
:meth:`WriteLog.listen`, which runs in a thread of its own) and raises
:class:`~actormem.StorageError` when the log cannot be reached or refuses.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import NamedTuple, Protocol

from .._errors import StorageError

__all__ = ["LogContentError", "LogRecord", "LogSnapshot", "LogTruncatedError", "WriteLog"]


class LogRecord(NamedTuple):
    """One appended batch: its place in the log, its id, the appender's time, the payload."""

    seq: int
    batch_id: uuid.UUID
    appended_at: datetime
    payload: bytes


class LogSnapshot(NamedTuple):
    """The state after applying every record up to ``seq``, encoded by the engine."""

    seq: int
    payload: bytes


class LogTruncatedError(StorageError):
    """The records after the requested seq were truncated: start from the snapshot."""


class LogContentError(StorageError):
    """The log holds something this node cannot apply (a newer format, a foreign or
    corrupt record or snapshot): the node stops rather than diverge."""


class WriteLog(Protocol):
    """One memory's ordered write log (blocking; see the module docs).

    Attributes:
        where: A printable name of the log for messages (no password).
        memory: The memory's name.
        log_id: Identifies this memory's log: a new log of the same name (dropped and
            created again) has another id, so a checkpoint of the old one is refused.
        config: The options fixed when the memory's log was created (JSON-ready dict).
    """

    where: str
    memory: str
    log_id: str
    config: dict[str, object]

    def append(
        self, batch_id: uuid.UUID, appended_at: datetime, payload: bytes, after: int
    ) -> tuple[int, list[LogRecord]]:
        """Append one batch (once per ``batch_id``: a retry returns the seq given the
        first time) and return its seq and every record after ``after`` up to it.

        Raises:
            StorageError: The log cannot be reached or the append failed (then it may or
                may not have been stored; retrying with the same ``batch_id`` is safe).
            LogTruncatedError: Records after ``after`` were truncated.
        """
        ...

    def read(self, after: int, limit: int) -> list[LogRecord]:
        """At most ``limit`` records after seq ``after``, in seq order, without gaps.

        Raises:
            StorageError: The log cannot be reached.
            LogTruncatedError: Records after ``after`` were truncated.
        """
        ...

    def latest_snapshot(self) -> LogSnapshot | None:
        """The newest snapshot, or None."""
        ...

    def put_snapshot(self, snapshot: LogSnapshot) -> None:
        """Keep ``snapshot`` (a second one at the same seq is ignored)."""
        ...

    def heartbeat(self, node_id: uuid.UUID, applied_seq: int) -> None:
        """Record that node ``node_id`` is alive and has applied up to ``applied_seq``."""
        ...

    def truncate(self, live_seconds: float) -> int:
        """Drop records at or below both the latest snapshot and the lowest applied seq
        of the nodes seen in the last ``live_seconds``, and older snapshots; return how
        many records went."""
        ...

    def listen(self, wake: Callable[[], None], stopped: Callable[[], bool]) -> None:
        """Until ``stopped()``: call ``wake()`` whenever a record may have been appended
        (a notification), and after every (re)connection, since notifications sent while
        disconnected are lost. Never raises for a lost connection: it reconnects."""
        ...

    def close(self) -> None:
        """Release the connections. Idempotent."""
        ...
