"""``actormem export`` carries each entry's dense vector; ``actormem import`` keeps the
vectors it can trust (same model, made from the same text), so a memory opened on the
imported file with that model embeds nothing again; malformed vectors refuse the file."""

from __future__ import annotations

import base64
import json
import sqlite3
import struct
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio

from actormem import DenseScorer, FunctionEmbedder, MemoryCategory, MemoryEntry, open_memory
from actormem._index.dense import entry_document, text_hash
from actormem._storage.jsonl import vector_from_json, vector_to_json
from actormem.cli._main import main

TEXTS = ["banana bread", "green tree", "apple pie"]


def counting(name: str, calls: list[str], dim: int = 3) -> FunctionEmbedder:
    def embed(texts: Sequence[str]) -> Any:
        calls.extend(texts)
        rows = [[t.count("a") + 1.0, t.count("e") + 1.0, len(t) % 3] for t in texts]
        return np.array([(r * dim)[:dim] for r in rows], np.float32)

    return FunctionEmbedder(fn=embed, name=name, dim=dim)


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_db(db: Path, name: str = "m1", tags: tuple[str, ...] = ()) -> list[str]:
    """A durable dense memory file holding TEXTS; the texts its embedder was given."""
    calls: list[str] = []

    async def run() -> None:
        scorer = DenseScorer(embedder=counting(name, calls))
        async with open_memory(path=db, scorer=scorer) as memory:
            await memory.store_many(
                [MemoryEntry(category=MemoryCategory.FACT, memory=t, tags=tags) for t in TEXTS]
            )

    trio.run(run)
    return calls


def open_with(db: Path, name: str, query: str | None = None) -> tuple[list[str], list[str]]:
    """Open ``db`` with the model ``name`` (and retrieve ``query``): the texts embedded
    while opening, and the hits."""
    calls: list[str] = []

    async def run() -> list[str]:
        async with open_memory(path=db, scorer=DenseScorer(embedder=counting(name, calls))) as m:
            opened = list(calls)
            hits = [] if query is None else [e.memory for e in await m.retrieve(query, 1)]
        calls[:] = opened
        return hits

    hits = trio.run(run)
    return calls, hits


def stored_vectors(db: Path) -> dict[bytes, bytes]:
    conn = sqlite3.connect(db)
    try:
        return {bytes(h): bytes(v) for _, h, v in conn.execute("SELECT * FROM vectors")}
    finally:
        conn.close()


def test_vector_json_round_trip_and_checks() -> None:
    data = struct.pack("<3f", 0.6, 0.8, 0.0)
    obj = vector_to_json("m", 3, b"\x01" * 16, data)
    assert obj == {"model": "m", "dim": 3, "text_hash": "01" * 16, "f32le": obj["f32le"]}
    back = vector_from_json(json.loads(json.dumps(obj)))
    assert (back.model, back.dim, back.text_hash, back.data) == ("m", 3, b"\x01" * 16, data)
    bad: list[tuple[Any, str]] = [
        ([1, 2], "must be a JSON object"),
        ({**obj, "extra": 1}, "unknown key 'extra'"),
        ({k: v for k, v in obj.items() if k != "dim"}, "missing 'dim'"),
        ({**obj, "dim": True}, "'dim' must be an integer"),
        ({**obj, "dim": 0}, "'dim' must be 1 to"),
        ({**obj, "model": ""}, "'model' is empty"),
        ({**obj, "text_hash": "xyz"}, "32 hex digits"),
        ({**obj, "f32le": "not base64!"}, "not valid base64"),
        ({**obj, "dim": 4}, "holds 12 bytes, not 16"),
        ({**obj, "f32le": base64.b64encode(struct.pack("<3f", 1, float("nan"), 0)).decode()},
         "NaN or infinite"),
        ({**obj, "f32le": base64.b64encode(struct.pack("<3f", 1, float("inf"), 0)).decode()},
         "NaN or infinite"),
    ]  # fmt: skip
    for value, message in bad:
        with pytest.raises(ValueError, match=message):
            vector_from_json(value)


