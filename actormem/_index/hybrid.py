"""A hybrid scorer: BM25 and dense ranks fused by weighted reciprocal rank fusion.

Theory of operation
-------------------
:class:`HybridIndex` keeps a :class:`~actormem._index.bm25.BM25Index` and a
:class:`~actormem._index.dense.DenseIndex` side by side (every ``add``, ``retire`` and
``purge`` goes to both). A retrieve asks each for its ``D = max(limit, depth)`` best
visible, admitted records, then scores each record found by either list with weighted
reciprocal rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009, with per-list weights
as in Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", 2023)::

    fused(d) = (1 - w) / (c + rank_bm25(d)) + w / (c + rank_dense(d))

with ranks from 1, a term dropped when ``d`` is not in that list's first ``D``. The
weights are chosen on LoCoMo's tuning conversations only (``docs/retrieval.md``): the
dense ranking is much weaker than BM25's on its own, so a small ``w`` lets it break
BM25's near-ties and bring in paraphrases without pushing out BM25's exact matches.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from .._record import Record
from .._util import Final
from .bm25 import BM25Index, BM25Scorer
from .dense import DenseIndex, DenseScorer
from .scoring import Accept, ReadView, drain

__all__ = ["HybridIndex", "HybridScorer", "fuse_ranks"]


def _weight(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a float, not {type(value).__name__}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value!r}")


def _positive(instance: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a number, not {type(value).__name__}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{attribute.name} must be > 0, got {value!r}")


def fuse_ranks(
    lists: Sequence[Sequence[tuple[float, Record]]], weights: Sequence[float], c: float
) -> list[tuple[float, Record]]:
    """Weighted reciprocal rank fusion of ranked lists (best first): every record found,
    by fused score descending, ties by ``seq`` ascending. O(total length log)."""
    fused: dict[Record, float] = {}
    for hits, w in zip(lists, weights, strict=True):
        if w == 0.0:
            continue
        for rank, (_, rec) in enumerate(hits, 1):
            fused[rec] = fused.get(rec, 0.0) + w / (c + rank)
    out = sorted(fused.items(), key=lambda item: (-item[1], item[0].seq))
    return [(score, rec) for rec, score in out]


@attrs.frozen(kw_only=True)
class HybridScorer(metaclass=Final):
    """BM25 and dense similarity, fused by weighted reciprocal rank fusion.

    ``score(d) = (1 - dense_weight) / (rrf_c + rank_bm25(d)) + dense_weight / (rrf_c +
    rank_dense(d))`` over each list's first ``max(limit, depth)`` visible entries that
    the filters admit (a list the entry is not in adds nothing). Scores lie in
    ``(0, 1 / (rrf_c + 1)]``; they compare entries of one retrieve, not of two.

    Attributes:
        bm25: The BM25 configuration (use the tuned text processing, see
            ``docs/retrieval.md``).
        dense: The dense configuration (its embedder).
        dense_weight: ``w`` in [0, 1]; 0 is BM25's ranking, 1 the dense one. 0.2 by
            default.
        rrf_c: The fusion's rank offset ``c`` (> 0); 30 by default (60 in Cormack et al.).
        depth: How many of each list are fused, at least ``limit``; 200 by default.

    The defaults were chosen on LoCoMo's tuning conversations with WordLlama and the
    tuned BM25 (``stress/hybrid_tuning.py``, ``docs/retrieval.md``).

    Runtime complexity of a retrieve: a BM25 top-``D`` plus a dense top-``D`` (see
    each), then O(D log D).
    """

    bm25: BM25Scorer = attrs.field(factory=BM25Scorer)
    dense: DenseScorer = attrs.field(factory=DenseScorer)
    dense_weight: float = attrs.field(default=0.2, validator=_weight)
    rrf_c: float = attrs.field(default=30.0, validator=_positive)
    depth: int = attrs.field(default=200, validator=_positive)

    @property
    def name(self) -> str:
        """Short id for reports: ``"hybrid"``."""
        return "hybrid"

    def make_index(self) -> HybridIndex:
        """A new, empty :class:`HybridIndex`. O(1) (plus loading the model once)."""
        return HybridIndex(self)

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        """Not available: a fused score depends on the other entries' ranks.

        Raises:
            NotImplementedError: Always.
        """
        raise NotImplementedError("fused scores depend on the ranks of the other entries")


class HybridIndex:
    """A BM25 index and a dense index, queried together (see the module docs)."""

    def __init__(self, scorer: HybridScorer) -> None:
        self.scorer = scorer
        self.bm25: BM25Index = scorer.bm25.make_index()
        self.dense: DenseIndex = scorer.dense.make_index()

    # Vectors ahead of time: the dense index's.
    def missing(self, texts: Iterable[str]) -> list[str]:
        """See :meth:`DenseIndex.missing`."""
        return self.dense.missing(texts)

    def embed(self, texts: Sequence[str]) -> np.ndarray[Any, Any]:
        """See :meth:`DenseIndex.embed`."""
        return self.dense.embed(texts)

    def offer(self, texts: Sequence[str], vectors: np.ndarray[Any, Any]) -> None:
        """See :meth:`DenseIndex.offer`."""
        self.dense.offer(texts, vectors)

    @property
    def model_name(self) -> str:
        """See :attr:`DenseIndex.model_name`."""
        return self.dense.model_name

    @property
    def dim(self) -> int:
        """The dense vectors' length."""
        return self.dense.dim

    def stored_vector(self, rec: Record) -> tuple[bytes, bytes] | None:
        """See :meth:`DenseIndex.stored_vector`."""
        return self.dense.stored_vector(rec)

    def offer_stored(self, texts: Sequence[str], blobs: Sequence[bytes]) -> list[str]:
        """See :meth:`DenseIndex.offer_stored`."""
        return self.dense.offer_stored(texts, blobs)

    @property
    def inline_chars(self) -> int:
        """See :class:`DenseScorer`."""
        return self.dense.inline_chars

    def add(self, rec: Record) -> None:
        """Index ``rec`` in both. O(BM25 add + dense add)."""
        self.bm25.add(rec)
        self.dense.add(rec)

    def retire(self, rec: Record) -> None:
        """Retire ``rec`` in both."""
        self.bm25.retire(rec)
        self.dense.retire(rec)

    def purge(self, rec: Record) -> None:
        """Purge ``rec`` from both."""
        self.bm25.purge(rec)
        self.dense.purge(rec)

    def vacuum(self, oldest: int) -> None:
        """BM25's statistics log trim (see :meth:`BM25Index.vacuum`)."""
        self.bm25.vacuum(oldest)

    def tokenize(self, text: str) -> list[str]:
        """BM25's tokenizer. O(len(text))."""
        return self.bm25.tokenize(text)

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]:
        """The ``limit`` best records by fused score, best first, ties by ``seq``."""
        return drain(self.top_k_steps(view, query, limit, accept))

    def top_k_steps(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> Generator[None, None, list[tuple[float, Record]]]:
        """:meth:`top_k` in slices: those of BM25's then of the dense search."""
        if limit <= 0 or len(view) == 0:
            return []
        s = self.scorer
        depth = max(limit, int(s.depth))
        lexical = yield from self.bm25.top_k_steps(view, query, depth, accept)
        if s.dense_weight > 0.0:
            semantic = yield from self.dense.top_k_steps(view, query, depth, accept)
        else:
            semantic = []
        fused = fuse_ranks((lexical, semantic), (1.0 - s.dense_weight, s.dense_weight), s.rrf_c)
        return fused[:limit]

    def _check(self, live: Iterable[Record]) -> None:
        """Both indexes' invariants."""
        recs = list(live)
        self.bm25._check(recs)
        self.dense._check(recs)
