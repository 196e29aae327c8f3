"""A real ``actormem serve`` process on a free loopback port, for the server tests."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
_READY = re.compile(r" on (http://\S+) ")


class ServerProcess:
    """``python -m actormem serve --port 0 ...``; :attr:`url` once it listens."""

    def __init__(self, *args: str, token: str | None = None, tmp: Path | None = None) -> None:
        argv = [sys.executable, "-m", "actormem", "serve", "--port", "0", *args]
        self.token = token
        if token is not None:
            assert tmp is not None
            token_file = tmp / f"token-{os.getpid()}-{time.monotonic_ns()}"
            token_file.write_text(token + "\n")
            argv += ["--token-file", str(token_file)]
        self.argv = argv
        # stderr to a file: a pipe nobody reads would block a server that logs a lot.
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            argv,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self.url = self._wait_ready(timeout=30.0)

    def _wait_ready(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.1)
            if ready:
                line = self.proc.stdout.readline()
                match = _READY.search(line)
                if match:
                    return match.group(1)
                if not line and self.proc.poll() is not None:
                    break
        self.proc.kill()
        self.proc.communicate()
        raise RuntimeError(f"server did not start: {self.argv}\n{self.stderr()}")

    def stderr(self) -> str:
        self._stderr.seek(0)
        return self._stderr.read()

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def stop(self, timeout: float = 20.0) -> tuple[int, str, str]:
        """SIGTERM, then wait: ``(exit status, rest of stdout, stderr)``."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, self.stderr()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
        self.kill()  # also closes the stdout pipe
        self._stderr.close()


async def serve_port(nursery: Any, memory: Any, stop: Any, graceful_timeout: float = 1.0) -> int:
    """Serve ``memory`` over HTTP in ``nursery`` (this trio run) on a free loopback port
    until ``stop`` is set; the port."""
    from actormem.server._run import serve_memory_http

    binds = await nursery.start(
        lambda task_status: serve_memory_http(
            memory, port=0, stop=stop, graceful_timeout=graceful_timeout, task_status=task_status
        )
    )
    return int(binds[0].rsplit(":", 1)[1])


def exchange(port: int, request: bytes) -> bytes:
    """Send ``request`` (raw bytes) to the loopback ``port``; everything the server
    answers, read until it closes. Blocking."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        try:
            conn.sendall(request)
        except OSError:  # the server answered and closed before reading it all
            pass
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer
