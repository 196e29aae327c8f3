"""The relevance order keyed by ``(-relevance, seq)`` (branch entrybytes2, issue #20 item 6).

``state._SEQ_KEYS`` (read when a state is made): a relevance-1.0 record's key in
``_by_relevance`` is its own ``seq`` int (no key object), another relevance's
``part | seq``; versions of one id share the key. Checked here:

* a state machine drives two states, one made with the knob on and one with it off,
  with the same ``store_many`` lists (new ids, upserts by id and by key, relevances
  1.0, 0.5 and 0.0, ttls, expiries, bounded memories), deletes, consolidations and
  publishes while views are held (so many versions of one id stay in the order), and
  requires identical structures, journals, removals, top-k and ``by_relevance`` of
  every held view (walked in one go, and with writes and vacuums between its steps),
  and ``_check`` (on the seq layout: every relevance-1.0 key *is* its record's seq);
* ``by_relevance`` of views held during a run of upserts of one id equals the model
  (the visible records sorted by ``(-relevance, seq)``), whatever the chunk bounds, the
  ``below`` cut and the sublists' length;
* the C ``store_inserts`` makes the same keys as the Python paths in each layout, and
  refuses a ``seq_keys`` that is not a bool before any change.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from actormem import MemoryCategory, MemoryEntry
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState, View
from actormem._index import kernels
from actormem._record import PyRecord, Record

from .setups import key_value, knob_state, relevance_keys
from .strategies import examples, run_machine
from .test_store_batch import BASE, TwoPaths, _snapshot

core = pytest.mark.skipif(
    state_module._store_inserts_c is None, reason="the word-overlap core is not built"
)
#: The records' own keys (``state._REC_KEYS``) need the compiled record: with the Python
#: one (``ACTORMEM_PY_RECORD=1``, or the extension not built) a state keys by the seq int.
compiled = pytest.mark.skipif(Record is PyRecord, reason="the compiled record is not built")


def _new(
    seq_keys: bool, capacity: int | None = None, load: int = 4, rec_keys: bool = False
) -> MemoryState:
    """A state in the seq layout with int keys (``_REC_KEYS`` off unless ``rec_keys``:
    the records' own keys are ``test_rec44_keys.py``'s) or the packed one."""
    saved = state_module._REC_KEYS
    state_module._REC_KEYS = rec_keys
    try:
        return knob_state(state_module, "_SEQ_KEYS", seq_keys, capacity, load)
    finally:
        state_module._REC_KEYS = saved


def _rec(rec: Any) -> tuple[Any, ...]:
    """A record version by what never changes (``died`` is set when it dies)."""
    return (rec.entry, rec.seq, rec.born)


def _model(state: MemoryState, view: View, below: float | None) -> list[tuple[Any, ...]]:
    """``view.by_relevance(below)`` by its definition: the visible records of relevance
    below ``below`` (all when None), by ``(-relevance, seq)``."""
    recs = [
        r
        for r in state._by_relevance
        if view.visible(r) and (below is None or r.entry.relevance < below)
    ]
    recs.sort(key=lambda r: (-r.entry.relevance, r.seq))
    return [_rec(r) for r in recs]


def _keys_are_seqs(state: MemoryState) -> bool:
    rel = state._by_relevance
    return all(
        k is r.seq
        for ks, rs in zip(rel._keys, rel._lists, strict=True)
        for k, r in zip(ks, rs, strict=True)
        if r.entry.relevance == 1.0
    )


class TwoLayouts(TwoPaths):
    """test_store_batch's two states, one made with ``_SEQ_KEYS`` on, one with it off,
    views held across writes. A subclass compares another pair of layouts by its own
    ``_new_state``."""

    @initialize(capacity=st.sampled_from([None, None, None, 4, 9]), load=st.sampled_from([4, 9]))
    def make(self, capacity: int | None, load: int) -> None:
        self.views: dict[bool, list[View]] = {True: [], False: []}
        #: Open walks: their view (held), the walk, what is left of the model's answer.
        self.walks: dict[bool, list[tuple[View, Iterator[Any], list[Any]]]] = {
            True: [],
            False: [],
        }
        for on in (True, False):
            s = self._new_state(on, capacity, load)
            s.on_remove = lambda e, cause, on=on: self.removed[on].append((e.id, cause))
            self.states[on] = s

    def _new_state(self, on: bool, capacity: int | None, load: int) -> MemoryState:
        """The state of side ``on``: ``_SEQ_KEYS`` on or off."""
        return _new(on, capacity, load)

    def _side(self, on: bool) -> None:
        pass  # the layout is the state's own, fixed when it was made

    def _horizon(self, on: bool) -> int:
        state = self.states[on]
        held = [v.version for v in self.views[on]] + [w[0].version for w in self.walks[on]]
        return min(held, default=state.published)

    @rule()
    def publish(self) -> None:
        for on, state in self._each():
            state.publish()
            state.vacuum(self._horizon(on))

    @rule()
    def hold(self) -> None:
        for on, state in self._each():
            state.publish()
            self.views[on].append(state.view())

    @rule(pick=st.integers(0, 9))
    def release(self, pick: int) -> None:
        for on, _ in self._each():
            if self.views[on]:
                self.views[on].pop(pick % len(self.views[on]))

    @rule(pick=st.integers(0, 20), times=st.integers(1, 24), rel=st.sampled_from([1.0, 0.5]))
    def upsert_one(self, pick: int, times: int, rel: float) -> None:
        """Many versions of one id, one view held after each: a run of equal keys."""
        if not self.ids:
            return
        ident = self.ids[pick % len(self.ids)]
        for _ in range(times):
            self.i += 1
            entry = MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"cat v{self.i % 3}",
                created_at=BASE + timedelta(seconds=self.i),
                id=ident,
                relevance=rel,
            )
            for on, state in self._each():
                state.store(entry)
                state.publish()
                self.views[on].append(state.view())

    @rule()
    def consolidate(self) -> None:
        for _, state in self._each():
            state.consolidate()

    @rule(below=st.sampled_from([None, 0.75, 0.25]))
    def start_walk(self, below: float | None) -> None:
        for on, state in self._each():
            if self.views[on]:
                view = self.views[on][-1]
                want = _model(state, view, below)
                self.walks[on].append((view, view.by_relevance(below), want))

    @rule(steps=st.integers(1, 40))
    def step_walks(self, steps: int) -> None:
        """Each open walk a few records on (the owner wrote and vacuumed since): it
        gives what the model gave when it started."""
        got = []
        for on, _ in self._each():
            out = []
            for _, it, want in self.walks[on]:
                part = [_rec(r) for _, r in zip(range(steps), it, strict=False)]
                out.append(part)
                assert part == want[: len(part)]
                if len(part) < steps:
                    assert len(part) == len(want)  # the walk ended with the model's
                del want[: len(part)]
            got.append(out)
        assert got[0] == got[1]

    @rule()
    def walk_all(self) -> None:
        got = []
        for on, state in self._each():
            out = []
            for view in self.views[on]:
                for below in (None, 0.75, 0.25):
                    walked = [_rec(r) for r in view.by_relevance(below)]
                    assert walked == _model(state, view, below)
                    out.append(walked)
            got.append(out)
        assert got[0] == got[1]

    @invariant()
    def same_structures(self) -> None:
        if not self.states:
            return
        seen = [_snapshot(state) for _, state in self._each()]  # _check()s each
        assert seen[0] == seen[1]
        assert self.removed[True] == self.removed[False]
        self._layouts(self.states[True], self.states[False])

    def _layouts(self, on: MemoryState, off: MemoryState) -> None:
        """Each side has its layout (a subclass: its own pair's)."""
        assert _keys_are_seqs(on)
        assert on._relkey is state_module._relevance_key_seq
        assert off._relkey is state_module._relevance_key


def test_two_layouts_agree() -> None:
    run_machine(TwoLayouts, 25, 25)


@settings(max_examples=examples(60), deadline=None)
@given(
    seq_keys=st.booleans(),
    load=st.sampled_from([4, 7, 1000]),
    first=st.integers(0, 40),
    versions=st.integers(1, 80),
    rels=st.lists(st.sampled_from([1.0, 0.5]), min_size=1, max_size=3),
    below=st.sampled_from([None, 0.75]),
)
def test_by_relevance_over_runs_of_versions(
    seq_keys: bool, load: int, first: int, versions: int, rels: list[float], below: float | None
) -> None:
    s = _new(seq_keys, load=load)
    for i in range(first):
        s.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"t{i}",
                id=uuid.UUID(int=i + 1),
                relevance=rels[i % len(rels)],
                created_at=BASE,
            )
        )
    views = []
    for j in range(versions):
        s.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=f"x{j}",
                id=uuid.UUID(int=10_000),
                relevance=rels[j % len(rels)],
                created_at=BASE,
            )
        )
        s.publish()
        views.append(s.view())
    s._check()
    for view in views:
        assert [_rec(r) for r in view.by_relevance(below)] == _model(s, view, below)
    # A walk from the newest view while the older ones are let go and vacuumed.
    newest = views[-1]
    want = _model(s, newest, below)
    walk = newest.by_relevance(below)
    got = [_rec(r) for _, r in zip(range(17), walk, strict=False)]
    s.vacuum(newest.version)
    s._check()
    got += [_rec(r) for r in walk]
    assert got == want
    if seq_keys:
        assert _keys_are_seqs(s)


