"""The ``actormem`` command: its parser, the swarm run and its display.

``import actormem.cli`` is light: :func:`main` (and :mod:`._main` with it) is imported on
first access, and :func:`run_command` (``python -m actormem``, the ``actormem`` script)
sets the process's environment (:data:`_ONE_BLAS_THREAD`) before it imports the command
line's modules, numpy among them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ._main import main as main

#: The ``actormem`` process runs OpenBLAS with one thread unless the user chose
#: otherwise (:func:`one_blas_thread`): numpy's import otherwise starts OpenBLAS's
#: thread pool, whose threads spin after the import (~3% of a swarm's CPU), while no
#: command of the package calls a threaded BLAS routine (the dense scorer's
#: similarities are ``np.einsum``, the BLAS-free path, on purpose). Only the command
#: line's entry (:func:`run_command`) does this; ``import actormem`` never touches the
#: environment. Off: the environment is left as it is.
_ONE_BLAS_THREAD = True

#: At the end of the command line's imports (made with the collector paused), the
#: ``actormem`` process moves what they built to the collector's oldest generation
#: without walking it (:func:`~actormem._util.to_oldest_generation`), unless objects are
#: frozen already: otherwise the first allocation after the pause set off a young
#: collection that walked every object the imports made (modules, functions, classes:
#: ~13 ms of CPU on the AMD VM, for ~2,700 objects of the imports' own cycles), and the
#: next middle one walked them again. Those cycles now wait for a full collection (a
#: swarm's run freezes the heap and ends the process without one). Only
#: :func:`run_command` does this; ``import actormem`` does not. Off: the young
#: collection walks them (the path before it).
_PROMOTE_IMPORTS = True

#: The variables OpenBLAS reads for its thread count, in its order of precedence: a user
#: who set any of them chose the count, and it is left alone.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def one_blas_thread(environ: MutableMapping[str, str] | None = None) -> bool:
    """Set ``OPENBLAS_NUM_THREADS=1`` in ``environ`` (default ``os.environ``) unless one of
    :data:`BLAS_THREAD_VARIABLES` is set there (even to an empty string: the user's
    choice). It takes effect only if numpy (OpenBLAS) is imported after it in this
    process, and in the processes it starts. Returns whether it set the variable. O(1).
    """
    env = os.environ if environ is None else environ
    if any(name in env for name in BLAS_THREAD_VARIABLES):
        return False
    env["OPENBLAS_NUM_THREADS"] = "1"
    return True


#: The commands where SIGTERM unwinds like Ctrl-C (:class:`_Terminated`): they have
#: something to clean up or report (swarm: its temporary folder and figures; import: a
#: file it created; mcp and eval: their one line and exit status 143, also during
#: their imports).
#: Elsewhere (serve handles its own signals) SIGTERM keeps its default action.
SIGTERM_UNWINDS = ("swarm", "import", "mcp", "eval")


class _Terminated(KeyboardInterrupt):
    """Raised by the SIGTERM handler the CLI installs: SIGTERM unwinds like Ctrl-C (so
    every ``finally`` runs and temporary files go), and exits with 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def run_command(argv: Sequence[str] | None = None) -> NoReturn:
    """The ``actormem`` process (``python -m actormem``, the ``actormem`` script): sets the
    environment (:data:`_ONE_BLAS_THREAD`), then imports the command line's modules with
    the collector paused and runs :func:`actormem.cli._main.run_command` (which ends
    the process with the command's exit status). Never returns.

    A Ctrl-C from this function's first line on, while the command still starts (its
    imports), ends the process with one line and status 130; a SIGTERM too (143) for
    the commands of :data:`SIGTERM_UNWINDS` (their handler is then in place from here
    on). Before it (the interpreter's start-up, ``import actormem.cli``: a few
    milliseconds, nothing of the command run yet) Python handles a Ctrl-C itself
    (docs/cli.md, "Exit status")."""
    # Everything inside the try: a KeyboardInterrupt (trio's or Python's, at any
    # bytecode) anywhere here gets the one line, not a traceback and a death by SIGINT
    # (the _util import was once before the try).
    try:
        if _ONE_BLAS_THREAD:
            one_blas_thread()
        from .._util import import_pause, replace_stop_handlers, to_oldest_generation

        if _command_of(argv) in SIGTERM_UNWINDS:
            import signal

            replace_stop_handlers(_on_sigterm, (signal.SIGTERM,))  # one ignored stays so
        with import_pause():  # the command line's modules load with the collector paused
            from ._main import run_command as run

            if _PROMOTE_IMPORTS:
                to_oldest_generation()
        run(argv)  # handles its own interrupts: a KeyboardInterrupt out of it is a bug
    except KeyboardInterrupt as exc:  # in the first ~0.5 s: one line, as docs/swarm.md says
        command = _command_of(argv)
        name, status = ("SIGTERM", 143) if isinstance(exc, _Terminated) else ("SIGINT", 130)
        print(f"actormem{' ' * bool(command)}{command}: interrupted ({name})", file=sys.stderr)
        sys.exit(status)


def _command_of(argv: Sequence[str] | None) -> str:
    """The command ``argv`` (default ``sys.argv[1:]``) names (``"swarm"``), or ``""``
    when it names none (``actormem --help``, no arguments). O(1)."""
    args = sys.argv[1:] if argv is None else argv
    return args[0] if args and not args[0].startswith("-") else ""


def __getattr__(name: str) -> Any:
    """:func:`main`, imported on first access (with the collector paused). O(1) after."""
    if name == "main":
        from .._util import import_pause

        with import_pause():
            from ._main import main as value
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), "main"})


__all__ = ["main", "run_command"]
