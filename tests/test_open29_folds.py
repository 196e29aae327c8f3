"""Branch open29: the split reader's fold hashes two texts at a time (issue #20, item 5).

``_crows.fold_pairs`` (``sqlite_format._FOLD_PAIRS``): the reader's thread computes the
ASCII memory texts' fold hashes once a chunk's rows are copied, two texts' FNV chains
interleaved (``_foldhash.h``'s ``fold_hash_ascii_pair``), instead of one per row as it
copies it. Required: every fold the very value ``textfold.fold_hash`` gives (the core's
and the Python one), on both sides of the knob, around the chunks' edges and with any
mix of ASCII and other texts (a chunk's odd ASCII text folded alone).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem._index import textfold
from actormem._storage import sqlite_format
from tests.strategies import examples

from .test_open13_split import _file, _texts, _threads
from .test_open14_folds import ANY, ASCII, _check_folds, _entry, _read_folds

crows = sqlite_format._crows
needs_pairs = pytest.mark.skipif(
    crows is None or not hasattr(crows, "fold_pair") or textfold._dup_key_folded_c is None,
    reason="the compiled row reader or word overlap core is not built",
)


@pytest.fixture
def pairs_restored() -> Iterator[None]:
    assert crows is not None
    was = crows.fold_pairs(True)
    crows.fold_pairs(was)
    yield
    crows.fold_pairs(was)


@needs_pairs
@settings(max_examples=examples(200), deadline=None)
@given(a=st.one_of(ASCII, st.just("")), b=st.one_of(ASCII, st.just("")))
def test_a_pair_of_chains_gives_each_texts_fold_hash(a: str, b: str) -> None:
    assert crows is not None
    want = (textfold.fold_hash(a), textfold.fold_hash(b))
    assert want == (textfold.fold_hash_python(a), textfold.fold_hash_python(b))
    assert crows.fold_pair(a.encode(), b.encode()) == want
    assert crows.fold_pair(b.encode(), a.encode()) == want[::-1]


@needs_pairs
def test_fold_pair_and_the_knob_refuse_bad_arguments(pairs_restored: object) -> None:
    assert crows is not None
    with pytest.raises(ValueError, match="not ASCII"):
        crows.fold_pair("é".encode(), b"a")
    with pytest.raises(TypeError):
        crows.fold_pair("a", b"a")
    for bad in (1, 0, None, "yes"):
        with pytest.raises(TypeError, match="must be a bool"):
            crows.fold_pairs(bad)
    assert crows.fold_pairs(False) in (True, False)
    assert crows.fold_pairs(True) is False
    assert crows.fold_pairs(True) is True


def _both(uri: str) -> dict[bool, tuple[list[object], bytes]]:
    assert crows is not None
    got = {}
    for on in (True, False):
        crows.fold_pairs(on)
        rows, out = _read_folds(uri)
        assert len(out) == 1
        _check_folds(rows, out[0])
        got[on] = ([(s, e._id, e.memory) for s, e in rows], out[0])
    return got


@needs_pairs
@pytest.mark.parametrize("n", [1, 2, 3, 255, 256, 257, 513, 2300])
def test_the_reader_folds_alike_either_way_around_the_chunks(
    tmp_path: Path, n: int, pairs_restored: object
) -> None:
    got = _both(_file(tmp_path / "f.db", _texts(n)))
    assert got[True] == got[False]
    values = struct.unpack(f"={n}Q", got[True][1])
    assert any(v != 2**64 - 1 for v in values)
    assert _threads() == 0


@needs_pairs
@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(st.one_of(ASCII, ANY), min_size=1, max_size=300))
def test_any_mix_of_texts_folds_alike_either_way(
    tmp_path: Path, texts: list[str], pairs_restored: object
) -> None:
    path = tmp_path / "h.db"
    path.unlink(missing_ok=True)
    try:
        items = [_entry(t, i) for i, t in enumerate(texts)]
    except ValueError:  # a text the entry refuses (blank): not a row of any file
        return
    got = _both(_file(path, items))
    assert got[True] == got[False]


@needs_pairs
def test_read_file_sets_the_knob_at_each_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pairs_restored: object
) -> None:
    assert crows is not None
    path = tmp_path / "k.db"
    _file(path, _texts(300))
    folds = {}
    for on in (False, True):
        monkeypatch.setattr(sqlite_format, "_FOLD_PAIRS", on)
        crows.fold_pairs(not on)
        rows, _ = sqlite_format.read_file(str(path), image=False)
        assert crows.fold_pairs(not on) is on  # read_file set it
        folds[on] = getattr(rows, "folds", None)
    assert folds[True] is not None
    assert folds[True] == folds[False]
