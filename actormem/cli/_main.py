"""The ``actormem`` command: ``swarm``, ``query``, ``stats``, ``import``, ``export``, ``eval``.

Every subcommand is a function ``(args) -> exit status`` set as the parser's ``handler``.
Exit statuses: 0 success; 1 the run finished but a check failed (accounting, ``--verify``);
2 bad input (unknown option, missing or malformed file), reported as one line on stderr
naming the file and line, with nothing written; 141 (128 + SIGPIPE) when the reader of
stdout went away (``actormem export f.db | head -1``), quietly.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import gc
import json
import os
import platform
import re
import shlex
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import trio
from rich.console import Console

from .._engine.lifecycle import open_memory
from .._engine.memory import Memory
from .._entry import MemoryCategory, MemoryEntry
from .._errors import ActorMemError, StorageError
from .._index.dense import entry_document, text_hash
from .._outfile import missing_directory
from .._storage.jsonl import JsonlError, entry_to_json, escape_json_line, vector_to_json
from .._storage.sqlite_format import read_stored_vectors
from .._util import (
    STOP_SIGNALS,
    gc_paused,
    ignored_stop_signals,
    install_hint,
    read_token_file,
    replace_stop_handlers,
    to_oldest_generation,
)
from .._version import package_version
from ..agent._text import cut, escape_line
from ..agent._toolcalls import read_import_file
from ..eval import _cli as _eval_cli
from . import SIGTERM_UNWINDS, _on_sigterm, _Terminated
from ._display import PipeConsole, result_tables, watch
from ._mcp import add_mcp_parser
from ._options import InputError as _InputError
from ._options import Parser as _Parser
from ._options import check_json_target, write_json
from ._options import int_at_least as _int_at_least
from ._remote import LIVE_NOTE, add_remote_options, remote_contents, remote_entries, remote_hits
from ._serve import add_serve_parser
from ._swarm import (
    CAUSES,
    Accounting,
    Removals,
    SwarmRun,
    check_accounting,
    run_swarm,
    summarize_latency,
)
from ._swarm_args import PROG, SCORERS, add_swarm_parser, swarm_workload
from ._swarm_data import Workload

if TYPE_CHECKING:
    from .._engine.bulk import BulkResult

__all__ = ["main"]


class _Interrupted(Exception):
    """SIGINT (Ctrl-C) or SIGTERM stopped the command; the message says what it left.

    Attributes:
        status: The exit status, 128 + the signal's number (130 for SIGINT).
    """

    def __init__(self, message: str, *, signum: int = signal.SIGINT) -> None:
        name = signal.Signals(signum).name
        super().__init__(f"interrupted ({name}): {message}")
        self.status = 128 + signum


# ---------------------------------------------------------------------------- opening


@asynccontextmanager
async def _open(
    path: Path | None, *, capacity: int | None = None, scorer: str = "word-overlap"
) -> AsyncIterator[Memory]:
    """The memory at ``path`` (a SQLite file), or an in-memory one when ``path`` is None."""
    options: dict[str, Any] = {"capacity": capacity, "scorer": SCORERS[scorer]()}
    if path is not None:
        options["path"] = path
    async with open_memory(**options) as memory:
        yield memory


def _existing(path: Path) -> Path:
    if not path.exists():
        raise _InputError(f"{path}: no such file")
    if path.is_dir():
        raise _InputError(f"{path}: is a directory, not a memory file")
    return path


def _image_scorer(path: Path) -> str:
    """The scorer whose index image the file at ``path`` keeps: ``"bm25"`` when its
    image's header names a BM25 index, else ``"word-overlap"`` (no image, another kind,
    not a regular file, a file SQLite cannot read: the open then says what is wrong). For
    the commands that rank nothing (``stats``, ``export``): opened with the default
    scorer, a BM25 file's image was refused with a warning ("the file's index image was
    not used") and every text tokenized for an index they never use (review rev44b).
    Read-only; O(the header's size) (``sqlite_format.image_kind``)."""
    from .._storage.sqlite_format import image_kind

    return "bm25" if image_kind(path) == "bm25" else "word-overlap"


@asynccontextmanager
async def _reading(
    path: Path, *, scorer: str = "word-overlap", live_note_to: Any = None
) -> AsyncIterator[Memory]:
    """The memory at ``path`` to read; when a running memory holds the file, a live read
    (a consistent read-only snapshot, see ``_engine/live.py``), said on ``live_note_to``.
    A replicated memory's node checkpoint (which only its node may open: a write there
    would not be in the log) is read the same way, without the note."""
    entered = False
    note = True
    try:
        async with _open(path, scorer=scorer) as memory:
            entered = True
            if memory._storage is not None:
                # A read writes nothing: not even the index image a clean close keeps,
                # which would replace the file's (another scorer's: its program's next
                # open would rebuild its index), nor the removal of expired entries (the
                # reads hide them; the file's next writer removes them).
                memory._storage.image_fresh = True
                memory._auto_sweep = False
            yield memory
    except StorageError as exc:
        from .._engine.live import is_held_elsewhere  # a read of a held file only
        from .._storage.sqlite import is_node_file

        if entered or not (is_held_elsewhere(exc.reason) or is_node_file(exc.reason)):
            raise
        note = not is_node_file(exc.reason)
    else:
        return
    from .._engine.live import open_live_copy

    async with open_live_copy(path, scorer=SCORERS[scorer]()) as memory:
        memory._auto_sweep = False  # (in memory only, but _expired_kept counts them)
        # Said once the snapshot is read: a file the read refuses (a newer actormem's,
        # a damaged one) gets its error alone, not a note promising a snapshot first.
        if note:
            print(LIVE_NOTE.format(path=printable(str(path))), file=live_note_to or sys.stdout)
        yield memory


def _expired_kept(memory: Memory) -> int:
    """Entries of a memory opened by :func:`_reading` that have expired but are still in
    the file (a read removes nothing): its reads and ``len`` leave them out."""
    return memory._state._published_len - len(memory)


def _path_or_server(args: argparse.Namespace) -> Path | None:
    """PATH, or None with ``--server``; exactly one of them."""
    if (args.path is None) == (args.server is None):
        raise _InputError("give a memory file PATH or --server URL (one of them)")
    return None if args.path is None else _existing(args.path)


class _RemoteMemory:
    """What ``swarm --server URL`` reads of a memory it does not own, through the
    synchronous client (short calls on loopback, made between the run's phases): its
    length, entries and counters, and the removal reports the server keeps for exact
    accounting (``GET /v1/removals``)."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._cursor = 0
        self.url: str = client.url

    def __len__(self) -> int:
        return int(self._client.count())

    def snapshot(self) -> list[MemoryEntry]:
        return list(self._client.export())

    def statistics(self) -> Any:
        return self._client.statistics()

    def mark(self) -> None:
        """Removal reports from now on belong to the run."""
        self._cursor = self._client.removals(after=0, limit=1)[0]

    def pull(self, removals: Removals) -> None:
        """Append the reports since :meth:`mark` to ``removals`` (its run part).

        Raises:
            _InputError: The server dropped reports before they were read (its feed keeps
                the latest million): the accounting could not be exact.
        """
        while True:
            _, first, reports = self._client.removals(after=self._cursor, limit=10_000)
            if self._cursor + 1 < first:
                raise _InputError(
                    f"--server {self.url}: the server dropped removal reports before they "
                    "were read; the accounting cannot be exact"
                )
            if not reports:
                return
            removals.log.extend((id, cause) for _, id, cause in reports)
            self._cursor = reports[-1][0]


def _token_option(path: Path) -> str:
    """The token in ``--token-file`` ``path``.

    Raises:
        _InputError: It cannot be read, or holds no token (one line, naming the file).
    """
    try:
        return read_token_file(path)
    except ValueError as exc:
        raise _InputError(f"--token-file: {exc}") from None


@contextlib.asynccontextmanager
async def _remote_memory(args: argparse.Namespace) -> AsyncIterator[_RemoteMemory]:
    from ..client import Client

    token = None if args.token_file is None else _token_option(args.token_file)
    with Client(args.server, token=token) as client:
        yield _RemoteMemory(client)


async def _settle(memory: Memory) -> None:
    """Wait until every earlier request, the access bookkeeping of past retrieves
    included, is applied and published: a no-op write (deleting an id that was never
    stored) is answered only after everything queued before it."""
    await memory.delete(uuid.uuid4())


# ---------------------------------------------------------------------------- swarm


async def _swarm_processes(
    memory: Memory, args: argparse.Namespace, run: SwarmRun, nursery: trio.Nursery
) -> list[str]:
    """``--processes N``: serve ``memory`` on a loopback port and run the agents in N
    processes (``_swarm_procs.py``); their results are merged into ``run``."""
    from ..server import serve_memory_http
    from ._swarm_procs import run_agent_processes

    stop = trio.Event()
    if args.server is not None:
        url = args.server
    else:
        binds = await nursery.start(partial(serve_memory_http, memory, stop=stop))
        url = binds[0]
    run.start_clocks()
    try:
        errors = await run_agent_processes(url, args.argv, args.processes or 1, run)
    finally:  # an interrupt cancels the children: the run still lasted this long
        run.stop_clocks()
        stop.set()
    return errors


def _options_json(args: argparse.Namespace, path: Path | None) -> dict[str, Any]:
    log = None
    if args.log is not None:
        from .._storage.pglog import redact_dsn  # (only a run with --log names a DSN)

        log = redact_dsn(args.log)
    return {
        "agents": args.agents,
        "processes": args.processes,
        "episodes": args.episodes,
        "duration": args.duration,
        "steps": args.steps,
        "capacity": args.capacity,
        "top_k": args.top_k,
        "scorer": args.scorer,
        "seed": args.seed,
        "scale": args.scale,
        "tool_calls": [str(p) for p in args.tool_calls],
        "path": None if path is None else str(path),
        "in_memory": args.in_memory,
        "reuse_path": args.reuse_path,
        "verify": args.verify,
        "json": None if args.json is None else str(args.json),
        "interval": args.interval,
        "log": log,
        "nodes": args.nodes,
        "server": args.server,
        "token_file": None if args.token_file is None else str(args.token_file),
    }


def _accounting_lines(accounting: Accounting) -> list[str]:
    """The accounting's verdict as printed lines, ending with ``lost: N``."""
    lines = []
    for name, tally in (
        ("stores", accounting.stores),
        ("entries present at the start", accounting.initial),
    ):
        if tally.tracked or name == "stores":
            terms = " + ".join(f"{getattr(tally, term):,} {term}" for term in ("present", *CAUSES))
            lines.append(f"accounting: {tally.tracked:,} {name} = {terms}")
    loaded = sum(accounting.before_run.values())
    if loaded:
        lines.append(
            f"accounting: {loaded:,} entries of the file removed while loading it "
            f"({accounting.before_run['evicted']:,} evicted), before the run"
        )
    if accounting.lost:
        more = ", ..." if accounting.lost > len(accounting.lost_ids) else ""
        lines.append(
            f"accounting FAILED: {accounting.lost:,} lost (not present, no removal "
            f"reported): {', '.join(accounting.lost_ids)}{more}"
        )
    if accounting.unexpected:
        lines.append(
            f"accounting FAILED: {accounting.unexpected:,} unexpected (present or "
            f"reported removed beyond what was stored), e.g. "
            f"{', '.join(accounting.unexpected_ids)}"
        )
    for cause in accounting.counter_mismatches:
        lines.append(
            f"accounting FAILED: the engine counted {accounting.counters[cause]:,} "
            f"{cause} but reported {accounting.reports[cause]:,}"
        )
    if not accounting.totals_hold:
        lines.append(
            f"accounting FAILED: totals: {accounting.tracked:,} tracked != "
            f"{accounting.present:,} present + "
            f"{sum(accounting.counters.values()):,} counted removals"
        )
    lines.append(f"lost: {accounting.lost}")
    return lines


class _Stop:
    """The first SIGINT or SIGTERM of a swarm run: which one, and the scope it cancels."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.scope: trio.CancelScope | None = None

    def stop(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        if self.scope is not None:
            self.scope.cancel()


async def _watch_signals(
    signals: AsyncIterator[int], stop: _Stop, ignored: Collection[int] = ()
) -> None:
    """The first signal ends the run gracefully (the report shows what it did); a second
    one while the report is made gives up at once (KeyboardInterrupt)."""
    # ``ignored``: the signals ignored when the command started (a background job of a
    # shell without job control gets SIGINT ignored, so that a Ctrl-C meant for the
    # foreground leaves it alone). They stay ignored: the receiver replaced their
    # disposition, so they are dropped here.
    async for signum in signals:
        if signum in ignored:
            continue
        if stop.signum is not None:
            raise KeyboardInterrupt
        stop.stop(signum)


async def _swarm(
    args: argparse.Namespace, workload: Workload, path: Path | None, console: Console
) -> tuple[int, dict[str, Any]]:
    """The swarm run, with SIGINT and SIGTERM handled by trio for its whole length (so an
    interrupt never strikes at a random place: it cancels the run, and the figures of
    what ran are still counted, checked and reported)."""
    stop = _Stop()
    ignored = ignored_stop_signals()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as guard:
            guard.start_soon(_watch_signals, signals, stop, ignored)
            try:
                return await _swarm_run(args, workload, path, console, stop)
            finally:
                guard.cancel_scope.cancel()


async def _swarm_run(
    args: argparse.Namespace,
    workload: Workload,
    path: Path | None,
    console: Console,
    stop: _Stop,
) -> tuple[int, dict[str, Any]]:
    removals = Removals()
    child_errors: list[str] = []
    options: dict[str, Any] = {
        "path": path,
        "capacity": args.capacity,
        "scorer": SCORERS[args.scorer](),
        "on_remove": removals,
    }
    # A signal while the file opens is noted and acted on once it is open (a second one
    # gives up at once): the open runs in a worker thread that cannot be cut short.
    remote = args.server is not None
    # The same names either way (len, snapshot, statistics): the run and report below
    # read both alike.
    opened: Any = _remote_memory(args) if remote else open_memory(**options)
    async with opened as memory:
        if stop.signum is not None:
            raise _Interrupted("before the run started", signum=stop.signum)
        if (
            _NO_IMAGE_FOR_TEMPORARY
            and args.path is None
            and not args.verify
            and getattr(memory, "_storage", None) is not None
        ):
            # The memory file is this run's temporary one, removed right after its close
            # (no --verify reopens it): an index image kept for its next open would
            # never be read. Its rows are committed and the file closed as always.
            memory._storage.keep_image = False
            if _NO_CHECKPOINT_FOR_TEMPORARY:
                # Nor a checkpoint on its close: it would copy the WAL into a file
                # removed right after.
                memory._storage.checkpoint_on_close = False
        if path is not None and len(memory) and not args.reuse_path:
            raise _InputError(
                f"--path {path}: holds {len(memory):,} entries; the swarm would add its "
                "benchmark entries to them, and its consolidations may merge or prune "
                "them. Name a new file, or pass --reuse-path to run on it anyway"
            )
        # No checkpoint from here to run_swarm: the three agree on where the run starts.
        initial = [e.id for e in memory.snapshot()]
        before = memory.statistics()
        removals.start_run()
        if remote:
            memory.mark()
        run = SwarmRun(agents=args.agents)
        with trio.CancelScope() as running:
            stop.scope = running
            if stop.signum is not None:
                running.cancel()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(
                    lambda: watch(
                        run,
                        memory.statistics,
                        total=workload.total,
                        total_steps=workload.total_steps,
                        interactive=console.is_terminal,
                        interval=args.interval,
                        out=sys.stdout,
                    )
                )
                if args.processes is None and not remote:
                    await run_swarm(
                        memory,
                        workload,
                        agents=args.agents,
                        top_k=args.top_k,
                        duration=args.duration,
                        max_steps=args.steps,
                        run=run,
                    )
                else:
                    child_errors = await _swarm_processes(memory, args, run, nursery)
                nursery.cancel_scope.cancel()
        stop.scope = None
        if remote:
            memory.pull(removals)
        else:
            await _settle(memory)
        stats = memory.statistics()
        uncertain = list(run.uncertain)
        unreported = stop.signum is not None and (args.processes is not None or remote)
        if unreported:
            # Interrupted agent processes die with the list of stores the server
            # acknowledged them: what the memory shows of the run is all there is to go
            # on, so it is counted as arrived (unchecked, and said so below).
            shown = {e.id for e in memory.snapshot()} | {i for i, _ in removals.during_run}
            uncertain.extend(shown - set(initial) - set(run.stored))
        accounting = check_accounting(
            memory,
            initial=initial,
            stored=run.stored,
            uncertain=uncertain,
            removals=removals,
            before=before,
        )
        final = {e.id: e for e in memory.snapshot()} if args.verify and path is not None else None
    _keep_for_exit(memory)  # closed: only its objects are left, for the system to free
    interrupted = None if stop.signum is None else signal.Signals(stop.signum).name
    latency = {
        "store": summarize_latency(run.store_latency),
        "retrieve": summarize_latency(run.retrieve_latency),
        "consolidate": summarize_latency(run.consolidate_latency),
    }
    if interrupted is not None:
        print(
            f"interrupted by {interrupted} after {run.elapsed:.1f} s: the figures below "
            "are those of the part that ran"
        )
    for table in result_tables(run, latency, stats, accounting):
        console.print(table)
    whose = "this process and its agent processes" if run.child_cpu_s else "this process"
    print(
        f"CPU: {run.cpu_s:.2f} s of {whose} (user + system), "
        f"{run.operations_per_cpu_s:,.0f} memory operations per CPU-second"
    )
    status = 0 if accounting.ok else 1
    for line in _accounting_lines(accounting):
        print(line)
    if unreported:
        print(
            "accounting: not checked per id: the interrupted agent processes could not "
            "report which stores the server acknowledged them; the memory's entries of "
            "this run are counted as stored"
        )
    if run.failures:
        status = 1
        print(f"failed memory calls: {run.failures} (see the warnings above)")
    for line in child_errors:
        status = 1
        print(line)
    verify: dict[str, Any] | None = None
    if final is not None:
        assert path is not None
        verify = await _verify(path, args, final)
        print(
            f"verify: reopened {path}: {verify['entries']:,} entries, "
            f"{verify['differing']:,} differ, {verify['missing']:,} missing, "
            f"{verify['extra']:,} extra"
        )
        if not verify["ok"]:
            status = 1
    sys.stdout.flush()
    report: dict[str, Any] = {
        "actormem_version": package_version(),
        "python": platform.python_version(),
        "machine": {"system": platform.system(), "cpus": os.cpu_count()},
        "options": _options_json(args, path),
        "data": workload.description,
        "data_files": [],
        "interrupted": interrupted,
        "elapsed_s": run.elapsed,
        "throughput": {
            "agents": run.agents,
            "episodes": run.episodes_done,
            "episodes_succeeded": run.episodes_succeeded,
            "episodes_interrupted": run.episodes_interrupted,
            "steps": run.steps,
            "operations": run.operations,
            "operations_per_s": run.operations / run.elapsed if run.elapsed else 0.0,
            "steps_per_s": run.steps / run.elapsed if run.elapsed else 0.0,
            "cpu_s": run.cpu_s,
            "operations_per_cpu_s": run.operations_per_cpu_s,
            "failures": run.failures,
        },
        "latency_ms": {op: None if s is None else s.to_json() for op, s in latency.items()},
        "memory": {
            "entries": stats.entries,
            "capacity": stats.capacity,
            "stores": stats.stores - before.stores,
            "evictions": accounting.counters["evicted"],
            "prunes": accounting.counters["pruned"],
            "merges": accounting.counters["merged"],
            "consolidations": stats.consolidations - before.consolidations,
            "upserts": accounting.counters["replaced"],
            "deletes": accounting.counters["deleted"],
        },
        "accounting": accounting.to_json(),
        "verify": verify,
        "status": status,
    }
    return status, report


async def _verify(
    path: Path, args: argparse.Namespace, final: dict[uuid.UUID, MemoryEntry]
) -> dict[str, Any]:
    async with _open(path, capacity=args.capacity, scorer=args.scorer) as memory:
        reopened = {e.id: e for e in memory.snapshot()}
    differing = sum(1 for i, e in final.items() if i in reopened and reopened[i] != e)
    missing = sum(1 for i in final if i not in reopened)
    extra = sum(1 for i in reopened if i not in final)
    return {
        "entries": len(reopened),
        "differing": differing,
        "missing": missing,
        "extra": extra,
        "ok": differing == missing == extra == 0,
    }


#: A swarm on its own temporary memory file (no ``--path``, no ``--verify``; the folder is
#: removed when the command ends) closes the file without writing an image of its index
#: (:attr:`~actormem._storage.sqlite.SqliteStore.keep_image`): the image only serves
#: the file's next open, which cannot happen. The rows, the access updates held back and
#: the counters are still written, and the file checkpointed and closed, as before.
#: ~20-40 ms of CPU a durable run (building the image of ~5,700 entries and writing it).
#: False: the image is written and removed with the folder (the path before it).
_NO_IMAGE_FOR_TEMPORARY = True
#: The same temporary memory file (:data:`_NO_IMAGE_FOR_TEMPORARY`'s condition) is closed
#: without SQLite's final checkpoint
#: (:attr:`~actormem._storage.sqlite.SqliteStore.checkpoint_on_close`): the copy of the
#: WAL's pages into the database and its two fsyncs, for a file the folder's removal
#: deletes next (~6-7.5 ms of CPU and 30-45 ms of wall a main job on the project's VM,
#: part 6 of the main job's process outside its run). Every commit was acknowledged
#: after its ``COMMIT`` into the WAL, as before; nothing else changes. A file named by
#: ``--path`` or reopened by ``--verify`` is checkpointed as always. False: the close
#: checkpoints (the path before it).
_NO_CHECKPOINT_FOR_TEMPORARY = True


#: A process that runs one command and ends (:func:`run_command`: ``python -m actormem``,
#: the ``actormem`` script) ends a completed ``swarm`` with ``os._exit`` once its outputs
#: are flushed and its exit handlers have run, instead of the interpreter's teardown
#: (a full collection of everything still alive, every module's dict cleared, every
#: object freed one by one: tens of ms of CPU for the modules, the tool calls read and
#: the memory's index, all given back to the system at once anyway). The swarm's
#: memory and tool calls are then kept alive to the end, not freed object by object
#: when the run returns. False: the interpreter's own exit (the path before it; the
#: same output, files and exit status).
_FAST_EXIT = True

#: Set by :func:`run_command` (the process ends after this command): only then may a
#: command keep its objects alive for the exit (:data:`_KEPT_FOR_EXIT`). A ``main()``
#: called in-process (tests, embedding) leaves it False.
_ending_process = False
#: What a completed ``swarm`` leaves to the process's end (its workload, its memory):
#: freed by the system when :func:`run_command` ends the process with ``os._exit``.
_KEPT_FOR_EXIT: list[Any] = []
#: True once ``cmd_swarm`` finished normally: its memory closed, its figures printed
#: and its ``--json`` written and closed. :func:`run_command` ends the process at once
#: only then.
_swarm_done = False


def _keep_for_exit(value: Any) -> None:
    """Keep ``value`` alive until the process ends (see :data:`_FAST_EXIT`) when the
    process ends after this command; otherwise do nothing (it is freed as usual). O(1)."""
    if _FAST_EXIT and _ending_process:
        _KEPT_FOR_EXIT.append(value)


#: ``actormem swarm`` hides what the process holds when the run starts (its modules, the
#: tool calls read) from the cyclic collector for the run's length (``gc.freeze()``,
#: undone at its end): the run's full collections then walk only what the run made
#: (docs/design.md, "Garbage collection": the application's call, which the command is).
#: False: no freeze (the path before it).
_FREEZE_FOR_RUN = True


#: ``actormem swarm`` moves the tool calls it read (with the collector paused) to the
#: collector's oldest generation without walking them
#: (:func:`~actormem._util.to_oldest_generation`; not when objects are frozen already),
#: so that the young collection after the read does not walk ~5,700 calls and their
#: inputs just before :func:`_frozen_heap` hides them anyway (~1.5-2 ms of CPU on the
#: AMD VM). The process's other young objects go with them, as :func:`_frozen_heap`
#: then hides them all. Off: the young collection walks them (the path before it).
_PROMOTE_WORKLOAD = True


@contextlib.contextmanager
def _frozen_heap() -> Iterator[None]:
    """``gc.freeze()`` for the block, ``gc.unfreeze()`` after it (even on an error), so
    nothing is hidden for good: what the block's objects left in reference cycles is
    collected afterwards. Does nothing when :data:`_FREEZE_FOR_RUN` is off or something
    is frozen already (the caller's own freeze is left as it is). O(objects) at each end.
    """
    if not _FREEZE_FOR_RUN or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def cmd_swarm(args: argparse.Namespace) -> int:
    """``actormem swarm``: see ``docs/swarm.md``."""
    if args.json is not None:
        check_json_target(args.json)
    if args.path is not None and args.in_memory:
        raise _InputError("--path and --in-memory exclude each other")
    if args.verify and args.in_memory:
        raise _InputError("--verify needs a file: drop --in-memory")
    if args.reuse_path and args.path is None:
        raise _InputError("--reuse-path needs --path FILE")
    if args.path is not None and args.path.is_dir():
        raise _InputError(f"--path {args.path}: is a directory, not a memory file")
    missing = None if args.path is None else missing_directory(args.path)
    if missing is not None:  # before the run's banner
        raise _InputError(f"--path {args.path}: {missing}")
    if args.server is not None:
        if args.path is not None or args.in_memory or args.verify or args.capacity is not None:
            raise _InputError(
                "--server uses the server's memory: drop --path, --in-memory, --verify, "
                "--capacity"
            )
        if args.log is not None:
            raise _InputError("--server and --log exclude each other")
        if args.token_file is not None:
            _token_option(args.token_file)  # read again by each process; checked first
    elif args.token_file is not None:
        raise _InputError("--token-file is the bearer token for --server: give --server URL")
    if args.nodes > 1 and args.log is None:
        raise _InputError("--nodes needs --log DSN (the PostgreSQL database of the write log)")
    if args.log is not None:
        if args.path is not None or args.in_memory or args.verify:
            raise _InputError("--log runs its own node files: drop --path, --in-memory, --verify")
        from ._swarm_nodes import swarm_nodes

        return swarm_nodes(args)
    with gc_paused():  # the calls read live on: nothing for the collector to find
        workload, files = swarm_workload(args)
        if _PROMOTE_WORKLOAD:
            to_oldest_generation()
    console = PipeConsole(highlight=False)
    print(f"actormem swarm: {workload.description}", flush=True)
    if not args.tool_calls:
        print("  (pass --tool-calls FILE to replay real tool calls instead)", flush=True)
    with contextlib.ExitStack() as cleanup:
        path: Path | None = args.path
        if args.server is not None:
            where = f"of the server {printable(args.server)}"
        elif args.in_memory:
            where = "in RAM only (--in-memory)"
        elif path is None:
            # Made only now that it is needed, and removed on every way out (SIGINT and
            # SIGTERM end the run through _swarm, so this block still exits).
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="actormem-swarm-"))
            path = Path(folder) / "swarm.sqlite"
            where = f"in {path} (a temporary folder, removed at the end)"
        else:
            where = f"in {path}"
        print(
            f"{args.agents} agents"
            + (
                ""
                if args.processes is None and args.server is None
                else f" in {args.processes or 1} processes (HTTP)"
            )
            + f", top_k {args.top_k}, "
            + (
                "the server's scorer and capacity"
                if args.server is not None
                else f"scorer {args.scorer}, capacity "
                f"{'none' if args.capacity is None else args.capacity}"
            )
            + f", memory {where}",
            flush=True,
        )
        with _frozen_heap():
            status, report = trio.run(_swarm, args, workload, path, console)
    report["data_files"] = files
    report["command"] = shlex.join([PROG, *args.argv])
    signum = None if report["interrupted"] is None else signal.Signals[report["interrupted"]]
    if signum is not None:
        report["status"] = 128 + signum  # the exit status, as for a whole run
    if args.json is not None:
        write_json(args.json, report)
    if signum is not None:
        raise _Interrupted("the figures above are those of the part that ran", signum=signum)
    _keep_for_exit(workload)
    global _swarm_done
    _swarm_done = True
    return status


# ---------------------------------------------------------------------------- inspect


def _escape_char(char: str) -> str:
    code = ord(char)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` made safe to print on one terminal line: :func:`escape_line` (backslashes
    doubled, line breaks as ``\\n``...), then every other character that
    :meth:`str.isprintable` refuses (C0 and C1 controls such as ESC and CSI, format
    characters such as bidi overrides, unassigned and private-use code points, separators
    other than the space) written as ``\\x1b``, ``\\u009b``, ``\\U000e0001``. Text
    stored in a memory comes from untrusted tool results, so everything the CLI prints
    from a memory goes through this. O(n)."""
    text = escape_line(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape_char(c) for c in text)


def _one_line(text: str, width: int) -> str:
    return cut(printable(text), width)


def _names_a_file(word: str) -> bool:
    """Whether a lone ``query`` word is a memory file's name rather than a query: an
    existing file, or a name with a folder or a suffix (``m.db``, ``sub/m``)."""
    path = Path(word)
    return path.is_file() or bool(path.suffix) or len(path.parts) > 1


def cmd_query(args: argparse.Namespace) -> int:
    """``actormem query PATH TEXT``: the best entries for TEXT, with scores."""
    if args.path is None and args.server is None and _names_a_file(args.text):
        # One word given, and it names a file (an existing one, or a name with a folder or
        # a suffix: ``m.db``): argparse took it for TEXT (PATH is optional for --server),
        # but it is the memory file whose query text was left out.
        raise _InputError(
            f"no query text: give it after the memory file, actormem query "
            f"{shlex.quote(args.text)} TEXT (or --server URL TEXT)"
        )
    path = _path_or_server(args)

    async def run() -> list[Any]:
        assert path is not None
        if args.scorer in ("dense", "hybrid"):
            # Always through a read-only connection: the vectors this computes (those the
            # file lacks, or all of them when it keeps another model's) stay in memory,
            # where opening the file would store them and its model in the file.
            from .._engine.live import open_live_copy

            async with open_live_copy(path, scorer=SCORERS[args.scorer]()) as memory:
                return memory.snapshot().retrieve_scored(args.text, args.k)
        async with _reading(path, scorer=args.scorer) as memory:
            # A snapshot's retrieve leaves access bookkeeping alone: looking changes nothing.
            return memory.snapshot().retrieve_scored(args.text, args.k)

    hits = trio.run(run) if path is not None else remote_hits(args)
    if not hits:
        print("no entries")
        return 0
    for rank, hit in enumerate(hits, start=1):
        entry = hit.entry
        namespace = printable("/".join(entry.namespace)) or "-"
        print(f"{rank:>3}  {hit.score:.4f}  {entry.id}  {entry.category.value}  {namespace}")
        print(f"     {_one_line(entry.memory, args.width)}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """``actormem stats PATH``: entries, categories, namespaces and engine counters."""
    path = _path_or_server(args)

    async def run() -> tuple[Any, list[MemoryEntry], int]:
        assert path is not None
        async with _reading(path, scorer=_image_scorer(path)) as memory:
            return memory.statistics(), list(memory.snapshot()), _expired_kept(memory)

    if path is not None:
        stats, entries, expired = trio.run(run)
    else:
        (stats, entries), expired = remote_contents(args), 0
    by_category = {c.value: 0 for c in MemoryCategory}
    namespaces: dict[str, int] = {}
    size = 0
    for entry in entries:
        by_category[entry.category.value] += 1
        top = entry.namespace[0] if entry.namespace else "-"
        namespaces[top] = namespaces.get(top, 0) + 1
        size += len(entry.memory.encode("utf-8"))
    if path is None:
        print(f"server: {printable(args.server)}")
    else:
        print(f"file: {printable(str(path))} ({path.stat().st_size:,} bytes)")
    print(f"entries: {stats.entries:,}")
    if expired:
        print(f"expired: {expired:,} (still in the file, not counted: its next writer drops them)")
    print(f"text: {size:,} bytes of UTF-8")
    for name, count in by_category.items():
        if count:
            print(f"  {name}: {count:,}")
    if entries:
        print(f"oldest: {min(e.created_at for e in entries).isoformat()}")
        print(f"newest: {max(e.created_at for e in entries).isoformat()}")
        print(f"validated: {sum(e.validated for e in entries):,}")
        print(f"namespaces (first segment): {len(namespaces):,}")
        for name, count in sorted(namespaces.items(), key=lambda kv: (-kv[1], kv[0]))[:10]:
            print(f"  {printable(name)}: {count:,}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """``actormem import PATH FILE``: store every entry or tool call of FILE, or nothing."""
    new = not os.path.lexists(args.path)
    try:
        lines = read_import_file(args.file, later_wins=args.later_wins)
    except JsonlError as exc:
        raise _InputError(str(exc)) from None
    except KeyboardInterrupt as exc:  # while FILE is read: the memory file is not touched
        raise _import_interrupted(args.path, exc, new=new) from None
    if args.path.is_dir():
        raise _InputError(f"{args.path}: is a directory, not a memory file")
    # (imported here: only ``import`` stores in bulk; the other commands, the swarm
    # among them, leave the module unimported)
    from .._engine.bulk import store_all_or_nothing

    committed: list[bool] = []

    def report(result: BulkResult) -> None:  # run by the import with signals dropped
        committed.append(True)  # a failure from here on (stdout gone) keeps the file
        repeats = f"; {lines.repeated:,} repeated ids, later lines won" if lines.repeated else ""
        expired = (
            f" (and {result.expired:,} already expired, not counted: the file's next "
            "writer removes them)"
            if result.expired
            else ""
        )
        print(
            f"imported {lines.entry_lines + lines.tool_call_lines:,} lines "
            f"({lines.entry_lines:,} entries, "
            f"{lines.tool_call_lines:,} tool calls{repeats}) from {printable(str(args.file))} "
            f"into {printable(str(args.path))}: "
            f"{result.added:,} new, {result.replaced:,} replaced; it now holds "
            f"{result.after:,} entries{expired}"
        )
        for note in _vector_notes(lines.stale_vectors, result, lines.not_unit_vectors):
            print(f"{PROG} import: {note}", file=sys.stderr)
        sys.stdout.flush()

    try:
        # A failed import into a new path leaves no file behind: the file it created,
        # removed under its lock (never one that another writer created meanwhile, nor
        # a file it did not create: it failed to take the lock, docs/cli.md). A process
        # that ends after the report ignores SIGINT and SIGTERM once committed, so a
        # signal while it exits cannot deny a complete import (status 130 or 143).
        store_all_or_nothing(
            args.path,
            lines.entries,
            vectors=lines.vectors,
            report=report,
            remove_if_created=True,
            signals_stay_dropped=_ending_process,
        )
    except KeyboardInterrupt as exc:
        if committed:  # (in a test's main(): the handlers are back once it returns)
            return 0
        raise _import_interrupted(args.path, exc, new=new) from None
    return 0


def _import_interrupted(path: Path, exc: KeyboardInterrupt, *, new: bool) -> _Interrupted:
    """What ``import`` says when a signal stopped it before its commit: nothing imported,
    and the memory file unchanged (or not created, a path that did not exist before and
    does not now). O(1)."""
    signum = signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT
    left = "was not created" if new and not os.path.lexists(path) else "is unchanged"
    return _Interrupted(f"nothing imported: {printable(str(path))} {left}", signum=signum)


def _vector_notes(stale: int, result: BulkResult, not_unit: int = 0) -> list[str]:
    """What ``import`` says about the dense vectors it did not keep (and kept)."""
    notes = []
    if result.vectors:
        notes.append(f"kept {result.vectors:,} vectors of {printable(repr(result.model))}")
    later = "it is computed when the file is opened with a dense or hybrid scorer"
    if stale:
        notes.append(
            f"{stale:,} vectors not kept: their text_hash is not that of their entry's text "
            f"(edited after the export); {later}"
        )
    if not_unit:
        notes.append(
            f"{not_unit:,} vectors not kept: their length is not 1 (all zero, or scaled: "
            f"not as exported); {later}"
        )
    for (model, dim), count in sorted(result.other_models.items()):
        notes.append(
            f"{count:,} vectors of {printable(repr(model))} (dim {dim}) not kept: the file's "
            f"vectors are of {printable(repr(result.model))} (dim {result.dim}); {later}"
        )
    return notes


def cmd_export(args: argparse.Namespace) -> int:
    """``actormem export PATH``: every entry as one JSON line on stdout, insertion order."""
    path = _path_or_server(args)
    if args.salvage:
        if path is None:
            raise _InputError("--salvage reads a file: drop --server")
        return _export_salvage(path)

    async def run() -> tuple[list[MemoryEntry], tuple[str, int, dict[bytes, bytes]] | None]:
        assert path is not None
        async with _reading(path, scorer=_image_scorer(path), live_note_to=sys.stderr) as memory:
            # Read while the file is still ours or, on a live read, may be written by its
            # holder: a live read's connection either way (immutable only without a -wal).
            stored = None if args.no_vectors else read_stored_vectors(str(path), live=True)
            expired = _expired_kept(memory)
            if expired:
                print(
                    f"{PROG} export: {expired:,} expired entries not exported "
                    "(still in the file until its next writer removes them)",
                    file=sys.stderr,
                )
            return list(memory.snapshot()), stored

    out = sys.stdout
    if path is None:
        for entry in remote_entries(args):
            out.write(escape_json_line(json.dumps(entry_to_json(entry), ensure_ascii=False)) + "\n")
        out.flush()
        return 0
    entries, stored = trio.run(run)
    for entry in entries:
        obj = entry_to_json(entry)
        if stored is not None:
            model, dim, by_hash = stored
            digest = text_hash(entry_document(entry))
            data = by_hash.get(digest)
            if data is not None:
                obj["vector"] = vector_to_json(model, dim, digest, data)
        out.write(escape_json_line(json.dumps(obj, ensure_ascii=False)) + "\n")
    out.flush()
    return 0


#: Skipped rows and ranges named in the salvage report (the first ones).
_SALVAGE_NAMED = 5


def _export_salvage(path: Path) -> int:
    """``export --salvage``: every row that reads, then what was skipped (stderr); 1 if
    anything was skipped."""
    from .._storage.salvage import Salvage  # (only ``export --salvage`` reads a damaged file)

    salvage = Salvage(path)
    out = sys.stdout
    for entry in salvage.entries():
        out.write(escape_json_line(json.dumps(entry_to_json(entry), ensure_ascii=False)) + "\n")
    out.flush()
    parts = [f"salvaged {salvage.salvaged:,} entries from {path}"]
    if salvage.unreadable:
        ranges = ", ".join(
            f"after seq {a}" + ("" if b is None else f" before seq {b}")
            for a, b in salvage.unreadable[:_SALVAGE_NAMED]
        )
        more = ", ..." if len(salvage.unreadable) > _SALVAGE_NAMED else ""
        parts.append(
            f"{len(salvage.unreadable):,} unreadable regions skipped "
            f"(entries {ranges}{more}; how many they held is unknown)"
        )
    if salvage.skipped_rows:
        rows = "; ".join(f"seq {seq}: {why}" for seq, why in salvage.skipped_rows[:_SALVAGE_NAMED])
        more = "; ..." if len(salvage.skipped_rows) > _SALVAGE_NAMED else ""
        parts.append(f"{len(salvage.skipped_rows):,} rows skipped ({rows}{more})")
    if salvage.complete:
        parts.append("nothing skipped")
    print(f"{PROG} export: {error_line('; '.join(parts))}", file=sys.stderr)
    return 0 if salvage.complete else 1


# ---------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The ``actormem`` argument parser with every subcommand."""
    parser = _Parser(prog=PROG, description="actormem: a concurrent memory engine for LLM agents.")
    parser.add_argument("--version", action="version", version=f"{PROG} {package_version()}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    add_swarm_parser(sub).set_defaults(handler=cmd_swarm)

    q = sub.add_parser("query", help="the best entries of a memory file for a text")
    q.add_argument("path", type=Path, metavar="PATH", nargs="?", help="memory file")
    q.add_argument("text", metavar="TEXT", help="query text")
    add_remote_options(q)
    q.add_argument("-k", type=_int_at_least(1), default=5, help="entries to show (default 5)")
    q.add_argument("--scorer", choices=sorted(SCORERS), default="word-overlap")
    q.add_argument("--width", type=_int_at_least(10), default=160, help="text shown per entry")
    q.set_defaults(handler=cmd_query)

    s = sub.add_parser("stats", help="what a memory file holds")
    s.add_argument("path", type=Path, metavar="PATH", nargs="?", help="memory file")
    add_remote_options(s)
    s.set_defaults(handler=cmd_stats)

    i = sub.add_parser("import", help="store the entries or tool calls of a JSONL file")
    i.add_argument("path", type=Path, metavar="PATH", help="memory file (created if absent)")
    i.add_argument("file", type=Path, metavar="FILE.jsonl", help="entries or tool calls")
    i.add_argument(
        "--later-wins",
        action="store_true",
        help="let a line that repeats the id of an earlier line replace it "
        "(default: refuse the file, naming both lines)",
    )
    i.set_defaults(handler=cmd_import)

    e = sub.add_parser("export", help="every entry of a memory file as JSONL on stdout")
    e.add_argument("path", type=Path, metavar="PATH", nargs="?", help="memory file")
    add_remote_options(e)
    e.add_argument(
        "--no-vectors",
        action="store_true",
        help="leave out the entries' dense vectors (written by default when the file "
        "has some: a memory opened with a dense or hybrid scorer keeps them)",
    )
    e.add_argument(
        "--salvage",
        action="store_true",
        help="from a damaged file: write every entry that can be read, report on stderr "
        "what was skipped (exit status 1 if anything was)",
    )
    e.set_defaults(handler=cmd_export)

    _eval_cli.add_eval_parser(sub)
    add_serve_parser(sub, SCORERS)
    add_mcp_parser(sub, SCORERS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``actormem`` command line; return the exit status.

    Args:
        argv: Arguments after the program name (``sys.argv[1:]`` by default).

    Returns:
        0 on success, 1 when a check failed, 2 on bad input (message on stderr).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # reported by the subcommand, as its other usage errors are
            sub = f"{PROG} {args.command}"
            parser.exit(
                2, f"{sub}: error: unrecognized arguments: {' '.join(extra)} (see --help)\n"
            )
    except SystemExit as exc:  # --help, or a usage error already printed
        return exc.code if isinstance(exc.code, int) else 2
    args.argv = argv
    if getattr(args, "interval", 1.0) is None:
        args.interval = 0.25 if sys.stdout.isatty() else 5.0
    sub = f"{PROG} {args.command}"
    # SIGTERM unwinds like Ctrl-C where a command has something to clean up or report
    # (SIGTERM_UNWINDS). Elsewhere (serve handles its own signals) it keeps its default.
    previous = _install_sigterm() if args.command in SIGTERM_UNWINDS else None
    stops = _install_stop_once() if args.command == "import" else {}
    try:
        status: int = args.handler(args)
        sys.stdout.flush()
    except BaseException as exc:
        # trio's nurseries wrap what their tasks raised in exception groups: look inside.
        sole = _sole(exc)
        broke = sole.__cause__ if isinstance(sole, trio.BrokenResourceError) else None
        if isinstance(broke, StorageError):
            # The memory broke mid-run (a commit failed: disk full, I/O error, the file
            # removed; docs/durability.md): its cause in one line, things were written.
            print(f"{sub}: error: {error_line(str(broke))}", file=sys.stderr)
            return 1
        if isinstance(sole, (_InputError, ActorMemError)):  # e.g. StorageError
            print(f"{sub}: error: {error_line(str(sole))}", file=sys.stderr)
            return 2
        if isinstance(sole, _Interrupted):
            print(f"{sub}: {error_line(str(sole))}", file=sys.stderr)
            return sole.status
        if _only(exc, KeyboardInterrupt):
            terminated = _only(exc, _Terminated)
            print(f"{sub}: interrupted ({'SIGTERM' if terminated else 'SIGINT'})", file=sys.stderr)
            return 128 + (signal.SIGTERM if terminated else signal.SIGINT)
        if _only(exc, BrokenPipeError):
            return _stdout_closed()
        if isinstance(sole, ModuleNotFoundError) and sole.name:
            package = sole.name.split(".")[0]
            if package in _EXTRA_OF:
                print(
                    f"{sub}: error: {package} is not installed "
                    f"({install_hint(_EXTRA_OF[package])})",
                    file=sys.stderr,
                )
                return 2
        if isinstance(sole, OSError) and sole.errno == errno.ENOSPC:
            print(f"{sub}: error: no space left on device ({sole})", file=sys.stderr)
            return 1
        raise
    finally:
        _restore_stop_once(stops)
        _restore_sigterm(previous)
    return status


def run_command(argv: Sequence[str] | None = None) -> NoReturn:
    """Run :func:`main` as the whole process (``python -m actormem``, the ``actormem``
    script) and end the process with its exit status.

    After a completed ``swarm`` (see :data:`_FAST_EXIT`) the process ends with
    ``os._exit`` once stdout and stderr are flushed and the ``atexit`` handlers have run
    (log handlers flushed, a coverage tracer's data saved), when no thread but daemon
    threads is left; otherwise (another command, an error, a flush that fails, a
    non-daemon thread) through ``sys.exit``, the interpreter's own teardown. The exit
    status is the same either way. Never returns.

    SIGINT and SIGTERM are left as the command leaves them for the process's end (after
    an ``import``, ignored, so that no late signal turns its 0, 130 or 143 into a death
    by signal; the CLI's SIGTERM handler otherwise). A program that runs the CLI in its
    own process and goes on after catching the ``SystemExit`` (``runpy``, IPython's
    ``%run -m actormem``) should call :func:`main` instead, which puts them back.
    """
    global _ending_process
    _ending_process = True
    try:
        _no_closed_std_streams()
        _end_process_with(main(argv))
    except BaseException:
        # The process was to end here; one that catches the SystemExit (a script
        # running the CLI in-process with runpy) goes on as a plain caller of main():
        # its later commands must not take this one's end-of-process liberties
        # (signals left ignored after an import, objects kept for the exit).
        _ending_process = False
        raise


def _end_process_with(status: int) -> NoReturn:
    """End the process with ``status``: ``os._exit`` after a completed swarm (see
    :func:`run_command`), else ``sys.exit``."""
    if _FAST_EXIT and _swarm_done and _only_daemon_threads():
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # the interpreter's own exit reports it as it always did
            sys.exit(status)
        atexit._run_exitfuncs()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            sys.exit(status)
        os._exit(status)
    sys.exit(status)


def _no_closed_std_streams() -> None:
    """A process started with stdout or stderr closed (``actormem swarm >&-``: Python
    sets ``sys.stdout`` to None) writes to /dev/null there instead, as a command whose
    output is discarded (the commands call ``isatty`` and ``flush`` on them). O(1)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115


def _only_daemon_threads() -> bool:
    """No thread but the calling one and daemon threads (which the interpreter's exit
    would not wait for either). O(threads)."""
    me = threading.current_thread()
    return all(t is me or t.daemon for t in threading.enumerate())


#: The optional extra that brings each package a command may need (pyproject.toml).
_EXTRA_OF = {
    "fastapi": "server",
    "starlette": "server",
    "pydantic": "server",
    "hypercorn": "server",
    "prometheus_client": "server",
    "httpx": "client",
    "mcp": "mcp",
    "mcp_types": "mcp",
    "langchain_core": "langchain",
    "langgraph": "langgraph",
    "psycopg": "postgres",
    "wordllama": "dense",
    "bm25s": "stem",
    "Stemmer": "stem",
    "stop_words": "stem",
}


def _install_sigterm() -> Any:
    """Make SIGTERM raise :class:`_Terminated` (main thread only; one ignored when the
    command started, by its parent, stays so) and return the handler it replaced, or
    None if it replaced none (:func:`~actormem._util.replace_stop_handlers`)."""
    return replace_stop_handlers(_on_sigterm, (signal.SIGTERM,)).get(signal.SIGTERM)


def _stop_once(signum: int, frame: object) -> None:
    """``import``'s SIGINT and SIGTERM handler: the first signal unwinds
    (``KeyboardInterrupt``, :class:`_Terminated` for SIGTERM) and both are ignored from
    then on, so that a second one cannot cut the unwinding short: the removal of a file
    the import created, its one line, its exit status 130 or 143 (a second signal 50 ms
    after the first left the new file behind, or ended the process by SIGINT)."""
    for number in STOP_SIGNALS:
        if signal.getsignal(number) is _stop_once:
            signal.signal(number, signal.SIG_IGN)
    _stopped.append(signum)
    raise _Terminated if signum == signal.SIGTERM else KeyboardInterrupt


#: The signals :func:`_stop_once` acted on (tests, and :func:`_restore_stop_once`).
_stopped: list[int] = []


def _install_stop_once() -> dict[int, Any]:
    """Put :func:`_stop_once` on SIGINT and SIGTERM (main thread only; one ignored when
    the command started stays so) and return the handlers it replaced
    (:func:`~actormem._util.replace_stop_handlers`). O(1)."""
    _stopped.clear()
    return replace_stop_handlers(_stop_once)


def _restore_stop_once(previous: dict[int, Any]) -> None:
    """Put back the handlers :func:`_install_stop_once` replaced, where :func:`_stop_once`
    is still in place or ignored them after a signal; except in the process that ends
    now (:func:`run_command`) once a signal stopped the command: they stay ignored
    until it has ended with 130 or 143. O(1)."""
    if _ending_process and _stopped:
        return
    for number, handler in previous.items():
        current = signal.getsignal(number)
        if current is _stop_once or (current is signal.SIG_IGN and _stopped):
            signal.signal(number, handler)


def _restore_sigterm(previous: Any) -> None:
    """Put SIGTERM's handler from before :func:`_install_sigterm` back, if ours is still
    in place: a completed ``import`` ignores it until the process ends (``cmd_import``)."""
    if previous is not None and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, previous)


def _sole(exc: BaseException) -> BaseException:
    """``exc``, or the one exception inside nested groups that hold only it."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _only(exc: BaseException, kind: type[BaseException]) -> bool:
    """``exc`` is a ``kind``, or a group (trio's nurseries) of nothing else. trio's
    ``Cancelled`` beside them counts as nothing (the tasks an interrupt cancelled)."""
    if isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, trio.Cancelled)]
        return bool(inner) and all(_only(e, kind) for e in inner)
    return isinstance(exc, kind)


#: Exit status when the reader of stdout went away (``actormem export f.db | head -1``):
#: 128 + SIGPIPE, what a shell reports for a program SIGPIPE ended (as ``cat`` would be).
EXIT_BROKEN_PIPE = 141


def _stdout_closed() -> int:
    """The reader of stdout has gone: stop quietly, as the "Note on SIGPIPE" in the
    :mod:`signal` docs advises. stdout is pointed at /dev/null so the interpreter's final
    flush of what is still buffered does not fail again at exit."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a replaced stdout (tests): no descriptor
        return EXIT_BROKEN_PIPE
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)
    return EXIT_BROKEN_PIPE


_QUICK_CHECK_HEADER = re.compile(r"\*\*\* in database \S+ \*\*\*")


def error_line(message: str) -> str:
    """``message`` as the one line the CLI prints: a multi-line ``PRAGMA quick_check``
    report keeps its first problem and a count, any other line break becomes ``; ``, and
    non-printing characters are escaped (the message may quote a file's contents)."""
    head, sep, problems = message.partition("corrupted: ")
    parts = [
        p
        for p in (re.split(r"[\r\n]+|; ", problems) if sep else [])
        if p.strip() and not _QUICK_CHECK_HEADER.fullmatch(p.strip())
    ]
    if len(parts) > 1:
        message = f"{head}corrupted (quick_check: {len(parts)} problems; first: {parts[0]})"
    lines = [line for line in message.splitlines() if line.strip()]
    return "".join(c if c.isprintable() else _escape_char(c) for c in "; ".join(lines))
