"""A memory's write log in PostgreSQL (psycopg 3, sync connections). Blocking I/O.

Theory of operation
-------------------
Four tables, shared by every memory of one database (created on first use, under a
transaction-scoped advisory lock so that two first nodes do not race)::

    actormem_memories  (memory PK, log_id, format_version, config, head)
    actormem_log       (memory, seq) PK, batch_id (UNIQUE per memory), appended_at, payload
    actormem_snapshots (memory, seq) PK, payload
    actormem_nodes     (memory, node_id) PK, applied_seq, seen_at

Append (:meth:`PgLog.append`), one transaction: lock the memory's row
(``SELECT ... FOR UPDATE``: held to commit, so appends of one memory are serialized and
commit in seq order, unlike a ``bigserial``, whose values can commit out of order and
make a reader of ``seq > last`` skip a row for good); if ``batch_id`` is already in the
log, this is a retry of an append that committed: its seq is returned and nothing is
added; else ``head + 1`` is the new seq, the row is inserted, ``head`` moves, and
``pg_notify('actormem_log', memory)`` is sent (delivered at commit). The same
transaction then reads every record after the caller's applied seq, so a node learns of
its own batch and of everything before it in one round trip.

Reading (:meth:`PgLog.read`) is the correctness path: ``WHERE seq > after ORDER BY seq``.
``LISTEN`` (:meth:`PgLog.listen`, its own connection and thread) is only a wake-up; a
notification lost while disconnected costs nothing because the listener wakes its node
after every reconnection and the node re-reads.

A record the reader needs but the log no longer holds (truncated below a snapshot)
raises :class:`~actormem._storage.log.LogTruncatedError`: ``head`` counts every append,
so a hole at the start is always detected.

Errors: every psycopg error becomes :class:`~actormem.StorageError` naming the server
(never the password); a broken connection is dropped and made again on the next call.

Bounded waits: libpq has no client-side timeout for a statement, so a server that stops
answering (a paused or wedged server, a stalled network path, a row lock held by a node
that froze in the middle of its append) would block a call, and the node's owner with
it, for good. Each call therefore runs under a deadline of ``connect_timeout`` seconds (a
node's ``log_timeout``; a snapshot's transfer: at least 300 s): when it passes, a
watchdog thread (one for the process) shuts the connection's socket down, the call fails
with StorageError, and the connection is made again on the next call. And every session
sets ``idle_in_transaction_session_timeout``, so that the server itself ends the transaction
of a node that froze holding the memory's row lock (that node's append is then retried
with the same batch id: stored once).
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .._errors import StorageError
from .._util import install_hint
from .log import LogRecord, LogSnapshot, LogTruncatedError

__all__ = [
    "LOG_FORMAT",
    "MEMORY_NAME_RE",
    "PgLog",
    "check_reachable",
    "is_transient",
    "redact_dsn",
]

#: Version of the tables and payloads this actormem writes; a memory whose log has a
#: larger one was written by a newer actormem and is refused.
LOG_FORMAT = 1

#: A memory's name: a letter, then up to 62 letters, digits, ``_`` or ``-``.
MEMORY_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,62}")

_CHANNEL = "actormem_log"
#: The deadline of a snapshot's write or read, which moves the whole state: at least this
#: many seconds (any other call: the node's ``log_timeout``).
_BULK_SECONDS = 300.0
_SCHEMA_LOCK = 0x6163_4D6D  # "acMm": the advisory lock taken while creating the tables

_CREATE = (
    """CREATE TABLE IF NOT EXISTS actormem_memories (
        memory text PRIMARY KEY,
        log_id uuid NOT NULL,
        format_version integer NOT NULL,
        config jsonb NOT NULL,
        head bigint NOT NULL DEFAULT 0,
        created_at timestamptz NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS actormem_log (
        memory text NOT NULL,
        seq bigint NOT NULL,
        batch_id uuid NOT NULL,
        appended_at timestamptz NOT NULL,
        payload bytea NOT NULL,
        PRIMARY KEY (memory, seq),
        UNIQUE (memory, batch_id))""",
    """CREATE TABLE IF NOT EXISTS actormem_snapshots (
        memory text NOT NULL,
        seq bigint NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        payload bytea NOT NULL,
        PRIMARY KEY (memory, seq))""",
    """CREATE TABLE IF NOT EXISTS actormem_nodes (
        memory text NOT NULL,
        node_id uuid NOT NULL,
        applied_seq bigint NOT NULL,
        seen_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (memory, node_id))""",
)

_TABLES = ("actormem_log", "actormem_snapshots", "actormem_nodes", "actormem_memories")

_SELECT_AFTER = (
    "SELECT seq, batch_id, appended_at, payload FROM actormem_log "
    "WHERE memory = %s AND seq > %s AND seq <= %s ORDER BY seq LIMIT %s"
)


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise StorageError(
            "log", f"replication needs psycopg 3: {install_hint('postgres')}"
        ) from exc
    return psycopg


def check_reachable(dsn: str, connect_timeout: float = 5.0) -> None:
    """Connect to ``dsn`` once and close: a quick check before starting processes that
    would each fail on their own. Blocking; at most about ``connect_timeout`` seconds.

    Raises:
        StorageError: The server does not answer, refuses, or the database is missing
            (the message names the server without its password).
    """
    PgLog(dsn, "check", connect_timeout)._connect().close()


def redact_dsn(dsn: str) -> str:
    """``dsn`` without its password, for messages. O(len(dsn))."""
    psycopg = _psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparsable DSN>"
    params.pop("password", None)
    host = params.get("host", "localhost")
    port = params.get("port", "5432")
    user = f"{params['user']}@" if "user" in params else ""
    return f"postgresql://{user}{host}:{port}/{params.get('dbname', '')}"


class _Watchdog:
    """One daemon thread that ends the calls whose deadline passed (a thread per call
    cost about 0.2 ms each). Deadlines wait in a heap; finished ones are dropped when
    they reach its top."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._order = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, deadline: _Deadline, when: float) -> None:
        with self._cond:
            heapq.heappush(self._heap, (when, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="actormem pglog watchdog", daemon=True
                )
                self._thread.start()
            if self._heap[0][2] is deadline:
                self._cond.notify()

    def _loop(self) -> None:
        with self._cond:
            while True:
                if not self._heap:
                    self._cond.wait()
                    continue
                when, _, deadline = self._heap[0]
                if deadline.done:
                    heapq.heappop(self._heap)
                    continue
                wait = when - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                deadline.sever()


_WATCHDOG = _Watchdog()


class _Deadline:
    """Shut ``conn``'s socket down if the block is still running after ``seconds`` (the
    watchdog thread does); ``expired`` says whether it did. Shutting the socket down
    makes libpq's wait end at once with an error (the connection is then broken)."""

    def __init__(self, conn: Any, seconds: float) -> None:
        self._conn = conn
        self._seconds = seconds
        self._lock = threading.Lock()
        self.done = False
        self.expired = False

    def sever(self) -> None:
        with self._lock:
            if self.done:
                return
            self.expired = True
            try:
                with socket.socket(fileno=os.dup(self._conn.fileno())) as sock:
                    sock.shutdown(socket.SHUT_RDWR)
            except Exception:  # closed meanwhile (psycopg raises its own error): nothing waits
                pass

    def __enter__(self) -> _Deadline:
        _WATCHDOG.arm(self, time.monotonic() + self._seconds)
        return self

    def __exit__(self, *exc_info: object) -> None:
        with self._lock:
            self.done = True


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


#: SQLSTATEs (a class, or a code) of a failure of the way to the server rather than of
#: the request: a connection exception (08), the server out of connections or memory
#: (53), shut down or terminated by an administrator or starting up (57P01-57P03), a
#: statement cancelled (57014: the server's own timeouts).
_TRANSIENT_STATES = ("08", "53", "57P01", "57P02", "57P03", "57014")
#: What a server says when it refuses a connection for now (libpq gives connection
#: failures no SQLSTATE: only the text tells them from a refusal for good, such as a
#: wrong password or a database that does not exist).
_TRANSIENT_FATAL = (
    "the database system is",  # starting up, shutting down, in recovery mode, ...
    "too many clients",
    "too many connections",
    "terminating connection",
    "remaining connection slots are reserved",
)


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (a :class:`~actormem.StorageError` of a :class:`PgLog` call) is a
    failure of the way to the server that may pass: a connection refused, dropped,
    timed out or terminated by an administrator, the server starting up, shutting down
    or out of connections. Not transient: what the server refuses for good (a wrong
    password, a role or database that does not exist, a permission, SQL it rejects)
    and anything not raised by a psycopg error (a log of a newer actormem). O(1).
    """
    psycopg = _psycopg()
    cause = exc.__cause__
    if not isinstance(exc, StorageError) or not isinstance(cause, psycopg.Error):
        return False
    state = cause.sqlstate
    if state is not None:
        return bool(state.startswith(_TRANSIENT_STATES))
    if not isinstance(cause, psycopg.OperationalError):
        return False
    text = str(cause)
    # "FATAL:": the server answered and refused; else the connection failed or broke.
    return "FATAL:" not in text or any(t in text for t in _TRANSIENT_FATAL)


def _limit_idle_transactions(conn: Any, seconds: float) -> None:
    """Have the server end this session's transaction if it sits idle for ``seconds``
    (at least 1 s): a node frozen between the statements of its append (SIGSTOP, a
    stalled path) would otherwise hold the memory's row lock, and stall every other
    node's appends, until the server noticed the dead client (hours of TCP keepalive)."""
    millis = str(max(1000, round(seconds * 1000)))
    conn.execute("SELECT set_config('idle_in_transaction_session_timeout', %s, false)", (millis,))


class PgLog:
    """One memory's log in a PostgreSQL database; see the module docs.

    Build with :meth:`open`. Not thread-safe except :meth:`listen` (own connection).
    """

    def __init__(self, dsn: str, memory: str, connect_timeout: float) -> None:
        self._dsn = dsn
        self.where = redact_dsn(dsn)
        self.memory = memory
        self.log_id = ""
        self.config: dict[str, object] = {}
        self._connect_timeout = connect_timeout
        self._conn: Any = None

    # ------------------------------------------------------------ connections

    def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(
                self._dsn,
                autocommit=True,
                connect_timeout=max(1, round(self._connect_timeout)),
                application_name=f"actormem:{self.memory}",
            )
        except psycopg.Error as exc:
            raise StorageError(self.where, f"cannot connect: {_reason(exc)}") from exc
        try:
            with _Deadline(conn, self._connect_timeout) as deadline:
                _limit_idle_transactions(conn, self._connect_timeout)
        except psycopg.Error as exc:
            conn.close()
            reason = self._timed_out(self._connect_timeout) if deadline.expired else _reason(exc)
            raise StorageError(self.where, f"cannot connect: {reason}") from exc
        return conn

    @staticmethod
    def _timed_out(seconds: float) -> str:
        return f"no answer within {seconds:g} s (the connection was dropped)"

    def _connection(self) -> Any:
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            self._conn = None
            conn = self._conn = self._connect()
        return conn

    def _run(self, what: str, fn: Callable[[Any], Any], *, bulk: bool = False) -> Any:
        """``fn(connection)`` under the deadline (``bulk``: a snapshot's transfer, which
        may be large: at least :data:`_BULK_SECONDS`); a psycopg error becomes
        StorageError (and a broken connection is dropped, to be made again on the next
        call)."""
        psycopg = _psycopg()
        conn = self._connection()
        seconds = max(_BULK_SECONDS, self._connect_timeout) if bulk else self._connect_timeout
        try:
            with _Deadline(conn, seconds) as deadline:
                return fn(conn)
        except psycopg.Error as exc:
            if conn.broken or conn.closed or deadline.expired:
                conn.close()
                self._conn = None
            reason = self._timed_out(seconds) if deadline.expired else _reason(exc)
            raise StorageError(self.where, f"{what} failed: {reason}") from exc

    @classmethod
    def open(
        cls, dsn: str, memory: str, config: dict[str, object], *, connect_timeout: float = 5.0
    ) -> PgLog:
        """Connect, create the tables if missing, and register ``memory`` with ``config``
        if it is new. O(1) round trips.

        Raises:
            StorageError: The server does not answer (within ``connect_timeout`` seconds)
                or refuses; or the memory's log was written by a newer actormem.
            ValueError: ``memory`` is not a valid name (:data:`MEMORY_NAME_RE`).
        """
        if not MEMORY_NAME_RE.fullmatch(memory):
            raise ValueError(f"memory name {memory!r} is not valid")
        log = cls(dsn, memory, connect_timeout)

        def setup(conn: Any) -> tuple[Any, ...]:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                for statement in _CREATE:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO actormem_memories (memory, log_id, format_version, config) "
                    "VALUES (%s, %s, %s, %s) ON CONFLICT (memory) DO NOTHING",
                    (memory, uuid.uuid4(), LOG_FORMAT, json.dumps(config)),
                )
                row: tuple[Any, ...] = conn.execute(
                    "SELECT log_id, format_version, config FROM actormem_memories "
                    "WHERE memory = %s",
                    (memory,),
                ).fetchone()
            return row

        try:
            log_id, version, stored_config = log._run("creating the log tables", setup)
        except BaseException:
            log.close()
            raise
        if version > LOG_FORMAT:
            log.close()
            raise StorageError(
                log.where,
                f"the log of memory {memory!r} was written by a newer actormem "
                f"(log format {version}; this one reads up to {LOG_FORMAT}); upgrade actormem",
            )
        log.log_id = str(log_id)
        log.config = dict(stored_config)
        return log

    def close(self) -> None:
        """Close the connection. Idempotent."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    # ------------------------------------------------------------ the log

    def append(
        self, batch_id: uuid.UUID, appended_at: datetime, payload: bytes, after: int
    ) -> tuple[int, list[LogRecord]]:
        """See :meth:`actormem._storage.log.WriteLog.append`. O(records returned)."""
        memory = self.memory

        def go(conn: Any) -> tuple[int, int, list[tuple[Any, ...]]]:
            with conn.transaction():
                (head,) = conn.execute(
                    "SELECT head FROM actormem_memories WHERE memory = %s FOR UPDATE", (memory,)
                ).fetchone()
                row = conn.execute(
                    "SELECT seq FROM actormem_log WHERE memory = %s AND batch_id = %s",
                    (memory, batch_id),
                ).fetchone()
                if row is not None:
                    seq = row[0]  # a retry of an append that committed
                else:
                    seq = head + 1
                    conn.execute(
                        "INSERT INTO actormem_log (memory, seq, batch_id, appended_at, payload) "
                        "VALUES (%s, %s, %s, %s, %s)",
                        (memory, seq, batch_id, appended_at, payload),
                    )
                    conn.execute(
                        "UPDATE actormem_memories SET head = %s WHERE memory = %s", (seq, memory)
                    )
                    conn.execute("SELECT pg_notify(%s, %s)", (_CHANNEL, memory))
                rows = conn.execute(_SELECT_AFTER, (memory, after, max(seq, head), 1 << 62))
                return seq, max(seq, head), rows.fetchall()

        seq, head, rows = self._run("append", go)
        return seq, self._records(after, head, rows)

    def _records(self, after: int, head: int, rows: list[tuple[Any, ...]]) -> list[LogRecord]:
        # In UTC whatever the session's TimeZone: every node then applies the same value,
        # down to the offset a stored expiry is written with.
        records = [LogRecord(s, b, t.astimezone(UTC), bytes(p)) for s, b, t, p in rows]
        expected = after + 1
        if (records and records[0].seq != expected) or (not records and head > after):
            raise LogTruncatedError(
                self.where, f"records of memory {self.memory!r} after seq {after} were truncated"
            )
        return records

    def read(self, after: int, limit: int) -> list[LogRecord]:
        """See :meth:`actormem._storage.log.WriteLog.read`. O(records returned)."""
        memory = self.memory

        def go(conn: Any) -> tuple[int, list[tuple[Any, ...]]]:
            with conn.transaction():
                (head,) = conn.execute(
                    "SELECT head FROM actormem_memories WHERE memory = %s", (memory,)
                ).fetchone()
                rows = conn.execute(_SELECT_AFTER, (memory, after, head, limit)).fetchall()
            return head, rows

        head, rows = self._run("reading the log", go)
        return self._records(after, head, rows)

    def head(self) -> int:
        """The seq of the last record appended (0: none). O(1)."""
        row = self._run(
            "reading the log head",
            lambda c: c.execute(
                "SELECT head FROM actormem_memories WHERE memory = %s", (self.memory,)
            ).fetchone(),
        )
        return int(row[0])

    def latest_snapshot(self) -> LogSnapshot | None:
        """See :meth:`actormem._storage.log.WriteLog.latest_snapshot`."""
        row = self._run(
            "reading the snapshot",
            lambda c: c.execute(
                "SELECT seq, payload FROM actormem_snapshots WHERE memory = %s "
                "ORDER BY seq DESC LIMIT 1",
                (self.memory,),
            ).fetchone(),
            bulk=True,
        )
        return None if row is None else LogSnapshot(row[0], bytes(row[1]))

    def put_snapshot(self, snapshot: LogSnapshot) -> None:
        """See :meth:`actormem._storage.log.WriteLog.put_snapshot`."""
        self._run(
            "writing a snapshot",
            lambda c: c.execute(
                "INSERT INTO actormem_snapshots (memory, seq, payload) VALUES (%s, %s, %s) "
                "ON CONFLICT DO NOTHING",
                (self.memory, snapshot.seq, snapshot.payload),
            ),
            bulk=True,
        )

    def heartbeat(self, node_id: uuid.UUID, applied_seq: int) -> None:
        """See :meth:`actormem._storage.log.WriteLog.heartbeat`."""
        self._run(
            "heartbeat",
            lambda c: c.execute(
                "INSERT INTO actormem_nodes (memory, node_id, applied_seq) VALUES (%s, %s, %s) "
                "ON CONFLICT (memory, node_id) DO UPDATE "
                "SET applied_seq = EXCLUDED.applied_seq, seen_at = now()",
                (self.memory, node_id, applied_seq),
            ),
        )

    def truncate(self, live_seconds: float) -> int:
        """See :meth:`actormem._storage.log.WriteLog.truncate`. The server's clock
        judges liveness (one clock for every node)."""
        memory = self.memory

        def go(conn: Any) -> int:
            with conn.transaction():
                row = conn.execute(
                    "SELECT max(seq) FROM actormem_snapshots WHERE memory = %s", (memory,)
                ).fetchone()
                if row is None or row[0] is None:
                    return 0
                snap = row[0]
                (low,) = conn.execute(
                    "SELECT min(applied_seq) FROM actormem_nodes WHERE memory = %s "
                    "AND seen_at > now() - make_interval(secs => %s)",
                    (memory, live_seconds),
                ).fetchone()
                below = snap if low is None else min(snap, low)
                cur = conn.execute(
                    "DELETE FROM actormem_log WHERE memory = %s AND seq <= %s", (memory, below)
                )
                conn.execute(
                    "DELETE FROM actormem_snapshots WHERE memory = %s AND seq < %s", (memory, snap)
                )
                return int(cur.rowcount)

        return int(self._run("truncating the log", go))

    def drop(self) -> None:
        """Delete this memory's log, snapshots, nodes and registration (the tables
        stay). Nodes still open on it break. O(rows)."""
        memory = self.memory

        def go(conn: Any) -> None:
            with conn.transaction():
                for table in _TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE memory = %s", (memory,))

        self._run("dropping the memory", go)

    def listen(self, wake: Callable[[], None], stopped: Callable[[], bool]) -> None:
        """See :meth:`actormem._storage.log.WriteLog.listen`. Checks ``stopped()`` at
        least every 0.2 s; retries a lost connection every 0.5 s."""
        psycopg = _psycopg()
        while not stopped():
            conn = None
            try:
                conn = psycopg.connect(
                    self._dsn, autocommit=True, connect_timeout=max(1, round(self._connect_timeout))
                )
                with _Deadline(conn, self._connect_timeout):  # a stalled server: retry
                    conn.execute(f"LISTEN {_CHANNEL}")
                wake()  # anything appended while not listening: read it now
                while not stopped():
                    for note in conn.notifies(timeout=0.2):
                        if note.payload == self.memory:
                            wake()
            except psycopg.Error:
                time.sleep(0.5)
            finally:
                if conn is not None:
                    conn.close()
