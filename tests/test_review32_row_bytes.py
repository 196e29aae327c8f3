"""The durable commit's row size of a record read from its compiled store
(``EntryColumns.row_bytes``, ``sqlite._record_frames``) is the one its built entry
gives (``sqlite._entry_frames``), for any text, key, tags and value; a store that cannot
tell (-1) falls back to the entry. Before, every access update's record built its entry
for this count (~7% of the durable main job's CPU)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._index.entrycols import compiled_columns, new_entry_columns
from actormem._record import Record
from actormem._storage import sqlite as sqlite_store

pytestmark = pytest.mark.skipif(
    not compiled_columns(), reason="the compiled EntryColumns is not built here"
)

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=3000)
_ascii = st.text(st.characters(max_codepoint=127, blacklist_categories=("Cs",)), max_size=40)


@st.composite
def entries(draw: st.DrawFn) -> MemoryEntry:
    key = draw(st.none() | _ascii.filter(bool) | _text.filter(bool))
    tags = tuple(draw(st.lists(_text.filter(bool).map(lambda t: t[:30]), max_size=4)))
    value = draw(st.none() | st.dictionaries(_ascii, st.integers(), max_size=3))
    namespace = tuple(draw(st.lists(_ascii.filter(bool), max_size=2)))
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=draw(_text.filter(bool)),
        key=key,
        tags=tags,
        value=value if key is not None else None,
        namespace=namespace,
        access_count=draw(st.integers(0, 5)),
    )


@settings(max_examples=300, deadline=None)
@given(entry=entries(), page=st.sampled_from([512, 1024, 4096, 8192]))
def test_record_frames_equal_the_entry_frames(entry: MemoryEntry, page: int) -> None:
    cols = new_entry_columns()
    rec = Record(entry, 1, 1, cols)
    want = sqlite_store._entry_frames(entry, page)
    assert sqlite_store._record_frames(rec, page) == want
    n = cols.row_bytes(rec.slot)
    if entry.value is None and (entry.key is None or entry.key.isascii()):
        assert n >= len(entry.memory.encode())  # told by the store
    else:
        assert n == -1  # the entry is built instead


def test_row_bytes_refuses_bad_slots() -> None:
    cols = new_entry_columns()
    slot = cols.put(MemoryEntry.new(MemoryCategory.FACT, "x"))
    assert cols.row_bytes(slot) == 1
    with pytest.raises(TypeError):
        cols.row_bytes("0")
    with pytest.raises(IndexError):
        cols.row_bytes(slot + 1)
    cols.release(slot)
    with pytest.raises(IndexError):
        cols.row_bytes(slot)


def test_record_frames_do_not_build_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    long = "word " * 2000  # past a quarter page: overflow pages counted
    rec = Record(MemoryEntry.new(MemoryCategory.FACT, long), 1, 1, new_entry_columns())
    want = sqlite_store._entry_frames(rec.entry, 4096)
    assert want > 0
    monkeypatch.setattr(Record, "entry", property(lambda self: pytest.fail("entry built")))
    assert sqlite_store._record_frames(rec, 4096) == want
