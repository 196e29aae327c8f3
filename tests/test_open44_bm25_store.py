"""Branch open44: BM25's restore takes its texts' digest and groups from the entries'
store's UTF-8, started at the top of the bulk load (issue #20, the 1M BM25 open).

``bm25.persist._TEXTS_FROM_STORE``: for a file's rows in the store's form (``(seq,
slot)``, ``FoldedRows.cols``), ``images.start_restore`` starts word overlap's
``StoreDigest`` (the shared ``persist.Early``) for a BM25 index too, the restore takes it
when every record is on its row's very slot (``restore_columns`` by slot numbers) and
keeps the texts as a lazy ``_StoredTexts`` (no str of every text), and the group table
maps the ASCII texts by the reader's hashes. Checked: the same state as a rebuild with
the knob on and off (tags, repeated texts, non-ASCII texts, each group layout), the
thread started once and taken, the store unpinned after, rows or records it does not fit
(another store, tags) falling back to the path before, and stale, foreign and corrupt
images refused with the same message either way and rebuilt.

``bm25.persist._CHECKS_AHEAD``: the image's numeric checks (``_image_side``, in a
thread) start from ``images.prepare_index`` as soon as the image is read, and the
restore takes that thread only for the very parts, group count and pool setting.
Checked: taken, the same index, not taken (and stopped) for other parts or counts, no
thread left when dropped or stopped, the same refusals, and a real file's open.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import attrs
import pytest
import trio

from actormem import BM25Scorer, MemoryEntry, WordOverlapScorer, open_memory
from actormem._index import entrycols, images, kernels, persist
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.images import ImageError

from .setups import change_first_text, with_warnings
from .test_index_image import _image, _live, _loaded, _mutations, _state
from .test_open32_bm25image import _no_threads_left, _state_rows
from .test_open42_store_texts import _Counted, _entry, _store_rows, _unicode
from .test_open_fast import _assert_same

needs_c = pytest.mark.skipif(
    kernels._wo is None or not entrycols.compiled_columns(),
    reason="the word overlap core is not built",
)


@pytest.fixture(autouse=True)
def late_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest's thread (and ``start_early``) for any count of texts."""
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)


def _rows(seed: int, tags: bool = False) -> tuple[Any, list[tuple[int, MemoryEntry]]]:
    """A messy BM25 state's rows with repeated and non-ASCII texts, reloaded; its image."""
    _, rows = _state_rows(seed, 80, 25, tags=tags, dups=True)
    state = _loaded(BM25Scorer, _unicode(rows, seed), None)
    return state, [(r.seq, state.view().entry(r)) for r in _live(state)]


def _terms(index: Any) -> tuple[Any, ...]:
    """What a BM25 index holds beyond its groups: each term's list, N, total length."""
    terms = [(t.key, t.df, list(t.groups), list(t.tfs)) for t in index._term_table if t]
    groups = [g if type(g) is int else g.num for g in index._changes.groups]
    return terms, index._n, index._total, groups


needs_core = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)


def _prepared(state: Any, parts: Any, steps: int = 1) -> Any:
    """``state.prepare_image(parts)``, ``steps`` of its steps run (1: the checks' thread
    started; -1: all)."""
    prepared = state.prepare_image(parts)
    if prepared is not None:
        while steps and prepared.step():
            steps -= 1
    return prepared


def _refused(
    caplog: pytest.LogCaptureFixture, name: str, state: Any, rows: Any, parts: Any, prep: Any
) -> str:
    """``state.load(rows, parts, prep)``, which must refuse the image (one warning, no
    traceback: an ``ImageError``) and rebuild; the warning."""
    fresh = state.index
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="actormem"):
        state.load(rows, parts, prep)
    assert state.index is fresh, name  # rebuilt into the state's own index
    lines = [r.getMessage() for r in caplog.records if "image was not used" in r.getMessage()]
    assert len(lines) == 1, (name, lines)
    assert not any(r.exc_info for r in caplog.records), name
    return lines[0]


