"""A store whose put into the entries' column store fails (MemoryError, or any error)
leaves the state exactly as it was: no entry unlinked by an upsert, none evicted, no
version spent, no slot held (robust42). Checked on every store path: ``store`` (the
upsert, the eviction, the insert), ``store_many``'s Python batch (``_store_batch``) and
its compiled one (``store_inserts``), with the compiled store (its ``_fail_put_in``) and
the Python one (``entrycols._COLS_C`` False); against a model that never saw the failed
store (Hypothesis). Also ``entrycols._COLS_C`` False with the compiled ``store_inserts``
(it raised TypeError) and a duplicate key that fails after the put (its slot was held).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_mod
from actormem._engine.state import MemoryState
from actormem._index import entrycols, kernels
from actormem._record import PyEntryColumns

from .strategies import BASE_TIME, examples
from .test_state_keys_ttl import payload_entries
from .test_state_store_many import _seen as _seen_many

COMPILED = [True, False] if kernels._wo is not None else [False]


class _FailingCols(PyEntryColumns):
    """The Python store with the compiled one's ``_fail_put_in``."""

    __slots__ = ("fail_in",)

    def __init__(self) -> None:
        super().__init__()
        self.fail_in = 0

    def _fail_put_in(self, n: int) -> None:
        self.fail_in = n

    def put(self, entry: MemoryEntry) -> int:
        if self.fail_in:
            self.fail_in -= 1
            if self.fail_in == 0:
                raise MemoryError("injected")
        return super().put(entry)


@pytest.fixture
def python_cols(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(entrycols, "_COLS_C", False)


def _state(capacity: int | None, compiled: bool) -> MemoryState:
    with pytest.MonkeyPatch.context() as mp:
        if not compiled:
            mp.setattr(entrycols, "_COLS_C", False)
        state = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
    if compiled:
        assert type(state._cols) is not PyEntryColumns
    else:
        assert type(state._cols) is PyEntryColumns
        assert len(state._cols) == 0
        state._cols = _FailingCols()  # (empty: a dict by_id, nothing in the old one)
    return state


def _seen(state: MemoryState) -> Any:
    """test_state_store_many's (published, ``_check``ed: a slot no record holds fails
    it too), and the store's count of live slots."""
    return (*_seen_many(state), len(state._cols))


@st.composite
def _plain(draw: st.DrawFn) -> MemoryEntry:
    """An entry store_inserts takes (no key, value or ttl; a fresh id)."""
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=draw(st.sampled_from(["alpha", "beta", "alpha beta", "gamma"])),
        id=draw(st.uuids()),
    )


@pytest.mark.parametrize("compiled", COMPILED)
@settings(max_examples=examples(150), deadline=None)
@given(
    batches=st.lists(st.lists(payload_entries() | _plain(), max_size=8), max_size=5),
    capacity=st.sampled_from([None, 3]),
    fails=st.lists(st.integers(0, 9), max_size=5),
    many=st.lists(st.booleans(), max_size=5),
)
def test_a_failed_put_changes_nothing(
    compiled: bool,
    batches: list[list[MemoryEntry]],
    capacity: int | None,
    fails: list[int],
    many: list[bool],
) -> None:
    state, model = _state(capacity, compiled), _state(capacity, compiled)
    for b, batch in enumerate(batches):
        k = fails[b] if b < len(fails) else 0  # the k-th put of the batch fails (0: none)
        if b < len(many) and many[b]:
            state._cols._fail_put_in(k)
            try:
                if 0 < k <= len(batch):
                    with pytest.raises(MemoryError):
                        state.store_many(batch, BASE_TIME)
                else:
                    state.store_many(batch, BASE_TIME)
            finally:
                state._cols._fail_put_in(0)
            for entry in batch[: k - 1] if 0 < k <= len(batch) else batch:
                model.store(entry, BASE_TIME)
        else:
            for j, entry in enumerate(batch):
                if j == k - 1:
                    state._cols._fail_put_in(1)
                    try:
                        with pytest.raises(MemoryError):
                            state.store(entry, BASE_TIME)
                    finally:
                        state._cols._fail_put_in(0)
                    assert _seen(state) == _seen(model)
                else:
                    state.store(entry, BASE_TIME)
                    model.store(entry, BASE_TIME)
        assert _seen(state) == _seen(model)


@pytest.mark.parametrize("compiled", COMPILED)
@pytest.mark.parametrize("case", ["upsert", "evict", "key"])
def test_a_failed_put_keeps_the_old_version(compiled: bool, case: str) -> None:
    """The cases the last round left half-changed, one each: an upsert's old version was
    unlinked, a full memory's entry evicted, before the put that failed."""
    state = _state(2 if case == "evict" else None, compiled)
    key = "k" if case == "key" else None
    first = MemoryEntry(category=MemoryCategory.FACT, memory="one", key=key)
    state.store(first)
    state.store(MemoryEntry(category=MemoryCategory.FACT, memory="two"))
    before = _seen(state)
    if case == "upsert":
        new = MemoryEntry(category=MemoryCategory.FACT, memory="one again", id=first.id)
    elif case == "key":
        new = MemoryEntry(category=MemoryCategory.FACT, memory="one again", key="k")
    else:
        new = MemoryEntry(category=MemoryCategory.FACT, memory="three")
    state._cols._fail_put_in(1)
    with pytest.raises(MemoryError):
        state.store(new)
    assert _seen(state) == before
    assert state.current(first.id) is not None
    state.store(new)  # and the state takes it afterwards
    assert _seen(state)[1] == before[1] + 1


@pytest.mark.skipif(kernels._wo is None, reason="needs the compiled core")
def test_compiled_store_inserts_with_python_columns(python_cols: None) -> None:
    """entrycols._COLS_C False: store_many takes the Python batch (store_inserts takes
    only the compiled store; it raised TypeError on the second batch)."""
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    assert type(state._cols) is PyEntryColumns
    assert state_mod._store_inserts_c is not None
    assert state_mod._STORE_C
    texts = [f"alpha {i}" for i in range(6)]
    for part in (texts[:3], texts[3:]):
        state.store_many([MemoryEntry(category=MemoryCategory.FACT, memory=t) for t in part])
    state.publish()
    state._check()
    assert sorted(r.entry.memory for r in state.view().records()) == texts


@pytest.mark.parametrize("compiled", COMPILED)
def test_a_failed_duplicate_key_after_the_put_holds_no_slot(compiled: bool) -> None:
    """_store_batch's insert with the Python duplicate key (computed from the record):
    when it raises, the put before it is undone (its slot was held by no record)."""
    state = _state(None, compiled)
    real = state._dupkey
    calls = [0]

    def dupkey(rec: Any) -> int:
        calls[0] += 1
        if calls[0] == 3:
            raise MemoryError("injected")
        return real(rec)

    state._dupkey = dupkey  # type: ignore[method-assign]
    assert state._dup_key_c() is None  # so _store_batch calls it
    entries = [
        MemoryEntry(category=MemoryCategory.FACT, memory=f"alpha {i}", id=uuid.UUID(int=i + 1))
        for i in range(4)
    ]
    with pytest.raises(MemoryError):
        state.store_many(entries)
    state.publish()
    state._check()
    assert len(state) == 2
    assert len(state._cols) == 2
