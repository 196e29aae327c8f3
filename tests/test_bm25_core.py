"""The compiled BM25 core (``_cbm25.c``) against the Python index, the reference.

Three indexes per scorer get the same records, retirements and purges: the reference
(``kernels.ENABLED = False``: numpy only), the Python driver with the per-step kernels
(``BM25_CORE = False``) and the core (its add term loop and its document-at-a-time
MaxScore with block-max windows). Every query, at the newest snapshot or an older one
(the change log's undo), with or without a filter, at once or in slices with the owner
writing in between, must give identical top-k, scores and ties on all three. Bad
arguments are refused before C, and ``ACTORMEM_BM25_CORE=0`` or a missing core leaves a
working index.
"""

from __future__ import annotations

import math
import random
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from actormem import BM25Scorer, Tokenizer
from actormem._index import kernels
from actormem._index.bm25 import BM25Index
from actormem._index.bm25 import knobs as bm25_knobs
from actormem._index.scoring import drain
from actormem._record import NEVER, Record

from .fallback import one_entry_run
from .setups import knobs_set, stepped
from .strategies import examples, run_machine
from .test_bm25 import FakeView, brute_force, entry

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

BASE = datetime(2024, 1, 1, tzinfo=UTC)
NOW = (BASE + timedelta(days=2)).timestamp()

#: (ENABLED, BM25_CORE, knobs._COST_SPLIT, knobs._C_OFFER, knobs._PREFETCH_WALK,
#: knobs._SPLIT_ROOM, knobs._TIGHT_WALK, knobs._INTERP_SEEK) of each path: "core" is the
#: core's windowed driver with the cost-aware split stopping short of theta, offering the
#: groups it finds to its heap of records in C (unweighted queries), prefetching the
#: lengths in its walk, walking in its tight loop and seeking from interpolated guesses,
#: "core-offer" the same driver with each step's groups offered in Python, no prefetch,
#: the split up to theta, the walk's loop before its tight form and seeks galloping from
#: the cursor (the driver before all five), "core-bound" its document-at-a-time driver
#: with MaxScore's split by bound (kept for side-by-side benchmarks).
SPLIT_ROOM = bm25_knobs._SPLIT_ROOM
PATHS = {
    "reference": (False, False, True, False, True, SPLIT_ROOM, True, True),
    "kernels": (True, False, True, False, True, SPLIT_ROOM, True, True),
    "core": (True, True, True, True, True, SPLIT_ROOM, True, True),
    "core-offer": (True, True, True, False, False, 1.0, False, False),
    "core-bound": (True, True, False, False, True, SPLIT_ROOM, True, True),
}


@contextmanager
def path(name: str) -> Iterator[None]:
    (
        kernels.ENABLED,
        kernels.BM25_CORE,
        bm25_knobs._COST_SPLIT,
        bm25_knobs._C_OFFER,
        bm25_knobs._PREFETCH_WALK,
        bm25_knobs._SPLIT_ROOM,
        bm25_knobs._TIGHT_WALK,
        bm25_knobs._INTERP_SEEK,
    ) = PATHS[name]
    try:
        yield
    finally:
        kernels.ENABLED, kernels.BM25_CORE = kernels.AVAILABLE, True
        bm25_knobs._COST_SPLIT = bm25_knobs._C_OFFER = bm25_knobs._PREFETCH_WALK = True
        bm25_knobs._TIGHT_WALK = bm25_knobs._INTERP_SEEK = True
        bm25_knobs._SPLIT_ROOM = SPLIT_ROOM


def scorers() -> dict[str, BM25Scorer]:
    return {
        "plain": BM25Scorer(),
        "weighted": BM25Scorer(
            k1=1.2, b=0.5, half_life=40_000.0, relevance_prior=0.5, clock=lambda: NOW
        ),
        "stop words": BM25Scorer(k1=1.5, b=0.5, tokenizer=Tokenizer(stopwords={"the", "a"})),
        "no length": BM25Scorer(k1=0.9, b=0.0),
    }


@pytest.fixture
def small_knobs() -> Iterator[None]:
    """Tiny chunks, so that every slicing path runs on small inputs."""
    # Several seeds: their positions reset. A few seeded groups; the windows are as wide
    # as the room (the limit here), so that a query crosses many windows and steps.
    with knobs_set(
        bm25_knobs, _CHUNK=4, _BOUND_CHUNK=4, _DENSE_CHUNK=16, _FEW=2, _SEEDS=3, _SEED_ROOM=2
    ):
        yield


