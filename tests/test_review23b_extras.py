"""review23b: the CLI where an optional extra is missing.

``actormem query/swarm --scorer dense|hybrid`` on a machine without wordllama printed a
traceback (the dense scorer raised a bare ``ImportError``, so the CLI's mapping of a
missing package to its extra, which looks for a ``ModuleNotFoundError`` naming the
package, did not apply). It must print one line naming the extra and exit 2, as a
missing httpx or hypercorn does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .realdata import DATA, needs_real_file

_PRELUDE = textwrap.dedent(
    """
    import sys
    class _Without:
        def find_spec(self, name, path=None, target=None):
            if name == "wordllama" or name.startswith("wordllama."):
                raise ModuleNotFoundError("No module named 'wordllama'", name="wordllama")
            return None
    sys.meta_path.insert(0, _Without())
    for key in [k for k in sys.modules if k.startswith("wordllama")]:
        del sys.modules[key]
    from actormem.cli import run_command
    run_command(sys.argv[1:])
    """
)


# The children import this checkout's actormem, whatever their working directory.
_ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _PRELUDE, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env=_ENV,
    )


def test_the_dense_model_missing_is_a_module_not_found_naming_wordllama() -> None:
    code = textwrap.dedent(
        """
        import sys
        class _Without:
            def find_spec(self, name, path=None, target=None):
                if name == "wordllama" or name.startswith("wordllama."):
                    raise ModuleNotFoundError("No module named 'wordllama'", name="wordllama")
                return None
        sys.meta_path.insert(0, _Without())
        from actormem._index.dense import wordllama_embedder
        try:
            wordllama_embedder()
        except ImportError as exc:
            print(type(exc).__name__, exc.name, exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_ENV
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "ModuleNotFoundError wordllama the dense scorer's default model needs wordllama:"
        " pip install 'actormem[dense]' (in a clone: pip install -e '.[dense]')"
    )


@pytest.mark.parametrize(
    "args",
    [
        ("query", "--scorer", "dense", "{db}", "deploy"),
        ("query", "--scorer", "hybrid", "{db}", "deploy"),
        ("swarm", "--scorer", "dense", "--in-memory", "--episodes", "2"),
        ("swarm", "--scorer", "hybrid", "--path", "{db2}", "--episodes", "2"),
    ],
)
def test_the_cli_names_the_dense_extra_without_a_traceback(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    db = tmp_path / "m.db"
    made = subprocess.run(
        [sys.executable, "-m", "actormem", "import", str(db), "/dev/stdin"],
        input='{"category": "fact", "memory": "deploys go to blue"}\n',
        capture_output=True,
        text=True,
        timeout=120,
        env=_ENV,
    )
    assert made.returncode == 0, made.stderr
    argv = [a.format(db=db, db2=tmp_path / "s.db") for a in args]
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"actormem {args[0]}: error: wordllama is not installed"
        " (pip install 'actormem[dense]' (in a clone: pip install -e '.[dense]'))"
    ), done.stderr


_LOCOMO = DATA / "locomo10.json"


@needs_real_file("locomo10.json")
def test_eval_locomo_names_the_dense_extra_without_a_traceback(tmp_path: Path) -> None:
    """The dense model is loaded once the evaluation starts, past the eval command's
    own ImportError handler: the CLI's mapping must name the extra."""
    done = _cli(
        "eval", "locomo", "--data", str(_LOCOMO), "--scorer", "dense",
        "--conversation", "conv-26", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "actormem eval: error: wordllama is not installed"
        " (pip install 'actormem[dense]' (in a clone: pip install -e '.[dense]'))"
    ), done.stderr


@pytest.mark.parametrize(
    ("blocked", "call", "message"),
    [
        (
            "stop_words",
            "stop_words('english')",
            "stop word lists need the stop-words package: pip install stop-words, or ",
        ),
        (
            "bm25s",
            "stop_words('english', 'nltk')",
            "NLTK's stop-word lists come with bm25s: pip install bm25s, or ",
        ),
        (
            "Stemmer",
            "_stem_function('english')",
            "stemming needs PyStemmer: pip install PyStemmer, or ",
        ),
    ],
)
def test_the_stem_extras_missing_name_the_package_and_the_extra(
    blocked: str, call: str, message: str
) -> None:
    """Like wordllama's: a ModuleNotFoundError naming the package (the CLI maps
    ``stop_words``, ``bm25s`` and ``Stemmer`` to the ``stem`` extra, but these raised a
    bare ImportError without a name), its message naming the extra for a clone too, as
    the README says ``.[stem]`` adds stemming and stop words."""
    code = textwrap.dedent(
        f"""
        import sys
        class _Without:
            def find_spec(self, name, path=None, target=None):
                if name == {blocked!r} or name.startswith({blocked!r} + "."):
                    raise ModuleNotFoundError("No module named " + name, name=name)
                return None
        sys.meta_path.insert(0, _Without())
        from actormem._index.tokenize import _stem_function, stop_words
        try:
            {call}
        except ImportError as exc:
            print(type(exc).__name__, exc.name, exc, sep="|")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_ENV
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "|".join(
        [
            "ModuleNotFoundError",
            blocked,
            message + "pip install 'actormem[stem]' (in a clone: pip install -e '.[stem]')",
        ]
    )
