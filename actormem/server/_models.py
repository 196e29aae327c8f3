"""Request and response bodies of the HTTP API, as pydantic models (they make the OpenAPI
document, and FastAPI validates requests with them).

The models only check shapes and ranges; an entry is built by
:func:`actormem._storage.jsonl.entry_from_json` from the model's JSON dump, the same
function ``actormem import`` uses, so the server and the files speak one format.
Responses are written with :func:`~actormem._storage.jsonl.entry_to_json` directly (the
models below document them).
"""

from __future__ import annotations

import math
import uuid
from functools import partial
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
    field_validator,
)

from .._engine.snapshot import MAX_QUERY_CHARS
from .._entry import MAX_KEY_CHARS, MAX_MEMORY_CHARS, MAX_TTL, MemoryCategory
from .._json import MAX_VALUE_DEPTH
from ..client._bounds import MAX_BATCH_TAGS, MAX_JSON_INT, MAX_LIMIT

__all__ = [
    "MAX_BATCH_ENTRIES",
    "MAX_BATCH_TAGS",
    "MAX_JSON_INT",
    "MAX_LIMIT",
    "MAX_TTL",
    "RemovalsOut",
    "Category",
    "ConsolidationOut",
    "DeletedOut",
    "EntryIn",
    "EntryOut",
    "KeyIn",
    "LenOut",
    "ListIn",
    "NamespacesIn",
    "NamespacesOut",
    "Problem",
    "RetrieveIn",
    "RetrieveOut",
    "ScoredOut",
    "ScoredResultsOut",
    "StatisticsOut",
    "StoreManyIn",
    "StoredManyOut",
    "StoredOut",
    "SweptOut",
]

#: Most entries in one ``store_many`` request (the body limit usually binds first).
MAX_BATCH_ENTRIES = 10_000

Category = Literal[tuple(c.value for c in MemoryCategory)]  # type: ignore[valid-type]
NonEmpty = Annotated[str, Strict(), StringConstraints(min_length=1)]


def _json_integer(cls: object, value: object) -> object:
    """JSON Schema's integer: an int, or a number with no fraction (``515.0``); never a
    string or a boolean (pydantic's strict mode refuses ``515.0``, its lax mode ``"515"``
    too little)."""
    if value is None:  # optional fields: None stays None, the field's type decides
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("must be an integer")
    return value


def _json_time(value: object) -> object:
    """A time must be an RFC 3339 string (pydantic would also take a number of seconds)."""
    if value is not None and not isinstance(value, str):
        raise ValueError("must be an RFC 3339 date-time string")
    return value


#: What every time field of a request takes (also in the OpenAPI document).
TIME_RANGE = (
    "an RFC 3339 date-time with its offset, inside years 1 to 9999 once in UTC "
    "(0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z: 0001-01-01T00:00:00+01:00 "
    "is before that and refused)"
)
Time = Annotated[AwareDatetime, BeforeValidator(_json_time), Field(description=TIME_RANGE)]


def _finite_json(value: object, name: str = "value") -> object:
    """Refuse a number the JSON text spelled past float's range (``1e400`` parses as
    infinity): stored, it would come back as ``null`` (JSON has no infinity); a key
    holding a lone surrogate (``"\\ud800"``: pydantic's JSON dump of the body turned a
    top-level one into three U+FFFD and failed on a deeper one with the codec's text);
    and nesting past the memory's limit here, by name (past 255 levels pydantic's dump
    of the body failed first, with "Circular reference detected (depth exceeded)").
    O(size of the value)."""
    stack: list[tuple[object, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, float) and math.isnan(item):
            raise ValueError("NaN is not JSON (numbers must be finite)")
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(
                "numbers must be finite (Infinity is not JSON, nor is a number too large "
                "for a double)"
            )
        if isinstance(item, (dict, list)) and depth > MAX_VALUE_DEPTH + 1:
            raise ValueError(f"nested deeper than {MAX_VALUE_DEPTH} levels")
        if isinstance(item, dict):
            for key in item:
                if not key.isascii():
                    try:
                        key.encode("utf-8")
                    except UnicodeEncodeError:  # the library's message (_json.JsonObject)
                        raise ValueError(f"{name} has a key that holds a lone surrogate") from None
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return value


#: A JSON object whose numbers are all finite.
FiniteObject = Annotated[dict[str, Any], AfterValidator(_finite_json)]

_SCALAR: list[dict[str, Any]] = [
    {"type": "string"},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
]
#: The JSON schema of a payload filter (``where``), as ``actormem._json.compile_where``
#: checks it: dotted paths of word characters and "-" to conditions, each a JSON value
#: to equal (an object without "$" keys compares field by field) or an object of
#: operators; ordering operators take a scalar.
WHERE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {
            "type": "object",
            "propertyNames": {"pattern": r"^[\w-]+(?:\.[\w-]+)*\Z"},
            "additionalProperties": {
                "anyOf": [
                    *_SCALAR,
                    {"type": "array"},
                    {"type": "object", "propertyNames": {"not": {"pattern": r"^\$"}}},
                    {
                        "type": "object",
                        "minProperties": 1,
                        "additionalProperties": False,
                        "properties": {
                            "$eq": {},
                            "$ne": {},
                            **{op: {"anyOf": _SCALAR} for op in ("$gt", "$gte", "$lt", "$lte")},
                        },
                    },
                ]
            },
        },
        {"type": "null"},
    ],
    "description": "payload filter: dotted paths to values or {$eq|$ne|$gt|$gte|$lt|$lte}",
}
Where = Annotated[
    Annotated[dict[str, Any], AfterValidator(partial(_finite_json, name="where"))] | None,
    WithJsonSchema(WHERE_SCHEMA),
]
# Unknown keys are refused, so a typo never drops a field silently. Scalars are strict
# (no "1" for 1, no 1 for true); ids and times are parsed from their JSON strings.
_STRICT = ConfigDict(extra="forbid")


