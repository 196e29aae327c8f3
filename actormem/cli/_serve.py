"""``actormem serve``: one memory over HTTP/JSON for many processes (docs/server.md)."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

import trio

from .._errors import ActorMemError
from .._util import install_hint
from ._options import add_memory_location, int_at_least, positive_seconds_or_none

__all__ = ["add_serve_parser", "cmd_serve"]


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be in 0..65535 (0: any free port), got {value}")
    return value


def add_serve_parser(sub: Any, scorers: dict[str, Any]) -> None:
    """Register ``actormem serve`` on the subcommand parsers ``sub``."""
    from ..server._defaults import DEFAULT_MAX_BODY, DEFAULT_PORT, DEFAULT_SEND_TIMEOUT

    p = sub.add_parser(
        "serve",
        help="serve one memory over HTTP/JSON to many processes",
        description="Serve one memory over HTTP/JSON until SIGINT or SIGTERM, then commit "
        "and close it (exit 0). See docs/server.md for the routes and the clients.",
    )
    add_memory_location(p)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT})"
    )
    p.add_argument("--capacity", type=int_at_least(1), default=None, help="most entries kept")
    p.add_argument("--scorer", choices=sorted(scorers), default="word-overlap")
    p.add_argument(
        "--durability",
        choices=["normal", "full"],
        default="normal",
        help="what an acknowledged write survives (with --path; docs/durability.md)",
    )
    p.add_argument(
        "--log",
        metavar="DSN",
        help="a PostgreSQL database: serve one node of the replicated memory --name over "
        "its write log there, with --path as the node's checkpoint (docs/replication.md)",
    )
    p.add_argument("--name", help="the replicated memory's name (with --log)")
    p.add_argument(
        "--token-file",
        type=Path,
        help="file holding the bearer token every API call must carry "
        "(required with a non-loopback --host)",
    )
    p.add_argument(
        "--max-body",
        type=int_at_least(1),
        default=DEFAULT_MAX_BODY,
        help=f"largest request body in bytes (default {DEFAULT_MAX_BODY})",
    )
    p.add_argument(
        "--send-timeout",
        type=positive_seconds_or_none,
        default=DEFAULT_SEND_TIMEOUT,
        metavar="SECONDS",
        help="reset a connection whose client takes no byte of its answer in this time "
        f"(stopped reading, e.g. mid-export; default {DEFAULT_SEND_TIMEOUT:g}; "
        "'none': no limit)",
    )
    p.set_defaults(handler=partial(cmd_serve, scorers=scorers))


def cmd_serve(args: argparse.Namespace, scorers: dict[str, Any]) -> int:
    """Run the server in the foreground; 0 after a clean stop, 2 on bad options."""
    try:
        from ..server._run import is_loopback, read_token, serve_http
    except ImportError as exc:  # pragma: no cover - the extra is missing
        print(
            f"actormem serve: error: {exc.name} is not installed ({install_hint('server')})",
            file=sys.stderr,
        )
        return 2
    token = None
    if args.token_file is not None:
        try:
            token = read_token(args.token_file)
        except (OSError, ValueError) as exc:
            print(f"actormem serve: error: --token-file: {exc}", file=sys.stderr)
            return 2
    elif not is_loopback(args.host):
        print(
            f"actormem serve: error: refusing to listen on {args.host} without --token-file: "
            "anyone who can reach it could read and change the memory",
            file=sys.stderr,
        )
        return 2
    where = "in memory" if args.path is None else str(args.path)
    if args.log is not None:
        from .._storage.pglog import redact_dsn

        where = f"node of {args.name!r} over {redact_dsn(args.log)}, {where}"

    def ready(binds: list[str]) -> None:
        auth = "token required" if token else "no token"
        print(f"actormem serve: {where} on {' '.join(binds)} ({auth})", flush=True)

    try:
        trio.run(
            partial(
                serve_http,
                path=args.path,
                durability=args.durability,
                host=args.host,
                port=args.port,
                capacity=args.capacity,
                scorer=scorers[args.scorer](),
                log=args.log,
                name=args.name,
                token=token,
                max_body=args.max_body,
                send_timeout=args.send_timeout,
                on_ready=ready,
            )
        )
    except BaseException as exc:
        error = _single(exc)
        if isinstance(error, ActorMemError):  # StorageError, a bad --name: one line, exit 2
            raise error from None
        if isinstance(error, OSError):
            print(
                f"actormem serve: error: cannot listen on {args.host}:{args.port}: "
                f"{error.strerror or error}",
                file=sys.stderr,
            )
            return 2
        raise
    print("actormem serve: stopped; the memory is committed and closed", flush=True)
    return 0


def _single(exc: BaseException) -> BaseException:
    """The one exception inside nested single-member exception groups (trio's nurseries)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc
