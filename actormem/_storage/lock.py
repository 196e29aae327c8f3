"""The lock file that makes one durable memory the only writer of its database file.

Theory of operation
-------------------
The owner of a durable memory holds an exclusive :func:`fcntl.flock` on ``<path>.lock``
for as long as the memory is open. A second opener, in another process or in the same
one (``flock`` locks belong to open file descriptions, not processes), fails at once
with :class:`~actormem.StorageError` instead of waiting or sharing the file.

Why a separate file and not the database itself: SQLite guards the database with POSIX
``fcntl`` locks, and a process that ``close()``-s *any* descriptor of a file drops *all*
of its ``fcntl`` locks on that file ("How To Corrupt An SQLite Database File", section
2.2, https://sqlite.org/howtocorrupt.html). So actormem never opens the database file
with plain ``open()`` while it might be held; it reads the header only under this lock.

The lock file is removed when the lock is released. Removing a lock file is safe only
with the usual check: after ``flock`` succeeds, the holder verifies that the path still
names the inode it locked (a competitor may have locked a file that was just unlinked)
and retries otherwise. The kernel releases the lock when the process dies (even by
SIGKILL), so a crashed owner never leaves the file held; at worst it leaves the empty
lock file behind, which the next opener reuses.
"""

from __future__ import annotations

import os

from .._errors import StorageError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileLock"]


class FileLock:
    """An exclusive, non-blocking lock on ``<path>.lock``; blocking I/O, call off the loop.

    Args:
        path: The database path the lock protects (used in error messages).
        lock_path: The lock file; ``<path>.lock`` by default.

    Raises:
        StorageError: The lock file cannot be created (directory not writable, ...), or
            another process or another open memory of this process holds it.
    """

    def __init__(self, path: str, lock_path: str | None = None) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise StorageError(path, "durable memories need fcntl.flock (POSIX systems only)")
        self.path = path
        self.lock_path = path + ".lock" if lock_path is None else lock_path
        self._fd: int | None = self._acquire()

    def _acquire(self) -> int:
        while True:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as exc:
                raise StorageError(
                    self.path, f"cannot create the lock file {self.lock_path}: {exc.strerror}"
                ) from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise StorageError(
                    self.path,
                    "held by another memory (another process, or another open_memory in "
                    "this process); close it first",
                ) from None
            except OSError as exc:
                os.close(fd)
                raise StorageError(
                    self.path, f"cannot lock {self.lock_path}: {exc.strerror}"
                ) from exc
            try:
                on_disk = os.stat(self.lock_path)
            except FileNotFoundError:
                os.close(fd)  # the previous holder removed it after we opened it: retry
                continue
            mine = os.fstat(fd)
            if (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino):
                return fd
            os.close(fd)  # replaced meanwhile: lock the current file instead

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Remove the lock file and release the lock. Idempotent; never raises."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.unlink(self.lock_path)  # while still holding it: see the module docs
        except OSError:
            pass
        os.close(fd)