class _Taken:
    """Counts ``bm25_persist.start_early``'s threads and those a restore took."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.started: list[persist.Early] = []
        real = bm25_persist.start_early

        def start(index: object, rows: list[Any]) -> persist.Early | None:
            got = real(index, rows)
            if got is not None:
                self.started.append(got)
            return got

        mp.setattr(bm25_persist, "start_early", start)

    def taken(self) -> list[bool]:
        return [e.taken for e in self.started]


@needs_c
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("hashed", [True, False])
@pytest.mark.parametrize("layout", ["table", "dict", "groups", "plain"])
def test_a_load_from_the_store_is_the_rebuild_with_the_knob_on_and_off(
    seed: int, hashed: bool, layout: str
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        # the group layouts: the core's GroupTable (the hashes), a dict over the group
        # columns, group objects, and group columns without _SINGLE_RECORD
        mp.setattr(bm25_knobs, "_GROUP_TABLE", layout == "table")
        mp.setattr(bm25_knobs, "_GROUP_COLUMNS", layout != "groups")
        mp.setattr(bm25_knobs, "_SINGLE_RECORD", layout != "plain")
        state, rows = _rows(seed)
        parts = _image(state)
        rebuilt = _loaded(BM25Scorer, rows, None)
        counted = _Counted(mp)
        taken = _Taken(mp)
        for on in (True, False):
            mp.setattr(bm25_persist, "_TEXTS_FROM_STORE", on)
            counted.made = 0
            taken.started.clear()
            store_rows = _store_rows(rows, hashed)
            got = _loaded(BM25Scorer, store_rows, parts)
            _assert_same(got, rebuilt)
            assert counted.made == (1 if on else 0)
            assert taken.taken() == ([True] if on else [])
            assert store_rows.cols.stats()["pins"] == 0
            got._cols.put(_entry("after"))  # the store is free again
    _no_threads_left()


@needs_c
def test_tagged_rows_fall_back_to_the_keys() -> None:
    """A tagged record: the store's thread starts at the load but is not taken (the
    documents are not the texts alone); stopped, the store unpinned, the index the
    rebuild's."""
    state, rows = _rows(4, tags=True)
    assert any(e.tags for _, e in rows)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    with pytest.MonkeyPatch.context() as mp:
        taken = _Taken(mp)
        store_rows = _store_rows(rows, True)
        got = _loaded(BM25Scorer, store_rows, parts)
        assert taken.taken() == [False]
    _assert_same(got, rebuilt)
    assert store_rows.cols.stats()["pins"] == 0
    _no_threads_left()


@needs_c
def test_records_not_on_the_rows_slots_are_not_taken() -> None:
    """An early thread over other rows' slots (another store): the restore stops it and
    starts its own from the records' texts; the same index."""
    state, rows = _rows(5)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    other = _store_rows(rows, True)
    early = bm25_persist.start_early(BM25Scorer().make_index(), other)
    assert early is not None
    assert early.store is not None
    index = images.restore_index(BM25Scorer().make_index(), parts, _live(rebuilt), None, early)
    assert not early.taken
    assert other.cols.stats()["pins"] == 0
    assert _terms(index) == _terms(rebuilt.index)
    _no_threads_left()


