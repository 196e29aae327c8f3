"""Branch durable8's durable store path, each part against the path before it (its knob off).

* ``sqlite_format._ROWS_C`` (``encode_records`` by the core's ``encode_rows``): the same
  rows as ``encode_record`` per record, item by item and type by type, for any entry
  (ids from 0 to 2**128 - 1, every optional field, access counts past the file's
  largest, datetimes in UTC and in other zones, records with access bookkeeping, which
  take ``encode_record``); the core's refusals; an error raised inside (``to_json``,
  ``json_strings``) comes out of ``encode_rows`` and leaks nothing.
* ``memory._GC_PAUSE`` (no collection from a batch's apply to its answers, a durable
  batch's commit included): the collector is off inside, on again after every batch,
  off if it was off before, and on after a failed commit.
* ``sqlite._PAGE_SIZE`` (a new file's pages of 16 KiB): the file has them, a file of
  4 KiB pages (the path before) opens and grows with them as it is.
* All three: a durable file written with the knobs on is the file written with them off
  (the rows, in order, with their seqs, and the entries read back), with ``store``,
  ``store_many``, upserts, deletes, keys, payloads and expiries mixed; a SIGKILL in the
  middle of ``store_many`` group commits loses no acknowledged entry.
"""

from __future__ import annotations

import gc
import sqlite3
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine import memory as memory_module
from actormem._index import kernels
from actormem._record import Access, Record
from actormem._storage import sqlite as sqlite_store
from actormem._storage import sqlite_format

from .crash_child import run_trial
from .strategies import examples

core = pytest.mark.skipif(
    getattr(kernels._wo, "encode_rows", None) is None, reason="the core is not built"
)
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _rows(recs: list[Record], on: bool) -> list[tuple[Any, ...]]:
    sqlite_format._ROWS_C = on
    try:
        return sqlite_format.encode_records(recs)
    finally:
        sqlite_format._ROWS_C = True


