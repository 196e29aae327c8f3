"""The file equals the memory after every acknowledged write (Hypothesis).

A crash can strike between any two commits, so "nothing acknowledged is ever lost"
means more than a good file at close: once any awaited write returns, the file must
hold exactly what readers see, access counts included. Random mixes of queued and
awaited stores (new ids, upserts, evictions), deletes, retrieves (access updates) and
consolidations; after each awaited write the file is read through a second, read-only
SQLite connection (as a process opening it after a crash would) and compared with the
published snapshot, field by field, in insertion order.
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._sqlite_format import read_validated

from .strategies import entries, queries

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="durable memories need fcntl.flock (POSIX)"
)

#: Ids the operations draw from, so that stores hit existing ids (upserts) and deletes
#: hit stored ones.
POOL = [uuid.UUID(int=i + 1) for i in range(6)]

ids = st.sampled_from(POOL)
ops = st.one_of(
    st.tuples(st.just("store"), ids.flatmap(lambda i: entries(id=i))),
    st.tuples(st.just("store_nowait"), ids.flatmap(lambda i: entries(id=i))),
    st.tuples(st.just("delete"), ids),
    st.tuples(st.just("retrieve"), queries),
    st.tuples(st.just("consolidate"), st.none()),
)


def file_entries(path: Path) -> list[MemoryEntry]:
    return [entry for _, entry in read_validated(str(path))]


async def run_ops(path: Path, capacity: int | None, program: list[tuple[str, object]]) -> int:
    """Apply ``program``; return how many times the file was compared."""
    checks = 0
    async with open_memory(path=path, capacity=capacity) as memory:
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
            elif op == "delete":
                assert isinstance(arg, uuid.UUID)
                await memory.delete(arg)
            else:
                await memory.consolidate()
            # Acknowledged: every earlier batch, with the access hits buffered before
            # this write, is committed, and the snapshot shows exactly that.
            assert not memory._pending_access
            assert file_entries(path) == list(memory.snapshot())
            checks += 1
        memory._state._check()
    return checks


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacity=st.sampled_from([None, 2, 4]),
    program=st.lists(ops, min_size=1, max_size=25),
)
def test_file_equals_the_published_memory_after_every_acknowledged_write(
    capacity: int | None, program: list[tuple[str, object]]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "memory.db"
        trio.run(run_ops, path, capacity, program)
        # And what a reopen loads is what the last acknowledged write left.
        assert file_entries(path) == trio.run(_reopened, path, capacity)


async def _reopened(path: Path, capacity: int | None) -> list[MemoryEntry]:
    async with open_memory(path=path, capacity=capacity) as memory:
        return list(memory.snapshot())


def test_the_model_test_compares_something(tmp_path: Path) -> None:
    """The comparison runs and sees changes: a program with every kind of write."""
    e = MemoryEntry.new(MemoryCategory.FACT, "deploy blue")
    program: list[tuple[str, object]] = [
        ("store_nowait", e),
        ("retrieve", "deploy"),
        ("store", MemoryEntry.new(MemoryCategory.FACT, "rust go")),
        ("delete", e.id),
        ("consolidate", None),
    ]
    assert trio.run(run_ops, tmp_path / "m.db", None, program) == 3
    [kept] = file_entries(tmp_path / "m.db")
    assert kept.memory == "rust go"
