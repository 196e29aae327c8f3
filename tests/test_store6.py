"""Branch store6's store path (issue #20's store target), each against the path before it.

* ``sqlite_format._ISO_DIRECT``: the core's ``iso_utc`` is ``isoformat`` on any datetime
  (in ``UTC``, naive, other offsets, a ``ZoneInfo``, a subclass, any fold) and anything
  else; ``encode_record``'s rows and a durable memory's file rows are the same either way;

* ``knobs._CACHE_UCS`` (``ccore.add_text_cached``/``add_texts_cached``, flag 4): a text
  that is not ASCII (Latin-1, UCS-2, UCS-4; ``str.split``'s other whitespace, such as
  ``\\u2003``, ``\\x85``, ``\\xa0``) served by the token cache leaves exactly the
  posting dict (its insertion order too), the vocabulary (every order a reader sees)
  and the new tokens' counts of the split path, cut into any batches, over a dict
  that already holds some of its tokens; and agrees with ``set(low.split())``;
* ``state._UNTRACK_RECORDS``: ``store_many``'s records in an unbounded memory are not
  tracked by the cyclic collector (tracked in a bounded one, and with the knob off),
  the state's structures, journal, removals and top-k are the same through stores,
  upserts, deletes, vacuums and queries, and a dropped record is freed by its
  reference count (no cycle to wait for).
"""

from __future__ import annotations

import gc
import sys
import uuid
from array import array
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import kernels
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import PyRecord, Record
from actormem._storage import sqlite_format

from .strategies import examples, run_machine
from .test_acquire_fast import _ordered
from .test_store_batch import TwoPaths, _snapshot, encoded_both_ways
from .test_storepath import _structures

core = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

#: Tokens of each kind: ASCII, Latin-1, UCS-2 (the typographic apostrophe of these
#: texts), UCS-4, and ASCII words that also come in texts that are not ASCII.
_WORDS = ["it", "is", "don", "t", "abc", "ab", "café", "don’t", "’", "naïve", "x😀", "😀"]
_SPACES = [" ", "  ", "\t", "\n", "\x1c", "\x85", "\xa0", "\u2003", "\u3000", " \r\n "]


@st.composite
def _text(draw: Any) -> str:
    words = draw(
        st.lists(st.sampled_from(_WORDS) | st.text("ab’é", min_size=1, max_size=4), max_size=8)
    )
    seps = draw(
        st.lists(st.sampled_from(_SPACES), min_size=len(words) + 1, max_size=len(words) + 1)
    )
    out = seps[0]
    for w, s in zip(words, seps[1:], strict=True):
        out += w + s
    return out


def _add_all(
    lows: list[str], cuts: list[int], seed: list[str], knob: str, on: bool
) -> tuple[dict[str, array[int]], SubstringVocab, list[int]]:
    """Add ``seed``'s text, then ``lows`` cut into calls of ``cuts`` texts (one text a
    call through ``add_text_cached``), with ``wo_knobs.<knob>`` set to ``on``."""
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    fresh = []
    setattr(wo_knobs, knob, on)
    try:
        # Some tokens known before (the cache then hits, and misses into the dict).
        fresh.append(ccore.add_text_cached(post, " ".join(seed), 0, vocab, cache, 0))
        at = 0
        for cut in [*cuts, len(lows)]:
            part = lows[at : at + cut]
            if len(part) == 1:
                fresh.append(ccore.add_text_cached(post, part[0], at + 1, vocab, cache, 0))
            else:
                fresh.append(ccore.add_texts_cached(post, part, at + 1, vocab, cache, 0))
            at += len(part)
            if at >= len(lows):
                break
    finally:
        setattr(wo_knobs, knob, True)
    vocab._check()
    return post, vocab, fresh


