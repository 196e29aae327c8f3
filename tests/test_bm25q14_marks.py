"""The windows expected sparse walked marking by the cut, not scanned after
(``knobs._SPARSE_MARKS``, ``bm25_daat``'s ``more & 16384``, :data:`kernels.SPARSE_MARKS`,
on a CPU without AVX-512: ``kernels.CPU_HAS_AVX512``).

The kernel: lists of 0.1-30% of up to 12,000 groups (``test_bm25q9_walk._lists``: sparse
and dense windows, the choice made again at each), the length codes with and without
dense arrays, a table of records, a filter or none, any budget and limit: ``bm25_query``
with the flag gives ``Bm25Daat``'s seeding and walk to the end (every window scanned) the
same heap (scores as bytes, seqs, records) and postings walked. Through the index, the
knob and ``_SCAN_MARKS`` on and off, the CPU taken as having AVX-512 or not, give the
pure-Python reference's and the brute force's top-k, scores and ties; the flag is passed
only without AVX-512. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25.postings import length_codes

from .setups import each_setting
from .strategies import examples
from .test_bm25q6_lookups import agree_with_brute_force, corpus
from .test_bm25q9_walk import _lists
from .test_bm25q12_whole import _table
from .test_bm25q13_query import _FLAGS, _by_daat, _with_dense

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)


def _query(
    terms: list[Any], lengths: Any, parts: Any, codes: Any, table: list[Any], first: Any,
    limit: int, budget: int, accept: Any, seed: int, sparse: bool, scratch: bool,
) -> tuple[list[Any], int]:  # fmt: skip
    """The query through ``kernels.bm25_query`` in one call, with the sparse windows
    walked marking by the cut (``sparse``) or every window scanned."""
    from actormem._index import _cbm25

    prefetch, more = kernels.daat_flags(False, True, True, True, False, True, *_FLAGS.values())
    more |= (kernels.CALL_SCRATCH if scratch else 0) | (kernels.SPARSE_MARKS if sparse else 0)
    before = _cbm25.bm25_walked()
    got = kernels.bm25_query(
        terms, lengths, parts, max(limit, 4096), (prefetch, more), 0.8, codes,
        (table, 2, accept, limit, first, True), [seed], max(limit, 128), budget,
    )  # fmt: skip
    best = [(np.float64(s).tobytes(), r.seq, id(r)) for s, r in got]
    return best, _cbm25.bm25_walked() - before


@given(
    seed=st.integers(0, 2**32 - 1),
    nlen=st.integers(1, 12_000),
    nterms=st.integers(1, 6),
    top_length=st.sampled_from([128, 40_000]),
    limit=st.sampled_from([1, 3, 10, 100]),
    budget=st.sampled_from([1, 100, 16_384, 1 << 20]),
    filtered=st.booleans(),
    dense=st.booleans(),
)
@settings(max_examples=examples(60), deadline=None)
def test_sparse_marks_same_as_daat(
    seed: int, nlen: int, nterms: int, top_length: int, limit: int, budget: int,
    filtered: bool, dense: bool,
) -> None:  # fmt: skip
    """With the sparse windows walked marking by the cut (the scratch once a call or a
    step): the heap and postings walked of ``Bm25Daat``, every window scanned."""
    lengths, terms, parts = _lists(seed, nlen, nterms, top_length)
    codes = length_codes(lengths)
    if dense:
        terms = _with_dense(terms, nlen)
    slots, first = _table(random.Random(seed), nlen)
    accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
    start = random.Random(seed).randrange(len(terms))
    args = (terms, lengths, parts, codes, slots, first, limit, budget, accept)
    want = _by_daat(*args, 2, start)
    for scratch in (True, False):
        assert _query(*args, start, True, scratch) == want, scratch
    assert _query(*args, start, False, True) == want


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200), avx512=st.booleans())
@settings(max_examples=examples(10), deadline=None)
def test_index_sparse_marks_agree(seed: int, count: int, avx512: bool) -> None:
    """Texts of one to 300 words, a deletion and an older snapshot: ``_SPARSE_MARKS`` and
    ``_SCAN_MARKS`` on and off, the CPU taken as having AVX-512 or not, give the
    pure-Python reference's top-k (``Three.query`` asserts every path equal) and the
    brute force's, scores and ties."""
    saved = kernels.CPU_HAS_AVX512
    kernels.CPU_HAS_AVX512 = avx512
    try:
        three, old, queries = corpus(seed, count)
        each_setting(
            bm25_knobs,
            ("_SPARSE_MARKS", "_SCAN_MARKS"),
            lambda on: agree_with_brute_force(three, old, queries, on),
        )
    finally:
        kernels.CPU_HAS_AVX512 = saved


def test_flag_only_without_avx512(monkeypatch: pytest.MonkeyPatch) -> None:
    """The short path passes ``more & 16384`` with the knob on, the CPU taken as having
    no AVX-512 and at most ``_SPARSE_MARKS_TERMS`` terms, and not otherwise; the results
    are the same."""
    three, _, queries = corpus(5, 150)
    monkeypatch.setattr(bm25_knobs, "_SPARSE_MARKS_TERMS", 2)
    core = three.indexes["core"]
    seen: list[int] = []
    real = kernels.bm25_query

    def spy(*args: Any) -> Any:
        seen.append(args[4][1])
        return real(*args)

    monkeypatch.setattr(kernels, "bm25_query", spy)
    view = three.view(None)
    queries = [*queries, "c0 r1", "c0 c1 c2 c3 r1 r2 r3"]  # within the cap and past it
    outcomes = set()
    for avx512, knob, flagged in ((False, True, True), (True, True, False), (False, False, False)):
        monkeypatch.setattr(kernels, "CPU_HAS_AVX512", avx512)
        monkeypatch.setattr(bm25_knobs, "_SPARSE_MARKS", knob)
        for query in queries:
            del seen[:]
            got = [(s, r.seq) for s, r in core.top_k(view, query, 10, None)]
            assert len(seen) == 1
            terms = len(set(core.scorer.tokenizer(query)) & core._terms.keys())
            want = flagged and terms <= 2
            outcomes.add((flagged, want))
            assert bool(seen[0] & kernels.SPARSE_MARKS) == want, (avx512, knob, query)
            assert got == three.query(view, query, 10)
    assert (True, True) in outcomes
    assert (True, False) in outcomes


def test_cpu_avx512(tmp_path: Any) -> None:
    """AVX-512 from the first ``flags`` line naming both ``avx512f`` and ``avx512vl``;
    False with one of them, without the line or the file."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512vl bmi2\nflags : sse\n")
    assert kernels._cpu_avx512(str(info))
    info.write_text("processor\t: 0\nflags\t\t: fpu avx2 avx512f bmi2\n")
    assert not kernels._cpu_avx512(str(info))
    info.write_text("processor\t: 0\n")
    assert not kernels._cpu_avx512(str(info))
    assert not kernels._cpu_avx512(str(tmp_path / "absent"))
    assert kernels._cpu_info("vendor_id", str(tmp_path / "absent")) == ""
