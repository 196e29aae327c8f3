"""The BM25 core's tie skip by first seq (``knobs._TIE_SKIP``, branch bm25q2) under
random owner histories built for ties: many distinct texts of one length and one term
count (distinct groups, equal scores), the same text stored again (one group, several
records), upserts that carry an old seq into a newer or an existing group, deletes,
purges under held snapshots, queries at older snapshots, with filters, at once and in
slices with the owner writing between the steps. Every answer equals the pure-Python
reference and the brute force (top-k, scores, seq order of ties); ``_first_seq`` never
exceeds a seq in its group (the index's ``_check``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs

from .setups import knobs_set
from .strategies import run_machine
from .test_bm25 import brute_force
from .test_bm25_core import NOW, OwnerHistory, Three, read_sliced, scorers

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

#: Texts of two terms each, one of them shared: every group scores alike for "deploy".
TIED = [f"deploy m{i}" for i in range(12)]


class Ties(OwnerHistory):
    @initialize(name=st.sampled_from(["plain", "no length"]))
    def make(self, name: str) -> None:
        self.three = Three(scorers()[name])

    @rule(pick=st.integers(0, len(TIED) - 1), upsert=st.booleans(), repeat=st.integers(1, 4))
    def store(self, pick: int, upsert: bool, repeat: int) -> None:
        for _ in range(repeat):
            self.three.add(TIED[pick], upsert=upsert)

    @rule(
        limit=st.integers(1, 6),
        old=st.booleans(),
        filtered=st.sampled_from([None, 2, 3]),
        query=st.sampled_from(["deploy", "deploy m3", "deploy deploy m1 m7"]),
    )
    def query(self, limit: int, old: bool, filtered: int | None, query: str) -> None:
        three = self.three
        view = three.view(self.held[0] if old and self.held else None)
        accept = None if filtered is None else (lambda rec: rec.seq % filtered != 0)
        got = three.query(view, query, limit, accept)
        want = brute_force(three.scorer, three.records, view.version, query, limit, accept, NOW)
        assert [seq for _, seq in got] == [rec.seq for _, rec in want]
        assert [s for s, _ in got] == pytest.approx([s for s, _ in want], rel=1e-12)

    @rule(limit=st.integers(1, 6), steps=st.integers(1, 6), pick=st.integers(0, 11))
    def query_in_slices(self, limit: int, steps: int, pick: int) -> None:
        three = self.three
        version = three.version

        def owner() -> None:
            # An upsert moving the oldest live seq into another group, a delete, a purge
            # up to the reader's version (its records stay visible to it).
            three.add(TIED[pick], upsert=True)
            three.delete(pick)
            three.purge(min([*self.held, version]))

        got = read_sliced(three, version, "deploy", limit, steps, owner)
        assert got["core"] == got["reference"] == got["core-offer"], got



@pytest.fixture
def tiny_windows() -> Iterator[None]:
    with knobs_set(
        bm25_knobs, _CHUNK=4, _BOUND_CHUNK=4, _DENSE_CHUNK=16, _FEW=2, _SEEDS=3, _SEED_ROOM=2
    ):
        yield


@pytest.mark.usefixtures("tiny_windows")
def test_tie_skip_agrees_with_the_reference() -> None:
    assert bm25_knobs._TIE_SKIP
    run_machine(Ties, 60, 40)