@core
@pytest.mark.parametrize(
    ("seq_keys", "rec_keys"),
    [(True, False), (False, False), pytest.param(True, True, marks=compiled)],
)
def test_store_inserts_makes_the_python_keys(seq_keys: bool, rec_keys: bool) -> None:
    entries = [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"w{i}",
            id=uuid.UUID(int=i + 1),
            relevance=0.5 if 20 <= i < 40 else 1.0,
            created_at=BASE,
        )
        for i in range(60)
    ]
    by_c, by_py = _new(seq_keys, rec_keys=rec_keys), _new(seq_keys, rec_keys=rec_keys)
    by_c.store_many(entries, None)
    saved = state_module._store_inserts_c
    state_module._store_inserts_c = None
    try:
        by_py.store_many(entries, None)
    finally:
        state_module._store_inserts_c = saved
    for s in (by_c, by_py):
        s._check()
    assert relevance_keys(by_c._by_relevance) == relevance_keys(by_py._by_relevance)
    first = by_py._relkey(by_py._by_relevance[0])
    assert key_value(by_c._by_relevance._keys[0][0]) == key_value(first)
    for s in (by_c, by_py):
        assert s._rec_keys == rec_keys
        assert _keys_are_seqs(s) == (seq_keys and not rec_keys)
        rel = s._by_relevance
        assert rec_keys == all(  # the records' own keys (test_rec44_keys.py)
            k is r
            for ks, rs in zip(rel._keys, rel._lists, strict=True)
            for k, r in zip(ks, rs, strict=True)
            if r.entry.relevance == 1.0
        )


