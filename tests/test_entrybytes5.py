"""Word overlap's text -> group map as the C ``GroupTable`` (branch entrybytes5, issue #20
item 6, step 4).

``wordoverlap.knobs._GROUP_TABLE`` (read when a numbering is made): ``_Numbering.groups``
is an open-addressing table of 32-bit hash tags beside int32 group numbers
(``_grouptable.h``), the text read back from ``glist[number]`` when a tag matches,
instead of a dict. Checked here:

* a state machine drives a ``GroupTable`` (full tags, and tags cut to two bits so that
  most texts share a tag and a home) and a dict with the same operations: new texts
  appended (``append``: glist and the map in one step), sets and overwrites of present
  texts, deletes of present and absent ones (the item set to None after, as the
  index's purge does), bulk appends and deletes that grow and shrink it, ``reserve``,
  iteration, iterators left open across changes; after each step the same contents,
  the table's own ``_check`` and its equality with the dict;
* refusals before any change: keys that are no str (absent for reads), a number whose
  item does not carry the text, numbers out of range, items that carry no text, a text
  twice; a str subclass whose ``__hash__`` and ``__eq__`` raise is read as its str value
  (no user code in a probe);
* the cycle collector sees through it; ``index_from`` undoes its own inserts on a text
  twice;
* two states (the table / the dict) driven by ``test_entrybytes2``'s writes, held views
  and walks (with renumbering and masks on small knobs): identical structures, journals,
  removals and top-k, ``_check`` on both; the C ``add_groups_new`` fills a table as a
  dict and refuses a table over another list; the index image round-trips into a table
  and a stale image is refused.
"""

from __future__ import annotations

import gc
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from actormem import MemoryCategory, MemoryEntry
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.persist import ImageError
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap import persist as wo_persist
from actormem._index.wordoverlap.numbering import _Group, _group_map
from actormem._record import Record

from .setups import TableIterators, knob_state
from .strategies import examples, run_machine
from .test_entrybytes2 import TwoLayouts
from .test_store_batch import BASE

GroupTable: Any = getattr(kernels._wo, "GroupTable", None)
core = pytest.mark.skipif(GroupTable is None, reason="the word-overlap core is not built")

SLOTS = (Record.__dict__["cols"], Record.__dict__["slot"], _Group.__dict__["text"])

# Texts: a few short ones (equal lengths, shared prefixes), non-ASCII ones of each width.
TEXTS = st.one_of(
    st.sampled_from(["a", "b", "ab", "ba", "", "é", "日本", "😀x", "a" * 40, "A"]),
    st.text(max_size=6),
)


def _record(text: str, n: int) -> Record:
    entry = MemoryEntry(
        category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=n + 1), created_at=BASE
    )
    return Record(entry, n + 1, n + 1)


def _item(text: str, n: int, group: bool) -> Any:
    rec = _record(text, n)
    return _Group(text, [rec, _record(text, n + 10_000)]) if group else rec


