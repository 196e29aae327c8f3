"""Keys, JSON payloads, payload filters, listings, namespaces and TTL through the Memory
handle; persistence of the new fields (schema 2, the upgrade from schema 1, JSON Lines)."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import (
    MAX_VALUE_BYTES,
    InvalidEntryError,
    InvalidQueryError,
    JsonObject,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_memory,
)
from actormem._json import compile_where
from actormem._storage.jsonl import entry_from_json, entry_to_json
from actormem._storage.sqlite_format import CREATE_SCHEMA_V1, SCHEMA_VERSION

from .strategies import examples

FACT = MemoryCategory.FACT
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def mock_now() -> datetime:
    """A datetime clock that follows trio's (mock) clock."""
    return EPOCH + timedelta(seconds=trio.current_time())


def item(ns: tuple[str, ...], key: str, value: dict[str, object], **kw: object) -> MemoryEntry:
    return MemoryEntry.from_value(FACT, value, key=key, namespace=ns, **kw)


# ------------------------------------------------------------------ values


def test_json_object_is_frozen_hashable_and_exact() -> None:
    v = JsonObject({"b": [1, {"c": None}], "a": 1.5, "t": True})
    assert v["b"][1]["c"] is None
    assert isinstance(v["b"], tuple)
    assert v.thaw() == {"b": [1, {"c": None}], "a": 1.5, "t": True}
    assert list(v.thaw()) == ["b", "a", "t"]  # key order kept
    assert v == JsonObject({"t": True, "a": 1.5, "b": [1, {"c": None}]})
    assert hash(v) == hash(JsonObject({"t": True, "a": 1.5, "b": [1, {"c": None}]}))
    assert JsonObject({"n": 1}) != JsonObject({"n": 1.0})
    assert JsonObject({"n": 1}) != JsonObject({"n": True})
    assert JsonObject.from_json(v.to_json()) == v
    with pytest.raises(TypeError):
        v["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ({"x": float("nan")}, InvalidEntryError),
        ({"x": {1, 2}}, TypeError),
        ({1: "x"}, TypeError),
        ({"x": "a" * MAX_VALUE_BYTES}, InvalidEntryError),
    ],
)
def test_bad_payloads_are_refused(value: dict[object, object], error: type) -> None:
    with pytest.raises(error):
        MemoryEntry(category=FACT, memory="m", value=value)


def test_deep_payload_is_refused() -> None:
    deep: dict[str, object] = {}
    cur = deep
    for _ in range(100):
        cur["x"] = {}
        cur = cur["x"]  # type: ignore[assignment]
    with pytest.raises(InvalidEntryError, match="nested deeper"):
        JsonObject(deep)


def test_indexed_text_from_chosen_fields() -> None:
    value = {"title": "blue deploy", "body": {"text": "green"}, "tags": ["x", "y"], "n": 3}
    assert MemoryEntry.from_value(FACT, value, index=["title"]).memory == "blue deploy"
    assert MemoryEntry.from_value(FACT, value, index=["body.text", "tags[*]"]).memory == (
        "green\nx\ny"
    )
    assert MemoryEntry.from_value(FACT, value, index=["tags[-1]"]).memory == "y"
    assert MemoryEntry.from_value(FACT, value).memory == "blue deploy\ngreen\nx\ny\n3"
    with pytest.raises(InvalidQueryError):
        MemoryEntry.from_value(FACT, value, index=["a b"])


# ------------------------------------------------------------------ keys, filters


async def test_key_upsert_keeps_created_at_and_id() -> None:
    async with open_memory() as memory:
        first = item(("u",), "k", {"v": 1}, created_at=EPOCH)
        await memory.store(first)
        second = item(("u",), "k", {"v": 2}, created_at=EPOCH + timedelta(hours=1))
        await memory.store(second)  # another id, same (namespace, key)
        assert len(memory) == 1
        got = await memory.get_by_key(("u",), "k")
        assert got is not None
        assert got.id == first.id
        assert got.value == {"v": 2}
        assert got.created_at == EPOCH
        assert got.updated_at == EPOCH + timedelta(hours=1)
        assert await memory.get_by_key(("u", "x"), "k") is None
        assert await memory.delete_key(("u",), "k")
        assert not await memory.delete_key(("u",), "k")
        assert len(memory) == 0
        assert memory.statistics().upserts == 1


