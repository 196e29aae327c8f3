"""The value types of a memory: :class:`MemoryCategory`, :class:`MemoryEntry`, :class:`ScoredEntry`.

The record shape follows loopctl's ``MemoryEntry`` (id, category, memory, tags, created_at,
relevance, access_count, validated), plus a ``namespace`` path and a ``last_accessed``
timestamp. Entries are immutable: every builder returns a new entry, and the engine hands
out new entries when it updates access bookkeeping.
"""

from __future__ import annotations

import enum
import math
import os
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import attrs

from ._errors import InvalidEntryError, InvalidQueryError
from ._json import JsonObject, freeze_json, text_at_paths
from ._util import Final, sequence_of

__all__ = [
    "MAX_KEY_CHARS",
    "MAX_MEMORY_CHARS",
    "MAX_NAMESPACE_DEPTH",
    "MAX_SEGMENT_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MemoryCategory",
    "MemoryEntry",
    "ScoredEntry",
    "check_entry_batch",
    "check_lookup_key",
]

#: Longest accepted ``MemoryEntry.memory``, in code points. Memory is for gist, not
#: archives (loopctl cuts trajectory parts to 500 characters); a larger text is a bug in
#: the caller more often than a wish, and one huge entry would stall every retrieve.
MAX_MEMORY_CHARS = 100_000
#: Longest accepted ``MemoryEntry.key``, in code points.
MAX_KEY_CHARS = 4096
#: Most tags an entry may carry (after duplicates are dropped). Each distinct tag is
#: indexed for the tag filters on the owner's task (25-50 µs a new tag): one store with
#: 400,000 tags held a server's every request for 15 s.
MAX_TAGS = 256
#: Longest accepted tag, in code points.
MAX_TAG_CHARS = 1024
#: Most segments of an entry's ``namespace``.
MAX_NAMESPACE_DEPTH = 64
#: Longest accepted namespace segment, in code points.
MAX_SEGMENT_CHARS = 1024
#: Longest accepted ``MemoryEntry.ttl``, in seconds: 100 years. The owner computes
#: ``now + ttl``; an unbounded ttl (1e300) would overflow ``datetime`` in the owner.
MAX_TTL = 100 * 365.25 * 86400


class MemoryCategory(enum.Enum):
    """What kind of knowledge an entry holds (loopctl's six categories)."""

    #: What tools did; the agent hooks write these after each successful tool call.
    TRAJECTORY = "trajectory"
    #: Generalized knowledge drawn from experience.
    INSIGHT = "insight"
    #: An error signature and its fix.
    ERROR_PATTERN = "error_pattern"
    #: A plan that worked.
    STRATEGY = "strategy"
    #: Stable knowledge.
    FACT = "fact"
    #: Scratch memory for the session.
    WORKING = "working"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _check_text(kind: str, value: object) -> str:
    if type(value) is not str:
        raise TypeError(f"{kind} must be str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEntryError(
            f"{kind} holds a lone surrogate and cannot be encoded as UTF-8"
        ) from None
    return value


def _convert_tags(value: Any) -> tuple[str, ...]:
    items = sequence_of(value, "tags", "str")
    seen: dict[str, None] = {}
    for tag in items:
        _check_text("tag", tag)
        if not tag:
            raise InvalidEntryError("a tag must not be empty")
        if len(tag) > MAX_TAG_CHARS:
            raise InvalidEntryError(
                f"a tag is {len(tag)} code points long; the limit is {MAX_TAG_CHARS}"
            )
        seen[tag] = None
    if len(seen) > MAX_TAGS:
        raise InvalidEntryError(f"{len(seen)} tags; the limit is {MAX_TAGS} an entry")
    return tuple(seen)


def _convert_namespace(value: Any) -> tuple[str, ...]:
    items = sequence_of(value, "namespace", "str segments")
    for segment in items:
        _check_text("namespace segment", segment)
        if not segment:
            raise InvalidEntryError("a namespace segment must not be empty")
        if len(segment) > MAX_SEGMENT_CHARS:
            raise InvalidEntryError(
                f"a namespace segment is {len(segment)} code points long; the limit is "
                f"{MAX_SEGMENT_CHARS}"
            )
    if len(items) > MAX_NAMESPACE_DEPTH:
        raise InvalidEntryError(
            f"namespace has {len(items)} segments; the limit is {MAX_NAMESPACE_DEPTH}"
        )
    return items


