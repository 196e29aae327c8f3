"""The compiled row reader hashes each memory text as it makes it (issue #20 item 5,
branch ``open12``, ``sqlite_format._HASH_TEXTS``).

A ``str`` caches its hash, so the word-overlap restore's ``group_texts`` then probes its
dict without reading the texts again. Both sides of the knob must give the same
entries (field by field), the same hashes, the same opened state (records, relevance
order, duplicate groups, top-k with scores) and refuse a bad ``hash_memory`` before
reading a row.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import encode_record
from tests.strategies import examples

from .test_decode_c import _opened, _reader_args, imaged_copies
from .test_decode_rows import _same_entries
from .test_open_fast import _rows

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)

#: Texts of every width (ASCII, Latin-1, BMP, astral), empty-ish and long, repeated.
TEXT = st.text(
    alphabet=st.sampled_from("ab \u00e9\u00ff\u4e2d\u20ac\U0001f600x"), min_size=1, max_size=300
)


def _file(path: Path, texts: list[str]) -> str:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    rows = [
        encode_record(Record(MemoryEntry(category=MemoryCategory.FACT, memory=t), i, i))
        for i, t in enumerate(texts, 1)
    ]
    conn.executemany(sqlite_format.INSERT_ENTRY, rows)
    conn.close()
    return sqlite_format.file_uri(str(path)) + "?mode=ro"


def _read(uri: str, *extra: Any) -> Any:
    assert sqlite_format._crows is not None
    return sqlite_format._crows.read_entries(
        uri, sqlite_format.SELECT_ENTRIES, *_reader_args(), *extra
    )


@needs_reader
@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(TEXT, min_size=1, max_size=30))
def test_the_hashing_reader_gives_the_same_entries(tmp_path: Path, texts: list[str]) -> None:
    path = tmp_path / "h.db"
    path.unlink(missing_ok=True)
    uri = _file(path, texts)
    plain, hashed, default = _read(uri, False), _read(uri, True), _read(uri)
    assert plain is not None
    _same_entries(plain, hashed)
    _same_entries(plain, default)
    for (_, a), (_, b) in zip(plain, hashed, strict=True):
        # the cached hash is the one a fresh copy of the text computes
        assert hash(b.memory) == hash(a.memory) == hash("".join(list(a.memory)))


@needs_reader
def test_a_bad_hash_memory_is_refused_before_reading(tmp_path: Path) -> None:
    uri = _file(tmp_path / "b.db", ["one", "two"])

    class NoBool:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    with pytest.raises(ValueError, match="no truth"):
        _read(uri, NoBool())
    with pytest.raises(TypeError):
        _read(uri, True, False, 1)  # one argument too many (threaded is the last)
    assert sqlite_format._crows is not None
    with pytest.raises(TypeError):  # hash_memory is positional only
        sqlite_format._crows.read_entries(
            uri, sqlite_format.SELECT_ENTRIES, *_reader_args(), hash_memory=True
        )
    assert _read(uri, 0) == _read(uri, 1)


@needs_reader
async def test_an_open_with_hashed_texts_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = [
        MemoryEntry(category=MemoryCategory.FACT, memory=m)
        for m in ("\u00e9t\u00e9 \U0001f600", "x")
    ]
    copies = await imaged_copies(tmp_path, _rows(13, 500), extra)
    calls: list[bool] = []
    real = sqlite_format._crows.read_entries  # type: ignore[union-attr]

    def seen(*args: Any) -> Any:
        calls.append(bool(args[13]))  # hash_memory
        return real(*args)

    monkeypatch.setattr(sqlite_format._crows, "read_entries", seen)
    new = await _opened(copies[0])
    monkeypatch.setattr(sqlite_format, "_HASH_TEXTS", False)
    old = await _opened(copies[1])
    assert calls == [True, False]
    assert new == old
