"""The file format of a durable memory: schema, identification, validation, row codec.

Theory of operation
-------------------
A durable memory is an SQLite database (https://sqlite.org/fileformat.html) in WAL
journal mode, identified by two fields of its 100-byte header and one table:

* ``application_id`` (header offset 68) is :data:`APPLICATION_ID` ("acMm"): the file is
  an actormem database;
* ``user_version`` (header offset 60) and the ``meta`` row ``schema_version`` both hold
  :data:`SCHEMA_VERSION`; a larger value means a newer actormem wrote the file.

Versions. Version 1 had no key, payload, ``updated_at`` or expiry columns. A version-1
file is validated read-only like any other, then upgraded in place by one transaction
(:data:`MIGRATE_FROM_1`: the old table renamed, the new one created by the very statement
a new file gets, the rows copied with ``updated_at = created_at``, the old table dropped,
both version fields set to 2): a crash leaves either the old file or the new one. Version
3 adds the ``vectors`` table of the dense index (:data:`MIGRATE_FROM_2` creates it and
sets both version fields to 3). Version 4 adds the ``index_image`` table, where a clean
close keeps the word-overlap or BM25 index beside the rows (:data:`MIGRATE_FROM_3`;
``docs/durability.md``, "The index image"). An older file runs every upgrade it lacks in
one transaction. A file of a newer version is refused before anything is written.

One row of ``entries`` per live entry; the primary key ``seq`` is the entry's insertion
order (kept across upserts, as :class:`~actormem._record.Record` does), so a table scan
yields the order in which the memory is rebuilt. Rows are addressed by ``seq`` alone: a
seq never belongs to two ids, and one live record per id is the owner's invariant, so
``id`` needs no index (a UNIQUE index on random UUIDs doubled the cost of an insert);
loading checks that no id appears twice. Every column round-trips exactly:
timestamps are ISO 8601 text in UTC with microseconds, relevance an IEEE double, tags
and namespace JSON arrays of strings.

Opening never modifies a file it refuses. :func:`check_header` reads the raw header (the
caller holds the lock file, so no SQLite connection of this process can lose its POSIX
locks when the descriptor closes), then :func:`validate` looks inside through a read-only
connection: ``immutable=1`` when there is no ``-wal`` file to replay (SQLite then creates
no side file at all), plain ``mode=ro`` otherwise. Header fields are only ever written
when a file is created, before it enters WAL mode, so the raw header is up to date; the
SQL-level check reads them again through SQLite in any case.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import operator
import os
import pathlib
import re
import sqlite3
import stat
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .._entry import (
    _ENTRY_FIELDS,
    MAX_KEY_CHARS,
    MAX_MEMORY_CHARS,
    MAX_TTL,
    MemoryCategory,
    MemoryEntry,
    _convert_namespace,
    _convert_tags,
    entry_of_checked,
)
from .._errors import StorageError
from .._index import imagehash as _hash
from .._index import kernels
from .._json import JsonObject
from .._record import PyEntryColumns, Record
from .._util import Beside, gc_paused

__all__ = [
    "APPLICATION_ID",
    "COLUMNS",
    "CREATE_SCHEMA_V1",
    "CREATE_SCHEMA_V2",
    "CREATE_SCHEMA_V3",
    "IMAGE_KEY",
    "MIGRATABLE_VERSIONS",
    "MIGRATE_FROM_1",
    "MIGRATE_FROM_2",
    "MIGRATE_FROM_3",
    "MAX_ACCESS_COUNT",
    "SCHEMA_VERSION",
    "check_header",
    "decode_row",
    "encode_access",
    "encode_record",
    "encode_records",
    "file_uri",
    "read_stored_vectors",
    "vector_rows",
    "image_kind",
    "image_marker",
    "read_file",
    "read_validated",
    "sqlite_reason",
]

#: Version of the file layout written by this actormem; stored as ``user_version`` and as
#: the ``meta`` row ``schema_version``.
SCHEMA_VERSION = 4
#: Older versions this actormem upgrades in place when it opens them.
MIGRATABLE_VERSIONS = (1, 2, 3)

#: SQLite ``application_id`` of an actormem database: the ASCII bytes "acMm".
APPLICATION_ID = int.from_bytes(b"acMm", "big")

_MAGIC = b"SQLite format 3\x00"

#: Largest access count a file holds (SQLite INTEGER is 64-bit signed). ``store`` rejects
#: larger ones in durable mode; counts that grow past it by retrieves or merges saturate.
MAX_ACCESS_COUNT = 2**63 - 1
#: Largest ``seq`` a file may hold. A new id's seq is the version that stored it, and
#: loading continues the versions from the file's seqs, so a larger one (a corrupted
#: row) would run the versions into ``NEVER``; 2**62 writes take 146 years at 10**9 a
#: second.
MAX_SEQ = 2**62

COLUMNS_V1 = (
    "seq",
    "id",
    "category",
    "memory",
    "tags",
    "namespace",
    "created_at",
    "relevance",
    "access_count",
    "last_accessed",
    "validated",
)
COLUMNS = (*COLUMNS_V1, "key", "value", "updated_at", "ttl", "expires_at")

_CREATE_META = "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL)"
# The columns of version 1; version 2 appends five (the comments are not compared).
_COLUMNS_SQL_V1 = """
        seq INTEGER PRIMARY KEY,      -- insertion order of the id, kept across upserts
        id TEXT NOT NULL,             -- canonical UUID text (unique: checked on load)
        category TEXT NOT NULL,       -- MemoryCategory value
        memory TEXT NOT NULL,
        tags TEXT NOT NULL,           -- JSON array of strings
        namespace TEXT NOT NULL,      -- JSON array of strings
        created_at TEXT NOT NULL,     -- ISO 8601, UTC, microseconds
        relevance REAL NOT NULL,
        access_count INTEGER NOT NULL,
        last_accessed TEXT,           -- ISO 8601 or NULL
        -- validated: 0 or 1
        validated INTEGER NOT NULL"""
_CREATE_ENTRIES = f"""CREATE TABLE entries ({_COLUMNS_SQL_V1},
        key TEXT,                     -- unique per namespace among live entries, or NULL
        value TEXT,                   -- JSON object (compact, key order kept) or NULL
        updated_at TEXT NOT NULL,     -- ISO 8601, UTC, microseconds
        ttl REAL,                     -- seconds, or NULL
        expires_at TEXT               -- ISO 8601 (as refreshed by reads) or NULL
    )"""

# Version 3: the dense index's vectors, one row per entry that has one. ``text_hash``
# is the first 16 bytes of the BLAKE2b of the text the vector was computed from (the
# entry's memory, then its tags): a vector whose text changed since is not used.
_CREATE_VECTORS = """CREATE TABLE vectors (
        seq INTEGER PRIMARY KEY,      -- the entry's seq
        text_hash BLOB NOT NULL,      -- 16 bytes
        vector BLOB NOT NULL          -- float32, little-endian, unit length
    )"""

# Version 4: the index image (``actormem._index.persist``), one row per part, written
# at a clean close in one transaction with the ``meta`` row :data:`IMAGE_KEY`, which the
# first commit after it deletes.
_CREATE_INDEX_IMAGE = """CREATE TABLE index_image (
        name TEXT PRIMARY KEY NOT NULL,  -- "header" (JSON) or an array's name
        data BLOB NOT NULL               -- the header, or the array's raw bytes
    )"""

#: Statements that create a new database (run in one transaction, before WAL mode).
CREATE_SCHEMA = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    f"PRAGMA user_version = {SCHEMA_VERSION}",
    _CREATE_META,
    _CREATE_ENTRIES,
    _CREATE_VECTORS,
    _CREATE_INDEX_IMAGE,
    f"INSERT INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}'), ('application', 'actormem')",
)

#: The statements that created a version-3 file (to recognise one, and for tests).
CREATE_SCHEMA_V3 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    "PRAGMA user_version = 3",
    _CREATE_META,
    _CREATE_ENTRIES,
    _CREATE_VECTORS,
    "INSERT INTO meta VALUES ('schema_version', '3'), ('application', 'actormem')",
)

#: Upgrade of a version-3 file to version 4, run as one transaction.
MIGRATE_FROM_3 = (
    _CREATE_INDEX_IMAGE,
    "UPDATE meta SET value = '4' WHERE key = 'schema_version'",
    "PRAGMA user_version = 4",
)

#: The statements that created a version-2 file (to recognise one, and for tests).
CREATE_SCHEMA_V2 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    "PRAGMA user_version = 2",
    _CREATE_META,
    _CREATE_ENTRIES,
    "INSERT INTO meta VALUES ('schema_version', '2'), ('application', 'actormem')",
)

#: Upgrade of a version-2 file to version 3, run as one transaction.
MIGRATE_FROM_2 = (
    _CREATE_VECTORS,
    "UPDATE meta SET value = '3' WHERE key = 'schema_version'",
    "PRAGMA user_version = 3",
)

#: Upgrade of a version-1 file to version 2, run as one transaction.
MIGRATE_FROM_1 = (
    "ALTER TABLE entries RENAME TO entries_v1",
    _CREATE_ENTRIES,
    f"INSERT INTO entries ({', '.join(COLUMNS_V1)}, updated_at) "
    f"SELECT {', '.join(COLUMNS_V1)}, created_at FROM entries_v1",
    "DROP TABLE entries_v1",
    "UPDATE meta SET value = '2' WHERE key = 'schema_version'",
    "PRAGMA user_version = 2",
)

#: The statements that created a version-1 file (to recognise one, and for tests).
CREATE_SCHEMA_V1 = (
    f"PRAGMA application_id = {APPLICATION_ID}",
    "PRAGMA user_version = 1",
    _CREATE_META,
    f"CREATE TABLE entries ({_COLUMNS_SQL_V1}\n    )",
    "INSERT INTO meta VALUES ('schema_version', '1'), ('application', 'actormem')",
)

#: The columns without NOT NULL (none has a default: left out of an INSERT, NULL).
NULLABLE_COLUMNS = ("last_accessed", "key", "value", "ttl", "expires_at")
INSERT_ENTRY = (
    f"INSERT OR REPLACE INTO entries ({', '.join(COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(COLUMNS))})"
)

#: ``insert_entries`` binds no NULL: a row's NULL columns are left out of its
#: ``INSERT`` (a column left out of an ``INSERT`` is NULL: none of them has a default),
#: one statement per set of NULL columns, the rows in their order (runs of one set per
#: ``executemany``). ``sqlite3`` binds an ``int``, ``float`` or ``str`` at once but asks
#: its adapter registry about each ``None`` (``microprotocols_adapt``: a tuple, a dict
#: lookup and two failed attribute lookups, ~3.3k instructions; a new store's row has
#: five). False: ``INSERT_ENTRY`` with every column, the path before it; the same rows,
#: written in the same order (the same file).
_INSERT_NO_NULLS = True
#: The columns that may be NULL (indexes into :data:`COLUMNS` and a row).
_NULLABLE = tuple(i for i, c in enumerate(COLUMNS) if c in NULLABLE_COLUMNS)


@functools.lru_cache(maxsize=64)
def _insert_without(nulls: int) -> tuple[str, Callable[[tuple[Any, ...]], tuple[Any, ...]]]:
    """The ``INSERT`` of the columns whose bit in ``nulls`` (bit ``j`` for
    ``_NULLABLE[j]``) is clear, and the getter of those columns from a full row."""
    left_out = {_NULLABLE[j] for j in range(len(_NULLABLE)) if nulls >> j & 1}
    kept = [i for i in range(len(COLUMNS)) if i not in left_out]
    sql = (
        f"INSERT OR REPLACE INTO entries ({', '.join(COLUMNS[i] for i in kept)}) "
        f"VALUES ({', '.join('?' * len(kept))})"
    )
    return sql, operator.itemgetter(*kept)


def insert_entries(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """``executemany(INSERT_ENTRY, rows)``: the same rows in the same order, without
    binding NULLs (``_INSERT_NO_NULLS``). O(len(rows)).

    Raises:
        sqlite3.Error: As ``executemany``.
    """
    if not _INSERT_NO_NULLS:
        conn.executemany(INSERT_ENTRY, rows)
        return
    a, b, c, d, e = _NULLABLE
    run: list[tuple[Any, ...]] = []
    run_nulls = -1
    for row in rows:
        nulls = (
            (row[a] is None)
            | (row[b] is None) << 1
            | (row[c] is None) << 2
            | (row[d] is None) << 3
            | (row[e] is None) << 4
        )
        if nulls != run_nulls:
            if run:
                sql, get = _insert_without(run_nulls)
                conn.executemany(sql, map(get, run))
                run = []
            run_nulls = nulls
        run.append(row)
    if run:
        sql, get = _insert_without(run_nulls)
        conn.executemany(sql, map(get, run))


DELETE_ENTRY = "DELETE FROM entries WHERE seq = ?"
SET_META = "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)"
UPDATE_ACCESS = (
    "UPDATE entries SET access_count = ?, last_accessed = ?, expires_at = ? WHERE seq = ?"
)
SELECT_ENTRIES = f"SELECT {', '.join(COLUMNS)} FROM entries ORDER BY seq"
SELECT_ENTRIES_V1 = f"SELECT {', '.join(COLUMNS_V1)} FROM entries ORDER BY seq"

_SELECT_MASTER = "SELECT type, name, tbl_name, sql FROM sqlite_master"


def _normalise_sql(sql: str | None) -> str | None:
    """Schema SQL without ``--`` comments and with whitespace collapsed.

    Applied to the schema statements only, which hold no string literals; a foreign
    object that hides in a comment-like literal still differs in name or type.
    """
    if sql is None:
        return None
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"\s+", " ", sql)
    return re.sub(r"\s*([(),])\s*", r"\1", sql).strip()


def _schema_objects(conn: sqlite3.Connection) -> set[tuple[str, str, str, str | None]]:
    return {
        (type_, name, tbl_name, _normalise_sql(sql))
        for type_, name, tbl_name, sql in conn.execute(_SELECT_MASTER)
    }


def _expected_objects(
    statements: tuple[str, ...],
) -> frozenset[tuple[str, str, str, str | None]]:
    """Every ``sqlite_master`` row that ``statements`` create, normalised."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for statement in statements:
            conn.execute(statement)
        return frozenset(_schema_objects(conn))
    finally:
        conn.close()


