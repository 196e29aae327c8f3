"""The BM25 scorer's configuration: a frozen, validated value that makes indexes."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import attrs

from ..._util import Final
from ..tokenize import Tokenizer
from .index import BM25Index

__all__ = ["BM25Scorer"]


def _non_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a float, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{attribute.name} must be a finite number >= 0, got {value!r}")


def _unit_interval(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    _non_negative(instance, attribute, value)
    if value > 1:
        raise ValueError(f"{attribute.name} must be in [0, 1], got {value!r}")


def _positive_or_none(
    instance: object, attribute: attrs.Attribute[Any], value: float | None
) -> None:
    if value is None:
        return
    _non_negative(instance, attribute, value)
    if value == 0:
        raise ValueError(f"{attribute.name} must be > 0 or None, got {value!r}")


@attrs.frozen(kw_only=True)
class BM25Scorer(metaclass=Final):
    """Okapi BM25 ranking, maintained incrementally by the memory's owner task.

    The document of an entry is its ``memory`` text followed by its tags, tokenized by
    ``tokenizer``. For a query with term weights ``q_t`` (the number of times ``t`` occurs
    in the tokenized query), at the retrieving snapshot's version::

        idf(t)   = ln(1 + (N - df_t + 0.5) / (df_t + 0.5))
        bm25(d)  = sum over query terms t in d of
                   (q_t * idf(t)) * tf / (tf + k1 * (1 - b + b * dl / avgdl))
        score(d) = bm25(d) * recency(d) * prior(d)
        recency(d) = 0.5 ** (max(0, now - created_at) / half_life)   (1 if half_life is None)
        prior(d)   = (1 - relevance_prior) + relevance_prior * entry.relevance

    where N is the number of entries visible in the snapshot, ``df_t`` those of them whose
    document has ``t``, ``tf`` the count of ``t`` in ``d``, ``dl`` the length of ``d`` in
    terms and ``avgdl`` the mean ``dl`` over the N entries; ``now`` and ``created_at`` are
    POSIX seconds. The IDF is Lucene's (always positive); the saturation
    ``tf / (tf + k1 * ...)`` is Robertson & Zaragoza's (2009) without the constant factor
    ``k1 + 1``, as in Lucene's ``BM25Similarity`` and ``bm25s``' ``"lucene"`` method, whose
    scores these equal. Both recency and prior lie in (0, 1], so they only lower a score.

    Only entries sharing at least one term with the query are returned.

    Attributes:
        k1: Term-frequency saturation, >= 0 (1.5).
        b: Length normalisation in [0, 1] (0.75).
        tokenizer: Text to terms; a :class:`~actormem.Tokenizer` (Unicode ``\\w+``,
            case-folded, no stemming, no stop words by default) or any callable
            ``str -> list[str]`` that is a pure function of its argument.
        half_life: Recency half-life in seconds, or ``None`` (default: no recency weighting).
        relevance_prior: Weight in [0, 1] of the entry's ``relevance`` as a prior; 0
            (default) ignores it, 1 multiplies the score by the relevance.
        clock: POSIX time source for ``now`` (``time.time``); tests inject their own.

    Raises:
        ValueError: ``k1`` negative, ``b`` or ``relevance_prior`` outside [0, 1],
            ``half_life`` not positive, or any of them not finite.
        TypeError: A numeric field is not a number.
    """

    k1: float = attrs.field(default=1.5, validator=_non_negative)
    b: float = attrs.field(default=0.75, validator=_unit_interval)
    tokenizer: Callable[[str], list[str]] = attrs.field(factory=Tokenizer)
    half_life: float | None = attrs.field(default=None, validator=_positive_or_none)
    relevance_prior: float = attrs.field(default=0.0, validator=_unit_interval)
    clock: Callable[[], float] = attrs.field(default=time.time, eq=False, repr=False)

    @property
    def name(self) -> str:
        """Short id for reports: ``"bm25"``."""
        return "bm25"

    def make_index(self) -> BM25Index:
        """A new, empty :class:`BM25Index` for this configuration. O(1)."""
        index: BM25Index = BM25Index._create(self)
        return index

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        """Not available: BM25 depends on the whole corpus (df, N, avgdl).

        Raises:
            NotImplementedError: Always; compare against a brute force over the corpus.
        """
        raise NotImplementedError("BM25 scores depend on corpus statistics")
