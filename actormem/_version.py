"""The installed ``actormem`` distribution's version, looked up without importing
``importlib.metadata`` where the layout is plain: the CLI's ``--version`` and a swarm's
report, and the MCP server's ``serverInfo`` (start-up cost matters for both)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["direct_version", "package_version"]


#: :func:`package_version` looks the installed version up once per process and keeps it: the
#: parser's ``--version`` text and a swarm's report both ask for it, and each lookup
#: finds the distribution on ``sys.path`` and parses its whole metadata file again
#: (~1-2 ms). False: a lookup per call (the path before it; the same string).
_VERSION_ONCE = True
_version_found: str | None = None


#: :func:`package_version` reads the version from the distribution's ``METADATA`` file itself
#: (:func:`direct_version`), found the way ``importlib.metadata`` finds it, instead of
#: importing ``importlib.metadata`` (with ``email``'s parser, ``csv``, ``zipfile``'s
#: path layer: ~33 M instructions, ~8-12 ms of CPU, that no swarm otherwise needs) to
#: look it up (~11 M more). The same string; any case the direct reader does not
#: take as plainly the same (a zip or egg on the path, another finder of
#: distributions, a header it would have to unfold or decode) goes through
#: ``importlib.metadata``. False: always ``importlib.metadata`` (the path before it).
_VERSION_DIRECT = True

#: A ``METADATA`` header line as ``email``'s parser takes it (its ``headerRE``: a name of
#: printable ASCII but ``:``, then ``:``), and a line that continues the one before.
_HEADER_LINE = re.compile(r"[\041-\071\073-\176]*:")
_DIST_SUFFIXES = (".dist-info", ".egg-info")


def _normalized_name(name: str) -> str:
    """``importlib.metadata``'s ``Prepared.normalize``: PEP 503, dashes as underscores."""
    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def direct_version(name: str, paths: Sequence[Any] | None = None) -> str | None:
    """The ``Version`` of distribution ``name`` as ``importlib.metadata.version(name)``
    gives it with ``sys.path`` (or ``paths``) to search, read without importing
    ``importlib.metadata``: the first ``*.dist-info`` / ``*.egg-info`` directory whose
    name normalizes to ``name``'s, in path order then directory-listing order (as
    ``importlib.metadata``'s path finder lists them), its ``METADATA`` file's first
    ``Version`` header. None when that is not plainly so, so that the caller asks
    ``importlib.metadata`` instead: a finder other than the path finder on
    ``sys.meta_path`` that finds distributions, a path entry that is not a directory
    (a zip) or a directory named ``*.egg``, no match, a match without a readable UTF-8
    ``METADATA`` (or, absent or empty, ``PKG-INFO``) file with text, a header part with
    a line ``email`` would end the headers at, a folded, non-ASCII or carriage-return
    ``Version`` line, or none. O(path entries + their listings + the metadata file's header).
    """
    import importlib.machinery

    for finder in sys.meta_path:
        found = getattr(finder, "find_distributions", None)
        if found is not None and finder is not importlib.machinery.PathFinder:
            return None
    wanted = _normalized_name(name)
    for entry in sys.path if paths is None else paths:
        if type(entry) is not str:
            return None
        root = entry or "."
        if os.path.basename(root).lower().endswith(".egg"):
            return None
        if not os.path.isdir(root):
            if os.path.lexists(root):
                return None  # a zip (or anything else importlib.metadata would try)
            continue
        try:
            children = os.listdir(root)
        except OSError:
            return None
        for child in children:
            low = child.lower()
            if low.endswith(_DIST_SUFFIXES):
                stem = low.rpartition(".")[0].partition("-")[0]
                if _normalized_name(stem) == wanted:
                    return _metadata_version(os.path.join(root, child))
    return None


#: What ``importlib.metadata``'s ``read_text`` takes as "no such file" (it then reads the
#: next one); any other error reading it is left to ``importlib.metadata``.
_ABSENT = (FileNotFoundError, IsADirectoryError, NotADirectoryError, PermissionError)


def _metadata_version(folder: str) -> str | None:
    """The ``Version`` header of ``folder``'s ``METADATA``, or of its ``PKG-INFO`` when
    ``METADATA`` is absent or empty (as ``importlib.metadata`` reads them: an
    ``.egg-info`` folder, which setuptools leaves in a source tree, has only
    ``PKG-INFO``), as ``email``'s parser (the compat32 policy) reads it: the value after
    the colon, spaces and tabs before it dropped. None when the reading is not plainly
    the same (see :func:`direct_version`). O(header size)."""
    text = ""
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as file:
                text = file.read()
        except _ABSENT:
            continue
        except (OSError, UnicodeDecodeError):
            return None
        if text:
            break
    if not text or text.startswith("From "):
        return None
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if not line or "\r" in line:
            return None  # the headers' end (no Version), or line ends to unfold
        if line[0] in " \t":
            continue  # a folded line of the header before
        if _HEADER_LINE.match(line) is None:
            return None  # email would end the headers here
        field, _, value = line.partition(":")
        if field.lower() != "version":
            continue
        following = lines[number + 1] if number + 1 < len(lines) else ""
        if following[:1] in (" ", "\t") or not value.isascii():
            return None
        return value.lstrip(" \t")
    return None


def package_version() -> str:
    """The installed ``actormem`` distribution's version, or ``"unknown"`` when there is
    none (a source tree). Kept after the first lookup (:data:`_VERSION_ONCE`)."""
    global _version_found
    if _VERSION_ONCE and _version_found is not None:
        return _version_found
    direct = direct_version("actormem") if _VERSION_DIRECT else None
    if direct is not None:
        found = direct
    else:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("actormem")
        except PackageNotFoundError:  # pragma: no cover - running from a source tree
            found = "unknown"
    if _VERSION_ONCE:
        _version_found = found
    return found
