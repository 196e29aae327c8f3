"""Review 23d: access updates held back (``sqlite._DEFER_ACCESS``, branch durable15)
against a model, with the expiry refreshes of ``refresh_ttl`` reads, upserts, deletes,
consolidations, expiries and crash images taken amid them.

After every acknowledged write the file equals the published snapshot but for the
access columns (count, last access, expiry) of at most as many entries as the store
holds back, never ahead; a crash image (an online backup of the committed state: what a
SIGKILL leaves) taken then obeys the same bound; a clean close leaves the file equal to
the last snapshot exactly, expiries included.
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
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite_format import read_validated

from .strategies import examples

pytestmark = pytest.mark.skipif(
    sys.platform == "win32", reason="durable memories need fcntl.flock (POSIX)"
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
WORDS = ["alpha", "bravo", "charlie", "delta"]


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def _entry(i: int, version: int, ttl: bool, now: datetime) -> MemoryEntry:
    return MemoryEntry(
        created_at=now,
        id=uuid.UUID(int=i + 1),
        category=MemoryCategory.FACT,
        memory=f"{WORDS[i % len(WORDS)]} shared v{version} #{i}",
        ttl=3600.0 if ttl else None,
    )


_store = st.tuples(st.just("store"), st.integers(0, 3), st.booleans())
_retrieve = st.tuples(st.just("retrieve"), st.sampled_from([*WORDS, "shared"]), st.none())
_get = st.tuples(st.just("get"), st.integers(0, 3), st.none())
_op = st.one_of(
    _store,
    _store,
    _retrieve,
    _retrieve,
    _get,
    st.tuples(st.just("delete"), st.integers(0, 3), st.none()),
    st.tuples(st.just("list"), st.none(), st.none()),
    st.tuples(st.just("tick"), st.integers(1, 2500), st.none()),
    st.tuples(st.just("consolidate"), st.none(), st.none()),
    st.tuples(st.just("sweep"), st.none(), st.none()),
    st.tuples(st.just("crash"), st.none(), st.none()),
)


def _strip(e: MemoryEntry) -> MemoryEntry:
    return attrs.evolve(e, access_count=0, last_accessed=None, expires_at=None)


def _check_lagging(got: list[MemoryEntry], want: list[MemoryEntry], held: int) -> None:
    """``got`` (a file) is ``want`` (a snapshot) but for the access columns of at most
    ``held`` entries, which are never ahead."""
    g = {e.id: e for e in got}
    w = {e.id: e for e in want}
    assert set(g) == set(w)
    behind = 0
    for id, have in g.items():
        should = w[id]
        assert _strip(have) == _strip(should)
        if have == should:
            continue
        behind += 1
        assert have.access_count <= should.access_count
        assert have.last_accessed is None or (
            should.last_accessed is not None and have.last_accessed <= should.last_accessed
        )
        assert have.expires_at is None or (
            should.expires_at is not None and have.expires_at <= should.expires_at
        )
    assert behind <= held


def _backup(src: Path, dst: Path) -> None:
    """The committed state of ``src`` (what a kill leaves), as a file at ``dst``."""
    a = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
    b = sqlite3.connect(dst)
    try:
        a.backup(b)
    finally:
        a.close()
        b.close()


async def _play(tmp: Path, program: list[tuple[str, Any, Any]]) -> None:
    path = tmp / "m.db"
    clock = Clock()
    version = 0
    crashes: list[tuple[Path, list[MemoryEntry], int]] = []
    async with open_memory(path=path, clock=clock) as memory:
        store = memory._storage
        assert store is not None

        def check() -> None:
            assert not memory._pending_access
            _check_lagging(
                [e for _, e in read_validated(str(path))],
                list(memory.snapshot()),
                store.pending_accesses,
            )

        for op, a, b in program:
            if op == "store":
                version += 1
                await memory.store(_entry(a, version, b, clock.now))
                check()
            elif op == "delete":
                await memory.delete(uuid.UUID(int=a + 1))
                check()
            elif op == "retrieve":
                await memory.retrieve(a, 3)
            elif op == "get":
                await memory.get(uuid.UUID(int=a + 1), refresh_ttl=True)
            elif op == "list":
                await memory.list_entries(limit=3, refresh_ttl=True)
            elif op == "tick":
                clock.now += timedelta(seconds=a)
            elif op == "consolidate":
                await memory.consolidate()
                check()
            elif op == "sweep":
                await memory.sweep_expired()
                check()
            else:
                await memory.sweep_expired()  # an acknowledged point
                copy = tmp / f"crash{len(crashes)}.db"
                _backup(path, copy)
                crashes.append((copy, list(memory.snapshot()), store.pending_accesses))
        await memory.sweep_expired()
        check()
        final = list(memory.snapshot())
    # A clean close writes everything held back: the file is the last snapshot.
    got = {e.id: e for _, e in read_validated(str(path))}
    assert got == {e.id: e for e in final}
    for copy, snap, held in crashes:
        _check_lagging([e for _, e in read_validated(str(copy))], snap, held)


@settings(
    max_examples=examples(60),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    program=st.lists(_op, max_size=40),
    pending=st.sampled_from([4096, 2, 4096, 3]),
    delay=st.sampled_from([1e6, 0.0, 1e6]),
)
def test_held_back_updates_against_the_snapshot(
    tmp_path_factory: pytest.TempPathFactory,
    program: list[tuple[str, Any, Any]],
    pending: int,
    delay: float,
) -> None:
    tmp = tmp_path_factory.mktemp("held")
    saved = (sqlite_store._DEFER_ACCESS, sqlite_store.ACCESS_PENDING, sqlite_store.ACCESS_DELAY)
    sqlite_store._DEFER_ACCESS = True
    sqlite_store.ACCESS_PENDING = pending
    sqlite_store.ACCESS_DELAY = delay
    try:
        trio.run(_play, tmp, program)
    finally:
        (sqlite_store._DEFER_ACCESS, sqlite_store.ACCESS_PENDING, sqlite_store.ACCESS_DELAY) = saved


class _CancelAfter(trio.abc.Instrument):
    """Cancel ``scope`` just before the ``n``-th task step of the run."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.scope: trio.CancelScope | None = None

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.n -= 1
        if self.n == 0 and self.scope is not None:
            self.scope.cancel()