def test_export_carries_the_vectors_the_file_keeps(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "m.db"
    make_db(db, tags=("t",))
    status, out, err = run_cli(capsys, "export", str(db))
    assert status == 0, err
    rows = lines(out)
    stored = stored_vectors(db)
    assert len(rows) == 3
    for row in rows:
        entry_text = " ".join((row["memory"], *row["tags"]))
        vec = row["vector"]
        assert (vec["model"], vec["dim"]) == ("m1", 3)
        assert vec["text_hash"] == text_hash(entry_text).hex()
        assert base64.b64decode(vec["f32le"]) == stored[text_hash(entry_text)]
    status, out, err = run_cli(capsys, "export", "--no-vectors", str(db))
    assert status == 0, err
    assert all("vector" not in row for row in lines(out))


def test_a_file_without_vectors_exports_none(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    db = tmp_path / "m.db"

    async def run() -> None:
        async with open_memory(path=db) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "no vectors here"))

    trio.run(run)
    status, out, err = run_cli(capsys, "export", str(db))
    assert status == 0, err
    assert "vector" not in lines(out)[0]


def test_an_import_keeps_the_vectors_and_nothing_is_embedded_again(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "m.db"
    assert sorted(make_db(source)) == sorted(TEXTS)
    status, out, err = run_cli(capsys, "export", str(source))
    assert status == 0, err
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out, encoding="utf-8")
    copy = tmp_path / "copy.db"
    status, out, err = run_cli(capsys, "import", str(copy), str(dump))
    assert status == 0, err
    assert "kept 3 vectors of 'm1'" in err
    assert stored_vectors(copy) == stored_vectors(source)
    calls, hits = open_with(copy, "m1", "banana bread")
    assert calls == []  # every vector came from the import
    assert hits == ["banana bread"]


def test_vectors_of_another_model_or_text_are_not_trusted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = tmp_path / "m.db"
    make_db(source, name="m1")
    status, out, _ = run_cli(capsys, "export", str(source))
    rows = lines(out)
    rows[0]["memory"] = "edited after the export"  # its vector no longer matches
    dump = write(tmp_path / "dump.jsonl", rows)
    # The target file's vectors are of another model: none of m1's are kept.
    target = tmp_path / "other.db"
    make_db(target, name="m2")
    status, out, err = run_cli(capsys, "import", str(target), str(dump))
    assert status == 0, err
    assert "1 vectors not kept: their text_hash is not that of their entry's text" in err
    assert "2 vectors of 'm1' (dim 3) not kept: the file's vectors are of 'm2' (dim 3)" in err
    calls, _ = open_with(target, "m2")
    # The imported ids replaced nothing (new ids), so all three texts are new rows; two
    # of them equal texts m2 already has vectors for (and are reused), the edited one
    # is embedded now.
    assert calls == ["edited after the export"]
    # Into a new file: m1's two trusted vectors are kept; the edited text is embedded.
    fresh = tmp_path / "fresh.db"
    status, out, err = run_cli(capsys, "import", str(fresh), str(dump))
    assert status == 0, err
    assert "kept 2 vectors of 'm1'" in err
    calls, _ = open_with(fresh, "m1")
    assert calls == ["edited after the export"]
    # Opened with another model, every vector is recomputed.
    calls, _ = open_with(fresh, "m3")
    assert sorted(calls) == sorted(["edited after the export", *TEXTS[1:]])


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"f32le": "@@@"}, "'vector': 'f32le' is not valid base64"),
        ({"dim": 4}, "'vector': 'f32le' holds 12 bytes, not 16 (4 float32 values)"),
        ({"f32le": base64.b64encode(struct.pack("<3f", 0, float("nan"), 1)).decode()},
         "'vector': 'f32le' holds a NaN or infinite value"),
        ({"text_hash": 7}, "'vector': 'text_hash' must be a string of 32 hex digits, not int"),
    ],
)  # fmt: skip
def test_a_malformed_vector_refuses_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, change: dict[str, Any], reason: str
) -> None:
    source = tmp_path / "m.db"
    make_db(source)
    status, out, _ = run_cli(capsys, "export", str(source))
    rows = lines(out)
    rows[1]["vector"].update(change)
    dump = write(tmp_path / "dump.jsonl", rows)
    target = tmp_path / "t.db"
    status, out, err = run_cli(capsys, "import", str(target), str(dump))
    assert (status, out) == (2, "")
    assert err == f"actormem import: error: {dump}:2: {reason}\n"
    assert not target.exists()  # nothing imported, no file left behind
    before = source.read_bytes()
    status, _, _ = run_cli(capsys, "import", str(source), str(dump))
    assert status == 2
    assert source.read_bytes() == before


