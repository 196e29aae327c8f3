"""A drained query's windows on the short path ``knobs._DRAIN_WINDOW`` groups wide (16,384,
not the sliced path's 4,096) on an AMD CPU (``kernels.CPU_IS_AMD``, with
``knobs._DRAIN_WINDOW_AMD_ONLY``): branch q45, docs/benchmarks.md "BM25 at 1M, part 15".

The kernel: ``bm25_query`` with rooms from 64 to past the core's widest window (65,536),
its scratch made once a call or once a step, every window scanned or the sparse ones
marked, gives ``Bm25Daat``'s heap (4,096-group windows): scores as bytes, seqs, records.
The choice: ``search._drain_room`` as documented, passed to the core by a drained query
only (a sliced one keeps ``_CHUNK``). Through the index: any width gives the pure-Python
reference's and the brute force's top-k. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25 import search

from .bm25_cases import (
    LISTS,
    NEEDS_CORE,
    agree_with_brute_force,
    by_daat,
    by_query,
    corpus,
    daat_case,
)
from .strategies import examples

pytestmark = NEEDS_CORE

ROOMS = [64, 100, 4096, 5000, 16384, 65536, 70000]


@given(
    **LISTS,
    limit=st.sampled_from([1, 3, 10, 100]),
    budget=st.sampled_from([1, 100, 16_384, 1 << 20]),
    room=st.sampled_from(ROOMS),
    filtered=st.booleans(),
    dense=st.booleans(),
    scratch=st.booleans(),
    sparse_marks=st.booleans(),
)
@settings(max_examples=examples(60), deadline=None)
def test_any_width_same_heap(
    seed: int, nlen: int, nterms: int, top_length: int, limit: int, budget: int, room: int,
    filtered: bool, dense: bool, scratch: bool, sparse_marks: bool,
) -> None:  # fmt: skip
    """Windows of any width up to the core's widest (and a room past it, capped): the
    heap of ``Bm25Daat`` with 4,096-group windows, scores as bytes, seqs and records."""
    case = daat_case(seed, nlen, nterms, top_length, codes=True, dense=dense, filtered=filtered)
    want, _ = by_daat(case, limit, budget, 2)
    more = kernels.SPARSE_MARKS if sparse_marks else 0
    got, _ = by_query(case, limit, budget, 2, scratch=scratch, more=more, room=room)
    assert got == want, room


def test_scratch_made_again_for_a_wider_room() -> None:
    """One call whose first windows are narrow (the seeding's room) and then wide: the
    same heap as narrow windows throughout (the scratch made again, not overrun)."""
    case = daat_case(11, 12_000, 4, 6_000, codes=True)
    want, _ = by_daat(case, 10, 1 << 20, 2)
    for room in (64, 16384, 65536):
        for scratch in (True, False):
            assert by_query(case, 10, 1 << 20, 2, scratch=scratch, room=room)[0] == want


CHOICES = [
    # (CPU_IS_AMD, _DRAIN_WINDOW, _DRAIN_WINDOW_AMD_ONLY, _WIDE_WINDOWS) -> room
    ((True, 16384, True, True), 16384),
    ((False, 16384, True, True), 4096),
    ((False, 16384, False, True), 16384),
    ((True, 4096, True, True), 4096),
    ((True, 1000, True, True), 4096),
    ((True, 16384, True, False), 16384),
    ((False, 16384, True, False), 1024),
]


@pytest.mark.parametrize(("cpu", "room"), CHOICES)
def test_drain_room_as_documented(
    monkeypatch: pytest.MonkeyPatch, cpu: tuple[bool, int, bool, bool], room: int
) -> None:
    """``_DRAIN_WINDOW`` on an AMD CPU (or anywhere without ``_DRAIN_WINDOW_AMD_ONLY``)
    where it is wider than the sliced path's windows; else those."""
    amd, window, amd_only, wide = cpu
    monkeypatch.setattr(kernels, "CPU_IS_AMD", amd)
    monkeypatch.setattr(bm25_knobs, "_DRAIN_WINDOW", window)
    monkeypatch.setattr(bm25_knobs, "_DRAIN_WINDOW_AMD_ONLY", amd_only)
    monkeypatch.setattr(bm25_knobs, "_WIDE_WINDOWS", wide)
    assert search._drain_room() == room


def test_default_is_wide_on_amd_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaults: 16,384 on an AMD CPU, the sliced path's 4,096 elsewhere."""
    assert bm25_knobs._DRAIN_WINDOW == 16384
    assert bm25_knobs._DRAIN_WINDOW_AMD_ONLY
    for amd, room in ((True, 16384), (False, bm25_knobs._CHUNK)):
        monkeypatch.setattr(kernels, "CPU_IS_AMD", amd)
        assert search._drain_room() == room


@pytest.mark.parametrize("amd", [True, False])
def test_drained_query_passes_the_room(monkeypatch: pytest.MonkeyPatch, amd: bool) -> None:
    """A drained query (``top_k``) hands the core ``_drain_room()``; a sliced one
    (``top_k_steps``) the sliced path's room; the results are the reference's."""
    monkeypatch.setattr(kernels, "CPU_IS_AMD", amd)
    three, _, queries = corpus(3, 150)
    core = three.indexes["core"]
    rooms: list[int] = []
    real, real_steps = kernels.bm25_query, kernels.bm25_query_steps

    def spy(*args: Any, **kw: Any) -> Any:
        rooms.append(args[3])
        return real(*args, **kw)

    def spy_steps(*args: Any, **kw: Any) -> Any:
        rooms.append(-args[3])
        return real_steps(*args, **kw)

    monkeypatch.setattr(kernels, "bm25_query", spy)
    monkeypatch.setattr(kernels, "bm25_query_steps", spy_steps)
    view = three.view(None)
    for query in queries:
        del rooms[:]
        got = [(s, r.seq) for s, r in core.top_k(view, query, 10, None)]
        assert rooms == [16384 if amd else 4096]
        assert got == three.query(view, query, 10)


@given(
    seed=st.integers(0, 2**32 - 1),
    count=st.integers(1, 200),
    window=st.sampled_from([64, 100, 16384]),
)
@settings(max_examples=examples(10), deadline=None)
def test_index_agrees_at_any_width(seed: int, count: int, window: int) -> None:
    """Texts of one to 300 words, a deletion and an older snapshot; sliced windows of 16
    groups and drained ones of ``window``, on an AMD CPU and not: the pure-Python
    reference's top-k and the brute force's, scores and ties."""
    saved = (bm25_knobs._CHUNK, bm25_knobs._DRAIN_WINDOW, kernels.CPU_IS_AMD)
    try:
        bm25_knobs._CHUNK = 16
        bm25_knobs._DRAIN_WINDOW = window
        three, old, asked = corpus(seed, count)
        for amd in (True, False):
            kernels.CPU_IS_AMD = amd
            agree_with_brute_force(three, old, asked, (window, amd))
    finally:
        bm25_knobs._CHUNK, bm25_knobs._DRAIN_WINDOW, kernels.CPU_IS_AMD = saved
