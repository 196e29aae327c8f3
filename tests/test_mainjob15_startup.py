"""mainjob15: the ``actormem`` process's start-up.

* ``import actormem`` and ``import actormem.cli`` are light (no numpy, no trio): the
  package's names load on first access, all together, the same objects as before, in
  ``dir()``; a name that does not exist still raises ``AttributeError``;
* the command line's entry (``python -m actormem``, ``actormem.cli.run_command``) sets
  ``OPENBLAS_NUM_THREADS=1`` before numpy is first imported (``cli._ONE_BLAS_THREAD``),
  never when the user set a BLAS thread variable, never with the knob off, and never for
  a library user (``import actormem``, ``actormem.cli.main`` in-process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import actormem
import actormem.cli

from .strategies import examples

ROOT = Path(__file__).resolve().parent.parent
BLAS = actormem.cli.BLAS_THREAD_VARIABLES

#: Records what the ``actormem`` process saw, at its exit (``run_command`` runs the
#: ``atexit`` handlers on its fast way out too): the BLAS variable, and whether numpy
#: was imported when the command line's entry set it.
SITECUSTOMIZE = """
import atexit, json, os, sys

_seen = {}

def _spy():
    import actormem.cli as c
    orig = c.one_blas_thread

    def one_blas_thread(*args, **kwargs):
        _seen["numpy_before"] = "numpy" in sys.modules
        return orig(*args, **kwargs)

    c.one_blas_thread = one_blas_thread

def _report():
    _seen["value"] = os.environ.get("OPENBLAS_NUM_THREADS")
    _seen["numpy_at_exit"] = "numpy" in sys.modules
    with open(os.environ["MJ15_REPORT"], "w") as f:
        json.dump(_seen, f)

if "MJ15_REPORT" in os.environ:
    atexit.register(_report)
    if os.environ.get("MJ15_SPY"):
        _spy()
