"""``--server URL`` for ``actormem query/stats/export``: the same answers from a server."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._entry import MemoryEntry, ScoredEntry
from .._errors import ActorMemError
from .._stats import MemoryStatistics
from .._util import read_token_file

__all__ = ["add_remote_options", "remote_contents", "remote_entries", "remote_hits"]

#: What the live-read note says (query and stats print it on stdout, export on stderr).
LIVE_NOTE = (
    "live read: {path} is held by a running memory; this is a consistent read-only "
    "snapshot of its last commit"
)


def add_remote_options(parser: argparse.ArgumentParser) -> None:
    """``--server URL`` and ``--token-file FILE`` (PATH must then be left out)."""
    parser.add_argument(
        "--server", metavar="URL", help="ask an `actormem serve` server instead of a file"
    )
    parser.add_argument("--token-file", type=Path, help="the server's bearer token (a file)")


def _client(args: argparse.Namespace) -> Any:
    from ..client import Client

    token = None
    if args.token_file is not None:
        try:
            token = read_token_file(args.token_file)
        except (OSError, ValueError) as exc:
            raise ActorMemError(f"--token-file: {exc}") from None
    try:
        return Client(args.server, token=token)
    except ValueError as exc:  # not an http(s) URL
        raise ActorMemError(f"--server: {exc}") from None


def remote_hits(args: argparse.Namespace) -> list[ScoredEntry]:
    """``query --server``: the best entries for the text (a retrieve: it counts as an
    access on the server, unlike a query of a file)."""
    with _client(args) as client:
        hits: list[ScoredEntry] = client.retrieve_scored(args.text, args.k)
        return hits


def remote_contents(args: argparse.Namespace) -> tuple[MemoryStatistics, list[MemoryEntry]]:
    """``stats --server``: the counters and every entry."""
    with _client(args) as client:
        return client.statistics(), list(client.export())


def remote_entries(args: argparse.Namespace) -> Iterator[MemoryEntry]:
    """``export --server``: every entry, streamed."""
    with _client(args) as client:
        yield from client.export()
