"""Small helpers shared by the public classes."""

from __future__ import annotations

import gc
import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any, NoReturn

__all__ = [
    "Beside",
    "Final",
    "NoPublicConstructor",
    "gc_paused",
    "ignored_stop_signals",
    "install_hint",
    "read_token_file",
    "replace_stop_handlers",
    "sequence_of",
    "to_oldest_generation",
]


class Final(type):
    """Metaclass that forbids subclassing, as trio's ``trio._util.final`` does.

    Public handle and value classes are final: subclasses could break the invariants the
    owner task relies on, and a final class keeps the API small.
    """

    def __new__(
        mcs: type[Final], name: str, bases: tuple[type, ...], namespace: dict[str, Any]
    ) -> Final:
        for base in bases:
            if isinstance(base, Final):
                raise TypeError(
                    f"{base.__module__}.{base.__qualname__} does not support subclassing"
                )
        return super().__new__(mcs, name, bases, namespace)


class NoPublicConstructor(Final):
    """Metaclass for handles that only actormem builds (``Memory``, ``Snapshot``).

    ``Cls(...)`` raises :class:`TypeError`; the library calls ``Cls._create(...)``.
    """

    def __call__(cls, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(f"{cls.__module__}.{cls.__qualname__} has no public constructor")

    def _create(cls, *args: Any, **kwargs: Any) -> Any:
        return super().__call__(*args, **kwargs)


def sequence_of(value: Any, what: str, item: str) -> tuple[Any, ...]:
    """``tuple(value)`` for an argument that takes a sequence of ``item``.

    The one check shared by every "a sequence of X" argument (tags, namespaces, filters,
    tool calls): a lone ``str`` or ``bytes`` is refused rather than split into characters,
    and so is anything that is not iterable. The caller checks the items. O(len(value)).

    Args:
        value: What the caller passed.
        what: How the argument is named in errors, e.g. ``"tags"`` or ``"namespace="``.
        item: What each item must be, e.g. ``"str"``.

    Raises:
        TypeError: ``value`` is a ``str`` or ``bytes``, or not iterable. The message names
            ``what`` and ``item``, e.g. "tags must be a sequence of str, not one str".
    """
    if isinstance(value, (str, bytes)):
        kind = type(value).__name__
        raise TypeError(f"{what} must be a sequence of {item}, not one {kind}")
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(
            f"{what} must be a sequence of {item}, not {type(value).__name__}"
        ) from None


#: The signals that ask a command to stop: Ctrl-C's and ``kill``'s.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignored_stop_signals() -> frozenset[int]:
    """SIGINT and SIGTERM where they are ignored now (``SIG_IGN``: a shell without job
    control starts ``actormem swarm &`` with SIGINT ignored). A command that receives them
    through ``trio.open_signal_receiver`` drops these, so that an ignored signal stays
    ignored. O(1)."""
    return frozenset(s for s in STOP_SIGNALS if signal.getsignal(s) is signal.SIG_IGN)


def replace_stop_handlers(
    handler: Callable[[int, Any], Any], signals: tuple[int, ...] = STOP_SIGNALS
) -> dict[int, Any]:
    """Put ``handler`` on ``signals`` (SIGINT and SIGTERM) and return the handlers it
    replaced, by signal number, for the caller to put back. A signal ignored now
    (``SIG_IGN``: by the parent, e.g. ``actormem import ... &`` in a script) stays
    ignored and is left out; off the main thread nothing changes (``{}``): signal
    handlers can only be set there. The signal juggling of the CLI's ``import``
    (``_stop_once``), its SIGTERM (``_on_sigterm``) and the bulk commit
    (``_engine/bulk.py``'s ``_hold_signals``). O(1)."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is not threading.main_thread():
        return previous
    for number in signals:
        if signal.getsignal(number) is not signal.SIG_IGN:
            previous[number] = signal.signal(number, handler)
    return previous


def install_hint(extra: str) -> str:
    """How to install the optional ``extra`` (a name of pyproject.toml's
    ``optional-dependencies``): from the package index, and in a clone of the repository
    (an editable install, as the README's), e.g. ``pip install 'actormem[server]' (in a
    clone: pip install -e '.[server]')``. O(1)."""
    return f"pip install 'actormem[{extra}]' (in a clone: pip install -e '.[{extra}]')"


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The bearer token in the file ``path``, surrounding whitespace stripped (the server's
    ``--token-file`` and the CLI's ``--token-file`` read it alike).

    Raises:
        ValueError: The file cannot be read (missing, a directory, not UTF-8 text), is
            empty, or the token holds whitespace; the message names the file and why,
            in one line.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            token = handle.read().strip()
    except UnicodeDecodeError:
        raise ValueError(f"{os.fspath(path)}: the token file is not UTF-8 text") from None
    except OSError as exc:
        raise ValueError(f"{os.fspath(path)}: {exc.strerror or exc}") from None
    if not token:
        raise ValueError(f"{os.fspath(path)}: the token file is empty")
    if any(c.isspace() for c in token):
        raise ValueError(f"{os.fspath(path)}: the token must be one word, without spaces")
    return token


_gc_lock = threading.Lock()
#: The pauses in force, by thread (``threading.get_ident()``): a forked child keeps only
#: its forking thread's, since no other thread exists there (:func:`_after_fork`).
_gc_pauses: dict[int, int] = {}
_gc_was_enabled = False


def gc_paused() -> AbstractContextManager[None]:
    """Turn the cyclic garbage collector off inside the block; back on (if it was on)
    when the last such block in any thread ends, even on an error.

    For building many long-lived objects at once (loading a file): each young
    collection would scan what was just built, and the full ones everything, for no
    garbage (the objects are all reachable). Reference counting still frees what dies.
    The switch is process-wide, so blocks in several threads share one count; a child
    forked inside another thread's block forgets that block (the thread is not in the
    child), so the child collects again once its own blocks end. O(1).
    """
    return _GcPause() if _PAUSE_CLASS else _gc_paused_gen()


#: :func:`gc_paused` gives a :class:`_GcPause` (~2 Python frames and a generator less
#: per block). False: the ``contextmanager`` generator (the path before it; the same
#: pauses).
_PAUSE_CLASS = True


@contextmanager
def _gc_paused_gen() -> Iterator[None]:
    """:func:`gc_paused` as a generator (the path before :class:`_GcPause`)."""
    pause = _GcPause()
    pause.__enter__()
    try:
        yield
    finally:
        pause.__exit__()


class _GcPause:
    """:func:`gc_paused`'s context manager: a class rather than a ``contextmanager``
    generator (the owner of a memory enters one per batch; a generator-based one cost
    a generator and two Python frames more each time). The same pauses, in the same
    order."""

    __slots__ = ("_me",)

    def __enter__(self) -> None:
        global _gc_was_enabled
        me = self._me = threading.get_ident()
        with _gc_lock:
            if not _gc_pauses:
                _gc_was_enabled = gc.isenabled()
                gc.disable()
            _gc_pauses[me] = _gc_pauses.get(me, 0) + 1

    def __exit__(self, *exc: object) -> None:
        me = self._me
        with _gc_lock:
            left = _gc_pauses.pop(me) - 1
            if left:
                _gc_pauses[me] = left
            elif not _gc_pauses and _gc_was_enabled:
                gc.enable()


def to_oldest_generation() -> bool:
    """Move every object the cyclic collector tracks to its oldest generation at once,
    without walking them: ``gc.freeze()`` then ``gc.unfreeze()`` (two list splices;
    nothing is left frozen, and the young generation's allocation count starts again
    from 0). For the end of a paused block that built many long-lived objects (a
    file's load, the command line's imports): the young collection that would follow
    the pause, and the middle one after it, then do not walk them; full collections
    still see everything, and a cycle among the young objects waits for the next full
    collection instead of a young one. Not done when objects are frozen already (the
    application's own ``gc.freeze()``, which ``gc.unfreeze()`` would undo). Returns
    whether it was done. O(1).
    """
    if gc.get_freeze_count():
        return False
    gc.freeze()
    gc.unfreeze()
    return True


#: ``import actormem`` and the command line's modules are imported with the cyclic
#: collector paused (:func:`import_pause`): importing builds tens of thousands of
#: long-lived objects (code, functions, classes), and each young collection meanwhile
#: scanned what was just built, the full ones everything, for no garbage. False: the
#: collector runs during the imports (the path before it; the same modules and names).
_PAUSE_GC_ON_IMPORT = True


def import_pause() -> AbstractContextManager[None]:
    """:func:`gc_paused` for a block of imports when :data:`_PAUSE_GC_ON_IMPORT` is on,
    else a block that changes nothing. O(1)."""
    if _PAUSE_GC_ON_IMPORT:
        return gc_paused()
    return nullcontext()


class Beside:
    """``fn(*args)`` run in a thread of its own beside the caller's work; :meth:`result`
    joins it and returns or raises what it did. For work that runs without the GIL
    (SQLite's steps, BLAKE2b over large buffers): on a second core it costs the caller
    no time.

    The caller must end every ``Beside`` it starts, on every path: :meth:`result`, or
    :meth:`stop` on an error (a ``KeyboardInterrupt`` included), which calls the
    ``interrupt`` given (e.g. ``sqlite3.Connection.interrupt``, safe from any thread)
    and joins. No thread is left running once either returned. O(1) besides ``fn``.
    """

    __slots__ = ("_error", "_interrupt", "_thread", "_value")

    def __init__(
        self,
        fn: Callable[..., Any],
        *args: Any,
        name: str = "actormem beside",
        interrupt: Callable[[], None] | None = None,
    ) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._interrupt = interrupt
        self._thread = threading.Thread(target=self._run, args=(fn, args), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            self._value = fn(*args)
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc

    def _join(self) -> None:
        """Join the thread; a ``KeyboardInterrupt`` that strikes while waiting interrupts
        the work (if it can be) and is raised once the thread has ended."""
        pending: BaseException | None = None
        while True:
            try:
                self._thread.join()
                break
            except KeyboardInterrupt as exc:
                pending = exc
                if self._interrupt is not None:
                    self._interrupt()
        if pending is not None:
            raise pending

    def alive(self) -> bool:
        """Whether ``fn`` is still running. O(1)."""
        return self._thread.is_alive()

    def result(self) -> Any:
        """Wait for ``fn`` and return its value, or raise its exception."""
        self._join()
        error, self._error = self._error, None
        if error is not None:
            try:
                raise error
            finally:
                del error
        return self._value

    def stop(self) -> None:
        """Interrupt ``fn`` (if an ``interrupt`` was given) and wait for its thread to
        end; what it returned or raised is dropped. Idempotent."""
        if self._thread.is_alive() and self._interrupt is not None:
            self._interrupt()
        self._join()


def _after_fork() -> None:
    """In a forked child: a new lock (another thread may have held the old one at the
    fork) and only the forking thread's pauses; the collector back on if none is left."""
    global _gc_lock
    _gc_lock = threading.Lock()
    if not _gc_pauses:
        return  # no pause at the fork: the collector is as the program left it
    mine = _gc_pauses.get(threading.get_ident(), 0)
    _gc_pauses.clear()
    if mine:
        _gc_pauses[threading.get_ident()] = mine
    elif _gc_was_enabled:
        gc.enable()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
