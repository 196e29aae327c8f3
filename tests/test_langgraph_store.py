"""actormem.integrations.langgraph.ActormemStore in this repository's suite: the
LangGraph calls an agent makes, on a file, with capacity and TTL. (LangGraph's own store
tests run against it in a separate run: stress/langgraph_store_tests.py.)"""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, InvalidNamespaceError, PutOp  # noqa: E402

from actormem.integrations.langgraph import ActormemStore  # noqa: E402


def test_put_get_search_delete_and_reopen(tmp_path: Path) -> None:
    db = str(tmp_path / "lg.db")
    with ActormemStore(path=db) as store:
        store.put(("users", "u1"), "pref", {"text": "likes the blue cluster", "n": 1})
        store.put(("users", "u1"), "other", {"text": "meetings on tuesday", "n": 2})
        store.put(("users", "u2"), "pref", {"text": "green", "n": 3})
        item = store.get(("users", "u1"), "pref")
        assert item is not None
        assert item.value == {"text": "likes the blue cluster", "n": 1}
        hits = store.search(("users",), query="blue cluster", limit=1)
        assert [h.key for h in hits] == ["pref"]
        assert hits[0].namespace == ("users", "u1")
        assert hits[0].score is not None
        assert [h.key for h in store.search(("users", "u1"), filter={"n": {"$gt": 1}})] == ["other"]
        assert store.list_namespaces(prefix=("users",)) == [("users", "u1"), ("users", "u2")]
        store.delete(("users", "u2"), "pref")
        with pytest.raises(InvalidNamespaceError):
            store.batch([GetOp(("a.b",), "k")])
    with ActormemStore(path=db) as store:  # everything came back from the file
        assert store.list_namespaces() == [("users", "u1")]
        again = store.get(("users", "u1"), "pref")
        assert again is not None
        assert again.created_at == item.created_at


def test_capacity_evicts_and_ttl_config_is_honoured() -> None:
    with ActormemStore(capacity=2, ttl={"default_ttl": 10.0}) as store:
        for i in range(3):
            store.put(("ns",), f"k{i}", {"i": i})
        assert len(store.search(("ns",), limit=10)) == 2
        stats = store.memory.statistics()
        assert stats.evictions == 1
        entry = store.memory.sync.get_by_key(("ns",), "k2")
        assert entry is not None
        assert entry.ttl == 600.0  # ten minutes
        assert entry.expires_at is not None


def test_async_methods_under_asyncio() -> None:
    async def main() -> list[object]:
        with ActormemStore() as store:
            await store.aput(("a",), "k", {"v": 1})
            results = await store.abatch([GetOp(("a",), "k"), PutOp(("a",), "k", None)])
            return [*results, await store.aget(("a",), "k")]

    got, put, gone = asyncio.run(main())
    assert got is not None
    assert put is None
    assert gone is None


@pytest.fixture
def server_url() -> Iterator[str]:
    """``actormem serve`` in a child process on a free loopback port."""
    pytest.importorskip("fastapi")
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "actormem", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # up to ~30 s for the child to start listening
            try:
                if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "died")
            time.sleep(0.1)
        yield url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        if proc.stderr is not None:
            proc.stderr.close()


def test_from_url_against_a_server(server_url: str) -> None:
    store = ActormemStore.from_url(server_url, ttl={"default_ttl": 5.0})
    try:
        store.put(("docs", "a"), "k1", {"text": "blue cluster", "n": 1})
        store.put(("docs", "b"), "k2", {"text": "green cluster", "n": 2})
        item = store.get(("docs", "a"), "k1")
        assert item is not None
        assert item.value == {"text": "blue cluster", "n": 1}
        assert [h.key for h in store.search(("docs",), filter={"n": 2})] == ["k2"]
        assert store.search(("docs",), query="blue", limit=1)[0].key == "k1"
        with pytest.raises(ValueError, match="Invalid filter key"):  # the server's 422
            store.search(("docs",), filter={"a b": 1})
        assert store.list_namespaces(prefix=("docs",)) == [("docs", "a"), ("docs", "b")]
        store.delete(("docs", "a"), "k1")
        assert store.get(("docs", "a"), "k1") is None
        remote = store.memory.get_by_key(("docs", "b"), "k2")
        assert remote.ttl == 300.0
        assert store.sweep_ttl() == 0

        async def via_async() -> object:
            got = await store.aget(("docs", "b"), "k2")
            await store.aclose()
            return got

        assert asyncio.run(via_async()) is not None
    finally:
        store.close()


def test_index_without_embed_uses_the_engines_dense_vectors(tmp_path: Path) -> None:
    """``index=`` with no embedding function: the engine's WordLlama vectors rank a
    paraphrase that shares no word with the query; items put with ``index=False`` come
    last without a score; the vectors are persisted with the file."""
    pytest.importorskip("wordllama", reason="the dense extra is not installed")
    from actormem import DenseScorer

    db = str(tmp_path / "lg.db")
    config = {"dims": 256, "fields": ["text"]}
    with ActormemStore(path=db, index=config) as store:  # type: ignore[arg-type]
        assert isinstance(store.memory._options["scorer"], DenseScorer)
        store.put(("docs",), "cat", {"text": "the cat is sleeping on the sofa", "n": 1})
        store.put(("docs",), "tax", {"text": "quarterly tax filing deadline", "n": 2})
        store.put(("docs",), "hidden", {"text": "a kitten naps"}, index=False)
        hits = store.search(("docs",), query="a kitten naps", limit=3)
        assert [h.key for h in hits] == ["cat", "tax", "hidden"]
        assert hits[0].score is not None
        assert hits[1].score is not None
        assert hits[0].score > hits[1].score
        assert hits[2].score is None
        assert [h.key for h in store.search(("docs",), query="a kitten naps", limit=1)] == ["cat"]
        filtered = store.search(("docs",), query="a kitten naps", filter={"n": 2}, limit=3)
        assert [h.key for h in filtered] == ["tax"]
        assert [h.key for h in store.search(("docs",), query="kitten", offset=1, limit=1)] == [
            "tax"
        ]
    with ActormemStore(path=db, index=config) as store:  # type: ignore[arg-type]
        index = store.memory._memory._state.index
        assert index.statistics()["inline"] == 0
        assert index.inline == 0
        assert store.search(("docs",), query="a kitten naps", limit=1)[0].key == "cat"


def test_index_without_embed_works_from_asyncio() -> None:
    pytest.importorskip("wordllama", reason="the dense extra is not installed")

    async def main() -> list[str]:
        with ActormemStore(index={"fields": ["text"]}) as store:  # type: ignore[typeddict-item]
            await store.aput(("d",), "cat", {"text": "the cat is sleeping on the sofa"})
            await store.aput(("d",), "tax", {"text": "quarterly tax filing deadline"})
            return [h.key for h in await store.asearch(("d",), query="a kitten naps", limit=1)]

    assert asyncio.run(main()) == ["cat"]


def test_index_without_embed_refuses_dims_the_model_does_not_have() -> None:
    with pytest.raises(ValueError, match="'dims' must be one of those"):
        ActormemStore(index={"dims": 1536})  # type: ignore[typeddict-item]
