"""The contract between the engine and a scorer.

A *scorer* (``WordOverlapScorer``, ``BM25Scorer``, ...) is a small frozen configuration
object. The owner asks it once for a :class:`ScoringIndex`, a mutable structure that only
the owner task writes and that readers query through a :class:`ReadView` (a snapshot).

Lifecycle of a record in an index, all calls made by the owner, synchronously:

1. ``add(rec)``: ``rec`` was just stored; ``rec.born`` is the new version. Readers holding
   an older snapshot must not see it (filter with ``view.visible(rec)``). If ``rec.died``
   is already set (a durable owner indexes a batch after applying it, see
   ``MemoryState.defer_index``, and the record was replaced within the batch), ``add``
   also retires it, and no ``retire`` call follows.
2. ``retire(rec)``: ``rec.died`` was just set. Older snapshots still see ``rec``, so its
   data must stay readable.
3. ``purge(rec)``: no live snapshot can see ``rec`` any more; drop it physically (amortized
   O(1) per posting is fine: e.g. count dead postings and rebuild a list when half is dead).

``top_k`` runs in the reader's task, synchronously. It must return exactly the ``limit``
best records visible at ``view.version`` that ``accept`` admits, best first, ties broken by
``rec.seq`` ascending.

*Sliced retrieves.* An index may also provide ``top_k_steps``, the same query as a
generator that yields ``None`` after each bounded chunk of work (about 0.1 ms) and returns
what ``top_k`` returns. ``Memory.retrieve`` drives it and reaches a trio checkpoint
whenever a slice of :data:`RETRIEVE_SLICE` seconds has run, so a retrieve over a million
entries never holds the event loop for long; the view stays registered as a live snapshot
meanwhile, so nothing it can see is purged. Between two yields the owner may apply any
number of writes: append records to lists (invisible to the view by version), add and
delete dict entries, retire records, purge records the view cannot see (compacting a list
by replacing it, never by editing it in place). A generator therefore never keeps an
iterator over a dict, set or sorted list of the owner's across a yield (``by_relevance``
is safe: it re-seeks). Indexes without ``top_k_steps`` run in one step.
"""

from __future__ import annotations

import mmap
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import Any, Protocol, TypeVar

import numpy as np

from .._record import Record

__all__ = ["RETRIEVE_SLICE", "Accept", "ReadView", "Scorer", "ScoringIndex", "drain", "top_k_steps"]

#: Seconds a retrieve runs before it lets other tasks run (a trio checkpoint), when its
#: index provides ``top_k_steps``.
RETRIEVE_SLICE = 1e-4

_T = TypeVar("_T")

#: What ``top_k`` and ``top_k_steps`` return: (score, record) pairs, best first.
Hits = list[tuple[float, Record]]

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
        ``below``, only those whose relevance is lower than it. Lazy, and safe to consume
        across yields of ``top_k_steps``. O(log n) to start, amortized O(1) a step (plus
        skipped invisible records)."""
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


def drain(steps: Generator[None, None, _T]) -> _T:
    """Run a sliced computation (e.g. ``top_k_steps``) to its end and return its value.
    O(its work)."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            result: _T = stop.value
            return result


#: numpy's module defines a ``__getattr__``, so Python 3.11 cannot specialize an ``np.X``
#: read: the hot checks read these module names instead (the same objects; hot45).
_DTYPE = np.dtype

#: Bytes :func:`zeroed_steps` and :meth:`ScratchPool.take_steps` write between two yields.
_ZERO_STEP_BYTES = 256 << 10
#: :meth:`ScratchPool.take_steps` finds a scalar type's spares by its dtype from
#: ``_DTYPE_OF`` (a dict keyed by the type object: a pointer's hash) instead of making
#: ``np.dtype(t)`` at every call (numpy's ``arraydescr_new``, ~0.7% of a main-job
#: retrieve's samples), and zeroes a spare that one step covers without
#: :func:`_zero_steps`' generator (the same bytes zeroed, the same one yield). False:
#: the path before it (p99_52).
_LEAN_TAKE = True
#: The scalar types the retrieves take scratch arrays of, by their dtypes (the same
#: objects ``np.dtype(t)`` returns).
_DTYPE_OF: dict[Any, np.dtype[Any]] = {
    t: np.dtype(t) for t in (np.uint8, np.uint16, np.int64, np.uint64, np.float64, np.bool_)
}
#: Arrays from this size get transparent huge pages from numpy (its
#: ``madvise(MADV_HUGEPAGE)`` threshold, 4 MiB), so :func:`zeroed_steps` maps them itself.
_HUGE_PAGE_ARRAY = 4 << 20


