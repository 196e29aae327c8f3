"""JSON Lines in and out: entries for ``import``/``export``, and the line reader that the
tool-call reader (:mod:`actormem.agent._toolcalls`) shares.

Theory of operation
-------------------
One JSON object per line (UTF-8, blank lines skipped, a byte-order mark at the start
of the file ignored). An *entry* holds every field of a
:class:`~actormem.MemoryEntry`, as :func:`entry_to_json` writes it::

      {"id": "<uuid>", "category": "trajectory", "memory": str, "tags": [str],
       "created_at": "<ISO 8601 with offset>", "relevance": float, "access_count": int,
       "validated": bool, "namespace": [str], "last_accessed": "<ISO 8601>" | null,
       "key": str | null, "value": {...} | null, "updated_at": "<ISO 8601>",
       "ttl": float | null, "expires_at": "<ISO 8601>" | null}

  Only ``category`` and ``memory`` are required; unknown keys are refused, so a typo never
  drops a field silently. ``entry_from_json(entry_to_json(e)) == e`` for every entry.

An exported entry may also carry its dense vector (:func:`vector_to_json`), read back by
:func:`vector_from_json`::

      "vector": {"model": str, "dim": int, "text_hash": "<32 hex digits>",
                 "f32le": "<base64 of dim little-endian float32 values>"}

  ``model`` and ``dim`` name the embedder that made it (the file's ``dense_model`` and
  ``dense_dim``), ``text_hash`` is :func:`~actormem._index.dense.text_hash` of the text it
  was computed from (the entry's memory, then its tags): an importer uses the vector only
  for that text, and only with that model.

Readers check a whole file before anything is done with it and raise
:class:`JsonlError` naming the file and the 1-based line of the first bad record, so a
caller can refuse the file without having stored half of it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from .._entry import MemoryCategory, MemoryEntry
from .sqlite_format import MAX_ACCESS_COUNT

__all__ = [
    "JsonVector",
    "SQLITE_MAGIC",
    "JsonlError",
    "entry_from_json",
    "entry_to_json",
    "escape_json_line",
    "file_sha256",
    "is_unit_vector",
    "json_lines",
    "need",
    "vector_from_json",
    "vector_to_json",
]

_ENTRY_KEYS = frozenset(
    {
        "id",
        "category",
        "memory",
        "tags",
        "created_at",
        "relevance",
        "access_count",
        "validated",
        "namespace",
        "last_accessed",
        "key",
        "value",
        "updated_at",
        "ttl",
        "expires_at",
    }
)


#: The first bytes of every SQLite database file (https://sqlite.org/fileformat.html).
SQLITE_MAGIC = b"SQLite format 3\x00"


class JsonlError(ValueError):
    """A JSON Lines file cannot be used: unreadable, or a line is not a valid record.

    ``str(error)`` is one line, ``"{path}:{line}: {reason}"`` (``"{path}: {reason}"`` when
    the whole file is at fault, e.g. it does not exist).

    Attributes:
        path: The file, as given.
        line: 1-based line number of the bad record, or ``None``.
        reason: What is wrong, in a few words.
    """

    def __init__(self, path: object, line: int | None, reason: str) -> None:
        where = f"{path}" if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` for each non-blank line; :class:`JsonlError` otherwise.

    A UTF-8 byte-order mark at the start of the file is skipped."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise JsonlError(path, None, "no such file") from None
    except IsADirectoryError:
        raise JsonlError(path, None, "is a directory, not a JSONL file") from None
    except OSError as exc:
        raise JsonlError(path, None, exc.strerror or str(exc)) from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(SQLITE_MAGIC):
                # e.g. ``actormem import FILE.jsonl m.db``, the two swapped
                raise JsonlError(
                    path, None, "an SQLite database (a memory file?), not a JSONL file"
                )
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise JsonlError(path, number, f"not UTF-8 ({exc.reason})") from None
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]  # a byte-order mark, as some Windows editors write
            if not text.strip():
                continue
            yield number, parse_line(path, number, text)


def parse_line(path: Path, number: int, text: str) -> Any:
    """``json.loads(text)`` of line ``number`` of ``path``, its errors raised as
    :func:`json_lines` raises them. O(len(text)).

    Raises:
        JsonlError: The line is not JSON, or nested deeper than Python's stack.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise JsonlError(path, number, f"not JSON: {json_error_place(exc, text)}") from None
    except RecursionError:  # "[[[[...": valid JSON, deeper than Python's stack
        raise JsonlError(path, number, "JSON nested too deep") from None
    except ValueError as exc:  # an integer over Python's int-string digit limit
        raise JsonlError(path, number, f"not JSON: {exc}") from None


