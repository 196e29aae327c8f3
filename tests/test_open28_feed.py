"""The bulk load fed while the file is read (branch ``open28``).

``MemoryState.feed_ahead``'s :class:`~actormem._engine.state._BulkFeed` loads the rows
read so far into a scratch state (``read_file``'s ``consume``, called whenever the
split reader's next chunk is not ready); ``MemoryState.load`` takes its tables over only
when the file's rows are that very list, all bulk-loadable. These tests feed by hand in
runs (deterministic), then open real files with the feed on and off: the same state,
index and errors as a load without it, and as a rebuild.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem._engine.state as state_module
from actormem import (
    BM25Scorer,
    MemoryCategory,
    MemoryEntry,
    WordOverlapScorer,
    open_memory,
)
from actormem._engine.state import MemoryState
from actormem._index import persist
from actormem._index.scoring import Scorer
from actormem._index.textfold import fold_hash
from actormem._storage import sqlite_format

from .setups import change_first_text, refused_alike, stale_opens_alike
from .strategies import examples
from .test_index_image import _image
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same, _rows, _state


def _folds(rows: list[tuple[int, MemoryEntry]]) -> bytearray:
    """The rows' fold hashes as the split reader hands them (8 bytes a row)."""
    return bytearray(struct.pack(f"={len(rows)}Q", *(fold_hash(e.memory) for _, e in rows)))


def _fed(
    scorer: Scorer,
    rows: list[tuple[int, MemoryEntry]],
    cuts: list[int],
    image: Any = None,
    folds: bool = True,
) -> tuple[MemoryState, bool]:
    """A state loaded from ``rows`` (with ``image``) after its feed was handed the list
    growing to each of ``cuts`` in turn (as the reader's list grows); whether the load
    took the feed's tables."""
    state = _state(scorer, None)
    feed = state.feed_ahead()
    assert feed is not None
    grow: list[tuple[int, MemoryEntry]] = []
    buf = bytearray()
    for cut in sorted(cuts):
        grow.extend(rows[len(grow) : cut])
        if folds:
            buf = _folds(grow)
        feed(grow, buf)
    grow.extend(rows[len(grow) :])
    state.load(grow, image, None, feed)
    return state, feed.taken


@pytest.mark.parametrize("make", [WordOverlapScorer, BM25Scorer])
@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 160),
    cuts=st.lists(st.integers(0, 160), max_size=6),
    keys=st.booleans(),
    folds=st.booleans(),
    clash=st.none() | st.tuples(st.integers(0, 159), st.integers(0, 159)),
)
def test_a_fed_load_is_the_bulk_load(
    make: type[Scorer],
    seed: int,
    n: int,
    cuts: list[int],
    keys: bool,
    folds: bool,
    clash: tuple[int, int] | None,
) -> None:
    """Rows fed in runs of any length (keyed, expiring, repeated texts, namespaces; with
    and without fold hashes), the rest at the load: the state of a load without a feed.
    Rows whose keys repeat (``clash``: a later row given an earlier one's namespace and
    key, maybe in another run) are not bulk-loadable: the feed is dropped, the same
    state (an upsert)."""
    rows = _rows(seed, n, keys)
    if clash is not None and n >= 2:
        i, j = sorted((clash[0] % n, clash[1] % n))
        if i != j:
            seq, entry = rows[j]
            first = rows[i][1]
            rows[j] = (seq, attrs.evolve(entry, namespace=first.namespace, key=f"clash{i}"))
            rows[i] = (rows[i][0], attrs.evolve(first, key=f"clash{i}"))
    want = _state(make(), None)
    want.load(rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state_module, "_FEED_MIN", 1)
        got, taken = _fed(make(), rows, [min(c, n) for c in cuts], folds=folds)
    _assert_same(got, want)
    fed_any = any(0 < min(c, n) for c in cuts)
    assert taken == (fed_any and want._bulk_loadable(rows))