def assert_knob_adds_alike(lows: list[str], cuts: list[int], seed: list[str], knob: str) -> None:
    """The add with ``wo_knobs.<knob>`` on leaves the structures, the posting dict's
    order, the vocabulary and the fresh counts of the add with it off, and each text's
    group in the list of each distinct token of its split."""
    new = _add_all(lows, cuts, seed, knob, True)
    old = _add_all(lows, cuts, seed, knob, False)
    assert _structures(new[0], new[1]) == _structures(old[0], old[1])
    assert list(new[0]) == list(old[0])  # the posting dict's insertion order
    assert _ordered(new[1]) == _ordered(old[1])
    assert new[2] == old[2]
    ref: dict[str, list[int]] = {}
    for gid, low in enumerate([" ".join(seed), *lows]):
        for tok in set(low.split()):
            ref.setdefault(tok, []).append(gid)
    assert {t: list(a) for t, a in new[0].items()} == ref


@core
@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(_text(), max_size=16),
    st.lists(st.integers(1, 5), max_size=6),
    st.lists(st.sampled_from(_WORDS), max_size=6),
)
def test_cache_ucs_leaves_the_split_paths_structures(
    texts: list[str], cuts: list[int], seed: list[str]
) -> None:
    assert_knob_adds_alike([t.lower() for t in texts], cuts, seed, "_CACHE_UCS")


@core
def test_cache_ucs_examples() -> None:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    assert ccore.add_text_cached(post, "it is don’t it", 0, vocab, cache, 0) == 3
    assert ccore.add_text_cached(post, "it\xa0don’t\u2003x😀\x85is", 1, vocab, cache, 0) == 1
    assert ccore.add_texts_cached(post, ["is", "café is\u3000café"], 2, vocab, cache, 0) == 1
    assert {t: list(a) for t, a in post.items()} == {
        "it": [0, 1],
        "is": [0, 1, 2, 3],
        "don’t": [0, 1],
        "x😀": [1],
        "café": [3],
    }
    assert ccore.add_text_cached(post, "\u2003 \xa0", 4, vocab, cache, 0) == 0  # no tokens


@core
def test_cache_ucs_flag_is_checked() -> None:
    post: dict[str, array[int]] = {}
    vocab = SubstringVocab()
    cache = ccore.token_cache()
    mod: Any = kernels._wo
    mod.add_text_cached(post, "é a", 0, vocab, cache, 0, 7)
    with pytest.raises(ValueError, match="0 to 63"):
        mod.add_text_cached(post, "é a", 1, vocab, cache, 0, 64)
    with pytest.raises(ValueError, match="0 to 63"):
        mod.add_texts_cached(post, ["é a"], 1, vocab, cache, 0, -1)
    # A posting list of the wrong type, found through the dict for a token not ASCII.
    with pytest.raises(TypeError, match="array"):
        mod.add_text_cached({"é": [1]}, "é", 0, SubstringVocab(), ccore.token_cache(), 0, 7)


# -- untracked records ----------------------------------------------------------------

BASE = datetime(2024, 1, 1, tzinfo=UTC)


def _entries(n: int, start: int = 0) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            category=MemoryCategory.FACT,
            memory=f"entry {i} word{i % 7}",
            created_at=BASE + timedelta(seconds=i),
            id=uuid.UUID(int=i + 1),
        )
        for i in range(start, start + n)
    ]


@core
@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("capacity", [None, 100])
@pytest.mark.parametrize("on", [True, False])
def test_records_untracked_only_when_unbounded_and_on(capacity: int | None, on: bool) -> None:
    saved = state_module._UNTRACK_RECORDS
    state_module._UNTRACK_RECORDS = on
    try:
        s = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
        s.store_many(_entries(20))
        s.defer_index()  # the durable engine's deferred index: store_many's plain loop
        s.store_many(_entries(5, 20))
        s.flush_index()
    finally:
        state_module._UNTRACK_RECORDS = saved
    tracked = {gc.is_tracked(rec) for rec in s._by_id.values()}
    # the compiled record is never tracked (no GC header: tests/test_crec42_record.py)
    assert tracked == {not (on and capacity is None) and Record is PyRecord}


@core
@pytest.mark.skipif(kernels.gc_untrack is None, reason="the compiled kernels are not built")
@pytest.mark.parametrize("batch", [True, False])
def test_untracked_records_do_not_leak(batch: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cycle holds an untracked record (the collector could not free one): once the
    state is dropped, through upserts (older versions), deletes, reads' access
    bookkeeping and vacuums, every entry's reference count is back where it was."""
    entries = _entries(40)
    upserts = [attrs.evolve(e, memory=e.memory + " again") for e in entries[:10]]
    before = [sys.getrefcount(e) for e in entries + upserts]
    monkeypatch.setattr(state_module, "_STORE_BATCH", batch)  # False: store_many's loop
    s = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    s.store_many(entries)
    assert not any(gc.is_tracked(r) for r in s._by_id.values())
    s.store_many(upserts)
    for gone in entries[20:30]:
        s.delete(gone.id)
    del gone
    s.publish()
    when = BASE + timedelta(days=1)
    s.apply_access({e.id: (2, when) for e in entries[:5] + entries[30:35]}, s.published)
    s.apply_access({e.id: (1, when) for e in entries[:5]}, s.published)
    s.publish()
    s.vacuum(s.published)
    del s
    gc.collect()
    assert [sys.getrefcount(e) for e in entries + upserts] == before


class TwoPathsUntracked(TwoPaths):
    """test_store_batch's two states, both on the batched path, one with the records
    untracked and the token cache for texts that are not ASCII, one without."""

    def _side(self, on: bool) -> None:
        state_module._UNTRACK_RECORDS = on
        wo_knobs._CACHE_UCS = on


@core
def test_untracked_and_tracked_states_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 3)
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 4)
    run_machine(TwoPathsUntracked, 30, 30)
    assert _snapshot is not None


# -- the rows' datetimes ----------------------------------------------------------------

_iso_utc = sqlite_format._iso_utc
needs_iso = pytest.mark.skipif(_iso_utc is None, reason="the core has no iso_utc")


class _SubDatetime(datetime):
    pass


@needs_iso
@settings(max_examples=examples(250), deadline=None)
@given(
    st.datetimes(min_value=datetime(1, 1, 1), max_value=datetime(9999, 12, 31, 23, 59, 59, 999999)),
    st.sampled_from(["utc", "none", "plus2", "zone", "sub"]),
    st.booleans(),
)
def test_iso_utc_is_isoformat(naive: datetime, tz: str, fold: bool) -> None:
    assert _iso_utc is not None
    dt: datetime = naive.replace(fold=int(fold))
    if tz == "utc":
        dt = dt.replace(tzinfo=UTC)
    elif tz == "plus2":
        dt = dt.replace(tzinfo=timezone(timedelta(hours=2)))
    elif tz == "zone":
        dt = dt.replace(tzinfo=ZoneInfo("UTC"))
    elif tz == "sub":
        dt = _SubDatetime.combine(dt.date(), dt.time(), tzinfo=UTC)
    assert _iso_utc(dt) == dt.isoformat()