async def _cancelled_at(path: Path, step: _CancelAfter) -> tuple[list[str], Any]:
    acked: list[str] = []
    memory: Any = None
    clock = Clock()
    with trio.CancelScope() as scope:
        step.scope = scope
        async with open_memory(path=path, clock=clock) as memory:
            for i in range(6):
                entry = _entry(i % 4, i, i % 2 == 0, clock.now)
                await memory.store(entry)
                acked.append(entry.memory)
                await memory.retrieve("shared", 3)
                await memory.get(uuid.UUID(int=1), refresh_ttl=True)
                clock.now += timedelta(seconds=10)
                await trio.sleep(0.02)  # the timer's delay: it fires amid the steps
            acked.append("-")  # sent: applied even if its caller is cancelled
            await memory.delete(uuid.UUID(int=2))
    return acked, memory


@pytest.mark.parametrize("delay", [0.01, 1e6])
@pytest.mark.parametrize("n", range(1, 90, 2))
def test_cancelled_at_any_step_the_close_writes_what_was_held(
    tmp_path: Path, n: int, delay: float
) -> None:
    """The memory's nursery cancelled at the n-th task step (of the owner, the timer, the
    test): every acknowledged store is in the file; the close wrote every access change
    the owner applied (the file's access columns equal the memory's records)."""
    saved = (sqlite_store._DEFER_ACCESS, sqlite_store.ACCESS_DELAY)
    sqlite_store._DEFER_ACCESS, sqlite_store.ACCESS_DELAY = True, delay
    try:
        path = tmp_path / "m.db"
        step = _CancelAfter(n)
        acked, memory = trio.run(_cancelled_at, path, step, instruments=[step])
    finally:
        sqlite_store._DEFER_ACCESS, sqlite_store.ACCESS_DELAY = saved
    if memory is None:
        return  # cancelled while opening
    assert memory._broken is None
    got = {e.id: e for _, e in read_validated(str(path))}
    view = memory._state.view()
    mem = {rec.entry.id: view.entry(rec) for rec in memory._state._by_id.values()}
    mem = {id: e for id, e in mem.items() if view.get(id) is not None}
    assert got == mem
    last = {}  # each id's last acknowledged text
    for text in acked:
        if text != "-":
            last[int(text.rsplit("#", 1)[1])] = text
    for i, text in last.items():
        if not ("-" in acked and i == 1):
            # that store, or one sent after it (applied, its caller cancelled)
            have = got[uuid.UUID(int=i + 1)].memory
            assert int(have.split(" v")[1].split()[0]) >= int(text.split(" v")[1].split()[0])
