"""A memory hosted in a thread of its own, for asyncio and synchronous programs.

Theory of operation
-------------------
A :class:`~actormem.Memory` lives inside a trio run: its owner is a trio task and its
methods are trio coroutines. :class:`HostedMemory` starts a thread that runs
``trio.run`` around :func:`~actormem.open_memory` and parks until it is told to stop.
Every call from outside enters that run with :func:`trio.from_thread.run` (a system task
of the host's run performs the call on the memory and hands the result back):

* the synchronous face (:attr:`HostedMemory.sync`) blocks the calling thread for it;
* the async methods run that blocking call in a worker thread of the caller's event
  loop with :func:`anyio.to_thread.run_sync`, so they work under asyncio and trio alike
  and never block the caller's loop.

Closing sets the run's stop event: :func:`~actormem.open_memory` then closes the memory
(queued requests are still applied and answered; a durable memory commits and closes its
file), ``trio.run`` returns and the thread is joined. A call that reaches the host after
that raises :class:`trio.ClosedResourceError`, as a closed :class:`~actormem.Memory` does.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime
from types import TracebackType
from typing import Any, TypeVar

import anyio.to_thread
import trio

from .._engine.lifecycle import open_memory
from .._engine.memory import DEFAULT_QUEUE_SIZE, Memory
from .._engine.state import DEFAULT_HALF_LIFE
from .._entry import MemoryEntry, ScoredEntry
from .._index.scoring import Scorer
from .._stats import ConsolidationStats, MemoryStatistics
from .._storage.sqlite import Durability
from .._util import Final, NoPublicConstructor

__all__ = ["HostedMemory", "SyncHostedMemory"]

_T = TypeVar("_T")


class HostedMemory(metaclass=Final):
    """A memory whose owner runs under trio in a thread of its own.

    For programs that are not trio: asyncio code (``async with HostedMemory(...)`` and
    ``await memory.store(...)``, exactly the methods of :class:`~actormem.Memory`) and
    plain synchronous code (``with HostedMemory(...)`` and ``memory.sync.store(...)``).
    Trio code keeps :func:`~actormem.open_memory`, which needs no thread.

    The constructor only records the options (the same as :func:`~actormem.open_memory`);
    the thread starts on :meth:`start` / ``with`` (blocking until the memory is open, a
    durable file loaded) or :meth:`astart` / ``async with`` (the same wait, off the
    event loop). Closing (:meth:`close` / :meth:`aclose`, or leaving the block) applies
    and answers every queued request, commits and closes a durable file, and joins the
    thread. Many threads and tasks may share one instance.

    Each call crosses threads twice (about tens of microseconds on top of the call
    itself); for the lowest latency, run your own code under trio with ``open_memory``.
    Not available: ``snapshot()`` and ``store_nowait()`` (both belong to the host's trio
    run).

    Example::

        async def main():
            async with HostedMemory(path="memory.db") as memory:
                await memory.store(MemoryEntry.new(MemoryCategory.FACT, "blue cluster"))
                print(await memory.retrieve("cluster", 3))

        asyncio.run(main())

    Raises (from every method):
        trio.ClosedResourceError: The memory was closed, or never started.
        trio.BrokenResourceError: The memory's owner died (see :class:`~actormem.Memory`).
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str] | None = None,
        durability: Durability | str = Durability.NORMAL,
        capacity: int | None = None,
        half_life: float = DEFAULT_HALF_LIFE,
        scorer: Scorer | None = None,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        clock: Callable[[], datetime] | None = None,
        on_remove: Callable[[MemoryEntry, str], None] | None = None,
    ) -> None:
        self._options: dict[str, Any] = {
            "path": path,
            "durability": durability,
            "capacity": capacity,
            "half_life": half_life,
            "scorer": scorer,
            "queue_size": queue_size,
            "clock": clock,
            "on_remove": on_remove,
        }
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._memory: Memory | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._closed = False
        self._crash: BaseException | None = None
        self.sync: SyncHostedMemory = SyncHostedMemory._create(self)
        """The same methods, synchronous: they block the calling thread."""

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the host thread and wait until the memory is open. Blocking.

        Raises:
            RuntimeError: Already started.
            TypeError, InvalidQueryError, StorageError: As :func:`~actormem.open_memory`
                (the thread has ended; nothing stays open).
        """
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            if self._thread is not None or self._closed:
                raise RuntimeError("this HostedMemory was already started")
            self._thread = threading.Thread(
                target=self._host, args=(started,), name="actormem hosted memory", daemon=True
            )
            self._thread.start()
        try:
            started.result()
        except BaseException:
            self._thread.join()
            self._closed = True
            raise

    async def astart(self) -> None:
        """:meth:`start` in a worker thread, so the event loop keeps running meanwhile."""
        await anyio.to_thread.run_sync(self.start)

    def close(self) -> None:
        """Close the memory and join the host thread. Blocking; idempotent.

        Requests already queued are applied and answered first; a durable memory commits
        and closes its file before this returns.

        Raises:
            BaseException: What the host's run died of (an owner bug), once.
        """
        with self._lock:
            thread, self._closed = self._thread, True
            stop, token = self._stop, self._token
        if thread is None:
            return
        if stop is not None and token is not None:
            try:
                trio.from_thread.run_sync(stop.set, trio_token=token)
            except trio.RunFinishedError:
                pass  # the run already ended (the owner died)
        thread.join()
        crash, self._crash = self._crash, None
        if crash is not None:
            raise crash

    async def aclose(self) -> None:
        """:meth:`close` in a worker thread, so the event loop keeps running meanwhile."""
        await anyio.to_thread.run_sync(self.close)

    def __enter__(self) -> HostedMemory:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> HostedMemory:
        await self.astart()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _host(self, started: concurrent.futures.Future[None]) -> None:
        """The host thread: one trio run, around one open memory."""
        try:
            trio.run(self._serve, started)
        except BaseException as exc:
            if not started.done():
                started.set_exception(exc)
            else:
                self._crash = exc

    async def _serve(self, started: concurrent.futures.Future[None]) -> None:
        async with open_memory(**self._options) as memory:
            stop = trio.Event()
            with self._lock:
                self._memory, self._stop = memory, stop
                self._token = trio.lowlevel.current_trio_token()
                if self._closed:  # closed while opening
                    stop.set()
            started.set_result(None)
            await stop.wait()

    def _run(self, call: Callable[[Memory], Awaitable[_T]]) -> _T:
        """``await call(memory)`` in the host's run; block this thread for the result."""
        memory, token = self._memory, self._token
        if memory is None or token is None:
            raise trio.ClosedResourceError("the hosted memory is not open (call start())")

        async def in_host() -> _T:
            return await call(memory)

        try:
            return trio.from_thread.run(in_host, trio_token=token)
        except (trio.RunFinishedError, trio.Cancelled):
            # The host's run ended, or is ending, before it could answer.
            raise trio.ClosedResourceError("the hosted memory is closed") from None

    def _open_memory(self) -> Memory:
        memory = self._memory
        if memory is None:
            raise trio.ClosedResourceError("the hosted memory is not open (call start())")
        return memory

    async def _arun(self, call: Callable[[Memory], Awaitable[_T]]) -> _T:
        return await anyio.to_thread.run_sync(self._run, call)

    # ------------------------------------------------------------ the Memory methods

    async def store(self, entry: MemoryEntry) -> int | None:
        """:meth:`Memory.store <actormem.Memory.store>` (an upsert by id)."""
        return await self._arun(lambda m: m.store(entry))

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """:meth:`Memory.store_many <actormem.Memory.store_many>`: one request, in order."""
        await self._arun(lambda m: m.store_many(entries))

    async def delete(self, id: uuid.UUID) -> bool:
        """:meth:`Memory.delete <actormem.Memory.delete>`: True if ``id`` was stored."""
        return await self._arun(lambda m: m.delete(id))

    async def consolidate(self) -> ConsolidationStats:
        """:meth:`Memory.consolidate <actormem.Memory.consolidate>`: prune and merge."""
        return await self._arun(lambda m: m.consolidate())

    async def get(self, id: uuid.UUID, **options: Any) -> MemoryEntry | None:
        """:meth:`Memory.get <actormem.Memory.get>`: the entry ``id``, or None."""
        return await self._arun(lambda m: m.get(id, **options))

    async def get_by_key(
        self, namespace: Iterable[str], key: str, **options: Any
    ) -> MemoryEntry | None:
        """:meth:`Memory.get_by_key <actormem.Memory.get_by_key>`."""
        return await self._arun(lambda m: m.get_by_key(namespace, key, **options))

    async def delete_key(self, namespace: Iterable[str], key: str) -> bool:
        """:meth:`Memory.delete_key <actormem.Memory.delete_key>`."""
        return await self._arun(lambda m: m.delete_key(namespace, key))

    async def sweep_expired(self) -> int:
        """:meth:`Memory.sweep_expired <actormem.Memory.sweep_expired>`."""
        return await self._arun(lambda m: m.sweep_expired())

    async def retrieve(self, query: str, limit: int = 10, **filters: Any) -> list[MemoryEntry]:
        """:meth:`Memory.retrieve <actormem.Memory.retrieve>`, with every keyword filter
        it accepts (``namespace=``, ``category=``, ``tags=`` ...)."""
        return await self._arun(lambda m: m.retrieve(query, limit, **filters))

    async def retrieve_scored(
        self, query: str, limit: int = 10, **filters: Any
    ) -> list[ScoredEntry]:
        """:meth:`Memory.retrieve_scored <actormem.Memory.retrieve_scored>`."""
        return await self._arun(lambda m: m.retrieve_scored(query, limit, **filters))

    async def list_entries(
        self, namespace: Iterable[str] | None = None, **filters: Any
    ) -> list[MemoryEntry]:
        """:meth:`Memory.list_entries <actormem.Memory.list_entries>`."""
        return await self._arun(lambda m: m.list_entries(namespace, **filters))

    async def list_namespaces(self, **options: Any) -> list[tuple[str, ...]]:
        """:meth:`Memory.list_namespaces <actormem.Memory.list_namespaces>`."""
        return await self._arun(lambda m: m.list_namespaces(**options))

    def statistics(self) -> MemoryStatistics:
        """:meth:`Memory.statistics <actormem.Memory.statistics>`. O(1), never blocks.

        Read from this thread without entering the host's run: each counter is exact,
        but while writes are being applied they may come from adjacent versions.
        """
        return self._open_memory().statistics()

    def __len__(self) -> int:
        """Entries in the latest published snapshot. O(1), never blocks."""
        return len(self._open_memory())

    def __repr__(self) -> str:
        memory = self._memory
        if memory is None:
            return "<actormem.HostedMemory not started>"
        return f"<actormem.HostedMemory {memory!r}>"


