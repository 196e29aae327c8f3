"""Decoding a file's rows in C gives what the Python loop gives: the core's
``decode_rows`` (``sqlite_format._C_DECODE``) on fetched rows, and the compiled reader
``_crows.read_entries`` (``_C_ROWS``) straight from SQLite, each against
``fetchmany`` and the Python decoder. The same entries, field by field (types, time
zones, the shared ``updated_at`` and default relevance), the same error for the same
first bad row, for every unusual or invalid value of ``test_decode_rows.ODD`` and for
times the C parsers decline; the reader declines (None) every row the Python path would
not take as it is, and ``read_file`` then reads the file in Python. Both refuse bad
arguments before they decode anything. Opening a file with them and one collector pause
(``lifecycle._ONE_GC_PAUSE``), and loading with the fold hashes in one ``map``
(``state._BULK_FOLDS``), its records untracked (``state._UNTRACK_LOADED``), the
relevance order filled in place (``state._RELEVANCE_FILL``) and the image's groups
by the core's ``group_texts`` (``wordoverlap.persist._C_GROUPS``), gives the same
state as opening without them.
"""

from __future__ import annotations

import gc
import shutil
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine import lifecycle
from actormem._engine import state as state_module
from actormem._entry import _ENTRY_FIELDS, MAX_KEY_CHARS, MAX_MEMORY_CHARS, MAX_TTL
from actormem._errors import StorageError
from actormem._index import kernels
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import PyRecord, Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import COLUMNS, MAX_SEQ, decode_rows, encode_record

from .setups import relevance_keys
from .test_decode_rows import ODD, _same_entries
from .test_open_fast import QUERIES, _rows

needs_core = pytest.mark.skipif(
    sqlite_format._decode_rows_c is None, reason="the compiled core is not built"
)
needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)

#: Times the C parser reads or declines (Python then decides): fractions, a space for
#: the T, dates the constructor refuses, non-ASCII digits, other lengths.
TIMES = [
    "2026-01-01T00:00:00.000000+00:00",
    "2026-01-01T23:59:59.999999+00:00",
    "2026-01-01T00:00:00.5+00:00",
    "2026-01-01T00:00:00.500+00:00",
    "2026-01-01 00:00:00+00:00",
    "2026-02-30T00:00:00+00:00",
    "2026-13-01T00:00:00+00:00",
    "2026-01-01T24:00:00+00:00",
    "2026-01-01T00:60:00+00:00",
    "0000-01-01T00:00:00+00:00",
    "9999-12-31T23:59:59.999999+00:00",
    "２026-01-01T00:00:00+00:00",
    "2026-01-01T00:00:00+00:01",
    "2026-01-01T00:00:00-00:00",
    "2026-01-01T00:00:00+0000",
]


def _good(seq: int, **fields: Any) -> list[Any]:
    entry = MemoryEntry(category=MemoryCategory.FACT, memory=f"text {seq}", **fields)
    return list(encode_record(Record(entry, seq, seq)))


def _odd_rows() -> Iterator[tuple[str, Any, tuple[Any, ...]]]:
    pool = {**ODD}
    for column in ("created_at", "updated_at", "last_accessed", "expires_at"):
        pool[column] = [*ODD[column], *TIMES]
    pool["relevance"] = [*ODD["relevance"], 0.5, 5e-324, 1.0 - 2**-53]
    pool["ttl"] = [*ODD["ttl"], MAX_TTL, float(MAX_TTL) * (1 + 2**-52)]
    pool["seq"] = [*ODD["seq"], MAX_SEQ, 1, 2**64]
    pool["access_count"] = [*ODD["access_count"], 2**64]
    pool["validated"] = [*ODD["validated"], 2**64]
    pool["memory"] = [*ODD["memory"], "a\U0001f600b", "a\udfffb\U0001f600", "Ā\ud800"]
    pool["key"] = [*ODD["key"], "k" * MAX_KEY_CHARS + "\U0001f600", "é"]
    pool["id"] = [*ODD["id"], "ffffffff-ffff-ffff-ffff-ffffffffffff", "g" + "0" * 35]
    for column, values in pool.items():
        for value in values:
            row = _good(7, key="k", ttl=5.0)
            row[COLUMNS.index(column)] = value
            yield column, value, tuple(row)


def _both(rows: list[tuple[Any, ...]]) -> tuple[tuple[str, Any], tuple[str, Any]]:
    out = []
    for knob in (True, False):
        sqlite_format._C_DECODE = knob
        try:
            out.append(("ok", decode_rows("f.db", rows)))
        except StorageError as exc:
            out.append(("refused", str(exc)))
        finally:
            sqlite_format._C_DECODE = True
    return out[0], out[1]


