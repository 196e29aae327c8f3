"""Review of branch open52 (reviewer rev52c): the split row reader's thread reading each
column through its ``sqlite3_value`` (``_crows.column_values``) and folding the ASCII
texts four chains at a time over their compacted bytes (``_crows.fold_lanes``, compacted
by AVX-512 where the CPU has it).

* ``_crows.fold_wide(on)`` (``sqlite_format._FOLD_WIDE``): the branch-free compaction
  every CPU without AVX-512 VBMI2 runs can be taken by the reader on a CPU that has it,
  so that its path is read (and tested) here too; it never turns on where the CPU lacks
  it; ``read_file`` sets it at each read.
* The values every way (column values, lanes, wide) over texts built of whitespace runs
  across the 64-byte steps, several hundred bytes long (longer than open52's tests).
* Hostile files read the same way by every knob: a UTF-16 file (the values' texts
  converted in place by ``sqlite3_value_text``), and odd values in a file of the real
  schema (a BLOB, an INTEGER, a NUL, bytes not UTF-8, a text over the limit) through
  ``read_file``, the whole open: the same entries or the same error.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem._errors import StorageError
from actormem._index import textfold
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import encode_record
from tests.strategies import examples

from .test_open14_folds import _check_folds, _entry, _read_folds

crows = sqlite_format._crows
needs_reader = pytest.mark.skipif(
    crows is None or textfold._dup_key_folded_c is None,
    reason="the compiled row reader or word overlap core is not built",
)

KNOBS = ("column_values", "fold_lanes", "fold_wide")


@pytest.fixture
def knobs_restored() -> Iterator[None]:
    assert crows is not None
    was = {name: getattr(crows, name)(True) for name in KNOBS}
    for name, value in was.items():
        getattr(crows, name)(value)
    yield
    for name, value in was.items():
        getattr(crows, name)(value)


#: str.split's ASCII whitespace, and bytes next to it or cased
WHITE = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
NEAR = "\x00\x08\x0e\x1b!@AZ[`az{\x7f"
RUN = st.one_of(
    st.text(alphabet=st.sampled_from(WHITE), min_size=1, max_size=140),
    st.text(alphabet=st.sampled_from(NEAR), min_size=1, max_size=70),
    st.text(alphabet=st.characters(max_codepoint=127), min_size=1, max_size=70),
)
#: ASCII texts of runs, up to ~1,500 bytes: whitespace runs across the 64-byte steps
RUNS = st.lists(RUN, max_size=14).map("".join)


@needs_reader
def test_fold_wide_is_a_knob_that_never_turns_on_without_the_cpu(
    knobs_restored: object,
) -> None:
    assert crows is not None
    able = crows.fold_wide(True)
    able = crows.fold_wide()  # what this CPU (and build) can do
    assert crows.fold_wide(False) is able
    assert crows.fold_wide() is False
    assert crows.fold_wide(False) is False
    assert crows.fold_wide(True) is False
    assert crows.fold_wide() is able
    for bad in (1, 0, "yes", 1.0):
        with pytest.raises(TypeError, match="must be a bool"):
            crows.fold_wide(bad)
    assert crows.fold_wide() is able
    # fold_many's `wide` is the CPU's, whatever the knob says
    crows.fold_wide(False)
    texts = [b" A \t b  " * 20, b"", b"\x1f" * 65, b"x" * 129]
    want = [textfold.fold_hash(t.decode()) for t in texts]
    assert crows.fold_many(texts, True) == crows.fold_many(texts, False) == want


@needs_reader
@settings(max_examples=examples(400), deadline=None)
@given(texts=st.lists(RUNS, max_size=13))
def test_the_lanes_fold_long_runs_of_whitespace_alike(texts: list[str]) -> None:
    assert crows is not None
    want = [textfold.fold_hash(t) for t in texts]
    assert want == [textfold.fold_hash_python(t) for t in texts]
    raw = [t.encode() for t in texts]
    assert crows.fold_many(raw, True) == want
    assert crows.fold_many(raw, False) == want


def _file(path: Path, items: list[Any], encoding: str | None = None, *sql: str) -> Path:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    if encoding:
        conn.execute(f"PRAGMA encoding = '{encoding}'")
    for statement in sqlite_format.CREATE_SCHEMA:
        conn.execute(statement)
    rows = [encode_record(Record(e, i, i)) for i, e in enumerate(items, 1)]
    conn.execute("BEGIN")
    conn.executemany(sqlite_format.INSERT_ENTRY, rows)
    for statement in sql:
        conn.execute(statement)
    conn.execute("COMMIT")
    conn.close()
    return path


def _every_way(path: Path) -> dict[tuple[bool, ...], Any]:
    """The compiled reader's rows and folds (or None) for every setting of the knobs."""
    assert crows is not None
    uri = sqlite_format.file_uri(str(path)) + "?mode=ro"
    got: dict[tuple[bool, ...], Any] = {}
    for values in (True, False):
        for lanes in (True, False):
            for wide in (True, False):
                crows.column_values(values)
                crows.fold_lanes(lanes)
                crows.fold_wide(wide)
                rows, out = _read_folds(uri)
                if rows is None:
                    got[values, lanes, wide] = None
                    continue
                _check_folds(rows, out[0])
                got[values, lanes, wide] = (
                    [(s, e._id, e.memory, e.tags, e.namespace, e.key, e.value) for s, e in rows],
                    [(e.created_at, e.updated_at, e.relevance, e.access_count) for _, e in rows],
                    out[0],
                )
    return got


