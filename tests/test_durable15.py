"""Branch durable15: access bookkeeping held back relatime-style
(``sqlite._DEFER_ACCESS``), against the path before it (each batch's access updates in
its own commit).

* The same replies, statistics, reopened entries and file rows either way: Hypothesis
  runs ``test_durable10``'s programs (stores, ``store_many``, upserts, deletes, deletes
  by key, retrieves, consolidations, expiries) with the knob off, on (held until the
  close), and on with at most 2 entries pending (written amid puts and deletes of the
  same seqs); and ``test_durable_model``'s programs with the knob off, where the file
  must equal the snapshot exactly after every acknowledged write (on: the model test
  itself, which allows the documented lag).
* A hit commits nothing while it is held back; a store commits its row alone; the owner
  wakes by itself once the oldest pending update is ``ACCESS_DELAY`` old and commits
  it (one ``UPDATE``); ``ACCESS_PENDING`` pending entries are written by the next commit.
* SIGKILL of a child that stores and retrieves, with updates flushed every few entries:
  every acknowledged store is there (all but the access fields), ``integrity_check``
  ok, no access count ahead of what the child could have made, and some flushed.
"""

from __future__ import annotations

import os
import random
import sqlite3
import sys
import tempfile
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store

from . import crash_child
from .setups import killed_round, knobs_set, read_back_as_acked
from .strategies import examples
from .test_durable10 import T0, Clock, _dump, _ops, _play, _words
from .test_durable_model import Program, run_ops
from .test_durable_model import ops as model_ops

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="durable memories need fcntl.flock (POSIX)"
)


def _sides(side: str) -> dict[str, Any]:
    if side == "off":
        return {"_DEFER_ACCESS": False}
    if side == "on":  # held until the close (no flush by count or age in a test's run)
        return {"_DEFER_ACCESS": True, "ACCESS_DELAY": 1e6}
    return {"_DEFER_ACCESS": True, "ACCESS_PENDING": 2, "ACCESS_DELAY": 1e6}


def _with(knobs: dict[str, Any], fn: Any, *args: Any) -> Any:
    with knobs_set(sqlite_store, **knobs):
        return fn(*args)


