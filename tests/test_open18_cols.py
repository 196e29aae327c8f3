"""Branch open18: less of the 1M open's load on the open's own thread (issue #20).

``wordoverlap.persist._C_COLUMNS`` (the restore's pass over the records by the core's
``restore_columns``), the texts' digest (its bytes made by the core's ``texts_encode``
with the GIL released, hashed by hashlib: branch open19 replaced open18's BLAKE2b of our
own; branch tidy24b dropped its knob and the older C feed: switched here by
``persist._encoder``, the path a build without the core takes, ``str.join`` and
``encode``), ``wordoverlap.persist._DIGEST_EARLY`` (that
digest started before the group map, finding the distinct texts itself: the core's
``texts_first``) and ``state._KEYS_C`` (``_bulk_loadable``'s pass over
the keys by the core's ``next_keyed``). With each knob
on and off: the same restored state as a rebuild, the same digests, the same refusals
and errors.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._engine import state as state_module
from actormem._index import imagehash as _hash
from actormem._index import kernels, persist
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import persist as wo_persist
from actormem._record import PyRecord, Record
from actormem._storage.sqlite_format import FoldedRows
from tests.strategies import examples

from .setups import ENCODER, RESTORE_CASES, image_errors, restores_as_rebuilt, set_knobs
from .test_index_image import _file_rows, _image, _live, _loaded, _messy
from .test_open_beside import _no_threads_left
from .test_open_fast import _rows

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "texts_encode") or state_module._next_keyed_c is None,
    reason="the word overlap core is not built",
)

KNOBS = (
    (wo_persist, "_C_COLUMNS"),
    (persist, "_encoder"),  # off: the digest's bytes as a build without the core makes them
    (state_module, "_KEYS_C"),
    (wo_persist, "_DIGEST_EARLY"),
)


def _reference_digest(texts: list[str], extra: list[str] = []) -> str:  # noqa: B006
    """text_digest's bytes hashed by hashlib, written out here."""
    h = _hash.new128()
    for part in (texts, extra):
        h.update(b"".join(len(t).to_bytes(8, sys.byteorder, signed=True) for t in part))
        h.update("".join(part).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


# -- the restore ----------------------------------------------------------------------


@needs_c
@settings(max_examples=examples(20), deadline=None)
@given(**RESTORE_CASES)
def test_each_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    def same_tags(restored: Any, rebuilt: Any, mp: pytest.MonkeyPatch, on: Any) -> None:
        assert _tag_lists(restored) == _tag_lists(rebuilt)

    restores_as_rebuilt(seed, n, ops, dups, KNOBS, same_tags)


def _tag_lists(state: Any) -> dict[int, list[int]]:
    """The index's tag postings: each tag id's records (seqs, in order)."""
    return {tag: [r.seq for r in recs] for tag, recs in state.index._tags.lists.items()}


@needs_c
def test_a_stale_image_gives_the_same_error_with_each_knob() -> None:
    state = _messy(WordOverlapScorer, 3, 60, 20)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    other = [
        Record(attrs.evolve(r.entry, memory=r.entry.memory + "\u00e9"), r.seq, r.seq)
        for r in records
    ]
    errors = image_errors(parts, other, records, KNOBS)
    assert len(errors) == 1
    assert next(iter(errors)).startswith("digest:")
    _no_threads_left()


@needs_c
def test_restore_columns_reads_what_the_python_passes_read() -> None:
    ccore.restore_columns()  # the classes fixed
    state = _messy(WordOverlapScorer, 8, 120, 30)
    records = _live(state)
    tagged = [i for i, r in enumerate(records) if r.entry.tags]
    assert tagged  # the test reads what it names
    got = wo.restore_columns(records)
    assert got is not None
    texts, rel, seqs, tags = got
    assert texts == [r.entry.memory for r in records]
    assert list(memoryview(rel).cast("d")) == [r.entry.relevance for r in records]
    assert list(memoryview(seqs).cast("q")) == [r.seq for r in records]
    assert tags == tagged
    assert wo.restore_columns([]) == ([], b"", b"", [])

    class Sub(Record):
        __slots__ = ()

    rec = records[0]
    for odd in (
        Sub(rec.entry, rec.seq, rec.seq),  # another record class
        _past_int64(rec),  # a seq past int64 (a Python record: the compiled one has none)
        "not a record",
    ):
        assert wo.restore_columns([*records, odd]) is None
    with pytest.raises(TypeError):
        wo.restore_columns(tuple(records))


def _past_int64(rec: Record) -> PyRecord:
    odd = PyRecord(rec.entry, 1, 1)
    odd.seq = odd.born = 2**63
    return odd


# -- the digest -----------------------------------------------------------------------

_ALPHABET = ["a", "Z", " ", "\x00", "\x7f", "\x80", "\u00e9", "\u00ff", "\u0100", "\u4e2d",
             "\ud800", "\udfff", "\U0001f600", "\U0010ffff"]  # fmt: skip


def _reference_bytes(texts: list[str], mask: bytes | None = None) -> bytes:
    """One part's bytes as text_digest hashes them (``mask``: of the items it marks)."""
    kept = [t for i, t in enumerate(texts) if mask is None or mask[i]]
    lengths = b"".join(len(t).to_bytes(8, sys.byteorder, signed=True) for t in kept)
    return lengths + "".join(kept).encode("utf-8", "surrogatepass")


def _encoded(texts: tuple[str, ...], mask: bytes | None, size: int) -> bytes:
    """texts_encode's runs joined, checking each: progress, within the buffer, the
    position in the part, nothing written after the end."""
    buf, out = bytearray(size), []
    at = off = 0
    while at < 2 * len(texts):
        got = persist._encode_run(texts, mask, buf, at, off)
        assert got is not None
        new_at, new_off, written = got
        end = new_at == 2 * len(texts)
        assert 0 < written <= size or end  # nothing written only at the end
        # stopped only when the next length (8 bytes) or code point (<= 4) did not fit
        assert end or written > size - (8 if new_at < len(texts) else 4)
        assert (new_at, new_off) > (at, off)
        assert new_off == 0 or new_at >= len(texts)
        out.append(bytes(buf[:written]))
        at, off = new_at, new_off
    assert (at, off) == (2 * len(texts), 0)
    assert persist._encode_run(texts, mask, buf, at, off) == (at, 0, 0)
    return b"".join(out)


@needs_c
@settings(max_examples=examples(200), deadline=None)
@given(
    texts=st.lists(st.text(st.sampled_from(_ALPHABET), max_size=40), max_size=10),
    keep=st.none() | st.lists(st.booleans(), min_size=10, max_size=10),
    size=st.sampled_from([8, 9, 10, 11, 12, 13, 16, 64, 4096]),
)
def test_texts_encode_writes_the_bytes_of_the_join(
    texts: list[str], keep: list[bool] | None, size: int
) -> None:
    # every UTF-8 length and lone surrogates, runs ending inside a code point's bytes
    # (left for the next run), exactly at a text's end or the part's
    mask = None if keep is None else bytes(keep[: len(texts)])
    assert _encoded(tuple(texts), mask, size) == _reference_bytes(texts, mask)


@needs_c
def test_texts_encode_runs_at_the_edges() -> None:
    run = persist._encode_run
    assert run((), None, bytearray(8), 0, 0) == (0, 0, 0)  # an empty part: the end
    buf = bytearray(8)
    assert run(("abcdefgh",), None, buf, 0, 0) == (1, 0, 8)  # the length
    assert run(("abcdefgh",), None, buf, 1, 0) == (2, 0, 8)  # the text fills it: the end
    assert bytes(buf) == b"abcdefgh"
    assert run(("abcdef\u4e2d",), None, buf, 1, 0) == (1, 6, 6)  # 3 bytes, 2 left
    assert run(("abcdef\u4e2d",), None, buf, 1, 6) == (2, 0, 3)
    assert bytes(buf[:3]) == "\u4e2d".encode()
    assert run(("\U0001f600" * 3,), None, buf, 1, 0) == (1, 2, 8)
    assert run(("\U0001f600" * 3,), None, buf, 1, 2) == (2, 0, 4)
    assert run(("a\ud800",), None, buf, 1, 0) == (2, 0, 4)
    assert bytes(buf[:4]) == b"a\xed\xa0\x80"  # the lone surrogate's three bytes
    assert run(("", "x"), b"\x00\x01", buf, 0, 0) == (3, 0, 8)  # item 0 left out
    assert run(("", "x"), b"\x00\x01", buf, 3, 0) == (4, 0, 1)


@needs_c
@settings(max_examples=examples(150), deadline=None)
@given(
    texts=st.lists(st.text(st.sampled_from(_ALPHABET), max_size=300), max_size=8),
    extra=st.lists(st.text(max_size=50), max_size=4),
    long=st.sampled_from([0, 127, 128, 129, 4093, 4097, 9000]),
    size=st.sampled_from([8, 11, 4096, 1 << 20]),
)
def test_the_digest_equals_hashlib(
    texts: list[str], extra: list[str], long: int, size: int
) -> None:
    if long:  # across the hash's blocks and the encoder's buffers
        texts = [*texts, "\u4e2d" * long, "x" * long]
    want = _reference_digest(texts, extra)
    for core in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            set_knobs(mp, ((persist, "_encoder"),), (core,))
            mp.setattr(persist, "_ENCODE_BUFFER", size)
            assert persist.text_digest(texts, extra) == want
            assert persist.text_digest(tuple(texts), tuple(extra)) == want
            mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
            assert persist.LateDigest(texts, extra).result() == want


@pytest.mark.parametrize("xxh3", [True, False])
def test_the_digest_is_the_image_format_s(xxh3: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """The format's digest, fixed: XXH3-128 (format 2; BLAKE2b-128, format 1, with the
    knob off) over, per part, the code-point lengths (int64, native order) and the
    UTF-8 (``surrogatepass``) of the join. The reference here and every path of
    persist give the digest images carry (BLAKE2b's computed before branch tidy24b
    dropped the older C feed; XXH3's by ``xxhash`` over the same bytes, open26)."""
    monkeypatch.setattr(_hash, "_XXH3", xxh3)
    texts = ["hello", "w\u00f6rld", "\ud800", "", "\u4e2d\u6587 \U0001f600"]
    extra = ["x", "\u00fc"]
    pinned = "7cd4f1d2246cf4522b07a5a07a547dc0" if xxh3 else "446970de3a2cb9f56e51e307d9859d1b"
    empty = "99aa06d3014798d86001c324468d497f" if xxh3 else "cae66941d9efbd404e4d88758ea67670"
    if sys.byteorder == "little":  # (the lengths are in native order)
        assert _reference_digest(texts, extra) == pinned
        assert _reference_digest([], []) == empty
    want = _reference_digest(texts, extra)
    for core in (True, False) if ENCODER() else (False,):
        with pytest.MonkeyPatch.context() as mp:
            set_knobs(mp, ((persist, "_encoder"),), (core,))
            assert persist.text_digest(texts, extra) == want
            h = _hash.new128()
            persist._feed(h.update, texts, extra)
            assert h.hexdigest() == want
            mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
            assert persist.LateDigest(texts, extra).result() == want


@needs_c
@settings(max_examples=examples(150), deadline=None)
@given(
    pool=st.lists(st.text(st.sampled_from(_ALPHABET), max_size=40), min_size=1, max_size=12),
    picks=st.lists(st.integers(0, 11), max_size=60),
)
def test_the_distinct_digest_equals_the_digest_of_the_distinct_texts(
    pool: list[str], picks: list[int]
) -> None:
    # repeats by value (equal strs, other objects: the table compares data) and by object
    texts = [pool[i % len(pool)] if i % 2 else "".join(pool[i % len(pool)]) for i in picks]

    def firsts(items: list[str]) -> bytes:
        seen: set[str] = set()
        return bytes(t not in seen and not seen.add(t) for t in items)  # type: ignore[func-returns-value]

    fresh = tuple(t[:1] + t[1:] + "\u0101" for t in texts)  # new strs, no hash cached yet
    assert persist._first_mask(fresh) == firsts(list(fresh))  # the table hashes the data
    assert persist._first_mask(fresh) == firsts(list(fresh))  # (now) the cached hashes
    assert persist._first_mask(tuple(texts)) == firsts(texts)
    want = _reference_digest(list(dict.fromkeys(texts)))
    for core in (True, False):
        for small in (0, 10**9):
            with pytest.MonkeyPatch.context() as mp:
                set_knobs(mp, ((persist, "_encoder"),), (core,))
                mp.setattr(persist, "_LATE_MIN_TEXTS", small)
                mp.setattr(persist, "_ENCODE_BUFFER", 9)
                assert persist.LateDigest(texts, distinct=True).result() == want


@needs_c
def test_the_digest_leaves_other_items_to_the_caller() -> None:
    class Sub(str):
        pass

    texts = ["a", Sub("b"), "c"]
    buf = bytearray(64)
    assert persist._encode_run(tuple(texts), None, buf, 0, 0) is None
    assert persist._encode_run(tuple(texts), None, buf, 4, 0) is None  # in the UTF-8
    assert persist._encode_run(("a", 1), None, buf, 0, 0) is None  # type: ignore[arg-type]
    assert persist._encode_run(("a", 1), b"\x01\x00", buf, 0, 0) == (4, 0, 9)  # skipped
    assert persist._first_mask(tuple(texts)) is None
    want = _reference_digest(["a", "b", "c"])
    assert persist.text_digest(texts) == want  # hashed the way before
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        assert persist.LateDigest(texts).result() == want
        assert persist.LateDigest([*texts, "a"], distinct=True).result() == want
    assert persist.text_digest([], []) == _reference_digest([], [])


@needs_c
def test_the_encoder_refuses_bad_arguments() -> None:
    buf = bytearray(16)
    for args, error in (
        ((["a"], None, buf, 0, 0), TypeError),  # a list
        ((("a",), bytearray(b"\x01"), buf, 0, 0), TypeError),
        ((("a",), None, bytes(16), 0, 0), TypeError),
        ((("a",), None, buf, 0.0, 0), TypeError),
        ((("a",), None, buf, 0, None), TypeError),
        ((("a",), b"", buf, 0, 0), ValueError),  # the mask's length
        ((("a",), None, bytearray(7), 0, 0), ValueError),
        ((("a",), None, buf, -1, 0), ValueError),
        ((("a",), None, buf, 3, 0), ValueError),  # past the end
        ((("a",), None, buf, 0, 1), ValueError),  # an offset in the lengths
        ((("a",), None, buf, 2, 1), ValueError),  # an offset at the end
        ((("a",), None, buf, 1, -1), ValueError),
    ):
        with pytest.raises(error, match="texts_encode"):
            persist._encode_run(*args)  # refused in Python
        with pytest.raises(error, match="texts_encode"):
            wo.texts_encode(*args)  # and in C
    with pytest.raises(ValueError, match="offset"):
        wo.texts_encode(("a",), None, buf, 1, 2)  # past the text's end (checked in C)
    with pytest.raises(ValueError, match="offset"):
        wo.texts_encode((1,), None, buf, 1, 1)  # an offset into a non-str
    with pytest.raises(TypeError):
        wo.texts_encode(("a",), None, buf, 0)
    for bad in (["a"], {"a"}, None):
        with pytest.raises(TypeError):
            persist._first_mask(bad)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            wo.texts_first(bad)
    view = memoryview(buf)  # an exported buffer: written through, not resized
    assert wo.texts_encode(("ab",), None, buf, 1, 0) == (2, 0, 2)
    assert bytes(view[:2]) == b"ab"
    view.release()


@needs_c
def test_a_stopped_digest_leaves_no_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    texts = [str(i) * 50 for i in range(20000)]
    late = persist.LateDigest(texts)
    late.stop()
    late.stop()
    _no_threads_left()
    late = persist.LateDigest(texts)
    texts.clear()  # the thread hashes its own copy
    assert late.result() == _reference_digest([str(i) * 50 for i in range(20000)])


# -- the keys' pass -------------------------------------------------------------------


@needs_c
@settings(max_examples=examples(50), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(0, 150), start=st.integers(0, 160))
def test_next_keyed_stops_where_the_loop_must_look(seed: int, n: int, start: int) -> None:
    rng = random.Random(seed)
    rows: list[Any] = [
        (s, e if rng.random() < 0.2 else attrs.evolve(e, key=None)) for s, e in _rows(seed, n)
    ]
    for _ in range(rng.randrange(3)):  # rows that are not plain 2-tuples
        if rows:
            i = rng.randrange(len(rows))
            rows[i] = rng.choice([list(rows[i]), (*rows[i], 0), (rows[i][0], "entry")])
    want = next(
        (
            i
            for i in range(start, len(rows))
            if not (type(rows[i]) is tuple and len(rows[i]) == 2)
            or type(rows[i][1]) is not type(_rows(0, 1)[0][1])
            or rows[i][1].key is not None
        ),
        len(rows),
    )
    assert wo.next_keyed(rows, start) == max(want, min(start, len(rows)))


@needs_c
def test_bulk_loadable_is_the_same_with_the_keys_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = _rows(4, 300)
    assert any(e.key is not None for _, e in rows)
    twice = [*rows, (10**9, rows[[e.key for _, e in rows].index(next(
        e.key for _, e in rows if e.key is not None))][1])]  # fmt: skip
    keyless = [(s, attrs.evolve(e, key=None)) for s, e in rows]
    for on in (True, False):
        monkeypatch.setattr(state_module, "_KEYS_C", on)
        state = state_module.MemoryState(
            capacity=None, half_life=3600.0, scorer=WordOverlapScorer()
        )
        assert state._bulk_loadable(rows) is True
        assert state._bulk_loadable(twice) is False  # one (namespace, key) twice
        assert state._bulk_loadable(keyless) is True
        # the reader's list subclass (with the folds) is read the same way
        assert state._bulk_loadable(FoldedRows(twice, b"")) is False
        assert state._bulk_loadable(FoldedRows(keyless, b"")) is True
    calls: list[int] = []
    real = state_module._next_keyed_c
    assert real is not None

    def spy(rows: Any, start: int) -> int:
        calls.append(start)
        return real(rows, start)

    monkeypatch.setattr(state_module, "_KEYS_C", True)
    monkeypatch.setattr(state_module, "_next_keyed_c", spy)
    state._bulk_loadable(FoldedRows(keyless, b""))
    assert calls == [0]  # one call took every row


@needs_c
def test_next_keyed_refuses_bad_arguments() -> None:
    with pytest.raises(TypeError):
        wo.next_keyed((), 0)
    with pytest.raises(TypeError):
        wo.next_keyed([], 0.0)
    with pytest.raises(TypeError):
        wo.next_keyed([])
    with pytest.raises(ValueError, match="start"):
        wo.next_keyed([], -1)
    assert wo.next_keyed([], 5) == 0
