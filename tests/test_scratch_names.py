"""The scratch pool's dtype names remembered (``scoring._NAME_MEMO``): the same names,
so the same spares, as ``numpy.dtype.name`` every call."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import scoring
from actormem._index.scoring import ScratchPool, _array_dtype_name, _dtype_name

CODES = [c for c in np.typecodes["All"] if c not in "Mm"] + ["S8", "U3", "M8[s]", "m8[ms]"]


@pytest.fixture(params=[True, False])
def memo(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(scoring, "_NAME_MEMO", request.param)
    return bool(request.param)


@pytest.mark.usefixtures("memo")
def test_names_are_numpys() -> None:
    for _ in range(2):  # the second time from the memo
        for code in CODES:
            dt = np.dtype(code)
            assert _dtype_name(code) == dt.name
            assert _dtype_name(dt) == dt.name
            for order in "<>=":
                arr = np.zeros(2, dt.newbyteorder(order))
                assert _array_dtype_name(arr) == arr.dtype.name
    for kind in (np.uint8, np.uint16, np.int64, np.float64, np.bool_, np.uint64, np.int32):
        assert _dtype_name(kind) == np.dtype(kind).name


def _trace(ops: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """Takes and gives of a pool; which spare each take got (by the order given)."""
    pool = ScratchPool(most=3)
    kinds = [np.uint8, np.uint16, np.int64, np.float64, np.uint64, "L", "Q"]
    out: list[tuple[str, int, int]] = []
    held: list[np.ndarray] = []  # type: ignore[type-arg]
    tags: dict[int, int] = {}
    alive: list[np.ndarray] = []  # type: ignore[type-arg]
    for kind, n in ops:
        steps = pool.take_steps(kinds[kind % len(kinds)], n, 16)
        try:
            while True:
                next(steps)
        except StopIteration as stop:
            arr = stop.value
        alive.append(arr)  # ids stay unique
        tags.setdefault(id(arr), len(tags))
        out.append((arr.dtype.name, len(arr), tags[id(arr)]))
        held.append(arr)
        if n % 2:
            pool.give(held.pop(0), 16)
    return out


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 20)), max_size=30))
def test_the_pool_hands_out_the_same_spares(ops: list[tuple[int, int]]) -> None:
    saved = scoring._NAME_MEMO
    try:
        scoring._NAME_MEMO = True
        new = _trace(ops)
        scoring._NAME_MEMO = False
        old = _trace(ops)
    finally:
        scoring._NAME_MEMO = saved
    assert new == old
