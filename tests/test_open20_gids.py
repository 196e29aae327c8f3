"""Branch open20: the restore's group numbers from the digest's thread, the numbering's
rows of bits prepared ahead, the reader's id check with its slots prefetched (issue #20).

``wordoverlap.persist._GIDS_BESIDE``: the texts' digest thread (``LateDigest(...,
distinct=True, groups=True)``) finds each record's group number with the core's
``texts_groups`` (the GIL released) before it hashes, and the restore takes the
distinct texts and the numbers from it instead of building the group map with
``group_texts`` on the open's thread. ``wordoverlap.persist._ROWS_AHEAD``: the
numbering's arrays and the masks' rows of bits made by the prepared steps (image data
only) instead of by the restore. ``sqlite_format._ID_PREFETCH``: the split reader's id
check holding each id back for 16 rows, its table slot prefetched. With each knob on and
off (and with the early
digest, the group table and the digest without the GIL on and off): the same restored
state as a rebuild, the same refusals and errors; ``texts_groups`` against a reference
written out here.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._errors import StorageError
from actormem._index import kernels, persist
from actormem._index.images import restore_index
from actormem._index.wordoverlap import knobs
from actormem._index.wordoverlap import persist as wo_persist
from actormem._storage import sqlite_format
from tests.strategies import examples

from .setups import (
    RESTORE_CASES,
    no_encoder,
    restores_as_rebuilt,
    stale_and_foreign_refused_alike,
)
from .test_index_image import _file_rows, _image, _live, _loaded, _messy
from .test_open13_split import _ids_file, _read
from .test_open_beside import _no_threads_left
from .test_open_fast import _assert_same

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "texts_groups"),
    reason="the word overlap core is not built",
)

KNOBS = (
    (wo_persist, "_GIDS_BESIDE"),
    (wo_persist, "_ROWS_AHEAD"),
    (wo_persist, "_DIGEST_EARLY"),
    (persist, "_encoder"),  # off: the digest as a build without the core makes it
    (knobs, "_GROUP_TABLE"),
)


def _reference_groups(texts: list[str]) -> tuple[bytes, list[int]]:
    """Each text's first-appearance flag and its group number, written out."""
    numbers: dict[str, int] = {}
    first = bytearray()
    gids = []
    for text in texts:
        if text in numbers:
            first.append(0)
        else:
            numbers[text] = len(numbers)
            first.append(1)
        gids.append(numbers[text])
    return bytes(first), gids


def _copies(texts: list[str], rng: random.Random) -> list[str]:
    """``texts`` where some items are new strs equal to an earlier one (equal by value,
    not by object; their hashes not cached)."""
    out = []
    for text in texts:
        if out and rng.random() < 0.4:
            text = "".join(list(out[rng.randrange(len(out))]))  # a new object
        out.append(text)
    return out


# -- the core's texts_groups --------------------------------------------------------


_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from("aAb \u00e9\U0001f600"),
    max_size=12,
)


@needs_c
@settings(max_examples=examples(200), deadline=None)
@given(texts=st.lists(_TEXT, max_size=60), seed=st.integers(0, 2**32), hashed=st.booleans())
def test_texts_groups_numbers_texts_by_first_appearance(
    texts: list[str], seed: int, hashed: bool
) -> None:
    texts = _copies(texts, random.Random(seed))
    if hashed:  # every hash cached: the table uses them
        for t in texts:
            hash(t)
    own = tuple(texts)
    got = wo.texts_groups(own)
    assert got is not None
    mask, raw = got
    want_mask, want_gids = _reference_groups(texts)
    assert mask == want_mask
    assert mask == wo.texts_first(own)  # the mask the digest hashes by
    assert list(memoryview(raw).cast("q")) == want_gids


@needs_c
def test_texts_groups_refuses_what_it_cannot_read() -> None:
    with pytest.raises(TypeError):
        wo.texts_groups(["a", "b"])
    with pytest.raises(TypeError):
        wo.texts_groups("ab")

    class Sub(str):
        pass

    assert wo.texts_groups(("a", Sub("b"))) is None
    assert wo.texts_groups(("a", 3)) is None
    assert wo.texts_groups(()) == (b"", b"")
    with pytest.raises(TypeError):
        persist._groups_of(["a"])  # type: ignore[arg-type]


# -- LateDigest's groups ------------------------------------------------------------


