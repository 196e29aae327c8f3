"""JSON Lines in and out: tool-call records, and entries for ``import``/``export``.

Theory of operation
-------------------
Two line formats meet here, both one JSON object per line (UTF-8, blank lines skipped):

* a *tool call* (the format of ``shared/data/tool_calls.jsonl``)::

      {"source": str, "episode": str, "step": int, "tool": str, "input": any JSON,
       "result": str, "reward"?: number}

  Other keys are ignored, so richer records still load.
* an *entry*, every field of a :class:`~actormem.MemoryEntry`, as :func:`entry_to_json`
  writes it::

      {"id": "<uuid>", "category": "trajectory", "memory": str, "tags": [str],
       "created_at": "<ISO 8601 with offset>", "relevance": float, "access_count": int,
       "validated": bool, "namespace": [str], "last_accessed": "<ISO 8601>" | null}

  Only ``category`` and ``memory`` are required; unknown keys are refused, so a typo never
  drops a field silently. ``entry_from_json(entry_to_json(e)) == e`` for every entry.

Readers check a whole file before anything is done with it and raise
:class:`JsonlError` naming the file and the 1-based line of the first bad record, so a
caller can refuse the file without having stored half of it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import attrs

from ._agent_hooks import format_trajectory
from ._entry import MemoryCategory, MemoryEntry
from ._sqlite_format import MAX_ACCESS_COUNT

__all__ = [
    "JsonlError",
    "ToolCall",
    "entry_from_json",
    "entry_to_json",
    "escape_json_line",
    "read_import_file",
    "read_tool_calls",
    "tool_call_entry",
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
    }
)


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


@attrs.frozen(kw_only=True, slots=True)
class ToolCall:
    """One recorded tool call (one line of a tool-call file).

    Attributes:
        source: Where the record comes from (a dataset name), non-empty.
        episode: The episode (trajectory) it belongs to within ``source``, non-empty.
        step: Position in the episode, an int >= 0. Calls with equal steps keep their
            file order (``tool_lookups.jsonl`` numbers every call 0).
        tool: The tool's name.
        input: The call's arguments, any JSON value (normally an object).
        result: The tool's text output.
        reward: The episode's reward where the data has one, else ``None``.
    """

    source: str
    episode: str
    step: int
    tool: str
    input: Any
    result: str
    reward: float | None = None


def _lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` for each non-blank line; :class:`JsonlError` otherwise."""
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
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise JsonlError(path, number, f"not UTF-8 ({exc.reason})") from None
            if not text.strip():
                continue
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                reason = f"not JSON: {exc.msg} at column {exc.colno}"
                raise JsonlError(path, number, reason) from None
            except RecursionError:  # "[[[[...": valid JSON, deeper than Python's stack
                raise JsonlError(path, number, "JSON nested too deep") from None
            yield number, value


def _need(obj: dict[str, Any], key: str, kind: type | tuple[type, ...], what: str) -> Any:
    if key not in obj:
        raise ValueError(f"missing {key!r}")
    value = obj[key]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ValueError(f"{key!r} must be {what}, not a boolean")
    if not isinstance(value, kind):
        raise ValueError(f"{key!r} must be {what}, not {type(value).__name__}")
    return value


def _tool_call(obj: dict[str, Any]) -> ToolCall:
    source = _need(obj, "source", str, "a string")
    episode = _need(obj, "episode", str, "a string")
    if not source or not episode:
        raise ValueError("'source' and 'episode' must not be empty")
    step = _need(obj, "step", int, "an integer")
    if step < 0:
        raise ValueError(f"'step' must be >= 0, got {step}")
    tool = _need(obj, "tool", str, "a string")
    if "input" not in obj:
        raise ValueError("missing 'input'")
    result = _need(obj, "result", str, "a string")
    reward = obj.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float)):
            raise ValueError(f"'reward' must be a number, not {type(reward).__name__}")
        if not math.isfinite(reward):
            raise ValueError("'reward' must be finite")
        reward = float(reward)
    call = ToolCall(
        source=source,
        episode=episode,
        step=step,
        tool=tool,
        input=obj["input"],
        result=result,
        reward=reward,
    )
    format_trajectory(call.tool, call.input, call.result)  # refuses what it cannot write
    return call


