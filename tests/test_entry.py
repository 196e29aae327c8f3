from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta, timezone

import attrs
import pytest

from actormem import MAX_MEMORY_CHARS, InvalidEntryError, MemoryCategory, MemoryEntry
from actormem._entry import with_access


def test_category_values() -> None:
    assert [c.value for c in MemoryCategory] == [
        "trajectory",
        "insight",
        "error_pattern",
        "strategy",
        "fact",
        "working",
    ]


def test_new_defaults() -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "deploy uses the blue cluster")
    assert e.relevance == 1.0
    assert e.access_count == 0
    assert not e.validated
    assert e.tags == ()
    assert e.namespace == ()
    assert e.last_accessed is None
    assert e.id.version == 4
    assert e.created_at.tzinfo is not None
    assert e.created_at.utcoffset() == timedelta(0)
    assert MemoryEntry.new(MemoryCategory.FACT, "x").id != e.id


def test_builders_return_new_entries() -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "x")
    f = e.with_tag("infra").with_tags("a", "infra", "b").with_relevance(0.25)
    g = f.with_namespace("t", "acme").as_validated()
    assert e.tags == ()
    assert f.tags == ("infra", "a", "b")
    assert f.relevance == 0.25
    assert g.namespace == ("t", "acme")
    assert g.validated
    assert not f.validated
    assert g.id == e.id


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -0.01, 1.0001, 2])
def test_bad_relevance(bad: float) -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "x")
    with pytest.raises(InvalidEntryError):
        e.with_relevance(bad)
    assert issubclass(InvalidEntryError, ValueError)


@pytest.mark.parametrize(
    ("kwargs", "exc"),
    [
        ({"memory": 5}, TypeError),
        ({"memory": b"x"}, TypeError),
        ({"memory": "x" * (MAX_MEMORY_CHARS + 1)}, InvalidEntryError),
        ({"memory": "bad \ud800 surrogate"}, InvalidEntryError),
        ({"tags": ["ok", 3]}, TypeError),
        ({"tags": "infra"}, TypeError),
        ({"tags": [""]}, InvalidEntryError),
        ({"namespace": ("t", "")}, InvalidEntryError),
        ({"namespace": "t"}, TypeError),
        ({"created_at": datetime(2026, 1, 1)}, InvalidEntryError),
        ({"created_at": "2026-01-01"}, TypeError),
        ({"access_count": -1}, InvalidEntryError),
        ({"validated": 1}, TypeError),
        ({"relevance": True}, TypeError),
        ({"id": "not-a-uuid"}, TypeError),
        ({"category": "fact"}, TypeError),
    ],
)
def test_invalid_fields(kwargs: dict[str, object], exc: type[Exception]) -> None:
    fields: dict[str, object] = {"category": MemoryCategory.FACT, "memory": "x"}
    fields.update(kwargs)
    with pytest.raises(exc):
        MemoryEntry(**fields)  # type: ignore[arg-type]


def test_limit_is_inclusive_and_times_normalised() -> None:
    MemoryEntry(category=MemoryCategory.FACT, memory="x" * MAX_MEMORY_CHARS)
    cet = timezone(timedelta(hours=1))
    e = MemoryEntry(
        category=MemoryCategory.FACT, memory="x", created_at=datetime(2026, 1, 1, 1, tzinfo=cet)
    )
    assert e.created_at == datetime(2026, 1, 1, tzinfo=UTC)
    assert e.created_at.tzinfo == UTC


def test_frozen_and_final() -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "x")
    with pytest.raises(AttributeError):
        e.memory = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):

        class Sub(MemoryEntry):  # type: ignore[misc]
            pass

    assert isinstance(e.id, uuid.UUID)


def test_with_access_equals_evolve_without_revalidating() -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "text").with_tags("a", "b")
    when = datetime(2026, 1, 2, tzinfo=UTC)
    fast = with_access(e, 7, when)
    slow = attrs.evolve(e, access_count=7, last_accessed=when)
    assert fast == slow
    assert hash(fast) == hash(slow)
    assert attrs.asdict(fast) == attrs.asdict(slow)
    assert (e.access_count, e.last_accessed) == (0, None)  # the original is untouched