class Three:
    """One index per path over the same records (an owner's calls, applied to all)."""

    def __init__(self, scorer: BM25Scorer) -> None:
        self.scorer = scorer
        self.indexes: dict[str, BM25Index] = {}
        for name in PATHS:
            with path(name):
                self.indexes[name] = scorer.make_index()
        self.version = 0
        self.records: list[Record] = []  # not purged
        self.seq = 0

    def add(
        self, text: str, tags: tuple[str, ...] = (), rel: float = 0.5, upsert: bool = False
    ) -> None:
        self.version += 1
        old = None
        # The live records only for an upsert: a pass over every record on each add made
        # building 9,500 records quadratic (~20 s a test).
        live = [rec for rec in self.records if rec.died == NEVER] if upsert else []
        if live:
            old = live[0]
            self.retire(old)
        seq = old.seq if old is not None else self.seq
        self.seq += old is None
        # Any int64 seq (tests start it far below 0 or past 2**31): a created_at in range.
        at = BASE + timedelta(seconds=self.seq % (1 << 32))
        e = entry(text, tags=tags, relevance=rel, created_at=at)
        rec = Record(e, born=self.version, seq=seq)
        for name, index in self.indexes.items():
            with path(name):  # the add's term loop: Python or the core's
                index.add(rec)
        self.records.append(rec)

    def retire(self, rec: Record) -> None:
        rec.died = self.version
        for index in self.indexes.values():
            index.retire(rec)

    def delete(self, pick: int) -> None:
        live = [rec for rec in self.records if rec.died == NEVER]
        if live:
            self.version += 1
            self.retire(live[pick % len(live)])

    def purge(self, horizon: int) -> None:
        """Purge the records dead at or below ``horizon`` (no view reads below it)."""
        for rec in [rec for rec in self.records if rec.died <= horizon]:
            self.records.remove(rec)
            for index in self.indexes.values():
                index.purge(rec)
        for index in self.indexes.values():
            index.vacuum(horizon)

    def view(self, version: int | None = None) -> FakeView:
        return FakeView(self.version if version is None else version, self.records)

    def query(
        self,
        view: FakeView,
        query: str,
        limit: int,
        accept: Callable[[Record], bool] | None = None,
    ) -> list[tuple[float, int]]:
        got = {}
        for name, index in self.indexes.items():
            with path(name):
                hits = index.top_k(view, query, limit, accept)  # type: ignore[arg-type]
            got[name] = [(score, rec.seq) for score, rec in hits]
        assert got["core"] == got["reference"], (query, got)
        assert got["core-offer"] == got["reference"], (query, got)
        assert got["core-bound"] == got["reference"], (query, got)
        assert got["kernels"] == got["reference"], (query, got)
        return got["core"]

    def check(self) -> None:
        for index in self.indexes.values():
            index._check(self.records)


WORDS = ["the", "a", "cat", "cats", "deploy", "x", "id", "w1", "w2", "w3", "zed"]
#: A larger vocabulary for texts and long queries (tool results: many distinct terms, of
#: which some repeat, with very different list lengths).
MANY_WORDS = [*WORDS, *(f"t{i}" for i in range(30))]


class OwnerHistory(RuleBasedStateMachine):
    """The owner's deletes and purges under views held open, on ``self.three`` (made by a
    subclass's ``initialize``); the subclasses add their stores and queries."""

    def __init__(self) -> None:
        super().__init__()
        self.three: Three
        self.held: list[int] = []  # versions of views held open

    @rule(pick=st.integers(0, 1000))
    def delete(self, pick: int) -> None:
        self.three.delete(pick)

    @rule()
    def hold(self) -> None:
        self.held.append(self.three.version)

    @rule()
    def release_and_purge(self) -> None:
        if self.held:
            self.held.pop(0)
        self.three.purge(min(self.held, default=self.three.version))

    @invariant()
    def checked(self) -> None:
        if hasattr(self, "three"):
            self.three.check()


def read_sliced(
    three: Three, version: int, query: str, limit: int, steps: int, owner: Callable[[], None]
) -> dict[str, list[tuple[float, int]]]:
    """Every path reads the view at ``version``, ``steps`` steps of ``top_k_steps`` each
    (a retrieve's first step under its own ``path``), then ``owner()`` writes, then each
    finishes: its (score, seq) hits, by path."""
    gens = {}
    for name, index in three.indexes.items():
        with path(name):  # read at a retrieve's first step
            gen = index.top_k_steps(three.view(version), query, limit, None)  # type: ignore[arg-type]
            gens[name] = stepped(gen, steps)
    owner()
    got = {}
    for name, gen in gens.items():
        with path(name):
            result = drain(gen)
        got[name] = [(score, rec.seq) for score, rec in result]
    return got


class CoreAgrees(OwnerHistory):
    """Random owner calls and queries, all three paths compared on every query."""

    @initialize(name=st.sampled_from(sorted(scorers())))
    def make(self, name: str) -> None:
        self.three = Three(scorers()[name])

    @rule(
        words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=7),
        tag=st.sampled_from([None, "ops", "the cat"]),
        rel=st.sampled_from([0.1, 0.5, 1.0]),
        upsert=st.booleans(),
        repeat=st.integers(1, 3),
    )
    def store(
        self, words: list[str], tag: str | None, rel: float, upsert: bool, repeat: int
    ) -> None:
        for _ in range(repeat):  # the same text again: one group, several records
            self.three.add(" ".join(words), (tag,) if tag else (), rel, upsert)

    @rule(text=st.sampled_from(["x " * 300, "cat " * 260 + "w1", "id id id"]))
    def store_long(self, text: str) -> None:  # frequencies beyond a byte
        self.three.add(text)

    @rule(
        words=st.lists(st.sampled_from(MANY_WORDS), min_size=3, max_size=25),
        count=st.integers(1, 12),
    )
    def store_many_words(self, words: list[str], count: int) -> None:
        for i in range(count):  # rotated: distinct texts sharing terms
            self.three.add(" ".join(words[i % len(words) :] + words[: i % len(words)]))

    @rule(
        words=st.lists(st.sampled_from([*WORDS, "nope"]), min_size=1, max_size=9),
        limit=st.integers(1, 7),
        old=st.booleans(),
        filtered=st.booleans(),
    )
    def query(self, words: list[str], limit: int, old: bool, filtered: bool) -> None:
        version = self.held[0] if old and self.held else None
        accept = (lambda rec: rec.seq % 3 != 0) if filtered else None
        self.three.query(self.three.view(version), " ".join(words), limit, accept)

    @rule(
        words=st.lists(st.sampled_from([*MANY_WORDS, "nope"]), min_size=10, max_size=60),
        limit=st.integers(1, 12),
        old=st.booleans(),
        filtered=st.booleans(),
    )
    def query_long(self, words: list[str], limit: int, old: bool, filtered: bool) -> None:
        # A tool result as the query: many terms, repeated ones weigh more.
        version = self.held[0] if old and self.held else None
        accept = (lambda rec: rec.seq % 2 == 0) if filtered else None
        self.three.query(self.three.view(version), " ".join(words), limit, accept)

    @precondition(lambda self: len(self.three.records) > 0)
    @rule(
        words=st.lists(st.sampled_from(MANY_WORDS), min_size=1, max_size=40),
        limit=st.integers(1, 5),
        new=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
        steps=st.integers(1, 8),
    )
    def query_in_slices(self, words: list[str], limit: int, new: list[str], steps: int) -> None:
        # All three read one snapshot while the owner stores, retires and purges
        # (compacting posting lists) between their steps.
        three = self.three
        version = three.version
        query = " ".join(words)

        def owner() -> None:
            three.add(" ".join(new))
            three.delete(steps)
            three.purge(min([*self.held, version]))

        got = read_sliced(three, version, query, limit, steps, owner)
        assert got["core"] == got["reference"] == got["kernels"] == got["core-bound"], query
        assert got["core-offer"] == got["reference"], query


