"""Reading what can still be read from a damaged memory file (``actormem export --salvage``).

Theory of operation
-------------------
Opening a memory refuses a file with any damage (``PRAGMA quick_check``, every row
decoded): the engine must never run on a file it cannot trust. A salvage only reads:
it walks the ``entries`` table in ``seq`` order through a read-only connection, without
the whole-file checks, and keeps every row that reads and decodes.

A damaged B-tree page makes SQLite fail (``SQLITE_CORRUPT``) as soon as a cursor steps
onto it, so the walk restarts past it. Rows are found by their integer key, ``seq``: after
a failure behind the last good key ``g``, :meth:`Salvage._resume` probes
``seq >= g + d`` for d = 1, 2, 4, ... until a seek succeeds (a seek into a damaged page
fails, one past it lands on the next readable page), then halves the gap to the
smallest probe that succeeds. The keys in between could not be read: they are reported
as one skipped range (a probe can find a key whose row then fails to read: the region
then grows past it). A row that reads but does not decode to a valid entry, or repeats
an id already salvaged, is skipped and reported with its ``seq``.

A file cut short (a copy that stopped, a full disk) is shorter than the page count its
header records, which SQLite refuses outright; it is read through a copy zero-filled to
that size, whose missing pages are then damaged pages like any other.

Nothing here writes to the file: the connection is read-only (``immutable=1`` when no write-ahead
log waits to be replayed), under the memory's lock file, so no running memory writes
the file meanwhile.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Iterator

from .._entry import MemoryEntry
from .._errors import StorageError
from .lock import FileLock
from .sqlite_format import (
    COLUMNS,
    COLUMNS_V1,
    MAX_SEQ,
    check_header,
    decode_row,
    read_only_uri,
    sqlite_reason,
)

__all__ = ["Salvage"]

_SELECT_FROM = "SELECT {} FROM entries WHERE seq > ? ORDER BY seq"
_PROBE = "SELECT seq FROM entries WHERE seq >= ? ORDER BY seq LIMIT 1"


def _padded_copy(path: str, scratch: str) -> str | None:
    """A copy of a truncated ``path`` in ``scratch``, zero-filled to the size its header
    records, or None when the file is not shorter than that. SQLite refuses to read a
    file shorter than its header's page count; zero pages read as damaged pages, which
    the walk skips, so every page that survived the truncation can be read. O(file size).
    """
    with open(path, "rb") as handle:
        header = handle.read(100)
    if len(header) < 100:
        return None
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header size counts only while the change counter matches "version valid for".
    if pages == 0 or header[24:28] != header[92:96]:
        return None
    expected = page_size * pages
    if os.path.getsize(path) >= expected:
        return None
    copy = os.path.join(scratch, os.path.basename(path))
    shutil.copyfile(path, copy)
    with open(copy, "r+b") as handle:
        handle.truncate(expected)
    if os.path.exists(path + "-wal"):
        shutil.copyfile(path + "-wal", copy + "-wal")
    return copy


class Salvage:
    """Every readable entry of a memory file, and what could not be read.

    Iterate :meth:`entries` (once); afterwards :attr:`salvaged`, :attr:`unreadable`
    and :attr:`skipped_rows` say what happened.

    Args:
        path: The memory file.

    Attributes:
        salvaged: Entries yielded.
        unreadable: ``(after, before)`` pairs: the keys strictly between ``after`` and
            ``before`` could not be read (``before`` is ``None`` when nothing after
            ``after`` could be read). How many entries they held is unknown.
        skipped_rows: ``(seq, reason)`` of rows read but not salvaged (not a valid entry,
            or an id already salvaged).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._name = os.fspath(path)  # as given: the errors name it so
        self.path = os.path.abspath(self._name)
        self.salvaged = 0
        self.unreadable: list[tuple[int, int | None]] = []
        self.skipped_rows: list[tuple[int, str]] = []

    @property
    def complete(self) -> bool:
        """Whether nothing was skipped."""
        return not self.unreadable and not self.skipped_rows

    def entries(self) -> Iterator[MemoryEntry]:
        """The readable entries in insertion (``seq``) order. Blocking.

        Runtime complexity: O(file size), plus O(log MAX_SEQ) seeks per damaged region.

        Raises:
            StorageError: The file is missing, not a regular file, in a folder that is
                not writable (the lock file), held by a running memory, not an actormem
                database (its header says so), or so damaged that its table cannot be
                found at all. The error names the file as given (relative or not).
        """
        try:
            yield from self._entries()
        except StorageError as exc:
            exc._name_as_given(self.path, self._name)
            raise

    def _entries(self) -> Iterator[MemoryEntry]:
        path = self.path
        if not os.path.exists(path):
            raise StorageError(path, "no such file")
        if not os.path.isfile(path):
            raise StorageError(path, "not a regular file (a directory, a FIFO, a device)")
        real = os.path.realpath(path)
        if not os.access(os.path.dirname(real), os.W_OK | os.X_OK):
            # (checked first: the lock's own error named only the .lock file's EACCES)
            raise StorageError(
                path,
                "the directory is not writable (a salvage creates a .lock file beside the "
                "file, so that no memory opens it meanwhile): copy the file into a "
                "writable folder and salvage the copy",
            )
        lock = FileLock(path, real + ".lock")
        try:
            check_header(path)
            with tempfile.TemporaryDirectory(prefix="actormem-salvage-") as scratch:
                source = _padded_copy(path, scratch) or path
                try:
                    uri = read_only_uri(source)
                    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
                except sqlite3.Error as exc:
                    reason = f"cannot open read-only: {sqlite_reason(exc)}"
                    raise StorageError(path, reason) from exc
                try:
                    yield from self._walk(conn)
                finally:
                    conn.close()
        finally:
            lock.release()

    def _walk(self, conn: sqlite3.Connection) -> Iterator[MemoryEntry]:
        try:
            (version,) = conn.execute("PRAGMA user_version").fetchone()
            conn.execute(_PROBE, (0,)).fetchall()
        except sqlite3.DatabaseError as exc:
            if "no such table" in str(exc) or "no such column" in str(exc):
                raise StorageError(self.path, "corrupted: no entries table") from exc
            version = None
        # A version-1 file lacks the later columns: read its own, decode them padded
        # (as loading it does).
        columns: tuple[str, ...] = COLUMNS
        padding: tuple[None, ...] = ()
        if version == 1:
            columns, padding = COLUMNS_V1, (None,) * (len(COLUMNS) - len(COLUMNS_V1))
        select = _SELECT_FROM.format(", ".join(columns))
        seen: set[uuid.UUID] = set()
        last = 0  # the last key read (good or not); rows after it come next
        floor = 0  # a failure before reading past the key resumed at skips that key too
        while True:
            try:
                for row in conn.execute(select, (last,)):
                    row += padding
                    seq = row[0]
                    if not isinstance(seq, int) or seq <= last:
                        raise sqlite3.DatabaseError(f"keys out of order after {last}")
                    last = seq
                    try:
                        _, entry = decode_row(self.path, row)
                    except StorageError as exc:
                        self.skipped_rows.append((seq, exc.reason))
                        continue
                    if entry.id in seen:
                        self.skipped_rows.append((seq, f"id {entry.id} salvaged already"))
                        continue
                    seen.add(entry.id)
                    self.salvaged += 1
                    yield entry
                return
            except sqlite3.DatabaseError:
                after = max(last, floor)
                resume = self._resume(conn, after)
                if self.unreadable and self.unreadable[-1][1] == after:
                    # No row read since the last resume: one region, not two.
                    after = self.unreadable.pop()[0]
                self.unreadable.append((after, resume))
                if resume is None:
                    return
                floor = resume
                last = resume - 1

    def _resume(self, conn: sqlite3.Connection, last: int) -> int | None:
        """The first key after ``last`` that can be read, or None. O(log MAX_SEQ) seeks."""

        def probe(key: int) -> int | None | bool:
            """The first readable key >= ``key``; None: none; False: the seek failed."""
            try:
                row = conn.execute(_PROBE, (key,)).fetchone()
            except sqlite3.DatabaseError:
                return False
            return None if row is None else int(row[0])

        gap = 1
        while True:
            if last + gap > MAX_SEQ:
                return None
            found = probe(last + gap)
            if found is not False:
                break
            gap *= 2
        low, high = last + gap // 2, last + gap  # probe(low) failed (or is last + 0)
        while high - low > 1:
            middle = (low + high) // 2
            got = probe(middle)
            if got is False:
                low = middle
            else:
                high, found = middle, got
        return found if found is not False else None
