"""The ``--json OUT`` files of the commands (``swarm``, ``eval``): checked before the
work starts, written atomically, and never in place of a file that is not one of them.

A figures file replaces ``OUT`` by a rename in ``OUT``'s folder, so a reader (or a
crash, a full disk) sees the earlier file or the whole new one, never half of one. An
``OUT`` that exists is replaced only when it is a figures file actormem writes (JSON of
one of the shapes :func:`is_figures` knows) or empty: a memory database, a source file
or another program's JSON given by mistake is refused before the run. An ``OUT`` that is
not a regular file (``/dev/null``, ``/dev/stdout`` be it a terminal or a pipe) is
written in place: a rename would replace the device node, not write to it. A named FIFO,
a socket and a block device are refused: opening a FIFO for writing waits until some
program opens it for reading (the command would hang at its end), a socket cannot be
opened at all, and a disk device is no place for a figures file. An ``OUT`` that is the
file behind the command's own stdout or stderr (``--json /dev/stdout > out.txt``, by
any name: same device and inode as descriptor 1 or 2) is written in place too, after
what the command printed there: a rename would replace the file and lose the text.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from typing import Any

__all__ = [
    "FIGURES_MAX",
    "check_figures_target",
    "is_figures",
    "missing_directory",
    "write_figures",
]

#: An existing ``OUT`` larger than this (bytes) is not read: no figures file is so large.
FIGURES_MAX = 64 << 20


def is_figures(value: Any) -> bool:
    """Whether the decoded JSON ``value`` is a figures file an actormem command wrote:
    ``swarm``'s (an object whose ``command`` begins with ``actormem ``; ``--nodes``'s
    before it had one: ``nodes`` and ``per_node``), ``eval locomo``'s (``retriever``
    and ``recall``) or ``eval toolcalls``'s (a list of objects with ``scorer``, ``hit``
    and ``mrr``). O(size of the top level)."""
    if isinstance(value, dict):
        command = value.get("command")
        if isinstance(command, str) and command.startswith("actormem "):
            return True
        return {"nodes", "per_node"} <= value.keys() or {"retriever", "recall"} <= value.keys()
    if isinstance(value, list) and value:
        return all(isinstance(v, dict) and {"scorer", "hit", "mrr"} <= v.keys() for v in value)
    return False


def _std_stream(path: str) -> int | None:
    """The descriptor (1 or 2) whose open file is ``path`` itself (same ``st_dev`` and
    ``st_ino``: ``/dev/stdout``, ``/dev/fd/1``, or the name of the file stdout is
    redirected to), or None. O(1)."""
    try:
        target = os.stat(path)
    except OSError:
        return None
    for fd in (1, 2):
        try:
            info = os.fstat(fd)
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == (target.st_dev, target.st_ino):
            return fd
    return None


def _refusal(path: str) -> str | None:
    """Why the existing regular file ``path`` must not be replaced, or None."""
    size = os.path.getsize(path)
    if size == 0:
        return None
    not_ours = (
        "exists and is not a figures file written by actormem; not overwritten "
        "(remove it or pick another name)"
    )
    if size > FIGURES_MAX:
        return not_ours
    with open(path, "rb") as handle:
        data = handle.read(FIGURES_MAX + 1)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return not_ours
    return None if is_figures(value) else not_ours


def missing_directory(path: str | os.PathLike[str]) -> str | None:
    """The one message for a file whose folder does not exist, ``"no such directory:
    DIR"``, or None when the folder is there. ``DIR`` is the folder as ``path`` names it
    (``.`` for a bare name), or, for a symbolic link whose target's folder is missing,
    that folder. What every command says for it (``--json``, ``--path``, a memory
    file: :class:`~actormem._storage.sqlite.SqliteStorage` too). Blocking, O(len(path)).
    """
    where = os.fspath(path)
    given = os.path.dirname(where) or "."
    if not os.path.isdir(given):
        return f"no such directory: {given}"
    real = os.path.dirname(os.path.realpath(where))
    if not os.path.isdir(real):
        return f"no such directory: {real}"
    return None


def check_figures_target(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot take a figures file (one line, without the path), or None.

    Refused: a directory; a missing folder; an existing regular file that is not a
    figures file (:func:`is_figures`) and not empty; a folder where no file can really be
    made (a probe file is created and removed: ``access()`` trusts permission bits that
    some file systems, ``/proc`` say, do not honour); a named FIFO (writing would wait
    for a reader), a socket, a block device. Another target that is not a regular file
    (``/dev/null``, a terminal, the pipe behind ``/dev/stdout``) is accepted as it is.
    Blocking, O(size of ``path``).
    """
    where = os.fspath(path)
    if os.path.isdir(where):
        return "is a directory"
    if _std_stream(where) is not None:
        return None  # written in place, after what the command prints there
    real = os.path.realpath(where)
    try:
        mode = os.stat(where).st_mode  # (/dev/stdout: the pipe or terminal behind it)
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    if mode is not None and not stat.S_ISREG(mode):
        return _special_refusal(real, mode)  # else written in place (write_figures)
    missing = missing_directory(where)
    if missing is not None:
        return missing
    try:
        if mode is not None:
            refusal = _refusal(real)
            if refusal is not None:
                return refusal
    except OSError as exc:
        return f"cannot read it: {exc.strerror or exc}"
    try:
        probe = _create_beside(real)
        os.close(probe[0])
        os.unlink(probe[1])
    except OSError as exc:
        folder = os.path.dirname(where) or "."
        if isinstance(exc, FileNotFoundError):  # the folder exists: /proc, /sys
            return f"not writable: {folder}: its file system takes no new files"
        return f"not writable: {folder}: {exc.strerror or exc}"
    return None


def _special_refusal(real: str, mode: int) -> str | None:
    """Why an existing target of ``mode`` (``real``: its path resolved), not a regular
    file, cannot take the figures, or None (a character device such as ``/dev/null`` or
    a terminal, or the pipe behind ``/dev/stdout``: written in place)."""
    if stat.S_ISFIFO(mode) and os.path.lexists(real) and stat.S_ISFIFO(os.lstat(real).st_mode):
        # A named FIFO (an anonymous pipe, reached through /dev/stdout or /dev/fd/N,
        # resolves to no path): its open for writing waits for a reader, maybe forever.
        return (
            "is a FIFO, not a file: writing to it would wait until a program reads it "
            "(name a file, or /dev/stdout to pipe the figures)"
        )
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file (name a file)"
    if stat.S_ISBLK(mode):
        return "is a block device, not a file (name a file)"
    return None


def _create_beside(real: str) -> tuple[int, str]:
    """A new file (its descriptor and path) in ``real``'s folder, for writing, with the
    mode a new file gets (0o666 less the umask)."""
    folder, name = os.path.split(real)
    while True:
        temp = os.path.join(folder, f".{name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666), temp
        except FileExistsError:
            continue


def write_figures(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``: to a new file beside it, synced, then renamed
    over it (an existing file's permission bits are kept), so ``path`` holds the old
    content or the new, whole. A ``path`` that is not a regular file (``/dev/null``), or
    is the file open on descriptor 1 or 2 (``/dev/stdout > out.txt``), is written in
    place (the latter through that descriptor, after what Python printed there). On an
    error the new file is removed and ``path`` is unchanged.
    Blocking, O(len(text)).

    Raises:
        OSError: The folder or the disk refused (full, read-only, ...).
        ValueError: ``path`` became something :func:`check_figures_target` refuses
            (the message says why, without the path).
    """
    data = text.encode("utf-8")
    stream = _std_stream(os.fspath(path))
    if stream is not None:  # after the text printed there, none of it replaced
        for handle in (sys.stdout, sys.stderr):
            if handle is not None:
                handle.flush()
        view = memoryview(data)
        while view:
            view = view[os.write(stream, view) :]
        return
    refusal = check_figures_target(path)
    if refusal is not None:
        raise ValueError(refusal)
    real = os.path.realpath(path)
    try:
        old = os.stat(path)  # (/dev/stdout: the pipe or terminal behind it)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):
        with open(path, "wb") as handle:
            handle.write(data)
        return
    fd, temp = _create_beside(real)
    try:
        try:
            if old is not None:
                os.fchmod(fd, stat.S_IMODE(old.st_mode))
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, real)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise
