"""``EntryColumns`` (``_entrycols.h``, issue #20 item 6 step A's store, branch cols28):
every entry put is given back equal (texts of every width, ids and times at their ends,
every sparse field, the sparse values the very objects stored), the access bookkeeping
replaced as ``with_access`` replaces it, slots reused after release, texts kept through
the blocks' compaction, and bad input refused with nothing changed. No timing."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from actormem import MemoryCategory, MemoryEntry
from actormem._entry import _ENTRY_FIELDS, with_access
from actormem._index import kernels
from actormem._index.entrycols import new_entry_columns

from .strategies import examples

pytestmark = pytest.mark.skipif(kernels._wo is None, reason="the word-overlap core is not built")

_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40) | st.text(
    st.characters(max_codepoint=0x7F), max_size=3000
)
_TIMES = st.datetimes(
    min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)
).map(lambda t: t.replace(tzinfo=UTC))
_LATER = st.none() | _TIMES


@st.composite
def _entries(draw: st.DrawFn) -> MemoryEntry:
    created = draw(_TIMES)
    plain = draw(st.booleans())  # half of them with every sparse field at its default
    fields: dict[str, Any] = {
        "category": draw(st.sampled_from(list(MemoryCategory))),
        "memory": draw(_TEXT),
        "id": uuid.UUID(
            int=draw(
                st.sampled_from([0, 1, 2**64 - 1, 2**64, 2**128 - 1]) | st.integers(0, 2**128 - 1)
            )
        ),
        "created_at": created,
        "relevance": draw(st.floats(0.0, 1.0)),
        "validated": draw(st.booleans()),
    }
    if not plain:
        fields.update(
            tags=draw(st.lists(st.sampled_from(["a", "b", "İ"]), max_size=2)),
            namespace=draw(st.sampled_from([(), ("t",), ("t", "é")])),
            access_count=draw(st.sampled_from([0, 1, 2**70])),
            last_accessed=draw(_LATER),
            key=draw(st.none() | st.sampled_from(["k", "ключ"])),
            value=draw(st.none() | st.just({"a": [1, "x"]})),
            updated_at=draw(_LATER),
            ttl=draw(st.none() | st.sampled_from([1.0, 3600.5])),
            expires_at=draw(_LATER),
        )
    return MemoryEntry(**fields)


def _same(got: MemoryEntry, want: MemoryEntry) -> None:
    assert type(got) is MemoryEntry
    assert got == want
    for name in _ENTRY_FIELDS:
        a, b = getattr(got, name), getattr(want, name)
        assert a == b, name
        assert type(a) is type(b), name
    assert got.created_at.utcoffset() == timedelta(0)
    assert got.updated_at >= got.created_at
    assert repr(got) == repr(want)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(_entries(), min_size=1, max_size=12))
def test_every_entry_comes_back_equal(batch: list[MemoryEntry]) -> None:
    cols = new_entry_columns()
    slots = [cols.put(e) for e in batch]
    assert slots == list(range(len(batch)))
    assert len(cols) == len(batch)
    cols._check()
    for slot, want in zip(slots, batch, strict=True):
        got = cols.entry(slot)
        _same(got, want)
        for name in ("tags", "namespace", "key", "value", "ttl", "expires_at", "last_accessed"):
            if getattr(want, name) not in ((), None):
                assert getattr(got, name) is getattr(want, name), name  # the stored object
        for name in _ENTRY_FIELDS:  # a field read without building the entry
            value = cols.get(slot, name)
            assert value == getattr(want, name), name
            assert type(value) is type(getattr(want, name)), name
        assert cols.text(slot) == want.memory
        assert cols.text_equals(slot, want.memory)
        assert not cols.text_equals(slot, want.memory + "x")
        assert not cols.text_equals(slot, "é" + want.memory)
        assert cols.ident(slot) == want._id
        assert cols.relevance(slot) == want.relevance
        last = datetime(2030, 1, 2, tzinfo=UTC)
        assert cols.entry(slot, 7, last) == with_access(want, 7, last)
        assert cols.entry(slot, 7, last, None) == with_access(want, 7, last, None)
        assert cols.entry(slot, 3, None, last) == with_access(want, 3, None, last)


def test_times_and_ids_at_their_ends() -> None:
    cols = new_entry_columns()
    edge = [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(4, 2, 29, tzinfo=UTC),
        datetime(100, 3, 1, tzinfo=UTC),
        datetime(400, 12, 31, tzinfo=UTC),
        datetime(1900, 2, 28, 12, tzinfo=UTC),
        datetime(2000, 2, 29, 0, 0, 1, tzinfo=UTC),
        datetime(2024, 12, 31, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ]
    day = datetime(1, 1, 1, tzinfo=UTC)
    while day.year < 2100:  # every day boundary of a few centuries, months and leap days
        edge.append(day)
        day += timedelta(days=13, hours=5, microseconds=7)
    for i, t in enumerate(edge):
        e = MemoryEntry(
            category=MemoryCategory.FACT, memory="t", created_at=t, id=uuid.UUID(int=2**128 - 1 - i)
        )
        got = cols.entry(cols.put(e))
        assert got.created_at == t
        assert got.updated_at is got.created_at
        assert got._id == 2**128 - 1 - i
    # Not an exact UTC datetime with fold 0: kept as given, in the extras.
    folded = datetime(2026, 1, 1, tzinfo=UTC).replace(fold=1)
    e = MemoryEntry(category=MemoryCategory.FACT, memory="f", created_at=folded)
    got = cols.entry(cols.put(e))
    assert got.created_at is e.created_at
    assert got.created_at.fold == 1
    cols._check()


def test_bad_input_changes_nothing() -> None:
    cols = new_entry_columns()
    cols.put(MemoryEntry.new(MemoryCategory.FACT, "kept"))
    before = cols.stats()
    unset = object.__new__(MemoryEntry)
    with pytest.raises(TypeError):
        cols.put(unset)
    with pytest.raises(TypeError):
        cols.put("not an entry")
    lone = MemoryEntry.new(MemoryCategory.FACT, "x")
    object.__setattr__(lone, "memory", "a\ud800")  # past the constructor's check
    with pytest.raises(UnicodeEncodeError):
        cols.put(lone)
    big = MemoryEntry.new(MemoryCategory.FACT, "x")
    object.__setattr__(big, "_id", 2**128)
    with pytest.raises(ValueError, match="not in"):
        cols.put(big)
    only_facts = kernels._wo.EntryColumns(MemoryEntry, _ENTRY_FIELDS, (MemoryCategory.FACT,))
    with pytest.raises(TypeError):
        only_facts.put(MemoryEntry.new(MemoryCategory.INSIGHT, "x"))
    assert len(only_facts) == 0
    for slot in (-1, 1, 2**70):
        with pytest.raises(IndexError):
            cols.entry(slot)
        with pytest.raises(IndexError):
            cols.release(slot)
    for slot in (True, 0.0, "0"):
        with pytest.raises(TypeError):
            cols.entry(slot)
    with pytest.raises(TypeError):
        cols.entry(0, 1)
    with pytest.raises(ValueError, match="not a field"):
        cols.get(0, "id")
    with pytest.raises(TypeError):
        cols.get(0)
    with pytest.raises(TypeError):
        cols.text_equals(0, b"kept")
    assert not cols.text_equals(0, "k\ud800")
    assert cols.stats() == before
    cols._check()
    cols.put(MemoryEntry.new(MemoryCategory.FACT, "é"))
    assert not cols.text_equals(1, "\ud800")
    assert cols.text_equals(1, "é")
    cols.release(1)
    assert cols.text(0) == "kept"
    cols.release(0)
    with pytest.raises(IndexError):
        cols.text(0)  # released
    with pytest.raises(ValueError, match="15 slots"):
        kernels._wo.EntryColumns(MemoryEntry, _ENTRY_FIELDS[:-1], tuple(MemoryCategory))
    with pytest.raises(TypeError):
        kernels._wo.EntryColumns(MemoryEntry, ("nope", *_ENTRY_FIELDS[1:]), tuple(MemoryCategory))
    with pytest.raises(ValueError, match="categories"):
        kernels._wo.EntryColumns(MemoryEntry, ("memory",) * 15, ())
    with pytest.raises(TypeError):
        kernels._wo.EntryColumns(timezone, _ENTRY_FIELDS, tuple(MemoryCategory))


def test_release_reuses_slots_and_compacts_texts() -> None:
    cols = new_entry_columns()
    texts = [f"{i:05d} " + ("é" if i % 3 else "e") * (50 + i % 700) for i in range(3000)]
    slots = [cols.put(MemoryEntry.new(MemoryCategory.FACT, t)) for t in texts]
    held = cols.stats()["held"]
    assert held == sum(len(t.encode()) for t in texts)
    for s in slots[::2]:  # half the texts dead: at least one compaction
        cols.release(s)
    cols._check()
    st_ = cols.stats()
    assert st_["compactions"] >= 1
    assert st_["held"] - st_["live_bytes"] <= st_["held"] // 4 + 2100  # at most a text past
    for s in slots[1::2]:
        assert cols.text(s) == texts[s]
    fresh = [cols.put(MemoryEntry.new(MemoryCategory.WORKING, f"new {i}")) for i in range(10)]
    assert set(fresh) <= set(slots[::2])  # released numbers handed out again, newest first
    assert fresh[0] == slots[::2][-1]
    for s in slots[1::2]:
        cols.release(s)
    for s in fresh:
        cols.release(s)
    cols._check()
    assert len(cols) == 0
    assert cols.stats()["live_bytes"] == 0
    assert cols.stats()["blocks"] <= 1


class EntryColumnsMachine(RuleBasedStateMachine):
    """Puts, releases, compactions and reads against a dict of what is live."""

    def __init__(self) -> None:
        super().__init__()
        self.cols = new_entry_columns()
        self.model: dict[int, MemoryEntry] = {}

    @rule(entry=_entries(), big=st.integers(0, 30000))
    def put(self, entry: MemoryEntry, big: int) -> None:
        if big > 25000:  # a long text: a block of its own, or past a block's room
            entry = with_access(entry, entry.access_count, entry.last_accessed)
            object.__setattr__(entry, "memory", entry.memory + "ü" * big)
        slot = self.cols.put(entry)
        assert slot not in self.model
        self.model[slot] = entry

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        slot = data.draw(st.sampled_from(sorted(self.model)))
        self.cols.release(slot)
        del self.model[slot]

    @rule()
    def compact(self) -> None:
        self.cols.compact()

    @invariant()
    def same(self) -> None:
        self.cols._check()
        assert len(self.cols) == len(self.model)
        for slot, entry in self.model.items():
            _same(self.cols.entry(slot), entry)
            assert self.cols.get(slot, "updated_at") == entry.updated_at
            assert self.cols.text_equals(slot, entry.memory)


TestEntryColumnsMachine = EntryColumnsMachine.TestCase
TestEntryColumnsMachine.settings = settings(
    max_examples=examples(60), stateful_step_count=40, deadline=None
)


# Texts of every str kind (ASCII, UCS1, UCS2, UCS4) with long ASCII runs, so that the
# comparison's eight- and four-at-a-time steps meet code points of each UTF-8 length.
_KIND_TEXTS = st.lists(
    st.sampled_from(
        ["abcdefgh", "x", " ", "é", "ÿ", "\x80", "€", "ｘ", "\u07ff", "\u0800", "😀", "\U0010ffff"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=examples(400), deadline=None)
@given(
    _KIND_TEXTS,
    _KIND_TEXTS,
    st.integers(0, 60),
    st.sampled_from(["", "a", "é", "€", "😀", "\ud800"]),
)
def test_text_equals_walks_each_kind(stored: str, other: str, at: int, edit: str) -> None:
    """``text_equals`` (``ec_text_is``, also the restore's and the group table's compare)
    decodes the stored UTF-8 against the str's code points without encoding it: equal
    exactly when the texts are, for a text and near misses of it (one code point
    changed, inserted or cut, a lone surrogate inserted)."""
    cols = new_entry_columns()
    slot = cols.put(MemoryEntry(category=MemoryCategory.FACT, memory=stored or "-"))
    text = stored or "-"
    at %= len(text) + 1
    for probe in (
        text,
        other or "-",
        text[:at] + edit + text[at:],
        text[:at] + edit + text[at + 1 :],
        text[:at],
        text[at:],
    ):
        assert cols.text_equals(slot, probe) is (probe == text), (text, probe)
