"""BM25's image restore with its numeric checks in the core (``bm25_persist._C_CHECKS``:
``kernels.bm25_image_check`` in a thread beside) and, for untagged records, the groups and
the digest from the texts' thread (``bm25_persist._GROUPS_BESIDE``): the same state and
top-k as a rebuild and as the path before (both knobs off), every corrupt, stale or
foreign image refused (with the same message either way) and the index rebuilt; the
kernel itself refuses arguments of the wrong kind or length before it reads them.
"""

from __future__ import annotations

import itertools
import random
import threading
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer, MemoryEntry
from actormem._index import kernels, persist
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.images import ImageError, restore_index

from .strategies import examples
from .test_index_image import _file_rows, _image, _live, _loaded, _messy, _mutations
from .test_open_fast import _assert_same

KNOBS = ("_C_CHECKS", "_GROUPS_BESIDE")
THREADS = ("actormem image checks", "actormem digest")

needs_core = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)


def _no_threads_left() -> None:
    left = [t.name for t in threading.enumerate() if t.name in THREADS]
    assert not left, left


def _state_rows(
    seed: int, n: int, ops: int, tags: bool, dups: bool
) -> tuple[Any, list[tuple[int, MemoryEntry]]]:
    """A messy BM25 state's rows (``_messy``), untagged unless ``tags``, about 40% of
    them another row's very text with ``dups``; the state reloaded from them."""
    rows = _file_rows(_messy(BM25Scorer, seed, n, ops))
    rng = random.Random(seed)
    out = []
    for seq, entry in rows:
        if not tags:
            entry = attrs.evolve(entry, tags=())
        if dups and out and rng.random() < 0.4:
            entry = attrs.evolve(entry, memory=out[rng.randrange(len(out))][1].memory)
        out.append((seq, entry))
    state = _loaded(BM25Scorer, out, None)
    return state, _file_rows(state)


def _pool_of(index: Any) -> Any:
    """The index's term pool as comparable values (None without one)."""
    pool = index._pool
    if pool is None:
        return None
    return pool.data.typecode, tuple(pool.data), pool.starts.typecode, tuple(pool.starts)


@pytest.fixture
def late_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LateDigest`` groups and hashes in its thread for any count of texts."""
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)


@pytest.mark.usefixtures("late_any_size")
@settings(
    max_examples=examples(30),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 70),
    ops=st.integers(0, 40),
    tags=st.booleans(),
    dups=st.booleans(),
)
def test_restored_equals_rebuilt_with_each_knob(
    seed: int, n: int, ops: int, tags: bool, dups: bool
) -> None:
    state, rows = _state_rows(seed, n, ops, tags, dups)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    pools = set()
    with pytest.MonkeyPatch.context() as mp:
        for on in itertools.product((True, False), repeat=len(KNOBS)):
            for name, value in zip(KNOBS, on, strict=True):
                mp.setattr(bm25_persist, name, value)
            restored = _loaded(BM25Scorer, rows, parts)
            _assert_same(restored, rebuilt)
            a, b = restored.index, rebuilt.index
            assert [
                (t.key, t.df, list(t.groups), list(t.tfs), t.tfs.typecode)
                for t in a._term_table
                if t is not None
            ] == [  # fmt: skip
                (t.key, t.df, list(t.groups), list(t.tfs), t.tfs.typecode)
                for t in b._term_table
                if t is not None
            ]
            assert (a._n, a._total) == (b._n, b._total)
            assert list(a._first_seq[: len(a._table)]) == list(b._first_seq[: len(b._table)])
            assert list(a._changes.groups) == list(b._changes.groups)
            pools.add(_pool_of(a))
    assert len(pools) == 1  # the same term pool with each knob (as the path before)
    _no_threads_left()


def _numeric(parts: dict[str, bytes]) -> tuple[Any, ...]:
    """The arrays :func:`bm25_persist._sides` checks, read from the image ``parts``."""
    _, arrays = persist.unpack(parts, {})
    count = len(arrays["post_ends"]) - 1
    return bm25_persist._Arrays(
        arrays["group_terms"],
        arrays["group_ends"],
        arrays["postings"],
        arrays["post_ends"],
        arrays["tfs"],
        arrays["lengths"],
        count,
    )


def _outcome(fn: Any, sides: tuple[Any, ...]) -> Any:
    try:
        dfs, wide = fn(bm25_persist._Arrays(*sides))
    except ImageError as exc:
        return str(exc)
    return dfs.tolist(), wide.astype(bool).tolist()


def _bad_sides(sides: tuple[Any, ...], rng: random.Random) -> list[tuple[Any, ...]]:
    """Variants of ``sides`` with one value changed (a posting, a frequency, a packed
    term, an offset, a length), each check's failure among them."""
    out = []
    for at in range(6):
        arr = sides[at]
        if not len(arr):
            continue
        for value in (-1, 0, 1, 255, 256, 300, int(arr[rng.randrange(len(arr))]) + 1, 2**31 - 1):
            copy = arr.copy()
            copy[rng.randrange(len(copy))] = value
            out.append((*sides[:at], copy, *sides[at + 1 :]))
    return out


