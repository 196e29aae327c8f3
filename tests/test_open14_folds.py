"""The duplicate keys' fold hashes computed by the split reader's thread (issue #20,
branch ``open14``: ``sqlite_format._SPLIT_FOLDS``, ``state._LOAD_FOLDS``, the C
``dup_key_folded`` and ``read_entries(..., folds_out)``).

The thread folds each ASCII memory text from the bytes it copies (``_foldhash.h``, the
formula the word overlap core's ``fold_hash`` uses for an ASCII str); ``read_file``
hands the folds on beside the entries (``FoldedRows``) and ``MemoryState.load`` makes
each duplicate key from them. Every side must give the same folds, the same keys, the
same groups and the same opened memory as the load that folds the texts itself, and
a fold that is not given (a text that is not ASCII) must be computed from the text.
"""

from __future__ import annotations

import sqlite3
import struct
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import textfold
from actormem._storage import sqlite_format
from actormem._storage.sqlite_format import SELECT_ENTRIES, FoldedRows
from tests.strategies import examples

from .test_decode_c import QUERIES, _opened, _reader_args, imaged_copies
from .test_open13_split import _file, _texts, _threads
from .test_open_fast import _rows

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None or textfold._dup_key_folded_c is None,
    reason="the compiled row reader or word overlap core is not built",
)

NO_FOLD = 2**64 - 1

#: ASCII texts made of the characters the fold treats apart: every str.split
#: whitespace byte (0x1c-0x1f included), both cases, punctuation, digits.
ASCII = st.text(
    alphabet=st.sampled_from("aZbY 09.,\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f_-!~\x7f\x01"),
    min_size=1,
    max_size=120,
)
#: Texts that are not ASCII: special folds (one code point to two or three), cased
#: letters of several scripts, Unicode whitespace (U+00A0, U+2003, U+3000, U+0085),
#: astral code points; and any text at all.
SPECIAL = st.text(
    alphabet=st.sampled_from(
        "aB \u00df\ufb01\u03a3\u03c2\u0130\u0131\u1e9e\u00a0\u2003\u3000\u0085"
        "\u00c9\u4e2d\U0001f600\U00010400\u1f88\u0390\t"
    ),
    min_size=1,
    max_size=80,
)
ANY = st.one_of(ASCII, SPECIAL, st.text(min_size=1, max_size=60))


def _entry(text: str, i: int, **kw: Any) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=text,
        id=uuid.UUID(int=i + 1),
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
        **kw,
    )


def _read_folds(uri: str, split: bool = True) -> tuple[Any, list[bytes]]:
    assert sqlite_format._crows is not None
    out: list[bytes] = []
    rows = sqlite_format._crows.read_entries(
        uri, SELECT_ENTRIES, *_reader_args(), True, split, None, out
    )
    return rows, out


#: The thread folds a text that is not ASCII too (per code point, CPython's case
#: tables) where the core does so itself (before 3.13; after, ``casefold()`` first).
FOLDS_ALL = sys.version_info < (3, 13)


def _check_folds(rows: list[tuple[int, MemoryEntry]], folds: bytes) -> None:
    values = struct.unpack(f"={len(rows)}Q", folds)
    for (_, entry), fold in zip(rows, values, strict=True):
        if entry.memory.isascii() or FOLDS_ALL:
            assert (
                fold == textfold.fold_hash(entry.memory) == textfold.fold_hash_python(entry.memory)
            )
        else:
            assert fold == NO_FOLD


@needs_reader
@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 2049, 2300])
def test_the_thread_folds_every_ascii_text_around_the_chunks(tmp_path: Path, n: int) -> None:
    uri = _file(tmp_path / "f.db", _texts(n))
    rows, out = _read_folds(uri)
    assert _threads() == 0
    assert len(out) == 1
    assert len(out[0]) == 8 * n
    _check_folds(rows, out[0])
    if n >= 5:  # both kinds of text met
        values = struct.unpack(f"={n}Q", out[0])
        assert (NO_FOLD in values) != FOLDS_ALL  # the thread folded them all, or not
        assert any(v != NO_FOLD for v in values)
    one, nothing = _read_folds(uri, split=False)
    assert nothing == []  # the one-thread reader folds nothing
    assert [e._id for _, e in one] == [e._id for _, e in rows]


