"""Set-ups several test files share (as ``tests/strategies.py`` holds shared strategies):
a state made with one knob set, the C tables' iterator rules, one round of a SIGKILL
trial, and the drivers that run the same operations with a knob on and off. Each was
written out in two or three files before branch tidy24b."""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from hypothesis import strategies as st
from hypothesis.stateful import rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.state import MemoryState

from . import crash_child

# -- a state made with a knob set ------------------------------------------------------


def knob_state(
    module: Any, name: str, on: bool, capacity: int | None = None, load: int = 4
) -> MemoryState:
    """A word-overlap ``MemoryState`` made while ``module.name`` is ``on`` (restored
    after), its journal on and its relevance sublists of ``load`` records (many chunk
    bounds)."""
    saved = getattr(module, name)
    setattr(module, name, on)
    try:
        s = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
    finally:
        setattr(module, name, saved)
    s.journal = []
    s._by_relevance._reset(load)
    return s


# -- the C tables' iterators -----------------------------------------------------------


class TableIterators:
    """Rules of a state machine over a C table (``self.table``) against a dict
    (``self.model``): iterators opened (``self.iters``: iterator, items seen, whether the
    table changed since) and stepped; one whose table changed raises RuntimeError, one
    that ends has seen every item. The machine marks ``changed`` on each write."""

    table: Any
    model: dict[Any, Any]
    iters: list[tuple[Any, int, bool]]

    @rule(kind=st.sampled_from(["keys", "values", "items", "iter"]))
    def open_iterator(self, kind: str) -> None:
        it = iter(self.table) if kind == "iter" else getattr(self.table, kind)()
        self.iters.append((it, 0, False))

    @rule(steps=st.integers(1, 5))
    def step_iterators(self, steps: int) -> None:
        kept = []
        for it, seen, changed in self.iters:
            if changed:
                with pytest.raises(RuntimeError, match="changed during iteration"):
                    next(it)
                continue
            done = False
            for _ in range(steps):
                try:
                    next(it)
                    seen += 1
                except StopIteration:
                    assert seen == len(self.model)
                    done = True
                    break
            if not done:
                kept.append((it, seen, changed))
        self.iters = kept


# -- SIGKILL trials --------------------------------------------------------------------


def killed_round(
    path: str, seed: int, round_: int, env: dict[str, str], kill_after: int, pause: float
) -> list[tuple[int, str]]:
    """Run ``crash_child``'s storing child on ``path`` (round ``round_``: its entries'
    numbers start at ``round_ * 10**6``) with ``env``; SIGKILL it once ``kill_after``
    stores are acknowledged and ``pause`` seconds more passed. Returns every store it
    acknowledged (number, id); asserts the kill ended it and the file passes
    ``integrity_check``."""
    with tempfile.TemporaryFile("w+") as err:
        child = subprocess.Popen(
            [sys.executable, crash_child.__file__, "store", path, str(seed),
             str(round_ * 10**6), "4"],
            stdout=subprocess.PIPE, stderr=err, text=True, env=env,
        )  # fmt: skip
        assert child.stdout is not None
        got: list[tuple[int, str]] = []
        for line in child.stdout:
            got.extend(crash_child._parse(line))
            if len(got) >= kill_after:
                break
        time.sleep(pause)
        child.send_signal(signal.SIGKILL)
        got.extend(crash_child._parse(child.stdout.read()))
        child.stdout.close()
        code = child.wait()
        err.seek(0)
        assert code == -signal.SIGKILL, err.read()
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    return got


def read_back_as_acked(
    found: dict[Any, Any], seed: int, i: int, id: str
) -> tuple[Any, MemoryEntry]:
    """``(have, want)``: ``want`` the entry the child stored as number ``i``
    (acknowledged with ``id``), ``have`` its copy in ``found`` when that equals it field
    by field but for the access bookkeeping (count and last access), else None."""
    want = crash_child.make_entry(seed, i)
    assert str(want.id) == id
    have = found.get(want.id)
    if (
        have is None
        or attrs.evolve(have, access_count=want.access_count, last_accessed=want.last_accessed)
        != want
    ):
        return None, want
    return have, want


