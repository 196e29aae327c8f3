"""An interrupt at any step of an open leaves nothing behind.

trio raises ``KeyboardInterrupt`` at any bytecode of unprotected code, and a cancellation
lands at the next checkpoint. tidy23 moved the file's open inside the ``try`` that closes
it; three windows of the same kind were left, each fixed here the same way (the thing
opened is in a list the cleanup sees from the moment it exists, and the cleanup's ``try``
already runs):

* after the load, while the store was made but not yet attached to the memory
  (``_restore_counters``, the collector's promotion, ``_attach_store``);
* between ``_open_memory``'s return and ``open_memory``'s (or ``serve_memory``'s) ``try``;
* in ``replica.py``: the log's connection and the checkpoint file opened before the ``try``
  that closes them (and ``open_memory``'s cleanup closed a node's file, never its log).

Each test injects the exception at one step (the steps run in worker threads: right after
the thread finished, as a signal landing on the event loop then; the others: the step
function patched to raise, before or after its work) and checks that no file handle into
the test's directory, no thread of the open, no task and no log connection is left; the
file then opens again with its entries.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem import Memory, MemoryCategory, MemoryEntry, open_memory, serve_memory
from actormem._engine import lifecycle
from tests.pg import FAST


async def _make(path: Path, **options: Any) -> None:
    async with open_memory(path=path, **options) as memory:
        await memory.store(MemoryEntry(memory="alpha beta", category=MemoryCategory.FACT))
        await memory.store(MemoryEntry(memory="gamma delta", category=MemoryCategory.INSIGHT))


def _fds_into(folder: Path) -> list[str]:
    """The files under ``folder`` this process holds open."""
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own)
        if target.startswith(str(folder)):
            held.append(target)
    return held


def _open_threads(before: set[threading.Thread]) -> list[str]:
    """Threads started since ``before`` was taken, other than trio's idle workers."""
    return [
        t.name
        for t in threading.enumerate()
        if t not in before and not t.name.startswith("Trio thread")
    ]


def _actormem_tasks() -> list[str]:
    """The run's tasks named after actormem (the owner, the access timer, ...)."""
    names = []
    stack = [trio.lowlevel.current_root_task()]
    while stack:
        task = stack.pop()
        names.append(task.name)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return [n for n in names if "actormem" in n and "tests" not in n]


def _settled(check: Callable[[], list[str]]) -> list[str]:
    """``check()`` once empty, polled for 30 s at most (a thread's task leaves the
    kernel's list just after its join returned)."""
    deadline = time.monotonic() + 30
    while (left := check()) and time.monotonic() < deadline:
        time.sleep(0.01)
    return left


