"""Immutable snapshots of a memory, and the retrieve that runs on them.

A :class:`Snapshot` is a version number plus a reference to the owner's structures
(see :mod:`actormem._engine.state`): O(1) to take, no entry is copied. Scoring runs in the
caller's task: synchronously for a snapshot's own methods, in slices with checkpoints
between them for ``Memory.retrieve`` (:func:`run_retrieve_sliced`), where multi-version
concurrency control keeps the view unchanged while the owner applies writes meanwhile.
"""

from __future__ import annotations

import heapq
import math
import time
import uuid
import weakref
from collections.abc import (
    AsyncGenerator,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import trio

from .._entry import MemoryCategory, MemoryEntry, ScoredEntry
from .._errors import InvalidQueryError
from .._index.scoring import RETRIEVE_SLICE, Accept, drain
from .._index.thresholds import thresholded_steps
from .._json import compile_where
from .._record import Record
from .._util import NoPublicConstructor, sequence_of
from .state import _SEQ

if TYPE_CHECKING:
    from .fairshare import ReadGate
    from .state import MemoryState, View

__all__ = [
    "MAX_QUERY_CHARS",
    "Snapshot",
    "VersionHolds",
    "check_listing",
    "check_namespace_patterns",
    "list_namespaces_at",
    "list_records",
    "list_records_sliced",
    "list_steps",
    "make_filter",
    "run_retrieve",
    "run_retrieve_sliced",
    "scan_sliced",
    "with_alive",
]

_T = TypeVar("_T")

#: A retrieve whose index says its whole work is small (``one_step_ok(query, entries)``:
#: the word-overlap index over at most ``knobs._ONE_STEP_GROUPS`` groups and a view of at
#: most ``_ONE_STEP_ENTRIES`` entries, with a query of at most ``_ONE_STEP_CHARS``
#: characters) runs its steps at once, then reaches its one
#: schedule point as a retrieve shorter than a slice does: no clock read per step and
#: no slice boundary (a gate checkpoint, a trip through trio's run loop) within it.
#: ``RETRIEVE_SLICE`` 0 (tests: a checkpoint at every yield) slices every retrieve.
#: False: every retrieve in slices of ``RETRIEVE_SLICE`` (the path before; the same
#: results).
_ONE_STEP_SMALL = True

#: ``_run_sliced`` sends each step after the first the ``time.perf_counter`` time at
#: which its slice ends (``steps.send(deadline)``, not ``next(steps)``): a computation
#: that can use it does as much work as fits before then in one go (BM25's short path
#: in slices walks whole steps in one core call until then:
#: ``bm25.knobs._SLICED_FAST``), and may come back a little after it (a step of its
#: own is not cut); the others ignore the value. The same checkpoints, at least as far
#: apart; the same results. False: ``next(steps)``, every step a bounded chunk of its
#: own (the path before).
_SEND_SLICE_END = True

#: Longest accepted query, in code points.
MAX_QUERY_CHARS = 100_000


def _as_tuple_of_str(kind: str, value: Any) -> tuple[str, ...]:
    items = sequence_of(value, f"{kind}=", "str")
    for item in items:
        if type(item) is not str:
            raise TypeError(f"{kind}= items must be str, not {type(item).__name__}")
    return items


def _check_time(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise TypeError(f"{name}= must be a datetime or None, not {type(value).__name__}")
    if value.utcoffset() is None:
        raise InvalidQueryError(f"{name}= must be timezone-aware, got {value!r}")
    return value


def check_thresholds(min_score: object, min_matched: object) -> None:
    """Raise TypeError / InvalidQueryError for a bad ``min_score`` (None or a finite
    number) or ``min_matched`` (an int >= 0); return nothing."""
    if min_score is not None:
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)):
            raise TypeError(f"min_score= must be a number or None, not {type(min_score).__name__}")
        if not math.isfinite(min_score):
            raise InvalidQueryError(f"min_score= must be finite, got {min_score!r}")
    if isinstance(min_matched, bool) or not isinstance(min_matched, int):
        raise TypeError(f"min_matched= must be an int, not {type(min_matched).__name__}")
    if min_matched < 0:
        raise InvalidQueryError(f"min_matched= must be >= 0, got {min_matched}")


