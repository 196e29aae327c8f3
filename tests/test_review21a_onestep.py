"""review21a: a retrieve over many entries that share a few texts (few groups) must stay
sliced: ``one_step_ok`` bounded only the numbering's groups, so a filtered word-overlap
retrieve over 100,000 entries of one text ran every record's filter in one task step
(~0.5 s with no schedule point: writers and every other task held up)."""

from __future__ import annotations

from typing import Any

import pytest

import actormem._engine.snapshot as snapshot
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._index.wordoverlap import knobs as wo_knobs


async def test_many_entries_of_few_texts_are_sliced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshot, "_ONE_STEP_SMALL", True)
    monkeypatch.setattr(wo_knobs, "_ONE_STEP_ENTRIES", 100, raising=False)
    calls = 0
    real = snapshot._run_sliced

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        return await real(*args, **kwargs)

    monkeypatch.setattr(snapshot, "_run_sliced", counted)
    async with open_memory() as memory:
        await memory.store_many(
            MemoryEntry.new(MemoryCategory.FACT, "deploy the blue cluster") for _ in range(100)
        )
        assert memory._state.index._e.n == 1  # one group
        assert await memory.retrieve("deploy blue", 3, where={"nope": 1}) == []
        assert calls == 0  # 100 entries: one step
        await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploy the blue cluster"))
        assert await memory.retrieve("deploy blue", 3, where={"nope": 1}) == []
        assert calls == 1  # 101 entries of one text: sliced
