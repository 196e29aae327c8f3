"""Set-ups several test files share (as ``tests/strategies.py`` holds shared strategies):
a state made with one knob set, the C tables' iterator rules, one round of a SIGKILL
trial, and the drivers that run the same operations with a knob on and off. Each was
written out in two or three files before branch tidy24b (the knob tables, the open's
warnings, the BM25 core's drivers: before branch tidy25)."""

from __future__ import annotations

import itertools
import logging
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio
from hypothesis import strategies as st
from hypothesis.stateful import rule

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._engine.state import MemoryState
from actormem._index import persist

from . import crash_child

_T = TypeVar("_T")


def fact(text: str) -> MemoryEntry:
    """A new FACT entry of ``text``."""
    return MemoryEntry.new(MemoryCategory.FACT, text)


@contextmanager
def knobs_set(module: Any, **values: Any) -> Iterator[None]:
    """``module``'s attributes (its knobs) set to ``values`` for the ``with`` block, and
    put back as they were after it."""
    saved = {name: getattr(module, name) for name in values}
    for name, value in values.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def stepped(gen: Generator[None, None, _T], steps: int) -> Generator[None, None, _T]:
    """``gen`` (a sliced computation such as ``top_k_steps``) run ``steps`` steps now, or
    to its end if sooner: what finishes it (``drain`` of it returns ``gen``'s value)."""
    for _ in range(steps):
        try:
            next(gen)
        except StopIteration as stop:
            return _returning(stop.value)
    return gen


def _returning(value: _T) -> Generator[None, None, _T]:
    """A sliced computation already at its end: it returns ``value`` at once."""
    return value
    yield  # a generator, never reached


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


def key_value(key: Any) -> Any:
    """A relevance key by value, comparable across states: an int as it is, a record
    (a relevance-1.0 record is its own key, ``state._REC_KEYS``) as ``("rec", seq)``."""
    return key if isinstance(key, int) else ("rec", key.seq)


def relevance_keys(order: Any) -> tuple[list[list[Any]], list[Any]]:
    """The relevance order's key lists and maxima by value (:func:`key_value`)."""
    return (
        [[key_value(k) for k in sub] for sub in order._keys],
        [key_value(k) for k in order._maxes],
    )


# -- the C tables' iterators -----------------------------------------------------------


