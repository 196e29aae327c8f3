"""The contract between the engine and a scorer.

A *scorer* (``WordOverlapScorer``, ``BM25Scorer``, ...) is a small frozen configuration
object. The owner asks it once for a :class:`ScoringIndex`, a mutable structure that only
the owner task writes and that readers query through a :class:`ReadView` (a snapshot).

Lifecycle of a record in an index, all calls made by the owner, synchronously:

1. ``add(rec)``: ``rec`` was just stored; ``rec.born`` is the new version. Readers holding
   an older snapshot must not see it (filter with ``view.visible(rec)``).
2. ``retire(rec)``: ``rec.died`` was just set. Older snapshots still see ``rec``, so its
   data must stay readable.
3. ``purge(rec)``: no live snapshot can see ``rec`` any more; drop it physically (amortized
   O(1) per posting is fine: e.g. count dead postings and rebuild a list when half is dead).

``top_k`` runs in the reader's task, synchronously (no checkpoint, so the owner cannot
run in the middle of it). It must return exactly the ``limit`` best records visible at
``view.version`` that ``accept`` admits, best first, ties broken by ``rec.seq`` ascending.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from ._record import Record

__all__ = ["Accept", "ReadView", "Scorer", "ScoringIndex"]

#: A filter on records (namespace/category/tags), or ``None`` for "accept all".
Accept = Callable[[Record], bool] | None


class ReadView(Protocol):
    """What a scorer may read from a snapshot."""

    @property
    def version(self) -> int:
        """The snapshot's version: ``rec`` is visible iff ``rec.born <= version < rec.died``."""
        ...

    def __len__(self) -> int:
        """Number of records visible in the snapshot. O(1)."""
        ...

    def visible(self, rec: Record) -> bool:
        """Whether ``rec`` is visible in the snapshot. O(1)."""
        ...

    def by_relevance(self, below: float | None = None) -> Iterator[Record]:
        """Visible records, highest ``entry.relevance`` first, ties by ``seq``; with
        ``below``, only those whose relevance is lower than it. Lazy; consume it
        synchronously (before any checkpoint). O(log n) to start, amortized O(1) a step
        (plus skipped invisible records)."""
        ...


class ScoringIndex(Protocol):
    """Owner-written, snapshot-read index of one scorer."""

    def add(self, rec: Record) -> None: ...

    def retire(self, rec: Record) -> None: ...

    def purge(self, rec: Record) -> None: ...

    def top_k(
        self, view: ReadView, query: str, limit: int, accept: Accept
    ) -> list[tuple[float, Record]]: ...

    def _check(self, live: Iterable[Record]) -> None:
        """Assert every invariant; ``live`` is every record not yet purged."""
        ...


class Scorer(Protocol):
    """A scoring configuration; ``name`` is a short id used in reports and the CLI."""

    @property
    def name(self) -> str: ...

    def make_index(self) -> ScoringIndex: ...

    def score_entry(
        self, entry_text: str, tags: tuple[str, ...], relevance: float, query: str
    ) -> float:
        """The score of one entry for ``query`` computed from scratch, the reference the
        index must agree with. (Scorers whose score depends on corpus statistics, like
        BM25, may raise ``NotImplementedError`` here and test against a brute force over
        the whole corpus instead.)"""
        ...
