"""A hybrid scorer: BM25 and dense scores fused, plus a bonus for entries in the asked period.

Theory of operation
-------------------
:class:`HybridIndex` keeps a :class:`~actormem._index.bm25.BM25Index` and a
:class:`~actormem._index.dense.DenseIndex` side by side (every ``add``, ``retire`` and
``purge`` goes to both), and for each record whose text or tags mention a date, those
dates (:mod:`~actormem._index.dates`, read once at ``add``). A retrieve asks each index
for its ``D = max(limit, depth)`` best visible, admitted records, then scores each
record found in the first ``depth`` of either list (so the fused ranking does not depend
on ``limit``: a larger limit only appends). By default (``fusion="convex"``) that is a convex
combination of normalised scores (Bruch, Gai & Ingber, "An Analysis of Fusion Functions
for Hybrid Retrieval", 2023)::

    fused(d) = (1 - w) * bm25(d) / max bm25 + w * (cos(d) - min cos) / (max cos - min cos)

max and min over each list's first ``depth`` records, a term 0 when ``d`` is not among
them;
``fusion="rrf"`` keeps weighted reciprocal rank fusion (Cormack, Clarke & Buettcher,
SIGIR 2009), ``(1 - w) / (c + rank_bm25(d)) + w / (c + rank_dense(d))``. When ``limit``
exceeds the fused records, the lists' further records follow with score 0, by rank
(:func:`append_beyond`). When the query
names a period (a year, a month, a day), the records whose ``created_at`` day or
mentioned dates fall inside it gain ``date_weight`` times the best fused score
(:func:`lift_dated`). The weights are chosen on LoCoMo's tuning conversations only
(``docs/retrieval.md``): the dense ranking is much weaker than BM25's on its own, so a
small ``w`` lets it break BM25's near-ties and bring in paraphrases without pushing out
BM25's exact matches; BM25 scaled by its maximum keeps how far ahead its best match is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from .._record import Record
from .._util import Final
from .bm25 import BM25Index, BM25Scorer
from .dates import Period, mentioned_periods, query_period
from .dense import DenseIndex, DenseScorer
from .scoring import Accept, ReadView, drain

__all__ = [
    "HybridIndex",
    "HybridScorer",
    "append_beyond",
    "fuse_ranks",
    "fuse_scores",
    "lift_dated",
]


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


#: The largest ``HybridScorer.depth`` accepted.
MAX_DEPTH = 1_000_000


def _depth(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"depth must be an int, not {type(value).__name__}")
    if not 1 <= value <= MAX_DEPTH:
        raise ValueError(f"depth must be in [1, {MAX_DEPTH:,}], got {value!r}")


def _normalised(hits: Sequence[tuple[float, Record]], how: str) -> dict[Record, float]:
    """Each record's score in ``hits`` scaled into [0, 1] over the list: ``s / max`` when
    ``how == "max"`` and the largest score is > 0, else ``(s - min) / (max - min)``
    (1 for every record when all scores are equal). O(len(hits))."""
    if not hits:
        return {}
    scores = [s for s, _ in hits]
    hi, lo = max(scores), min(scores)
    if how == "max" and hi > 0.0:
        return {rec: s / hi for s, rec in hits}
    if hi == lo:
        return {rec: 1.0 for _, rec in hits}
    span = hi - lo
    return {rec: (s - lo) / span for s, rec in hits}


def fuse_scores(
    lists: Sequence[Sequence[tuple[float, Record]]],
    weights: Sequence[float],
    norms: Sequence[str],
) -> list[tuple[float, Record]]:
    """Convex combination of normalised scores (Bruch, Gai & Ingber 2023): every record
    found, scored ``sum_i weights[i] * norm_i(d)`` with ``norm_i`` the record's score in
    list ``i`` scaled by :func:`_normalised` (``norms[i]``: ``"max"`` or ``"minmax"``),
    0 when it is not in that list; by fused score descending, ties by ``seq`` ascending.

    With weights summing to 1 the scores lie in [0, 1]. O(total length log).
    """
    fused: dict[Record, float] = {}
    for hits, w, how in zip(lists, weights, norms, strict=True):
        if w == 0.0:
            continue
        for rec, v in _normalised(hits, how).items():
            fused[rec] = fused.get(rec, 0.0) + w * v
    out = sorted(fused.items(), key=lambda item: (-item[1], item[0].seq))
    return [(score, rec) for rec, score in out]


def lift_dated(
    fused: Sequence[tuple[float, Record]],
    dated: Callable[[Record], bool],
    weight: float,
) -> list[tuple[float, Record]]:
    """``fused`` (best first) with ``weight * top`` added to the score of every record
    for which ``dated(rec)`` holds, ``top`` being the best fused score (so the bonus is
    on the fusion's own scale: ``weight`` of the best score), re-sorted, ties by ``seq``.

    O(len(fused) log + the calls of ``dated``); ``fused`` unchanged when ``weight`` is 0
    or ``fused`` empty.
    """
    if weight == 0.0 or not fused:
        return list(fused)
    bonus = weight * max(s for s, _ in fused)
    lifted = [(s + bonus if dated(rec) else s, rec) for s, rec in fused]
    lifted.sort(key=lambda item: (-item[0], item[1].seq))
    return lifted


def _entry_mentions(rec: Record) -> tuple[Period, ...]:
    """The dates ``rec``'s text and tags mention, each read up to
    :data:`~actormem._index.dates.MENTION_CHARS` characters. O(1): at most twice that."""
    entry = rec.entry
    found = mentioned_periods(entry.memory)
    if not entry.tags:
        return found
    return tuple(dict.fromkeys((*found, *mentioned_periods("\n".join(entry.tags)))))


def append_beyond(
    fused: Sequence[tuple[float, Record]],
    lists: Sequence[Sequence[tuple[float, Record]]],
    weights: Sequence[float],
    depth: int,
    limit: int,
) -> list[tuple[float, Record]]:
    """``fused`` (the fusion of each list's first ``depth`` records) followed, up to
    ``limit`` records, by the other records of ``lists`` (those of weight > 0) with score
    0, in order of their rank in a list from ``depth + 1`` on (at equal rank, the lists'
    order). The order never depends on how long the lists are, so a larger ``limit``
    only appends. O(total length)."""
    out = list(fused)
    seen = {rec for _, rec in out}
    used = [hits for hits, w in zip(lists, weights, strict=True) if w != 0.0]
    for rank in range(depth, max(map(len, used), default=0)):
        for hits in used:
            if rank < len(hits):
                rec = hits[rank][1]
                if rec not in seen:
                    seen.add(rec)
                    out.append((0.0, rec))
                    if len(out) >= limit:
                        return out
    return out


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


#: Fusion functions :class:`HybridScorer` accepts.
FUSIONS = ("convex", "rrf")
#: Per fusion, the defaults of ``dense_weight`` and ``date_weight`` (chosen on LoCoMo's
#: tuning conversations, ``stress/hybrid_tuning.py``).
DEFAULT_WEIGHTS: dict[str, tuple[float, float]] = {"convex": (0.3, 0.75), "rrf": (0.2, 0.0)}
#: How the convex fusion scales each list: BM25 by its largest score, cosine min-max.
CONVEX_NORMS = ("max", "minmax")


def _fusion(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if value not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(map(repr, FUSIONS))}, got {value!r}")


def _optional_weight(
    instance: object, attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is not None:
        _weight(instance, attribute, value)  # type: ignore[arg-type]


def _date_weight(
    instance: object, attribute: attrs.Attribute[float | None], value: float | None
) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{attribute.name} must be a float, not {type(value).__name__}")
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{attribute.name} must be finite and >= 0, got {value!r}")


@attrs.frozen(kw_only=True)
class HybridScorer(metaclass=Final):
    """BM25 and dense similarity fused into one ranking, with a bonus for dated entries.

    Each side lists its first ``depth`` visible entries that the filters admit; every
    entry in either list is a candidate, scored by ``fusion`` (so the ranking does not
    depend on ``limit``):

    * ``"convex"`` (the default): ``(1 - w) * bm25(d) / max bm25 + w * (cos(d) - min
      cos) / (max cos - min cos)``, max and min over the list (Bruch, Gai & Ingber,
      "An Analysis of Fusion Functions for Hybrid Retrieval", 2023; a list the entry is
      not in adds 0, all-equal cosines count 1). Fused scores lie in [0, 1].
    * A ``limit`` above the number of candidates is filled with the lists' next entries
      (ranks ``depth + 1`` on, alternating between the lists), each with score 0, so a
      larger limit only appends to a smaller one's results.
    * ``"rrf"``: weighted reciprocal rank fusion (Cormack, Clarke & Buettcher 2009),
      ``(1 - w) / (rrf_c + rank_bm25(d)) + w / (rrf_c + rank_dense(d))``, ranks from 1;
      scores in ``(0, 1 / (rrf_c + 1)]``.

    Then the date bonus: when the query names a period (``"in June"``, ``"on 1 February,
    2023"``, ``"in 2022"``; :func:`actormem._index.dates.query_period`), every
    candidate whose ``created_at`` day or whose text or tags mention a date inside that
    period (:mod:`actormem._index.dates`) gains ``date_weight`` times the best fused
    score. A query naming no period gets no bonus.

    Scores compare entries of one retrieve, not of two.

    Attributes:
        bm25: The BM25 configuration (use the tuned text processing, see
            ``docs/retrieval.md``).
        dense: The dense configuration (its embedder).
        fusion: ``"convex"`` or ``"rrf"`` (anything else: ``ValueError``).
        dense_weight: ``w`` in [0, 1]; 0 is BM25's ranking, 1 the dense one. ``None``
            (the default): 0.3 with ``"convex"``, 0.2 with ``"rrf"``.
        date_weight: The date bonus as a fraction of the best fused score, >= 0 (0: no
            bonus). ``None`` (the default): 0.75 with ``"convex"``, 0 with ``"rrf"``, so
            ``HybridScorer(fusion="rrf")`` ranks exactly as the RRF-only scorer did.
        rrf_c: The RRF rank offset ``c`` (> 0); 30 by default (60 in Cormack et al.).
        depth: How many of each list are fused, an int in [1, 1,000,000]; 200 by default.

    The defaults were chosen on LoCoMo's tuning conversations with WordLlama and the
    tuned BM25 (``stress/hybrid_tuning.py``, ``docs/retrieval.md``).

    Raises:
        ValueError: An unknown ``fusion``, a weight out of range, a ``depth`` out of
            [1, 1,000,000], an ``rrf_c`` <= 0.
        TypeError: A weight or number of the wrong type, a ``depth`` that is not an
            int, a ``bm25`` not a :class:`BM25Scorer` or ``dense`` not a
            :class:`DenseScorer`.

    Runtime complexity of a retrieve: a BM25 top-``D`` plus a dense top-``D`` (see
    each), then O(D log D) (the date bonus: O(len(query)) once, then O(1) per candidate
    plus its text's cached mentions).
    """

    bm25: BM25Scorer = attrs.field(
        factory=BM25Scorer, validator=attrs.validators.instance_of(BM25Scorer)
    )
    dense: DenseScorer = attrs.field(
        factory=DenseScorer, validator=attrs.validators.instance_of(DenseScorer)
    )
    fusion: str = attrs.field(default="convex", validator=_fusion)
    dense_weight: float | None = attrs.field(default=None, validator=_optional_weight)
    date_weight: float | None = attrs.field(default=None, validator=_date_weight)
    rrf_c: float = attrs.field(default=30.0, validator=_positive)
    depth: int = attrs.field(default=200, validator=_depth)

    @property
    def dense_w(self) -> float:
        """``dense_weight``, or the fusion's default when it is ``None``."""
        w = self.dense_weight
        return DEFAULT_WEIGHTS[self.fusion][0] if w is None else float(w)

    @property
    def date_w(self) -> float:
        """``date_weight``, or the fusion's default when it is ``None``."""
        w = self.date_weight
        return DEFAULT_WEIGHTS[self.fusion][1] if w is None else float(w)

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
        # The dates each indexed record's text and tags mention, for records that
        # mention one (read at add, so a retrieve's date bonus is O(1) per candidate).
        self._mentions: dict[Record, tuple[Period, ...]] = {}

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

    def inline_ok(self, texts: Sequence[str]) -> bool:
        """See :meth:`DenseIndex.inline_ok`."""
        return self.dense.inline_ok(texts)

    def query_index(self) -> DenseIndex | None:
        """The dense index a retrieve embeds its query with; None when the dense weight
        is 0 (no embedding)."""
        return self.dense if self.scorer.dense_w > 0.0 else None

    def add(self, rec: Record) -> None:
        """Index ``rec`` in both, and note the dates it mentions. O(BM25 add + dense add
        + len(text))."""
        self.bm25.add(rec)
        self.dense.add(rec)
        found = _entry_mentions(rec)
        if found:
            self._mentions[rec] = found

    def retire(self, rec: Record) -> None:
        """Retire ``rec`` in both."""
        self.bm25.retire(rec)
        self.dense.retire(rec)

    def purge(self, rec: Record) -> None:
        """Purge ``rec`` from both."""
        self.bm25.purge(rec)
        self.dense.purge(rec)
        self._mentions.pop(rec, None)

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
        depth = int(s.depth)
        deep = max(limit, depth)
        w = s.dense_w
        lexical = yield from self.bm25.top_k_steps(view, query, deep, accept)
        if w > 0.0:
            semantic = yield from self.dense.top_k_steps(view, query, deep, accept)
        else:
            semantic = []
        # Only each list's first ``depth`` records are fused (the same whatever the
        # limit), so a larger limit only appends (see append_beyond).
        lists, weights = (lexical[:depth], semantic[:depth]), (1.0 - w, w)
        if s.fusion == "rrf":
            fused = fuse_ranks(lists, weights, s.rrf_c)
        else:
            fused = fuse_scores(lists, weights, CONVEX_NORMS)
        period = query_period(query) if s.date_w > 0.0 else None
        if period is not None:
            fused = lift_dated(fused, lambda rec: self.dated(rec, period), s.date_w)
        if limit > len(fused):
            fused = append_beyond(fused, (lexical, semantic), weights, depth, limit)
        return fused[:limit]

    def dated(self, rec: Record, period: Period) -> bool:
        """Whether ``rec``'s ``created_at`` day, or a date its text or tags mention, is
        inside ``period``. O(1) plus the record's mentions (cached at add)."""
        if period.contains(Period.of(rec.cols.get(rec.slot, "created_at"))):
            return True
        return any(period.contains(p) for p in self._mentions.get(rec, ()))

    def _check(self, live: Iterable[Record]) -> None:
        """Both indexes' invariants."""
        recs = list(live)
        self.bm25._check(recs)
        self.dense._check(recs)
        alive = set(recs)
        for rec, found in self._mentions.items():
            assert rec in alive, rec
            assert found, rec
            assert found == _entry_mentions(rec), (rec, found)