class TableIterators:
    """Rules of a state machine over a C table (``self.table``) against a dict
    (``self.model``): iterators opened (``self.iters``: iterator, items seen, whether the
    table changed since) and stepped; one whose table changed raises RuntimeError, one
    that ends has seen every item. The machine marks ``changed`` on each write."""

    table: Any
    model: dict[Any, Any]
    iters: list[tuple[Any, int, bool]]

    def _changed(self) -> None:
        """A key came or went: every open iterator must raise from now on."""
        self.iters = [(it, seen, True) for it, seen, _ in self.iters]

    @rule(n=st.integers(0, 300))
    def reserve(self, n: int) -> None:
        """Room for ``n`` keys: none comes or goes; when the table grows, its slots move
        (an open iterator must raise)."""
        size = self.table.__sizeof__()
        self.table.reserve(n)
        if self.table.__sizeof__() != size:
            self._changed()

    def _walked(self) -> list[tuple[Any, Any]]:
        """Whole iterations while nothing changes: ``iter``, ``keys``, ``values`` and
        ``items`` each give every key of the model once, in one order; the items."""
        keys = list(self.table)
        assert sorted(keys) == sorted(self.model)
        assert len(keys) == len(set(keys)) == len(self.table)
        assert list(self.table.keys()) == keys
        vals = list(self.table.values())
        items = list(self.table.items())
        assert [k for k, _ in items] == keys
        assert all(a is b for (_, a), b in zip(items, vals, strict=True))
        return items

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
    by field but for the access bookkeeping (count and last access), else None
    (:func:`crash_child.as_acked`)."""
    return crash_child.as_acked(found, seed, i, id, access=False)


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


def each_setting(module: Any, names: tuple[str, ...], check: Callable[[Any], None]) -> None:
    """``check(on)`` with ``module``'s knobs ``names`` set to each on/off combination
    ``on`` in turn (all on first, all off last); the knobs restored after."""
    saved = [getattr(module, k) for k in names]
    try:
        for on in itertools.product((True, False), repeat=len(names)):
            for k, v in zip(names, on, strict=True):
                setattr(module, k, v)
            check(on)
    finally:
        for k, v in zip(names, saved, strict=True):
            setattr(module, k, v)


# -- knob tables of the open's restore -------------------------------------------------

ENCODER = persist._encoder


def no_encoder() -> bool:
    """``persist._encoder`` of a build without the core: no encoder."""
    return False


def set_knobs(mp: pytest.MonkeyPatch, knobs: tuple[tuple[Any, str], ...], on: Any) -> None:
    """Each knob ``(module, name)`` of ``knobs`` set through ``mp`` to its value in
    ``on``; ``persist._encoder`` is not a bool: on, the core's encoder, off,
    :func:`no_encoder` (the digest's bytes as a build without the core makes them)."""
    for (mod, name), value in zip(knobs, on, strict=True):
        if mod is persist and name == "_encoder":
            mp.setattr(mod, name, ENCODER if value else no_encoder)
        else:
            mp.setattr(mod, name, value)


#: The Hypothesis cases of :func:`restores_as_rebuilt`: the messy state's seed, size and
#: operations, and whether texts repeat.
RESTORE_CASES = {
    "seed": st.integers(0, 2**32),
    "n": st.integers(1, 80),
    "ops": st.integers(0, 40),
    "dups": st.booleans(),
}


def messy_repeats(
    seed: int, n: int, ops: int, dups: bool, copies: bool = False
) -> tuple[MemoryState, list[tuple[int, MemoryEntry]]]:
    """A messy word-overlap state (``test_index_image._messy(seed, n, ops)``) and its
    file's rows; with ``dups``, about 40% of the rows given an earlier row's text (groups
    of several records; a new str object each with ``copies``) and the state reloaded."""
    from actormem import WordOverlapScorer

    from .test_index_image import _file_rows, _loaded, _messy

    state = _messy(WordOverlapScorer, seed, n, ops)
    rows = _file_rows(state)
    if dups and len(rows) > 2:  # texts that repeat: groups of several records
        rng = random.Random(seed)
        rows = [
            (s, attrs.evolve(e, memory=_text_of(rows[rng.randrange(len(rows))][1], copies)))
            if rng.random() < 0.4
            else (s, e)
            for s, e in rows
        ]
        state = _loaded(WordOverlapScorer, rows, None)
        rows = _file_rows(state)
    return state, rows


def restores_as_rebuilt(
    seed: int,
    n: int,
    ops: int,
    dups: bool,
    knobs: tuple[tuple[Any, str], ...],
    check: Callable[[Any, Any, pytest.MonkeyPatch, Any], None],
    copies: bool = False,
) -> None:
    """The state of :func:`messy_repeats`, restored from its image with each on/off
    combination of ``knobs`` (the digest's thread at any size): the same state as a
    rebuild, then ``check(restored, rebuilt, mp, on)``; no thread left after."""
    from actormem import WordOverlapScorer

    from .test_index_image import _image, _loaded
    from .test_open_beside import _no_threads_left
    from .test_open_fast import _assert_same

    state, rows = messy_repeats(seed, n, ops, dups, copies)
    if not rows:
        return
    parts = _image(state)
    rebuilt = _loaded(WordOverlapScorer, rows, None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)  # the digest's thread for any size
        for on in itertools.product((True, False), repeat=len(knobs)):
            set_knobs(mp, knobs, on)
            restored = _loaded(WordOverlapScorer, rows, parts)
            _assert_same(restored, rebuilt)
            check(restored, rebuilt, mp, on)
    _no_threads_left()


def image_errors(
    parts: Any, bad: list[Any], records: list[Any], knobs: tuple[tuple[Any, str], ...]
) -> set[str]:
    """The messages of the ImageError that restoring image ``parts`` over the records
    ``bad`` raises with each on/off combination of ``knobs`` (the digest's thread at
    any size); each time, the records ``records`` (the image's own) still restore."""
    from actormem import WordOverlapScorer
    from actormem._index.images import ImageError, restore_index

    errors = set()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(persist, "_LATE_MIN_TEXTS", 0)
        for on in itertools.product((True, False), repeat=len(knobs)):
            set_knobs(mp, knobs, on)
            with pytest.raises(ImageError) as info:
                restore_index(WordOverlapScorer().make_index(), parts, bad)
            errors.add(str(info.value))
            restore_index(WordOverlapScorer().make_index(), parts, records)  # the fresh one
    return errors


def stale_and_foreign_refused_alike(knobs: tuple[tuple[Any, str], ...]) -> None:
    """A messy word-overlap state's image restored over stale records (every text
    changed: another digest) and foreign ones (two records' texts made equal: another
    group count) gives one and the same ``ImageError`` message with each on/off
    combination of ``knobs``; no thread left after (``test_open20_gids``,
    ``test_open27_vocab``)."""
    from actormem._record import Record

    from .test_index_image import _file_rows, _image, _live, _loaded, _messy
    from .test_open_beside import _no_threads_left

    state = _messy(WordOverlapScorer, 5, 70, 25)
    rows = _file_rows(state)
    parts = _image(state)
    records = _live(_loaded(WordOverlapScorer, rows, None))
    stale = [
        Record(attrs.evolve(r.entry, memory=r.entry.memory + "\u00e9"), r.seq, r.seq)
        for r in records
    ]
    merged = [
        Record(attrs.evolve(r.entry, memory=records[0].entry.memory), r.seq, r.seq) if i == 1 else r
        for i, r in enumerate(records)
    ]
    for bad in (stale, merged):
        errors = image_errors(parts, bad, records, knobs)
        assert len(errors) == 1, errors
    _no_threads_left()


def _text_of(entry: MemoryEntry, copy: bool) -> str:
    """``entry``'s text, or with ``copy`` an equal new str (its hash not cached)."""
    return "".join(list(entry.memory)) if copy else entry.memory


# -- a durable file changed behind actormem's back, opened with its warnings -----------


def change_file(db: Path, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Run one SQL ``statement`` on the file ``db`` outside actormem, committed."""
    conn = sqlite3.connect(db)
    try:
        conn.execute(statement, params)
        conn.commit()
    finally:
        conn.close()


def change_first_text(db: Path) -> None:
    """The first row's text changed (" changed" appended), the image's marker kept: a
    stale image."""
    change_file(
        db,
        "UPDATE entries SET memory = memory || ' changed'"
        " WHERE seq = (SELECT MIN(seq) FROM entries)",
    )


async def state_of(path: Path) -> tuple[MemoryState, bool]:
    """The state of a word-overlap memory opened on the file ``path`` (closed after)
    and whether its index came from the file's image (``image_fresh``)."""
    async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
        assert memory._storage is not None
        return memory._state, memory._storage.image_fresh


def refused_alike(db: Path, pristine: bytes, set_on: Callable[[bool], None]) -> str:
    """The file ``pristine`` (written to ``db`` before each open) opened with a knob on
    and off (``set_on``): refused with one and the same ``StorageError``; its text."""
    from actormem import StorageError

    errors = set()
    for on in (True, False):
        set_on(on)
        db.write_bytes(pristine)

        async def opened() -> None:
            async with open_memory(path=db, scorer=WordOverlapScorer()):
                pass

        with pytest.raises(StorageError) as info:
            trio.run(opened)
        errors.add(str(info.value))
    assert len(errors) == 1, errors
    return errors.pop()


def stale_opens_alike(
    db: Path,
    pristine: bytes,
    caplog: pytest.LogCaptureFixture,
    set_on: Callable[[bool], None],
    stale: Callable[[Path], None],
) -> None:
    """For on True and False: ``set_on(on)``, the file ``db`` back to ``pristine``,
    changed by ``stale(db)`` behind actormem's back, then opened (:func:`state_of`):
    the image is not used, the warnings are the same both ways (one about the digest
    among them), and so is the state; no thread is left."""
    from .test_open_beside import _no_threads_left
    from .test_open_fast import _assert_same

    warned = []
    states = []
    for on in (True, False):
        set_on(on)
        db.write_bytes(pristine)
        stale(db)
        (state, fresh), messages = with_warnings(caplog, trio.run, state_of, db)
        assert not fresh
        warned.append(messages)
        states.append(state)
    assert warned[0] == warned[1]
    assert any("digest" in w for w in warned[0])
    _assert_same(states[0], states[1])
    _no_threads_left()


def with_warnings(caplog: pytest.LogCaptureFixture, call: Callable[..., Any], *args: Any) -> Any:
    """``(call(*args), messages)``: the call's result and the warnings actormem logged
    during it (``caplog`` cleared first)."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="actormem"):
        got = call(*args)
    return got, [r.getMessage() for r in caplog.records]


# -- the BM25 core's drivers -------------------------------------------------------------


def theta_at_rank(exact: dict[int, float], rank: int, theta: float) -> float:
    """The ``rank``-th best positive score of ``exact`` (a group exactly at it), or
    ``theta`` for rank 0 or fewer scores."""
    if not rank:
        return theta
    scores = sorted((s for s in exact.values() if s > 0), reverse=True)
    return scores[rank - 1] if rank <= len(scores) else theta


def bad_more_refused(daat: Any, lengths: Any, parts: Any) -> None:
    """``bm25_daat`` with ``more`` flags outside 0-32767 raises ValueError (the C code's
    own check) and moves no cursor (32 and 64 are bm25q8's flags, 256 and 512 bm25q9's,
    1024 bm25q10's, 2048 bm25q12's, 4096 and 8192 bm25q13's, 16384 bm25q14's)."""
    from actormem._index import _cbm25

    cursors = daat._cursors.copy()
    for more in (-1, 32768, 1 << 20):
        with pytest.raises(ValueError, match="more"):
            _cbm25.bm25_daat(  # type: ignore[call-arg]
                daat._terms, daat._cursors, lengths, *parts, 0.0, 100, -1, daat._nums,
                daat._scores, daat._sticky, None, daat._prefetch, 1.0, None, more,
            )  # fmt: skip
    assert daat._cursors.tolist() == cursors.tolist()  # nothing moved


# -- a state holding given texts -------------------------------------------------------


def stored_texts(state: Any, texts: list[str]) -> Any:
    """``state`` (a ``MemoryState``) with ``texts`` stored as facts, ids 1, 2, ... in
    order, every fourth tagged ``"tag x"``, then published; returns ``state``."""
    import uuid

    from actormem import MemoryCategory, MemoryEntry

    from .test_store_batch import BASE

    for i, text in enumerate(texts):
        state.store(
            MemoryEntry(
                category=MemoryCategory.FACT,
                memory=text,
                id=uuid.UUID(int=i + 1),
                created_at=BASE,
                tags=("tag x",) if i % 4 == 0 else (),
            )
        )
    state.publish()
    return state


def count_checkpoints_beside(store: Any) -> tuple[list[int], list[trio.Event]]:
    """Wrap ``store.checkpoint_beside`` (a durable memory's ``SqliteStore``): returns
    ``(started, ended)``, the commit count at which each checkpoint beside started, and
    an event set on the loop when each has run (await ``ended[-1]`` before the next
    commit for a deterministic count). Call from inside the memory's trio run."""
    started: list[int] = []
    ended: list[trio.Event] = []
    beside = store.checkpoint_beside
    token = trio.lowlevel.current_trio_token()

    def counted() -> Any:
        started.append(store.commits)
        run = beside()
        event = trio.Event()
        ended.append(event)

        def run_and_tell() -> None:
            try:
                run()
            finally:
                token.run_sync_soon(event.set)

        return run_and_tell

    store.checkpoint_beside = counted
    return started, ended
