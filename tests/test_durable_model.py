"""The file equals the memory after every acknowledged write, and after a clean close
(Hypothesis).

A crash can strike between any two commits, so "nothing acknowledged is ever lost"
means more than a good file at close: once any awaited write returns, the file must
hold exactly what readers see, access counts included (with ``sqlite._DEFER_ACCESS``,
the default since durable15: all but the access bookkeeping held back, which is never
ahead and never more entries than the store holds back). Random mixes of queued and
awaited stores (new ids, upserts, evictions, twins of stored entries that consolidation
merges), deletes, retrieves (access updates) and consolidations; after each awaited
write the file is read through a second, read-only SQLite connection (what another
reader of the file sees; replaying the log after a real crash is what the SIGKILL tests
in tests/test_durable.py cover) and compared with the published snapshot, field by
field, in insertion order. At the end, retrieves leave access hits buffered and the
memory is closed: the file must hold them too.

That readers never see a batch before its commit returned is tested in
tests/test_durable.py (a commit parked in its thread).
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage.sqlite_format import MAX_ACCESS_COUNT, read_validated

from .strategies import entries, examples, queries

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="durable memories need fcntl.flock (POSIX)"
)

#: Ids the operations draw from, so that stores hit existing ids (upserts) and deletes
#: hit stored ones; twins (copies of a stored entry under another id) take theirs from
#: a second pool.
POOL = [uuid.UUID(int=i + 1) for i in range(6)]
TWINS = [uuid.UUID(int=i + 101) for i in range(3)]
#: The memory's clock: the time of every access hit (later than every stored time).
NOW = datetime(2030, 1, 1, tzinfo=UTC)

ids = st.sampled_from(POOL)
ops = st.one_of(
    st.tuples(st.just("store"), ids.flatmap(lambda i: entries(id=i))),
    st.tuples(st.just("store_nowait"), ids.flatmap(lambda i: entries(id=i))),
    st.tuples(st.just("twin"), st.tuples(st.integers(0, 5), st.sampled_from(TWINS))),
    st.tuples(st.just("delete"), ids),
    st.tuples(st.just("retrieve"), queries),
    st.tuples(st.just("consolidate"), st.none()),
)

Program = list[tuple[str, object]]


def file_entries(path: Path) -> list[MemoryEntry]:
    # No write runs while this reads (the test awaits each write first), so the
    # immutable open read_validated picks for an empty log cannot race with a commit.
    return [entry for _, entry in read_validated(str(path))]


def _no_access(e: MemoryEntry) -> MemoryEntry:
    return attrs.evolve(e, access_count=0, last_accessed=None, expires_at=None)


def check_lagging(got: list[MemoryEntry], want: list[MemoryEntry], memory: Any) -> None:
    """``got`` (the file) equals ``want`` (the published snapshot). With the store's
    access updates held back (``sqlite._DEFER_ACCESS``): equal but for the access
    bookkeeping (count, last access, expiry) of at most as many entries as it holds
    back, whose file counts and times are never ahead."""
    store = memory._storage
    if store is None or store._pending is None:
        assert got == want
        return
    assert [_no_access(e) for e in got] == [_no_access(e) for e in want]
    behind = [(g, w) for g, w in zip(got, want, strict=True) if g != w]
    assert len(behind) <= store.pending_accesses
    for g, w in behind:
        assert g.access_count <= w.access_count
        assert g.last_accessed is None or (
            w.last_accessed is not None and g.last_accessed <= w.last_accessed
        )


async def run_ops(
    path: Path, capacity: int | None, program: Program, close_queries: tuple[str, ...] = ()
) -> dict[str, int]:
    """Apply ``program``, then retrieve ``close_queries`` and close; check the file after
    every awaited write and after the close. Return how often each kind of write ran."""
    stats = dict.fromkeys(("checks", "merged", "hits"), 0)
    async with open_memory(path=path, capacity=capacity, clock=lambda: NOW) as memory:
        for op, arg in program:
            if op == "store_nowait":
                assert isinstance(arg, MemoryEntry)
                memory.store_nowait(arg)
                continue
            if op == "retrieve":
                assert isinstance(arg, str)
                await memory.retrieve(arg, 3)  # access hits: committed with the next batch
                continue
            if op == "store":
                assert isinstance(arg, MemoryEntry)
                await memory.store(arg)
            elif op == "twin":  # a copy of the k-th visible entry, under another id
                assert isinstance(arg, tuple)
                k, twin = arg
                visible = [e for e in memory.snapshot() if e.id != twin]
                if not visible:
                    continue
                await memory.store(attrs.evolve(visible[k % len(visible)], id=twin))
            elif op == "delete":
                assert isinstance(arg, uuid.UUID)
                await memory.delete(arg)
            else:
                stats["merged"] += (await memory.consolidate()).merged
            # Acknowledged: every earlier batch, with the access hits buffered before
            # this write, is committed, and the snapshot shows exactly that (but for
            # the access bookkeeping held back: sqlite._DEFER_ACCESS).
            assert not memory._pending_access
            check_lagging(file_entries(path), list(memory.snapshot()), memory)
            stats["checks"] += 1
        # A clean close commits the access hits still buffered.
        assert not await memory.delete(uuid.uuid4())  # commits the hits so far
        before = list(memory.snapshot())
        hits: dict[uuid.UUID, int] = {}
        for query in close_queries:
            for e in await memory.retrieve(query, 3):
                hits[e.id] = hits.get(e.id, 0) + 1
        memory._state._check()
    expected = [
        attrs.evolve(
            e, access_count=min(e.access_count + hits[e.id], MAX_ACCESS_COUNT), last_accessed=NOW
        )
        if e.id in hits
        else e
        for e in before
    ]
    assert file_entries(path) == expected
    stats["hits"] = sum(hits.values())
    return stats


@settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacity=st.sampled_from([None, 2, 4]),
    program=st.lists(ops, min_size=1, max_size=25),
    close_queries=st.lists(queries, max_size=3),
)
def test_file_equals_the_published_memory_after_every_acknowledged_write(
    capacity: int | None, program: Program, close_queries: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        trio.run(run_ops, path, capacity, program, close_queries)
        # And a reopen loads what the file holds.
        assert file_entries(path) == trio.run(_reopened, path, capacity)


async def _reopened(path: Path, capacity: int | None) -> list[MemoryEntry]:
    async with open_memory(path=path, capacity=capacity) as memory:
        return list(memory.snapshot())


def test_the_model_test_compares_every_kind_of_write(tmp_path: Path) -> None:
    """A fixed program with a queued store, a retrieve, an awaited store, a twin merged
    by consolidation, a delete, and hits buffered at close: all of it is compared."""
    e = MemoryEntry.new(MemoryCategory.FACT, "deploy blue")
    program: Program = [
        ("store_nowait", e),
        ("retrieve", "deploy"),
        ("store", MemoryEntry.new(MemoryCategory.FACT, "rust go")),
        ("twin", (0, TWINS[0])),  # the first visible entry: "deploy blue"
        ("consolidate", None),
        ("delete", uuid.uuid4()),
    ]
    path = tmp_path / "m.db"
    stats = trio.run(run_ops, path, None, program, ["rust", "rust go"])
    assert (stats["checks"], stats["merged"]) == (4, 1)
    assert stats["hits"] >= 2  # "rust go" twice (word overlap tops up with the other)
    got = {x.memory: x for x in file_entries(path)}
    assert sorted(got) == ["deploy blue", "rust go"]
    assert (got["rust go"].access_count, got["rust go"].last_accessed) == (2, NOW)