@needs_reader
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(RUNS, min_size=1, max_size=600))
def test_the_reader_folds_runs_alike_every_way(
    tmp_path: Path, texts: list[str], knobs_restored: object
) -> None:
    try:
        items = [_entry(t, i) for i, t in enumerate(texts)]
    except ValueError:  # a blank text: not an entry
        return
    got = _every_way(_file(tmp_path / "r.db", items))
    assert len({repr(v) for v in got.values()}) == 1
    assert next(iter(got.values())) is not None


def _items(n: int) -> list[Any]:
    words = ["Hello  World\t", "\u00e9t\u00e9 x", " a\x1fb\nc ", "x" * 5000 + "  Y", "\u4e2d\u6587"]
    return [_entry(f"{words[i % 5]} {i}", i) for i in range(n)]


@needs_reader
@pytest.mark.parametrize("encoding", ["UTF-16le", "UTF-16be"])
def test_a_utf16_file_is_read_alike_every_way(
    tmp_path: Path, encoding: str, knobs_restored: object
) -> None:
    # sqlite3_value_text converts a UTF-16 value to UTF-8 in place: the text, then its
    # length (sqlite3_value_bytes after), and the column read again (updated_at's
    # comparison with created_at) must still be the row's
    plain = _every_way(_file(tmp_path / "u8.db", _items(600)))
    got = _every_way(_file(tmp_path / "u16.db", _items(600), encoding))
    assert len({repr(v) for v in got.values()}) == 1
    assert repr(next(iter(got.values()))) == repr(next(iter(plain.values())))


#: odd values at seq 300 (the second chunk) of a file of the real schema
ODD = {
    "memory a blob": "UPDATE entries SET memory = CAST(memory AS BLOB) WHERE seq = 300",
    "memory with NULs": "UPDATE entries SET memory = CAST(X'41200000206263' AS TEXT) "
    "WHERE seq = 300",
    "memory not utf-8": "UPDATE entries SET memory = CAST(X'61ff6263' AS TEXT) WHERE seq = 300",
    "memory empty": "UPDATE entries SET memory = '' WHERE seq = 300",
    "memory blank": "UPDATE entries SET memory = ' \t\x1f ' WHERE seq = 300",
    "memory over the limit": "UPDATE entries SET memory = "
    "replace(hex(zeroblob(150000)), '00', 'A ') WHERE seq = 300",
    "id a blob": "UPDATE entries SET id = CAST(id AS BLOB) WHERE seq = 300",
    "relevance an integer": "UPDATE entries SET relevance = 1 WHERE seq = 300",
    "relevance a text": "UPDATE entries SET relevance = 'high' WHERE seq = 300",
    "access_count a real": "UPDATE entries SET access_count = 1.5 WHERE seq = 300",
    "access_count huge": "UPDATE entries SET access_count = 9223372036854775807 WHERE seq = 300",
    "created_at a blob": "UPDATE entries SET created_at = CAST(created_at AS BLOB) WHERE seq = 300",
    "updated_at an integer": "UPDATE entries SET updated_at = 5 WHERE seq = 300",
    "tags a blob": "UPDATE entries SET tags = X'00' WHERE seq = 300",
    "key a blob": "UPDATE entries SET key = X'6b' WHERE seq = 300",
}


def _open(path: Path) -> Any:
    try:
        rows, _ = sqlite_format.read_file(str(path), image=False)
    except StorageError as error:
        return ("refused", str(error))
    return [(s, e._id, e.memory, e.relevance, e.access_count, e.key) for s, e in rows]


@needs_reader
@pytest.mark.parametrize("encoding", [None, "UTF-16le"])
@pytest.mark.parametrize("odd", sorted(ODD))
def test_an_odd_value_opens_or_is_refused_alike_every_way(
    tmp_path: Path,
    odd: str,
    encoding: str | None,
    monkeypatch: pytest.MonkeyPatch,
    knobs_restored: object,
) -> None:
    path = _file(tmp_path / "o.db", _items(700), encoding, ODD[odd])
    got = _every_way(path)
    assert len({repr(v) for v in got.values()}) == 1
    opened = {}
    for on in (True, False):
        for name in ("_COLUMN_VALUES", "_FOLD_LANES", "_FOLD_WIDE"):
            monkeypatch.setattr(sqlite_format, name, on)
        opened[on] = _open(path)
    monkeypatch.setattr(sqlite_format, "_C_ROWS", False)  # the Python path alone
    assert opened[True] == opened[False] == _open(path)


@needs_reader
def test_read_file_sets_fold_wide_at_each_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knobs_restored: object
) -> None:
    assert crows is not None
    able = crows.fold_wide(True)
    able = crows.fold_wide()
    path = _file(tmp_path / "w.db", _items(300))
    got = {}
    for on in (False, True, False):
        monkeypatch.setattr(sqlite_format, "_FOLD_WIDE", on)
        crows.fold_wide(not on)
        rows, _ = sqlite_format.read_file(str(path), image=False)
        assert crows.fold_wide() is (on and able)
        got[on] = ([(s, e._id, e.memory) for s, e in rows], getattr(rows, "folds", None))
    assert got[True][1] is not None
    assert got[True] == got[False]
    assert os.path.exists(path)