_astimezone = datetime.astimezone


def _convert_time(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, not {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidEntryError("datetimes must be timezone-aware (naive datetime given)")
    try:
        out = _astimezone(value, UTC)  # datetime's own: a subclass may override it
    except OverflowError:  # 0001-01-01 at +05:00 is before year 1 in UTC
        raise InvalidEntryError(
            f"datetime {value.isoformat()} is outside the years 1-9999 once in UTC"
        ) from None
    if type(out) is not datetime or out.tzinfo is not UTC:
        # A subclass (``astimezone`` hands one already in UTC back as is): rebuilt as an
        # exact datetime, as a stored entry is out of the collector's sight
        # (``state._UNTRACK_ENTRIES``) and must hold nothing whose ``__dict__`` could
        # refer back to it (a cycle that would never be freed).
        out = datetime(
            out.year, out.month, out.day, out.hour, out.minute, out.second, out.microsecond, UTC
        )
    return out


def _convert_optional_time(value: Any) -> datetime | None:
    return None if value is None else _convert_time(value)


def _as_float(value: int | float) -> float:
    """``float(value)``, an int too large for a float (OverflowError) made infinite with its
    sign: the callers' range checks then refuse it with their own error. O(1)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _convert_relevance(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"relevance must be a float, not {type(value).__name__}")
    number = _as_float(value)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise InvalidEntryError(f"relevance must be a finite number in [0, 1], got {number!r}")
    return number


def _check_memory(instance: object, attribute: object, value: str) -> None:
    _check_text("memory", value)
    if len(value) > MAX_MEMORY_CHARS:
        raise InvalidEntryError(
            f"memory is {len(value)} code points long; the limit is {MAX_MEMORY_CHARS}"
        )


def memory_text_ok(value: object) -> bool:
    """Whether the constructor takes ``value`` as an entry's ``memory`` (a str, encodable
    as UTF-8, at most :data:`MAX_MEMORY_CHARS` code points). O(len)."""
    try:
        _check_memory(None, None, value)  # type: ignore[arg-type]
    except (TypeError, InvalidEntryError):
        return False
    return True


def namespace_ok(segments: tuple[str, ...]) -> bool:
    """Whether the constructor takes ``segments`` (a tuple) as an entry's ``namespace``
    as it is (non-empty str segments, each encodable as UTF-8). O(total length)."""
    if type(segments) is not tuple:
        return False
    try:
        _convert_namespace(segments)
    except (TypeError, InvalidEntryError):
        return False
    return True


def _convert_key(value: Any) -> str | None:
    if value is None:
        return None
    _check_text("key", value)
    if not value:
        raise InvalidEntryError("key must not be empty (use None for no key)")
    if len(value) > MAX_KEY_CHARS:
        raise InvalidEntryError(
            f"key is {len(value)} code points long; the limit is {MAX_KEY_CHARS}"
        )
    return str(value)


def check_lookup_key(namespace: Any, key: Any) -> tuple[str, ...]:
    """The ``namespace`` of a lookup by ``(namespace, key)`` (``get_by_key``,
    ``delete_key``) as a tuple, checked as an entry's namespace and key are: a pair no
    entry can hold is refused, not looked up (so :class:`~actormem.Memory` and the HTTP
    clients, which check before sending, refuse the same pairs with the same messages).
    O(total length).

    Raises:
        TypeError: ``key`` is not a str, ``namespace`` not a sequence of str.
        InvalidQueryError: An empty key or segment, a key longer than
            :data:`MAX_KEY_CHARS`, a segment longer than :data:`MAX_SEGMENT_CHARS`, more
            than :data:`MAX_NAMESPACE_DEPTH` segments, a lone surrogate (the entry's
            message, e.g. "key is 5000 code points long; the limit is 4096").
    """
    if type(key) is not str:
        raise TypeError(f"key must be a str, not {type(key).__name__}")
    ns = sequence_of(namespace, "namespace", "str segments")
    for segment in ns:
        if type(segment) is not str:
            raise TypeError(f"namespace segments must be str, not {type(segment).__name__}")
    try:
        _convert_namespace(ns)
        _convert_key(key)
    except InvalidEntryError as exc:
        raise InvalidQueryError(str(exc)) from None
    return ns


def check_entry_batch(entries: Iterable[MemoryEntry]) -> tuple[MemoryEntry, ...]:
    """``tuple(entries)`` for ``store_many``, checked: every item a :class:`MemoryEntry`
    (so :class:`~actormem.Memory` and the HTTP clients, which check before sending,
    refuse the same batches with the same messages). Reads ``entries`` once. O(m).

    Raises:
        TypeError: ``entries`` is one entry, a str or bytes, or not iterable; an item
            is not a :class:`MemoryEntry` ("store_many() entries[2] is a str, ...").
    """
    if isinstance(entries, (MemoryEntry, str, bytes)):
        raise TypeError(
            f"store_many() takes an iterable of MemoryEntry, not one {type(entries).__name__}"
        )
    try:
        batch = tuple(entries)
    except TypeError:
        raise TypeError(
            f"store_many() takes an iterable of MemoryEntry, not {type(entries).__name__}"
        ) from None
    for index, entry in enumerate(batch):
        if not isinstance(entry, MemoryEntry):
            raise TypeError(
                f"store_many() entries[{index}] is a {type(entry).__name__}, not a MemoryEntry"
            )
        check_entry_built(entry, f"store_many() entries[{index}]")
    return batch


def check_entry_built(entry: MemoryEntry, what: str = "store()'s entry") -> None:
    """TypeError for a :class:`MemoryEntry` never built: ``MemoryEntry.__new__`` alone, as
    a forged pickle without state makes (its fields unset: the owner task would raise
    on it, which breaks the memory). Every other entry went through the constructor
    (``__setstate__`` too), which sets every field or none. O(1)."""
    try:
        entry.expires_at  # noqa: B018 - a slot never set raises AttributeError
    except AttributeError:
        raise TypeError(f"{what} is a MemoryEntry that was never built (no fields)") from None


def _convert_ttl(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"ttl must be a number of seconds or None, not {type(value).__name__}")
    number = _as_float(value)
    if not (math.isfinite(number) and 0.0 < number <= MAX_TTL):
        raise InvalidEntryError(
            f"ttl must be a number of seconds > 0 and <= {MAX_TTL:.0f} (100 years), got {number!r}"
        )
    return number


def _check_category(instance: object, attribute: object, value: MemoryCategory) -> None:
    if not isinstance(value, MemoryCategory):
        raise TypeError(f"category must be a MemoryCategory, not {type(value).__name__}")


#: A version 4 UUID's fixed bits: the variant (RFC 4122) and the version, as
#: ``uuid.uuid4()`` sets them on 128 random bits.
_V4_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_V4_SET = (0x8000 << 48) | (4 << 76)


def _new_id() -> int:
    """The int of a fresh random UUID (version 4), as ``uuid.uuid4().int`` without
    the ``UUID`` object. O(1) amortized (:data:`_ID_POOL`)."""
    if _ID_POOL:
        try:
            return _ids.pop()
        except IndexError:
            return _refill_ids()
    return (int.from_bytes(os.urandom(16), "big") & _V4_CLEAR) | _V4_SET


#: :func:`_new_id` takes its random bits from ``os.urandom`` this many ids at a time
#: (one system call for 64 ids instead of one each: the main job makes an id per
#: store), keeping the ids not yet handed out in :data:`_ids`; a forked child empties
#: it (so a parent and its child never hand out the same ids). The same distribution
#: of ids (``os.urandom``'s bits, the version 4 bits set). 0: one ``os.urandom(16)``
#: per id (the path before it).
_ID_POOL = 64
_ids: list[int] = []


def _refill_ids() -> int:
    """A fresh id, :data:`_ids` refilled with :data:`_ID_POOL` - 1 more. Another thread
    may take from or add to the pool meanwhile (each ``list`` call is atomic): every
    id made is handed out once at most."""
    raw = os.urandom(16 * _ID_POOL)
    take = int.from_bytes
    fresh = [
        (take(raw[at : at + 16], "big") & _V4_CLEAR) | _V4_SET for at in range(0, len(raw), 16)
    ]
    mine = fresh.pop()
    _ids.extend(fresh)
    return mine


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_ids.clear)


def _convert_id(value: uuid.UUID) -> int:
    """The UUID's 128-bit int, which is all the entry keeps (a ``UUID`` object beside
    it took 56 bytes and a garbage-collected object per entry). An int in range is
    taken as is: ``attrs.evolve`` passes the kept int back in."""
    if isinstance(value, uuid.UUID):
        ident = value.int
        if type(ident) is int:
            return ident
        if isinstance(ident, bool) or not isinstance(ident, int):  # a subclass's own int
            raise TypeError(f"id.int must be an int, not {type(ident).__name__}")
        return int.__int__(ident)  # exact (see __attrs_post_init__)
    if type(value) is int:
        if not 0 <= value < 1 << 128:
            raise InvalidEntryError(f"an int id must be in [0, 2**128), got {value}")
        return value
    raise TypeError(f"id must be a uuid.UUID, not {type(value).__name__}")


def _uuid(value: int) -> uuid.UUID:
    """``uuid.UUID(int=value)`` for an int known to be in range, without re-checking
    it. O(1)."""
    u = _new(_UUID)
    _set(u, "int", value)
    _set(u, "is_safe", _UNKNOWN)
    return u


_new, _set, _UUID, _UNKNOWN = object.__new__, object.__setattr__, uuid.UUID, uuid.SafeUUID.unknown


def _check_count(instance: object, attribute: object, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"access_count must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidEntryError(f"access_count must be >= 0, got {value}")


def _check_bool(instance: object, attribute: object, value: object) -> None:
    if type(value) is not bool:
        raise TypeError(f"validated must be a bool, not {type(value).__name__}")


@attrs.frozen(kw_only=True, slots=True, weakref_slot=False, repr=False)
class MemoryEntry(metaclass=Final):
    """One remembered item. Immutable; compare and hash by value.

    Build one with :meth:`new` and the ``with_*`` builders::

        MemoryEntry.new(MemoryCategory.FACT, "deploy uses the blue cluster").with_tag("infra")

    Attributes:
        id: Unique id, a random UUID (version 4) by default. Storing an entry whose id is
            already in the memory replaces the stored one (upsert). The entry keeps the
            UUID's 128-bit int (also accepted as ``id``), and ``id`` reads a new ``UUID``
            equal to the one given. (So ``attrs.asdict(entry)`` lists it as ``_id``, the
            int: :func:`~actormem.entry_to_json` gives every field, ``id`` a UUID string,
            and :func:`~actormem.entry_from_json` reads that back.)
        category: A :class:`MemoryCategory`.
        memory: The payload text, at most :data:`MAX_MEMORY_CHARS` code points, valid UTF-8.
        tags: Tuple of non-empty tags, duplicates dropped (first occurrence kept); at
            most :data:`MAX_TAGS` of them, each at most :data:`MAX_TAG_CHARS` code points.
        created_at: Timezone-aware datetime, normalised to UTC; defaults to now.
        relevance: Float in [0, 1]; 1.0 from :meth:`new`. Weighs scoring and eviction.
        access_count: How many retrieves returned this entry (>= 0). Maintained by the
            engine; the value you store is the starting count.
        validated: Higher trust: never pruned, evicted only when no unvalidated entry is left.
        namespace: Tuple of non-empty path segments, ``()`` for the root; at most
            :data:`MAX_NAMESPACE_DEPTH` of them, each at most :data:`MAX_SEGMENT_CHARS`
            code points. Retrieve filters match it segment by segment (``("t", "acme")``
            never matches ``("t", "acme-corp")``).
        last_accessed: When a retrieve last returned this entry (UTC), or ``None``.
        key: An optional name, unique within the namespace: storing an entry with the
            ``(namespace, key)`` of a live entry replaces that entry whatever the ids
            (the stored entry takes the replaced one's id and ``created_at``). At most
            :data:`MAX_KEY_CHARS` code points, not empty.
        value: An optional JSON object payload (a :class:`~actormem.JsonObject`, frozen
            from any mapping), at most :data:`~actormem.MAX_VALUE_BYTES` bytes as JSON.
            Payload filters (``where=``) read it; :meth:`from_value` derives the indexed
            text (``memory``) from chosen fields of it.
        updated_at: When this version was written (UTC); defaults to ``created_at``, and
            one earlier than ``created_at`` is raised to it. An upsert keeps
            ``created_at`` and takes the new entry's ``updated_at``. Listings order by
            it, newest first.
        ttl: Time to live in seconds, or ``None``: the owner sets ``expires_at`` to the
            time it stores the entry plus ``ttl`` (unless ``expires_at`` is given), and a
            read asked to refresh it (``refresh_ttl=True``) pushes it to the read's time
            plus ``ttl``.
        expires_at: When the entry expires (UTC), or ``None`` for never. An expired entry
            is never returned, and the owner removes it (``on_remove`` cause
            ``"expired"``).

    Raises:
        TypeError: A field has the wrong type (e.g. a non-str memory or tag).
        InvalidEntryError: A field is out of range: NaN, infinite or out-of-[0, 1]
            relevance; negative access count; empty tag or namespace segment; naive
            datetime; text longer than :data:`MAX_MEMORY_CHARS` or not encodable as UTF-8;
            an empty key; a payload that is not JSON or too large; a ttl that is not a
            positive finite number.
    """

    category: MemoryCategory = attrs.field(validator=_check_category)
    memory: str = attrs.field(validator=_check_memory)
    #: The id's 128-bit int (the ``id`` property makes the UUID).
    _id: int = attrs.field(factory=_new_id, converter=_convert_id, alias="id")
    tags: tuple[str, ...] = attrs.field(default=(), converter=_convert_tags)
    created_at: datetime = attrs.field(factory=_utc_now, converter=_convert_time)
    relevance: float = attrs.field(default=1.0, converter=_convert_relevance)
    access_count: int = attrs.field(default=0, validator=_check_count)
    validated: bool = attrs.field(default=False, validator=_check_bool)
    namespace: tuple[str, ...] = attrs.field(default=(), converter=_convert_namespace)
    last_accessed: datetime | None = attrs.field(default=None, converter=_convert_optional_time)
    key: str | None = attrs.field(default=None, converter=_convert_key)
    value: JsonObject | None = attrs.field(default=None, converter=freeze_json)
    updated_at: datetime = attrs.field(
        default=None,  # set to created_at after init
        converter=_convert_optional_time,
    )
    ttl: float | None = attrs.field(default=None, converter=_convert_ttl)
    expires_at: datetime | None = attrs.field(default=None, converter=_convert_optional_time)

    @property
    def id(self) -> uuid.UUID:
        """The entry's id, a :class:`uuid.UUID` (made from the kept int on each read). O(1)."""
        return _uuid(self._id)

    def __repr__(self) -> str:
        """As the attrs repr would be with an ``id`` field. O(fields)."""
        parts = ", ".join(
            f"id={self.id!r}" if name == "_id" else f"{name}={getattr(self, name)!r}"
            for name in _ENTRY_FIELDS
        )
        return f"MemoryEntry({parts})"

    def __getstate__(self) -> dict[str, object]:
        """Pickle state: each field by its name, the id as its kept int. O(fields)."""
        return {name: getattr(self, name) for name in _ENTRY_FIELDS}

    def __setstate__(self, state: dict[str, object] | tuple[object, ...]) -> None:
        """Restore pickle state, also of an entry pickled before the id was kept as an
        int (its state has ``id``, a ``UUID``, where today's has ``_id``). O(fields)."""
        if isinstance(state, tuple):  # attrs' older tuple form: the fields in order
            if len(state) != len(_ENTRY_FIELDS):
                raise TypeError(f"not the state of a MemoryEntry: {len(state)} fields")
            state = dict(zip(_ENTRY_FIELDS, state, strict=True))
        elif isinstance(state, dict):
            state = dict(state)
        else:
            raise TypeError(f"not the state of a MemoryEntry: a {type(state).__name__}")
        if "_id" not in state and "id" in state:
            state["_id"] = _convert_id(state.pop("id"))  # type: ignore[arg-type]
        if set(state) != set(_ENTRY_FIELDS):
            raise TypeError(f"not the state of a MemoryEntry: fields {sorted(state)}")
        # Every field through the constructor's converters and validators: a pickle is
        # outside data, and the owner's store (the compiled EntryColumns.put) refuses a
        # text with a lone surrogate, a non-float relevance, a non-bool validated... by
        # raising in the owner task, which breaks the memory. So such a state is refused
        # here (TypeError, InvalidEntryError), as the constructor refuses it.
        fields: dict[str, Any] = {("id" if n == "_id" else n): v for n, v in state.items()}
        checked = type(self)(**fields)
        for name in _ENTRY_FIELDS:
            object.__setattr__(self, name, getattr(checked, name))

    def __attrs_post_init__(self) -> None:
        if type(self.access_count) is not int:  # an int subclass (checked): exact, as
            # nothing a stored entry holds may have a __dict__ (see _convert_time)
            object.__setattr__(self, "access_count", int.__int__(self.access_count))
        if self.updated_at is None or self.updated_at < self.created_at:
            # Never before created_at (so ``evolve(created_at=later)`` moves both).
            object.__setattr__(self, "updated_at", self.created_at)

    @classmethod
    def from_value(
        cls,
        category: MemoryCategory,
        value: Any,
        *,
        index: tuple[str, ...] | list[str] | None = None,
        **fields: Any,
    ) -> MemoryEntry:
        """An entry whose payload is ``value`` and whose indexed text (``memory``) is
        derived from it: the leaves at the paths ``index`` (dotted keys, ``[i]``,
        ``[*]``), one per line; every leaf when ``index`` is None.

        ``fields`` are the other constructor arguments (``key=``, ``namespace=``...).
        O(size of the value).

        Raises:
            TypeError, InvalidEntryError: As the constructor (e.g. a derived text longer
                than :data:`MAX_MEMORY_CHARS`).
            InvalidQueryError: A malformed path in ``index``.
        """
        frozen = freeze_json(value)
        if frozen is None:
            raise TypeError("from_value() needs a JSON object, not None")
        return cls(category=category, memory=text_at_paths(frozen, index), value=frozen, **fields)

    @classmethod
    def new(cls, category: MemoryCategory, memory: str) -> MemoryEntry:
        """A fresh entry: new UUID4 id, created now (UTC), relevance 1.0, no tags.

        Raises:
            TypeError, InvalidEntryError: As for the constructor.
        """
        return cls(category=category, memory=memory)

    def with_tag(self, tag: str) -> MemoryEntry:
        """A copy with ``tag`` appended (no change if it is already there)."""
        return attrs.evolve(self, tags=(*self.tags, tag))

    def with_tags(self, *tags: str) -> MemoryEntry:
        """A copy with each of ``tags`` appended in order (duplicates dropped)."""
        return attrs.evolve(self, tags=(*self.tags, *tags))

    def with_relevance(self, relevance: float) -> MemoryEntry:
        """A copy with ``relevance`` (a float in [0, 1]) replaced."""
        return attrs.evolve(self, relevance=relevance)

    def with_namespace(self, *segments: str) -> MemoryEntry:
        """A copy whose namespace is ``segments`` (``()`` for the root)."""
        return attrs.evolve(self, namespace=segments)

    def as_validated(self) -> MemoryEntry:
        """A copy marked validated (loopctl's ``.validated()``)."""
        return attrs.evolve(self, validated=True)


@attrs.frozen(kw_only=True, slots=True)
class ScoredEntry(metaclass=Final):
    """A retrieve result with its score.

    Attributes:
        entry: The :class:`MemoryEntry` as of the snapshot the retrieve read.
        score: The scorer's score, a float; higher is better. Its scale depends on the
            scorer (:class:`~actormem.WordOverlapScorer` gives values in [0.1, 1.3]).
    """

    entry: MemoryEntry
    score: float


_ENTRY_FIELDS = tuple(a.name for a in attrs.fields(MemoryEntry))


#: :func:`with_access` copies the fields in straight-line code through the slots' own
#: setters (as :func:`entry_of_checked` does): ~1.8 us an entry instead of ~4 us for a
#: loop of ``getattr`` and ``object.__setattr__`` by name (three entries per main-job
#: retrieve). False: the loop (the path before it; equal entries).
_ACCESS_SETTERS = True


def with_access(
    entry: MemoryEntry, count: int, last: datetime | None, expires: datetime | None = None
) -> MemoryEntry:
    """``entry`` with ``access_count``, ``last_accessed`` and ``expires_at`` (when not
    None) replaced, without validation.

    For the engine's own bookkeeping only (the values come from its access chain, made
    from validated entries and its clock): ``attrs.evolve`` would re-run every field's
    validation, the whole text included, for each of a retrieve's results. O(fields).
    """
    if _ACCESS_SETTERS:
        new = _new(MemoryEntry)
        _s_category(new, entry.category)
        _s_memory(new, entry.memory)
        _s_id(new, entry._id)
        _s_tags(new, entry.tags)
        _s_created_at(new, entry.created_at)
        _s_relevance(new, entry.relevance)
        _s_access_count(new, count)
        _s_validated(new, entry.validated)
        _s_namespace(new, entry.namespace)
        _s_last_accessed(new, last)
        _s_key(new, entry.key)
        _s_value(new, entry.value)
        _s_updated_at(new, entry.updated_at)
        _s_ttl(new, entry.ttl)
        _s_expires_at(new, entry.expires_at if expires is None else expires)
        return new
    new = object.__new__(MemoryEntry)
    put = object.__setattr__  # the class is frozen
    for name in _ENTRY_FIELDS:
        put(new, name, getattr(entry, name))
    put(new, "access_count", count)
    put(new, "last_accessed", last)
    if expires is not None:
        put(new, "expires_at", expires)
    return new


def entry_of_checked(
    category: MemoryCategory,
    memory: str,
    ident: int,
    tags: tuple[str, ...],
    created_at: datetime,
    relevance: float,
    access_count: int,
    validated: bool,
    namespace: tuple[str, ...],
    last_accessed: datetime | None,
    key: str | None,
    value: JsonObject | None,
    updated_at: datetime,
    ttl: float | None,
    expires_at: datetime | None,
) -> MemoryEntry:
    """The entry of these fields, each already in the form the constructor would give
    it (``ident`` the id's int; datetimes in UTC; ``updated_at`` not before
    ``created_at``), without running the constructor's converters and validators.

    For a decoder that checked every field itself (``sqlite_format.decode_rows``: a
    stored row, read back at open, where the constructor's attrs machinery costs
    several µs a row); anything it has not checked must go through the constructor.
    O(1).
    """
    new = _new(MemoryEntry)
    _s_category(new, category)
    _s_memory(new, memory)
    _s_id(new, ident)
    _s_tags(new, tags)
    _s_created_at(new, created_at)
    _s_relevance(new, relevance)
    _s_access_count(new, access_count)
    _s_validated(new, validated)
    _s_namespace(new, namespace)
    _s_last_accessed(new, last_accessed)
    _s_key(new, key)
    _s_value(new, value)
    _s_updated_at(new, updated_at)
    _s_ttl(new, ttl)
    _s_expires_at(new, expires_at)
    return new


# The slots' own setters (their descriptors' ``__set__``), for entry_of_checked: a third
# cheaper than ``object.__setattr__`` by name, which looks the descriptor up each time.
(
    _s_category,
    _s_memory,
    _s_id,
    _s_tags,
    _s_created_at,
    _s_relevance,
    _s_access_count,
    _s_validated,
    _s_namespace,
    _s_last_accessed,
    _s_key,
    _s_value,
    _s_updated_at,
    _s_ttl,
    _s_expires_at,
) = (MemoryEntry.__dict__[name].__set__ for name in _ENTRY_FIELDS)
