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
copy does not follow later writes. With a dense or hybrid scorer, the copy reuses the
vectors the file keeps for that model (by the hash of each text) and embeds the others
in batches before loading, in a worker thread (as opening the file would).
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio

from .._entry import MemoryEntry
from .._index.dense import entry_document, text_hash
from .._index.scoring import Scorer
from .._storage.sqlite_format import read_stored_vectors, read_validated
from .lifecycle import open_memory
from .memory import Memory, _embedded_ahead
from .state import MemoryState

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
    fspath = os.fspath(path)
    entries = await trio.to_thread.run_sync(functools.partial(read_validated, fspath, live=True))
    async with open_memory(scorer=scorer) as memory:
        state = memory._state
        index: Any = state.index
        if getattr(index, "stored_vector", None) is None:
            state.load(entries)
        else:
            # The owner has nothing to do until the memory is handed out: the worker
            # thread is the only one touching the state meanwhile.
            found = await trio.to_thread.run_sync(
                functools.partial(read_stored_vectors, fspath, live=True)
            )
            stored = _stored_by_seq(index, found, entries)
            await trio.to_thread.run_sync(_load_embedded, state, entries, stored)
        state.journal = None  # an in-memory copy keeps no journal
        del entries
        yield memory


def _load_embedded(
    state: MemoryState,
    entries: list[tuple[int, MemoryEntry]],
    stored: dict[int, tuple[bytes, bytes]],
) -> None:
    """Load ``entries`` into ``state``, offering their vectors ahead (reused from
    ``stored`` or embedded in batches). Blocking."""
    state.load(_embedded_ahead(state.index, entries, stored, []))


def _stored_by_seq(
    index: Any,
    found: tuple[str, int, dict[bytes, bytes]] | None,
    entries: list[tuple[int, MemoryEntry]],
) -> dict[int, tuple[bytes, bytes]]:
    """The file's vectors of ``index``'s model, ``{seq: (text_hash, bytes)}``."""
    if found is None or found[:2] != (index.model_name, index.dim):
        return {}
    by_hash = found[2]
    stored: dict[int, tuple[bytes, bytes]] = {}
    for seq, entry in entries:
        digest = text_hash(entry_document(entry))
        data = by_hash.get(digest)
        if data is not None:
            stored[seq] = (digest, data)
    return stored
