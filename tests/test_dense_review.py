"""Fixes from the review of the dense and hybrid scorers (issue #18)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from actormem import (
    DenseScorer,
    FunctionEmbedder,
    HybridScorer,
    MemoryCategory,
    MemoryEntry,
    open_memory,
)
from actormem.cli._main import main


def fact(text: str) -> MemoryEntry:
    return MemoryEntry.new(MemoryCategory.FACT, text)


def other_model(texts: Sequence[str]) -> Any:
    out = np.zeros((len(texts), 8), np.float32)
    out[:, 0] = 1.0
    out[:, 1] = [len(t) % 7 for t in texts]
    return out


def sha256_of(*paths: Path) -> list[str | None]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths]


def make_file(path: Path, scorer: Any) -> None:
    async def run() -> None:
        async with open_memory(path=path, scorer=scorer) as memory:
            await memory.store_many(
                [fact("deploys go to the blue cluster"), fact("cats are nice").with_tag("pets")]
            )

    trio.run(run)


@pytest.mark.parametrize("made_with", ["other-model", "no-vectors"])
@pytest.mark.parametrize("scorer", ["dense", "hybrid"])
def test_query_leaves_the_file_byte_identical(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, made_with: str, scorer: str
) -> None:
    db = tmp_path / "m.sqlite"
    if made_with == "other-model":
        emb = FunctionEmbedder(fn=other_model, name="other", dim=8)
        make_file(db, DenseScorer(embedder=emb))
    else:
        make_file(db, None)
    files = [db, Path(f"{db}-wal"), Path(f"{db}-shm")]
    before = sha256_of(*files)
    assert main(["query", str(db), "the blue cluster", "--scorer", scorer]) == 0
    out, _ = capsys.readouterr()
    assert "deploys go to the blue cluster" in out
    assert sha256_of(*files) == before
