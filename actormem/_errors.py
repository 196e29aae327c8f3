"""Every exception actormem raises on purpose, in one place.

The root is :class:`ActorMemError`. Each subclass also inherits the closest builtin
exception, so ``except ValueError`` keeps working for callers who do not know actormem.

Lifecycle errors are trio's own: a closed memory raises :class:`trio.ClosedResourceError`,
a memory whose owner task died raises :class:`trio.BrokenResourceError` (chained from the
owner's exception), and a full request channel makes ``*_nowait`` calls raise
:class:`trio.WouldBlock`.
"""

from __future__ import annotations

__all__ = ["ActorMemError", "InvalidEntryError", "InvalidQueryError", "StorageError"]


class ActorMemError(Exception):
    """Root of every error defined by actormem."""


class InvalidEntryError(ActorMemError, ValueError):
    """A :class:`~actormem.MemoryEntry` field has a value outside its documented range.

    Raised at construction (``MemoryEntry(...)``, ``MemoryEntry.new``, the ``with_*``
    builders) for a NaN, infinite or out-of-range relevance, a negative access count, an
    empty namespace segment or tag, a memory text longer than
    :data:`~actormem.MAX_MEMORY_CHARS` code points, or a naive ``created_at``. Nothing is
    stored when it is raised.
    """


class InvalidQueryError(ActorMemError, ValueError):
    """A retrieve or configuration argument is out of range.

    Raised for a negative ``limit``, a query longer than :data:`~actormem.MAX_QUERY_CHARS`
    code points, a malformed filter, or a bad ``capacity``/``half_life`` passed to
    :func:`~actormem.open_memory`. Nothing changes when it is raised.
    """


class StorageError(ActorMemError, OSError):
    """A durable memory file cannot be opened, read or written.

    The message names the path and the reason (not an actormem database, a newer schema
    version, corrupted, not writable, held by another process). actormem never modifies
    or deletes a file it refused to open.
    """

    def __init__(self, path: object, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason
