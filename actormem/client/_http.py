"""HTTP clients of ``actormem serve``: :class:`AsyncClient` (anyio: asyncio or trio) and
:class:`Client` (synchronous), with the same methods as :class:`~actormem.Memory`.

Theory of operation
-------------------
Each method describes its request as a :class:`_Call` (HTTP method, path, JSON body,
whether it is safe to repeat, how to read the answer); the two classes differ only in
how they send it (``httpx.AsyncClient`` or ``httpx.Client``, each keeping a pool of
connections). Entries travel in the one JSON shape of
:func:`~actormem._storage.jsonl.entry_to_json` / :func:`~actormem._storage.jsonl.entry_from_json`.

Failures:

* A connection that could not be opened (nothing was sent) is retried for every call.
* A connection that broke after the request may have been sent is retried only for
  calls that are safe to repeat: ``store`` and ``store_many`` (an upsert by id: a second
  application stores the same entries again), ``get``, ``get_by_key``, ``retrieve``,
  ``retrieve_scored`` (a repeated retrieve may count one more access), ``list_entries``,
  ``list_namespaces``, ``statistics``, ``count``. ``delete``, ``delete_key``,
  ``sweep_expired`` and ``consolidate`` are not repeated (a second ``delete`` would
  answer False for an entry the first one deleted); ``export`` is not retried.
* Up to ``retries`` retries, waiting 50 ms, 100 ms, 200 ms... in between; then, or on a
  timeout (never retried: the server is slow, not gone), :class:`~actormem.TransportError`
  naming the URL.
* Bad arguments are refused before anything is sent, as :class:`~actormem.Memory`
  refuses them (the same checks, the same errors and messages: an unknown keyword is a
  TypeError, a lookup no entry can answer an InvalidQueryError), and so are the server's
  own bounds (:mod:`._bounds`: ``limit`` 10,000, integers 2**53 - 1, 65,536 distinct
  tags a batch), in the memory's words ("limit must be <= 10000 over HTTP, got 10001").
* Error answers: 422 raises :class:`~actormem.InvalidEntryError` (writes) or
  :class:`~actormem.InvalidQueryError` (retrieves), as the memory would; 404 is ``None``
  from ``get`` and ``False`` from ``delete``; anything else
  :class:`~actormem.RemoteError` with the status and the problem's ``detail``.
"""

from __future__ import annotations

import enum
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from datetime import datetime
from types import TracebackType
from typing import Any, Generic, TypeVar

import anyio
import httpx

from .._engine.snapshot import (
    check_listing,
    check_namespace_patterns,
    check_query,
    check_thresholds,
    make_filter,
)
from .._entry import MemoryEntry, ScoredEntry, check_entry_batch, check_lookup_key
from .._errors import InvalidEntryError, InvalidQueryError, RemoteError, TransportError
from .._stats import ConsolidationStats, MemoryStatistics
from .._storage.jsonl import entry_from_json, entry_to_json
from .._util import Final
from ._bounds import MAX_JSON_INT, MAX_LIMIT, batch_tags_refusal
from ._deadline import DEADLINE, DeadlineBackend

__all__ = ["DEFAULT_RETRIES", "DEFAULT_TIMEOUT", "AsyncClient", "Client"]

_T = TypeVar("_T")

#: Seconds a call may take (connect, send, wait for the answer, read it) by default.
DEFAULT_TIMEOUT = 10.0
#: Retries of a failed connection by default (see the module docs for which calls).
DEFAULT_RETRIES = 3
_FIRST_BACKOFF = 0.05
_NOT_FOUND = object()
#: No Nagle delay: a request's header and body go out as two writes, and waiting for the
#: first one's ACK before sending the second would add a delayed-ACK pause to each call.
_SOCKET_OPTIONS = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
#: The keyword arguments of :class:`~actormem.Memory`'s methods that take ``**filters``
#: or ``**options`` here (tests/test_minor29_client.py checks they agree).
_RETRIEVE_NAMES = frozenset(
    ("namespace", "category", "tags", "where", "refresh_ttl", "min_seq", "min_score",
     "min_matched", "created_after", "created_before")
)
_LIST_NAMES = frozenset(("where", "category", "tags", "limit", "offset", "refresh_ttl"))
_NAMESPACES_NAMES = frozenset(("prefix", "suffix", "max_depth", "limit", "offset"))