@settings(
    max_examples=examples(15),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    ops=_ops,
    words=_words,
)
def test_files_and_replies_are_the_same_either_way(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]], words: list[list[str]]
) -> None:
    folder = tmp_path_factory.mktemp("same")
    outs = []
    for side in ("off", "on", "two"):
        path = folder / f"{side}.db"
        got = _with(_sides(side), trio.run, _play, path, ops, words)
        outs.append((got, _dump(path)))
    assert outs[0] == outs[1]
    assert outs[0] == outs[2]


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacity=st.sampled_from([None, 2, 4]),
    program=st.lists(model_ops, min_size=1, max_size=25),
    close_queries=st.lists(st.sampled_from(["deploy", "rust go", "a"]), max_size=3),
)
def test_knob_off_the_file_equals_the_memory_after_every_write(
    capacity: int | None, program: Program, close_queries: list[str]
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        _with(
            _sides("off"), trio.run, run_ops, Path(tmp) / "m.db", capacity, program,
            close_queries,
        )  # fmt: skip


NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def _fact(i: int) -> MemoryEntry:
    """Entry ``i``: its own word (``NAMES``, then ``wN``) beside a shared one."""
    word = NAMES[i] if i < len(NAMES) else f"w{i}"
    return MemoryEntry(
        id=uuid.UUID(int=1000 + i),
        category=MemoryCategory.FACT,
        memory=f"entry {word}",
        created_at=T0 + timedelta(seconds=i),
    )


def _kinds(statements: list[str]) -> list[str]:
    return [s.split()[0] for s in statements]


async def test_a_hit_is_held_back_then_committed_once_it_is_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_C_COMMIT", False)  # traced on the store's connection
    monkeypatch.setattr(sqlite_store, "_DEFER_ACCESS", True)
    monkeypatch.setattr(sqlite_store, "ACCESS_DELAY", 0.3)
    path = tmp_path / "m.db"
    async with open_memory(path=path) as memory:
        for i in range(50):
            await memory.store(_fact(i))
        store = memory._storage
        assert store is not None
        assert store._conn is not None
        statements: list[str] = []
        store._conn.set_trace_callback(statements.append)
        commits = store.commits
        await memory.retrieve("hotel", 1)  # a hit
        await memory.sweep_expired()  # the owner applied it: held back, nothing written
        assert (statements, store.pending_accesses, store.commits) == ([], 1, commits)
        await memory.store(_fact(50))  # its row alone
        assert "UPDATE" not in _kinds(statements)
        assert "INSERT" in _kinds(statements)
        assert store.pending_accesses == 1
        statements.clear()
        await trio.sleep(0.6)  # idle: the owner wakes for the due update by itself
        assert _kinds(statements) == ["BEGIN", "UPDATE", "COMMIT"]
        assert store.pending_accesses == 0
        assert memory._access_due == float("inf")
        conn = sqlite3.connect(path)
        try:
            seq = next(
                r.seq for r in memory._state._by_id.values() if r.entry.memory == "entry hotel"
            )
            assert conn.execute(
                "SELECT access_count FROM entries WHERE seq = ?", (seq,)
            ).fetchone() == (1,)
        finally:
            conn.close()


async def test_the_pending_limit_writes_them_with_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "_DEFER_ACCESS", True)
    monkeypatch.setattr(sqlite_store, "ACCESS_PENDING", 3)
    monkeypatch.setattr(sqlite_store, "ACCESS_DELAY", 1e6)
    path = tmp_path / "m.db"

    def counts() -> list[int]:
        conn = sqlite3.connect(path)
        try:
            return [n for (n,) in conn.execute("SELECT access_count FROM entries ORDER BY seq")]
        finally:
            conn.close()

    async with open_memory(path=path) as memory:
        for i in range(5):
            await memory.store(_fact(i))
        store = memory._storage
        assert store is not None
        for i in range(2):
            await memory.retrieve(NAMES[i], 1)
            await memory.sweep_expired()
        assert (counts(), store.pending_accesses) == ([0] * 5, 2)
        await memory.retrieve("bravo", 1)  # the same entry: still two pending
        await memory.store(_fact(5))
        assert (counts(), store.pending_accesses) == ([0] * 6, 2)
        await memory.retrieve("echo", 1)  # the third
        await memory.sweep_expired()
        assert (counts(), store.pending_accesses) == ([1, 2, 0, 0, 1, 0], 0)
        await memory.retrieve("delta", 1)
        await memory.sweep_expired()
        assert counts() == [1, 2, 0, 0, 1, 0]
    assert counts() == [1, 2, 0, 1, 1, 0]  # the close writes what was held back