@needs_core
@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 60), ops=st.integers(0, 30))
def test_kernel_checks_as_numpy(seed: int, n: int, ops: int) -> None:
    """The core's checks pass and fail where numpy's do, with the same first error,
    and give the same list lengths and wide flags."""
    state, _ = _state_rows(seed, n, ops, tags=True, dups=True)
    sides = _numeric(_image(state))
    assert _outcome(bm25_persist._sides, sides) == _outcome(bm25_persist._sides_numpy, sides)
    assert not isinstance(_outcome(bm25_persist._sides, sides), str)
    for bad in _bad_sides(sides, random.Random(seed)):
        got = _outcome(bm25_persist._sides, bad)
        assert got == _outcome(bm25_persist._sides_numpy, bad)


@needs_core
def test_kernel_wide_frequencies_and_sizes() -> None:
    """A frequency above 255 makes its term wide; ``sizes`` weighs each posting by its
    group's record count."""
    packed = np.array([0 << 8 | 255, 1 << 8 | 1, 0 << 8 | 2], np.int32)
    g_ends = np.array([0, 2, 3], np.int64)
    postings = np.array([0, 1, 0], np.int32)
    p_ends = np.array([0, 2, 3], np.int64)
    tfs = np.array([300, 2, 1], np.int32)
    lengths = np.array([301, 2], np.int32)
    dfs, wide = np.zeros(2, np.int64), np.zeros(2, np.uint8)
    args = (packed, g_ends, postings, p_ends, tfs, lengths)
    assert kernels.bm25_image_check(*args, None, dfs, wide) == (0, None, None)
    assert dfs.tolist() == [2, 1]
    assert wide.tolist() == [1, 0]
    assert kernels.bm25_image_check(*args, np.array([3, 5], np.int64), dfs, wide)[0] == 0
    assert dfs.tolist() == [8, 3]
    assert kernels.bm25_image_check(packed.astype(np.int64), *args[1:], None, dfs, wide)[0] == 0
    for width, dtype in ((2, np.uint16), (4, np.uint32), (8, np.int64)):
        for arr in (packed, packed.astype(np.int64)):
            code, pool, small = kernels.bm25_image_check(
                arr, *args[1:], None, dfs, wide, width, True
            )
            assert code == 0
            assert pool == (arr >> 8).astype(dtype).tobytes()
            assert small == tfs.astype(np.uint8).tobytes()
    bad_tfs = np.array([300, 2, 0], np.int32)  # a frequency below 1: nothing made
    got = kernels.bm25_image_check(*args[:4], bad_tfs, lengths, None, dfs, wide, 2, True)
    assert got == (4, None, None)
    with pytest.raises(ValueError, match="pool_width"):
        kernels.bm25_image_check(*args, None, dfs, wide, 3)
    with pytest.raises(ValueError, match="pool_width"):
        kernels._core().bm25_image_check(*args, None, dfs, wide, 3)


