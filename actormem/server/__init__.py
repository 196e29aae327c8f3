"""`actormem serve`: one memory served over HTTP/JSON to many processes (docs/server.md).

* :func:`create_app`: the ASGI app (FastAPI) over an open :class:`~actormem.Memory`.
* :func:`serve_http`: open a memory and serve it with hypercorn's trio worker until
  SIGINT/SIGTERM (or a stop event), then close it cleanly.

Needs the ``server`` extra (``pip install 'actormem[server]'``).
"""

from __future__ import annotations

from ._app import create_app
from ._run import (
    DEFAULT_MAX_BODY,
    DEFAULT_PORT,
    is_loopback,
    read_token,
    serve_http,
    serve_memory_http,
)

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "create_app",
    "is_loopback",
    "read_token",
    "serve_http",
    "serve_memory_http",
]
