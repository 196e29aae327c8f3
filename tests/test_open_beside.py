"""Opening with work beside the load (issue #20 item 5, branch ``open11``).

``read_file`` runs ``quick_check`` and the index image's read in a thread while the rows
are read (``sqlite_format._CHECK_BESIDE``); the word-overlap restore hashes the texts'
digest in a thread and compares it last (``wordoverlap.persist._DIGEST_BESIDE``,
``persist.LateDigest``). Each side must give what the path before gave: the same
entries, image, index and state, the same error for a refused file or image, and no
thread left running after an error, a ``KeyboardInterrupt`` or a cancelled open.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
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
from actormem._index import imagehash as _hash
from actormem._index import persist
from actormem._index.images import ImageError, restore_index
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import Record
from actormem._storage import sqlite_format
from actormem._util import Beside
from tests.strategies import examples

from .test_index_image import _file_rows, _image, _live, _loaded, _messy, _mutations
from .test_open_fast import _assert_same, _rows

NAMES = ("actormem open check", "actormem digest")


def _no_threads_left() -> None:
    left = [t.name for t in threading.enumerate() if t.name in NAMES]
    assert not left, left


@pytest.fixture
def small_late(monkeypatch: pytest.MonkeyPatch) -> None:
    """``LateDigest`` uses its thread for any input, in blocks of a few bytes."""
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    monkeypatch.setattr(persist, "_LATE_BLOCK", 7)
    monkeypatch.setattr(persist, "_LATE_BLOCKS", 2)


# -- Beside ---------------------------------------------------------------------------


def test_beside_returns_and_raises() -> None:
    assert Beside(lambda a, b: a + b, 2, 3).result() == 5
    boom = Beside(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        boom.result()
    assert not boom.alive()


def test_beside_stop_interrupts_and_joins() -> None:
    go = threading.Event()
    seen: list[str] = []

    def wait() -> None:
        go.wait(10)
        seen.append("ended")

    beside = Beside(wait, interrupt=go.set)
    beside.stop()
    assert seen == ["ended"]
    assert not beside.alive()
    beside.stop()  # idempotent


def test_beside_keyboard_interrupt_while_joining(monkeypatch: pytest.MonkeyPatch) -> None:
    """A KeyboardInterrupt that strikes while waiting interrupts the work, waits for the
    thread, then is raised."""
    go = threading.Event()
    beside = Beside(lambda: go.wait(10), interrupt=go.set)
    join = beside._thread.join
    calls: list[int] = []

    def join_once_interrupted() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        join()

    monkeypatch.setattr(beside._thread, "join", join_once_interrupted)
    with pytest.raises(KeyboardInterrupt):
        beside.result()
    assert go.is_set()
    assert not beside.alive()
    assert len(calls) == 2


# -- LateDigest -----------------------------------------------------------------------


@pytest.mark.usefixtures("small_late")
@settings(max_examples=examples(60), deadline=None)
@given(
    texts=st.lists(st.text(max_size=30), max_size=40),
    extra=st.lists(st.text(max_size=10), max_size=5),
    as_tuple=st.booleans(),
)
def test_late_digest_equals_text_digest(texts: list[str], extra: list[str], as_tuple: bool) -> None:
    want = persist.text_digest(texts, extra)
    given_texts: Any = tuple(texts) if as_tuple else texts  # the Python feed
    assert persist.LateDigest(given_texts, extra).result() == want
    _no_threads_left()


def test_late_digest_large_blocks_and_below_the_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"text {i} " * (i % 13) + "\u2026" * (i % 3) for i in range(3000)]
    want = persist.text_digest(texts)
    assert persist.LateDigest(texts).result() == want  # below _LATE_MIN_TEXTS: no thread
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 1)
    for block in (1, 64, 1 << 20):
        monkeypatch.setattr(persist, "_LATE_BLOCK", block)
        assert persist.LateDigest(texts).result() == want
    # The surrogates a str may hold are hashed as text_digest hashes them.
    odd = ["a\ud800b", "", " ", "x"]
    assert persist.LateDigest(odd).result() == persist.text_digest(odd)
    _no_threads_left()


@pytest.mark.usefixtures("small_late")
@pytest.mark.parametrize("nogil", [True, False])
def test_late_digest_feed_error_stops_the_thread(
    nogil: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not nogil:  # the caller's feed (a build without the core's encoder)
        monkeypatch.setattr(persist, "_encoder", lambda: False)
    bad: Any = ["fine", "also fine", 3]  # not str: the Python feed's join raises
    with pytest.raises(TypeError):
        # the caller's feed raises (open11); with the core's digest (open18) the thread's
        # fallback to that feed does, and result() raises it
        persist.LateDigest(bad).result()
    _no_threads_left()


@pytest.mark.usefixtures("small_late")
def test_late_digest_stop_mid_way_and_a_failed_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    late = persist.LateDigest(["a long enough text"] * 20)
    late.stop()
    late.stop()
    _no_threads_left()

    class Broken:
        def update(self, data: Any) -> None:
            raise MemoryError("no room")

        def hexdigest(self) -> str:  # pragma: no cover
            return ""

    monkeypatch.setattr(_hash, "new128", Broken)
    monkeypatch.setattr(persist, "_encoder", lambda: False)  # the queue's path (hashlib's)
    late = persist.LateDigest(["some text"] * 50)  # the queue fills once the thread died
    with pytest.raises(MemoryError):
        late.result()
    _no_threads_left()


# -- the word-overlap restore ---------------------------------------------------------


def _both_sides(monkeypatch: pytest.MonkeyPatch, fn: Callable[[], Any]) -> tuple[Any, Any]:
    out = []
    for on in (False, True):
        monkeypatch.setattr(wo_persist, "_DIGEST_BESIDE", on)
        out.append(fn())
    _no_threads_left()
    return out[0], out[1]


@pytest.mark.usefixtures("small_late")
@settings(max_examples=examples(15), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 70), ops=st.integers(0, 40))
def test_restore_with_the_late_digest_equals_the_old_path(seed: int, n: int, ops: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        state = _messy(WordOverlapScorer, seed, n, ops)
        rows = _file_rows(state)
        parts = _image(state)
        old, new = _both_sides(mp, lambda: _loaded(WordOverlapScorer, rows, parts))
        _assert_same(old, new)
        _assert_same(new, _loaded(WordOverlapScorer, rows, None))


def _error_of(parts: dict[str, bytes], records: list[Record]) -> str:
    with pytest.raises(ImageError) as info:
        restore_index(WordOverlapScorer().make_index(), parts, records)
    return str(info.value)


@pytest.mark.usefixtures("small_late")
def test_refused_images_give_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _messy(WordOverlapScorer, 7, 60, 25)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    cases = list(_mutations(parts))
    # Other rows: only the digest differs; then the digest and a later check both fail
    # (the digest's error came first), and a field before the digest.
    other = [
        Record(attrs.evolve(r.entry, memory=r.entry.memory + "!"), r.seq, r.seq) for r in records
    ]
    ends = np.frombuffer(parts["post_ends"], "<i8").copy()
    ends[1] = ends[2] if len(ends) > 2 else ends[1]
    both = {**parts, "post_ends": ends.tobytes()}
    checks = [(name, bad, records) for name, bad in cases]
    checks += [("digest", parts, other), ("digest and a list", both, other)]
    checks += [("rows", parts, records[:-1])]
    for name, bad, recs in checks:
        old, new = _both_sides(monkeypatch, lambda b=bad, r=recs: _error_of(b, r))
        assert old == new, name
    assert _both_sides(monkeypatch, lambda: _error_of(both, other))[1].startswith("digest:")


@pytest.mark.usefixtures("small_late")
def test_an_interrupt_inside_the_restore_stops_the_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _messy(WordOverlapScorer, 3, 40, 10)
    records = _live(state)
    parts = _image(state)

    def interrupted(*args: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(wo_persist, "_restore_checked", interrupted)
    with pytest.raises(KeyboardInterrupt):
        restore_index(WordOverlapScorer().make_index(), parts, records)
    _no_threads_left()


# -- read_file ------------------------------------------------------------------------


async def _made(path: Path, n: int = 120) -> None:
    async with open_memory(path=path) as memory:
        for _, entry in _rows(5, n):
            await memory.store(entry)


def _read_both(monkeypatch: pytest.MonkeyPatch, path: Path) -> tuple[Any, Any]:
    def read() -> Any:
        try:
            return sqlite_format.read_file(str(path))
        except StorageError as exc:
            return ("error", str(exc))

    out = []
    for on in (False, True):
        monkeypatch.setattr(sqlite_format, "_CHECK_BESIDE", on)
        out.append(read())
    _no_threads_left()
    return out[0], out[1]


async def test_read_file_equals_the_one_connection_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    await _made(db)
    async with open_memory(path=db):  # closed cleanly: now with its image
        pass
    old, new = _read_both(monkeypatch, db)
    assert old[1] is not None
    assert old == new
    for c_rows in (False, True):  # the Python reader too
        monkeypatch.setattr(sqlite_format, "_C_ROWS", c_rows)
        assert _read_both(monkeypatch, db)[1] == old
    # The image's marker no longer matches: None on both sides (and one warning each).
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = 'x' WHERE key = ?", (sqlite_format.IMAGE_KEY,))
    conn.commit()
    conn.close()
    old, new = _read_both(monkeypatch, db)
    assert old[1] is None
    assert old == new


async def test_refused_files_give_the_same_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    await _made(db, 200)
    async with open_memory(path=db):
        pass
    pristine = db.read_bytes()
    page = int.from_bytes(pristine[16:18], "big")
    variants: dict[str, bytes] = {}
    data = bytearray(pristine)
    for start in range(page, len(data), page):  # every page after the first scribbled
        data[start + 8 : start + page - 8] = bytes(range(256)) * ((page - 16) // 256) + bytes(
            (page - 16) % 256
        )
    variants["scribbled"] = bytes(data)
    data = bytearray(pristine)
    data[-page // 2 : -page // 2 + 64] = b"\xee" * 64  # one page's cells
    variants["one page"] = bytes(data)
    variants["truncated"] = pristine[: len(pristine) // 2]
    for name, raw in variants.items():
        db.write_bytes(raw)
        old, new = _read_both(monkeypatch, db)
        assert old == new, name
    for statement in (
        # a row that does not decode, and the same id twice
        "UPDATE entries SET relevance = 7.5 WHERE seq = (SELECT MAX(seq) FROM entries)",
        "UPDATE entries SET id = (SELECT id FROM entries ORDER BY seq LIMIT 1)"
        " WHERE seq = (SELECT MAX(seq) FROM entries)",
    ):
        db.write_bytes(pristine)
        conn = sqlite3.connect(db)
        conn.execute(statement)
        conn.commit()
        conn.close()
        old, new = _read_both(monkeypatch, db)
        assert old[0] == "error", statement
        assert old == new, statement


def test_a_rows_error_waits_for_the_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows' reader fails while quick_check reports a problem: the check's error
    (the one it raised first on one connection); with a clean check, the rows' error."""
    db = tmp_path / "m.db"
    trio.run(_made, db, 30)

    def failing(*args: Any) -> Any:
        raise sqlite3.DatabaseError("database disk image is malformed")

    monkeypatch.setattr(sqlite_format, "_read_entries", failing)
    for on in (False, True):
        monkeypatch.setattr(sqlite_format, "_CHECK_BESIDE", on)
        with pytest.raises(StorageError, match="malformed"):
            sqlite_format.read_file(str(db))

    def bad_check(path: str, conn: sqlite3.Connection) -> None:
        raise StorageError(path, "corrupted: checked")

    monkeypatch.setattr(sqlite_format, "_quick_check", bad_check)
    for on in (False, True):
        monkeypatch.setattr(sqlite_format, "_CHECK_BESIDE", on)
        with pytest.raises(StorageError, match="corrupted: checked"):
            sqlite_format.read_file(str(db))
    _no_threads_left()