@needs_iso
def test_iso_utc_examples_and_other_objects() -> None:
    assert _iso_utc is not None
    assert _iso_utc(datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2024-01-02T03:04:05+00:00"
    assert (
        _iso_utc(datetime(7, 1, 2, 3, 4, 5, 60, tzinfo=UTC)) == "0007-01-02T03:04:05.000060+00:00"
    )
    assert _iso_utc(date(2024, 1, 2)) == "2024-01-02"  # not a datetime: its isoformat
    bad: Any = object()
    with pytest.raises(AttributeError):
        _iso_utc(bad)


@settings(max_examples=examples(100), deadline=None)
@given(
    micro=st.integers(0, 999_999),
    accessed=st.booleans(),
    expires=st.booleans(),
    updated=st.booleans(),
    zone=st.booleans(),
)
def test_encode_record_iso_direct_is_the_row_before(
    micro: int, accessed: bool, expires: bool, updated: bool, zone: bool
) -> None:
    created = datetime(2024, 3, 4, 5, 6, 7, micro, tzinfo=ZoneInfo("UTC") if zone else UTC)
    entry = MemoryEntry(
        category=MemoryCategory.FACT,
        memory="m é",
        id=uuid.UUID(int=micro + 1),
        created_at=created,
        updated_at=created + timedelta(seconds=5) if updated else None,
        last_accessed=created if accessed else None,
        expires_at=created + timedelta(days=1) if expires else None,
    )
    rec = Record(entry, 3, 2)
    rows = encoded_both_ways(rec, "_ISO_DIRECT")
    assert rows[0] == rows[1]


def test_durable_files_are_the_same_either_way(tmp_path: Any) -> None:
    """A durable memory's rows, stored with store_many, the same with the knobs of this
    branch on and off (the records untracked, the rows' datetimes by iso_utc)."""
    import sqlite3

    import trio

    from actormem import open_memory

    entries = _entries(50) + [
        attrs.evolve(
            e,
            id=uuid.UUID(int=1000 + i),
            memory="don’t\xa0stop é " + e.memory,
            key=f"k{i}" if i % 3 else None,
            expires_at=e.created_at + timedelta(days=36500) if i % 5 == 2 else None,
            last_accessed=e.created_at if i % 2 else None,
        )
        for i, e in enumerate(_entries(20, 100))
    ]

    async def fill(path: str) -> None:
        async with open_memory(path=path) as memory:
            for at in range(0, len(entries), 16):
                await memory.store_many(entries[at : at + 16])

    dumps = []
    for on in (True, False):
        sqlite_format._ISO_DIRECT = state_module._UNTRACK_RECORDS = wo_knobs._CACHE_UCS = on
        sqlite_format._INSERT_NO_NULLS = on
        try:
            path = str(tmp_path / f"{on}.db")
            trio.run(fill, path)
        finally:
            sqlite_format._ISO_DIRECT = state_module._UNTRACK_RECORDS = True
            wo_knobs._CACHE_UCS = sqlite_format._INSERT_NO_NULLS = True
        conn = sqlite3.connect(path)
        dumps.append(
            [
                list(conn.execute(f"SELECT * FROM {table} ORDER BY 1"))
                for table in ("entries", "vectors")
            ]
        )
        conn.close()
    assert dumps[0] == dumps[1]
    assert len(dumps[0][0]) == 70


_ROW_NULLS = st.tuples(*(st.booleans() for _ in range(5)))


@settings(max_examples=examples(60), deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), _ROW_NULLS), max_size=40))
def test_insert_entries_is_executemany(tmp_path_factory: Any, rows: list[Any]) -> None:
    """``insert_entries`` without NULL binds writes what ``executemany(INSERT_ENTRY)``
    writes: the same rows, upserts (a seq again) included, and the same file, byte for
    byte."""
    import sqlite3

    full = []
    for seq, nulls in rows:
        row: list[Any] = [seq, f"id{seq}", "fact", "m é", "[]", "[]", "t0", 1.0, 0]
        row += [None if nulls[0] else "t1", 1, None if nulls[1] else "k"]
        row += [None if nulls[2] else "{}", "t2", None if nulls[3] else 5.0]
        row += [None if nulls[4] else "t3"]
        full.append(tuple(row))
    images = []
    base = tmp_path_factory.mktemp("rows")
    for on in (True, False):
        path = base / f"{on}.db"
        sqlite_format._INSERT_NO_NULLS = on
        conn = sqlite3.connect(path, isolation_level=None)
        try:
            for stmt in sqlite_format.CREATE_SCHEMA:
                conn.execute(stmt)
            conn.execute("BEGIN")
            sqlite_format.insert_entries(conn, full)
            conn.execute("COMMIT")
            images.append(list(conn.execute("SELECT * FROM entries ORDER BY seq")))
        finally:
            conn.close()
            sqlite_format._INSERT_NO_NULLS = True
        images.append(path.read_bytes())
    assert images[0] == images[2]
    assert images[1] == images[3]
    assert len(images[0]) == len({seq for seq, _ in rows})
