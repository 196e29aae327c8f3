"""Every exception actormem raises on purpose, in one place.

The root is :class:`ActorMemError`. Each subclass also inherits the closest builtin
exception, so ``except ValueError`` keeps working for callers who do not know actormem.

Lifecycle errors are trio's own: a closed memory raises :class:`trio.ClosedResourceError`,
a memory whose owner task died raises :class:`trio.BrokenResourceError` (chained from the
owner's exception), and a full request channel makes ``*_nowait`` calls raise
:class:`trio.WouldBlock`.
"""

from __future__ import annotations

__all__ = [
    "ActorMemError",
    "EmbeddingError",
    "InvalidEntryError",
    "InvalidQueryError",
    "RemoteError",
    "StorageError",
    "TransportError",
]


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

    def _name_as_given(self, absolute: str, given: str) -> None:
        """Name the file as the caller gave it (``given``, e.g. a relative path) where
        this error names it by its absolute path ``absolute`` (the storage works on
        absolute paths), in ``path`` and in the reason (``m.db.lock``, ``m.db-wal``).
        O(len(message)).

        Replacing the prefix is exact: a path that begins with ``absolute`` (its ``-wal``,
        ``.lock``, ...) names, relative to the same working directory, the path that
        begins with ``given`` the same way.
        """
        if given == absolute or self.path != absolute:
            return
        self.path = given
        self.reason = self.reason.replace(absolute, given)
        self.args = (f"{given}: {self.reason}",)


class EmbeddingError(ActorMemError, RuntimeError):
    """The embedder of a dense or hybrid scorer failed: it raised (any ``Exception``, or
    ``asyncio.CancelledError`` from an embedder that waits on an event loop), or it
    returned an array of the wrong shape or with a NaN or infinite value.

    Raised to the callers of the stores whose new texts needed vectors from the failed
    call (nothing of theirs is stored; the memory stays usable and a later store of the
    same text embeds it again), to a retrieve whose query could not be embedded, and by
    :func:`~actormem.open_memory` when the vectors of a file's entries cannot be made
    (the file is unchanged). The embedder's own exception is the ``__cause__``.
    """


class TransportError(ActorMemError, ConnectionError):
    """An HTTP client (:class:`~actormem.client.Client`, :class:`~actormem.client.AsyncClient`)
    could not get an answer from the server: it cannot be reached, the connection broke,
    or no answer came within the client's timeout.

    The message names the URL and what went wrong. Calls that are safe to repeat were
    already retried on connection failures before this was raised (see ``docs/server.md``);
    after a timeout the request may or may not have been applied.

    Attributes:
        url: The URL of the request.
    """

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"{url}: {reason}")
        self.url = url
        self.reason = reason


class RemoteError(ActorMemError):
    """The server answered an HTTP client's request with an error it has no closer
    actormem error for: 401 (missing or wrong token), 413 (body over the server's limit),
    503 (the memory is closing or broken), or a 5xx. (A 422 raises
    :class:`InvalidEntryError` or :class:`InvalidQueryError`, as the memory itself would.)

    Attributes:
        url: The URL of the request.
        status: The HTTP status code.
        detail: The problem document's ``detail`` (RFC 9457), or the body's start.
    """

    def __init__(self, url: str, status: int, detail: str) -> None:
        super().__init__(f"{url}: HTTP {status}: {detail}")
        self.url = url
        self.status = status
        self.detail = detail
