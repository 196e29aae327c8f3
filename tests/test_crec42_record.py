"""The compiled record (branch crec42, issue #20 item 6): ``actormem._crecord``.

``Record`` is a compiled type with ``born``/``died``/``seq``/``slot`` as int64 fields and
no GC header (80 bytes, no int object of its own), or :class:`PyRecord` where the
extension is not built (or ``ACTORMEM_PY_RECORD=1``). Checked here, for both kinds:

* the same attributes, constructor, ``on_slot``, ``entry``, ``visible``, the access
  readers, ``purged``/``evkey``, the order by ``seq`` and identity equality/hash, driven
  by Hypothesis with the same operations on one record of each kind;
* refusals before any change: a number that is no int (a bool, a float, a str) or is
  outside int64; nothing is put in the store then;
* the compiled kind: 80 bytes, outside the cyclic collector, never pickled, its int
  fields refuse other values, its ``evkey`` only ``None``, the purged marker or
  ``(float, itself)``; a bounded memory's records (whose eviction keys were the
  ``(key, rec)`` cycle) are freed by reference counting as soon as the state goes;
* the state with the Python record and the compiled cores (the layout of int objects),
  in a subprocess: the state and table tests pass there too.
"""

from __future__ import annotations

import gc
import os
import pickle
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._engine.state import MemoryState
from actormem._index.entrycols import new_entry_columns
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._record import NEVER, Access, PyRecord, Record, _crecord

BASE = datetime(2025, 1, 1, tzinfo=UTC)
compiled = pytest.mark.skipif(_crecord is None, reason="the compiled record is not built")
KINDS = [PyRecord] + ([Record] if Record is not PyRecord else [])


def _entry(text: str, n: int = 1) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=n), created_at=BASE
    )


@pytest.mark.parametrize("kind", KINDS)
def test_a_record_of_each_kind(kind: Any) -> None:
    cols = new_entry_columns()
    e = _entry("hello")
    rec = kind(e, 5, 3, cols)
    assert (rec.born, rec.seq, rec.died, rec.access, rec.evkey) == (5, 3, NEVER, None, None)
    assert rec.cols is cols
    assert rec.slot == 0
    assert len(cols) == 1
    assert rec.entry == e
    assert not rec.purged
    assert rec.visible(5)
    assert not rec.visible(4)
    rec.died = 9
    assert rec.visible(8)
    assert not rec.visible(9)
    assert rec.current_access() == (0, None)
    rec.access = Access(6, 2, BASE, None)
    assert rec.access_at(5) == (0, None)
    assert rec.access_at(6) == (2, BASE)
    assert rec.current_expires() is None
    assert rec.expires_at(7) is None
    other = kind.on_slot(cols=cols, slot=cols.put(_entry("b", 2)), born=7, seq=7)
    assert (other.slot, other.born, other.seq, other.died) == (1, 7, 7, NEVER)
    assert other.entry.memory == "b"
    assert rec < other
    assert rec <= other
    assert other > rec
    assert not other < rec
    assert rec == rec
    assert rec != other
    assert hash(rec) == hash(rec)
    assert {rec: 1, other: 2}[other] == 2
    assert repr(rec) == "<Record slot=0 seq=3 born=5 died=9>"
    key = (1.5, rec)
    rec.evkey = key
    assert rec.evkey == key
    assert rec.evkey[1] is rec
    assert not rec.purged
    rec.purged = True
    assert rec.purged
    assert rec.evkey is not None
    rec.purged = False
    assert not rec.purged
    assert rec.evkey is None
    assert sorted(Record.__slots__) == sorted(PyRecord.__slots__)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("born", "seq", "error"),
    [
        (1.0, 1, TypeError),
        (True, 1, TypeError),
        ("1", 1, TypeError),
        (1, None, TypeError),
        (2**63, 1, OverflowError),
        (1, -(2**63) - 1, OverflowError),
    ],
)
def test_bad_numbers_are_refused_before_the_put(kind: Any, born: Any, seq: Any, error: Any) -> None:
    cols = new_entry_columns()
    with pytest.raises(error):
        kind(_entry("x"), born, seq, cols)
    assert len(cols) == 0
    slot = cols.put(_entry("y"))
    with pytest.raises(error):
        kind.on_slot(cols, slot, born, seq)
    if not (type(born) is int and born == 1):
        with pytest.raises(error):
            kind.on_slot(cols, born, 1, 1)  # the slot too
    with pytest.raises(ValueError, match="slot must be >= 0"):
        kind.on_slot(cols, -1, 1, 1)
    with pytest.raises(TypeError, match="cols"):
        kind.on_slot(None, slot, 1, 1)


