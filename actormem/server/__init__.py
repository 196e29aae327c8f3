"""`actormem serve`: one memory served over HTTP/JSON to many processes (docs/server.md).

* :func:`create_app`: the ASGI app (FastAPI) over an open :class:`~actormem.Memory`.
* :func:`serve_http`: open a memory and serve it with hypercorn's trio worker until
  SIGINT/SIGTERM (or a stop event), then close it cleanly.

Needs the ``server`` extra (``pip install 'actormem[server]'``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._defaults import DEFAULT_MAX_BODY, DEFAULT_PORT

if TYPE_CHECKING:
    from ._app import create_app
    from ._run import is_loopback, read_token, serve_http, serve_memory_http

__all__ = [
    "DEFAULT_MAX_BODY",
    "DEFAULT_PORT",
    "create_app",
    "is_loopback",
    "read_token",
    "serve_http",
    "serve_memory_http",
]


def __getattr__(name: str) -> Any:
    # The app and the runner import fastapi and hypercorn (the ``server`` extra): only on
    # first use, so that ``actormem`` works on a plain install and says what is missing.
    if name == "create_app":
        from . import _app

        return _app.create_app
    if name in ("is_loopback", "read_token", "serve_http", "serve_memory_http"):
        from . import _run

        return getattr(_run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
