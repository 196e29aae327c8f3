"""The index image kept beside the rows (``actormem._index.persist``, docs/durability.md).

A state whose index was restored from an image must equal one rebuilt from the same rows
(records, orders, retrieve results and scores, ``_check()``), for both scorers, whatever
operations made the index that wrote the image. An image that does not describe the rows
(stale: rows changed after it was written; foreign: another scorer or tokenizer; corrupt
or hostile bytes) is refused with a log line and the index rebuilt; a hostile image that
passes the checks never makes a retrieve fail. A kill -9 while the image is written leaves
a file that opens, with the image either used or refused.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actormem import BM25Scorer, MemoryEntry, Tokenizer, WordOverlapScorer, open_memory
from actormem._engine.snapshot import run_retrieve
from actormem._engine.state import DEFAULT_HALF_LIFE, MemoryState
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import persist as bm25_persist
from actormem._index.images import ImageError, dump_index, restore_index
from actormem._index.scoring import Scorer
from actormem._index.wordoverlap import knobs
from actormem._record import NEVER, Record
from actormem._storage.sqlite import Batch, Durability, SqliteStore
from actormem._storage.sqlite_format import (
    CREATE_SCHEMA_V3,
    IMAGE_KEY,
    INSERT_ENTRY,
    encode_record,
    image_marker,
    read_validated,
)

from .strategies import examples
from .test_open_fast import QUERIES, T0, _assert_same, _rows

SCORERS: list[Callable[[], Scorer]] = [WordOverlapScorer, BM25Scorer]


def _state(scorer: Scorer) -> MemoryState:
    return MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=scorer)


def _live(state: MemoryState) -> list[Record]:
    return sorted((r for r in state._by_id.values() if r.died == NEVER), key=lambda r: r.seq)


def _file_rows(state: MemoryState) -> list[tuple[int, MemoryEntry]]:
    view = state.view()
    return [(r.seq, view.entry(r)) for r in view.records()]


def _messy(make: Callable[[], Scorer], seed: int, n: int, ops: int) -> MemoryState:
    """A state after loading, upserts (same key: a new text under an old seq), deletes,
    stores and vacuums: an index with dead groups, renumberings, compactions."""
    state = _state(make())
    rows = _rows(seed, n)
    state.load(rows)
    extra = _rows(seed + 1, ops)
    for i, (_, entry) in enumerate(extra):
        live = _live(state)
        if live and i % 3 == 0:
            state.delete(live[(seed + i) % len(live)].entry.id)
        elif live and i % 3 == 1:
            old = live[(seed * 7 + i) % len(live)].entry
            if old.key is not None:  # an upsert: the old seq, another text
                entry = attrs.evolve(entry, namespace=old.namespace, key=old.key)
            state.store(entry, T0)
        else:
            state.store(entry, T0)
        state.publish()
        state.vacuum(state.published)
    return state


def _image(state: MemoryState) -> dict[str, bytes]:
    parts = dump_index(state.index, _live(state))
    assert parts is not None
    return parts


def _loaded(
    make: Callable[[], Scorer],
    rows: list[tuple[int, MemoryEntry]],
    image: Any,
    used: bool | None = None,
) -> MemoryState:
    """A state loaded from ``rows`` with ``image``, which it used iff ``used`` (None:
    iff one is given)."""
    state = _state(make())
    fresh = state.index
    state.load(rows, image)
    assert (state.index is not fresh) == (image is not None if used is None else used)
    return state


@pytest.fixture
def small_renumber(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(knobs, "_RENUMBER_MIN", 4)
    monkeypatch.setattr(bm25_persist, "_CHUNK", 5)  # BM25's checks in many chunks


@pytest.mark.usefixtures("small_renumber")
@pytest.mark.parametrize("make", SCORERS)
@settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 80), ops=st.integers(0, 60))
def test_restored_equals_rebuilt(make: Callable[[], Scorer], seed: int, n: int, ops: int) -> None:
    state = _messy(make, seed, n, ops)
    state._check()
    rows = _file_rows(state)
    restored = _loaded(make, rows, _image(state))
    rebuilt = _loaded(make, rows, None)
    _assert_same(restored, rebuilt)
    # Writes after the restore keep both equal (the restored structures are live ones).
    for _, entry in _rows(seed + 2, 20):
        restored.store(entry, T0)
        rebuilt.store(entry, T0)
    for rec in _live(restored)[::3]:
        restored.delete(rec.entry.id)
        rebuilt.delete(rec.entry.id)
    for s in (restored, rebuilt):
        s.publish()
        s.vacuum(s.published)
    _assert_same(restored, rebuilt)


@pytest.mark.parametrize("seed", range(4))
def test_bm25_wide_term_numbers(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Past ``_NARROW`` terms a group's packed terms are int64 (typecode ``q``), in the
    index and in the image."""
    monkeypatch.setattr(bm25_knobs, "_NARROW", 8)
    state = _messy(BM25Scorer, seed, 60, 30)
    rows = _file_rows(state)
    parts = _image(state)
    assert json.loads(parts["header"])["arrays"]["group_terms"][0] == "<i8"
    restored = _loaded(BM25Scorer, rows, parts)
    index = restored.index
    table = index._table  # type: ignore[attr-defined]
    assert all(index._terms_at(n).typecode == "q" for n, g in enumerate(table) if g is not None)  # type: ignore[attr-defined]
    _assert_same(restored, _loaded(BM25Scorer, rows, None))


