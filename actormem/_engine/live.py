"""A read-only copy of a memory file that a running memory holds (a *live read*).

A durable memory keeps its SQLite file in WAL mode and holds ``<path>.lock`` while it is
open, so a second :func:`~actormem.open_memory` of the file is refused. Readers do not
need that lock: SQLite lets a read-only connection read a WAL database while its writer
writes, and every statement sees one committed state of the file (the latest commit when
it started). :func:`open_live_copy` validates and decodes the file through such a
connection (:func:`~actormem._storage.sqlite_format.read_validated`: the entries come
from one ``SELECT``, hence from one commit) and loads them into a fresh in-memory memory:
a consistent snapshot of everything the running memory had acknowledged at that moment,
which the caller can query, count and export. Nothing is written to the file, and the
copy does not follow later writes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from .._index.scoring import Scorer
from .._storage.sqlite_format import read_validated
from .memory import Memory, open_memory

__all__ = ["is_held_elsewhere", "open_live_copy"]


def is_held_elsewhere(reason: str) -> bool:
    """Whether a :class:`~actormem.StorageError` reason says another memory holds the file."""
    return reason.startswith("held by another memory")


@asynccontextmanager
async def open_live_copy(
    path: str | os.PathLike[str], *, scorer: Scorer | None = None
) -> AsyncIterator[Memory]:
    """An in-memory memory holding one consistent snapshot of the file ``path``, read
    without its lock (see the module docs). Writes to it never reach the file.

    Runtime complexity: O(file size) to validate and read, plus O(n (T + log n)) to index.

    Raises:
        StorageError: The file is not a readable actormem database.
    """
    entries = await trio.to_thread.run_sync(read_validated, os.fspath(path))
    async with open_memory(scorer=scorer) as memory:
        memory._state.load(entries)
        memory._state.journal = None  # an in-memory copy keeps no journal
        del entries
        yield memory
