"""The compiled row reader split in two (issue #20 item 5, branch ``open13``,
``sqlite_format._SPLIT_READ``): SQLite's steps in a C thread without the GIL, each row's
columns copied into chunks of 256 rows (at most 8 at once), the entries built from the
chunks by the caller's thread.

Both sides must take exactly the same rows (the same entries, field by field and type by
type, the same cached text hashes) and decline exactly the same files (None), wherever
in the file the odd row or the SQLite error is (first chunk, a later one, the last row),
leave no thread behind whatever ends the read (the rows done, a row declined, an error,
a ``KeyboardInterrupt`` raised by a converter), refuse a bad ``threaded`` argument
before reading, and open a memory to the same state.
"""

from __future__ import annotations

import os
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._errors import StorageError
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import COLUMNS, SELECT_ENTRIES, encode_record
from tests.strategies import entries, examples

from .test_decode_c import _odd_rows, _opened, _reader_args, imaged_copies
from .test_decode_rows import _same_entries
from .test_open_fast import _rows

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)

#: Row counts around the chunks' size (256) and their number (8).
COUNTS = [0, 1, 255, 256, 257, 2047, 2048, 2049, 2300]

TEXT = st.text(
    alphabet=st.sampled_from("ab \u00e9\u00ff\u4e2d\u20ac\U0001f600x\t"), min_size=1, max_size=200
)


def _threads() -> int:
    """The split reader's threads alive in this process (a C thread, no Python one: the
    kernel's list, by the name it gives itself)."""
    names = []
    for task in os.listdir("/proc/self/task"):
        try:
            names.append(Path(f"/proc/self/task/{task}/comm").read_text().strip())
        except OSError:  # it ended meanwhile
            continue
    return names.count("actormem rows")


def _threads_left() -> int:
    """:func:`_threads` once the joined ones are gone from the kernel's list: the reader
    joins its thread before it returns or raises, but a joined thread can still be listed
    for a moment (glibc's join returns when the kernel clears the thread's id, before the
    kernel removes its task). Polls for up to 30 s; a thread that is really left running
    is still counted then."""
    deadline = time.monotonic() + 30.0
    while (n := _threads()) and time.monotonic() < deadline:
        time.sleep(0.001)
    return n


def _file(path: Path, items: list[MemoryEntry]) -> str:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    rows = [encode_record(Record(e, i, i)) for i, e in enumerate(items, 1)]
    conn.execute("BEGIN")
    conn.executemany(sqlite_format.INSERT_ENTRY, rows)
    conn.execute("COMMIT")
    conn.close()
    return sqlite_format.file_uri(str(path)) + "?mode=ro"


def _read(uri: str, split: bool, sql: str = SELECT_ENTRIES, args: Any = None, **out: Any) -> Any:
    assert sqlite_format._crows is not None
    extra = [out["ids_out"]] if "ids_out" in out else []
    return sqlite_format._crows.read_entries(
        uri, sql, *(args or _reader_args()), True, split, *extra
    )


def _texts(n: int) -> list[MemoryEntry]:
    words = ["plain ascii", "\u00e9t\u00e9", "\u4e2d\u6587", "\U0001f600 x", "x" * 300]
    return [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"{words[i % 5]} {i}",
            tags=("t", str(i % 3)),
            namespace=("a",) if i % 7 else ("b", "c"),
            key=f"k{i}" if i % 4 == 0 else None,
        )
        for i in range(n)
    ]


@needs_reader
@pytest.mark.parametrize("n", COUNTS)
def test_the_split_reader_gives_the_same_entries_around_the_chunks(tmp_path: Path, n: int) -> None:
    uri = _file(tmp_path / "c.db", _texts(n))
    one, split = _read(uri, False), _read(uri, True)
    assert _threads_left() == 0
    assert one is not None
    assert len(one) == n
    _same_entries(one, split)
    for (_, a), (_, b) in zip(one, split, strict=True):
        assert hash(b.memory) == hash(a.memory) == hash("".join(list(a.memory)))
        assert b._id == a._id
        assert b.id == a.id


@needs_reader
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    items=st.lists(entries(), min_size=1, max_size=20, unique_by=lambda e: e.id),
    texts=st.lists(TEXT, max_size=10),
)
def test_any_entries_read_alike(tmp_path: Path, items: list[MemoryEntry], texts: list[str]) -> None:
    path = tmp_path / "h.db"
    path.unlink(missing_ok=True)
    more = [MemoryEntry(category=MemoryCategory.INSIGHT, memory=t) for t in texts]
    uri = _file(path, items + more)
    one, split = _read(uri, False), _read(uri, True)
    assert one is not None
    _same_entries(one, split)
    for (_, a), (_, b) in zip(one, split, strict=True):
        assert hash(b.memory) == hash("".join(list(a.memory)))


