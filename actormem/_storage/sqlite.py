"""SQLite storage of a durable memory: open, load, group commit, close. Blocking I/O.

Theory of operation
-------------------
The owner task stays the only writer: it applies a batch of requests to the in-memory
:class:`~actormem._engine.state.MemoryState`, then hands the batch's *journal* (records that
became live, died, or changed access bookkeeping) to :meth:`SqliteStore.prepare` on the
event loop, and runs :meth:`SqliteStore.write` in a worker thread: one transaction per
batch (a *group commit*). Only when the transaction committed does the owner publish the
batch and answer its callers. Every method here blocks; the actor calls them in worker
threads and never two at once, so one connection
(``check_same_thread=False``) serves every thread in turn. The one exception is a
checkpoint beside the writer (:data:`_CHECKPOINT_BESIDE`): it runs on a second
connection of its own, in a worker thread, while the writer commits.

Coalescing. Rows are keyed by ``seq`` (see :mod:`actormem._storage.sqlite_format`), and the
journal is applied per seq, last change wins: a seq whose last change is a death is
deleted; one that became live in the batch (store, upsert, merge) is written whole from
its current record; one whose access bookkeeping alone changed gets an ``UPDATE`` of its
three access columns (a store that holds access updates back,
:meth:`SqliteStore.defer_accesses`, keeps those for a later batch: :data:`_DEFER_ACCESS`).
An upsert or merge keeps its seq (death then birth: the row is rewritten); an id evicted
and stored again in one batch gets a new seq (the old row is deleted, the new one
inserted). Every change reduces to the final state of its seq and a seq never
belongs to two ids, so the order of statements in the transaction does not matter.

Opening (:meth:`SqliteStore.open`), in an order that never modifies a refused file:

1. Check the directory (exists, writable: WAL needs ``-wal``/``-shm`` beside the file).
2. Take the lock file (:mod:`actormem._storage.lock`); a second opener fails here.
3. Existing file: check the raw header, then validate and decode every row through a
   read-only connection (:func:`~actormem._storage.sqlite_format.read_validated`). A
   file of an older schema version is upgraded in place, in one transaction, only after
   it passed that validation (step 4, ``_migrate``).
   New file: build it under a temporary name and hard-link it into place, so a crash
   never leaves a half-created database at ``path``.
4. Only then open the read-write connection, in WAL mode, with the durability's
   ``synchronous`` setting, and record the file's device and inode: before each group
   commit one ``stat`` checks that ``path`` still names that file, so a database removed
   or replaced underneath fails the commit (and breaks the memory) instead of
   acknowledging writes into an unlinked file. A replicated node's checkpoint (its
   ``meta`` row :data:`NODE_KEY`) is refused here unless the opener is its node
   (:func:`refuse_node_file`), before anything is written (an older schema's upgrade
   aside).

Loading (the engine's ``MemoryState.load``) stores the decoded entries into the empty state
in ``seq`` order with their ``seq`` numbers, so insertion order, access counts and
timestamps come back exactly. Entries beyond ``capacity`` are evicted by the usual
eviction order as they load, and those evictions are committed before the memory opens.
"""

from __future__ import annotations

import contextlib
import enum
import json
import operator
import os
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from typing import Any

import attrs

from .._entry import MemoryEntry
from .._errors import StorageError
from .._outfile import missing_directory
from .._record import JOURNAL_DELETE, JOURNAL_PUT, Record
from .lock import FileLock
from .sqlite_format import (
    CREATE_SCHEMA,
    DELETE_ENTRY,
    DELETE_VECTOR,
    IMAGE_KEY,
    INSERT_ENTRY,
    INSERT_VECTOR,
    MIGRATE_FROM_1,
    MIGRATE_FROM_2,
    MIGRATE_FROM_3,
    SCHEMA_VERSION,
    SELECT_VECTOR_META,
    SET_META,
    UPDATE_ACCESS,
    LateCheck,
    check_header,
    check_schema,
    encode_access,
    encode_records,
    file_uri,
    image_marker,
    insert_entries,
    read_file,
    sqlite_reason,
    vector_rows,
)
from .sqlite_format import _same_sqlite as same_sqlite

try:  # the compiled writer of small group commits (setup.py; optional)
    from . import _cwrite  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - built without a C compiler or SQLite's header
    _cwrite = None

__all__ = ["Durability", "SqliteStore"]


class Durability(enum.Enum):
    """What an acknowledged write of a durable memory survives.

    In both modes the database is in WAL journal mode, a write is acknowledged only after
    the transaction holding it committed, and the file is never corrupted by a crash or a
    power loss: a transaction is on disk entirely or not at all
    (https://sqlite.org/wal.html, https://sqlite.org/pragma.html#pragma_synchronous).
    """

    #: ``PRAGMA synchronous=NORMAL``: the commit writes the WAL but does not fsync it.
    #: An acknowledged write survives a crash of the process (even SIGKILL); an OS crash
    #: or power loss may roll back the most recent commits (those since the last
    #: checkpoint). The default.
    NORMAL = "normal"
    #: ``PRAGMA synchronous=FULL``: every commit fsyncs the WAL before it is
    #: acknowledged, so an acknowledged write also survives power loss (on storage that
    #: honours fsync). Each commit costs one fsync; group commit shares it.
    FULL = "full"


@attrs.frozen(slots=True)
class Batch:
    """One group commit's statements, prepared on the event loop from a journal."""

    deletes: list[tuple[int]]
    puts: list[tuple[Any, ...]]
    accesses: list[tuple[Any, ...]]
    #: ``meta`` rows to set in the same transaction (a replica's applied seq).
    meta: list[tuple[str, str]] = attrs.field(factory=list)
    #: Delete every entry first (a replica starting over from a snapshot).
    clear: bool = False
    #: ``(seq, text_hash, vector bytes)`` of the dense index, for puts that have one.
    vectors: list[tuple[int, bytes, bytes]] = attrs.field(factory=list)
    #: WAL frames the access updates and deletes may add beside one a row: the pages
    #: of each such row too long for one page (a change of the row's size, such as its
    #: first access, makes SQLite write its overflow pages again; a delete zeroes them
    #: where SQLite is built with SECURE_DELETE, as Debian's is). See :func:`frames_of`.
    long_frames: int = 0

    def __len__(self) -> int:
        return len(self.deletes) + len(self.puts) + len(self.accesses)