@pytest.mark.usefixtures("small_knobs")
def test_core_and_reference_agree_on_every_query() -> None:
    run_machine(CoreAgrees, 60, 40)


@pytest.mark.parametrize("name", sorted(scorers()))
@pytest.mark.parametrize("small", [False, True])
def test_long_lists_with_blocks_agree(name: str, small: bool, monkeypatch: Any) -> None:
    """Lists of hundreds of postings (complete blocks: the block-max windows), skewed
    frequencies, repeated texts, deletions and an older snapshot: all three paths and
    the brute force agree."""
    if small:
        small_ones = (("_CHUNK", 4), ("_BOUND_CHUNK", 4), ("_DENSE_CHUNK", 16), ("_FEW", 2))
        for k, v in (*small_ones, ("_SEEDS", 3), ("_SEED_ROOM", 2)):
            monkeypatch.setattr(bm25_knobs, k, v)
    rng = random.Random(name)
    three = Three(scorers()[name])
    vocab = [f"t{i}" for i in range(40)]
    weights = [1.0 / (i + 1) for i in range(40)]
    for i in range(900):
        n = rng.randint(1, 12)
        words = rng.choices(vocab, weights, k=n) + (["the"] if rng.random() < 0.5 else [])
        if rng.random() < 0.05 and three.records:
            three.add(rng.choice(three.records).entry.memory)  # a text stored again
        else:
            three.add(" ".join(words), rel=rng.choice([0.2, 0.6, 1.0]))
        if rng.random() < 0.1:
            three.delete(rng.randrange(1000))
        if i == 600:
            old = three.version
    # With the small knobs the pure-Python reference walks its lists a few postings a
    # step (~0.2 s a long query with the weighted scorer): fewer queries there. The
    # counts scale with the profile (tests/strategies.py), at least three short and two
    # long ones: every query meets the same lists and blocks, each another walk of them.
    short, long = (25, 10) if not small else (10, 5)
    short, long = max(3, examples(short)), max(2, examples(long))
    for i in range(short + long):
        # Short queries, and long ones (tool results: tens of terms, repeated ones).
        words = rng.choices(vocab, k=rng.randint(1, 10) if i < short else rng.randint(20, 80))
        query = " ".join(words + ["the"] * rng.randint(0, 1))
        limit = rng.choice([1, 3, 10, 25])
        for version in (None, old):
            view = three.view(version)
            got = three.query(view, query, limit)
            want = brute_force(three.scorer, three.records, view.version, query, limit, now=NOW)
            assert got == [(score, rec.seq) for score, rec in want]
        three.query(three.view(), query, limit, lambda rec: rec.seq % 2 == 0)
    three.purge(three.version)
    three.check()
    three.query(three.view(), "t0 t1 t5 t30", 10)


#: The many windows' corpus, its queries and the brute force's answers (at limit 40),
#: built once for the module (``many_windows_corpus``).
ManyWindowsCorpus = tuple[Three, list[str], dict[str, list[tuple[float, Record]]]]


@pytest.fixture(scope="module")
def many_windows_corpus() -> ManyWindowsCorpus:
    """More groups than one window of the windowed driver (4,096), rare and common terms,
    a few texts that score high far apart, and the queries; the brute force's answers
    are filled by the first test that needs them (``knobs._WIDE_WINDOWS`` is read by
    queries, not by adds: both parametrizations read one corpus)."""
    rng = random.Random(7)
    three = Three(scorers()["plain"])
    common = [f"c{i}" for i in range(8)]
    rare = [f"r{i}" for i in range(200)]
    for i in range(9_000):
        words = rng.choices(common, k=rng.randint(2, 9)) + rng.choices(rare, k=rng.randint(0, 2))
        if i % 2_500 == 1_000:  # a text with many query terms, repeated
            words = common * 3 + rare[:20]
        three.add(" ".join(words))
    queries = [
        " ".join(common * 2 + rare[:20]),  # long: every term, common ones repeated
        " ".join(rng.choices(common + rare, k=60)),
        "c0 c1 r3",
        "r5 r6 r7 r8 c0",
    ]
    return three, queries, {}


