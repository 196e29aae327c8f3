"""The bulk load's plain rows by the C ``load_inserts`` (issue #20, branch ``open17``:
``state._LOAD_C``, ``_cwordoverlap.c``'s ``load_inserts`` and its look-ahead).

``MemoryState._load_bulk`` hands runs of plain rows (no key, value or expiry, an exact
``str`` text, a known namespace and relevance part, a new id, an ascending seq) to one C
call and every other row to the Python loop, which also raises the errors. With the
knob on and off the state must be the same: records, id table, namespace lists, the
duplicate groups and their keys, the relevance order's sublists and keys, the expiry
order, the index and its answers; and the same errors for the same bad rows.
"""

from __future__ import annotations

import random
import struct
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import textfold
from actormem._storage.sqlite_format import FoldedRows
from tests.strategies import examples

from .setups import relevance_keys
from .test_open_fast import T0, _assert_same, _rows

needs_c = pytest.mark.skipif(
    state_module._load_inserts_c is None, reason="the word overlap core is not built"
)


def _layout(state: MemoryState) -> tuple[Any, ...]:
    """What the load built, beyond what ``_assert_same`` reads: the orders' private
    lists, the namespace lists, the id table's mapping and the groups in order."""
    rel = state._by_relevance
    ns = {k: ([r.seq for r in v.recs], v.live) for k, v in state._namespaces.items()}
    ids = sorted((k, v.seq) for k, v in state._by_id.items())
    groups = sorted(
        (k, [r.seq for r in state._dup_group(k)]) for k in state._dups
    )  # insertion order within a group
    return (
        [[r.seq for r in sub] for sub in rel._lists],
        relevance_keys(rel),
        len(rel),
        ns,
        ids,
        groups,
        sorted(state._dup_keys),
        state._live,
        state.stores,
        state.version,
        state._seq,
        state._ever_expiring,
    )


def _loaded(rows: list[Any], c: bool, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> Any:
    calls: list[tuple[int, int]] = []
    real = state_module._load_inserts_c

    def spy(*args: Any) -> int:
        assert real is not None
        got = real(*args)
        calls.append((args[1], got))
        return got

    monkeypatch.setattr(state_module, "_LOAD_C", c)
    monkeypatch.setattr(state_module, "_load_inserts_c", spy)
    state = MemoryState(
        capacity=kw.pop("capacity", None), half_life=3600.0, scorer=WordOverlapScorer()
    )
    state.load(rows, **kw)
    monkeypatch.setattr(state_module, "_load_inserts_c", real)
    state._check()
    return state, sum(got - start for start, got in calls), len(calls)


def _plain_rows(seed: int, n: int, *, keys: bool = True) -> list[tuple[int, MemoryEntry]]:
    """``_rows`` with most entries plain (no key, no expiry, relevance 1.0), a few of
    each other kind among them, so that the C runs and the Python rows interleave."""
    rng = random.Random(seed)
    out = []
    for seq, e in _rows(seed, n, keys=keys):
        if rng.random() < 0.8:
            ns = ("a",) if rng.random() < 0.9 else e.namespace
            e = attrs.evolve(e, key=None, expires_at=None, relevance=1.0, namespace=ns)
        out.append((seq, e))
    return out


def _with_folds(rows: list[tuple[int, MemoryEntry]], missing: float = 0.0) -> FoldedRows:
    rng = random.Random(len(rows))
    folds = [2**64 - 1 if rng.random() < missing else textfold.fold_hash(e.memory) for _, e in rows]
    return FoldedRows(rows, struct.pack(f"={len(rows)}Q", *folds))


@needs_c
@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 300),
    folds=st.sampled_from([None, 0.0, 0.3]),
    image_like=st.booleans(),
)
def test_the_c_load_equals_the_python_loop(
    seed: int, n: int, folds: float | None, image_like: bool
) -> None:
    rows: list[Any] = _plain_rows(seed, n)
    if folds is not None:
        rows = _with_folds(rows, folds)
    with pytest.MonkeyPatch.context() as mp:
        on, loaded_c, _ = _loaded(rows, True, mp)
        off, loaded_py, calls_off = _loaded(rows, False, mp)
    assert calls_off == 0
    assert loaded_py == 0
    if n >= 200:
        assert loaded_c > 0  # the C path ran (the test compares what it names)
    _assert_same(on, off)
    assert _layout(on) == _layout(off)


@needs_c
def test_every_row_kind_interleaves_with_the_c_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _plain_rows(11, 2000)
    # a new namespace late, a relevance no part was cached for, a value, tags, a
    # category change and texts that are not ASCII, among plain rows
    odd: dict[int, dict[str, Any]] = {
        300: {"namespace": ("late", "ns")},
        301: {"relevance": 0.123456789},
        302: {"value": {"a": 1}},
        303: {"tags": ("t",)},
        304: {"memory": "\u00c9t\u00e9  \U0001f600 X"},
        305: {"category": MemoryCategory.STRATEGY},
        1999: {"expires_at": T0},
    }
    for at, change in odd.items():
        seq, e = rows[at]
        rows[at] = (seq, attrs.evolve(e, **change))
    state_module._REL_PART_SEQ.pop(0.123456789, None)
    for folded in (False, True):
        src: Any = _with_folds(rows, 0.1) if folded else rows
        on, loaded, calls = _loaded(src, True, monkeypatch)
        off, _, _ = _loaded(src, False, monkeypatch)
        assert loaded > len(rows) // 2
        assert calls >= 2
        _assert_same(on, off)
        assert _layout(on) == _layout(off)


