"""Review (samelib): the two modules over SQLite's C API (the row reader ``_crows.c`` and
the compiled writer ``_cwrite.c``) run only where they run the same loaded COPY of
SQLite as Python's ``sqlite3``, not merely the same version: with two copies in one
process, one copy's ``close`` of a descriptor drops the other's POSIX locks (SQLite's
"How To Corrupt An SQLite Database File", 2.2.1), so two writers could commit at once.

* ``same_library(path)`` of both modules: True for the ``_sqlite3`` Python runs here;
  False for a loaded object with a ``sqlite3_sourceid`` of its own (another copy, the
  same source id), a loaded object that does not export it, a missing file, a
  file that is not a shared object and one that is not loaded (and it stays unloaded:
  ``RTLD_NOLOAD``); arguments that are not one str without NUL refused.
* ``sqlite_format._same_sqlite``: the source id and the same copy; any doubt is False.
* The knobs follow it: with the helper saying False the writer is not opened and the
  reader keeps away from files that take locks, and the results are the same.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from actormem._storage import sqlite as sqlite_store
from actormem._storage import sqlite_format

from .test_durable10 import WORDS, _dump, _play

_crows = sqlite_format._crows
_cwrite = sqlite_store._cwrite
MODULES = [m for m in (_crows, _cwrite) if m is not None]

pytestmark = pytest.mark.skipif(not MODULES, reason="the SQLite modules are not built here")


def _sqlite3_file() -> str:
    path = sqlite_format._python_sqlite_file()
    if path is None:
        pytest.skip("_sqlite3 is built into this interpreter")
    return path


def _loaded() -> str:
    with open("/proc/self/maps") as f:
        return f.read()


@pytest.fixture(params=MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[1])
def module(request: pytest.FixtureRequest) -> Any:
    return request.param


def test_python_s_sqlite3_is_the_same_library(module: Any) -> None:
    assert module.same_library(_sqlite3_file()) is True
    assert module.same_library(module.__file__) is True  # linked against that copy too


def test_an_object_without_the_symbol_is_not(module: Any) -> None:
    from actormem._index import _ckernels  # type: ignore[attr-defined]

    assert _ckernels.__file__ in _loaded()
    assert module.same_library(_ckernels.__file__) is False


def test_another_copy_exporting_the_symbol_is_not(module: Any, tmp_path: Path) -> None:
    """A loaded object with a sqlite3_sourceid of its own (as a _sqlite3 with a static,
    exported copy of SQLite would have): the same name, another function."""
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    source = tmp_path / "copy.c"
    version = sqlite_format._python_source_id()
    source.write_text(f'const char *sqlite3_sourceid(void) {{ return "{version}"; }}\n')
    lib = tmp_path / "copy.so"
    subprocess.run([compiler, "-shared", "-fPIC", str(source), "-o", str(lib)], check=True)
    copy = ctypes.CDLL(str(lib))  # loaded RTLD_LOCAL, as Python loads extension modules
    copy.sqlite3_sourceid.restype = ctypes.c_char_p
    assert copy.sqlite3_sourceid().decode() == module.source_id()  # the same "version"
    assert module.same_library(str(lib)) is False


def test_missing_and_unloaded_files_are_not(module: Any, tmp_path: Path) -> None:
    assert module.same_library(str(tmp_path / "missing.so")) is False
    text = tmp_path / "text.so"
    text.write_text("not a shared object")
    assert module.same_library(str(text)) is False
    dynload = Path(_sqlite3_file()).parent
    maps = _loaded()
    unloaded = [str(p) for p in sorted(dynload.glob("*.so")) if str(p) not in maps]
    if not unloaded:
        pytest.skip("every extension module here is loaded")
    assert module.same_library(unloaded[0]) is False
    assert unloaded[0] not in _loaded()  # RTLD_NOLOAD: not loaded by asking


@pytest.mark.parametrize(
    "args",
    [(b"/x.so",), (None,), (Path("/x.so"),), (), ("a", "b"), ("a\0b",)],
    ids=["bytes", "none", "path", "no-arg", "two-args", "nul"],
)
def test_bad_arguments_are_refused(module: Any, args: tuple[Any, ...]) -> None:
    with pytest.raises((TypeError, ValueError)):
        module.same_library(*args)


def test_the_helper_wants_the_source_id_and_the_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    source = sqlite_format._python_source_id()

    class Fake:
        def __init__(self, source: str | None, same: Any) -> None:
            self.source, self.same = source, same

        def source_id(self) -> str | None:
            return self.source

        def same_library(self, path: str) -> Any:
            if isinstance(self.same, BaseException):
                raise self.same
            return self.same

    assert sqlite_format._same_sqlite(None) is False
    assert sqlite_format._same_sqlite(Fake(source, True)) is True
    assert sqlite_format._same_sqlite(Fake(source, False)) is False  # a second copy
    assert sqlite_format._same_sqlite(Fake(source, 1)) is False
    assert sqlite_format._same_sqlite(Fake(source, ValueError("nul"))) is False
    assert sqlite_format._same_sqlite(Fake("another version", True)) is False
    for real in MODULES:
        assert sqlite_format._same_sqlite(real) is True
    monkeypatch.delitem(sys.modules, "_sqlite3")
    for real in MODULES:
        assert sqlite_format._same_sqlite(real) is False  # no file to compare with


def test_the_knobs_follow_the_helper() -> None:
    if _crows is not None:
        assert sqlite_format._SAME_SQLITE is True
    if _cwrite is not None:
        assert sqlite_store._c_writer_usable() is True


OPS: list[tuple[Any, ...]] = [
    ("store", 1, True, False), ("many", 3, 20, False), ("retrieve", "disk", 5),
    ("delete", 4), ("store", 1, True, True), ("delete_key", 1), ("retrieve", "pager", 3),
    ("consolidate",), ("store", 30, False, False),
]  # fmt: skip


def test_another_copy_takes_the_python_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = [[WORDS[(i + j) % len(WORDS)] for j in range(1 + i % 3)] for i in range(61)]
    same = (trio.run(_play, tmp_path / "same.db", OPS, words), _dump(tmp_path / "same.db"))
    reads: list[str] = []
    if _crows is not None:
        real = _crows.read_entries

        def counted(uri: str, *args: Any) -> Any:
            reads.append(uri)
            return real(uri, *args)

        monkeypatch.setattr(_crows, "read_entries", counted)
    monkeypatch.setattr(sqlite_store, "same_sqlite", lambda module: False)
    monkeypatch.setattr(sqlite_store, "_C_USABLE", None)
    # What the import computes when the helper says False:
    monkeypatch.setattr(sqlite_format, "_SAME_SQLITE", False)
    assert sqlite_store._c_writer_usable() is False
    opened: list[Any] = []
    real_open = sqlite_store.SqliteStore._open_cwriter

    def spy(self: Any) -> Any:
        opened.append(real_open(self))
        return opened[-1]

    monkeypatch.setattr(sqlite_store.SqliteStore, "_open_cwriter", spy)
    other = (trio.run(_play, tmp_path / "other.db", OPS, words), _dump(tmp_path / "other.db"))
    assert other == same
    assert opened
    assert all(w is None for w in opened)  # the Python path wrote every commit
    assert all("immutable=1" in uri for uri in reads)  # no locks taken by another copy