@needs_c
def test_start_early_gives_none_when_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    _, rows = _rows(6)
    store_rows = _store_rows(rows, True)
    index = BM25Scorer().make_index()
    assert bm25_persist.start_early(index, rows) is None  # not the store's form
    assert bm25_persist.start_early(WordOverlapScorer().make_index(), store_rows) is None
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", len(rows) + 1)
    assert bm25_persist.start_early(index, store_rows) is None  # too few texts
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    for knob in ("_TEXTS_FROM_STORE", "_GROUPS_BESIDE"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(bm25_persist, knob, False)
            assert bm25_persist.start_early(index, store_rows) is None
            assert images.start_restore(index, store_rows) is None
    early = images.start_restore(index, store_rows)  # dispatched to BM25's
    assert isinstance(early, persist.Early)
    assert early.store is not None
    early.stop()
    early.stop()  # idempotent
    assert store_rows.cols.stats()["pins"] == 0
    _no_threads_left()


@needs_c
def test_stale_foreign_and_corrupt_images_are_refused_the_same_with_each_knob(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Every corrupt variant of the image, and the image over rows it does not describe,
    refused with the same message with ``_TEXTS_FROM_STORE`` and ``_CHECKS_AHEAD`` on
    or off, and ``_TERMS_AHEAD`` on or off (none, one or all of the prepared steps run
    before the load, as an open's reader may), the rows' hashes or none; the index
    rebuilt, the store unpinned, no thread left."""
    state, rows = _rows(7)
    parts = _image(state)
    variants: list[tuple[str, dict[str, bytes], list[tuple[int, MemoryEntry]]]] = [
        (name, bad, rows) for name, bad in _mutations(parts)
    ]
    at = len(rows) // 2  # one text changed after the image was written: same groups
    stale = [*rows]
    stale[at] = (rows[at][0], attrs.evolve(rows[at][1], memory=rows[at][1].memory + "\u00e9"))
    # a text of one row made another's: a group less (a text still in another row
    # would leave the groups and their digest as they were, which the image describes)
    once = [i for i, (_, e) in enumerate(rows) if [f.memory for _, f in rows].count(e.memory) == 1]
    assert once
    assert once[-1] != 0
    merged = [*rows]
    merged[once[-1]] = (
        rows[once[-1]][0],
        attrs.evolve(rows[once[-1]][1], memory=rows[0][1].memory),
    )
    other = [(s, attrs.evolve(e, memory=e.memory + " z")) for s, e in rows]
    foreign = _image(_loaded(BM25Scorer, other, None))
    head = parts["header"].decode()
    pos = head.index('"digest": "') + len('"digest": "')
    flipped = {**parts, "header": (head[:pos] + "01"[head[pos] == "0"] + head[pos + 1 :]).encode()}
    variants += [
        ("stale", parts, stale),
        ("groups merged", parts, merged),
        ("a row less", parts, rows[:-1]),
        ("a row more", parts, [*rows, (rows[-1][0] + 1, _entry("one more"))]),
        ("foreign", foreign, rows),
        ("digest", flipped, rows),
    ]
    assert len(variants) > 15
    with pytest.MonkeyPatch.context() as mp:
        for name, bad, these in variants:
            rebuilt = _loaded(BM25Scorer, these, None)
            messages = set()
            for on, ahead, steps in itertools.product((True, False), (0, 1, 2), (0, 1, -1)):
                mp.setattr(bm25_persist, "_TEXTS_FROM_STORE", on)
                mp.setattr(bm25_persist, "_CHECKS_AHEAD", ahead > 0)
                mp.setattr(bm25_persist, "_TERMS_AHEAD", ahead > 1)
                store_rows = _store_rows(these, hashed=steps != 0)
                got = _state(BM25Scorer())
                prepared = _prepared(got, bad, steps)
                messages.add(_refused(caplog, name, got, store_rows, bad, prepared))
                del prepared
                _assert_same(got, rebuilt)
                assert store_rows.cols.stats()["pins"] == 0
            assert len(messages) == 1, (name, messages)
    _no_threads_left()


@needs_c
def test_a_failing_store_thread_is_an_image_error_and_a_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The store's groups not found (the core gave None): the restore refuses the image
    (no group map made from nothing) and the load rebuilds."""
    state, rows = _rows(8)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    monkeypatch.setattr(persist, "_slots_groups", lambda *args: None)
    store_rows = _store_rows(rows, True)
    got = _loaded(BM25Scorer, store_rows, parts, used=False)
    _assert_same(got, rebuilt)
    assert store_rows.cols.stats()["pins"] == 0
    early = bm25_persist.start_early(BM25Scorer().make_index(), store_rows)
    with pytest.raises(ImageError):
        images.restore_index(BM25Scorer().make_index(), parts, _live(got), None, early)
    _no_threads_left()


# -- the image's checks started ahead of the rows (bm25.persist._CHECKS_AHEAD) ----------


@needs_core
@pytest.mark.parametrize("store", [True, False])
@pytest.mark.parametrize("layout", ["table", "groups", "plain"])
@pytest.mark.parametrize("steps", [0, 1, 3, -1])
def test_the_part_prepared_ahead_is_taken_and_gives_the_rebuild(
    store: bool, layout: str, steps: int
) -> None:
    """The checks' thread and (``_TERMS_AHEAD``) the terms, pool, lengths and dense
    frequencies built ahead in the prepared index, with none, some or all steps run
    before the load: the restored index is the prepared one (or the fresh one, knobs
    off) and equals the rebuild, repeated texts (df over several records) included."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bm25_knobs, "_GROUP_COLUMNS", layout != "groups")
        mp.setattr(bm25_knobs, "_SINGLE_RECORD", layout != "plain")
        mp.setattr(bm25_knobs, "_DENSE_MIN", 4)  # dense frequencies for the long lists
        state, rows = _rows(9)
        parts = _image(state)
        rebuilt = _loaded(BM25Scorer, rows, None)
        denses = set()
        for checks, terms in ((True, True), (True, False), (False, False)):
            mp.setattr(bm25_persist, "_CHECKS_AHEAD", checks)
            mp.setattr(bm25_persist, "_TERMS_AHEAD", terms)
            got = _state(BM25Scorer())
            prepared = _prepared(got, parts, steps)
            assert isinstance(prepared, bm25_persist.Prepared) == checks
            got.load(_store_rows(rows, True) if store else rows, parts, prepared)
            _assert_same(got, rebuilt)
            assert _terms(got.index) == _terms(rebuilt.index)
            # (a rebuild this small has refreshed none: the restores' own agree)
            denses.add(tuple(_dense_of(t) for t in got.index._term_table if t))
            if checks:
                assert prepared.state.beside is None  # taken (and ended) by the restore
                assert prepared.state.terms == len(got.index._term_table)
                assert (got.index is prepared.index) == terms
                assert (prepared.state.ready is not None) == terms
            del prepared
        assert len(denses) == 1
        assert any(denses.pop())
    _no_threads_left()


def _dense_of(term: Any) -> Any:
    """A term's dense frequencies as values (None without)."""
    if term.dense is None:
        return None
    bits, upto, count = term.dense
    return bytes(bits), upto, count


@needs_core
def test_checks_for_other_parts_or_groups_are_not_taken() -> None:
    """Checks started for an equal copy of the image (another object), or for a group
    count not the rows': stopped, the restore's own checks run; the same index."""
    state, rows = _rows(10)
    parts = _image(state)
    rebuilt = _loaded(BM25Scorer, rows, None)
    got = _state(BM25Scorer())
    prepared = _prepared(got, dict(parts))
    got.load(rows, parts, prepared)
    _assert_same(got, rebuilt)
    prepared = bm25_persist.Prepared(BM25Scorer().make_index(), parts)
    prepared.state.groups = (prepared.state.groups or 0) + 1  # (a header that lied, as ahead)
    prepared.step()
    assert prepared.take(parts, (prepared.state.groups or 0) - 1, prepared.state.pool) is None
    assert prepared.state.beside is None  # stopped
    _no_threads_left()


@needs_core
def test_a_prepared_dropped_or_stopped_leaves_no_thread() -> None:
    state, _ = _rows(11)
    parts = _image(state)
    for end, steps in itertools.product(("drop", "stop"), (0, 1, 2, 3, -1)):
        prepared = _prepared(_state(BM25Scorer()), parts, steps)
        assert isinstance(prepared, bm25_persist.Prepared)
        if end == "stop":
            prepared.stop()
            prepared.stop()  # idempotent
            assert prepared.step() is False
        del prepared
        _no_threads_left()
    # an image it cannot read: no thread, the restore's checks are left to refuse it
    for bad in ({"header": b"{"}, {**parts, "postings": b"\x00"}, {}):
        prepared = bm25_persist.Prepared(BM25Scorer().make_index(), bad)
        assert prepared.step() is False
        assert prepared.state.beside is None


# -- a file opened ----------------------------------------------------------------------


async def _bm25_file_state(path: Any) -> tuple[Any, bool]:
    async with open_memory(path=path, scorer=BM25Scorer()) as memory:
        assert memory._storage is not None
        return memory._state, memory._storage.image_fresh


@needs_core
@needs_c
def test_a_bm25_file_opens_from_its_image_with_the_threads_taken(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A BM25 file's open: the digest read from the store (one ``StoreDigest``) and the
    checks started while the rows were read (if the reader waited), taken; the state the
    rebuild's; a text changed behind actormem's back is refused with the
    same warnings and state with the knobs on and off; no thread is left."""
    _, rows = _rows(13)
    db = tmp_path / "m.db"

    async def write() -> None:
        async with open_memory(path=db, scorer=BM25Scorer()) as memory:
            for _, entry in rows:
                await memory.store(entry)

    trio.run(write)
    pristine = db.read_bytes()
    took: list[bool] = []
    real_take = bm25_persist.Prepared.take

    def take(self: Any, *args: Any) -> Any:
        got = real_take(self, *args)
        took.append(got is not None)
        return got

    states = []
    warned = []
    with pytest.MonkeyPatch.context() as mp:
        counted = _Counted(mp)
        mp.setattr(bm25_persist.Prepared, "take", take)
        for on in (True, False):
            for knob in ("_TEXTS_FROM_STORE", "_CHECKS_AHEAD"):
                mp.setattr(bm25_persist, knob, on)
            counted.made = 0
            took.clear()
            db.write_bytes(pristine)
            state, fresh = trio.run(_bm25_file_state, db)
            assert fresh
            assert counted.made == (1 if on else 0)
            # (prepared in the reader's waits for a chunk: a small file may have none)
            assert took in (([True], []) if on else ([],))
            states.append(state)
            db.write_bytes(pristine)
            change_first_text(db)
            (state, fresh), messages = with_warnings(caplog, trio.run, _bm25_file_state, db)
            assert not fresh
            assert sum("image was not used" in m for m in messages) == 1, messages
            warned.append(messages)
            states.append(state)
    assert warned[0] == warned[1]
    _assert_same(states[0], states[2])
    _assert_same(states[1], states[3])
    _no_threads_left()
