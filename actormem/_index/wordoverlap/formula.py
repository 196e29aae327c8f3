"""The word-overlap score from its parts, and from scratch (the reference).

Score (loopctl ``InMemoryStore::retrieve``, ``src/memory/builtin.rs``): see the package
documentation of :mod:`actormem._index.wordoverlap`.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["combine_word_overlap", "word_overlap_score"]


def combine_word_overlap(relevance: float, matched: int, n_words: int, tag: bool) -> float:
    """The score from its parts, in the one fixed float order every code path uses."""
    return 0.5 * relevance + 0.4 * (matched / n_words) + (0.3 if tag else 0.0) + 0.1


def word_overlap_score(memory: str, tags: Iterable[str], relevance: float, query: str) -> float:
    """loopctl's word-overlap score of one entry for ``query``, from scratch. O(q * len(memory)).

    This is the reference the index agrees with (see :class:`WordOverlapScorer`).
    """
    words = query.lower().split()
    low = memory.lower()
    matched = sum(1 for w in words if w in low)
    q = query.strip().lower()
    tag = bool(q) and any(q in t.lower() for t in tags)
    return combine_word_overlap(relevance, matched, max(len(words), 1), tag)
