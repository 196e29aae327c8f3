"""Branch open15: the word-overlap image's row-free part prepared while the rows are read.

``wordoverlap.persist.Prepared`` (the tokens' and posting lists' checks, the posting
dict and the tokens' vocabulary, in steps), ``read_file``'s ``prepare`` (the image read
before ``quick_check`` and stepped through in the compiled reader's ``idle``) and the
open that uses both: the same state, the same refusals and errors, on both sides of
``sqlite_format._PREPARE_WHILE_READING`` and ``wordoverlap.persist._PREPARE_AHEAD``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer, open_memory
from actormem._errors import StorageError
from actormem._index.images import ImageError, prepare_index, restore_index
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import Record
from actormem._storage import sqlite_format
from tests.strategies import examples

from .setups import change_file, change_first_text, stale_opens_alike, state_of, with_warnings
from .test_index_image import _file_rows, _image, _live, _loaded, _messy, _mutations, _state
from .test_open13_split import _file, _texts, _threads, needs_reader
from .test_open_beside import _made, _no_threads_left
from .test_open_fast import _assert_same


def _stepped(parts: dict[str, bytes], steps: int | None) -> Any:
    """A preparation of ``parts`` for a new index, ``steps`` steps run (None: all)."""
    prep = prepare_index(WordOverlapScorer().make_index(), parts)
    assert isinstance(prep, wo_persist.Prepared)
    while (steps is None or steps > 0) and prep.step():
        steps = None if steps is None else steps - 1
    return prep


def _loaded_ahead(rows: list[Any], parts: dict[str, bytes], steps: int | None) -> Any:
    state = _state(WordOverlapScorer())
    prep = state.prepare_image(parts)
    while (steps is None or steps > 0) and prep.step():
        steps = None if steps is None else steps - 1
    state.load(rows, parts, prep)
    assert state.index is prep.index  # the prepared index was the one filled
    return state


@settings(max_examples=examples(15), deadline=None)
@given(
    seed=st.integers(0, 2**32),
    n=st.integers(0, 70),
    ops=st.integers(0, 40),
    steps=st.sampled_from([0, 1, 2, 3, None]),
)
def test_a_prepared_restore_equals_the_inline_one(
    seed: int, n: int, ops: int, steps: int | None
) -> None:
    state = _messy(WordOverlapScorer, seed, n, ops)
    rows = _file_rows(state)
    if not rows:
        return
    parts = _image(state)
    inline = _loaded(WordOverlapScorer, rows, parts)
    ahead = _loaded_ahead(rows, parts, steps)
    _assert_same(inline, ahead)
    _assert_same(ahead, _loaded(WordOverlapScorer, rows, None))
    with pytest.MonkeyPatch.context() as mp:  # the knob off: no preparation at all
        mp.setattr(wo_persist, "_PREPARE_AHEAD", False)
        assert prepare_index(WordOverlapScorer().make_index(), parts) is None
        _assert_same(inline, _loaded(WordOverlapScorer, rows, parts))


def _error(parts: dict[str, bytes], records: list[Record], prep: Any = None) -> str:
    with pytest.raises(ImageError) as info:
        restore_index(WordOverlapScorer().make_index(), parts, records, prep)
    return str(info.value)


def test_refused_images_give_the_same_error_when_prepared() -> None:
    state = _messy(WordOverlapScorer, 11, 60, 25)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    other = [
        Record(attrs.evolve(r.entry, memory=r.entry.memory + "!"), r.seq, r.seq) for r in records
    ]
    ends = np.frombuffer(parts["post_ends"], "<i8").copy()
    ends[1] = ends[2] if len(ends) > 2 else ends[1]
    both = {**parts, "post_ends": ends.tobytes()}
    checks = [(name, bad, records) for name, bad in _mutations(parts)]
    checks += [("digest", parts, other), ("digest and a list", both, other)]
    checks += [("rows", parts, records[:-1]), ("a list", both, records)]
    assert len(checks) > 20
    for name, bad, recs in checks:
        inline = _error(bad, recs)
        for steps in (0, 1, 2, None):
            assert _error(bad, recs, _stepped(bad, steps)) == inline, (name, steps)
    # One check failed ahead (the lists): its error where the inline path raises it.
    prep = _stepped(both, None)
    assert prep.error is not None
    assert _error(both, records, prep) == _error(both, records)
    _no_threads_left()


def test_a_preparation_of_other_parts_or_groups_is_not_used() -> None:
    state = _messy(WordOverlapScorer, 5, 50, 10)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    for prep in (
        _stepped(dict(parts), None),  # equal parts, another object
        wo_persist.Prepared(WordOverlapScorer().make_index(), parts, 10**6),  # other groups
        wo_persist.Prepared(WordOverlapScorer().make_index(), parts, None),
    ):
        fresh = WordOverlapScorer().make_index()
        restored = restore_index(fresh, parts, records, prep)
        assert restored is fresh
    # a group count that is not an int ends the steps at once; restore never uses it
    bad = wo_persist.Prepared(WordOverlapScorer().make_index(), parts, None)
    assert not bad.step()
    assert isinstance(bad.error, ImageError)
    # a header that is not JSON: prepared without a count (never used)
    assert wo_persist.prepare(WordOverlapScorer().make_index(), {"header": b"{"}) is not None


def test_steps_never_raise_an_exception_and_keep_it(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _messy(WordOverlapScorer, 2, 30, 5)
    parts = _image(state)
    records = _live(state)

    def broken(*args: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(wo_persist.persist, "check_lists_steps", broken)  # (open27: in steps)
    prep = _stepped(parts, None)
    assert isinstance(prep.error, RuntimeError)
    with pytest.raises(RuntimeError, match="a bug"):
        restore_index(WordOverlapScorer().make_index(), parts, records, prep)


# -- the reader's idle ----------------------------------------------------------------


@needs_reader
def test_the_reader_calls_idle_and_gives_the_same_entries(tmp_path: Path) -> None:
    uri = _file(tmp_path / "c.db", _texts(2300))
    plain = sqlite_format._read_rows_c(uri)
    assert plain is not None
    assert len(plain) == 2300
    calls = []

    def idle() -> bool:
        calls.append(1)
        return len(calls) % 3 != 0  # some work, then nothing for now

    for _ in range(20):  # the caller waits for a chunk at least once (its first, mostly)
        read = sqlite_format._read_rows_c(uri, idle=idle)
        assert read == plain
        if calls:
            break
    assert calls
    assert _threads() == 0
    # always more work: the read still ends, with the same entries
    assert sqlite_format._read_rows_c(uri, idle=lambda: True) == plain
    assert sqlite_format._read_rows_c(uri, idle=lambda: 0) == plain


@needs_reader
def test_an_idle_that_raises_ends_the_read(tmp_path: Path) -> None:
    uri = _file(tmp_path / "c.db", _texts(2300))
    seen = []

    def interrupted() -> bool:
        seen.append(1)
        raise KeyboardInterrupt

    for _ in range(20):
        try:
            sqlite_format._read_rows_c(uri, idle=interrupted)
        except KeyboardInterrupt:
            break
    assert seen
    assert _threads() == 0

    class Falsy:
        def __bool__(self) -> bool:
            raise ValueError("no truth")

    for _ in range(20):
        try:
            sqlite_format._read_rows_c(uri, idle=Falsy)
        except ValueError:
            break
    else:
        pytest.fail("idle's truth was never asked")
    assert _threads() == 0


@needs_reader
def test_a_bad_idle_is_refused(tmp_path: Path) -> None:
    uri = _file(tmp_path / "c.db", _texts(10))
    with pytest.raises(TypeError):
        sqlite_format._read_rows_c(uri, idle=5)  # type: ignore[arg-type]
    from .test_decode_c import _reader_args

    assert sqlite_format._crows is not None
    with pytest.raises(TypeError, match="idle"):
        sqlite_format._crows.read_entries(
            uri, sqlite_format.SELECT_ENTRIES, *_reader_args(), True, True, None, None, 5
        )
    with pytest.raises(TypeError):
        sqlite_format._crows.read_entries(
            uri, sqlite_format.SELECT_ENTRIES, *_reader_args(), True, True, None, None, None, 1
        )
    assert _threads() == 0


# -- read_file and the open -----------------------------------------------------------


class _Counting:
    """A ``prepare`` that records its image and how many steps ran."""

    def __init__(self, fail: BaseException | None = None) -> None:
        self.images: list[dict[str, bytes]] = []
        self.steps = 0
        self.fail = fail

    def __call__(self, parts: dict[str, bytes]) -> Any:
        self.images.append(parts)
        return self

    def step(self) -> bool:
        self.steps += 1
        if self.fail is not None:
            raise self.fail
        return self.steps < 3


async def _imaged(path: Path, n: int = 600) -> None:
    await _made(path, n)
    async with open_memory(path=path):  # closed cleanly: now with its image
        pass


def test_read_file_hands_the_image_to_prepare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db)
    plain = sqlite_format.read_file(str(db))
    assert plain[1] is not None
    prep = _Counting()
    got = sqlite_format.read_file(str(db), prepare=prep)
    assert got == plain
    assert len(prep.images) <= 1
    assert all(i == plain[1] for i in prep.images)
    if prep.images:
        assert got[1] is prep.images[0]  # the very image returned
    monkeypatch.setattr(sqlite_format, "_PREPARE_WHILE_READING", False)
    off = _Counting()
    assert sqlite_format.read_file(str(db), prepare=off) == plain
    assert off.images == []
    monkeypatch.setattr(sqlite_format, "_PREPARE_WHILE_READING", True)
    # a prepare that declines (None) is asked once, and nothing else changes
    asked: list[int] = []
    assert sqlite_format.read_file(str(db), prepare=lambda p: asked.append(1)) == plain
    assert len(asked) <= 1
    _no_threads_left()
    assert _threads() == 0


def test_an_interrupt_in_a_prepared_step_leaves_no_thread(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 3000)
    for _ in range(10):
        prep = _Counting(KeyboardInterrupt())
        try:
            sqlite_format.read_file(str(db), prepare=prep)
        except KeyboardInterrupt:
            break
    _no_threads_left()
    assert _threads() == 0
    assert sqlite_format.read_file(str(db))[1] is not None  # the file is unharmed


def _read_or_error(path: Path, prepare: Any) -> Any:
    try:
        return sqlite_format.read_file(str(path), prepare=prepare)
    except StorageError as exc:
        return ("error", str(exc))


def test_a_refused_file_gives_the_same_error_and_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 200)
    pristine = db.read_bytes()
    page = int.from_bytes(pristine[16:18], "big")
    data = bytearray(pristine)
    data[-page // 2 : -page // 2 + 64] = b"\xee" * 64  # one page's cells
    variants = {"one page": bytes(data), "truncated": pristine[: len(pristine) // 2]}
    for name, raw in variants.items():
        db.write_bytes(raw)
        results = []
        for prepare in (None, _Counting()):
            results.append(with_warnings(caplog, _read_or_error, db, prepare))
        assert results[0] == results[1], name
    # A marker that no longer matches: None and one warning, on both sides.
    db.write_bytes(pristine)
    change_file(db, "UPDATE meta SET value = 'x' WHERE key = ?", (sqlite_format.IMAGE_KEY,))
    results = []
    for prepare in (None, _Counting()):
        read, warned = with_warnings(
            caplog,
            lambda: sqlite_format.read_file(str(db), prepare=prepare),  # noqa: B023
        )
        results.append((read, warned))
        assert read[1] is None
        assert prepare is None or prepare.images == []
    assert results[0] == results[1]
    assert len(results[0][1]) == 1
    _no_threads_left()


def test_an_open_with_the_preparation_equals_one_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "m.db"
    trio.run(_imaged, db, 1500)
    pristine = db.read_bytes()
    used: list[Any] = []
    real = wo_persist.restore

    def spy(index: Any, parts: Any, records: Any, prepared: Any = None, *rest: Any) -> Any:
        used.append(prepared)
        return real(index, parts, records, prepared, *rest)

    monkeypatch.setattr(wo_persist, "restore", spy)
    states = []
    for on in (False, True):
        db.write_bytes(pristine)
        monkeypatch.setattr(sqlite_format, "_PREPARE_WHILE_READING", on)
        monkeypatch.setattr(wo_persist, "_PREPARE_AHEAD", on)
        state, fresh = trio.run(state_of, db)
        assert fresh
        states.append(state)
    assert used[0] is None
    # prepared while the rows were read (None only if the rows were all read first)
    assert used[1] is None or isinstance(used[1], wo_persist.Prepared)
    _assert_same(states[0], states[1])

    # A stale image (a row's text changed behind actormem's back, the marker kept): the
    # same warning and a rebuilt index, on both sides.
    def set_on(on: bool) -> None:
        monkeypatch.setattr(sqlite_format, "_PREPARE_WHILE_READING", on)
        monkeypatch.setattr(wo_persist, "_PREPARE_AHEAD", on)

    stale_opens_alike(db, pristine, caplog, set_on, change_first_text)
    assert _threads() == 0
