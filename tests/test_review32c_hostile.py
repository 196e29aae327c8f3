"""review32c: hostile cases for EntryColumns.row_bytes / sqlite._record_frames and
MemoryEntry pickling."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._entry import _ENTRY_FIELDS, MAX_TAG_CHARS, MAX_TAGS
from actormem._index.entrycols import compiled_columns, new_entry_columns
from actormem._record import Record
from actormem._storage import sqlite as sq

pytestmark = pytest.mark.skipif(not compiled_columns(), reason="no compiled EntryColumns")

_any = st.text(max_size=200).filter(lambda t: not any(0xD800 <= ord(c) <= 0xDFFF for c in t))
_ne = _any.filter(bool)
_times = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    key = draw(st.none() | _ne)
    created = draw(_times)
    return MemoryEntry(
        category=draw(st.sampled_from(list(MemoryCategory))),
        memory=draw(
            _any
            | st.text(st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF), max_size=3000)
        ),
        key=key,
        tags=tuple(draw(st.lists(_ne.map(lambda t: t[:MAX_TAG_CHARS]), max_size=8))),
        value=draw(st.none() | st.dictionaries(_any, st.integers() | _any, max_size=3))
        if key
        else None,
        namespace=tuple(draw(st.lists(_ne, max_size=3))),
        access_count=draw(st.integers(0, 2**70)),
        created_at=created,
        updated_at=draw(st.none() | _times),
        last_accessed=draw(st.none() | _times),
        ttl=draw(st.none() | st.floats(0.001, 1e9)),
        expires_at=draw(st.none() | _times),
        relevance=draw(st.floats(0, 1)),
        validated=draw(st.booleans()),
        id=draw(st.integers(0, 2**128 - 1)),
    )


@settings(max_examples=400, deadline=None)
@given(entry=entries(), page=st.sampled_from([512, 1024, 4096, 65536]))
def test_frames_equal_any_entry(entry: MemoryEntry, page: int) -> None:
    cols = new_entry_columns()
    # a slot released then reused
    s0 = cols.put(MemoryEntry.new(MemoryCategory.FACT, "x" * 5000).with_tags("a" * 1000, "b"))
    cols.release(s0)
    rec = Record(entry, 1, 1, cols)
    assert rec.slot == s0
    assert sq._record_frames(rec, page) == sq._entry_frames(entry, page)
    assert sq._record_frames(rec, page) == sq._entry_frames(rec.entry, page)


@settings(max_examples=400, deadline=None)
@given(entry=entries())
def test_pickle_round_trip_exact(entry: MemoryEntry) -> None:
    for proto in range(0 if entry.value is None else 2, pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(entry, proto))
        assert back == entry
        for name in _ENTRY_FIELDS:
            assert getattr(back, name) == getattr(entry, name), name
            assert type(getattr(back, name)) is type(getattr(entry, name)), name
    assert copy.deepcopy(entry) == entry
    assert copy.copy(entry) == entry


def test_many_huge_tags() -> None:
    tags = tuple(f"{i}" + "\U0001f600" * (MAX_TAG_CHARS - 4) for i in range(MAX_TAGS))
    e = MemoryEntry.new(MemoryCategory.FACT, "é" * 100_000).with_tags(*tags)
    cols = new_entry_columns()
    rec = Record(e, 1, 1, cols)
    for page in (512, 4096, 65536):
        assert sq._record_frames(rec, page) == sq._entry_frames(e, page)


def test_put_raw_hostile_extras() -> None:
    cols = new_entry_columns()
    idb = bytes(16)
    big = "t" * 10_000_000
    hostile = [
        ((big,) * 3, 0, (), None, None, None, None, None, None, None),
        (tuple("x" for _ in range(200_000)), 0, (), None, None, None, None, None, None, None),
        ([1, 2], 0, (), None, None, None, None, None, None, None),
        ((1, "a"), 0, (), None, None, None, None, None, None, None),
        ((), 0, (), None, 12, None, None, None, None, None),
        ((), 0, (), None, "é", None, None, None, None, None),
        ((), 0, (), None, "abc", None, None, None, None, None),
        ((), 0, (), None, None, 3, None, None, None, None),
        (None, None, None, None, None, None, None, None, None, None),
    ]
    got = []
    for extras in hostile:
        slot = cols.put_raw(idb, 0, 0.5, 0, False, b"hello", extras)
        got.append(cols.row_bytes(slot))
    assert got[0] == 5 + 12 * 30_000_000 + 9 + 2
    assert got[1] == 5 + 12 * 200_000 + 3 * 200_000 + 2
    assert got[2:5] == [-1, -1, -1]
    assert got[5] == -1
    assert got[6] == 8
    assert got[7] == -1
    assert got[8] == -1


@pytest.mark.parametrize("bad", [True, -1, 2**64, 2**200, -(2**200), 1.0, None, "0", b"0"])
def test_bad_slots(bad: object) -> None:
    cols = new_entry_columns()
    cols.put(MemoryEntry.new(MemoryCategory.FACT, "x"))
    cols.put(MemoryEntry.new(MemoryCategory.FACT, "y"))
    with pytest.raises((TypeError, IndexError)):
        cols.row_bytes(bad)


def test_int_subclass_slot() -> None:
    class Int(int):
        pass

    cols = new_entry_columns()
    cols.put(MemoryEntry.new(MemoryCategory.FACT, "x"))
    with pytest.raises(TypeError):
        cols.row_bytes(Int(0))