@needs_core
def test_kernel_refuses_bad_arguments() -> None:
    """Wrong types, dtypes and lengths are refused before the core reads anything, by
    the wrapper and by the core itself; nothing is written then."""
    packed = np.array([0 << 8 | 1], np.int32)
    ends1 = np.array([0, 1], np.int64)
    one = np.array([0], np.int32)
    lengths = np.array([1], np.int32)
    good = [packed, ends1, one, ends1, np.array([1], np.int32), lengths, None]

    def outs() -> list[Any]:
        return [np.full(1, 7, np.int64), np.full(1, 7, np.uint8)]

    bad_cases = [
        (0, packed.astype(np.int16)),
        (0, packed.tolist()),
        (1, ends1.astype(np.int32)),
        (1, np.array([0], np.int64)),  # not size + 1
        (2, one.astype(np.int64)),
        (3, np.zeros(0, np.int64)),  # no terms' offsets at all
        (4, np.array([1, 1], np.int32)),  # not one a posting
        (5, lengths.astype(np.int64)),
        (6, np.array([1, 1], np.int64)),  # not one a group
    ]
    core = kernels._core()
    for at, value in bad_cases:
        args = list(good)
        args[at] = value
        out = outs()
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_image_check(*args, *out)
        with pytest.raises((TypeError, ValueError)):
            core.bm25_image_check(*args, *out)
        assert out[0].tolist() == [7]
        assert out[1].tolist() == [7]
    for out in (
        [np.zeros(2, np.int64), np.zeros(1, np.uint8)],
        [np.zeros(1, np.int64), np.zeros(1, np.int8)],
        [np.zeros(1, np.int64)[:1].copy().reshape(1, 1), np.zeros(1, np.uint8)],
    ):
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_image_check(*good, *out)
        with pytest.raises((TypeError, ValueError)):
            core.bm25_image_check(*good, *out)
    readonly = np.zeros(1, np.int64)
    readonly.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        kernels.bm25_image_check(*good, readonly, np.zeros(1, np.uint8))
    with pytest.raises(ValueError, match="writable"):
        core.bm25_image_check(*good, readonly, np.zeros(1, np.uint8))
    assert kernels.bm25_image_check(*good, *outs()) == (0, None, None)


@pytest.mark.usefixtures("late_any_size")
@pytest.mark.parametrize("tags", [False, True])
def test_corrupt_stale_and_foreign_images_refused_alike(tags: bool) -> None:
    """Every corrupt variant of the image, and the image over rows it does not describe
    (a text changed, a group more or less, a row less), is refused with each knob on or
    off, with the same message, and the index rebuilt from the rows."""
    state, rows = _state_rows(11, 70, 20, tags=tags, dups=True)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    records = _live(rebuilt)
    variants = [(name, bad, records) for name, bad in _mutations(parts)]
    changed = [(s, attrs.evolve(e, memory=e.memory + " zebra")) if i == 3 else (s, e)
               for i, (s, e) in enumerate(rows)]  # fmt: skip
    same_text = [(s, attrs.evolve(e, memory=rows[0][1].memory)) if i == 5 else (s, e)
                 for i, (s, e) in enumerate(rows)]  # fmt: skip
    for name, other in (("a text changed", changed), ("groups merged", same_text),
                        ("a row less", rows[:-1])):  # fmt: skip
        variants.append((name, parts, _live(_loaded(BM25Scorer, other, None))))
    assert len(variants) > 20
    with pytest.MonkeyPatch.context() as mp:
        for name, bad, recs in variants:
            messages = set()
            for on in itertools.product((True, False), repeat=len(KNOBS)):
                for knob, value in zip(KNOBS, on, strict=True):
                    mp.setattr(bm25_persist, knob, value)
                with pytest.raises(ImageError) as info:
                    restore_index(BM25Scorer().make_index(), bad, recs)
                messages.add(str(info.value))
            assert len(messages) == 1, (name, messages)
            if recs is records:
                _assert_same(_loaded(BM25Scorer, rows, bad, used=False), rebuilt)
    _no_threads_left()