def read_tool_calls(path: Path) -> tuple[list[ToolCall], str]:
    """Read and check a whole tool-call file.

    Args:
        path: A JSONL file of tool calls (see the module docs).

    Returns:
        ``(calls, sha256)``: the calls in file order, and the hex SHA-256 of the file's
        bytes (for reports that compare runs).

    Raises:
        JsonlError: The file cannot be read, or a line is not JSON or not a tool call.
            Names the file and the line.

    Runtime complexity: O(size of the file).
    """
    calls: list[ToolCall] = []
    for number, value in _lines(path):
        if not isinstance(value, dict):
            raise JsonlError(path, number, f"expected a JSON object, got {type(value).__name__}")
        try:
            call = _tool_call(value)
        except (ValueError, TypeError) as exc:
            raise JsonlError(path, number, f"not a tool call: {exc}") from None
        calls.append(call)
    return calls, file_sha256(path)


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


def tool_call_entry(call: ToolCall, *, episode: str | None = None) -> MemoryEntry:
    """The ``TRAJECTORY`` entry :class:`~actormem.MemoryHooks` would store for ``call``,
    in namespace ``(source, episode)`` (``episode`` overrides the call's own id).

    Raises:
        TypeError, ValueError: As :func:`~actormem.format_trajectory`.
    """
    entry = MemoryEntry.new(
        MemoryCategory.TRAJECTORY, format_trajectory(call.tool, call.input, call.result)
    )
    return entry.with_namespace(call.source, call.episode if episode is None else episode)


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
    category_name = _need(obj, "category", str, "a string")
    try:
        category = MemoryCategory(category_name)
    except ValueError:
        known = ", ".join(c.value for c in MemoryCategory)
        raise ValueError(f"unknown category {category_name!r} (one of {known})") from None
    fields: dict[str, Any] = {"category": category, "memory": _need(obj, "memory", str, "a string")}
    if "id" in obj:
        raw_id = _need(obj, "id", str, "a UUID string")
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
        fields["relevance"] = _need(obj, "relevance", (int, float), "a number")
    if "access_count" in obj:
        count = _need(obj, "access_count", int, "an integer")
        if count > MAX_ACCESS_COUNT:  # a durable memory keeps it in 64 bits (SQLite INTEGER)
            raise ValueError(f"'access_count' must be at most 2**63 - 1, got {count}")
        fields["access_count"] = count
    if "validated" in obj:
        fields["validated"] = _need(obj, "validated", bool, "true or false")
    try:
        return MemoryEntry(**fields)
    except TypeError as exc:  # attrs validators raise TypeError for wrong types
        raise ValueError(str(exc)) from None


def read_import_file(path: Path) -> tuple[list[MemoryEntry], int, int]:
    """Read and check a whole file for ``actormem import``: entries, tool calls, or both.

    A line with ``tool`` and ``result`` keys is a tool call and becomes its trajectory
    entry (:func:`tool_call_entry`); a line with a ``memory`` key is an entry.

    Returns:
        ``(entries, n_entries, n_tool_calls)``: the entries to store in file order, and
        how many lines were of each kind.

    Raises:
        JsonlError: The file cannot be read or a line is neither kind (file and line named).

    Runtime complexity: O(size of the file).
    """
    entries: list[MemoryEntry] = []
    n_entries = n_calls = 0
    for number, value in _lines(path):
        if not isinstance(value, dict):
            raise JsonlError(path, number, f"expected a JSON object, got {type(value).__name__}")
        try:
            if "tool" in value and "result" in value:
                entries.append(tool_call_entry(_tool_call(value)))
                n_calls += 1
            elif "memory" in value:
                entries.append(entry_from_json(value))
                n_entries += 1
            else:
                raise ValueError(
                    "neither an entry (no 'memory' key) nor a tool call (no 'tool'/'result')"
                )
        except (ValueError, TypeError) as exc:
            raise JsonlError(path, number, str(exc)) from None
    return entries, n_entries, n_calls
