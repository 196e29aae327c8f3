"""Child process of the durability tests, and the parent's side of a SIGKILL trial.

Usage (the child side)::

    python tests/crash_child.py store PATH SEED START WRITERS [CHUNK]
        Store make_entry(SEED, i) for i = START, START + 1, ... from WRITERS concurrent
        tasks, forever; print "i id" (flushed) once each store has returned. With CHUNK,
        each task stores CHUNK entries at a time by ``store_many`` and prints their lines
        once it has returned. The environment variable ACTORMEM_TEST_CHECKPOINT_FRAMES,
        if set, replaces ``sqlite.CHECKPOINT_FRAMES`` (more checkpoints);
        ACTORMEM_TEST_C_COMMIT (0 or 1) sets ``sqlite._C_COMMIT``; with
        ACTORMEM_TEST_RETRIEVE=1 each task also retrieves after each store (access
        updates in the commits; the entries read back then differ in their access
        bookkeeping); ACTORMEM_TEST_ACCESS_PENDING and ACTORMEM_TEST_ACCESS_DELAY, if
        set, replace ``sqlite.ACCESS_PENDING`` and ``ACCESS_DELAY`` (seconds).
        ACTORMEM_TEST_DURABILITY (normal or full; default normal) is the
        memory's ``durability`` (``full``: the runs of stores committed with fsync).
    python tests/crash_child.py hold PATH
        Open the durable memory at PATH, print "ready", and wait to be killed.
    python tests/crash_child.py try-open PATH [--drop-dac]
        Try to open PATH; print one JSON object: {"error": reason} or {"entries": n}.
        --drop-dac first drops the capabilities that let root ignore file permissions
        (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER), so a read-only directory
        is read-only even when the tests run as root (Linux only).

The parent side is :func:`run_trial`, used by ``tests/test_durable.py`` and
``stress/crash_loop.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import trio

# The checkout this file belongs to, ahead of any installed copy (worktrees, clean clones).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import actormem  # noqa: E402
from actormem import MemoryCategory, MemoryEntry  # noqa: E402

BASE = datetime(2020, 1, 1, tzinfo=UTC)
WORDS = [
    "deploy", "blue", "ß", "İstanbul", "日本語", "emoji 🧠", "مرحبا", "e\u0301", "tab\tnew\nline",
    "quote'\"", "nul\x00byte", "{\"k\": [1]}", "%s", "--", "DROP TABLE entries;",
]
TAGS = ["infra", "İ", "Blue Team", "x", "ü-tag", "🧠"]
NAMESPACES = [(), ("t",), ("t", "acme"), ("ü", "ñ", "日本")]


def make_entry(seed: int, i: int) -> MemoryEntry:
    """Entry number ``i`` of trial ``seed``: varied, and the same in every process."""
    rng = random.Random(f"{seed}:{i}")
    text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
    if rng.random() < 0.02:
        text = "long " * 4000 + str(i)
    return MemoryEntry(
        id=uuid.UUID(int=rng.getrandbits(128), version=4),
        category=rng.choice(list(MemoryCategory)),
        memory=text,
        tags=rng.sample(TAGS, rng.randint(0, 3)),
        namespace=rng.choice(NAMESPACES),
        created_at=BASE + timedelta(microseconds=rng.randrange(10**14)),
        relevance=rng.choice([0.0, 1.0, 5e-324, rng.random()]),
        access_count=rng.choice([0, 0, rng.randrange(10**6)]),
        validated=rng.random() < 0.2,
        last_accessed=rng.choice([None, BASE + timedelta(microseconds=rng.randrange(10**14))]),
    )


async def _store_forever(path: str, seed: int, start: int, writers: int, chunk: int = 0) -> None:
    frames = os.environ.get("ACTORMEM_TEST_CHECKPOINT_FRAMES")
    if frames:  # checkpoints every few commits, so that kills land among them
        from actormem._storage import sqlite

        sqlite.CHECKPOINT_FRAMES = int(frames)
    c_commit = os.environ.get("ACTORMEM_TEST_C_COMMIT")
    if c_commit:
        from actormem._storage import sqlite

        sqlite._C_COMMIT = c_commit == "1"
    retrieve = os.environ.get("ACTORMEM_TEST_RETRIEVE") == "1"
    pending, delay = (os.environ.get(f"ACTORMEM_TEST_ACCESS_{k}") for k in ("PENDING", "DELAY"))
    if pending or delay:  # access updates held back: flushed often, amid the kills
        from actormem._storage import sqlite

        sqlite.ACCESS_PENDING = int(pending or sqlite.ACCESS_PENDING)
        sqlite.ACCESS_DELAY = float(delay or sqlite.ACCESS_DELAY)
    durability = os.environ.get("ACTORMEM_TEST_DURABILITY", "normal")
    async with actormem.open_memory(path=path, durability=durability) as memory:
        counter = itertools.count(start)

        async def writer() -> None:
            while True:
                if chunk:
                    many = [(i, make_entry(seed, i)) for i in itertools.islice(counter, chunk)]
                    await memory.store_many([entry for _, entry in many])
                    for i, entry in many:  # each line one write(2), as below
                        os.write(1, f"{i} {entry.id}\n".encode())
                    continue
                i = next(counter)
                entry = make_entry(seed, i)
                await memory.store(entry)
                # One write(2) of less than PIPE_BUF bytes: the line is whole or absent.
                os.write(1, f"{i} {entry.id}\n".encode())
                if retrieve:
                    await memory.retrieve(entry.memory[:40] or "disk", 3)

        async with trio.open_nursery() as nursery:
            for _ in range(writers):
                nursery.start_soon(writer)


async def _hold(path: str) -> None:
    async with actormem.open_memory(path=path):
        print("ready", flush=True)
        await trio.sleep_forever()


async def _try_open(path: str) -> dict[str, Any]:
    try:
        async with actormem.open_memory(path=path) as memory:
            return {"entries": len(memory)}
    except actormem.StorageError as exc:
        return {"error": exc.reason, "path": str(exc.path)}


def drop_dac_capabilities() -> None:
    """Drop CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER (Linux, this thread and
    the threads it starts later)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [
            ("effective", ctypes.c_uint32),
            ("permitted", ctypes.c_uint32),
            ("inheritable", ctypes.c_uint32),
        ]

    header = Header(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    keep = ~((1 << 1) | (1 << 2) | (1 << 3)) & 0xFFFFFFFF
    for name in ("effective", "permitted", "inheritable"):
        setattr(data[0], name, getattr(data[0], name) & keep)
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _parse(text: str) -> list[tuple[int, str]]:
    """The complete ``"i id"`` lines of ``text`` (a line cut by the kill was not printed)."""
    out = []
    for line in text.splitlines(keepends=True):
        if line.endswith("\n"):
            i, id = line.split()
            out.append((int(i), id))
    return out


async def _read_back(path: str) -> dict[uuid.UUID, MemoryEntry]:
    async with actormem.open_memory(path=path) as memory:
        memory._state._check()
        return {e.id: e for e in memory.snapshot()}


def as_acked(
    found: dict[uuid.UUID, MemoryEntry], seed: int, i: int, id: str, *, access: bool = True
) -> tuple[MemoryEntry | None, MemoryEntry]:
    """``(have, want)``: ``want`` the entry the child stored as number ``i``
    (acknowledged with ``id``), ``have`` its copy in ``found`` when that equals it field
    by field (``access`` False: but for the access bookkeeping, count and last access,
    which the child's retrieves change; the count never below the stored one), else
    None. O(fields)."""
    want = make_entry(seed, i)
    assert str(want.id) == id
    have = found.get(want.id)
    if have is None:
        return None, want
    if not access:
        if have.access_count < want.access_count:
            return None, want
        same = attrs.evolve(have, access_count=want.access_count, last_accessed=want.last_accessed)
    else:
        same = have
    return (have if same == want else None), want


def run_trial(
    path: str,
    seed: int,
    *,
    rounds: int = 2,
    max_acks: int = 300,
    writers: int = 4,
    chunk: int = 0,
) -> dict[str, Any]:
    """Kill a storing child with SIGKILL at a random moment, ``rounds`` times on one file;
    after each kill, reopen the file and check every acknowledged entry, field by field.

    Returns a JSON-able report; ``report["lost"]`` lists the acknowledged entries that
    were missing or different (it must be empty; with ``ACTORMEM_TEST_RETRIEVE=1`` in the
    environment, which the child inherits, different but for the access bookkeeping its
    retrieves change: :func:`as_acked`). ``chunk``: the child stores by ``store_many``
    in lists of that many (0: ``store``, one at a time).
    """
    access = os.environ.get("ACTORMEM_TEST_RETRIEVE") != "1"
    rng = random.Random(seed)
    acked: list[tuple[int, str]] = []
    lost: list[int] = []
    kills = []
    stored = 0
    for round_ in range(rounds):
        start = round_ * 10**6
        early = rng.random() < 0.2  # sometimes kill during startup (file creation, load)
        kill_after = rng.randint(1, max_acks)
        with tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen(
                [sys.executable, __file__, "store", path, str(seed), str(start), str(writers)]
                + ([str(chunk)] if chunk else []),
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                encoding="utf-8",
            )
            assert child.stdout is not None
            got: list[tuple[int, str]] = []
            if early:
                time.sleep(rng.random() * 0.6)
            else:
                for line in child.stdout:
                    got.extend(_parse(line))
                    if len(got) >= kill_after:
                        break
                time.sleep(rng.random() * 0.005)
            child.send_signal(signal.SIGKILL)
            got.extend(_parse(child.stdout.read()))  # printed before it died
            child.stdout.close()
            code = child.wait()
            err.seek(0)
            if code != -signal.SIGKILL:
                raise RuntimeError(f"child exited with {code} before the kill:\n{err.read()}")
        kills.append({"early": early, "acked": len(got)})
        acked.extend(got)
        found = trio.run(_read_back, path)
        stored = len(found)
        for i, id in acked:
            if as_acked(found, seed, i, id, access=access)[0] is None:
                lost.append(i)
    return {"seed": seed, "acked": len(acked), "stored": stored, "kills": kills, "lost": lost}


def main(argv: list[str]) -> None:
    mode, path, *rest = argv
    if mode == "store":
        seed, start, writers, *chunk = map(int, rest)
        trio.run(_store_forever, path, seed, start, writers, *chunk)
    elif mode == "hold":
        trio.run(_hold, path)
    elif mode == "try-open":
        if rest == ["--drop-dac"]:
            drop_dac_capabilities()
        print(json.dumps(trio.run(_try_open, path)), flush=True)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
