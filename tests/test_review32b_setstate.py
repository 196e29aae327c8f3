"""review32b: an entry unpickled from a forged state is refused when unpickled, as the
constructor refuses it, and never reaches the owner (where the compiled store's put
raised and broke the memory: BrokenResourceError for every later call)."""

from __future__ import annotations

import pickle
from datetime import datetime

import pytest
import trio

from actormem import InvalidEntryError, MemoryCategory, MemoryEntry, open_memory

_BAD = {
    "surrogate": {"memory": "a\ud800b"},
    "int relevance": {"relevance": 1},
    "relevance out of range": {"relevance": 2.0},
    "int validated": {"validated": 1},
    "str category": {"category": "fact"},
    "list tags": {"tags": ["a"]},
    "naive time": {"created_at": datetime(2020, 1, 1)},
}


def _forged(**fields: object) -> bytes:
    """A pickle of a MemoryEntry whose state has ``fields`` replaced."""
    entry = MemoryEntry.new(MemoryCategory.FACT, "deploy blue")
    state = entry.__getstate__()
    state.update(fields)
    return _pickle_with(state)


def _pickle_with(state: dict[str, object]) -> bytes:
    """Pickle bytes that unpickle as MemoryEntry.__new__ then __setstate__(state)."""

    class _Forge:
        def __reduce__(self) -> tuple[object, ...]:
            return (MemoryEntry.__new__, (MemoryEntry,), state)

    return pickle.dumps(_Forge())


@pytest.mark.parametrize("name", sorted(_BAD))
def test_a_forged_state_never_breaks_the_memory(name: str) -> None:
    """Refused when unpickled, or converted as the constructor converts it (an int
    relevance, a list of tags) and then stored like any entry."""
    raw = _forged(**_BAD[name])

    async def main() -> None:
        async with open_memory() as memory:
            try:
                entry = pickle.loads(raw)
            except (TypeError, InvalidEntryError):
                entry = None
            if entry is not None:
                await memory.store(entry)
                assert await memory.get(entry.id) == entry
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "after"))
            assert len(memory) == (2 if entry is not None else 1)

    trio.run(main)


def test_a_valid_state_still_round_trips() -> None:
    e = MemoryEntry.new(MemoryCategory.FACT, "x \U0001f600").with_tags("a", "b")
    assert pickle.loads(pickle.dumps(e)) == e