@pytest.mark.parametrize("make", SCORERS)
def test_an_image_for_other_rows_is_refused(make: Callable[[], Scorer]) -> None:
    state = _messy(make, 11, 60, 30)
    rows = _file_rows(state)
    parts = _image(state)
    seq, entry = rows[5]
    variants = {
        "a text changed": rows[:5]
        + [(seq, attrs.evolve(entry, memory=entry.memory + " more"))]
        + rows[6:],
        "a row removed": rows[:5] + rows[6:],
        "a row added": [*rows, (rows[-1][0] + 1, attrs.evolve(entry, id=uuid.uuid4()))],
        "a seq changed": rows[:-1] + [(rows[-1][0] + 5, rows[-1][1])],
    }
    if make is BM25Scorer:
        variants["a tag changed"] = (
            rows[:5] + [(seq, attrs.evolve(entry, tags=(*entry.tags, "new")))] + rows[6:]
        )
    for changed in variants.values():
        recs = [Record(e, s, s) for s, e in changed]
        with pytest.raises(ImageError):
            restore_index(make().make_index(), parts, recs)
        # A refused image still loads a correct state (the fallback adds every record).
        _assert_same(_loaded(make, changed, parts, used=False), _loaded(make, changed, None))


def test_a_foreign_image_is_refused() -> None:
    rows = _rows(3, 50)
    wo = _state(WordOverlapScorer())
    wo.load(rows)
    bm = _state(BM25Scorer())
    bm.load(rows)
    for parts, make in ((_image(wo), BM25Scorer), (_image(bm), WordOverlapScorer)):
        with pytest.raises(ImageError, match="kind"):
            restore_index(make().make_index(), parts, _live(wo))
    stop = BM25Scorer(tokenizer=Tokenizer(stopwords={"apple"}))
    with pytest.raises(ImageError, match="params"):
        restore_index(stop.make_index(), _image(bm), _live(bm))
    # Another PyStemmer release may stem differently: its image is refused.
    pytest.importorskip("Stemmer")
    stem = _state(BM25Scorer(tokenizer=Tokenizer(stemmer="english")))
    stem.load(rows)
    stemmed = _image(stem)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bm25_persist, "_stemmer_version", lambda: "0.0-other")
        with pytest.raises(ImageError, match="params"):
            restore_index(
                BM25Scorer(tokenizer=Tokenizer(stemmer="english")).make_index(),
                stemmed,
                _live(stem),
            )
    # k1 and b do not shape the index: an image made with others is used.
    other = BM25Scorer(k1=0.9, b=0.4)
    restore_index(other.make_index(), _image(bm), _live(bm))
    # A custom tokenizer has no image.
    custom = _state(BM25Scorer(tokenizer=str.split))
    custom.load(rows)
    assert dump_index(custom.index, _live(custom)) is None


