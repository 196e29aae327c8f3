"""``actormem mcp``: a Model Context Protocol server over stdio (docs/integrations.md)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .._errors import ActorMemError
from .._util import ignored_stop_signals, install_hint, read_token_file, replace_stop_handlers
from . import _Terminated
from ._options import add_memory_location, int_at_least

__all__ = ["add_mcp_parser", "cmd_mcp"]

#: SIGINT and SIGTERM while the command runs are received by trio
#: (``trio.open_signal_receiver``): the first cancels the serving, which unwinds as at
#: the end of stdin but at once (the calls in flight cancelled, the memory closed), and
#: the command exits 128 + the signal's number with one line on stderr. Off: SIGINT is
#: trio's KeyboardInterrupt, raised wherever the main task is (it could be lost, or come
#: out beside another error as a traceback), and SIGTERM is :class:`_Terminated`.
_SIGNALS_CANCEL = True

#: The command's log records (the SDK's among them) go to stderr one line each (time,
#: level, message). Off: the SDK's own setup (rich, wrapped at 80 columns, a rich
#: traceback per failed call).
_LOG_LINES = True


def add_mcp_parser(sub: Any, scorers: dict[str, Any]) -> None:
    """Register ``actormem mcp`` on the subcommand parsers ``sub``."""
    p = sub.add_parser(
        "mcp",
        help="serve a memory to MCP clients over stdio",
        description="Speak the Model Context Protocol on stdin/stdout, with the tools "
        "remember, recall, forget and stats, over a memory file, an in-process memory, or "
        "a running `actormem serve` (--server). Stops when stdin closes, once the requests "
        "already read are answered (30 s at most).",
    )
    where = add_memory_location(p)
    where.add_argument("--server", metavar="URL", help="use a running `actormem serve`")
    p.add_argument("--token-file", type=Path, help="bearer token for --server")
    p.add_argument(
        "--capacity", type=int_at_least(1), default=None, help="most entries kept (not --server)"
    )
    p.add_argument("--scorer", choices=sorted(scorers), default="word-overlap")
    p.set_defaults(handler=partial(cmd_mcp, scorers=scorers))


@contextlib.asynccontextmanager
async def _backend(args: argparse.Namespace, scorers: dict[str, Any]) -> AsyncIterator[Any]:
    if args.server is not None:
        from ..client import AsyncClient

        token = None
        if args.token_file is not None:
            try:
                token = read_token_file(args.token_file)
            except (OSError, ValueError) as exc:
                raise ActorMemError(f"--token-file: {exc}") from None
        async with AsyncClient(args.server, token=token) as client:
            yield client
        return
    from .._engine.lifecycle import open_memory

    async with open_memory(
        path=args.path, capacity=args.capacity, scorer=scorers[args.scorer]()
    ) as memory:
        yield memory


async def _serve(args: argparse.Namespace, scorers: dict[str, Any]) -> None:
    from ..integrations.mcp import build_mcp_server, serve_stdio

    async with _backend(args, scorers) as memory:
        # Not the SDK's run_stdio_async: at the end of stdin it cancels the calls in
        # flight; serve_stdio answers them first (EOF_GRACE seconds at most).
        await serve_stdio(build_mcp_server(memory))


async def _serve_until_signal(
    args: argparse.Namespace, scorers: dict[str, Any], early: list[int]
) -> int | None:
    """:func:`_serve`, cancelled by the first SIGINT or SIGTERM (or by one already noted
    in ``early``); returns its number, or None. A second signal while the serving winds
    down gives up at once (KeyboardInterrupt, :class:`_Terminated` for SIGTERM). A
    signal ignored when the command started (``SIG_IGN`` from its parent, e.g.
    ``actormem mcp &`` in a script: SIGINT) stays ignored, as ``actormem serve`` and
    ``import`` leave it."""
    got: list[int] = []
    serving = trio.CancelScope()
    ignored = ignored_stop_signals()  # before the receiver replaces the handlers

    async def watch(signals: AsyncIterator[int]) -> None:
        async for signum in signals:
            if signum in ignored:
                continue
            if got:
                from ..integrations.mcp import _give_up_flushing

                _give_up_flushing()  # (a wait for a stdout nobody reads ends too)
                raise _Terminated if signum == signal.SIGTERM else KeyboardInterrupt
            got.append(signum)
            serving.cancel()

    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        if early:
            got.append(early[0])
            serving.cancel()
        async with trio.open_nursery() as guard:
            guard.start_soon(watch, signals)
            try:
                with serving:
                    await _serve(args, scorers)
            finally:
                guard.cancel_scope.cancel()
    return got[0] if got else None


@contextlib.contextmanager
def _sigterm_noted(early: list[int]) -> Iterator[None]:
    """SIGTERM appended to ``early`` instead of raised while trio runs outside
    :func:`_serve_until_signal`'s receiver (its first and last steps: an exception raised
    in trio's own code would be an internal error); the handler before is restored. An
    ignored SIGTERM stays ignored; off the main thread nothing changes."""
    previous = replace_stop_handlers(lambda signum, frame: early.append(signum), (signal.SIGTERM,))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def _log_lines() -> Iterator[None]:
    """Log records to stderr one line each while the command runs (the SDK's setup,
    ``logging.basicConfig`` with rich, then finds the root logger set up and does
    nothing); the root logger as it was afterwards."""
    root = logging.getLogger()
    if not _LOG_LINES or root.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("[%(asctime)s] %(levelname)s %(message)s", "%m/%d/%y %H:%M:%S")
    )
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)  # the SDK's level: the same records as before
    # but not httpx's line per request (--server: one per tool call)
    quiet = [logging.getLogger(name) for name in ("httpx", "httpcore")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        for logger, old in zip(quiet, levels, strict=True):
            logger.setLevel(old)


def cmd_mcp(args: argparse.Namespace, scorers: dict[str, Any]) -> int:
    """Serve MCP on stdio until stdin closes; 0 then, 2 on bad options or a missing extra,
    128 + the signal's number after a SIGINT (130) or SIGTERM (143)."""
    try:
        import mcp  # noqa: F401
    except ImportError:
        print(
            f"actormem mcp: error: the mcp package is not installed ({install_hint('mcp')})",
            file=sys.stderr,
        )
        return 2
    if args.server is not None and args.capacity is not None:
        print("actormem mcp: error: --capacity does not apply to --server", file=sys.stderr)
        return 2
    with _log_lines():
        if not _SIGNALS_CANCEL:
            trio.run(_serve, args, scorers)
            return 0
        early: list[int] = []
        with _sigterm_noted(early):
            signum = trio.run(_serve_until_signal, args, scorers, early)
    if signum is None and early:  # a SIGTERM in trio's last steps
        signum = early[0]
    if signum is None:
        return 0
    print(f"actormem mcp: interrupted ({signal.Signals(signum).name})", file=sys.stderr)
    return 128 + signum
