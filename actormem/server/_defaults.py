"""The server's defaults, importable without the ``server`` extra (the CLI's parser
shows them in ``actormem serve --help`` on a plain install)."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY", "DEFAULT_PORT", "DEFAULT_SEND_TIMEOUT"]

#: TCP port ``actormem serve`` listens on by default.
DEFAULT_PORT = 8765
#: Largest request body accepted by default: 4 MiB (a batch of a few thousand entries).
DEFAULT_MAX_BODY = 4 << 20
#: Seconds a write to a client may wait for the client to take any of it (its receive
#: buffer full: it stopped reading) before the server resets the connection, ending
#: the answer (an export's snapshot released).
DEFAULT_SEND_TIMEOUT = 60.0
