"""review23c: mainjob22's ``flat_first`` (the cut by count with SSE2, ``cut=``) and
open18's ``restore_columns`` / ``next_keyed`` attacked.

``flat_first`` against a pure-Python reference (sort every matched group by visit
order), with counts at the boundaries (0, ``least``, the k-th value's ties, 255 and
65535), arrays of lengths not a multiple of 16 read from unaligned starts, ``k`` of 0,
1 and near 2**62, ``kth`` and ``after`` filters that reject most groups, and a batch
walk with ``after`` as ``_visit_flat`` makes it; every argument refused before any
read. ``restore_columns`` with the records' list changed by a collection's callback
during its allocations (shrunk, grown, items replaced: a RuntimeError or the columns
of the list as it is after the change, never a stale read), list subclasses, records
with slots of other types. ``next_keyed`` with lists changed by a key's ``__eq__``
during ``_bulk_loadable`` (both knobs), list subclasses, bad starts.
"""

from __future__ import annotations

import gc
import math
import random
import sys
import threading
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._engine import state as state_module
from actormem._index import kernels
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import PyEntryColumns, PyRecord, Record

from .setups import query_agrees
from .strategies import examples
from .test_index_image import _live, _messy
from .test_mainjob14_flat import _seeded_memory
from .test_open_fast import _rows

needs_c = pytest.mark.skipif(ccore.core() is None, reason="the C core is not built")
pytestmark = needs_c
wo = kernels._wo


# -- flat_first -----------------------------------------------------------------------


def _reference(
    counts: Any,
    n: int,
    least: int,
    n_words: int,
    maxrel: Any,
    minseq: Any,
    kth: tuple[float, int] | None,
    k: int,
    after: tuple[float, int, int] | None,
) -> tuple[list[tuple[int, float, int, float]], int]:
    """Every matched group's (g, bound, seq, part) sorted by visit order, the first k."""
    items = []
    for g in range(n):
        c = int(counts[g])
        if c < least:
            continue
        p = 0.4 * (c / n_words)
        b = ((0.5 * float(maxrel[g]) + p) + 0.0) + 0.1
        s = int(minseq[g])
        if kth is not None and not (b > kth[0] or (b == kth[0] and s < kth[1])):
            continue
        if after is not None:
            ab, as_, ag = after
            if not (ab > b or (ab == b and (as_ < s or (as_ == s and ag < g)))):
                continue
        items.append((g, b, s, p))
    items.sort(key=lambda t: (-t[1], t[2], t[0]))
    got = items[:k]
    return got, len(items) - len(got)


def _unaligned(values: Any, dtype: Any, off: int) -> np.ndarray[Any, Any]:
    """``values`` as a contiguous array of ``dtype`` starting ``off`` elements into a
    larger one (SSE loads from any byte offset; the bytes before it are 255s)."""
    base = np.full(len(values) + off, np.iinfo(dtype).max if dtype != np.float64 else 0, dtype)
    base[off:] = values
    view = base[off:]
    assert view.flags.c_contiguous
    return view


_RELS = [0.0, -0.0, 1.0, 0.5, 0.25, 1e-300, -1.0, 0.1 + 0.2, float("inf"), float("-inf"), 1e308]


