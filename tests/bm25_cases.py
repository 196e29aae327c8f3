"""The BM25 core's test cases and drivers the bm25q test files share (as
``tests/setups.py`` holds set-ups of several areas): the index's texts and its
agreement with the brute force under each knob setting (and a CPU taken as another),
the kernel's lists and table of records, the query through ``Bm25Daat`` and through
``kernels.bm25_query``, and the refusal of bad flags. Before branch tidy31 each was
defined in one test file and imported from it by its siblings (bm25q14 from four of
them), or written out again in each."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import strategies as st

from actormem import BM25Scorer, MemoryCategory, MemoryEntry
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.bm25.postings import dense_make, length_codes
from actormem._record import Record

from .setups import bad_more_refused, each_setting
from .test_bm25 import brute_force
from .test_bm25_core import NOW, Three
from .test_bm25_length_codes import _lists as _code_lists
from .test_bm25_length_codes import walk
from .test_store_batch import BASE

#: The mark of a test file of the compiled BM25 core: skipped where it is not built.
NEEDS_CORE = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

#: Hypothesis's strategies for :func:`walk_lists`'s (and :func:`daat_case`'s) arguments:
#: ``@given(**LISTS, ...)``.
LISTS = {
    "seed": st.integers(0, 2**32 - 1),
    "nlen": st.integers(1, 12_000),
    "nterms": st.integers(1, 6),
    "top_length": st.sampled_from([128, 40_000]),
}

# --------------------------------------------------------------------------- the index


def corpus(seed: int, count: int) -> tuple[Three, int, list[str]]:
    """``count`` texts of one to 300 words (codes above 128 for some), common and rare
    words, a deletion halfway; the version before it and four queries. O(words)."""
    rng = random.Random(seed)
    three = Three(BM25Scorer())
    common = [f"c{i}" for i in range(4)]
    rare = [f"r{i}" for i in range(40)]
    old = 0
    for i in range(count):
        k = rng.choice([1, 3, 9, 140, 300]) if i % 7 == 0 else rng.randint(1, 8)
        words = rng.choices(common, k=k) + rng.choices(rare, k=rng.randint(0, 3))
        three.add(" ".join(words))
        if i == count // 2:
            old = three.version
            three.delete(rng.randrange(1 << 16))
    queries = ["r1 r2 c0", "c0 c1 c2", " ".join(rare[:12] + common), rng.choice(rare)]
    return three, old, queries


def agree_with_brute_force(three: Three, old: int, queries: list[str], on: Any) -> None:
    """Each query's top 1 and 10 at the newest version and at ``old`` are the brute
    force's, scores and ties by seq (``Three.query`` asserts every path equal); ``on``
    names the knobs in a failure."""
    for version in (None, old):
        view = three.view(version)
        for query in queries:
            for limit in (1, 10):
                got = three.query(view, query, limit)
                want = brute_force(three.scorer, three.records, view.version, query, limit, now=NOW)
                assert got == [(score, rec.seq) for score, rec in want], (on, query)


def index_agrees(
    seed: int, count: int, knobs: tuple[str, ...], queries: Iterable[str] = (), **cpu: bool
) -> None:
    """The :func:`corpus` of ``seed`` and ``count`` (its queries, then ``queries``) with
    ``bm25_knobs``' ``knobs`` on and off in every combination gives the pure-Python
    reference's top-k (``Three.query`` asserts every path equal) and the brute force's,
    scores and ties (:func:`agree_with_brute_force`). ``cpu``: ``kernels``' CPU facts
    (``CPU_IS_AMD``, ``CPU_HAS_AVX512``) taken as given meanwhile, restored after."""
    saved = {name: getattr(kernels, name) for name in cpu}
    try:
        for name, value in cpu.items():
            setattr(kernels, name, value)
        three, old, asked = corpus(seed, count)
        asked.extend(queries)
        each_setting(bm25_knobs, knobs, lambda on: agree_with_brute_force(three, old, asked, on))
    finally:
        for name, value in saved.items():
            setattr(kernels, name, value)


# --------------------------------------------------------------------------- the kernel


def walk_lists(seed: int, nlen: int, nterms: int, top_length: int) -> tuple[Any, list[Any], Any]:
    """Terms on 0.1-30% of ``nlen`` groups (``test_bm25_length_codes._lists``), then about
    three frequencies in four set to 1 (the bounds, made from the larger ones, stay
    bounds: a part only grows with the frequency): ``(lengths, terms, parts)``."""
    lengths, terms, parts = _code_lists(
        seed, nlen, nterms, top_length, (0.001, 0.01, 0.05, 0.1, 0.3), (0.1, 1.0, 3.5)
    )
    rng = np.random.default_rng(seed + 1)
    out = []
    for wi, bound, groups, tfs, count, blocks, nblocks in terms:
        ones = rng.random(len(tfs)) < 0.75
        tfs = array(tfs.typecode, [1 if one else tf for one, tf in zip(ones, tfs, strict=True)])
        out.append((wi, bound, groups, tfs, count, blocks, nblocks))
    return lengths, out, parts


def walk_steps(
    terms: list[Any], lengths: Any, parts: Any, room: int, theta: float, budget: int,
    seed: int, ones: bool, cut: bool, prefetch: bool = False, scan: bool = False,
    clear: int = 2,
) -> list[Any]:  # fmt: skip
    """A seeding step of term ``seed`` (``-1``: none), then the walk to its end: each
    step's groups, scores (as bytes), end and cursors. ``ones``, ``cut``: bm25q9's
    ``walk_ones`` and ``mark_cut``; ``scan``: bm25q10's ``scan_marks``; ``clear``: 0 every
    window cleared whole, 1 the sparse clear at an eighth, 2 at a quarter."""
    daat = kernels.Bm25Daat(
        terms, lengths, parts, room, True, prefetch, 0.8, True, True, True, True, True,
        length_codes(lengths), lookup_codes=True, prefetch_seeds=True,
        sparse_clear=clear > 0, prefetch_offers=True, dense_tfs=True,
        sparse_quarter=clear == 2, scalar_no_prefetch=True, walk_ones=ones, mark_cut=cut,
        scan_marks=scan,
    )  # fmt: skip
    return walk(daat, theta, budget, seed, room)


_ENTRY = MemoryEntry(category=MemoryCategory.FACT, memory="x", created_at=BASE)


def group_table(rng: random.Random, nlen: int) -> tuple[list[Any], Any]:
    """Group slots as the index's columns hold them (a record, a list by seq, or None)
    for ``nlen`` groups, records born 1-3 and some dead at 2 or 3; the first seq of each
    group (int64)."""
    slots: list[Any] = []
    first = np.zeros(nlen, np.int64)
    order = list(range(nlen))
    rng.shuffle(order)  # seqs not in group order: ties are passed over by seq
    for num in range(nlen):
        if rng.random() < 0.05:
            slots.append(None)
            continue
        recs = []
        base = 3 * order[num]
        for k in range(rng.choice([1, 1, 1, 2, 3])):
            rec = Record(_ENTRY, born=rng.randint(1, 3), seq=base + k)
            if rng.random() < 0.2:
                rec.died = rng.randint(2, 3)
            recs.append(rec)
        first[num] = recs[0].seq
        slots.append(recs if len(recs) > 1 else recs[0])
    return slots, first


def with_dense(terms: list[Any], nlen: int) -> list[Any]:
    """Each term with its dense frequency array (``bits, upto, dpos``) over its groups
    below two thirds of ``nlen`` (those above are sought in the list)."""
    return [(*term[:7], *dense_make(term[2], term[3], nlen, 2 * nlen // 3)) for term in terms]


class Case(NamedTuple):
    """One query of the kernel's: its lists, lengths and parts (:func:`walk_lists`), the
    length codes or None, the table of records and first seqs (:func:`group_table`; no
    first seqs: None), the filter (None: none) and the seed term."""

    terms: list[Any]
    lengths: Any
    parts: Any
    codes: Any
    table: list[Any]
    first: Any
    accept: Callable[[Any], bool] | None
    start: int


def daat_case(
    seed: int, nlen: int, nterms: int, top_length: int, *, codes: bool = False,
    dense: bool = False, ties: bool = True, filtered: bool = False,
) -> Case:  # fmt: skip
    """The :class:`Case` of ``seed``: ``codes`` the length codes, ``dense`` the terms'
    dense arrays (:func:`with_dense`), ``ties`` the first seqs, ``filtered`` a filter
    (a record whose seq is 1 modulo 3 refused), the seed term drawn from ``seed``."""
    lengths, terms, parts = walk_lists(seed, nlen, nterms, top_length)
    if dense:
        terms = with_dense(terms, nlen)
    table, first = group_table(random.Random(seed), nlen)
    return Case(
        terms=terms,
        lengths=lengths,
        parts=parts,
        codes=length_codes(lengths) if codes else None,
        table=table,
        first=first if ties else None,
        accept=(lambda rec: rec.seq % 3 != 1) if filtered else None,
        start=random.Random(seed).randrange(len(terms)),
    )


#: Bm25Daat's bools after ``codes`` (the search's defaults but the CPU-dependent ones).
DAAT_FLAGS = {
    "lookup_codes": True, "prefetch_seeds": True, "sparse_clear": True,
    "prefetch_offers": True, "dense_tfs": True, "sparse_quarter": True,
    "scalar_no_prefetch": True, "walk_ones": True, "mark_cut": True, "scan_marks": True,
}  # fmt: skip


def heap(best: Iterable[tuple[float, Any]]) -> list[tuple[bytes, int, int]]:
    """The core's best records as compared bit for bit: (score as bytes, seq, record id)."""
    return [(np.float64(s).tobytes(), r.seq, id(r)) for s, r in best]