class _Inject:
    """Where the exception strikes: at the ``at``-th ``trio.to_thread.run_sync`` of the
    run (counting from 1; right after its thread finished), as ``KeyboardInterrupt`` or
    as a cancellation of ``scope`` (the next checkpoint raises ``Cancelled``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, at: int, kind: str) -> None:
        self.at, self.kind, self.calls, self.fired = at, kind, 0, False
        self.scope: trio.CancelScope | None = None
        self.opened_calls: int | None = None  # run_sync calls before the body ran
        real = trio.to_thread.run_sync

        async def run_sync(fn: Any, *args: Any, **kwargs: Any) -> Any:
            got = await real(fn, *args, **kwargs)
            self.calls += 1
            if self.calls == self.at:
                self.fired = True
                self.strike()
            return got

        monkeypatch.setattr(trio.to_thread, "run_sync", run_sync)

    def strike(self) -> None:
        if self.kind == "interrupt":
            raise KeyboardInterrupt
        assert self.scope is not None
        self.scope.cancel()


async def _attempt(inject: _Inject | None, opener: Callable[[], Any]) -> tuple[list[str], bool]:
    """Open with ``opener()`` (an async context manager) inside a cancel scope; return
    the run's actormem tasks left once it failed (or the block ran), and whether a
    ``KeyboardInterrupt`` came out of it."""
    interrupted = False
    with trio.CancelScope() as scope:
        if inject is not None:
            inject.scope = scope
        try:
            async with opener() as memory:
                if inject is not None and inject.opened_calls is None:
                    inject.opened_calls = inject.calls
                assert len(memory) == 2
                await trio.lowlevel.checkpoint()
        except* KeyboardInterrupt:
            interrupted = True
    return _actormem_tasks(), interrupted


def _check_nothing_left(tmp_path: Path, tasks: list[str], before: set[threading.Thread]) -> None:
    """No actormem task was left in the run, no file under ``tmp_path`` is open, no
    thread started since ``before`` runs."""
    assert tasks == []
    # (No collection first: a store closed holds no descriptor, reachable or not.)
    assert _settled(lambda: _fds_into(tmp_path)) == []
    assert _settled(lambda: _open_threads(before)) == []


def _count(path: Path, **options: Any) -> int:
    async def count() -> int:
        async with open_memory(path=path, **options) as memory:
            return len(memory)

    return trio.run(count)


@asynccontextmanager
async def _served(**options: Any) -> AsyncIterator[Memory]:
    """``serve_memory`` started in a nursery, as ``open_memory``."""
    async with trio.open_nursery() as nursery:
        memory: Memory = await nursery.start(partial(serve_memory, **options))
        try:
            yield memory
        finally:
            await memory.aclose()


_OPENERS: dict[str, Callable[..., Any]] = {"open_memory": open_memory, "serve_memory": _served}


@pytest.mark.parametrize("how", ["open_memory", "serve_memory"])
@pytest.mark.parametrize("kind", ["interrupt", "cancel"])
@pytest.mark.parametrize("check_beside", [True, False])
def test_an_exception_after_any_thread_of_the_open_leaves_nothing(
    tmp_path: Path, how: str, kind: str, check_beside: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker-thread step of a file's open (both paths of ``_LOAD_BEFORE_CHECK``),
    the exception striking right after the thread finished."""
    monkeypatch.setattr(lifecycle, "_LOAD_BEFORE_CHECK", check_beside)
    monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 0)  # the promotion runs too
    path = tmp_path / "m.db"
    trio.run(_make, path)
    at = 1
    while True:
        before = set(threading.enumerate())
        with monkeypatch.context() as patch:
            inject = _Inject(patch, at, kind)
            tasks, _ = trio.run(_attempt, inject, lambda: _OPENERS[how](path=path))
        _check_nothing_left(tmp_path, tasks, before)
        if inject.opened_calls is not None and inject.opened_calls < at:
            break  # the open's threads were all struck: this one hit the block or close
        assert inject.fired
        assert _count(path) == 2
        at += 1
    assert at >= 3  # the read, the load (and the closes)


def _raising(real: Callable[..., Any], when: str) -> Callable[..., Any]:
    def step(*args: Any, **kwargs: Any) -> Any:
        if when == "before":
            raise KeyboardInterrupt
        real(*args, **kwargs)
        raise KeyboardInterrupt  # after its work, before the next statement

    return step


#: The open's steps on the event loop, after the load: each raises before or after its
#: work (as a KeyboardInterrupt landing there).
_STEPS = [
    ("_restore_counters", "before"),
    ("_restore_counters", "after"),
    ("_attach_store", "before"),
    ("_attach_store", "after"),
]