@settings(max_examples=examples(300), deadline=None)
@given(
    data=st.data(),
    wide=st.booleans(),
    n=st.integers(0, 90),
    extra=st.integers(0, 17),
    off=st.integers(0, 17),
    n_words=st.sampled_from([1, 2, 3, 16, 254, 255, 256, 1000, 65535]),
    least=st.sampled_from([1, 2, 3, 4, 16, 254, 255, 256, 65535, 65536, 2**40]),
    k=st.sampled_from([0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 2**62]),
    rels=st.lists(st.sampled_from(_RELS), min_size=1, max_size=3),
    seqs=st.integers(1, 5),
    filt=st.sampled_from(["none", "kth", "after", "both"]),
)
def test_flat_first_is_the_sorted_reference(
    data: st.DataObject,
    wide: bool,
    n: int,
    extra: int,
    off: int,
    n_words: int,
    least: int,
    k: int,
    rels: list[float],
    seqs: int,
    filt: str,
) -> None:
    top = 0xFFFF if wide else 0xFF
    # counts drawn mostly from the boundaries: 0, least - 1, least, least + 1, top
    pool = sorted(
        {0, 1, 2, max(0, least - 1), least, least + 1, top - 1, top} & set(range(top + 1))
    )
    size = n + extra
    counts_l = data.draw(st.lists(st.sampled_from(pool), min_size=size, max_size=size))
    dtype = np.uint16 if wide else np.uint8
    counts = _unaligned(counts_l, dtype, off)
    maxrel = _unaligned(
        data.draw(st.lists(st.sampled_from(rels), min_size=size, max_size=size)), np.float64, 0
    )
    minseq = np.array(
        data.draw(st.lists(st.integers(0, seqs), min_size=size, max_size=size)), np.int64
    )
    full, _ = _reference(counts, n, least, n_words, maxrel, minseq, None, size + 1, None)
    kth = after = None
    if full and filt in ("kth", "both"):
        _, b, s, _ = full[data.draw(st.integers(0, len(full) - 1))]
        kth = (b, s + data.draw(st.integers(-1, 1)))
    if full and filt in ("after", "both"):
        g, b, s, _ = full[data.draw(st.integers(0, len(full) - 1))]
        after = (b, s, g)
    want = _reference(counts, n, least, n_words, maxrel, minseq, kth, k, after)
    for cut in (True, False):
        got = ccore.flat_first(counts, n, least, n_words, maxrel, minseq, kth, k, after, cut=cut)
        assert got == want, (cut, got, want)


@settings(max_examples=examples(200), deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 200),
    wide=st.booleans(),
    ones=st.booleans(),
    batches=st.lists(st.sampled_from([1, 2, 3, 8, 32]), min_size=1, max_size=6),
)
def test_flat_first_batches_walk_every_group_once(
    seed: int, n: int, wide: bool, ones: bool, batches: list[int]
) -> None:
    # _visit_flat's walk (first batch, then `after` the last read, 4x larger): the
    # groups read in order are the reference's, none twice, none skipped.
    rng = np.random.default_rng(seed)
    top = 600 if wide else 255
    counts = (rng.integers(0, top + 1, n) * (rng.random(n) < 0.3)).astype(
        np.uint16 if wide else np.uint8
    )
    maxrel = np.ones(n) if ones else rng.choice([0.0, 0.5, 1.0], n)
    minseq = rng.integers(0, 3, n).astype(np.int64)
    n_words = int(rng.choice([1, 7, 255, 300]))
    want, _ = _reference(counts, n, 1, n_words, maxrel, minseq, None, n + 1, None)
    for cut in (True, False):
        read: list[Any] = []
        after = None
        for b in [*batches, n + 1]:
            picked, more = ccore.flat_first(
                counts, n, 1, n_words, maxrel, minseq, None, b, after, cut=cut
            )
            read += picked
            assert more == len(want) - len(read)
            if not more:
                break
            g, bound, s, _ = picked[-1]
            after = (bound, s, g)
        assert read == want


def test_flat_first_cut_on_blocks_of_sixteen() -> None:
    # A full heap early, then long runs of low counts in blocks of 16 broken by one
    # count that reaches the cut at each position of a block, then ends of every
    # length: m counts every group passed over.
    for tail in range(0, 33):
        for at in range(16):
            counts = [200] * 3 + [1] * 32 + [0] * at + [201] + [1] * (15 - at) + [2] * tail
            arr = np.array(counts, np.uint8)
            n = len(arr)
            maxrel = np.ones(n)
            minseq = np.zeros(n, np.int64)
            for k in (1, 3, 4):
                want = _reference(arr, n, 1, 255, maxrel, minseq, None, k, None)
                got = ccore.flat_first(arr, n, 1, 255, maxrel, minseq, None, k, cut=True)
                assert got == want