def _mutations(parts: dict[str, bytes]) -> list[tuple[str, dict[str, bytes]]]:
    """Corrupt and hostile variants of an image, each with a name."""
    head = json.loads(parts["header"])
    out: list[tuple[str, dict[str, bytes]]] = []

    def variant(name: str, **changes: bytes | None) -> None:
        new = dict(parts)
        for key, value in changes.items():
            if value is None:
                del new[key]
            else:
                new[key] = value
        out.append((name, new))

    def header(**fields: Any) -> bytes:
        return json.dumps({**head, **fields}).encode()

    variant("header not JSON", header=b"{not json")
    variant("header a list", header=b"[]")
    variant("another format", header=header(format=99))
    variant("another count", header=header(rows=head["rows"] + 1))
    variant("huge header", header=b" " * (1 << 17))
    variant("a part missing", postings=None)
    variant("a part added", extra=b"1234")
    variant("truncated postings", postings=parts["postings"][:-4])
    variant("odd length", postings=parts["postings"] + b"\x00")
    arrays = dict(head["arrays"])
    arrays["postings"] = ["<f8", arrays["postings"][1]]
    variant("another dtype", header=header(arrays=arrays))
    arrays = dict(head["arrays"])
    arrays["postings"] = ["O", arrays["postings"][1]]
    variant("object dtype", header=header(arrays=arrays))
    post = np.frombuffer(parts["postings"], "<i4").copy()
    if len(post):
        big = post.copy()
        big[-1] = head["groups"]  # one past the last group
        variant("a posting out of range", postings=big.tobytes())
        neg = post.copy()
        neg[0] = -1
        variant("a negative posting", postings=neg.tobytes())
        huge = post.copy()
        huge[len(huge) // 2] = 2**31 - 1
        variant("a huge posting", postings=huge.tobytes())
    if len(post) > 1:
        swapped = post.copy()
        swapped[0], swapped[1] = swapped[1], swapped[0]
        variant("postings out of order", postings=swapped.tobytes())
    name = "tokens" if "tokens" in parts else "terms"
    variant(
        "tokens not UTF-8", **{name: b"\xff" + parts[name][1:]} if parts[name] else {name: b"\xff"}
    )
    if name == "tokens":  # word overlap's tokens are the lower-cased text's words
        blob = parts["tokens"]
        at = next((i for i, b in enumerate(blob) if 0x61 <= b <= 0x7A), None)
        if at is not None:
            upper = bytearray(blob)
            upper[at] -= 0x20
            variant("a token in upper case", tokens=bytes(upper))
            spaced = bytearray(blob)
            spaced[at] = 0x20
            variant("a token holding a space", tokens=bytes(spaced))
    ends = np.frombuffer(parts["post_ends"], "<i8").copy()
    if len(ends) > 2:
        bad = ends.copy()
        bad[1] = bad[2]  # an empty list
        variant("an empty posting list", post_ends=bad.tobytes())
        bad = ends.copy()
        bad[-1] += 10
        variant("offsets beyond the postings", post_ends=bad.tobytes())
    if "group_terms" in parts:
        gt = np.frombuffer(parts["group_terms"], head["arrays"]["group_terms"][0]).copy()
        if len(gt):
            bad_gt = gt.copy()
            bad_gt[0] = (1 << 22) << 8 | 1  # a term number beyond the terms
            variant("a group's term out of range", group_terms=bad_gt.tobytes())
            bad_gt = gt.copy()
            bad_gt[0] = bad_gt[0] & ~0xFF
            variant("a zero frequency", group_terms=bad_gt.tobytes())
        lengths = np.frombuffer(parts["lengths"], "<i4").copy()
        if len(lengths):
            lengths[0] += 1
            variant("a wrong length", lengths=lengths.tobytes())
        tfs = np.frombuffer(parts["tfs"], "<i4").copy()
        if len(tfs):
            tfs[0] += 300
            variant("a frequency the groups do not have", tfs=tfs.tobytes())
    return out


@pytest.mark.usefixtures("small_renumber")
@pytest.mark.parametrize("make", SCORERS)
def test_corrupt_images_are_refused(make: Callable[[], Scorer]) -> None:
    state = _messy(make, 5, 70, 20)
    rows = _file_rows(state)
    parts = _image(state)
    rebuilt = _loaded(make, rows, None)
    for _name, bad in _mutations(parts):
        fresh = make().make_index()
        with pytest.raises(ImageError):
            restore_index(fresh, bad, _live(rebuilt))
        _assert_same(_loaded(make, rows, bad, used=False), rebuilt)


@pytest.mark.parametrize("make", SCORERS)
@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_hostile_bytes_never_break_a_retrieve(
    make: Callable[[], Scorer], data: st.DataObject
) -> None:
    """Random byte changes in any part: refused, or an index whose retrieves run (their
    answers may be wrong for these rows: the postings are not derived again)."""
    rows = _rows(9, 40)
    state = _state(make())
    state.load(rows)
    parts = _image(state)
    name = data.draw(st.sampled_from(sorted(parts)))
    blob = bytearray(parts[name])
    if not blob:
        return
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    bad = {**parts, name: bytes(blob)}
    try:
        index: Any = restore_index(make().make_index(), bad, _live(state))
    except ImageError:
        return
    view = state.view()
    for query in QUERIES:
        index.top_k(view, query, 10, None)


# -- the file: written at a clean close, used at open, invalidated by commits ----------


def _meta(path: Path) -> dict[str, str]:
    with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
        return dict(conn.execute("SELECT key, value FROM meta"))


def _parts(path: Path) -> dict[str, bytes]:
    with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
        return dict(conn.execute("SELECT name, data FROM index_image"))


def _put_image(path: Path, parts: dict[str, bytes], marker: str | None = None) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute("DELETE FROM index_image")
        conn.executemany("INSERT INTO index_image VALUES (?, ?)", parts.items())
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES (?, ?)", (IMAGE_KEY, marker or image_marker(parts))
        )
        conn.execute("COMMIT")
    finally:
        conn.close()