@needs_core
def test_every_odd_value_decodes_as_in_python() -> None:
    for column, value, row in _odd_rows():
        c, python = _both([row])
        assert c[0] == python[0], (column, value)
        if c[0] == "ok":
            _same_entries(c[1], python[1])
        else:
            assert c[1] == python[1], (column, value)


@needs_core
def test_declined_rows_among_good_ones_keep_their_order() -> None:
    odd = [row for _, _, row in _odd_rows()]
    valid = [row for row in odd if _both([row])[1][0] == "ok"]
    rows: list[tuple[Any, ...]] = []
    for i, row in enumerate(valid):
        rows.append(tuple(_good(1000 + 2 * i)))
        rows.append(row)
    c, python = _both(rows)
    assert c[0] == python[0] == "ok"
    _same_entries(c[1], python[1])
    assert [s for s, _ in c[1]] == [row[0] for row in rows]


@needs_core
def test_shared_objects_as_in_python() -> None:
    when = datetime(2026, 1, 1, 0, 0, 0, 5, tzinfo=UTC)
    rows = [
        tuple(_good(1, created_at=when)),
        tuple(_good(2, created_at=when, relevance=1.0, tags=("a", "b"))),
        tuple(_good(3, created_at=when, relevance=0.25, tags=("a", "b"))),
    ]
    for knob in (True, False):
        sqlite_format._C_DECODE = knob
        try:
            out = [e for _, e in decode_rows("f.db", rows)]
        finally:
            sqlite_format._C_DECODE = True
        assert all(e.updated_at is e.created_at for e in out)
        assert out[0].relevance is out[1].relevance  # one 1.0 for every default
        assert out[1].tags is out[2].tags  # one tuple per distinct tag set
        assert out[0].created_at.tzinfo is UTC
        assert gc.is_tracked(out[0]) == gc.is_tracked(MemoryEntry.new(MemoryCategory.FACT, "x"))


@needs_core
def test_bad_arguments_are_refused() -> None:
    fn = sqlite_format._decode_rows_c
    assert fn is not None
    row = tuple(_good(1))
    ctx: list[Any] = [
        MemoryEntry, _ENTRY_FIELDS, sqlite_format._CATEGORIES, sqlite_format._tags_of,
        sqlite_format._namespace_of, sqlite_format._json_object, 1.0, MAX_MEMORY_CHARS,
        MAX_KEY_CHARS, MAX_TTL, MAX_SEQ,
    ]  # fmt: skip
    out: list[Any] = []
    assert fn([row], 0, out, *ctx) == 1
    assert len(out) == 1
    with pytest.raises(ValueError, match="start"):
        fn([row], 2, out, *ctx)
    with pytest.raises(ValueError, match="start"):
        fn([row], -1, out, *ctx)
    with pytest.raises(TypeError):
        fn((row,), 0, out, *ctx)
    with pytest.raises(TypeError):
        fn([row], 0, (), *ctx)

    class Plain:
        pass

    for bad_type, bad_fields in (
        (Plain, _ENTRY_FIELDS),
        (MemoryEntry, _ENTRY_FIELDS[:-1]),
        (MemoryEntry, ("category",) * 14 + ("nope",)),
        (Record, _ENTRY_FIELDS),
    ):
        with pytest.raises((TypeError, ValueError)):
            fn([row], 0, out, bad_type, bad_fields, *ctx[2:])
    assert len(out) == 1  # nothing appended by a refused call
    with pytest.raises(TypeError):
        sqlite_format._decode_rows_in_c("f.db", (row,), [])  # type: ignore[arg-type]


async def _opened(path: str) -> tuple[list[MemoryEntry], dict[str, list[Any]]]:
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        state = memory._state
        state._check()
        view = state.view()
        entries = [view.entry(r) for r in view.records()]
        order = [r.seq for r in view.by_relevance()]
        hits = {
            q: [(h.entry.id, h.score) for h in await memory.retrieve_scored(q, 20)] for q in QUERIES
        }
        assert memory._storage is not None
        assert memory._storage.image_fresh
        groups = sorted((k, len(state._dup_group(k))) for k in state._dups)
        untracked = state_module._UNTRACK_LOADED and state_module._gc_untrack is not None
        tracked = not untracked and Record is PyRecord  # the compiled one never is
        assert all(gc.is_tracked(r) == tracked for r in view.records())
        return entries, {"order": order, "dups": groups, **hits}


