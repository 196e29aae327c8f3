"""The open's rows written straight into the entries' store (issue #20, item 6; branch
``wire32``).

``EntryColumns.put_raw`` (the C interface ``ec_api_t.put_raw`` the compiled row reader
calls) stores an entry from a row's fields as SQLite gives them: the same slot as
``put`` of the entry, every bad field refused with nothing stored. The compiled reader
with a store (``_crows.read_entries(..., cols)``) gives ``(seq, slot)`` rows whose
entries are the ``(seq, entry)`` rows it gives without one, and declines exactly the
same rows; ``read_file`` with a feed naming a store (``sqlite_format._ROWS_TO_STORE``)
hands those rows on, and every reader of them (``load_inserts``, ``next_keyed``,
``rows_texts``, the Python loops) gives the state a load of entry rows gives: whole
opens with the knob on and off agree (both scorers, keys, rows that cannot load in
bulk), and a bad row is refused with the same ``StorageError``.
"""

from __future__ import annotations

import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
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
from actormem._index import entrycols
from actormem._index.scoring import Scorer
from actormem._storage import sqlite_format

from .setups import refused_alike
from .strategies import entries, examples
from .test_decode_c import _odd_rows, _reader_args, odd_table
from .test_decode_rows import _same_entries
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same

needs_store = pytest.mark.skipif(
    not entrycols.compiled_columns(), reason="the compiled entry store is not built"
)
needs_reader = pytest.mark.skipif(
    not sqlite_format._C_ROWS_COLS, reason="the compiled row reader takes no store"
)

EPOCH = datetime(1, 1, 1, tzinfo=UTC)
CATEGORIES = list(MemoryCategory)


def _raw(entry: MemoryEntry) -> tuple[Any, ...]:
    """``put_raw``'s arguments for ``entry`` (created_at an exact UTC datetime)."""
    us = (entry.created_at - EPOCH) // timedelta(microseconds=1)
    default = (
        entry.tags == ()
        and entry.access_count == 0
        and entry.namespace == ()
        and entry.last_accessed is None
        and entry.key is None
        and entry.value is None
        and entry.updated_at is entry.created_at
        and entry.ttl is None
        and entry.expires_at is None
    )
    extras = None
    if not default:
        extras = (
            entry.tags, entry.access_count, entry.namespace, entry.last_accessed, entry.key,
            entry.value, entry.updated_at, entry.ttl, entry.expires_at, None,
        )  # fmt: skip
    return (
        entry.id.bytes, us, float(entry.relevance), CATEGORIES.index(entry.category),
        entry.validated, entry.memory.encode("utf-8"), extras,
    )  # fmt: skip


@needs_store
@settings(max_examples=examples(200), deadline=None)
@given(
    entry=entries(),
    key=st.none() | st.sampled_from(["k", "ключ"]),
    ttl=st.none() | st.floats(1.0, 1e6),
)
def test_put_raw_stores_what_put_stores(entry: MemoryEntry, key: Any, ttl: Any) -> None:
    entry = attrs.evolve(entry, key=key, ttl=ttl)
    cols = entrycols.new_entry_columns()
    a = cols.put(entry)
    b = cols.put_raw(*_raw(entry))
    assert cols.entry(a) == cols.entry(b) == entry
    _same_entries([(1, cols.entry(a))], [(1, cols.entry(b))])
    assert cols.text(b) == entry.memory
    assert cols.ident(b) == entry.id.int
    cols._check()