@needs_reader
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(texts=st.lists(ANY, min_size=1, max_size=40))
def test_any_text_is_folded_as_fold_hash_folds_it(tmp_path: Path, texts: list[str]) -> None:
    path = tmp_path / "h.db"
    path.unlink(missing_ok=True)
    try:
        items = [_entry(t, i) for i, t in enumerate(texts)]
    except ValueError:  # a text the entry refuses (blank): not a row of any file
        return
    rows, out = _read_folds(_file(path, items))
    assert rows is not None
    assert len(out) == 1
    _check_folds(rows, out[0])


@needs_reader
def test_folds_out_is_left_alone_unless_every_row_was_read(tmp_path: Path) -> None:
    assert sqlite_format._crows is not None
    uri = _file(tmp_path / "d.db", _texts(600))
    odd = SELECT_ENTRIES.replace("SELECT seq, id,", "SELECT seq, upper(id),")
    out: list[bytes] = []
    assert (
        sqlite_format._crows.read_entries(uri, odd, *_reader_args(), True, True, None, out) is None
    )
    assert out == []
    with pytest.raises(TypeError, match="folds_out"):
        sqlite_format._crows.read_entries(
            uri, SELECT_ENTRIES, *_reader_args(), True, True, None, ()
        )
    assert _threads() == 0


@needs_reader
@settings(max_examples=examples(200), deadline=None)
@given(
    text=ANY,
    ns=st.sampled_from([(), ("a",), ("a", "b")]),
    key=st.one_of(st.none(), st.text(min_size=1, max_size=5)),
)
def test_dup_key_folded_is_dup_key(text: str, ns: tuple[str, ...], key: str | None) -> None:
    dup, dup_f = textfold._dup_key_c, textfold._dup_key_folded_c
    assert dup is not None
    assert dup_f is not None
    want = dup(ns, "fact", text, key, None)
    assert want == state_module._dup_key(ns, "fact", textfold.fold_hash_python(text), key, None)
    fold = textfold.fold_hash(text)
    assert dup_f(ns, "fact", text, key, None, fold) == want
    for none in (NO_FOLD, -1, 2**62, 2**200, -(2**70)):  # not a fold: computed from the text
        assert dup_f(ns, "fact", text, key, None, none) == want
    # a fold in range is trusted: another one gives another key (the caller vouches)
    other = dup_f(ns, "fact", text, key, None, fold ^ 1)
    assert other == state_module._dup_key(ns, "fact", fold ^ 1, key, None)


@needs_reader
def test_dup_key_folded_refuses_bad_arguments() -> None:
    dup_f = textfold._dup_key_folded_c
    assert dup_f is not None
    with pytest.raises(TypeError, match="str"):
        dup_f((), "fact", b"bytes", None, None, 1)
    with pytest.raises(TypeError, match="int"):
        dup_f((), "fact", "text", None, None, 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="int"):
        dup_f((), "fact", "text", None, None, True)  # not an exact int
    with pytest.raises(TypeError, match="6 arguments"):
        dup_f((), "fact", "text", None, None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unhashable"):
        dup_f([], "fact", "text", None, None, 1)


def _groups(state: MemoryState) -> list[tuple[int, list[int]]]:
    return sorted((k, sorted(r.seq for r in state._dup_group(k))) for k in state._dups)


def _loaded(rows: list[tuple[int, MemoryEntry]]) -> MemoryState:
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    state.load(rows)
    state._check()
    return state


@needs_reader
@pytest.mark.parametrize("split", [True, False])
def test_read_file_hands_the_folds_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, split: bool
) -> None:
    path = tmp_path / "r.db"
    _file(path, _texts(700))
    monkeypatch.setattr(sqlite_format, "_SPLIT_READ", split)
    rows, _ = sqlite_format.read_file(str(path), image=False)
    assert (type(rows) is FoldedRows) == split
    if split:
        assert isinstance(rows, FoldedRows)
        _check_folds(rows, rows.folds)
    monkeypatch.setattr(sqlite_format, "_SPLIT_FOLDS", False)
    plain, _ = sqlite_format.read_file(str(path), image=False)
    assert type(plain) is list
    assert [(s, e._id, e.memory) for s, e in plain] == [(s, e._id, e.memory) for s, e in rows]


