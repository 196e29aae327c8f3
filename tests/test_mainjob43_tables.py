"""mainjob43: ``actormem swarm`` draws its end-of-run tables without rich when its output
is not a terminal (``cli._display._PLAIN_TABLES``).

* ``plain_tables`` gives exactly the text rich's console writes into a file for the same
  tables, whenever it gives one (Hypothesis: titles, columns, justifications, cells and
  widths), and declines (None) what rich would draw otherwise: too wide, markup,
  emoji codes, wide characters, spaces rich would wrap on, no rows;
* ``plain_output``: a terminal, an environment variable rich reads, IPython, a non-UTF
  encoding, an ``isatty`` that raises: rich's path;
* a swarm whose stdout is not a terminal writes the same text as rich for its own
  tables, and (a fresh interpreter) never imports rich; with ``FORCE_COLOR`` or the knob
  off it draws them with rich, as before.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem.cli import _display, _main
from actormem.cli._display import TableSpec, plain_output, plain_tables, rich_tables

from .strategies import examples
from .test_startup24 import _calls_file

ROOT = Path(__file__).resolve().parent.parent


def _rich_text(specs: list[TableSpec], width: int) -> str:
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False)
    for table in rich_tables(specs):
        console.print(table)
    return out.getvalue()


_words = st.text("abcdefghijklmnopqrstuvwxyzABCZ0123456789,.()%/_+-", min_size=1, max_size=12)
_plain = st.lists(_words, min_size=1, max_size=3).map(" ".join)
_cells = st.one_of(
    _plain,
    st.integers(0, 10**9).map(lambda n: f"{n:,}"),
    st.floats(0, 1e5, allow_nan=False).map(lambda x: f"{x:.3f}"),
    st.sampled_from(["-", "0", "none"]),
)


@st.composite
def _specs(draw: st.DrawFn, cells: st.SearchStrategy[str] = _cells) -> list[TableSpec]:
    specs = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(1, 9))
        columns = tuple(
            (draw(_plain), draw(st.sampled_from(["left", "right"]))) for _ in range(n)
        )
        rows = tuple(
            tuple(draw(cells) for _ in range(n)) for _ in range(draw(st.integers(1, 3)))
        )
        specs.append(TableSpec(draw(_plain), columns, rows))
    return specs


@settings(max_examples=examples(300), deadline=None)
@given(_specs(), st.integers(10, 160))
def test_plain_tables_are_riches_when_given(specs: list[TableSpec], width: int) -> None:
    text = plain_tables(specs, width)
    if text is not None:
        assert text == _rich_text(specs, width)


# Cells rich does not show as they are, or wraps, or at widths it shrinks.
_odd = st.sampled_from(
    ["[bold]x[/bold]", "a:smile:b", ":x:", "\u4e00\u4e00", "a  b", " a", "a ", "", "tab\tx", "é"]
)


@settings(max_examples=examples(200), deadline=None)
@given(_specs(st.one_of(_cells, _odd)), st.integers(10, 160))
def test_plain_tables_decline_what_rich_draws_otherwise(
    specs: list[TableSpec], width: int
) -> None:
    text = plain_tables(specs, width)
    if text is not None:
        assert text == _rich_text(specs, width)


def _swarm_like() -> list[TableSpec]:
    right = ("agents", "elapsed s", "episodes", "steps", "operations", "ops/s", "steps/s")
    return [
        TableSpec(
            "throughput",
            tuple((n, "right") for n in right),
            (("64", "2.31", "283", "5,685", "11,551", "5,000", "2,461"),),
        ),
        TableSpec(
            "latency (ms)",
            (("operation", "left"), *((n, "right") for n in ("count", "p50", "p95", "p99", "max"))),
            (("store", "5,685", "0.612", "2.100", "4.300", "9.100"),
             ("consolidate", "0", "-", "-", "-", "-")),
        ),  # fmt: skip
    ]


def test_the_swarms_tables_are_drawn_plainly_at_80() -> None:
    specs = _swarm_like()
    text = plain_tables(specs, 80)
    assert text is not None
    assert text == _rich_text(specs, 80)
    assert plain_tables(specs, 40) is None  # rich would shrink them
    assert plain_tables([TableSpec("t", (("a", "left"),), ())], 80) is None
    bad = TableSpec("t", (("a", "left"),), (("[red]x",),))
    assert plain_tables([bad], 80) is None


class _Stream(io.StringIO):
    def __init__(self, tty: Any, encoding: str | None = "utf-8") -> None:
        super().__init__()
        self._tty = tty
        self._encoding = encoding

    @property
    def encoding(self) -> Any:  # type: ignore[override]
        return self._encoding

    def isatty(self) -> bool:
        if isinstance(self._tty, Exception):
            raise self._tty
        return bool(self._tty)


@pytest.fixture
def clean_environ(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _display._RICH_ENVIRON:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_plain_output_only_where_rich_writes_a_file(clean_environ: pytest.MonkeyPatch) -> None:
    assert plain_output(_Stream(False))
    assert plain_output(_Stream(False, None))  # rich reads no encoding as UTF-8
    assert not plain_output(_Stream(True))
    assert not plain_output(_Stream(ValueError("closed")))
    assert not plain_output(_Stream(False, "ascii"))  # rich draws ASCII boxes there
    for name in _display._RICH_ENVIRON:
        with clean_environ.context() as env:
            env.setenv(name, "1")
            assert not plain_output(_Stream(False))
    with clean_environ.context() as env:
        env.setattr(builtins, "get_ipython", lambda: None, raising=False)
        assert not plain_output(_Stream(False))
    with clean_environ.context() as env:
        env.setattr(_display, "_PLAIN_TABLES", False)
        assert not plain_output(_Stream(False))


def _spy_specs(monkeypatch: pytest.MonkeyPatch) -> list[list[TableSpec]]:
    seen: list[list[TableSpec]] = []
    real = _main.result_specs

    def specs(*args: Any) -> list[TableSpec]:
        made = real(*args)
        seen.append(made)
        return made

    monkeypatch.setattr(_main, "result_specs", specs)
    return seen


def _tables_part(out: str) -> str:
    """The four tables of a swarm's output: from the throughput title to the CPU line."""
    start = out.index("throughput")
    return out[start : out.index("CPU: ", start)]


