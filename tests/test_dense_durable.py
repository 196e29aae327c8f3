"""A durable dense or hybrid memory keeps its vectors in the SQLite file (schema 3):
reopened with the same model nothing is embedded again; another model, or a text that
changed while the memory ran without vectors, is embedded again and stored."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from actormem import (
    DenseScorer,
    FunctionEmbedder,
    HybridScorer,
    MemoryCategory,
    MemoryEntry,
    WordOverlapScorer,
    open_memory,
)
from actormem._storage.sqlite_format import CREATE_SCHEMA_V2, SCHEMA_VERSION


def counting(name: str, calls: list[str]) -> FunctionEmbedder:
    def embed(texts: Sequence[str]) -> Any:
        calls.extend(texts)
        return np.array([[t.count("a") + 1.0, t.count("e") + 1.0, len(t) % 3] for t in texts])

    return FunctionEmbedder(fn=embed, name=name, dim=3)


def entry(text: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text)


def vectors(db: Path) -> dict[int, bytes]:
    conn = sqlite3.connect(db)
    try:
        return dict(conn.execute("SELECT seq, vector FROM vectors"))
    finally:
        conn.close()


async def test_reopening_with_the_same_model_embeds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    calls: list[str] = []
    scorer = HybridScorer(dense=DenseScorer(embedder=counting("m1", calls)))
    async with open_memory(path=db, scorer=scorer) as memory:
        await memory.store_many([entry("banana bread"), entry("green tree"), entry("banana bread")])
        keep = entry("apple pie")
        await memory.store(keep)
        await memory.delete(keep.id)
    assert sorted(calls) == ["apple pie", "banana bread", "green tree"]
    assert len(vectors(db)) == 3  # the deleted entry's vector went with it
    calls.clear()
    async with open_memory(path=db, scorer=scorer) as memory:
        assert calls == []  # every vector came from the file
        got = await memory.retrieve("banana", 1)
        assert [e.memory for e in got] == ["banana bread"]
        memory._state._check()


async def test_another_model_or_a_changed_text_is_embedded_again(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    calls: list[str] = []
    first = DenseScorer(embedder=counting("m1", calls))
    e = entry("banana bread")
    async with open_memory(path=db, scorer=first) as memory:
        await memory.store(e)
        await memory.store(entry("green tree"))
    # Without vectors, the text changes: the stored vector no longer matches it.
    async with open_memory(path=db, scorer=WordOverlapScorer()) as memory:
        await memory.store(attrs.evolve(e, memory="blue sea"))
    calls.clear()
    async with open_memory(path=db, scorer=first) as memory:
        assert calls == ["blue sea"]
    calls.clear()
    async with open_memory(path=db, scorer=first) as memory:
        assert calls == []  # stored when computed at the last open
    second = DenseScorer(embedder=counting("m2", calls))
    async with open_memory(path=db, scorer=second) as memory:
        assert sorted(calls) == ["blue sea", "green tree"]
    conn = sqlite3.connect(db)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    conn.close()
    assert meta["dense_model"] == "m2"
    assert meta["dense_dim"] == "3"


async def test_a_version_2_file_is_upgraded_to_hold_vectors(tmp_path: Path) -> None:
    db = tmp_path / "v2.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for statement in CREATE_SCHEMA_V2:
        conn.execute(statement)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    calls: list[str] = []
    async with open_memory(path=db, scorer=DenseScorer(embedder=counting("m1", calls))) as m:
        await m.store(entry("banana"))
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    assert len(vectors(db)) == 1


async def test_a_live_copy_reuses_the_files_vectors(tmp_path: Path) -> None:
    """A file held by a running dense memory, read by ``open_live_copy`` (what ``actormem
    query --scorer dense`` does then): the vectors of that model come from the file, the
    others are embedded in a batch, none inline."""
    from actormem._engine.live import open_live_copy
    from actormem._index.dense import DenseIndex

    db = tmp_path / "m.db"
    calls: list[str] = []
    async with open_memory(path=db, scorer=DenseScorer(embedder=counting("m1", calls))) as held:
        await held.store_many([entry("banana bread"), entry("green tree")])
        copied: list[str] = []
        scorer = DenseScorer(embedder=counting("m1", copied))
        async with open_live_copy(db, scorer=scorer) as copy:
            assert copied == []
            index = copy._state.index
            assert isinstance(index, DenseIndex)
            assert index.inline == 0
            assert [e.memory for e in await copy.retrieve("banana bread", 1)] == ["banana bread"]
        other: list[str] = []
        async with open_live_copy(db, scorer=DenseScorer(embedder=counting("m2", other))) as copy:
            assert sorted(other) == ["banana bread", "green tree"]  # another model: embedded
            index = copy._state.index
            assert isinstance(index, DenseIndex)
            assert index.inline == 0
