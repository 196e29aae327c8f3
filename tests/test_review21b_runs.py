"""review21b: the owner's store runs (``memory._STORE_RUNS``) at capacity.

``test_mainjob17_runs`` compares a batch applied with the knob on and off on unbounded
memories only; here the same comparison on memories of capacity 3, so runs of stores
evict (``store_many``'s path by ``store`` at capacity) amid upserts, keys, ttls,
deletes and sweeps: the same replies, state, journal, removal callbacks and answers.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actormem import open_memory

from . import test_mainjob17_runs as runs
from .strategies import examples


@given(st.lists(runs._requests, min_size=1, max_size=5), st.sampled_from([1, 3]))
@settings(max_examples=examples(12), deadline=None)
def test_store_runs_agree_at_capacity(batches: list[Any], capacity: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runs, "open_memory", functools.partial(open_memory, capacity=capacity))
        runs._run_batches(batches, False, None)
