"""Branch open42: the restore's digest, groups and group table from the entries' store's
UTF-8 instead of a str of every text (issue #20, item 5).

``wordoverlap.persist._TEXTS_FROM_STORE``: for a file's rows in the store's form
(``(seq, slot)``, ``FoldedRows.cols``), the digest's thread reads the slots' strict UTF-8
(the core's ``slots_groups`` and ``slots_encode``, the GIL released, the store pinned
meanwhile), the restore checks the records are on the rows' very slots
(``restore_columns`` by slot numbers) and the ``GroupTable`` takes the reader's hashes
(``index_from``'s ``hashes``). Checked: each against the str path (Hypothesis over ASCII,
Latin-1, BMP and astral texts, with equal copies), the pin (a put, release or
compaction refused while the digest reads), bad input refused before C, and whole loads
with the knob on and off: the same state as a rebuild, stale and foreign images refused
with the same message.
"""

from __future__ import annotations

import logging
import random
import struct
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer
from actormem._index import entrycols, kernels, persist
from actormem._index.wordoverlap import numbering
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import Record
from actormem._storage import sqlite_format
from tests.strategies import examples

from .test_index_image import _file_rows, _image, _loaded, _messy
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not entrycols.compiled_columns(),
    reason="the word overlap core is not built",
)

#: Texts of every width: ASCII, Latin-1, the BMP, astral (no lone surrogate: a stored
#: text is strict UTF-8).
_CHARS = st.sampled_from("ab \u00e9\u00ff\u4e16\u0394\U0001f600\U00010348")
_TEXTS = st.text(_CHARS, max_size=12) | st.text(st.characters(exclude_categories=("Cs",)))


def _entry(text: str) -> MemoryEntry:
    return MemoryEntry(memory=text, category=MemoryCategory.FACT)


def _hashes(texts: list[str], rng: random.Random) -> bytes:
    """The reader's hashes: str's hash of some ASCII texts, -1 for the others."""
    got = [hash(t) if t.isascii() and rng.random() < 0.7 else -1 for t in texts]
    return struct.pack(f"={len(got)}q", *got)


def _stored(texts: list[str], junk: int = 0) -> tuple[Any, bytes]:
    """A store holding ``texts`` (after ``junk`` entries put and released, so slots are
    reused and blocks compacted) and their slot numbers as int64 bytes."""
    cols = entrycols.new_entry_columns()
    dead = [cols.put(_entry("junk " * (i % 7) + "\u00e9" * (i % 3))) for i in range(junk)]
    for slot in dead[::2]:
        cols.release(slot)
    slots = [cols.put(_entry(t)) for t in texts]
    return cols, struct.pack(f"={len(slots)}q", *slots)


def _encoded(run: Any, n: int) -> bytes:
    """Every byte a ``texts_encode``-like ``run(mask, buf, at, off)`` writes, run by run."""
    out = bytearray()
    for cap in (8, 9, 13, 1 << 20):
        buf = bytearray(cap)
        at = off = 0
        got = bytearray()
        while at < 2 * n:
            step = run(buf, at, off)
            assert step is not None
            at, off, written = step
            got += buf[:written]
        if not out:
            out = got
        assert got == out
    return bytes(out)


# -- the core's functions against the str path ---------------------------------------------


@needs_c
@settings(max_examples=examples(120), deadline=None)
@given(
    base=st.lists(_TEXTS, max_size=20),
    picks=st.lists(st.integers(0, 10**6), max_size=40),
    junk=st.integers(0, 30),
    seed=st.integers(0, 2**32 - 1),
)
def test_slots_groups_and_bytes_are_the_str_paths(
    base: list[str], picks: list[int], junk: int, seed: int
) -> None:
    # equal copies: new str objects of earlier texts
    texts = base + ["".join(list(base[p % len(base)])) for p in picks if base]
    rng = random.Random(seed)
    rng.shuffle(texts)
    cols, slots = _stored(texts, junk)
    own = tuple(texts)
    for hashes in (b"", _hashes(texts, rng)):
        want = persist._groups_of(own)
        assert persist._slots_groups(cols, slots, hashes) == want
    mask = persist._groups_of(own)
    assert mask is not None
    n = len(texts)
    for m in (None, mask[0]):
        want_bytes = _encoded(lambda b, a, o, m=m: persist._encode_run(own, m, b, a, o), n)
        got_bytes = _encoded(
            lambda b, a, o, m=m: persist._encode_store_run(cols, slots, m, b, a, o), n
        )
        assert got_bytes == want_bytes
    assert cols.stats()["pins"] == 0


