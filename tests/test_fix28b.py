"""Review 28b's defects: expired entries seen by some reads only, read-only CLI commands
that changed the file, an operator nested in a ``where`` object silently ignored.

* Every read of a snapshot (``get``, ``in``, iteration, ``len``, ``retrieve``) judges
  expiry at the snapshot's time, and ``len(memory)`` / ``statistics().entries`` count
  unexpired entries only, as ``Memory.get`` and ``retrieve`` always did.
* ``actormem export``, ``stats`` and ``query`` leave the file's bytes as they were (no
  sweep of expired rows, no counters rewritten); ``import`` reports the entries that are
  already expired apart.
* ``{"user": {"age": {"$gt": 2}}}`` means ``{"user.age": {"$gt": 2}}`` in the engine.
"""

from __future__ import annotations

import json
import logging
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import trio

from actormem import InvalidQueryError, MemoryCategory, MemoryEntry, open_memory
from actormem._json import JsonObject, compile_where

from .test_cli import run_cli

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fact(text: str, **fields: object) -> MemoryEntry:
    return MemoryEntry(category=MemoryCategory.FACT, memory=text, **fields)  # type: ignore[arg-type]


# ------------------------------------------------------------------ expiry in reads


async def test_every_snapshot_read_hides_an_expired_entry() -> None:
    now = [T0]
    async with open_memory(clock=lambda: now[0]) as m:
        gone = fact("secret token abc", ttl=10)
        kept = fact("secret kept")
        await m.store_many([gone, kept])
        now[0] += timedelta(seconds=60)  # expired by the memory's clock, not yet swept
        s = m.snapshot()
        assert await m.get(gone.id) is None
        assert s.get(gone.id) is None
        assert gone.id not in s
        assert kept.id in s
        assert [e.id for e in s] == [kept.id]
        assert len(s) == 1
        assert not s.is_empty()
        assert [e.id for e in s.retrieve("secret", 5)] == [kept.id]
        assert len(m) == 1
        assert not m.is_empty()
        assert m.statistics().entries == 1
        assert "entries=1" in repr(m)


async def test_a_snapshot_judges_expiry_at_its_own_time() -> None:
    now = [T0]
    async with open_memory(clock=lambda: now[0]) as m:
        e = fact("short lived", ttl=10)
        await m.store(e)
        before = m.snapshot()
        now[0] += timedelta(seconds=60)
        # Taken before the expiry: every read of it still sees the entry, consistently.
        assert before.get(e.id) is not None
        assert e.id in before
        assert len(before) == 1
        assert [x.id for x in before.retrieve("short lived", 5)] == [e.id]
        after = m.snapshot()
        assert after.get(e.id) is None
        assert len(after) == 0
        assert after.retrieve("short", 5) == []


async def test_len_of_a_snapshot_older_than_the_memory() -> None:
    # The snapshot is no longer the working version when len is first asked: the count
    # walks its records instead of the expiry order.
    now = [T0]
    async with open_memory(clock=lambda: now[0]) as m:
        a, b = fact("a one", ttl=10), fact("b two", ttl=100)
        await m.store_many([a, b, fact("c three")])
        now[0] += timedelta(seconds=60)
        s = m.snapshot()
        await m.delete(b.id)
        await m.store(fact("d four", ttl=5))
        assert len(s) == 2  # b and c: a expired; b's later delete is not seen
        assert {x.memory for x in s} == {"b two", "c three"}
        assert len(m) == 2  # c and d
        now[0] += timedelta(seconds=10)
        assert len(m) == 1  # d expired too
        assert len(s) == 2  # the snapshot's time does not move