"""


def _env(tmp_path: Path, **overrides: str | None) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in BLAS}
    env["PYTHONPATH"] = f"{tmp_path}{os.pathsep}{ROOT}"
    env["MJ15_REPORT"] = str(tmp_path / "seen.json")
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _calls(tmp_path: Path) -> Path:
    calls = tmp_path / "calls.jsonl"
    calls.write_text(
        "".join(
            json.dumps({"source": "s", "episode": f"e{i % 3}", "step": i, "tool": "read",
                        "input": {"path": f"/f{i}"}, "result": f"text {i} of file"}) + "\n"
            for i in range(20)
        ),
        encoding="utf-8",
    )
    return calls


def _seen(tmp_path: Path, args: list[str], env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=tmp_path,
        timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads((tmp_path / "seen.json").read_text())
    return seen


def test_python_m_actormem_swarm_sets_one_blas_thread_before_numpy(tmp_path: Path) -> None:
    """A whole swarm through ``python -m actormem``: the variable set, numpy not yet
    imported when it was, numpy imported after."""
    args = ["-m", "actormem", "swarm", "--agents", "2", "--in-memory", "--interval", "600",
            "--tool-calls", str(_calls(tmp_path))]
    seen = _seen(tmp_path, args, _env(tmp_path, MJ15_SPY="1"))
    assert seen == {"numpy_before": False, "value": "1", "numpy_at_exit": True}


@pytest.mark.parametrize("name", ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"])
def test_a_users_blas_variable_is_left_alone(tmp_path: Path, name: str) -> None:
    seen = _seen(tmp_path, ["-m", "actormem", "--version"], _env(tmp_path, **{name: "3"}))
    assert seen["value"] == ("3" if name == "OPENBLAS_NUM_THREADS" else None)


def test_the_knob_off_leaves_the_environment(tmp_path: Path) -> None:
    code = (
        "import actormem.cli as c\n"
        "c._ONE_BLAS_THREAD = False\n"
        "c.run_command(['--version'])\n"
    )
    seen = _seen(tmp_path, ["-c", code], _env(tmp_path))
    assert seen["value"] is None


def test_library_users_environment_is_left_alone(tmp_path: Path) -> None:
    """``import actormem``, its names, and the command line's ``main`` run in-process:
    nothing set."""
    calls = _calls(tmp_path)
    code = (
        "import actormem\n"
        "from actormem import Memory, open_memory\n"
        "from actormem.cli import main\n"
        f"assert main(['swarm', '--agents', '2', '--in-memory', '--interval', '600',"
        f" '--tool-calls', {str(calls)!r}]) == 0\n"
    )
    seen = _seen(tmp_path, ["-c", code], _env(tmp_path))
    assert seen == {"value": None, "numpy_at_exit": True}


@settings(max_examples=examples(100), deadline=None)
@given(st.dictionaries(st.sampled_from([*BLAS, "MKL_NUM_THREADS", "PATH"]),
                       st.sampled_from(["", "1", "4", "x"]), max_size=4))  # fmt: skip
def test_one_blas_thread_on_any_environment(environ: dict[str, str]) -> None:
    before = dict(environ)
    chosen = any(name in before for name in BLAS)
    assert actormem.cli.one_blas_thread(environ) is (not chosen)
    if chosen:
        assert environ == before
    else:
        assert environ == {**before, "OPENBLAS_NUM_THREADS": "1"}


def _fresh(code: str) -> list[object]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: list[object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_import_actormem_is_light_and_loads_every_name_on_first_access() -> None:
    out = _fresh(
        "import json, sys\n"
        "import actormem, actormem.cli\n"
        "light = [m for m in ('numpy', 'trio', 'attrs', 'rich', 'actormem._engine',"
        " 'actormem.cli._main') if m in sys.modules]\n"
        "import gc\n"
        "enabled = gc.isenabled()\n"
        "entry = actormem.MemoryEntry\n"
        "eager = sorted(n for n in actormem._EAGER if n in vars(actormem))\n"
        "from actormem._engine.memory import Memory\n"
        "from actormem._entry import MemoryEntry\n"
        "from actormem import agent\n"
        "same = [actormem.Memory is Memory, entry is MemoryEntry, actormem.agent is agent,\n"
        "        actormem.MemoryHooks is agent.MemoryHooks, gc.isenabled(),\n"
        "        set(actormem.__all__) <= set(dir(actormem)), 'main' in dir(actormem.cli),\n"
        "        'import_pause' not in dir(actormem)]\n"
        "print(json.dumps([light, enabled, eager == sorted(actormem._EAGER), same]))\n"
    )
    light, enabled, eager_all, same = out
    assert light == []
    assert enabled is True
    assert eager_all is True
    assert all(same), same


def test_the_submodules_and_missing_names() -> None:
    out = _fresh(
        "import json\n"
        "import actormem\n"
        "agent = actormem.agent\n"  # a submodule the eager imports set, as before
        "try:\n"
        "    actormem.Nope\n"
        "    missing = 'no error'\n"
        "except AttributeError as e:\n"
        "    missing = str(e)\n"
        "try:\n"
        "    actormem.__wrapped__\n"
        "    dunder = 'no error'\n"
        "except AttributeError:\n"
        "    dunder = 'AttributeError'\n"
        "import actormem.cli\n"
        "try:\n"
        "    actormem.cli.nope\n"
        "    cli = 'no error'\n"
        "except AttributeError as e:\n"
        "    cli = str(e)\n"
        "print(json.dumps([agent.__name__, missing, dunder, cli]))\n"
    )
    assert out == [
        "actormem.agent",
        "module 'actormem' has no attribute 'Nope'",
        "AttributeError",
        "module 'actormem.cli' has no attribute 'nope'",
    ]


def test_every_public_name_from_import_and_attribute() -> None:
    out = _fresh(
        "import json, importlib\n"
        "import actormem\n"
        "names = list(actormem.__all__)\n"
        "ns = {}\n"
        "exec('from actormem import ' + ', '.join(names), ns)\n"
        "where = {**actormem._EAGER, **actormem._LAZY}\n"
        "bad = [n for n in names if ns[n] is not getattr(actormem, n)\n"
        "       or ns[n] is not getattr(importlib.import_module(where[n], 'actormem'), n)]\n"
        "print(json.dumps([bad, sorted(set(names) - set(where))]))\n"
    )
    assert out == [[], []]
