"""Determinism of replication (no server needed): the same log applied to fresh states,
in any batching, with or without a restart from a snapshot, gives states equal field
for field, eviction, pruning, merging, access bookkeeping, keys, time-to-live expiry and
its refreshes included."""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import WordOverlapScorer
from actormem._engine.replica import (
    apply_ops,
    decode_batch,
    decode_snapshot,
    encode_batch,
    encode_snapshot,
)
from actormem._engine.state import MemoryState
from actormem._storage.jsonl import entry_to_json
from actormem._storage.log import LogContentError
from tests.strategies import entries, examples, namespaces, times

IDS = [uuid.UUID(int=i, version=4) for i in range(1, 9)]


@st.composite
def logged_entries(draw: st.DrawFn) -> dict[str, Any]:
    """An entry as a log holds it: some with a key (an upsert by key takes the stored
    entry's id) and some with a time to live (counted from the record's time)."""
    e = draw(entries(id=draw(st.sampled_from(IDS))))
    e = attrs.evolve(
        e,
        key=draw(st.sampled_from([None, None, "k1", "k2"])),
        ttl=draw(st.sampled_from([None, None, 60.0, 86400.0])),
    )
    return entry_to_json(e)


@st.composite
def operations(draw: st.DrawFn) -> list[Any]:
    kind = draw(st.sampled_from("sssmdkcaxr"))
    if kind == "s":
        return ["s", draw(logged_entries())]
    if kind == "m":
        return ["m", draw(st.lists(logged_entries(), max_size=3))]
    if kind == "d":
        return ["d", str(draw(st.sampled_from(IDS)))]
    if kind == "k":
        return ["k", list(draw(namespaces)), draw(st.sampled_from(["k1", "k2"]))]
    if kind == "c":
        return ["c"]
    if kind == "x":
        return ["x"]
    if kind == "r":
        reads = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
        return ["r", [[str(i), draw(times).isoformat()] for i in reads]]
    hits = draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True))
    return [
        "a",
        [[str(i), draw(st.integers(1, 3)), draw(times).isoformat()] for i in hits],
    ]


#: A log: records of 1-4 operations, each with the appender's time.
logs = st.lists(st.tuples(st.lists(operations(), min_size=1, max_size=4), times), max_size=25)


def fresh(capacity: int | None) -> MemoryState:
    state = MemoryState(capacity=capacity, half_life=3600.0, scorer=WordOverlapScorer())
    state.journal = []  # as a node with a checkpoint file keeps it
    return state


def apply_record(state: MemoryState, ops: list[Any], now: datetime) -> list[Any]:
    """One record through its payload, as a node applies it."""
    decoded = decode_batch("log", 1, encode_batch(ops))
    return apply_ops(state, decoded, now, state.published)


def fields(state: MemoryState) -> Any:
    return json.loads(encode_snapshot(state, 0))


@settings(max_examples=examples(75), deadline=None)
@given(
    log=logs,
    capacity=st.sampled_from([None, 2, 4]),
    cuts=st.lists(st.integers(0, 25), max_size=6),
    restart_at=st.integers(0, 25) | st.none(),
)
def test_same_log_any_batching_same_state(
    log: list[tuple[list[Any], datetime]],
    capacity: int | None,
    cuts: list[int],
    restart_at: int | None,
) -> None:
    # Node A applies and publishes one record at a time.
    a = fresh(capacity)
    results_a = []
    for ops, now in log:
        results_a.append(apply_record(a, ops, now))
        a.take_journal()
        a.publish()
        a.vacuum(a.published)
    # Node B publishes groups of records (cut anywhere), keeps an old view alive across
    # groups, and may restart from a snapshot in the middle.
    b = fresh(capacity)
    held = b.view()
    results_b = []
    for i, (ops, now) in enumerate(log):
        if i == restart_at:
            b.publish()
            b, _ = decode_snapshot("log", encode_snapshot(b, i), lambda: fresh(capacity))
            held = b.view()
        results_b.append(apply_record(b, ops, now))
        if i in cuts:
            b.take_journal()
            b.publish()
            b.vacuum(held.version)
            held = b.view()
    b.publish()
    b.vacuum(b.published)
    a._check()
    b._check()
    assert fields(a) == fields(b)  # includes the evictions a consolidation will report
    # What each operation answered (delete found it, consolidation counts) agrees too.
    assert results_a == results_b


def test_malformed_or_newer_payloads_are_refused() -> None:
    with pytest.raises(LogContentError, match="newer actormem"):
        decode_batch("log", 3, b'{"v": 2, "ops": []}')
    for bad in (b"not json", b"[]", b'{"v": 1}', b'{"v": 1, "ops": 3}'):
        with pytest.raises(LogContentError, match="record 3"):
            decode_batch("log", 3, bad)
    with pytest.raises(LogContentError, match="newer"):
        decode_snapshot("log", b'{"v": 5}', lambda: fresh(None))
    with pytest.raises(ValueError, match="unknown operation"):
        apply_ops(fresh(None), [["?"]], datetime.now().astimezone(), 0)