class TableVsDict(TableIterators, RuleBasedStateMachine):
    """A ``GroupTable`` over a list and a dict, the same operations."""

    def __init__(self) -> None:
        super().__init__()
        self.glist: list[Any] = []
        self.table: Any = None
        self.model: dict[str, int] = {}
        self.iters: list[tuple[Any, int, bool]] = []  # (iterator, seen, changed)
        self.n = 0

    @initialize(mask=st.sampled_from([0xFFFFFFFF, 0xFFFFFFFF, 3, 0]))
    def make(self, mask: int) -> None:
        self.table = GroupTable(self.glist, *SLOTS, mask)

    def _append(self, text: str, group: bool) -> None:
        self.n += 1
        item = _item(text, self.n, group)
        if text in self.model:
            with pytest.raises(ValueError, match="mapped already"):
                self.table.append(item)
            return
        self._changed()
        assert self.table.append(item) == len(self.glist) - 1
        self.model[text] = len(self.glist) - 1

    @rule(text=TEXTS, group=st.booleans())
    def append(self, text: str, group: bool) -> None:
        self._append(text, group)

    @rule(pick=st.integers(0, 1000), group=st.booleans())
    def set_again(self, pick: int, group: bool) -> None:
        """A present text set again to its number, or moved to a new item of it (the
        index's renumbering never does; a dict allows it)."""
        if not self.model:
            return
        text = sorted(self.model)[pick % len(self.model)]
        if group:
            self.n += 1
            self.glist.append(_item(text, self.n, True))
            self.table[text] = len(self.glist) - 1
            self.glist[self.model[text]] = None  # the old number's item leaves
            self.model[text] = len(self.glist) - 1
        else:
            self.table[text] = self.model[text]

    @rule(text=TEXTS)
    def delete(self, text: str) -> None:
        if text in self.model:
            self._changed()
            gid = self.model.pop(text)
            del self.table[text]
            self.glist[gid] = None  # after the delete, as the index's purge
        else:
            with pytest.raises(KeyError):
                del self.table[text]

    @rule(text=TEXTS)
    def read(self, text: str) -> None:
        assert (text in self.table) == (text in self.model)
        assert self.table.get(text) == self.model.get(text)
        assert self.table.get(text, "d") == self.model.get(text, "d")
        if text in self.model:
            assert self.table[text] == self.model[text]
        else:
            with pytest.raises(KeyError):
                self.table[text]

    @rule(texts=st.lists(st.text(max_size=8), min_size=20, max_size=120))
    def bulk_append(self, texts: list[str]) -> None:
        for text in texts:
            self._append(text, False)

    @rule(keep=st.integers(0, 3))
    def bulk_delete(self, keep: int) -> None:
        for text in list(self.model)[keep:]:
            self._changed()
            del self.table[text]
            self.glist[self.model.pop(text)] = None

    @rule()
    def iterate(self) -> None:
        keys = list(self.table)
        assert sorted(keys) == sorted(self.model)
        assert len(keys) == len(self.table)
        assert list(self.table.keys()) == keys
        assert list(self.table.values()) == [self.model[k] for k in keys]
        assert list(self.table.items()) == [(k, self.model[k]) for k in keys]

    @precondition(lambda self: self.table is not None)
    @rule()
    def rebuild(self) -> None:
        """A new table over the same list filled by ``index_from`` (the restore's and the
        renumbering's bulk fill): its numbers are each item's, so the list is compacted
        first, as a renumbering does."""
        live = sorted(self.model.items(), key=lambda kv: kv[1])
        self.glist[:] = [self.glist[g] for _, g in live]
        self.model = {t: i for i, (t, _) in enumerate(live)}
        self.table = GroupTable(self.glist, *SLOTS)
        self.table.index_from(0)
        self.iters.clear()

    @invariant()
    def agrees(self) -> None:
        if self.table is None:
            return
        self.table._check()
        assert self.table.glist is self.glist
        assert len(self.table) == len(self.model)
        assert dict(self.table.items()) == self.model
        assert self.table == self.model
        assert not (self.table != self.model)


@core
def test_table_agrees_with_a_dict() -> None:
    run = TableVsDict.TestCase()
    run.settings = settings(
        max_examples=examples(40),
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],  # bulk texts; slower under ASan
    )
    run.runTest()