class EntryIn(BaseModel):
    """A memory entry to store; only ``category`` and ``memory`` are required.

    Field names and meanings are those of :class:`~actormem.MemoryEntry`; a missing ``id``
    gets a new random UUID, a missing ``created_at`` the server's current time.
    """

    model_config = _STRICT

    id: uuid.UUID | None = Field(None, description="null or absent: a new random UUID")
    category: Category  # type: ignore[valid-type]
    memory: Annotated[str, Strict(), StringConstraints(max_length=MAX_MEMORY_CHARS)]
    tags: list[NonEmpty] = []
    created_at: Time | None = None
    relevance: Annotated[float, Strict(), Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    access_count: Annotated[int, Field(ge=0, le=MAX_JSON_INT)] = 0
    validated: Annotated[bool, Strict()] = False
    namespace: list[NonEmpty] = []
    last_accessed: Time | None = None
    key: (
        Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)] | None
    ) = None
    value: FiniteObject | None = None
    updated_at: Time | None = Field(None, description=f"null or absent: created_at; {TIME_RANGE}")
    ttl: Annotated[float, Strict(), Field(gt=0, le=MAX_TTL, allow_inf_nan=False)] | None = None
    expires_at: Time | None = None

    _integer = field_validator("access_count", mode="before")(_json_integer)


class EntryOut(BaseModel):
    """A stored entry, every field present (``entry_to_json``'s shape)."""

    id: uuid.UUID
    category: Category  # type: ignore[valid-type]
    memory: str
    tags: list[str]
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    relevance: float
    access_count: int
    validated: bool
    namespace: list[str]
    last_accessed: str | None = Field(json_schema_extra={"format": "date-time"})
    key: str | None
    value: dict[str, Any] | None
    updated_at: str = Field(json_schema_extra={"format": "date-time"})
    ttl: float | None
    expires_at: str | None = Field(json_schema_extra={"format": "date-time"})


class StoreManyIn(BaseModel):
    """Entries to store in order, as one request (see ``Memory.store_many``)."""

    model_config = _STRICT

    entries: Annotated[list[EntryIn], Field(max_length=MAX_BATCH_ENTRIES)]


class StoredOut(BaseModel):
    """The id of the stored entry (useful when the request left it out), and on a node
    of a replicated memory the log seq of the store (pass it as ``min_seq`` to a
    retrieve on another node to read it there)."""

    id: uuid.UUID
    seq: int | None = None


class StoredManyOut(BaseModel):
    """How many entries were stored, and their ids in request order."""

    stored: int
    ids: list[uuid.UUID]


class DeletedOut(BaseModel):
    """The entry was there and is now deleted (an unknown id is a 404 instead)."""

    deleted: Literal[True]