async def test_where_filters_on_retrieve_and_listing() -> None:
    async with open_memory() as memory:
        for i, (price, kind) in enumerate([(10, "a"), (20, "b"), (30, "a")]):
            await memory.store(
                item(
                    ("shop",),
                    f"i{i}",
                    {"price": price, "meta": {"kind": kind, "flag": i == 0}},
                    created_at=EPOCH + timedelta(minutes=i),
                )
            )
        await memory.store(
            MemoryEntry(
                category=FACT,
                memory="no payload",
                namespace=("shop",),
                created_at=EPOCH - timedelta(1),
            )
        )

        async def keys(**where: object) -> list[str | None]:
            entries = await memory.list_entries(("shop",), where=where, limit=10)
            return [e.key for e in entries]

        assert await keys() == ["i2", "i1", "i0", None]  # newest updated_at first
        assert await keys(price={"$gt": 15}) == ["i2", "i1"]
        assert await keys(price={"$gte": 20, "$lt": 30}) == ["i1"]
        assert await keys(price={"$ne": 20}) == ["i2", "i0"]
        assert await keys(**{"meta.kind": "a"}) == ["i2", "i0"]
        assert await keys(meta={"kind": "b"}) == ["i1"]
        assert await keys(**{"meta.flag": True}) == ["i0"]
        assert await keys(**{"meta.flag": 1}) == []  # booleans equal only booleans
        assert await keys(price={"$lt": float("inf")}) == ["i2", "i1", "i0"]
        assert await keys(price={"$eq": float("nan")}) == []
        page = await memory.list_entries(("shop",), limit=2, offset=1)
        assert [e.key for e in page] == ["i1", "i0"]
        hits = await memory.retrieve("blue", 10, where={"meta.kind": "a"})
        assert sorted(e.key or "" for e in hits) == ["i0", "i2"]
        with pytest.raises(InvalidQueryError, match="Invalid filter key"):
            await memory.retrieve("x", where={"a') OR 1=1 --": 1})
        with pytest.raises(InvalidQueryError, match="unknown operator"):
            await memory.list_entries(where={"price": {"$regex": "x"}})
        with pytest.raises(InvalidQueryError):
            await memory.list_entries(limit=-1)


async def test_list_namespaces() -> None:
    async with open_memory() as memory:
        for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "x"), ("z", "b")]:
            await memory.store(item(ns, "k", {"v": 1}))
        assert await memory.list_namespaces() == [
            ("a", "b", "c"),
            ("a", "b", "d"),
            ("a", "x"),
            ("z", "b"),
        ]
        assert await memory.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
        assert await memory.list_namespaces(prefix=("*", "b")) == [
            ("a", "b", "c"),
            ("a", "b", "d"),
            ("z", "b"),
        ]
        assert await memory.list_namespaces(suffix=("b",)) == [("z", "b")]
        assert await memory.list_namespaces(max_depth=1) == [("a",), ("z",)]
        assert await memory.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "x")]
        await memory.delete_key(("a", "x"), "k")
        assert ("a", "x") not in await memory.list_namespaces()


# ------------------------------------------------------------------ TTL


async def test_ttl_expires_unseen_then_swept_by_the_owner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    removed: list[tuple[str | None, str]] = []
    async with open_memory(
        clock=mock_now, on_remove=lambda e, cause: removed.append((e.key, cause))
    ) as memory:
        await memory.store(item(("t",), "short", {"v": 1}, ttl=10.0))
        await memory.store(item(("t",), "long", {"v": 2}, ttl=100.0))
        await memory.store(item(("t",), "never", {"v": 3}))
        got = await memory.get_by_key(("t",), "short")
        assert got is not None
        assert got.expires_at == EPOCH + timedelta(seconds=trio.current_time() + 10)
        await trio.sleep(10.5)  # the owner wakes at the expiry by itself
        assert removed == [("short", "expired")]
        assert await memory.get_by_key(("t",), "short") is None
        assert memory.statistics().expired == 1
        assert [e.key for e in await memory.list_entries(("t",))] == ["never", "long"]
        # Refresh on read pushes the expiry.
        await trio.sleep(80)
        assert await memory.get_by_key(("t",), "long", refresh_ttl=True) is not None
        await trio.sleep(50)  # 130 s after the store, 50 after the refresh
        assert await memory.get_by_key(("t",), "long") is not None
        assert memory.statistics().ttl_refreshes == 1
        await trio.sleep(60)
        assert await memory.get_by_key(("t",), "long") is None
        assert removed == [("short", "expired"), ("long", "expired")]
        assert await memory.list_namespaces() == [("t",)]


async def test_expired_entries_are_never_returned_before_the_sweep() -> None:
    clock = [EPOCH]
    async with open_memory(clock=lambda: clock[0]) as memory:
        await memory.store(
            MemoryEntry(category=FACT, memory="deploy blue", key="k", namespace=("t",), ttl=5.0)
        )
        clock[0] = EPOCH + timedelta(seconds=6)  # expired, and the owner has not run
        assert await memory.get_by_key(("t",), "k") is None
        assert await memory.retrieve("deploy") == []
        assert await memory.list_entries() == []
        assert await memory.list_namespaces() == []
        # Not swept yet (still in the state), but counted by nothing (review 28b).
        assert len(memory) == 0
        assert memory.statistics().expired == 0
        assert len(memory.snapshot()) == 0
        assert await memory.sweep_expired() == 1
        assert len(memory) == 0
        assert memory.statistics().expired == 1