@core
def test_refusals_change_nothing() -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS)
    for i in range(20):
        t.append(_item(f"text {i}", i, i % 3 == 0))
    before = dict(t.items())

    class Sub(str):
        def __hash__(self) -> int:
            raise AssertionError("no Python code runs in a lookup")

        def __eq__(self, other: object) -> bool:
            raise AssertionError("no Python code runs in a lookup")

    # A str subclass is its str value, found without its methods.
    assert Sub("text 3") in t
    assert t[Sub("text 3")] == 3
    assert t.get(Sub("text 4")) == 4
    assert Sub("nope") not in t
    # Reads: no str, absent.
    for key in (3, b"text 3", None, ("text 3",), 3.0):
        assert key not in t
        assert t.get(key) is None
        assert t.get(key, "d") == "d"
        with pytest.raises(KeyError):
            t[key]
        with pytest.raises(KeyError):
            del t[key]
    # Writes: refused before any change.
    with pytest.raises(TypeError, match="keys are str"):
        t[3] = 3
    with pytest.raises(TypeError, match="values are ints"):
        t["text 3"] = 3.0
    with pytest.raises(TypeError, match="values are ints"):
        t["text 3"] = True
    for bad in (-1, 2**31 - 1, 2**40, -(2**70)):
        with pytest.raises(ValueError, match="group number in"):
            t["text 3"] = bad
    with pytest.raises(ValueError, match="does not carry the text"):
        t["text 3"] = 4  # another text's number
    with pytest.raises(ValueError, match="does not carry the text"):
        t["new"] = 25  # beyond glist
    with pytest.raises(ValueError, match="mapped already"):
        t.append(_record("text 5", 99))
    with pytest.raises(ValueError, match="mapped already"):
        t.append(_Group(Sub("text 5"), []))  # an entry's memory is an exact str
    for item in (None, "text", object(), _record("x", 1).entry):
        with pytest.raises(TypeError, match="with a str text"):
            t.append(item)
    assert len(glist) == 20
    assert dict(t.items()) == before
    t._check()
    with pytest.raises(ValueError, match="n < 0"):
        t.reserve(-1)
    with pytest.raises(ValueError, match="start < 0"):
        t.index_from(-1)
    with pytest.raises(TypeError):
        t.get()
    with pytest.raises(TypeError, match="unhashable"):
        hash(t)
    # The constructor.
    for args in (
        (),
        (glist,),
        (tuple(glist), *SLOTS),
        (glist, SLOTS[0], SLOTS[0], SLOTS[2]),
        (glist, SLOTS[0], SLOTS[1], MemoryEntry),
        (glist, *SLOTS, 1, 2),
    ):
        with pytest.raises(TypeError):
            GroupTable(*args)
    for mask in (-1, 2**32, "3"):
        with pytest.raises(ValueError, match="tag_mask"):
            GroupTable(glist, *SLOTS, mask)
    with pytest.raises(TypeError, match="glist must be a list"):
        _group_map((), True)  # type: ignore[arg-type]
    assert dict(t.items()) == before


@core
def test_index_from_undoes_itself_on_a_text_twice() -> None:
    glist: list[Any] = [_record(f"t{i}", i) for i in range(10)]
    t = GroupTable(glist, *SLOTS)
    t.index_from(0)
    glist += [_record("u0", 20), _record("u1", 21), _record("t3", 22), _record("u2", 23)]
    with pytest.raises(ValueError, match=r"glist\[12\] is mapped"):
        t.index_from(10)
    assert dict(t.items()) == {f"t{i}": i for i in range(10)}
    t._check()
    glist[12] = None
    with pytest.raises(TypeError, match="carries no str text"):
        t.index_from(10)
    assert len(t) == 10
    glist[12] = _record("u9", 30)
    t.index_from(10)
    assert t["u9"] == 12
    assert t["u2"] == 13
    assert len(t) == 14


@core
def test_sizes_and_growth() -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS)
    empty = t.__sizeof__()
    t.reserve(1000)
    assert t.__sizeof__() - empty == 8 * (1000 * 10 // 7 + 1)  # 8 B a slot, load 0.7
    for i in range(1000):
        t.append(_record(f"w{i}", i))
    assert t.__sizeof__() - empty == 8 * (1000 * 10 // 7 + 1)  # no growth after reserve
    t._check()
    for i in range(990):
        del t[f"w{i}"]
        glist[i] = None
    t._check()
    assert t.__sizeof__() - empty < 8 * 100  # shrunk below a load of 1/8
    assert sorted(t) == sorted(f"w{i}" for i in range(990, 1000))


@core
def test_a_cycle_through_a_table_is_collected() -> None:
    def tables() -> int:
        return sum(type(o) is GroupTable for o in gc.get_objects())

    gc.collect()
    before = tables()
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS)
    t.append(_record("x", 1))
    glist.append(t)  # type: ignore[arg-type]  # glist -> table -> glist
    assert tables() == before + 1
    del glist, t
    gc.collect()
    assert tables() == before


# -- two states, the same writes -------------------------------------------------------


def _new(table: bool, capacity: int | None = None, load: int = 4) -> MemoryState:
    return knob_state(wo_knobs, "_GROUP_TABLE", table, capacity, load)


class TwoGroupMaps(TwoLayouts):
    """test_entrybytes2's writes, held views and walks into two states, one whose index
    maps texts in a ``GroupTable``, one in a dict (renumbered along the way: the knob is
    read by each new numbering, so the sides keep their layout through renumberings)."""

    def _new_state(self, on: bool, capacity: int | None, load: int) -> MemoryState:
        return _new(on, capacity, load)

    def _side(self, on: bool) -> None:
        wo_knobs._GROUP_TABLE = on

    def _layouts(self, on: MemoryState, off: MemoryState) -> None:
        assert type(on.index._e.groups) is GroupTable  # type: ignore[attr-defined]
        assert type(off.index._e.groups) is dict  # type: ignore[attr-defined]


@core
def test_two_group_maps_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    # Small enough that the lists fill masks and renumber the groups.
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoGroupMaps, 15, 25)


