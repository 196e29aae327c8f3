"""What a user would pick instead of actormem, behind one small interface.

Every peer takes the same :class:`~actormem.MemoryEntry` values and answers the same
queries with ``await peer.retrieve(query, k)`` -> the ids of its top ``k``, best first.

* :class:`ReferenceStore`: the seed's reference design (loopctl's ``InMemoryStore``): a
  list behind a lock, *cloned* under the lock on every retrieve and scored in full
  outside it with the same word-overlap formula (``word_overlap_score``), then sorted.
* :class:`LockedDictStore`: what a user writes by hand in trio: a dict behind a
  ``trio.Lock``; retrieve scores every value in full with the same formula under the
  lock and keeps the top ``k`` with a heap (no clone, but writers wait).
* :class:`SQLiteFTS5Store`: SQLite's FTS5 full-text index (in memory, ``unicode61``
  tokenizer), ranked by its ``bm25()``; the query's words are OR-ed, so like actormem's
  BM25 it returns the documents sharing any term. Calls are synchronous, in the task.
* :class:`LangGraphStore`: LangGraph's ``InMemoryStore``, ``put`` and ``search`` in one
  namespace. Without an index its ``search(query=...)`` ignores the query and returns
  the first ``limit`` items in insertion order: a filter, not a ranking (the ``none``
  mode). With an ``index`` it ranks by cosine similarity of embeddings over every item;
  no model can be downloaded here, so the ``hash`` mode embeds with a deterministic
  hashed bag of words (:func:`hashed_bow`, 64 dimensions, lower-cased ``\\w+`` tokens):
  the same cost structure as a real embedding store minus the model's time.

Scores differ between formula families (word overlap, BM25, cosine), so comparisons
are of latency on the same entries and queries; ``agreement`` in the benchmark shows how
far the top 10 of peers with the same formula coincide with actormem's (exactly, for
the two word-overlap peers).
"""

from __future__ import annotations

import hashlib
import heapq
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

import trio

from actormem import MemoryEntry
from actormem._index.wordoverlap import word_overlap_score

__all__ = [
    "LangGraphStore",
    "LockedDictStore",
    "Peer",
    "ReferenceStore",
    "SQLiteFTS5Store",
    "hashed_bow",
    "langgraph_available",
]

_WORD = re.compile(r"\w+")


class Peer(Protocol):
    """A store compared with actormem."""

    name: str
    #: What its retrieve computes, for the doc.
    compares: str

    def build(self, entries: Iterable[MemoryEntry]) -> None:
        """Load ``entries`` (timed by the benchmark as the build)."""

    async def store(self, entry: MemoryEntry) -> None: ...

    async def retrieve(self, query: str, k: int) -> list[str]: ...

    def close(self) -> None: ...


class ReferenceStore:
    """The seed's reference store: list, clone per query, full scoring, full sort."""

    name = "reference list (seed)"
    compares = "word-overlap score of every entry of a cloned list, sorted; same formula"

    def __init__(self) -> None:
        self._entries: list[MemoryEntry] = []
        self._lock = trio.Lock()

    def build(self, entries: Iterable[MemoryEntry]) -> None:
        self._entries.extend(entries)

    async def store(self, entry: MemoryEntry) -> None:
        async with self._lock:
            self._entries.append(entry)

    async def retrieve(self, query: str, k: int) -> list[str]:
        await trio.lowlevel.checkpoint()
        entries = list(self._entries)  # the clone a read lock would guard
        scored = [
            (word_overlap_score(e.memory, e.tags, e.relevance, query), i)
            for i, e in enumerate(entries)
        ]
        scored.sort(key=lambda t: (-t[0], t[1]))
        return [str(entries[i].id) for _, i in scored[:k]]

    def close(self) -> None:
        self._entries.clear()


class LockedDictStore:
    """A ``trio.Lock``-guarded dict, scored in full under the lock with a top-k heap."""

    name = "trio.Lock + dict"
    compares = "word-overlap score of every entry under the lock, heapq top k; same formula"

    def __init__(self) -> None:
        self._entries: dict[str, MemoryEntry] = {}
        self._lock = trio.Lock()

    def build(self, entries: Iterable[MemoryEntry]) -> None:
        for e in entries:
            self._entries[str(e.id)] = e

    async def store(self, entry: MemoryEntry) -> None:
        async with self._lock:
            self._entries[str(entry.id)] = entry

    async def retrieve(self, query: str, k: int) -> list[str]:
        async with self._lock:
            # Insertion order breaks ties, as actormem does: key (score, -position).
            best = heapq.nlargest(
                k,
                (
                    (word_overlap_score(e.memory, e.tags, e.relevance, query), -i, key)
                    for i, (key, e) in enumerate(self._entries.items())
                ),
            )
        return [key for _, _, key in best]

    def close(self) -> None:
        self._entries.clear()


