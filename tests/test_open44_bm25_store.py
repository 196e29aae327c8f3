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
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import attrs
import pytest

from actormem import BM25Scorer, MemoryEntry, WordOverlapScorer
from actormem._index import entrycols, images, kernels, persist
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.images import ImageError

from .test_index_image import _image, _live, _loaded, _mutations
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
    return terms, index._n, index._total, list(index._changes.groups)


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
def test_stale_foreign_and_corrupt_images_are_refused_the_same_with_the_knob_on_and_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
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
        ("foreign", foreign, rows),
        ("digest", flipped, rows),
    ]
    assert len(variants) > 15
    with pytest.MonkeyPatch.context() as mp:
        for name, bad, these in variants:
            rebuilt = _loaded(BM25Scorer, these, None)
            messages = set()
            for on, hashed in itertools.product((True, False), repeat=2):
                mp.setattr(bm25_persist, "_TEXTS_FROM_STORE", on)
                caplog.clear()
                store_rows = _store_rows(these, hashed)
                with caplog.at_level(logging.WARNING, logger="actormem"):
                    got = _loaded(BM25Scorer, store_rows, bad, used=False)
                lines = [
                    r.getMessage() for r in caplog.records if "image was not used" in r.getMessage()
                ]
                assert len(lines) == 1, (name, lines)
                assert not any(r.exc_info for r in caplog.records), name
                messages.add(lines[0])
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
