"""startup24: the main job's process outside its run, part 4.

* a swarm (in memory or durable) imports neither ``importlib.metadata`` (nor ``email``)
  nor the replication, live-read and salvage modules, and its report's version is
  ``importlib.metadata``'s;
* :func:`~actormem._version.direct_version` gives ``importlib.metadata``'s version or
  None (never another string), on real and random metadata files and path layouts, and
  a plain layout is read directly;
* a swarm on its own temporary file closes it without building an index image, and
  still saves its access updates and counters and closes the file; with ``--path`` or
  ``--verify``, or the knob off, the image is written as before; a store whose owner
  wants no image (``keep_image`` False) keeps its rows all the same;
* the modules made lazy still load where they are needed (``--log``'s DSN in the
  report, ``export --salvage``, a node's open).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import actormem._version as _version_mod
from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem._engine import lifecycle
from actormem.cli import _main

from .strategies import examples

ROOT = Path(__file__).resolve().parent.parent

#: Modules a swarm without --log / --server never needs.
LAZY = (
    "importlib.metadata",
    "email",
    "email.message",
    "csv",
    "actormem._engine.replica",
    "actormem._engine.live",
    "actormem._storage.pglog",
    "actormem._storage.log",
    "actormem._storage.salvage",
)


def _calls_file(folder: Path, n: int = 40) -> Path:
    calls = folder / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 4}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}"}, "result": f"text {i} of the file"}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )  # fmt: skip
    return calls


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd,
        timeout=120, check=False,
    )  # fmt: skip


# ---------------------------------------------------------------- what a swarm imports


def test_a_swarm_imports_none_of_the_lazy_modules(tmp_path: Path) -> None:
    """In a fresh interpreter, a word-overlap swarm in memory, then durable (its own
    temporary file), then durable on a --path, leaves every module of LAZY unimported,
    and the report's version is importlib.metadata's (asked after, in this process)."""
    calls = _calls_file(tmp_path)
    code = (
        "import sys, json\n"
        "from actormem.cli._main import main\n"
        f"lazy = {LAZY!r}\n"
        "before = [m for m in lazy if m in sys.modules]\n"
        "common = ['swarm', '--agents', '3', '--interval', '600',"
        f"          '--tool-calls', {str(calls)!r}]\n"
        "a = main([*common, '--in-memory', '--json', 'a.json'])\n"
        "b = main([*common, '--json', 'b.json'])\n"
        "c = main([*common, '--path', 'm.db', '--json', 'c.json'])\n"
        "after = [m for m in lazy if m in sys.modules]\n"
        "print(json.dumps([before, after, a, b, c]))\n"
    )
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr
    before, after, a, b, c = json.loads(done.stdout.strip().splitlines()[-1])
    assert before == []
    assert after == []
    assert (a, b, c) == (0, 0, 0)
    for name in ("a.json", "b.json", "c.json"):
        report = json.loads((tmp_path / name).read_text(encoding="utf-8"))
        assert report["actormem_version"] == importlib.metadata.version("actormem")
        assert report["accounting"]["ok"] is True
        assert report["options"]["log"] is None


def test_the_command_prints_the_installed_version(tmp_path: Path) -> None:
    """``python -m actormem --version`` (the parser's text, read directly) is the
    installed distribution's version."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "actormem", "--version"], capture_output=True, text=True,
        env=env, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"actormem {importlib.metadata.version('actormem')}"


# ---------------------------------------------------------------- the version read directly


def _reference(name: str, paths: list[Any]) -> str | None:
    """importlib.metadata's version of ``name`` searching ``paths`` (None: not found)."""
    found = next(iter(importlib.metadata.distributions(name=name, path=paths)), None)
    with warnings.catch_warnings():  # 3.13 warns on a missing Version (None, deprecated)
        warnings.simplefilter("ignore", DeprecationWarning)
        return None if found is None else found.version


def _dist(root: Path, folder: str, metadata: str | None, *, file: str = "METADATA") -> Path:
    path = root / folder
    path.mkdir(parents=True)
    if metadata is not None:
        (path / file).write_bytes(metadata.encode("utf-8"))
    return path


def test_direct_version_of_the_installed_distributions() -> None:
    for name in ("actormem", "numpy", "trio", "attrs", "rich", "Trio", "sortedcontainers"):
        assert _version_mod.direct_version(name) == importlib.metadata.version(name)
    assert _version_mod.direct_version("no-such-distribution-x") is None


def test_direct_version_plain_layouts(tmp_path: Path) -> None:
    first = tmp_path / "first"
    second = tmp_path / "second"
    _dist(first, "Actor.Mem-2.0.dist-info", "Metadata-Version: 2.1\nName: x\nVersion: 2.0\n")
    _dist(second, "actor_mem-3.0.dist-info", "Name: x\nversion:\t 3.0 \n\nbody\n")
    _dist(second, "other-1.0.dist-info", "Version: 1.0\n")
    missing = str(tmp_path / "missing")
    for paths in ([str(first), str(second)], [missing, str(second), str(first)]):
        ref = _reference("actor-mem", paths)
        assert ref is not None
        assert _version_mod.direct_version("actor-mem", paths) == ref
    assert _version_mod.direct_version("actor-mem", [str(second)]) == "3.0 "  # email keeps it
    assert _version_mod.direct_version("other", [str(second)]) == "1.0"
    assert _version_mod.direct_version("nope", [missing, str(first)]) is None
    assert _reference("nope", [missing, str(first)]) is None


@pytest.mark.parametrize(
    "metadata",
    [
        None,  # no METADATA (importlib.metadata tries PKG-INFO)
        "",  # empty
        "Name: x\n\nVersion: 9\n",  # Version only in the body
        "Name: x\nVersion: 1.0\n continued\n",  # folded
        "Name: x\r\nVersion: 1.0\r\n",  # CRLF
        "From someone\nVersion: 1.0\n",  # a unix-from line
        "not a header\nVersion: 1.0\n",  # ends the headers
        "\ufeffVersion: 1.0\n",  # a byte-order mark
        "Name: \u00e9\nVersion: 1.\u00e9\n",  # non-ASCII value
        ": nameless\nVersion: 4\n",  # a header without a name: skipped by email
        " first line folded\nVersion: 5\n",
    ],
)
def test_direct_version_is_none_or_the_same(tmp_path: Path, metadata: str | None) -> None:
    root = tmp_path / "site"
    dist = _dist(root, "pkg-1.0.dist-info", metadata)
    if metadata is None:
        (dist / "PKG-INFO").write_text("Version: 7\n", encoding="utf-8")
    direct = _version_mod.direct_version("pkg", [str(root)])
    ref = _reference("pkg", [str(root)])
    assert direct is None or direct == ref, (direct, ref)


def test_direct_version_defers_to_importlib_for_what_it_does_not_read(tmp_path: Path) -> None:
    archive = tmp_path / "site.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("pkg-1.0.dist-info/METADATA", "Version: 1.0\n")
    assert _reference("pkg", [str(archive)]) == "1.0"
    assert _version_mod.direct_version("pkg", [str(archive)]) is None
    eggs = tmp_path / "thing.egg"
    _dist(eggs, "EGG-INFO", "Version: 1\n")
    assert _version_mod.direct_version("pkg", [str(eggs)]) is None
    not_a_dir = tmp_path / "site2"
    not_a_dir.mkdir()
    (not_a_dir / "pkg-1.0.dist-info").write_text("Version: 2\n", encoding="utf-8")
    assert _version_mod.direct_version("pkg", [str(not_a_dir)]) is None
    assert _version_mod.direct_version("pkg", [Path(not_a_dir)]) is None  # not a str entry


def test_direct_version_defers_when_another_finder_finds_distributions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Finder:
        @staticmethod
        def find_distributions(context: Any = None) -> list[Any]:
            return []

    monkeypatch.setattr(sys, "meta_path", [Finder(), *sys.meta_path])
    assert _version_mod.direct_version("actormem") is None


_NAMES = st.sampled_from(["Version", "version", "VERSION", "Name", "Metadata-Version",
                          "Summary", "X-Version", "Versions", ""])  # fmt: skip
_VALUES = st.text(
    alphabet=st.sampled_from(list("0123456789.abc+-_ \t:\u00e9\r")), max_size=8
)
_LINE = st.one_of(
    st.tuples(_NAMES, _VALUES).map(lambda nv: f"{nv[0]}:{nv[1]}"),
    _VALUES.map(lambda v: " " + v),  # a folded line
    st.sampled_from(["", "From x", "junk line", "\ufeffVersion: 1"]),
)


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines=st.lists(_LINE, min_size=0, max_size=8), end=st.sampled_from(["", "\n", "\r\n"]))
def test_direct_version_against_importlib_on_random_headers(lines: list[str], end: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        _dist(root, "pkg-1.0.dist-info", "\n".join(lines) + end)
        direct = _version_mod.direct_version("pkg", [folder])
        ref = _reference("pkg", [folder])
    assert direct is None or direct == ref, (lines, end, direct, ref)


def test_version_direct_and_through_importlib_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    real = importlib.metadata.version

    def counting(name: str) -> str:
        called.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", counting)
    monkeypatch.setattr(_version_mod, "_version_found", None)
    monkeypatch.setattr(_version_mod, "_VERSION_DIRECT", True)
    direct = _version_mod.package_version()
    assert called == []  # read directly: this environment's layout is plain
    monkeypatch.setattr(_version_mod, "_version_found", None)
    monkeypatch.setattr(_version_mod, "_VERSION_DIRECT", False)
    assert _version_mod.package_version() == direct == real("actormem")
    assert called == ["actormem"]


# ---------------------------------------------------------------- no image for a temporary file


def _spy_image(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record, per durable close, whether an image was built and handed to the close."""
    made: list[bool] = []
    real_close = lifecycle._close_storage

    async def close(store: Any, counters: Any = None, image: Any = None) -> None:
        made.append(image is not None)
        assert counters is not None  # a clean close: access updates and counters saved
        await real_close(store, counters, image)

    monkeypatch.setattr(lifecycle, "_close_storage", close)
    return made


def _swarm(args: list[str], calls: Path) -> int:
    return _main.main(["swarm", "--agents", "3", "--interval", "600", "--tool-calls",
                       str(calls), *args])  # fmt: skip


def reports_agree(on_file: Path, off_file: Path) -> None:
    """Two swarm runs' JSON reports (a knob on, then off) account for every store alike:
    sound, nothing lost, the same memory, operations and keys."""
    on = json.loads(on_file.read_text(encoding="utf-8"))
    off = json.loads(off_file.read_text(encoding="utf-8"))
    for report in (on, off):
        assert report["accounting"]["ok"] is True
        assert report["accounting"]["lost"] == 0
    assert on["memory"] == off["memory"]
    assert on["throughput"]["operations"] == off["throughput"]["operations"]
    assert sorted(on) == sorted(off)


def test_a_swarm_on_its_temporary_file_writes_no_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _calls_file(tmp_path)
    made = _spy_image(monkeypatch)
    monkeypatch.chdir(tmp_path)
    assert _swarm(["--json", "on.json"], calls) == 0
    assert made == [False]
    monkeypatch.setattr(_main, "_NO_IMAGE_FOR_TEMPORARY", False)
    assert _swarm(["--json", "off.json"], calls) == 0
    assert made == [False, True]
    reports_agree(tmp_path / "on.json", tmp_path / "off.json")
    capsys.readouterr()


def test_a_swarm_on_a_path_or_verified_keeps_its_image(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = _calls_file(tmp_path)
    made = _spy_image(monkeypatch)
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "kept.db"
    assert _swarm(["--path", str(db)], calls) == 0
    assert made == [True]
    assert _swarm(["--verify"], calls) == 0  # the reopen reads the image
    assert made[:2] == [True, True]
    capsys.readouterr()

    async def reopen() -> tuple[int, bool]:
        async with open_memory(path=db) as memory:
            assert memory._storage is not None
            return len(memory), memory._storage.image_fresh

    entries, restored = trio.run(reopen)
    assert entries > 0
    assert restored  # the file's image described its rows and was used


def test_a_store_that_keeps_no_image_keeps_every_row(tmp_path: Path) -> None:
    """keep_image False: the close writes no image, and every acknowledged store is in
    the file when it is opened again (the index rebuilt from the rows)."""
    db = tmp_path / "m.db"
    texts = [f"note {i} about topic {i % 7}" for i in range(300)]

    async def write() -> None:
        async with open_memory(path=db) as memory:
            assert memory._storage is not None
            memory._storage.keep_image = False
            for text in texts:
                await memory.store(MemoryEntry.new(MemoryCategory.FACT, text))

    async def read() -> tuple[list[str], bool, list[str]]:
        async with open_memory(path=db) as memory:
            assert memory._storage is not None
            hits = await memory.retrieve("note 5 about topic 5", 3)
            return (
                sorted(e.memory for e in memory.snapshot()),
                memory._storage.image_fresh,
                [h.memory for h in hits],
            )

    trio.run(write)
    stored, restored, hits = trio.run(read)
    assert stored == sorted(texts)
    assert not restored  # no image was kept: the index was rebuilt from the rows
    assert "note 5 about topic 5" in hits


# ---------------------------------------------------------------- the lazy modules still load


def test_the_reports_log_option_is_redacted() -> None:
    from actormem._storage.pglog import redact_dsn

    args = argparse.Namespace(
        agents=1, processes=None, episodes=None, duration=None, steps=None, capacity=None,
        top_k=5, scorer="word-overlap", seed=0, scale=1.0, tool_calls=[], in_memory=False,
        reuse_path=False, verify=False, json=None, interval=1.0,
        log="postgresql://user:secret@host/db", nodes=2, server=None, token_file=None,
    )  # fmt: skip
    options = _main._options_json(args, None)
    assert options["log"] == redact_dsn(args.log)
    assert "secret" not in options["log"]
    args.log = None
    assert _main._options_json(args, None)["log"] is None


def test_export_salvage_still_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "m.db"

    async def write() -> None:
        async with open_memory(path=db) as memory:
            await memory.store(MemoryEntry.new(MemoryCategory.FACT, "salvage me"))

    trio.run(write)
    assert _main.main(["export", str(db), "--salvage"]) == 0
    out = capsys.readouterr()
    assert "salvage me" in out.out


def test_a_node_open_still_imports_the_replica() -> None:
    """open_memory(log=...) imports the replica's module where it is needed: a DSN that
    cannot be reached fails as a StorageError (or a missing driver), not a NameError."""
    from actormem import StorageError

    async def open_node() -> None:
        async with open_memory(log="postgresql://nobody@127.0.0.1:1/none", name="m"):
            pass  # pragma: no cover - never reachable

    with pytest.raises((StorageError, ModuleNotFoundError)):
        trio.run(open_node)
    assert "actormem._engine.replica" in sys.modules
