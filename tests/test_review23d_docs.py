"""Review 23d: the docs of a durable memory's access bookkeeping match the code since
branch durable15 (``sqlite._DEFER_ACCESS``: access changes are held back, written
within ``ACCESS_DELAY`` or ``ACCESS_PENDING`` entries and at a clean close, not in the
transaction of the batch that made them)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory, serve_memory
from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite_format import read_validated


def test_open_memory_does_not_promise_access_updates_in_the_same_transactions() -> None:
    assert sqlite_store._DEFER_ACCESS
    doc = " ".join((open_memory.__doc__ or "").split())
    assert not re.search(r"access bookkeeping is committed in the same", doc), doc[:600]
    assert "held back" in doc


async def test_the_owner_cancelled_before_a_threaded_commit_still_commits_and_answers(
    tmp_path: Path,
) -> None:
    """docs/durability.md, "Cancellation", said a commit not started when the owner's
    cancellation came does not start and its callers get ``ClosedResourceError``: the
    thread is started at once (``_in_thread_while``, no checkpoint before it), so the
    batch is committed, published and answered, and only then does the owner stop
    (held-back access updates the batch took along are in it too)."""
    path = str(tmp_path / "m.db")
    scope = trio.CancelScope()

    def on_remove(entry: MemoryEntry, cause: str) -> None:
        scope.cancel()  # during the apply of the upsert's batch, before its commit

    async def owner(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with scope:  # durability "full": every commit in the worker thread
            await serve_memory(
                path=path, durability="full", on_remove=on_remove, task_status=task_status
            )

    def fact(text: str) -> MemoryEntry:
        return MemoryEntry(id=uuid.UUID(int=1), memory=text, category=MemoryCategory.FACT)

    async with trio.open_nursery() as nursery:
        memory = await nursery.start(owner)
        await memory.store(fact("one"))
        await memory.store(fact("two"))  # acknowledged, not ClosedResourceError
    assert [e.memory for _, e in read_validated(path)] == ["two"]
    doc = " ".join((Path(__file__).parent.parent / "docs/durability.md").read_text().split())
    assert "A commit that had not started when the cancellation arrived does not start" not in doc
