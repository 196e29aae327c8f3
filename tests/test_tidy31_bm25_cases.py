"""tidy31: the bm25q test files take the BM25 core's shared cases and drivers from
``tests/bm25_cases.py``: before, bm25q14 imported them from four sibling test files
(``_lists``, ``_table``, ``_FLAGS``/``_by_daat``/``_with_dense``, ``corpus``) and wrote
out again the index driver, the CPU fact saved and restored, the query through
``kernels.bm25_query`` and the heap's bytes; its siblings did too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from actormem._index import kernels
from actormem._index.bm25 import knobs as bm25_knobs

from . import bm25_cases

HERE = Path(__file__).parent


@pytest.mark.parametrize("path", sorted(HERE.glob("test_bm25q*.py")), ids=lambda p: p.stem)
def test_no_bm25q_file_imports_a_sibling(path: Path) -> None:
    tree = ast.parse(path.read_text())
    imported = [
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 1
    ]
    assert not [name for name in imported if name.startswith("test_bm25q")], imported


def test_index_agrees_restores_the_cpu_facts_and_knobs() -> None:
    cpu, knob = kernels.CPU_IS_AMD, bm25_knobs._SCAN_MARKS
    bm25_cases.index_agrees(3, 20, ("_SCAN_MARKS",), CPU_IS_AMD=not cpu)
    assert (kernels.CPU_IS_AMD, bm25_knobs._SCAN_MARKS) == (cpu, knob)
    with pytest.raises(AttributeError):
        bm25_cases.index_agrees(3, 20, ("_NO_SUCH_KNOB",), CPU_IS_AMD=not cpu)
    assert kernels.CPU_IS_AMD == cpu