def _fsync(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: The page size of a new file, in bytes: 8 KiB, where SQLite's default is 4 KiB. A
#: group commit of 2,000 rows of ~450 bytes costs ~3.0 µs of CPU a row in 4 KiB pages,
#: ~2.3 in 16 KiB (fewer pages to balance, checksum into the WAL and checkpoint), about
#: the same in 8 KiB; but a small commit (the main job's: 2 rows inserted, 6 access
#: updates on pages of their own) writes and checksums whole pages, ~5 a commit, and
#: costs ~20% less CPU in 8 KiB pages than in 16 (branch durable11; 16 KiB from
#: durable8 to durable10). The size is in the file's header: a file keeps the one it
#: was made with, any actormem (and SQLite) reads either, and the rows are the same.
#: None: SQLite's default, the path before durable8.
_PAGE_SIZE: int | None = 8192


#: The WAL frames (changed pages) after which a store that takes its own checkpoints
#: (:meth:`SqliteStore.take_checkpoints`) checkpoints: SQLite's default
#: ``wal_autocheckpoint``, so the log stays about as long as it would.
CHECKPOINT_FRAMES = 1000
#: A store that takes its own checkpoints (:meth:`SqliteStore.take_checkpoints`) runs
#: them on a second connection of its own, in a worker thread the engine starts after a
#: commit (:meth:`SqliteStore.checkpoint_due`, :meth:`SqliteStore.checkpoint_beside`)
#: and does not wait for: a PASSIVE checkpoint never blocks the writer, which keeps
#: committing (on the loop) while it copies. The batch whose commit made it due is
#: answered at once: on the project's VM a checkpoint (the copy and two fsyncs) took
#: 9-60 ms of wall time, which the ~27 batches of the main job that set one off waited
#: for, with every store queued behind them (the store's p99). And no batch goes to the
#: thread because a checkpoint is due. False: the checkpoint runs after the commit of
#: :meth:`SqliteStore.write` on its connection, before the batch is answered, the path
#: before it.
_CHECKPOINT_BESIDE = True
#: A checkpoint beside the writer (:data:`_CHECKPOINT_BESIDE`) that copied every frame
#: it found (PASSIVE), in a WAL of :data:`RESTART_AFTER` times :data:`CHECKPOINT_FRAMES`
#: frames or more since it last started over, copies those the writer committed
#: meanwhile too, in a FULL checkpoint on the same connection with ``busy_timeout`` 0:
#: it holds the write lock for that short copy and its two fsyncs, which the writer
#: then waits for (a memory's owner whose commit on the loop finds
#: the database locked while its checkpoint runs waits on the loop for the
#: checkpoint's end and commits there, instead of handing the batch to the worker
#: thread: ``memory._attach_store``), and gives up at once (copying what it can, as
#: PASSIVE) when the writer is committing or a reader of an older snapshot holds
#: frames. SQLite starts the WAL over (writes from its first frame again) only at a
#: commit that finds every frame copied, which a PASSIVE checkpoint beside a writer
#: committing every millisecond never left (a commit lands while it copies): the main
#: job's WAL grew to 27 MB, every frame of the run, beside a 4.7 MB database (20.6 MB
#: with this), each commit's frames written to new pages of the file; under a writer
#: that never pauses, without bound (129 MB after 60,000 single stores, 688 MB after
#: 40 s of 8 writers; with this it levels off: ~21 MB with 1 or 64 writers, 32-62 MB
#: with 8, whose commits land more often during a checkpoint's copy, so that its FULL
#: step gives up more often). False: PASSIVE only, and the thread waits for the lock,
#: the path before it.
_CHECKPOINT_RESTARTS = True
#: The WAL's frames since it last started over (``mxFrame``), in checkpoints' worth
#: (:data:`CHECKPOINT_FRAMES`), from which a checkpoint beside takes its FULL step
#: (:data:`_CHECKPOINT_RESTARTS`): the WAL then starts over once it holds about this
#: many times ``CHECKPOINT_FRAMES`` frames (~2,000-2,600, ~21 MB in 8 KiB pages, at
#: the default 2; more where the FULL step finds the writer committing and gives up),
#: and the writer waits for a FULL step's fsyncs once every few
#: checkpoints, not at each (the main job's ~13 a run: its store p99 read 10.5-11.5 ms
#: against 7.5-10.3 with a FULL step after every one, on a disk whose fsyncs took
#: milliseconds at load 4).
RESTART_AFTER = 2
#: After a checkpoint that left :data:`CHECKPOINT_FRAMES` frames or more in the WAL
#: (another connection's read transaction pins them: a PASSIVE checkpoint copies no
#: frame past the oldest reader's snapshot), the next one is due only once this share
#: of ``CHECKPOINT_FRAMES`` more frames is committed (:meth:`SqliteStore.checkpoint_due`),
#: and the back-off ends with the first one that leaves fewer. Without it the count
#: stayed at the threshold after each such checkpoint, and the next commit started
#: another, which could copy nothing more: a checkpoint thread on every commit while
#: the reader stayed (6,742 in 25 s, found by a reviewer). A quarter keeps those
#: checkpoints to about four per ``CHECKPOINT_FRAMES`` frames committed (one every
#: ~25 of the main job's commits at 1,000 frames, ~10 estimated frames each), while
#: the WAL outgrows the reader that pinned it by at most that quarter (~2 MB in 8
#: KiB pages) before a checkpoint copies it once the reader leaves; the commits are in
#: the WAL (fsynced as the durability says) either way, so nothing acknowledged
#: waits for it. A growing (doubling) back-off would cut the futile checkpoints
#: further but delay the copy after a long reader in proportion.
_BACKOFF_SHARE = 4
#: A memory whose last checkpoint beside the writer left frames in the WAL (a reader
#: pinned them, or it failed) and that then commits nothing for this many seconds runs
#: another PASSIVE checkpoint, in a worker thread as the others
#: (:meth:`SqliteStore.idle_checkpoint_due`, ``memory._idle_checkpoints``); while
#: frames are still left, again after twice as long each time, up to
#: :data:`IDLE_CHECKPOINT_MAX`, until one copies them all or a commit comes (whose
#: checkpoints take over). Without it a memory that got no more writes once the reader
#: left kept those frames uncopied (the back-off waits for
#: ``CHECKPOINT_FRAMES // _BACKOFF_SHARE`` more frames) for as long as it stayed open,
#: and a reader of the file read them from the WAL. The trio clock's seconds (tests use
#: a mock clock). Off (:data:`_IDLE_CHECKPOINTS` False): the path before.
IDLE_CHECKPOINT = 1.5
IDLE_CHECKPOINT_MAX = 60.0
_IDLE_CHECKPOINTS = True
#: A store that commits on the loop (:meth:`SqliteStore.take_checkpoints`) writes those
#: commits (:meth:`SqliteStore.write_inline`) through the compiled writer
#: (``_cwrite.c``): a third connection to the file, of its own, whose statements are
#: prepared once and whose rows are bound straight from the batch's tuples, with the
#: path's ``stat`` in C and the GIL held (no release and re-take around each of a
#: commit's ~10 statements, as Python's ``sqlite3`` does). The same statements in the
#: same order, on the same file: the same rows, the same acknowledgement after
#: ``COMMIT``. A batch holding a value it does not bind as ``sqlite3`` would (only exact
#: int, float, str, bytes, None), or a path that no longer names the file, takes the
#: Python path, which commits it or raises as before. Only where the writer is built
#: and linked against the SQLite of Python's ``sqlite3`` (two copies of SQLite in one
#: process do not see each other's locks). False: the Python path on the store's
#: connection, as before.
_C_COMMIT = True
#: A memory's store (``_attach_store``, :meth:`SqliteStore.defer_accesses`) writes its
#: access bookkeeping relatime-style (branch durable15): a batch's access updates (the
#: hits of retrieves and the expiry refreshes of reads, which no caller waits for) are
#: kept pending in the store, one per entry however many hits, and written with the
#: first commit made once :data:`ACCESS_PENDING` entries wait or the oldest waited
#: :data:`ACCESS_DELAY` seconds (the owner wakes for it when idle), and at a clean
#: close. Puts and deletes are written and acknowledged as before; the in-memory state
#: is the same; only the file's access counts, last-access and expiry times lag, by that
#: bound (docs/durability.md, "Access counts"). The main job's ~2,300 commits each carry
#: puts, ~16,000 access updates on ~13,000 scattered pages among them; held they come to
#: a few thousand rows on a few hundred pages. False: each batch's access updates in its
#: own commit, the path before it. Read by ``_attach_store`` when a memory opens, as
#: are both bounds below (a change to any of the three applies to memories opened
#: after it).
_DEFER_ACCESS = True
#: The most entries whose access updates a deferring store keeps pending: the next
#: commit after they pile up to this writes them all.
ACCESS_PENDING = 4096
#: The longest, in seconds, an access update of a deferring store waits for its commit
#: (counted from the batch that applied the first of those pending).
ACCESS_DELAY = 1.0
#: The commit's statements, in ``_cwrite.c``'s order.
_C_STATEMENTS = (
    "BEGIN IMMEDIATE",
    "COMMIT",
    "ROLLBACK",
    "DELETE FROM meta WHERE key = ?",
    DELETE_ENTRY,
    DELETE_VECTOR,
    INSERT_ENTRY,
    UPDATE_ACCESS,
    INSERT_VECTOR,
)
#: The primary result codes' names (https://sqlite.org/rescode.html): an extended
#: code's name starts with its primary's (``SQLITE_BUSY_SNAPSHOT``).
_PRIMARY_CODES = (
    "ERROR INTERNAL PERM ABORT BUSY LOCKED NOMEM READONLY INTERRUPT IOERR CORRUPT NOTFOUND "
    "FULL CANTOPEN PROTOCOL EMPTY SCHEMA TOOBIG CONSTRAINT MISMATCH MISUSE NOLFS AUTH "
    "FORMAT RANGE NOTADB NOTICE WARNING"
).split()


def _error_table() -> dict[str, Any]:
    """For ``_cwrite.set_errors``: ``sqlite3``'s exception classes by name, and under
    ``""`` each result code's ``SQLITE_`` name (``sqlite_errorname``). O(constants)."""
    primary = {getattr(sqlite3, "SQLITE_" + n, None): n for n in _PRIMARY_CODES}
    names: dict[int, str] = {}
    for name in dir(sqlite3):
        code = getattr(sqlite3, name)
        if not name.startswith("SQLITE_") or type(code) is not int:
            continue
        base = primary.get(code & 0xFF)
        if base is not None and (name == "SQLITE_" + base or name.startswith(f"SQLITE_{base}_")):
            names[code] = name
    table: dict[str, Any] = {"": names}
    for cls in ("InternalError", "OperationalError", "DatabaseError", "DataError",
                "IntegrityError", "InterfaceError"):  # fmt: skip
        table[cls] = getattr(sqlite3, cls)
    return table


def _c_writer_usable() -> bool:
    """Whether the compiled writer is built and runs the very SQLite (the same loaded
    copy) Python's ``sqlite3`` runs (:func:`~.sqlite_format._same_sqlite`). O(1) after
    the first call."""
    global _C_USABLE
    if _C_USABLE is None:
        _C_USABLE = same_sqlite(_cwrite)
        if _C_USABLE:
            _cwrite.set_errors(_error_table())
    return _C_USABLE


_C_USABLE: bool | None = None

#: Bytes a row counts for in :func:`frames_of` beside its long texts: the other columns
#: (id, category, namespace, three timestamps, ...), the cell's header and the pages'
#: slack (64,000 rows of the benchmark's texts took 389 bytes a row, 239 of them text).
_ROW_BYTES = 256
#: Getters of a row's columns that may be long (sqlite_format.COLUMNS): memory, tags,
#: key, value.
_LONG_COLUMNS = tuple(map(operator.itemgetter, (3, 4, 11, 12)))
_LONG = operator.itemgetter(3, 4, 11, 12)


def _bytes_bound(text: str) -> int:
    """At least the UTF-8 length of ``text`` (a character takes up to 4 bytes): its
    length if it is ASCII, else 4 bytes a character. O(1) (``isascii`` reads a flag)."""
    return len(text) if text.isascii() else 4 * len(text)


def _row_bound(row: tuple[Any, ...]) -> int:
    """At least the bytes of a put's row (:data:`_ROW_BYTES` beside its long texts)."""
    size = _ROW_BYTES
    for text in _LONG(row):
        if text is not None:
            size += _bytes_bound(text)
    return size


def _long_frames(size: int, page_size: int) -> int:
    """At least the pages a row of ``size`` bytes too long for its leaf takes: its
    overflow chain (``page_size - 4`` bytes a page), the last one partly filled."""
    return size // (page_size - 4) + 1


def _row_frames(size: int, page_size: int) -> int:
    """The overflow pages counted for a row of ``size`` bytes: :func:`_long_frames` when
    it may be too long for one page (past a quarter page), else 0. O(1)."""
    return _long_frames(size, page_size) if size > page_size // 4 else 0


def _puts_frames(puts: list[tuple[Any, ...]], page_size: int) -> int:
    """At least the pages of ``puts``' rows: their bytes (the long texts in UTF-8,
    bounded by :func:`_bytes_bound`, plus :data:`_ROW_BYTES` a row) in pages, or, when
    a row may overflow its leaf, each long row's pages on their own. O(puts), a few
    passes in C a column."""
    size = _ROW_BYTES * len(puts)
    longest = _ROW_BYTES if len(puts) > 8 else page_size  # a few: row by row
    for column in _LONG_COLUMNS if len(puts) > 8 else ():
        texts = list(filter(None, map(column, puts)))
        if texts:
            lengths = list(map(len, texts))
            wide = 1 if all(map(str.isascii, texts)) else 4
            size += wide * sum(lengths)
            longest += wide * max(lengths)
    if longest <= page_size // 4:  # no row overflows (SQLite keeps ~a page local)
        return -(-size // page_size)
    size = frames = 0
    for row in puts:
        n = _row_bound(row)
        if n > page_size // 4:
            frames += _long_frames(n, page_size)
        else:
            size += n
    return frames - (-size // page_size)


def frames_of(batch: Batch, page_size: int) -> int:
    """About how many WAL frames (pages) committing ``batch`` appends, never fewer: a
    page per deleted row, access update and vector (each may sit on a page of its
    own), the pages of the rows whose access update rewrites their overflow pages
    or deletes (``batch.long_frames``), the puts' pages (:func:`_puts_frames`), and
    three for a leaf's split (the new page, its parent, the header page with the
    file's size). It is above the count on average, by about half a page a row change:
    on the main job's batches (2 puts and 6 access updates on average) 10 against 5.2
    written, on 2,000-row ``store_many`` batches 64 against 48. O(puts)."""
    frames = 3 + len(batch.deletes) + len(batch.accesses) + len(batch.vectors)
    frames += batch.long_frames
    puts = batch.puts
    if not puts:
        return frames
    return frames + _puts_frames(puts, page_size)


def _entry_bound(entry: Any) -> int:
    """At least the bytes of an entry's long texts in its row: memory, key, value (its
    JSON text, cached by ``JsonObject``) in UTF-8, and the tags' JSON (12 bytes a
    character at most: an escaped astral character). O(tags)."""
    size = _bytes_bound(entry.memory)
    if entry.key is not None:
        size += _bytes_bound(entry.key)
    if entry.value is not None:
        size += _bytes_bound(entry.value._canonical())  # the length of its to_json()
    tags = entry.tags
    if tags:
        size += 12 * sum(map(len, tags)) + 3 * len(tags) + 2
    return size


#: :func:`_entry_frames` computes :func:`_entry_bound`'s sum in one frame, without its
#: three nested calls (``prepare`` calls it for every access update: ~16,600 a main-job
#: run), and counts a text that is not ASCII by its UTF-8 length instead of 4 bytes a
#: character: with 8 KiB pages, a main-job text of ~600 characters with one accent
#: (4 x 600 + 256 bytes, past a quarter page) counted a frame it never writes in every
#: access update, and the store checkpointed 43 times a run instead of 27. Never fewer
#: bytes than the row has. False: through :func:`_entry_bound`, the path before it.
_FLAT_FRAMES = True

#: :func:`_record_frames` reads a record's row size from its compiled store
#: (``EntryColumns.row_bytes``) instead of building its entry. False: the entry built
#: (the path before; the same counts).
_ROW_BYTES_C = True


def _utf8_len(text: str) -> int:
    """The UTF-8 length of ``text`` (a lone surrogate as 3 bytes). O(1) for ASCII."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _entry_frames(entry: Any, page_size: int) -> int:
    """The pages of an entry's row when it may be too long for one page (its overflow
    pages are written again when the row changes size, or zeroed when it is deleted),
    else 0. O(tags)."""
    if not _FLAT_FRAMES:
        return _row_frames(_entry_bound(entry) + _ROW_BYTES, page_size)
    text = entry.memory
    size = _ROW_BYTES + (len(text) if text.isascii() else _utf8_len(text))
    text = entry.key
    if text is not None:
        size += len(text) if text.isascii() else _utf8_len(text)
    value = entry.value
    if value is not None:
        text = value._canonical()  # the text of its to_json()
        size += len(text) if text.isascii() else _utf8_len(text)
    tags = entry.tags
    if tags:
        size += 12 * sum(map(len, tags)) + 3 * len(tags) + 2
    return _row_frames(size, page_size)


def _record_frames(rec: Record, page_size: int) -> int:
    """:func:`_entry_frames` of ``rec``'s entry, without building the entry where its
    store tells the row's size (the compiled ``EntryColumns.row_bytes``: the text's UTF-8
    bytes, a key's, the tags'): the durable commit counts every access update's row,
    and building each hit's entry for it cost the durable main job ~7% of its CPU.
    The same count (tests/test_review32_row_bytes.py). O(tags)."""
    if _FLAT_FRAMES and _ROW_BYTES_C:
        row_bytes = getattr(rec.cols, "row_bytes", None)
        if row_bytes is not None:
            n = row_bytes(rec.slot)
            if n >= 0:
                return _row_frames(_ROW_BYTES + n, page_size)
    return _entry_frames(rec.entry, page_size)


#: A commit of the compiled writer (:data:`_C_COMMIT`: the main job's every commit but
#: the held-back flushes) counts the WAL frames it appended as SQLite tells them (the
#: pages its pager wrote, ``SQLITE_DBSTATUS_CACHE_WRITE``: ``Writer.frames``) instead of
#: :func:`frames_of`' estimate, which is above the count by about half a page a row
#: change (a one-put commit: ~4 counted, ~1.6 written): the checkpoints beside then come
#: every :data:`CHECKPOINT_FRAMES` frames written, as SQLite's own automatic checkpoint
#: would (``wal_autocheckpoint`` counts the WAL's frames), not every ~400, and no
#: estimate is computed a commit. The WAL's bound is unchanged (its FULL step comes at
#: ``RESTART_AFTER * CHECKPOINT_FRAMES`` frames of the WAL as SQLite counts them either
#: way). Commits in the worker thread (Python's ``sqlite3``, which does not tell) keep
#: the estimate. False: the estimate for every commit, the path before it.
_REAL_FRAMES = True

#: ``prepare`` writes the held-back access updates it flushes in the order of their
#: seqs, the table's rowid: consecutive ``UPDATE``s then land on the same leaf pages and
#: the same path from the root, which SQLite finds in its page cache (and the CPU in its
#: caches) where updates in the order of first access (the pending dict's) jump across
#: the whole table. On the main job's file (5,649 rows, 8 KiB pages), 2,000 such updates
#: in one transaction took 9.0 ms of CPU sorted against 14.2 in first-access order
#: (medians of 30), 600 of them 4.0 against 4.7; the sort itself ~0.4 ms. The same rows
#: and pages written. False: the pending dict's order, the path before it.
_SORTED_FLUSH = True


def _left_after(log: int, done: int) -> int | None:
    """The frames a PASSIVE checkpoint left in the WAL (a reader of an older snapshot
    holds them), from ``PRAGMA wal_checkpoint``'s ``log`` and ``checkpointed`` counts; None
    when it did not run (both -1: another connection was checkpointing, SQLITE_BUSY),
    which keeps the count so that the next commit tries again. O(1)."""
    if log < 0 or done < 0:
        return None
    return max(0, log - done)


def _full_after(beside: sqlite3.Connection, left: int) -> int:
    """:data:`_CHECKPOINT_RESTARTS`' second step, after a PASSIVE checkpoint on
    ``beside`` that left ``left`` frames: a FULL checkpoint (``beside`` has
    ``busy_timeout`` 0: it copies, under the write lock, the frames the writer committed
    meanwhile, or gives up at once); the frames it left, or ``left`` when it failed
    (the PASSIVE one's copy stands). Blocking, O(frames committed meanwhile)."""
    try:
        busy, log, done = beside.execute("PRAGMA wal_checkpoint(FULL)").fetchone()
    except sqlite3.Error:
        return left
    again = _left_after(log, done)
    return left if again is None else again


def _create(path: str) -> None:
    """Create an empty actormem database at ``path`` atomically (it must not exist)."""
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(
        dir=directory, prefix=os.path.basename(path) + ".", suffix=".creating"
    )
    os.close(fd)
    try:
        conn = sqlite3.connect(tmp, isolation_level=None)
        try:
            if _PAGE_SIZE is not None:  # before the first table: fixed for the file's life
                conn.execute(f"PRAGMA page_size = {int(_PAGE_SIZE)}")
            conn.execute("BEGIN")
            for statement in CREATE_SCHEMA:
                conn.execute(statement)
            conn.execute("COMMIT")
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        finally:
            conn.close()
        if mode != "wal":
            raise StorageError(path, f"this file system does not support WAL mode ({mode})")
        _fsync(tmp)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise StorageError(path, "created by another program while being created") from None
        except OSError:
            # No hard links here (some FUSE or FAT file systems): we hold the lock, so
            # only a foreign program could create the file in between.
            if os.path.exists(path):
                raise StorageError(path, "created by another program while being created") from None
            os.rename(tmp, path)
        _fsync(directory)
    except StorageError:
        raise
    except (sqlite3.Error, OSError) as exc:
        raise StorageError(path, f"cannot create: {sqlite_reason(exc, path)}") from exc
    finally:
        for leftover in (tmp, tmp + "-journal", tmp + "-wal", tmp + "-shm"):
            try:
                os.unlink(leftover)
            except OSError:
                pass


def _migrate(path: str, conn: sqlite3.Connection, statements: tuple[str, ...]) -> None:
    """Upgrade a validated older file in place: one transaction, all or nothing (a crash
    or an error leaves the old version, which opens and upgrades next time)."""
    try:
        conn.execute("BEGIN IMMEDIATE")
        for statement in statements:
            conn.execute(statement)
        conn.execute("COMMIT")
    except sqlite3.Error as exc:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise StorageError(path, f"upgrading the file failed: {sqlite_reason(exc)}") from exc


def _roll_back(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any, after a failed write; a failing ROLLBACK
    is ignored (SQLite has then rolled back already, or the connection is gone)."""
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


#: How long a write waits for a lock another program holds on the database (ms).
_BUSY_MS = 10000


def _busy(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says another connection holds a lock (``SQLITE_BUSY...``)."""
    return str(getattr(exc, "sqlite_errorname", "")).startswith("SQLITE_BUSY")


def _connect(path: str, durability: Durability) -> sqlite3.Connection:
    """The read-write connection of a validated file, in WAL mode."""
    uri = file_uri(path) + "?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
        version = check_schema(path, conn, deep=False)  # cheap re-check under the lock
        if version < SCHEMA_VERSION:
            upgrade = (
                (MIGRATE_FROM_1 if version == 1 else ())
                + (MIGRATE_FROM_2 if version <= 2 else ())
                + MIGRATE_FROM_3
            )
            _migrate(path, conn, upgrade)
            check_schema(path, conn, deep=False)
        (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode != "wal":
            raise StorageError(path, f"cannot use WAL mode ({mode})")
        conn.execute(f"PRAGMA synchronous = {durability.name}")
    except BaseException:
        conn.close()
        raise
    return conn


#: The ``meta`` row that keeps a memory's statistics counters across opens (JSON object
#: of counter name to int). Best effort: written when a memory closes cleanly.
COUNTERS_KEY = "counters"


def _read_counters(conn: sqlite3.Connection) -> dict[str, int]:
    """The counters saved in the file, or ``{}`` (none saved, or a row that is not a JSON
    object of non-negative ints: counters are statistics, never a reason to refuse)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (COUNTERS_KEY,)).fetchone()
    if row is None:
        return {}
    try:
        value = json.loads(row[0])
    except (TypeError, ValueError, RecursionError):
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        k: v
        for k, v in value.items()
        if isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= 2**63 - 1
    }


#: The ``meta`` row that makes a file the local checkpoint of a node of a replicated
#: memory (its value: the memory's name; ``_engine/replica.py`` writes it with the log
#: position the rows hold).
NODE_KEY = "replica_memory"

#: The start of the reason :func:`refuse_node_file` gives (``is_node_file``).
_NODE_FILE = "the local checkpoint of a node of the replicated memory"


def refuse_node_file(path: str, conn: sqlite3.Connection) -> None:
    """Raise if the file of ``conn`` is a replicated memory's node checkpoint. One
    ``SELECT`` of a ``meta`` row, O(1).

    Such a file changes only by its memory's log: its ``meta`` rows name the log
    position its rows hold, and the node reloads them as that position's state. A
    store or delete by a memory opened without the log (an expiry, an eviction, an
    index image) was never in the log: the node reopened on the file would keep an
    entry no other node has and miss one every other node has, silently.

    Raises:
        StorageError: It is one (the reason names the memory and what to do instead).
    """
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (NODE_KEY,)).fetchone()
    except sqlite3.Error as exc:
        raise StorageError(path, sqlite_reason(exc, path)) from exc
    if row is not None:
        raise StorageError(
            path,
            f"{_NODE_FILE} {row[0]!r}: it changes only by that memory's log (a write "
            "here would be missing from the other nodes, or make this node differ from "
            f"them). Open it as the node: open_memory(log=..., name={row[0]!r}, "
            "path=...); read it with `actormem query`, `export` or `stats` (they write "
            "nothing); or export its entries and import them into a new file",
        )


def is_node_file(reason: str) -> bool:
    """Whether a :class:`~actormem.StorageError` reason is :func:`refuse_node_file`'s."""
    return reason.startswith(_NODE_FILE)


class Opening:
    """A file :meth:`SqliteStore.open_read` locked and read, not yet open for writing:
    :meth:`finish` makes the store, :meth:`abort` gives the file up. ``image``: the
    index image read with the rows (as ``SqliteStore.image``), or None. ``created``: the
    file did not exist when the lock was taken, this opening created it (as
    ``SqliteStore.created``). ``node``: the opener is the node of a replicated memory
    (:data:`NODE_KEY`): only it may finish the opening of a node's checkpoint."""

    __slots__ = (
        "_checks",
        "_cls",
        "_durability",
        "_lock",
        "_name",
        "_path",
        "created",
        "image",
        "node",
    )

    def __init__(
        self,
        cls: type[SqliteStore],
        path: str,
        name: str,
        durability: Durability,
        lock: FileLock,
        image: dict[str, bytes] | None,
        checks: list[LateCheck],
        *,
        created: bool = False,
    ) -> None:
        self._cls = cls
        self.created = created
        self._path = path
        self._name = name
        self._durability = durability
        self._lock: FileLock | None = lock
        self._checks = checks
        self.image = image
        self.node = False

    def finish(self) -> SqliteStore:
        """Wait for a ``quick_check`` still running (raising its error), then open the
        read-write connection (upgrading an older schema) and return the store (its
        ``image`` this one's). Once. On an error the lock is released.

        Raises:
            StorageError: The check refused the file; the file is a node's checkpoint
                and this opener no node (:func:`refuse_node_file`); or as
                :meth:`SqliteStore.open`.
        """
        lock, self._lock = self._lock, None
        if lock is None:
            raise StorageError(self._name, "the opening was finished or aborted")
        try:
            return self._finish(lock)
        except StorageError as exc:
            exc._name_as_given(self._path, self._name)
            raise

    def _finish(self, lock: FileLock) -> SqliteStore:
        path = self._path
        try:
            checks, self._checks = self._checks, []
            try:
                for check in checks:
                    check.result()
            finally:
                for check in checks:
                    check.stop()  # no-op once its result was taken
            try:
                conn = _connect(path, self._durability)
            except sqlite3.Error as exc:
                raise StorageError(path, sqlite_reason(exc, path)) from exc
            if not self.node:
                try:
                    refuse_node_file(path, conn)
                except BaseException:
                    conn.close()
                    raise
            try:
                store = self._cls(path, self._durability, lock, conn, name=self._name)
            except OSError as exc:
                conn.close()
                raise StorageError(path, f"cannot stat: {sqlite_reason(exc)}") from exc
            store.image = self.image
            store.created = self.created
        except BaseException:
            lock.release()
            raise
        self.image = None
        return store

    def abort(self) -> None:
        """Give the file up unchanged: stop a check still running, release the lock.
        Idempotent; a no-op after :meth:`finish`."""
        lock, self._lock = self._lock, None
        if lock is None:
            return
        checks, self._checks = self._checks, []
        try:
            for check in checks:
                check.stop()
        finally:
            lock.release()
        self.image = None


class SqliteStore:
    """The SQLite file of one durable memory. Blocking; one call at a time.

    Build with :meth:`open`; the caller must :meth:`close` it.

    Attributes:
        path: Absolute path of the database file.
        name: The path as the opener gave it (relative or not): its errors name the
            file so.
        durability: The :class:`Durability` it commits with.
        commits: Transactions committed by :meth:`write` (group commits).
        written: Row changes (deletes, writes, access updates) committed.
    """

    def __init__(
        self,
        path: str,
        durability: Durability,
        lock: FileLock,
        conn: sqlite3.Connection,
        *,
        name: str | None = None,
    ) -> None:
        self.path = path
        self.name = path if name is None else name
        self.durability = durability
        self._lock = lock
        self._conn: sqlite3.Connection | None = conn
        self.commits = 0
        self.written = 0
        #: The statistics counters saved in the file when it was opened (see
        #: :meth:`save_counters`), or last saved.
        self.saved_counters: dict[str, int] = _read_counters(conn)
        st = os.stat(path)
        self._identity = (st.st_dev, st.st_ino)
        #: The index image read when the file was opened (its bytes match the ``meta``
        #: marker; the engine validates the rest), or None. The engine drops it once used.
        self.image: dict[str, bytes] | None = None
        #: Whether :meth:`open` created the file: it did not exist when the lock was
        #: taken (so no other program can have written it: :meth:`close` may remove it).
        self.created = False
        #: Whether the file's image describes its rows (set by the engine once it used
        #: the image, and by :meth:`write_image`); the first commit clears it.
        self.image_fresh = False
        #: Whether a clean close writes an image of the index (for the next open to
        #: restore instead of rebuilding). The owner of a file that is removed right
        #: after its close (``actormem swarm``'s temporary file) sets it False: no open
        #: can ever read that image. The rows, access updates and counters are written
        #: and the file checkpointed and closed either way.
        self.keep_image = True
        #: Whether the close checkpoints the file (SQLite copies the WAL into the
        #: database when its last connection closes). The owner of a file removed right
        #: after its close (``actormem swarm``'s temporary file, ``cli._main``'s
        #: ``_NO_CHECKPOINT_FOR_TEMPORARY``) sets it False: :meth:`close` then closes the
        #: compiled writer last with SQLite's ``SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE``, and
        #: the WAL is left holding the commits (a later open would still recover every
        #: one of them from it). Only with the compiled writer open (:data:`_C_COMMIT`);
        #: otherwise the close checkpoints as always. True for every other file.
        self.checkpoint_on_close = True
        #: Whether the ``meta`` row :data:`IMAGE_KEY` may exist: the first :meth:`write`
        #: deletes it in its own transaction, so no image outlives a change of the rows.
        self._marked = True
        #: Whether :meth:`write` checkpoints (:meth:`take_checkpoints`) instead of SQLite.
        self._own_checkpoints = False
        #: Frames in the WAL since the last checkpoint, estimated (:func:`frames_of`).
        self.wal_frames = 0
        #: Checkpoints :meth:`write` ran (with :meth:`take_checkpoints`).
        self.checkpoints = 0
        #: The ``wal_frames`` from which a checkpoint is due after one that left
        #: :data:`CHECKPOINT_FRAMES` or more (:data:`_BACKOFF_SHARE`); 0: no back-off.
        self._due_after = 0
        #: Whether the last checkpoint beside whose result was taken copied every frame
        #: (False: it left some, or failed: :meth:`idle_checkpoint_due`).
        self._copied_all = True
        #: Whether the connection's ``busy_timeout`` is 0 (:meth:`take_checkpoints`).
        self._impatient = False
        #: The connection of checkpoints run beside the writer (:data:`_CHECKPOINT_BESIDE`),
        #: guarded by ``_beside_lock`` (held through a checkpoint and by :meth:`close`).
        self._beside: sqlite3.Connection | None = None
        self._beside_lock = threading.Lock()
        #: A checkpoint beside was started and its result not yet taken on the loop.
        self._beside_running = False
        #: Set by the checkpoint's thread: ``(wal_frames when it started, frames it
        #: left in the WAL)``, the second None if it failed. Taken by :meth:`checkpoint_due`.
        self._beside_done: tuple[int, int | None] | None = None
        #: The compiled writer of the commits on the loop (:data:`_C_COMMIT`), opened by
        #: :meth:`take_checkpoints`, closed first by :meth:`close`; None: the Python path.
        self._cwriter: Any = None
        #: Access updates held back (:meth:`defer_accesses`): seq -> its live record, whose
        #: current access fields are encoded when written; None: none are held back.
        self._pending: dict[int, Record] | None = None
        self._pending_limit = ACCESS_PENDING  # (set by defer_accesses)
        self._page_size: int = conn.execute("PRAGMA page_size").fetchone()[0]

    def _open_conn(self) -> sqlite3.Connection:
        """The store's connection. O(1).

        Raises:
            StorageError: The store is closed.
        """
        conn = self._conn
        if conn is None:
            raise StorageError(self.name, "the store is closed")
        return conn

    def _check_identity(self) -> None:
        """Raise unless ``path`` still names the file opened (one ``stat``, O(1)).

        A database removed or replaced underneath would otherwise keep acknowledging
        commits into an unlinked inode that nobody can open again.
        """
        try:
            st = os.stat(self.path)
        except OSError as exc:
            raise StorageError(
                self.name, f"the database file was removed or moved away ({exc.strerror})"
            ) from exc
        if (st.st_dev, st.st_ino) != self._identity:
            raise StorageError(self.name, "the database file was replaced by another file")

    @classmethod
    def open(
        cls,
        path: str,
        durability: Durability,
        prepare: Callable[[dict[str, bytes]], Any] | None = None,
        *,
        node: bool = False,
    ) -> tuple[SqliteStore, list[tuple[int, MemoryEntry]]]:
        """Lock, validate (or create) and open ``path``; return the store and its entries.

        The entries are ``(seq, entry)`` pairs in insertion order. A file this refuses
        is left byte-for-byte unchanged. O(file size). ``prepare``: as
        :func:`~actormem._storage.sqlite_format.read_file`'s (work on the index image
        while the rows are read). ``node``: the opener is a replicated memory's node
        (``_engine/replica.py``), the only one that may open a node's checkpoint
        (:func:`refuse_node_file`).

        Raises:
            StorageError: The directory is missing or not writable; another memory holds
                the file; the file is empty, not an actormem database, from a newer
                schema version, or corrupted; it is a node's checkpoint and ``node`` is
                False; SQLite or the OS failed.
        """
        opening, entries = cls.open_read(path, durability, prepare, late=False)
        opening.node = node
        return opening.finish(), entries

    @classmethod
    def open_read(
        cls,
        path: str,
        durability: Durability,
        prepare: Callable[[dict[str, bytes]], Any] | None = None,
        consume: Callable[[list[Any], bytearray], bool] | None = None,
        *,
        late: bool = True,
    ) -> tuple[Opening, list[tuple[int, MemoryEntry]]]:
        """:meth:`open`'s first part: lock, validate (or create) and read ``path``; its
        :meth:`Opening.finish` is the rest (the read-write connection, the store). With
        ``late`` (and ``sqlite_format._CHECK_LATE``), ``quick_check`` may still be
        running when this returns (:class:`~actormem._storage.sqlite_format.LateCheck`):
        ``finish`` waits for it, and raises its error, before it opens the file for
        writing, so a file it refuses is left unchanged as by :meth:`open`. The caller
        must ``finish`` or :meth:`Opening.abort` what this returns, on every path.
        ``consume``: as :func:`~actormem._storage.sqlite_format.read_file`'s (the rows
        handed over as they are read).

        Raises:
            StorageError: As :meth:`open` (all but the late ``quick_check``'s error).
        """
        name = path  # as given: the errors name it so (a relative path stays relative)
        path = os.path.abspath(path)
        try:
            return cls._open_read(path, name, durability, prepare, late, consume)
        except StorageError as exc:
            exc._name_as_given(path, name)
            raise

    @classmethod
    def _open_read(
        cls,
        path: str,
        name: str,
        durability: Durability,
        prepare: Callable[[dict[str, bytes]], Any] | None,
        late: bool,
        consume: Callable[[list[Any], bytearray], bool] | None = None,
    ) -> tuple[Opening, list[tuple[int, MemoryEntry]]]:
        """:meth:`open_read` of the absolute ``path``, given as ``name``."""
        # SQLite follows a symlink to put -wal/-shm beside the real file; so does the
        # lock, so that two links to one database share it. (Hard links are not
        # supported: https://sqlite.org/howtocorrupt.html, section 2.5.)
        real = os.path.realpath(path)
        directory = os.path.dirname(real)
        missing = missing_directory(name)  # the folder as given (same working directory)
        if missing is not None:
            raise StorageError(path, missing)
        if os.path.isdir(path):
            raise StorageError(path, "is a directory")
        if os.path.exists(path) and not os.path.isfile(path):
            # (a FIFO's open would wait for a writer; a device or a socket is no database)
            raise StorageError(path, "not a regular file (a FIFO, a device or a socket)")
        if not os.access(directory, os.W_OK | os.X_OK):
            raise StorageError(
                path,
                "the directory is not writable (WAL mode creates the -wal and -shm files, "
                "and actormem a .lock file, beside the database)",
            )
        if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
            raise StorageError(path, "the file is not readable and writable")
        lock = FileLock(path, real + ".lock")
        checks: list[LateCheck] = []
        created = False
        try:
            image = None
            if os.path.exists(path):
                check_header(path)
                entries, image = read_file(
                    path, prepare=prepare, late=checks if late else None, consume=consume
                )
            else:
                wal = path + "-wal"
                if os.path.exists(wal) and os.path.getsize(wal) > 0:
                    raise StorageError(
                        path, f"the database is missing but its log {wal} exists; move it away"
                    )
                _create(real)
                created = True
                entries = []
        except BaseException:
            try:
                for check in checks:
                    check.stop()
            finally:
                lock.release()
            raise
        return Opening(cls, path, name, durability, lock, image, checks, created=created), entries

    def delete_seqs(self, seqs: list[int]) -> None:
        """Delete the rows of ``seqs`` in one transaction (the evictions of a load). Blocking.

        Raises:
            StorageError: As :meth:`write`.
        """
        if seqs:
            self.write(Batch([(seq,) for seq in seqs], [], []))

    def defer_accesses(self, limit: int) -> None:
        """Hold access updates back from now on (:data:`_DEFER_ACCESS`): :meth:`prepare`
        keeps them pending until ``flush``, ``limit`` of them (``_attach_store`` passes
        :data:`ACCESS_PENDING` as it is when the memory opens), or
        :meth:`flush_accesses` (``limit`` 0: every commit writes them). Only for a store
        whose every change goes through :meth:`prepare` (a memory's owner; not a
        replica's, whose ``meta`` row names the log position its rows hold). O(1).

        Raises:
            ValueError: ``limit`` is not an int of at least 0.
        """
        if type(limit) is not int or limit < 0:
            raise ValueError(f"defer_accesses: limit must be an int >= 0, not {limit!r}")
        self._pending_limit = limit
        if self._pending is None:
            self._pending = {}

    @property
    def pending_accesses(self) -> int:
        """Entries whose access update is held back, not yet in the file. O(1)."""
        pending = self._pending
        return 0 if pending is None else len(pending)

    def flush_accesses(self) -> None:
        """Commit the access updates held back (:meth:`defer_accesses`), if any, in one
        transaction (:meth:`write`); a clean close calls it first. Blocking, O(pending).

        Raises:
            StorageError: As :meth:`write` (the updates are then dropped: the memory is
                failing; they were acknowledged to nobody).
        """
        if self._pending:
            batch = self.prepare([], flush=True)
            if len(batch):  # never followed by a checkpoint: the close's own comes next
                self._write(batch, True, False)

    def prepare(
        self,
        journal: list[tuple[int, Record]],
        vector_of: Callable[[Record], tuple[bytes, bytes] | None] | None = None,
        *,
        flush: bool = False,
    ) -> Batch:
        """Coalesce a journal per seq, last change wins (see the module docs).

        ``vector_of(rec)`` gives the ``(text_hash, vector bytes)`` to store with a put
        (the dense index's), or None. Runs on the event loop, while the owner is between
        batches, so the records cannot change. O(changes), plus O(pending) when the
        access updates held back are written.

        A store that holds access updates back (:meth:`defer_accesses`) moves the
        journal's into its pending set (a later update of a seq replaces its earlier
        one; a put or delete of the seq drops it: the put writes the whole row) and
        adds the whole set to the batch, with the current access fields of each record,
        when ``flush`` or once its limit (:meth:`defer_accesses`) are pending. The batch may then be
        empty (``len(batch) == 0``, no vectors): nothing to commit.
        """
        last: dict[int, tuple[int, Record]] = {}
        became_live: set[int] = set()
        # The file's rows that died before their seq was born again (an upsert, a
        # merge): rewriting one frees its overflow chain (zeroed, SECURE_DELETE).
        reborn: dict[int, Record] = {}
        for kind, rec in journal:
            last[rec.seq] = (kind, rec)
            if kind == JOURNAL_PUT:
                became_live.add(rec.seq)
            elif kind == JOURNAL_DELETE and rec.seq not in became_live:
                reborn.setdefault(rec.seq, rec)
        deletes: list[tuple[int]] = []
        puts: list[Record] = []  # encoded in one call, in this order
        accesses: list[tuple[Any, ...]] = []
        updated: Any = []  # the records whose access fields are written, in this order
        vectors: list[tuple[int, bytes, bytes]] = []
        long_frames = 0
        page = self._page_size
        pending = self._pending
        if pending is not None:
            for seq, (kind, rec) in last.items():
                if kind == JOURNAL_DELETE or seq in became_live:
                    pending.pop(seq, None)  # the row deleted, or written whole below
                else:
                    pending[seq] = rec
            if flush or len(pending) >= self._pending_limit:
                self._pending = {}
                updated = pending.values()
                if _SORTED_FLUSH:  # by seq: the rows' order in the table (the rowid)
                    updated = [pending[seq] for seq in sorted(pending)]
        for seq, (kind, rec) in last.items():
            if kind == JOURNAL_DELETE:
                deletes.append((seq,))
                if seq not in became_live:  # a row of the file: SECURE_DELETE zeroes
                    more = _record_frames(rec, page)  # its overflow pages
                    long_frames += more + 1 if more else 0  # and a freelist trunk
            elif seq in became_live:
                puts.append(rec)
                dead = reborn.get(seq) if reborn else None
                if dead is not None:  # the old row's chain, freed, and a freelist trunk
                    more = _record_frames(dead, page)
                    long_frames += more + 1 if more else 0
                vector = None if vector_of is None else vector_of(rec)
                if vector is not None:
                    vectors.append((seq, *vector))
            elif pending is None:
                updated.append(rec)
        for rec in updated:  # held back ones flushed, or this batch's
            accesses.append(encode_access(rec))
            # A long row whose record changes size (its first access, a count whose
            # integer widens) is built anew: a new overflow chain, the old one freed
            # (zeroed) to a freelist trunk. The same size: only the changed pages.
            more = _record_frames(rec, page)
            long_frames += 2 * more + 1 if more else 0
        return Batch(
            deletes, encode_records(puts), accesses, vectors=vectors, long_frames=long_frames
        )

    def take_checkpoints(self) -> None:
        """Make the store ready for commits on the caller's event loop
        (:meth:`write_inline`). SQLite's automatic checkpoint goes off
        (``PRAGMA wal_autocheckpoint = 0``): :meth:`write` checkpoints instead, once the
        WAL holds about :data:`CHECKPOINT_FRAMES` frames since the last checkpoint
        (estimated by :func:`frames_of`, set right by each checkpoint's own count), so a
        write that :meth:`inline_ok` allows never checkpoints (no copying, no fsync). And
        the connection stops waiting for a lock another program holds
        (``busy_timeout`` 0): :meth:`write_inline` then gives up at once, and
        :meth:`write` waits for it as before (``busy_timeout`` of 10 s for that one
        ``BEGIN``). With :data:`_CHECKPOINT_BESIDE`, it also opens the second
        connection the checkpoints run on instead (:meth:`checkpoint_due`); then
        :meth:`write` never checkpoints. O(1).

        Raises:
            StorageError: The store is closed or SQLite failed.
        """
        conn = self._open_conn()
        try:
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute("PRAGMA busy_timeout = 0")
        except sqlite3.Error as exc:
            raise StorageError(self.name, sqlite_reason(exc)) from exc
        self._own_checkpoints = self._impatient = True
        if _CHECKPOINT_BESIDE and self._beside is None:
            self._beside = self._open_beside()
        if _C_COMMIT and self._cwriter is None and self.durability is Durability.NORMAL:
            self._cwriter = self._open_cwriter()

    def _open_cwriter(self) -> Any:
        """The compiled writer (:data:`_C_COMMIT`): a read-write connection of its own
        with ``busy_timeout`` 0, the store's ``synchronous`` and no automatic
        checkpoint, its statements prepared. None if it is not built, not linked against
        Python's SQLite, cannot be opened, or the path no longer names the file opened:
        the commits then take the Python path. Blocking, O(1)."""
        if not _c_writer_usable():
            return None
        setup = (
            "PRAGMA busy_timeout = 0; "
            f"PRAGMA synchronous = {self.durability.name}; "
            "PRAGMA wal_autocheckpoint = 0"
        )
        dev, ino = self._identity
        try:
            writer = _cwrite.Writer(
                file_uri(self.path) + "?mode=rw", os.fsencode(self.path), dev, ino, setup,
                _C_STATEMENTS,
            )  # fmt: skip
        except (sqlite3.Error, ValueError, OverflowError):
            return None
        try:
            self._check_identity()
        except StorageError:
            writer.close()
            return None
        return writer

    def _open_beside(self) -> sqlite3.Connection | None:
        """A second read-write connection to the file, for checkpoints beside the writer
        (:data:`_CHECKPOINT_BESIDE`), with the writer's ``synchronous`` (a checkpoint
        fsyncs the WAL, then the database, unless ``OFF``). None if it cannot be opened
        or the path no longer names the file opened: checkpoints then follow
        :meth:`write`'s commits, as without the knob. Blocking, O(1)."""
        try:
            beside = sqlite3.connect(
                file_uri(self.path) + "?mode=rw",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error:
            return None
        try:
            beside.execute("PRAGMA wal_autocheckpoint = 0")
            beside.execute(f"PRAGMA synchronous = {self.durability.name}")
            beside.execute("PRAGMA busy_timeout = 0")  # (_CHECKPOINT_RESTARTS' FULL)
            self._check_identity()
        except (sqlite3.Error, StorageError):
            beside.close()
            return None
        return beside

    def checkpoint_due(self) -> bool:
        """Whether to start :meth:`checkpoint_beside` now (in a worker thread): there is
        a connection for it, none is running, and the WAL holds about
        :data:`CHECKPOINT_FRAMES` frames since the last one (more, a quarter of them
        after the last one, when that one left ``CHECKPOINT_FRAMES`` or more to a reader:
        :data:`_BACKOFF_SHARE`). First takes the result of a finished one:
        ``wal_frames`` becomes the frames committed since it started plus those it could
        not copy (a failed one leaves the count and the back-off, so the next commit
        tries again). Call on the loop (the thread of the commits). O(1)."""
        self._take_beside_result()
        return (
            self._beside is not None
            and not self._beside_running
            and self.wal_frames >= self._due_frames()
        )

    def idle_checkpoint_due(self) -> bool:
        """Whether to start :meth:`checkpoint_beside` now although no checkpoint is due
        by frames, on a memory that committed nothing for a while
        (:data:`IDLE_CHECKPOINT`): there is a connection for it, none is running, and
        the last one left frames in the WAL or failed. First takes the result of a
        finished one, as :meth:`checkpoint_due` does. Call on the loop. O(1)."""
        self._take_beside_result()
        return self._beside is not None and not self._beside_running and not self._copied_all

    def checkpoint_left_frames(self) -> bool:
        """Whether the last checkpoint beside that ended (its result taken or not) left
        frames in the WAL, or failed. Call on the loop. O(1)."""
        done = self._beside_done
        if done is not None:
            return done[1] != 0
        return not self._copied_all

    def _take_beside_result(self) -> None:
        """Take the result of a finished checkpoint beside, if any (see
        :meth:`checkpoint_due`). On the loop. O(1)."""
        done = self._beside_done
        if done is not None:
            self._beside_done = None
            self._beside_running = False
            started, left = done
            self._copied_all = left == 0
            if left is not None:
                self.checkpoints += 1
                self.wal_frames = max(0, self.wal_frames - started) + left
                self._back_off(left)

    def _back_off(self, left: int) -> None:
        """After a checkpoint (its result counted in ``wal_frames``) that left ``left``
        frames: the next is due :data:`_BACKOFF_SHARE`' share of
        :data:`CHECKPOINT_FRAMES` frames from now if it left ``CHECKPOINT_FRAMES`` or
        more (a reader pins them: another at once would copy nothing), else at the
        plain threshold. O(1)."""
        if left >= CHECKPOINT_FRAMES:
            self._due_after = self.wal_frames + max(1, CHECKPOINT_FRAMES // _BACKOFF_SHARE)
        else:
            self._due_after = 0

    def _due_frames(self) -> int:
        """The ``wal_frames`` from which a checkpoint is due: :data:`CHECKPOINT_FRAMES`,
        or more after one that a reader kept from copying (:meth:`_back_off`). O(1)."""
        return max(CHECKPOINT_FRAMES, self._due_after)

    def checkpoint_not_started(self) -> None:
        """Undo :meth:`checkpoint_beside`'s mark when its function could not be handed to
        a thread: the count stays, and the next commit's :meth:`checkpoint_due` may start
        one again. Call on the loop. O(1)."""
        self._beside_running = False

    def checkpoint_beside(self) -> Callable[[], None]:
        """Mark a checkpoint beside the writer started and return the blocking function
        that runs it, for a worker thread: a PASSIVE checkpoint on the second connection
        (it copies the frames committed before it began; the writer commits meanwhile),
        its result left for :meth:`checkpoint_due`. A failure is ignored, as
        :meth:`_checkpoint`'s is; after :meth:`close` it does nothing. Call on the loop
        when :meth:`checkpoint_due` said so. O(1); the function O(frames)."""
        self._beside_running = True
        started = self.wal_frames

        def run() -> None:
            left: int | None = None
            try:
                with self._beside_lock:
                    beside = self._beside
                    if beside is not None:
                        busy, log, done = beside.execute(
                            "PRAGMA wal_checkpoint(PASSIVE)"
                        ).fetchone()
                        left = _left_after(log, done)
                        if (
                            _CHECKPOINT_RESTARTS
                            and left == 0
                            and log >= RESTART_AFTER * CHECKPOINT_FRAMES
                        ):
                            left = _full_after(beside, left)
            except sqlite3.Error:
                left = None
            finally:
                self._beside_done = (started, left)

        return run

    def _patient(self, conn: sqlite3.Connection) -> None:
        """Wait for another program's lock again (``busy_timeout`` back to
        :data:`_BUSY_MS`), as the best-effort writes of a closing memory did before
        :meth:`take_checkpoints`; no more :meth:`write_inline` after it. Raises
        sqlite3.Error."""
        if self._impatient:
            self._impatient = False
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")

    def inline_ok(self, batch: Batch, rows: int) -> bool:
        """Whether :meth:`write_inline` may take ``batch``: durability ``normal`` (no
        fsync in a commit), :meth:`take_checkpoints` was called and (unless checkpoints
        run beside, :data:`_CHECKPOINT_BESIDE`) no checkpoint is due after ``batch``, at
        most ``rows`` row changes (vectors included), and no ``meta`` rows or clearing.
        O(puts)."""
        return (
            self._impatient
            and self.durability is Durability.NORMAL
            and len(batch) + len(batch.vectors) <= rows
            and not batch.meta
            and not batch.clear
            and (
                self._beside is not None  # checkpoints beside: none comes after a commit
                or self.wal_frames + frames_of(batch, self._page_size) < self._due_frames()
            )
        )

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        """A passive checkpoint (it never waits for readers), after a commit. Its
        failure is ignored, as SQLite ignores that of its automatic checkpoint: the
        commit before it stands, and the next :meth:`write` tries again."""
        try:
            busy, log, done = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error:
            return
        left = _left_after(log, done)
        if left is not None:
            self.checkpoints += 1
            self.wal_frames = left
            self._back_off(left)

    def write(self, batch: Batch) -> None:
        """Commit ``batch`` as one transaction, entirely or not at all. Blocking.

        With :meth:`take_checkpoints`, a checkpoint follows the commit once it is due,
        unless checkpoints run beside the writer (:meth:`checkpoint_due`).

        Raises:
            StorageError: The file at ``path`` is no longer the one opened (removed,
                moved, replaced: checked by device and inode before the transaction);
                or the transaction failed (disk full, I/O error, ...); it was
                rolled back. (If the failure struck after SQLite wrote the commit record,
                the batch may still be on disk; it was not acknowledged either way.)
        """
        self._write(batch, True)

    def write_inline(self, batch: Batch) -> bool:
        """:meth:`write` for a batch that :meth:`inline_ok` allows, on the event loop:
        the same transaction, never followed by a checkpoint, and False, with nothing
        done, when another program holds the database's write lock (then commit it with
        :meth:`write` in a thread, which waits for the lock). True once committed.

        Raises:
            StorageError: As :meth:`write`.
        """
        return self._write(batch, False)

    def _write(self, batch: Batch, wait: bool, checkpoint: bool = True) -> bool:
        conn = self._open_conn()
        writer = self._cwriter
        if writer is not None and not wait and not batch.meta and not batch.clear:
            changes_rows = bool(batch.deletes or batch.puts)
            try:
                done = writer.commit(
                    IMAGE_KEY if self._marked and changes_rows else None,
                    batch.deletes, batch.puts, batch.accesses, batch.vectors,
                )  # fmt: skip
            except sqlite3.Error as exc:  # rolled back
                raise StorageError(self.name, f"commit failed: {sqlite_reason(exc)}") from exc
            if done == 0:  # another program holds the write lock: nothing done
                return False
            if done == 1:
                self._committed(batch, changes_rows, writer.frames if _REAL_FRAMES else -1)
                return True
            # -1, nothing done: a value it does not bind, or the path's identity (which
            # the Python path checks again, and raises for)
        self._check_identity()
        try:
            if not self._begin(conn, wait):
                return False
            changes_rows = bool(batch.clear or batch.deletes or batch.puts)
            if self._marked and changes_rows:  # the image no longer describes the rows
                conn.execute("DELETE FROM meta WHERE key = ?", (IMAGE_KEY,))
            if batch.clear:
                conn.execute("DELETE FROM entries")
                conn.execute("DELETE FROM vectors")
            if batch.meta:
                conn.executemany(SET_META, batch.meta)
            if batch.deletes:
                conn.executemany(DELETE_ENTRY, batch.deletes)
                conn.executemany(DELETE_VECTOR, batch.deletes)
            if batch.puts:
                insert_entries(conn, batch.puts)
            if batch.accesses:
                conn.executemany(UPDATE_ACCESS, batch.accesses)
            if batch.vectors:
                conn.executemany(INSERT_VECTOR, batch.vectors)
            conn.execute("COMMIT")
        except (sqlite3.Error, OSError) as exc:
            _roll_back(conn)
            raise StorageError(self.name, f"commit failed: {sqlite_reason(exc)}") from exc
        self._committed(batch, changes_rows)
        if (
            self._own_checkpoints
            and wait
            and checkpoint
            and self._beside is None
            and self.wal_frames >= self._due_frames()
        ):
            self._checkpoint(conn)
        return True

    def _committed(self, batch: Batch, changes_rows: bool, frames: int = -1) -> None:
        """The bookkeeping after ``batch`` committed: the counts, the image marker's
        state, the WAL's frames: ``frames`` when SQLite told them (>= 0: the compiled
        writer's count, :data:`_REAL_FRAMES`), else estimated (:func:`frames_of`).
        O(1) with ``frames``, else O(puts)."""
        self.commits += 1
        self.written += len(batch)
        if changes_rows:  # access bookkeeping alone leaves what an image describes
            self._marked = self.image_fresh = False
        if self._own_checkpoints:
            self.wal_frames += frames if frames >= 0 else frames_of(batch, self._page_size)

    def _begin(self, conn: sqlite3.Connection, wait: bool) -> bool:
        """``BEGIN IMMEDIATE`` (the write lock); False if another program holds it and
        ``wait`` is false (only after :meth:`take_checkpoints`; before it, the
        connection waits up to :data:`_BUSY_MS` anyway). With ``wait``, a held lock is
        waited for up to :data:`_BUSY_MS`, as before. Raises sqlite3.Error."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if not self._impatient or not _busy(exc):
                raise
            if not wait:
                return False
            conn.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            finally:
                conn.execute("PRAGMA busy_timeout = 0")
        return True

    def write_image(self, parts: dict[str, bytes]) -> bool:
        """Keep the index image ``parts`` beside the rows: the old image's rows deleted,
        the new ones inserted and the ``meta`` row naming it set, in one transaction (a
        crash leaves the old state: no marker, or one that names the old image, whose
        bytes are still there). Best effort, like :meth:`save_counters`: a failure is
        rolled back and returns False. Call it only while the rows are those the image
        describes (no commit in between). Blocking; O(image size).
        """
        conn = self._conn
        if conn is None:
            return False
        marker = image_marker(parts)
        try:
            self._patient(conn)
            self._check_identity()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM index_image")
            conn.executemany(
                "INSERT INTO index_image (name, data) VALUES (?, ?)", sorted(parts.items())
            )
            conn.execute(SET_META, (IMAGE_KEY, marker))
            conn.execute("COMMIT")
        except (sqlite3.Error, OSError, StorageError):
            _roll_back(conn)
            return False
        self._marked = self.image_fresh = True
        return True

    def read_meta(self) -> dict[str, str]:
        """Every ``meta`` row (schema version, a replica's checkpoint). Blocking, O(rows).

        Raises:
            StorageError: The store is closed or SQLite failed.
        """
        conn = self._open_conn()
        try:
            return {str(k): str(v) for k, v in conn.execute("SELECT key, value FROM meta")}
        except sqlite3.Error as exc:
            raise StorageError(self.name, f"reading meta failed: {sqlite_reason(exc)}") from exc

    def read_vectors(self, model: str, dim: int) -> dict[int, tuple[bytes, bytes]]:
        """The stored vectors, ``{seq: (text_hash, float32 bytes)}``, if they were made by
        ``model`` with ``dim`` dimensions (the ``meta`` rows ``dense_model`` and
        ``dense_dim``). Otherwise the vectors are deleted, the meta rows set to this model,
        in one transaction, and ``{}`` returned (they are recomputed). Rows of the wrong
        length are left out. Blocking. O(vectors).

        Raises:
            StorageError: SQLite failed.
        """
        conn = self._open_conn()
        try:
            self._patient(conn)
            meta = dict(conn.execute(SELECT_VECTOR_META))
            if meta == {"dense_model": model, "dense_dim": str(dim)}:
                return {seq: (digest, vector) for seq, digest, vector in vector_rows(conn, dim)}
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("DELETE FROM vectors")
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('dense_model', ?), ('dense_dim', ?)",
                (model, str(dim)),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise StorageError(self.name, f"reading vectors failed: {sqlite_reason(exc)}") from exc
        return {}

    def abort_when(self, check: Callable[[], bool] | None) -> None:
        """Make every statement of later :meth:`write` calls ask ``check()`` every few
        thousand SQLite virtual-machine steps, and fail (rolled back, :class:`StorageError`
        "interrupted") once it returns true; ``None`` removes the check. ``check`` runs
        in the thread that writes. O(1).
        """
        conn = self._conn
        if conn is not None:
            conn.set_progress_handler(None if check is None else (lambda: check()), 4096)

    def save_counters(self, counters: dict[str, int]) -> None:
        """Keep ``counters`` (statistics) in the file, unless they equal those saved, so
        that closing a memory that did nothing writes nothing (a counter missing from
        either counts as 0: a file written by ``import``, which keeps no ``retrieves``,
        is left as it is by a read). Best effort: a failure (disk full, a file removed
        underneath) leaves the previous counters and is not raised; the entries are never
        affected. Blocking; one autocommitted statement.
        """
        conn = self._conn
        if conn is None or _nonzero(counters) == _nonzero(self.saved_counters):
            return
        try:
            self._patient(conn)
            self._check_identity()
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (COUNTERS_KEY, json.dumps(counters, sort_keys=True)),
            )
        except (sqlite3.Error, OSError, StorageError):
            return
        self.saved_counters = dict(counters)

    def close(self, *, remove: bool = False) -> None:
        """Close the connection (SQLite checkpoints the WAL, unless
        :attr:`checkpoint_on_close` is False and the compiled writer is open) and release
        the lock; first wait for a checkpoint beside that is running and close its
        connection.

        With ``remove``, the database file (and its ``-wal``, ``-shm``, ``-journal``) is
        deleted after the connection is closed and before the lock is released, if the
        path still names the file this store opened: ``actormem import`` removes a file
        it :attr:`created` and failed to fill. Deleted under the lock, so it is never a
        file another program created or wrote meanwhile (that program would have had to
        hold the lock). A deletion that fails is skipped (read-only mount).

        Idempotent. Blocking.

        Raises:
            StorageError: Closing failed; the lock is released anyway.
        """
        conn, self._conn = self._conn, None
        writer, self._cwriter = self._cwriter, None
        last = None  # the compiled writer, closed last without a checkpoint
        if writer is not None:
            if self.checkpoint_on_close or conn is None:
                writer.close()  # before the store's own: its close checkpoints
            else:
                # Open while the store's own connection closes, that close is not the
                # file's last, so it does not checkpoint; nor does the writer's.
                last = writer
        with self._beside_lock:  # after a checkpoint beside that is running
            beside, self._beside = self._beside, None
        if beside is not None:
            try:
                beside.close()
            except sqlite3.Error:
                pass
        try:
            if conn is not None:
                conn.close()
        except sqlite3.Error as exc:
            raise StorageError(self.name, f"close failed: {sqlite_reason(exc)}") from exc
        finally:
            try:
                if last is not None:
                    last.close_uncheckpointed()
                if remove and conn is not None:
                    self._remove_file()
            finally:
                self._lock.release()

    def _remove_file(self) -> None:
        """Delete the database and its sidecars if ``path`` still names the file this
        store opened (:meth:`close` with ``remove``, under the lock). O(1)."""
        real = os.path.realpath(self.path)
        try:
            st = os.stat(real)
        except OSError:
            return
        if (st.st_dev, st.st_ino) != self._identity:
            return
        for leftover in (real, real + "-wal", real + "-shm", real + "-journal"):
            # (only those that exist: on a read-only mount, unlinking a missing path
            # raises EROFS, not FileNotFoundError)
            if os.path.lexists(leftover):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)


def _nonzero(counters: dict[str, int]) -> dict[str, int]:
    """``counters`` without those at 0 (a missing counter reads as 0)."""
    return {name: value for name, value in counters.items() if value}
