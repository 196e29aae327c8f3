"""review30a: the HTTP clients' ``store_many`` of something not an entry said
``store_many() takes a MemoryEntry, not str`` where the memory says ``store_many()
entries[0] is a str, not a MemoryEntry``; now the same words, before anything is sent."""

from __future__ import annotations

import pytest
import trio

pytest.importorskip("httpx")

from actormem import MemoryCategory, MemoryEntry, open_memory  # noqa: E402
from actormem.client import Client  # noqa: E402

_SAID = "store_many() entries[1] is a str, not a MemoryEntry"


def test_store_many_of_a_non_entry_says_what_memory_says() -> None:
    good = MemoryEntry.new(MemoryCategory.FACT, "deploy blue")

    async def memory_says() -> str:
        async with open_memory() as memory:
            with pytest.raises(TypeError) as caught:
                await memory.store_many([good, "x"])  # type: ignore[list-item]
        return str(caught.value)

    assert trio.run(memory_says) == _SAID
    client = Client("http://127.0.0.1:9")  # nothing listens: nothing may be sent
    try:
        with pytest.raises(TypeError, match=r"^store_many\(\) entries\[1\] is a str, not a"):
            client.store_many([good, "x"])  # type: ignore[list-item]
    finally:
        client.close()