@needs_c
@settings(max_examples=examples(40), deadline=None)
@given(texts=st.lists(_TEXTS, max_size=30), seed=st.integers(0, 2**32 - 1))
def test_the_store_digest_is_the_late_digest(texts: list[str], seed: int) -> None:
    texts = texts + texts[: len(texts) // 2]  # repeats
    cols, slots = _stored(texts, 5)
    hashes = _hashes(texts, random.Random(seed))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        mp.setattr(persist, "_ENCODE_BUFFER", 16)  # many runs, code points split
        want = persist.LateDigest(texts, distinct=True, groups=True)
        got = persist.StoreDigest(cols, slots, hashes)
        assert got.groups() == want.groups()
        assert got.result() == want.result() == persist.text_digest(list(dict.fromkeys(texts)))
    assert cols.stats()["pins"] == 0
    _no_threads_left()


@needs_c
def test_the_store_is_pinned_while_the_digest_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [f"text {i} \u00e9" if i % 3 else f"text {i}" for i in range(2000)]
    cols, slots = _stored(texts)
    spare = cols.put(_entry("spare"))
    release = persist.Beside.__init__

    held: list[Any] = []

    def late_start(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
        held.append(fn)  # the thread starts only once the checks below ran
        release(self, lambda: None, **kwargs)

    monkeypatch.setattr(persist.Beside, "__init__", late_start)
    digest = persist.StoreDigest(cols, slots, b"")
    before = cols.stats()
    assert before["pins"] == 1
    for change in (
        lambda: cols.put(_entry("new")),
        lambda: cols.release(spare),
        cols.compact,
        lambda: cols.put_raw(b"\x01" * 16, 0, 0.5, 0, False, b"raw"),
    ):
        with pytest.raises(RuntimeError, match="pinned"):
            change()
        assert cols.stats() == before
    monkeypatch.setattr(persist.Beside, "__init__", release)
    assert held[0]() == persist.text_digest(list(dict.fromkeys(texts)))  # unpins as it ends
    digest.stop()
    assert cols.stats()["pins"] == 0
    cols.release(spare)  # allowed again
    with pytest.raises(RuntimeError, match="not pinned"):
        cols.unpin()
    cols.pin()
    cols.pin()
    cols.unpin()
    with pytest.raises(RuntimeError):
        cols.put(_entry("x"))
    cols.unpin()
    cols.put(_entry("x"))


@needs_c
def test_a_stopped_store_digest_unpins_and_leaves_no_thread() -> None:
    texts = [f"t{i % 500} \u4e16" for i in range(60_000)]
    cols, slots = _stored(texts)
    digest = persist.StoreDigest(cols, slots)
    digest.stop()
    digest.stop()
    assert cols.stats()["pins"] == 0
    _no_threads_left()
    again = persist.StoreDigest(cols, slots)
    assert again.result() == persist.text_digest(list(dict.fromkeys(texts)))
    assert cols.stats()["pins"] == 0


@needs_c
def test_a_slot_not_live_gives_none_and_the_digest_an_image_error() -> None:
    cols, slots = _stored(["a", "b\u00e9", "c"])
    gone = struct.unpack("=3q", slots)[1]
    cols.release(gone)
    assert persist._slots_groups(cols, slots, b"") is None
    assert persist._encode_store_run(cols, slots, None, bytearray(64), 0, 0) is None
    for bad in (-1, 10**9):
        other = struct.pack("=2q", struct.unpack("=3q", slots)[0], bad)
        assert persist._slots_groups(cols, other, b"") is None
        assert persist._encode_store_run(cols, other, None, bytearray(64), 0, 0) is None
    digest = persist.StoreDigest(cols, slots)
    assert digest.groups() is None
    with pytest.raises(persist.ImageError, match="not live"):
        digest.result()
    assert cols.stats()["pins"] == 0


@needs_c
def test_bad_input_is_refused_before_and_in_c() -> None:
    assert wo is not None
    cols, slots = _stored(["a", "b\u00e9"])
    for fn in (persist._slots_groups, wo.slots_groups):
        with pytest.raises(TypeError):
            fn(object(), slots, b"")
        with pytest.raises(TypeError):
            fn(cols, bytearray(slots), b"")
        with pytest.raises(TypeError):
            fn(cols, slots, None)
        with pytest.raises(ValueError, match="multiple of 8"):
            fn(cols, slots[:-1], b"")
        with pytest.raises(ValueError, match="8 bytes a slot"):
            fn(cols, slots, b"\xff" * 8)
    buf = bytearray(64)
    for fn in (persist._encode_store_run, wo.slots_encode):
        with pytest.raises(TypeError):
            fn(object(), slots, None, buf, 0, 0)
        with pytest.raises(TypeError):
            fn(cols, slots, None, bytes(64), 0, 0)
        with pytest.raises(TypeError):
            fn(cols, slots, bytearray(2), buf, 0, 0)
        with pytest.raises(ValueError, match="multiple of 8"):
            fn(cols, slots[:-1], None, buf, 0, 0)
        with pytest.raises(ValueError, match="mask"):
            fn(cols, slots, b"\x01", buf, 0, 0)
        with pytest.raises(ValueError, match="fewer than 8"):
            fn(cols, slots, None, bytearray(7), 0, 0)
        for at, off in ((-1, 0), (5, 0), (0, 1), (4, 1), (1, 1)):
            with pytest.raises(ValueError, match="outside"):
                fn(cols, slots, None, buf, at, off)
    with pytest.raises(ValueError, match="offset"):  # past the text ("b\u00e9": 3 bytes)
        wo.slots_encode(cols, slots, None, buf, 3, 3)
    with pytest.raises(TypeError):
        persist.StoreDigest(cols, bytearray(slots))
    with pytest.raises(ValueError, match="8 bytes a slot"):
        persist.StoreDigest(cols, slots, b"\x00" * 8)
    with pytest.raises(TypeError):
        wo.rows_slots([(1, 0)], object())
    with pytest.raises(TypeError):
        wo.rows_slots(((1, 0),), cols)
    assert cols.stats()["pins"] == 0


@needs_c
def test_rows_slots_reads_each_rows_slot() -> None:
    assert wo is not None
    cols, slots = _stored(["x", "y\u00e9", "z"])
    nums = list(struct.unpack("=3q", slots))
    rows = sqlite_format.FoldedRows([(i + 1, s) for i, s in enumerate(nums)], b"", cols)
    assert wo.rows_slots(rows, cols) == slots
    assert wo.rows_slots([], cols) == b""
    for bad in ([(1, nums[0]), (2,)], [(1, "0")], [(1, 10**6)], [(1, -1)], [[1, nums[0]]]):
        assert wo.rows_slots(bad, cols) is None


# -- restore_columns and index_from -----------------------------------------------------------


@needs_c
def test_restore_columns_by_slot_makes_no_text_and_tells_the_very_slots() -> None:
    assert wo is not None
    fn = wo_persist.ccore.restore_columns()
    assert fn is not None
    texts = ["a", "b\u00e9", "a", "\U0001f600"]
    cols, slots = _stored(texts)
    nums = list(struct.unpack(f"={len(texts)}q", slots))
    records = [Record.on_slot(cols, s, i + 1, i + 1) for i, s in enumerate(nums)]
    got = fn(records, slots, cols)
    plain = fn(records)
    assert got[0] is None
    assert got[4] is True
    assert got[1:4] == plain[1:4]
    swapped = struct.pack(f"={len(nums)}q", nums[1], nums[0], *nums[2:])
    assert fn(records, swapped, cols)[4] is False  # the same texts, other slots
    assert fn(records, slots[:-8], cols)[4] is False
    assert fn(records, slots + slots[:8], cols)[4] is False
    other, _ = _stored(texts)
    assert fn(records, slots, other)[4] is False
    assert fn(records, struct.pack("=4q", -1, 10**9, 0, 0), cols)[4] is False
    for args in ((records, slots), (records, slots, None), (records, (), cols)):
        with pytest.raises(TypeError):
            fn(*args)
    with pytest.raises(ValueError, match="multiple of 8"):
        fn(records, slots[:-1], cols)


@needs_c
@settings(max_examples=examples(60), deadline=None)
@given(texts=st.lists(_TEXTS, max_size=30, unique=True), seed=st.integers(0, 2**32 - 1))
def test_index_from_by_the_readers_hashes_is_the_str_path(texts: list[str], seed: int) -> None:
    rng = random.Random(seed)
    cols, slots = _stored(texts, 10)
    nums = struct.unpack(f"={len(texts)}q", slots)
    records = [Record.on_slot(cols, s, i + 1, i + 1) for i, s in enumerate(nums)]
    want = numbering._group_map(list(records), True)
    want.index_from(0)
    got = numbering._group_map(list(records), True)
    got.index_from(0, None, _hashes(texts, rng))
    got._check()
    assert dict(got.items()) == dict(want.items()) == {t: i for i, t in enumerate(texts)}
    for t in texts:
        assert got["".join(list(t))] == want[t]
    if texts:  # a text twice: refused, the table as it was
        twice = numbering._group_map([*records, Record.on_slot(cols, nums[0], 99, 99)], True)
        all_hashed = struct.pack(f"={len(texts) + 1}q", *[hash(t) for t in texts], hash(texts[0]))
        with pytest.raises(ValueError, match="mapped"):
            twice.index_from(0, None, all_hashed)
        assert len(twice) == 0
        twice._check()
    with pytest.raises(TypeError):
        got.index_from(0, None, bytearray(8 * len(texts)))
    with pytest.raises(ValueError, match="8 bytes an item"):
        got.index_from(0, None, b"\x00" * (8 * len(texts) + 8))


# -- whole loads --------------------------------------------------------------------------


def _unicode(rows: list[tuple[int, MemoryEntry]], seed: int) -> list[tuple[int, MemoryEntry]]:
    """Some rows' texts made Latin-1, BMP or astral, some copies of others'."""
    rng = random.Random(seed)
    out = []
    for s, e in rows:
        r = rng.random()
        if r < 0.15:
            e = attrs.evolve(e, memory=e.memory + rng.choice(" caf\u00e9 \u4e16 \U0001f600"))
        elif r < 0.3 and out:
            e = attrs.evolve(e, memory="".join(list(out[rng.randrange(len(out))][1].memory)))
        out.append((s, e))
    return out


def _store_rows(rows: list[tuple[int, MemoryEntry]], hashed: bool) -> Any:
    """``rows`` in the store's form, as the compiled reader gives them (its hashes of the
    ASCII texts with ``hashed``)."""
    cols = entrycols.new_entry_columns()
    got = sqlite_format.FoldedRows([(seq, cols.put(e)) for seq, e in rows], b"", cols)
    if hashed:
        got.hashes = struct.pack(
            f"={len(rows)}q", *[hash(e.memory) if e.memory.isascii() else -1 for _, e in rows]
        )
    return got


class _Counted:
    def __init__(self, mp: pytest.MonkeyPatch) -> None:
        self.made = 0
        real = persist.StoreDigest
        outer = self

        class Counting(real):  # type: ignore[misc, valid-type]
            def __init__(self, *args: Any) -> None:
                outer.made += 1
                super().__init__(*args)

        mp.setattr(persist, "StoreDigest", Counting)


@needs_c
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("hashed", [True, False])
def test_a_load_from_the_store_is_the_rebuild_with_the_knob_on_and_off(
    seed: int, hashed: bool
) -> None:
    state = _messy(WordOverlapScorer, seed, 90, 25)
    rows = _unicode(_file_rows(state), seed)
    state = _loaded(WordOverlapScorer, rows, None)
    rows = _file_rows(state)
    parts = _image(state)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        counted = _Counted(mp)
        for on in (True, False):
            mp.setattr(wo_persist, "_TEXTS_FROM_STORE", on)
            counted.made = 0
            store_rows = _store_rows(rows, hashed)
            got = _loaded(WordOverlapScorer, store_rows, parts)
            _assert_same(got, rebuilt)
            assert counted.made == (1 if on else 0)
            assert store_rows.cols.stats()["pins"] == 0
            got._cols.put(_entry("after"))  # the store is free again
    _no_threads_left()


@needs_c
@pytest.mark.parametrize("how", ["stale", "foreign", "digest"])
def test_stale_and_foreign_images_are_refused_the_same_with_the_knob_on_and_off(
    how: str, caplog: pytest.LogCaptureFixture
) -> None:
    state = _messy(WordOverlapScorer, 5, 80, 20)
    rows = _unicode(_file_rows(state), 5)
    state = _loaded(WordOverlapScorer, rows, None)
    rows = _file_rows(state)
    parts = _image(state)
    if how == "stale":  # one text changed after the image was written: same groups
        at = len(rows) // 2
        rows[at] = (rows[at][0], attrs.evolve(rows[at][1], memory=rows[at][1].memory + "\u00e9"))
    elif how == "foreign":
        other = [(s, attrs.evolve(e, memory=e.memory + " z")) for s, e in rows]
        parts = _image(_loaded(WordOverlapScorer, other, None))
    else:
        head = parts["header"].decode()
        at = head.index('"digest": "') + len('"digest": "')
        flip = "0" if head[at] != "0" else "1"
        parts = {**parts, "header": (head[:at] + flip + head[at + 1 :]).encode()}
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    messages = set()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        for on in (True, False):
            mp.setattr(wo_persist, "_TEXTS_FROM_STORE", on)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="actormem"):
                got = _loaded(WordOverlapScorer, _store_rows(rows, True), parts, used=False)
            lines = [
                r.getMessage() for r in caplog.records if "image was not used" in r.getMessage()
            ]
            assert len(lines) == 1, lines
            assert not any(r.exc_info for r in caplog.records)
            messages.add(lines[0])
            _assert_same(got, rebuilt)
    assert len(messages) == 1, messages
    _no_threads_left()