@needs_reader
def test_every_odd_row_is_taken_or_declined_alike(tmp_path: Path) -> None:
    # A table without column types (values stored as given): each odd row alone, then
    # each behind 600 good rows (its chunk is the third), then all together.
    path = tmp_path / "odd.db"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE TABLE t (k, {', '.join(COLUMNS)})")
    odd = [row for _, _, row in _odd_rows()]
    odd = [r for r in odd if not any(type(v) is int and v >= 2**63 for v in r)]  # storable
    conn.execute("BEGIN")
    for k, row in enumerate(odd):
        # A text with a lone surrogate goes in as its bytes cast to TEXT: not UTF-8.
        marks, values = ["?"], [k]
        for v in row:
            if isinstance(v, str) and any(0xD800 <= ord(ch) <= 0xDFFF for ch in v):
                marks.append("CAST(? AS TEXT)")
                values.append(v.encode("utf-8", "surrogatepass"))
            else:
                marks.append("?")
                values.append(v)
        conn.execute(f"INSERT INTO t VALUES ({', '.join(marks)})", values)
    good = [tuple(encode_record(Record(e, s, s))) for s, e in enumerate(_texts(600), 1)]
    for i, row in enumerate(good):
        conn.execute(f"INSERT INTO t VALUES ({', '.join('?' * (len(row) + 1))})", (-1000 - i, *row))
    conn.execute("COMMIT")
    conn.close()
    uri = sqlite_format.file_uri(str(path)) + "?mode=ro"
    select = f"SELECT {', '.join(COLUMNS)} FROM t"
    taken = declined = 0
    for k in range(len(odd)):
        for where in (f"k = {k}", f"k <= -1000 OR k = {k} ORDER BY k < 0, -k"):
            one = _read(uri, False, f"{select} WHERE {where}")
            split = _read(uri, True, f"{select} WHERE {where}")
            if one is None:
                assert split is None, where
                declined += 1
            else:
                _same_entries(one, split)
                taken += 1
    assert taken > 40
    assert declined > 40


@needs_reader
@pytest.mark.parametrize("at", [1, 300, 1999, 2300])
def test_an_sqlite_error_or_an_odd_row_anywhere_declines_alike(tmp_path: Path, at: int) -> None:
    uri = _file(tmp_path / "e.db", _texts(2300))
    # abs() of the smallest integer fails the step at row `at`: an SQLite error mid-scan
    failing = SELECT_ENTRIES.replace(
        "SELECT seq,",
        f"SELECT CASE WHEN seq = {at} THEN abs(-9223372036854775807 - 1) ELSE seq END,",
    )
    assert failing != SELECT_ENTRIES
    # an upper-case id (not the writer's form) at row `at`
    odd = SELECT_ENTRIES.replace(
        "SELECT seq, id,", f"SELECT seq, CASE WHEN seq = {at} THEN upper(id) ELSE id END,"
    )
    assert odd != SELECT_ENTRIES
    for sql in (failing, odd):
        assert _read(uri, False, sql) is None
        assert _read(uri, True, sql) is None
    assert _threads_left() == 0
    assert len(_read(uri, True)) == 2300


@needs_reader
@pytest.mark.parametrize("at", [1, 700, 2299])
def test_a_converter_that_raises_leaves_no_thread(tmp_path: Path, at: int) -> None:
    crows: Any = sqlite_format._crows
    was = crows.chunks_ahead(8)  # (open27) 8 chunks: the thread still reads at the first row
    try:
        _converter_raises(tmp_path, at)
    finally:
        crows.chunks_ahead(was)


def _converter_raises(tmp_path: Path, at: int) -> None:
    uri = _file(tmp_path / "k.db", _texts(2300))
    args = _reader_args()
    real = args[3]  # tags_of, called when a row's tags text is not the previous row's
    calls = [0]

    alive: list[int] = []

    def tags_of(text: str, error: type[BaseException]) -> Any:
        calls[0] += 1
        if calls[0] == 1:  # 2,300 rows: more than 8 chunks, so the thread still runs
            alive.append(_threads())
        if calls[0] == at:
            raise error("stop here")
        return real(text)

    for error, expect in ((KeyboardInterrupt, KeyboardInterrupt), (ValueError, None)):
        for split in (False, True):
            calls[0] = 0
            args[3] = lambda text, error=error: tags_of(text, error)  # type: ignore[misc]
            if expect is None:  # an Exception declines the file, as it does one row
                assert _read(uri, split, args=args) is None
            else:
                with pytest.raises(expect, match="stop here"):
                    _read(uri, split, args=args)
            assert _threads_left() == 0
    args[3] = real
    assert len(_read(uri, True, args=args)) == 2300
    assert alive == [0, 1, 0, 1]  # the one-thread reads have none, the split ones one