# -- the same operations with a knob on and off ----------------------------------------

_NOW = datetime(2026, 12, 6, tzinfo=UTC)


async def stores_and_retrieves(seed: int, ops: int, words: list[str]) -> list[Any]:
    """``ops`` stores (60%, texts of ``words``) and scored retrieves (queries of
    ``words`` and "zz", joined by each kind of whitespace; limits 1, 3 or 100, some with
    ``min_matched``) on an in-memory memory, drawn from ``seed``; each retrieve's (id,
    score) pairs."""
    rng = random.Random(seed)
    out: list[Any] = []
    async with open_memory(clock=lambda: _NOW) as memory:
        for _ in range(ops):
            if rng.random() < 0.6:
                chosen = rng.choices(words, k=rng.randint(0, 8))
                await memory.store(
                    MemoryEntry(
                        id=uuid.UUID(int=rng.getrandbits(128), version=4),
                        category=rng.choice(list(MemoryCategory)),
                        memory=" ".join(chosen) if chosen else "the",
                        tags=rng.sample(["infra", "Deploy"], rng.randint(0, 2)),
                        relevance=rng.choice([0.2, 0.5, 1.0]),
                    )
                )
            else:
                sep = rng.choice([" ", "\t", "  ", "\n "])
                query = sep.join(rng.choices(words + ["zz"], k=rng.randint(0, 12)))
                kwargs: dict[str, Any] = {}
                if rng.random() < 0.2:
                    kwargs["min_matched"] = rng.randint(1, 2)
                hits = await memory.retrieve_scored(query, rng.choice([1, 3, 100]), **kwargs)
                out.append([(h.entry.id, h.score) for h in hits])
    return out


def seeded_queries_agree(
    state: MemoryState,
    vocab: list[str],
    rng: random.Random,
    module: Any,
    names: tuple[str, ...],
    values: Any,
) -> None:
    """120 long queries (byte counts, the flat ranking) of every limit, threshold and
    filter on ``state``, each run twice with ``module``'s knobs ``names`` set to
    ``values(on)`` for on True and False (read per query): the same (score, seq) lists.
    The knobs are restored after."""
    saved = [getattr(module, k) for k in names]
    try:
        view = state.view()
        for q in range(120):
            words = rng.choices([*vocab, "zz", "same", "text", "w1 w2"], k=rng.randint(1, 40))
            query = " ".join(words)
            limit = rng.choice([1, 2, 3, 5, 10, 50, 1000])
            min_matched = rng.choice([0, 0, 0, 1, 2, 4])
            accept = (lambda rec: rec.seq % 3 != 1) if q % 4 == 0 else None
            query_agrees(state, view, query, limit, accept, min_matched, module, names, values)
    finally:
        for k, v in zip(names, saved, strict=True):
            setattr(module, k, v)


def query_agrees(
    state: MemoryState,
    view: Any,
    query: str,
    limit: int,
    accept: Any,
    min_matched: int,
    module: Any,
    names: tuple[str, ...],
    values: Any,
) -> None:
    """One query's steps on ``view`` drained with ``module``'s knobs ``names`` set to
    ``values(on)``, on True then False: the same (score, seq) lists. Leaves the knobs
    set (the caller restores them)."""
    from actormem._index.scoring import drain

    got = {}
    for on in (True, False):
        for k, v in zip(names, values(on), strict=True):
            setattr(module, k, v)
        steps = state.index.top_k_steps(view, query, limit, accept, min_matched=min_matched)
        got[on] = [(score, rec.seq) for score, rec in drain(steps)]
    assert got[True] == got[False], (query, limit, min_matched)
