"""``actormem import``: all or nothing, stable ids, repeated ids, interrupts, a full disk."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
import trio

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage import sqlite as sqlite_store
from actormem.cli._main import main

from .test_cli import read_all, run_cli, store_all

ROOT = Path(__file__).resolve().parent.parent


def write_jsonl(path: Path, rows: list[dict[str, object]], *, bom: bool = False) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def calls(n: int, *, text: str = "") -> list[dict[str, object]]:
    return [
        {"source": "bench", "episode": f"e{i // 10}", "step": i % 10, "tool": "lookup",
         "input": {"q": i}, "result": f"result {i} {text}"}
        for i in range(n)
    ]  # fmt: skip


def test_running_an_import_twice_never_duplicates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rows = [*calls(5), {"category": "fact", "memory": "no id here"}]
    dump = write_jsonl(tmp_path / "d.jsonl", rows)
    db = tmp_path / "m.sqlite"
    status, out, err = run_cli(capsys, "import", str(db), str(dump))
    assert status == 0, err
    assert "6 new, 0 replaced; it now holds 6 entries" in out
    first = read_all(db)
    # The same lines written another way (keys reordered, spaced): the same ids.
    again = tmp_path / "again.jsonl"
    again.write_text(
        "".join(json.dumps(dict(reversed(r.items())), indent=None) + "\n" for r in rows),
        encoding="utf-8",
    )
    status, out, err = run_cli(capsys, "import", str(db), str(again))
    assert status == 0, err
    assert "0 new, 6 replaced; it now holds 6 entries" in out
    second = read_all(db)
    assert [e.id for e in second] == [e.id for e in first]
    assert [e.created_at for e in second] == [e.created_at for e in first]


def test_a_repeated_id_is_refused_naming_both_lines_unless_later_wins(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    id = str(uuid.uuid4())
    early = {"id": id, "category": "fact", "memory": "first text",
             "created_at": "2020-01-01T00:00:00+00:00"}
    late = {"id": id, "category": "insight", "memory": "second text",
            "created_at": "2024-06-01T00:00:00+00:00"}  # fmt: skip
    other = {"category": "fact", "memory": "unrelated"}
    dump = write_jsonl(tmp_path / "d.jsonl", [early, other, late])
    db = tmp_path / "m.sqlite"
    status, out, err = run_cli(capsys, "import", str(db), str(dump))
    assert (status, out) == (2, "")
    assert err == (
        f"actormem import: error: {dump}:3: the same id {id} as line 1; pass --later-wins "
        "to let the later line replace the earlier one\n"
    )
    assert not db.exists()
    # Two identical lines without ids have the same derived id: refused the same way.
    twice = write_jsonl(tmp_path / "twice.jsonl", [other, early, other])
    status, _, err = run_cli(capsys, "import", str(db), str(twice))
    assert status == 2
    assert f"{twice}:3: the same content (so the same derived id) as line 1" in err

    status, out, err = run_cli(capsys, "import", str(db), str(dump), "--later-wins")
    assert status == 0, err
    assert "1 repeated ids, later lines won" in out
    stored = {str(e.id): e for e in read_all(db)}
    assert len(stored) == 2
    kept = stored[id]  # entirely the later line: no mix of the two
    assert (kept.memory, kept.category) == ("second text", MemoryCategory.INSIGHT)
    assert kept.created_at.year == 2024


def test_a_byte_order_mark_is_accepted(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    dump = write_jsonl(tmp_path / "d.jsonl", calls(2), bom=True)
    db = tmp_path / "m.sqlite"
    status, out, err = run_cli(capsys, "import", str(db), str(dump))
    assert status == 0, err
    assert "(0 entries, 2 tool calls)" in out
    assert [e.memory for e in read_all(db)][0].startswith("tool=lookup;")


def test_a_full_disk_leaves_the_file_as_it_was(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own "database or disk is full" (SQLITE_FULL), made by capping the file's
    page count a few pages above its size, strikes in the middle of the import."""
    db = tmp_path / "m.sqlite"
    existing = [MemoryEntry.new(MemoryCategory.FACT, f"kept {i}") for i in range(20)]
    store_all(db, existing)
    connect = sqlite_store._connect

    def capped(path: str, durability: sqlite_store.Durability) -> sqlite3.Connection:
        conn = connect(path, durability)
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages + 40}")
        return conn

    monkeypatch.setattr(sqlite_store, "_connect", capped)
    dump = write_jsonl(tmp_path / "d.jsonl", calls(3000, text="x" * 400))
    status, out, err = run_cli(capsys, "import", str(db), str(dump))
    assert (status, out) == (2, "")
    assert "database or disk is full" in err
    assert err.count("\n") == 1
    monkeypatch.undo()
    assert read_all(db) == existing