@core
def test_add_groups_new_fills_a_table_as_a_dict() -> None:
    fn = ccore.add_groups()
    assert fn is not None
    recs = [_record(f"w{i % 7} x", i) for i in range(12)] + [_record("tail", 50)]
    lower = ccore.lower()
    got = []
    for table in (True, False):
        glist: list[Any] = []
        groups = _group_map(glist, table)
        assert (type(groups) is dict) is not table
        lows: list[str] = []
        rels: list[float] = []
        seqs: list[int] = []
        recent = [""] * 4
        i = 0
        stops = []
        while i < len(recs):
            i = fn(recs, i, groups, glist, recent, 4, 0, lows, rels, seqs, lower)
            stops.append(i)
            i += 1  # the caller's loop takes the text seen before
        got.append((sorted(groups.items()), list(glist), lows, rels, seqs, recent, stops))
    assert got[0] == got[1]
    # A table over another list: refused before any change.
    glist = []
    other = _group_map([], True)
    with pytest.raises(TypeError, match="wrong argument types"):
        fn(recs, 0, other, glist, [""] * 4, 4, 0, [], [], [], lower)
    assert glist == []
    assert len(other) == 0


def _image_state(table: bool, texts: list[str]) -> MemoryState:
    s = _new(table)
    for i, text in enumerate(texts):
        s.store(
            MemoryEntry(
                category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=i + 1), created_at=BASE
            )
        )
    s.publish()
    return s


@core
@pytest.mark.parametrize("dups", [False, True])
def test_the_image_round_trips_into_a_table(dups: bool) -> None:
    """An image dumped from either layout restores into a numbering of the knob's layout
    (a table made over the restored group list) equal to a rebuild's; an image of other
    rows (stale) is refused."""
    texts = [f"alpha {i % 5 if dups else i} beta" for i in range(40)]
    for src in (True, False):
        s = _image_state(src, texts)
        recs = sorted(s._by_id.values(), key=lambda r: r.seq)
        parts = wo_persist.dump(s.index, recs)  # type: ignore[arg-type]
        for dst in (True, False):
            fresh = _new(dst).index
            rebuilt = _new(dst).index
            for r in recs:
                rebuilt.add(r)  # type: ignore[attr-defined]
            wo_knobs._GROUP_TABLE = dst  # read by the numbering the restore makes
            try:
                out = wo_persist.restore(fresh, parts, recs)  # type: ignore[arg-type]
            finally:
                wo_knobs._GROUP_TABLE = True
            e, r_e = out._e, rebuilt._e  # type: ignore[attr-defined]
            assert (type(e.groups) is GroupTable) is dst
            assert e.groups.glist is e.glist if dst else True
            assert dict(e.groups.items()) == dict(r_e.groups.items())
            assert e.groups == r_e.groups
            out._check(recs)  # type: ignore[attr-defined]
            top = out.top_k(s.view(), "alpha beta 3", 5, None)  # type: ignore[attr-defined]
            assert [r.seq for _, r in top] == [
                r.seq
                for _, r in rebuilt.top_k(s.view(), "alpha beta 3", 5, None)  # type: ignore[attr-defined]
            ]
            stale = recs[:-1]  # another set of rows: the header's count and digest differ
            with pytest.raises(ImageError):
                wo_persist.restore(_new(dst).index, parts, stale)  # type: ignore[arg-type]
