"""The ``actormem`` command: inspecting memory files, import/export, bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import attrs
import pytest
import trio

import actormem
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._storage.jsonl import JsonlError, entry_from_json, entry_to_json
from actormem.agent._toolcalls import read_tool_calls
from actormem.cli._main import main


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err


def varied_entries() -> list[MemoryEntry]:
    """Entries that use every field, including the awkward values."""
    t0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    return [
        MemoryEntry(
            id=uuid.UUID(int=i + 1),
            category=category,
            memory=text,
            tags=tags,
            created_at=t0 + timedelta(days=i),
            relevance=relevance,
            access_count=i * 7,
            validated=i % 2 == 0,
            namespace=namespace,
            last_accessed=None if i % 3 == 0 else t0 + timedelta(hours=i),
        )
        for i, (category, text, tags, relevance, namespace) in enumerate(
            [
                (MemoryCategory.FACT, "deploy uses the blue cluster", ("infra",), 1.0, ()),
                (MemoryCategory.INSIGHT, "ünïcödé 日本語 🧠\nline two", (), 0.1 + 0.2, ("t",)),
                (MemoryCategory.TRAJECTORY, "", ("a", "b c"), 0.0, ("t", "acme")),
                (MemoryCategory.ERROR_PATTERN, '"quoted" \\ back', (), 5e-324, ("日本",)),
                (MemoryCategory.STRATEGY, "x" * 5000, ("long",), 0.75, ()),
                (MemoryCategory.WORKING, "  spaced  ", (), 0.5, ("w",)),
            ]
        )
    ]


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_entry_json_round_trips_every_field() -> None:
    for entry in varied_entries():
        assert entry_from_json(json.loads(json.dumps(entry_to_json(entry)))) == entry
    other_zone = datetime(2026, 6, 1, 12, tzinfo=timezone(timedelta(hours=-7)))
    entry = MemoryEntry(category=MemoryCategory.FACT, memory="tz", created_at=other_zone)
    assert entry_from_json(entry_to_json(entry)).created_at == other_zone
    # Public, and keyed by the fields' public names (attrs.asdict says ``_id``).
    assert actormem.entry_to_json is entry_to_json
    assert actormem.entry_from_json is entry_from_json
    assert set(entry_to_json(entry)) == {f.alias for f in attrs.fields(MemoryEntry)}
    assert "id" in entry_to_json(entry)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"memory": "m"}, "missing 'category'"),
        ({"category": "fact"}, "missing 'memory'"),
        ({"category": "nope", "memory": "m"}, "unknown category 'nope'"),
        ({"category": "fact", "memory": "m", "colour": 1}, "unknown key 'colour'"),
        ({"category": "fact", "memory": "m", "id": "x"}, "'id' is not a UUID"),
        ({"category": "fact", "memory": "m", "relevance": 2}, "relevance"),
        ({"category": "fact", "memory": "m", "created_at": "2026-01-01"}, "no UTC offset"),
        ({"category": "fact", "memory": "m", "tags": "a"}, "'tags' must be a list"),
        ({"category": "fact", "memory": "m", "validated": 1}, "'validated' must be"),
        ({"category": "fact", "memory": 3}, "'memory' must be a string"),
    ],
)
def test_entry_json_refusals(row: dict[str, object], reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        entry_from_json(row)


def test_tool_call_file_errors_name_the_file_and_line(tmp_path: Path) -> None:
    good = {"source": "s", "episode": "e", "step": 0, "tool": "t", "input": {}, "result": "r"}
    cases = [
        (["{not json"], 1, "not JSON"),
        ([json.dumps(good), "[1, 2]"], 2, "expected a JSON object"),
        ([json.dumps(good), "", json.dumps({**good, "step": -1})], 3, "'step' must be >= 0"),
        ([json.dumps({**good, "step": True})], 1, "'step' must be an integer"),
        ([json.dumps({**good, "result": 3})], 1, "'result' must be a string"),
        ([json.dumps({**good, "reward": "high"})], 1, "'reward' must be a number"),
        ([json.dumps({k: v for k, v in good.items() if k != "input"})], 1, "missing 'input'"),
    ]
    for lines, number, reason in cases:
        path = tmp_path / "calls.jsonl"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        with pytest.raises(JsonlError, match=reason) as info:
            read_tool_calls(path)
        assert info.value.line == number
        assert str(info.value).startswith(f"{path}:{number}: ")
    (tmp_path / "bad.jsonl").write_bytes(b'{"a": "\xff"}\n')
    with pytest.raises(JsonlError, match=r"bad.jsonl:1: not UTF-8"):
        read_tool_calls(tmp_path / "bad.jsonl")
    with pytest.raises(JsonlError, match=r"absent.jsonl: no such file"):
        read_tool_calls(tmp_path / "absent.jsonl")


# --------------------------------------------------------------------- bad input at the CLI


def test_unknown_option_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_cli(capsys, "swarm", "--bogus")
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "unrecognized arguments: --bogus" in err
    status, _, err = run_cli(capsys, "swarm", "--agents", "0")
    assert status == 2
    assert err.count("\n") == 1
    assert "--agents" in err
    status, _, err = run_cli(capsys)
    assert status == 2
    assert err.count("\n") == 1


def test_swarm_names_a_missing_or_malformed_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status, out, err = run_cli(capsys, "swarm", "--tool-calls", str(tmp_path / "nope.jsonl"))
    assert status == 2
    assert out == ""
    assert err == f"actormem swarm: error: {tmp_path / 'nope.jsonl'}: no such file\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "s"}\n', encoding="utf-8")
    status, out, err = run_cli(capsys, "swarm", "--tool-calls", str(bad), "--in-memory")
    assert status == 2
    assert err.startswith(f"actormem swarm: error: {bad}:1: not a tool call: missing 'episode'")
    assert err.count("\n") == 1


def test_help_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "swarm", "--help")
    assert status == 0
    assert "--tool-calls" in out
    assert "--capacity" in out


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "actormem", "stats", "/nonexistent/memory.sqlite"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr == "actormem stats: error: /nonexistent/memory.sqlite: no such file\n"


# --------------------------------------------------------------------- memory files


def store_all(path: Path, entries: list[MemoryEntry]) -> None:
    async def run() -> None:
        async with open_memory(path=path) as memory:
            for entry in entries:
                await memory.store(entry)

    trio.run(run)


def read_all(path: Path) -> list[MemoryEntry]:
    async def run() -> list[MemoryEntry]:
        async with open_memory(path=path) as memory:
            return list(memory.snapshot())

    return trio.run(run)


def test_export_then_import_round_trips_every_field(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    entries = varied_entries()
    source = tmp_path / "source.sqlite"
    store_all(source, entries)
    status, exported, err = run_cli(capsys, "export", str(source))
    assert status == 0, err
    lines = exported.splitlines()
    assert len(lines) == len(entries)
    assert [entry_from_json(json.loads(line)) for line in lines] == entries
    dump = write_jsonl(tmp_path / "dump.jsonl", [json.loads(line) for line in lines])
    copy = tmp_path / "copy.sqlite"
    status, out, err = run_cli(capsys, "import", str(copy), str(dump))
    assert status == 0, err
    assert f"imported {len(entries)} lines ({len(entries)} entries, 0 tool calls)" in out
    assert read_all(copy) == entries
    status, again, _ = run_cli(capsys, "export", str(copy))
    assert again == exported


def test_import_tool_calls_then_query_and_stats(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    calls = write_jsonl(
        tmp_path / "calls.jsonl",
        [
            {"source": "bench", "episode": "e1", "step": 0, "tool": "get_user",
             "input": {"user_id": "mia_li"}, "result": "Mia Li lives in Austin", "reward": 1},
            {"source": "bench", "episode": "e1", "step": 1, "tool": "book_flight",
             "input": {"to": "LAX"}, "result": "booked HAT170 to LAX"},
            {"category": "fact", "memory": "the blue cluster serves Austin"},
        ],
    )  # fmt: skip
    db = tmp_path / "memory.sqlite"
    status, out, err = run_cli(capsys, "import", str(db), str(calls))
    assert status == 0, err
    assert "(1 entries, 2 tool calls)" in out
    assert "now holds 3 entries" in out
    stored = read_all(db)
    assert stored[0].memory == (
        'tool=get_user; input={"user_id":"mia_li"}; result=Mia Li lives in Austin'
    )
    assert stored[0].namespace == ("bench", "e1")
    assert stored[0].category is MemoryCategory.TRAJECTORY

    status, out, err = run_cli(capsys, "query", str(db), "flight to LAX", "-k", "2")
    assert status == 0, err
    lines = out.splitlines()
    assert len(lines) == 4  # two entries, two lines each
    assert lines[0].startswith("  1  ")
    assert str(stored[1].id) in lines[0]
    assert "bench/e1" in lines[0]
    assert "booked HAT170 to LAX" in lines[1]
    assert read_all(db) == stored  # looking changes nothing (no access bookkeeping)

    status, out, err = run_cli(capsys, "stats", str(db))
    assert status == 0, err
    assert "entries: 3" in out.splitlines()
    assert "  trajectory: 2" in out.splitlines()
    assert "  fact: 1" in out.splitlines()


def test_bad_import_leaves_nothing_behind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    good = {"category": "fact", "memory": "fine"}
    also = {"category": "fact", "memory": "fine too"}
    bad = write_jsonl(tmp_path / "bad.jsonl", [good, also, {"category": "fact", "memory": 3}])
    fresh = tmp_path / "fresh.sqlite"
    status, out, err = run_cli(capsys, "import", str(fresh), str(bad))
    assert status == 2
    assert out == ""
    assert err == f"actormem import: error: {bad}:3: 'memory' must be a string, not int\n"
    assert not fresh.exists()
    existing = tmp_path / "existing.sqlite"
    entries = varied_entries()[:2]
    store_all(existing, entries)
    status, _, err = run_cli(capsys, "import", str(existing), str(bad))
    assert status == 2
    assert read_all(existing) == entries
    status, _, err = run_cli(capsys, "import", str(existing), str(tmp_path / "gone.jsonl"))
    assert status == 2
    assert err == f"actormem import: error: {tmp_path / 'gone.jsonl'}: no such file\n"
    deep = tmp_path / "deep.jsonl"
    deep.write_text(json.dumps(good) + "\n" + "[" * 100_000 + "\n", encoding="utf-8")
    status, _, err = run_cli(capsys, "import", str(existing), str(deep))
    assert (status, err) == (2, f"actormem import: error: {deep}:2: JSON nested too deep\n")
    assert read_all(existing) == entries


def test_inspecting_a_missing_or_foreign_file_fails_cleanly(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.sqlite"
    for command in (
        ["stats", str(missing)],
        ["export", str(missing)],
        ["query", str(missing), "x"],
    ):
        status, out, err = run_cli(capsys, *command)
        assert status == 2
        assert out == ""
        assert err == f"actormem {command[0]}: error: {missing}: no such file\n"
    assert not missing.exists()
    foreign = tmp_path / "notes.txt"
    foreign.write_text("not a database\n" * 100, encoding="utf-8")
    status, out, err = run_cli(capsys, "stats", str(foreign))
    assert status == 2
    assert err.startswith(f"actormem stats: error: {foreign}")
    assert err.count("\n") == 1
    assert foreign.read_text(encoding="utf-8") == "not a database\n" * 100


def test_query_an_empty_memory(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = tmp_path / "empty.sqlite"
    store_all(db, [])
    status, out, _ = run_cli(capsys, "query", str(db), "anything")
    assert status == 0
    assert out == "no entries\n"
    status, out, _ = run_cli(capsys, "export", str(db))
    assert status == 0
    assert out == ""


def test_eval_is_mounted(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run_cli(capsys, "eval", "locomo", "--help")
    assert status == 0
    assert "--conversation" in out


# --------------------------------------------------------------------- review fixes


def test_unknown_option_names_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run_cli(capsys, "swarm", "--bogus")
    assert (status, out) == (2, "")
    assert err == "actormem swarm: error: unrecognized arguments: --bogus (see --help)\n"


@pytest.mark.parametrize("target", ["missing-dir/out.json", "."])
def test_swarm_checks_the_json_target_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, target: str
) -> None:
    out_path = tmp_path / target
    status, out, err = run_cli(
        capsys, "swarm", "--episodes", "5", "--in-memory", "--json", str(out_path)
    )
    assert (status, out) == (2, "")  # refused before the run printed anything
    assert err.count("\n") == 1
    assert err.startswith(f"actormem swarm: error: --json {out_path}: ")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_swarm_tries_the_json_target_for_real(capsys: pytest.CaptureFixture[str]) -> None:
    # access() says root may write in /proc; creating a file there fails all the same.
    status, out, err = run_cli(
        capsys, "swarm", "--episodes", "5", "--in-memory", "--json", "/proc/out.json"
    )
    assert (status, out) == (2, "")
    assert err == (
        "actormem swarm: error: --json /proc/out.json: not writable: /proc: its file system "
        "takes no new files\n"
    )


def test_swarm_json_options_hold_every_option(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    report = tmp_path / "r.json"
    status, _, err = run_cli(
        capsys, "swarm", "--episodes", "3", "--agents", "2", "--in-memory",
        "--interval", "7", "--json", str(report),
    )  # fmt: skip
    assert status == 0, err
    options = json.loads(report.read_text())["options"]
    from actormem.cli._main import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices["swarm"]  # type: ignore[union-attr]
    dests = {a.dest for a in sub._actions if a.dest != "help"}
    assert dests <= set(options)
    assert options["interval"] == 7.0


EVIL = "evil \x1b[2J\x1b]0;pwned\x07 \x1b[31mRED \x9b \u202e x"


def test_printed_memory_text_has_no_control_characters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from actormem.cli._main import printable

    assert printable("a\nb\\c\x1b\x9b\u202e\U000e0041 é") == (
        "a\\nb\\\\c\\x1b\\x9b\\u202e\\U000e0041 é"
    )
    path = tmp_path / "m.sqlite"
    store_all(path, [MemoryEntry(category=MemoryCategory.FACT, memory=EVIL, namespace=("n\x1b",))])
    for argv in (("query", str(path), "evil"), ("stats", str(path))):
        status, out, err = run_cli(capsys, *argv)
        assert status == 0, err
        assert out.isascii() or all(c.isprintable() or c == "\n" for c in out)
        assert not {"\x1b", "\x9b", "\u202e"} & set(out)
    status, out, _ = run_cli(capsys, "query", str(path), "evil")
    assert "evil \\x1b[2J\\x1b]0;pwned\\x07 \\x1b[31mRED \\x9b \\u202e x" in out
    status, out, _ = run_cli(capsys, "export", str(path))
    assert status == 0
    assert all(c.isprintable() or c == "\n" for c in out)
    assert json.loads(out)["memory"] == EVIL


def test_closed_stdout_exits_quietly(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    store_all(path, [MemoryEntry.new(MemoryCategory.FACT, f"entry {i} " * 30) for i in range(3000)])
    for command in ("export", "stats", "query"):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first write: deterministic EPIPE
        argv = [sys.executable, "-m", "actormem", command, str(path)]
        done = subprocess.run(
            argv + (["entry"] if command == "query" else []),
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
        os.close(write_end)
        assert done.stderr == ""
        assert done.returncode == 141


def test_import_refuses_a_count_the_file_cannot_hold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    huge = {"category": "fact", "memory": "x", "access_count": 10**23}
    good = {"category": "fact", "memory": "ok", "access_count": 2**63 - 1}
    dump = write_jsonl(tmp_path / "d.jsonl", [good, huge])
    fresh = tmp_path / "fresh.sqlite"
    status, out, err = run_cli(capsys, "import", str(fresh), str(dump))
    assert (status, out) == (2, "")
    assert err == (
        f"actormem import: error: {dump}:2: 'access_count' must be at most 2**63 - 1, "
        f"got {10**23}\n"
    )
    assert list(tmp_path.iterdir()) == [dump]
    existing = tmp_path / "existing.sqlite"
    store_all(existing, varied_entries()[:2])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    status, _, _ = run_cli(capsys, "import", str(existing), str(dump))
    assert status == 2
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_failed_import_into_a_new_path_removes_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from actormem import StorageError
    from actormem._storage.sqlite import Batch, SqliteStore

    def fail(self: SqliteStore, batch: Batch) -> None:
        raise StorageError(str(tmp_path), "disk full (simulated)")

    monkeypatch.setattr(SqliteStore, "write", fail)
    dump = write_jsonl(tmp_path / "d.jsonl", [{"category": "fact", "memory": "ok"}])
    status, _, err = run_cli(capsys, "import", str(tmp_path / "new.sqlite"), str(dump))
    assert status == 2
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [dump]


def test_errors_are_one_line() -> None:
    from actormem.cli._main import error_line

    report = (
        "x.db: corrupted: *** in database main ***\nOn tree page 8 cell 1: bad\n"
        "On tree page 8 cell 2: bad\nrow 3 missing from index i"
    )
    assert error_line(report) == (
        "x.db: corrupted (quick_check: 3 problems; first: On tree page 8 cell 1: bad)"
    )
    assert error_line("x.db: corrupted (malformed)") == "x.db: corrupted (malformed)"
    assert error_line("a\nb\x1b") == "a; b\\x1b"


def test_corrupted_file_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    store_all(path, [MemoryEntry.new(MemoryCategory.FACT, f"entry {i} " * 30) for i in range(2000)])
    data = bytearray(path.read_bytes())
    for offset in range(8192, len(data) // 2, 4096 * 7):
        data[offset + 20 : offset + 320] = b"\xff" * 300
    path.write_bytes(bytes(data))
    status, out, err = run_cli(capsys, "stats", str(path))
    assert (status, out) == (2, "")
    assert err.count("\n") == 1
    assert "corrupted (quick_check: " in err


@pytest.mark.parametrize("kept", ["bm25", "word-overlap"])
def test_query_stats_and_export_leave_the_files_index_image_as_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kept: str
) -> None:
    """A file whose index image is of one scorer (its program's) is left byte-identical by
    ``query`` with the other scorer, ``stats`` and ``export`` (docs/cli.md: they write
    nothing): they must not replace the image, which the program's next open restores."""
    from actormem import BM25Scorer, WordOverlapScorer

    path = tmp_path / "m.sqlite"

    async def fill() -> None:
        scorer = BM25Scorer() if kept == "bm25" else WordOverlapScorer()
        async with open_memory(path=path, scorer=scorer) as memory:
            for entry in varied_entries():
                await memory.store(entry)

    trio.run(fill)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    other = "word-overlap" if kept == "bm25" else "bm25"
    for argv in (
        ("query", str(path), "deploy", "--scorer", other),
        ("query", str(path), "deploy", "--scorer", kept),
        ("query", str(path), "deploy"),
        ("stats", str(path)),
        ("export", str(path)),
    ):
        status, _, _ = run_cli(capsys, *argv)
        assert status == 0, argv
        assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before, argv
