"""Old and new word-overlap paths at the tiniest knobs (review revA): every slice,
step, chunk and visit part of one element, the memo's generations of one or two words."""

from __future__ import annotations

import pytest

from actormem._index import kernels
from actormem._index.wordoverlap import knobs as wo_knobs

from .strategies import run_machine
from .test_memo_absent import AbsentAndNot, OwnCacheAndNot
from .test_wordoverlap_bits import (
    CountsOldAndNew,
    VisitOldAndNew,
    VisitOldAndNewInBytes,
)

pytestmark = pytest.mark.skipif(
    not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built"
)

TINY = {
    "_CHUNK": 1,
    "_JOIN": 1,
    "_DENSE": 1,
    "_DENSE_BITS": 1,
    "_STEP": 1,
    "_VISIT": 1,
    "_BITS_CHUNK": 1,
    "_WALK_STEP": 1,
    # A renumbering as soon as half the group numbers are purged (the default waits
    # for 4,096: these machines never reached one), the masks' batches and the texts
    # a cached set is extended from at their smallest.
    "_RENUMBER_MIN": 1,
    "_MASK_BATCH": 1,
    "_SCAN_NEW": 2,
}


@pytest.fixture(params=[1, 2])
def tiny_knobs(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {**TINY, "_MEMO_WORDS": request.param}.items():
        monkeypatch.setattr(wo_knobs, name, value)


@pytest.mark.usefixtures("tiny_knobs")
@pytest.mark.parametrize(
    "machine",
    [VisitOldAndNew, VisitOldAndNewInBytes, CountsOldAndNew, AbsentAndNot, OwnCacheAndNot],
)
def test_old_and_new_agree_at_the_tiniest_knobs(machine: type[CountsOldAndNew]) -> None:
    run_machine(machine, 15, 20)


def test_new_wrappers_refuse_huge_ints_and_unaligned_buffers_before_c() -> None:
    # Huge ints reached C's argument parsing (OverflowError, not the documented
    # ValueError); an unaligned int64 buffer was cast to int64_t / struct vcand in C
    # (undefined behaviour, a fault where unaligned loads trap).
    import numpy as np

    from actormem._index.wordoverlap import ccore

    idx, rel, seq = np.array([0, 1], np.int64), np.zeros(3), np.zeros(3, np.int64)
    heap = np.zeros(8, np.int64)
    unaligned = np.frombuffer(bytearray(8 * 9), np.int64, count=8, offset=1)
    assert not unaligned.flags.aligned
    assert unaligned.flags.writeable
    with pytest.raises(ValueError, match="kth"):
        ccore.visit_heap(idx, rel, seq, 0.1, None, (0.5, 1 << 70), heap)
    with pytest.raises(ValueError, match="kth"):
        ccore.visit_heap(idx, rel, seq, 0.1, None, [0.5, 1], heap)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aligned"):
        ccore.visit_heap(idx, rel, seq, 0.1, None, None, unaligned)
    with pytest.raises(ValueError, match="ints >= 0"):
        ccore.visit_pop(heap, 0, 1 << 70)
    with pytest.raises(ValueError, match="aligned"):
        ccore.visit_pop(unaligned, 0, 1)
    n = 300
    bp = ccore.BitPlanes(np.zeros(ccore.words_of(n) * 3, np.uint64), 3, n)
    bp.set_word_maxima(np.zeros(5, np.uint16))
    with pytest.raises(ValueError, match="multiple of 64"):
        bp.maxima_of_chunks(64 << 64)
    out = np.zeros(256, np.int64)
    with pytest.raises(ValueError, match="beyond"):
        bp.select_chunks(1, [64 << 64], 64, out)
    with pytest.raises(ValueError, match="multiple of 64"):
        bp.select_chunks(1, [0], 64 << 64, out)
    with pytest.raises(ValueError, match="aligned"):
        bp.select_chunks(0, [0], 64, np.frombuffer(bytearray(8 * 65), np.int64, count=64, offset=3))
    # Still accepted: the bounds and empty inputs.
    assert ccore.visit_heap(idx, rel, seq, 0.1, None, (0.5, (1 << 63) - 1), heap) == 0
    assert ccore.visit_pop(heap, 0, (1 << 63) - 1) == ([], 0)
    assert bp.select_chunks(0, [], 64, out) == (0, 0)


def test_count_words_refuses_unknown_flags() -> None:
    # Only 1 (_MEMO_ABSENT), 2 (_MEMO_OWN_CACHE), 4 (_MEMO_KEEP_LEFT), 8
    # (_ADD_UNROLLED), 16 (_FIND_BYTES), 32 (_PROBE_STRS), 64 (SHORT_LEN2) and 128
    # (_CAND_SIGS) are flags;
    # nothing else may reach the loop (no test called the C function with others).
    from array import array

    import numpy as np

    from actormem._index import _cwordoverlap as c

    def call(flags: int) -> object:
        counts = np.zeros(4, np.uint8)
        grams: dict[str, list[int]] = {"dog": [0]}
        items, post = {0: "dog"}, {"dog": array("i", [1])}
        memo: list[object] = [{}, {}, 0]
        return c.count_words(
            ["dog", "cat"], [1, 1], 0, 100, 10, grams, items, {}, 8, post, {}, {}, counts, 3,
            0, memo, 0, 1, flags,
        )  # fmt: skip

    for flags in range(512):  # (64: mainjob23's SHORT_LEN2; 128: 27's; 256: mainjob45's)
        assert call(flags) == (2, [])
    for flags in (512, 1024, -1, -4, 1 << 30):
        with pytest.raises(ValueError, match="unknown flags"):
            call(flags)
    with pytest.raises(OverflowError):
        call(1 << 31)