def json_error_place(exc: json.JSONDecodeError, text: str) -> str:
    """What ``exc`` (raised by ``json.loads(text)`` of one line) says, and where, counted
    in the line without its line break: the parser's position is otherwise past the
    ``\\n`` (``exc.colno`` 1 of a second line) for a line that stops short, and a string
    left open there is an "Invalid control character" (the ``\\n``). So the line is
    parsed again without it, for its error: e.g. ``Unterminated string starting at
    column 29`` (Python's message already ends in "at"), ``Expecting ',' delimiter at
    column 20 (the end of the line)``. Columns count characters from 1. O(len(text)).
    """
    line = text.rstrip("\r\n")
    if line != text:
        try:
            json.loads(line)
        except json.JSONDecodeError as again:
            exc = again
    column = min(exc.pos, len(line)) + 1
    where = "column" if exc.msg.endswith(" at") else "at column"
    end = " (the end of the line)" if exc.pos >= len(line) else ""
    return f"{exc.msg} {where} {column}{end}"


def need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise ValueError(f"missing {key!r}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ValueError(f"{key!r} must be {what}, not a boolean")
    if not isinstance(value, kind):
        raise ValueError(f"{key!r} must be {what}, not {type(value).__name__}")
    return value


def file_sha256(path: Path) -> str:
    """Hex SHA-256 of the bytes of ``path``. O(size); reads in 1 MiB blocks.

    Raises:
        OSError: The file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _time_to_json(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def entry_to_json(entry: MemoryEntry) -> dict[str, Any]:
    """Every field of ``entry`` as a JSON-ready dict (see the module docs for the shape).

    Datetimes are ISO 8601 with their UTC offset and microseconds, so they read back equal.
    """
    return {
        "id": str(entry.id),
        "category": entry.category.value,
        "memory": entry.memory,
        "tags": list(entry.tags),
        "created_at": _time_to_json(entry.created_at),
        "relevance": entry.relevance,
        "access_count": entry.access_count,
        "validated": entry.validated,
        "namespace": list(entry.namespace),
        "last_accessed": _time_to_json(entry.last_accessed),
        "key": entry.key,
        "value": None if entry.value is None else entry.value.thaw(),
        "updated_at": _time_to_json(entry.updated_at),
        "ttl": entry.ttl,
        "expires_at": _time_to_json(entry.expires_at),
    }


# What json.dumps(ensure_ascii=False) leaves raw but a terminal may act on or hide: C1
# controls (U+0080-U+009F; 8-bit CSI is U+009B), format characters (bidi overrides,
# zero-width), line and paragraph separators. C0 controls are already \u00XX escapes.
_JSON_UNSAFE_RE = re.compile(
    "[\u0080-\u009f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
)


def escape_json_line(line: str) -> str:
    """``line`` (JSON text from ``json.dumps(..., ensure_ascii=False)``) with the
    characters a terminal may act on but JSON leaves raw written as ``\\uXXXX`` escapes.
    Such characters occur only inside JSON strings, where the escape means the same
    character, so the result parses to the same value. O(n)."""
    return _JSON_UNSAFE_RE.sub(_json_escape, line)


def _json_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON spells an astral character as a UTF-16 surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def _parse_time(key: str, value: object) -> datetime:
    if not isinstance(value, str):
        raise ValueError(f"{key!r} must be an ISO 8601 string, not {type(value).__name__}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{key!r} is not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        raise ValueError(f"{key!r} has no UTC offset: {value!r}")
    return parsed


def _str_list(key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return value


def entry_from_json(obj: dict[str, Any]) -> MemoryEntry:
    """The entry an :func:`entry_to_json` dict describes; missing optional fields take the
    :class:`~actormem.MemoryEntry` defaults (a new id, created now, relevance 1.0...).

    Raises:
        ValueError: An unknown key, a missing ``category``/``memory``, a field of the wrong
            JSON type, or a value :class:`~actormem.MemoryEntry` refuses (its
            :class:`~actormem.InvalidEntryError` is a ``ValueError``).
    """
    unknown = sorted(set(obj) - _ENTRY_KEYS)
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r}")
    category_name = need(obj, "category", str, "a string")
    try:
        category = MemoryCategory(category_name)
    except ValueError:
        known = ", ".join(c.value for c in MemoryCategory)
        raise ValueError(f"unknown category {category_name!r} (one of {known})") from None
    fields: dict[str, Any] = {"category": category, "memory": need(obj, "memory", str, "a string")}
    if "id" in obj:
        raw_id = need(obj, "id", str, "a UUID string")
        try:
            fields["id"] = uuid.UUID(raw_id)
        except ValueError:
            raise ValueError(f"'id' is not a UUID: {raw_id!r}") from None
    if "tags" in obj:
        fields["tags"] = _str_list("tags", obj["tags"])
    if "namespace" in obj:
        fields["namespace"] = _str_list("namespace", obj["namespace"])
    if "created_at" in obj:
        fields["created_at"] = _parse_time("created_at", obj["created_at"])
    if obj.get("last_accessed") is not None:
        fields["last_accessed"] = _parse_time("last_accessed", obj["last_accessed"])
    if "relevance" in obj:
        fields["relevance"] = need(obj, "relevance", (int, float), "a number")
    if "access_count" in obj:
        count = need(obj, "access_count", int, "an integer")
        if count > MAX_ACCESS_COUNT:  # a durable memory keeps it in 64 bits (SQLite INTEGER)
            raise ValueError(f"'access_count' must be at most 2**63 - 1, got {count}")
        fields["access_count"] = count
    if "validated" in obj:
        fields["validated"] = need(obj, "validated", bool, "true or false")
    if obj.get("key") is not None:
        fields["key"] = need(obj, "key", str, "a string")
    if obj.get("value") is not None:
        fields["value"] = need(obj, "value", dict, "a JSON object")
    if "updated_at" in obj:
        fields["updated_at"] = _parse_time("updated_at", obj["updated_at"])
    if obj.get("ttl") is not None:
        fields["ttl"] = need(obj, "ttl", (int, float), "a number of seconds")
    if obj.get("expires_at") is not None:
        fields["expires_at"] = _parse_time("expires_at", obj["expires_at"])
    try:
        return MemoryEntry(**fields)
    except TypeError as exc:  # attrs validators raise TypeError for wrong types
        raise ValueError(str(exc)) from None


#: Most dimensions a vector line may declare (a bound on what one line can make us decode).
MAX_VECTOR_DIM = 65536
_VECTOR_KEYS = frozenset({"model", "dim", "text_hash", "f32le"})


@attrs.frozen(kw_only=True, slots=True)
class JsonVector:
    """A dense vector read from an exported entry (see the module docs).

    Attributes:
        model: The embedder's name.
        dim: Its dimension, 1 to :data:`MAX_VECTOR_DIM`.
        text_hash: 16 bytes identifying the text it was computed from.
        data: ``dim`` little-endian float32 values, every one finite.
    """

    model: str
    dim: int
    text_hash: bytes
    data: bytes


def vector_to_json(model: str, dim: int, text_hash: bytes, data: bytes) -> dict[str, Any]:
    """The ``"vector"`` object of an exported entry. O(dim)."""
    return {
        "model": model,
        "dim": dim,
        "text_hash": text_hash.hex(),
        "f32le": base64.b64encode(data).decode("ascii"),
    }


#: How far from 1 the length of an exported vector may be (they are written unit length,
#: float32: about 1e-7 off); a vector further off is not trusted (see is_unit_vector).
UNIT_TOLERANCE = 1e-3


def is_unit_vector(data: bytes) -> bool:
    """Whether the float32 little-endian values ``data`` form a vector of length 1
    within :data:`UNIT_TOLERANCE` (computed in float64: no overflow for huge values).
    An all-zero vector, or one scaled up, is not: ``import`` drops it and the vector is
    computed when the file is next opened with a dense or hybrid scorer. O(dim)."""
    norm = float(np.linalg.norm(np.frombuffer(data, "<f4").astype(np.float64)))
    return abs(norm - 1.0) <= UNIT_TOLERANCE


def vector_from_json(obj: object) -> JsonVector:
    """The vector a :func:`vector_to_json` object describes, checked. O(dim).

    Raises:
        ValueError: Not an object, an unknown or missing key, a field of the wrong type,
            ``dim`` outside 1 to :data:`MAX_VECTOR_DIM`, ``text_hash`` not 32 hex
            digits, ``f32le`` not base64 or not ``dim`` float32 values, or a NaN or
            infinite value. The message starts with ``'vector'``.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"'vector' must be a JSON object, not {type(obj).__name__}")
    unknown = sorted(set(obj) - _VECTOR_KEYS)
    if unknown:
        raise ValueError(f"'vector' has an unknown key {unknown[0]!r}")
    try:
        model = need(obj, "model", str, "a string")
        dim = need(obj, "dim", int, "an integer")
        digest = need(obj, "text_hash", str, "a string of 32 hex digits")
        encoded = need(obj, "f32le", str, "a base64 string")
    except ValueError as exc:
        raise ValueError(f"'vector': {exc}") from None
    if not model:
        raise ValueError("'vector': 'model' is empty")
    if not 1 <= dim <= MAX_VECTOR_DIM:
        raise ValueError(f"'vector': 'dim' must be 1 to {MAX_VECTOR_DIM}, got {dim}")
    if not re.fullmatch(r"[0-9a-fA-F]{32}", digest):
        raise ValueError("'vector': 'text_hash' must be 32 hex digits")
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("'vector': 'f32le' is not valid base64") from None
    if len(data) != 4 * dim:
        raise ValueError(
            f"'vector': 'f32le' holds {len(data)} bytes, not {4 * dim} ({dim} float32 values)"
        )
    if not np.isfinite(np.frombuffer(data, "<f4")).all():
        raise ValueError("'vector': 'f32le' holds a NaN or infinite value")
    return JsonVector(model=model, dim=dim, text_hash=bytes.fromhex(digest), data=data)
