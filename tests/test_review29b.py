"""Review 29b: a replicated node's local file, a node's open over a failing connection,
and the open of a file on a nearly full disk.

* A node's local file (its checkpoint) could be opened as a plain memory
  (``open_memory(path=p)`` without ``log=``), written (a store, a delete), and opened as
  the node again: the node then silently held an entry no other node has and missed an
  acknowledged one. Only the node may now open such a file; the CLI's read-only
  commands (``query``, ``export``, ``stats``) read it without writing.
* A node's open gave up on the first dropped connection (a proxy cut for 0.3 s, an
  administrator's ``pg_terminate_backend``), while a running node rides such drops out
  for ``log_timeout``. The open now retries failures of the way to the server until
  ``log_timeout``; a refusal for good (a database that does not exist) fails at once.
* Opening a file on a nearly full disk failed with a bare "disk I/O error"
  (``SQLITE_IOERR_SHMSIZE``: SQLite could not size the -shm file); the reason now says
  the disk is likely full.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import attrs
import pytest
import trio

from actormem import StorageError, open_memory
from actormem._engine.bulk import store_all_or_nothing
from actormem._storage import pglog, sqlite_format
from actormem._storage.pglog import PgLog, is_transient
from actormem._storage.sqlite_format import sqlite_reason
from actormem.cli._main import main
from tests.pg import FAST_FAIL, Proxy, with_dbname
from tests.setups import fact

#: Long enough that the blips below never outlast it, whatever the load.
PATIENT = attrs.evolve(FAST_FAIL, log_timeout=60.0)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------- a node's local file


async def test_a_nodes_file_is_refused_without_its_log(pg_dsn: str, tmp_path: Path) -> None:
    """The review's repro: the plain open (and a bulk import) is refused, naming the
    file, the memory and what to do, and leaves the file unchanged; the node reopened
    on it holds what a node rebuilt from the log alone holds."""
    path = tmp_path / "n.db"
    a, b = fact("from the log A"), fact("from the log B")
    async with open_memory(log=pg_dsn, name="mem", path=path, log_options=FAST_FAIL) as node:
        await node.store(a)
        await node.store(b)
    before = digest(path)

    async def write_plainly() -> None:
        async with open_memory(path=path) as plain:  # pragma: no cover - the bug
            await plain.store(fact("written outside the log"))
            await plain.delete(a.id)

    with pytest.raises(StorageError) as refused:
        await write_plainly()
    message = str(refused.value)
    assert str(path) in message
    assert "'mem'" in message
    assert "open_memory(log=" in message
    assert "export" in message
    with pytest.raises(StorageError, match="replicated memory 'mem'"):
        await trio.to_thread.run_sync(store_all_or_nothing, path, [fact("imported")])
    assert digest(path) == before
    wal = Path(f"{path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0  # noqa: ASYNC240
    async with open_memory(log=pg_dsn, name="mem", path=path, log_options=FAST_FAIL) as node:
        mine = sorted(e.memory for e in node.snapshot())
    async with open_memory(log=pg_dsn, name="mem", log_options=FAST_FAIL) as fresh:
        truth = sorted(e.memory for e in fresh.snapshot())
    assert mine == truth == ["from the log A", "from the log B"]


def test_the_cli_reads_a_nodes_file_and_writes_nothing(
    pg_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``query``, ``export`` and ``stats`` still read a node's file (a read-only
    snapshot, without the note of a live read) and leave it byte for byte unchanged;
    ``import`` is refused with the reason."""
    path = tmp_path / "n.db"

    async def fill() -> None:
        async with open_memory(log=pg_dsn, name="mem", path=path, log_options=FAST_FAIL) as node:
            await node.store(fact("a flight to LAX on Friday"))
            await node.store(fact("the hotel is near the beach"))

    trio.run(fill)
    before = digest(path)
    assert main(["export", str(path)]) == 0
    out, err = capsys.readouterr()
    assert sorted(json.loads(line)["memory"] for line in out.splitlines()) == [
        "a flight to LAX on Friday",
        "the hotel is near the beach",
    ]
    assert "live read" not in out + err
    assert main(["query", str(path), "flight to LAX", "-k", "1"]) == 0
    out, err = capsys.readouterr()
    assert "flight to LAX" in out
    assert main(["stats", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "2" in out
    assert digest(path) == before
    source = tmp_path / "more.jsonl"
    source.write_text(json.dumps({"category": "fact", "memory": "outside the log"}) + "\n")
    assert main(["import", str(path), str(source)]) != 0
    out, err = capsys.readouterr()
    assert "replicated memory 'mem'" in out + err
    assert digest(path) == before


# ---------------------------------------------------------------- a node's open


async def _fill_log(dsn: str, records: int) -> None:
    async with open_memory(log=dsn, name="mem", log_options=FAST_FAIL) as node:
        for i in range(records):
            await node.store_many([fact(f"fill {i} {j}") for j in range(20)])


@pytest.mark.timeout(120)
async def test_a_nodes_open_rides_out_a_blip(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is down when the open starts and comes back shortly after (well
    within log_timeout): the open connects on a later try and catches up. Before the
    fix it failed with the first refused connection."""
    await _fill_log(pg_dsn, 30)
    tries = 0
    refused = trio.Event()
    real_open = PgLog.open
    token = trio.lowlevel.current_trio_token()

    def counting_open(*args: object, **kwargs: object) -> PgLog:
        nonlocal tries
        tries += 1
        try:
            return real_open(*args, **kwargs)  # type: ignore[arg-type]
        except StorageError:
            token.run_sync_soon(refused.set)
            raise

    monkeypatch.setattr(PgLog, "open", counting_open)
    proxy = Proxy(pg_dsn)
    async with trio.open_nursery() as nursery:
        await proxy.up(nursery)
        via = proxy.via()
        proxy.down()

        async def back_up() -> None:
            await refused.wait()  # at least one refused try, then the way back
            await proxy.up(nursery)

        nursery.start_soon(back_up)
        async with open_memory(
            log=via, name="mem", path=tmp_path / "n.db", log_options=PATIENT
        ) as node:
            assert len(node) == 30 * 20
        assert tries >= 2
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(120)
async def test_a_nodes_open_rides_out_a_drop_during_its_catch_up(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The connection drops after the log opened, while the node reads the log: the
    read is retried (before the fix: "reading the log failed" out of the open)."""
    await _fill_log(pg_dsn, 3)
    proxy = Proxy(pg_dsn)
    reads = 0
    real_read = PgLog.read

    def read_once_cut(self: PgLog, after: int, limit: int) -> list[object]:
        nonlocal reads
        reads += 1
        if reads == 1:
            # the admin's pg_terminate_backend, as the server says it (57P01)
            self._run("reading the log", lambda conn: conn.execute(
                "SELECT pg_terminate_backend(pg_backend_pid())"
            ))
        return real_read(self, after, limit)  # type: ignore[return-value]

    monkeypatch.setattr(PgLog, "read", read_once_cut)
    async with trio.open_nursery() as nursery:
        await proxy.up(nursery)
        async with open_memory(log=proxy.via(), name="mem", log_options=PATIENT) as node:
            assert len(node) == 3 * 20
        assert reads >= 2
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(120)
async def test_a_nodes_open_fails_when_the_outage_outlasts_log_timeout(pg_dsn: str) -> None:
    """The proxy stays down: the open retries, then fails with the connection's error
    (naming the server), and no node is left open."""
    proxy = Proxy(pg_dsn)
    async with trio.open_nursery() as nursery:
        await proxy.up(nursery)
        via = proxy.via()
        proxy.down()
        with pytest.raises(StorageError, match="cannot connect") as failed:
            async with open_memory(log=via, name="mem", log_options=FAST_FAIL):
                pass  # pragma: no cover
        assert f":{proxy.port}/" in str(failed.value)
        nursery.cancel_scope.cancel()


async def test_a_refusal_for_good_fails_the_open_at_once(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database that does not exist is not retried (one try, however long
    log_timeout)."""
    tries = 0
    real_open = PgLog.open

    def counting_open(*args: object, **kwargs: object) -> PgLog:
        nonlocal tries
        tries += 1
        return real_open(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(PgLog, "open", counting_open)
    missing = with_dbname(pg_dsn, f"actormem_missing_{uuid.uuid4().hex[:8]}")
    with pytest.raises(StorageError, match="does not exist"):
        async with open_memory(log=missing, name="mem", log_options=PATIENT):
            pass  # pragma: no cover
    assert tries == 1


def test_which_log_errors_are_transient() -> None:
    """The classification behind the open's retries (psycopg's errors as raised)."""
    import psycopg
    from psycopg import errors

    def failed(cause: BaseException) -> StorageError:
        try:
            raise StorageError("log", "failed") from cause
        except StorageError as exc:
            return exc

    refused = 'connection to server at "127.0.0.1", port 1 failed: Connection refused'
    for cause in [
        psycopg.OperationalError(f"connection failed: {refused}"),
        psycopg.OperationalError("consuming input failed: server closed the connection"),
        errors.AdminShutdown("terminating connection due to administrator command"),
        errors.CannotConnectNow("the database system is starting up"),
        errors.TooManyConnections("sorry, too many clients already"),
        psycopg.OperationalError("connection failed: FATAL:  the database system is "
                                 "shutting down"),
    ]:
        assert is_transient(failed(cause)), cause
    for cause in [
        psycopg.OperationalError('connection failed: FATAL:  database "x" does not exist'),
        psycopg.OperationalError('connection failed: FATAL:  password authentication '
                                 'failed for user "u"'),
        errors.InsufficientPrivilege("permission denied for table actormem_log"),
        errors.UndefinedTable("relation does not exist"),
        ValueError("not psycopg"),
    ]:
        assert not is_transient(failed(cause)), cause
    assert not is_transient(StorageError("log", "a newer actormem"))
    assert pglog.is_transient is is_transient


# ---------------------------------------------------------------- a nearly full disk


def test_an_io_error_sizing_the_shm_file_says_the_disk_is_likely_full(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """SQLite's SQLITE_IOERR_SHMSIZE (what the open on a nearly full disk raised, see
    the tmpfs test below), simulated: the reason says what likely happened, and with
    the file's path how much space is left when that is little."""
    exc = sqlite3.OperationalError("disk I/O error")
    exc.sqlite_errorcode = 4874  # type: ignore[attr-defined]
    exc.sqlite_errorname = "SQLITE_IOERR_SHMSIZE"  # type: ignore[attr-defined]
    reason = sqlite_reason(exc)
    assert "-shm" in reason
    assert "SQLITE_IOERR_SHMSIZE" in reason
    assert "disk is likely full" in reason
    monkeypatch.setattr(sqlite_format, "_free_bytes", lambda path: 12_345)
    assert "12,345 bytes free" in sqlite_reason(exc, str(tmp_path / "m.db"))
    other = sqlite3.OperationalError("disk I/O error")
    other.sqlite_errorname = "SQLITE_IOERR_READ"  # type: ignore[attr-defined]
    assert "12,345 bytes free" in sqlite_reason(other, str(tmp_path / "m.db"))
    monkeypatch.setattr(sqlite_format, "_free_bytes", lambda path: 10 << 30)
    assert "full" not in sqlite_reason(other, str(tmp_path / "m.db"))


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs root and a mount that works: skipped otherwise, with the
    reason; the simulated test above covers the message without it)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the simulated SHMSIZE test covers it)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); simulated above")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_an_open_on_a_nearly_full_disk_says_the_disk_is_full(small_tmpfs: Path) -> None:
    """Whatever little space is left (80 KB gave "disk I/O error" alone), a failing
    open says the disk is full, and leaves no half-made memory file behind."""
    failures = []
    for left in (20_000, 40_000, 60_000, 80_000, 100_000, 120_000):
        for name in os.listdir(small_tmpfs):
            os.unlink(small_tmpfs / name)
        st = os.statvfs(small_tmpfs)
        (small_tmpfs / "filler").write_bytes(b"\0" * (st.f_bavail * st.f_frsize - left))

        async def open_it() -> None:
            async with open_memory(path=small_tmpfs / "m.db"):
                pass

        try:
            trio.run(open_it)
        except StorageError as exc:
            failures.append(exc.reason)  # (without the path, which may say "full")
    assert failures  # (this much space is too little for some)
    for reason in failures:
        assert "full" in reason, reason
