"""The word-overlap scorer's configuration: a frozen value that makes indexes."""

from __future__ import annotations

import attrs

from ..._util import Final
from .formula import word_overlap_score
from .index import _WordOverlapIndex

__all__ = ["WordOverlapScorer"]


@attrs.frozen(kw_only=True, slots=True)
class WordOverlapScorer(metaclass=Final):
    """loopctl's built-in word-overlap score, exact, answered from an inverted index.

    See the package documentation for the formula. Scores lie in [0.1, 1.3].

    Args:
        essential_budget: Postings (group numbers over the tokens that contain a query
            word) from which a word's match set is cached across retrieves. Changes
            speed and memory only, never results.

    Runtime complexity of a retrieve: O(q * G) vectorised (numpy) for q distinct query
    words and G group numbers (distinct texts ever indexed since the last rebuild), plus
    O(P) for the postings of the words whose match sets are not cached, plus O(V log k)
    in Python for the V records scored exactly (typically a few times k).
    """

    essential_budget: int = 2048

    @property
    def name(self) -> str:
        return "word-overlap"

    def make_index(self) -> _WordOverlapIndex:
        return _WordOverlapIndex(self.essential_budget)

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        return word_overlap_score(entry_text, tags, relevance, query)
