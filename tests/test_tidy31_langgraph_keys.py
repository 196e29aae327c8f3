"""tidy31: ActormemStore and keys no item can have. ``get``/``aget``/a batch ``GetOp`` of
a key over ``MAX_KEY_CHARS`` (or with a lone surrogate, or under a namespace segment
over its limit) raised the engine's ``InvalidQueryError``, and so did ``delete``;
LangGraph's ``InMemoryStore`` returns None and deletes nothing (a dict lookup, a
``pop(key, None)``). Now both stores agree; a ``put`` of such a pair is still a
``ValueError`` (``InvalidEntryError``)."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, PutOp  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from actormem import MAX_KEY_CHARS, InvalidEntryError  # noqa: E402
from actormem._entry import MAX_SEGMENT_CHARS  # noqa: E402
from actormem.integrations.langgraph import ActormemStore  # noqa: E402

#: (namespace, key) pairs no ActormemStore item can have.
IMPOSSIBLE = [
    pytest.param(("u",), "k" * (MAX_KEY_CHARS + 1), id="long-key"),
    pytest.param(("u",), "k\ud800", id="surrogate-key"),
    pytest.param(("u" * (MAX_SEGMENT_CHARS + 1),), "k", id="long-segment"),
    pytest.param(("u",), "", id="empty-key"),
]


@pytest.mark.parametrize(("namespace", "key"), IMPOSSIBLE)
def test_get_and_delete_find_nothing_as_in_memory_store(
    namespace: tuple[str, ...], key: str
) -> None:
    reference = InMemoryStore()
    assert reference.get(namespace, key) is None
    reference.delete(namespace, key)
    with ActormemStore() as store:
        store.put(("u",), "k", {"a": 1})
        assert store.get(namespace, key) is None
        assert store.get(namespace, key, refresh_ttl=False) is None
        store.delete(namespace, key)  # nothing to delete
        assert store.batch(
            [GetOp(namespace, key), PutOp(namespace, key, None), GetOp(("u",), "k")]
        )[:2] == [None, None]
        with pytest.raises(ValueError, match="key|segment") as caught:
            store.put(namespace, key, {"a": 1})
        assert isinstance(caught.value, InvalidEntryError)
        assert [item.key for item in store.search(("u",))] == ["k"]


@pytest.mark.parametrize(("namespace", "key"), IMPOSSIBLE)
def test_the_async_forms_agree(namespace: tuple[str, ...], key: str) -> None:
    async def run() -> None:
        with ActormemStore() as store:
            assert await store.aget(namespace, key) is None
            await store.adelete(namespace, key)
            assert await store.abatch([GetOp(namespace, key)]) == [None]
            with pytest.raises(InvalidEntryError):
                await store.aput(namespace, key, {"a": 1})

    asyncio.run(run())


def test_the_longest_key_is_kept() -> None:
    key = "k" * MAX_KEY_CHARS
    with ActormemStore() as store:
        store.put(("u",), key, {"a": 1})
        item = store.get(("u",), key)
        assert item is not None
        assert item.value == {"a": 1}
        store.delete(("u",), key)
        assert store.get(("u",), key) is None
