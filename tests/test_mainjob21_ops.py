"""Branch ``mainjob21``: the main job's work outside the retrieve's scoring, each knob
against the path before it (off): the same entries, lines, times, errors and state.

* ``state._ENTRY_WALK``: ``View.entry`` walks the access chain once in its own frame;
* ``memory._CLOCK_FAST``: a retrieve's access note takes a UTC ``datetime`` from the
  clock without ``_now``'s checks (other readings still get them);
* ``memory._CHECK_DURABLE_ONLY``: ``store`` checks ``access_count`` only when durable;
* ``memory._TIME_SCAN``: the owner's batch asks ``_needs_time`` in a loop of its own;
* ``memory._PLAIN_RETRIEVE``: a retrieve with no filter or threshold skips their checks;
* ``_hooks._BLOCK_MEMO``: ``memory_block`` reads the line memo itself;
* ``_toolcalls._CALLS_BY_SLOTS`` (mainjob19's, which took the place of this branch's own
  ``_SLOT_CALLS`` at the merge) and ``_ENCODE_PARSED_ONCE``: a tool call built by its
  slots' setters, its input encoded once.
"""

from __future__ import annotations

import contextlib
import json
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from trio.testing import wait_all_tasks_blocked

import actormem._engine.memory as memory_mod
import actormem._engine.state as state_mod
import actormem.agent._hooks as hooks_mod
import actormem.agent._toolcalls as toolcalls_mod
from actormem import InvalidEntryError, InvalidQueryError, MemoryCategory, MemoryEntry, open_memory
from actormem._index.wordoverlap import WordOverlapScorer
from actormem._storage.jsonl import JsonlError
from actormem.agent import MemoryHooks

from .strategies import examples
from .test_store_batch import _snapshot

KNOBS = [
    (state_mod, "_ENTRY_WALK"),
    (memory_mod, "_CLOCK_FAST"),
    (memory_mod, "_CHECK_DURABLE_ONLY"),
    (memory_mod, "_TIME_SCAN"),
    (memory_mod, "_PLAIN_RETRIEVE"),
    (hooks_mod, "_BLOCK_MEMO"),
    (toolcalls_mod, "_CALLS_BY_SLOTS"),
    (toolcalls_mod, "_ENCODE_PARSED_ONCE"),
]
WORDS = ["deploy", "blue", "rust", "the", "logs", "cluster", "é", "x.y", "Relevant", "memory"]
T0 = datetime(2026, 1, 1, tzinfo=UTC)
PLUS2 = timezone(timedelta(hours=2))


@contextlib.contextmanager
def _knobs(on: bool) -> Iterator[None]:
    before = [getattr(mod, name) for mod, name in KNOBS]
    try:
        for mod, name in KNOBS:
            setattr(mod, name, on)
        yield
    finally:
        for (mod, name), value in zip(KNOBS, before, strict=True):
            setattr(mod, name, value)


class _Clock:
    """A clock in UTC or in UTC+2 (the same instants) that moves only when told (so
    that the readings do not depend on how many the owner took)."""

    def __init__(self, zone: timezone) -> None:
        self.now = T0
        self.zone = zone

    def __call__(self) -> datetime:
        return self.now.astimezone(self.zone)


def _entries_of_views(memory: Any, views: list[Any]) -> list[Any]:
    out = []
    for view in views:
        recs = sorted(memory._state._by_id.values(), key=lambda r: r.seq)
        for rec in recs:
            # Every record version of the id the view may see (older ones by _prev).
            while rec is not None:
                e = view.entry(rec)
                out.append((view.version, rec.seq, e, e is rec.entry))
                rec = memory._state._prev.get(rec)
    return out


