"""The relevance parts' cache (``state._REL_PART_SEQ``, at most 4,096 relevances) keeps
taking new relevances once full (emptied but for 1.0, the default): the compiled load
(``load_inserts``) and store take a row only when its relevance is in the cache, so a
process that had seen 4,096 relevances sent every row of another one, the default's too,
to the Python path for good (found by a test order: BM25 tests storing random
relevances, then test_open17_loadc's C load took no row). The same state either way;
this checks the fast path is not lost."""

from __future__ import annotations

import pytest

from actormem._engine import state as state_module

from .test_open17_loadc import _assert_same, _loaded, _plain_rows, needs_c


@needs_c
def test_a_full_cache_still_takes_the_default_relevance(monkeypatch: pytest.MonkeyPatch) -> None:
    cache: dict[float, int] = {}
    monkeypatch.setattr(state_module, "_REL_PART_SEQ", cache)
    for i in range(5000):  # other relevances fill it first
        state_module._rel_part_seq(0.5 + i / 20000)
    assert 0 < len(cache) <= 4096
    assert 0.5 + 4999 / 20000 in cache  # the last one went in
    rows = _plain_rows(7, 400)
    on, loaded_c, _ = _loaded(rows, True, monkeypatch)
    assert 1.0 in cache
    assert loaded_c > 0  # the C load took the default rows (0 before: 1.0 never cached)
    off, loaded_py, _ = _loaded(rows, False, monkeypatch)
    assert loaded_py == 0
    _assert_same(on, off)


def test_the_caches_start_with_the_default() -> None:
    assert state_module._REL_PART_SEQ[1.0] == 0
    assert state_module._REL_PART[1.0] == 0
    assert state_module._rel_part_seq(1.0) == 0
    assert state_module._rel_part(1.0) == 0


def test_a_full_cache_is_emptied_but_for_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    cache: dict[float, int] = {1.0: 0}
    monkeypatch.setattr(state_module, "_REL_PART_SEQ", cache)
    for i in range(4095):
        state_module._rel_part_seq(i / 8192)
    assert len(cache) == 4096
    assert state_module._rel_part_seq(0.75) == state_module._new_part({}, 63, 0.75)
    assert cache == {1.0: 0, 0.75: state_module._new_part({}, 63, 0.75)}
