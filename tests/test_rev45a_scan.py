"""Review rev45a: ``Memory.scan`` sorted every record of the snapshot in one step.

``scan_sliced`` resolved the records in pieces between checkpoints, then sorted all of
them by ``seq`` at once, assuming the id map's order is nearly insertion order. The
id map is the compiled ``IdTable`` (a hash table): its order is not insertion order,
and the one sort took ~80 ms at 100,000 entries and 0.7-2 s at 1,000,000, in one step
of the event loop (stores waited that long behind each scan or export). Each piece is
now sorted on its own and the pieces merged lazily as the entries are asked for.
"""

from __future__ import annotations

import operator
import random
import uuid
from typing import Any

import pytest
import trio

import actormem._engine.snapshot as snapshot_mod
from actormem import MemoryCategory, MemoryEntry, open_memory


def _entry(i: int) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=f"fact number {i} about the garden",
        id=uuid.UUID(int=random.Random(i).getrandbits(120) + 1),  # hash order, not seq
    )


async def test_no_step_of_a_scan_sorts_more_than_a_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """Records ordered by ``seq`` between two checkpoints of a scan of 5,000 entries:
    at most a piece's (before: all 5,000 in the step after the last piece)."""
    monkeypatch.setattr(snapshot_mod, "RETRIEVE_SLICE", 0.0)
    keyed = [0]
    seq = operator.attrgetter("seq")

    def counting_seq(rec: Any) -> int:
        keyed[0] += 1
        return seq(rec)  # type: ignore[no-any-return]

    monkeypatch.setattr(snapshot_mod, "_SEQ", counting_seq)
    async with open_memory() as memory:
        await memory.store_many([_entry(i) for i in range(5000)])
        snap = memory.snapshot()
        expected = list(snap)
        steps: list[int] = []
        checkpoint = trio.lowlevel.checkpoint

        async def counted() -> None:
            steps.append(keyed[0])
            keyed[0] = 0
            await checkpoint()

        monkeypatch.setattr(trio.lowlevel, "checkpoint", counted)
        got = [e async for e in snapshot_mod.scan_sliced(snap, None)]
        steps.append(keyed[0])
        monkeypatch.setattr(trio.lowlevel, "checkpoint", checkpoint)
        assert got == expected
        assert sum(steps) >= 5000
        assert max(steps) <= snapshot_mod._SCAN_PIECE


def test_seq_runs_merged_is_a_stable_sort_of_the_runs() -> None:
    class R:
        __slots__ = ("seq", "tag")

        def __init__(self, seq: int, tag: int) -> None:
            self.seq, self.tag = seq, tag

    rng = random.Random(45)
    for _ in range(300):
        runs = []
        for _ in range(rng.randrange(1, 8)):
            run = [R(rng.randrange(40), rng.randrange(10**6)) for _ in range(rng.randrange(1, 9))]
            run.sort(key=lambda r: r.seq)
            runs.append(run)
        want = sorted((r for run in runs for r in run), key=lambda r: r.seq)
        got = list(snapshot_mod._seq_runs_merged(runs))  # type: ignore[arg-type]
        assert [(r.seq, r.tag) for r in got] == [(r.seq, r.tag) for r in want]


async def test_a_snapshot_taken_before_the_state_was_replaced_is_still_scanned() -> None:
    """A replica's bootstrap (``Replica.bootstrap``) replaces ``memory._state`` with one
    decoded from the log's snapshot. A snapshot of the memory taken before stays its
    and readable (iterating it works); ``scan`` refused it as "another memory's"
    (it compared states), and so would an export whose snapshot was taken just before."""
    async with open_memory() as memory, open_memory() as other:
        await memory.store_many([_entry(i) for i in range(20)])
        snap = memory.snapshot()
        expected = list(snap)
        real = memory._state
        memory._state = other._state  # as a bootstrap does: a new state, the same memory
        try:
            assert [e async for e in memory.scan(snap)] == expected
            with pytest.raises(ValueError, match="another"):
                memory.scan(other.snapshot())
        finally:
            memory._state = real
