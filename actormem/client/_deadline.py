"""The synchronous client's deadline: every read and write of its connections waits at
most what is left of the call's time (httpx's own timeout bounds each one alone).

:class:`DeadlineBackend` wraps httpcore's network backend (the one in httpx's connection
pool); its connections, :class:`DeadlineStream`, cut each read's and write's timeout to
what is left of :data:`DEADLINE` (a thread-local time the client sets around a call) and
raise httpcore's timeout once nothing is left. Apart from httpx so that a machine without
it fails on ``import httpx`` first (actormem.client names the extra then).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

import httpcore

__all__ = ["DEADLINE", "DeadlineBackend", "DeadlineStream"]


class _Deadline(threading.local):
    """The monotonic time by which the calling thread's current call must be done, or
    None (no call of :class:`~actormem.client.Client` under way: ``export`` streams without one)."""

    at: float | None = None


DEADLINE = _Deadline()


def _left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """``timeout`` (seconds, httpx's bound on one read or write) cut to what is left of
    the thread's deadline; ``error`` raised when nothing is left."""
    at = DEADLINE.at
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise error("the answer did not arrive within the timeout")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    """A connection of :class:`~actormem.client.Client` whose every read and write waits
    at most what is left of the call's deadline (:data:`DEADLINE`): httpx bounds each one
    alone, so a server trickling its response's header a byte at a time kept a call going
    past its ``timeout`` (minor28)."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(
            ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout)
        )
        return DeadlineStream(tls)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's network backend whose connections are :class:`DeadlineStream`."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return DeadlineStream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = _left(timeout, httpcore.ConnectTimeout)
        return DeadlineStream(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)