def zeroed_steps(size: int, dtype: Any) -> Generator[None, None, np.ndarray[Any, Any]]:
    """A new numpy array of ``size`` zeros of ``dtype``, paged in 256 KiB (64 pages) at
    a time with a yield between.

    From 4 MiB the memory is an anonymous ``mmap`` (zero-filled by the kernel, 4 KiB
    pages), not numpy's allocator: numpy asks for transparent huge pages for arrays that
    large, and on this project's VMs a fresh 2 MiB page faulted in up to 12 ms in one
    step (a 9.6 MB array ~29 ms in all, against ~9 ms in 4 KiB faults). Smaller arrays
    come from numpy, whose heap memory is usually paged in already. Scattered writes
    into a fresh array fault wherever they land, so it is paged in first, in order.
    O(size) in steps."""
    nbytes = size * np.dtype(dtype).itemsize
    if nbytes == 0:
        return np.zeros(size, dtype)
    if nbytes >= _HUGE_PAGE_ARRAY:
        arr = np.frombuffer(mmap.mmap(-1, nbytes), dtype)
    else:
        arr = np.empty(size, dtype)
    yield from _zero_steps(arr, size)
    return arr


def _zero_steps(arr: np.ndarray[Any, Any], n: int) -> Generator[None, None, None]:
    """Zero ``arr`` up to ``n`` rounded up to a whole step of 256 KiB (or to its end),
    a step between two yields. O(n) in steps."""
    step = max(1, _ZERO_STEP_BYTES // arr.itemsize)
    for start in range(0, n, step):
        arr[start : start + step] = 0
        yield


class ScratchPool:
    """Spare per-group scratch arrays (match counts, partial scores) that retrieves
    borrow and give back, so a retrieve writes into memory already paged in: a fresh
    array's page faults cost more than the retrieve itself at 1M groups.

    Arrays have the index's capacity at the time (its per-group arrays' length); one
    given back at another capacity is dropped, as are spares beyond ``most`` per dtype
    or beyond ``most_bytes`` in all (what the pool keeps is the high-water mark of
    concurrent retrieves: at 1M entries a BM25 retrieve borrows ~9 MB). No lock: the
    owner and the readers run on one thread, between checkpoints."""

    __slots__ = ("_bytes", "_most", "_most_bytes", "_spares")

    def __init__(self, most: int = 64, most_bytes: int = 256 << 20) -> None:
        self._most = most
        self._most_bytes = most_bytes
        self._bytes = 0
        # By dtype object: ``dtype.name`` is computed in Python by numpy (~3 us a call,
        # four calls a word-overlap retrieve).
        self._spares: dict[np.dtype[Any], list[np.ndarray[Any, Any]]] = {}

    @property
    def nbytes(self) -> int:
        """Bytes of the spares kept now. O(1)."""
        return self._bytes

    def take_steps(
        self, dtype: Any, n: int, capacity: int
    ) -> Generator[None, None, np.ndarray[Any, Any]]:
        """An array of at least ``n`` elements of ``dtype``: a spare, else a new one of
        ``capacity`` elements (:func:`zeroed_steps`). Zero up to ``n`` rounded up to a
        whole step of 256 KiB (at least 32,768 elements of 8 bytes), or to its end; the
        rest is garbage, so slice it off if it could be read. O(n) in steps."""
        dt = None
        if _LEAN_TAKE:
            try:
                dt = _DTYPE_OF.get(dtype)  # (a dtype is falsy: no `or`)
            except TypeError:  # an unhashable spec (a structured dtype's list or dict)
                pass
        spares = self._spares.get(_DTYPE(dtype) if dt is None else dt)
        while spares:
            arr = spares.pop()
            self._bytes -= arr.nbytes
            if len(arr) >= n:
                step = _ZERO_STEP_BYTES // arr.itemsize
                if _LEAN_TAKE and 0 < n <= step:
                    arr[:step] = 0  # _zero_steps' only step, without its generator
                    yield
                else:
                    yield from _zero_steps(arr, n)
                return arr
        return (yield from zeroed_steps(max(n, capacity), dtype))

    def give(self, arr: np.ndarray[Any, Any], capacity: int) -> None:
        """Keep ``arr`` (from :meth:`take_steps`) for a later retrieve if it has
        ``capacity`` elements and the pool has room. O(1)."""
        if len(arr) != capacity or self._bytes + arr.nbytes > self._most_bytes:
            return
        spares = self._spares.setdefault(arr.dtype, [])
        if len(spares) < self._most:
            spares.append(arr)
            self._bytes += arr.nbytes

    def clear(self) -> None:
        """Drop every spare (the capacity changed). O(spares)."""
        self._spares.clear()
        self._bytes = 0


def _one_step(
    index: ScoringIndex, view: ReadView, query: str, limit: int, accept: Accept
) -> Generator[None, None, Hits]:
    return index.top_k(view, query, limit, accept)
    yield  # a generator function  # pragma: no cover


def top_k_steps(
    index: ScoringIndex, view: ReadView, query: str, limit: int, accept: Accept
) -> Generator[None, None, Hits]:
    """``index.top_k_steps(...)`` if the index has it, else ``top_k`` as a single step."""
    steps = getattr(index, "top_k_steps", None)
    if steps is None:
        return _one_step(index, view, query, limit, accept)
    result: Generator[None, None, Hits] = steps(view, query, limit, accept)
    return result
