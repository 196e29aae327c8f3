"""The 1M open's growing arrays (issue #20 item 5, branch ``open31``).

* ``_kernels_common.h``'s ``list_append_wide``: the C loops that append a million items
  to a list (the split reader's rows, ``load_inserts``' records, relevance keys and
  namespace lists, the vocabulary's gram lists) double its room once it holds 4,096
  items, where ``PyList_Append`` grows it by about 1/8 (a copy of the whole array each
  time); the reader's fold buffer likewise (``bytearray_grow_wide``). The same lists,
  items and bytes: only the room differs.
* ``_crows.id_presize`` (``sqlite_format._ID_PRESIZE``): the split reader sizes its id
  table once for the file's seq range (believed up to the file's bytes over 64) instead
  of doubling it from 1,024 slots. The same answer (no id twice, or one twice) for any
  ids, any seq range, with and without huge pages.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import textfold
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import SELECT_ENTRIES, FoldedRows, encode_record

from .test_decode_c import _reader_args
from .test_decode_rows import _same_entries
from .test_index_image import _image
from .test_index_image import _loaded as _loaded_image
from .test_open13_split import _read, _texts
from .test_open17_loadc import _layout, _loaded, _plain_rows, _with_folds, needs_c
from .test_open_fast import _assert_same

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader is not built"
)

#: list_append_wide's threshold (``LIST_WIDE_FROM``)
WIDE_FROM = 4096


def _grown(cap: int, newsize: int) -> int:
    """CPython's list_resize room for ``newsize`` items from ``cap`` (3.9 and later)."""
    if newsize <= cap:
        return cap
    new = (newsize + (newsize >> 3) + 6) & ~3
    if newsize - (newsize - 1) > new - newsize:
        new = (newsize + 3) & ~3
    return new


def _room(n: int, wide: bool) -> int:
    """The room of a list after ``n`` appends one at a time from empty: by
    ``PyList_Append`` alone, or (``wide``) by ``list_append_wide``."""
    cap = 0
    for size in range(n):
        if wide and size >= WIDE_FROM and size == cap:
            cap = 2 * size
        cap = _grown(cap, size + 1)
    return cap


def _room_of(lst: list[Any], empty: list[Any]) -> int:
    return (list.__sizeof__(lst) - list.__sizeof__(empty)) // 8


def _rooms_known() -> bool:
    """Whether this interpreter's lists grow as :func:`_grown` says (else the tests
    below check the items only)."""
    for n in (1, 5, 100, 5000, 20_011):
        lst: list[int] = []
        for i in range(n):
            lst.append(i)
        if _room_of(lst, []) != _room(n, wide=False):
            return False
    return True


ROOMS = _rooms_known()


def _file(path: Path, items: list[MemoryEntry], seqs: list[int] | None = None) -> str:
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    seqs = seqs or list(range(1, len(items) + 1))
    rows = [encode_record(Record(e, s, s)) for s, e in zip(seqs, items, strict=True)]
    conn.execute("BEGIN")
    conn.executemany(sqlite_format.INSERT_ENTRY, rows)
    conn.execute("COMMIT")
    conn.close()
    return sqlite_format.file_uri(str(path)) + "?mode=ro"


def _read_into(uri: str) -> tuple[FoldedRows, bytearray, list[bytes]]:
    crows: Any = sqlite_format._crows
    rows = FoldedRows([], b"")
    buf = bytearray()
    folds: list[bytes] = []
    got = crows.read_entries(
        uri, SELECT_ENTRIES, *_reader_args(), True, True, None, folds, None, rows, buf
    )
    assert got is rows
    return rows, buf, folds


@needs_reader
@pytest.mark.parametrize("n", [WIDE_FROM - 1, WIDE_FROM, WIDE_FROM + 1, 9000, 20_011])
def test_the_reader_fills_its_list_and_fold_buffer_past_the_wide_threshold(
    tmp_path: Path, n: int
) -> None:
    """The rows and folds as the one-thread read and ``fold_hash`` give them; the list's
    room doubled from 4,096 items (a list that is not full keeps its room)."""
    uri = _file(tmp_path / "w.db", _texts(n))
    rows, buf, folds = _read_into(uri)
    one = _read(uri, False)
    assert one is not None
    _same_entries(one, rows)
    assert folds == [bytes(buf)]
    want = [textfold.fold_hash(e.memory) for _, e in rows]
    got = struct.unpack(f"={n}Q", bytes(buf))
    # a text the reader did not fold is 2**64-1 (not ASCII, on CPython 3.13 and later)
    assert all(g in (w, 2**64 - 1) for g, w in zip(got, want, strict=True))
    if ROOMS:
        assert _room_of(rows, FoldedRows([], b"")) == _room(n, wide=True)
    plain = sqlite_format._crows.read_entries(  # type: ignore[union-attr]
        uri, SELECT_ENTRIES, *_reader_args(), True, True
    )
    _same_entries(one, plain)
    if ROOMS:
        assert _room_of(plain, []) == _room(n, wide=True)


@needs_c
@pytest.mark.parametrize("n", [6000, 12_000])
def test_load_inserts_past_the_wide_threshold_equals_the_python_loop(n: int) -> None:
    """``load_inserts`` with its lists doubled: the same state as the Python loop; the
    namespace list that holds most records has the doubled room."""
    rows: list[Any] = _with_folds(_plain_rows(31, n, keys=False))
    with pytest.MonkeyPatch.context() as mp:
        on, loaded_c, _ = _loaded(rows, True, mp)
        off, _, _ = _loaded(rows, False, mp)
    assert loaded_c > WIDE_FROM
    _assert_same(on, off)
    assert _layout(on) == _layout(off)
    recs = on._namespaces[("a",)].recs
    assert len(recs) > WIDE_FROM
    assert len(recs) <= _room_of(recs, []) <= 2 * len(recs)


@needs_c
def test_an_image_restore_past_the_wide_threshold_equals_a_rebuild() -> None:
    """The vocabulary's gram lists doubled (a common gram in most of 9,000 distinct
    tokens): the state restored from the image is the one rebuilt by adds."""
    rows = [
        (i + 1, MemoryEntry(category=MemoryCategory.FACT, memory=f"common{i:05d}x word{i % 7}"))
        for i in range(9000)
    ]
    rebuilt = _loaded_image(WordOverlapScorer, rows, None)
    restored = _loaded_image(WordOverlapScorer, rows, _image(rebuilt))
    _assert_same(restored, rebuilt)


def _ids(path: Path, ids: list[int], seqs: list[int] | None = None) -> str:
    items = [
        MemoryEntry(category=MemoryCategory.FACT, memory=f"m {i}", id=uuid.UUID(int=ident))
        for i, ident in enumerate(ids)
    ]
    return _file(path, items, seqs)


def _checked(uri: str) -> list[Any]:
    out: list[Any] = []
    rows = _read(uri, True, ids_out=out)
    assert rows is not None
    return out


