"""The long posting lists' bitsets (knobs._TOKEN_BITS) under readers that really OR
them: long words (not the short-word masks' words) with dense match sets, no match set
cached (so each retrieve joins again), several retrieves at different snapshots advanced
a step at a time while the owner stores (growth, the owner's upkeep and steps), deletes
and purges (lists replaced by a compaction, renumberings), some closed mid-way (a fill
abandoned between two chunks). Each finished retrieve must equal the one without the
bitsets on the same snapshot. test_wordoverlap_bits' machines query mostly short words,
whose sets come from the masks: over their runs a list was ORed once."""

from __future__ import annotations

from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from actormem._index import kernels
from actormem._index.wordoverlap import knobs as wo_knobs
from actormem._index.wordoverlap.matchsets import MatchFinder

from . import readers_under_writes

BASE = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = (
    "deploy deploys redeploy service services player display playful error errors "
    "logging logger catalog dogma"
).split()
CHANCES = [0.9, 0.6, 0.3, 0.7, 0.2, 0.8, 0.5, 0.1, 0.6, 0.3, 0.4, 0.1, 0.2, 0.1]
QUERIES = ["deploy", "play error", "serv log", "deploys player", "ogg rror", "deploy dog ser"]


@pytest.mark.skipif(not kernels.WO_CORE_AVAILABLE, reason="the word-overlap core is not built")
@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ratio", [2, 3, 8])
@pytest.mark.parametrize("step", [1, 5, 1 << 20])
def test_readers_or_the_owners_bitsets_under_writes(
    seed: int, ratio: int, step: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wo_knobs, "_BITS_MIN", 0)  # the bit-sliced counts at every size
    monkeypatch.setattr(wo_knobs, "_RENUMBER_MIN", 8)
    monkeypatch.setattr(wo_knobs, "_MASK_BATCH", 1 + seed % 7)
    monkeypatch.setattr(wo_knobs, "_DENSE_BITS", 2)
    monkeypatch.setattr(wo_knobs, "_JOIN", 4)
    monkeypatch.setattr(wo_knobs, "_JOIN_LISTS", 3)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS", ratio)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_FROM", 0)
    monkeypatch.setattr(wo_knobs, "_TOKEN_BITS_STEP", step)
    monkeypatch.setattr(wo_knobs, "_CHUNK", 1 + seed % 3)
    monkeypatch.setattr(wo_knobs, "_STEP", 2)
    ored = 0
    plain = MatchFinder._or_token_bits

    def counted(*args: Any) -> Generator[None, None, Any]:
        nonlocal ored
        rest, lens = yield from plain(*args)
        ored += len(args[1]) - len(rest)
        return rest, lens

    monkeypatch.setattr(MatchFinder, "_or_token_bits", staticmethod(counted))
    rng = np.random.default_rng(seed)
    state = readers_under_writes.unmemoized_state()
    # Common words (the long lists) and rarer ones.
    entry = readers_under_writes.entry_maker(rng, WORDS, CHANCES, lambda n: f"m{n % 11}")
    off = readers_under_writes.path_with(monkeypatch, state, "_TOKEN_BITS", 0)
    assert readers_under_writes.run(state, entry, QUERIES, rng, off)
    assert ored  # the bitsets were read