@pytest.mark.parametrize("wide", [True, False])
def test_many_windows_agree(
    wide: bool, monkeypatch: Any, many_windows_corpus: ManyWindowsCorpus
) -> None:
    """More groups than one window of the windowed driver (4,096), rare and common terms,
    a few texts that score high far apart (``many_windows_corpus``): the windows' edges,
    the skipped stretches and the cost-aware split (long lists looked up, short ones
    walked) agree with the reference and the brute force, with the record heap's windows
    of ``_CHUNK`` groups and of a quarter of that (``knobs._WIDE_WINDOWS``)."""
    monkeypatch.setattr(bm25_knobs, "_WIDE_WINDOWS", wide)
    three, queries, brute = many_windows_corpus
    for query in queries:
        # The brute force once at the largest limit, sliced for the smaller ones (it
        # ranks every hit, then cuts at the limit).
        if query not in brute:
            brute[query] = brute_force(
                three.scorer, three.records, three.version, query, 40, now=NOW
            )
        most = brute[query]
        for limit in (1, 10, 40):
            view = three.view()
            got = three.query(view, query, limit)
            want = most[:limit]
            assert got == [(score, rec.seq) for score, rec in want]


#: The tight walk's corpus, its older version and the brute force's answers, built once
#: for the module (``tight_walk_corpus``).
TightWalkCorpus = tuple[Three, int, dict[tuple[int | None, str], list[tuple[float, Record]]]]


@pytest.fixture(scope="module")
def tight_walk_corpus() -> TightWalkCorpus:
    """More groups than a window, frequencies in bytes and, for a term repeated more than
    255 times in a text, in int32, a deletion and an older snapshot (~2.3 s of the ~2.5 s
    each parametrization of ``test_tight_walk_agrees`` took when each built its own: the
    walk's knobs are read by queries, not by adds, so the four read one corpus; its
    ``check`` runs once, and the brute force once a query and snapshot)."""
    rng = random.Random(13)
    three = Three(scorers()["plain"])
    common = [f"c{i}" for i in range(6)]
    rare = [f"r{i}" for i in range(120)]
    old = 0
    for i in range(9_500):
        words = rng.choices(common, k=rng.randint(1, 7)) + rng.choices(rare, k=rng.randint(0, 3))
        if i % 2_000 == 500:
            words += ["r7"] * 300  # int32 frequencies from here on in r7's list
        if i % 97 == 0:
            words = ["r3", "r4", "c0"]  # copies: ties across windows
        three.add(" ".join(words))
        if i == 6_000:
            old = three.version
            three.delete(40)
    three.check()
    return three, old, {}


TIGHT_WALK_QUERIES = (
    "r3 r4 c0",
    "r7 r3 c1 c2",
    " ".join([f"r{i}" for i in range(30)] + [f"c{i}" for i in range(6)]),
    "c0 c1",
)


@pytest.mark.parametrize(
    ("tight", "prefetch"), [("simd", True), ("simd", False), ("scalar", True), ("off", False)]
)
def test_tight_walk_agrees(
    tight: str, prefetch: bool, monkeypatch: Any, tight_walk_corpus: TightWalkCorpus
) -> None:
    """The windowed walk's tight loop (``knobs._TIGHT_WALK``; "simd": eight postings at a
    time where the CPU has AVX-512, ``knobs._SIMD_WALK``), with and without its
    prefetch, over more groups than a window, frequencies in bytes and, for a term
    repeated more than 255 times in a text, in int32, a deletion and an older snapshot
    (``tight_walk_corpus``): the same top-k, scores and ties as the reference and the
    brute force, as the loop before it."""
    # The "core" path as given here (``path`` sets the knobs per path); "core-offer"
    # walks with the loop before, and the reference with neither.
    core = (True, True, True, True, prefetch, SPLIT_ROOM, tight != "off", True)
    monkeypatch.setitem(PATHS, "core", core)
    monkeypatch.setattr(bm25_knobs, "_SIMD_WALK", tight == "simd")
    three, old, brute = tight_walk_corpus
    for version in (None, old):
        for query in TIGHT_WALK_QUERIES:
            # The brute force once at the largest limit: it sorts every hit by (-score,
            # seq), a total order (seqs are unique here), and cuts at the limit, so its
            # answer at a smaller limit is this one's prefix.
            view = three.view(version)
            if (version, query) not in brute:
                brute[version, query] = brute_force(
                    three.scorer, three.records, view.version, query, 50, now=NOW
                )
            most = brute[version, query]
            for limit in (1, 10, 50):
                view = three.view(version)
                got = three.query(view, query, limit)
                want = most[:limit]
                assert got == [(score, rec.seq) for score, rec in want], (query, limit)


