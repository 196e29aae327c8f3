"""Review rev44b: ``actormem stats`` and ``export`` on a BM25 file.

Neither ranks anything, yet both opened the file with the default word-overlap scorer:
on a file whose index image is a BM25 one (any file a ``BM25Scorer`` memory closed),
each printed "the file's index image was not used (kind: ...); building the index from
the rows" and tokenized every text for an index it never used. They now open with the
scorer of the file's image (``_main._image_scorer``), so the image is restored and no
warning is printed; a file without an image, or with a word-overlap one, is read as
before. The file stays byte-identical either way.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
import trio

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, open_memory
from actormem.cli import _main
from actormem.cli._main import main


def _bm25_file(path: Path) -> None:
    async def run() -> None:
        async with open_memory(path=path, scorer=BM25Scorer()) as memory:
            await memory.store_many(
                MemoryEntry.new(MemoryCategory.FACT, f"deploy blue cluster {i} café 東京")
                for i in range(50)
            )

    trio.run(run)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", [["stats"], ["export"]])
def test_stats_and_export_of_a_bm25_file_use_its_image(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    command: list[str],
) -> None:
    path = tmp_path / "m.db"
    _bm25_file(path)
    before = _digest(path)
    assert _main._image_scorer(path) == "bm25"
    with caplog.at_level(logging.WARNING, logger="actormem"):
        status = main([*command, str(path)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "image was not used" not in err
    assert not [r for r in caplog.records if "image was not used" in r.getMessage()]
    if command == ["stats"]:
        assert "entries: 50" in out
    else:
        assert out.count("\n") == 50
    assert _digest(path) == before  # a read writes nothing


def test_the_image_scorer_defaults_to_word_overlap(tmp_path: Path) -> None:
    assert _main._image_scorer(tmp_path / "none.db") == "word-overlap"  # no file
    (tmp_path / "junk.db").write_bytes(b"not sqlite")
    assert _main._image_scorer(tmp_path / "junk.db") == "word-overlap"
    path = tmp_path / "wo.db"

    async def run() -> None:
        async with open_memory(path=path) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploy"))

    trio.run(run)
    assert _main._image_scorer(path) == "word-overlap"
