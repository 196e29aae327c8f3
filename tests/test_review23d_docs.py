"""Review 23d: the docs of a durable memory's access bookkeeping match the code since
branch durable15 (``sqlite._DEFER_ACCESS``: access changes are held back, written
within ``ACCESS_DELAY`` or ``ACCESS_PENDING`` entries and at a clean close, not in the
transaction of the batch that made them)."""

from __future__ import annotations

import re

from actormem import open_memory
from actormem._storage import sqlite as sqlite_store


def test_open_memory_does_not_promise_access_updates_in_the_same_transactions() -> None:
    assert sqlite_store._DEFER_ACCESS
    doc = " ".join((open_memory.__doc__ or "").split())
    assert not re.search(r"access bookkeeping is committed in the same", doc), doc[:600]
    assert "held back" in doc
