"""``MemoryState.store_many`` (a ``store_many`` request's loop in the owner) against
``store`` called once per entry: the same records, versions, outcomes of later reads and
errors, with ids, keys, ttls, evictions and upserts mixed (Hypothesis); and a
``store_many`` request through the engine leaves what the same stores leave.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.state import MemoryState
from actormem._errors import InvalidEntryError

from .strategies import BASE_TIME, examples
from .test_state_keys_ttl import payload_entries


def _state(capacity: int | None) -> MemoryState:
    return MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())


def _seen(state: MemoryState) -> Any:
    state.publish()
    state._check()
    view = state.view()
    recs = sorted(view.records(), key=lambda r: r.seq)
    return (
        [(r.entry, r.born, r.seq, r.current_expires()) for r in recs],
        state.version,
        state.stores,
        state.upserts,
        state.evictions,
        len(state),
    )


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(st.lists(payload_entries(), max_size=6), max_size=5),
    st.sampled_from([None, 3]),
    st.booleans(),
)
def test_store_many_is_store_per_entry(
    batches: list[list[MemoryEntry]], capacity: int | None, with_now: bool
) -> None:
    now = BASE_TIME if with_now else None
    one, many = _state(capacity), _state(capacity)
    for batch in batches:
        errors = []
        for entry in batch:
            try:
                one.store(entry, now)
            except InvalidEntryError as exc:  # a ttl and no time: the loop stops here
                errors.append(str(exc))
                break
        got = []
        try:
            many.store_many(batch, now)
        except InvalidEntryError as exc:
            got.append(str(exc))
        assert got == errors
        assert _seen(many) == _seen(one)


def test_store_many_refuses_what_store_refuses() -> None:
    state = _state(None)
    good = MemoryEntry(category=MemoryCategory.FACT, memory="kept")
    with pytest.raises(TypeError, match="MemoryEntry"):
        state.store_many([good, "not an entry"])  # type: ignore[list-item]
    assert [r.entry for r in state.view().records()] == []  # unpublished
    state.publish()
    assert [r.entry for r in state.view().records()] == [good]  # the one before stays


def test_engine_store_many_equals_stores() -> None:
    entries = [
        MemoryEntry(category=MemoryCategory.FACT, memory=f"Text {i % 5} of the batch", ttl=ttl)
        for i, ttl in zip(range(40), [None, 30.0] * 20, strict=True)
    ]

    async def run(many: bool) -> list[tuple[str, bool]]:
        async with open_memory() as memory:
            if many:
                await memory.store_many(entries)
            else:
                for entry in entries:
                    await memory.store(entry)
            snap = memory.snapshot()
            hits = await memory.retrieve("text batch", limit=50)
            assert len(snap) == len(entries)
            return sorted((h.memory, h.expires_at is not None) for h in hits)

    assert trio.run(run, True) == trio.run(run, False)