async def imaged_copies(
    tmp_path: Path, rows: list[tuple[int, MemoryEntry]], extra: Sequence[MemoryEntry] = ()
) -> list[str]:
    """Two copies (``new``, ``old``) of a word-overlap file holding ``rows``' entries, a
    twin of every 9th (the same text) and ``extra``, every 5th row deleted, and the index
    image a later clean close keeps. One copy for each side: a retrieve's access
    bookkeeping changes the file."""
    path = str(tmp_path / "m.db")
    twins = [attrs.evolve(e, id=uuid.uuid4(), tags=("twin",)) for _, e in rows[::9]]
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        await memory.store_many([entry for _, entry in rows] + twins + list(extra))
        for _, entry in rows[::5]:
            await memory.delete(entry.id)
    await _opened(path)  # the close above kept no image (deletes); this one writes it
    copies = [str(tmp_path / f"{name}.db") for name in ("new", "old")]
    for copy in copies:
        shutil.copyfile(path, copy)
    return copies


async def test_an_open_with_the_c_decoder_and_one_pause_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copies = await imaged_copies(tmp_path, _rows(11, 400))
    new = await _opened(copies[0])
    monkeypatch.setattr(sqlite_format, "_C_DECODE", False)
    monkeypatch.setattr(sqlite_format, "_C_ROWS", False)
    monkeypatch.setattr(lifecycle, "_ONE_GC_PAUSE", False)
    monkeypatch.setattr(state_module, "_BULK_FOLDS", False)
    monkeypatch.setattr(state_module, "_UNTRACK_LOADED", False)
    monkeypatch.setattr(state_module, "_RELEVANCE_FILL", False)
    monkeypatch.setattr(wo_persist, "_C_GROUPS", False)
    old = await _opened(copies[1])
    assert new == old
    assert gc.isenabled()


def _reader_args() -> list[Any]:
    return [
        MemoryEntry, _ENTRY_FIELDS, sqlite_format._CATEGORY_VALUES, sqlite_format._tags_of,
        sqlite_format._namespace_of, sqlite_format._json_object, 1.0, MAX_MEMORY_CHARS,
        MAX_KEY_CHARS, MAX_TTL, MAX_SEQ,
    ]  # fmt: skip


