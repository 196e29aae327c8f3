"""Decoding a file's rows in bulk (``sqlite_format.decode_rows``) is ``decode_row`` row by
row: the same entries for every row ``decode_row`` accepts, the same error for every row
it refuses. The bulk path checks each field of a row in the writer's own form itself
and builds the entry without the constructor (``_entry.entry_of_checked``); any other
row goes through ``decode_row``. The rows here are written by ``encode_record`` and then
have one field (or none) replaced by a value from a pool of valid-but-unusual and
invalid values: other UUID spellings, other offsets, naive times, NaN, ints where floats
go, empty or overlong texts, lone surrogates, duplicate tags.
"""

from __future__ import annotations

import math
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._entry import _ENTRY_FIELDS, MAX_KEY_CHARS, MAX_MEMORY_CHARS, entry_of_checked
from actormem._errors import StorageError
from actormem._json import JsonObject
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import (
    COLUMNS,
    CREATE_SCHEMA,
    INSERT_ENTRY,
    decode_row,
    decode_rows,
    encode_record,
)

from .strategies import entries, examples

ID = "0123abcd-4567-89ef-0123-456789abcdef"
T = "2026-01-01T00:00:00+00:00"

#: Values to put into each column: valid ones in unusual spellings and invalid ones.
ODD: dict[str, list[Any]] = {
    "seq": [0, -1, 2**62, 2**62 + 1, 1.0, "1", None, True],
    "id": [
        ID.upper(),
        "{" + ID + "}",
        "urn:uuid:" + ID,
        ID.replace("-", ""),
        ID[:-1] + "_",
        ID.replace("0123-4567", "0123_4567"),
        " " + ID[1:],
        "+" + ID[1:],
        ID[:-1] + "٣",
        ID[:8] + "x" + ID[9:],
        ID[:30] + "-" + ID[31:],
        ID[:2] + "_" + ID[3:],
        "",
        5,
        None,
        b"x" * 36,
        "0" * 36,
    ],
    "category": ["fact", "FACT", "nope", "", 1, None, b"fact"],
    "memory": [
        "",
        "x" * MAX_MEMORY_CHARS,
        "x" * (MAX_MEMORY_CHARS + 1),
        "a\ud800b",
        "é",
        5,
        None,
        b"bytes",
    ],
    "tags": [
        "[]",
        '["a","a","b"]',
        '["a",""]',
        '"a"',
        "[1]",
        "{}",
        "[",
        "null",
        "[" * 3000,
        b'["a"]',
        3,
        None,
        '["\\ud800"]',
    ],
    "namespace": ["[]", '["t","acme"]', '["t",""]', "[1]", "nope", None, '["\\ud800"]'],
    "created_at": [
        T,
        "2026-01-01T05:00:00+05:00",
        "2026-01-01T00:00:00",
        "2026-01-01",
        "0001-01-01T00:00:00+05:00",
        "2026-01-01T00:00:00Z",
        "x",
        None,
        5,
    ],
    "relevance": [0.0, -0.0, 1.0, 0, 1, 1.5, -0.1, math.nan, math.inf, "0.5", None, True],
    "access_count": [0, 2**63 - 1, -1, 1.0, "1", None],
    "last_accessed": [None, T, "2026-01-01T00:00:00-03:00", "2026-01-01T00:00:00", "bad", 5],
    "validated": [0, 1, 2, -1, 1.0, 0.0, "1", None, True],
    "key": [None, "k", "", "k" * MAX_KEY_CHARS, "k" * (MAX_KEY_CHARS + 1), "\ud800", 5, b"k"],
    "value": [None, '{"a":1}', "[1]", "{", "1", 5, '{"a":' * 3000],
    "updated_at": [
        None,
        T,
        "2025-01-01T00:00:00+00:00",
        "2030-01-01T00:00:00+00:00",
        "2030-01-01T00:00:00+01:00",
        "2030-01-01T00:00:00",
        "bad",
    ],
    "ttl": [None, 1.0, 1, 0.0, -1.0, math.inf, math.nan, 4e9, 3e9, "1", True],
    "expires_at": [None, T, "2026-01-01T00:00:00+01:00", "2026-01-01T00:00:00", "x"],
}


def _outcome(fn: Any) -> tuple[str, Any]:
    try:
        return ("ok", fn())
    except StorageError as exc:
        return ("refused", str(exc))


def _same_entries(a: list[tuple[int, MemoryEntry]], b: list[tuple[int, MemoryEntry]]) -> None:
    assert a == b
    for (_, x), (_, y) in zip(a, b, strict=True):
        for name in _ENTRY_FIELDS:  # == is by value; also the types, tz and float signs
            u, v = getattr(x, name), getattr(y, name)
            assert type(u) is type(v), name
            if isinstance(u, datetime):
                assert u.tzinfo is v.tzinfo is UTC, name
            if isinstance(u, float):
                assert math.copysign(1, u) == math.copysign(1, v), name