def test_the_id_is_kept_as_its_int_and_read_as_an_equal_uuid() -> None:
    import pickle

    given = uuid.uuid4()
    when = datetime(2026, 1, 1, tzinfo=UTC)
    e = MemoryEntry(category=MemoryCategory.FACT, memory="x", id=given, created_at=when)
    assert type(e.id) is uuid.UUID
    assert e.id == given
    assert e.id.version == 4
    assert hash(e.id) == hash(given)
    assert str(e.id) == str(given)
    assert f"id={given!r}" in repr(e)
    assert type(getattr(e, "_id")) is int  # noqa: B009  (no UUID object kept)
    # The int form is taken too; attrs.evolve passes it back in.
    same = MemoryEntry(category=MemoryCategory.FACT, memory="x", id=given.int, created_at=when)
    assert same == e
    assert attrs.evolve(e, memory="y").id == given
    other = uuid.uuid4()
    assert attrs.evolve(e, id=other).id == other
    assert pickle.loads(pickle.dumps(e)) == e
    assert pickle.loads(pickle.dumps(e)).id == given
    for bad, exc in ((True, TypeError), (-1, InvalidEntryError), (1 << 128, InvalidEntryError)):
        with pytest.raises(exc):
            MemoryEntry(category=MemoryCategory.FACT, memory="x", id=bad)


def test_fresh_ids_are_random_version_4_uuids() -> None:
    from actormem._entry import _V4_CLEAR, _V4_SET

    ids = {MemoryEntry.new(MemoryCategory.FACT, "x").id for _ in range(200)}
    assert len(ids) == 200
    assert all(i.version == 4 and i.variant == uuid.RFC_4122 for i in ids)
    for _ in range(200):  # the masks change no bit uuid4() itself fixes
        x = uuid.uuid4().int
        assert (x & _V4_CLEAR) | _V4_SET == x


# An entry pickled by actormem at d9f9859, when the id was kept as a UUID field named
# ``id`` (MemoryEntry(category=FACT, memory="hello old", tags=("a",),
# id=UUID(int=12345), created_at=2026-01-02 UTC), pickle protocol 4).
_OLD_PICKLE = (
    "gASVhQEAAAAAAACMD2FjdG9ybWVtLl9lbnRyeZSMC01lbW9yeUVudHJ5lJOUKYGUfZQojAhjYXRlZ29y"
    "eZRoAIwOTWVtb3J5Q2F0ZWdvcnmUk5SMBGZhY3SUhZRSlIwGbWVtb3J5lIwJaGVsbG8gb2xklIwCaWSU"
    "jAR1dWlklIwEVVVJRJSTlCmBlH2UjANpbnSUTTkwc2KMBHRhZ3OUjAFhlIWUjApjcmVhdGVkX2F0lIwI"
    "ZGF0ZXRpbWWUjAhkYXRldGltZZSTlEMKB+oBAgAAAAAAAJRoGIwIdGltZXpvbmWUk5RoGIwJdGltZWRl"
    "bHRhlJOUSwBLAEsAh5RSlIWUUpSGlFKUjAlyZWxldmFuY2WURz/wAAAAAAAAjAxhY2Nlc3NfY291bnSU"
    "SwCMCXZhbGlkYXRlZJSJjAluYW1lc3BhY2WUKYwNbGFzdF9hY2Nlc3NlZJROjANrZXmUTowFdmFsdWWU"
    "TowKdXBkYXRlZF9hdJRoJYwDdHRslE6MCmV4cGlyZXNfYXSUTnViLg=="
)


def test_an_entry_pickled_before_the_int_id_loads() -> None:
    import base64
    import pickle

    entry = pickle.loads(base64.b64decode(_OLD_PICKLE))  # noqa: S301 - our own bytes
    assert entry.id == uuid.UUID(int=12345)
    assert entry.memory == "hello old"
    assert entry.tags == ("a",)
    same = MemoryEntry(
        category=MemoryCategory.FACT,
        memory="hello old",
        tags=("a",),
        id=uuid.UUID(int=12345),
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    )
    assert entry == same
    assert hash(entry) == hash(same)
    assert pickle.loads(pickle.dumps(entry)) == same  # noqa: S301


def test_a_foreign_pickle_state_is_refused() -> None:
    entry = MemoryEntry.new(MemoryCategory.FACT, "x")
    blank = object.__new__(MemoryEntry)
    with pytest.raises(TypeError, match="not the state of a MemoryEntry"):
        blank.__setstate__({"memory": "x"})
    assert entry.__getstate__()["_id"] == entry.id.int