def make_filter(
    namespace: Iterable[str] | None,
    category: MemoryCategory | Iterable[MemoryCategory] | None,
    tags: Iterable[str] | None,
    where: Mapping[str, Any] | None = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
) -> Accept:
    """Validate retrieve filters and build the record predicate (None: accept all).

    * ``namespace``: segment-exact prefix; ``()`` (the root) matches everything.
    * ``category``: one category or a non-empty collection of them (any of them).
    * ``tags``: the entry must carry every one of them (exact, case-sensitive); an empty
      collection asks for nothing, so it matches everything.
    * ``where``: a payload filter (:func:`actormem._json.compile_where`).
    * ``created_after`` / ``created_before``: timezone-aware datetimes; the entry's
      ``created_at`` must be at or after the first and strictly before the second (a
      half-open range, so consecutive ranges do not overlap).

    Raises:
        TypeError: A filter has the wrong type.
        InvalidQueryError: An empty namespace segment or tag, an empty category
            collection (ambiguous: pass None for every category), a malformed payload
            filter, or a naive datetime.
    """
    after = _check_time("created_after", created_after)
    before = _check_time("created_before", created_before)
    ns: tuple[str, ...] | None = None
    cats: frozenset[MemoryCategory] | None = None
    need: frozenset[str] | None = None
    if namespace is not None:
        ns = _as_tuple_of_str("namespace", namespace)
        if any(not s for s in ns):
            raise InvalidQueryError("namespace= segments must not be empty")
        if not ns:
            ns = None
    if category is not None:
        if isinstance(category, MemoryCategory):
            cats = frozenset((category,))
        else:
            if isinstance(category, str):
                raise TypeError("category= takes a MemoryCategory or several, not a str")
            cats = frozenset(category)
            for c in cats:
                if not isinstance(c, MemoryCategory):
                    raise TypeError(
                        f"category= items must be MemoryCategory, not {type(c).__name__}"
                    )
            if not cats:
                raise InvalidQueryError("category= is empty: pass None for every category")
    if tags is not None:
        need = frozenset(_as_tuple_of_str("tags", tags))
        if any(not t for t in need):
            raise InvalidQueryError("tags= must not hold an empty tag")
        if not need:
            need = None
    payload = compile_where(where)
    if (
        ns is None
        and cats is None
        and need is None
        and payload is None
        and after is None
        and before is None
    ):
        return None
    n = 0 if ns is None else len(ns)

    def accept(rec: Record) -> bool:
        e = rec.entry
        if ns is not None and e.namespace[:n] != ns:
            return False
        if cats is not None and e.category not in cats:
            return False
        if after is not None and e.created_at < after:
            return False
        if before is not None and e.created_at >= before:
            return False
        if need is not None and not need.issubset(e.tags):
            return False
        return payload is None or payload(e.value)

    return accept


def with_alive(accept: Accept, alive: Callable[[Record], bool] | None) -> Accept:
    """``accept`` and ``alive`` both (either may be None: no condition). O(1)."""
    if alive is None:
        return accept
    if accept is None:
        return alive
    first = accept
    return lambda rec: first(rec) and alive(rec)


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 0:
        raise InvalidQueryError(f"{name} must be >= 0, got {value}")


def check_listing(limit: object, offset: object) -> None:
    """Raise TypeError / InvalidQueryError for a bad ``limit`` or ``offset``."""
    _check_count("limit", limit)
    _check_count("offset", offset)


