"""Branch durable45: the held-back access updates flushed in seq order
(``sqlite._SORTED_FLUSH``), and ``frames_of``'s count (its one-loop copies
``_FUSED_FLUSH``/``_FUSED_FRAMES`` were dropped by durable52: ~3 ms a run).

* ``frames_of`` equals ``3 + deletes + accesses + long_frames`` plus ``_puts_frames``
  for 0-12 puts of any texts (ASCII or not, short or overflowing), at page sizes
  512-8192, and refuses a short row.
* A flush writes its updates in seq order (knob on) or first-access order (off); the
  file's rows are the same either way, and after a kill -9 amid flushes no
  acknowledged store is lost (``tests/test_durable15.py``'s kill test, sorted).
"""

from __future__ import annotations

import sqlite3
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import open_memory
from actormem._index.entrycols import compiled_columns
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch

from .setups import knobs_set
from .test_durable15 import NAMES, _fact

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock"),
    pytest.mark.skipif(not compiled_columns(), reason="the compiled EntryColumns is not built"),
]


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


def test_frames_of_refuses_what_it_refused() -> None:
    batch = Batch([], [_row((None, None, None, None))[:3]], [])  # a row too short
    with pytest.raises(IndexError):
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