async def test_a_file_reopened_after_its_entries_expired(tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    async with open_memory(path=path, clock=lambda: T0) as m:
        await m.store_many([fact("gone", ttl=1), fact("stays")])
    later = T0 + timedelta(seconds=60)
    async with open_memory(path=path, clock=lambda: later) as m:
        # Right after opening, before the owner's sweep has run.
        assert [e.memory for e in m.snapshot()] == ["stays"]
        assert len(m) == 1


# ------------------------------------------------------------------ read-only CLI


def _expired_file(path: Path) -> None:
    async def main() -> None:
        past = datetime.now(UTC) - timedelta(days=1)
        async with open_memory(path=path, clock=lambda: past) as m:
            await m.store_many([fact("short lived secret", ttl=1), fact("lasting")])

    trio.run(main)


def test_read_commands_leave_a_file_with_expired_entries_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ttl.db"
    _expired_file(path)
    before = path.read_bytes()
    for _ in range(2):  # the second export finds the same file, so the same lines
        status, out, err = run_cli(capsys, "export", str(path))
        assert status == 0
        assert [json.loads(line)["memory"] for line in out.splitlines()] == ["lasting"]
        assert "1 expired entries not exported" in err
        assert path.read_bytes() == before
    status, out, _ = run_cli(capsys, "stats", str(path))
    assert status == 0
    assert "entries: 1\n" in out
    assert "expired: 1 " in out
    assert "fact: 1\n" in out
    status, out, _ = run_cli(capsys, "query", str(path), "secret")
    assert status == 0
    assert "short lived secret" not in out
    assert path.read_bytes() == before

    async def reopen() -> int:
        async with open_memory(path=path) as m:  # a writer: its owner sweeps
            await m.sweep_expired()
            return len(m)

    assert trio.run(reopen) == 1
    assert path.read_bytes() != before


def test_a_read_after_an_import_leaves_the_file_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # import saves counters without "retrieves"; a read closing with retrieves 0 wrote
    # them again.
    path, lines = tmp_path / "m.db", tmp_path / "in.jsonl"
    lines.write_text(json.dumps({"category": "fact", "memory": "x"}) + "\n", encoding="utf-8")
    assert run_cli(capsys, "import", str(path), str(lines))[0] == 0
    before = path.read_bytes()
    assert run_cli(capsys, "stats", str(path))[0] == 0
    assert run_cli(capsys, "export", str(path))[0] == 0
    assert path.read_bytes() == before


def test_import_reports_already_expired_lines_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, lines = tmp_path / "m.db", tmp_path / "in.jsonl"
    rows = [
        {"category": "fact", "memory": "a"},
        {"category": "fact", "memory": "b expired", "expires_at": "2000-01-01T00:00:00+00:00"},
        {"category": "fact", "memory": "c"},
    ]
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    status, out, _ = run_cli(capsys, "import", str(path), str(lines))
    assert status == 0
    assert "3 new, 0 replaced; it now holds 2 entries (and 1 already expired" in out
    status, out, _ = run_cli(capsys, "stats", str(path))
    assert "entries: 2\n" in out


# ------------------------------------------------------------------ nested operators


def _matches(where: dict[str, object], value: dict[str, object]) -> bool:
    predicate = compile_where(where)
    assert predicate is not None
    return predicate(JsonObject(value))


@pytest.mark.parametrize(
    ("nested", "dotted"),
    [
        ({"user": {"age": {"$gt": 2}}}, {"user.age": {"$gt": 2}}),
        ({"user": {"age": {"$lte": 2}}}, {"user.age": {"$lte": 2}}),
        (
            {"user": {"name": "ada", "age": {"$gte": 3}}},
            {"user.name": "ada", "user.age": {"$gte": 3}},
        ),
        ({"a": {"b": {"c": {"$ne": 1}}}}, {"a.b.c": {"$ne": 1}}),
        ({"user.x": {"age": {"$lt": 9}}}, {"user.x.age": {"$lt": 9}}),
    ],
)
def test_an_operator_nested_in_an_object_is_its_dotted_path(
    nested: dict[str, object], dotted: dict[str, object]
) -> None:
    values: list[dict[str, object]] = [
        {"user": {"name": "ada", "age": 3, "x": {"age": 1}}, "a": {"b": {"c": 2}}},
        {"user": {"name": "bob", "age": 1, "x": {"age": 10}}, "a": {"b": {"c": 1}}},
        {"user": {"name": "ada"}},
        {"user": 3},
        {},
    ]
    got = [_matches(nested, v) for v in values]
    assert got == [_matches(dotted, v) for v in values]
    assert any(got)


def test_a_plain_nested_object_still_matches_the_fields_it_names() -> None:
    where = {"user": {"name": "ada"}}
    assert _matches(where, {"user": {"name": "ada", "age": 3}})
    assert not _matches(where, {"user": {"name": "bob"}})


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ({"user": {"age": {"$foo": 2}}}, "unknown operator '\\$foo'"),
        ({"user": {"$gt": 1, "x": 2}}, "unknown operator 'x'"),
        ({"user": {"a b": {"$gt": 2}}}, "Invalid filter key 'a b'"),
    ],
)
def test_a_bad_nested_operator_is_an_error(where: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidQueryError, match=message):
        compile_where(where)


async def test_retrieve_with_a_nested_operator() -> None:
    async with open_memory() as m:
        await m.store(fact("u", value={"user": {"name": "ada", "age": 3}}))
        for where in ({"user.age": {"$gt": 2}}, {"user": {"age": {"$gt": 2}}}):
            assert [e.memory for e in await m.retrieve("u", 3, where=where)] == ["u"]
        assert await m.retrieve("u", 3, where={"user": {"age": {"$gt": 3}}}) == []
        with pytest.raises(InvalidQueryError):
            await m.retrieve("u", 3, where={"user": {"age": {"$gtt": 3}}})


# ------------------------------------------------------------------ agent (docs/agent.md)


async def test_a_trajectory_that_cannot_be_formatted_is_logged_not_stored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from actormem.agent import MemoryHooks

    async with open_memory() as m:
        hooks = MemoryHooks(m)
        with caplog.at_level(logging.WARNING, logger="actormem.agent"):
            await hooks.after_tool_call("read", {"x": math.nan}, "ok")
        assert len(m) == 0
        assert any(r.levelno == logging.WARNING for r in caplog.records)