@needs_reader
def test_a_load_with_the_folds_keys_the_groups_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # twins by case and whitespace (ASCII and not), keys and values that split them
    texts = ["Plain  Text", "plain text", " PLAIN\ttext ", "\u00c9t\u00e9 x", "\u00e9T\u00c9  X"]
    items = [
        _entry(t, i, key=f"k{i}" if i % 11 == 3 else None)
        for i, t in enumerate(texts * 60 + [f"w{i % 17} Z" for i in range(300)])
    ]
    path = tmp_path / "g.db"
    _file(path, items)
    rows, _ = sqlite_format.read_file(str(path), image=False)
    assert isinstance(rows, FoldedRows)
    with_folds = _loaded(rows)
    monkeypatch.setattr(state_module, "_LOAD_FOLDS", False)
    without = _loaded(rows)
    plain = _loaded(list(rows))
    assert _groups(with_folds) == _groups(without) == _groups(plain)
    assert len(with_folds._dup_keys) >= 17
    assert with_folds._dup_keys == without._dup_keys
    monkeypatch.setattr(state_module, "_LOAD_FOLDS", True)
    # folds of the wrong length are not used: the same groups
    short = FoldedRows(rows, rows.folds[:-8])
    assert _groups(_loaded(short)) == _groups(plain)
    # the folds are what the load keys by: zeroed folds give other groups (so the
    # tests above compare the path they name)
    zeroed = FoldedRows(rows, bytes(len(rows.folds)))
    wrong = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    wrong.load(zeroed)
    assert _groups(wrong) != _groups(plain)
    with pytest.raises(AssertionError):  # and the state's own check sees it
        wrong._check()


@needs_reader
async def test_an_open_with_the_thread_folds_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = [
        _entry(m, 10**6 + i)
        for i, m in enumerate(
            ("\u00e9t\u00e9 \U0001f600", "x", "A Mixed Case ASCII text", "a mixed  CASE ascii TEXT")
        )
    ]
    copies = await imaged_copies(tmp_path, _rows(14, 700), extra)
    seen: list[bool] = []
    real = MemoryState._load_bulk

    def spy(self: MemoryState, rows: Any, **kw: Any) -> Any:
        seen.append(isinstance(rows, FoldedRows))
        return real(self, rows, **kw)

    monkeypatch.setattr(MemoryState, "_load_bulk", spy)
    new = await _opened(copies[0])
    monkeypatch.setattr(sqlite_format, "_SPLIT_FOLDS", False)
    old = await _opened(copies[1])
    assert seen[0] is True
    assert seen[-1] is False
    assert new == old


async def _opened_stale(path: str) -> tuple[Any, ...]:
    """What :func:`_opened` reads, of a file whose image was not used."""
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        state = memory._state
        state._check()
        assert memory._storage is not None
        assert not memory._storage.image_fresh  # the image was refused, the index rebuilt
        view = state.view()
        hits = [
            [(h.entry.id, h.score) for h in await memory.retrieve_scored(q, 20)] for q in QUERIES
        ]
        return [view.entry(r) for r in view.records()], _groups(state), hits


@needs_reader
async def test_a_stale_image_is_still_rebuilt_with_the_folds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    copies = await imaged_copies(tmp_path, _rows(15, 500))
    for copy in copies:  # a row changed behind the image's back: stale
        conn = sqlite3.connect(copy)
        conn.execute(
            "UPDATE entries SET memory = 'Changed  TEXT' WHERE seq = (SELECT max(seq) FROM entries)"
        )
        conn.commit()
        conn.close()
    new = await _opened_stale(copies[0])
    assert "was not used" in caplog.text
    monkeypatch.setattr(sqlite_format, "_SPLIT_FOLDS", False)
    old = await _opened_stale(copies[1])
    assert new == old


@needs_reader
@pytest.mark.parametrize(
    "raw",
    ["ff41", "c0af", "eda080", "e282", "f4908080", "41e2", "f0828282"],  # not strict UTF-8
)
@pytest.mark.parametrize("at", [1, 300, 700])
def test_a_text_that_is_not_utf8_declines_and_folds_nothing(
    tmp_path: Path, raw: str, at: int
) -> None:
    path = tmp_path / "u.db"
    uri = _file(path, _texts(700))
    conn = sqlite3.connect(path)
    conn.execute(f"UPDATE entries SET memory = CAST(X'{raw}' AS TEXT) WHERE seq = {at}")
    conn.commit()
    conn.close()
    rows, out = _read_folds(uri)
    assert rows is None
    assert out == []
    assert _threads() == 0