class RetrieveIn(BaseModel):
    """A retrieve: the query text, how many results, and the filters of ``Memory.retrieve``.

    ``namespace``: keep entries under these segments; ``category``: one category or a
    non-empty list (any of them); ``tags``: keep entries carrying every one of them;
    ``min_score``, ``min_matched``: only entries that match (``docs/retrieval.md``,
    "Thresholds"); ``created_after`` (inclusive) / ``created_before`` (exclusive): a
    time range on ``created_at``.
    """

    model_config = _STRICT

    query: Annotated[str, Strict(), StringConstraints(max_length=MAX_QUERY_CHARS)]
    limit: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = 10
    namespace: list[NonEmpty] | None = None
    category: Category | Annotated[list[Category], Field(min_length=1)] | None = None  # type: ignore[valid-type]
    tags: list[NonEmpty] | None = None
    where: Where = None
    refresh_ttl: Annotated[bool, Strict()] = False
    min_score: Annotated[float, Strict(), Field(allow_inf_nan=False)] | None = None
    min_matched: Annotated[int, Field(ge=0, le=MAX_JSON_INT)] = 0
    created_after: Time | None = None
    created_before: Time | None = None
    min_seq: Annotated[int, Field(ge=0)] | None = None

    _integer = field_validator("limit", "min_matched", "min_seq", mode="before")(_json_integer)


class ListIn(BaseModel):
    """A listing without a query (``Memory.list_entries``): newest ``updated_at`` first."""

    model_config = _STRICT

    namespace: list[NonEmpty] | None = None
    where: Where = None
    category: Category | Annotated[list[Category], Field(min_length=1)] | None = None  # type: ignore[valid-type]
    tags: list[NonEmpty] | None = None
    limit: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = 10
    offset: Annotated[int, Field(ge=0, le=MAX_JSON_INT)] = 0
    refresh_ttl: Annotated[bool, Strict()] = False

    _integer = field_validator("limit", "offset", mode="before")(_json_integer)


class NamespacesIn(BaseModel):
    """A listing of namespaces (``Memory.list_namespaces``); ``"*"`` matches one segment."""

    model_config = _STRICT

    prefix: list[NonEmpty] | None = None
    suffix: list[NonEmpty] | None = None
    max_depth: Annotated[int, Field(ge=1, le=MAX_JSON_INT)] | None = None
    limit: Annotated[int, Field(ge=0, le=MAX_LIMIT)] = 100
    offset: Annotated[int, Field(ge=0, le=MAX_JSON_INT)] = 0

    _integer = field_validator("max_depth", "limit", "offset", mode="before")(_json_integer)


class KeyIn(BaseModel):
    """An entry named by its ``(namespace, key)``."""

    model_config = _STRICT

    namespace: list[NonEmpty] = []
    key: Annotated[str, Strict(), StringConstraints(min_length=1, max_length=MAX_KEY_CHARS)]
    refresh_ttl: Annotated[bool, Strict()] = False


class SweptOut(BaseModel):
    """How many expired entries a sweep removed."""

    removed: int


class NamespacesOut(BaseModel):
    """Namespaces holding at least one entry, sorted."""

    namespaces: list[list[str]]


class RetrieveOut(BaseModel):
    """Entries best first."""

    entries: list[EntryOut]


class ScoredOut(BaseModel):
    """An entry and its score (higher is better; the scale depends on the scorer)."""

    entry: EntryOut
    score: float


class ScoredResultsOut(BaseModel):
    """Scored entries, best first."""

    results: list[ScoredOut]


class ConsolidationOut(BaseModel):
    """What a consolidation did (``ConsolidationStats``)."""

    entries_before: int
    entries_after: int
    pruned: int
    merged: int
    evicted: int
    bytes_saved: int


class StatisticsOut(BaseModel):
    """The memory's counters (``MemoryStatistics``)."""

    entries: int
    capacity: int | None
    stores: int
    upserts: int
    deletes: int
    evictions: int
    pruned: int
    merged: int
    consolidations: int
    retrieves: int
    access_updates: int
    queue_depth: int
    queue_capacity: int
    snapshot_version: int
    live_snapshots: int
    retained_versions: int
    expired: int
    ttl_refreshes: int
    log_applied_seq: int | None = None
    log_stale_seconds: float | None = None


class RemovalsOut(BaseModel):
    """Removal reports numbered above ``after``: ``[number, id, cause]`` each, oldest
    first. ``first`` is the oldest number still kept: ``after + 1 < first`` means reports
    were dropped before they were read."""

    total: int
    first: int
    removals: list[list[int | str]]  # [number, id, cause] each


class LenOut(BaseModel):
    """Entries in the latest published snapshot."""

    entries: int


class Problem(BaseModel):
    """An error, as an RFC 9457 problem document (``application/problem+json``)."""

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None
