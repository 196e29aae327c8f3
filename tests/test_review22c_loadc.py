"""Review22c: the durable open's C load path (branch ``open17``: ``state._LOAD_C``,
``_cwordoverlap.c``'s ``load_inserts``) against the Python loop (``_LOAD_C = False``).

Files made by the public API and edited with sqlite3 (relevance -0.0 and ties, a
namespace first seen late, duplicate texts across runs, keyed / expiring rows between
plain ones, the index image present and absent, an id twice) must open to the same
whole state, or fail with the same error and leave the file unchanged; the C path must
keep no reference to the rows' objects; and a fold buffer the Python loop accepts (any
``bytes``, a subclass too) must not make the C call refuse the load.
"""

from __future__ import annotations

import gc
import random
import shutil
import sqlite3
import struct
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine import state as state_module
from actormem._engine.state import MemoryState
from actormem._index import textfold
from actormem._storage.sqlite_format import FoldedRows
from tests.strategies import examples

from .test_open17_loadc import _layout, _plain_rows
from .test_open_fast import _assert_same

needs_c = pytest.mark.skipif(
    state_module._load_inserts_c is None, reason="the word overlap core is not built"
)

EDITS: dict[str, list[str]] = {
    "as made": [],
    "ties and -0.0": [
        "UPDATE entries SET relevance = 0.5 WHERE seq % 3 = 0",
        "UPDATE entries SET relevance = -0.0 WHERE seq % 7 = 0",
        "UPDATE entries SET relevance = 0.0 WHERE seq % 11 = 0",
    ],
    "a namespace late": [
        'UPDATE entries SET namespace = \'["late", "x"]\' WHERE seq > 300 AND seq % 4 = 0'
    ],
    "duplicate texts": [
        "UPDATE entries SET memory = 'Same  TEXT here' WHERE seq % 9 = 0",
        "UPDATE entries SET memory = 'same text HERE' WHERE seq % 13 = 0",
        "UPDATE entries SET memory = '\u00c9t\u00e9 \u03a3\u0391\u03a3 ' || (seq % 3)"
        " WHERE seq % 17 = 0",
    ],
    "alternating rows": [
        "UPDATE entries SET key = NULL",
        "UPDATE entries SET key = 'k' || seq WHERE seq % 2 = 0",
        "UPDATE entries SET expires_at = '2999-01-01T00:00:00.000000+00:00', ttl = 5.0"
        " WHERE seq % 5 = 1",
    ],
    "odd rows at the ends": [
        "UPDATE entries SET key = 'z' || seq"
        " WHERE seq > (SELECT max(seq) FROM entries) - 9"
        " OR seq < (SELECT min(seq) FROM entries) + 9"
    ],
}


async def _made(path: Path, n: int, seed: int) -> None:
    rows = _plain_rows(seed, n)
    async with open_memory(path=path) as memory:
        await memory.store_many([e for _, e in rows])
    async with open_memory(path=path):  # closed cleanly: with its index image
        pass


async def _state(path: Path) -> MemoryState:
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        return memory._state


def _open(path: Path, c: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(state_module, "_LOAD_C", c)
    try:
        return ("ok", trio.run(_state, path))
    except Exception as exc:  # the error's kind and text, the path left out
        return ("error", type(exc).__name__, str(exc).replace(str(path), "P"))
    finally:
        monkeypatch.undo()


def _extra(state: MemoryState) -> Any:
    """What ``_layout`` does not read: the collector's tracking, keys, expiries."""
    recs = list(state.view().records())
    return (
        [(gc.is_tracked(r), gc.is_tracked(r.entry)) for r in recs],
        sorted(state._by_key.items()),
        sorted((r.seq, k[0]) for r, k in state._exkeys.items()),
    )


@needs_c
@pytest.mark.parametrize("image", [True, False])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_file_opens_to_the_same_state(
    tmp_path: Path, edit: str, image: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base.db"
    trio.run(_made, base, 500, 21)
    conn = sqlite3.connect(base)
    for sql in EDITS[edit]:
        conn.execute(sql)
    if not image:
        conn.execute("DELETE FROM index_image")
    conn.commit()
    conn.close()
    got = {}
    for c in (True, False):
        path = tmp_path / f"m{int(c)}.db"
        shutil.copy(base, path)
        got[c] = _open(path, c, monkeypatch)
    assert got[True][0] == got[False][0] == "ok"
    on, off = got[True][1], got[False][1]
    _assert_same(on, off)
    assert _layout(on) == _layout(off)
    assert _extra(on) == _extra(off)


@needs_c
def test_an_id_twice_fails_alike_and_leaves_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base.db"
    trio.run(_made, base, 300, 22)
    conn = sqlite3.connect(base)
    conn.execute(
        "UPDATE entries SET id = (SELECT id FROM entries ORDER BY seq LIMIT 1 OFFSET 5)"
        " WHERE seq = (SELECT seq FROM entries ORDER BY seq LIMIT 1 OFFSET 200)"
    )
    conn.commit()
    conn.close()
    got = {}
    for c in (True, False):
        path = tmp_path / f"m{int(c)}.db"
        shutil.copy(base, path)
        before = path.read_bytes()
        got[c] = _open(path, c, monkeypatch)
        assert path.read_bytes() == before
    assert got[True] == got[False]
    assert got[True][0] == "error"
    assert "appears twice" in got[True][2]


def _counts(rows: list[tuple[int, MemoryEntry]]) -> list[tuple[int, ...]]:
    return [
        (sys.getrefcount(e), sys.getrefcount(e.memory), sys.getrefcount(e.namespace))
        for _, e in rows
    ]


@needs_c
def test_the_c_path_keeps_no_reference_once_the_state_is_gone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rows = _plain_rows(23, 800)
    folds = [textfold.fold_hash(e.memory) for _, e in rows]
    src = FoldedRows(rows, struct.pack(f"={len(rows)}Q", *folds))
    monkeypatch.setattr(state_module, "_LOAD_C", True)
    gc.collect()
    before = _counts(rows)
    state = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
    state.load(src)
    assert _counts(rows) != before  # the state holds them
    del state
    gc.collect()
    assert _counts(rows) == before


class _Bytes(bytes):
    """A ``bytes`` subclass: ``_load_bulk``'s ``isinstance`` admits it as the folds."""


@needs_c
@settings(max_examples=examples(10), deadline=None)
@given(seed=st.integers(0, 2**32), n=st.integers(1, 120), missing=st.sampled_from([0.0, 0.5]))
def test_folds_of_a_bytes_subclass_load_as_the_python_loop(
    seed: int, n: int, missing: float
) -> None:
    rng = random.Random(seed)
    rows = [(s, attrs.evolve(e, key=None)) for s, e in _plain_rows(seed, n)]
    folds = [2**64 - 1 if rng.random() < missing else textfold.fold_hash(e.memory) for _, e in rows]
    src = FoldedRows(rows, _Bytes(struct.pack(f"={n}Q", *folds)))
    states = {}
    with pytest.MonkeyPatch.context() as mp:
        for c in (True, False):
            mp.setattr(state_module, "_LOAD_C", c)
            states[c] = MemoryState(capacity=None, half_life=3600.0, scorer=WordOverlapScorer())
            states[c].load(src)
    _assert_same(states[True], states[False])
    assert _layout(states[True]) == _layout(states[False])
