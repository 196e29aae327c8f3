"""A retrieve's ``limit`` may be any int >= 0 (``check_query``): one larger than the
memory returns every match, however large (``actormem query -k 99999999999999999999``
gave a traceback from the word-overlap kernel, ``m, k: ints >= 0``, and BM25's a
numpy error)."""

from __future__ import annotations

import pytest
import trio

from actormem import BM25Scorer, MemoryCategory, MemoryEntry, open_memory


@pytest.mark.parametrize("bm25", [False, True])
def test_a_limit_past_2_63_returns_every_match(bm25: bool) -> None:
    async def main() -> list[list[str]]:
        async with open_memory(scorer=BM25Scorer() if bm25 else None) as memory:
            await memory.store_many(
                [MemoryEntry.new(MemoryCategory.FACT, f"blue deploy {i}") for i in range(3)]
            )
            out = []
            for limit in (2**62, 2**63, 10**20):
                hits = await memory.retrieve("blue", limit)
                out.append(sorted(h.memory for h in hits))
                out.append(sorted(h.memory for h in memory.snapshot().retrieve("blue", limit)))
            return out

    for got in trio.run(main):
        assert got == ["blue deploy 0", "blue deploy 1", "blue deploy 2"]