class _Call(Generic[_T]):
    """One API call: the request to send and how to read its answer."""

    __slots__ = ("body", "decode", "idempotent", "invalid", "method", "not_found", "path")

    def __init__(
        self,
        method: str,
        path: str,
        decode: Callable[[Any], _T],
        *,
        body: Any = None,
        idempotent: bool = True,
        invalid: type[Exception] = InvalidQueryError,
        not_found: Any = _NOT_FOUND,
    ) -> None:
        self.method = method
        self.path = path
        self.decode = decode
        self.body = body
        self.idempotent = idempotent
        self.invalid = invalid
        self.not_found = not_found


def _jsonable(value: Any) -> Any:
    """A retrieve filter as JSON: enums by value, datetimes ISO 8601, iterables as lists."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, Iterable):
        return [_jsonable(v) for v in value]
    raise TypeError(f"cannot send a {type(value).__name__} as a retrieve filter")


def _known(what: str, given: dict[str, Any], names: frozenset[str]) -> None:
    """Raise TypeError for a keyword argument the memory's method does not take, as
    Python does for :class:`~actormem.Memory` (nothing is sent)."""
    for name in given:
        if name not in names:
            raise TypeError(f"{what}() got an unexpected keyword argument {name!r}")


def _at_most(name: str, value: int, high: int, kind: type[Exception] = InvalidQueryError) -> None:
    """Refuse an int the server's schema refuses as too large, before sending, with the
    shape of the memory's own messages ("limit must be >= 0, got -1")."""
    if value > high:
        bound = "2**53 - 1 (I-JSON)" if high == MAX_JSON_INT else str(high)
        raise kind(f"{name} must be <= {bound} over HTTP, got {value}")


def _entry_json(entry: MemoryEntry, what: str) -> dict[str, Any]:
    if not isinstance(entry, MemoryEntry):
        raise TypeError(f"{what} takes a MemoryEntry, not {type(entry).__name__}")
    _at_most("access_count", entry.access_count, MAX_JSON_INT, InvalidEntryError)
    return entry_to_json(entry)


def _check_id(id: uuid.UUID, what: str) -> str:
    if not isinstance(id, uuid.UUID):
        raise TypeError(f"{what} takes a uuid.UUID, not {type(id).__name__}")
    return str(id)


def _entries(data: Any) -> list[MemoryEntry]:
    return [entry_from_json(e) for e in data["entries"]]


def _scored(data: Any) -> list[ScoredEntry]:
    return [
        ScoredEntry(entry=entry_from_json(r["entry"]), score=float(r["score"]))
        for r in data["results"]
    ]


def _stored_seq(answer: Any) -> int | None:
    """A store's answer: ``{"id": ..., "seq": n | null}``; the seq (a replicated memory's)."""
    uuid.UUID(answer["id"])  # an answer without the stored id is not a store's answer
    seq = answer.get("seq")
    if seq is not None and (isinstance(seq, bool) or not isinstance(seq, int)):
        raise TypeError(f"seq must be an int, not {type(seq).__name__}")
    return seq


def _stored_many(answer: Any) -> None:
    """A batch store's answer: ``{"stored": n, "ids": [...]}``."""
    for i in answer["ids"]:
        uuid.UUID(i)


def _store_call(entry: MemoryEntry) -> _Call[int | None]:
    body = _entry_json(entry, "store()")
    return _Call("POST", "/v1/entries", _stored_seq, body=body, invalid=InvalidEntryError)


