"""Review of bytes25 (review25a): BM25's groups as columns (``knobs._GROUP_COLUMNS``) and
the text map in the word-overlap core's ``GroupTable`` (``knobs._GROUP_TABLE``), against
the objects' layout and the brute force.

* Sliced reads (``top_k_steps`` with ``knobs._CHUNK`` lowered so that a query takes many
  steps) of held snapshots interleaved with the owner's upserts, deletes, purges (of what
  no open snapshot or read in flight sees), vacuums and re-stores of the same texts, with
  texts that are empty, whitespace only, non-BMP, long (frequencies past 255), the same
  text tagged and untagged and under other tags, every text a new str object equal by
  value: each read's result is the brute force's at its version; ``_check`` throughout;
  the three layouts (columns with the core's table, columns with a dict, objects), the
  single record kept alone or in a list.
* Equal texts that are other objects share a group; the empty and whitespace texts and a
  tagged copy of a text get their own; the map's numbers are the objects' layout's.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from actormem import BM25Scorer, MemoryCategory, MemoryEntry
from actormem._index.bm25 import knobs
from actormem._record import NEVER, Record

from .test_bm25 import FakeView, brute_force, entry
from .test_store_batch import BASE

POOL = [f"w{i} a" for i in range(30)] + [
    "", " ", "  \t ", "a", "a a", "a b", "b", "a b c", "c c c c", "\u00e9 a",
    "\U0001d518 a b", "zz", "a " * 300, "b " * 300 + "a", "x y z a", "q",
]  # fmt: skip
TAGS = [(), (), (), ("a",), ("t",), ("a", "b")]
QUERIES = ["a", "a a", "a b", "b c", "zz q", "\u00e9", "\U0001d518 b", "c", "x", "a b c zz q t w3"]


def _fresh(text: str) -> str:
    return "".join(list(text))  # equal by value, another object (but "" and 1-char)


def _make(cols: bool, table: bool, single: bool) -> Any:
    saved = knobs._GROUP_COLUMNS, knobs._GROUP_TABLE, knobs._SINGLE_RECORD
    knobs._GROUP_COLUMNS, knobs._GROUP_TABLE, knobs._SINGLE_RECORD = cols, table, single
    try:
        return BM25Scorer().make_index()
    finally:
        knobs._GROUP_COLUMNS, knobs._GROUP_TABLE, knobs._SINGLE_RECORD = saved


def _run(seed: int, cols: bool, table: bool, single: bool, steps: int = 400) -> None:
    rnd = random.Random(seed)
    index = _make(cols, table, single)
    saved_single = knobs._SINGLE_RECORD
    knobs._SINGLE_RECORD = single  # read by add()
    try:
        _drive(rnd, index, steps)
    finally:
        knobs._SINGLE_RECORD = saved_single


def _drive(rnd: random.Random, index: Any, steps: int) -> None:
    index._vacuum_slack = rnd.choice([0, 3, 64])
    version = 0
    records: list[Record] = []
    current: dict[int, Record] = {}
    snaps: list[int] = []
    inflight: list[list[Any]] = []
    nid = 0

    def kill(rec: Record) -> None:
        rec.died = version
        index.retire(rec)

    for step in range(steps):
        op = rnd.random()
        if op < 0.3:
            version += 1
            rec = Record(
                entry(_fresh(rnd.choice(POOL)), tags=rnd.choice(TAGS)), born=version, seq=nid
            )
            index.add(rec)
            records.append(rec)
            current[nid] = rec
            nid += 1
        elif op < 0.45 and current:
            ident = rnd.choice(list(current))
            version += 1
            kill(current[ident])
            text = _fresh(rnd.choice([current[ident].entry.memory, *POOL]))
            rec = Record(entry(text, tags=rnd.choice(TAGS)), born=version, seq=ident)
            index.add(rec)
            records.append(rec)
            current[ident] = rec
        elif op < 0.55 and current:
            version += 1
            kill(current.pop(rnd.choice(list(current))))
        elif op < 0.6:
            snaps.append(version)
        elif op < 0.65 and snaps:
            snaps.pop(rnd.randrange(len(snaps)))
        elif op < 0.75:
            held = snaps + [item[1] for item in inflight]
            for rec in list(records):
                if rec.died != NEVER and not any(rec.visible(v) for v in held):
                    index.purge(rec)
                    records.remove(rec)
            if rnd.random() < 0.5:
                index.vacuum(min(held, default=version))
        elif op < 0.85:
            v = rnd.choice([version, *snaps])
            q = rnd.choice(QUERIES)
            limit = rnd.choice([1, 2, 3, 10, 100])
            gen = index.top_k_steps(FakeView(v, records), q, limit, None)
            want = brute_force(index.scorer, records, v, q, limit)
            inflight.append([gen, v, q, limit, want])
        else:
            for item in list(inflight):
                gen, v, q, limit, want = item
                try:
                    for _ in range(rnd.randint(1, 3)):
                        next(gen)
                except StopIteration as stop:
                    inflight.remove(item)
                    got = [(x, r.seq, r.born) for x, r in stop.value]
                    assert got == [(x, r.seq, r.born) for x, r in want], (step, v, q, limit)
        if step % 25 == 0:
            index._check(records)
    index._check(records)


@pytest.mark.parametrize("layout", [(True, True), (True, False), (False, False)])
@pytest.mark.parametrize("seed", range(6))
def test_sliced_reads_across_writes(
    monkeypatch: pytest.MonkeyPatch, seed: int, layout: Any
) -> None:
    monkeypatch.setattr(knobs, "_CHUNK", 16)
    _run(seed, *layout, single=seed % 2 == 0)


def test_equal_texts_share_a_group() -> None:
    """Texts equal by value (other objects) share a group; "", whitespace, a tagged copy
    and a copy under other tags have their own; the same numbers in both layouts."""
    texts = ["", " ", "a b", "\U0001d518 a", "a b", "", " ", "\U0001d518 a", "a b"]
    tags = [(), (), (), (), ("t",), (), (), (), ("u",)]
    nums = {}
    for cols in (True, False):
        index = _make(cols, True, True)
        recs = []
        for seq, (text, tag) in enumerate(zip(texts, tags, strict=True)):
            rec = Record(entry(_fresh(text), tags=tag), born=1, seq=seq)
            index.add(rec)
            recs.append(rec)
        index._check(recs)
        nums[cols] = [index._num(index._indexed(r)) for r in recs]
    assert nums[True] == nums[False] == [0, 1, 2, 3, 4, 0, 1, 3, 5]


def test_state_restore_keeps_columns() -> None:
    """A MemoryState round trip through its entries in columns: the same top-k."""
    from actormem._engine.state import MemoryState

    s = MemoryState(capacity=None, half_life=3600.0, scorer=BM25Scorer())
    for i in range(200):
        s.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=_fresh(POOL[i % len(POOL)]),
                id=uuid.UUID(int=i + 1),
                created_at=BASE,
                tags=TAGS[i % len(TAGS)],
            )
        )
    s.publish()
    assert s.index._cols
    for q in QUERIES:
        got = s.index.top_k(s.view(), q, 7, None)
        want = brute_force(s.index.scorer, s.index._records(), s.view().version, q, 7)
        assert [(x, r.seq) for x, r in got] == [(x, r.seq) for x, r in want]


def test_past_two_to_the_sixteen() -> None:
    """66,000 distinct texts (groups and terms past 2**16: the pool widens), a view held
    from before 5,000 deaths, then those purged and 2,000 of their texts stored again
    as new objects (new groups): both layouts give the brute force's top-k at each
    version, ``_check`` on both."""
    n = 66_000
    idx = {c: _make(c, True, True) for c in (True, False)}
    recs = []
    for i in range(n):
        rec = Record(entry(f"u{i} k{i % 100} common"), born=1 + i // 1000, seq=i)
        recs.append(rec)
        for index in idx.values():
            index.add(rec)
    v = n // 1000 + 2
    dead = random.Random(1).sample(recs, 5000)
    for r in dead:
        r.died = v
        for index in idx.values():
            index.retire(r)

    def agree(live: list[Record], versions: tuple[int, ...], queries: list[str]) -> None:
        for q in queries:
            for ver in versions:
                view = FakeView(ver, live)
                want = [(s, r.seq) for s, r in brute_force(idx[True].scorer, live, ver, q, 5)]
                for index in idx.values():
                    assert [(s, r.seq) for s, r in index.top_k(view, q, 5, None)] == want, q

    agree(recs, (40, v), ["k7 common", "u65537 k37", "u100 u65536 u65535"])
    for r in dead:
        for index in idx.values():
            index.purge(r)
    live = [r for r in recs if r.died == NEVER]
    for j, r in enumerate(dead[:2000]):
        again = Record(entry(_fresh(r.entry.memory)), born=v + 1, seq=n + j)
        live.append(again)
        for index in idx.values():
            index.add(again)
    for index in idx.values():
        index._check(live)
    agree(live, (v + 1,), ["k7 common", "u65537 k37", f"u{dead[0].seq} k3"])
