"""review32c: a forged pickle never breaks a memory, through the entry's value either.

review32b made MemoryEntry.__setstate__ run the constructor, but the constructor takes a
JsonObject as it is (``freeze_json``), and a JsonObject unpickled from its default slot
state (``_data``, ``_key``) was never checked: a set, a NaN or a lone surrogate in it
killed the owner (in-memory and durable), a 10 MB one passed MAX_VALUE_BYTES, and a
``_key`` that lies made two different values equal. A MemoryEntry unpickled with no
state at all (``MemoryEntry.__new__`` only) killed the in-memory owner (AttributeError).
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import InvalidEntryError, MemoryCategory, MemoryEntry, open_memory
from actormem._json import JsonObject


class _Forge:
    def __init__(self, func: Any, args: tuple[Any, ...], state: Any = None) -> None:
        self.func, self.args, self.state = func, args, state

    def __reduce__(self) -> tuple[Any, ...]:
        if self.state is None:
            return (self.func, self.args)
        return (self.func, self.args, self.state)


def _json(data: Any, key: str | None = None) -> _Forge:
    """A JsonObject pickled as its default slot state would be."""
    return _Forge(JsonObject.__new__, (JsonObject,), (None, {"_data": data, "_key": key}))


def _entry_with_value(value: Any) -> bytes:
    state = MemoryEntry(category=MemoryCategory.FACT, memory="m", key="k").__getstate__()
    state["value"] = value
    return pickle.dumps(_Forge(MemoryEntry.__new__, (MemoryEntry,), state), 2)


_BAD = {
    "set": _json({"a": {1, 2}}),
    "nan": _json({"a": float("nan")}),
    "surrogate": _json({"a": "\ud800"}),
    "too large": _json({"a": "x" * 2_000_000}),
    "not a dict": _json([1, 2]),
    "nested forged": _json({"a": _json({"b": {3}})}),
    "no state": _Forge(JsonObject.__new__, (JsonObject,)),
}


@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("name", sorted(_BAD))
def test_a_forged_value_never_breaks_the_memory(name: str, durable: bool, tmp_path: Path) -> None:
    raw = _entry_with_value(_BAD[name])

    async def main() -> None:
        async with open_memory(path=tmp_path / "m.db" if durable else None) as memory:
            try:
                entry = pickle.loads(raw)
            except (TypeError, ValueError, InvalidEntryError):
                entry = None
            if entry is not None:
                with pytest.raises((TypeError, InvalidEntryError)):
                    await memory.store(entry)
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "after"))
            assert len(memory) == 1

    trio.run(main)


def test_a_lying_key_is_not_kept() -> None:
    forged = pickle.loads(pickle.dumps(_json({"a": 1}, '{"b":2}'), 2))
    assert forged == JsonObject({"a": 1})
    assert forged != JsonObject({"b": 2})


@pytest.mark.parametrize("durable", [False, True])
def test_an_entry_with_no_state_never_breaks_the_memory(durable: bool, tmp_path: Path) -> None:
    raw = pickle.dumps(_Forge(MemoryEntry.__new__, (MemoryEntry,)), 2)

    async def main() -> None:
        async with open_memory(path=tmp_path / "m.db" if durable else None) as memory:
            entry = pickle.loads(raw)
            with pytest.raises(TypeError):
                await memory.store(entry)
            with pytest.raises(TypeError):
                await memory.store_many([entry])
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "after"))
            assert len(memory) == 1

    trio.run(main)


@pytest.mark.parametrize("proto", range(pickle.HIGHEST_PROTOCOL + 1))
def test_values_round_trip_every_protocol(proto: int) -> None:
    value = JsonObject({"a": [1, {"b": "é\U0001f600"}], "c": None, "d": 1.5, "e": True})
    back = pickle.loads(pickle.dumps(value, proto))
    assert back == value
    assert back.to_json() == value.to_json()
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="m", key="k", value=value)
    assert pickle.loads(pickle.dumps(entry, proto)) == entry


@pytest.mark.parametrize("state", [(1, 2), [("memory", "m")], "x", 5])
def test_a_state_of_the_wrong_shape_is_a_clear_type_error(state: Any) -> None:
    raw = pickle.dumps(_Forge(MemoryEntry.__new__, (MemoryEntry,), state), 2)
    with pytest.raises(TypeError, match="not the state of a MemoryEntry"):
        pickle.loads(raw)
