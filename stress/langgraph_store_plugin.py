"""pytest plugin: LangGraph's own store tests, run against :class:`ActormemStore`.

Loaded by ``stress/langgraph_store_tests.py`` (``-p stress.langgraph_store_plugin``) in a
separate pytest run over the test files of LangGraph's source distributions. Their
tests build the store from a module global (``InMemoryStore``, ``SqliteStore``,
``AsyncSqliteStore``); this plugin points those globals at actormem's store, with the
few connection-shaped wrappers their fixtures call (``from_conn_string``, ``setup``).
Tests of SQLite internals (the schema, migrations, SQL text, glob escaping) are
deselected, each with its reason in :data:`DESELECT`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from actormem.integrations.langgraph import ActormemStore

_SQLITE = "langgraph_checkpoint_sqlite-"
#: (sdist folder prefix, file, test name prefix) -> why it is not run against actormem.
DESELECT: dict[tuple[str, str, str], str] = {
    (_SQLITE, "test_store.py", "test_vector_store_initialization"): (
        "reads SqliteStore's `conn` and its sqlite-vec tables"
    ),
    (_SQLITE, "test_store.py", "test_nonnull_migrations"): (
        "checks the SQL text of SqliteStore.MIGRATIONS"
    ),
    (_SQLITE, "test_store.py", "test_escape_glob_literal"): (
        "a helper of the SQLite store's SQL (GLOB escaping); no store involved"
    ),
    (_SQLITE, "test_store.py", "test_namespace_match_pattern"): (
        "a helper of the SQLite store's SQL (namespace patterns); no store involved"
    ),
    (_SQLITE, "test_store.py", "test_list_namespaces_prefix_uses_indexable_condition"): (
        "the SQL text BaseSqliteStore generates"
    ),
}


def _path(conn_string: str) -> str | None:
    if conn_string == ":memory:":
        return None
    # Their fixtures hand over an empty temporary file; actormem refuses an empty file
    # (it is not a database), so the harness lets actormem create it.
    if os.path.exists(conn_string) and os.path.getsize(conn_string) == 0:
        os.unlink(conn_string)
    return conn_string


class SqliteShaped(ActormemStore):
    """ActormemStore with the constructor shape of LangGraph's ``SqliteStore``."""

    __slots__ = ()

    @classmethod
    @contextmanager
    def from_conn_string(cls, conn_string: str, **options: Any) -> Iterator[ActormemStore]:
        store = ActormemStore(path=_path(conn_string), **options)
        try:
            yield store
        finally:
            store.close()


class AsyncSqliteShaped(ActormemStore):
    """ActormemStore with the shape of ``AsyncSqliteStore`` (async setup and sweeper)."""

    __slots__ = ()

    @classmethod
    @asynccontextmanager
    async def from_conn_string(
        cls, conn_string: str, **options: Any
    ) -> AsyncIterator[AsyncSqliteShaped]:
        store = cls(path=_path(conn_string), async_only=True, **options)
        try:
            yield store
        finally:
            store.close()

    async def setup(self) -> None:  # type: ignore[override]
        return None

    async def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:  # type: ignore[override]
        return None

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]  # noqa: ASYNC109
        return True

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        return await self.asweep_ttl()


def _setup(self: ActormemStore) -> None:
    return None


ActormemStore.setup = _setup  # type: ignore[attr-defined]

_SWAPS = {
    "InMemoryStore": ActormemStore,
    "SqliteStore": SqliteShaped,
    "AsyncSqliteStore": AsyncSqliteShaped,
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "flaky(retries): their retry marker (not used here)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        module = getattr(item, "module", None)
        if module is not None:
            for name, swap in _SWAPS.items():
                if hasattr(module, name):
                    setattr(module, name, swap)
        name = item.name.split("[")[0]
        root = item.path.parent.parent.name
        if any(
            root.startswith(r) and item.path.name == f and name.startswith(t)
            for r, f, t in DESELECT
        ):
            dropped.append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
