"""The modes ``bm25_daat`` runs its windowed walk with, from its flags (``kernels.Bm25Daat``'s
bools): each knob turns on only its own mode, so that a benchmark's ``--old core-tight``
(``knobs._TIGHT_WALK = False``, the other knobs at their defaults) measures the loop
before the tight walk, not the tight walk. The results are the same either way, so only
the decoding can show it."""

from __future__ import annotations

import pytest

from actormem._index import kernels

pytestmark = pytest.mark.skipif(
    not kernels.bm25_core_active(), reason="the compiled BM25 core is not built"
)

TIGHT, SIMD, AHEAD, WALKS_TIGHT = 1, 2, 4, 8


def _modes(flags: int) -> int:
    from actormem._index import _cbm25  # type: ignore[attr-defined]

    got: int = _cbm25.bm25_daat_modes(flags)
    return got


@pytest.mark.parametrize("flags", range(64))
def test_tight_walk_only_with_its_flag(flags: int) -> None:
    modes = _modes(flags)
    assert bool(modes & WALKS_TIGHT) == bool(flags & 4)
    assert bool(modes & SIMD) == (flags & 20 == 20)
    assert bool(modes & AHEAD) == bool(flags & 32)


def test_tight_walk_off_beside_the_other_knobs() -> None:
    # What search.py passes with knobs._TIGHT_WALK = False and every other knob on.
    flags = 1 | 2 | 0 * 4 | 8 | 16 | 32
    assert not _modes(flags) & WALKS_TIGHT


@pytest.mark.parametrize("flags", [-1, 64, 1 << 40])
def test_flags_out_of_range(flags: int) -> None:
    with pytest.raises((ValueError, OverflowError)):
        _modes(flags)