def list_steps(
    view: View, prefix: tuple[str, ...], accept: Accept, limit: int, offset: int
) -> Generator[None, None, list[Record]]:
    """The visible records under ``prefix`` that ``accept`` admits, newest
    ``updated_at`` first (ties: larger ``seq`` first), ``offset`` skipped, at most
    ``limit``; a generator that yields after each bounded chunk (see
    :meth:`View.in_namespace`). O(m log(offset + limit)) for m records under the prefix."""
    if limit == 0:
        return []
    k = offset + limit
    heap: list[tuple[datetime, int, Record]] = []  # the k newest so far, oldest on top
    for rec in view.in_namespace(prefix):
        if rec is None:
            yield
            continue
        if accept is not None and not accept(rec):
            continue
        # seqs of visible records differ
        item = (rec.cols.get(rec.slot, "updated_at"), rec.seq, rec)
        if len(heap) < k:
            heapq.heappush(heap, item)
        elif item > heap[0]:
            heapq.heapreplace(heap, item)
    heap.sort(reverse=True)
    return [rec for _, _, rec in heap[offset:]]


def list_records(
    view: View, prefix: tuple[str, ...], accept: Accept, limit: int, offset: int
) -> list[Record]:
    """:func:`list_steps` run to its end, synchronously."""
    return drain(list_steps(view, prefix, accept, limit, offset))


async def list_records_sliced(
    state: MemoryState,
    view: View,
    prefix: tuple[str, ...],
    accept: Accept,
    limit: int,
    offset: int,
    registry: weakref.WeakSet[Snapshot] | VersionHolds,
    gate: ReadGate | None = None,
) -> list[Record]:
    """:func:`list_records`, letting other tasks run every :data:`RETRIEVE_SLICE` seconds
    (``view`` is registered as a live snapshot meanwhile, as a retrieve's is; ``gate``
    as in :func:`run_retrieve_sliced`)."""
    if type(registry) is VersionHolds:  # memory._HOLDS_BY_VERSION
        version = view.version
        registry.hold(version)
        try:
            return await _run_sliced(list_steps(view, prefix, accept, limit, offset), gate)
        finally:
            registry.release(version)
    hold = Snapshot._create(state, view, registry)
    try:
        return await _run_sliced(list_steps(view, prefix, accept, limit, offset), gate)
    finally:
        del hold


def _matches(ns: tuple[str, ...], pattern: tuple[str, ...], at_end: bool) -> bool:
    if len(ns) < len(pattern):
        return False
    part = ns[len(ns) - len(pattern) :] if at_end else ns[: len(pattern)]
    return all(p == "*" or p == s for p, s in zip(pattern, part, strict=True))


def check_namespace_patterns(
    prefix: Iterable[str] | None, suffix: Iterable[str] | None, max_depth: object
) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """``(prefix, suffix)`` of a namespace listing as tuples (or None), checked.

    Raises:
        TypeError: A pattern that is not a sequence of str, a ``max_depth`` not an int.
        InvalidQueryError: An empty segment in a pattern (no namespace holds one), a
            negative ``max_depth``.
    """
    pre = None if prefix is None else _as_tuple_of_str("prefix", prefix)
    suf = None if suffix is None else _as_tuple_of_str("suffix", suffix)
    for name, pattern in (("prefix", pre), ("suffix", suf)):
        if pattern is not None and any(not s for s in pattern):
            raise InvalidQueryError(f"{name}= segments must not be empty")
    if max_depth is not None:
        _check_count("max_depth", max_depth)
    return pre, suf