def test_a_fed_load_restores_the_image_as_rebuilt() -> None:
    """With the image: the index restored over the fed records equals a rebuild."""
    rows = _rows(7, 400, keys=False)
    rebuilt = _state(WordOverlapScorer(), None)
    rebuilt.load(rows)
    parts = _image(rebuilt)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state_module, "_FEED_MIN", 1)
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)  # the digest's thread too
        got, taken = _fed(WordOverlapScorer(), rows, [1, 150, 399], parts)
    assert taken
    assert got.index is not rebuilt.index
    _assert_same(got, rebuilt)
    _no_threads_left()


def test_rows_fed_then_changed_are_not_taken() -> None:
    """The load's rows are not the list fed (another list; one of its rows replaced):
    nothing of the feed is used, the state is the plain load's."""
    rows = _rows(3, 200, keys=False)
    want = _state(WordOverlapScorer(), None)
    want.load(rows)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state_module, "_FEED_MIN", 1)
        state = _state(WordOverlapScorer(), None)
        feed = state.feed_ahead()
        assert feed is not None
        fed = rows[:120]
        feed(fed, bytearray())
        assert feed.at == 120
        assert feed([*rows], bytearray()) is False  # another list: the feed ends
        assert feed.failed
        state.load(list(rows), None, None, feed)
    _assert_same(state, want)


def test_a_feed_meeting_an_id_twice_leaves_the_error_to_the_load() -> None:
    """A row whose id an earlier row has: the feed ends quietly; the load raises the
    error a load without a feed raises."""
    rows = _rows(5, 100, keys=False)
    seq, entry = rows[60]
    rows[60] = (seq, attrs.evolve(entry, id=rows[10][1].id))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(state_module, "_FEED_MIN", 1)
        state = _state(WordOverlapScorer(), None)
        feed = state.feed_ahead()
        assert feed is not None
        assert feed(rows, bytearray()) is False
        assert feed.failed
        with pytest.raises(ValueError, match="stored already") as fed_error:
            state.load(rows, None, None, feed)
    with pytest.raises(ValueError, match="stored already") as plain_error:
        _state(WordOverlapScorer(), None).load(rows)
    assert str(fed_error.value) == str(plain_error.value)


def test_no_feed_for_a_bounded_state_or_with_the_knob_off(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _state(WordOverlapScorer(), 10).feed_ahead() is None
    monkeypatch.setattr(state_module, "_FEED_AHEAD", False)
    assert _state(WordOverlapScorer(), None).feed_ahead() is None


def test_the_image_sizes_the_tables_within_the_file() -> None:
    """The header's row count sizes the tables, believed up to the file's size over
    ``_FEED_ROW_BYTES``; a header without one (or not JSON) sizes nothing."""
    feed = _state(WordOverlapScorer(), None).feed_ahead()
    assert feed is not None
    feed.expect({"header": b'{"rows": 10000000}'}, 32 * 1000)
    assert feed.hint == 1000
    for header in (b"[", b'{"rows": "9"}', b'{"rows": -1}', b"{}"):
        other = _state(WordOverlapScorer(), None).feed_ahead()
        assert other is not None
        other.expect({"header": header}, 10**9)
        assert other.hint is None


# -- the compiled reader's list and fold buffer --------------------------------------


async def _made(db: Path, n: int, keyed: bool = False) -> None:
    async with open_memory(path=db) as memory:
        await memory.store_many(
            [
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=f"note {i % 97} about item {i} and the garden",
                    namespace=("a",) if i % 3 else (),
                    key=f"k{i}" if keyed and i % 5 == 0 else None,
                )
                for i in range(n)
            ]
        )


def _uri(db: Path) -> str:
    return sqlite_format.read_only_uri(str(db))


