"""Review21c: a KeyboardInterrupt that strikes in ``open_memory`` after the file was
opened and before the owner task started (trio delivers it at any bytecode of
unprotected code) must not leave the file's lock held: the process could never open
that file again (an unclosed store keeps its lock even once collected)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine import lifecycle


async def _stored(path: Path) -> None:
    async with open_memory(path=path) as memory:
        await memory.store(MemoryEntry(memory="alpha", category=MemoryCategory.FACT))


def test_an_interrupt_before_the_owner_starts_releases_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_stored, db)
    real_open = lifecycle._open_memory
    real_nursery = trio.open_nursery
    armed: list[bool] = []

    async def opened(*args: Any) -> Any:
        got = await real_open(*args)
        armed.append(True)
        return got

    def nursery(*args: Any, **kwargs: Any) -> Any:
        if armed:
            armed.clear()
            raise KeyboardInterrupt  # as trio's handler raises it at this bytecode
        return real_nursery(*args, **kwargs)

    async def interrupted() -> None:
        async with open_memory(path=db):
            pass

    monkeypatch.setattr(lifecycle, "_open_memory", opened)
    monkeypatch.setattr(trio, "open_nursery", nursery)
    with pytest.raises(KeyboardInterrupt):
        trio.run(interrupted)
    monkeypatch.undo()
    gc.collect()

    async def count() -> int:
        async with open_memory(path=db) as memory:
            return len(memory)

    assert trio.run(count) == 1