@pytest.mark.parametrize("room", [1.0, 0.9, 0.5, 0.01])
@pytest.mark.parametrize("small", [False, True])
def test_split_short_of_theta_agrees(room: float, small: bool, monkeypatch: Any) -> None:
    """The cost-aware split taking non-essential terms only up to a fraction of theta
    (``knobs._SPLIT_ROOM``: 0.01 walks nearly every list, 1.0 the split before): on
    common and rare terms over several windows, with theta rising within and between
    slices (tiny chunks), deletions and an older snapshot, the core agrees with the
    reference and the brute force."""
    monkeypatch.setattr(bm25_knobs, "_SPLIT_ROOM", room)
    if small:
        for k, v in (("_CHUNK", 4), ("_BOUND_CHUNK", 4), ("_SEEDS", 2), ("_SEED_ROOM", 2)):
            monkeypatch.setattr(bm25_knobs, k, v)
    rng = random.Random(room)
    three = Three(scorers()["plain"])
    common = [f"c{i}" for i in range(6)]
    rare = [f"r{i}" for i in range(60)]
    old = 0
    for i in range(5_000):
        words = rng.choices(common, k=rng.randint(1, 8)) + rng.choices(rare, k=rng.randint(0, 3))
        three.add(" ".join(words))
        if i % 97 == 0:
            three.delete(rng.randrange(1000))
        if i == 3_000:
            old = three.version
    queries = ["c0 c1 r3", "r5 r6 c0 c2 c3", " ".join(common + rare[:8]), "c0 c0 c1 r1 r2"]
    # The brute force once per (query, version) at the largest limit: it sorts every hit
    # by (-score, seq), a total order (seqs are unique here), and cuts at the limit, so
    # its answer at a smaller limit is this one's prefix.
    most = {
        (query, version): brute_force(
            three.scorer, three.records, three.view(version).version, query, 30, now=NOW
        )
        for query in queries
        for version in (None, old)
    }
    for query in queries:
        for limit in (1, 10, 30):
            for version in (None, old):
                view = three.view(version)
                with path("core"):  # the knob as patched here, not the paths' default
                    bm25_knobs._SPLIT_ROOM = room
                    hits = three.indexes["core"].top_k(view, query, limit, None)  # type: ignore[arg-type]
                want = most[query, version][:limit]
                assert [(s, rec.seq) for s, rec in hits] == [(s, rec.seq) for s, rec in want]


# -- arguments ---------------------------------------------------------------------


def _term(count: int = 64) -> kernels.DaatTerm:
    groups, tfs = array("i", range(count)), array("B", [1] * count)
    return (1.0, 2.0, groups, tfs, count, array("i", [1, 1]), count // 64)


def test_bad_arguments_are_refused_before_c() -> None:
    lengths = np.ones(128, np.int32)
    parts = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0 + 1e-9)
    bad_daat: list[tuple[Any, ...]] = [
        ([], lengths, parts, 4),  # no terms
        ([_term()[:6]], lengths, parts, 4),  # not a 7-tuple
        ([(*_term()[:4], 65, *_term()[5:])], lengths, parts, 4),  # count beyond the list
        ([(*_term()[:5], array("i"), 1)], lengths, parts, 4),  # blocks missing
        ([(*_term()[:6], 2)], lengths, parts, 4),  # more blocks than complete ones
        ([(*_term()[:5], [1, 1], 1)], lengths, parts, 4),  # blocks not an array('i')
        ([_term()], lengths.astype(np.int64), parts, 4),  # lengths not int32
        ([_term()], lengths, parts[:5], 4),  # parts
        ([_term()], lengths, parts, 0),  # room
        ([_term()], lengths, parts, 4, True, 1),  # prefetch not a bool
        ([_term()], lengths, parts, 4, True, True, 1),  # split_room not a float
        ([_term()], lengths, parts, 4, True, True, 0.0),  # split_room not in (0, 1]
        ([_term()], lengths, parts, 4, True, True, 1.5),
        ([_term()], lengths, parts, 4, True, True, float("nan")),
    ]
    for args in bad_daat:
        with pytest.raises((TypeError, ValueError)):
            kernels.Bm25Daat(*args)
    daat = kernels.Bm25Daat([_term()], lengths, parts, 4)
    for theta, budget, seed in [(float("nan"), 10, -1), (0.0, 0, -1), (0.0, 10, 1), (0.0, 10, -2)]:
        with pytest.raises(ValueError, match="theta|budget|seed"):
            daat.step(theta, budget, seed)
    for room in (-1, 2.0):
        with pytest.raises(ValueError, match="room"):
            daat.step(0.0, 10, 0, room)  # type: ignore[arg-type]
    groups, tfs = array("i", range(128)), array("B", [1] * 128)
    for args in [
        (groups, tfs, lengths, 0, 3, np.empty(6, np.int32)),  # beyond the list
        (groups, tfs, lengths, 1, 0, np.empty(6, np.int32)),  # first > stop
        (groups, tfs, lengths, 0, 2, np.empty(3, np.int32)),  # out too short
        (groups, tfs, lengths, 0, 2, np.empty(4, np.int64)),  # out not int32
        (list(groups), tfs, lengths, 0, 2, np.empty(4, np.int32)),  # groups not an array
    ]:
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_blocks(*args)
    for add_args in [
        (("a",), {}, [], 0, object),
        (["a"], [], [], 0, object),
        (["a"], {}, [], -1, object),
        (["a"], {}, (), 0, object),
    ]:
        with pytest.raises((TypeError, ValueError)):
            kernels.bm25_add_terms(*add_args)