@needs_c
@pytest.mark.parametrize("n", [0, 1, 7, 3000])
def test_late_digest_groups_beside_its_digest(n: int) -> None:
    rng = random.Random(n)
    texts = _copies([f"text {rng.randrange(max(1, n // 2))} \u00e9" for _ in range(n)], rng)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)  # the thread for any size
        late = persist.LateDigest(texts, distinct=True, groups=True)
        got = late.groups()
        assert late.result() == persist.text_digest(list(dict.fromkeys(texts)))
    assert got is not None
    mask, raw = got
    want_mask, want_gids = _reference_groups(texts)
    assert mask == want_mask
    assert list(memoryview(raw).cast("q")) == want_gids
    _no_threads_left()


@needs_c
def test_late_digest_without_groups_gives_none_at_once() -> None:
    texts = [f"t{i % 50}" for i in range(200)]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        for kwargs in ({"distinct": True}, {"groups": True}, {"distinct": False}):
            late = persist.LateDigest(texts, **kwargs)  # type: ignore[arg-type]
            assert late.groups() is None
            late.stop()
        # a small list (no thread), or the digest without the core: the caller groups
        late = persist.LateDigest(texts, distinct=True, groups=True)
        assert late.groups() is not None
        late.stop()
        mp.setattr(persist, "_LATE_MIN_TEXTS", 10**6)
        late = persist.LateDigest(texts, distinct=True, groups=True)
        assert late.groups() is None
        assert late.result() == persist.text_digest(list(dict.fromkeys(texts)))
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        mp.setattr(persist, "_encoder", no_encoder)
        late = persist.LateDigest(texts, distinct=True, groups=True)
        assert late.groups() is None
        assert late.result() == persist.text_digest(list(dict.fromkeys(texts)))
    _no_threads_left()


@needs_c
def test_late_digest_groups_of_a_list_not_all_str() -> None:
    class Sub(str):
        pass

    texts = ["a", Sub("b"), "a"] * 100
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        late = persist.LateDigest(texts, distinct=True, groups=True)
        assert late.groups() is None  # the restore groups them itself
        assert late.result() == persist.text_digest(list(dict.fromkeys(texts)))
    _no_threads_left()


@needs_c
def test_a_stopped_late_digest_still_answers_groups_and_leaves_no_thread() -> None:
    texts = [f"text {i % 997}" for i in range(300_000)]
    late = persist.LateDigest(texts, distinct=True, groups=True)
    late.stop()
    # whatever the thread reached, groups() returns (the numbers, or None)
    got = late.groups()
    assert got is None or got[0] == _reference_groups(texts)[0]
    _no_threads_left()
    assert not [t for t in threading.enumerate() if t.name == "actormem digest"]


# -- the restore ----------------------------------------------------------------------


@needs_c
@settings(max_examples=examples(20), deadline=None)
@given(**RESTORE_CASES)
def test_each_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    def groups_as_new(restored: Any, rebuilt: Any, mp: pytest.MonkeyPatch, on: Any) -> None:
        assert restored.index is not rebuilt.index
        assert type(restored.index._e.groups) is type(_loaded_groups(mp, on))

    restores_as_rebuilt(seed, n, ops, dups, KNOBS, groups_as_new, copies=True)


def _loaded_groups(mp: pytest.MonkeyPatch, on: tuple[bool, ...]) -> Any:
    """The group map type a new numbering gets with these knobs."""
    from actormem._index.wordoverlap.numbering import _Numbering

    return _Numbering(64).groups


@needs_c
def test_stale_and_foreign_images_give_the_same_error_with_the_knob_on_and_off() -> None:
    stale_and_foreign_refused_alike(KNOBS)