@core
def test_store_inserts_refuses_a_seq_keys_that_is_not_a_bool() -> None:
    wo: Any = kernels._wo
    s = _new(True)
    s.store_many([MemoryEntry(category=MemoryCategory.FACT, memory="a", created_at=BASE)], None)
    rel = s._by_relevance
    args = [
        [MemoryEntry(category=MemoryCategory.FACT, memory="b", created_at=BASE)], 0,
        s.version + 1, s._by_id, s._prev, s._rel_parts, rel._lists, rel._keys, rel._maxes,
        8, s._namespaces, s._dups, s._dup_keys, s.journal, [], [],
    ]  # fmt: skip
    before = (dict(s._by_id), [list(k) for k in rel._keys], len(s.journal or []))
    for wrong in (1, None, "yes"):
        with pytest.raises(TypeError, match="seq_keys"):
            wo.store_inserts(*args, wrong, s._cols)
    with pytest.raises(TypeError, match="18 arguments"):
        wo.store_inserts(*args, True)
    with pytest.raises(TypeError, match="cols must be an EntryColumns"):
        wo.store_inserts(*args, True, [])
    assert (dict(s._by_id), [list(k) for k in rel._keys], len(s.journal or [])) == before
    run: list[Any] = []
    args[14] = run
    assert wo.store_inserts(*args, True, s._cols) == 1
    assert rel._keys[-1][-1] is run[0].seq  # the seq int itself


@settings(max_examples=examples(40), deadline=None)
@given(
    rels=st.lists(st.sampled_from([1.0, 1.0, 0.5, 0.0]), min_size=1, max_size=60),
    gaps=st.lists(st.integers(1, 3), min_size=60, max_size=60),
    capacity=st.sampled_from([None, None, 10]),
)
def test_load_orders_alike_in_both_layouts(
    rels: list[float], gaps: list[int], capacity: int | None
) -> None:
    """``load`` (a file's rows, seqs ascending with gaps) fills the order alike in both
    layouts, each ``_check``ed; a relevance-1.0 key is the loaded record's seq."""
    seq = 0
    rows = []
    for i, rel in enumerate(rels):
        seq += gaps[i]
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"m{i % 5}",
            id=uuid.UUID(int=i + 1),
            relevance=rel,
            created_at=BASE + timedelta(seconds=i),
        )
        rows.append((seq, entry))
    loaded = {}
    for on in (True, False):
        s = _new(on, capacity)
        s.load(rows)
        s._check()
        loaded[on] = s
        if on:
            assert _keys_are_seqs(s)
    assert [_rec(r) for r in loaded[True]._by_relevance] == [
        _rec(r) for r in loaded[False]._by_relevance
    ]
    view = loaded[True].view()
    assert [_rec(r) for r in view.by_relevance()] == _model(loaded[True], view, None)