class SyncHostedMemory(metaclass=NoPublicConstructor):
    """The synchronous face of a :class:`HostedMemory` (its ``sync`` attribute).

    The same methods as :class:`~actormem.Memory`, each blocking the calling thread until
    the host answers. Call them from plain threads, never from an event loop's thread (use
    the async methods of :class:`HostedMemory` there). Raises what they raise.
    """

    def __init__(self, host: HostedMemory) -> None:
        self._host = host

    def store(self, entry: MemoryEntry) -> int | None:
        """:meth:`Memory.store <actormem.Memory.store>` (an upsert by id)."""
        return self._host._run(lambda m: m.store(entry))

    def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """:meth:`Memory.store_many <actormem.Memory.store_many>`: one request, in order."""
        self._host._run(lambda m: m.store_many(entries))

    def delete(self, id: uuid.UUID) -> bool:
        """:meth:`Memory.delete <actormem.Memory.delete>`: True if ``id`` was stored."""
        return self._host._run(lambda m: m.delete(id))

    def consolidate(self) -> ConsolidationStats:
        """:meth:`Memory.consolidate <actormem.Memory.consolidate>`: prune and merge."""
        return self._host._run(lambda m: m.consolidate())

    def get(self, id: uuid.UUID, **options: Any) -> MemoryEntry | None:
        """:meth:`Memory.get <actormem.Memory.get>`: the entry ``id``, or None."""
        return self._host._run(lambda m: m.get(id, **options))

    def get_by_key(self, namespace: Iterable[str], key: str, **options: Any) -> MemoryEntry | None:
        """:meth:`Memory.get_by_key <actormem.Memory.get_by_key>`."""
        return self._host._run(lambda m: m.get_by_key(namespace, key, **options))

    def delete_key(self, namespace: Iterable[str], key: str) -> bool:
        """:meth:`Memory.delete_key <actormem.Memory.delete_key>`."""
        return self._host._run(lambda m: m.delete_key(namespace, key))

    def sweep_expired(self) -> int:
        """:meth:`Memory.sweep_expired <actormem.Memory.sweep_expired>`."""
        return self._host._run(lambda m: m.sweep_expired())

    def retrieve(self, query: str, limit: int = 10, **filters: Any) -> list[MemoryEntry]:
        """:meth:`Memory.retrieve <actormem.Memory.retrieve>` with every keyword filter."""
        return self._host._run(lambda m: m.retrieve(query, limit, **filters))

    def retrieve_scored(self, query: str, limit: int = 10, **filters: Any) -> list[ScoredEntry]:
        """:meth:`Memory.retrieve_scored <actormem.Memory.retrieve_scored>`."""
        return self._host._run(lambda m: m.retrieve_scored(query, limit, **filters))

    def list_entries(
        self, namespace: Iterable[str] | None = None, **filters: Any
    ) -> list[MemoryEntry]:
        """:meth:`Memory.list_entries <actormem.Memory.list_entries>`."""
        return self._host._run(lambda m: m.list_entries(namespace, **filters))

    def list_namespaces(self, **options: Any) -> list[tuple[str, ...]]:
        """:meth:`Memory.list_namespaces <actormem.Memory.list_namespaces>`."""
        return self._host._run(lambda m: m.list_namespaces(**options))

    def statistics(self) -> MemoryStatistics:
        """:meth:`Memory.statistics <actormem.Memory.statistics>`."""
        return self._host.statistics()

    def __len__(self) -> int:
        """Entries in the latest published snapshot."""
        return len(self._host)

    def close(self) -> None:
        """:meth:`HostedMemory.close`."""
        self._host.close()
