"""Retrieve thresholds: a minimum score and a minimum number of matched query terms.

Both keep the scorer's contract (exactly the ``limit`` best admitted records, best
first, ties by ``seq``), over the records that pass:

* ``min_score``: a record passes when its score is at least this. The scorers return
  their best first, so the best ``limit`` that pass are the first ``limit`` results at
  or above it: the threshold cuts the sorted list, no scorer changes.
* ``min_matched``: a record passes when its text matches at least this many of the
  query's terms, in the scorer's own sense:

  - word overlap: query words (``query.lower().split()``, a repeated word counted each
    time, as in the score) that are substrings of the lower-cased text; the index
    counts them anyway, so it stops at that count
    (``_WordOverlapIndex.top_k_steps(min_matched=)``);
  - BM25 and hybrid: distinct tokenized query terms present in the entry's document
    (text and tags), through a filter that reads the document's terms (BM25 alone
    returns only records matching one term, so there 1 needs no filter; the hybrid's
    dense side ranks every record, so it is filtered at every value);
  - dense: refused (:class:`~actormem.InvalidQueryError`): a vector has no terms.
"""

from __future__ import annotations

import sys
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from .._errors import InvalidQueryError
from .._record import Record
from .scoring import Accept, ReadView, ScoringIndex, top_k_steps

if TYPE_CHECKING:
    from .bm25 import BM25Index

__all__ = ["matches_terms", "thresholded_steps"]

Hits = list[tuple[float, Record]]


def _bm25_kinds() -> tuple[type[Any] | None, type[Any] | None]:
    """``(BM25Index, HybridIndex)``, each None while its module was never imported (no
    index of that kind can exist yet): a word-overlap process need not load them to ask
    whether an index is one. O(1)."""
    bm25 = sys.modules.get("actormem._index.bm25.index")
    hybrid = sys.modules.get("actormem._index.hybrid")
    return getattr(bm25, "BM25Index", None), getattr(hybrid, "HybridIndex", None)


def _is_kind(index: object, kind: type[Any] | None) -> bool:
    return kind is not None and isinstance(index, kind)


def _terms_filter(bm25: BM25Index, query: str, min_matched: int, accept: Accept) -> Accept:
    """``accept`` and "the document has at least ``min_matched`` distinct query terms"."""
    terms = frozenset(bm25.tokenize(query))
    if min_matched > len(terms):
        return lambda rec: False

    def matched(rec: Record) -> bool:
        if accept is not None and not accept(rec):
            return False
        have = bm25.document_terms(rec)
        return sum(1 for t in terms if t in have) >= min_matched

    return matched


#: Without thresholds, :func:`thresholded_steps` gives the index's own steps, not a
#: generator that delegates to them: every step of a retrieve passes one generator
#: frame fewer (a retrieve of the main job takes ~4 steps). The same steps, result and
#: errors. False: the delegating generator always (the path before it).
_UNWRAPPED = True


def thresholded_steps(
    index: ScoringIndex,
    view: ReadView,
    query: str,
    limit: int,
    accept: Accept,
    min_score: float | None = None,
    min_matched: int = 0,
) -> Generator[None, None, Hits]:
    """:func:`~actormem._index.scoring.top_k_steps` with the thresholds of the module
    docs (``None`` / 0: none). Without thresholds, the index's ``top_k_steps`` is
    called now (an index may do some work then: BM25 reads the query's terms).

    Raises (at the first step):
        InvalidQueryError: ``min_matched`` > 0 with an index that has no terms (dense)
            or that this module does not know.
    """
    if _UNWRAPPED and min_score is None and min_matched <= 0:
        return top_k_steps(index, view, query, limit, accept)
    return _thresholded(index, view, query, limit, accept, min_score, min_matched)


def _thresholded(
    index: ScoringIndex,
    view: ReadView,
    query: str,
    limit: int,
    accept: Accept,
    min_score: float | None,
    min_matched: int,
) -> Generator[None, None, Hits]:
    """:func:`thresholded_steps` as one generator (its errors at the first step)."""
    if min_matched > 0:
        if not matches_terms(index):
            raise InvalidQueryError(
                f"min_matched= needs a scorer that matches terms (word overlap, BM25, "
                f"hybrid), not {type(index).__name__}"
            )
        bm25_kind, hybrid_kind = _bm25_kinds()
        is_hybrid = _is_kind(index, hybrid_kind)
        if is_hybrid or _is_kind(index, bm25_kind):
            bm25: Any = index.bm25 if is_hybrid else index  # type: ignore[attr-defined]
            # BM25 returns only documents with a query term, so 1 needs no filter; the
            # hybrid's dense list ranks every document, so it always does.
            if min_matched > 1 or is_hybrid:
                accept = _terms_filter(bm25, query, min_matched, accept)
            steps = top_k_steps(index, view, query, limit, accept)
        else:
            steps = index.top_k_steps(  # type: ignore[attr-defined]
                view, query, limit, accept, min_matched=min_matched
            )
    else:
        steps = top_k_steps(index, view, query, limit, accept)
    hits: Hits = yield from steps
    if min_score is not None:
        hits = [(score, rec) for score, rec in hits if score >= min_score]
    return hits


def matches_terms(index: object) -> bool:
    """Whether ``min_matched=`` means something for ``index``: BM25, hybrid (through its
    BM25 half), or an index whose ``top_k_steps`` takes it (``supports_min_matched``:
    word overlap). O(1)."""
    bm25_kind, hybrid_kind = _bm25_kinds()
    return _is_kind(index, bm25_kind) or _is_kind(index, hybrid_kind) or bool(
        getattr(index, "supports_min_matched", False)
    )