def test_flat_first_refuses_before_reading() -> None:
    c = np.zeros(4, np.uint8)
    r = np.zeros(4)
    s = np.zeros(4, np.int64)
    ok: dict[str, Any] = dict(counts=c, n=4, least=1, n_words=1, maxrel=r, minseq=s, kth=None, k=1)
    bad: list[tuple[dict[str, Any], type[Exception]]] = [
        ({"counts": c.astype(np.int8)}, ValueError),
        ({"counts": c.astype(">u2")}, ValueError),  # big-endian: not read as native
        ({"counts": np.zeros((2, 2), np.uint8)}, ValueError),
        ({"counts": np.zeros(8, np.uint8)[::2]}, ValueError),
        ({"counts": list(c)}, ValueError),
        ({"n": 5}, ValueError),
        ({"n": -1}, ValueError),
        ({"n": True}, ValueError),
        ({"maxrel": r[:3]}, ValueError),
        ({"maxrel": list(r)}, TypeError),
        ({"maxrel": r.astype(np.float32)}, ValueError),
        ({"minseq": s[:3]}, ValueError),
        ({"minseq": s.astype(np.uint64)}, ValueError),
        ({"least": 0}, ValueError),
        ({"least": 2**63}, ValueError),
        ({"n_words": 0}, ValueError),
        ({"n_words": 65536}, ValueError),
        ({"k": -1}, ValueError),
        ({"k": 2**63}, ValueError),
        ({"k": 1.0}, ValueError),
        ({"kth": (1, 0)}, ValueError),
        ({"kth": (1.0, 2**63)}, ValueError),
        ({"kth": (1.0,)}, ValueError),
        ({"after": (1.0, 0)}, ValueError),
        ({"after": (1.0, 0, 2**63)}, ValueError),
        ({"cut": "yes"}, ValueError),  # was taken as bool("yes")
        ({"cut": 1}, ValueError),
        ({"cut": np.bool_(True)}, ValueError),
    ]
    for change, exc in bad:
        with pytest.raises(exc):
            ccore.flat_first(**{**ok, **change})
    # the C function itself refuses what the wrapper would
    mod = ccore.core()
    args = [c, 4, 1, 1, r, s, False, 0.0, 0, 1, False, 0.0, 0, 0]
    for i, v in [(1, 5), (1, -1), (2, 0), (3, 0), (3, 65536), (9, -1)]:
        a = list(args)
        a[i] = v
        with pytest.raises(ValueError, match="out of range"):
            mod.flat_first(*a)
    for i, v in [(0, np.zeros(4, np.int32)), (4, np.zeros(4, np.float32)), (5, s[:3])]:
        a = list(args)
        a[i] = v
        with pytest.raises(ValueError, match="wrong element type|out of range"):
            mod.flat_first(*a)
    # k near the wrapper's limit: no allocation of k slots
    big = mod.flat_first(c + 1, 4, 1, 1, r, s, False, 0.0, 0, 2**62, False, 0.0, 0, 0, True)
    assert big[1] == 0
    assert [g for g, *_ in big[0]] == [0, 1, 2, 3]


def test_flat_first_the_cut_with_nan_reads_as_without() -> None:
    # NaN bounds never enter over a kept group nor are cut wrongly: cut and no cut agree
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 70))
        counts = rng.integers(0, 256, n).astype(np.uint8)
        maxrel = rng.choice([float("nan"), 1.0, 0.0, float("inf")], n)
        minseq = rng.integers(0, 3, n).astype(np.int64)
        k = int(rng.integers(0, 6))
        on = ccore.flat_first(counts, n, 1, 255, maxrel, minseq, None, k, cut=True)
        off = ccore.flat_first(counts, n, 1, 255, maxrel, minseq, None, k, cut=False)
        assert repr(on) == repr(off)
        assert math.isfinite(0.0)