async def _workload(seed: int, zone: timezone) -> dict[str, Any]:
    rng = random.Random(seed)
    got: dict[str, Any] = {"retrieves": [], "blocks": []}
    clock = _Clock(zone)
    async with open_memory(scorer=WordOverlapScorer(), clock=clock) as memory:
        hooks = MemoryHooks(memory, top_k=3)
        views = []
        ids = [uuid.UUID(int=i + 1) for i in range(8)]
        for step in range(rng.randint(5, 40)):
            words = rng.choices(WORDS, k=rng.randint(1, 5))
            text = " ".join(words)
            if rng.random() < 0.2:
                text = "relevant memory: " + text + "\nsecond \\ line"
            ttl = rng.choice([None, None, None, 3600.0])
            entry = MemoryEntry(
                category=MemoryCategory.TRAJECTORY,
                memory=text,
                id=rng.choice([None, *ids]) or uuid.UUID(int=1000 + step),
                ttl=ttl,
                created_at=T0 + timedelta(seconds=step),
            )
            clock.now += timedelta(seconds=1)
            await memory.store(entry)
            if rng.random() < 0.3:
                await memory.store_many(
                    [
                        MemoryEntry(
                            category=MemoryCategory.FACT,
                            memory=" ".join(rng.choices(WORDS, k=3)),
                            id=uuid.UUID(int=5000 + step * 4 + k),
                            ttl=rng.choice([None, 60.0]),
                            created_at=T0,
                        )
                        for k in range(rng.randint(1, 3))
                    ]
                )
            query = " ".join(rng.choices(WORDS, k=2))
            hits = await memory.retrieve(query, 3, refresh_ttl=rng.random() < 0.3)
            got["retrieves"].append(hits)
            await wait_all_tasks_blocked()  # the owner applies the access notes: one batch
            got["blocks"].append(await hooks.before_turn(query))
            await wait_all_tasks_blocked()
            if rng.random() < 0.3:
                views.append(memory._state.view())
                # Read now: the owner trims access chains no registered snapshot needs.
                got["retrieves"].append(_entries_of_views(memory, views))
        await memory.sweep_expired()
        views.append(memory._state.view())
        got["views"] = _entries_of_views(memory, views)
        got["state"] = _snapshot(memory._state)
        got["pending"] = dict(memory._pending_access)
        got["access"] = {
            k: None if r.access is None else (r.access.count, r.access.last, r.access.expires)
            for k, r in memory._state._by_id.items()
        }
    return got


@pytest.mark.parametrize("zone", [UTC, PLUS2], ids=["utc", "plus2"])
@settings(max_examples=examples(6), deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_workload_same_with_knobs_off(zone: timezone, seed: int) -> None:
    """Stores (ttls, upserts, lists), retrieves (refreshing ttls), memory blocks, views
    of older versions: the same with every knob on as off."""
    results = {}
    for on in (True, False):
        with _knobs(on):
            results[on] = trio.run(_workload, seed, zone)
    assert results[True] == results[False]
    # The workload reached the paths the knobs change (not all entries as stored).
    assert any(not same for *_, same in results[True]["views"]) or not results[True]["access"]


def test_view_entry_walks_to_the_visible_access() -> None:
    """A view older than an access sees the entry as stored; newer ones the counts."""

    async def run() -> list[Any]:
        async with open_memory(scorer=WordOverlapScorer(), clock=_Clock(UTC)) as memory:
            await memory.store(MemoryEntry(category=MemoryCategory.FACT, memory="blue rust"))
            before = memory._state.view()
            seen = []
            rec = next(r for r in memory._state._by_id.values() if r.entry.memory == "blue rust")
            for _ in range(3):
                await memory.retrieve("blue", 1)
                await wait_all_tasks_blocked()
                await memory.store(MemoryEntry(category=MemoryCategory.FACT, memory="x"))
                # Each view read at once (the owner trims the chain of unregistered ones).
                seen.append(memory._state.view().entry(rec))
            return [before.entry(rec), *seen]

    for on in (True, False):
        with _knobs(on):
            first, *later = trio.run(run)
            assert first.access_count == 0
            assert first.last_accessed is None
            assert [e.access_count for e in later] == [1, 2, 3]


@pytest.mark.parametrize("reading", [datetime(2026, 1, 1), "noon", None])
def test_bad_clock_still_refused(reading: Any) -> None:
    """A clock reading that is not a timezone-aware datetime: the retrieve's TypeError,
    knob on or off."""

    async def run() -> None:
        async with open_memory(scorer=WordOverlapScorer()) as memory:
            await memory.store(MemoryEntry(category=MemoryCategory.FACT, memory="blue"))
            memory._state.clock = lambda: reading
            with pytest.raises(TypeError, match="timezone-aware"):
                await memory.retrieve("blue", 1)

    for on in (True, False):
        with _knobs(on):
            trio.run(run)


def test_durable_store_checks_access_count(tmp_path: Path) -> None:
    """Durable: an access_count over 64 bits is refused; in memory it is stored."""
    big = MemoryEntry(category=MemoryCategory.FACT, memory="blue", access_count=2**63)

    async def run(path: str | None) -> None:
        async with open_memory(path=path, scorer=WordOverlapScorer()) as memory:
            if path is None:
                await memory.store(big)
                assert len(memory) == 1
            else:
                with pytest.raises(InvalidEntryError):
                    await memory.store(big)
                assert len(memory) == 0

    for on in (True, False):
        with _knobs(on):
            trio.run(run, None)
            trio.run(run, str(tmp_path / f"m{on}.db"))


class _Str(str):
    """A str subclass (memory_line keeps no line for it)."""


@settings(max_examples=examples(30), deadline=None)
@given(
    texts=st.lists(
        st.one_of(
            st.sampled_from(["", "tool=a; x", "Relevant memory: hi", " relevant  memory", "a\nb"]),
            st.text(alphabet="rR elvantmoy\\\n\u2028\u200bé", max_size=30),
        ),
        max_size=6,
    ),
    subclass=st.booleans(),
)
def test_memory_block_same(texts: list[str], subclass: bool) -> None:
    """memory_block: the same message with the memo read in its frame or not, on texts
    met before (memo hits), new, empty, header-like, and str subclasses."""
    given_texts: list[str] = [_Str(t) if subclass else t for t in texts]
    got = {}
    for on in (True, False, True):
        with _knobs(on):
            got[on] = (hooks_mod.memory_block(given_texts), hooks_mod.memory_block(given_texts))
    assert got[True] == got[False]
    lines = got[True][0]
    assert lines is None or lines.splitlines()[0] == hooks_mod.MEMORY_HEADER
    assert lines is None or len(lines.splitlines()) == 1 + sum(1 for t in texts if t)


def test_tool_calls_same(tmp_path: Path) -> None:
    """read_tool_calls: the same calls, texts (None for a text too long for an entry)
    and errors with the slots' setters as with the constructor."""
    good = [
        {"source": "s", "episode": "e", "step": 0, "tool": "read", "input": {"b": 1, "a": "é"},
         "result": "ok", "reward": 1},
        {"source": "s", "episode": "e", "step": 1, "tool": "t", "input": [1, 2],
         "result": "x" * 2000},
        {"source": "s", "episode": "f", "step": 2, "tool": "t\ud800", "input": None,
         "result": "y", "reward": 0.5},
    ]  # fmt: skip
    path = tmp_path / "calls.jsonl"
    path.write_text("\n".join(json.dumps(v) for v in good) + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**good[0], "input": float("nan")}) + "\n")
    got = {}
    for on in (True, False):
        with _knobs(on):
            calls, digest = toolcalls_mod.read_tool_calls(path)
            with pytest.raises(JsonlError) as err:
                toolcalls_mod.read_tool_calls(bad)
            got[on] = (
                calls,
                [c.text for c in calls],
                [type(c) for c in calls],
                digest,
                str(err.value),
            )
    assert got[True] == got[False]
    assert got[True][1][0] == 'tool=read; input={"a":"é","b":1}; result=ok'
    assert got[True][1][2] is None  # a lone surrogate: no entry takes the text