def test_a_keyboard_interrupt_in_the_read_stops_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "m.db"
    trio.run(_made, db, 30)
    started = threading.Event()
    real = sqlite_format._checks_beside

    def slow_check(*args: Any) -> Any:
        started.set()
        return real(*args)

    def interrupted(*args: Any) -> Any:
        started.wait(5)
        raise KeyboardInterrupt

    monkeypatch.setattr(sqlite_format, "_checks_beside", slow_check)
    monkeypatch.setattr(sqlite_format, "_read_entries", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sqlite_format.read_file(str(db))
    _no_threads_left()


async def test_a_cancelled_open_leaves_no_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The open is cancelled while its worker thread reads the rows: the read, its
    check and the digest all end (the worker is not abandoned), the file is closed and
    opens again with its image."""
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    db = tmp_path / "m.db"
    await _made(db)
    async with open_memory(path=db) as memory:
        count = len(memory)
    real = sqlite_format._read_entries
    with trio.CancelScope() as scope:

        def cancelled_meanwhile(*args: Any) -> Any:
            trio.from_thread.run_sync(scope.cancel)
            return real(*args)

        monkeypatch.setattr(sqlite_format, "_read_entries", cancelled_meanwhile)
        async with open_memory(path=db):
            pass  # pragma: no cover
    assert scope.cancelled_caught
    monkeypatch.setattr(sqlite_format, "_read_entries", real)
    _no_threads_left()
    with caplog.at_level(logging.WARNING, logger="actormem"):
        async with open_memory(path=db) as memory:  # the file still opens, image and all
            assert memory._storage is not None
            assert memory._storage.image_fresh
            assert len(memory) == count
    assert not caplog.records
    _no_threads_left()