def odd_table(path: Path, rows: list[tuple[Any, ...]]) -> None:
    """A table ``t`` at ``path`` without column types (values stored as given): ``k``,
    then ``COLUMNS``, one row of ``rows`` per k (its storable ones: the caller's filter);
    a text with a lone surrogate goes in as its bytes cast to TEXT (not UTF-8)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute(f"CREATE TABLE t (k, {', '.join(COLUMNS)})")
    conn.execute("BEGIN")
    for k, row in enumerate(rows):
        marks, values = ["?"], [k]
        for v in row:
            raw = isinstance(v, str) and not v.encode("utf-8", "surrogatepass").isascii()
            if raw and any(0xD800 <= ord(ch) <= 0xDFFF for ch in v):
                marks.append("CAST(? AS TEXT)")
                values.append(v.encode("utf-8", "surrogatepass"))
            else:
                marks.append("?")
                values.append(v)
        conn.execute(f"INSERT INTO t VALUES ({', '.join(marks)})", values)
    conn.execute("COMMIT")
    conn.close()


@needs_reader
def test_the_reader_takes_exactly_the_rows_python_takes_as_they_are(tmp_path: Path) -> None:
    # A table without column types (values stored as given), one odd row per k.
    path = tmp_path / "odd.db"
    rows = [tuple(_good(3, key="k", ttl=5.0)), *(row for _, _, row in _odd_rows())]
    rows = [r for r in rows if not any(type(v) is int and v >= 2**63 for v in r)]  # storable
    odd_table(path, rows)
    conn = sqlite3.connect(path, isolation_level=None)
    columns = ", ".join(COLUMNS)
    conn.execute(f"INSERT INTO t SELECT 10000 + k, {columns} FROM t WHERE k < 3")  # pairs
    conn.close()
    reader = conn = sqlite3.connect(path)
    uri = sqlite_format.file_uri(str(path)) + "?mode=ro"
    select = f"SELECT {', '.join(COLUMNS)} FROM t"
    assert sqlite_format._crows is not None
    declined: list[str] = []
    taken = 0
    for where in [*(f"k = {k}" for k in range(len(rows))), "k % 10000 < 3 ORDER BY k"]:
        try:
            fetched = reader.execute(f"{select} WHERE {where}").fetchall()
        except sqlite3.OperationalError:  # not UTF-8: Python's sqlite3 cannot fetch it
            fetched = None
        c = sqlite_format._crows.read_entries(uri, f"{select} WHERE {where}", *_reader_args())
        sqlite_format._C_DECODE = False
        try:
            assert fetched is not None
            python = [sqlite_format._decode_checked(r) for r in fetched]
        except Exception:  # Python declines or refuses a row: so must the reader
            assert c is None, where
            continue
        finally:
            sqlite_format._C_DECODE = True
        if c is None:  # allowed (a BLOB of tags, which json.loads reads): Python reads it
            declined.append(where)
            continue
        _same_entries(c, python)
        taken += 1
    assert "k = 0" not in declined  # the writer's own rows are read in C
    assert "k % 10000 < 3 ORDER BY k" not in declined
    assert taken > 40
    reader.close()


@needs_reader
def test_a_file_the_reader_declines_is_read_in_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = str(tmp_path / "m.db")
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    conn.execute("PRAGMA journal_mode = WAL")
    good = [tuple(_good(i, key=f"k{i}", ttl=float(i), value=None)) for i in range(1, 40)]
    conn.executemany(sqlite_format.INSERT_ENTRY, good)
    conn.close()
    calls: list[str] = []
    real = sqlite_format._crows.read_entries  # type: ignore[union-attr]

    def counted(*args: Any) -> Any:
        out = real(*args)
        calls.append("c" if out is not None else "declined")
        return out

    monkeypatch.setattr(sqlite_format._crows, "read_entries", counted)
    by_c, _ = sqlite_format.read_file(path)
    monkeypatch.setattr(sqlite_format, "_C_ROWS", False)
    by_python, _ = sqlite_format.read_file(path)
    _same_entries(by_c, by_python)
    # An upper-case id (valid, not the writer's form): the reader declines the file.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE entries SET id = upper(id) WHERE seq = 20")
    conn.close()
    monkeypatch.setattr(sqlite_format, "_C_ROWS", True)
    again, _ = sqlite_format.read_file(path)
    _same_entries(again, by_python)
    assert calls == ["c", "declined"]
    # A bad row: the same error as the Python path's.
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE entries SET relevance = 7.5 WHERE seq = 30")
    conn.close()
    errors = []
    for knob in (True, False):
        monkeypatch.setattr(sqlite_format, "_C_ROWS", knob)
        with pytest.raises(StorageError) as info:
            sqlite_format.read_file(path)
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert "seq 30" in errors[0]


@needs_reader
def test_the_reader_refuses_bad_arguments(tmp_path: Path) -> None:
    crows = sqlite_format._crows
    assert crows is not None
    args = _reader_args()
    uri = sqlite_format.file_uri(str(tmp_path / "none.db")) + "?mode=ro"
    assert crows.read_entries(uri, sqlite_format.SELECT_ENTRIES, *args) is None  # no file

    class Plain:
        pass

    for bad in (
        [Plain, *args[1:]],
        [MemoryEntry, _ENTRY_FIELDS[:-1], *args[2:]],
        [*args[:2], {1: MemoryCategory.FACT}, *args[3:]],
        [*args[:3], None, *args[4:]],
        [*args[:6], 1],
    ):
        with pytest.raises((TypeError, ValueError)):
            crows.read_entries(uri, sqlite_format.SELECT_ENTRIES, *bad)
    with pytest.raises(TypeError):
        crows.read_entries(None, sqlite_format.SELECT_ENTRIES, *args)


@needs_core
def test_group_texts_numbers_by_first_appearance() -> None:
    core = kernels.wo_core()
    assert core is not None
    for texts in ([], ["a"], ["a", "b", "a", "c", "b", "b"], [f"t{i % 7}" for i in range(50)]):
        groups, raw = core.group_texts(list(texts))
        want = dict.fromkeys(texts)
        assert list(groups) == list(want)
        assert list(groups.values()) == list(range(len(want)))
        numbers = list(want)
        assert list(np.frombuffer(raw, np.int64)) == [numbers.index(t) for t in texts]
    for bad in (("a",), ["a", b"a"], ["a", None], [1]):
        with pytest.raises(TypeError):
            core.group_texts(bad)


@pytest.mark.parametrize("same_relevance", [True, False])
def test_the_relevance_order_filled_in_place_equals_update(
    monkeypatch: pytest.MonkeyPatch, same_relevance: bool
) -> None:
    rows = _rows(5, 1200)  # more than one of sortedcontainers' sublists
    if same_relevance:  # keys ascend already: no sort
        rows = [(s, attrs.evolve(e, relevance=1.0)) for s, e in rows]
    lists = []
    for knob in (True, False):
        monkeypatch.setattr(state_module, "_RELEVANCE_FILL", knob)
        state = state_module.MemoryState(
            capacity=None, half_life=state_module.DEFAULT_HALF_LIFE, scorer=WordOverlapScorer()
        )
        state.load(rows)
        state._check()
        order = state._by_relevance
        seqs = [[r.seq for r in part] for part in order._lists]
        lists.append((seqs, relevance_keys(order), len(order)))
    assert lists[0] == lists[1]