@needs_reader
@pytest.mark.parametrize("spread", [1, 3, 1000])
def test_the_presized_id_table_finds_the_same_ids_twice(tmp_path: Path, spread: int) -> None:
    """20,000 ids (the table doubled five times from 1,024 slots when not presized), seqs
    1 apart, 3 apart, or 1,000 apart (a range the file's size caps); an id twice at the
    start, in the middle, at the end, or none: the same answer with the table presized
    or grown, on huge pages or not."""
    crows: Any = sqlite_format._crows
    n = 20_000
    base = [(k * 0x9E3779B97F4A7C15 + 7) % 2**128 for k in range(1, n + 1)]
    cases = {"none": base}
    for name, (i, j) in {"start": (1, 0), "middle": (n // 2, 17), "end": (n - 1, n - 3)}.items():
        ids = list(base)
        ids[i] = ids[j]
        cases[name] = ids
    was = crows.id_presize(True), crows.id_huge(True)
    try:
        for name, ids in cases.items():
            uri = _ids(tmp_path / f"{name}.db", ids, [1 + spread * k for k in range(n)])
            got = set()
            for presize in (True, False):
                for huge in (True, False):
                    crows.id_presize(presize)
                    crows.id_huge(huge)
                    got.add(tuple(_checked(uri)))
            assert got == {(name == "none",)}, name
    finally:
        crows.id_presize(was[0])
        crows.id_huge(was[1])


@needs_reader
@pytest.mark.parametrize(
    "ids",
    [
        list(range(3000)),  # the zero id, then ids in a run
        [k << 64 for k in range(3000)],  # the low words all equal
        [uuid.UUID(bytes=bytes([k % 256]) * 16).int for k in range(256)],
    ],
)
def test_the_id_check_grows_or_presizes_alike(tmp_path: Path, ids: list[int]) -> None:
    """``test_open13_split``'s id lists, an id again at the end or not, both ways."""
    crows: Any = sqlite_format._crows
    was = crows.id_presize(True)
    try:
        for twice in (None, 0, len(ids) // 2, len(ids) - 1):
            more = [] if twice is None else [ids[twice]]
            uri = _ids(tmp_path / f"t{twice}.db", [*ids, *more])
            answers = set()
            for presize in (True, False):
                crows.id_presize(presize)
                answers.add(tuple(_checked(uri)))
            assert answers == {(twice is None,)}
    finally:
        crows.id_presize(was)


@needs_reader
def test_an_empty_file_and_a_single_row_are_checked_presized(tmp_path: Path) -> None:
    crows: Any = sqlite_format._crows
    was = crows.id_presize(True)
    try:
        assert _checked(_ids(tmp_path / "e.db", [])) == [True]
        assert _checked(_ids(tmp_path / "one.db", [5], [2**62])) == [True]  # range 1
        assert _checked(_ids(tmp_path / "two.db", [5, 6], [1, 2**62])) == [True]  # huge range
    finally:
        crows.id_presize(was)


@needs_reader
def test_the_presize_knob(tmp_path: Path) -> None:
    crows: Any = sqlite_format._crows
    was = crows.id_presize(True)
    try:
        with pytest.raises(TypeError, match="id_presize"):
            crows.id_presize(1)
        assert crows.id_presize(True) is True
        uri = _ids(tmp_path / "k.db", [1, 2, 3])
        with pytest.MonkeyPatch.context() as mp:  # the knob, set at each read
            mp.setattr(sqlite_format, "_ID_PRESIZE", False)
            assert sqlite_format._read_rows_c(uri) is not None
            assert crows.id_presize(True) is False
    finally:
        crows.id_presize(was)


def test_the_room_model_is_cpythons() -> None:
    """(The model the room assertions use; skipped where lists grow otherwise.)"""
    if not ROOMS:
        pytest.skip(f"lists grow otherwise on {sys.version}")
    assert _room(20_011, wide=True) != _room(20_011, wide=False)
    assert _room(WIDE_FROM - 1, wide=True) == _room(WIDE_FROM - 1, wide=False)


@needs_c
@pytest.mark.parametrize("missing", [0.0, 0.3])
def test_the_direct_duplicate_keys_are_the_tuples(missing: float) -> None:
    """``load_inserts``' duplicate keys from the items' hashes (``_DKEY_DIRECT``) equal
    the tuple's (the Python loop's, and the C path's with the knob off): texts repeated
    in several namespaces and categories, folds given or left to the core."""
    from actormem._engine import state as state_module

    wo: Any = state_module._kernels._wo
    rows: list[Any] = _with_folds(_plain_rows(7, 3000, keys=False), missing)
    got = {}
    with pytest.MonkeyPatch.context() as mp:
        for direct in (True, False):
            mp.setattr(state_module, "_DKEY_DIRECT", direct)
            got[direct], loaded_c, _ = _loaded(rows, True, mp)
            assert loaded_c > 0
            assert wo.dkey_direct(direct) is direct  # set by the load
        python, _, _ = _loaded(rows, False, mp)
    assert len(python._dup_keys) > 0  # some texts repeat (the test compares groups)
    for state in got.values():
        _assert_same(state, python)
        assert _layout(state) == _layout(python)
    with pytest.raises(TypeError, match="dkey_direct"):
        wo.dkey_direct(1)
    wo.dkey_direct(True)


@needs_c
def test_the_direct_key_follows_tuplehash_at_the_folds_ends() -> None:
    """``dup_key_folded`` (the tuple) against a load's direct key for folds at the ends
    of ``[0, 2**62)`` and around 2**61 - 1 (the int hash's modulus)."""
    from actormem._engine import state as state_module

    folds = [0, 1, 2**61 - 2, 2**61 - 1, 2**61, 2**61 + 5, 2**62 - 1]
    rows = []
    for i in range(len(folds)):
        e = MemoryEntry(category=MemoryCategory.FACT, memory=f"text {i}", namespace=("n",))
        rows.append((i + 1, e))
    # (folds that are not the texts': the state's _check would refold them, so none)
    folded = FoldedRows(rows, struct.pack(f"={len(rows)}Q", *folds))
    want = sorted(  # (0 and 2**61 - 1 hash alike, as do 1 and 2**61: one group each)
        {
            textfold._dup_key_folded_c(e.namespace, e.category._value_, e.memory, None, None, f)
            for (_, e), f in zip(rows, folds, strict=True)
        }
    )
    assert len(want) == 4
    for direct in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(state_module, "_DKEY_DIRECT", direct)
            mp.setattr(state_module, "_LOAD_C", True)
            state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            state.load(folded)
        assert sorted(state._dups) == want, direct
    assert state_module._kernels._wo.dkey_direct(True) is False


@needs_c
@pytest.mark.parametrize("start", [0, 3, 20])
@pytest.mark.parametrize("twice", [None, 0, 5, 7, 8, 9, 31, 299])
def test_index_from_with_its_look_ahead_fills_and_undoes_alike(
    start: int, twice: int | None
) -> None:
    """``GroupTable.index_from`` with the tags taken 8 numbers ahead (``group_ahead``)
    and without: the same table, or the same error (a text twice, before, at and past
    the look-ahead's first 8 numbers; a number that carries no text) and the same undo."""
    from .test_entrybytes5 import SLOTS, GroupTable, _record

    wo: Any = state_module._kernels._wo
    was = wo.group_ahead(True)
    try:
        seen = {}
        for on in (True, False):
            wo.group_ahead(on)
            glist: list[Any] = [_record(f"t{i}", i) for i in range(start)]
            table = GroupTable(glist, *SLOTS)
            table.index_from(0)
            glist += [_record(f"u{i}", 1000 + i) for i in range(300)]
            if twice is not None:  # the text of another number: an error where it comes second
                glist[start + twice] = _record(f"u{(twice + 1) % 300}", 5000)
            error = None
            try:
                table.index_from(start)
            except ValueError as exc:
                error = str(exc)
            table._check()
            seen[on] = (error, sorted(table.items()))
        assert seen[True] == seen[False]
        assert (seen[True][0] is None) == (twice is None)
        assert len(seen[True][1]) == (start + 300 if twice is None else start)
        wo.group_ahead(True)
        glist = [_record(f"v{i}", i) for i in range(100)]
        table = GroupTable(glist, *SLOTS)
        glist[50] = None
        with pytest.raises(TypeError, match="carries no str text"):
            table.index_from(0)
        assert len(table) == 0
        table._check()
        with pytest.raises(TypeError, match="group_ahead"):
            wo.group_ahead(1)
    finally:
        wo.group_ahead(was)
