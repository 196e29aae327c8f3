"""``stress._bench_memory --stream`` (issue #20, item 6): each entry is made right
before its store, so the allocator is not left holding a million entries the caller
dropped at once. The streamed build stores the same entries (same texts, same count) as
the list build; the options that exclude each other are refused. Benchmarks report
figures; this only checks what the figures are made of."""

from __future__ import annotations

import math

import pytest

from stress import _bench_memory
from stress._bench_data import DEFAULT_DATA

from .realdata import needs_real_file

pytestmark = needs_real_file("locomo10.json")


def test_streamed_build_counts_the_same_texts() -> None:
    listed = _bench_memory.measure(400, "word-overlap", str(DEFAULT_DATA))
    streamed = _bench_memory.measure(400, "word-overlap", str(DEFAULT_DATA), stream=True)
    assert streamed["text_bytes_per_entry"] == listed["text_bytes_per_entry"] > 0
    assert streamed["built_by"] == "store, streamed"
    assert listed["built_by"] == "store"
    assert streamed["entry_bytes"] is None
    assert streamed["engine_bytes"] is None
    assert math.isfinite(listed["entry_bytes"])
    assert math.isfinite(streamed["beyond_text_bytes"])


def test_load_and_stream_are_refused_together() -> None:
    with pytest.raises(ValueError, match="exclude|generator"):
        _bench_memory.measure(10, "bm25", str(DEFAULT_DATA), load=True, stream=True)