async def _write(path: Path, make: Callable[[], Scorer], seed: int = 1) -> dict[str, list[Any]]:
    rows = _rows(seed, 200)
    async with open_memory(path=path, scorer=make()) as memory:
        await memory.store_many([entry for _, entry in rows])
        for _, entry in rows[::5]:
            await memory.delete(entry.id)
        await memory.store_many([entry for _, entry in _rows(seed + 1, 30)])
        return {q: await _answers(memory, q) for q in QUERIES}


async def _answers(memory: Any, query: str) -> list[Any]:
    return [(h.entry.id, h.score) for h in await memory.retrieve_scored(query, 20)]


async def _reopen(
    path: Path,
    make: Callable[[], Scorer],
    used: bool | None,
    before: dict[str, list[Any]] | None = None,
) -> None:
    """Open ``path``: the image used iff ``used`` (None: either); the same answers as a
    state rebuilt from the rows (and as ``before``); ``_check`` holds."""
    rows = read_validated(str(path))
    rebuilt = _loaded(make, rows, None)
    async with open_memory(path=path, scorer=make()) as memory:
        assert memory._storage is not None
        assert used is None or memory._storage.image_fresh is used
        state = memory._state
        state._check()
        view, ref = state.view(), rebuilt.view()
        for query in QUERIES:
            got = run_retrieve(state, view, query, 20, None)
            want = run_retrieve(rebuilt, ref, query, 20, None)
            assert [(s, r.seq) for s, r in got] == [(s, r.seq) for s, r in want]
            if before is not None and make is WordOverlapScorer:
                # (BM25's scores in the session that wrote the file can differ from a
                # rebuild's, with or without an image: not what this test is about.)
                assert await _answers(memory, query) == before[query]


