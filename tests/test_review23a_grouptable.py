"""Review 23a: the word-overlap ``GroupTable`` (``_grouptable.h``) and ``add_groups_new``.

* ``add_groups_new`` called a Python ``lower`` while holding the record, its entry, text,
  relevance and seq as borrowed pointers: a ``lower`` that dropped ``recs[i]`` left the
  glist (and the table) holding a freed record (a use after free, ASan's report), and on
  the dict path a ``lower`` that mapped the text had it overwritten. Now they are held
  across the call and any such change leaves the record to the caller's loop.
* ``GroupTable.reserve(n)`` past the 2**31 - 1 texts a table can ever hold tried the
  allocation (a bare ``MemoryError``, or on an overcommitting host gigabytes touched by
  the fill): now ``OverflowError`` before anything.
* Held (no fix needed): a table whose tags all collide (``tag_mask`` 0) against a dict
  under adversarial texts (non-BMP, equal prefixes, empty, str subclasses with hostile
  ``__hash__`` / ``__eq__``), deletes across the wrap-around, growth and shrink; a
  ``__del__`` reading the table while it is torn down; ``index_from``'s rollback on a
  text twice midway (all tags equal too); ``==`` against a dict whose key empties the
  table and its glist; a reader's retrieve steps interleaved with the owner's writes
  (the result is the one at its start, the table's state equals the dict's).
"""

from __future__ import annotations

import gc
import random
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._index.scoring import drain
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.numbering import _Group, _group_map

from .strategies import examples
from .test_entrybytes5 import SLOTS, GroupTable, _new, _record, core
from .test_store_batch import BASE, _snapshot


@core
@pytest.mark.parametrize("table", [True, False])
def test_add_groups_new_lower_that_drops_the_record(table: bool) -> None:
    fn = ccore.add_groups()
    recs = [_record(f"t{i}", i) for i in range(5)]
    glist: list[Any] = []
    groups = _group_map(glist, table)
    lows: list[str] = []

    def lower(s: str) -> str:
        recs.clear()  # the last references to the records
        gc.collect()
        return s.lower()

    got = fn(recs, 0, groups, glist, [""] * 4, 4, 0, lows, [], [], lower)
    assert got == 0  # the record left to the caller (its list is empty now)
    assert glist == []
    assert lows == []
    assert len(groups) == 0
    if table:
        groups._check()


@core
@pytest.mark.parametrize("table", [True, False])
def test_add_groups_new_lower_that_rebinds_the_entry(table: bool) -> None:
    fn = ccore.add_groups()
    recs = [_record(f"t{i}", i) for i in range(3)]
    glist: list[Any] = []
    groups = _group_map(glist, table)
    other = _record("other", 99)

    def lower(s: str) -> str:
        recs[0].slot = other.slot  # the record's entry rebound (its slot in the store)
        gc.collect()
        return s.lower()

    got = fn(recs, 0, groups, glist, [""] * 4, 4, 0, [], [], [], lower)
    assert got == 0
    assert glist == []
    assert len(groups) == 0


@core
def test_add_groups_new_lower_that_maps_the_text_dict() -> None:
    fn = ccore.add_groups()
    recs = [_record("t0", 0)]
    glist: list[Any] = []
    groups: dict[str, int] = {}

    def lower(s: str) -> str:
        groups[s] = 7
        return s.lower()

    got = fn(recs, 0, groups, glist, [""] * 4, 4, 0, [], [], [], lower)
    assert got == 0
    assert glist == []
    assert groups == {"t0": 7}


class Hostile(str):
    def __hash__(self) -> int:
        raise RuntimeError("hash")

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("eq")

    __ne__ = __eq__  # type: ignore[assignment]


TEXTS = st.one_of(
    st.sampled_from(["", "a", "b", "ab", "\U0001f600", "\U0001f600a", "é", "\x00", "a" * 33]),
    st.text(max_size=4),
)
OPS = st.lists(
    st.tuples(st.sampled_from(["add", "del", "get", "set", "hostile"]), TEXTS, st.booleans()),
    max_size=120,
)