def _forced(entry: Any, **slots: Any) -> Any:
    """A copy of ``entry`` with ``slots`` set past its validation (what a bug or a
    subclass could leave)."""
    copy = attrs.evolve(entry)
    for name, value in slots.items():
        object.__setattr__(copy, name, value)
    return copy


# -- restore_columns ------------------------------------------------------------------


def _records() -> list[Record]:
    ccore.restore_columns()  # the classes fixed
    return _live(_messy(WordOverlapScorer, 3, 60, 10))


def _columns(records: list[Record]) -> Any:
    return (
        [r.entry.memory for r in records],
        [r.entry.relevance for r in records],
        [r.seq for r in records],
        [i for i, r in enumerate(records) if r.entry.tags],
    )


def _as_lists(got: Any) -> Any:
    texts, rel, seqs, tagged = got
    return texts, list(memoryview(rel).cast("d")), list(memoryview(seqs).cast("q")), tagged


def _restore_in_call(victim: list[Any]) -> Any:
    """``wo.restore_columns(victim)``: a collection whose innermost Python frame is this
    one happened inside the call (the C function has no frame of its own)."""
    return wo.restore_columns(victim)


@pytest.mark.skipif(
    sys.version_info >= (3, 12),
    reason="CPython 3.12 on runs a due collection only between bytecodes (or in "
    "PyErr_CheckSignals), never at an allocation inside a C call that runs no Python code",
)
@pytest.mark.parametrize("how", ["shrink", "clear", "grow", "replace"])
def test_restore_columns_with_the_list_changed_by_a_collection(how: str) -> None:
    records = _records()
    spare = list(records)
    main = threading.get_ident()
    for _ in range(50):
        victim = list(records)

        def change() -> None:
            if how == "shrink":
                del victim[len(victim) // 2 :]  # noqa: B023
            elif how == "clear":
                victim.clear()  # noqa: B023
            elif how == "grow":
                victim.extend(spare)  # noqa: B023
            else:
                victim[0] = "not a record"  # noqa: B023

        fired: list[bool] = []  # whether the collection came inside the call

        def callback(phase: str, info: dict[str, Any]) -> None:
            # only the first collection on this thread (a thread left by an earlier test
            # could collect too), and the list changed only inside the call
            if phase == "start" and not fired and threading.get_ident() == main:  # noqa: B023
                inside = sys._getframe(1).f_code is _restore_in_call.__code__
                fired.append(inside)  # noqa: B023
                if inside:
                    change()

        old = gc.get_threshold()
        gc.collect()  # (before the callback: it must fire inside the call)
        gc.callbacks.append(callback)
        try:
            gc.set_threshold(1)  # a collection at the call's first GC allocation
            try:
                got = _restore_in_call(victim)
            except RuntimeError as exc:
                assert fired == [True]
                assert "changed" in str(exc)  # noqa: PT017
                assert how != "replace"  # the same size: read as it is after
                return
        finally:
            gc.set_threshold(*old)
            gc.callbacks.remove(callback)
        if fired != [True]:
            continue  # a collection before the call (rare, seen in a full run): again
        if got is not None and _as_lists(got) == _columns(records):
            # the collection came after the list was read (which allocation collects
            # moves with other threads' allocations): the columns of the list as it was,
            # right for it; again
            continue
        # the size unchanged, an item replaced: the list as it is now (not plain: None)
        assert how == "replace"
        assert got is None
        victim[0] = records[0]
        assert _as_lists(wo.restore_columns(victim)) == _columns(victim)
        return
    pytest.fail("in 50 tries no collection came inside the call before the list was read")


def test_restore_columns_refuses_and_declines() -> None:
    records = _records()

    class Sub(list):  # type: ignore[type-arg]
        pass

    for bad in (tuple(records), Sub(records), None, iter(records)):
        with pytest.raises(TypeError):
            wo.restore_columns(bad)
    with pytest.raises(TypeError):
        wo.restore_columns()
    rec = records[0]
    entry = rec.entry

    class Str(str):
        pass

    class Float(float):
        pass

    class Tup(tuple):  # type: ignore[type-arg]
        pass

    class Int(int):
        pass

    # the entry store refuses these (a record keeps its entry as the store's slot)
    for e in (
        _forced(entry, memory=Str(entry.memory)),
        _forced(entry, relevance=Float(0.5)),
        _forced(entry, relevance=1),
    ):
        with pytest.raises(TypeError):
            Record(e, 10**6, 10**6)
    for e in (_forced(entry, tags=Tup(("x",))), _forced(entry, tags=["x"])):
        assert wo.restore_columns([*records, Record(e, 10**6, 10**6)]) is None
    # seqs no int64 field holds: a Python record's (the state's own class when the
    # extension is not built; else another class, declined as such)
    for seq in (Int(5), -(2**63) - 1, 2**63, 5.0, True):
        odd_seq = PyRecord(entry, 1, 1)
        odd_seq.seq = seq
        assert wo.restore_columns([*records, odd_seq]) is None
    # int64's ends are read
    got = wo.restore_columns([Record(entry, 1, -(2**63)), Record(entry, 1, 2**63 - 1)])
    assert got is not None
    assert list(memoryview(got[2]).cast("q")) == [-(2**63), 2**63 - 1]
    # an unset slot
    bare = PyRecord.__new__(PyRecord)  # (a compiled record is never without its fields)
    assert wo.restore_columns([*records, bare]) is None
    half = PyRecord.__new__(PyRecord)
    half.cols, half.slot = rec.cols, rec.slot  # seq unset
    assert wo.restore_columns([*records, half]) is None
    # a slot released (a purged record), a slot number of another type, another store
    gone = Record(entry, 1, 10**6)
    gone.cols.release(gone.slot)
    assert wo.restore_columns([*records, gone]) is None
    odd_slot = PyRecord(entry, 1, 10**6)
    odd_slot.slot = Int(odd_slot.slot)
    assert wo.restore_columns([*records, odd_slot]) is None
    odd = Record(entry, 1, 10**6)
    odd.cols = PyEntryColumns()
    assert wo.restore_columns([*records, odd]) is None
    # a plain list after declining: the same columns
    assert _as_lists(wo.restore_columns(records)) == _columns(records)


# -- next_keyed -----------------------------------------------------------------------


class _EvilKey(str):
    """A key whose comparison runs code that changes the rows being read."""

    hook: Any = None

    def __hash__(self) -> int:
        return 1

    def __eq__(self, other: object) -> bool:
        if _EvilKey.hook is not None:
            hook, _EvilKey.hook = _EvilKey.hook, None
            hook()
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)


