"""review30a: ActormemStore and the empty key. docs/integrations.md said a ``get`` of it
finds nothing, but ``get(("u",), "")`` and ``delete`` raised ``InvalidQueryError: key
must not be empty (use None for no key)``; LangGraph's ``InMemoryStore`` returns None
(and deletes nothing). The hint misled too: ``BaseStore`` passes ``str(key)``, so
``put(ns, None, v)`` stores under the key "None". Now a get of "" is None, a delete of
it does nothing, a put of it is a ValueError without the hint."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langgraph.store.base")

from actormem import InvalidEntryError  # noqa: E402
from actormem.integrations.langgraph import ActormemStore  # noqa: E402


def test_the_empty_key_is_found_nowhere_and_refused_on_put() -> None:
    with ActormemStore() as store:
        store.put(("u",), "k", {"a": 1})
        assert store.get(("u",), "") is None
        store.delete(("u",), "")  # nothing to delete
        with pytest.raises(ValueError, match="key must not be empty") as caught:
            store.put(("u",), "", {"a": 1})
        assert isinstance(caught.value, InvalidEntryError)
        assert "None" not in str(caught.value)
        assert [item.key for item in store.search(("u",))] == ["k"]


def test_the_async_forms_agree() -> None:
    async def run() -> None:
        with ActormemStore() as store:
            assert await store.aget(("u",), "") is None
            await store.adelete(("u",), "")
            with pytest.raises(ValueError, match="key must not be empty"):
                await store.aput(("u",), "", {"a": 1})

    asyncio.run(run())


def test_a_none_key_is_the_key_none_as_in_langgraph() -> None:
    """BaseStore's ``put`` makes the key ``str(key)``: as LangGraph's own stores do."""
    with ActormemStore() as store:
        store.put(("u",), None, {"a": 1})  # type: ignore[arg-type]
        item = store.get(("u",), "None")
        assert item is not None
        assert item.value == {"a": 1}