@needs_c
def test_rows_the_c_path_leaves_all_give_the_same_state(monkeypatch: pytest.MonkeyPatch) -> None:
    # every row keyed: no row for C; one call per _LOAD_C_RETRY rows, not one per row
    rows = [(s, attrs.evolve(e, key=f"k{i}")) for i, (s, e) in enumerate(_plain_rows(3, 700))]
    on, loaded, calls = _loaded(rows, True, monkeypatch)
    off, _, _ = _loaded(rows, False, monkeypatch)
    assert loaded == 0
    assert calls <= len(rows) // state_module._LOAD_C_RETRY + 2
    _assert_same(on, off)
    assert _layout(on) == _layout(off)
    # a bounded state, a dict id table: the Python loop only
    b_on, loaded, calls = _loaded(_plain_rows(4, 200), True, monkeypatch, capacity=10_000)
    assert (loaded, calls) == (0, 0)
    b_off, _, _ = _loaded(_plain_rows(4, 200), False, monkeypatch, capacity=10_000)
    _assert_same(b_on, b_off)


@needs_c
def test_the_folds_are_what_the_c_path_keys_by(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _plain_rows(5, 400)
    good = _with_folds(rows)
    zeroed = FoldedRows(rows, bytes(len(good.folds)))
    a, loaded, _ = _loaded(good, True, monkeypatch)
    assert loaded > 200
    monkeypatch.setattr(state_module, "_LOAD_C", True)
    wrong = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    wrong.load(zeroed)
    assert _layout(wrong)[6] != _layout(a)[6]  # other groups: the folds were used
    with pytest.raises(AssertionError):
        wrong._check()


@needs_c
@pytest.mark.parametrize("c", [True, False])
def test_bad_rows_give_the_same_errors(c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _plain_rows(6, 300, keys=False)
    monkeypatch.setattr(state_module, "_LOAD_C", c)
    bad_seq = rows[:200] + [(rows[150][0], rows[200][1])] + rows[201:]
    twice = rows[:250] + [(rows[250][0], rows[10][1])] + rows[251:]
    for bad, match in ((bad_seq, "not above"), (twice, "stored already")):
        state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
        with pytest.raises(ValueError, match=match) as info:
            state.load(bad)
        assert str(info.value) == (
            f"restore(): seq {rows[150][0]} is not above {rows[199][0]}"
            if match == "not above"
            else f"restore(): id {rows[10][1].id} is stored already"
        )


@needs_c
def test_the_index_adds_come_in_the_rows_order(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _plain_rows(8, 500)
    seen: dict[bool, list[int]] = {}
    real_add = type(MemoryState(capacity=None, half_life=1.0, scorer=WordOverlapScorer()).index).add
    for c in (True, False):
        order: list[int] = []
        state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
        cls = type(state.index)

        def add(self: Any, rec: Any, real_add: Any = real_add, order: list[int] = order) -> None:
            order.append(rec.seq)
            real_add(self, rec)

        monkeypatch.setattr(cls, "add", add)
        monkeypatch.setattr(state_module, "_LOAD_C", c)
        state.load(rows)
        state._check()
        seen[c] = order
    assert seen[True] == seen[False] == [s for s, _ in rows]


@needs_c
def test_load_inserts_refuses_bad_arguments() -> None:
    fn = state_module._load_inserts_c
    assert fn is not None
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    good = [
        [], 0, None, 0, state._by_id, state._namespaces, state._dups, state._dup_keys,
        [], [], state._rel_parts, [], state._cols,
    ]  # fmt: skip
    assert fn(*good) == 0
    with pytest.raises(TypeError, match="13 or 14 arguments"):
        fn(*good[:12])
    with pytest.raises(TypeError, match="13 or 14 arguments"):
        fn(*good, True, True)
    with pytest.raises(TypeError, match="rec_keys must be a bool"):
        fn(*good, 1)
    for at, bad in (
        (0, ()), (1, 0.0), (2, "x"), (3, None), (4, {}), (5, []), (6, {}), (7, {}),
        (8, ()), (9, ()), (10, []), (11, ()),
    ):  # fmt: skip
        args = list(good)
        args[at] = bad
        with pytest.raises(TypeError, match="wrong argument types"):
            fn(*args)
    args = list(good)
    args[12] = []
    with pytest.raises(TypeError, match="cols must be an EntryColumns"):
        fn(*args)
    args = list(good)
    args[1] = -1
    with pytest.raises(ValueError, match="start"):
        fn(*args)
    # an IdTable of other classes
    id_table: Any = type(state._by_id)  # the C IdTable (typed as a MutableMapping)
    other = id_table(_Rec.__dict__["entry"], _Ent.__dict__["_id"])
    args = list(good)
    args[4] = other
    with pytest.raises(TypeError, match="other classes"):
        fn(*args)


class _Ent:
    __slots__ = ("_id",)


class _Rec:
    __slots__ = ("entry",)
