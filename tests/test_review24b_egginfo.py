"""review24b: the version read directly where setuptools leaves an ``.egg-info``.

README's install (``pip install -e '.[test]'``, also ``pip install .``) leaves
``actormem.egg-info`` (``PKG-INFO``, no ``METADATA``) in the clone's root. A process with
the clone on its path before site-packages (``python -m actormem`` run in the clone, or
``PYTHONPATH`` naming it, as tests/test_startup24.py does) finds that folder first, and
``direct_version`` gave up on it (no ``METADATA``): the swarm imported
``importlib.metadata`` after all, and test_startup24's
``test_a_swarm_imports_none_of_the_lazy_modules`` failed in a fresh clone set up as the
README says. ``importlib.metadata`` reads ``PKG-INFO`` when ``METADATA`` is missing or
empty: the direct reader now does the same."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import actormem._version as _version_mod

from .test_startup24 import _reference

ROOT = Path(__file__).resolve().parent.parent


def _egg_info(root: Path, name: str, files: dict[str, str]) -> None:
    folder = root / f"{name}.egg-info"
    folder.mkdir(parents=True)
    for file, text in files.items():
        (folder / file).write_text(text, encoding="utf-8")


def test_an_egg_info_folder_is_read_from_its_pkg_info(tmp_path: Path) -> None:
    pkg_info = "Metadata-Version: 2.4\nName: actormem\nVersion: 0.1.0\nSummary: x\n"
    _egg_info(tmp_path, "actormem", {"PKG-INFO": pkg_info, "SOURCES.txt": "a.py\n"})
    assert _reference("actormem", [str(tmp_path)]) == "0.1.0"
    assert _version_mod.direct_version("actormem", [str(tmp_path)]) == "0.1.0"


def test_an_empty_metadata_falls_to_pkg_info_as_importlib(tmp_path: Path) -> None:
    _egg_info(tmp_path, "pkg", {"METADATA": "", "PKG-INFO": "Version: 3\n"})
    assert _reference("pkg", [str(tmp_path)]) == "3"
    assert _version_mod.direct_version("pkg", [str(tmp_path)]) == "3"


def test_metadata_wins_over_pkg_info_as_importlib(tmp_path: Path) -> None:
    _egg_info(tmp_path, "pkg", {"METADATA": "Version: 1\n", "PKG-INFO": "Version: 2\n"})
    assert _reference("pkg", [str(tmp_path)]) == "1"
    assert _version_mod.direct_version("pkg", [str(tmp_path)]) == "1"
    other = tmp_path / "other"
    _egg_info(other, "pkg", {"METADATA": "Name: x\n\nVersion: 1\n", "PKG-INFO": "Version: 2\n"})
    assert _reference("pkg", [str(other)]) is None  # METADATA read, no Version header
    assert _version_mod.direct_version("pkg", [str(other)]) is None  # (then importlib's answer)


def test_a_swarm_beside_a_source_egg_info_imports_no_importlib_metadata(tmp_path: Path) -> None:
    installed = importlib.metadata.version("actormem")
    source = tmp_path / "src"
    _egg_info(
        source,
        "actormem",
        {"PKG-INFO": f"Metadata-Version: 2.4\nName: actormem\nVersion: {installed}\n"},
    )
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 4}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}"}, "result": f"text {i}"}) + "\n"
            for i in range(20)
        ),
        encoding="utf-8",
    )  # fmt: skip
    code = (
        "import sys, json\n"
        "from actormem.cli._main import main\n"
        "s = main(['swarm', '--agents', '2', '--interval', '600', '--in-memory',"
        f" '--tool-calls', {str(calls)!r}, '--json', 'a.json'])\n"
        "print(json.dumps([s, 'importlib.metadata' in sys.modules]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(source), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == 0
    assert imported is False
    report = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert report["actormem_version"] == installed
