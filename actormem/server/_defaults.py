"""The server's defaults, importable without the ``server`` extra (the CLI's parser
shows them in ``actormem serve --help`` on a plain install)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_PORT"]

#: TCP port ``actormem serve`` listens on by default.
DEFAULT_PORT = 8765
#: Largest request body accepted by default: 4 MiB (a batch of a few thousand entries).
DEFAULT_MAX_BODY = 4 << 20
