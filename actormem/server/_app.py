"""The HTTP API over one open :class:`~actormem.Memory` (FastAPI on anyio, run by
hypercorn's trio worker in :mod:`actormem.server._run`).

Theory of operation
-------------------
The web layer is thin: routes validate a body with a pydantic model
(:mod:`actormem.server._models`), build entries with
:func:`~actormem._storage.jsonl.entry_from_json`, await the memory's own method, and write
the answer with :func:`~actormem._storage.jsonl.entry_to_json`. The handlers run as trio
tasks of the server's run, so they call the memory directly, as any trio task does:
writes queue for the owner, reads score a snapshot in the handler's task.

Every error leaves as one RFC 9457 problem document (``application/problem+json`` with
``type``, ``title``, ``status``, ``detail`` and, for a bad field, ``field``), made by the
handlers at the bottom: invalid body or query 422, unknown id or route 404, a method the
path does not serve 405, body over the limit 413, missing or wrong token 401, memory
closing or broken 503. Anything else is a bug in actormem (500, still a problem document,
and logged). A request hypercorn cannot read (400, 431, 501) is answered by
``_run._problem_answer``; docs/server.md's table lists every status.

Two pure ASGI middlewares wrap the app: the outer one times every request for
``/metrics``; the inner one refuses a body over the limit before the app reads it (by
``Content-Length``, or while a chunked body streams in).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from http import HTTPStatus
from typing import Annotated, Any

import attrs
import trio
from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.exceptions import HTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._engine.memory import Memory
from .._entry import MemoryCategory, MemoryEntry
from .._errors import (
    ActorMemError,
    EmbeddingError,
    InvalidEntryError,
    InvalidQueryError,
    StorageError,
)
from .._json import MAX_VALUE_DEPTH
from .._storage.jsonl import entry_from_json, entry_to_json
from ..client._bounds import batch_tags_refusal
from ._feed import RemovalFeed
from ._models import (
    MAX_JSON_INT,
    ConsolidationOut,
    DeletedOut,
    EntryIn,
    EntryOut,
    KeyIn,
    LenOut,
    ListIn,
    NamespacesIn,
    NamespacesOut,
    Problem,
    RemovalsOut,
    RetrieveIn,
    RetrieveOut,
    ScoredResultsOut,
    StatisticsOut,
    StoredManyOut,
    StoredOut,
    StoreManyIn,
    SweptOut,
)

__all__ = ["PROBLEM_JSON", "create_app"]

log = logging.getLogger("actormem.server")

PROBLEM_JSON = "application/problem+json"
_NDJSON = "application/x-ndjson"
#: Entries per chunk of a streamed export (one write each; ``Memory.scan`` slices the
#: reading).
_EXPORT_CHUNK = 256
#: How long /readyz waits for the owner to answer before saying "not ready".
_READY_TIMEOUT = 2.0
#: The answer to a body nested past what the JSON parser takes (Python's recursion
#: limit, about 1,000 levels): the values it carries nest at most MAX_VALUE_DEPTH.
_TOO_DEEP = (
    f"body: nested too deep to read (a value in it nests objects and arrays "
    f"{MAX_VALUE_DEPTH} levels deep at most)"
)


class _Refused(Exception):
    """A request refused with a problem document (raised by the handlers below)."""

    def __init__(self, status: int, detail: str, field: str | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.field = field


def _is_json_type(value: str | None) -> bool:
    """Whether a ``Content-Type`` says JSON as FastAPI reads it (``application/json`` or
    ``application/*+json``, parameters aside). O(len(value))."""
    if not value:
        return False
    kind = value.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def problem(
    status: int, detail: str, field: str | None = None, headers: dict[str, str] | None = None
) -> JSONResponse:
    """An RFC 9457 problem response (``type`` is ``about:blank``: the status says it all)."""
    body: dict[str, Any] = {
        "type": "about:blank",
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON, headers=headers)


_PROBLEMS: dict[int | str, dict[str, Any]] = {
    status: {
        "model": Problem,
        "content": {PROBLEM_JSON: {}},
        "description": HTTPStatus(status).phrase,
    }
    for status in (401, 413, 422, 503)
}
_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": Problem, "content": {PROBLEM_JSON: {}}, "description": "No entry with this id"}
}


def _field_of(loc: Sequence[Any]) -> str:
    """``("body", "entries", 0, "tags", 2)`` -> ``"entries[0].tags[2]"``."""
    out = ""
    if loc and loc[0] in ("body", "query", "path", "header"):
        loc = loc[1:]  # where the value was: the rest names it
    for part in loc:
        if isinstance(part, str) and ("[" in part or "(" in part):
            continue  # a union member's tag, e.g. "literal['fact', ...]", not a field
        if isinstance(part, int):
            out += f"[{part}]" if out else "body"  # ("body", 0): the body as a whole
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def _to_entry(body: EntryIn, field: str) -> MemoryEntry:
    """The entry a validated body describes, through the one JSON converter. A refusal
    names the field at fault (``tags``, ``entries[2].created_at``), or ``field`` itself
    when no one field is (two that disagree)."""
    fields = body.model_dump(mode="json", exclude_unset=True)
    for key in ("id", "created_at", "updated_at"):  # null: not given (a new id, now)
        if fields.get(key, "") is None:
            del fields[key]
    try:
        return entry_from_json(fields)
    except (ValueError, TypeError) as exc:  # MemoryEntry's own checks (e.g. a lone surrogate)
        at = _field_at_fault(fields)
        if at is not None:
            field = at if field == "body" else f"{field}.{at}"
        raise _Refused(422, f"{field}: {exc}", field) from None


def _field_at_fault(fields: dict[str, Any]) -> str | None:
    """The field of a refused entry's ``fields`` (JSON, as :func:`entry_from_json`
    takes them) that is refused on its own beside ``category`` and ``memory``; None if
    none is (a refusal of two together). Run on a refusal only: O(fields x entry
    conversion)."""
    base = {"category": fields["category"], "memory": fields["memory"]}
    for name in ("memory", *fields):
        if name == "category":
            continue
        try:
            entry_from_json(base if name == "memory" else {**base, name: fields[name]})
        except (ValueError, TypeError):
            return name
    return None


def _refuse_if_broken(memory: Memory) -> None:
    """503 when ``memory`` is broken (a failed commit): it refuses every call for good,
    so answers that read it without a call must not pass it off as working."""
    if memory.failure is not None:
        raise _Refused(503, f"the memory is broken: {memory.failure}")


def _scored_json(score: float, entry: MemoryEntry) -> dict[str, Any]:
    return {"entry": entry_to_json(entry), "score": score}


def _retrieve_filters(body: RetrieveIn | ListIn) -> dict[str, Any]:
    """The keyword filters of ``Memory.retrieve`` (or ``list_entries``) given in the body
    (unset ones left out)."""
    filters = body.model_dump(exclude_unset=True, exclude={"query", "limit", "offset"})
    category = filters.get("category")
    if isinstance(category, str):
        filters["category"] = MemoryCategory(category)
    elif category is not None:
        filters["category"] = [MemoryCategory(c) for c in category]
    return filters


def _allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route serves at this path (Starlette's own 405 names only the
    first matching route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**scope, "method": "\x00"})
        if match != Match.NONE:
            methods |= getattr(route, "methods", None) or set()
    return sorted(methods)


def _query_refused(exc: Exception) -> _Refused:
    """A 422 for a query the memory refused, naming the field its message names."""
    message = str(exc)
    field = "where" if ("filter" in message or "where" in message) else "body"
    return _Refused(422, f"{field}: {message}", field)


class _BodyLimit:
    """ASGI middleware: a request body over ``max_body`` bytes gets a 413 problem."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > limit:
                    await self._refuse(scope, receive, send)
                    return
        seen = 0
        started = False
        head = b""  # the body's first 4 bytes, to tell its encoding

        async def limited_receive() -> Message:
            nonlocal seen, head
            message = await receive()
            if message["type"] == "http.request":
                body = message.get("body", b"")
                seen += len(body)
                if seen > limit:
                    raise _BodyTooLarge(limit)
                if len(head) < 4:
                    head += body[: 4 - len(head)]
                    more = message.get("more_body", False)
                    if (len(head) == 4 or not more) and head:
                        if json.detect_encoding(head).startswith(("utf-16", "utf-32")):
                            raise _NotUtf8()
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except _BodyTooLarge:
            if started:  # pragma: no cover - the app answers only after reading the body
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(413, _too_large(self.max_body), "body")
        await response(scope, receive, send)


#: The key of an ``http.disconnect`` that says the client ended its sending
#: (``shutdown(SHUT_WR)``) after a whole request: it may still read the answer
#: (``actormem.server._run._protocol_handle``).
HALF_CLOSED = "actormem.half_closed"


class _StreamedResponse(StreamingResponse):
    """Starlette's StreamingResponse whose last send (``http.response.body`` without
    ``more_body``) cannot be cancelled: the connection is closed (or kept for the next
    request) when the answer ends.

    Below ASGI spec 2.4 (hypercorn 0.18 says 2.1), Starlette streams the body in a task
    group beside a task that waits for ``http.disconnect`` and cancels the group when it
    arrives. hypercorn (``protocol/http_stream.py``, ``protocol/h11.py``) ends the answer
    inside that last send, in the app's task: it sends the end of the body, puts
    ``http.disconnect`` in the app's queue (``_close_stream``), then either closes the
    connection (``Connection: close``, HTTP/1.0: ``TCPServer._close``) or restarts its
    keep-alive idle timer. The waiting task takes that ``http.disconnect`` and cancels
    the group, and the send was cancelled at the close's first checkpoint
    (``SocketStream.send_eof``) or the timer's lock: the body was all sent but the
    connection never closed (an HTTP/1.0 client, whose body ends at the close, waited
    forever), or an idle kept-alive connection never timed out. Shielding that send lets
    it finish; a client that leaves mid-stream still cancels the stream at once (the
    sends before the last are not shielded). The shielded send waits on nothing the
    unshielded one did not: hypercorn shields its socket writes already. O(1) a send."""

    async def listen_for_disconnect(self, receive: Receive) -> None:
        """Return once the client is gone: an ``http.disconnect`` not marked
        :data:`HALF_CLOSED` (a client that ended its sending after its request still
        reads the stream). O(1) a message."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect" and not message.get(HALF_CLOSED):
                return

    async def stream_response(self, send: Send) -> None:
        async def ending(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with trio.CancelScope(shield=True):
                    await send(message)
            else:
                await send(message)

        await super().stream_response(ending)


def closing_connection(message: Message) -> Message:
    """``message`` with ``Connection: close`` in place of any ``Connection`` header
    when it starts a response (``http.response.start``); any other as it is."""
    if message["type"] != "http.response.start":
        return message
    headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != b"connection"]
    return {**message, "headers": [*headers, (b"connection", b"close")]}


class _CloseUnread:
    """ASGI middleware: a response that starts before the request's body was read to
    its end (a 413 over the body limit, a 401 without the token: refused unread) says
    ``Connection: close``. The server closes such a connection after the response (the
    rest of the body is still on it), and without the header a client that keeps
    connections alive reuses it for its next request, which that close then drops
    ("Server disconnected"; RFC 9112, section 9.6)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        unread = False
        for name, value in scope["headers"]:
            if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
                unread = True
        if not unread:
            await self.app(scope, receive, send)
            return

        async def reading() -> Message:
            nonlocal unread
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                unread = False
            return message

        async def closing(message: Message) -> None:
            if unread:
                message = closing_connection(message)
            await send(message)

        await self.app(scope, reading, closing)


class _Auth:
    """ASGI middleware: with a token, every request but the public routes needs it, and
    is refused (401) before routing, so that a caller without it learns nothing of which
    routes and methods exist (no 404/405 first). The routes check again (their
    dependency documents the scheme in the OpenAPI document)."""

    #: What a load balancer or a scraper of the schema may call without the token.
    PUBLIC = frozenset({"/healthz", "/readyz", "/openapi.json"})

    def __init__(self, app: ASGIApp, expected: bytes | None) -> None:
        self.app = app
        self.expected = expected

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.expected is None or scope["path"] in self.PUBLIC:
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                given = value[7:].strip()
        if not hmac.compare_digest(given, self.expected):
            response = problem(
                401,
                "missing or wrong bearer token",
                "Authorization",
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


#: Largest request header (request line and header fields), in bytes: h11's and
#: hypercorn's ``h11_max_incomplete_size`` (16 KiB), which ``_run`` sets explicitly.
#: hypercorn alone enforces it only on a header still incomplete after that many bytes
#: were buffered: one arriving whole in one read (hypercorn reads 64 KiB at a time) got
#: through (a 20,000-byte header was answered 200). :class:`_HeaderLimit` applies it to
#: every request.
MAX_HEADER_BYTES = 16 * 1024


def header_size(scope: Scope) -> int:
    """The bytes of the request's header as HTTP/1.1 sends it, counted from the parsed
    request: ``METHOD target HTTP/1.1`` and one ``name: value`` line a field, each with
    its CRLF, and the blank line (whitespace around a value, which h11 strips, aside).
    O(header fields)."""
    target = len(scope.get("raw_path") or scope["path"].encode())
    if scope.get("query_string"):
        target += 1 + len(scope["query_string"])
    size = len(scope["method"]) + 1 + target + len(" HTTP/1.1\r\n") + 2
    for name, value in scope["headers"]:
        size += len(name) + 2 + len(value) + 2
    return size


class _HeaderLimit:
    """ASGI middleware: a request whose header is over :data:`MAX_HEADER_BYTES` gets the
    431 problem document hypercorn gives one it refuses itself (with ``Connection:
    close``), whatever the reads it arrived in. O(header fields) a request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or header_size(scope) <= MAX_HEADER_BYTES:
            await self.app(scope, receive, send)
            return
        response = problem(431, HEADER_TOO_LARGE, headers={"Connection": "close"})
        await response(scope, receive, send)


#: The detail of a 431 (also hypercorn's own, ``_run._UNREADABLE``).
HEADER_TOO_LARGE = "the request's header is too large"


class _BodyTooLarge(HTTPException):
    """Raised from ``receive`` when a streamed body passes the limit ``limit`` (bytes). An
    HTTPException, because FastAPI turns any other error while reading a body into a
    400; answered as the 413 of a too large Content-Length (``field`` "body")."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _too_large(limit))


class _NotUtf8(HTTPException):
    """Raised from ``receive`` when a body starts as UTF-16 or UTF-32 JSON (which
    ``json.loads`` of bytes would read): the API's bodies are UTF-8 (RFC 8259)."""

    def __init__(self) -> None:
        super().__init__(422, _NOT_UTF8)


_NOT_UTF8 = "body: not a JSON document in UTF-8"


def _too_large(limit: int) -> str:
    return f"the request body is over the limit of {limit} bytes"


#: Methods labelled as themselves in the latency metric; any other is "OTHER", so that
#: requests with made-up methods cannot grow /metrics (one label set each) without bound.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class _Timing:
    """ASGI middleware: request latencies by method, route template and status."""

    def __init__(self, app: ASGIApp, histogram: Histogram) -> None:
        self.app = app
        self.histogram = histogram

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def timed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, timed_send)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "(unmatched)"
            method = scope["method"] if scope["method"] in _METHODS else "OTHER"
            self.histogram.labels(method, path, str(status)).observe(time.perf_counter() - start)


class _MemoryCollector(Collector):
    """Prometheus metrics read from ``Memory.statistics()`` at each scrape."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "actormem_broken",
            "1 once the memory is broken (a failed commit): every call is refused",
            value=0 if self.memory.failure is None else 1,
        )
        stats = self.memory.statistics()
        gauges = {
            "entries": "Entries in the latest published snapshot",
            "queue_depth": "Requests waiting for the owner",
            "queue_capacity": "Size of the owner's request channel",
            "snapshot_version": "Version number of the latest published snapshot",
            "live_snapshots": "Snapshots still referenced",
            "retained_versions": "Dead record versions kept for live snapshots",
        }
        for name, text in gauges.items():
            yield GaugeMetricFamily(f"actormem_{name}", text, value=getattr(stats, name))
        if stats.capacity is not None:
            yield GaugeMetricFamily("actormem_capacity", "Most entries kept", value=stats.capacity)
        counters = {
            "stores": "Stores applied (upserts included)",
            "upserts": "Stores that replaced an entry with the same id",
            "deletes": "Deletes that removed an entry",
            "evictions": "Entries evicted at capacity",
            "pruned": "Entries pruned by consolidation",
            "merged": "Entries merged into a duplicate by consolidation",
            "consolidations": "Consolidations run",
            "retrieves": "Retrieves answered",
            "access_updates": "Access-count updates applied",
            "expired": "Entries removed because their time to live ran out",
            "ttl_refreshes": "Expiry times pushed back by reads",
        }
        for name, text in counters.items():
            yield CounterMetricFamily(f"actormem_{name}", text, value=getattr(stats, name))


def create_app(
    memory: Memory,
    *,
    token: str | None = None,
    max_body: int = 4 << 20,
    removals: RemovalFeed | None = None,
) -> FastAPI:
    """The ASGI app serving ``memory`` (which must stay open while the app serves).

    Args:
        memory: An open memory; the app's handlers must run in its trio run.
        token: When set, every route but ``/healthz``, ``/readyz`` and
            ``/openapi.json`` needs ``Authorization: Bearer <token>`` (compared in
            constant time); otherwise 401.
        max_body: Largest accepted request body, in bytes (larger: 413).

    Returns:
        A FastAPI app (docs in ``docs/server.md``, schema at ``/openapi.json``).
    """
    registry = CollectorRegistry(auto_describe=True)
    registry.register(_MemoryCollector(memory))
    latency = Histogram(
        "actormem_http_request_duration_seconds",
        "HTTP request latency, from the first byte in to the last byte out",
        ["method", "route", "status"],
        registry=registry,
        buckets=(1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5),
    )
    bearer = HTTPBearer(auto_error=False, description="The server's token (--token-file)")
    expected = None if token is None else token.encode("utf-8")

    async def authorized(
        credentials: HTTPAuthorizationCredentials | None = Depends(bearer),  # noqa: B008
    ) -> None:
        if expected is None:
            return
        given = b"" if credentials is None else credentials.credentials.encode("utf-8")
        # compare_digest takes the same time whatever matches, so a wrong token tells
        # nothing about the right one (its length aside).
        if credentials is None or not hmac.compare_digest(given, expected):
            raise _Refused(401, "missing or wrong bearer token", "Authorization")

    app = FastAPI(
        title="actormem",
        version="1",
        summary="One actormem memory served over HTTP/JSON.",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    guarded: dict[str, Any] = {"dependencies": [Depends(authorized)]}

    # ------------------------------------------------------------ writes

    @app.post(
        "/v1/entries",
        response_model=StoredOut,
        responses=_PROBLEMS,
        summary="Store one entry (an upsert by id)",
        **guarded,
    )
    async def store(body: EntryIn) -> Response:
        entry = _to_entry(body, "body")
        seq = await memory.store(entry)
        return JSONResponse({"id": str(await _stored_id(entry)), "seq": seq})

    @app.post(
        "/v1/batch",
        response_model=StoredManyOut,
        responses=_PROBLEMS,
        summary="Store many entries in order, as one request (Memory.store_many)",
        **guarded,
    )
    async def store_many(body: StoreManyIn) -> Response:
        refusal = batch_tags_refusal(len({tag for e in body.entries for tag in e.tags}))
        if refusal is not None:  # the owner's step would hold every request (422)
            raise _Refused(422, refusal, "entries")
        entries = [_to_entry(e, f"entries[{i}]") for i, e in enumerate(body.entries)]
        await memory.store_many(entries)
        ids = [str(await _stored_id(entry)) for entry in entries]
        return JSONResponse({"stored": len(entries), "ids": ids})

    async def _stored_id(entry: MemoryEntry) -> uuid.UUID:
        """The id ``entry`` was stored under: a key upsert keeps the replaced entry's id
        (the entry now under its key's)."""
        if entry.key is not None:
            now = await memory.get_by_key(entry.namespace, entry.key)
            if now is not None:
                return now.id
        return entry.id

    @app.delete(
        "/v1/entries/{entry_id}",
        response_model=DeletedOut,
        responses={**_PROBLEMS, **_NOT_FOUND},
        summary="Delete an entry",
        **guarded,
    )
    async def delete(entry_id: uuid.UUID) -> Response:
        if not await memory.delete(entry_id):
            raise _Refused(404, f"entry_id: no entry with id {entry_id}", "entry_id")
        return JSONResponse({"deleted": True})

    @app.post(
        "/v1/delete_key",
        response_model=DeletedOut,
        responses={**_PROBLEMS, **_NOT_FOUND},
        summary="Delete the entry with (namespace, key) (Memory.delete_key)",
        **guarded,
    )
    async def delete_key(body: KeyIn) -> Response:
        if not await memory.delete_key(body.namespace, body.key):
            raise _Refused(404, f"key: no entry with key {body.key!r} there", "key")
        return JSONResponse({"deleted": True})

    @app.post(
        "/v1/sweep_expired",
        response_model=SweptOut,
        responses=_PROBLEMS,
        summary="Remove every expired entry now (Memory.sweep_expired)",
        **guarded,
    )
    async def sweep_expired() -> Response:
        return JSONResponse({"removed": await memory.sweep_expired()})

    @app.post(
        "/v1/consolidate",
        response_model=ConsolidationOut,
        responses=_PROBLEMS,
        summary="Prune and merge (Memory.consolidate)",
        **guarded,
    )
    async def consolidate() -> Response:
        return JSONResponse(attrs.asdict(await memory.consolidate()))

    # ------------------------------------------------------------ reads

    @app.get(
        "/v1/entries/{entry_id}",
        response_model=EntryOut,
        responses={**_PROBLEMS, **_NOT_FOUND},
        summary="Get an entry by id",
        **guarded,
    )
    async def get(entry_id: uuid.UUID) -> Response:
        entry = await memory.get(entry_id)
        if entry is None:
            raise _Refused(404, f"entry_id: no entry with id {entry_id}", "entry_id")
        return JSONResponse(entry_to_json(entry))

    @app.post(
        "/v1/by_key",
        response_model=EntryOut,
        responses={**_PROBLEMS, **_NOT_FOUND},
        summary="Get the entry with (namespace, key) (Memory.get_by_key)",
        **guarded,
    )
    async def get_by_key(body: KeyIn) -> Response:
        entry = await memory.get_by_key(body.namespace, body.key, refresh_ttl=body.refresh_ttl)
        if entry is None:
            raise _Refused(404, f"key: no entry with key {body.key!r} there", "key")
        return JSONResponse(entry_to_json(entry))

    @app.post(
        "/v1/retrieve",
        response_model=RetrieveOut,
        responses=_PROBLEMS,
        summary="The best entries for a query (Memory.retrieve)",
        **guarded,
    )
    async def retrieve(body: RetrieveIn, request: Request) -> Response:
        hits = await _retrieve(body, request)
        return JSONResponse({"entries": [entry_to_json(h.entry) for h in hits]})

    @app.post(
        "/v1/retrieve_scored",
        response_model=ScoredResultsOut,
        responses=_PROBLEMS,
        summary="The best entries for a query, with scores (Memory.retrieve_scored)",
        **guarded,
    )
    async def retrieve_scored(body: RetrieveIn, request: Request) -> Response:
        hits = await _retrieve(body, request)
        return JSONResponse({"results": [_scored_json(h.score, h.entry) for h in hits]})

    async def _retrieve(body: RetrieveIn, request: Request) -> list[Any]:
        if body.min_seq is not None and not await _applied_or_gone(request, body.min_seq):
            # The client went away, or only ended its sending (HALF_CLOSED: it may still
            # read this): never a 200 that looks like "nothing matched".
            raise _Refused(
                503,
                f"min_seq: log record {body.min_seq} was not applied here before the client "
                "ended its sending (a retrieve waiting for min_seq takes that as leaving); "
                "nothing was scored",
                "min_seq",
            )
        try:
            return await memory.retrieve_scored(body.query, body.limit, **_retrieve_filters(body))
        except (InvalidQueryError, TypeError) as exc:
            raise _query_refused(exc) from None

    async def _applied_or_gone(request: Request, seq: int) -> bool:
        """Wait until the memory applied log record ``seq`` (``min_seq``); False if the
        client disconnected first. Without the watch, a wait for a seq that never comes
        (another memory's, a typo) outlived its client and kept its connection open: one
        task and one file descriptor more with each abandoned request, without end."""
        gone = applied = False
        try:
            async with trio.open_nursery() as nursery:

                async def watch() -> None:
                    nonlocal gone
                    while True:
                        message = await request.receive()
                        if message["type"] == "http.disconnect":
                            break
                    if message.get(HALF_CLOSED):
                        # The client may still read: one more schedule point lets a
                        # wait that is already over (the seq applied, or a memory that
                        # is not replicated) end first and the retrieve answer; with
                        # no wait, about one such retrieve in two read "no entries".
                        await trio.lowlevel.cancel_shielded_checkpoint()
                    gone = True
                    nursery.cancel_scope.cancel()

                nursery.start_soon(watch)
                await memory.wait_applied(seq)
                applied = True
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the wait's own error, for its handler
            if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                raise group.exceptions[0] from None
            raise
        return applied

    @app.post(
        "/v1/list",
        response_model=RetrieveOut,
        responses=_PROBLEMS,
        summary="Entries matching filters, newest first (Memory.list_entries)",
        **guarded,
    )
    async def list_entries(body: ListIn) -> Response:
        filters = _retrieve_filters(body)
        namespace = filters.pop("namespace", None)
        try:
            entries = await memory.list_entries(
                namespace, limit=body.limit, offset=body.offset, **filters
            )
        except (InvalidQueryError, TypeError) as exc:
            raise _query_refused(exc) from None
        return JSONResponse({"entries": [entry_to_json(e) for e in entries]})

    @app.post(
        "/v1/namespaces",
        response_model=NamespacesOut,
        responses=_PROBLEMS,
        summary="Namespaces holding entries (Memory.list_namespaces)",
        **guarded,
    )
    async def list_namespaces(body: NamespacesIn) -> Response:
        try:
            found = await memory.list_namespaces(**body.model_dump(exclude_unset=True))
        except (InvalidQueryError, TypeError) as exc:
            raise _query_refused(exc) from None
        return JSONResponse({"namespaces": [list(ns) for ns in found]})

    @app.get(
        "/v1/removals",
        response_model=RemovalsOut,
        responses={**_PROBLEMS, **_NOT_FOUND},
        summary="Removal reports numbered above `after` (for exact accounting by clients)",
        **guarded,
    )
    async def removal_reports(
        after: Annotated[int, Query(ge=0, le=MAX_JSON_INT)] = 0,
        limit: Annotated[int, Query(ge=1, le=100_000)] = 10_000,
    ) -> Response:
        if removals is None:
            raise _Refused(404, "this server keeps no removal reports", "after")
        reports = [list(r) for r in removals.since(after, limit)]
        return JSONResponse({"total": removals.total, "first": removals.first, "removals": reports})

    @app.get(
        "/v1/statistics",
        response_model=StatisticsOut,
        responses=_PROBLEMS,
        summary="The memory's counters (Memory.statistics)",
        **guarded,
    )
    async def statistics() -> Response:
        _refuse_if_broken(memory)
        return JSONResponse(attrs.asdict(memory.statistics()))

    @app.get(
        "/v1/len",
        response_model=LenOut,
        responses=_PROBLEMS,
        summary="Entries in the latest snapshot (len(memory))",
        **guarded,
    )
    async def length() -> Response:
        _refuse_if_broken(memory)
        return JSONResponse({"entries": len(memory)})

    @app.get(
        "/v1/export",
        responses={
            **_PROBLEMS,
            200: {
                "description": "One entry per line (JSON Lines), from one snapshot",
                "content": {_NDJSON: {"schema": {"type": "string"}}},
            },
        },
        response_class=StreamingResponse,
        summary="Every entry of one snapshot, streamed as JSON Lines",
        **guarded,
    )
    async def export() -> Response:
        snapshot = memory.snapshot()  # O(1); the stream reads this version only

        async def lines() -> AsyncIterator[bytes]:
            # memory.scan: the entries built as they are encoded, slices of ~0.1 ms
            # with the writers' fair share between them (iterating the snapshot built
            # every entry in one step: 16 exports at once held stores for seconds).
            chunk: list[str] = []
            async with contextlib.aclosing(memory.scan(snapshot)) as entries:
                async for entry in entries:
                    chunk.append(json.dumps(entry_to_json(entry), ensure_ascii=False))
                    if len(chunk) == _EXPORT_CHUNK:
                        yield ("\n".join(chunk) + "\n").encode("utf-8")
                        chunk = []
            if chunk:
                yield ("\n".join(chunk) + "\n").encode("utf-8")

        return _StreamedResponse(
            lines(),
            media_type=_NDJSON,
            headers={"X-Actormem-Entries": str(len(snapshot))},
        )

    # ------------------------------------------------------------ operations

    @app.get(
        "/healthz",
        summary="The process is up and its memory not broken",
        responses={200: {"description": "OK"}, 503: _PROBLEMS[503]},
    )
    async def healthz() -> Response:
        _refuse_if_broken(memory)  # a broken memory stays broken: restart the server
        return JSONResponse({"status": "ok"})

    @app.get(
        "/readyz",
        summary="The memory is open and its owner answers",
        responses={200: {"description": "Ready"}, 503: _PROBLEMS[503]},
    )
    async def readyz() -> Response:
        with trio.move_on_after(_READY_TIMEOUT):
            await memory.store_many([])  # a round trip through the owner; changes nothing
            return JSONResponse({"status": "ready", "entries": len(memory)})
        raise _Refused(503, "the memory's owner did not answer in time")

    @app.get(
        "/metrics",
        summary="Prometheus metrics (text format)",
        responses={
            200: {"content": {"text/plain": {"schema": {"type": "string"}}}},
            401: _PROBLEMS[401],
        },
        response_class=Response,
        **guarded,
    )
    async def metrics() -> Response:
        return Response(
            generate_latest(registry), media_type="text/plain; version=0.0.4; charset=utf-8"
        )

    # ------------------------------------------------------------ errors

    @app.exception_handler(_Refused)
    async def refused(request: Request, exc: _Refused) -> Response:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return problem(exc.status, exc.detail, exc.field, headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = exc.errors()
        first = errors[0] if errors else {"loc": ("body",), "msg": "invalid request"}
        field = _field_of(first.get("loc", ("body",)))
        extra = len(errors) - 1  # said as errors: "(and 1 more)" read as one more value
        more = f" (and {extra} more error{'s' if extra > 1 else ''})" if extra > 0 else ""
        sent = request.headers.get("content-type")
        if field == "body" and not _is_json_type(sent):
            # FastAPI parses only a body said to be JSON (strict content type): any other
            # (curl -d's form type, none) reached the model as bytes, and pydantic's
            # "valid dictionary" message blamed a body that may well be a JSON object.
            said = f"Content-Type: {sent}" if sent else "no Content-Type"
            return problem(
                422, f"body: send it as JSON with Content-Type: application/json ({said})", field
            )
        return problem(422, f"{field}: {first.get('msg', 'invalid')}{more}", field)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        status = exc.status_code
        detail = exc.detail if isinstance(exc.detail, str) else HTTPStatus(status).phrase
        headers = getattr(exc, "headers", None)
        if status == 400 or isinstance(exc, _NotUtf8):  # 400: FastAPI's "error parsing
            # the body": not JSON, or not UTF-8
            if isinstance(exc.__cause__, RecursionError):  # JSON past the parser's depth
                return problem(422, _TOO_DEEP, "body")
            return problem(422, _NOT_UTF8, "body")
        if isinstance(exc, _BodyTooLarge):  # a chunked body (no Content-Length) past it
            return problem(413, exc.detail, "body")
        if status == 405:
            headers = {"Allow": ", ".join(_allowed_methods(app, request.scope))}
        return problem(status, detail, headers=headers)

    @app.exception_handler(InvalidEntryError)
    @app.exception_handler(InvalidQueryError)
    async def invalid_input(request: Request, exc: ActorMemError) -> Response:
        return problem(422, str(exc))

    @app.exception_handler(EmbeddingError)
    async def embedding_failed(request: Request, exc: EmbeddingError) -> Response:
        # A store's error already says "nothing stored: ..." (the engine's); any other
        # (a retrieve's, on its query) stored nothing to begin with.
        detail = str(exc)
        stored = "nothing stored: "
        if detail.startswith(stored):
            return problem(503, f"the embedder failed, nothing was stored: {detail[len(stored) :]}")
        return problem(503, f"the embedder failed on the query: {detail}")

    @app.exception_handler(StorageError)
    @app.exception_handler(trio.ClosedResourceError)
    @app.exception_handler(trio.BrokenResourceError)
    async def unavailable(request: Request, exc: Exception) -> Response:
        return problem(503, f"the memory is closing or broken: {exc}")

    @app.exception_handler(Exception)
    async def bug(request: Request, exc: Exception) -> Response:
        # Starlette's ServerErrorMiddleware answers with this, then raises ``exc`` again
        # for hypercorn to log (its traceback on stderr): a plain-text 500 before.
        return problem(500, f"an error in actormem, logged by the server: {type(exc).__name__}")

    # The last added runs first: the header limit, the unread body's close, timing, then
    # the token, then the body limit.
    app.add_middleware(_BodyLimit, max_body=max_body)
    app.add_middleware(_Auth, expected=expected)
    app.add_middleware(_Timing, histogram=latency)
    app.add_middleware(_CloseUnread)
    app.add_middleware(_HeaderLimit)
    app.state.memory = memory
    return app