# ------------------------------------------------------------------ persistence


def full_entry() -> MemoryEntry:
    return MemoryEntry(
        category=FACT,
        memory="text",
        key="k",
        namespace=("n",),
        value={"a": [1, 2.5, None, True, "é"], "b": {"c": "d"}},
        created_at=EPOCH,
        updated_at=EPOCH + timedelta(seconds=3),
        ttl=3600.0,
        expires_at=EPOCH + timedelta(days=400),
    )


def test_jsonl_round_trips_the_new_fields() -> None:
    e = full_entry()
    assert entry_from_json(entry_to_json(e)) == e
    with pytest.raises(ValueError, match="value"):
        entry_from_json({"category": "fact", "memory": "m", "value": [1]})


async def test_sqlite_round_trips_the_new_fields(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    e = full_entry()
    async with open_memory(path=db) as memory:
        await memory.store(e)
    async with open_memory(path=db) as memory:
        assert await memory.get(e.id) == e
        assert await memory.get_by_key(("n",), "k") == e


def write_version_1_file(db: Path) -> None:
    """A schema-version-1 file (as actormem wrote before keys and payloads) holding one
    entry: 'old text', namespace ["ns"], tags ["t"], relevance 0.5, 2 accesses."""
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in CREATE_SCHEMA_V1:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO entries VALUES (1, '00000000-0000-0000-0000-000000000001', 'fact', "
        "'old text', '[\"t\"]', '[\"ns\"]', '2026-01-01T00:00:00+00:00', 0.5, 2, NULL, 0)"
    )
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()


async def test_a_version_1_file_is_upgraded_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    write_version_1_file(db)
    async with open_memory(path=db) as memory:
        (entry,) = list(memory.snapshot())
        assert entry.memory == "old text"
        assert entry.updated_at == entry.created_at == EPOCH
        assert entry.key is None
        assert entry.value is None
        await memory.store(item(("ns",), "k", {"new": True}))
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    conn.close()
    async with open_memory(path=db) as memory:
        assert len(memory) == 2


async def test_a_newer_file_is_refused_untouched(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    async with open_memory(path=db) as memory:
        await memory.store(full_entry())
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StorageError, match="newer actormem"):
        async with open_memory(path=db):
            pass
    assert db.read_bytes() == before


# ------------------------------------------------------------------ filters, by property

_SCALARS = [None, True, False, 0, 1, 1.0, 2.5, -3, "a", "b", ""]
_JSON = st.sampled_from(_SCALARS) | st.sampled_from([[1], [1, "a"], {"x": 1}, {"x": "a"}])


def _ref_equal(item: object, want: object) -> bool:
    """Equality as documented in actormem._json, written out plainly."""
    if isinstance(want, dict):
        return isinstance(item, Mapping) and all(
            k in item and _ref_equal(item[k], w) for k, w in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(item, tuple)
            and len(item) == len(want)
            and all(_ref_equal(i, w) for i, w in zip(item, want, strict=True))
        )
    if isinstance(want, bool) or isinstance(item, bool):
        return type(item) is type(want) and item == want
    if want is None or item is None:
        return item is want
    if isinstance(want, str) or isinstance(item, str):
        return type(item) is type(want) and item == want
    return item == want  # two numbers


def _ref_ordered(op: str, item: object, want: object) -> bool:
    numbers = all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (item, want))
    strings = isinstance(item, str) and isinstance(want, str)
    if not (numbers or strings):
        return False
    a, b = item, want
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]  # type: ignore[operator]


@settings(max_examples=examples(500), deadline=None)
@given(
    value=st.dictionaries(st.sampled_from(["f", "g"]), _JSON, max_size=2),
    op=st.sampled_from(["=", "$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
    want=_JSON,
)
def test_where_matches_the_documented_rules(
    value: dict[str, object], op: str, want: object
) -> None:
    if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(want, (list, dict)):
        with pytest.raises(InvalidQueryError):
            compile_where({"f": {op: want}})
        return
    cond = want if op == "=" else {op: want}  # a nested object without "$": field by field
    predicate = compile_where({"f": cond})
    assert predicate is not None
    frozen = JsonObject(value)
    missing = "f" not in value
    item = None if missing else frozen["f"]
    if op in ("=", "$eq"):
        want_match = not missing and _ref_equal(item, cond if op == "=" else want)
    elif op == "$ne":
        want_match = missing or not _ref_equal(item, want)
    else:
        want_match = not missing and _ref_ordered(op, item, want)
    assert predicate(frozen) == want_match
    assert predicate(None) is False