def test_the_entry_document_is_what_the_hash_covers() -> None:
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="text", tags=("a", "b"))
    assert entry_document(entry) == "text a b"


def test_a_vector_of_another_dimension_is_not_kept(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    target = tmp_path / "t.db"
    make_db(target, name="m1")  # dim 3
    text = "a new text"
    vector = vector_to_json("m1", 4, text_hash(text), struct.pack("<4f", 1, 0, 0, 0))
    dump = write(tmp_path / "d.jsonl", [{"category": "fact", "memory": text, "vector": vector}])
    status, out, err = run_cli(capsys, "import", str(target), str(dump))
    assert status == 0, err
    assert "1 vectors of 'm1' (dim 4) not kept: the file's vectors are of 'm1' (dim 3)" in err
    calls, _ = open_with(target, "m1")
    assert calls == [text]


@pytest.mark.parametrize("values", [[0.0, 0.0, 0.0], [1e30, 1e30, 1e30], [1.0, 1.0, 1.0]])
def test_a_vector_not_of_unit_length_is_not_trusted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, values: list[float]
) -> None:
    source = tmp_path / "m.db"
    make_db(source, name="m1")
    _, out, _ = run_cli(capsys, "export", str(source))
    rows = lines(out)
    rows[0]["vector"]["f32le"] = base64.b64encode(struct.pack("<3f", *values)).decode()
    dump = write(tmp_path / "dump.jsonl", rows)
    fresh = tmp_path / "fresh.db"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy overflow warning either
        status, _, err = run_cli(capsys, "import", str(fresh), str(dump))
    assert status == 0, err
    assert "kept 2 vectors of 'm1'" in err
    assert "1 vectors not kept: their length is not 1" in err
    calls, _ = open_with(fresh, "m1")
    assert calls == [rows[0]["memory"]]


async def test_export_of_a_held_file_reads_its_vectors_as_a_live_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a running memory holds the file, ``export`` reads the entries by a live read,
    and its vectors must be read the same way (a plain read-only connection while a
    ``-wal`` exists: ``immutable`` would read without a lock while the holder commits)."""
    from actormem.cli import _main

    db = tmp_path / "m.db"
    calls: list[str] = []
    seen: list[bool] = []
    read = _main.read_stored_vectors

    def recording(path: str, *, live: bool = False) -> Any:
        seen.append(live)
        return read(path, live=live)

    monkeypatch.setattr(_main, "read_stored_vectors", recording)
    async with open_memory(path=db, scorer=DenseScorer(embedder=counting("m1", calls))) as held:
        await held.store_many([MemoryEntry(category=MemoryCategory.FACT, memory=t) for t in TEXTS])
        status = await trio.to_thread.run_sync(main, ["export", str(db)])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "live read" in err
    assert seen == [True]
    assert sorted(row["memory"] for row in lines(out)) == sorted(TEXTS)
    assert all("vector" in row for row in lines(out))


def test_export_reads_the_vectors_of_a_file_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file no running memory holds: ``export`` reads its vectors while it still holds
    the file itself. Read after its memory closed, a writer could open the file in
    between, and the read (``immutable`` while the new ``-wal`` is empty) would take no
    lock while that writer commits and checkpoints: two states of the file mixed."""
    import fcntl
    import os

    from actormem.cli import _main

    db = tmp_path / "m.db"
    make_db(db)
    free: list[bool] = []
    read = _main.read_stored_vectors

    def probing(path: str, *, live: bool = False) -> Any:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT)
        try:  # a writer's open takes this flock first: free means it could open now
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            free.append(True)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            free.append(False)
        finally:
            os.close(fd)
        return read(path, live=live)

    monkeypatch.setattr(_main, "read_stored_vectors", probing)
    status, out, err = run_cli(capsys, "export", str(db))
    assert status == 0, err
    assert "live read" not in err
    assert free == [False]
    assert all("vector" in row for row in lines(out))
