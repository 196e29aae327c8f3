"""The windows expected sparse walked marking by the cut, not scanned after
(``knobs._SPARSE_MARKS``, ``bm25_daat``'s ``more & 16384``, :data:`kernels.SPARSE_MARKS`,
on a CPU without AVX-512: ``kernels.CPU_HAS_AVX512``).

The kernel: lists of 0.1-30% of up to 12,000 groups (``bm25_cases.walk_lists``: sparse
and dense windows, the choice made again at each), the length codes with and without
dense arrays, a table of records, a filter or none, any budget and limit: ``bm25_query``
with the flag gives ``Bm25Daat``'s seeding and walk to the end (every window scanned) the
same heap (scores as bytes, seqs, records) and postings walked. Through the index, the
knob and ``_SCAN_MARKS`` on and off, the CPU taken as having AVX-512 or not, give the
pure-Python reference's and the brute force's top-k, scores and ties; the flag is passed
only without AVX-512. stress/asan_kernels.sh runs this file.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs

from .bm25_cases import LISTS, NEEDS_CORE, by_daat, by_query, corpus, daat_case, index_agrees
from .strategies import examples

pytestmark = NEEDS_CORE


@given(
    **LISTS,
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
    case = daat_case(seed, nlen, nterms, top_length, codes=True, dense=dense, filtered=filtered)
    want = by_daat(case, limit, budget, 2)
    for scratch in (True, False):
        got = by_query(case, limit, budget, 2, scratch=scratch, more=kernels.SPARSE_MARKS)
        assert got == want, scratch
    assert by_query(case, limit, budget, 2, scratch=True) == want


@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 200), avx512=st.booleans())
@settings(max_examples=examples(10), deadline=None)
def test_index_sparse_marks_agree(seed: int, count: int, avx512: bool) -> None:
    """Texts of one to 300 words, a deletion and an older snapshot: ``_SPARSE_MARKS`` and
    ``_SCAN_MARKS`` on and off, the CPU taken as having AVX-512 or not, give the
    pure-Python reference's top-k (``Three.query`` asserts every path equal) and the
    brute force's, scores and ties."""
    index_agrees(seed, count, ("_SPARSE_MARKS", "_SCAN_MARKS"), CPU_HAS_AVX512=avx512)


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