async def test_both_bounds_are_read_when_the_memory_opens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Branch tidy24b: ``ACCESS_PENDING`` and ``ACCESS_DELAY`` are read once, as
    ``_DEFER_ACCESS`` is, when a memory opens; a change after that applies to memories
    opened after it (the pending limit was read at every commit before)."""
    monkeypatch.setattr(sqlite_store, "_DEFER_ACCESS", True)
    monkeypatch.setattr(sqlite_store, "ACCESS_PENDING", 3)
    monkeypatch.setattr(sqlite_store, "ACCESS_DELAY", 1e6)
    async with open_memory(path=tmp_path / "m.db") as memory:
        for i in range(5):
            await memory.store(_fact(i))
        store = memory._storage
        assert store is not None
        monkeypatch.setattr(sqlite_store, "ACCESS_PENDING", 1)
        monkeypatch.setattr(sqlite_store, "ACCESS_DELAY", 0.01)
        for name in NAMES[:2]:
            await memory.retrieve(name, 1)
            await memory.sweep_expired()
        await memory.store(_fact(5))
        await trio.sleep(0.1)  # the delay of the open (1e6 s) holds them still
        assert store.pending_accesses == 2
        await memory.retrieve(NAMES[2], 1)  # the third: the open's limit
        await memory.sweep_expired()
        assert store.pending_accesses == 0
    async with open_memory(path=tmp_path / "m.db") as memory:  # the new values
        store = memory._storage
        assert store is not None
        await memory.retrieve(NAMES[3], 1)
        await memory.sweep_expired()  # a limit of 1: written at once
        assert store.pending_accesses == 0
    for bad in (-1, 1.5, True, None):
        with pytest.raises(ValueError, match="defer_accesses"):
            store.defer_accesses(bad)  # type: ignore[arg-type]


def _kill_trial(path: str, seed: int) -> tuple[int, int, list[int]]:
    """SIGKILL a child that stores and retrieves, with access updates held back and
    written every 8 pending entries or 20 ms, three times; every acknowledged store must
    read back (all but the access fields), no count above what the child's retrieves
    could have added, and ``integrity_check`` ok. Returns (acknowledged, entries whose
    count the file raised, lost)."""
    rng = random.Random(seed)
    env = dict(
        os.environ, ACTORMEM_TEST_RETRIEVE="1", ACTORMEM_TEST_ACCESS_PENDING="8",
        ACTORMEM_TEST_ACCESS_DELAY="0.02",
    )  # fmt: skip
    acked: list[tuple[int, str]] = []
    for round_ in range(3):
        kill_after = rng.randint(40, 200)
        acked.extend(killed_round(path, seed, round_, env, kill_after, rng.random() * 0.01))
    found = trio.run(crash_child._read_back, path)
    lost, raised = [], 0
    for i, id in acked:
        have, want = read_back_as_acked(found, seed, i, id)
        if have is None:
            lost.append(i)
            continue
        # Each retrieve returns 3 entries at most, one retrieve after each store
        # (acknowledged or in flight when killed: up to 4 more a round).
        assert want.access_count <= have.access_count <= want.access_count + len(acked) + 12
        raised += have.access_count > want.access_count
    return len(acked), raised, lost


def test_sigkill_with_access_updates_held_back_loses_no_store(tmp_path: Path) -> None:
    acked, raised, lost = _kill_trial(str(tmp_path / "k.db"), seed=15)
    assert lost == []
    assert acked >= 120
    assert raised > 0  # updates held back were written before the kills


async def _upserts(path: Path) -> None:
    async with open_memory(path=path, clock=Clock()) as memory:
        for i in range(4):
            await memory.store(_fact(i))
        for name in ("alpha", "alpha", "bravo", "charlie"):
            await memory.retrieve(name, 1)
            await memory.sweep_expired()  # the same batches on every side
        # three entries' updates held back (on)
        await memory.store(attrs.evolve(_fact(0), memory="entry again"))  # upsert: same seq
        await memory.delete(_fact(1).id)
        await memory.store(_fact(1))  # born again: a new seq
        await memory.retrieve("delta", 1)


def test_an_upsert_or_a_delete_drops_the_update_held_back(tmp_path: Path) -> None:
    """A put of a seq whose update is held back writes the row whole; the stale update
    must not be written after it (nor one of a deleted row): the file is the knob-off
    one, the upserted entry's count 0 (its new entry's)."""
    dumps = []
    for side in ("off", "on", "two"):
        path = tmp_path / f"{side}.db"
        _with(_sides(side), trio.run, _upserts, path)
        dumps.append(_dump(path))
    assert dumps[0] == dumps[1]
    assert dumps[0] == dumps[2]
    conn = sqlite3.connect(tmp_path / "on.db")
    try:
        got = dict(conn.execute("SELECT memory, access_count FROM entries"))
    finally:
        conn.close()
    assert got == {"entry again": 0, "entry bravo": 0, "entry charlie": 1, "entry delta": 1}