#: The statements that create each schema version's objects.
_SCHEMA_STATEMENTS = {
    1: CREATE_SCHEMA_V1,
    2: CREATE_SCHEMA_V2,
    3: CREATE_SCHEMA_V3,
    4: CREATE_SCHEMA,
}

#: :data:`EXPECTED_OBJECTS` is made when first read (the first ``check_schema``, or an
#: attribute access), not when the module is imported: making it creates each schema in
#: an in-memory SQLite database (~1 ms, four connections), which a process that never
#: opens a file (an in-memory swarm imports this module through the engine) never needs.
#: The same mapping. False: made at import (the path before it).
_EXPECTED_ON_USE = True
_expected_cache: dict[int, frozenset[tuple[str, str, str, str | None]]] | None = None


def _expected_by_version() -> dict[int, frozenset[tuple[str, str, str, str | None]]]:
    """:data:`EXPECTED_OBJECTS`, made once. O(schema size) the first time, O(1) after."""
    global _expected_cache
    if _expected_cache is None:
        _expected_cache = {v: _expected_objects(s) for v, s in _SCHEMA_STATEMENTS.items()}
    return _expected_cache


def __getattr__(name: str) -> Any:
    # EXPECTED_OBJECTS: the schema objects (tables, their automatic indexes) of an
    # actormem file, per schema version; any other trigger, view, index or table makes
    # the file refused (a trigger could delete rows behind the owner's back, and SQLite
    # would run it on every commit). Made on first use (see _EXPECTED_ON_USE).
    if name == "EXPECTED_OBJECTS":
        return _expected_by_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    EXPECTED_OBJECTS: dict[int, frozenset[tuple[str, str, str, str | None]]]
if not _EXPECTED_ON_USE:
    _expected_by_version()
_COLUMNS_OF = {1: COLUMNS_V1, 2: COLUMNS, 3: COLUMNS, 4: COLUMNS}

#: The ``meta`` row naming the index image that describes the rows: the
#: :func:`image_marker` of its parts. Absent: no image, or one made stale by a commit.
IMAGE_KEY = "index_image"
SELECT_IMAGE = "SELECT name, data FROM index_image"