@needs_c
def test_the_restore_takes_the_threads_numbers_and_builds_no_group_map(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _messy(WordOverlapScorer, 9, 60, 10)
    rows = _file_rows(state)
    parts = _image(state)
    monkeypatch.setattr(persist, "_LATE_MIN_TEXTS", 0)
    calls: list[int] = []
    real = wo_persist._group_map

    def counted(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(wo_persist, "_group_map", counted)
    restored = _loaded(WordOverlapScorer, rows, parts)
    assert calls == []  # the numbers came from the digest's thread
    monkeypatch.setattr(wo_persist, "_GIDS_BESIDE", False)
    again = _loaded(WordOverlapScorer, rows, parts)
    assert calls == [1]
    _assert_same(restored, again)
    _no_threads_left()


@needs_c
def test_a_preparation_stepped_ahead_brings_its_numbering(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _messy(WordOverlapScorer, 11, 70, 20)
    rows = _file_rows(state)
    parts = _image(state)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    records = _live(rebuilt)
    got = {}
    for ahead in (True, False):
        monkeypatch.setattr(wo_persist, "_ROWS_AHEAD", ahead)
        prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
        assert prep is not None
        while prep.step():
            pass
        assert (prep.numbering is not None) is ahead
        restored = restore_index(WordOverlapScorer().make_index(), parts, records, prep)
        if ahead:
            assert restored._e is prep.numbering  # taken, not made again
        got[ahead] = restored._e
    e, want = got[True], got[False]
    assert e.n == want.n == e.masked == want.masked
    assert e.rows is not None
    assert want.rows is not None
    assert (e.rows == want.rows).all()
    assert (e.rowcount == want.rowcount).all()
    for i in (0, 1):
        assert (e.masks[i] == want.masks[i]).all()
    assert (e.maxrel == want.maxrel).all()
    assert (e.minseq == want.minseq).all()


@needs_c
def test_a_preparation_for_another_group_count_is_not_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _messy(WordOverlapScorer, 12, 50, 10)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    prep = wo_persist.Prepared(WordOverlapScorer().make_index(), parts, len(records) + 1)
    while prep.step():
        pass
    # the lists' or masks' check fails ahead for that count: kept, and the restore
    # (which compares the group count first) does not use this preparation
    restored = restore_index(WordOverlapScorer().make_index(), parts, records, prep)
    assert restored._e is not prep.numbering


# -- the reader's id check, its slots prefetched -------------------------------------


needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None or not hasattr(sqlite_format._crows, "id_prefetch"),
    reason="the compiled row reader is not built",
)


def _id_lists() -> list[list[int]]:
    """Ids with and without one twice, where the held-back ids matter: within the last
    16 rows, both in the held-back window, at every distance up to 20, fewer rows than
    the window, the zero id."""
    base = [(k * 0x9E3779B97F4A7C15 + 1) % 2**128 for k in range(1, 301)]
    out = [base, base[:1], base[:5], [0, *base[:40]]]
    n = len(base)
    for a, b in [(n - 2, n - 1), (n - 17, n - 1), (n - 16, n - 2), (0, 1), (0, n - 1)]:
        ids = list(base)
        ids[b] = ids[a]
        out.append(ids)
    for gap in range(1, 21):
        ids = list(base)
        ids[100 + gap] = ids[100]
        out.append(ids)
    out.append([*base[:3], base[1]])  # a short file, all of it held back
    out.append([0, *base[:20], 0])  # the zero id twice
    return out


@needs_reader
@pytest.mark.parametrize("on", [True, False])
def test_the_held_back_id_check_finds_every_id_twice(tmp_path: Path, on: bool) -> None:
    was = sqlite_format._crows.id_prefetch(on)
    try:
        for k, ids in enumerate(_id_lists()):
            out: list[Any] = []
            rows = _read(_ids_file(tmp_path / f"i{k}.db", ids), True, ids_out=out)
            assert [e._id for _, e in rows] == ids
            assert out == [len(set(ids)) == len(ids)], k
    finally:
        sqlite_format._crows.id_prefetch(was)


@needs_reader
@pytest.mark.parametrize("on", [True, False])
def test_read_file_refuses_an_id_twice_in_the_last_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, on: bool
) -> None:
    monkeypatch.setattr(sqlite_format, "_ID_PREFETCH", on)
    ids = [(k * 0x9E3779B97F4A7C15 + 7) % 2**128 for k in range(1, 801)]
    ids[-1] = ids[-3]
    path = tmp_path / "t.db"
    _ids_file(path, ids)
    with pytest.raises(StorageError, match=r"id .* appears twice \(seq 800\)"):
        sqlite_format.read_file(str(path), image=False)
    assert sqlite_format._crows.id_prefetch(True) is on  # the read set the knob's value


@needs_reader
def test_id_prefetch_refuses_a_non_bool() -> None:
    with pytest.raises(TypeError):
        sqlite_format._crows.id_prefetch(1)
    assert sqlite_format._crows.id_prefetch(True) is True
