"""``actormem mcp``: a Model Context Protocol server over stdio (docs/integrations.md)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .._errors import ActorMemError
from .._util import install_hint, read_token_file
from ._options import add_memory_location, int_at_least

__all__ = ["add_mcp_parser", "cmd_mcp"]


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


def cmd_mcp(args: argparse.Namespace, scorers: dict[str, Any]) -> int:
    """Serve MCP on stdio until stdin closes; 0 then, 2 on bad options or a missing extra."""
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
    trio.run(_serve, args, scorers)
    return 0