def test_c_checks_memory_safety_itself() -> None:
    """Called directly, past the Python checks, the core still refuses what would read
    or write out of bounds."""
    from actormem._index import _cbm25 as core  # type: ignore[attr-defined]

    lengths = np.ones(8, np.int32)  # shorter than the group numbers below
    groups, tfs = array("i", range(64)), array("B", [1] * 64)
    out = np.empty(2, np.int32)
    with pytest.raises(ValueError, match="group number"):
        core.bm25_blocks(groups, tfs, lengths, 0, 1, out)  # group beyond lengths
    with pytest.raises(ValueError, match="out of range"):
        core.bm25_blocks(groups, tfs, np.ones(64, np.int32), 0, 2, out)  # beyond the list
    cursors, nums, scores = np.zeros(1, np.int64), np.empty(64, np.int64), np.empty(64)
    common = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0)
    term = (1.0, 2.0, groups, tfs, 64, array("i", [1, 1]), 1)
    with pytest.raises(ValueError, match="beyond lengths"):
        core.bm25_daat([term], cursors, lengths, *common, -np.inf, 100, -1, nums, scores)
    with pytest.raises(ValueError, match="out of range"):  # count beyond the list
        core.bm25_daat(
            [(*term[:4], 65, *term[5:])], cursors, lengths, *common, 0.0, 100, -1, nums, scores
        )
    with pytest.raises(ValueError, match="out of range"):  # cursor beyond the count
        core.bm25_daat(
            [term], np.full(1, 70, np.int64), lengths, *common, 0.0, 100, -1, nums, scores
        )
    with pytest.raises(ValueError, match="out of range"):  # blocks claimed but absent
        core.bm25_daat(
            [(*term[:5], array("i"), 1)], cursors, lengths, *common, 0.0, 100, -1, nums, scores
        )
    with pytest.raises(ValueError, match="wrong size"):  # seed beyond the terms
        core.bm25_daat([term], cursors, lengths, *common, 0.0, 100, 1, nums, scores)
    for room in (0.0, -0.5, 1.01, float("nan")):  # the split's fraction of theta
        with pytest.raises(ValueError, match="split_room"):
            core.bm25_daat(
                [term], cursors, lengths, *common, 0.0, 100, -1, nums, scores,
                np.zeros(1, np.uint8), None, False, room,
            )  # fmt: skip
    for sticky in (np.zeros(2, np.uint8), np.zeros(1, np.int64), np.zeros(1, np.uint8)[:0]):
        with pytest.raises(ValueError, match="sticky"):  # one byte per term, or nothing
            core.bm25_daat([term], cursors, lengths, *common, 0.0, 100, -1, nums, scores, sticky)
    # The windowed walk, prefetching or not, in its tight loop or not, refuses a group
    # beyond the lengths (the prefetch itself only asks for lengths that exist) and a
    # list out of order (a group below the window's first).
    for flags in (0, 1, 4, 5):
        with pytest.raises(ValueError, match="beyond lengths"):
            core.bm25_daat(
                [term], np.zeros(1, np.int64), lengths, *common, -np.inf, 100, -1, nums,
                scores, np.zeros(1, np.uint8), None, flags,
            )  # fmt: skip
        unordered = (1.0, 2.0, array("i", [5, 3]), array("B", [1, 1]), 2, array("i"), 0)
        with pytest.raises(ValueError, match="out of order"):
            core.bm25_daat(
                [unordered], np.zeros(1, np.int64), np.ones(8, np.int32), *common,
                -np.inf, 100, -1, nums, scores, np.zeros(1, np.uint8), None, flags,
            )  # fmt: skip
    with pytest.raises(TypeError):
        core.bm25_add_terms(["a", 1], {}, [], 0, lambda *a: None)
    # The offers: a heap of the wrong shape, counts out of range, a group number beyond
    # the table, a group whose recs is not a list.
    sticky = np.zeros(1, np.uint8)
    table: list[Any] = [None] * 64

    def offer(**changes: Any) -> tuple[Any, ...]:
        parts = {
            "table": table, "version": 1, "accept": None, "hs": np.empty(2),
            "hq": np.empty(2, np.int64), "hr": [None, None], "hn": np.zeros(2, np.int64),
            "seen": np.empty(4, np.int64), "remember": False,
        }  # fmt: skip
        parts.update(changes)
        return tuple(parts.values())

    bad: list[tuple[Any, ...]] = [
        offer(hs=np.empty(3)),  # scores and seqs of different lengths
        offer(hr=[None]),  # fewer records than scores
        offer(hn=np.array([3, 0], np.int64)),  # more in the heap than its limit
        offer(hn=np.array([0, 5], np.int64)),  # more seen than room
        offer(hn=np.zeros(1, np.int64)),  # no room for the seen count
        offer(accept=3),  # not callable
        offer()[:8],  # not the 9-tuple
    ]
    for args in bad:
        with pytest.raises((TypeError, ValueError)):
            core.bm25_daat(
                [term], cursors, np.ones(64, np.int32), *common, 0.0, 100, -1, nums, scores,
                sticky.copy(), args,
            )  # fmt: skip
    with pytest.raises((TypeError, ValueError)):  # offers need the cost-aware split
        core.bm25_daat(
            [term], cursors, np.ones(64, np.int32), *common, 0.0, 100, -1, nums, scores,
            None, offer(),
        )  # fmt: skip
    for short, match in (([None] * 8, "beyond the table"), ([object()] * 64, "recs")):
        with pytest.raises((TypeError, ValueError, AttributeError), match=match):
            core.bm25_daat(
                [term], np.zeros(1, np.int64), np.ones(64, np.int32), *common, 0.0, 100, 0,
                nums, scores, sticky.copy(), offer(table=short),
            )  # fmt: skip
    with pytest.raises(ValueError, match="seen is full"):
        core.bm25_daat(
            [term], np.zeros(1, np.int64), np.ones(64, np.int32), *common, 0.0, 100, 0,
            nums, scores, sticky.copy(), offer(remember=True),
        )  # fmt: skip