@compiled
def test_the_compiled_record_is_small_and_outside_the_collector() -> None:
    rec = Record(_entry("x"), 1, 1)
    assert type(rec) is Record
    assert Record is _crecord.Record
    assert sys.getsizeof(rec) == 80  # no GC header, four int64s, three words
    assert not gc.is_tracked(rec)
    assert gc.get_referents(rec) == []  # the collector does not walk it
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(rec)


@compiled
def test_the_compiled_fields_refuse_other_values() -> None:
    rec = Record(_entry("x"), 1, 1)
    for name in ("born", "died", "seq", "slot"):
        with pytest.raises(TypeError):
            setattr(rec, name, "1")
        with pytest.raises(OverflowError):
            setattr(rec, name, 2**63)
        with pytest.raises((TypeError, AttributeError)):
            delattr(rec, name)
    assert (rec.born, rec.died, rec.seq, rec.slot) == (1, NEVER, 1, rec.slot)
    for bad in [(1.0, Record(_entry("y"), 2, 2)), (1, rec), (1.0, rec, 1), [1.0, rec], "x"]:
        with pytest.raises(TypeError, match="evkey"):
            rec.evkey = bad  # type: ignore[assignment]
    assert rec.evkey is None
    with pytest.raises(AttributeError):
        rec.other = 1  # type: ignore[attr-defined]


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("died"), st.integers(0, 2**63 - 1)),
        st.tuples(st.just("born"), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(st.just("seq"), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(st.just("evkey"), st.floats(allow_nan=False)),
        st.tuples(st.just("evkey"), st.none()),
        st.tuples(st.just("purged"), st.booleans()),
        st.tuples(st.just("access"), st.integers(0, 50)),
    ),
    max_size=30,
)


@compiled
@settings(max_examples=200, deadline=None)
@given(ops=_OPS, probes=st.lists(st.integers(-5, 60), max_size=8))
def test_both_kinds_read_the_same_after_the_same_writes(
    ops: list[tuple[str, Any]], probes: list[int]
) -> None:
    stores = [new_entry_columns(), new_entry_columns()]
    recs = [kind(_entry("t"), 3, 3, c) for kind, c in zip((PyRecord, Record), stores, strict=False)]
    peers = [
        kind(_entry("u", 2), 4, 10, c) for kind, c in zip((PyRecord, Record), stores, strict=False)
    ]
    for name, value in ops:
        for rec in recs:
            if name == "evkey":
                rec.evkey = None if value is None else (value, rec)
            elif name == "access":
                rec.access = Access(value, value + 1, BASE + timedelta(seconds=value), rec.access)
            else:
                setattr(rec, name, value)

    def seen(rec: Any, peer: Any) -> tuple[Any, ...]:
        ev = rec.evkey
        return (
            rec.born, rec.died, rec.seq, rec.slot, rec.purged, rec.entry,
            None if ev is None else ev[0] if ev[1] is rec else "purged",
            rec < peer, rec <= peer, peer < rec, peer <= rec, repr(rec),
            [(rec.visible(v), rec.access_at(v), rec.expires_at(v)) for v in probes],
            rec.current_access(), rec.current_expires(),
        )  # fmt: skip

    assert seen(recs[0], peers[0]) == seen(recs[1], peers[1])


@compiled
@pytest.mark.parametrize("capacity", [None, 50])
def test_a_dropped_states_records_are_freed_at_once(capacity: int | None) -> None:
    """No record is in a cycle: a bounded memory's eviction keys ``(key, rec)`` are held
    by the order, not by the record, so dropping the state frees every record by
    reference counting (no collection needed)."""
    state = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
    state.store_many([_entry(f"entry {i}", i + 1) for i in range(200)], BASE)
    state.publish()
    rec = state.view().get(uuid.UUID(int=200))
    assert rec is not None
    assert type(rec) is Record
    assert (rec.evkey is not None) == (capacity is not None)
    gc.disable()
    try:
        del state
        assert sys.getrefcount(rec) == 2  # this frame's and the call's: nothing else
    finally:
        gc.enable()


@compiled
def test_the_state_with_the_python_record() -> None:
    """The state, its journal, tables and C cores over the Python record's layout (int
    objects), as where the extension is not built: the state and table tests pass."""
    env = dict(os.environ, ACTORMEM_PY_RECORD="1")
    root = Path(__file__).resolve().parent.parent
    probe = subprocess.run(
        [sys.executable, "-c", "from actormem._record import Record; print(Record.__name__)"],
        env=env, cwd=root, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "PyRecord"
    done = subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
            "tests/test_state.py", "tests/test_entrybytes4.py", "tests/test_store10.py",
            "tests/test_review23c_cut_cols.py", "tests/test_open18_cols.py",
            "tests/test_wire32_rows_store.py", "tests/test_entrybytes2.py",
            "tests/test_rec44_keys.py",
        ],
        env=env, cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