def _store_many_call(entries: Iterable[MemoryEntry]) -> _Call[None]:
    listed = check_entry_batch(entries)  # once: a generator is read here only
    body = {"entries": [_entry_json(e, "store_many()") for e in listed]}
    refusal = batch_tags_refusal(len({tag for e in listed for tag in e.tags}))
    if refusal is not None:
        raise InvalidEntryError(refusal)
    return _Call("POST", "/v1/batch", _stored_many, body=body, invalid=InvalidEntryError)


def _delete_call(id: uuid.UUID) -> _Call[bool]:
    path = f"/v1/entries/{_check_id(id, 'delete()')}"
    return _Call("DELETE", path, lambda _: True, idempotent=False, not_found=False)


def _get_call(id: uuid.UUID) -> _Call[MemoryEntry | None]:
    path = f"/v1/entries/{_check_id(id, 'get()')}"
    return _Call("GET", path, entry_from_json, not_found=None)


def _retrieve_body(
    what: str, query: str, limit: int, filters: dict[str, Any]
) -> dict[str, Any]:
    _known(what, filters, _RETRIEVE_NAMES)
    check_query(query, limit)
    _at_most("limit", limit, MAX_LIMIT)
    try:
        query.encode("utf-8")
    except UnicodeEncodeError:  # JSON over HTTP is UTF-8: a lone surrogate cannot be sent
        raise InvalidQueryError(
            "query holds a lone surrogate and cannot be sent as UTF-8"
        ) from None
    body: dict[str, Any] = {"query": query, "limit": limit}
    filters = _checked_filters(filters, times=True)
    check_thresholds(filters.get("min_score"), filters.get("min_matched", 0))
    _at_most("min_matched=", filters.get("min_matched", 0), MAX_JSON_INT)
    for name, value in filters.items():
        if value is not None:
            body[name] = _jsonable(value)
    return body


def _checked_filters(filters: dict[str, Any], *, times: bool) -> dict[str, Any]:
    """``filters`` with their collections made lists, once refused as ``Memory`` refuses
    them (its own checks, ``make_filter``: the same TypeError or InvalidQueryError): a
    ``where`` with a set or a non-str key, a category given as a str, ... The server
    would take some of them in their JSON form (a set as a list, a key as its str)."""
    out = dict(filters)
    for name in ("namespace", "tags", "category"):
        value = out.get(name)
        if isinstance(value, (str, bytes)) and name != "category":
            raise TypeError(f"{name}= must be a sequence of str, not one str")
        if value is not None and not isinstance(value, (str, bytes, enum.Enum)):
            if isinstance(value, Iterable):
                out[name] = list(value)  # once: a generator is read here only
    extra = {"created_after": out.get("created_after"), "created_before": out.get("created_before")}
    make_filter(
        out.get("namespace"),
        out.get("category"),
        out.get("tags"),
        out.get("where"),
        **(extra if times else {}),
    )
    return out


def _retrieve_call(query: str, limit: int, filters: dict[str, Any]) -> _Call[list[MemoryEntry]]:
    body = _retrieve_body("retrieve", query, limit, filters)
    return _Call("POST", "/v1/retrieve", _entries, body=body)


def _retrieve_scored_call(
    query: str, limit: int, filters: dict[str, Any]
) -> _Call[list[ScoredEntry]]:
    body = _retrieve_body("retrieve_scored", query, limit, filters)
    return _Call("POST", "/v1/retrieve_scored", _scored, body=body)


def _list_call(
    namespace: Iterable[str] | None, filters: dict[str, Any]
) -> _Call[list[MemoryEntry]]:
    _known("list_entries", filters, _LIST_NAMES)
    _check_listing(filters.get("limit", 10), filters.get("offset", 0))
    body: dict[str, Any] = {}
    for name, value in _checked_filters({"namespace": namespace, **filters}, times=False).items():
        if value is not None:
            body[name] = _jsonable(value)
    return _Call("POST", "/v1/list", _entries, body=body)