def _same(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    assert a == b
    for ra, rb in zip(a, b, strict=True):
        assert [type(x) for x in ra] == [type(x) for x in rb]


_times = st.integers(10**12, 10**17).map(
    lambda us: datetime(1, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)
)
_zones = st.sampled_from([UTC, timezone(timedelta(hours=-7)), timezone(timedelta(minutes=330))])


@st.composite
def _entries(draw: st.DrawFn) -> MemoryEntry:
    created = draw(_times).astimezone(draw(_zones))
    ttl = draw(st.none() | st.floats(0.5, 1e6))
    return MemoryEntry(
        id=uuid.UUID(int=draw(st.sampled_from([0, 1, 2**128 - 1]) | st.integers(0, 2**128 - 1))),
        category=draw(st.sampled_from(list(MemoryCategory))),
        memory=draw(st.text(max_size=20)),
        tags=draw(st.lists(st.sampled_from(["a", "İ", "🧠 x", 'q"']), max_size=3)),
        namespace=draw(st.sampled_from([(), ("t",), ("日本", "ü")])),
        created_at=created,
        updated_at=draw(st.none() | _times),
        relevance=draw(st.floats(0.0, 1.0)),
        access_count=draw(
            st.sampled_from([0, 2**63 - 2, 2**63 - 1, 2**63, 2**70]) | st.integers(0, 9)
        ),
        validated=draw(st.booleans()),
        last_accessed=draw(st.none() | _times),
        key=draw(st.none() | st.sampled_from(["k", "ключ"])),
        value=draw(st.none() | st.sampled_from([{}, {"a": [1, 2.5, None]}, {"é": {"x": True}}])),
        ttl=ttl,
        expires_at=draw(st.none() | _times) if ttl is None else None,
    )


@core
@settings(max_examples=examples(40), deadline=None)
@given(st.lists(st.tuples(_entries(), st.booleans()), max_size=8))
def test_encode_records_is_encode_record(drawn: list[tuple[MemoryEntry, bool]]) -> None:
    recs = []
    for i, (entry, accessed) in enumerate(drawn):
        rec = Record(entry, i + 1, 10 * i + 3)
        if accessed:  # access bookkeeping: encode_record's other path, called from C
            rec.access = Access(i + 2, 7, T0, None, T0 + timedelta(days=1))
        recs.append(rec)
    _same(_rows(recs, True), _rows(recs, False))
    _same(_rows(recs, True), [sqlite_format.encode_record(rec) for rec in recs])


@core
def test_encode_rows_refusals_and_errors() -> None:
    rec = Record(MemoryEntry.new(MemoryCategory.FACT, "x"), 1, 1)
    with pytest.raises(TypeError, match="takes a list"):
        sqlite_format.encode_records((rec,))  # type: ignore[arg-type]
    wo: Any = kernels._wo
    with pytest.raises(TypeError, match="expected a list"):
        wo.encode_rows((rec,))
    good = sqlite_format._encode_rows([rec])
    descrs = tuple(Record.__dict__[n] for n in ("seq", "access", "cols", "slot"))
    entry_descrs = tuple(MemoryEntry.__dict__[n] for n in sqlite_format._ENTRY_SLOTS)
    args = [Record, descrs, MemoryEntry, entry_descrs, str, 5, repr]
    for at, bad in [
        (0, int),  # descriptors of another class
        (1, descrs[:2]),
        (3, entry_descrs[::-1][:3]),
        (1, (*descrs[:3], Access.__dict__["count"])),
        (4, 3),  # not callable
        (5, 2.0),
        (6, None),
    ]:
        with pytest.raises(TypeError):
            wo.rows_setup(*args[:at], bad, *args[at + 1 :])
    assert sqlite_format._encode_rows([rec]) == good  # nothing changed

    class Boom(Exception):
        pass

    def boom(_: object) -> str:
        raise Boom

    wo.rows_setup(Record, descrs, MemoryEntry, entry_descrs, boom, 5, sqlite_format.encode_record)
    try:
        recs = [Record(MemoryEntry.new(MemoryCategory.FACT, f"x{i}"), i, i) for i in range(50)]
        e = recs[0].entry
        held = [recs[0], e, e.memory, e.created_at, e.category, e.tags]
        before = [sys.getrefcount(o) for o in held]
        for _ in range(20):
            try:
                sqlite_format._encode_rows(recs)
            except Boom:
                pass
            else:  # pragma: no cover
                raise AssertionError("encode_rows hid json_strings' error")
        assert [sys.getrefcount(o) for o in held] == before
    finally:
        sqlite_format._rows_setup()
    assert sqlite_format._encode_rows([rec]) == good
    payload = Record(MemoryEntry(category=MemoryCategory.FACT, memory="x", value={"a": 1}), 2, 2)
    assert sqlite_format._encode_rows([payload])[0][12] == '{"a":1}'


def _mixed() -> list[tuple[str, Any]]:
    """Operations of a durable memory: lists for store_many, entries for store, ids and
    keys to delete, upserts, keys, payloads, ttls and expiries."""
    ops: list[tuple[str, Any]] = []
    made = []
    for i in range(120):
        e = MemoryEntry(
            id=uuid.UUID(int=(i * 0x9E3779B97F4A7C15) % 2**128),
            category=list(MemoryCategory)[i % len(MemoryCategory)],
            memory=f"entry {i} ü {'x' * (i % 7)}",
            tags=["a", "İ"][: i % 3],
            namespace=[(), ("t",)][i % 2],
            created_at=T0 + timedelta(seconds=i, microseconds=i % 5),
            key=f"k{i % 9}" if i % 4 == 0 else None,
            value={"i": i} if i % 5 == 0 else None,
            expires_at=T0 + timedelta(days=36500) if i % 6 == 1 else None,
            ttl=10**6 if i % 11 == 3 else None,
            last_accessed=T0 if i % 3 == 2 else None,
            access_count=i % 4,
        )
        made.append(e)
    at = 0
    while at < len(made):
        ops.append(("many", made[at : at + 13]))
        ops.append(("one", made[at]))  # an upsert of the list's first
        ops.append(("delete", made[at + 1].id))
        at += 13
    ops.append(("many", [made[5], made[40], made[77]]))  # upserts in a list
    return ops


def _dump(path: Path) -> list[list[tuple[Any, ...]]]:
    conn = sqlite3.connect(path)
    try:
        return [list(conn.execute(f"SELECT * FROM {t} ORDER BY 1")) for t in ("entries", "vectors")]
    finally:
        conn.close()


def test_files_are_the_same_either_way(tmp_path: Path) -> None:
    async def fill(path: Path) -> list[MemoryEntry]:
        async with open_memory(path=path, clock=lambda: T0) as memory:
            for op, arg in _mixed():
                if op == "many":
                    await memory.store_many(arg)
                elif op == "one":
                    await memory.store(arg)
                else:
                    await memory.delete(arg)
        async with open_memory(path=path, clock=lambda: T0) as memory:
            return list(memory.snapshot())

    outs = []
    page_size = sqlite_store._PAGE_SIZE  # the default of today's code, put back after
    for on in (True, False):
        sqlite_format._ROWS_C = memory_module._GC_PAUSE = on
        sqlite_store._PAGE_SIZE = 16384 if on else None
        try:
            path = tmp_path / f"{on}.db"
            back = trio.run(fill, path)
        finally:
            sqlite_format._ROWS_C = memory_module._GC_PAUSE = True
            sqlite_store._PAGE_SIZE = page_size
        outs.append((_dump(path), back, _page_size(path)))
    assert outs[0][:2] == outs[1][:2]
    assert len(outs[0][0][0]) == len(outs[0][1]) > 80
    assert (outs[0][2], outs[1][2]) == (16384, 4096)

    async def more(path: Path) -> list[MemoryEntry]:
        async with open_memory(path=path, clock=lambda: T0) as memory:
            await memory.store_many([MemoryEntry.new(MemoryCategory.FACT, "later")])
        async with open_memory(path=path, clock=lambda: T0) as memory:
            return list(memory.snapshot())

    # A file of the path before (4 KiB pages) opens and grows as it is, with the knobs on.
    later = trio.run(more, tmp_path / "False.db")
    assert later[:-1] == outs[1][1]
    assert later[-1].memory == "later"
    assert _page_size(tmp_path / "False.db") == 4096


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        (size,) = conn.execute("PRAGMA page_size").fetchone()
        return int(size)
    finally:
        conn.close()


async def test_gc_is_on_after_every_batch(tmp_path: Path) -> None:
    seen: list[bool] = []
    entries = [MemoryEntry.new(MemoryCategory.FACT, f"e{i}") for i in range(40)]
    async with open_memory(path=tmp_path / "m.db") as memory:
        real = memory._commit
        assert real is not None

        async def commit(journal: Any, meanwhile: Any) -> None:
            seen.append(gc.isenabled())
            await real(journal, meanwhile)

        memory._commit = commit
        async with trio.open_nursery() as nursery:
            for at in range(0, 40, 5):
                nursery.start_soon(memory.store_many, entries[at : at + 5])
        assert gc.isenabled()
        gc.disable()  # off before: stays off
        try:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "off"))
            assert not gc.isenabled()
        finally:
            gc.enable()
        memory_module._GC_PAUSE = False
        try:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "knob off"))
        finally:
            memory_module._GC_PAUSE = True
        assert len(memory) == 42
    assert seen[:-2] == [False] * (len(seen) - 2)
    assert seen[-1] is True  # the knob off: no pause