@needs_reader
def test_a_bad_threaded_argument_is_refused_before_reading(tmp_path: Path) -> None:
    uri = _file(tmp_path / "b.db", _texts(3))

    class NoBool:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    assert sqlite_format._crows is not None
    with pytest.raises(ValueError, match="no truth"):
        sqlite_format._crows.read_entries(uri, SELECT_ENTRIES, *_reader_args(), True, NoBool())
    with pytest.raises(TypeError):
        sqlite_format._crows.read_entries(uri, SELECT_ENTRIES, *_reader_args(), True, True, 1)
    # the split threads' CPU, for benchmarks: it grows with a split read, not otherwise
    spent = sqlite_format._crows.feed_cpu_s()
    assert _read(uri, False) is not None
    assert sqlite_format._crows.feed_cpu_s() == spent
    big = _file(tmp_path / "big.db", _texts(2300))
    assert _read(big, True) is not None
    assert sqlite_format._crows.feed_cpu_s() > spent
    missing = sqlite_format.file_uri(str(tmp_path / "none.db")) + "?mode=ro"
    assert _read(missing, True) is None  # no file: declined, no thread left
    assert _read(uri, 1) == _read(uri, 0)


@needs_reader
async def test_an_open_with_the_split_reader_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = [
        MemoryEntry(category=MemoryCategory.FACT, memory=m)
        for m in ("\u00e9t\u00e9 \U0001f600", "x", "A Mixed Case ASCII text")
    ]
    copies = await imaged_copies(tmp_path, _rows(13, 700), extra)
    calls: list[bool] = []
    real = sqlite_format._crows.read_entries  # type: ignore[union-attr]

    def seen(*args: Any) -> Any:
        calls.append(bool(args[14]))
        return real(*args)

    monkeypatch.setattr(sqlite_format._crows, "read_entries", seen)
    new = await _opened(copies[0])
    monkeypatch.setattr(sqlite_format, "_SPLIT_READ", False)
    old = await _opened(copies[1])
    assert calls == [True, False]
    assert new == old


def _ids_file(path: Path, ids: list[int]) -> str:
    return _file(
        path,
        [
            MemoryEntry(category=MemoryCategory.FACT, memory=f"m {i}", id=uuid.UUID(int=ident))
            for i, ident in enumerate(ids)
        ],
    )


@needs_reader
@pytest.mark.parametrize(
    "ids",
    [
        list(range(3000)),  # the zero id, then ids in a run: the table grows thrice
        [k << 64 for k in range(3000)],  # the low words all equal
        [k << 64 | k for k in range(1, 3000)] + [2**128 - 1],
        [uuid.UUID(bytes=bytes([k % 256]) * 16).int for k in range(256)],
    ],
)
def test_the_split_reader_checks_the_ids(tmp_path: Path, ids: list[int]) -> None:
    path = tmp_path / "i.db"
    out: list[Any] = []
    rows = _read(_ids_file(path, ids), True, args=None, ids_out=out)
    assert out == [True]
    assert [e._id for _, e in rows] == ids
    for twice in (0, len(ids) // 2, len(ids) - 1):  # an id again at the end
        path.unlink()
        out = []
        rows = _read(_ids_file(path, [*ids, ids[twice]]), True, ids_out=out)
        assert out == [False]
        assert len(rows) == len(ids) + 1
        one: list[Any] = []
        assert _read(_ids_file(tmp_path / f"o{twice}.db", ids), False, ids_out=one) is not None
        assert one == []  # the one-thread reader checks nothing


@needs_reader
def test_ids_out_is_left_alone_unless_every_row_was_read(tmp_path: Path) -> None:
    uri = _file(tmp_path / "d.db", _texts(600))
    odd = SELECT_ENTRIES.replace("SELECT seq, id,", "SELECT seq, upper(id),")
    out: list[Any] = []
    assert _read(uri, True, odd, ids_out=out) is None
    assert out == []
    with pytest.raises(TypeError):
        _read(uri, True, ids_out=(True,))
    assert _read(uri, True, ids_out=None) is not None


@needs_reader
@pytest.mark.parametrize("knobs", [(True, True), (True, False), (False, True)])
def test_read_file_refuses_an_id_twice_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knobs: tuple[bool, bool]
) -> None:
    monkeypatch.setattr(sqlite_format, "_SPLIT_READ", knobs[0])
    monkeypatch.setattr(sqlite_format, "_SPLIT_IDS", knobs[1])
    path = tmp_path / "t.db"
    _file(path, _texts(700))
    good, _ = sqlite_format.read_file(str(path), image=False)
    assert len(good) == 700
    conn = sqlite3.connect(path)
    conn.execute("UPDATE entries SET id = (SELECT id FROM entries WHERE seq = 300) WHERE seq = 650")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match=r"id .* appears twice \(seq 650\)"):
        sqlite_format.read_file(str(path), image=False)
