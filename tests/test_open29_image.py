"""Branch open29: the index image's blobs read by SQLite's incremental blob I/O (issue #20,
item 5).

``sqlite_format._IMAGE_BLOBS``: ``_read_image_quietly`` lists the image's parts
(``name, rowid, typeof(data)``) and reads each blob straight into its ``bytes``
(``Connection.blobopen``), in one read transaction, instead of ``SELECT name, data``
(one copy of the image less). Required: the same parts in the same order, the same
refusals (a name not text, a data not a blob), the same warnings and SQLite errors; a
caller's transaction left as it was, none left open otherwise.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import IMAGE_KEY, MARKER_MISMATCH, image_marker
from tests.strategies import examples

from .test_index_image import _image, _messy

KNOB = (True, False)


def _made(path: Path, rows: list[tuple[Any, Any]], marker: Any = None) -> sqlite3.Connection:
    path.unlink(missing_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
    conn.executemany("INSERT INTO index_image VALUES (?, ?)", rows)
    if marker is not None:
        conn.execute("INSERT INTO meta VALUES (?, ?)", (IMAGE_KEY, marker))
    return conn


def _both(conn: sqlite3.Connection, monkeypatch: pytest.MonkeyPatch) -> dict[bool, Any]:
    got = {}
    for on in KNOB:
        monkeypatch.setattr(sqlite_format, "_IMAGE_BLOBS", on)
        before = conn.in_transaction
        try:
            result: Any = sqlite_format._read_image_quietly(conn)
            if result[0] is not None:
                result = (list(result[0].items()), result[1])
        except sqlite3.Error as exc:
            result = (type(exc), str(exc))
        assert conn.in_transaction == before  # none left open, the caller's kept
        got[on] = result
    return got


def test_a_real_image_reads_alike(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parts = _image(_messy(WordOverlapScorer, 7, 80, 20))
    conn = _made(tmp_path / "i.db", list(parts.items()), image_marker(parts))
    got = _both(conn, monkeypatch)
    assert got[True] == got[False] == (list(parts.items()), "")
    conn.execute("UPDATE meta SET value = ?", (image_marker({**parts, "header": b"{}"}),))
    got = _both(conn, monkeypatch)
    assert got[True] == got[False] == (None, MARKER_MISMATCH)
    conn.close()


_INT = st.integers(-(2**63), 2**63 - 1)  # what SQLite stores
_NAME = st.one_of(st.text(max_size=8), st.binary(max_size=4), _INT, st.none())
_DATA = st.one_of(st.binary(max_size=300), st.text(max_size=8), _INT, st.floats(), st.none())


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(rows=st.lists(st.tuples(_NAME, _DATA), max_size=6), marked=st.booleans())
def test_any_table_reads_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: list[Any], marked: bool
) -> None:
    try:
        conn = _made(tmp_path / "h.db", rows)
    except sqlite3.IntegrityError:  # a name twice (or NULL): no such table
        return
    named = {n: d for n, d in rows if type(n) is str and type(d) is bytes}
    conn.execute("INSERT INTO meta VALUES (?, ?)", (IMAGE_KEY, image_marker(named)))
    if not marked:
        conn.execute("UPDATE meta SET value = ?", ("xxh3:" + "0" * 32,))
    got = _both(conn, monkeypatch)
    assert got[True] == got[False]
    if marked and rows and len(named) == len(rows):
        assert got[True] == (list(named.items()), "")
    conn.close()


@pytest.mark.parametrize(
    "bad",
    [("postings", "text"), ("postings", 7), ("postings", 1.5), ("postings", None),
     (b"n", b"x"), (None, b"x")],
)  # fmt: skip  (an int name is stored as text: the column's affinity)
def test_a_part_not_a_named_blob_is_not_an_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: tuple[Any, Any]
) -> None:
    parts = {"header": b"{}", "masks_lo": b"12345678"}
    for at in (0, 1, 2):  # first, between, last
        rows = list(parts.items())
        rows.insert(at, bad)
        named = {n: d for n, d in rows if type(n) is str and type(d) is bytes}
        conn = _made(tmp_path / "b.db", rows, image_marker(named))
        got = _both(conn, monkeypatch)
        assert got[True] == got[False] == (None, ""), (bad, at)
        conn.close()


def test_inside_a_callers_transaction_and_on_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parts = {"header": b"{}", "postings": b"1234", "empty": b""}
    path = tmp_path / "t.db"
    conn = _made(path, list(parts.items()), image_marker(parts))
    conn.execute("BEGIN")
    got = _both(conn, monkeypatch)  # the caller's transaction kept open
    assert got[True] == got[False] == (list(parts.items()), "")
    conn.execute("COMMIT")
    # a legacy-mode connection (implicit transactions), as other callers hold
    legacy = sqlite3.connect(path)
    assert _both(legacy, monkeypatch)[True] == (list(parts.items()), "")
    legacy.close()
    # a read-only connection of the open's kind
    ro = sqlite3.connect(sqlite_format.read_only_uri(str(path)), uri=True, isolation_level=None)
    got = _both(ro, monkeypatch)
    assert got[True] == got[False] == (list(parts.items()), "")
    ro.close()
    conn.execute("DROP TABLE index_image")  # an SQLite error: the same, no transaction left
    got = _both(conn, monkeypatch)
    assert got[True] == got[False]
    assert got[True][0] is sqlite3.OperationalError
    conn.close()
