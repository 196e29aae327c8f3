"""A LangGraph store on actormem: the one-line switch, then what LangGraph code does.

Run: ``python examples/langgraph_store.py`` (needs ``pip install 'actormem[langgraph]'``).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from actormem.integrations.langgraph import ActormemStore


def main(folder: Path) -> None:
    # Instead of `store = InMemoryStore()`: a durable file, at most 1,000 items kept, and
    # items that expire after a week unless read.
    store = ActormemStore(
        path=str(folder / "agent.db"),
        capacity=1000,
        ttl={"default_ttl": 7 * 24 * 60, "refresh_on_read": True},
    )
    with store:
        user = ("users", "ada")
        store.put(user, "deploy", {"text": "deploys go to the blue cluster", "team": "infra"})
        store.put(user, "db", {"text": "the database is postgres 16", "team": "infra"})
        store.put(user, "tone", {"text": "answer briefly", "team": "style"})
        store.put(("users", "bob"), "tone", {"text": "answer at length", "team": "style"})

        print("get:", store.get(user, "deploy").value)  # type: ignore[union-attr]
        hits = store.search(user, query="which cluster do deploys use", limit=1)
        print("search:", [(h.key, h.value["text"]) for h in hits])
        print("filter:", sorted(h.key for h in store.search(user, filter={"team": "infra"})))
        print("namespaces:", store.list_namespaces(prefix=("users",)))
        store.delete(user, "tone")

        async def from_asyncio() -> None:
            item = await store.aget(user, "db")
            print("aget:", item.value["text"] if item else None)

        asyncio.run(from_asyncio())
    with ActormemStore(path=str(folder / "agent.db")) as again:  # reopened from the file
        print("after reopening:", sorted(i.key for i in again.search(user)))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(Path(tmp))