BAD_ARGS: list[tuple[dict[str, Any], type[Exception]]] = [
    ({"min_matched": -1}, InvalidQueryError),
    ({"min_matched": False}, TypeError),
    ({"min_matched": 0.0}, TypeError),
    ({"min_score": float("nan")}, InvalidQueryError),
    ({"min_score": "1"}, TypeError),
    ({"namespace": [""]}, InvalidQueryError),
    ({"category": []}, InvalidQueryError),
    ({"created_after": datetime(2026, 1, 1)}, InvalidQueryError),
    ({"where": {"$bad": 1}}, InvalidQueryError),
]
GOOD_ARGS: list[dict[str, Any]] = [
    {},
    {"min_matched": 0},
    {"min_matched": 1},
    {"min_score": 0.7},
    {"namespace": ("a",)},
    {"namespace": ()},
    {"category": MemoryCategory.FACT},
    {"tags": []},
    {"created_after": T0, "created_before": T0 + timedelta(seconds=3)},
]


def test_retrieve_arguments_same() -> None:
    """Filters and thresholds: the same hits and the same errors with the plain
    retrieve's shortcut as without it."""

    async def run() -> list[Any]:
        out: list[Any] = []
        async with open_memory(scorer=WordOverlapScorer(), clock=_Clock(UTC)) as memory:
            for i, text in enumerate(["blue rust", "blue logs", "the cluster", "rust"]):
                await memory.store(
                    MemoryEntry(
                        category=[MemoryCategory.FACT, MemoryCategory.TRAJECTORY][i % 2],
                        memory=text,
                        namespace=("a",) if i % 2 else (),
                        created_at=T0 + timedelta(seconds=i),
                        id=uuid.UUID(int=i + 1),
                    )
                )
            for kwargs in GOOD_ARGS:
                hits = await memory.retrieve_scored("blue rust", 4, **kwargs)
                out.append([(h.score, h.entry.memory) for h in hits])
            for kwargs, error in BAD_ARGS:
                with pytest.raises(error) as err:
                    await memory.retrieve("blue", 3, **kwargs)
                out.append(str(err.value))
        return out

    got = {}
    for on in (True, False):
        with _knobs(on):
            got[on] = trio.run(run)
    assert got[True] == got[False]
    assert got[True][0] != got[True][2]  # min_matched=1 left the non-matching ones out