@core
@given(ops=OPS, mask=st.sampled_from([0, 1, 0xFFFFFFFF]))
@settings(max_examples=examples(150), deadline=None)
def test_colliding_tags_against_a_dict(ops: list[tuple[str, str, bool]], mask: int) -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS, mask)
    d: dict[str, int] = {}
    for n, (op, text, group) in enumerate(ops):
        if op == "add" and text not in d:
            item = _Group(text, []) if group else _record(text, n)
            d[text] = t.append(item)
        elif op == "del" and text in d:
            del t[text]
            glist[d.pop(text)] = None
        elif op == "set" and text in d:
            t[text] = d[text]
        elif op == "hostile":
            key = Hostile(text)
            assert (key in t) == (text in d)
            assert t.get(key) == d.get(text)
        assert t.get(text) == d.get(text)
        t._check()
    assert dict(t.items()) == d
    assert t == d
    # Empty it from both ends of the slot order: backward shifts across the wrap.
    for text in sorted(d, key=len):
        del t[text]
        t._check()
    assert len(t) == 0


@core
def test_a_del_during_teardown_sees_an_empty_table() -> None:
    seen: list[Any] = []
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS)

    class Loud:
        def __del__(self) -> None:
            seen.append((len(t_ref[0]), t_ref[0].get("x"), t_ref[0].glist))

    t_ref = [t]
    t.append(_record("x", 0))
    glist.append(Loud())  # not a group item: read as carrying no text
    del glist
    t._check()
    gc.collect()
    # Break the table itself via tp_clear (a cycle through it).
    t.glist.append(t_ref)
    t_ref.append(t)
    del t
    t_ref[0].glist[1] = None  # Loud's __del__ reads the live table: still consistent
    assert seen == [(1, 0, seen[0][2])]
    gc.collect()


@core
@given(
    before=st.lists(TEXTS, unique=True, max_size=20),
    after=st.lists(TEXTS, max_size=30),
    mask=st.sampled_from([0, 3, 0xFFFFFFFF]),
)
@settings(max_examples=examples(150), deadline=None)
def test_index_from_rolls_back_on_a_text_twice(
    before: list[str], after: list[str], mask: int
) -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS, mask)
    for n, text in enumerate(before):
        t.append(_record(text, n))
    start = len(glist)
    glist.extend(_record(text, 100 + n) for n, text in enumerate(after))
    want = dict(zip(before, range(start), strict=True))
    texts = before + after
    if len(set(texts)) == len(texts):
        t.index_from(start)
        want = {text: n for n, text in enumerate(texts)}
    else:
        with pytest.raises(ValueError, match="is mapped"):
            t.index_from(start)
    t._check()
    assert t == want


@core
@given(
    texts=st.lists(TEXTS, unique=True, max_size=30),
    groups=st.sets(st.integers(0, 29)),
    wrong=st.dictionaries(st.integers(0, 29), st.sampled_from(["z", "é!", "", None, b"a"])),
    mask=st.sampled_from([0, 3, 0xFFFFFFFF]),
    short=st.booleans(),
)
@settings(max_examples=examples(150), deadline=None)
def test_index_from_with_the_texts_given(
    texts: list[str], groups: set[int], wrong: dict[int, Any], mask: int, short: bool
) -> None:
    """``index_from(start, texts)`` (the restore's: the rows' own strs) maps each item's
    own text whatever was given for it: a given text is hashed only when equal to the
    item's (a record's by its stored UTF-8, a group's by value); a wrong one, a non-str
    or a list of another length is the item's own text read back, as without texts."""
    glist: list[Any] = [
        _Group(text, [_record(text, n)]) if n in groups else _record(text, n)
        for n, text in enumerate(texts)
    ]
    given: list[Any] = [
        wrong.get(n, text) if n in wrong else "".join(text) for n, text in enumerate(texts)
    ]
    if short and given:
        given.pop()
    t = GroupTable(glist, *SLOTS, mask)
    t.index_from(0, given)
    t._check()
    assert t == {text: n for n, text in enumerate(texts)}
    for n, text in enumerate(texts):
        assert t.get(text) == n
    with pytest.raises(TypeError, match="texts must be a list"):
        t.index_from(len(glist), tuple(given))


