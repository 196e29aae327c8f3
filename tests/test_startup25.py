"""startup25: the main job's process outside its run, part 5.

* ``_swarm._PRESENT_BY_IDS``: ``View.visible_ids()`` is the set of the visible records'
  ids that ``View.records()`` gives, at the newest version and at older versions held
  by snapshots (records upserted, deleted and evicted since), and the whole accounting
  is the same with the knob on and off.
"""

from __future__ import annotations

import random
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import MemoryCategory, MemoryEntry, open_memory
from actormem.cli import _swarm
from actormem.cli._swarm import Removals, check_accounting

from .strategies import examples


def _accounting(memory: Any, knob: bool, **kwargs: Any) -> Any:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_swarm, "_PRESENT_BY_IDS", knob)
        return check_accounting(memory, **kwargs).to_json()


@settings(max_examples=examples(25), deadline=None)
@given(seed=st.integers(0, 2**32 - 1), capacity=st.sampled_from([None, 4, 10]))
def test_visible_ids_are_the_records_ids(seed: int, capacity: int | None) -> None:
    rng = random.Random(seed)
    words = ["alpha", "beta", "gamma", "delta", "eps"]

    async def main() -> None:
        removals = Removals()
        async with open_memory(capacity=capacity, on_remove=removals) as memory:
            removals.start_run()
            before = memory.statistics()
            stored: list[Any] = []
            held: list[Any] = []
            for _ in range(rng.randrange(5, 50)):
                roll = rng.random()
                if roll < 0.5 or not stored:
                    entry = MemoryEntry.new(MemoryCategory.FACT, " ".join(rng.choices(words, k=3)))
                    if stored and rng.random() < 0.3:  # an upsert: a newer version
                        entry = attrs.evolve(entry, id=rng.choice(stored))
                    await memory.store(entry)
                    stored.append(entry.id)
                elif roll < 0.75:
                    await memory.retrieve(rng.choice(words), 3)
                else:
                    await memory.delete(rng.choice(stored))
                if rng.random() < 0.15:
                    held.append(memory.snapshot())  # an older version kept visible
            held.append(memory.snapshot())
            checked = 0
            for snap in held:
                view = snap._view
                ids = view.visible_ids()
                assert ids == {rec.entry._id for rec in view.records()}
                assert ids == {e._id for e in snap}
                checked += len(ids)
            assert checked > 0
            on = _accounting(memory, True, initial=[], stored=stored, removals=removals, before=before)
            off = _accounting(memory, False, initial=[], stored=stored, removals=removals, before=before)
            assert on == off
            assert on["lost"] == 0
            del held

    trio.run(main)


def test_visible_ids_walks_to_an_older_version() -> None:
    # An id upserted after the snapshot: its newest version is too new, the older one
    # is what the snapshot sees; an id stored after it is not seen; a deleted id is
    # seen by the older snapshot only.
    async def main() -> None:
        async with open_memory() as memory:
            a = MemoryEntry.new(MemoryCategory.FACT, "alpha one")
            b = MemoryEntry.new(MemoryCategory.FACT, "beta two")
            await memory.store(a)
            await memory.store(b)
            old = memory.snapshot()
            await memory.store(attrs.evolve(a, memory="alpha again"))
            await memory.delete(b.id)
            c = MemoryEntry.new(MemoryCategory.FACT, "gamma three")
            await memory.store(c)
            new = memory.snapshot()
            assert old._view.visible_ids() == {a.id.int, b.id.int}
            assert new._view.visible_ids() == {a.id.int, c.id.int}
            for snap in (old, new):
                assert snap._view.visible_ids() == {r.entry._id for r in snap._view.records()}

    trio.run(main)