def _check_listing(limit: Any, offset: Any) -> None:
    check_listing(limit, offset)
    _at_most("limit", limit, MAX_LIMIT)
    _at_most("offset", offset, MAX_JSON_INT)


def _namespaces_call(options: dict[str, Any]) -> _Call[list[tuple[str, ...]]]:
    _known("list_namespaces", options, _NAMESPACES_NAMES)
    _check_listing(options.get("limit", 100), options.get("offset", 0))
    pre, suf = check_namespace_patterns(
        options.get("prefix"), options.get("suffix"), options.get("max_depth")
    )
    options = {**options, "prefix": pre, "suffix": suf}  # once: a generator is read here only
    depth = options.get("max_depth")
    if depth is not None:
        if depth < 1:  # the memory cuts every namespace to () with 0; the server refuses it
            raise InvalidQueryError(f"max_depth must be >= 1 over HTTP, got {depth}")
        _at_most("max_depth", depth, MAX_JSON_INT)
    body = {name: _jsonable(v) for name, v in options.items() if v is not None}
    return _Call(
        "POST", "/v1/namespaces", lambda d: [tuple(ns) for ns in d["namespaces"]], body=body
    )


def _key_body(namespace: Iterable[str], key: str) -> dict[str, Any]:
    return {"namespace": list(check_lookup_key(namespace, key)), "key": key}


def _get_by_key_call(
    namespace: Iterable[str], key: str, refresh_ttl: bool
) -> _Call[MemoryEntry | None]:
    body = {**_key_body(namespace, key), "refresh_ttl": refresh_ttl}
    return _Call("POST", "/v1/by_key", entry_from_json, body=body, not_found=None)


def _delete_key_call(namespace: Iterable[str], key: str) -> _Call[bool]:
    body = _key_body(namespace, key)
    return _Call(
        "POST", "/v1/delete_key", lambda _: True, body=body, idempotent=False, not_found=False
    )


def _sweep_call() -> _Call[int]:
    return _Call("POST", "/v1/sweep_expired", lambda d: int(d["removed"]), idempotent=False)


def _consolidate_call() -> _Call[ConsolidationStats]:
    return _Call("POST", "/v1/consolidate", lambda d: ConsolidationStats(**d), idempotent=False)


def _statistics_call() -> _Call[MemoryStatistics]:
    return _Call("GET", "/v1/statistics", lambda d: MemoryStatistics(**d))


#: One page of removal reports: ``(total, first, [(number, id, cause), ...])``.
Removals = tuple[int, int, list[tuple[int, uuid.UUID, str]]]


def _removals_page(answer: Any) -> Removals:
    reports = [(int(n), uuid.UUID(i), str(c)) for n, i, c in answer["removals"]]
    return int(answer["total"]), int(answer["first"]), reports


