"""Branch open27: the image's tokens acquired into the vocabulary in one C call
(issue #20, item 5).

``wordoverlap.persist._VOCAB_ALL``: ``Prepared`` (the image-only part of the
word-overlap restore, run ahead of the rows) fills the new index's ``SubstringVocab``
with ``ccore.acquire_all(vocab, set(tokens))`` instead of ``add_text`` on the joined
tokens, which made a posting list per token only to drop it and took the slow acquire.
Required: the very same vocabulary (items, ids, reference counts, the gram dict's keys in
order with their lists, the ``_sub`` dict's keys in order with each set's iteration
order), with every setting of the compiled adds' knobs; the same restored state as a
rebuild with the knob on and off; a stale or foreign image refused alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._index import kernels, persist
from actormem._index.images import ImageError, restore_index
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore, knobs
from actormem._index.wordoverlap import persist as wo_persist
from actormem._storage import sqlite_format
from tests.strategies import examples

from .setups import RESTORE_CASES, restores_as_rebuilt, stale_and_foreign_refused_alike
from .test_decode_rows import _same_entries
from .test_index_image import _file_rows, _image, _live, _loaded, _messy
from .test_open13_split import _file, _ids_file, _read, _texts
from .test_open_beside import _no_threads_left

wo = kernels._wo
needs_c = pytest.mark.skipif(
    wo is None or not hasattr(wo, "acquire_all"), reason="the word overlap core is not built"
)

KNOBS = ((wo_persist, "_VOCAB_ALL"),)

#: The compiled adds' knobs acquire_all reads (through ccore._add_flags()).
ADD_KNOBS = ("_ACQUIRE_FAST", "_UNTRACK", "_GRAM_STRS")


def _shape(v: SubstringVocab) -> tuple[Any, ...]:
    """Everything of ``v`` that an order or a value could differ in."""
    return (
        list(v._ids.items()),
        list(v._items.items()),
        list(v._refs.items()),
        [(g, list(lst)) for g, lst in v._grams.items()],
        [(k, list(s)) for k, s in v._sub.items()],
        list(v._dead.items()),
        sorted(v._active),
        v._next_id,
    )


def _by_add_text(tokens: list[str], before: list[str]) -> SubstringVocab:
    """The path before: ``before`` acquired one by one, then ``add_text`` over the
    joined tokens (as ``Prepared`` called it), its posting dict dropped."""
    v = SubstringVocab()
    for tok in before:
        v.acquire(tok)
    ccore.add_text({}, " ".join(tokens), 0, v)
    return v


# Tokens as the tokenizer leaves them (lower case, no whitespace): short ones (the 1/2
# character items and their parts), ones sharing grams, non-ASCII ones.
_TOKEN = st.text(alphabet=st.sampled_from("abcdeé\u4e2d\U0001f600xyz0"), min_size=1, max_size=9)


@needs_c
@settings(max_examples=examples(60), deadline=None)
@given(
    tokens=st.lists(_TOKEN, min_size=1, max_size=60, unique=True),
    before=st.lists(_TOKEN, max_size=8),
    add_knobs=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_acquire_all_gives_add_texts_vocabulary(
    tokens: list[str], before: list[str], add_knobs: tuple[bool, bool, bool]
) -> None:
    with pytest.MonkeyPatch.context() as mp:
        for name, on in zip(ADD_KNOBS, add_knobs, strict=True):
            mp.setattr(knobs, name, on)
        want = _by_add_text(tokens, before)
        got = SubstringVocab()
        for tok in before:
            got.acquire(tok)
        fresh = ccore.acquire_all(got, set(tokens))
    assert fresh == len(set(tokens) - set(before))
    assert _shape(got) == _shape(want)
    got._check()
    # and each lookup answers as the Python vocabulary's (acquire one by one)
    ref = SubstringVocab()
    for tok in before:
        ref.acquire(tok)
    for tok in set(tokens):
        ref.acquire(tok)
    for word in {*tokens, *(t[:2] for t in tokens), *(t[1:4] for t in tokens)}:
        assert sorted(got.lookup(word)) == sorted(ref.lookup(word))


@needs_c
def test_acquire_all_takes_a_list_in_its_order_and_counts_repeats() -> None:
    toks = ["abc", "bcd", "abc", "x", "ab"]
    got = SubstringVocab()
    assert ccore.acquire_all(got, toks) == 4
    want = SubstringVocab()  # the compiled acquire, one token at a time, in the list's order
    for tok in toks:
        ccore.add_text({}, tok, 0, want)
    assert _shape(got) == _shape(want)
    assert got._refs == {0: 2}  # "abc" twice: two users
    assert list(got._ids) == ["abc", "bcd", "x", "ab"]


@needs_c
def test_acquire_all_refuses_bad_arguments() -> None:
    v = SubstringVocab()
    with pytest.raises(TypeError):
        ccore.acquire_all(object(), {"abc"})  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ccore.acquire_all(v, ("abc",))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ccore.acquire_all(v, frozenset({"abc"}))  # type: ignore[arg-type]
    assert len(v) == 0
    with pytest.raises(TypeError):
        ccore.acquire_all(v, ["abc", 3, "bcd"])  # type: ignore[list-item]
    assert list(v._ids) == ["abc"]  # the items before it acquired
    with pytest.raises(ValueError, match="flags"):
        wo.acquire_all(v, ["xyz"], 64)
    with pytest.raises(TypeError):
        wo.acquire_all(v, ("xyz",), 0)
    assert list(v._ids) == ["abc"]


def test_acquire_all_without_the_core_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "wo_core", lambda: None)
    v = SubstringVocab()
    assert ccore.acquire_all(v, {"abc"}) is None
    assert len(v) == 0


@needs_c
@pytest.mark.parametrize("seed", [3, 8])
def test_a_preparation_builds_the_same_vocabulary_with_the_knob_on_and_off(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    state = _messy(WordOverlapScorer, seed, 80, 20)
    parts = _image(state)
    shapes = {}
    spy = mock.Mock(wraps=ccore.add_text)
    monkeypatch.setattr(ccore, "add_text", spy)
    for on in (True, False):
        monkeypatch.setattr(wo_persist, "_VOCAB_ALL", on)
        prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
        assert prep is not None
        prep.finish()
        assert prep.tokens
        shapes[on] = _shape(prep.index._vocab)
        prep.index._vocab._check()
    assert shapes[True] == shapes[False]
    assert spy.call_count == 1  # only the path before calls add_text


@needs_c
@settings(max_examples=examples(15), deadline=None)
@given(**RESTORE_CASES)
def test_the_knob_restores_the_same_state_as_a_rebuild(
    seed: int, n: int, ops: int, dups: bool
) -> None:
    def vocab_as_rebuilt(restored: Any, rebuilt: Any, mp: pytest.MonkeyPatch, on: Any) -> None:
        a, b = restored.index._vocab, rebuilt.index._vocab
        a._check()
        assert set(a._ids) == set(b._ids)
        for tok in a._ids:
            assert sorted(a._items[i] for i in a.lookup(tok[:3])) == sorted(
                b._items[i] for i in b.lookup(tok[:3])
            )

    restores_as_rebuilt(seed, n, ops, dups, KNOBS, vocab_as_rebuilt, copies=True)
    _no_threads_left()


@needs_c
def test_stale_and_foreign_images_give_the_same_error_with_the_knob_on_and_off() -> None:
    stale_and_foreign_refused_alike(KNOBS)


# -- the prepared steps, short; the reader's thread reads on ---------------------------


def _check_lists_reference(ends: Any, values: Any, bound: int) -> str | None:
    """The check as one pass (check_lists before branch open27): its message, or None."""
    if len(ends) == 0 or ends[0] != 0 or ends[-1] != len(values) or np.any(np.diff(ends) <= 0):
        return "p: list offsets out of order or range"
    if len(values) and (int(values.min()) < 0 or int(values.max()) >= bound):
        return f"p: a value outside [0, {bound})"
    if len(values) > 1:
        steps = np.diff(values)
        steps[ends[1:-1] - 1] = 1
        if int(steps.min()) <= 0:
            return "p: a list out of order or with repeats"
    return None


@settings(max_examples=examples(300), deadline=None)
@given(
    lists=st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=5, unique=True), max_size=7),
    sort=st.booleans(),
    poke=st.none() | st.tuples(st.integers(0, 40), st.integers(-2, 13)),
    bump=st.none() | st.integers(0, 8),
    bound=st.integers(1, 13),
    step=st.sampled_from([1, 2, 3, 5, 8, 1 << 20]),
)
def test_check_lists_in_steps_gives_the_one_pass_answer(
    lists: list[list[int]],
    sort: bool,
    poke: tuple[int, int] | None,
    bump: int | None,
    bound: int,
    step: int,
) -> None:
    values = [v for lst in lists for v in (sorted(lst) if sort else lst)]
    ends = [0]
    for lst in lists:
        ends.append(ends[-1] + len(lst))
    if poke is not None and values:
        values[poke[0] % len(values)] = poke[1]
    if bump is not None:
        ends[bump % len(ends)] += 1
    e, v = np.array(ends, np.int64), np.array(values, np.int32)
    want = _check_lists_reference(e, v, bound)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_CHECK_STEP", step)
        try:
            persist.check_lists(e, v, bound, "p")
            got = None
        except ImageError as exc:
            got = str(exc)
        steps = persist.check_lists_steps(e, v, bound, "p")
        taken = 0
        try:
            for _ in steps:
                taken += 1
            stepped = None
        except ImageError as exc:
            stepped = str(exc)
    assert got == stepped == want
    if want is None and len(v) > 2 * step:
        assert taken >= 2  # it did yield between parts


@needs_c
@pytest.mark.parametrize("small", [True, False])
def test_the_short_prepared_steps_give_the_same_preparation(
    monkeypatch: pytest.MonkeyPatch, small: bool
) -> None:
    state = _messy(WordOverlapScorer, 13, 80, 20)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, _file_rows(state), None))
    # the steps counted here are the open's thread's (open29's thread beside takes the
    # checks and rows of bits: tests/test_open29_prep.py)
    monkeypatch.setattr(wo_persist, "_PREP_BESIDE", False)
    got = {}
    for short in (True, False):
        if short:  # a step per 2 tokens, lists, 64 groups, 8 values
            monkeypatch.setattr(wo_persist, "_VOCAB_STEP", 2 if small else 2048)
            monkeypatch.setattr(wo_persist, "_PREP_LISTS", 2 if small else 4096)
            monkeypatch.setattr(wo_persist, "_PREP_ROWS", 64 if small else 65536)
            monkeypatch.setattr(persist, "_CHECK_STEP", 8 if small else 1 << 20)
        else:  # the steps before branch open27
            monkeypatch.setattr(wo_persist, "_VOCAB_ALL", False)
            monkeypatch.setattr(wo_persist, "_PREP_LISTS", 16384)
            monkeypatch.setattr(wo_persist, "_PREP_ROWS", 1 << 40)
            monkeypatch.setattr(persist, "_CHECK_STEP", 1 << 40)
        prep = wo_persist.prepare(WordOverlapScorer().make_index(), parts)
        assert prep is not None
        steps = 1
        while prep.step():
            steps += 1
        assert prep.error is None
        e = prep.numbering
        assert e is not None
        got[short] = (
            steps,
            _shape(prep.index._vocab),
            {t: list(a) for t, a in prep.post.items()},
            e.rows.copy(),
            e.rowcount.copy(),
        )
        restored = restore_index(WordOverlapScorer().make_index(), parts, records, prep)
        assert restored._e is e
    (n_short, *short_parts), (n_long, *long_parts) = got[True], got[False]
    if small:
        assert n_short > n_long + 10
    for a, b in zip(short_parts, long_parts, strict=True):
        if isinstance(a, np.ndarray):
            assert (a == b).all()
        else:
            assert a == b


@pytest.mark.skipif(sqlite_format._crows is None, reason="the compiled row reader is not built")
def test_chunks_ahead_refuses_bad_counts_and_reads_the_same_rows(tmp_path: Path) -> None:
    crows: Any = sqlite_format._crows
    was = crows.chunks_ahead(64)
    try:
        for bad, error in (
            (1, ValueError),
            (4097, ValueError),
            (True, TypeError),
            (8.0, TypeError),
        ):
            with pytest.raises(error, match="chunks_ahead"):
                crows.chunks_ahead(bad)
        assert crows.chunks_ahead(64) == 64
        uri = _file(tmp_path / "c.db", _texts(3000))
        reads = {}
        for n in (2, 8, 64, 4096):
            crows.chunks_ahead(n)
            reads[n] = sqlite_format._read_rows_c(uri)
            assert reads[n] is not None
        for n in (2, 8, 4096):
            _same_entries(reads[n], reads[64])
        # the knob: set at each read
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sqlite_format, "_CHUNKS_AHEAD", 8)
            assert sqlite_format._read_rows_c(uri) is not None
            assert crows.chunks_ahead(8) == 8
        waited = crows.feed_wait_s()
        assert isinstance(waited, float)
        assert waited >= 0.0
    finally:
        crows.chunks_ahead(was)


@pytest.mark.skipif(sqlite_format._crows is None, reason="the compiled row reader is not built")
def test_the_id_table_on_huge_pages_finds_the_same_ids_twice(tmp_path: Path) -> None:
    """40,000 ids: the table grows past 2 MiB (131,072 slots), where id_huge takes the
    aligned, madvised memory; an id twice at the start, in the middle, at the end, or none."""
    crows: Any = sqlite_format._crows
    n = 40_000
    base = [(k * 0x9E3779B97F4A7C15 + 7) % 2**128 for k in range(1, n + 1)]
    cases = {"none": base}
    for name, (i, j) in {"start": (1, 0), "middle": (n // 2, 17), "end": (n - 1, n - 3)}.items():
        ids = list(base)
        ids[i] = ids[j]
        cases[name] = ids
    was = crows.id_huge(True)
    try:
        for name, ids in cases.items():
            uri = _ids_file(tmp_path / f"{name}.db", ids)
            got = {}
            for on in (True, False):
                crows.id_huge(on)
                out: list[Any] = []
                rows = _read(uri, True, ids_out=out)
                assert len(rows) == n
                got[on] = out
            assert got[True] == got[False] == [name == "none"], name
        with pytest.raises(TypeError, match="id_huge"):
            crows.id_huge(1)
        with pytest.MonkeyPatch.context() as mp:  # the knob, set at each read
            mp.setattr(sqlite_format, "_ID_HUGE", False)
            assert sqlite_format._read_rows_c(uri) is not None
            assert crows.id_huge(True) is False
    finally:
        crows.id_huge(was)
