"""`actormem serve` and its clients, against real server processes on loopback ports.

The clients run under asyncio (``asyncio.run`` inside a sync test: the suite runs in
pytest-trio's trio mode) and under trio (async tests), and synchronously.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import httpx
import pytest
import trio

from actormem import (
    MAX_QUERY_CHARS,
    ConsolidationStats,
    InvalidEntryError,
    InvalidQueryError,
    MemoryCategory,
    MemoryEntry,
    MemoryStatistics,
    RemoteError,
    ScoredEntry,
    TransportError,
    open_memory,
)
from actormem.cli import main
from actormem.client import AsyncClient, Client
from actormem.server import create_app

from .serverproc import ServerProcess

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and select")

TOKEN = "t0k3n-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PROBLEM_KEYS = {"type", "title", "status", "detail"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """An in-memory server with a token, shared by the tests that use unique ids."""
    with ServerProcess("--in-memory", token=TOKEN, tmp=tmp_path_factory.mktemp("tok")) as srv:
        yield srv
        status, out, err = srv.stop()
        assert status == 0, err
        assert "committed and closed" in out


@pytest.fixture(scope="module")
def small() -> Iterator[ServerProcess]:
    """A server without a token and with a 4 KiB body limit."""
    with ServerProcess("--max-body", "4096") as srv:
        yield srv
        srv.signal(signal.SIGCONT)  # in case a test left it stopped
        assert srv.stop()[0] == 0


def fact(text: str, *tags: str, ns: str = "t") -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text).with_tags(*tags).with_namespace(ns)


# ------------------------------------------------------------------ every method, 3 ways


def exercise_sync(client: Client) -> None:
    ns = f"sync-{uuid.uuid4()}"
    a, b = fact("blue cluster deploys", "infra", ns=ns), fact("lunch at noon", ns=ns)
    before = client.count()
    client.store(a)
    client.store_many([b, fact("Blue  cluster deploys", ns=ns)])
    assert client.count() == len(client) == before + 3
    assert client.get(a.id) == a
    assert client.get(uuid.uuid4()) is None
    hits = client.retrieve_scored("blue cluster", 3, namespace=[ns], tags=["infra"])
    assert [type(h) for h in hits] == [ScoredEntry]
    assert hits[0].entry.id == a.id
    got = client.retrieve("lunch noon", 1, namespace=(ns,), category=MemoryCategory.FACT)
    assert [e.id for e in got] == [b.id]
    assert client.retrieve("lunch", 5, namespace=[ns], category=[MemoryCategory.INSIGHT]) == []
    assert client.retrieve("lunch", 0) == []
    stats = client.consolidate()
    assert isinstance(stats, ConsolidationStats)
    assert stats.merged >= 1
    assert client.delete(b.id) is True
    assert client.delete(b.id) is False
    statistics = client.statistics()
    assert isinstance(statistics, MemoryStatistics)
    assert statistics.entries == client.count()
    exported = {e.id: e for e in client.export()}
    assert exported[a.id].memory == a.memory
    assert b.id not in exported
    # Keys, JSON payloads, time to live, listings (Memory's fields and methods, #16).
    keyed = attrs.evolve(
        fact("profile of ada", ns=ns), key="ada", value={"kind": "user", "age": 36}, ttl=3600.0
    )
    client.store(keyed)
    got_keyed = client.get(keyed.id)
    assert got_keyed is not None
    assert got_keyed.value == keyed.value
    assert got_keyed.key == "ada"
    assert got_keyed.expires_at is not None
    assert [e.id for e in client.retrieve("ada", 5, namespace=[ns], where={"kind": "user"})] == [
        keyed.id
    ]
    assert client.retrieve("ada", 5, namespace=[ns], where={"kind": "robot"}) == []
    listed = client.list_entries([ns], limit=10)
    assert listed[0].id == keyed.id  # newest first
    assert a.id in {e.id for e in listed}
    assert [e.id for e in client.list_entries([ns], where={"age": 36})] == [keyed.id]
    assert [e.id for e in client.list_entries([ns], limit=1, offset=1)] == [listed[1].id]
    assert (ns,) in client.list_namespaces(prefix=[ns])
    by_key = client.get_by_key([ns], "ada")
    assert by_key is not None
    assert by_key.id == keyed.id
    # A second store under the same key keeps the first one's id (the route answers it).
    again = attrs.evolve(fact("ada again", ns=ns), key="ada")
    with httpx.Client(base_url=client.url, headers=AUTH) as http:
        from actormem._storage.jsonl import entry_to_json

        answer = http.post("/v1/entries", json=entry_to_json(again)).json()
    assert answer["id"] == str(keyed.id)
    assert answer["seq"] is None  # not replicated
    assert client.get_by_key([ns], "ada").memory == "ada again"  # type: ignore[union-attr]
    assert client.delete_key([ns], "ada") is True
    assert client.delete_key([ns], "ada") is False
    assert client.get_by_key([ns], "ada") is None
    client.store(attrs.evolve(fact("short-lived", ns=ns), ttl=0.001))
    time.sleep(0.01)
    assert client.sweep_expired() >= 0  # expired entries go now (or went already)
    assert [e.memory for e in client.list_entries([ns])] == ["blue cluster deploys"]
    with pytest.raises(InvalidQueryError):
        client.list_entries([ns], limit=-1)


async def exercise_async(client: AsyncClient) -> None:
    ns = f"async-{uuid.uuid4()}"
    a, b = fact("blue cluster deploys", "infra", ns=ns), fact("lunch at noon", ns=ns)
    before = await client.count()
    await client.store(a)
    await client.store_many([b, fact("Blue  cluster deploys", ns=ns)])
    assert await client.count() == before + 3
    assert await client.get(a.id) == a
    assert await client.get(uuid.uuid4()) is None
    hits = await client.retrieve_scored("blue cluster", 3, namespace=[ns], tags=["infra"])
    assert hits[0].entry.id == a.id
    assert isinstance(hits[0].score, float)
    got = await client.retrieve("lunch noon", 1, namespace=[ns])
    assert [e.id for e in got] == [b.id]
    assert (await client.consolidate()).merged >= 1
    assert await client.delete(b.id) is True
    assert await client.delete(b.id) is False
    assert (await client.statistics()).entries == await client.count()
    exported = [e async for e in client.export()]
    assert a.id in {e.id for e in exported}
    with pytest.raises(InvalidEntryError, match="access_count"):
        await client.store(MemoryEntry(category=MemoryCategory.FACT, memory="x",
                                       access_count=2**53))
    with pytest.raises(InvalidQueryError, match="limit"):
        await client.retrieve("x", -1)


def test_sync_client_every_method(server: ServerProcess) -> None:
    with Client(server.url, token=TOKEN) as client:
        exercise_sync(client)


def test_async_client_under_asyncio(server: ServerProcess) -> None:
    async def main() -> None:
        async with AsyncClient(server.url, token=TOKEN) as client:
            await exercise_async(client)
            # Many asyncio tasks share one client (one connection pool).
            entries = [fact(f"gathered {i}") for i in range(50)]
            await asyncio.gather(*(client.store(e) for e in entries))
            got = await asyncio.gather(*(client.get(e.id) for e in entries))
            assert got == entries

    asyncio.run(main())


async def test_async_client_under_trio(server: ServerProcess) -> None:
    async with AsyncClient(server.url, token=TOKEN) as client:
        await exercise_async(client)
        entries = [fact(f"nursery {i}") for i in range(50)]
        async with trio.open_nursery() as nursery:
            for e in entries:
                nursery.start_soon(client.store, e)
        assert [await client.get(e.id) for e in entries] == entries


# ------------------------------------------------------------------ errors


_ID = "0f1e2d3c-4b5a-4968-8776-655443322110"


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "field"),
    [
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "tags": [""]}, 422, "tags[0]"),
        ("POST", "/v1/entries", {"category": "nope", "memory": "x"}, 422, "category"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "typo": 1}, 422, "typo"),
        ("POST", "/v1/entries", {"category": "fact"}, 422, "memory"),
        ("POST", "/v1/entries", {"category": "fact", "memory": 5}, 422, "memory"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "relevance": 2}, 422,
         "relevance"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "access_count": "1"}, 422,
         "access_count"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "validated": 1}, 422,
         "validated"),
        ("POST", "/v1/entries",
         {"category": "fact", "memory": "x", "created_at": "2026-01-01T00:00:00"}, 422,
         "created_at"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "created_at": 0}, 422,
         "created_at"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "id": "nope"}, 422, "id"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "ttl": 1e300}, 422, "ttl"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "key": ""}, 422, "key"),
        ("POST", "/v1/entries", {"category": "fact", "memory": "x", "value": [1]}, 422, "value"),
        # 1e400 parses as infinity: stored it would have come back as null (a reviewer).
        ("POST", "/v1/entries", b'{"category": "fact", "memory": "x", "value": {"a": 1e400}}',
         422, "value"),
        ("POST", "/v1/retrieve", b'{"query": "x", "where": {"a": {"$eq": -1e400}}}', 422,
         "where"),
        # Valid times that fall outside years 1-9999 once in UTC were a 500 (a reviewer).
        ("POST", "/v1/entries",
         {"category": "fact", "memory": "x", "created_at": "0001-01-01T00:00:00+05:00"}, 422,
         None),
        ("POST", "/v1/batch", {"entries": [{"category": "fact", "memory": "b1"},
                                           {"category": "fact", "memory": "b2",
                                            "created_at": "9999-12-31T23:59:59-05:00"}]},
         422, None),
        ("POST", "/v1/retrieve", {"query": "x", "where": {"a b": 1}}, 422, "where"),
        ("POST", "/v1/list", {"where": {"a": {"$in": [1]}}}, 422, "where"),
        ("POST", "/v1/list", {"offset": -1}, 422, "offset"),
        ("POST", "/v1/namespaces", {"max_depth": 0}, 422, "max_depth"),
        ("POST", "/v1/entries", b'{"category": "fact", "memory": "\\ud800"}', 422, None),
        ("POST", "/v1/entries", b"not json", 422, "body"),
        ("POST", "/v1/entries", b"\xff\xfe", 422, "body"),
        ("POST", "/v1/entries", [], 422, "body"),
        ("POST", "/v1/batch", {"entries": [{"category": "fact", "memory": "ok"},
                                           {"category": "fact", "memory": "x", "tags": [1]}]},
         422, "entries[1].tags[0]"),
        ("POST", "/v1/batch", {}, 422, "entries"),
        ("POST", "/v1/retrieve", {"query": "x", "limit": -1}, 422, "limit"),
        ("POST", "/v1/retrieve", {"query": "x", "limit": 10_001}, 422, "limit"),
        ("POST", "/v1/retrieve", {"query": "x", "limit": True}, 422, "limit"),
        ("POST", "/v1/retrieve_scored", {"query": "x", "tags": [""]}, 422, "tags[0]"),
        ("POST", "/v1/retrieve_scored", {"query": "x", "category": []}, 422, "category"),
        ("POST", "/v1/retrieve_scored", {"query": "x", "namespace": "t"}, 422, "namespace"),
        ("POST", "/v1/retrieve_scored", {"query": "x" * (MAX_QUERY_CHARS + 1)}, 422, "query"),
        ("POST", "/v1/retrieve", {"limit": 3}, 422, "query"),
        ("GET", "/v1/entries/not-a-uuid", None, 422, "entry_id"),
        ("GET", f"/v1/entries/{_ID}", None, 404, "entry_id"),
        ("DELETE", f"/v1/entries/{_ID}", None, 404, "entry_id"),
        ("GET", "/v1/nothing-here", None, 404, None),
        ("PUT", "/v1/entries", {"category": "fact", "memory": "x"}, 405, None),
    ],
)
def test_bad_requests_get_problem_documents(
    server: ServerProcess, method: str, path: str, body: Any, status: int, field: str | None
) -> None:
    content = body if isinstance(body, bytes) else None if body is None else json.dumps(body)
    headers = {**AUTH, "Content-Type": "application/json"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        before = http.get("/v1/statistics").json()
        response = http.request(method, path, content=content)
        after = http.get("/v1/statistics").json()
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert PROBLEM_KEYS <= set(problem)
    assert problem["status"] == status
    assert problem["title"]
    assert problem["detail"]
    if field is not None:
        assert problem["field"] == field
        assert field in problem["detail"]
    if status == 405:
        assert set(response.headers["allow"].split(", ")) == {"POST"}
    # Nothing changed.
    assert (before["stores"], before["deletes"]) == (after["stores"], after["deletes"])


def test_client_raises_the_memory_errors(server: ServerProcess) -> None:
    with Client(server.url, token=TOKEN) as client:
        too_big = fact("big").with_relevance(1.0)
        with pytest.raises(InvalidQueryError, match="limit"):
            client.retrieve("x", 10_001)
        with pytest.raises(InvalidQueryError, match="tags"):
            client.retrieve("x", tags=[""])
        with pytest.raises(TypeError, match="MemoryEntry"):
            client.store("not an entry")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="not one MemoryEntry"):
            client.store_many(too_big)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="UUID"):
            client.get("nope")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="one str"):
            client.retrieve("x", tags="infra")
        huge = MemoryEntry(category=MemoryCategory.FACT, memory="x", access_count=2**53)
        with pytest.raises(InvalidEntryError, match="access_count"):
            client.store(huge)
        assert client.get(huge.id) is None


def test_auth(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.url) as http:
        for path in ("/healthz", "/readyz", "/openapi.json"):
            assert http.get(path).status_code == 200, path
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
            for method, path in (("GET", "/v1/len"), ("GET", "/metrics"),
                                 ("POST", "/v1/consolidate")):
                response = http.request(method, path, headers=headers)
                assert response.status_code == 401, (headers, path)
                assert response.headers["www-authenticate"] == "Bearer"
                assert response.json()["field"] == "Authorization"
        assert http.get("/v1/len", headers=AUTH).status_code == 200
        # Without the token, routes and methods are not revealed: 401 before 404 and 405.
        for method, path in (("GET", "/nowhere"), ("PUT", "/v1/entries"), ("ZZ", "/v1/len")):
            response = http.request(method, path)
            assert response.status_code == 401, (method, path)
            assert response.json()["field"] == "Authorization"
        assert http.get("/nowhere", headers=AUTH).status_code == 404
    with Client(server.url, token="wrong") as client, pytest.raises(RemoteError) as info:
        client.count()
    assert info.value.status == 401
    assert server.url in str(info.value)


def test_health_metrics_and_openapi(server: ServerProcess) -> None:
    with Client(server.url, token=TOKEN) as client:
        client.store(fact("counted"))
        entries = client.count()
    with httpx.Client(base_url=server.url, headers=AUTH) as http:
        assert http.get("/healthz").json() == {"status": "ok"}
        ready = http.get("/readyz").json()
        assert ready["status"] == "ready"
        assert ready["entries"] == entries
        metrics = http.get("/metrics")
        assert metrics.headers["content-type"].startswith("text/plain")
        lines = metrics.text.splitlines()
        assert f"actormem_entries {float(entries)}" in lines
        assert any(
            line.startswith("actormem_http_request_duration_seconds_count{")
            and 'route="/v1/entries"' in line and 'method="POST"' in line
            for line in lines
        )
        # Made-up methods share one label value: they cannot grow /metrics without bound.
        for i in range(3):
            http.request(f"ZZ{i}", "/v1/len")
        lines = http.get("/metrics").text.splitlines()
        assert not any('method="ZZ' in line for line in lines)
        assert any('method="OTHER"' in line for line in lines)
        schema = http.get("/openapi.json").json()
    assert schema["openapi"].startswith("3.1")
    paths = set(schema["paths"])
    assert {"/v1/entries", "/v1/batch", "/v1/entries/{entry_id}", "/v1/retrieve",
            "/v1/retrieve_scored", "/v1/consolidate", "/v1/statistics", "/v1/len",
            "/v1/export", "/healthz", "/readyz", "/metrics"} <= paths


def test_body_limit(small: ServerProcess) -> None:
    with httpx.Client(base_url=small.url) as http:
        big = json.dumps({"category": "fact", "memory": "x" * 5000})
        response = http.post("/v1/entries", content=big,
                             headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert response.json()["status"] == 413

        def chunks() -> Iterator[bytes]:  # no Content-Length: chunked transfer
            yield b'{"category": "fact", "memory": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}'

        response = http.post("/v1/entries", content=chunks(),
                             headers={"Content-Type": "application/json"})
        assert response.status_code == 413
        assert http.get("/v1/len").json() == {"entries": 0}
    with Client(small.url) as client:
        with pytest.raises(RemoteError) as info:
            client.store_many([fact("z" * 100) for _ in range(100)])
        assert info.value.status == 413
        client.store_many([fact("fits")])
        assert client.count() == 1


async def test_503_when_the_memory_is_closed() -> None:
    async with open_memory() as memory:
        app = create_app(memory)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
            assert (await http.get("/readyz")).status_code == 200
            await memory.aclose()
            body = {"category": "fact", "memory": "late"}
            for response in (
                await http.post("/v1/entries", json=body),
                await http.get("/readyz"),
                await http.post("/v1/retrieve", json={"query": "late"}),
            ):
                assert response.status_code == 503
                assert response.headers["content-type"] == "application/problem+json"
                assert "closing or broken" in response.json()["detail"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_client_gives_up_clearly(small: ServerProcess) -> None:
    """A server that stops answering: a TransportError naming the URL, no hang."""
    small.signal(signal.SIGSTOP)
    try:
        with Client(small.url, timeout=0.5) as client, pytest.raises(TransportError) as info:
            client.count()
        assert small.url in str(info.value)
        assert "timeout" in str(info.value)

        async def under(lib: str) -> None:
            async with AsyncClient(small.url, timeout=0.5) as client:
                with pytest.raises(TransportError, match="timeout"):
                    await client.store(fact("never"))

        asyncio.run(under("asyncio"))
        trio.run(under, "trio")
    finally:
        small.signal(signal.SIGCONT)
    url = f"http://127.0.0.1:{_free_port()}"
    with Client(url, retries=2) as client, pytest.raises(TransportError) as refused:
        client.get(uuid.uuid4())
    assert url in str(refused.value)
    assert "3 attempts" in str(refused.value)
    with Client(small.url, timeout=5) as client:  # it answers again
        assert client.count() >= 0


def test_serve_refuses_bad_options(
    tmp_path: Path, small: ServerProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    def serve(*args: str) -> tuple[int, str]:
        status = main(["serve", *args])
        return status, capsys.readouterr().err

    status, err = serve("--host", "0.0.0.0", "--port", "0")
    assert status == 2
    assert "without --token-file" in err
    empty = tmp_path / "empty"
    empty.write_text("\n")
    status, err = serve("--token-file", str(empty), "--port", "0")
    assert status == 2
    assert "empty" in err
    status, err = serve("--token-file", str(tmp_path / "missing"))
    assert status == 2
    assert "missing" in err
    port = small.url.rsplit(":", 1)[1]
    status, err = serve("--port", port)
    assert status == 2
    assert "cannot listen" in err
    assert serve("--port", "70000")[0] == 2
    assert serve("--path", str(tmp_path / "m.db"), "--in-memory")[0] == 2
    assert not (tmp_path / "m.db").exists()


# ------------------------------------------------------------------ stopping under load


class _Load:
    """Client threads storing unique entries until told to stop; ``acked`` holds every
    id the server acknowledged."""

    def __init__(self, url: str, threads: int = 4) -> None:
        self.url = url
        self.acked: set[uuid.UUID] = set()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.threads = [threading.Thread(target=self._run, args=(k,)) for k in range(threads)]
        for t in self.threads:
            t.start()

    def _run(self, k: int) -> None:
        with Client(self.url, timeout=10, retries=0) as client:
            i = 0
            while not self.stop.is_set():
                batch = [fact(f"load {k} {i} {j}") for j in range(1 + i % 5)]
                try:
                    if len(batch) == 1:
                        client.store(batch[0])
                    else:
                        client.store_many(batch)
                except (TransportError, RemoteError) as exc:
                    self.errors.append(exc)
                    return  # the server is going away
                with self.lock:
                    self.acked.update(e.id for e in batch)
                i += 1

    def wait_for(self, count: int) -> None:
        while len(self.acked) < count:
            assert any(t.is_alive() for t in self.threads), self.errors
            self.stop.wait(0.01)

    def join(self) -> set[uuid.UUID]:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=30)
        return self.acked


async def _stored_ids(db: Path) -> set[uuid.UUID]:
    async with open_memory(path=db) as memory:
        return {e.id for e in memory.snapshot()}


def test_sigterm_during_load_exits_0_and_keeps_every_ack(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    with ServerProcess("--path", str(db)) as srv:
        load = _Load(srv.url)
        load.wait_for(300)
        srv.signal(signal.SIGTERM)
        status, out, err = srv.stop()
        acked = load.join()
    assert status == 0, err
    assert "committed and closed" in out
    stored = trio.run(_stored_ids, db)
    assert acked <= stored, f"{len(acked - stored)} acknowledged stores lost"


def test_kill_9_of_a_durable_server_keeps_every_ack(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    with ServerProcess("--path", str(db)) as srv:
        load = _Load(srv.url)
        load.wait_for(300)
        srv.signal(signal.SIGKILL)
        srv.proc.wait(timeout=10)
        acked = load.join()
    assert srv.proc.returncode == -signal.SIGKILL
    with ServerProcess("--path", str(db)) as again, Client(again.url) as client:
        stored = {e.id for e in client.export()}
        assert again.stop()[0] == 0
    assert acked <= stored, f"{len(acked - stored)} acknowledged stores lost"
    assert len(acked) >= 300


# ------------------------------------------------------------------ schemathesis


def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    """Property-based requests from the live /openapi.json, every check, bounded."""
    with ServerProcess("--in-memory", token=TOKEN, tmp=tmp_path) as srv:
        run = subprocess.run(
            [
                sys.executable, "-m", "schemathesis.cli", "run", f"{srv.url}/openapi.json",
                "--header", f"Authorization: Bearer {TOKEN}",
                "--checks", "all",
                # "Created resource not found" is right here: an entry stored with a tiny
                # ttl or a past expires_at is gone by the next request, and one stored
                # with the (namespace, key) of a live entry takes that entry's id.
                "--exclude-checks", "ensure_resource_availability",
                "--max-examples", "8",
                "--seed", "15",
                "--workers", "2",
                "--phases", "coverage,fuzzing,stateful",
                "--suppress-health-check", "all",
            ],
            capture_output=True, text=True, timeout=240,
            cwd=tmp_path,  # its .schemathesis/ cache stays out of the repository
        )
        status = srv.stop()[0]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    verdict = run.stdout.strip().splitlines()[-1]  # "No issues found" or "N warnings"
    assert not re.search(r"\d+ (failure|error)", verdict), verdict
    assert re.search(r"\d+ generated, \d+ passed", run.stdout)
    assert status == 0


# ------------------------------------------------------------------ CLI


def test_cli_reads_a_server_and_a_live_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "live.db"
    entries = [fact(f"deploy number {i}") for i in range(20)]
    with ServerProcess("--path", str(db), token=TOKEN, tmp=tmp_path) as srv:
        with Client(srv.url, token=TOKEN) as client:
            client.store_many(entries)
        token_file = tmp_path / "cli-token"
        token_file.write_text(TOKEN)
        remote = ["--server", srv.url, "--token-file", str(token_file)]

        def run(*argv: str) -> tuple[int, str, str]:
            status = main(list(argv))
            out, err = capsys.readouterr()
            return status, out, err

        # The file is held by the server: a live read, said so, with every committed entry.
        for argv in (["query", str(db), "deploy number 3", "-k", "1"], ["stats", str(db)]):
            status, out, _ = run(*argv)
            assert status == 0
            assert out.startswith("live read: ")
        assert "deploy number 3" in run("query", str(db), "deploy number 3", "-k", "1")[1]
        status, out, err = run("export", str(db))
        assert status == 0
        assert "live read" in err
        assert [json.loads(line)["id"] for line in out.splitlines()] == [
            str(e.id) for e in entries
        ]
        # The same through the server.
        status, out, _ = run("query", *remote, "deploy number 3", "-k", "1")
        assert status == 0
        assert "deploy number 3" in out
        status, out, _ = run("stats", *remote)
        assert status == 0
        assert "entries: 20" in out
        assert f"server: {srv.url}" in out
        status, out, _ = run("export", *remote)
        assert len(out.splitlines()) == 20
        # Errors: no token, both or neither of PATH and --server.
        status, _, err = run("export", "--server", srv.url)
        assert status == 2
        assert "401" in err
        assert run("export", str(db), *remote)[0] == 2
        assert run("export")[0] == 2
        assert srv.stop()[0] == 0
    # Stopped: an ordinary read again, no note.
    status, out, _ = run("stats", str(db))
    assert status == 0
    assert not out.startswith("live read")
    assert "entries: 20" in out


def test_swarm_in_processes_accounts_for_every_store(tmp_path: Path) -> None:
    out = tmp_path / "swarm.json"
    status = main([
        "swarm", "--processes", "2", "--agents", "4", "--episodes", "12",
        "--capacity", "40", "--json", str(out), "--interval", "60",
    ])
    assert status == 0
    report = json.loads(out.read_text())
    accounting = report["accounting"]
    assert accounting["ok"]
    assert accounting["lost"] == 0
    stores = accounting["stores"]
    assert stores["tracked"] == report["throughput"]["steps"] > 0
    assert stores["evicted"] > 0  # the capacity forced evictions across processes
    assert report["throughput"]["episodes"] == 12
    assert report["options"]["processes"] == 2
    assert report["throughput"]["cpu_s"] > 0  # this process's and the agent processes'


@pytest.mark.parametrize("body", [b"hello", b"{}", b"[]", b'{"entries": "x"}'])
def test_clients_refuse_a_2xx_that_is_not_an_actormem_answer(body: bytes) -> None:
    """Another program on the port answering 200 (a reviewer's fake server): the client
    says so as RemoteError, never a raw decoding error or a store reported done."""
    import http.server
    import threading

    class Fake(http.server.BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake) as fake:
        thread = threading.Thread(target=fake.serve_forever, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{fake.server_address[1]}"
        try:
            with Client(url, retries=0) as client:
                for call in (
                    lambda: client.store(fact("x")),
                    lambda: client.store_many([fact("y")]),
                    lambda: client.retrieve("x", 1),
                    lambda: client.get(uuid.uuid4()),
                    lambda: client.count(),
                    lambda: client.statistics(),
                ):
                    with pytest.raises(RemoteError, match="not an actormem answer"):
                        call()
        finally:
            fake.shutdown()


def test_batch_answers_the_ids_stored_under_a_shared_key(server: ServerProcess) -> None:
    """Two entries of one batch with the same (namespace, key): the second replaces the
    first and keeps its id, and the answer says so (it listed an id never stored)."""
    first, second = "44444444-4444-4444-8444-444444444444", "55555555-5555-4555-8555-555555555555"
    body = {"entries": [
        {"id": first, "category": "fact", "memory": "a", "namespace": ["q"], "key": "same"},
        {"id": second, "category": "fact", "memory": "b", "namespace": ["q"], "key": "same"},
    ]}  # fmt: skip
    with httpx.Client(base_url=server.url, headers=AUTH) as http:
        answer = http.post("/v1/batch", json=body).json()
        assert answer == {"stored": 2, "ids": [first, first]}
        assert http.get(f"/v1/entries/{first}").json()["memory"] == "b"
        assert http.get(f"/v1/entries/{second}").status_code == 404


def test_swarm_against_a_running_server_accounts_for_every_store(tmp_path: Path) -> None:
    """``swarm --server URL``: agent processes against an external server whose capacity
    forces evictions, twice (the second run starts on a memory that holds entries); the
    server's removal reports (GET /v1/removals) keep the per-id accounting exact."""
    from actormem.cli import main

    with ServerProcess("--in-memory", "--capacity", "60", token=TOKEN,
                       tmp=tmp_path) as srv:  # fmt: skip
        token_file = tmp_path / "token"
        token_file.write_text(TOKEN + "\n")
        for _ in range(2):
            argv = ["swarm", "--server", srv.url, "--token-file", str(token_file),
                    "--processes", "2", "--episodes", "30", "--agents", "8"]  # fmt: skip
            assert main(argv) == 0
        with Client(srv.url, token=TOKEN) as client:
            total, first, reports = client.removals(after=0, limit=5)
            assert total > 0  # capacity 60 was reached: evictions were reported
            assert first == 1
            assert [n for n, _, _ in reports] == list(range(1, min(total, 5) + 1))
            assert {cause for _, _, cause in reports} <= {"evicted", "merged", "pruned"}


def test_swarm_server_option_refuses_local_memory_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from actormem.cli import main

    assert main(["swarm", "--server", "http://127.0.0.1:9", "--in-memory"]) == 2
    assert "--server uses the server's memory" in capsys.readouterr().err


def test_a_request_with_several_errors_names_the_first_and_counts_the_rest(
    server: ServerProcess,
) -> None:
    body = {"category": "fact", "memory": "x", "relevance": "high", "validated": "maybe"}
    with httpx.Client(base_url=server.url, headers=AUTH) as http:
        response = http.post("/v1/entries", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert detail.startswith(response.json()["field"] + ":")
    assert detail.endswith(" more error)") or detail.endswith(" more errors)"), detail