def _removals_call(after: int, limit: int) -> _Call[Removals]:
    for name, value in (("after", after), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return _Call("GET", f"/v1/removals?after={after}&limit={limit}", _removals_page)


def _count_call() -> _Call[int]:
    return _Call("GET", "/v1/len", lambda d: int(d["entries"]))


def _detail(response: httpx.Response) -> str:
    try:
        problem = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(problem, dict) and isinstance(problem.get("detail"), str):
        return str(problem["detail"])
    return str(problem)[:200]


def _decode(call: _Call[_T], response: httpx.Response) -> _T:
    status = response.status_code
    if 200 <= status < 300:
        try:
            return call.decode(response.json())
        except (ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
            # A 2xx that is not this call's answer (another program on the port, a
            # proxy's page): say so, never a raw decoding error or a silent success.
            reason = f"not an actormem answer ({type(exc).__name__}: {exc})"
            raise RemoteError(str(response.request.url), status, reason[:300]) from None
    if status == 404 and call.not_found is not _NOT_FOUND:
        result: _T = call.not_found
        return result
    detail = _detail(response)
    if status == 422:
        raise call.invalid(detail)
    raise RemoteError(str(response.request.url), status, detail)


def _normalize_url(url: str) -> str:
    if not isinstance(url, str):
        raise TypeError(f"url must be a str, not {type(url).__name__}")
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ValueError(f"url must be an http:// or https:// URL, got {url!r}")
    return url.rstrip("/")


def _check_options(timeout: float, retries: int) -> None:
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"retries must be an int >= 0, got {retries!r}")


def _headers(token: str | None) -> dict[str, str]:
    if token is None:
        return {}
    if not isinstance(token, str) or not token:
        raise ValueError("token must be a non-empty str or None")
    return {"Authorization": f"Bearer {token}"}


def _retryable(exc: httpx.HTTPError, call: _Call[Any]) -> bool:
    if isinstance(exc, httpx.TimeoutException):
        return False
    if isinstance(exc, httpx.ConnectError):
        return True  # nothing was sent
    return call.idempotent and isinstance(exc, httpx.TransportError)


def _out_of_time(timeout: float) -> str:
    return f"no answer within the timeout ({timeout:g} s for the whole call)"


def _transport_error(url: str, exc: httpx.HTTPError, attempts: int) -> TransportError:
    if isinstance(exc, httpx.TimeoutException):
        reason = f"no answer within the timeout ({type(exc).__name__})"
    else:
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        reason = f"{type(exc).__name__}: {exc or 'connection failed'}{tries}"
    error = TransportError(url, reason)
    error.__cause__ = exc
    return error


def _sync_transport() -> httpx.HTTPTransport:
    """httpx's transport for :class:`Client`, its connections bounded by the call's
    deadline (:class:`~actormem.client._deadline.DeadlineBackend`). httpx takes no
    network backend, so the one of its pool (httpcore's ``ConnectionPool``, the same since
    httpx 0.24) is wrapped; a later httpx without it leaves the transport as it is
    (tests/test_review26a_client.py tells)."""
    transport = httpx.HTTPTransport(socket_options=_SOCKET_OPTIONS)
    pool = transport._pool
    backend = getattr(pool, "_network_backend", None)
    if backend is not None:
        pool._network_backend = DeadlineBackend(backend)
    return transport


class AsyncClient(metaclass=Final):
    """Async client of an ``actormem serve`` server, for asyncio and trio alike.

    Built on ``httpx.AsyncClient`` and anyio only, so the same class works under
    ``asyncio.run`` and ``trio.run``; an instance belongs to the event loop that first
    used it (its pooled connections do): make one per run. The methods mirror
    :class:`~actormem.Memory`:
    ``store``, ``store_many``, ``delete``, ``consolidate``, ``get``, ``retrieve``,
    ``retrieve_scored`` take and return the same types; ``statistics`` and ``count``
    (``len(memory)``) are coroutines here, and ``export`` streams every entry.

    Use it as a context manager (``async with AsyncClient(url) as memory:``) or call
    :meth:`aclose`. It keeps a pool of connections; every call has ``timeout``.

    Args:
        url: The server's base URL, e.g. ``"http://127.0.0.1:8765"``.
        token: The server's bearer token, if it has one.
        timeout: Seconds each call may take in all (default 10). A call that runs out
            raises :class:`~actormem.TransportError`; it may or may not have been applied.
        retries: Retries after a failed connection (default 3): every call when the
            connection could not be opened, only calls safe to repeat when it broke
            after sending (see ``docs/server.md``).

    Raises (from every call):
        TransportError: The server could not be reached or did not answer in time.
        RemoteError: The server answered 401, 413, 503 or another error status.
        InvalidEntryError, InvalidQueryError: The server refused the input (422), or
            the client did before sending: what the memory refuses, and the server's
            bounds (``limit`` over 10,000, an integer over 2**53 - 1, a batch of over
            65,536 distinct tags).
        TypeError: An argument of the wrong type, or a keyword the memory's method does
            not take (nothing is sent).
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.url = _normalize_url(url)
        _check_options(timeout, retries)
        self._retries = retries
        self._timeout = float(timeout)
        self._http = httpx.AsyncClient(
            base_url=self.url,
            headers=_headers(token),
            timeout=httpx.Timeout(timeout),
            transport=httpx.AsyncHTTPTransport(socket_options=_SOCKET_OPTIONS),
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        await self._http.aclose()

    async def _do(self, call: _Call[_T]) -> _T:
        if self._http.is_closed:
            raise TransportError(self.url + call.path, "the client is closed")
        # httpx's timeout bounds each step (connect, each read): a server that trickles
        # its answer a byte at a time would keep a call going without end.
        with anyio.move_on_after(self._timeout):
            return await self._attempts(call)
        raise TransportError(self.url + call.path, _out_of_time(self._timeout))

    async def _attempts(self, call: _Call[_T]) -> _T:
        attempt = 0
        while True:
            try:
                response = await self._http.request(call.method, call.path, json=call.body)
            except httpx.HTTPError as exc:
                if attempt < self._retries and _retryable(exc, call):
                    await anyio.sleep(_FIRST_BACKOFF * 2**attempt)
                    attempt += 1
                    continue
                raise _transport_error(self.url + call.path, exc, attempt + 1) from exc
            return _decode(call, response)

    async def store(self, entry: MemoryEntry) -> int | None:
        """Store ``entry`` (an upsert by id); return once the server applied it
        (a durable server: committed): None, or on a node of a replicated memory the
        store's log seq. See :meth:`Memory.store <actormem.Memory.store>`."""
        return await self._do(_store_call(entry))

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Store every entry in order, as one request applied in one batch (see
        :meth:`Memory.store_many <actormem.Memory.store_many>`); the server's body limit
        bounds how many fit in one call."""
        await self._do(_store_many_call(entries))

    async def delete(self, id: uuid.UUID) -> bool:
        """Remove the entry ``id``; True if it was there. Not retried after sending."""
        return await self._do(_delete_call(id))

    async def consolidate(self) -> ConsolidationStats:
        """Prune and merge (see :meth:`Memory.consolidate <actormem.Memory.consolidate>`)."""
        return await self._do(_consolidate_call())

    async def get_by_key(
        self, namespace: Iterable[str], key: str, *, refresh_ttl: bool = False
    ) -> MemoryEntry | None:
        """The entry with ``(namespace, key)``, or None (:meth:`Memory.get_by_key
        <actormem.Memory.get_by_key>`)."""
        return await self._do(_get_by_key_call(namespace, key, refresh_ttl))

    async def delete_key(self, namespace: Iterable[str], key: str) -> bool:
        """Remove the entry with ``(namespace, key)``; True if there was one. Not
        retried after sending."""
        return await self._do(_delete_key_call(namespace, key))

    async def sweep_expired(self) -> int:
        """Remove every expired entry now; how many (:meth:`Memory.sweep_expired
        <actormem.Memory.sweep_expired>`). Not retried after sending."""
        return await self._do(_sweep_call())

    async def get(self, id: uuid.UUID) -> MemoryEntry | None:
        """The entry ``id``, or None."""
        return await self._do(_get_call(id))

    async def retrieve(self, query: str, limit: int = 10, **filters: Any) -> list[MemoryEntry]:
        """The ``limit`` best entries for ``query``, best first; ``filters`` are the
        keyword filters of :meth:`Memory.retrieve <actormem.Memory.retrieve>`
        (``namespace=``, ``category=``, ``tags=``, ``min_score=``, ``min_matched=``,
        ``created_after=``, ``created_before=``). At most 10,000 results per call."""
        return await self._do(_retrieve_call(query, limit, filters))

    async def retrieve_scored(
        self, query: str, limit: int = 10, **filters: Any
    ) -> list[ScoredEntry]:
        """As :meth:`retrieve`, with scores (:class:`~actormem.ScoredEntry`)."""
        return await self._do(_retrieve_scored_call(query, limit, filters))

    async def list_entries(
        self, namespace: Iterable[str] | None = None, **filters: Any
    ) -> list[MemoryEntry]:
        """Entries matching the filters without a query, newest ``updated_at`` first
        (:meth:`Memory.list_entries <actormem.Memory.list_entries>`: ``where=``,
        ``category=``, ``tags=``, ``limit=``, ``offset=``, ``refresh_ttl=``)."""
        return await self._do(_list_call(namespace, filters))

    async def list_namespaces(self, **options: Any) -> list[tuple[str, ...]]:
        """The namespaces holding entries (:meth:`Memory.list_namespaces
        <actormem.Memory.list_namespaces>`: ``prefix=``, ``suffix=``, ``max_depth=``,
        ``limit=``, ``offset=``)."""
        return await self._do(_namespaces_call(options))

    async def statistics(self) -> MemoryStatistics:
        """The server memory's counters (:class:`~actormem.MemoryStatistics`)."""
        return await self._do(_statistics_call())

    async def count(self) -> int:
        """Entries in the server memory's latest snapshot (``len(memory)``)."""
        return await self._do(_count_call())

    async def removals(self, after: int = 0, limit: int = 10_000) -> Removals:
        """The server memory's removal reports numbered above ``after``, oldest first,
        at most ``limit``: ``(total, first, [(number, id, cause), ...])``: ``total`` reports
        so far, ``first`` the oldest number the server still keeps (``after + 1 < first``:
        some were dropped before they were read).
        What an exact accounting of stores needs (``actormem swarm --server``).

        Raises:
            RemoteError: 404 when the server keeps no reports (a memory served by another
                program than ``actormem serve``).
        """
        return await self._do(_removals_call(after, limit))

    async def export(self) -> AsyncIterator[MemoryEntry]:
        """Every entry of one snapshot of the server's memory, in insertion order,
        streamed (memory use stays flat). Not retried once the stream has started."""
        url = self.url + "/v1/export"
        try:
            async with self._http.stream("GET", "/v1/export") as response:
                if response.status_code != 200:
                    await response.aread()
                    _decode(_Call("GET", "/v1/export", lambda _: None), response)
                async for line in response.aiter_lines():
                    if line:
                        yield entry_from_json(json.loads(line))
        except httpx.HTTPError as exc:
            raise _transport_error(url, exc, 1) from exc


class Client(metaclass=Final):
    """Synchronous client of an ``actormem serve`` server: :class:`AsyncClient`'s methods,
    blocking (``httpx.Client`` underneath). Safe to share between threads.

    ``len(client)`` works too (one request). See :class:`AsyncClient` for the arguments,
    the retries and the errors.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.url = _normalize_url(url)
        _check_options(timeout, retries)
        self._retries = retries
        self._timeout = float(timeout)
        self._http = httpx.Client(
            base_url=self.url,
            headers=_headers(token),
            timeout=httpx.Timeout(timeout),
            transport=_sync_transport(),
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool. Idempotent."""
        self._http.close()

    def _do(self, call: _Call[_T]) -> _T:
        if self._http.is_closed:
            raise TransportError(self.url + call.path, "the client is closed")
        deadline = time.monotonic() + self._timeout
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TransportError(self.url + call.path, _out_of_time(self._timeout))
            try:
                response = self._request(call, deadline, remaining)
            except httpx.HTTPError as exc:
                if attempt < self._retries and _retryable(exc, call):
                    time.sleep(min(_FIRST_BACKOFF * 2**attempt, remaining))
                    attempt += 1
                    continue
                raise _transport_error(self.url + call.path, exc, attempt + 1) from exc
            return _decode(call, response)

    def _request(self, call: _Call[Any], deadline: float, remaining: float) -> httpx.Response:
        """One attempt, every step of it (connect, send, the response's header and body)
        bounded by what is left of the call's time: httpx's timeout bounds each read
        alone, and a server trickling its answer, header or body, would keep the call
        going (the connection's reads check ``DEADLINE``)."""
        DEADLINE.at = deadline
        try:
            return self._http.request(call.method, call.path, json=call.body, timeout=remaining)
        finally:
            DEADLINE.at = None

    def store(self, entry: MemoryEntry) -> int | None:
        """See :meth:`AsyncClient.store`."""
        return self._do(_store_call(entry))

    def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """See :meth:`AsyncClient.store_many`."""
        self._do(_store_many_call(entries))

    def delete(self, id: uuid.UUID) -> bool:
        """See :meth:`AsyncClient.delete`."""
        return self._do(_delete_call(id))

    def consolidate(self) -> ConsolidationStats:
        """See :meth:`AsyncClient.consolidate`."""
        return self._do(_consolidate_call())

    def get_by_key(
        self, namespace: Iterable[str], key: str, *, refresh_ttl: bool = False
    ) -> MemoryEntry | None:
        """See :meth:`AsyncClient.get_by_key`."""
        return self._do(_get_by_key_call(namespace, key, refresh_ttl))

    def delete_key(self, namespace: Iterable[str], key: str) -> bool:
        """See :meth:`AsyncClient.delete_key`."""
        return self._do(_delete_key_call(namespace, key))

    def sweep_expired(self) -> int:
        """See :meth:`AsyncClient.sweep_expired`."""
        return self._do(_sweep_call())

    def get(self, id: uuid.UUID) -> MemoryEntry | None:
        """See :meth:`AsyncClient.get`."""
        return self._do(_get_call(id))

    def retrieve(self, query: str, limit: int = 10, **filters: Any) -> list[MemoryEntry]:
        """See :meth:`AsyncClient.retrieve`."""
        return self._do(_retrieve_call(query, limit, filters))

    def retrieve_scored(self, query: str, limit: int = 10, **filters: Any) -> list[ScoredEntry]:
        """See :meth:`AsyncClient.retrieve_scored`."""
        return self._do(_retrieve_scored_call(query, limit, filters))

    def list_entries(
        self, namespace: Iterable[str] | None = None, **filters: Any
    ) -> list[MemoryEntry]:
        """See :meth:`AsyncClient.list_entries`."""
        return self._do(_list_call(namespace, filters))

    def list_namespaces(self, **options: Any) -> list[tuple[str, ...]]:
        """See :meth:`AsyncClient.list_namespaces`."""
        return self._do(_namespaces_call(options))

    def statistics(self) -> MemoryStatistics:
        """See :meth:`AsyncClient.statistics`."""
        return self._do(_statistics_call())

    def count(self) -> int:
        """See :meth:`AsyncClient.count`."""
        return self._do(_count_call())

    def removals(self, after: int = 0, limit: int = 10_000) -> Removals:
        """See :meth:`AsyncClient.removals`."""
        return self._do(_removals_call(after, limit))

    def __len__(self) -> int:
        """``count()``: entries in the server memory's latest snapshot."""
        return self.count()

    def export(self) -> Iterator[MemoryEntry]:
        """See :meth:`AsyncClient.export`."""
        url = self.url + "/v1/export"
        try:
            with self._http.stream("GET", "/v1/export") as response:
                if response.status_code != 200:
                    response.read()
                    _decode(_Call("GET", "/v1/export", lambda _: None), response)
                for line in response.iter_lines():
                    if line:
                        yield entry_from_json(json.loads(line))
        except httpx.HTTPError as exc:
            raise _transport_error(url, exc, 1) from exc
