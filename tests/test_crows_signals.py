"""Ctrl-C during a long open: the compiled row reader (``_storage/_crows.c``) runs the
signal handlers at its periodic GIL release, so a handler's exception (KeyboardInterrupt)
comes out of the read, not after its last row."""

from __future__ import annotations

import gc
import signal
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from actormem import MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory
from actormem._storage import sqlite_format

needs_reader = pytest.mark.skipif(
    sqlite_format._crows is None, reason="the compiled row reader (_crows) is not built here"
)

BASE = datetime(2026, 1, 1, tzinfo=UTC)


class Interrupted(Exception):
    pass


@needs_reader
async def test_a_signal_during_the_read_stops_it_inside_the_call(tmp_path: Path) -> None:
    path = tmp_path / "big.db"
    async with open_memory(path=str(path), scorer=WordOverlapScorer()) as memory:
        await memory.store_many(
            [
                MemoryEntry(
                    category=MemoryCategory.FACT,
                    memory=f"row {i}",  # no tags, namespace or payload: no Python per row
                    created_at=BASE + timedelta(seconds=i),
                )
                for i in range(20_000)
            ]
        )
    uri = sqlite_format.read_only_uri(str(path))
    assert sqlite_format._read_rows_c(uri) is not None  # the reader takes this file

    # Whether the main thread is inside the reader's call, from the profiler's C-call
    # events; a helper thread sends the signal only while it is, which it can see at the
    # reader's GIL releases (every 512 rows). The handler notes the Python frame it
    # interrupted: the reader's caller when the reader ran it, the profiler's hook (at
    # the call's c_return) or the caller after the call when nothing inside did.
    reader = sqlite_format._crows.read_entries  # type: ignore[union-attr]
    # A plain list, not a threading.Event: Event.set is Python code (a Condition's
    # lock and notify) where the main thread can let the helper in and then run the
    # pending signal's handler, in "set" instead of in the reader (seen once in CI).
    # A list item's store and the hook's return hold no point where the interpreter
    # drops the GIL or runs handlers, so the next such point is the reader's release.
    inside = [False]
    ran_in: list[str] = []
    sent = threading.Event()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if arg is reader and event == "c_call":
            inside[0] = True
        elif arg is reader and event in ("c_return", "c_exception"):
            inside[0] = False

    def handler(signum: int, frame: FrameType | None) -> None:
        ran_in.append(frame.f_code.co_name if frame is not None else "?")
        raise Interrupted

    def send() -> None:
        while not inside[0]:
            time.sleep(0)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)
        sent.set()

    previous = signal.signal(signal.SIGUSR1, handler)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # the waiting thread takes the GIL at the next release
    helper = threading.Thread(target=send, daemon=True)
    # No collection during the read: a collection started by the reader's allocations
    # runs gc.callbacks (Hypothesis registers one), Python code where the pending
    # signal's handler would run instead, its exception then ignored (an open pauses
    # the collector too: lifecycle._ONE_GC_PAUSE).
    gc.disable()
    try:
        sys.setprofile(profile)
        helper.start()
        with pytest.raises(Interrupted):
            sqlite_format._read_rows_c(uri)
    finally:
        sys.setprofile(None)
        gc.enable()
        sys.setswitchinterval(interval)
        signal.signal(signal.SIGUSR1, previous)
    helper.join(5)
    assert sent.is_set()
    assert ran_in == ["_read_rows_c"]  # raised by the reader's call, not after it returned
    rows = sqlite_format._read_rows_c(uri)  # the interrupted read left nothing open
    assert rows is not None
    assert len(rows) == 20_000