@core
def test_equality_against_a_dict_whose_key_empties_the_table() -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS, 0)  # one tag: every key compared
    for n in range(40):
        t.append(_record(f"k{n}", n))

    class Evil(str):
        def __hash__(self) -> int:
            return str.__hash__(self)

        def __eq__(self, other: object) -> bool:
            for text in list(t.keys()):
                del t[text]
            glist.clear()
            gc.collect()
            return False

    d: dict[Any, int] = {Evil(f"k{n}"): n for n in range(40)}
    assert (t == d) is False
    t._check()  # glist emptied behind the table's back, the table emptied first
    assert len(t) == 0


@core
def test_reserve_past_the_numbers_limit_is_a_clear_error() -> None:
    glist: list[Any] = []
    t = GroupTable(glist, *SLOTS)
    t.append(_record("a", 0))
    for n in (2**45, 2**31 - 1):  # more texts than distinct numbers < 2**31 - 1
        with pytest.raises(OverflowError, match="2\\*\\*31 - 1 texts"):
            t.reserve(n)
    t._check()
    assert t == {"a": 0}
    assert t.__sizeof__() == type(t).__basicsize__ + 8 * 8  # unchanged: 8 slots


_WORDS = ["alpha", "beta", "gamma", "\U0001f600", "é", "x"]


def _entry(i: int, r: random.Random) -> MemoryEntry:
    text = " ".join(r.choice(_WORDS) for _ in range(r.randrange(1, 3)))
    return MemoryEntry(
        category=MemoryCategory.FACT,
        memory=text,
        id=uuid.UUID(int=i),
        created_at=BASE,
        tags=("alpha",) if r.random() < 0.3 else (),
        relevance=r.choice([0.2, 0.5, 0.9]),
    )


def _scores(out: list[tuple[float, Any]]) -> list[tuple[float, uuid.UUID]]:
    return [(round(s, 9), rec.entry.id) for s, rec in out]


@core
@pytest.mark.parametrize("seed", range(12))
def test_a_reader_mid_retrieve_while_the_owner_writes(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retrieve's steps (tagged records looked up in the map it took) interleaved with
    the owner's deletes, stores and consolidations: its result is the one at its start,
    and the table's side equals the dict's (held: no fix needed)."""
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    monkeypatch.setattr(wo_knobs, "_STEP", 1)
    r = random.Random(seed)
    ops = [(r.random(), r.randrange(1, 40), r.getrandbits(32)) for _ in range(80)]
    got = {}
    for on in (True, False):
        monkeypatch.setattr(wo_knobs, "_GROUP_TABLE", on)
        s = _new(on)
        rr = random.Random(seed)
        for i in range(1, 30):
            s.store(_entry(i, rr))
        view = s.view()
        q = rr.choice(["alpha", "alpha beta", "gamma \U0001f600", "x"])
        before = _scores(s.index.top_k(view, q, 5, None))  # type: ignore[attr-defined]
        gen = s.index.top_k_steps(view, q, 5, None)  # type: ignore[attr-defined]
        out = None
        for op, i, bits in ops:
            try:
                next(gen)
            except StopIteration as stop:
                out = stop.value
                break
            if op < 0.5:
                s.delete(uuid.UUID(int=i))
            elif op < 0.9:
                s.store(_entry(i, random.Random(bits)))
            else:
                s.consolidate()
            s._check()
        if out is None:
            out = drain(gen)
        assert _scores(out) == before
        got[on] = (before, _snapshot(s))
    assert got[True] == got[False]