@pytest.mark.parametrize("plain", [True, False])
def test_a_swarm_writes_riches_tables_either_way(
    tmp_path: Path,
    clean_environ: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    plain: bool,
) -> None:
    clean_environ.setattr(_display, "_PLAIN_TABLES", plain)
    seen = _spy_specs(clean_environ)
    calls = _calls_file(tmp_path)
    capsys.readouterr()
    status = _main.main(["swarm", "--agents", "3", "--interval", "600", "--in-memory",
                         "--tool-calls", str(calls)])  # fmt: skip
    assert status == 0
    out = capsys.readouterr().out
    assert len(seen) == 1
    assert _tables_part(out) == _rich_text(seen[0], _display._console_width())
    assert out.count("┏") == 4


_PROBE = """
import json, sys
from actormem.cli._main import main
import actormem.cli._display as d
d._PLAIN_TABLES = sys.argv[2] == "1"
status = main(["swarm", "--agents", "3", "--interval", "600", "--in-memory",
               "--tool-calls", sys.argv[1]])
sys.stderr.write(json.dumps([status, "rich" in sys.modules,
                             any(m.startswith("rich.") for m in sys.modules)]) + "\\n")
"""


@pytest.mark.parametrize(
    ("knob", "environ", "rich"),
    [("1", {}, False), ("0", {}, True), ("1", {"FORCE_COLOR": "1"}, True)],
)
def test_a_swarm_into_a_file_never_imports_rich(
    tmp_path: Path, knob: str, environ: dict[str, str], rich: bool
) -> None:
    calls = _calls_file(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in _display._RICH_ENVIRON}
    env.update(environ, PYTHONPATH=str(ROOT))
    with open(tmp_path / "out.txt", "w", encoding="utf-8") as out:
        done = subprocess.run(
            [sys.executable, "-c", _PROBE, str(calls), knob], stdout=out,
            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, env=env, cwd=tmp_path,
            timeout=120, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    status, imported, submodules = json.loads(done.stderr.strip().splitlines()[-1])
    assert status == 0
    assert imported is rich
    assert submodules is rich
    text = (tmp_path / "out.txt").read_text(encoding="utf-8")
    assert text.count("┏") == 4
    assert "lost: 0" in text