def fts5_query(query: str) -> str | None:
    """The FTS5 MATCH expression OR-ing the query's distinct lower-cased ``\\w+`` words
    (each quoted, so no word is read as an operator), or None for a query without one."""
    words = dict.fromkeys(w for w in _WORD.findall(query.lower()))
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


class SQLiteFTS5Store:
    """SQLite FTS5 in memory, ``ORDER BY bm25(...)``, the words of the query OR-ed."""

    name = "SQLite FTS5 bm25()"
    compares = "FTS5 MATCH of the OR-ed query words, ORDER BY bm25() LIMIT k (in memory)"

    def __init__(self) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute(
            "CREATE VIRTUAL TABLE mem USING fts5(memory, id UNINDEXED, tokenize='unicode61')"
        )

    def build(self, entries: Iterable[MemoryEntry]) -> None:
        with self._db:
            self._db.executemany(
                "INSERT INTO mem(memory, id) VALUES (?, ?)",
                ((e.memory, str(e.id)) for e in entries),
            )

    async def store(self, entry: MemoryEntry) -> None:
        with self._db:
            self._db.execute(
                "INSERT INTO mem(memory, id) VALUES (?, ?)", (entry.memory, str(entry.id))
            )
        await trio.lowlevel.checkpoint()

    async def retrieve(self, query: str, k: int) -> list[str]:
        match = fts5_query(query)
        if match is None:
            return []
        rows = self._db.execute(
            "SELECT id FROM mem WHERE mem MATCH ? ORDER BY bm25(mem) LIMIT ?", (match, k)
        ).fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        self._db.close()


def hashed_bow(texts: Sequence[str], dims: int = 64) -> list[list[float]]:
    """Deterministic bag-of-words embeddings: each lower-cased ``\\w+`` token adds 1 to
    the dimension its BLAKE2b hash picks. Stands in for an embedding model. O(len(text))."""
    out = []
    for text in texts:
        vec = [0.0] * dims
        for w in _WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "little")
            vec[h % dims] += 1.0
        out.append(vec)
    return out


def langgraph_available() -> bool:
    try:
        import langgraph.store.memory  # noqa: F401
    except ImportError:
        return False
    return True


class LangGraphStore:
    """LangGraph ``InMemoryStore``: ``put`` each entry, ``search(query=...)`` in one namespace.

    Args:
        index: ``"none"`` (no index: search is a filter returning the first ``k`` items,
            the query is ignored) or ``"hash"`` (an index whose ``embed`` is
            :func:`hashed_bow`: search ranks every item by cosine similarity).
    """

    _NS = ("bench",)

    def __init__(self, index: str) -> None:
        from langgraph.store.memory import InMemoryStore

        self.index = index
        if index == "none":
            self.name = "LangGraph InMemoryStore (no index)"
            self.compares = (
                "search(ns, query=q, limit=k) without an index: first k items, query ignored"
            )
            self._store: Any = InMemoryStore()
        elif index == "hash":
            self.name = "LangGraph InMemoryStore (hash embed)"
            self.compares = (
                "search(ns, query=q, limit=k) with index dims=64, embed=hashed bag of words: "
                "cosine over every item"
            )
            self._store = InMemoryStore(
                index={"dims": 64, "embed": hashed_bow, "fields": ["memory"]}
            )
        else:
            raise ValueError(f"index must be 'none' or 'hash', not {index!r}")

    def build(self, entries: Iterable[MemoryEntry]) -> None:
        put = self._store.put
        for e in entries:
            put(self._NS, str(e.id), {"memory": e.memory})

    async def store(self, entry: MemoryEntry) -> None:
        self._store.put(self._NS, str(entry.id), {"memory": entry.memory})
        await trio.lowlevel.checkpoint()

    async def retrieve(self, query: str, k: int) -> list[str]:
        return [item.key for item in self._store.search(self._NS, query=query, limit=k)]

    def close(self) -> None:
        self._store = None
