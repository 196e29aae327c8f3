"""Review24a of branch open20 (the restore's group numbers from the digest's thread, the
rows of bits prepared ahead, the reader's held-back id check): attacks through the real
open of a durable file, at the reader's chunk edges and table growth, and with a
KeyboardInterrupt while the restore waits for the thread's group numbers."""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index import kernels, persist
from actormem._index.wordoverlap import persist as wo_persist
from actormem._storage import sqlite_format

from .setups import stale_opens_alike, state_of, with_warnings
from .test_open13_split import _ids_file, _read
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same

needs_c = pytest.mark.skipif(
    kernels._wo is None
    or not hasattr(kernels._wo, "texts_groups")
    or sqlite_format._crows is None
    or not hasattr(sqlite_format._crows, "id_prefetch"),
    reason="the compiled cores are not built",
)

#: Hostile texts: NUL inside and alone, every UTF-8 width, texts that repeat (groups of
#: several records, equal by value, not by object once read back), a long one.
_WORDS = ["a\x00b", "\x00", "\u00e9t\u00e9 \x00", "\u4e2d\u6587", "\U0001f600 x", "y" * 3000]


def _text(i: int) -> str:
    if i % 3 == 0:
        return _WORDS[(i // 3) % len(_WORDS)]  # repeated
    return f"{_WORDS[i % len(_WORDS)]} {i}"


async def _made(path: Path, n: int) -> None:
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        for i in range(n):
            await memory.store(MemoryEntry(memory=_text(i), category=MemoryCategory.FACT))
    async with open_memory(path=path, scorer=WordOverlapScorer()):
        pass  # closed cleanly: now with its image


KNOBS = (
    (wo_persist, "_GIDS_BESIDE"),
    (wo_persist, "_ROWS_AHEAD"),
    (sqlite_format, "_ID_PREFETCH"),
)


@needs_c
def test_hostile_texts_restore_through_the_open_with_each_knob(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 400)
    pristine = db.read_bytes()
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)  # the digest's thread at any size
    states = []
    for on in itertools.product((True, False), repeat=len(KNOBS)):
        for (mod, name), value in zip(KNOBS, on, strict=True):
            monkeypatch.setattr(mod, name, value)
        db.write_bytes(pristine)
        (state, fresh), messages = with_warnings(caplog, trio.run, state_of, db)
        assert fresh, messages  # the image was used
        assert not messages
        states.append(state)
    for state in states[1:]:
        _assert_same(states[0], state)
    assert {r.entry.memory for r in states[0].view().records()} >= set(_WORDS)

    # Stale: two rows' texts swapped behind actormem's back (the same texts, the same
    # group count, other first appearances): never trusted, the same rebuild each way.
    def set_on(on: bool) -> None:
        for mod, name in KNOBS:
            monkeypatch.setattr(mod, name, on)

    stale_opens_alike(db, pristine, caplog, set_on, _swap_first_two_texts)


def _swap_first_two_texts(db: Path) -> None:
    conn = sqlite3.connect(db)
    try:
        (a, ta), (b, tb) = conn.execute(
            "SELECT seq, memory FROM entries ORDER BY seq LIMIT 2"
        ).fetchall()
        conn.execute("UPDATE entries SET memory = ? WHERE seq = ?", (tb, a))
        conn.execute("UPDATE entries SET memory = ? WHERE seq = ?", (ta, b))
        conn.commit()
    finally:
        conn.close()


@needs_c
def test_an_interrupt_while_the_restore_waits_for_the_groups(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 120)
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    real = persist.LateDigest.groups
    struck: list[bool] = []

    def groups(self: persist.LateDigest) -> Any:
        if not struck:
            struck.append(True)
            raise KeyboardInterrupt  # as trio's handler raises it inside the wait
        return real(self)

    monkeypatch.setattr(persist.LateDigest, "groups", groups)
    with pytest.raises(KeyboardInterrupt):
        trio.run(state_of, db)
    assert struck
    _no_threads_left()  # the digest's thread joined
    state, fresh = trio.run(state_of, db)  # the file is not held, its image still fine
    assert fresh
    assert len(state) == 120
    _no_threads_left()


@needs_c
@pytest.mark.parametrize("on", [True, False])
@pytest.mark.parametrize(
    ("a", "b"),
    [
        (255, 256),  # the two sides of the reader's first chunk edge (256 rows a chunk)
        (240, 256),  # one held back across the edge, the other the next chunk's first
        (256, 271),  # both in the second chunk, 15 apart
        (511, 512),  # the id table grows at its 513th id (1024 slots, half full)
        (500, 530),  # the first put before the growth, the second after
        (0, 1279),  # the first and the last row: the last chunk exactly full
    ],
)
def test_an_id_twice_at_the_chunk_edges_and_the_tables_growth(
    tmp_path: Path, on: bool, a: int, b: int
) -> None:
    base = [(k * 0x9E3779B97F4A7C15 + 3) % 2**128 for k in range(1, 1281)]  # 5 chunks
    was = sqlite_format._crows.id_prefetch(on)
    try:
        for ids in (base, [*base[:b], base[a], *base[b + 1 :]]):
            out: list[Any] = []
            uri = _ids_file(tmp_path / f"{a}-{b}-{len(set(ids))}.db", ids)
            rows = _read(uri, True, ids_out=out)
            assert [e._id for _, e in rows] == ids
            assert out == [len(set(ids)) == len(ids)]
    finally:
        sqlite_format._crows.id_prefetch(was)


_AT = datetime(2026, 1, 2, tzinfo=UTC)


async def _grown(path: Path, more: int) -> Any:
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        fresh = memory._storage.image_fresh
        for i in range(more):
            await memory.store(
                MemoryEntry(
                    memory=_text(10_000 + i),
                    category=MemoryCategory.FACT,
                    id=uuid.UUID(int=i + 1),
                    created_at=_AT,
                    updated_at=_AT,
                )
            )
        return memory._state, fresh


@needs_c
def test_a_restored_numbering_grows_as_a_rebuilt_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 400)  # ~270 groups: a numbering of 512, grown past by the stores
    pristine = db.read_bytes()
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    states = []
    for on in (True, False):
        for mod, name in KNOBS:
            monkeypatch.setattr(mod, name, on)
        db.write_bytes(pristine)
        state, fresh = trio.run(_grown, db, 500)
        assert fresh
        assert state.index._e.n > 512
        states.append(state)
    _assert_same(states[0], states[1])
    e, want = states[0].index._e, states[1].index._e
    assert e.rows is not None
    assert want.rows is not None
    assert (e.rows == want.rows).all()
    assert (e.rowcount == want.rowcount).all()
    _no_threads_left()