def test_offers_in_c_arguments_ties_and_errors() -> None:
    """``Bm25Daat.offer_to``/``drive``/``best`` refuse bad arguments before C; the heap
    in C breaks ties of equal scores by seq (a text stored again: several records of
    one group), honours the snapshot and the filter, and lets the filter's error
    through (the retrieve fails, nothing is kept)."""
    lengths = np.ones(128, np.int32)
    parts = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0 + 1e-9)
    daat = kernels.Bm25Daat([_term()], lengths, parts, 4)  # split by bound: no offers
    with pytest.raises(ValueError, match="cost-aware"):
        daat.offer_to([], 1, None, 1, 1)
    daat = kernels.Bm25Daat([_term()], lengths, parts, 4, True)
    with pytest.raises(ValueError, match="offer_to"):
        daat.drive(10)
    for args in [
        ((), 1, None, 1, 1),  # table not a list
        ([], -1, None, 1, 1),  # version
        ([], 1, 3, 1, 1),  # accept not callable
        ([], 1, None, 0, 1),  # limit
        ([], 1, None, 1, -1),  # seen
    ]:
        with pytest.raises((TypeError, ValueError)):
            daat.offer_to(*args)
    # Through the index: a text stored five times (one group, seqs 0..4, equal scores),
    # two records born after the snapshot, one retired, a filter.
    three = Three(scorers()["plain"])
    for _ in range(5):
        three.add("deploy the cat")
    three.add("deploy x")
    old = three.version
    three.add("deploy the cat")
    three.add("deploy the cat")
    three.delete(1)
    for version in (None, old):
        for limit in (1, 2, 3, 7):
            for accept in (None, lambda rec: rec.seq % 2 == 1):
                view = three.view(version)
                three.query(view, "deploy cat", limit, accept)  # every path agrees

    def boom(rec: Record) -> bool:
        raise RuntimeError("filter failed")

    with path("core"), pytest.raises(RuntimeError, match="filter failed"):
        three.indexes["core"].top_k(three.view(), "deploy cat", 3, boom)  # type: ignore[arg-type]


@pytest.mark.parametrize("largest", [1, 3])
def test_limits_beyond_the_c_heap_take_the_python_offers(largest: int, monkeypatch: Any) -> None:
    """A limit above ``knobs._C_OFFER_MAX`` is offered in Python: the same results."""
    monkeypatch.setattr(bm25_knobs, "_C_OFFER_MAX", largest)
    three = Three(scorers()["plain"])
    rng = random.Random(largest)
    for _ in range(200):
        three.add(" ".join(rng.choices(WORDS, k=rng.randint(1, 6))))
    for limit in (1, 2, 5):
        view = three.view()
        query = "cat deploy x w1"
        got = three.query(view, query, limit)
        want = brute_force(three.scorer, three.records, view.version, query, limit, now=NOW)
        assert got == [(score, rec.seq) for score, rec in want]


def test_core_switched_off_or_missing() -> None:
    """``ACTORMEM_BM25_CORE=0`` keeps the Python driver; a missing core says so in one
    line and the index still answers."""
    run = ("BM25Scorer", "a b", "a", "bm25_core_active()")
    out, notice = one_entry_run(*run, {"ACTORMEM_BM25_CORE": "0"})
    assert out == ["False", "1"]
    assert not notice
    out, notice = one_entry_run(
        *run, prelude="import sys; sys.modules['actormem._index._cbm25'] = None;"
    )
    assert out == ["False", "1"]
    assert len(notice) == 1
    assert "BM25 core" in notice[0]
    assert "unavailable" in notice[0]


def test_two_missing_cores_are_one_line() -> None:
    """With only the kernels built, the missing word-overlap and BM25 cores share one line
    of notice (README: one line on stderr), and both indexes still answer."""
    hide = (
        "import sys; sys.modules['actormem._index._cbm25'] = None;"
        " sys.modules['actormem._index._cwordoverlap'] = None;"
    )
    runs = (("BM25Scorer", "a b", "a"), ("WordOverlapScorer", "deploy b", "ploy"))
    for scorer, text, query in runs:
        out, notice = one_entry_run(scorer, text, query, "AVAILABLE", prelude=hide)
        assert out == ["True", "1"]
        assert len(notice) == 1, notice
        assert "word-overlap core" in notice[0]
        assert "BM25 core" in notice[0]


# -- the split short of theta at its edges ---------------------------------------------

EDGE_COMMON = [f"c{i}" for i in range(6)]
EDGE_RARE = [f"r{i}" for i in range(60)]
EDGE_ROOMS = [5e-324, 1e-12, 0.5, 0.8, math.nextafter(1.0, 0.0), 1.0]


@settings(max_examples=examples(40), deadline=None)
@given(
    room=st.sampled_from(EDGE_ROOMS),
    name=st.sampled_from(sorted(scorers())),
    seed=st.integers(0, 1 << 30),
    size=st.sampled_from([300, 1200]),
    kinds=st.sampled_from([3, 1200]),
    deletes=st.integers(0, 40),
    queries=st.lists(
        st.lists(st.sampled_from([*EDGE_COMMON, *EDGE_RARE[:10], "zz"]), min_size=1, max_size=14),
        min_size=1,
        max_size=3,
    ),
    limit=st.sampled_from([1, 3, 10, 400]),
    small=st.booleans(),
    filtered=st.booleans(),
)
def test_split_room_edges_agree_with_brute_force(
    room: float,
    name: str,
    seed: int,
    size: int,
    kinds: int,
    deletes: int,
    queries: list[list[str]],
    limit: int,
    small: bool,
    filtered: bool,
) -> None:
    """The split short of theta at its limits (the smallest room above 0, just below and
    at 1) on corpora of few distinct texts (``kinds`` 3: many equal scores and bounds,
    ties by seq) or many, one term or a term repeated, terms absent, deletions and an
    older snapshot, a filter: the core's ranking, scores and tie order are the brute force's."""
    accept = (lambda rec: rec.seq % 3 != 1) if filtered else None
    saved = {k: getattr(bm25_knobs, k) for k in ("_CHUNK", "_BOUND_CHUNK", "_SEEDS", "_SEED_ROOM")}
    if small:
        bm25_knobs._CHUNK, bm25_knobs._BOUND_CHUNK = 4, 4
        bm25_knobs._SEEDS, bm25_knobs._SEED_ROOM = 2, 2
    rng = random.Random(seed)
    texts = [
        " ".join(
            rng.choices(EDGE_COMMON, k=rng.randint(1, 8))
            + rng.choices(EDGE_RARE, k=rng.randint(0, 3))
        )
        for _ in range(kinds)
    ]
    try:
        three = Three(scorers()[name])
        old = 0
        for i in range(size):
            three.add(texts[rng.randrange(kinds)])
            if i == size // 2:
                old = three.version
        for _ in range(deletes):
            three.delete(rng.randrange(size))
        for words in queries:
            query = " ".join(words)
            for version in (None, old):
                view = three.view(version)
                with path("core"):
                    bm25_knobs._SPLIT_ROOM = room
                    hits = three.indexes["core"].top_k(view, query, limit, accept)  # type: ignore[arg-type]
                want = brute_force(
                    three.scorer, three.records, view.version, query, limit, accept, now=NOW
                )
                assert [(s, rec.seq) for s, rec in hits] == [(s, rec.seq) for s, rec in want], (
                    query,
                    version,
                )
    finally:
        for k, v in saved.items():
            setattr(bm25_knobs, k, v)