def image_kind(path: str | os.PathLike[str]) -> str | None:
    """The ``"kind"`` the index image's header names in the file at ``path`` (``"bm25"``,
    ``"word-overlap"``), or None: no image, a header that is not a JSON object with a str
    ``"kind"``, not a regular file (SQLite's open of a FIFO would wait for a writer), or a
    file this read cannot open, a header that is not a blob. Read-only
    (:func:`read_only_uri`, live: no side file when there is no ``-wal``; with a
    ``-wal``, SQLite's ``-shm`` is made if absent, as for any read that replays it), and
    nothing is checked against the rows: the kind of scorer to open the file with, which
    the open itself then verifies (the image is used only if its marker matches). O(the
    header's size).
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        # (A live read's URI: ``immutable`` when there is no -wal, since a plain
        # ``mode=ro`` open of a WAL-mode file left a -wal and a -shm beside it; review
        # rev45c.)
        conn = sqlite3.connect(read_only_uri(os.fspath(path), live=True), uri=True)
        try:
            row = conn.execute(SELECT_IMAGE_HEADER).fetchone()
        finally:
            conn.close()
        data = row[0] if row is not None else None
        # Only a blob is a header: ``bytes()`` of an INTEGER allocated that many bytes
        # (MemoryError from 2**40); a too deeply nested JSON raised RecursionError.
        header = json.loads(data) if type(data) is bytes else None
    except (sqlite3.Error, OSError, ValueError, TypeError, RecursionError):
        return None
    kind = header.get("kind") if isinstance(header, dict) else None
    return kind if type(kind) is str else None


#: The image's header part alone (:func:`image_kind`).
SELECT_IMAGE_HEADER = "SELECT data FROM index_image WHERE name = 'header'"


def image_marker(parts: dict[str, bytes]) -> str:
    """The 128-bit hash of an image's parts (names, lengths, bytes, in name order): the
    ``meta`` value that ties the rows to exactly this image, and a checksum of its
    bytes. With ``imagehash._XXH3`` (the default) ``"xxh3:"`` and the XXH3-128's 32 hex
    digits, else BLAKE2b-128's 32 bare digits (the form before). O(image size): XXH3
    about 0.04 ms per MB, BLAKE2b about 1 ms."""
    h = _hash.new128()
    for name in sorted(parts):
        data = parts[name]
        h.update(json.dumps([name, len(data)]).encode())
        h.update(data)
    return (_hash.MARKER_PREFIX if _hash._XXH3 else "") + h.hexdigest()


def marker_current(marker: object) -> bool:
    """Whether ``marker`` (a ``meta`` value) has the form :func:`image_marker` gives now
    (a str, ``"xxh3:"`` first iff ``imagehash._XXH3``): an image marked in the other form
    was made by the other hash (an older actormem's BLAKE2b) and is not read at all.
    O(1)."""
    return type(marker) is str and marker.startswith(_hash.MARKER_PREFIX) == _hash._XXH3


_HEX = frozenset("0123456789abcdef")


def _marker_of_other_form(marker: object) -> bool:
    """Whether ``marker`` is a well-formed marker of the hash :func:`marker_current`
    does not take (32 lower-case hex digits, after ``"xxh3:"`` iff that is the other
    form). O(1)."""
    if type(marker) is not str:
        return False
    prefix = "" if _hash._XXH3 else _hash.MARKER_PREFIX
    digits = marker[len(prefix) :]
    return marker.startswith(prefix) and len(digits) == 32 and set(digits) <= _HEX


def _read_image(conn: sqlite3.Connection) -> dict[str, bytes] | None:
    """The index image whose :func:`image_marker` the ``meta`` row names, or None (no
    marker, no image, parts that are not text names and blobs, or bytes that do not
    hash to the marker: logged). O(image size)."""
    parts, warning = _read_image_quietly(conn)
    if warning:
        _warn_marker(warning)
    return parts


#: ``_read_image_quietly``'s warning for a marker that is not that of the image's bytes.
MARKER_MISMATCH = "the index image does not match its marker in the file; rebuilding the index"
#: Its warning for an image a newer actormem wrote (a marker ``name:hex`` of a hash this
#: actormem does not know): the file is intact, its image of no use to this version.
MARKER_NEWER = (
    "the file's index image was written by a newer actormem (its marker begins {prefix!r}), "
    "which this version cannot read; building the index from the rows instead (the file "
    "is intact; upgrade actormem to open it faster)"
)
#: The form of a marker of any hash: a lower-case name, a colon, hex digits.
_NAMED_MARKER = re.compile(r"([a-z][a-z0-9]*:)[0-9a-f]{16,}")
#: The names of the hashes this actormem knows (their markers are not "newer").
_KNOWN_PREFIXES = frozenset({_hash.MARKER_PREFIX})


def _warn_marker(warning: str) -> None:
    logging.getLogger("actormem").warning("actormem: %s", warning)


def _marker_warning(marker: object) -> str:
    """The warning for a ``marker`` of neither form :func:`_read_image_quietly` reads:
    :data:`MARKER_NEWER` for a newer actormem's, else :data:`MARKER_MISMATCH`. O(1)."""
    named = _NAMED_MARKER.fullmatch(marker) if type(marker) is str else None
    if named is not None and named[1] not in _KNOWN_PREFIXES:
        return MARKER_NEWER.format(prefix=named[1])
    return MARKER_MISMATCH


#: The image's blobs are read by SQLite's incremental blob I/O straight into each part's
#: ``bytes`` (``Connection.blobopen``, in one read transaction with the listing of the
#: parts), not by ``SELECT name, data``, whose column value SQLite first assembles in a
#: buffer of its own that Python then copies: one copy of ~125 MB into new memory less
#: at 1M (the check thread's image read 0.19-0.24 -> 0.10-0.12 s of CPU, branch
#: ``open29``). The same parts, refusals and errors. False: the ``SELECT``.
_IMAGE_BLOBS = True

#: The image's parts as :func:`_image_parts` lists them for the blob reads.
SELECT_IMAGE_ROWS = "SELECT name, rowid, typeof(data) FROM index_image"


def _image_parts(conn: sqlite3.Connection) -> dict[str, bytes] | None:
    """Every ``index_image`` row as ``{name: data}`` in the table's order, or None when
    a name is not text or a data not a blob (:func:`_read_image_quietly`'s "not an
    image"). :data:`_IMAGE_BLOBS`: listed, then each blob read into its ``bytes``, in
    one read transaction (unless ``conn`` is in one already): the rows of one snapshot,
    as the one ``SELECT``. O(image size).

    Raises:
        sqlite3.Error: SQLite failed.
    """
    parts: dict[str, bytes] = {}
    if not _IMAGE_BLOBS:
        for name, data in conn.execute(SELECT_IMAGE):
            if type(name) is not str or type(data) is not bytes:
                return None
            parts[name] = data
        return parts
    began = not conn.in_transaction
    if began:
        conn.execute("BEGIN")
    try:
        listed = conn.execute(SELECT_IMAGE_ROWS).fetchall()
        for name, _, kind in listed:
            if type(name) is not str or kind != "blob":
                return None
        for name, rowid, _ in listed:
            with conn.blobopen("index_image", "data", rowid, readonly=True) as blob:
                parts[name] = blob.read()
    finally:
        if began and conn.in_transaction:
            conn.execute("COMMIT")  # a read transaction: nothing to write
    return parts


def _read_image_quietly(conn: sqlite3.Connection) -> tuple[dict[str, bytes] | None, str]:
    """:func:`_read_image` without its warning: the image or None, and the warning to
    log when there is none because of its marker (the bytes do not hash to it:
    :data:`MARKER_MISMATCH`; a newer actormem's: :data:`MARKER_NEWER`), else ``""``.
    O(image size)."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (IMAGE_KEY,)).fetchone()
    if row is None:
        return None, ""
    if not marker_current(row[0]):
        # An image of the other hash's format, never trusted: the index is rebuilt from
        # the rows and the next clean close writes this format's image; quietly, as
        # upgrading is no fault. A marker of neither form is (the warning's case).
        return None, "" if _marker_of_other_form(row[0]) else _marker_warning(row[0])
    parts = _image_parts(conn)
    if parts is None:
        return None, ""
    if not parts or image_marker(parts) != row[0]:
        return None, MARKER_MISMATCH
    return parts, ""


INSERT_VECTOR = "INSERT OR REPLACE INTO vectors (seq, text_hash, vector) VALUES (?, ?, ?)"
DELETE_VECTOR = "DELETE FROM vectors WHERE seq = ?"
SELECT_VECTORS = "SELECT seq, text_hash, vector FROM vectors"
#: The vectors' model and dimension (``meta`` rows; absent before any dense open).
SELECT_VECTOR_META = "SELECT key, value FROM meta WHERE key IN ('dense_model', 'dense_dim')"


def vector_rows(conn: sqlite3.Connection, dim: int) -> Iterator[tuple[int, bytes, bytes]]:
    """``(seq, text_hash, vector)`` of each row of ``vectors`` whose vector is ``dim``
    float32 values; other rows (a damaged file) left out. O(vectors), lazily.

    Raises:
        sqlite3.Error: As the query.
    """
    size = 4 * dim
    for seq, digest, vector in conn.execute(SELECT_VECTORS):
        if isinstance(vector, bytes) and len(vector) == size and isinstance(digest, bytes):
            yield seq, digest, vector


#: Longest error text quoted in a reason, in code points (a corrupted row's error may
#: quote a whole column value).
_MAX_QUOTE = 300


def _cut(text: str) -> str:
    """``text``, cut to :data:`_MAX_QUOTE` code points (saying how much was left out)."""
    if len(text) <= _MAX_QUOTE:
        return text
    return f"{text[:_MAX_QUOTE]}... ({len(text) - _MAX_QUOTE} more characters)"


#: How Python's sqlite3 words a TEXT value it cannot decode (an ``OperationalError``
#: with no SQLite error code): only a corrupted or foreign file holds one.
_NOT_UTF8 = "Could not decode to UTF-8"


#: Free bytes under which an I/O error on a file's file system is said to be likely a
#: full disk (:func:`sqlite_reason` with ``path``): SQLite needs a few pages for the
#: -wal and 32 KiB for the -shm file.
_LOW_SPACE = 1 << 20


def _free_bytes(path: str) -> int | None:
    """Bytes free to an unprivileged user on the file system of ``path``'s directory,
    or None if that cannot be read. One ``statvfs``."""
    try:
        st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _io_reason(name: str, text: str, path: str | None) -> str:
    """The reason of an ``SQLITE_IOERR*`` error: SQLite's "disk I/O error" alone did
    not say that the usual cause at an open is a full disk (SQLite failing to size the
    -shm file: ``SQLITE_IOERR_SHMSIZE``, while a fuller disk gives ``SQLITE_FULL``)."""
    reason = f"{text} ({name})"
    if name == "SQLITE_IOERR_SHMSIZE":
        reason += (
            ": SQLite could not size the shared-memory file (-shm) beside the database"
        )
    free = None if path is None else _free_bytes(path)
    if free is not None and free < _LOW_SPACE:
        return f"{reason}; the disk is likely full ({free:,} bytes free): free some space"
    if name == "SQLITE_IOERR_SHMSIZE":
        return f"{reason}; the disk is likely full"
    return reason


def sqlite_reason(exc: BaseException, path: str | None = None) -> str:
    """A short reason for an SQLite or OS error, naming corruption, locking and a full
    disk plainly; the error's own text is cut to :data:`_MAX_QUOTE` code points.
    ``path``: the database the error happened on; with it, an I/O error also says how
    much space its file system has left when that is little (one ``statvfs``)."""
    name = getattr(exc, "sqlite_errorname", "") or ""
    text = _cut(str(exc))
    if isinstance(exc, sqlite3.OperationalError) and text.startswith(_NOT_UTF8):
        # Python's sqlite3 decoding a TEXT value (SQLite itself never checks UTF-8).
        return f"corrupted: a text that is not UTF-8 ({text})"
    if name == "SQLITE_NOTADB":
        return f"not an SQLite database, or corrupted ({text})"
    if name.startswith("SQLITE_CORRUPT"):
        return f"corrupted ({text})"
    if name.startswith("SQLITE_BUSY") or name.startswith("SQLITE_LOCKED"):
        return f"locked by another program ({text})"
    if name.startswith("SQLITE_IOERR"):
        return _io_reason(name, text, path)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return text


def _check_version(path: str, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise StorageError(
            path,
            f"written by a newer actormem (schema_version {version}; this version reads "
            f"{SCHEMA_VERSION}); upgrade actormem",
        )
    if version != SCHEMA_VERSION and version not in MIGRATABLE_VERSIONS:
        raise StorageError(path, f"unknown schema_version {version} (expected {SCHEMA_VERSION})")


def check_header(path: str) -> None:
    """Check the raw 100-byte header of an existing file; reads only, creates nothing.

    Call only while holding the lock file (see the module docs). O(1).

    Raises:
        StorageError: Empty file, not an SQLite file, another application's database, or
            a schema version other than :data:`SCHEMA_VERSION` and the versions it
            upgrades (:data:`MIGRATABLE_VERSIONS`).
    """
    try:
        with open(path, "rb") as f:
            header = f.read(100)
    except OSError as exc:
        raise StorageError(path, f"cannot read: {exc.strerror}") from exc
    if not header:
        raise StorageError(path, "empty file (0 bytes), not an actormem database")
    if len(header) < 100 or header[:16] != _MAGIC:
        raise StorageError(path, "not an actormem database (not an SQLite file), or corrupted")
    app_id = int.from_bytes(header[68:72], "big")
    if app_id != APPLICATION_ID:
        raise StorageError(
            path, f"an SQLite database of another application (application_id {app_id:#x})"
        )
    _check_version(path, int.from_bytes(header[60:64], "big"))


def file_uri(path: str) -> str:
    """The ``file:`` URI of ``path`` (absolute, percent-encoded), without a query."""
    return pathlib.Path(path).absolute().as_uri()


def read_only_uri(path: str, *, live: bool = False) -> str:
    """URI of a read-only connection that creates no side file when nothing needs replay.

    ``live``: another process may hold the file and write it (a live read). An empty
    ``-wal`` then means a writer's connection is open, which may commit and checkpoint
    into the main file during the read; ``immutable=1`` would read without a lock (no
    read mark to hold a checkpoint back) and mix two states of the file. So a live read
    is ``immutable`` only when there is no ``-wal`` at all."""
    uri = file_uri(path) + "?mode=ro"
    # SQLite follows a symlink and keeps the -wal beside its target (review rev45c: the
    # link's name had no -wal, so a live file read through a link was immutable).
    wal = os.path.realpath(path) + "-wal"
    if not os.path.exists(wal) or (not live and os.path.getsize(wal) == 0):
        uri += "&immutable=1"
    return uri


def check_schema(path: str, conn: sqlite3.Connection, *, deep: bool) -> int:
    """Check identification, schema version and schema objects through ``conn``; read-only.

    The schema must be exactly :data:`EXPECTED_OBJECTS` (type, name, table and
    normalised SQL of every ``sqlite_master`` row): no trigger, view, index or table
    that actormem did not create. O(schema size), plus:

    ``deep`` adds ``PRAGMA quick_check`` (O(file size)). Returns the schema version (the
    current one, or an older one this actormem upgrades).

    Raises:
        StorageError: The file is not an actormem database of this schema version, or is
            corrupted.
        sqlite3.Error: SQLite failed (the caller turns it into StorageError).
    """
    (app_id,) = conn.execute("PRAGMA application_id").fetchone()
    if app_id != APPLICATION_ID:
        raise StorageError(
            path, f"an SQLite database of another application (application_id {app_id:#x})"
        )
    (version,) = conn.execute("PRAGMA user_version").fetchone()
    _check_version(path, version)
    tables = {
        name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    }
    if not {"meta", "entries"} <= tables:
        raise StorageError(path, "corrupted: the meta or entries table is missing")
    objects = _schema_objects(conn)
    expected = _expected_by_version()[version]
    if objects != expected:
        extra = sorted(f"{t} {n!r}" for t, n, _, _ in objects - expected)
        missing = sorted(f"{t} {n!r}" for t, n, _, _ in expected - objects)
        detail = "; ".join(
            part
            for part in (
                extra and "not created by actormem (or altered): " + ", ".join(extra),
                missing and "missing or altered: " + ", ".join(missing),
            )
            if part
        )
        raise StorageError(path, f"unexpected schema objects: {detail}")
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None or row[0] != str(version):
        raise StorageError(path, f"corrupted: meta schema_version {row} != user_version {version}")
    columns = tuple(r[1] for r in conn.execute("PRAGMA table_info(entries)"))
    if columns != _COLUMNS_OF[version]:
        raise StorageError(path, f"corrupted: unexpected entries columns {columns}")
    if deep:
        _quick_check(path, conn)
    return int(version)


def _quick_check(path: str, conn: sqlite3.Connection) -> None:
    """``PRAGMA quick_check`` through ``conn``. O(file size); SQLite's step runs without
    the GIL (Python's ``sqlite3`` releases it).

    Raises:
        StorageError: The file is corrupted (up to five of the problems named).
        sqlite3.Error: SQLite failed.
    """
    problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
    if problems != ["ok"]:
        raise StorageError(path, "corrupted: " + "; ".join(map(str, problems)))


def read_validated(path: str, *, live: bool = False) -> list[tuple[int, MemoryEntry]]:
    """Validate an existing file and decode every entry, read-only; modifies nothing.
    See :func:`read_file`."""
    return read_file(path, image=False, live=live)[0]


#: Rows fetched and decoded at a time when a file is read.
_FETCH_ROWS = 16384

#: ``read_file`` reads the rows through the compiled reader (``_crows.c``: its own
#: read-only connection, each row decoded from SQLite's column values as
#: :func:`_decode_checked` decodes a fetched one, with no row tuple and no object for a
#: column that becomes none); at the first row it declines, or an SQLite error, the
#: file is read again as before. False, or where the module is not built (no
#: ``sqlite3.h``, or ``ACTORMEM_PURE_PYTHON=1``): ``fetchmany`` and
#: :func:`decode_rows`, the path before it (the same entries; ``tests/test_decode_c.py``).
_C_ROWS = True
_crows: Any
try:
    _crows = importlib.import_module(f"{__package__}._crows")
except ModuleNotFoundError:  # not built: the Python path
    _crows = None
except ImportError as exc:  # pragma: no cover - built, but it refused this Python
    # (its str hash check at import: see _kernels_common.h's hash_bytes_agree)
    logging.getLogger("actormem").warning(
        "actormem: compiled row reader unavailable (%s); reading files through sqlite3 "
        "(same entries, slower)",
        exc,
    )
    _crows = None
if kernels._PURE:
    _crows = None

#: The compiled reader computes each memory text's hash (cached in the ``str``) as it
#: makes it, while the text's bytes are in the cache: the word-overlap restore's
#: ``group_texts`` (a dict of the 1M texts) then reads none of the 240 MB again, ~0.27 s
#: less there for ~0.05-0.1 s more in the reader. False: the reader as before (the same
#: entries either way; ``tests/test_open_hash.py``).
_HASH_TEXTS = True

#: The compiled reader splits in two: SQLite's steps (page reads, the b-tree walk, each
#: record's decoding; about a third of the reader's time) run in a C thread of their own
#: without the GIL, each row's columns copied into a chunk with the id's digits and the
#: times' fields parsed, while the caller's thread builds the entries from the chunks.
#: The same entries, and None where the one-thread reader gives None; the thread is
#: joined before the reader returns or raises. False: the one-thread reader (the same
#: entries either way; ``tests/test_open13_split.py``).
_SPLIT_READ = True

#: The split reader's thread also checks that no id comes twice (a set of the ids' 128
#: bits, without the GIL), so that ``read_file`` skips its own check (a Python set of
#: 1M ints, ~0.1-0.2 s on the open's path) when it reports none; when it reports one,
#: or did not check, ``read_file`` checks as before and raises its error. False: always
#: ``read_file``'s check (the same entries and errors either way).
_SPLIT_IDS = True

#: The split reader's id check holds each id back for the next 16 rows and prefetches
#: its slot in the id table when it comes (``_crows.id_prefetch``): the table is a random
#: access per row (32 MiB at 1M), a cache miss the reader's thread waited for (~0.3 s
#: of its ~2.3 s at 1M by ``perf``). The same check and result. Read at each read.
#: False: each id put at once (the path before it; ``tests/test_open20_gids.py``).
_ID_PREFETCH = True

#: How many chunks of 256 rows the split reader's thread may fill ahead of the caller
#: (``_crows.chunks_ahead``). The caller runs the index image's prepared steps
#: (``read_file``'s ``prepare``) whenever its next chunk is not ready; a step (~5-130
#: ms) runs to its end, so with 8 chunks (~3 ms of the thread's reading) the thread sat
#: with every chunk full for nearly the whole step, and the steps ran one after the
#: other with the read instead of beside it. 64 chunks (~25 ms of reading, ~4 MiB of
#: copied columns and ~4 MiB of text at the bench's 1M file) let it read on. The same
#: rows and errors. 8: the path before (branch ``open27``).
_CHUNKS_AHEAD = 64

#: The split reader's id table (:data:`_ID_PREFETCH`: a random 16-byte slot per row,
#: 32 MiB at 1M) is 2 MiB aligned and asked of the kernel as transparent huge pages
#: (``_crows.id_huge``; ``madvise``, which this system's THP mode needs): with 4 KiB
#: pages nearly every probe missed the TLB. The same check. False: ``calloc``, the
#: path before (branch ``open27``).
_ID_HUGE = True

#: The split reader sizes its id table once, for the rows its file's seq range says
#: (``_crows.id_presize``: two seeks of the rowid tree, believed up to the file's size
#: over 64 bytes), instead of doubling it from 1,024 slots: at 1M rows the doublings
#: allocated and zeroed 32 MiB besides the final table and put ~1M ids again at random
#: slots. The same check. False: the path before (branch ``open31``).
_ID_PRESIZE = True

#: The split reader's thread also computes each memory text's duplicate-key fold hash
#: (``textfold.fold_hash``'s value, from the UTF-8 bytes it copies, without the GIL; a
#: text that is not ASCII only on CPython before 3.13, per code point as the core) and
#: ``read_file`` hands them on with the entries (:class:`FoldedRows`), so that
#: ``MemoryState.load`` does not fold those texts again on the open's path. False: no
#: folds (the load folds every text; the same keys either way).
_SPLIT_FOLDS = True

#: The split reader's thread computes the ASCII texts' fold hashes (:data:`_SPLIT_FOLDS`)
#: at each chunk's end, two texts' FNV chains interleaved (``_crows.fold_pairs``): a
#: chain is a multiply per byte waiting on the one before (~0.37 s of that thread over
#: the 240 MB of text of the 1M bench file), two independent ones overlap. The same
#: values. False: one text at a time as each row is copied (the path before, ``open29``).
_FOLD_PAIRS = True


#: The split reader's thread reads each row's columns through their ``sqlite3_value``
#: (``sqlite3_column_value`` once a column a row, then the ``sqlite3_value_*``
#: accessors; ``_crows.column_values``) instead of a ``sqlite3_column_*`` call for each
#: type, text, length and number (36 a row, each taking and leaving the connection's
#: mutex and running ``sqlite3ApiExit``: ~2,100 of that thread's ~11,400 instructions a
#: row at the bench's file, callgrind). Its connection is ``SQLITE_OPEN_NOMUTEX`` (the
#: multi-thread mode), where protected and unprotected values are the same; a value is
#: read only while its row is current and only as its own type. The same rows and
#: refusals. False: the ``sqlite3_column_*`` calls (the path before, branch ``open52``).
_COLUMN_VALUES = True

#: The split reader's thread computes a chunk's ASCII texts' fold hashes
#: (:data:`_SPLIT_FOLDS`) by first compacting their bytes (each through the fold table,
#: a whitespace run as one space, no branch: ``_foldhash.h``'s ``fold_ascii_compact``),
#: then running their plain FNV chains four at a time, a lane taking the next text as
#: its own ends (``fold_hash_ascii_many``; ``_crows.fold_lanes``): the pairs' chains
#: branch on every byte, and a word's end (every ~6 bytes) mispredicts; the fold was
#: ~0.4-0.6 s of that thread's ~1.4 s at the bench's 1M file. The same values. False:
#: the pairs (:data:`_FOLD_PAIRS`, the path before; branch ``open52``).
_FOLD_LANES = True

#: :data:`_FOLD_LANES` compacts the texts by AVX-512 (``_foldhash.h``'s
#: ``fold_ascii_compact_x512``; ``_crows.fold_wide``) where the CPU has AVX-512 BW and
#: VBMI2 (checked once, at import; elsewhere this knob changes nothing). False: the
#: branch-free loop every other CPU runs, so that its path can be read (and tested) on
#: a CPU with AVX-512 too. The same values.
_FOLD_WIDE = True


class FoldedRows(list[tuple[int, MemoryEntry]]):
    """A list of ``(seq, entry)`` rows with ``folds``: 8 bytes a row (native uint64, in
    the rows' order), each the row's memory text's fold hash or ``2**64 - 1`` (not
    computed); what ``MemoryState.load`` reads when the bytes are one per row. Any other
    use sees a plain list. (With ``read_file``'s ``consume``, the compiled reader fills
    one in place, ``folds`` set at the end.)"""

    __slots__ = ("cols", "folds", "hashes")

    def __init__(
        self, rows: list[tuple[int, MemoryEntry]], folds: bytes, cols: Any = None
    ) -> None:
        super().__init__(rows)
        self.folds = folds
        #: None: the rows are ``(seq, entry)``. Else the entries' store (an
        #: ``EntryColumns``) the compiled reader put each row's entry in, and the rows
        #: are ``(seq, slot)``: the entry is ``cols.entry(slot)`` (:func:`row_entry`).
        self.cols = cols
        #: In the slot form, the reader's thread's hash of each row's text (8 bytes a
        #: row, native int64, -1: none), set by the reader; ``b""``: none.
        self.hashes = b""


def row_entry(rows: list[Any], row: tuple[int, Any]) -> MemoryEntry:
    """The entry of ``row``, one of ``rows`` (a file's rows, as :func:`read_file` gives
    them): the row's own, or built from the store of rows in the slot form
    (:attr:`FoldedRows.cols`). O(len(text))."""
    cols = getattr(rows, "cols", None)
    return row[1] if cols is None else cols.entry(row[1])  # type: ignore[no-any-return]


def _python_source_id() -> str | None:
    """``sqlite_source_id()`` of the SQLite Python's ``sqlite3`` runs, or None. O(1)."""
    try:
        conn = sqlite3.connect(":memory:")
        try:
            (source,) = conn.execute("SELECT sqlite_source_id()").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return source if isinstance(source, str) else None


def _python_sqlite_file() -> str | None:
    """The file of the extension module ``_sqlite3`` that ``sqlite3.dbapi2`` runs, or
    None (built into the interpreter). O(1)."""
    module = sys.modules.get("_sqlite3")
    path = getattr(module, "__file__", None)
    return path if isinstance(path, str) else None


def _same_sqlite(module: Any) -> bool:
    """Whether the compiled ``module`` (``_crows`` or ``_cwrite``, or None) runs the very
    SQLite Python's ``sqlite3`` runs: the same source id, and the same loaded copy of
    the library (its ``same_library``: ``_sqlite3``'s file, already loaded, resolves
    ``sqlite3_sourceid`` to the function the module calls). A matching source id alone
    does not prove it: ``_sqlite3`` may carry a static copy of SQLite, or another
    library file of the same version may be loaded. Two copies in one process keep
    their POSIX locks apart: one copy's ``close`` of a descriptor drops the locks the
    other holds on the file (SQLite's "How To Corrupt An SQLite Database File", 2.2.1),
    so two writers could commit at once. Any doubt is False. O(1)."""
    if module is None or module.source_id() != _python_source_id():
        return False
    path = _python_sqlite_file()
    if path is None:
        return False
    try:
        return module.same_library(path) is True
    except (AttributeError, TypeError, ValueError):  # an older build; a path it cannot pass
        return False


#: Whether the compiled reader runs the SQLite Python's ``sqlite3`` runs
#: (:func:`_same_sqlite`). Two copies of SQLite in one process do not see each other's
#: POSIX locks: the reader's ``close`` of its descriptor would drop the locks
#: ``read_file``'s own connection holds on the file and its WAL index, so with another
#: copy the reader only takes ``immutable=1`` URIs (no locks taken).
_SAME_SQLITE = _same_sqlite(_crows)


def _read_rows_c(
    uri: str,
    ids_out: list[bool] | None = None,
    folds_out: list[bytes] | None = None,
    idle: Callable[[], bool] | None = None,
    sink: tuple[list[Any], bytearray] | None = None,
) -> list[tuple[int, MemoryEntry]] | None:
    """Every entry of the file at ``uri`` through the compiled reader, or None (not
    built, switched off, another SQLite than Python's on a file that takes locks, or a
    row or an error it leaves to the Python path). ``ids_out``: where the split reader
    (:data:`_SPLIT_READ`) checked the ids, True (no id twice) or False is appended to
    it. ``folds_out``: where the split reader computed the texts' fold hashes
    (:data:`_SPLIT_FOLDS`), their bytes are appended to it. ``idle``: called by the
    split reader whenever its next chunk is not ready, until it returns false (see
    :func:`read_file`'s ``prepare``). ``sink``: an empty list and an empty bytearray the
    split reader fills as it reads (the rows, their folds; ``_crows.read_entries``'
    ``rows_out`` and ``fold_buf``): the list is the one returned. O(file size)."""
    if not _C_ROWS or _crows is None:
        return None
    if idle is not None and not callable(idle):
        raise TypeError("idle must be callable or None")
    if not _SAME_SQLITE and "immutable=1" not in uri:
        return None
    set_prefetch = getattr(_crows, "id_prefetch", None)  # (not in an older build)
    if set_prefetch is not None:
        set_prefetch(bool(_ID_PREFETCH))
    set_chunks = getattr(_crows, "chunks_ahead", None)
    if set_chunks is not None:
        set_chunks(int(_CHUNKS_AHEAD))
    set_huge = getattr(_crows, "id_huge", None)
    if set_huge is not None:
        set_huge(bool(_ID_HUGE))
    set_presize = getattr(_crows, "id_presize", None)
    if set_presize is not None:
        set_presize(bool(_ID_PRESIZE))
    set_pairs = getattr(_crows, "fold_pairs", None)
    if set_pairs is not None:
        set_pairs(bool(_FOLD_PAIRS))
    set_values = getattr(_crows, "column_values", None)
    if set_values is not None:
        set_values(bool(_COLUMN_VALUES))
    set_lanes = getattr(_crows, "fold_lanes", None)
    if set_lanes is not None:
        set_lanes(bool(_FOLD_LANES))
    set_wide = getattr(_crows, "fold_wide", None)
    if set_wide is not None:
        set_wide(bool(_FOLD_WIDE))
    extra: tuple[Any, ...] = ()
    if sink is not None and _SPLIT_READ:
        extra = (sink[0], sink[1] if _SPLIT_FOLDS else None)
        cols = getattr(sink[0], "cols", None)
        if cols is not None:  # _ROWS_TO_STORE: the rows as (seq, slot) in that store
            extra += (cols,)
    entries: list[tuple[int, MemoryEntry]] | None = _crows.read_entries(
        uri, SELECT_ENTRIES, MemoryEntry, _ENTRY_FIELDS, _CATEGORY_VALUES, _tags_of,
        _namespace_of, _json_object, 1.0, MAX_MEMORY_CHARS, MAX_KEY_CHARS, MAX_TTL, MAX_SEQ,
        _HASH_TEXTS, _SPLIT_READ, ids_out if _SPLIT_IDS else None,
        folds_out if _SPLIT_FOLDS else None, idle, *extra,
    )  # fmt: skip
    return entries


#: ``read_file`` runs ``quick_check`` and reads (and hashes) the index image in a thread
#: of its own (:class:`~actormem._util.Beside`, a second read-only connection) while
#: the rows are read and decoded: both run without the GIL (SQLite's steps, BLAKE2b
#: over the image's blobs), so a second core takes ~0.4-0.8 s of a 1M open off its
#: wall time. Both are complete before ``read_file`` returns, and a file they refuse
#: gives the error it gave before (a failed check wins over the rows' error, as it
#: came first). False: both after ``check_schema``'s other checks on the one
#: connection, the path before it (the same entries, image and errors).
_CHECK_BESIDE = True


#: With a ``prepare`` (``read_file``), the thread beside reads the index image *before*
#: ``quick_check`` and hands it over at once (:class:`_Ahead`), and the caller's thread
#: steps through ``prepare(image)``'s work (the index's image-only part) whenever the
#: row reader's next chunk is not ready (the compiled reader's ``idle``): time it spent
#: waiting before. The same entries, image and errors (the check's error still wins;
#: an image read for a file the check refuses is dropped). False: ``prepare`` unused.
_PREPARE_WHILE_READING = True


#: With a ``consume`` (``read_file``), once the prepared steps are done (or there are
#: none), the caller's thread hands the rows read so far to ``consume`` whenever the row
#: reader's next chunk is not ready (the compiled split reader fills a list and a fold
#: buffer the caller sees, ``_crows.read_entries``' ``rows_out``/``fold_buf``): the
#: state's bulk load of those rows (``MemoryState.feed_ahead``) runs while the reader
#: reads on, instead of after the read. The same entries, image and errors. False:
#: ``consume`` unused (the path before; branch ``open28``).
_CONSUME_WHILE_READING = True


#: With a ``consume`` that names a store (its ``cols``: ``MemoryState.feed_ahead``'s
#: feed), the compiled split reader writes each row's text and fields straight into
#: that store (``_crows.read_entries``' ``cols``; issue #20, item 6) and the rows are
#: ``(seq, slot)`` (:attr:`FoldedRows.cols`): no str, no entry made per row, and the
#: load makes each record on its slot. The same state. False: ``(seq, entry)`` rows.
_ROWS_TO_STORE = True


def _crows_takes_cols() -> bool:
    """Whether the compiled reader takes a store (a build of this version). O(1)."""
    doc = getattr(getattr(_crows, "read_entries", None), "__doc__", None) or ""
    return "cols=None" in doc


_C_ROWS_COLS = _crows is not None and _crows_takes_cols()


class _Ahead:
    """The image the thread beside read ahead of ``quick_check`` (set once, from that
    thread), and the caller's work on it: :meth:`idle` is the reader's ``idle``.
    ``consume``/``sink``: :func:`read_file`'s ``consume``, and the list and fold buffer
    the reader fills (``consume``'s arguments), or None."""

    __slots__ = ("consume", "parts", "prep", "prepare", "sink")

    def __init__(
        self,
        prepare: Callable[[dict[str, bytes]], Any] | None,
        consume: Callable[[list[Any], bytearray], bool] | None = None,
    ) -> None:
        self.prepare = prepare if prepare is not None else _no_prep
        self.parts: dict[str, bytes] | None = None
        self.prep: Any = None
        self.consume = consume
        # the reader's list: the rows with their folds when it computes them; in the
        # slot form, in consume's store, when it names one (_ROWS_TO_STORE)
        cols = getattr(consume, "cols", None) if _ROWS_TO_STORE and _C_ROWS_COLS else None
        if isinstance(cols, PyEntryColumns):  # (no compiled store: the rows as entries)
            cols = None
        rows: list[Any] = FoldedRows([], b"", cols) if _SPLIT_FOLDS else []
        self.sink: tuple[list[Any], bytearray] | None = (
            (rows, bytearray()) if consume is not None else None
        )

    def idle(self) -> bool:
        """One step of the prepared work, if the image is in, else of ``consume``:
        whether it did one. While the prepared work waits for a thread of its own
        (its ``waiting``, branch open44), a step of ``consume`` first."""
        prep = self.prep
        if prep is None:
            parts = self.parts
            if parts is not None:
                prep = self.prep = self.prepare(parts)
                if prep is None:
                    self.prepare = _no_prep
                    self.parts = None
        elif getattr(prep, "waiting", False) and self._consume():
            return True
        elif prep.step():
            return True
        else:
            self.prep = prep = _DONE
        if prep is not _DONE and prep is not None:
            return bool(prep.step())
        return self._consume()

    def _consume(self) -> bool:
        """One step of ``consume`` (none without it): whether it did one."""
        consume, sink = self.consume, self.sink
        if consume is None or sink is None:
            return False
        return bool(consume(sink[0], sink[1]))


class _Done:
    """The prepared work, all stepped (:class:`_Ahead`): no step left."""

    __slots__ = ()

    def step(self) -> bool:
        return False


_DONE = _Done()


def _no_prep(parts: dict[str, bytes]) -> None:
    return None


#: ``read_file(..., late=[])`` (``SqliteStore.open_read``) does not wait for
#: ``quick_check``: the thread beside reads the index image first, and starts the check
#: only once the rows are read, so that it runs beside the caller's next work (the
#: state's load) on the second core instead of sharing it with the row reader's thread;
#: ``read_file`` hands the running check over as a :class:`LateCheck`, which the caller
#: joins (raising the error ``read_file`` would have raised) before it opens the file
#: for writing. False: ``read_file`` joins the check before it returns (the path
#: before; the same entries, image, warnings and errors).
_CHECK_LATE = True


class _Go:
    """The late check's hand-over (:data:`_CHECK_LATE`): the image the thread beside
    read (``image``, set before ``read`` is), and ``start``, set by ``read_file`` once the
    rows are read (``cancelled`` first when the check is no longer wanted)."""

    __slots__ = ("cancelled", "image", "read", "start")

    def __init__(self) -> None:
        self.read = threading.Event()
        self.start = threading.Event()
        self.cancelled = False
        #: (the image, the marker's warning or "", the image's SQLite error)
        self.image: tuple[dict[str, bytes] | None, str, sqlite3.Error | None] = (
            None, "", None,
        )  # fmt: skip

    def cancel(self) -> None:
        """No check wanted any more: the thread ends without it. Idempotent."""
        self.cancelled = True
        self.start.set()


class LateCheck:
    """``quick_check`` of a file :func:`read_file` read, still running in its thread
    beside the caller (:data:`_CHECK_LATE`). The caller must end it on every path:
    :meth:`result` (before anything writes to the file) or :meth:`stop`."""

    __slots__ = ("_beside", "_go", "_path", "_side")

    def __init__(self, path: str, beside: Beside, side: sqlite3.Connection, go: _Go) -> None:
        self._path = path
        self._beside: Beside | None = beside
        self._side = side
        self._go = go

    def result(self) -> None:
        """Wait for the check. Idempotent once it passed. O(file size) at most.

        Raises:
            StorageError: The file is corrupted (or SQLite failed), as :func:`read_file`
                would have raised it.
        """
        beside, self._beside = self._beside, None
        if beside is None:
            return
        try:
            check_error, _, _ = beside.result()
        finally:
            self._side.close()
        if check_error is None:
            return
        if isinstance(check_error, sqlite3.Error):
            raise StorageError(self._path, sqlite_reason(check_error)) from check_error
        raise check_error

    def stop(self) -> None:
        """End the check without its result (an error elsewhere). Idempotent."""
        beside, self._beside = self._beside, None
        if beside is None:
            return
        self._go.cancel()
        try:
            beside.stop()
        finally:
            self._side.close()


def _checks_beside(
    path: str,
    conn: sqlite3.Connection,
    image: bool,
    ahead: _Ahead | None = None,
    go: _Go | None = None,
) -> tuple[BaseException | None, dict[str, bytes] | None, BaseException | None]:
    """What ``read_file``'s thread does: ``quick_check``, then (with ``image``, and only
    if the check passed) the index image (:func:`_read_image`). Returns the check's error
    (or None), the image, and the image's SQLite error (or None): the caller raises
    them in the order the one-connection path would. ``ahead``: the image first, handed
    to it as soon as it is read (a check that fails then drops it). ``go``: the image
    first (given to ``go`` and ``ahead``), then the check once ``go.start`` is set
    (none if ``go.cancelled``)."""
    if go is not None:
        parts: dict[str, bytes] | None = None
        mismatch = ""
        read_error: sqlite3.Error | None = None
        try:
            if image:
                try:
                    parts, mismatch = _read_image_quietly(conn)
                except sqlite3.Error as exc:
                    read_error = exc
                else:
                    if ahead is not None:
                        ahead.parts = parts
            go.image = (parts, mismatch, read_error)
        finally:
            go.read.set()
        go.start.wait()
        if go.cancelled:
            return None, None, None
        try:
            _quick_check(path, conn)
        except (StorageError, sqlite3.Error) as exc:
            return exc, None, None
        if mismatch:  # warned once the check passed, as when the image came after it
            _warn_marker(mismatch)
        return None, parts, read_error
    if ahead is not None and image:
        mismatch = ""
        image_error: sqlite3.Error | None = None
        try:
            parts, mismatch = _read_image_quietly(conn)
        except sqlite3.Error as exc:
            parts, image_error = None, exc
        else:
            ahead.parts = parts
        try:
            _quick_check(path, conn)
        except (StorageError, sqlite3.Error) as exc:
            return exc, None, None
        if mismatch:  # warned once the check passed, as when the image came after it
            _warn_marker(mismatch)
        return None, parts, image_error
    try:
        _quick_check(path, conn)
    except (StorageError, sqlite3.Error) as exc:
        return exc, None, None
    if not image:
        return None, None, None
    try:
        return None, _read_image(conn), None
    except sqlite3.Error as exc:
        return None, None, exc


def read_file(
    path: str,
    *,
    image: bool = True,
    live: bool = False,
    prepare: Callable[[dict[str, bytes]], Any] | None = None,
    late: list[LateCheck] | None = None,
    consume: Callable[[list[Any], bytearray], bool] | None = None,
) -> tuple[list[tuple[int, MemoryEntry]], dict[str, bytes] | None]:
    """Validate an existing file and decode every entry, read-only; modifies nothing.
    With ``image``, also read the index image the ``meta`` row names, if its bytes hash
    to it (``None`` otherwise; an image is validated further where it is used).
    ``live``: the file may be held and written by another process (see
    :func:`read_only_uri`).

    Returns ``(seq, entry)`` pairs in ``seq`` order. A version-1 file's entries get the
    fields version 1 did not have at their defaults (``updated_at = created_at``).
    Reading everything here, before any read-write connection exists, means a file
    refused for its content is never touched (closing a read-write connection may
    checkpoint the WAL into the file). ``quick_check`` and the image run in a thread
    beside the rows' read (:data:`_CHECK_BESIDE`), joined before this returns or raises.
    O(file size) (``PRAGMA quick_check`` plus one table scan).

    ``prepare``: called (at most once, in this thread) with the image as soon as the
    thread beside has read it, maybe before the rows are all read; it returns an
    object whose ``step()`` runs a bounded step of work and tells whether steps
    remain (it must not raise an ``Exception``), or None. The steps run while the row
    reader makes this thread wait (:data:`_PREPARE_WHILE_READING`); the caller keeps
    the object (and finishes its work) if it wants it: this returns the same image.

    ``consume``: called (in this thread) whenever the compiled split reader's next chunk
    is not ready and ``prepare``'s steps are done (:data:`_CONSUME_WHILE_READING`), as
    ``consume(rows, folds)``: the list of the rows read so far (a :class:`FoldedRows`,
    which this returns when the read ends there; it must not change the list) and a
    bytearray of their fold hashes (8 bytes a row, or empty); it returns whether it did
    some work, and must not raise an ``Exception``. The rows it saw are the file's only
    if this returns that very list.

    ``late``: a list, to which a :class:`LateCheck` is appended when ``quick_check`` is
    left running (:data:`_CHECK_LATE`; only once everything else passed): the caller
    must then :meth:`~LateCheck.result` it (which raises the check's error) before it
    trusts the file or opens it for writing, or :meth:`~LateCheck.stop` it. Nothing
    appended: the check is done (as without ``late``).

    Raises:
        StorageError: See :func:`check_schema` and :func:`decode_row`; also any SQLite
            error, with its reason.
    """
    uri = read_only_uri(path, live=live)
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(path, f"cannot open read-only: {sqlite_reason(exc)}") from exc
    side: sqlite3.Connection | None = None
    beside: Beside | None = None
    go: _Go | None = None
    try:
        version = check_schema(path, conn, deep=not _CHECK_BESIDE)
        want_image = image and version >= 4
        ahead = None
        if _CHECK_BESIDE:
            use_prep = prepare is not None and want_image and _PREPARE_WHILE_READING
            # (only where an image is read: a rebuild's index adds stay beside each record)
            use_consume = consume is not None and want_image and _CONSUME_WHILE_READING
            if use_prep or use_consume:
                ahead = _Ahead(prepare if use_prep else None, consume if use_consume else None)
            if late is not None and _CHECK_LATE:
                go = _Go()
            side = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
            beside = Beside(
                _checks_beside, path, side, want_image, ahead, go,
                name="actormem open check", interrupt=side.interrupt,
            )  # fmt: skip
        with gc_paused():  # every object built here lives on: nothing for it to find
            rows_error: Exception | None = None
            handed = False  # the check left running, in a LateCheck appended to late
            distinct: list[bool] = []  # [True]: the reader found no id twice
            folds: list[bytes] = []  # [the rows' fold hashes] from the split reader
            try:
                idle = ahead.idle if ahead is not None else None
                sink = ahead.sink if ahead is not None else None
                entries = _read_entries(path, uri, conn, version, distinct, folds, idle, sink)
            except (StorageError, sqlite3.Error) as exc:
                if beside is None:
                    raise
                rows_error = exc
            if go is not None and rows_error is None and distinct == [True]:
                assert beside is not None
                assert side is not None
                assert late is not None
                go.read.wait()  # the image (read long before the rows' end, as a rule)
                parts, _, image_error = go.image
                if image_error is None:  # else as below: the check's error comes first
                    go.start.set()
                    late.append(LateCheck(path, beside, side, go))
                    beside = side = go = None  # the check's now: not stopped below
                    handed = True
            if go is not None:
                go.start.set()
            if handed:
                pass  # parts: the thread's image; the check is the caller's now
            elif beside is not None:
                check_error, parts, image_error = beside.result()
                beside = None
                if check_error is not None:  # it came first on one connection
                    raise check_error
                if rows_error is not None:
                    raise rows_error
                if image_error is not None:
                    raise image_error
            else:
                parts = _read_image(conn) if want_image else None
    except sqlite3.Error as exc:
        raise StorageError(path, sqlite_reason(exc)) from exc
    finally:
        if beside is not None:  # an error (KeyboardInterrupt) before the thread's result
            if go is not None:
                go.cancel()
            beside.stop()
        if side is not None:
            side.close()
        conn.close()
    if distinct != [True]:
        seen: set[int] = set()
        cols = getattr(entries, "cols", None)
        for seq, entry in entries:
            # the id's int, as the entry keeps it (no UUID made per row)
            ident = entry._id if cols is None else cols.ident(entry)
            if ident in seen:
                raise StorageError(
                    path,
                    f"corrupted: id {row_entry(entries, (seq, entry)).id} appears twice"
                    f" (seq {seq})",
                )
            seen.add(ident)
    if len(folds) == 1 and len(folds[0]) == 8 * len(entries):
        if sink is not None and entries is sink[0] and isinstance(entries, FoldedRows):
            entries.folds = folds[0]  # the reader filled ours: no copy
            return entries, parts
        return FoldedRows(entries, folds[0]), parts
    if getattr(entries, "cols", None) is not None:  # (no folds: the slot form kept)
        assert isinstance(entries, FoldedRows)
        return entries, parts
    return entries, parts


def _read_entries(
    path: str,
    uri: str,
    conn: sqlite3.Connection,
    version: int,
    distinct: list[bool] | None = None,
    folds: list[bytes] | None = None,
    idle: Callable[[], bool] | None = None,
    sink: tuple[list[Any], bytearray] | None = None,
) -> list[tuple[int, MemoryEntry]]:
    """Every ``(seq, entry)`` of the file, in seq order: through the compiled reader, or
    fetched by ``conn`` and decoded in batches (the rows of the whole file never exist
    at once beside their entries: about a third of the peak memory at 1M). O(file size).
    ``distinct``: as :func:`_read_rows_c`'s ``ids_out``; ``folds``: as its ``folds_out``;
    ``idle``: as its ``idle``; ``sink``: as its ``sink``.

    Raises:
        StorageError: A row that does not decode (:func:`decode_rows`).
        sqlite3.Error: SQLite failed.
    """
    read = _read_rows_c(uri, distinct, folds, idle, sink) if version >= 2 else None
    if read is not None:
        return read
    if distinct:
        del distinct[:]  # not the entries returned
    if folds:
        del folds[:]
    cursor = conn.execute(SELECT_ENTRIES_V1 if version == 1 else SELECT_ENTRIES)
    entries: list[tuple[int, MemoryEntry]] = []
    while rows := cursor.fetchmany(_FETCH_ROWS):
        if version == 1:
            padding = (None, None, None, None, None)
            rows = [row + padding for row in rows]
        entries += decode_rows(path, rows)
    return entries


def read_stored_vectors(
    path: str, *, live: bool = False
) -> tuple[str, int, dict[bytes, bytes]] | None:
    """The dense vectors a file keeps, read-only (for ``actormem export``): the model's
    name and dimension (``meta`` rows ``dense_model`` and ``dense_dim``) and
    ``{text_hash: float32 bytes}``, rows of the wrong length left out; None when the
    file has no vectors' model (it was never opened with a dense or hybrid scorer, or
    its schema predates vectors). Modifies nothing. O(vectors).

    Raises:
        StorageError: The file is not a readable actormem database.
    """
    try:
        conn = sqlite3.connect(read_only_uri(path, live=live), uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise StorageError(path, f"cannot open read-only: {sqlite_reason(exc)}") from exc
    try:
        if check_schema(path, conn, deep=False) < 3:
            return None
        meta = dict(conn.execute(SELECT_VECTOR_META))
        model, dim = meta.get("dense_model"), meta.get("dense_dim")
        if not isinstance(model, str) or not isinstance(dim, str) or not dim.isdigit():
            return None
        rows = {bytes(digest): bytes(vector) for _, digest, vector in vector_rows(conn, int(dim))}
    except sqlite3.Error as exc:
        raise StorageError(path, sqlite_reason(exc)) from exc
    finally:
        conn.close()
    return model, int(dim), rows


_encode_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@functools.lru_cache(maxsize=4096)
def _json_strings(value: tuple[str, ...]) -> str:
    """The JSON array of ``value``; cached, as entries share a few tag sets and
    namespaces (a hit costs a tuple hash, whose strings cache their own hashes)."""
    return _encode_json(value) if value else "[]"


#: ``encode_record`` formats the id from its int (``uuid.UUID.__str__``'s own text, no
#: ``UUID`` object) and reads a record without access bookkeeping from its entry (a new
#: store's). False: the path before it; the same rows.
_ENCODE_DIRECT = True
#: ``encode_record``'s direct path formats its datetimes with the core's ``iso_utc``
#: (``isoformat``'s text for a datetime in ``UTC``, written digit by digit: ~14k
#: instructions less a row than ``isoformat``, which builds it with
#: ``PyUnicode_FromFormat`` and the offset's text apart; ``isoformat`` itself for any
#: other datetime). False, or without the core: ``isoformat``, the path before it (the
#: same rows).
_ISO_DIRECT = True
_iso_utc: Callable[[datetime], str] | None = getattr(kernels._wo, "iso_utc", None)


def encode_record(rec: Record) -> tuple[Any, ...]:
    """The ``entries`` row of a live record, with its current access bookkeeping. O(size)."""
    e = rec.entry
    if _ENCODE_DIRECT and rec.access is None:
        iso = _iso_utc if _ISO_DIRECT and _iso_utc is not None else datetime.isoformat
        h = f"{e._id:032x}"  # str(uuid.UUID(int=...)): the same format
        created = iso(e.created_at)
        count = e.access_count
        last = e.last_accessed
        expires = e.expires_at
        return (
            rec.seq,
            f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}",
            e.category._value_,
            e.memory,
            _json_strings(e.tags),
            _json_strings(e.namespace),
            created,
            e.relevance,
            count if count < MAX_ACCESS_COUNT else MAX_ACCESS_COUNT,
            None if last is None else iso(last),
            int(e.validated),
            e.key,
            None if e.value is None else e.value.to_json(),
            created if e.updated_at is e.created_at else iso(e.updated_at),
            e.ttl,
            None if expires is None else iso(expires),
        )
    count, last = rec.current_access()
    created = e.created_at.isoformat()
    # updated_at defaults to the created_at object itself: the same text, formatted once.
    updated = created if e.updated_at is e.created_at else e.updated_at.isoformat()
    return (
        rec.seq,
        str(e.id),
        e.category._value_,  # the enum's value, without the property's lookup
        e.memory,
        _json_strings(e.tags),
        _json_strings(e.namespace),
        created,
        e.relevance,
        min(count, MAX_ACCESS_COUNT),
        None if last is None else last.isoformat(),
        int(e.validated),
        e.key,
        None if e.value is None else e.value.to_json(),
        updated,
        e.ttl,
        _iso(rec.current_expires()),
    )


#: ``encode_records`` builds the rows of records without access bookkeeping in the
#: core's ``encode_rows`` (one C pass: the slots read by offset, the id's text from its
#: int's bytes, ``iso_utc``'s datetimes; ``_json_strings`` and ``to_json`` called from
#: there; ~1.5 -> ~0.4 µs a row), ``encode_record`` for any other record. Only with
#: ``_ENCODE_DIRECT`` and ``_ISO_DIRECT`` (the rows of that path). False, or without
#: the core: ``encode_record`` per record, the path before it; the same rows.
_ROWS_C = True
_encode_rows: Callable[[list[Record]], list[tuple[Any, ...]]] | None = getattr(
    kernels._wo, "encode_rows", None
)
#: ``MemoryEntry``'s slots in the order ``rows_setup`` takes them: a row's columns after
#: ``seq`` (the slot of ``id`` is ``_id``).
_ENTRY_SLOTS = ("_id", *COLUMNS[2:])


def _rows_setup() -> None:
    """Give the core's ``encode_rows`` its classes, slots and callables (at import)."""
    wo: Any = kernels._wo
    wo.rows_setup(
        Record,
        tuple(Record.__dict__[n] for n in ("seq", "access", "cols", "slot")),
        MemoryEntry,
        tuple(MemoryEntry.__dict__[n] for n in _ENTRY_SLOTS),
        _json_strings,
        MAX_ACCESS_COUNT,
        encode_record,
    )


if _encode_rows is not None:
    _rows_setup()


def encode_records(recs: list[Record]) -> list[tuple[Any, ...]]:
    """``[encode_record(rec) for rec in recs]``, the same rows: in one C pass
    (``_ROWS_C``) where the core has it. O(sum of the rows' sizes).

    Raises:
        TypeError: ``recs`` is not a list.
    """
    if not isinstance(recs, list):
        raise TypeError(f"encode_records() takes a list, not {type(recs).__name__}")
    if _ROWS_C and _ENCODE_DIRECT and _ISO_DIRECT and _encode_rows is not None:
        return _encode_rows(recs)
    return [encode_record(rec) for rec in recs]


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


#: ``encode_access`` formats its datetimes with the core's ``iso_utc`` (as
#: ``encode_record``'s direct path does, :data:`_ISO_DIRECT`): the main job's ~16,000
#: access updates paid ``isoformat``'s ``PyUnicode_FromFormat`` (~75M instructions of
#: ~10.3G in 3,000 steps under callgrind). False, or without the core: ``isoformat``, the
#: path before it (the same text).
_ACCESS_ISO = True


def encode_access(rec: Record) -> tuple[Any, ...]:
    """Parameters of :data:`UPDATE_ACCESS` for a record. O(1)."""
    count, last = rec.current_access()
    count = min(count, MAX_ACCESS_COUNT)
    expires = rec.current_expires()
    if _ACCESS_ISO and _ISO_DIRECT and _iso_utc is not None:
        iso = _iso_utc
        return (
            count,
            None if last is None else iso(last),
            None if expires is None else iso(expires),
            rec.seq,
        )
    return (count, _iso(last), _iso(expires), rec.seq)


@functools.lru_cache(maxsize=4096)
def _strings(value: Any) -> tuple[str, ...]:
    """The tuple of a JSON array of strings (tags, a namespace); cached, as rows share a
    few tag sets and namespaces (the twin of :func:`_json_strings`). Raises ValueError."""
    try:
        items = json.loads(value)
    except RecursionError:  # e.g. "[[[[...": not a ValueError, but as invalid
        raise ValueError("expected a JSON array of strings, got one nested too deep") from None
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise ValueError(f"expected a JSON array of strings, got {value!r}")
    return tuple(items)


def _json_object(value: Any) -> JsonObject:
    if not isinstance(value, str):
        raise TypeError(f"expected JSON object text, got {value!r}")
    try:
        return JsonObject.from_json(value)
    except RecursionError:
        raise ValueError("a payload nested too deep") from None


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError(f"expected ISO 8601 text, got {value!r}")
    return datetime.fromisoformat(value)


#: A category by its stored value: a dict lookup, where ``MemoryCategory(value)`` (the
#: fallback, which raises for a bad value) costs ~1 µs a row in the enum's Python code.
_CATEGORIES: dict[object, MemoryCategory] = {c.value: c for c in MemoryCategory}
#: The same, for the compiled reader (whose keys must be str).
_CATEGORY_VALUES: dict[str, MemoryCategory] = {c.value: c for c in MemoryCategory}


def decode_row(path: str, row: tuple[Any, ...]) -> tuple[int, MemoryEntry]:
    """``(seq, entry)`` from an ``entries`` row, every field validated. O(size).

    Raises:
        StorageError: The row does not decode to a valid :class:`MemoryEntry`.
    """
    (seq, id, category, memory, tags, namespace, created, relevance, count, last, validated) = row[
        :11
    ]
    key, value, updated, ttl, expires = row[11:]
    try:
        if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
            raise ValueError(f"bad seq {seq!r}")
        if validated not in (0, 1) or isinstance(validated, float):
            raise ValueError(f"bad validated flag {validated!r}")
        if not isinstance(id, str):
            raise TypeError(f"bad id {id!r}")
        entry = MemoryEntry(
            id=uuid.UUID(id),
            category=_CATEGORIES.get(category) or MemoryCategory(category),
            memory=memory,
            tags=_strings(tags),
            namespace=_strings(namespace),
            created_at=_time(created),
            relevance=relevance,
            access_count=count,
            validated=bool(validated),
            last_accessed=None if last is None else _time(last),
            key=key,
            value=None if value is None else _json_object(value),
            updated_at=None if updated is None else _time(updated),
            ttl=ttl,
            expires_at=None if expires is None else _time(expires),
        )
    except (TypeError, ValueError) as exc:  # InvalidEntryError is a ValueError
        raise StorageError(
            path, f"corrupted: the entry at seq {_cut(repr(seq))} is invalid: {_cut(str(exc))}"
        ) from exc
    return seq, entry


@functools.lru_cache(maxsize=4096)
def _tags_of(value: Any) -> tuple[str, ...]:
    """The tags of a stored JSON array, as the constructor converts them; cached (rows
    share a few tag sets). Raises TypeError or ValueError."""
    return _convert_tags(_strings(value))


@functools.lru_cache(maxsize=4096)
def _namespace_of(value: Any) -> tuple[str, ...]:
    """The namespace of a stored JSON array, as the constructor converts it; cached."""
    return _convert_namespace(_strings(value))


class _Declined(Exception):
    """A row the bulk decoder leaves to :func:`decode_row` (not in the writer's form)."""


def _utc(value: Any) -> datetime:
    """The datetime of ISO 8601 text with the offset ``+00:00`` (as the writer stores
    every time), already the UTC datetime the constructor would make of it; any other
    text is declined. O(1)."""
    if type(value) is not str:
        raise _Declined
    when = _fromisoformat(value)
    if when.tzinfo is not UTC:
        raise _Declined
    return when


_fromisoformat = datetime.fromisoformat


def _checked_text(value: Any, limit: int) -> str:
    """``value`` if it is a str of at most ``limit`` code points that encodes as UTF-8
    (as the constructor checks ``memory`` and ``key``); else declined. O(len)."""
    if type(value) is not str or len(value) > limit:
        raise _Declined
    if not value.isascii():
        value.encode("utf-8")  # a lone surrogate: UnicodeEncodeError, a ValueError
    return value


def _decode_checked(row: tuple[Any, ...]) -> tuple[int, MemoryEntry]:
    """``(seq, entry)`` of a row in the writer's own form (:func:`encode_record`),
    each field checked here as the constructor would check it, and the entry built
    without the constructor; anything else raises (``_Declined``, TypeError,
    ValueError, KeyError) for :func:`decode_row` to decide. O(size)."""
    (seq, id, category, memory, tags, namespace, created, relevance, count, last, validated,
     key, value, updated, ttl, expires) = row  # fmt: skip
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise _Declined
    # The canonical UUID text (lowercase, hyphens at 8-13-18-23) only: other spellings
    # ``uuid.UUID`` accepts (braces, "urn:uuid:", upper case) go to decode_row.
    if type(id) is not str or len(id) != 36 or not id[8] == id[13] == id[18] == id[23] == "-":
        raise _Declined
    digits = id.replace("-", "")
    ident = int(digits, 16)
    if f"{ident:032x}" != digits:  # also refuses what int() allows: "_", " ", "+", "A"
        raise _Declined
    if type(relevance) is not float or not 0.0 <= relevance <= 1.0:  # NaN fails too
        raise _Declined
    if relevance == 1.0:  # the default: one float object for every such entry, not one each
        relevance = 1.0
    if type(count) is not int or count < 0 or type(validated) is not int:
        raise _Declined
    if validated != 0 and validated != 1:
        raise _Declined
    if ttl is not None and (type(ttl) is not float or not 0.0 < ttl <= MAX_TTL):
        raise _Declined  # (inf fails the bound, NaN the comparison)
    created_at = _utc(created)
    if updated == created:
        updated_at = created_at  # one object for both, as most rows have them equal
    else:
        updated_at = created_at if updated is None else _utc(updated)
        if updated_at < created_at:
            updated_at = created_at
    if key is not None:
        key = _checked_text(key, MAX_KEY_CHARS)
        if not key:
            raise _Declined
    entry = entry_of_checked(
        _CATEGORIES[category],
        _checked_text(memory, MAX_MEMORY_CHARS),
        ident,
        _tags_of(tags),
        created_at,
        relevance,
        count,
        validated == 1,
        _namespace_of(namespace),
        None if last is None else _utc(last),
        key,
        None if value is None else _json_object(value),
        updated_at,
        ttl,
        None if expires is None else _utc(expires),
    )
    return seq, entry


#: ``decode_rows`` decodes the rows in the writer's form in C (the core's
#: ``decode_rows``: the same checks as :func:`_decode_checked`, the entry's slots set
#: directly; a row it declines goes through :func:`_decode_checked`, then
#: :func:`decode_row`, as before). False, or without the core: the Python loop, the
#: path before it (the same entries; ``tests/test_decode_c.py`` compares both).
_C_DECODE = True
_decode_rows_c: Callable[..., int] | None = getattr(kernels._wo, "decode_rows", None)


def _decode_rows_in_c(
    path: str, rows: list[tuple[Any, ...]], out: list[tuple[int, MemoryEntry]]
) -> None:
    """Append :func:`decode_row` of every row of ``rows`` to ``out`` through the core's
    ``decode_rows``, each declined row in Python. O(total size)."""
    assert _decode_rows_c is not None
    if type(rows) is not list or type(out) is not list:
        raise TypeError("decode_rows: rows and out must be lists")
    at, n = 0, len(rows)
    while at < n:
        at = _decode_rows_c(
            rows, at, out, MemoryEntry, _ENTRY_FIELDS, _CATEGORIES, _tags_of, _namespace_of,
            _json_object, 1.0, MAX_MEMORY_CHARS, MAX_KEY_CHARS, MAX_TTL, MAX_SEQ,
        )  # fmt: skip
        if at < n:
            row = rows[at]
            try:
                out.append(_decode_checked(row))
            except Exception:  # declined, or invalid: decode_row decides
                out.append(decode_row(path, row))
            at += 1


def decode_rows(path: str, rows: list[tuple[Any, ...]]) -> list[tuple[int, MemoryEntry]]:
    """:func:`decode_row` of every row, in order, several times faster: a row in the
    writer's own form (canonical UUID text, times at ``+00:00``, ...) is checked field
    by field as the constructor would check it and its entry built without the
    constructor's attrs machinery; any other row, valid or not, goes through
    :func:`decode_row`, which gives the same entry or the same error as before.
    O(total size).

    Raises:
        StorageError: As :func:`decode_row`, for the first invalid row.
    """
    out: list[tuple[int, MemoryEntry]] = []
    if _C_DECODE and _decode_rows_c is not None and type(rows) is list:
        _decode_rows_in_c(path, rows, out)
        return out
    append = out.append
    fast = _decode_checked
    for row in rows:
        try:
            append(fast(row))
        except Exception:  # declined, or invalid: decode_row decides, with its message
            append(decode_row(path, row))
    return out
