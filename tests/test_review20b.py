"""review20b: re-entrancy in the C kernels' new code (DupTable.join's group, ...)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_cwordoverlap = pytest.importorskip("actormem._index._cwordoverlap")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


def test_join_survives_a_record_whose_hash_drops_the_group() -> None:
    """join(key, rec) into a dict group: rec's __hash__ runs Python code that may delete
    the key (the group's last reference); the dict must stay alive while rec goes in
    (a segfault / use after free before the fix)."""
    done = _run(
        """
        from actormem._index._cwordoverlap import DupTable
        t = DupTable()
        armed = False
        class R:
            def __hash__(self):
                global armed
                if armed:
                    armed = False
                    del t[5]
                return id(self) >> 4
        for _ in range(40):
            t.join(5, R())
        armed = True
        assert t.join(5, R()) is False
        assert 5 not in t and len(t) == 0
        t._check()
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
