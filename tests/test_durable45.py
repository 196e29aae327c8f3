"""Branch durable45: the held-back access updates flushed in seq order
(``sqlite._SORTED_FLUSH``) and encoded in one loop (``sqlite._FUSED_FLUSH``,
``sqlite._encode_held``), and ``frames_of`` counting a few puts in one loop
(``sqlite._FUSED_FRAMES``): the same rows, counts and files as the paths before them.

* ``_encode_held`` equals ``encode_access`` and ``_record_frames`` a record, with the
  knob on and off, for entries of any text, key, tags and value, records never
  accessed, accessed with and without an expiry, with a count past the column's cap,
  a store that cannot tell a row's size, and one without ``row_bytes`` at all.
* ``frames_of`` equals the count through ``_puts_frames`` for 0-12 puts of any texts
  (ASCII or not, short or overflowing), at page sizes 512-8192.
* A flush writes its updates in seq order (knob on) or first-access order (off); the
  file's rows are the same either way, and after a kill -9 amid flushes no
  acknowledged store is lost (``tests/test_durable15.py``'s kill test, sorted).
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from actormem import open_memory
from actormem._entry import MemoryEntry
from actormem._index.entrycols import compiled_columns, new_entry_columns
from actormem._record import Access, Record
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch
from actormem._storage.sqlite_format import MAX_ACCESS_COUNT, encode_access

from .setups import knobs_set
from .test_durable15 import NAMES, _fact
from .test_review32_row_bytes import entries

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock"),
    pytest.mark.skipif(not compiled_columns(), reason="the compiled EntryColumns is not built"),
]

T0 = datetime(2026, 12, 7, 21, 0, tzinfo=UTC)


class _NoRowBytes:
    """A record's store that does not tell row sizes (no ``row_bytes``)."""

    def __init__(self, cols: Any) -> None:
        self._cols = cols

    def __getattr__(self, name: str) -> Any:
        if name == "row_bytes":
            raise AttributeError(name)
        return getattr(self._cols, name)


def _per_record(recs: list[Record], page: int) -> tuple[list[tuple[Any, ...]], int]:
    rows = [encode_access(rec) for rec in recs]
    frames = 0
    for rec in recs:
        more = sqlite_store._record_frames(rec, page)
        frames += 2 * more + 1 if more else 0
    return rows, frames


_access = st.none() | st.tuples(
    st.integers(0, MAX_ACCESS_COUNT + 5) | st.integers(0, 9),
    st.none() | st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s)),
    st.none() | st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s, microseconds=7)),
)


_expiring = st.builds(
    attrs.evolve,
    entries(),
    ttl=st.just(60.0),
    expires_at=st.integers(0, 10**6).map(lambda s: T0 + timedelta(seconds=s, microseconds=3)),
)


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(
        st.tuples(entries() | _expiring, _access, st.booleans()), min_size=0, max_size=6
    ),
    page=st.sampled_from([512, 1024, 4096, 8192]),
)
@example(
    items=[
        (_fact(0), (MAX_ACCESS_COUNT + 1, T0, None), False),  # capped
        (attrs.evolve(_fact(1), ttl=5.0, expires_at=T0), (3, T0, None), False),  # the row's
        (attrs.evolve(_fact(2), ttl=5.0, expires_at=T0), None, True),
        (_fact(3), (MAX_ACCESS_COUNT, None, T0), False),
    ],
    page=4096,
)
def test_encode_held_equals_the_per_record_path(
    items: list[tuple[MemoryEntry, Any, bool]], page: int
) -> None:
    cols = new_entry_columns()
    recs = []
    for seq, (entry, access, hide_size) in enumerate(items, 1):
        rec = Record(entry, 1, seq, cols)
        if access is not None:
            count, last, expires = access
            rec.access = Access(2, count, last, None, expires)
        if hide_size:
            rec.cols = _NoRowBytes(cols)
        recs.append(rec)
    want = _per_record(recs, page)
    assert sqlite_store._encode_held(recs, page) == want
    assert sqlite_store._encode_held(iter(recs), page) == want  # any iterable
    with knobs_set(sqlite_store, _FUSED_FLUSH=False):
        assert sqlite_store._encode_held(recs, page) == want
    for row in want[0]:
        assert row[0] <= MAX_ACCESS_COUNT