@pytest.mark.parametrize("how", ["clear", "shrink", "grow", "replace"])
@pytest.mark.parametrize("on", [True, False])
def test_bulk_loadable_with_rows_changed_by_a_key(
    monkeypatch: pytest.MonkeyPatch, how: str, on: bool
) -> None:
    monkeypatch.setattr(state_module, "_KEYS_C", on)
    base = [(s, attrs.evolve(e, key=None)) for s, e in _rows(9, 80)]
    _, e0 = base[0]
    rows: list[Any] = list(base)
    rows[3] = (rows[3][0], _forced(e0, key=_EvilKey("k1")))
    rows[5] = (rows[5][0], _forced(e0, key=_EvilKey("k2")))  # compared with k1

    def change() -> None:
        if how == "clear":
            rows.clear()
        elif how == "shrink":
            del rows[6:]
        elif how == "grow":
            rows.extend(base * 3)
        else:
            rows[40] = ("not", "a row")

    _EvilKey.hook = change
    state = state_module.MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    try:
        got = state._bulk_loadable(rows)
    except (IndexError, AttributeError) as exc:  # a clear error, never a stale read
        assert _EvilKey.hook is None  # the hook ran
        assert how in ("clear", "shrink", "replace"), exc  # noqa: PT017
        return
    finally:
        fired = _EvilKey.hook is None
        _EvilKey.hook = None
    assert fired
    assert how == "grow"
    assert got is True


