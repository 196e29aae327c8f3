"""Branch open25: the restore's digest thread started at the top of the bulk load
(issue #20, item 5).

``wordoverlap.persist._DIGEST_AT_LOAD``: when a state loads rows in bulk with an index
image, the texts' digest thread (``LateDigest(..., distinct=True, groups=True)``: the
group numbers, then the digest) starts from the rows' own texts (the core's
``rows_texts``) before the records are made, and the restore takes it over when the
records' texts equal the rows'. With the knob on and off: the same restored state as a
rebuild; a stale, foreign, corrupt or truncated image refused (the index rebuilt, one
warning) with the same message; no thread left behind on any path; ``rows_texts``
against the plain Python reading of the rows.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer, WordOverlapScorer
from actormem._index import images, kernels, persist
from actormem._index.images import ImageError, restore_index
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import Record
from tests.strategies import examples

from .setups import messy_repeats
from .test_index_image import _file_rows, _image, _live, _loaded, _messy, _state
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "rows_texts") or not hasattr(wo, "texts_groups"),
    reason="the word overlap core is not built",
)

KNOBS = (
    (wo_persist, "_DIGEST_AT_LOAD"),
    (wo_persist, "_GIDS_BESIDE"),
    (wo_persist, "_DIGEST_EARLY"),
)


def _set(mp: pytest.MonkeyPatch, on: tuple[bool, ...]) -> None:
    for (mod, name), value in zip(KNOBS, on, strict=True):
        mp.setattr(mod, name, value)


class _Counted:
    """Counts the digests started, and by whom (``start_early`` or the restore)."""

    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.made = 0
        self.early_made = 0
        real = persist.LateDigest
        real_start = wo_persist.start_early
        outer = self

        class Counting(real):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                outer.made += 1
                super().__init__(*args, **kwargs)

        def start(*args: Any) -> Any:
            got = real_start(*args)
            outer.early_made += got is not None
            return got

        mp.setattr(persist, "LateDigest", Counting)
        mp.setattr(wo_persist, "start_early", start)


def _rows_texts(rows: Any) -> Any:
    fn = ccore.rows_texts()
    assert fn is not None
    return fn(rows)


# -- rows_texts --------------------------------------------------------------------------


@needs_c
@settings(max_examples=examples(30), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 60))
def test_rows_texts_reads_each_rows_text_in_order(seed: int, n: int) -> None:
    state = _messy(WordOverlapScorer, seed, max(n, 1), n // 3)
    rows = _file_rows(state)
    got = _rows_texts(rows)
    assert type(got) is tuple
    assert got == tuple(e.memory for _, e in rows)
    assert all(a is e.memory for a, (_, e) in zip(got, rows, strict=True))

    class Sub(list):  # type: ignore[type-arg]  # the reader's FoldedRows is one
        pass

    assert _rows_texts(Sub(rows)) == got


@needs_c
def test_rows_texts_refuses_what_it_cannot_read() -> None:
    rows = _file_rows(_messy(WordOverlapScorer, 3, 10, 0))
    with pytest.raises(TypeError):
        _rows_texts(tuple(rows))
    with pytest.raises(TypeError):
        _rows_texts(None)

    class Text(str):
        __slots__ = ()

    sub = attrs.evolve(rows[0][1])
    object.__setattr__(sub, "memory", Text("sub"))  # (the entry's check refuses it)
    bad_rows: list[Any] = [
        [*rows, [7, rows[0][1]]],  # a row not a tuple
        [*rows, (7, rows[0][1], None)],  # a tuple of three
        [(rows[0][0],)],  # a tuple of one
        [*rows, (7, "not an entry")],
        [*rows, (7, sub)],  # a text not an exact str
    ]
    for bad in bad_rows:
        assert _rows_texts(bad) is None
    assert _rows_texts([]) == ()


@needs_c
def test_restore_columns_tells_whether_each_text_is_the_expected_object() -> None:
    state = _messy(WordOverlapScorer, 6, 40, 10)
    records = _live(state)
    plain = ccore.restore_columns()
    assert plain is not None
    four = plain(records)
    own = tuple(r.entry.memory for r in records)
    got = plain(records, own)
    assert got[:4] == four
    assert got[4] is True
    assert plain(records, None) == four
    copies = tuple("".join(list(t)) + "" for t in own)  # equal, not the same objects
    assert all(a == b for a, b in zip(own, copies, strict=True))
    # compared by value (the texts are the entry store's bytes): the expected objects
    # themselves are handed back
    with_copies = plain(records, copies)
    assert with_copies[4] is True
    assert all(a is b for a, b in zip(with_copies[0], copies, strict=True))
    for at in (0, len(own) // 2, len(own) - 1):  # one text another object
        other = (*own[:at], "".join(list(own[at])) + "x", *own[at + 1 :])
        assert plain(records, other)[4] is False
    assert plain(records, own[:-1])[4] is False  # fewer
    assert plain(records, (*own, "x"))[4] is False  # more
    assert plain([], ())[4] is True
    with pytest.raises(TypeError):
        plain(records, list(own))
    with pytest.raises(TypeError):
        plain(records, own, None)


# -- the load ----------------------------------------------------------------------------


@needs_c
@settings(max_examples=examples(20), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(1, 80),
    ops=st.integers(0, 40),
    dups=st.booleans(),
)
def test_each_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    state, rows = messy_repeats(seed, n, ops, dups, copies=True)
    if not rows:
        return
    parts = _image(state)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)  # the digest's thread for any size
        counted = _Counted(mp)
        for on in itertools.product((True, False), repeat=len(KNOBS)):
            _set(mp, on)
            counted.made = counted.early_made = 0
            restored = _loaded(WordOverlapScorer, rows, parts)
            _assert_same(restored, rebuilt)
            # the early path: one digest, started by the load, which the restore took
            assert counted.early_made == (1 if all(on) else 0)
            assert counted.made == 1
    _no_threads_left()


@needs_c
def test_the_load_starts_the_digest_and_the_restore_takes_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _messy(WordOverlapScorer, 11, 60, 10)
    rows = _file_rows(state)
    parts = _image(state)
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    counted = _Counted(monkeypatch)
    taken: list[bool] = []
    real_restore = wo_persist.restore

    def spy(*args: Any) -> Any:
        got = real_restore(*args)
        early = args[4] if len(args) > 4 else None
        taken.append(early is not None and early.taken)
        return got

    monkeypatch.setattr(wo_persist, "restore", spy)
    restored = _loaded(WordOverlapScorer, rows, parts)
    assert (counted.early_made, counted.made, taken) == (1, 1, [True])
    monkeypatch.setattr(wo_persist, "_DIGEST_AT_LOAD", False)
    again = _loaded(WordOverlapScorer, rows, parts)
    assert (counted.early_made, counted.made, taken) == (1, 2, [True, False])
    _assert_same(restored, again)
    _no_threads_left()


@needs_c
def test_an_early_digest_for_other_texts_is_stopped_and_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    state = _messy(WordOverlapScorer, 4, 50, 12)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    other = [(s, attrs.evolve(e, memory=e.memory + " x")) for s, e in rows]
    for early_rows in (other, rows[:-1], rows[1:]):
        early = wo_persist.start_early(WordOverlapScorer().make_index(), early_rows)
        assert early is not None
        got = restore_index(WordOverlapScorer().make_index(), parts, records, None, early)
        assert not early.taken
        want = restore_index(WordOverlapScorer().make_index(), parts, records)
        assert got._e.n == want._e.n  # type: ignore[attr-defined]
        # stale texts are still refused when the early digest was of the good texts
        stale = [
            Record(attrs.evolve(r.entry, memory=r.entry.memory + "!"), r.seq, r.seq)
            for r in records
        ]
        good = wo_persist.start_early(WordOverlapScorer().make_index(), rows)
        with pytest.raises(ImageError, match="digest"):
            restore_index(WordOverlapScorer().make_index(), parts, stale, None, good)
        assert good is not None
        assert not good.taken
    # an early digest handed to another index kind is stopped
    early = wo_persist.start_early(WordOverlapScorer().make_index(), rows)
    bm25 = _state(BM25Scorer())
    assert images.start_restore(bm25.index, rows) is None
    with pytest.raises(ImageError):
        restore_index(BM25Scorer().make_index(), parts, records, None, early)
    _no_threads_left()


def _corrupt(parts: dict[str, bytes], how: str) -> dict[str, bytes]:
    bad = dict(parts)
    if how == "truncated":
        bad["postings"] = bad["postings"][: len(bad["postings"]) // 2]
    elif how == "garbled":  # (bytes flipped within the arrays: the file's marker's to find)
        bad["header"] = bad["header"][:-7] + b"\xff\x00garb"
    elif how == "digest":
        head = bad["header"].decode()
        at = head.index('"digest": "') + len('"digest": "')
        flip = "0" if head[at] != "0" else "1"
        bad["header"] = (head[:at] + flip + head[at + 1 :]).encode()
    elif how == "missing":
        del bad["tokens"]
    return bad


@needs_c
@pytest.mark.parametrize("how", ["stale", "foreign", "truncated", "garbled", "digest", "missing"])
def test_a_bad_image_is_refused_and_rebuilt_with_the_knob_on_and_off(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = _messy(WordOverlapScorer, 21, 70, 20)
    rows = _file_rows(state)
    parts = _image(state)
    if how == "stale":  # rows changed after the image was written
        rows = [(s, attrs.evolve(e, memory=e.memory + "\u00e9")) for s, e in rows]
    elif how == "foreign":  # another state's image, for the same seqs
        other_rows = [(s, attrs.evolve(e, memory=e.memory + " z")) for s, e in rows]
        parts = _image(_loaded(WordOverlapScorer, other_rows, None))
    else:
        parts = _corrupt(parts, how)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    messages = set()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        for on in (True, False):
            mp.setattr(wo_persist, "_DIGEST_AT_LOAD", on)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="actormem"):
                got = _loaded(WordOverlapScorer, rows, parts, used=False)
            said = [r.getMessage() for r in caplog.records]
            lines = [line for line in said if "image was not used" in line]
            assert len(lines) == 1, lines
            assert not any(r.exc_info for r in caplog.records)  # an ImageError, not a bug
            messages.add(lines[0])
            _assert_same(got, rebuilt)
    assert len(messages) == 1, messages
    _no_threads_left()


@needs_c
def test_a_failed_bulk_load_leaves_no_digest_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    state = _messy(WordOverlapScorer, 8, 40, 0)
    rows = _file_rows(state)
    parts = _image(state)
    started: list[Any] = []
    real_start = wo_persist.start_early

    def start(*args: Any) -> Any:
        got = real_start(*args)
        started.append(got)
        return got

    monkeypatch.setattr(wo_persist, "start_early", start)
    bad = [*rows, (rows[-1][0], attrs.evolve(rows[0][1], id=rows[0][1].id))]  # seq not above
    fresh = _state(WordOverlapScorer())
    with pytest.raises(ValueError, match="seq"):
        fresh.load(bad, parts)
    assert len(started) == 1
    assert started[0] is not None
    assert not started[0].taken
    _no_threads_left()


@needs_c
def test_start_early_gives_none_when_it_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _file_rows(_messy(WordOverlapScorer, 2, 30, 0))
    index = WordOverlapScorer().make_index()
    assert wo_persist.start_early(index, rows) is None  # fewer than _LATE_MIN_TEXTS
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    early = wo_persist.start_early(index, rows)
    assert early is not None
    early.stop()
    early.stop()  # idempotent
    assert wo_persist.start_early(BM25Scorer().make_index(), rows) is None
    assert wo_persist.start_early(index, [*rows, (99, "x")]) is None  # a row not plain
    for name in ("_DIGEST_AT_LOAD", "_GIDS_BESIDE", "_DIGEST_EARLY", "_DIGEST_BESIDE"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(wo_persist, name, False)
            assert wo_persist.start_early(index, rows) is None
    _no_threads_left()