def _row(texts: tuple[str | None, ...]) -> tuple[Any, ...]:
    row: list[Any] = [1, "id", "fact", "", None, "[]", "t", 0.5, 0, None, 0, None, None, "t"]
    row += [None, None]
    for at, text in zip((3, 4, 11, 12), texts, strict=True):
        row[at] = text
    return tuple(row)


_texts = (
    st.none()
    | st.text(max_size=40)
    | st.text(max_size=3000)
    | st.sampled_from(["é" * 600, "a" * 2100, "a" * 5000 + "ß"])
)


@settings(max_examples=300, deadline=None)
@given(
    puts=st.lists(st.tuples(_texts, _texts, _texts, _texts), max_size=12),
    deletes=st.integers(0, 3),
    accesses=st.integers(0, 3),
    long_frames=st.integers(0, 5),
    page=st.sampled_from([512, 1024, 4096, 8192]),
)
def test_frames_of_equals_the_count_through_puts_frames(
    puts: list[tuple[str | None, ...]], deletes: int, accesses: int, long_frames: int, page: int
) -> None:
    batch = Batch(
        [(i,) for i in range(deletes)],
        [_row(texts) for texts in puts],
        [(1, None, None, i) for i in range(accesses)],
        long_frames=long_frames,
    )
    want = 3 + deletes + accesses + long_frames
    if puts:
        want += sqlite_store._puts_frames(batch.puts, page)
    assert sqlite_store.frames_of(batch, page) == want
    with knobs_set(sqlite_store, _FUSED_FRAMES=False):
        assert sqlite_store.frames_of(batch, page) == want


def test_frames_of_refuses_what_it_refused() -> None:
    batch = Batch([], [_row((None, None, None, None))[:3]], [])  # a row too short
    for fused in (True, False):
        with knobs_set(sqlite_store, _FUSED_FRAMES=fused), pytest.raises(IndexError):
            sqlite_store.frames_of(batch, 4096)


def _flushed_order(path: Path, sort: bool) -> tuple[list[int], list[int], list[tuple[Any, ...]]]:
    """Store the 8 facts, hit them from the last to the first, close (the flush);
    the seqs of the flush's updates in the order written, the facts' seqs in hit order,
    and the file's rows."""
    import trio

    flushed: list[int] = []
    hit_seqs: list[int] = []

    async def main() -> None:
        async with open_memory(path=path) as memory:
            for i in range(len(NAMES)):
                await memory.store(_fact(i))
            store = memory._storage
            assert store is not None
            write = store._write

            def spy(batch: Batch, wait: bool, checkpoint: bool = True) -> bool:
                flushed.extend(row[3] for row in batch.accesses)
                return write(batch, wait, checkpoint)

            store._write = spy  # type: ignore[method-assign]
            for name in reversed(NAMES):
                await memory.retrieve(name, 1)
                await memory.sweep_expired()
            assert store.pending_accesses == len(NAMES)
            by_id = memory._state._by_id
            for i in reversed(range(len(NAMES))):
                hit_seqs.append(by_id[uuid.UUID(int=1000 + i).int].seq)

    with knobs_set(sqlite_store, _DEFER_ACCESS=True, ACCESS_DELAY=1e6, _SORTED_FLUSH=sort):
        trio.run(main)
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            "SELECT seq, id, access_count, last_accessed IS NOT NULL, expires_at"
            " FROM entries ORDER BY seq"
        ).fetchall()
    finally:
        conn.close()
    return flushed, hit_seqs, rows


def test_a_flush_writes_in_seq_order_and_the_same_rows(tmp_path: Path) -> None:
    on, hits_on, rows_on = _flushed_order(tmp_path / "on.db", True)
    off, hits_off, rows_off = _flushed_order(tmp_path / "off.db", False)
    assert hits_on == hits_off
    assert hits_on == sorted(hits_on, reverse=True)  # hit from the highest seq down
    assert on == sorted(hits_on)
    assert off == hits_off
    assert rows_on == rows_off
    assert [r[2] for r in rows_on] == [1] * len(NAMES)


def test_the_flush_order_bench_runs_on_a_copy(tmp_path: Path) -> None:
    from stress.flush_order import measure

    path = tmp_path / "m.db"
    _flushed_order(path, True)
    before = path.read_bytes()
    out = measure(str(path), rows=5, repeats=2, seed=0)
    assert sorted(out) == ["random order", "seq order"]
    assert [len(ms) for ms in out.values()] == [2, 2]
    assert path.read_bytes() == before  # the file itself untouched, the copy removed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.db"]