def test_next_keyed_arguments_and_subclasses() -> None:
    rows = [(s, attrs.evolve(e, key=None)) for s, e in _rows(2, 40)]

    class Sub(list):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 0  # not asked: the storage is read

        def __getitem__(self, i: Any) -> Any:
            raise AssertionError("not called")

    assert wo.next_keyed(Sub(rows), 0) == 40
    assert wo.next_keyed(rows, 39) == 40
    assert wo.next_keyed(rows, 40) == 40
    assert wo.next_keyed(rows, 10**6) == 40
    for start in (True, 1.0, "1", None):
        with pytest.raises(TypeError, match="next_keyed"):
            wo.next_keyed(rows, start)
    for start in (2**63, -(2**63) - 1):  # as its docstring says
        with pytest.raises(OverflowError):
            wo.next_keyed(rows, start)
    assert "OverflowError" in (wo.next_keyed.__doc__ or "")
    with pytest.raises(TypeError):
        wo.next_keyed(tuple(rows), 0)
    with pytest.raises(TypeError):
        wo.next_keyed(rows, 0, 0)
    # rows the loop must look at: a tuple subclass, a 3-tuple, an entry subclass
    e = rows[0][1]

    class T(tuple):  # type: ignore[type-arg]
        pass

    for i, odd in ((5, T(rows[5])), (6, (*rows[6], 0)), (7, (rows[7][0], "x")), (8, (0,))):
        r = list(rows)
        r[i] = odd
        assert wo.next_keyed(r, 0) == i
    r = list(rows)
    r[9] = (0, attrs.evolve(e, key="k"))
    assert wo.next_keyed(r, 0) == 9
    assert wo.next_keyed(r, 10) == 40
    assert random.Random(0).random() < 1  # (the module's import used)


# -- the retrieve, every mainjob22 knob on against off ----------------------------------

_KNOBS = ("_FLAT_FIRST", "_FLAT_CUT", "_FLAT_BATCH", "_FIRST_PEEK")


@settings(max_examples=examples(25), deadline=None)
@given(
    seed=st.integers(0, 2**16),
    keep=st.sampled_from([1, 7, 50, 1000]),  # the filter admits 1 record in `keep`
    limit=st.sampled_from([1, 2, 8, 9, 10**6]),
    min_matched=st.sampled_from([0, 1, 3]),
    stale=st.booleans(),
)
def test_retrieves_with_every_knob_on_and_off(
    seed: int, keep: int, limit: int, min_matched: int, stale: bool
) -> None:
    # A view taken before more stores (stale: the sorted list's first record, of the
    # highest relevance, is invisible to it: first_by_relevance's fallback), filters
    # that reject most records, limits of 1, the first batch's 8 and 9, and huge.
    state, vocab, rng = _seeded_memory(seed % 8, 400)
    view = state.view()
    if stale:
        # the oldest records upserted at relevance 1.0: their new versions keep their
        # seqs (the sorted list's first keys) and are invisible to the view
        for rec in sorted(view.records(), key=lambda r: r.seq)[:5]:
            state.store(attrs.evolve(view.entry(rec), relevance=1.0, memory="zz zz"), None)
        state.publish()
        first = state._by_relevance._lists[0][0]
        hidden = not (first.born <= view.version < first.died)
        assert hidden or view.entry(first).relevance == 1.0
    else:
        view = state.view()
    saved = [getattr(wo_knobs, k) for k in _KNOBS]
    r = random.Random(seed)
    try:
        for _ in range(6):
            query = " ".join(r.choices([*vocab, "zz", "same", "text"], k=r.randint(1, 30)))
            accept = (lambda rec: rec.seq % keep == 0) if keep > 1 else None
            values = lambda on: (on, on, 8 if on else 0, on)  # noqa: E731
            query_agrees(state, view, query, limit, accept, min_matched, wo_knobs, _KNOBS, values)
    finally:
        for k, v in zip(_KNOBS, saved, strict=True):
            setattr(wo_knobs, k, v)