@pytest.mark.parametrize("make", SCORERS)
async def test_a_clean_close_keeps_the_image_and_open_uses_it(
    tmp_path: Path, make: Callable[[], Scorer]
) -> None:
    path = tmp_path / "m.db"
    before = await _write(path, make)
    assert IMAGE_KEY in _meta(path)
    assert set(_parts(path)) >= {"header", "postings"}
    await _reopen(path, make, used=True, before=before)
    # Retrieves commit access counts only: the image still describes the rows.
    marker = _meta(path)[IMAGE_KEY]
    await _reopen(path, make, used=True)
    assert _meta(path)[IMAGE_KEY] == marker
    # A store changes the rows: the marker goes with that commit, a new image at close.
    async with open_memory(path=path, scorer=make()) as memory:
        await memory.store(_rows(50, 1)[0][1])
        assert IMAGE_KEY not in _meta(path)
    assert _meta(path)[IMAGE_KEY] != marker
    await _reopen(path, make, used=True)


async def test_another_scorer_rebuilds_and_replaces_the_image(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    await _write(path, WordOverlapScorer)
    with caplog.at_level(logging.WARNING, "actormem"):
        await _reopen(path, BM25Scorer, used=False)
    assert (
        "index image was not used (kind: the image is a 'word-overlap' index, this memory"
        " scores with 'bm25'); building the index from the rows" in caplog.text
    )
    await _reopen(path, BM25Scorer, used=True)  # the close wrote BM25's


@pytest.mark.parametrize("make", SCORERS)
async def test_rows_changed_behind_the_image_are_detected(
    tmp_path: Path, make: Callable[[], Scorer], caplog: pytest.LogCaptureFixture
) -> None:
    """Another program (the sqlite3 shell, an older actormem's rows copied in) changes
    the rows without touching the marker: the digest, count or largest seq differ."""
    edits = [
        "UPDATE entries SET memory = memory || ' x' WHERE seq = (SELECT min(seq) FROM entries)",
        "DELETE FROM entries WHERE seq = (SELECT max(seq) FROM entries)",
        "UPDATE entries SET seq = seq + 1000 WHERE seq = (SELECT max(seq) FROM entries)",
    ]
    if make is BM25Scorer:
        edits.append(
            "UPDATE entries SET tags = '[\"zz\"]' WHERE seq = (SELECT min(seq) FROM entries)"
        )
    for i, edit in enumerate(edits):
        path = tmp_path / f"m{i}.db"
        await _write(path, make, seed=i)
        with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
            conn.execute(edit)
        caplog.clear()
        with caplog.at_level(logging.WARNING, "actormem"):
            await _reopen(path, make, used=False)
        assert "index image was not used" in caplog.text, edit
    # A row inserted by another writer of the file.
    path = tmp_path / "insert.db"
    await _write(path, make)
    rows = read_validated(str(path))
    entry = attrs.evolve(rows[0][1], id=uuid.uuid4(), memory="a new row from elsewhere")
    with closing(sqlite3.connect(path)) as conn, conn:  # closed (3.13 warns)
        conn.execute(INSERT_ENTRY, encode_record(Record(entry, rows[-1][0] + 1, rows[-1][0] + 1)))
    await _reopen(path, make, used=False)


@pytest.mark.parametrize("make", SCORERS)
async def test_corrupt_images_in_the_file_are_rebuilt(
    tmp_path: Path, make: Callable[[], Scorer], caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "m.db"
    await _write(path, make)
    good = _parts(path)
    # Bytes changed without the marker: the checksum differs.
    blob = bytearray(good["postings"])
    blob[len(blob) // 2] ^= 0xFF
    _put_image(path, {**good, "postings": bytes(blob)}, marker=_meta(path)[IMAGE_KEY])
    with caplog.at_level(logging.WARNING, "actormem"):
        await _reopen(path, make, used=False)
    assert "does not match its marker" in caplog.text
    # Hostile images with a matching marker: the deeper checks refuse them.
    for name, bad in _mutations(good)[:12]:
        _put_image(path, bad)
        await _reopen(path, make, used=False)
        assert IMAGE_KEY in _meta(path), name  # the close wrote a good image again
    # Parts that are not blobs.
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE index_image SET data = 'text' WHERE name = 'header'")
    conn.close()
    await _reopen(path, make, used=False)


def test_the_first_commit_that_changes_rows_drops_the_marker(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    store, _ = SqliteStore.open(path, Durability.NORMAL)
    rows = _rows(2, 5)
    recs = [Record(e, s, s) for s, e in rows]
    store.write(Batch([], [encode_record(r) for r in recs], []))
    assert store.write_image({"header": b"{}"})
    assert _meta(Path(path))[IMAGE_KEY]
    store.write(Batch([], [], [(1, None, None, recs[0].seq)]))  # access bookkeeping only
    assert IMAGE_KEY in _meta(Path(path))
    assert store.image_fresh
    store.write(Batch([(recs[0].seq,)], [], []))
    assert IMAGE_KEY not in _meta(Path(path))
    assert not store.image_fresh
    store.close()


async def test_a_version_3_file_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in CREATE_SCHEMA_V3:
        conn.execute(statement)
    rows = _rows(4, 30)
    conn.executemany(INSERT_ENTRY, [encode_record(Record(e, s, s)) for s, e in rows])
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    now = datetime.now(UTC)
    live = sum(1 for _, e in rows if e.expires_at is None or e.expires_at > now)
    assert 0 < live < 30  # (some rows have expired: not counted, and swept by the open)
    async with open_memory(path=path) as memory:
        assert len(memory) == live
    assert _meta(path)["schema_version"] == "4"
    await _reopen(path, WordOverlapScorer, used=True)


# -- kill -9 while the image is written -----------------------------------------------------

_CHILD = """
import sys, trio
sys.path.insert(0, sys.argv[3])
from actormem import BM25Scorer, WordOverlapScorer, open_memory
from tests.test_open_fast import _rows

async def main():
    scorer = BM25Scorer() if sys.argv[2] == "bm25" else WordOverlapScorer()
    async with open_memory(path=sys.argv[1], scorer=scorer) as memory:
        await memory.store_many([e for _, e in _rows(int(sys.argv[4]), 3000)])
        await memory.sweep_expired()  # (some rows have expired: the count is then final)
        print("closing", len(memory), flush=True)
    print("closed", flush=True)

trio.run(main)
"""


@pytest.mark.parametrize("make", SCORERS)
def test_kill_9_while_the_image_is_written(tmp_path: Path, make: Callable[[], Scorer]) -> None:
    """The child stores, then is killed at a growing delay into its close (before, during
    and after the image's transaction, depending on the machine)."""
    root = str(Path(__file__).resolve().parents[1])
    kind = "bm25" if make is BM25Scorer else "wo"
    for trial in range(6):
        path = tmp_path / f"k{trial}.db"
        if trial % 2:  # an older image to replace
            trio.run(_write, path, make, trial)
        proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(path), kind, root, str(trial)],
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": root},
        )
        assert proc.stdout is not None
        word, count = proc.stdout.readline().split()
        assert word == "closing"
        time.sleep(0.002 * trial * trial)
        proc.send_signal(signal.SIGKILL)
        proc.stdout.read()
        proc.wait()
        proc.stdout.close()
        assert len(read_validated(str(path))) == int(count)  # every store was committed
        # Either the new image, or none / an old one that is refused: always correct.
        trio.run(_reopen, path, make, None)
        trio.run(_reopen, path, make, True)  # the close above kept a good one


def test_an_unexpected_error_in_a_restore_rebuilds(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A fault no check foresaw (here: raised by the restore) is logged with its
    traceback, and the index rebuilt: an image can never keep a file from opening."""
    import actormem._engine.state as state_module

    rows = _rows(6, 40)
    source = _state(WordOverlapScorer())
    source.load(rows)
    parts = _image(source)

    def broken(*args: object) -> object:
        raise IndexError("unforeseen")

    monkeypatch.setattr(state_module, "restore_index", broken)
    with caplog.at_level(logging.WARNING, "actormem"):
        loaded = _loaded(WordOverlapScorer, rows, parts, used=False)
    assert "unforeseen" in caplog.text
    assert caplog.records[-1].exc_info is not None
    _assert_same(loaded, _loaded(WordOverlapScorer, rows, None))


def test_an_image_lacking_a_token_keeps_the_owner_alive() -> None:
    """An image that passes the checks but lacks a token's posting list (crafted: the
    lists are not derived again) may answer wrongly, but deleting and purging the texts
    that hold the token must not raise in the owner (a KeyError killed it)."""
    rows = _rows(5, 60)
    state = _state(WordOverlapScorer())
    state.load(rows)
    post = state.index._e.post  # type: ignore[attr-defined]
    tok = max(post, key=lambda t: len(post[t]))  # the most common token
    del post[tok]
    parts = _image(state)
    loaded = _loaded(WordOverlapScorer, rows, parts)
    for rec in _live(loaded):
        if tok in rec.entry.memory.lower().split():
            assert loaded.delete(rec.entry.id) is not None
    loaded.publish()
    loaded.vacuum(loaded.published)
    assert len(loaded) > 0
    view = loaded.view()
    for query in QUERIES:
        loaded.index.top_k(view, query, 10, None)  # type: ignore[attr-defined]


def _lists_ok(ends: list[int], values: list[int], bound: int) -> bool:
    """The reference for ``check_lists``: plain Python over the lists."""
    if not ends or ends[0] != 0 or ends[-1] != len(values):
        return False
    lists = [values[a:b] for a, b in zip(ends, ends[1:], strict=False)]
    return all(
        lst
        and all(0 <= v < bound for v in lst)
        and all(x < y for x, y in zip(lst, lst[1:], strict=False))
        for lst in lists
    ) and all(a <= b for a, b in zip(ends, ends[1:], strict=False))


@settings(max_examples=examples(300), deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(-2, 12), max_size=5), max_size=6),
    bound=st.integers(1, 12),
    wide=st.booleans(),
)
def test_check_lists_agrees_with_a_plain_reference(
    lists: list[list[int]], bound: int, wide: bool
) -> None:
    """Every list non-empty, in [0, bound), strictly ascending; any step across lists."""
    from actormem._index.persist import check_lists

    values = [v for lst in lists for v in lst]
    ends = [0]
    for lst in lists:
        ends.append(ends[-1] + len(lst))
    arr = np.array(values, np.int64 if wide else np.int32)
    try:
        check_lists(np.array(ends, np.int64), arr, bound, "lists")
        ok = True
    except ImageError:
        ok = False
    assert ok == _lists_ok(ends, values, bound)


@pytest.mark.parametrize("make", SCORERS)
def test_restored_groups_equal_rebuilt_ones(make: Callable[[], Scorer]) -> None:
    """Many records sharing texts: the restored word-overlap numbering (groups, their
    records in order, bounds) is the rebuilt one, field by field."""
    rows = _rows(11, 60)
    dup = [
        (seq + 1000 * (i + 1), attrs.evolve(entry, id=uuid.UUID(int=10**6 + 100 * i + j), key=None))
        for i in range(3)
        for j, (seq, entry) in enumerate(rows[::2])
    ]
    rows = sorted(rows + dup, key=lambda row: row[0])
    state = _state(make())
    state.load(rows)
    restored = _loaded(make, rows, _image(state))
    rebuilt = _loaded(make, rows, None)
    _assert_same(restored, rebuilt)
    if make is not WordOverlapScorer:
        return
    a, b = restored.index._e, rebuilt.index._e  # type: ignore[attr-defined]
    assert a.groups == b.groups
    assert a.n == b.n
    assert any(type(item).__name__ == "_Group" for item in a.glist)
    for x, y in zip(a.glist[: a.n], b.glist[: b.n], strict=True):
        assert type(x) is type(y)
        if type(x).__name__ == "_Group":
            assert (x.text, x.unpurged, x.dead) == (y.text, y.unpurged, y.dead)
            assert [r.seq for r in x.recs] == [r.seq for r in y.recs]
        else:
            assert x.seq == y.seq
    assert np.array_equal(a.maxrel[: a.n], b.maxrel[: b.n])
    assert np.array_equal(a.minseq[: a.n], b.minseq[: b.n])