@settings(max_examples=examples(400), deadline=None)
@given(
    entry=entries(),
    seq=st.integers(1, 2**62),
    column=st.sampled_from([None, *ODD]),
    pick=st.integers(0, 100),
    extras=st.fixed_dictionaries(
        {
            "key": st.none() | st.sampled_from(["k", "ключ"]),
            "value": st.none() | st.just({"a": [1, "é"]}),
            "ttl": st.none() | st.floats(1.0, 1e6),
            "expires_at": st.none() | st.just(datetime(2027, 1, 1, tzinfo=UTC)),
            "last_accessed": st.none() | st.just(datetime(2026, 2, 1, tzinfo=UTC)),
            "updated_at": st.none() | st.just(datetime(2026, 3, 1, tzinfo=UTC)),
        }
    ),
)
def test_decode_rows_is_decode_row(
    entry: MemoryEntry, seq: int, column: str | None, pick: int, extras: dict[str, Any]
) -> None:
    entry = attrs.evolve(entry, **extras)
    row = list(encode_record(Record(entry, seq, seq)))
    if column is not None:
        values = ODD[column]
        row[COLUMNS.index(column)] = values[pick % len(values)]
    rows = [tuple(row)]
    slow = _outcome(lambda: [decode_row("f.db", r) for r in rows])
    fast = _outcome(lambda: decode_rows("f.db", rows))
    assert fast[0] == slow[0]
    if fast[0] == "ok":
        _same_entries(fast[1], slow[1])
        if column is None:
            assert fast[1] == [(seq, entry)]
    else:
        assert fast[1] == slow[1]


def test_a_bad_row_among_good_ones_is_reported_as_decode_row_reports_it() -> None:
    good = [
        encode_record(Record(MemoryEntry(category=MemoryCategory.FACT, memory=f"m{i}"), i, i))
        for i in range(1, 6)
    ]
    bad = list(good[3])
    bad[COLUMNS.index("relevance")] = 7.5
    rows = [*good[:3], tuple(bad), good[4]]
    with pytest.raises(StorageError, match="seq 4 is invalid") as fast:
        decode_rows("f.db", rows)
    with pytest.raises(StorageError) as slow:
        decode_row("f.db", rows[3])
    assert str(fast.value) == str(slow.value)
    assert decode_rows("f.db", good) == [decode_row("f.db", r) for r in good]


def test_entry_of_checked_sets_every_field() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    fields: dict[str, Any] = {
        "category": MemoryCategory.INSIGHT,
        "memory": "m",
        "_id": uuid.UUID(ID).int,
        "tags": ("a",),
        "created_at": when,
        "relevance": 0.5,
        "access_count": 3,
        "validated": True,
        "namespace": ("t",),
        "last_accessed": when + timedelta(days=1),
        "key": "k",
        "value": JsonObject({"a": 1}),
        "updated_at": when + timedelta(days=2),
        "ttl": 60.0,
        "expires_at": when + timedelta(days=3),
    }
    assert set(fields) == set(_ENTRY_FIELDS)  # a new field must be added to both
    built = entry_of_checked(*(fields[name] for name in fields))
    expected = MemoryEntry(**{("id" if k == "_id" else k): v for k, v in fields.items()})
    assert built == expected
    assert {name: getattr(built, name) for name in _ENTRY_FIELDS} == fields


def test_one_datetime_for_equal_created_and_updated_times() -> None:
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="m")
    ((_, decoded),) = decode_rows("f.db", [encode_record(Record(entry, 1, 1))])
    assert decoded == entry
    assert decoded.updated_at is decoded.created_at  # one object kept, not two
    ((_, again),) = decode_rows("f.db", [encode_record(Record(entry, 2, 2))])
    assert again.relevance is decoded.relevance == 1.0  # the default float shared too
    other = datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    assert other.astimezone(UTC).tzinfo is UTC


def _file_of(path: Path, rows: list[tuple[Any, ...]]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in CREATE_SCHEMA:
        conn.execute(statement)
    conn.executemany(INSERT_ENTRY, rows)
    conn.close()


def test_read_file_decodes_batch_by_batch_as_row_by_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_format, "_FETCH_ROWS", 4)  # several batches, one partial
    rows = [
        encode_record(Record(MemoryEntry(category=MemoryCategory.FACT, memory=f"m{i}"), i, i))
        for i in range(1, 11)
    ]
    good = tmp_path / "good.db"
    _file_of(good, rows)
    entries, image = sqlite_format.read_file(str(good))
    assert image is None
    assert entries == [decode_row("f.db", r) for r in rows]
    bad = tmp_path / "bad.db"
    odd = list(rows[6])
    odd[COLUMNS.index("created_at")] = "2026-01-01T01:00:00+01:00"  # valid, not the writer's
    wrong = list(rows[8])
    wrong[COLUMNS.index("access_count")] = -1
    _file_of(bad, [*rows[:6], tuple(odd), rows[7], tuple(wrong), rows[9]])
    before = bad.read_bytes()
    with pytest.raises(StorageError, match="seq 9 is invalid"):
        sqlite_format.read_file(str(bad))
    assert bad.read_bytes() == before


class _InterruptedOnce:
    """A category value whose first ``hash`` raises KeyboardInterrupt, as if Ctrl-C arrived
    while the C decoder looked it up; later hashes succeed (the row is then invalid)."""

    def __init__(self) -> None:
        self.calls = 0

    def __hash__(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise KeyboardInterrupt
        return 0


def test_an_interrupt_while_looking_up_the_category_is_not_swallowed() -> None:
    if sqlite_format._decode_rows_c is None:
        pytest.skip("the C core is not built")
    row = list(encode_record(Record(MemoryEntry(category=MemoryCategory.FACT, memory="m"), 1, 1)))
    odd = _InterruptedOnce()
    row[COLUMNS.index("category")] = odd
    with pytest.raises(KeyboardInterrupt):
        decode_rows("f.db", [tuple(row)])
    assert odd.calls == 1
