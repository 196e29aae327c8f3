"""An untracked entry (``state._UNTRACK_ENTRIES``) must be in no reference cycle: the
collector never walks it, so a cycle through it is never freed. An entry's fields are
normalized to exact built-in types on construction, so nothing it holds can carry a
``__dict__`` that refers back to it: a ``str`` subclass in a JSON ``value``, a
``datetime`` subclass already in UTC (``astimezone`` hands it back as is), an ``int``
subclass as ``access_count`` or as a UUID's int were kept as given (review revB).
"""

from __future__ import annotations

import gc
import uuid
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine.state import MemoryState
from actormem._index.bm25 import BM25Scorer
from actormem._index.wordoverlap import WordOverlapScorer


class _Str(str):
    pass


class _Time(datetime):
    pass


class _Int(int):
    pass


class _Marker:
    pass


class _UUID(uuid.UUID):
    """A UUID whose ``int`` is an int subclass (with a ``__dict__``)."""

    @property  # type: ignore[override]
    def int(self) -> Any:
        return _HELD[0]


_HELD: list[Any] = []


def _tagged(make: Callable[[], Any]) -> tuple[Any, weakref.ref[_Marker]]:
    obj = make()
    marker = _Marker()
    obj.marker = marker
    return obj, weakref.ref(marker)


def _fields(obj: Any) -> dict[str, Any]:
    return {
        "value": lambda: {"a": [1, {"b": obj}]},
        "created_at": lambda: obj,
        "last_accessed": lambda: obj,
        "expires_at": lambda: obj,
        "updated_at": lambda: obj,
        "access_count": lambda: obj,
    }


_CASES = [
    ("value", lambda: _Str("hostile")),
    ("created_at", lambda: _Time(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("last_accessed", lambda: _Time(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("expires_at", lambda: _Time(2030, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("access_count", lambda: _Int(3)),
]


@pytest.mark.parametrize("scorer", [WordOverlapScorer, BM25Scorer])
@pytest.mark.parametrize(("field", "make"), _CASES, ids=[c[0] for c in _CASES])
@pytest.mark.parametrize("many", [False, True])
def test_an_entry_holding_a_subclass_instance_is_freed(
    scorer: Callable[[], Any], field: str, make: Callable[[], Any], many: bool
) -> None:
    obj, alive = _tagged(make)
    fields = {field: _fields(obj)[field]()}
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="a b", **fields)
    state = MemoryState(capacity=None, half_life=86400.0, scorer=scorer())
    if many:
        state.store_many([entry])
    else:
        state.store(entry)
    obj.back = entry  # a cycle obj -> entry -> ... -> obj, if the entry kept obj
    del obj, entry, state, fields
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize(("field", "make"), _CASES, ids=[c[0] for c in _CASES])
def test_fields_are_exact_builtin_types(field: str, make: Callable[[], Any]) -> None:
    obj = make()
    fields = {field: _fields(obj)[field]()}
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="a b", **fields)
    got = entry.value["a"][1]["b"] if field == "value" else getattr(entry, field)  # type: ignore[index]
    assert type(got) in (str, datetime, int)
    assert got == obj
    if isinstance(got, datetime):
        assert got.tzinfo is UTC


def test_a_uuid_subclass_int_is_kept_exact() -> None:
    _HELD[:] = [_Int(uuid.uuid4().int)]
    try:
        ident = object.__new__(_UUID)  # UUID.__init__ cannot set an overridden int
        entry = MemoryEntry(category=MemoryCategory.FACT, memory="a", id=ident)
        assert type(entry._id) is int
        assert entry._id == _HELD[0]
    finally:
        _HELD.clear()


def test_a_dropped_memory_frees_an_entry_held_in_a_cycle() -> None:
    """Through the public API: a memory closed and dropped leaves nothing behind, even
    when the caller's own object (a str subclass in the payload) refers to the entry."""
    held, alive = _tagged(lambda: _Str("x"))
    box = [held]
    del held

    async def main() -> None:
        async with open_memory(capacity=None) as memory:
            obj = box[0]
            entry = MemoryEntry(category=MemoryCategory.FACT, memory="a b", value={"k": obj})
            await memory.store(entry)
            obj.back = entry

    trio.run(main)
    box.clear()
    gc.collect()
    assert alive() is None


@pytest.mark.parametrize(
    "value", [{"\ud800": 1}, {"a": {"b\udfff": "x"}}, {"a": [{"\ud800\ud800": None}]}]
)
def test_a_lone_surrogate_in_a_payload_key_is_an_invalid_entry(value: Any) -> None:
    """As in a leaf, a tag or the text: InvalidEntryError, not the encoder's
    UnicodeEncodeError (review revB)."""
    from actormem import InvalidEntryError

    with pytest.raises(InvalidEntryError, match="lone surrogate"):
        MemoryEntry(category=MemoryCategory.FACT, memory="a", value=value)