@pytest.mark.parametrize(("step", "when"), _STEPS)
@pytest.mark.parametrize("check_beside", [True, False])
def test_an_interrupt_after_the_load_leaves_nothing(
    tmp_path: Path, step: str, when: str, check_beside: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the fix the store was made but in no ``try``'s hands: its file and lock
    stayed held, and the next open said "held by another memory"."""
    monkeypatch.setattr(lifecycle, "_LOAD_BEFORE_CHECK", check_beside)
    path = tmp_path / "m.db"
    trio.run(_make, path)
    before = set(threading.enumerate())
    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, step, _raising(getattr(lifecycle, step), when))
        tasks, interrupted = trio.run(_attempt, None, lambda: open_memory(path=path))
    assert interrupted
    _check_nothing_left(tmp_path, tasks, before)
    assert _count(path) == 2


def test_an_interrupt_in_the_promotion_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``gc.freeze()`` after the load (the collector's promotion, at any size here)."""
    monkeypatch.setattr(lifecycle, "_PROMOTE_MIN", 0)
    path = tmp_path / "m.db"
    trio.run(_make, path)
    before = set(threading.enumerate())
    with monkeypatch.context() as patch:
        patch.setattr(gc, "freeze", _raising(gc.freeze, "before"))
        tasks, interrupted = trio.run(_attempt, None, lambda: open_memory(path=path))
    assert interrupted
    assert not gc.get_freeze_count()
    _check_nothing_left(tmp_path, tasks, before)
    assert _count(path) == 2


def _returning_then_raising(real: Callable[..., Any]) -> Callable[..., Any]:
    async def opened(*args: Any, **kwargs: Any) -> Any:
        await real(*args, **kwargs)
        raise KeyboardInterrupt  # as trio's handler raises it at the caller's next bytecode

    return opened


@pytest.mark.parametrize("how", ["open_memory", "serve_memory"])
def test_an_interrupt_right_after_the_open_returned_leaves_nothing(
    tmp_path: Path, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between ``_open_memory``'s return and its caller's ``try``: before the fix the
    caller never got the memory, whose store was attached (its file stayed held)."""
    path = tmp_path / "m.db"
    trio.run(_make, path)
    before = set(threading.enumerate())
    with monkeypatch.context() as patch:
        patch.setattr(lifecycle, "_open_memory", _returning_then_raising(lifecycle._open_memory))
        tasks, interrupted = trio.run(_attempt, None, lambda: _OPENERS[how](path=path))
    assert interrupted
    _check_nothing_left(tmp_path, tasks, before)
    assert _count(path) == 2


# ------------------------------------------------------------------------- replicas


class _Logs:
    """Every log connection ``PgLog.open`` made while patched."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from actormem._storage.pglog import PgLog

        self.made: list[Any] = []
        real = PgLog.open.__func__  # type: ignore[attr-defined]

        def open_(cls: Any, *args: Any, **kwargs: Any) -> Any:
            log = real(cls, *args, **kwargs)
            self.made.append(log)
            return log

        monkeypatch.setattr(PgLog, "open", classmethod(open_))

    def left_open(self) -> list[Any]:
        return [log for log in self.made if log._conn is not None]


@pytest.mark.parametrize("kind", ["interrupt", "cancel"])
@pytest.mark.parametrize("with_file", [True, False])
def test_a_node_struck_at_any_thread_of_its_open_leaves_nothing(
    tmp_path: Path, pg_dsn: str, kind: str, with_file: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replica node's open (the log's connection, its checkpoint file, the meta read,
    the claim, the catch-up): struck after each of its threads. Before the fix the log's
    connection (and the checkpoint file) opened before the ``try`` stayed open."""
    path = tmp_path / "node.db" if with_file else None
    options: dict[str, Any] = {"log": pg_dsn, "name": "mem", "log_options": FAST}
    trio.run(lambda: _make(path, **options))  # type: ignore[arg-type]
    at = 1
    while True:
        before = set(threading.enumerate())
        with monkeypatch.context() as patch:
            logs = _Logs(patch)
            inject = _Inject(patch, at, kind)
            tasks, _ = trio.run(_attempt, inject, lambda: open_memory(path=path, **options))
            assert logs.left_open() == []
        _check_nothing_left(tmp_path, tasks, before)
        if inject.opened_calls is not None and inject.opened_calls < at:
            break
        assert inject.fired
        assert _count(path, **options) == 2  # type: ignore[arg-type]
        at += 1
    assert at >= 3


def test_a_node_struck_right_after_its_open_returned_leaves_nothing(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``open_memory``'s cleanup closed a node's file, never its log connection."""
    options: dict[str, Any] = {"log": pg_dsn, "name": "mem", "log_options": FAST}
    path = tmp_path / "node.db"
    trio.run(lambda: _make(path, **options))
    before = set(threading.enumerate())
    with monkeypatch.context() as patch:
        logs = _Logs(patch)
        patch.setattr(lifecycle, "_open_memory", _returning_then_raising(lifecycle._open_memory))
        tasks, interrupted = trio.run(_attempt, None, lambda: open_memory(path=path, **options))
        assert interrupted
        assert tasks == []
        assert len(logs.made) == 1
        assert logs.left_open() == []
    _check_nothing_left(tmp_path, [], before)
    assert _count(path, **options) == 2
