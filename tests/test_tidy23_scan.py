"""Branch tidy23's fixes to the compiled scans and counts:

* ``wo_scan`` (and ``wo_scan_mark``, which shares its checks): ``lo:hi`` wider than the
  ring of ``mod`` texts is refused, in Python and in C, before any text is read (a
  ``hi`` of 2**62 walked every group number holding the GIL: a hang);
* ``ccore.count_words``: a multiplicity that is not an int gets the same error (class
  and message) or the same answer with ``knobs._LEAN_MULT_CHECKS`` on and off.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from actormem._index import kernels
from actormem._index.wordoverlap import knobs as wo_knobs

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="the index kernels are not built")

_HUGE_HI_CHILD = """
import numpy as np
from actormem._index import kernels
c = kernels._kernels()
d = np.zeros(8, np.uint8)
calls = [
    lambda: kernels.wo_scan(['aq'], 0, 1 << 62, 1, 'aq'),
    lambda: c.wo_scan(['aq'], 0, 1 << 62, 1, 'aq', True, True),
    lambda: c.wo_scan(['aq', 'q'], 5, (1 << 63) - 1, 2, 'aq'),
    lambda: kernels.wo_scan_mark(['aq'] * 8, 0, 9, 8, 'aq', 1, 1, np.zeros(1 << 20, np.uint8)),
    lambda: c.wo_scan_mark(['aq'] * 8, 0, 9, 8, 'aq', True, True, d),
]
for call in calls:
    try:
        call()
    except ValueError as e:
        assert str(e) == 'hi beyond lo + mod (the texts)', e
        print('refused')
assert not d.any()
"""


def test_a_range_wider_than_the_texts_is_refused_at_once() -> None:
    """Before the fix the compiled ``wo_scan`` took any ``hi``: 2**62 walked (and tested)
    every group number of ``lo:hi`` holding the GIL. Run in a child so that the defect
    fails the test instead of hanging the suite."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", _HUGE_HI_CHILD], capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("wo_scan walked lo:hi instead of refusing hi beyond lo + mod")
    assert done.stdout.split() == ["refused"] * 5, done.stderr


@pytest.mark.parametrize("fn", ["py", "c"])
def test_the_widest_range_scans_each_text_once(fn: str) -> None:
    recent = ["aq", "\u0171aq", "x", "\U00010071aq"]
    scan = kernels.wo_scan if fn == "py" else kernels._kernels().wo_scan
    for lo in range(9):
        want = [g for g in range(lo, lo + 4) if "aq" in recent[g % 4]]
        assert scan(recent, lo, lo + 4, 4, "aq", True, True) == want
        with pytest.raises(ValueError, match="the texts"):
            scan(recent, lo, lo + 5, 4, "aq", True, True)
        with pytest.raises(ValueError, match="the texts"):
            scan(recent, lo, lo + 3, 2, "aq", True, True)  # mod, not len(recent)
        dense = np.full(lo + 8, 2, np.uint8)
        mark = kernels.wo_scan_mark if fn == "py" else kernels._kernels().wo_scan_mark
        with pytest.raises(ValueError, match="the texts"):
            mark(recent, lo, lo + 5, 4, "aq", True, True, dense)
        assert (dense == 2).all()  # nothing written
        assert mark(recent, lo, lo + 4, 4, "aq", True, True, dense) == len(want)
        assert np.flatnonzero(dense == 1).tolist() == want


_MULTS: list[Any] = [2.0**40, 1e300, -1.0, 1.5, float("nan"), float("inf"), "x", True, None]


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
def test_lean_mult_checks_refuse_a_non_int_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """A multiplicity that is not an int, anywhere (before ``start`` too), beside ints in
    and out of range: the same outcome with ``knobs._LEAN_MULT_CHECKS`` on and off (the
    same error class and message, or the same answer and counts). Before the fix a float
    out of range gave ``ValueError`` with the knob off and ``TypeError`` on, and a str
    ``min``'s own ``TypeError`` message."""
    from actormem._index.substring import SubstringVocab
    from actormem._index.wordoverlap import ccore

    vocab = SubstringVocab()
    post: dict[str, Any] = {}
    for gid, text in enumerate(["player plays", "display", "alpha one"]):
        ccore.add_text(post, text, gid, vocab)

    def outcome(mults: list[Any], start: int) -> tuple[Any, ...]:
        counts = np.zeros(8, np.uint8)
        try:
            got = ccore.count_words(
                ["play", "alpha", "one"], mults, start, 1000, 100, vocab, post, {}, {},
                counts, 3, 0, None,
            )  # fmt: skip
        except (TypeError, ValueError) as exc:
            assert not counts.any()
            return type(exc), str(exc)
        return got, counts.tolist()

    seen = set()
    for bad in _MULTS:
        for other in (2, -1, 1 << 31):
            for at in (0, 1, 2):
                for start in (0, 1, 3):
                    mults = [1, other, 3]
                    mults[at] = bad
                    got = []
                    for lean in (False, True):
                        monkeypatch.setattr(wo_knobs, "_LEAN_MULT_CHECKS", lean)
                        got.append(outcome(mults, start))
                    assert got[0] == got[1], (mults, start, got)
                    seen.add(got[0][0] if isinstance(got[0][0], type) else "answer")
    assert seen == {TypeError, ValueError, "answer"}
