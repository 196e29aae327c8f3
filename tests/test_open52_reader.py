"""Branch open52: the split row reader's thread, cheaper per row (issue #20, item 5).

* ``_crows.column_values`` (``sqlite_format._COLUMN_VALUES``): the thread reads each row's
  columns through their ``sqlite3_value`` (one ``sqlite3_column_value`` a column) instead
  of a ``sqlite3_column_*`` call for each type, text, length and number. Required: the
  same rows, and the same rows declined (odd types, NULLs, SQLite errors mid-scan), either
  way.
* ``_crows.fold_lanes`` (``sqlite_format._FOLD_LANES``): a chunk's ASCII texts' fold
  hashes over their compacted bytes (each byte folded, a whitespace run as one space:
  ``_foldhash.h``'s ``fold_ascii_compact``, or its AVX-512 form where the CPU has it),
  four plain FNV chains at a time. Required: every value ``textfold.fold_hash`` gives,
  whatever the whitespace (runs across a 64-byte step, leading, trailing, only), the
  lengths (around 64) and the count of texts (a lane refilled, the last ones alone).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem._index import textfold
from actormem._storage import sqlite_format
from tests.strategies import examples

from .test_open13_split import (
    _file,
    _texts,
    _threads_left,
    test_an_sqlite_error_or_an_odd_row_anywhere_declines_alike,
    test_every_odd_row_is_taken_or_declined_alike,
)
from .test_open14_folds import ANY, ASCII, _check_folds, _entry, _read_folds

crows = sqlite_format._crows
# (not skipped for a build without the knobs: a build of this branch has them)
needs_knobs = pytest.mark.skipif(
    crows is None or textfold._dup_key_folded_c is None,
    reason="the compiled row reader or word overlap core is not built",
)

#: every ASCII byte, whitespace (str.split's: space, 0x09-0x0D, 0x1C-0x1F) weighted up
WHITE = " \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"
BYTES = st.text(
    alphabet=st.one_of(
        st.sampled_from(WHITE), st.characters(min_codepoint=0, max_codepoint=127)
    ),
    max_size=300,
)


@pytest.fixture
def knobs_restored() -> Iterator[None]:
    assert crows is not None
    values = crows.column_values(True)
    lanes = crows.fold_lanes(True)
    crows.column_values(values)
    crows.fold_lanes(lanes)
    yield
    crows.column_values(values)
    crows.fold_lanes(lanes)


def _want(texts: list[str]) -> list[int]:
    return [textfold.fold_hash(t) for t in texts]


@needs_knobs
@settings(max_examples=examples(300), deadline=None)
@given(texts=st.lists(BYTES, max_size=11))
def test_the_lanes_give_each_texts_fold_hash(texts: list[str]) -> None:
    assert crows is not None
    want = _want(texts)
    assert want == [textfold.fold_hash_python(t) for t in texts]
    raw = [t.encode() for t in texts]
    assert crows.fold_many(raw, True) == want  # AVX-512 where the CPU has it
    assert crows.fold_many(raw, False) == want  # the branch-free loop


def _edges() -> list[str]:
    out = ["", " ", "a", " a", "a ", " a ", "\x1f\x1ca\x0b", "A" * 64, "Ab" * 40]
    for n in (62, 63, 64, 65, 127, 128, 129):
        out += [
            " " * n,
            " " * n + "x",
            "x" + " " * n,
            "x" + " " * n + "y",
            "y" * (n - 1) + "\t\n" + "Z" * 70,
            ("wOrd \t" * n)[:n],
            "".join(chr(c % 128) for c in range(n)),
        ]
    return out


@needs_knobs
@pytest.mark.parametrize("wide", [True, False])
def test_the_lanes_around_the_steps_and_the_lanes(wide: bool) -> None:
    assert crows is not None
    edges = _edges()
    for k in (1, 2, 3, 4, 5, 7, 8, 9, len(edges)):
        texts = edges[:k]
        assert crows.fold_many([t.encode() for t in texts], wide) == _want(texts)
        texts = edges[-k:][::-1]
        assert crows.fold_many([t.encode() for t in texts], wide) == _want(texts)


@needs_knobs
def test_the_knobs_and_fold_many_refuse_bad_arguments(knobs_restored: object) -> None:
    assert crows is not None
    with pytest.raises(ValueError, match="not ASCII"):
        crows.fold_many(["é".encode()], True)
    with pytest.raises(TypeError, match="bytes"):
        crows.fold_many(["a"], True)
    with pytest.raises(TypeError, match="list"):
        crows.fold_many((b"a",), True)
    with pytest.raises(TypeError, match="wide must be a bool"):
        crows.fold_many([b"a"], 1)
    assert crows.fold_many([], True) == []
    assert type(crows.fold_wide()) is bool
    for knob in (crows.column_values, crows.fold_lanes):
        for bad in (1, 0, None, "yes"):
            with pytest.raises(TypeError, match="must be a bool"):
                knob(bad)
        assert knob(False) in (True, False)
        assert knob(True) is False
        assert knob(True) is True


def _each_way(uri: str) -> dict[tuple[bool, bool], tuple[list[object], bytes]]:
    assert crows is not None
    got = {}
    for values in (True, False):
        for lanes in (True, False):
            crows.column_values(values)
            crows.fold_lanes(lanes)
            rows, out = _read_folds(uri)
            assert len(out) == 1
            _check_folds(rows, out[0])
            got[values, lanes] = (
                [(s, e._id, e.memory, e.tags, e.created_at, e.updated_at) for s, e in rows],
                out[0],
            )
    return got


@needs_knobs
@pytest.mark.parametrize("n", [1, 3, 4, 5, 255, 256, 257, 2300])
def test_the_reader_reads_and_folds_alike_every_way(
    tmp_path: Path, n: int, knobs_restored: object
) -> None:
    got = _each_way(_file(tmp_path / "f.db", _texts(n)))
    assert len({repr(v) for v in got.values()}) == 1
    assert _threads_left() == 0


@needs_knobs
@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(st.one_of(ASCII, ANY, BYTES), min_size=1, max_size=300))
def test_any_mix_of_texts_reads_and_folds_alike_every_way(
    tmp_path: Path, texts: list[str], knobs_restored: object
) -> None:
    path = tmp_path / "h.db"
    path.unlink(missing_ok=True)
    try:
        items = [_entry(t, i) for i, t in enumerate(texts)]
    except ValueError:  # a text the entry refuses (blank): not a row of any file
        return
    got = _each_way(_file(path, items))
    assert len({repr(v) for v in got.values()}) == 1


@needs_knobs
@pytest.mark.parametrize("values", [True, False])
def test_odd_rows_are_taken_or_declined_alike_either_way(
    tmp_path: Path, values: bool, knobs_restored: object
) -> None:
    assert crows is not None
    crows.column_values(values)
    test_every_odd_row_is_taken_or_declined_alike(tmp_path)
    for at in (1, 300, 2300):
        where = tmp_path / str(at)
        where.mkdir()
        test_an_sqlite_error_or_an_odd_row_anywhere_declines_alike(where, at)


@needs_knobs
def test_read_file_sets_the_knobs_at_each_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knobs_restored: object
) -> None:
    assert crows is not None
    path = tmp_path / "k.db"
    _file(path, _texts(300))
    got = {}
    for on in (False, True):
        monkeypatch.setattr(sqlite_format, "_COLUMN_VALUES", on)
        monkeypatch.setattr(sqlite_format, "_FOLD_LANES", on)
        crows.column_values(not on)
        crows.fold_lanes(not on)
        rows, _ = sqlite_format.read_file(str(path), image=False)
        assert crows.column_values(not on) is on  # read_file set them
        assert crows.fold_lanes(not on) is on
        got[on] = ([(s, e._id, e.memory) for s, e in rows], getattr(rows, "folds", None))
    assert got[True][1] is not None
    assert got[True] == got[False]
