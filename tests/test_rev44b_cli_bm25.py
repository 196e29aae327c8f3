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


def test_image_kind_is_read_by_the_storage_layer(tmp_path: Path) -> None:
    """``sqlite_format.image_kind``: the header's kind, or None for anything else, read
    without creating or changing a file (the CLI's ``_image_scorer`` asks it)."""
    import os
    import sqlite3

    from actormem._storage.sqlite_format import image_kind

    bm25 = tmp_path / "b.db"
    _bm25_file(bm25)
    assert image_kind(bm25) == "bm25"
    assert image_kind(str(bm25)) == "bm25"
    wo = tmp_path / "w.db"

    async def run() -> None:
        async with open_memory(path=wo) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "deploy"))

    trio.run(run)
    assert image_kind(wo) == "word-overlap"
    assert image_kind(tmp_path / "absent.db") is None
    assert not (tmp_path / "absent.db").exists()  # mode=ro created nothing
    assert image_kind(tmp_path) is None  # a folder
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert image_kind(fifo) is None  # not opened: SQLite would wait for a writer
    # Headers that are not a JSON object with a str kind, and a table of another shape.
    for data, expected in [
        (b'{"kind": "bm25"}', "bm25"),
        (b'{"kind": 3}', None),
        (b"[1, 2]", None),
        (b"\xff\xfe not json", None),
        ("text, not a blob", None),
    ]:
        path = tmp_path / "forged.db"
        path.unlink(missing_ok=True)
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE index_image (name TEXT PRIMARY KEY, data BLOB)")
            conn.execute("INSERT INTO index_image VALUES ('header', ?)", (data,))
        conn.close()
        before = _digest(path)
        assert image_kind(path) == expected, data
        assert _digest(path) == before
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    assert image_kind(other) is None
