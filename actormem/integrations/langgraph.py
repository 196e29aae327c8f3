"""A LangGraph store on an actormem memory: :class:`ActormemStore`.

Theory of operation
-------------------
LangGraph's ``BaseStore`` keeps JSON items under ``(namespace, key)``. Each item is one
:class:`~actormem.MemoryEntry`: ``namespace`` and ``key`` are the entry's own (the engine
upserts by them), the item's dict is the entry's JSON payload (``value``), its
``created_at``/``updated_at`` are the entry's, and LangGraph's time to live (minutes) is
the entry's ``ttl`` (seconds), so the engine hides and removes expired items itself. The
entry's text (what the engine's scorer ranks) is drawn from the item's indexed fields.

The memory lives in this process in a :class:`~actormem.client.HostedMemory` (its owner
under trio in a thread of its own), so the store works from synchronous code and from
asyncio alike. Every op of a batch becomes one call of the memory; ops run in order.

Search. Without a query: the engine's filter-only listing (newest ``updated_at`` first).
With a query and no ``index=`` configuration: the engine's scorer over the entries'
text. With ``index=`` and an embedding function (``embed``, as LangGraph configures it):
cosine similarity between the query's embedding and each indexed field's embedding, the
best field per item, as LangGraph's own stores do; those vectors are kept by this
adapter (in process, recomputed on demand after a restart). With ``index=`` and no
``embed``: the engine's own dense index (:class:`~actormem.DenseScorer` with its default
model, WordLlama, offline): the item's indexed fields, joined, are its text, embedded by
the engine when stored, persisted with the entry in a durable file, and ranked by cosine
with the query; items put with ``index=False`` come after the others, without a score,
as in LangGraph's stores.

Which fields an item indexes (``put(..., index=...)``) is kept in the entry's tags
(``langgraph:noindex`` or ``langgraph:index:<path>``), so it survives a restart.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import decimal
import math
import numbers
import threading
from collections.abc import Generator, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    validate_op_namespace,
)

from .._entry import (
    MAX_KEY_CHARS,
    MAX_MEMORY_CHARS,
    MAX_TTL,
    MemoryCategory,
    MemoryEntry,
    check_lookup_key,
)
from .._errors import InvalidEntryError, InvalidQueryError
from .._index.dense import DenseScorer, wordllama_embedder
from .._json import text_at_paths
from .._storage.sqlite import Durability
from ..client import HostedMemory

if TYPE_CHECKING:
    from ..client import AsyncClient, Client

__all__ = ["ActormemStore"]

_NOINDEX = "langgraph:noindex"
_INDEX = "langgraph:index:"
#: A call an op needs: (target, method, args, kwargs); see ``ActormemStore._steps``.
_Call = tuple[str, str, tuple[Any, ...], dict[str, Any]]
#: Most entries a vector search reads per namespace prefix (the candidates it ranks).
_MAX_CANDIDATES = 1_000_000
#: The error of a put under the empty key, which LangGraph's own stores take. Not the
#: engine's "use None for no key": BaseStore passes ``str(key)``, so ``None`` is the key
#: "None" here, as in LangGraph's stores. A get of it finds nothing, a delete does nothing.
_NO_EMPTY_KEY = (
    f"key must not be empty: ActormemStore keeps an item under a key of 1 to "
    f"{MAX_KEY_CHARS:,} code points"
)
#: Fewest cached vectors (``index=`` with ``embed``) before the cache is pruned.
_PRUNE_MIN = 1024


def _utc_now() -> datetime:
    return datetime.now(UTC)


class ActormemStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items live in an actormem memory.

    Switch in one line: ``store = ActormemStore()`` instead of ``InMemoryStore()``, or
    ``ActormemStore(path="memory.db")`` for a durable file, then use it as any LangGraph
    store (``put``/``get``/``search``/``delete``/``list_namespaces``, their ``a*`` forms,
    ``batch``/``abatch``). Close it with :meth:`close` (or use it as a context manager).

    Args:
        path: An SQLite file for a durable store, or None (in memory).
        capacity: Most items kept (the engine evicts the least relevant, least recently
            used), or None for unbounded. LangGraph's own stores have no bound.
        index: LangGraph's ``IndexConfig`` (``dims``, ``embed``, ``fields``) for
            semantic search; the ``fields`` also choose the text the engine ranks.
            Without ``embed``, the engine's dense index ranks (WordLlama, in the
            ``dense`` extra; ``dims`` 64, 128 or 256, 256 if left out); with
            :meth:`from_url`, the server's scorer does (run it with ``--scorer dense``).
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` in minutes, ``refresh_on_read``).
            The engine removes expired items by itself; the sweeper calls are kept for
            compatibility. A ``default_ttl`` is checked as a put's ``ttl`` is (a real
            number > 0, at most 100 years; not a bool): TypeError or ValueError here.
        durability: As :func:`~actormem.open_memory`.
        clock: The memory's clock (tests), as :func:`~actormem.open_memory`.
        async_only: Refuse the synchronous methods on a thread that runs an asyncio
            event loop (:class:`asyncio.InvalidStateError`: they would stall the loop),
            as LangGraph's ``AsyncSqliteStore`` does; use the ``a*`` methods there.

    Reads refresh an item's time to live when the read asks for it (``refresh_ttl``,
    true by default in LangGraph's methods) and ``ttl["refresh_on_read"]`` is true (false
    by default), as LangGraph's SQLite store decides.

    Raises:
        StorageError: The file cannot be opened (see :func:`~actormem.open_memory`).
        ValueError: ``index`` has no ``embed`` and ``dims`` is not 64, 128 or 256.
        ImportError: ``index`` has no ``embed`` and ``wordllama`` is not installed.
    """

    supports_ttl = True

    __slots__ = (
        "_embeddings",
        "_engine_dense",
        "_fields",
        "_host",
        "_remote",
        "_sync",
        "_async",
        "_async_only",
        "_expired_seen",
        "_lock",
        "_prune_at",
        "_vectors",
        "index_config",
        "ttl_config",
    )

    def __init__(
        self,
        *,
        path: str | None = None,
        capacity: int | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        durability: Durability | str = Durability.NORMAL,
        clock: Any = None,
        async_only: bool = False,
        _remote: tuple[Client, AsyncClient] | None = None,
    ) -> None:
        _check_ttl((ttl or {}).get("default_ttl"), "default_ttl")
        self.ttl_config = ttl
        self._async_only = async_only
        self._expired_seen = 0
        self.index_config = dict(index) if index else None
        self._embeddings = None
        #: ``index=`` without ``embed``: the engine's dense index ranks searches.
        self._engine_dense = False
        self._fields: list[str] = ["$"]
        scorer: DenseScorer | None = None
        if self.index_config is not None:
            config: dict[str, Any] = self.index_config
            if config.get("embed") is None:
                self._engine_dense = True
                if _remote is None:
                    scorer = DenseScorer(embedder=wordllama_embedder(_dims(config.get("dims"))))
            else:
                self._embeddings = ensure_embeddings(config["embed"])
            # "fields" (IndexConfig) or "text_fields" (LangGraph's SQL stores' name).
            self._fields = list(config.get("fields") or config.get("text_fields") or ["$"])
        #: (namespace, key) -> (updated_at, fields, one vector per indexed text).
        self._vectors: dict[
            tuple[tuple[str, ...], str], tuple[datetime, tuple[str, ...], list[list[float]]]
        ] = {}
        self._lock = threading.Lock()
        self._prune_at = _PRUNE_MIN
        self._remote = _remote
        self._host: HostedMemory | None = None
        self._sync: Any
        self._async: Any
        if _remote is not None:
            self._sync, self._async = _remote
        else:
            self._host = HostedMemory(
                path=path, capacity=capacity, durability=durability, clock=clock, scorer=scorer
            )
            self._host.start()
            self._sync, self._async = self._host.sync, self._host

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        async_only: bool = False,
    ) -> ActormemStore:
        """A store on the memory of an ``actormem serve`` server at ``url`` (``token``:
        its bearer token). Sync methods use :class:`~actormem.client.Client`, async ones
        :class:`~actormem.client.AsyncClient` (use them from one event loop). The
        server's memory decides capacity and durability. Needs httpx (the ``client``
        extra). Nothing is sent until the first call."""
        from ..client import AsyncClient, Client

        remote = (Client(url, token=token), AsyncClient(url, token=token))
        return cls(index=index, ttl=ttl, async_only=async_only, _remote=remote)

    # ------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Close the memory (a durable file is committed and closed), or the server
        connections of :meth:`from_url`. Idempotent."""
        if self._host is not None:
            self._host.close()
        if self._remote is not None:
            self._remote[0].close()

    async def aclose(self) -> None:
        """:meth:`close`, also closing the async connections of :meth:`from_url`."""
        if self._remote is not None:
            await self._remote[1].aclose()
        self.close()

    def __enter__(self) -> ActormemStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def memory(self) -> Any:
        """What the store runs on: the :class:`~actormem.client.HostedMemory` (for
        statistics, retrieves with the engine's own filters, consolidation), or the
        :class:`~actormem.client.Client` of :meth:`from_url`."""
        return self._host if self._host is not None else self._sync

    def sweep_ttl(self) -> int:
        """Remove expired items now; return how many items expired since the previous
        call (the engine's owner removes each item when it expires, so most are gone
        before this runs; they are counted all the same)."""
        self._guard()
        self._sync.sweep_expired()
        return self._expired_since()

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl`, async."""
        await self._async.sweep_expired()
        return self._expired_since()

    def _expired_since(self) -> int:
        with self._lock:
            total: int = self._sync.statistics().expired
            new, self._expired_seen = total - self._expired_seen, total
        return new

    def _guard(self) -> None:
        if not self._async_only:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise asyncio.InvalidStateError(
            "synchronous calls of this store would block the running event loop; "
            "use the a* methods (aput, aget, asearch ...) from async code"
        )

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Nothing to start: the engine's owner removes each item when it expires. Returns
        a future that is already done (LangGraph's stores return their sweeper's)."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Nothing to stop (see :meth:`start_ttl_sweeper`); True."""
        return True

    # ------------------------------------------------------------ batches

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; one result per op (None for a put). Blocking.

        Raises:
            InvalidNamespaceError: An op's namespace is invalid (checked before any op
                runs, with LangGraph's ``validate_op_namespace``).
            ValueError: A malformed filter ("Invalid filter key ...") or value; a put's
                ``ttl`` (minutes) not > 0 and finite or past 100 years (checked before
                any op runs).
            TypeError: A put's ``ttl`` that is not a real number or None: ``ttl=True``
                too (checked before any op runs). Any real type is taken: int, float,
                a numpy scalar, ``Fraction``, ``Decimal`` (see :func:`_check_ttl`).
            asyncio.InvalidStateError: ``async_only`` and called on an event loop's thread.
        """
        self._guard()
        ops = _validated(ops)
        results: list[Result] = []
        for op in ops:
            steps = self._steps(op)
            answer: Any = None
            try:
                while True:
                    call = steps.send(answer)
                    answer = self._call_sync(call)
            except StopIteration as done:
                results.append(done.value)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` without blocking the event loop (asyncio or trio)."""
        ops = _validated(ops)
        results: list[Result] = []
        for op in ops:
            steps = self._steps(op)
            answer: Any = None
            try:
                while True:
                    call = steps.send(answer)
                    answer = await self._call_async(call)
            except StopIteration as done:
                results.append(done.value)
        return results

    # ------------------------------------------------------------ one op, I/O-free
    #
    # Each op is a generator that yields the calls it needs, ``(target, method, args,
    # kwargs)`` with target "memory" (the memory's method of that name) or "embed"
    # (``embed_documents``/``embed_query`` of the embeddings), and is sent their
    # answers; ``batch`` answers them synchronously, ``abatch`` with the async forms.

    def _call_sync(self, call: _Call) -> Any:
        target, method, args, kwargs = call
        if target == "embed":
            return getattr(self._embeddings, method)(*args)
        return getattr(self._sync, method)(*args, **kwargs)

    async def _call_async(self, call: _Call) -> Any:
        target, method, args, kwargs = call
        if target == "embed":
            return await getattr(self._embeddings, "a" + method)(*args)
        return await getattr(self._async, method)(*args, **kwargs)

    def _steps(self, op: Op) -> Generator[_Call, Any, Result]:
        if isinstance(op, GetOp):
            refresh = self._refresh(op.refresh_ttl)
            if not _can_exist(op.namespace, op.key):
                return None  # no item can have it: not found, as in InMemoryStore
            entry = yield ("memory", "get_by_key", (op.namespace, op.key), {"refresh_ttl": refresh})
            return None if entry is None else _item(entry)
        if isinstance(op, PutOp):
            if op.value is None:
                if not _can_exist(op.namespace, op.key):
                    return None  # deleting an item that cannot exist: nothing to do
                with self._lock:
                    self._vectors.pop((op.namespace, op.key), None)
                yield ("memory", "delete_key", (op.namespace, op.key), {})
                return None
            if op.key == "":
                raise InvalidEntryError(_NO_EMPTY_KEY)
            entry = self._entry(op)
            if self._embeddings is not None:
                yield from self._embed(entry)
            yield ("memory", "store", (entry,), {})
            if len(self._vectors) > self._prune_at:
                yield from self._prune()
            return None
        if isinstance(op, SearchOp):
            return (yield from self._search(op))
        if isinstance(op, ListNamespacesOp):
            found: list[tuple[str, ...]] = yield (
                "memory",
                "list_namespaces",
                (),
                _namespace_options(op),
            )
            return found
        raise TypeError(f"unknown op {type(op).__name__}")

    def _embed(self, entry: MemoryEntry) -> Generator[_Call, Any, None]:
        fields, texts = _embed_texts(entry, self._fields)
        vectors = (yield ("embed", "embed_documents", (texts,), {})) if texts else []
        assert entry.key is not None
        with self._lock:
            self._vectors[(entry.namespace, entry.key)] = (entry.updated_at, fields, vectors)

    def _prune(self) -> Generator[_Call, Any, None]:
        """Forget the vectors of items that are gone (evicted, expired, deleted by another
        process or through actormem's own API), so that the vectors kept stay within twice
        the items alive (amortized: runs when their count has doubled since the last
        time). A vector cached after the listing began is kept (its item may be stored
        after the snapshot listed)."""
        started = _utc_now()
        entries = yield ("memory", "list_entries", ((),), {"limit": _MAX_CANDIDATES})
        alive = {(e.namespace, e.key) for e in entries if e.key is not None}
        with self._lock:
            for name, (stamp, _, _) in list(self._vectors.items()):
                if name not in alive and stamp < started:
                    del self._vectors[name]
            self._prune_at = max(2 * len(self._vectors), _PRUNE_MIN)

    def _search(self, op: SearchOp) -> Generator[_Call, Any, list[SearchItem]]:
        refresh = self._refresh(op.refresh_ttl)
        prefix = op.namespace_prefix
        where = _where(op.filter)
        options: dict[str, Any]
        if not op.query:  # the engine refreshes exactly the entries it returns
            options = {"where": where, "refresh_ttl": refresh}
            options.update(limit=op.limit, offset=op.offset)
            entries = yield ("memory", "list_entries", (prefix,), options)
            return [_search_item(e, None) for e in _keyed(entries)]
        # A ranked search reads more entries than it returns (those skipped by
        # ``offset``, every candidate of a vector ranking): they are read without a
        # refresh, then the items returned are refreshed, as LangGraph's SQLite store
        # refreshes the rows it returns and no others.
        options = {"where": where, "refresh_ttl": False}
        items: list[SearchItem]
        if self._engine_dense:
            items = yield from self._search_dense(op, options)
        elif self._embeddings is None:  # ranked by the engine's scorer
            options["namespace"] = prefix
            hits = yield ("memory", "retrieve_scored", (op.query, op.offset + op.limit), options)
            items = [_search_item(h.entry, h.score) for h in hits[op.offset :] if h.entry.key]
        else:
            options["limit"] = _MAX_CANDIDATES
            entries = _keyed((yield ("memory", "list_entries", (prefix,), options)))
            query = yield ("embed", "embed_query", (op.query,), {})
            for e in entries:
                if self._cached(e) is None:  # stored before this process, or elsewhere
                    yield from self._embed(e)
            items = _rank(entries, query, [self._cached(e) or [] for e in entries], op)
        if refresh:
            for item in items:
                yield ("memory", "get_by_key", (item.namespace, item.key), {"refresh_ttl": True})
        return items

    def _search_dense(
        self, op: SearchOp, options: dict[str, Any]
    ) -> Generator[_Call, Any, list[SearchItem]]:
        """``index=`` without ``embed``: the engine's dense ranking of the items that are
        indexed, then (to fill ``limit``) those put with ``index=False``, without a
        score, newest first, as LangGraph's stores rank items that have no vector."""
        assert op.query
        want = op.offset + op.limit
        k = max(want, 1)
        while True:
            hits = yield (
                "memory",
                "retrieve_scored",
                (op.query, k),
                {**options, "namespace": op.namespace_prefix},
            )
            indexed = [h for h in hits if h.entry.key is not None and _NOINDEX not in h.entry.tags]
            if len(indexed) >= want or len(hits) < k:
                break
            k *= 2  # items put with index=False took places: ask for more
        items = [_search_item(h.entry, h.score) for h in indexed[op.offset : want]]
        if len(items) < op.limit:
            rest = yield (
                "memory",
                "list_entries",
                (op.namespace_prefix,),
                {**options, "tags": [_NOINDEX], "limit": op.limit - len(items)},
            )
            items.extend(_search_item(e, None) for e in _keyed(rest))
        return items

    # ------------------------------------------------------------ puts

    def _refresh(self, asked: bool | None) -> bool:
        return bool(asked) and bool((self.ttl_config or {}).get("refresh_on_read", False))

    def _ttl_seconds(self, op: PutOp) -> float | None:
        ttl = op.ttl  # a number of minutes, None or NOT_PROVIDED (_check_ttl)
        if isinstance(ttl, NotProvided):
            ttl = (self.ttl_config or {}).get("default_ttl")
        return None if ttl is None else float(ttl) * 60.0

    def _index_fields(self, op: PutOp) -> list[str] | None:
        if _unindexed(op):
            return None
        return list(op.index) if op.index else self._fields

    def _entry(self, op: PutOp) -> MemoryEntry:
        now = _utc_now()
        fields = self._index_fields(op)
        tags: tuple[str, ...] = ()
        if _unindexed(op):
            tags = (_NOINDEX,)
        elif op.index:
            tags = tuple(_INDEX + f for f in op.index)
        entry = MemoryEntry(
            category=MemoryCategory.FACT,
            memory="",
            namespace=op.namespace,
            key=op.key,
            value=op.value,
            tags=tags,
            created_at=now,
            updated_at=now,
            ttl=self._ttl_seconds(op),
        )
        assert entry.value is not None
        text = "\n".join(_texts(entry.value.thaw(), fields or ["$"]))
        return MemoryEntry(
            category=entry.category,
            memory=text[:MAX_MEMORY_CHARS],
            namespace=entry.namespace,
            key=entry.key,
            value=entry.value,
            tags=entry.tags,
            created_at=now,
            updated_at=now,
            ttl=entry.ttl,
        )

    def _cached(self, entry: MemoryEntry) -> list[list[float]] | None:
        assert entry.key is not None
        with self._lock:
            got = self._vectors.get((entry.namespace, entry.key))
        if got is None or got[0] != entry.updated_at:
            return None
        return got[2]


# ---------------------------------------------------------------- helpers


def _dims(dims: object) -> int:
    """The WordLlama truncation ``IndexConfig["dims"]`` asks for (256 if absent)."""
    if dims is None:
        return 256
    if isinstance(dims, bool) or not isinstance(dims, int) or dims not in (64, 128, 256):
        raise ValueError(
            f"index= without 'embed' uses the engine's dense index (WordLlama, 64, 128 or "
            f"256 dimensions): 'dims' must be one of those or left out, got {dims!r}"
        )
    return dims


def _unindexed(op: PutOp) -> bool:
    """Whether a put indexes no field: ``index=False``, or an empty list of fields (which
    LangGraph's stores take as no field to embed, not as the default fields)."""
    return op.index is False or (op.index is not None and len(op.index) == 0)


def _can_exist(namespace: tuple[str, ...], key: str) -> bool:
    """Whether an item can be kept under ``(namespace, key)``: False for the empty key
    (see ``_NO_EMPTY_KEY``), a key over :data:`~actormem.MAX_KEY_CHARS`, a namespace
    segment or depth over its limit, a lone surrogate (a put of it is refused:
    :class:`~actormem.InvalidEntryError`). A get of such a pair finds nothing and a
    delete does nothing, as in LangGraph's ``InMemoryStore`` (a dict lookup and a
    ``pop(key, None)``), instead of the engine's :class:`~actormem.InvalidQueryError`
    (:func:`~actormem._entry.check_lookup_key`). O(total length)."""
    try:
        check_lookup_key(namespace, key)
    except InvalidQueryError:
        return False
    return True


def _where(filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """LangGraph's ``filter`` as the engine's ``where`` (None when empty). The engine
    matches it as LangGraph's InMemoryStore does: a nested object that holds an operator
    (``{"a": {"b": {"$gt": 1}}}``) field by field, as ``{"a.b": {"$gt": 1}}``
    (:func:`actormem._json.compile_where`)."""
    return filter or None


def _validated(ops: Iterable[Op]) -> list[Op]:
    """``ops`` as a list, every namespace (LangGraph's own check) and every put's ``ttl``
    (:func:`_check_ttl`) checked first."""
    ops = list(ops)
    for op in ops:
        validate_op_namespace(op)
        if isinstance(op, PutOp):
            _check_ttl(op.ttl)
    return ops


def _check_ttl(ttl: object, name: str = "ttl") -> None:
    """Refuse a put's ``ttl`` (or the ``TTLConfig``'s ``default_ttl``: ``name``) that is
    not a time to live in minutes.

    LangGraph's contract (``langgraph.store.base``: ``BaseStore.put(..., ttl: float |
    None | NotProvided)``, ``PutOp.ttl: float | None``, ``TTLConfig.default_ttl: float |
    None``) is minutes as a float, ``None`` for no expiry, not given for the store's
    default; LangGraph's own SQLite store computes ``now + timedelta(minutes=ttl)``. This
    store takes any real number that is finite and > 0, whatever its type: an int, a
    float, a numpy scalar (``numpy.float32``, ``numpy.int64``), a ``Fraction`` or a
    ``Decimal`` (read as ``float(ttl)``), up to 100 years. A bool is refused: it is an
    int to Python, and ``ttl=True`` read as one minute (or as "not given") is a mistake.

    Raises:
        TypeError: A bool, a string or anything but a real number.
        ValueError: A number that is not > 0 and finite, or past 100 years.
    """
    if ttl is None or isinstance(ttl, NotProvided):
        return
    if isinstance(ttl, bool) or not isinstance(ttl, numbers.Real | decimal.Decimal):
        raise TypeError(f"{name} must be a number of minutes or None, not {type(ttl).__name__}")
    try:
        minutes = float(ttl)
    except (ValueError, OverflowError):  # Decimal("sNaN"), a Fraction past a float
        minutes = math.nan
    if not 0 < minutes <= MAX_TTL / 60:
        raise ValueError(
            f"{name} must be a number of minutes > 0 and <= {MAX_TTL / 60:.0f} (100 years), "
            f"got {ttl!r}"
        )


def _texts(value: dict[str, Any], fields: Sequence[str]) -> Iterator[str]:
    for field in fields:
        if field == "$":
            yield from text_at_paths(_frozen(value)).splitlines() if value else ()
        else:
            yield from get_text_at_path(value, field)


def _frozen(value: dict[str, Any]) -> Any:
    from .._json import JsonObject

    return JsonObject(value)


def _embed_texts(entry: MemoryEntry, default: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """The fields an entry indexes and their texts (LangGraph's paths)."""
    if _NOINDEX in entry.tags:
        return (), []
    chosen = [t[len(_INDEX) :] for t in entry.tags if t.startswith(_INDEX)] or default
    value = _value(entry)
    texts: list[str] = []
    for field in chosen:
        texts.extend(get_text_at_path(value, field))
    return tuple(chosen), texts


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return 0.0 if na == 0.0 or nb == 0.0 else dot / (na * nb)


def _rank(
    entries: list[MemoryEntry], query: list[float], vectors: list[list[list[float]]], op: SearchOp
) -> list[SearchItem]:
    """Max cosine over each entry's vectors, best first; unembedded entries after."""
    scored = []
    scoreless = []
    for i, (e, vs) in enumerate(zip(entries, vectors, strict=True)):
        if vs:
            scored.append((max(_cosine(query, v) for v in vs), i, e))
        else:
            scoreless.append(e)
    scored.sort(key=lambda t: (-t[0], t[1]))
    kept: list[SearchItem] = [
        _search_item(e, s) for s, _, e in scored[op.offset : op.offset + op.limit]
    ]
    if len(kept) < op.limit:
        kept.extend(_search_item(e, None) for e in scoreless[: op.limit - len(kept)])
    return kept


def _value(entry: MemoryEntry) -> dict[str, Any]:
    """The item's dict: the payload, or ``{}`` for an entry stored without one."""
    return {} if entry.value is None else entry.value.thaw()


def _item(entry: MemoryEntry) -> Item:
    assert entry.key is not None  # found by its key
    return Item(
        value=_value(entry),
        key=entry.key,
        namespace=entry.namespace,
        created_at=entry.created_at,
        updated_at=entry.updated_at,
    )


def _keyed(entries: Iterable[MemoryEntry]) -> list[MemoryEntry]:
    """The entries that are items: those with a key (the memory may also hold entries
    stored without one through actormem's own API; LangGraph cannot name them)."""
    return [e for e in entries if e.key is not None]


def _search_item(entry: MemoryEntry, score: float | None) -> SearchItem:
    assert entry.key is not None
    return SearchItem(
        namespace=entry.namespace,
        key=entry.key,
        value=_value(entry),
        created_at=entry.created_at,
        updated_at=entry.updated_at,
        score=score,
    )


def _namespace_options(op: ListNamespacesOp) -> dict[str, Any]:
    prefix = suffix = None
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix":
            prefix = tuple(condition.path)
        elif condition.match_type == "suffix":
            suffix = tuple(condition.path)
        else:
            raise ValueError(f"unsupported match type {condition.match_type!r}")
    return {
        "prefix": prefix,
        "suffix": suffix,
        "max_depth": op.max_depth,
        "limit": op.limit,
        "offset": op.offset,
    }