@pytest.mark.parametrize("new", [True, False])
def test_ties_passed_over_by_first_seq_agree(new: bool, monkeypatch: Any) -> None:
    """Copies of a text (distinct groups of one length: equal scores) over several
    windows, some moved by an upsert into a newer group with their older seq, a filter
    and an older snapshot: the heap in C passing over the groups that tie with its worst
    record by their first seq (``knobs._TIE_SKIP``), with no block cache
    (``knobs._NO_BLOCKS``) and prefetching lookups (``knobs._PREFETCH_SEEK``), agrees
    with the reference and the brute force, as without all three."""
    for name in ("_TIE_SKIP", "_NO_BLOCKS", "_PREFETCH_SEEK"):
        monkeypatch.setattr(bm25_knobs, name, new)
    rng = random.Random(11)
    three = Three(scorers()["plain"])
    old = 0
    for i in range(6_000):
        if i % 300 == 7:
            three.add(f"deploy cat m{i}")  # a copy: the same score as every other
        elif i % 1_000 == 999:
            three.add(f"deploy cat m{i}", upsert=True)  # the oldest live seq, a new group
        else:
            three.add(" ".join(rng.choices(WORDS, k=rng.randint(2, 6))))
        if i == 4_000:
            old = three.version
            three.delete(3)
    three.check()
    accepts = (None, lambda rec: rec.seq % 3 != 0)
    # The brute force once per (version, filter) at the largest limit, sliced for the
    # smaller ones (it ranks every hit, then cuts at the limit).
    most = {
        (version, i): brute_force(
            three.scorer,
            three.records,
            three.view(version).version,
            "deploy cat",
            10,
            accept,
            now=NOW,
        )
        for version in (None, old)
        for i, accept in enumerate(accepts)
    }
    for version in (None, old):
        for limit in (1, 3, 10):
            for i, accept in enumerate(accepts):
                view = three.view(version)
                got = three.query(view, "deploy cat", limit, accept)
                want = most[version, i][:limit]
                assert got == [(score, rec.seq) for score, rec in want]


def test_first_seq_is_what_the_tie_skip_reads(monkeypatch: Any) -> None:
    """A group holding an older seq than its number suggests (an upsert) must be read
    when it ties: with its first seq overstated, the heap in C passes over it and the
    top-k changes, so the skip reads ``_first_seq`` and the index keeps it right; a
    ``first`` of the wrong type (not int64 or int32) is refused before C."""
    three = Three(scorers()["plain"])
    for i in range(20):
        three.add(f"deploy cat m{i}")
    three.add("deploy cat m99", upsert=True)  # seq 0 again, the newest group
    index = three.indexes["core"]
    view = three.view()
    with path("core"):
        right = [(s, r.seq) for s, r in index.top_k(view, "deploy cat", 3, None)]  # type: ignore[arg-type]
    assert right[0][1] == 0  # the upserted record, found in the newest group
    index._first_seq = np.full(len(index._first_seq), 1 << 40, np.int64)  # overstated
    with path("core"):
        wrong = [(s, r.seq) for s, r in index.top_k(view, "deploy cat", 3, None)]  # type: ignore[arg-type]
    assert wrong != right
    assert 0 not in [seq for _, seq in wrong]
    parts = (0.5, 0.01, 1.5, 0.75, 10.0, 1.0)
    daat = kernels.Bm25Daat([_term()], np.ones(128, np.int32), parts, 4, True)
    daat.offer_to([None] * 128, 1, None, 1, 1)
    for bad in ([1, 2], np.ones(4, np.int16), np.ones(4, np.uint32), np.ones((2, 2), np.int64)):
        with pytest.raises((TypeError, ValueError)):
            daat.drive(10, first=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefetch"):
        kernels.Bm25Daat([_term()], np.ones(128, np.int32), parts, 4, True, prefetch_seek=1)  # type: ignore[arg-type]
    args = ([_term()], np.zeros(1, np.int64), np.ones(128, np.int32), *parts, 0.0, 10, -1)
    outs = (np.empty(4, np.int64), np.empty(4, np.float64), np.zeros(1, np.uint8), None)
    for flags in (-1, 64):  # the C code's own check of its flags
        with pytest.raises(ValueError, match="prefetch"):
            kernels._core().bm25_daat(*args, *outs, flags)
