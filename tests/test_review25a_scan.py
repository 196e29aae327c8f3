"""Review of bm25q10 (review25a): the scalar walk on AMD and the marks found from a
window's scores (``knobs._SCAN_MARKS``), driven through the index over several windows
(past 4,096 groups: dense and sparse windows, purged groups inside them), with many
exact ties at theta, long documents (lengths past 255 and 32,767), one-term and
repeated-term queries, limit 1 and a limit larger than the hits; every path of
``test_bm25_core.Three`` (the pure-Python reference among them) and the brute force,
scores and ties by seq, under each setting of the walk's knobs, the CPU taken as AMD's
or not. Also the C-level refusals of the scan's arguments."""

from __future__ import annotations

import random
from typing import Any

import pytest

from actormem import BM25Scorer
from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs

from .bm25_cases import agree_with_brute_force
from .setups import each_setting
from .test_bm25_core import Three

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)


def _tied_corpus(seed: int, count: int) -> tuple[Three, int]:
    """``count`` texts, most of them ties: ``a b wN`` (one length, the same two
    frequencies), some ``a wN`` / ``b b wN``, a common word ``c`` in a third, a few
    long ones; upserts (an older seq in a later group), deletions and purges spread
    over the windows; the version before the last deletions."""
    rng = random.Random(seed)
    three = Three(BM25Scorer())
    for i in range(count):
        r = rng.random()
        if r < 0.6:
            text = f"a b w{i}"
        elif r < 0.75:
            text = f"a w{i}"
        elif r < 0.85:
            text = f"b b w{i} c"
        elif r < 0.998:
            text = f"c w{i} d{i % 7}"
        else:
            text = "a " * rng.choice([300, 40_000]) + f"b w{i}"
        three.add(text, upsert=rng.random() < 0.01)
    # Purge a stretch of groups in the middle windows: deleted groups inside a window.
    for _ in range(count // 20):
        three.delete(rng.randrange(1 << 20))
    three.purge(three.version)
    old = three.version
    for _ in range(count // 50):
        three.delete(rng.randrange(1 << 20))
    return three, old


QUERIES = ["a b", "a", "b", "a a b", "a b b c", "c", "b c d3", "a b c d1 d2 w5", "zz a"]


@pytest.mark.parametrize("amd", [False, True])
def test_ties_across_windows_agree(amd: bool) -> None:
    """Ties at theta across several windows (dense ones, sparse ones, purged groups
    inside): every setting of ``_SCAN_MARKS``/``_SCALAR_ON_AMD`` gives
    the reference's and the brute force's top 1 and 10, scores and seqs."""
    saved = kernels.CPU_IS_AMD
    kernels.CPU_IS_AMD = amd
    try:
        three, old = _tied_corpus(7, 5_000)
        three.check()
        each_setting(
            bm25_knobs,
            ("_SCAN_MARKS", "_SCALAR_ON_AMD"),
            lambda on: agree_with_brute_force(three, old, QUERIES, on),
        )
    finally:
        kernels.CPU_IS_AMD = saved


def test_limit_past_the_hits() -> None:
    """A limit larger than the hits: every hit, in order, on every path."""
    three, old = _tied_corpus(11, 4_500)
    from .test_bm25 import brute_force
    from .test_bm25_core import NOW

    def check(on: Any) -> None:
        for version in (None, old):
            view = three.view(version)
            for query in ("a b", "d3", "a a"):
                got = three.query(view, query, 100_000)
                want = brute_force(
                    three.scorer, three.records, view.version, query, 100_000, now=NOW
                )
                assert got == [(s, r.seq) for s, r in want], (on, query)

    each_setting(bm25_knobs, ("_SCAN_MARKS",), check)


def test_extreme_query_weights_agree() -> None:
    """``top_k_terms`` with weights 0, subnormal, tiny and huge (a weight 0 term, a
    sum near overflow): every path of ``Three`` (the reference among them) gives the
    same top 1/3/10/100 with the scan on and off, the CPU taken as AMD's or not."""
    rng = random.Random(3)
    three = Three(BM25Scorer())
    for i in range(5000):
        k = rng.choice([1, 2, 3, 5, 300]) if i % 9 == 0 else rng.randint(1, 6)
        words = rng.choices(["c0", "c1", "c2"], k=k)
        words += rng.choices([f"r{j}" for j in range(30)], k=rng.randint(0, 2))
        three.add(" ".join(words) + f" u{i % 2500}")
    three.delete(5)
    three.delete(77)
    view = three.view()
    weights = [
        {"c0": 1.0, "r1": 1e-310},
        {"c0": 5e-324, "r2": 1.0, "c1": 1.0},
        {"c0": 1e300, "c1": 1e300, "r3": 1.0},
        {"c0": 1e308, "c1": 1e308},
        {"r1": 1.0, "r2": 1.0, "r3": 1.0, "c0": 0.0},
        {"r4": 2.0, "c0": 1e-300, "c1": 1e-300, "c2": 1e-300},
    ]
    from .test_bm25_core import path

    saved = kernels.CPU_IS_AMD
    try:
        for w in weights:
            for limit in (1, 3, 10, 100):
                got = {}
                for amd in (True, False):
                    kernels.CPU_IS_AMD = amd

                    def run(
                        on: Any, w: Any = w, limit: int = limit, amd: bool = amd, got: Any = got
                    ) -> None:
                        for name, index in three.indexes.items():
                            with path(name):
                                hits = index.top_k_terms(view, w, limit, None)
                            got[(amd, on, name)] = [(s, r.seq) for s, r in hits]

                    each_setting(bm25_knobs, ("_SCAN_MARKS",), run)
                assert len(got) == 2 * 2 * len(three.indexes)
                assert got[(True, (True,), "core")]
                assert len({tuple(v) for v in got.values()}) == 1, (w, limit)
    finally:
        kernels.CPU_IS_AMD = saved