@needs_store
@settings(max_examples=examples(300), deadline=None)
@given(raw=st.binary(max_size=12) | st.text(max_size=6).map(lambda t: t.encode("utf-8")))
def test_put_raw_takes_exactly_strict_utf8(raw: bytes) -> None:
    cols = entrycols.new_entry_columns()
    base = _raw(MemoryEntry(category=MemoryCategory.FACT, memory="x"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:
        with pytest.raises(ValueError, match="not UTF-8"):
            cols.put_raw(*base[:5], raw, None)
        assert len(cols) == 0
    else:
        slot = cols.put_raw(*base[:5], raw, None)
        assert cols.text(slot) == text
        assert cols.text_equals(slot, text)


@needs_store
def test_put_raw_refuses_bad_fields_and_stores_nothing() -> None:
    cols = entrycols.new_entry_columns()
    good = list(_raw(MemoryEntry(category=MemoryCategory.FACT, memory="x")))
    bad_values: list[tuple[int, Any, type[Exception]]] = [
        (0, b"\x00" * 15, TypeError),
        (0, "0" * 16, TypeError),
        (1, -1, ValueError),
        (1, 10**20, ValueError),
        (1, 2**62, ValueError),
        (2, 1.5, ValueError),
        (2, float("nan"), ValueError),
        (2, 1, TypeError),
        (3, len(CATEGORIES), ValueError),
        (3, -2, ValueError),
        (3, 2**70, ValueError),
        (4, 1, TypeError),
        (5, "x", TypeError),
        (5, b"\xc0\xaf", ValueError),  # overlong
        (5, b"\xed\xa0\x80", ValueError),  # a surrogate
        (5, b"\xf4\x90\x80\x80", ValueError),  # past U+10FFFF
        (5, b"a\xe2\x82", ValueError),  # cut short
        (6, ("t",), TypeError),
        (6, ((),) * 10, TypeError),  # its last is not None
        (6, [None] * 10, TypeError),
    ]
    for at, value, exc in bad_values:
        args = list(good)
        args[at] = value
        with pytest.raises(exc):
            cols.put_raw(*args)
        assert len(cols) == 0, (at, value)
    with pytest.raises(TypeError):
        cols.put_raw(*good[:5])
    cols._check()


# -- the compiled reader with a store --------------------------------------------------


@needs_reader
def test_the_reader_with_a_store_gives_the_same_rows_and_declines(tmp_path: Path) -> None:
    """For the writer's rows and every odd row of test_decode_c (one table, a row per
    k): the reader with a store gives None exactly when it gives None without one, else
    (seq, slot) rows whose entries are its (seq, entry) rows; a declined read leaves
    its store to be dropped (nothing else touched)."""
    from actormem._storage.sqlite_format import COLUMNS

    path = tmp_path / "odd.db"
    rows = [row for _, _, row in _odd_rows()]
    rows = [r for r in rows if not any(type(v) is int and v >= 2**63 for v in r)]  # storable
    odd_table(path, rows)
    uri = sqlite_format.file_uri(str(path)) + "?mode=ro"
    select = f"SELECT {', '.join(COLUMNS)} FROM t"
    crows = sqlite_format._crows
    assert crows is not None
    taken = declined = 0
    for where in [*(f"k = {k}" for k in range(len(rows))), "1 ORDER BY k"]:
        sql = f"{select} WHERE {where}"
        plain = crows.read_entries(uri, sql, *_reader_args(), False, True)
        cols = entrycols.new_entry_columns()
        out: list[Any] = []
        got = crows.read_entries(
            uri, sql, *_reader_args(), False, True, None, None, None, out, None, cols
        )
        if plain is None:
            assert got is None, where
            declined += 1
            continue
        assert got is out, where
        _same_entries([(s, cols.entry(slot)) for s, slot in got], plain)
        assert len(cols) == len(got)
        cols._check()
        taken += 1
    assert taken > 30
    assert declined > 10


@needs_reader
def test_the_reader_refuses_a_store_it_cannot_use(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 50)
    crows = sqlite_format._crows
    assert crows is not None
    uri = sqlite_format.read_only_uri(str(db))
    sql = sqlite_format.SELECT_ENTRIES
    with pytest.raises(TypeError, match="EntryColumns"):
        crows.read_entries(uri, sql, *_reader_args(), False, True, None, None, None, [], None, {})
    with pytest.raises(ValueError, match="threaded"):
        crows.read_entries(
            uri, sql, *_reader_args(), False, False, None, None, None, [], None,
            entrycols.new_entry_columns(),
        )  # fmt: skip


# -- whole opens -------------------------------------------------------------------------


async def _made(db: Path, n: int, keyed: bool = False, rich: bool = False) -> None:
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    async with open_memory(path=db) as memory:
        await memory.store_many(
            [
                MemoryEntry(
                    category=CATEGORIES[i % len(CATEGORIES)],
                    memory=(f"note {i % 97} über item {i}" if i % 4 == 0 else f"note {i % 89} {i}"),
                    namespace=("a",) if i % 3 else (),
                    key=f"k{i}" if keyed and i % 5 == 0 else None,
                    tags=("t",) if rich and i % 7 == 0 else (),
                    value={"n": i} if rich and i % 11 == 0 else None,
                    ttl=1e6 if rich and i % 13 == 0 else None,
                    created_at=t0 + timedelta(seconds=i),
                    relevance=0.5 if rich and i % 2 else 1.0,
                    id=uuid.UUID(int=(i * 2654435761) << 64 | i),
                )
                for i in range(n)
            ]
        )


async def _state_of(db: Path, make: type[Scorer]) -> MemoryState:
    async with open_memory(path=db, scorer=make()) as memory:
        return memory._state


def _opened_both(
    db: Path, make: type[Scorer], monkeypatch: pytest.MonkeyPatch
) -> dict[bool, MemoryState]:
    pristine = db.read_bytes()
    states = {}
    for on in (True, False):
        monkeypatch.setattr(sqlite_format, "_ROWS_TO_STORE", on)
        db.write_bytes(pristine)
        states[on] = trio.run(_state_of, db, make)
    return states


@needs_reader
@pytest.mark.parametrize("make", [WordOverlapScorer, BM25Scorer])
@pytest.mark.parametrize(
    ("keyed", "rich", "feed_min"), [(False, False, 1), (True, True, 1), (True, True, 10**9)]
)
def test_opens_with_rows_in_the_store_agree(
    tmp_path: Path,
    make: type[Scorer],
    keyed: bool,
    rich: bool,
    feed_min: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A file opened (its image restored) with the rows put in the store and without:
    the same state and index; fed in small runs, or in none (the load's own bulk path
    over the slot rows); no thread left; the rows were in the store's form."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 3000, keyed, rich)
    trio.run(_state_of, db, make)  # the image of this scorer written at the close
    monkeypatch.setattr(state_module, "_FEED_MIN", feed_min)
    monkeypatch.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
    forms: list[bool] = []
    real = MemoryState.load

    def load(self: MemoryState, rows: Any, *args: Any) -> Any:
        forms.append(getattr(rows, "cols", None) is not None)
        return real(self, rows, *args)

    monkeypatch.setattr(MemoryState, "load", load)
    states = _opened_both(db, make, monkeypatch)
    assert forms == [True, False]
    _assert_same(states[True], states[False])
    _no_threads_left()


@needs_reader
@pytest.mark.parametrize("how", ["key twice", "bounded"])
def test_rows_that_do_not_load_in_bulk_open_alike(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two live rows under one (namespace, key) (a file written behind actormem's back:
    the load restores row by row, an upsert) or a bounded memory (no feed: entry rows):
    the same state with the knob on and off."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 2000, True)
    if how == "key twice":
        conn = sqlite3.connect(db)
        conn.execute("UPDATE entries SET key = 'k0', namespace = '[]' WHERE seq = 1500")
        conn.execute("UPDATE entries SET namespace = '[]' WHERE key = 'k0'")
        conn.commit()
        conn.close()
    monkeypatch.setattr(state_module, "_FEED_MIN", 1)
    pristine = db.read_bytes()
    states = {}
    for on in (True, False):
        monkeypatch.setattr(sqlite_format, "_ROWS_TO_STORE", on)
        db.write_bytes(pristine)

        async def opened() -> MemoryState:
            capacity = 10_000 if how == "bounded" else None
            async with open_memory(path=db, capacity=capacity) as memory:
                return memory._state

        states[on] = trio.run(opened)
    _assert_same(states[True], states[False])
    _no_threads_left()


@needs_reader
@pytest.mark.parametrize(
    "change",
    [
        "UPDATE entries SET relevance = 7.5 WHERE seq = 1700",
        "UPDATE entries SET memory = CAST(X'61C0AF62' AS TEXT) WHERE seq = 1700",
        "UPDATE entries SET category = 'nope' WHERE seq = 1700",
        "UPDATE entries SET id = (SELECT id FROM entries WHERE seq = 3) WHERE seq = 1700",
        "UPDATE entries SET created_at = 'yesterday' WHERE seq = 1700",
    ],
)
def test_a_bad_row_is_refused_alike(
    tmp_path: Path, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad row late in the file (after the feed loaded rows into the store): the same
    StorageError with the knob on and off, no thread left."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 2000)
    conn = sqlite3.connect(db)
    conn.execute(change)
    conn.commit()
    conn.close()
    monkeypatch.setattr(state_module, "_FEED_MIN", 1)
    monkeypatch.setattr(sqlite_format, "_CHUNKS_AHEAD", 2)
    refused_alike(
        db, db.read_bytes(), lambda on: monkeypatch.setattr(sqlite_format, "_ROWS_TO_STORE", on)
    )
    _no_threads_left()


# -- loads of slot rows, by hand -----------------------------------------------------------


@needs_store
@pytest.mark.parametrize("make", [WordOverlapScorer, BM25Scorer])
@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 120),
    keys=st.booleans(),
    cuts=st.lists(st.integers(0, 120), max_size=4),
    capacity=st.sampled_from([None, None, 50]),
)
def test_a_load_of_slot_rows_is_a_load_of_entry_rows(
    make: type[Scorer], seed: int, n: int, keys: bool, cuts: list[int], capacity: Any
) -> None:
    """Rows in the store's form ((seq, slot), their entries put in a store first, as the
    reader puts them), loaded by a state (fed in runs when unbounded, the C
    ``load_inserts`` and the Python loop taking turns; row by row when bounded or two
    rows share a key): the state a load of the (seq, entry) rows gives."""
    from .test_open_fast import _rows, _state

    rows = _rows(seed, n, keys)
    want = _state(make(), capacity)
    want.load(list(rows))
    cols = entrycols.new_entry_columns()
    slots = sqlite_format.FoldedRows([(seq, cols.put(e)) for seq, e in rows], b"", cols)
    got = _state(make(), capacity)
    feed = got.feed_ahead()
    taken = False
    if feed is not None:
        # the store the reader would have filled: the feed's, the same slots
        fcols = feed.cols
        assert fcols is not None
        slots = sqlite_format.FoldedRows([(seq, fcols.put(e)) for seq, e in rows], b"", fcols)
        grow = sqlite_format.FoldedRows([], b"", fcols)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(state_module, "_FEED_MIN", 1)
            for cut in sorted(cuts):
                grow.extend(slots[len(grow) : cut])
                feed(grow, bytearray())
        grow.extend(slots[len(grow) :])
        slots = grow
    got.load(slots, None, None, feed)
    fed = feed is not None and feed.at > 0
    if feed is not None:
        taken = feed.taken
    _assert_same(got, want)
    # a feed that loaded rows is taken unless two rows share a key (row by row then)
    assert taken or not fed or keys


# -- hits noted by a record that is purged before they are applied --------------------------


def test_hits_on_a_purged_record_go_to_its_id() -> None:
    """A retrieve's hits noted by record (``memory._ACCESS_BY_REC``) whose record is
    upserted and purged (its slot released, then reused by a new entry) before the owner
    applies them: counted for the id's new record, as hits by the id's int are; nothing
    read from the reused slot."""
    from .test_mainjob12_paths import _entry as entry12
    from .test_mainjob12_paths import _state as state12

    when = datetime(2026, 2, 1, tzinfo=UTC)
    results = []
    for by_rec in (True, False):
        state = state12(WordOverlapScorer())
        for i in range(3):
            state.store(entry12(i, f"text {i}"))
        state.publish()
        old = state.current(entry12(1, "").id)
        assert old is not None
        key: Any = old if by_rec else old.cols.ident(old.slot)
        state.store(entry12(1, "upserted"))  # 1: a new record, the old one dead
        state.publish()
        assert state.vacuum(state.published) >= 1  # the old record purged
        assert old.purged
        for i in range(10, 14):  # new entries: the old slot is reused
            state.store(entry12(i, f"other {i}"))
        state.publish()
        assert state.apply_access({key: (2, when)}, state.published) == 1
        rec = state.current(entry12(1, "").id)
        assert rec is not None
        results.append(rec.current_access())
        state._check()
    assert results[0] == results[1] == (2, when)


@needs_reader
def test_the_texts_made_from_the_store_carry_the_readers_hashes(tmp_path: Path) -> None:
    """rows_texts over slot rows with the reader's hashes (FoldedRows.hashes): each
    text equal to its entry's, its hash the one Python computes for it (the thread's
    hash set on the ASCII texts); the same texts without the hashes."""
    from actormem._index.wordoverlap import ccore

    db = tmp_path / "m.db"
    trio.run(_made, db, 3000)
    cols = entrycols.new_entry_columns()
    sink: tuple[list[Any], bytearray] = (sqlite_format.FoldedRows([], b"", cols), bytearray())
    got = sqlite_format._read_rows_c(sqlite_format.read_only_uri(str(db)), None, [], None, sink)
    assert got is sink[0]
    assert isinstance(got, sqlite_format.FoldedRows)
    assert len(got.hashes) == 8 * len(got) == 8 * 3000
    fn = ccore.rows_texts()
    assert fn is not None
    texts = fn(got, cols, got.hashes)
    plain = fn(got, cols)
    assert texts == plain == tuple(cols.text(slot) for _, slot in got)
    for t in texts:
        assert hash(t) == hash(t.encode("utf-8").decode("utf-8"))
    with pytest.raises(TypeError):
        fn(got, cols, bytearray(got.hashes))