def by_daat(case: Case, limit: int, budget: int, version: int) -> tuple[list[Any], int]:
    """The query through ``Bm25Daat`` as ``search._core_steps`` drives a drained one
    (seeding, then the walk to its end): :func:`heap` and the postings walked."""
    from actormem._index import _cbm25

    daat = kernels.Bm25Daat(
        case.terms, case.lengths, case.parts, max(limit, 4096), True, False, 0.8, True, True,
        True, False, True, case.codes, **DAAT_FLAGS,
    )  # fmt: skip
    daat.offer_to(case.table, version, case.accept, limit, max(limit, 128), columns=True)
    before = _cbm25.bm25_walked()
    daat.drive(budget, case.start, max(limit, 128), case.first)
    assert daat.drive(budget, first=case.first, to_end=True)
    return heap(daat.best()), _cbm25.bm25_walked() - before


def by_query(
    case: Case, limit: int, budget: int, version: int, *, one_call: bool = True,
    scratch: bool = False, more: int = 0, room: int = 4096,
) -> tuple[list[Any], int]:  # fmt: skip
    """The same query through ``kernels.bm25_query`` (``one_call``: the seeding and the
    walk in one core call; ``scratch``: the walk's scratch made once a call; ``more``:
    further ``more`` flags, e.g. ``kernels.SPARSE_MARKS``; ``room``: the windows' width
    at most, the limit if more): :func:`heap` and the postings walked."""
    from actormem._index import _cbm25

    prefetch, flags = kernels.daat_flags(
        False, True, True, True, False, True, *DAAT_FLAGS.values()
    )  # fmt: skip
    flags |= (kernels.CALL_SCRATCH if scratch else 0) | more
    before = _cbm25.bm25_walked()
    got = kernels.bm25_query(
        case.terms, case.lengths, case.parts, max(limit, room), (prefetch, flags), 0.8,
        case.codes, (case.table, version, case.accept, limit, case.first, True),
        [case.start], max(limit, 128), budget, one_call,
    )  # fmt: skip
    return heap(got), _cbm25.bm25_walked() - before


def bad_flags_refused(
    lists: tuple[Any, list[Any], Any], refused: tuple[str, ...], flags: dict[str, Any],
    more: int, match: str | None = None,
) -> None:  # fmt: skip
    """``Bm25Daat`` on ``lists`` (``(lengths, terms, parts)``) refuses each flag of
    ``refused`` given 1, None or ``"yes"`` (TypeError matching ``match``, else the
    flag's name); with ``flags`` its ``more`` is ``more``, and ``bm25_daat`` refuses
    ``more`` flags out of range (:func:`~tests.setups.bad_more_refused`)."""
    lengths, terms, parts = lists
    args = (terms, lengths, parts, 16, True, True, 1.0, True, True, True, True, True, None)
    bads: tuple[Any, ...] = (1, None, "yes")
    for bad in bads:
        for name in refused:
            with pytest.raises(TypeError, match=match or name):
                kernels.Bm25Daat(*args, **{name: bad})
    daat = kernels.Bm25Daat(*args, **flags)
    assert daat._more == more
    bad_more_refused(daat, lengths, parts)
