"""The server's removal feed: numbered reports, the latest ``maxlen`` kept, readers told
when they fell behind."""

from __future__ import annotations

import pytest

from actormem import MemoryCategory, MemoryEntry
from actormem.server._feed import RemovalFeed


def test_reports_are_numbered_and_paged() -> None:
    feed = RemovalFeed(maxlen=10)
    entries = [MemoryEntry.new(MemoryCategory.FACT, f"e{i}") for i in range(4)]
    for e in entries:
        feed(e, "evicted")
    assert (feed.total, feed.first) == (4, 1)
    assert feed.since(0, 2) == [
        (1, str(entries[0].id), "evicted"),
        (2, str(entries[1].id), "evicted"),
    ]
    assert [n for n, _, _ in feed.since(2, 100)] == [3, 4]
    assert feed.since(4, 100) == []


def test_a_reader_that_fell_behind_can_tell() -> None:
    feed = RemovalFeed(maxlen=3)
    for i in range(10):
        feed(MemoryEntry.new(MemoryCategory.FACT, f"e{i}"), "deleted")
    assert (feed.total, feed.first) == (10, 8)
    after = 2  # reports 3..7 were dropped: after + 1 < first
    assert after + 1 < feed.first
    assert [n for n, _, _ in feed.since(after, 100)] == [8, 9, 10]
    with pytest.raises(ValueError, match="maxlen"):
        RemovalFeed(maxlen=0)