@pytest.mark.skipif(sqlite_format._crows is None, reason="no compiled reader")
def test_the_reader_fills_the_callers_list_and_folds(tmp_path: Path) -> None:
    """``rows_out``/``fold_buf``: the list returned is the caller's; every time ``idle``
    runs, the buffer holds the fold of each row in the list; the same rows and folds as
    without them. A list or buffer not empty, or of another type: TypeError."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 3000)
    plain_folds: list[bytes] = []
    plain = sqlite_format._read_rows_c(_uri(db), None, plain_folds)
    assert plain is not None
    sink: tuple[list[Any], bytearray] = ([], bytearray())
    seen: list[int] = []

    def idle() -> bool:
        rows, buf = sink
        assert len(buf) == 8 * len(rows)
        seen.append(len(rows))
        return False

    folds: list[bytes] = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
        got = sqlite_format._read_rows_c(_uri(db), None, folds, idle, sink)
    assert got is sink[0]
    assert got == plain
    assert folds == plain_folds
    assert bytes(sink[1]) == plain_folds[0]
    for bad in (([1], bytearray()), ((), bytearray()), ([], bytearray(b"x")), ([], b"")):
        with pytest.raises(TypeError):
            sqlite_format._read_rows_c(_uri(db), None, [], None, bad)  # type: ignore[arg-type]


@pytest.mark.skipif(sqlite_format._crows is None, reason="no compiled reader")
def test_a_list_changed_by_idle_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 3000)
    sink: tuple[list[Any], bytearray] = ([], bytearray())

    def idle() -> bool:
        # Any change to the caller's list, at whichever wait idle is called: the first
        # wait comes before chunk 0 (the reader's thread has just started) while the
        # list is still empty; after it, the reader may stay ahead of this loop to the
        # end (so no later wait: seen under AddressSanitizer once the reader got faster).
        rows = sink[0]
        rows.append(rows[0] if rows else None)
        return False

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
        with pytest.raises(RuntimeError, match="rows_out changed"):
            sqlite_format._read_rows_c(_uri(db), None, [], idle, sink)
    _no_threads_left()


# -- whole opens ----------------------------------------------------------------------


async def _state_of(db: Path, make: type[Scorer]) -> tuple[MemoryState, bool]:
    async with open_memory(path=db, scorer=make()) as memory:
        assert memory._storage is not None
        return memory._state, memory._storage.image_fresh


@pytest.mark.parametrize("make", [WordOverlapScorer, BM25Scorer])
@pytest.mark.parametrize("keyed", [False, True])
def test_opens_with_and_without_the_feed_agree(
    tmp_path: Path, make: type[Scorer], keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file opened (its image restored) with the feed on, small runs and few chunks
    ahead, and with it off: the same state and index; keys (a bulk load all the same)
    or not; no thread left."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 4000, keyed)
    trio.run(_state_of, db, make)  # the image of this scorer written at the close
    pristine = db.read_bytes()
    monkeypatch.setattr(state_module, "_FEED_MIN", 1)
    monkeypatch.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
    states = {}
    for on in (True, False):
        monkeypatch.setattr(state_module, "_FEED_AHEAD", on)
        db.write_bytes(pristine)
        states[on], fresh = trio.run(_state_of, db, make)
        assert fresh
    _assert_same(states[True], states[False])
    _no_threads_left()


def test_a_stale_image_with_the_feed_opens_as_without(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stale image (a text changed behind actormem's back): not used, the same
    warnings and state with the feed on and off."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 3000)
    monkeypatch.setattr(state_module, "_FEED_MIN", 1)
    monkeypatch.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
    stale_opens_alike(
        db,
        db.read_bytes(),
        caplog,
        lambda on: monkeypatch.setattr(state_module, "_FEED_AHEAD", on),
        change_first_text,
    )


def test_an_id_twice_in_the_file_is_refused_with_the_feed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file with one id on two rows: the same error with the feed on and off."""
    import sqlite3

    db = tmp_path / "m.db"
    trio.run(_made, db, 3000)
    conn = sqlite3.connect(db)
    try:
        (first,) = conn.execute("SELECT id FROM entries ORDER BY seq LIMIT 1").fetchone()
        conn.execute(
            "UPDATE entries SET id = ? WHERE seq = (SELECT MAX(seq) FROM entries)", (first,)
        )
        conn.commit()
    finally:
        conn.close()
    pristine = db.read_bytes()
    monkeypatch.setattr(state_module, "_FEED_MIN", 1)
    monkeypatch.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
    error = refused_alike(
        db, pristine, lambda on: monkeypatch.setattr(state_module, "_FEED_AHEAD", on)
    )
    assert "appears twice" in error
    _no_threads_left()
