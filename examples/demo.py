"""A short tour of the engine: many writers, snapshot reads, eviction, consolidation.

Run: python examples/demo.py
"""

from __future__ import annotations

import trio

from actormem import MemoryCategory, MemoryEntry, open_memory


async def main() -> None:
    async with open_memory(capacity=100) as memory:
        # Eight agents store what they learned, concurrently; the owner applies it in order.
        async def agent(n: int) -> None:
            for i in range(20):
                text = f"agent {n} step {i}: deploys go to the blue cluster" if i % 5 == 0 else (
                    f"agent {n} step {i}: read file src/module_{i}.py"
                )
                await memory.store(MemoryEntry.new(MemoryCategory.TRAJECTORY, text))

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(agent, n)
        stats = memory.statistics()
        print(f"stored {stats.stores} entries into capacity {stats.capacity}: "
              f"{len(memory)} kept, {stats.evictions} evicted")

        # A snapshot is O(1) and immutable: later writes do not show up in it.
        snap = memory.snapshot()
        fact = MemoryEntry.new(MemoryCategory.FACT, "deploy uses the blue cluster")
        fact = fact.with_tag("infra")
        await memory.store(fact)  # the memory is full: this evicts one entry
        print(
            f"after one more store: the snapshot taken before it "
            f"{'sees' if snap.get(fact.id) else 'does not see'} the new fact; "
            f"the memory {'has' if await memory.get(fact.id) else 'lacks'} it "
            f"({len(snap)} and {len(memory)} entries, {memory.statistics().evictions} evicted)"
        )

        # Retrieval scores the latest snapshot in this task, never waiting for the owner.
        for hit in await memory.retrieve_scored("deploy the blue service", 3):
            print(f"  {hit.score:.3f}  {hit.entry.memory}")

        await memory.store(MemoryEntry.new(MemoryCategory.FACT, "Deploy uses the BLUE cluster"))
        print(await memory.consolidate())


if __name__ == "__main__":
    trio.run(main)