CHILD = textwrap.dedent(
    """
    import sys
    from actormem._storage.sqlite import SqliteStore
    from actormem.cli._main import main

    write = SqliteStore.write

    def announced(self, batch):
        print("writing", flush=True)  # the parent sends SIGINT when it reads this
        return write(self, batch)

    SqliteStore.write = announced
    sys.exit(main(sys.argv[1:]))
    """
)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_an_import_leaves_all_or_nothing(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """A real SIGINT (Ctrl-C) or SIGTERM, sent once the import writes: the file then holds
    every line or none of them (never a part), and a signal that came in time says so in
    one line."""
    db = tmp_path / "m.sqlite"
    existing = [MemoryEntry.new(MemoryCategory.FACT, f"kept {i}") for i in range(5)]
    store_all(db, existing)
    n = 8_000
    dump = write_jsonl(tmp_path / "d.jsonl", calls(n, text="y" * 200))
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "import", str(db), str(dump)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert child.stdout is not None
    assert child.stdout.readline() == "writing\n"
    child.send_signal(signum)
    out, err = child.communicate(timeout=120)
    after = read_all(db)
    if child.returncode == 128 + signum:  # interrupted in time: nothing imported
        name = signal.Signals(signum).name
        assert err == (
            f"actormem import: interrupted ({name}): nothing imported: {db} is unchanged\n"
        )
        assert after == existing
    else:  # the commit had completed when the interrupt came: everything imported
        assert child.returncode == 0, err
        assert len(after) == len(existing) + n
    assert "Traceback" not in err
    assert not os.path.exists(f"{db}.lock")


# --------------------------------------------------------------------- salvage


def _damage_a_leaf_page(path: Path) -> int:
    """Overwrite one table-leaf page in the middle of ``path`` with junk; its number."""
    data = bytearray(path.read_bytes())
    size = int.from_bytes(data[16:18], "big")
    pages = len(data) // size
    for number in range(pages // 2, pages):
        offset = (number - 1) * size
        if data[offset] == 0x0D:  # a table B-tree leaf page
            data[offset : offset + size] = b"\xa5" * size
            path.write_bytes(bytes(data))
            return number
    raise AssertionError("no leaf page found")


def test_salvage_export_writes_every_readable_row_and_reports_the_rest(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from actormem._engine.bulk import store_all_or_nothing

    db = tmp_path / "m.sqlite"
    entries = [MemoryEntry.new(MemoryCategory.FACT, f"entry {i} " * 20) for i in range(1500)]
    store_all_or_nothing(db, entries)  # one transaction: quicker than 1,500 stores
    status, whole, err = run_cli(capsys, "export", "--salvage", str(db))
    assert status == 0
    assert err == f"actormem export: salvaged 1,500 entries from {db}; nothing skipped\n"
    status, plain, _ = run_cli(capsys, "export", str(db))
    assert (status, plain) == (0, whole)  # an undamaged file: the same as a plain export

    _damage_a_leaf_page(db)
    damaged = db.read_bytes()
    status, out, err = run_cli(capsys, "export", str(db))
    assert (status, out) == (2, "")  # a plain export refuses the file
    status, out, err = run_cli(capsys, "export", "--salvage", str(db))
    assert status == 1
    got = [json.loads(line) for line in out.splitlines()]
    by_id = {str(e.id): e for e in entries}
    from actormem._storage.jsonl import entry_from_json

    salvaged = [entry_from_json(row) for row in got]
    assert all(by_id[str(e.id)] == e for e in salvaged)  # every row written is exact
    lost = [e for e in entries if e not in set(salvaged)]
    assert 0 < len(lost) < 100  # one page's worth
    first, last = entries.index(lost[0]), entries.index(lost[-1])
    assert lost == entries[first : last + 1]  # one contiguous run of rows
    assert salvaged == entries[:first] + entries[last + 1 :]  # in order, nothing else
    assert err.startswith(f"actormem export: salvaged {len(salvaged):,} entries from {db}; ")
    assert "1 unreadable regions skipped (entries after seq " in err
    assert err.count("\n") == 1
    assert db.read_bytes() == damaged  # salvaging writes nothing


def test_salvage_reads_what_a_truncated_file_still_holds(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A file cut short is shorter than its header's page count, which SQLite refuses
    outright: a reviewer's truncated file salvaged 0 of 1,635 entries."""
    from actormem._engine.bulk import store_all_or_nothing
    from actormem._storage.jsonl import entry_from_json

    db = tmp_path / "m.sqlite"
    entries = [MemoryEntry.new(MemoryCategory.FACT, f"entry {i} " * 20) for i in range(1500)]
    store_all_or_nothing(db, entries)
    size = db.stat().st_size
    with db.open("r+b") as handle:
        handle.truncate(size // 2)
    cut = db.read_bytes()
    status, out, err = run_cli(capsys, "export", "--salvage", str(db))
    assert status == 1
    salvaged = [entry_from_json(json.loads(line)) for line in out.splitlines()]
    assert len(salvaged) > 300  # most rows of the surviving half
    assert salvaged == [e for e in entries if e in set(salvaged)]  # exact, in order
    assert "unreadable regions skipped" in err
    assert db.read_bytes() == cut  # salvaging writes nothing (it reads a padded copy)


def test_salvage_reads_a_version_1_file_without_upgrading_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from .test_payload import write_version_1_file

    db = tmp_path / "old.sqlite"
    write_version_1_file(db)
    before = db.read_bytes()
    status, out, err = run_cli(capsys, "export", "--salvage", str(db))
    assert status == 0, err
    (row,) = [json.loads(line) for line in out.splitlines()]
    assert (row["memory"], row["namespace"], row["access_count"]) == ("old text", ["ns"], 2)
    assert db.read_bytes() == before


def test_import_gives_a_ttl_line_its_expiry(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    dump = write_jsonl(tmp_path / "d.jsonl", [{"category": "fact", "memory": "m", "ttl": 3600}])
    db = tmp_path / "m.sqlite"
    status, _, err = run_cli(capsys, "import", str(db), str(dump))
    assert status == 0, err
    (entry,) = read_all(db)
    assert entry.expires_at is not None
    assert (entry.expires_at - entry.created_at).total_seconds() == pytest.approx(3600, abs=60)


def test_a_repeated_namespace_and_key_is_refused_like_an_id(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    first = {"category": "fact", "memory": "old", "namespace": ["u"], "key": "city"}
    second = {"category": "fact", "memory": "new", "namespace": ["u"], "key": "city"}
    elsewhere = {"category": "fact", "memory": "other", "namespace": ["v"], "key": "city"}
    dump = write_jsonl(tmp_path / "d.jsonl", [first, elsewhere, second])
    db = tmp_path / "m.sqlite"
    status, _, err = run_cli(capsys, "import", str(db), str(dump))
    assert status == 2
    assert f"{dump}:3: the same namespace and key 'city' as line 1; " in err
    status, _, err = run_cli(capsys, "import", str(db), str(dump), "--later-wins")
    assert status == 0, err
    assert sorted(e.memory for e in read_all(db)) == ["new", "other"]


# --------------------------------------------------------------------- counters


async def test_statistics_counters_continue_across_reopens(tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    a, b, c = (MemoryEntry.new(MemoryCategory.FACT, f"same words {i}") for i in range(3))
    async with open_memory(path=db) as memory:
        for entry in (a, b, c, a):  # the second a is an upsert
            await memory.store(entry)
        await memory.delete(b.id)
        await memory.retrieve("same words", 2)
        await memory.consolidate()
        first = memory.statistics()
    assert (first.stores, first.upserts, first.deletes, first.retrieves) == (4, 1, 1, 1)
    async with open_memory(path=db) as memory:
        reopened = memory.statistics()
        assert (reopened.stores, reopened.upserts, reopened.deletes) == (4, 1, 1)
        assert (reopened.retrieves, reopened.consolidations) == (1, 1)
        assert reopened.access_updates == first.access_updates
        await memory.store(MemoryEntry.new(MemoryCategory.FACT, "one more"))
    async with open_memory(path=db) as memory:
        assert memory.statistics().stores == 5


def test_looking_at_a_file_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """stats, export and query change no counter, so closing writes no counters."""
    db = tmp_path / "m.sqlite"
    store_all(db, [MemoryEntry.new(MemoryCategory.FACT, f"same words {i}") for i in range(3)])
    before = db.read_bytes()
    for command in (["stats"], ["export"], ["query", "same"], ["export", "--salvage"]):
        assert main([command[0], str(db), *command[1:]]) in (0, 1)
    assert db.read_bytes() == before
    assert not os.path.exists(f"{db}-wal")


def test_an_import_counts_its_stores(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "m.sqlite"
    store_all(db, [MemoryEntry.new(MemoryCategory.FACT, "kept")])
    dump = write_jsonl(tmp_path / "d.jsonl", calls(3))
    assert run_cli(capsys, "import", str(db), str(dump))[0] == 0

    async def stores() -> int:
        async with open_memory(path=db) as memory:
            return memory.statistics().stores

    assert trio.run(stores) == 4
