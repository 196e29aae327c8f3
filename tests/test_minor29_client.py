"""minor29: the HTTP clients refuse a bad argument as :class:`~actormem.Memory` does.

Before, the same call with the same bad argument gave different errors: an unknown
keyword was a TypeError from ``Memory`` but the server's ``InvalidQueryError("bogus:
Extra inputs are not permitted")`` from the client; ``get_by_key`` with a key over 4,096
code points or an empty namespace segment answered None from ``Memory`` and a 422 from
the server; ``list_namespaces(prefix=("a", ""))`` answered [] and a 422; a ``limit`` over
10,000 or an ``access_count`` over 2**53 - 1 (the server's bounds) came back in pydantic's
words ("limit: Input should be less than or equal to 10000"), after a round trip.

Now ``Memory`` refuses the lookups no entry can answer (``check_lookup_key``,
``check_namespace_patterns``) and the clients run the same checks before sending, then
the server's bounds in the memory's words ("limit must be <= 10000 over HTTP, got 10001").
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import httpx
import pytest

from actormem import InvalidEntryError, InvalidQueryError, MemoryCategory, MemoryEntry
from actormem._engine.memory import Memory
from actormem._storage.jsonl import entry_to_json
from actormem.client import Client, HostedMemory, _bounds, _http
from actormem.server import _models

from .serverproc import ServerProcess

ENTRY = MemoryEntry.new(MemoryCategory.FACT, "blue deploy")

#: Bad calls that both refuse, with the same error class and message.
SAME: dict[str, Callable[[Any], object]] = {
    "retrieve unknown keyword": lambda m: m.retrieve("blue", bogus=1),
    "retrieve_scored unknown keyword": lambda m: m.retrieve_scored("blue", bogus=1),
    "list_entries unknown keyword": lambda m: m.list_entries(bogus=1),
    "list_namespaces unknown keyword": lambda m: m.list_namespaces(bogus=1),
    "get_by_key key too long": lambda m: m.get_by_key(("a",), "k" * 4097),
    "delete_key key too long": lambda m: m.delete_key(("a",), "k" * 4097),
    "get_by_key empty key": lambda m: m.get_by_key(("a",), ""),
    "get_by_key empty segment": lambda m: m.get_by_key(("a", ""), "k"),
    "delete_key empty segment": lambda m: m.delete_key(("a", ""), "k"),
    "get_by_key segment too long": lambda m: m.get_by_key(("s" * 1025,), "k"),
    "get_by_key too deep": lambda m: m.get_by_key(("s",) * 65, "k"),
    "get_by_key one str": lambda m: m.get_by_key("ab", "k"),
    "get_by_key int key": lambda m: m.get_by_key(("a",), 3),
    "list_namespaces empty prefix segment": lambda m: m.list_namespaces(prefix=("a", "")),
    "list_namespaces empty suffix segment": lambda m: m.list_namespaces(suffix=("",)),
    "retrieve empty segment": lambda m: m.retrieve("blue", namespace=("a", "")),
    "retrieve negative limit": lambda m: m.retrieve("blue", -1),
    "list_entries negative limit": lambda m: m.list_entries(limit=-1),
    "list_entries negative offset": lambda m: m.list_entries(offset=-1),
    "list_namespaces negative limit": lambda m: m.list_namespaces(limit=-1),
}

#: Bad calls over HTTP only (the memory takes them): the server's bounds, refused before
#: sending in the memory's words.
HTTP_ONLY: dict[str, tuple[Callable[[Any], object], type[Exception], str]] = {
    "retrieve limit": (
        lambda m: m.retrieve("blue", 10_001), InvalidQueryError,
        "limit must be <= 10000 over HTTP, got 10001",
    ),
    "retrieve_scored limit": (
        lambda m: m.retrieve_scored("blue", 10_001), InvalidQueryError,
        "limit must be <= 10000 over HTTP, got 10001",
    ),
    "list_entries limit": (
        lambda m: m.list_entries(limit=10_001), InvalidQueryError,
        "limit must be <= 10000 over HTTP, got 10001",
    ),
    "list_namespaces limit": (
        lambda m: m.list_namespaces(limit=10_001), InvalidQueryError,
        "limit must be <= 10000 over HTTP, got 10001",
    ),
    "store access_count": (
        lambda m: m.store(attrs.evolve(ENTRY, access_count=2**60)), InvalidEntryError,
        f"access_count must be <= 2**53 - 1 (I-JSON) over HTTP, got {2**60}",
    ),
    "store_many access_count": (
        lambda m: m.store_many([attrs.evolve(ENTRY, access_count=2**60)]), InvalidEntryError,
        f"access_count must be <= 2**53 - 1 (I-JSON) over HTTP, got {2**60}",
    ),
    "list_entries offset": (
        lambda m: m.list_entries(offset=2**60), InvalidQueryError,
        f"offset must be <= 2**53 - 1 (I-JSON) over HTTP, got {2**60}",
    ),
    "retrieve min_matched": (
        lambda m: m.retrieve("blue", min_matched=2**60), InvalidQueryError,
        f"min_matched= must be <= 2**53 - 1 (I-JSON) over HTTP, got {2**60}",
    ),
}


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[Any, Client, ServerProcess]]:
    with ServerProcess() as server, Client(server.url) as client:
        with HostedMemory() as hosted:
            yield hosted.sync, client, server


def _outcome(call: Callable[[Any], object], on: Any) -> tuple[str, str]:
    try:
        return "ok", repr(call(on))
    except Exception as exc:
        return type(exc).__name__, str(exc).replace("Memory.", "")


@pytest.mark.parametrize("name", sorted(SAME))
def test_same_bad_argument_same_error(both: tuple[Any, Client, ServerProcess], name: str) -> None:
    memory, client, _ = both
    got = _outcome(SAME[name], memory)
    assert got[0] in ("TypeError", "InvalidQueryError"), got
    assert _outcome(SAME[name], client) == got


@pytest.mark.parametrize("name", sorted(HTTP_ONLY))
def test_server_bounds_refused_before_sending(
    both: tuple[Any, Client, ServerProcess], name: str
) -> None:
    memory, client, _ = both
    call, kind, message = HTTP_ONLY[name]
    call(memory)  # the memory takes it
    with pytest.raises(kind) as caught:
        call(client)
    assert str(caught.value) == message


def test_the_bounds_agree_with_the_server() -> None:
    assert _http.MAX_LIMIT == _models.MAX_LIMIT
    assert _http.MAX_JSON_INT == _models.MAX_JSON_INT


@pytest.mark.parametrize(
    ("method", "names"),
    [
        ("retrieve", _http._RETRIEVE_NAMES),
        ("retrieve_scored", _http._RETRIEVE_NAMES),
        ("list_entries", _http._LIST_NAMES),
        ("list_namespaces", _http._NAMESPACES_NAMES),
    ],
)
def test_the_keyword_names_are_the_memorys(method: str, names: frozenset[str]) -> None:
    params = inspect.signature(getattr(Memory, method)).parameters.values()
    assert names == {p.name for p in params if p.kind is p.KEYWORD_ONLY}


def test_a_valid_lookup_still_answers(both: tuple[Any, Client, ServerProcess]) -> None:
    memory, client, _ = both
    keyed = attrs.evolve(ENTRY, namespace=("a",) * 64, key="k" * 4096)
    for m in (memory, client):
        m.store(keyed)
        assert m.get_by_key(("a",) * 64, "k" * 4096) == keyed
        assert m.list_namespaces(prefix=("a", "*"), max_depth=2) == [("a", "a")]
        assert m.delete_key(("a",) * 64, "k" * 4096) is True


def _tagged(entries: int, first: int, per: int = 256) -> list[MemoryEntry]:
    return [
        attrs.evolve(
            ENTRY,
            id=uuid.uuid4(),
            tags=tuple(f"t{first + i * per + j}" for j in range(per)),
        )
        for i in range(entries)
    ]


def test_a_batch_of_too_many_distinct_tags_is_refused_alike(
    both: tuple[Any, Client, ServerProcess],
) -> None:
    """A batch is applied in one owner step, and each new tag is indexed in it: a 4 MiB
    body of distinct tags held every request of the server for seconds. Over HTTP a
    batch holds at most MAX_BATCH_TAGS distinct tags: the server's 422 names the limit,
    and the clients refuse before sending, in the same words; the memory itself takes
    it (docs/design.md, "Entry limits")."""
    memory, client, server = both
    limit = _bounds.MAX_BATCH_TAGS
    assert limit % 256 == 0
    over = [*_tagged(limit // 256, 10**7), attrs.evolve(ENTRY, id=uuid.uuid4(), tags=("one more",))]
    detail = (
        f"entries: the batch holds {limit + 1} distinct tags; the limit over HTTP is {limit} a "
        "request (each new tag is indexed on the owner's task, which answers no other request "
        "meanwhile): split the batch"
    )
    before = client.count()
    with pytest.raises(InvalidEntryError) as caught:
        client.store_many(over)
    assert str(caught.value) == detail
    body = {"entries": [entry_to_json(e) for e in over]}
    answer = httpx.post(server.url + "/v1/batch", json=body, timeout=60)
    assert answer.status_code == 422
    assert answer.json()["detail"] == detail
    assert answer.json()["field"] == "entries"
    assert client.count() == before  # nothing of it stored
    # At the limit, and the same tag many times: taken.
    client.store_many(_tagged(limit // 256, 2 * 10**7))
    same = [attrs.evolve(e, tags=tuple(f"s{j}" for j in range(256))) for e in over]
    client.store_many(same)
    assert client.count() == before + limit // 256 + len(same)
    memory.store_many(over)  # the memory has no such bound