async def test_gc_paused_in_a_memory_batch_too() -> None:
    seen: list[bool] = []
    async with open_memory() as memory:
        real = memory._apply_batch

        def apply(batch: Any) -> Any:
            seen.append(gc.isenabled())
            return real(batch)

        memory._apply_batch = apply  # type: ignore[method-assign]
        await memory.store_many([MemoryEntry.new(MemoryCategory.FACT, "x")])
        assert gc.isenabled()
        memory_module._GC_PAUSE = False
        try:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "y"))
        finally:
            memory_module._GC_PAUSE = True
        assert len(memory) == 2
    assert seen == [False, True]


async def test_gc_is_on_after_a_failed_commit(tmp_path: Path) -> None:
    from actormem import StorageError

    async with open_memory(path=tmp_path / "m.db") as memory:
        store = memory._storage
        assert store is not None

        def fail(batch: Any) -> None:
            raise StorageError(store.path, "disk on fire")

        store.write = store.write_inline = fail  # type: ignore[method-assign,assignment]
        with pytest.raises(StorageError, match="disk on fire"):
            await memory.store_many([MemoryEntry.new(MemoryCategory.FACT, "x")])
        assert gc.isenabled()
        del store.write, store.write_inline


@pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock")
def test_sigkill_inside_store_many_commits_loses_nothing(tmp_path: Path) -> None:
    report = run_trial(str(tmp_path / "crash.db"), 21, rounds=2, max_acks=400, writers=8, chunk=16)
    assert report["lost"] == []
    assert report["stored"] >= report["acked"]