def list_namespaces_at(
    view: View,
    alive: Callable[[Record], bool] | None,
    prefix: Iterable[str] | None,
    suffix: Iterable[str] | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """See :meth:`Memory.list_namespaces`. Synchronous. O(log N + the namespaces under
    the prefix's segments before its first ``"*"``)."""
    pre, suf = check_namespace_patterns(prefix, suffix, max_depth)
    out: dict[tuple[str, ...], None] = {}
    literal: tuple[str, ...] = ()  # the prefix's segments before its first "*"
    for segment in pre or ():
        if segment == "*":
            break
        literal += (segment,)
    for ns in view.namespaces(alive, literal):
        if pre is not None and not _matches(ns, pre, False):
            continue
        if suf is not None and not _matches(ns, suf, True):
            continue
        out[ns if max_depth is None else ns[:max_depth]] = None
    return sorted(out)[offset : offset + limit]


def check_query(query: object, limit: object) -> None:
    """Raise TypeError / InvalidQueryError for a bad query or limit; return nothing."""
    if type(query) is not str:
        raise TypeError(f"query must be str, not {type(query).__name__}")
    if len(query) > MAX_QUERY_CHARS:
        raise InvalidQueryError(
            f"query is {len(query)} code points; the limit is {MAX_QUERY_CHARS}"
        )
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise TypeError(f"limit must be an int, not {type(limit).__name__}")
    if limit < 0:
        raise InvalidQueryError(f"limit must be >= 0, got {limit}")


def run_retrieve(
    state: MemoryState,
    view: View,
    query: str,
    limit: int,
    accept: Accept,
    min_score: float | None = None,
    min_matched: int = 0,
) -> list[tuple[float, Record]]:
    """Top-``limit`` records of ``view`` for ``query``; sync, so no write interleaves."""
    limit = min(limit, len(view))  # any int is a limit: the indexes' kernels take < 2**63
    if min_score is None and not min_matched:
        return state.index.top_k(view, query, limit, accept)
    return drain(thresholded_steps(state.index, view, query, limit, accept, min_score, min_matched))


async def run_retrieve_sliced(
    state: MemoryState,
    view: View,
    query: str,
    limit: int,
    accept: Accept,
    registry: weakref.WeakSet[Snapshot] | VersionHolds,
    min_score: float | None = None,
    min_matched: int = 0,
    gate: ReadGate | None = None,
    yielded: bool = False,
) -> list[tuple[float, Record]]:
    """:func:`run_retrieve`, letting other tasks run every :data:`RETRIEVE_SLICE` seconds.
    A dense or hybrid index's query is embedded first, in a worker thread unless the
    index may embed it on the event loop (``inline_ok``: built-in model, short query).

    ``view`` is registered as a live snapshot in ``registry`` until the scoring ends, so
    the owner's vacuum keeps every record it can see (a :class:`VersionHolds`: its
    version is held, no :class:`Snapshot` made). Cancellation at a checkpoint
    closes the index's generator and raises :class:`trio.Cancelled`. With a ``gate``,
    each slice boundary is the gate's checkpoint: the reader parks there while the
    owner takes its share of the loop (:mod:`actormem._engine.fairshare`). A retrieve
    shorter than a slice reaches that checkpoint once, at the end, unless ``yielded``
    (the caller passed a schedule point just before): the call is always a schedule
    point (the caller makes the cancel point before it starts).
    """
    limit = min(limit, len(view))  # as run_retrieve
    if type(registry) is VersionHolds:  # memory._HOLDS_BY_VERSION
        version = view.version
        registry.hold(version)
        try:
            return await _retrieve_sliced(
                state, view, query, limit, accept, min_score, min_matched, gate, yielded
            )
        finally:
            registry.release(version)
    hold = Snapshot._create(state, view, registry)
    try:
        return await _retrieve_sliced(
            state, view, query, limit, accept, min_score, min_matched, gate, yielded
        )
    finally:
        del hold


async def _retrieve_sliced(
    state: MemoryState,
    view: View,
    query: str,
    limit: int,
    accept: Accept,
    min_score: float | None,
    min_matched: int,
    gate: ReadGate | None,
    yielded: bool,
) -> list[tuple[float, Record]]:
    """:func:`run_retrieve_sliced`'s work while ``view`` is held (``limit`` already
    capped)."""
    dense = _query_index(state.index) if limit > 0 and len(view) else None
    if dense is not None and not dense.inline_ok([query]):
        # A custom embedder, or a long query: embed it in a worker thread (abandoned on
        # cancellation: the embedding is pure) and have the index use that vector.
        vector = (await trio.to_thread.run_sync(dense.embed, [query], abandon_on_cancel=True))[0]
        dense.pin_query(query, vector)
    else:
        dense = None
    try:
        # Inside the try: an index's top_k_steps may do work when called (BM25 reads
        # the query's terms), and a dense query is unpinned whatever it raises.
        steps = thresholded_steps(state.index, view, query, limit, accept, min_score, min_matched)
        if _ONE_STEP_SMALL and dense is None and RETRIEVE_SLICE > 0:
            small = getattr(state.index, "one_step_ok", None)
            if small is not None and small(query, len(view)):
                # A small retrieve's steps in one task step; the same schedule point at
                # the end as a retrieve shorter than a slice.
                try:
                    result = drain(steps)
                finally:
                    steps.close()
                if not yielded:
                    await (trio.lowlevel.checkpoint if gate is None else gate.checkpoint)()
                return result
        # At least one schedule point (a worker thread's embedding was one already).
        return await _run_sliced(steps, gate, at_least_one=dense is None and not yielded)
    finally:
        if dense is not None:
            dense.unpin_query(query)


def _query_index(index: Any) -> Any:
    """The dense index that embeds a retrieve's query on ``index`` (its ``query_index()``:
    itself for a dense index, the dense half of a hybrid one that uses it), or None."""
    query_index = getattr(index, "query_index", None)
    return None if query_index is None else query_index()


async def _run_sliced(
    steps: Generator[None, Any, _T], gate: ReadGate | None = None, at_least_one: bool = False
) -> _T:
    """Run a sliced computation to its end, reaching a trio checkpoint (``gate``'s, if
    given) whenever a slice of :data:`RETRIEVE_SLICE` seconds has run (with
    ``_SEND_SLICE_END``, each step after the first is sent the slice's end, a
    ``time.perf_counter`` time: see there), and with
    ``at_least_one`` once at the end if no slice boundary came (so the whole is always a
    schedule point). Cancellation at a checkpoint closes the generator and raises
    :class:`trio.Cancelled`."""
    clock = time.perf_counter
    pause = trio.lowlevel.checkpoint if gate is None else gate.checkpoint
    send = steps.send
    ends = _SEND_SLICE_END
    try:
        deadline = clock() + RETRIEVE_SLICE
        until = None  # a generator just started takes no value
        while True:
            try:
                send(until)
            except StopIteration as stop:
                result: _T = stop.value
                break
            if clock() >= deadline:
                await pause()
                at_least_one = False
                deadline = clock() + RETRIEVE_SLICE
            if ends:
                until = deadline
    finally:
        steps.close()
    if at_least_one:
        await pause()
    return result


#: Records :func:`scan_sliced` resolves between two clock reads.
_SCAN_PIECE = 512
#: Entries :func:`scan_sliced` hands out between two clock reads (the caller's work on
#: each, an export's JSON encoding ~10-20 us, counts toward the slice).
_SCAN_CLOCK = 4


def _seq_runs_merged(runs: list[list[Record]]) -> Iterator[Record]:
    """The records of ``runs`` (each sorted by ``seq``) in ``seq`` order, lazily
    (``heapq.merge``: a heap of the runs' heads, O(log len(runs)) a record), so a long
    read's order costs each of its slices only its own records (a sort of every record
    at once was one step: the id map's order is its hash table's, not insertion order,
    and 1,000,000 records took 0.7-2 s to sort). Equal seqs keep the runs' order (as a
    stable sort of their concatenation)."""
    return heapq.merge(*runs, key=_SEQ)


async def scan_sliced(
    snapshot: Snapshot, gate: ReadGate | None
) -> AsyncGenerator[MemoryEntry, None]:
    """The entries of ``snapshot`` as iterating it gives them (unexpired, insertion
    order), in the caller's task a slice at a time: the records are resolved in pieces
    of :data:`_SCAN_PIECE`, each piece sorted by ``seq`` (a run; a piece that follows
    the last run's order joins it), then the runs are merged by ``seq`` and the entries
    built one by one as they are asked for; whenever a slice of :data:`RETRIEVE_SLICE`
    has run (the caller's work between entries included), a trio checkpoint,
    ``gate``'s if given (the owner's fair share, ``fairshare.py``). The generator holds
    ``snapshot``, so the versions it reads stay (not vacuumed) until it ends or is
    closed. O(n log n) in all; a step O(slice), but for the copy of the id map's
    values at the start (a C list copy: ~10 ms at 100,000 entries).
    """
    clock = time.perf_counter
    pause = trio.lowlevel.checkpoint if gate is None else gate.checkpoint
    view = snapshot._view
    alive = snapshot._alive()
    newest = list(snapshot._state._by_id.values())
    runs: list[list[Record]] = []
    deadline = clock() + RETRIEVE_SLICE
    for start in range(0, len(newest), _SCAN_PIECE):
        piece = view.visible_in(newest[start : start + _SCAN_PIECE])
        if piece:
            piece.sort(key=_SEQ)
            if runs and runs[-1][-1].seq < piece[0].seq:
                runs[-1] += piece  # in order after the last run (a dict's id map)
            else:
                runs.append(piece)
        if clock() >= deadline:
            await pause()
            deadline = clock() + RETRIEVE_SLICE
    del newest
    entry = view.entry
    for k, rec in enumerate(_seq_runs_merged(runs) if runs else (), 1):
        if alive is None or alive(rec):
            yield entry(rec)
        if not k % _SCAN_CLOCK and clock() >= deadline:
            await pause()
            deadline = clock() + RETRIEVE_SLICE


class Snapshot(metaclass=NoPublicConstructor):
    """An immutable view of a memory at one version, from :meth:`Memory.snapshot`.

    Taking one is O(1) (plus, when some entry has a time to live, one reading of the
    memory's clock and O(k) for the k entries due but not yet swept, normally none): it
    holds a version number and references to the owner's structures, never a copy of the
    entries. Writes made after it was taken are invisible to it;
    entries removed after it was taken stay visible to it. Holding a snapshot keeps the
    record versions it can see from being vacuumed, so drop it when done (memory use grows
    with the writes made while it lives).

    Expiry is judged once, at the snapshot's time (the memory's clock when it was taken):
    an entry expired by then is absent from every read (``get``, ``in``, iteration,
    ``len``, ``retrieve``), and one that expires later stays visible, so every read of a
    snapshot agrees with every other.

    All methods are synchronous, never block and never reach the owner; retrieving from a
    snapshot does not update access bookkeeping.
    """

    __slots__ = ("__weakref__", "_len", "_now", "_state", "_view")

    def __init__(
        self,
        state: MemoryState,
        view: View,
        registry: weakref.WeakSet[Snapshot],
        now: datetime | None = None,
    ) -> None:
        self._state = state
        self._view = view
        #: The snapshot's time, by which expiry is judged; None: no entry expires (no
        #: record of the memory had an expiry when it was taken), or an internal hold.
        self._now = now
        # Counted now when that is cheap (the view is the working version: O(k) for k
        # entries due, normally none), so that a len() asked after later writes does not
        # walk every record; None: counted on the first len() (O(n)).
        self._len: int | None = (
            len(view)
            if now is None
            else view.live_count(now)
            if view.version == state.version
            else None
        )
        registry.add(self)

    @property
    def version(self) -> int:
        """The version this snapshot reads (increases with every applied write batch)."""
        return self._view.version

    def _alive(self) -> Callable[[Record], bool] | None:
        now = self._now
        return None if now is None else self._view.alive(now)

    def __len__(self) -> int:
        """Number of entries in the snapshot, expired ones not counted. O(1): counted when
        the snapshot was taken (O(k) then, for k entries due but not yet swept), except
        for a snapshot taken while a durable batch was being committed, whose first call
        walks every record, O(n) (:meth:`View.live_count`)."""
        count = self._len
        if count is None:
            assert self._now is not None
            count = self._len = self._view.live_count(self._now)
        return count

    def is_empty(self) -> bool:
        """Whether the snapshot holds no (unexpired) entry. As :meth:`__len__`."""
        return len(self) == 0

    def __iter__(self) -> Iterator[MemoryEntry]:
        """The unexpired entries in insertion order. O(n log n) up front (the list is
        built at once, so the iteration can span checkpoints safely)."""
        view = self._view
        alive = self._alive()
        if alive is None:
            return iter([view.entry(r) for r in view.records()])
        return iter([view.entry(r) for r in view.records() if alive(r)])

    def __contains__(self, id: object) -> bool:
        """Whether the entry ``id`` is in the snapshot and unexpired. O(1)."""
        return isinstance(id, uuid.UUID) and self._live(id) is not None

    def _live(self, id: uuid.UUID) -> Record | None:
        rec = self._view.get(id)
        if rec is None or self._now is None:
            return rec
        expires = rec.expires_at(self._view.version)
        return rec if expires is None or expires > self._now else None

    def get(self, id: uuid.UUID) -> MemoryEntry | None:
        """The entry with ``id`` as of this snapshot, or None (also when it had expired
        at the snapshot's time). O(1) (plus retained versions).

        Raises:
            TypeError: ``id`` is not a :class:`uuid.UUID`.
        """
        if not isinstance(id, uuid.UUID):
            raise TypeError(f"get() takes a uuid.UUID, not {type(id).__name__}")
        rec = self._live(id)
        return None if rec is None else self._view.entry(rec)

    def retrieve_scored(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: Iterable[str] | None = None,
        category: MemoryCategory | Iterable[MemoryCategory] | None = None,
        tags: Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        min_matched: int = 0,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> list[ScoredEntry]:
        """Like :meth:`Memory.retrieve_scored`, on this snapshot, synchronously (expiry
        is judged at the snapshot's time; nothing is refreshed)."""
        check_query(query, limit)
        check_thresholds(min_score, min_matched)
        accept = make_filter(namespace, category, tags, where, created_after, created_before)
        accept = with_alive(accept, self._alive())
        view = self._view
        hits = run_retrieve(self._state, view, query, limit, accept, min_score, min_matched)
        return [ScoredEntry(entry=view.entry(rec), score=score) for score, rec in hits]

    def retrieve(
        self,
        query: str,
        limit: int = 10,
        *,
        namespace: Iterable[str] | None = None,
        category: MemoryCategory | Iterable[MemoryCategory] | None = None,
        tags: Iterable[str] | None = None,
        where: Mapping[str, Any] | None = None,
        min_score: float | None = None,
        min_matched: int = 0,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
    ) -> list[MemoryEntry]:
        """Like :meth:`Memory.retrieve`, on this snapshot, synchronously."""
        scored = self.retrieve_scored(
            query,
            limit,
            namespace=namespace,
            category=category,
            tags=tags,
            where=where,
            min_score=min_score,
            min_matched=min_matched,
            created_after=created_after,
            created_before=created_before,
        )
        return [s.entry for s in scored]

    def __repr__(self) -> str:
        return f"<actormem.Snapshot version={self.version} entries={len(self)}>"


class VersionHolds:
    """The versions that retrieves and listings under way read (``memory._HOLDS_BY_VERSION``):
    version -> how many hold it. What a :class:`Snapshot` registered in the memory's
    ``WeakSet`` per retrieve did for the owner's vacuum (the oldest version held) and
    for ``statistics().live_snapshots`` (how many), by a dict update at the start and
    the end of each instead of an object, a weak reference and its callback. The
    user's own snapshots stay in the ``WeakSet``. No lock: one trio thread."""

    __slots__ = ("_by_version", "count")

    def __init__(self) -> None:
        self._by_version: dict[int, int] = {}
        #: Holds in all.
        self.count = 0

    def hold(self, version: int) -> None:
        """One more reader of ``version``. O(1)."""
        by = self._by_version
        by[version] = by.get(version, 0) + 1
        self.count += 1

    def release(self, version: int) -> None:
        """One reader of ``version`` less (it holds it). O(1)."""
        by = self._by_version
        left = by[version] - 1
        if left:
            by[version] = left
        else:
            del by[version]
        self.count -= 1

    def oldest(self, below: int) -> int:
        """The oldest version held, or ``below`` if none is older. O(versions held)."""
        for version in self._by_version:
            if version < below:
                below = version
        return below
