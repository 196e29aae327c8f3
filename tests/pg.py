"""PostgreSQL for the replication tests: a fresh database per test, dropped afterwards.

``ACTORMEM_TEST_PG`` names the server (a libpq connection string to a database the user
may create databases from); the default is ``postgresql://postgres@127.0.0.1:5432/postgres``.
Without a server the tests skip with that reason; under ``CI=true`` they fail instead.
The ``pg_dsn`` fixture (``tests/conftest.py``) gives a test such a database; :data:`FAST`
and :data:`FAST_FAIL` are the replication tests' short timings.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import attrs
import pytest
import trio

from actormem._engine.replica import ReplicaOptions

ENV = "ACTORMEM_TEST_PG"
DEFAULT = "postgresql://postgres@127.0.0.1:5432/postgres"


#: A node's short test timings: it polls the log, sends hits and beats every 0.1 s, and a
#: log call gives up after 2 s.
FAST = ReplicaOptions(
    log_timeout=2.0, poll_interval=0.1, access_interval=0.1, heartbeat_interval=0.1
)
#: :data:`FAST` with log calls giving up after 1 s (the tests that wait for a stalled or cut
#: log to fail a call).
FAST_FAIL = attrs.evolve(FAST, log_timeout=1.0)


def _admin_dsn() -> str:
    return os.environ.get(ENV, DEFAULT)


def _unavailable(reason: str) -> None:
    message = f"no PostgreSQL server for the replication tests ({reason}); set {ENV}"
    if os.environ.get("CI") == "true":
        pytest.fail(f"{message}; CI=true requires one")
    pytest.skip(message)


def with_dbname(dsn: str, dbname: str) -> str:
    """``dsn`` pointing at database ``dbname``."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params = conninfo_to_dict(dsn)
    params["dbname"] = dbname
    return make_conninfo(**params)


def fresh_database() -> Iterator[str]:
    """Yield a connection string to a new, empty database, and drop it afterwards (the
    body of the ``pg_dsn`` fixture in ``tests/conftest.py``)."""
    try:
        import psycopg
    except ImportError:
        _unavailable("psycopg is not installed: pip install -e '.[test]'")
    admin = _admin_dsn()
    name = f"actormem_test_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        _unavailable(f"{admin}: {' '.join(str(exc).split())}")
    try:
        yield with_dbname(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def sql(dsn: str, statement: str, *args: object) -> list[tuple[object, ...]]:
    """Run one statement (autocommit); its rows, if any."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, args or None)
        return cur.fetchall() if cur.description else []


class Proxy:
    """A TCP proxy to the PostgreSQL server of ``dsn`` (on 127.0.0.1) that a test can cut
    and restore (:meth:`down`, :meth:`up`: the listener and every connection through it
    close) or stall and thaw (:meth:`stall`: every connection stays open but forwards
    nothing until :meth:`thaw`, as a paused server or a stalled path would).
    :meth:`via` is ``dsn`` through the proxy once it is up."""

    def __init__(self, dsn: str) -> None:
        from psycopg.conninfo import conninfo_to_dict

        self._params = conninfo_to_dict(dsn)
        self.target_port = int(self._params.get("port", 5432))
        self.port = 0
        self._scope: trio.CancelScope | None = None
        self.thawed = trio.Event()
        self.thawed.set()

    def via(self) -> str:
        """The connection string of the server through the proxy."""
        from psycopg.conninfo import make_conninfo

        return make_conninfo(**{**self._params, "host": "127.0.0.1", "port": str(self.port)})

    def stall(self) -> None:
        self.thawed = trio.Event()

    def thaw(self) -> None:
        self.thawed.set()

    async def _pipe(self, src: trio.SocketStream, dst: trio.SocketStream) -> None:
        try:
            async for chunk in src:
                await self.thawed.wait()
                await dst.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await dst.aclose()

    async def _handle(self, client: trio.SocketStream) -> None:
        try:
            server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
        except OSError:
            await client.aclose()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pipe, client, server)
            nursery.start_soon(self._pipe, server, client)

    async def _serve(self, task_status: trio.TaskStatus[None]) -> None:
        with trio.CancelScope() as self._scope:
            listeners = await trio.open_tcp_listeners(self.port, host="127.0.0.1")
            self.port = listeners[0].socket.getsockname()[1]
            await trio.serve_listeners(self._handle, listeners, task_status=task_status)

    async def up(self, nursery: trio.Nursery) -> None:
        """Listen (on the same port as before, after a :meth:`down`)."""
        await nursery.start(self._serve)

    def down(self) -> None:
        assert self._scope is not None
        self._scope.cancel()
