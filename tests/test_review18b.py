"""Review 18b of store10 and bm25q5's C (``_cwordoverlap.c``'s ``store_inserts`` /
``record_setup`` / ``add_groups_new`` / the posting growth, ``_cbm25.c``'s length codes).

* ``store_inserts`` documents RuntimeError before ``store_setup``; after
  ``record_setup`` alone (``ccore.add_groups``' setup, which fixes the record and entry
  classes but not the namespace list, ``NEVER`` or the journal's kind) it went on, and
  an entry whose id had a dead record compared ``died`` with a NULL ``NEVER``
  (SystemError "bad argument to internal function"). Checked on a private copy of the
  extension (fresh statics: the package's own copy is set up at import).
* What held up, kept as regression tests: the walk over length codes finds every group
  at or above theta with its exact score for the BM25 parameters' edges (k1 0, tiny,
  huge; b 0, 1, tiny; lengths 0), scalar and eight-lane; a posting list with an
  exported buffer refuses the add alike with ``knobs._GROW_DIRECT`` on and off; older
  views read the same records after batches with re-stored dead ids and vacuums, the
  C inserts on and off.

stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import importlib.util
import random
import shutil
import uuid
from array import array
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry
from actormem._engine import state as state_module
from actormem._index import kernels
from actormem._index.bm25.postings import length_codes
from actormem._index.entrycols import new_entry_columns
from actormem._index.substring import SubstringVocab
from actormem._index.wordoverlap import ccore
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._record import Record

from . import test_bm25_length_codes as codes_tests
from .strategies import examples
from .test_store10 import BASE, _full, _new, _plain, _set_knobs

wo_core = pytest.mark.skipif(
    state_module._store_inserts_c is None, reason="the word-overlap core is not built"
)
bm25_core = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

_REC_SLOTS = ccore._RECORD_SLOTS


def _fresh_core(tmp_path: Path) -> Any:
    """A private copy of the word-overlap core: its own statics, nothing set up."""
    src = Path(kernels._wo.__file__)  # type: ignore[union-attr]
    copy = tmp_path / src.name
    shutil.copy(src, copy)
    spec = importlib.util.spec_from_file_location(src.name.split(".")[0], copy)
    assert spec is not None
    assert spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod is not kernels._wo
    return mod


@wo_core
def test_store_inserts_needs_store_setup_after_record_setup_alone(tmp_path: Path) -> None:
    wo = _fresh_core(tmp_path)
    cols = new_entry_columns()
    empty = ([], 0, 1, {}, {}, {}, [], [], [], 8, {}, {}, set(), None, [], [], False, cols)
    with pytest.raises(RuntimeError, match="store_setup"):
        wo.store_inserts(*empty)
    wo.record_setup(
        Record, tuple(Record.__dict__[n] for n in _REC_SLOTS),
        MemoryEntry, tuple(MemoryEntry.__dict__[n] for n in ccore._ENTRY_SLOTS.split()),
    )  # fmt: skip
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="x")
    old = Record(entry, 1, 1)
    old.died = 2  # a dead record of the id: the insert compares died with NEVER
    by_id = {entry._id: old}
    args = [[entry], 0, 3, by_id, {}, {1.0: 0}, [[old]], [[5]], [5], 8, {}, {}, set(), None]
    run: list[Any] = []
    with pytest.raises(RuntimeError, match="store_setup"):
        wo.store_inserts(*args, run, [], False, cols)
    assert run == []
    assert by_id == {entry._id: old}


# --------------------------------------------------------------------------- held up


@bm25_core
@given(
    k1=st.sampled_from([0.0, 5e-324, 1e-300, 1.2, 1e300, 1.7e308]),
    b=st.sampled_from([0.0, 5e-324, 1e-300, 0.75, 1.0]),
    seed=st.integers(0, 2**32 - 1),
    top=st.sampled_from([128, 40_000]),
    theta=st.sampled_from([0.0, 0.3, 1.0, 2.5]),
    simd=st.booleans(),
)
@settings(max_examples=examples(60), deadline=None)
def test_codes_bound_at_the_parameters_edges(
    k1: float, b: float, seed: int, top: int, theta: float, simd: bool
) -> None:
    saved = codes_tests.K1, codes_tests.B
    codes_tests.K1, codes_tests.B = k1, b
    try:
        with np.errstate(all="ignore"):
            lengths, terms, parts = codes_tests._lists(seed, 2_000, 3, top)
    finally:
        codes_tests.K1, codes_tests.B = saved
    lengths[::7] = 0  # empty documents among them
    codes = length_codes(lengths)
    found = []
    for use in (None, codes):
        got: dict[int, float] = {}
        for nums, scores, _, _ in codes_tests._steps(
            terms, lengths, parts, 64, theta, 1 << 20, simd, use
        ):
            got.update(zip(nums, np.frombuffer(scores).tolist(), strict=True))
        found.append({num: s for num, s in got.items() if s >= theta})
    assert found[0] == found[1]


@wo_core
@pytest.mark.parametrize("held", [None, "full", "room"])
def test_an_exported_posting_list_refuses_the_add_alike(held: str | None) -> None:
    def add(direct: bool) -> tuple[Any, ...]:
        wo_knobs._GROW_DIRECT = direct
        try:
            post = {"full": array("i", [0]), "room": array("i", [0, 1, 2, 3])}
            vocab = SubstringVocab()
            for tok in post:
                vocab.acquire(tok)
            view = None if held is None else memoryview(post[held])
            try:
                ccore.add_text_cached(post, "full room", 5, vocab, ccore.token_cache(), 0)
                error = None
            except BufferError as exc:
                error = str(exc)
            del view
            return error, {t: (lst.tolist(), lst.buffer_info()[1]) for t, lst in post.items()}
        finally:
            wo_knobs._GROW_DIRECT = True

    on, off = add(True), add(False)
    assert on == off
    assert (on[0] is None) == (held is None)


@wo_core
@pytest.mark.parametrize("seed", range(examples(30)))
def test_older_views_read_the_same_after_c_inserts(seed: int) -> None:
    def run(on: bool) -> tuple[Any, ...]:
        _set_knobs(on)
        try:
            rng = random.Random(seed)
            s = _new()
            ids = [uuid.UUID(int=i + 1) for i in range(30)]
            views: list[Any] = []
            out: list[Any] = []
            for step in range(12):
                batch = [
                    MemoryEntry(
                        category=MemoryCategory.FACT,
                        memory=f"w{rng.randrange(5)} x",
                        id=ids[rng.randrange(30)],
                        created_at=BASE + timedelta(seconds=step),
                        namespace=rng.choice([(), ("a",)]),
                        relevance=rng.choice([1.0, 0.5]),
                    )
                    for _ in range(rng.randint(1, 8))
                ]
                s.store_many(batch, None)
                for _ in range(rng.randint(0, 3)):
                    s.delete(ids[rng.randrange(30)])
                s.publish()
                views.append(s.view())
                if rng.random() < 0.3:
                    s.vacuum(views[max(0, len(views) - 3)].version)
                    views = views[-3:]
                for v in views:
                    out.append([None if (r := v.get(i)) is None else (r.born, r.seq) for i in ids])
                    out.append([(sc, r.seq) for sc, r in s.index.top_k(v, "w1 x", 5, None)])
            return out, _full(s)
        finally:
            _set_knobs(True)

    assert run(True) == run(False)


@wo_core
def test_a_failing_lower_leaves_the_same_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """``add_groups_new`` lowers a new text before any change for its record (its doc);
    the Python loop (``_ADD_GROUPS_C`` off) and ``_add_group`` took the group number and
    the record into ``groups`` and ``glist`` first: after an error there the index held
    one text more (the knob on and off left different indexes). (Either way the batch's
    earlier new texts stay in ``groups`` without their ``e.n``: an error midway through
    ``add_many`` was never undone, before store10 too.)"""
    real = ccore.lower()

    def lower(text: str) -> str:
        if "boom" in text:
            raise MemoryError("boom")
        return str(real(text))

    monkeypatch.setattr(ccore, "lower", lambda: lower)

    def fill(on: bool) -> tuple[Any, ...]:
        _set_knobs(on)
        try:
            s = _new()
            s.store_many(_plain(3), None)
            batch = _plain(4, start=10)
            boom = attrs.evolve(batch[2], memory="boom text")
            tagged = attrs.evolve(batch[3], tags=("t",))  # _add_group's record
            with pytest.raises(MemoryError):
                s.store_many([batch[0], batch[1], boom, tagged], None)
            with pytest.raises(MemoryError):
                s.store_many(
                    [attrs.evolve(batch[0], id=uuid.UUID(int=99), memory="boom x", tags=("t",))],
                    None,
                )
            e: Any = s.index._e  # type: ignore[attr-defined]
            return sorted(e.groups.items()), len(e.glist), e.n
        finally:
            _set_knobs(True)

    on, off = fill(True), fill(False)
    assert on == off
