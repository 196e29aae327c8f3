"""Review rev42b of branch crec42 (the compiled record, ``actormem._crecord``).

* A subclass of the compiled ``Record`` that puts another attribute in front of one of
  the int64 fields (a property, a slot of its own) has it set as Python sets it, as a
  subclass of :class:`PyRecord` has: before, ``Record``'s ``setattro`` wrote the C field
  whatever the subclass put there (a read-only property was written around, silently).
* The two record kinds give the same answers through the whole engine: one seeded run
  of stores, upserts, deletes, retrieves (access bookkeeping), consolidations and expiry
  over a small bounded memory, in memory and in a file reopened after it, in a
  subprocess per kind; the traces must be equal.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem._index.entrycols import new_entry_columns
from actormem._record import NEVER, Record, _crecord

compiled = pytest.mark.skipif(_crecord is None, reason="the compiled record is not built")
BASE = datetime(2025, 1, 1, tzinfo=UTC)
#: The compiled record as a base class mypy lets a test subclass freely.
_BASE: Any = Record


def _entry(text: str = "x", n: int = 1) -> MemoryEntry:
    return MemoryEntry(
        category=MemoryCategory.FACT, memory=text, id=uuid.UUID(int=n), created_at=BASE
    )


@compiled
def test_a_subclass_property_in_front_of_a_field_is_not_written_around() -> None:
    class Sub(_BASE):  # type: ignore[misc]
        __slots__ = ()

        @property
        def died(self) -> int:
            return 7

    sub = Sub(_entry(), 1, 1, new_entry_columns())
    with pytest.raises(AttributeError, match="no setter"):
        sub.died = 3  # type: ignore[misc]  # as a PyRecord subclass's property refuses it
    assert sub.died == 7
    assert Record.__dict__["died"].__get__(sub) == NEVER  # the field itself: untouched


@compiled
def test_a_subclass_slot_of_a_fields_name_takes_the_write() -> None:
    class Sub(_BASE):  # type: ignore[misc]
        __slots__ = ("seq",)

    sub = Sub(_entry(), 1, 2, new_entry_columns())
    sub.seq = "its own"  # the subclass's slot: any object
    assert sub.seq == "its own"
    assert Record.__dict__["seq"].__get__(sub) == 2  # the int64 field: untouched
    assert sub < Sub(_entry("y", 2), 1, 3, new_entry_columns())  # the order reads the field


@compiled
def test_a_plain_subclass_keeps_the_checked_fields() -> None:
    class Sub(_BASE):  # type: ignore[misc]
        pass

    sub = Sub(_entry(), 1, 1, new_entry_columns())
    with pytest.raises(TypeError):
        sub.born = "1"
    with pytest.raises(OverflowError):
        sub.slot = 2**63
    assert (sub.born, sub.slot) == (1, 0)
    sub.born = 5
    sub.extra = 1  # a subclass without __slots__ has a dict
    assert (sub.born, sub.extra) == (5, 1)


_RUN = r"""
import json, random, sys, uuid
from datetime import UTC, datetime, timedelta
import trio, trio.testing
from actormem import BM25Scorer, MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._record import Record

WORDS = "deploy blue the rust go file search glob cluster test fix error tool call".split()
seed, scorer_name, capacity, path = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
path = None if path == "-" else path
rng = random.Random(seed)
now = [datetime(2026, 1, 1, tzinfo=UTC)]
ids = [uuid.UUID(int=rng.getrandbits(128)) for _ in range(30)]
out = []

def entry():
    kw = dict(
        category=rng.choice(list(MemoryCategory)),
        memory=" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))),
        id=rng.choice(ids), created_at=now[0] - timedelta(seconds=rng.randint(0, 10**6)),
        relevance=rng.choice([1.0, 0.5, 0.01, 0.0]), validated=rng.random() < 0.2,
        namespace=rng.choice([(), ("a",)]), tags=tuple(rng.sample(["t1", "t2"], rng.randint(0, 2))),
    )
    if rng.random() < 0.15:
        kw["key"] = rng.choice(["k1", "k2"])
    if rng.random() < 0.05:
        kw["ttl"] = 1.0
    return MemoryEntry(**kw)

def listing(ents):
    return sorted((str(e.id), e.memory, e.relevance, e.validated, e.access_count) for e in ents)

async def main():
    scorer = BM25Scorer() if scorer_name == "bm25" else WordOverlapScorer()
    clock = lambda: now[0]
    async with open_memory(path=path, capacity=capacity, scorer=scorer, clock=clock) as m:
        for _ in range(120):
            now[0] += timedelta(seconds=rng.randint(0, 500))
            op = rng.random()
            if op < 0.45:
                out.append(("store", await m.store(entry())))
            elif op < 0.5:
                await m.store_many([entry() for _ in range(rng.randint(1, 6))])
            elif op < 0.6:
                out.append(("delete", await m.delete(rng.choice(ids))))
            elif op < 0.85:
                q = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
                hits = await m.retrieve_scored(q, limit=rng.randint(1, 5))
                await trio.testing.wait_all_tasks_blocked()  # the owner applied the accesses
                out.append([(str(h.entry.id), round(h.score, 9), h.entry.access_count)
                            for h in hits])
            elif op < 0.93:
                s = await m.consolidate()
                out.append(("consolidate", s.pruned, s.merged, s.evicted, s.entries_after))
            else:
                out.append(("sweep", await m.sweep_expired()))
            m._state._check()
        out.append(listing(await m.list_entries(limit=10**6)))
    if path is not None:
        async with open_memory(path=path, capacity=capacity, scorer=scorer, clock=clock) as m:
            out.append(listing(await m.list_entries(limit=10**6)))
            m._state._check()

trio.run(main)
print(Record.__name__)
print(json.dumps(out, default=str))
"""


@compiled
@pytest.mark.parametrize(
    ("seed", "scorer", "durable"), [(1, "word-overlap", False), (2, "bm25", True)]
)
def test_both_record_kinds_give_one_trace(
    tmp_path: Path, seed: int, scorer: str, durable: bool
) -> None:
    root = Path(__file__).resolve().parent.parent
    traces = []
    for kind, env in (("Record", {}), ("PyRecord", {"ACTORMEM_PY_RECORD": "1"})):
        path = str(tmp_path / f"{kind}.db") if durable else "-"
        done = subprocess.run(
            [sys.executable, "-c", _RUN, str(seed), scorer, "4", path],
            env=dict(os.environ, **env), cwd=root, capture_output=True, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        name, trace = done.stdout.splitlines()[-2:]
        assert name == kind
        traces.append(trace)
    assert traces[0] == traces[1]
