"""Review rev52b of branch durable52 (``sqlite._REAL_FRAMES``): the checkpoints' count of
the WAL's frames must never fall below the frames the WAL grew by, or the WAL outgrows
its bound. ``Writer.frames`` (``SQLITE_DBSTATUS_CACHE_WRITE``) against the ``-shm``
header's ``mxFrame`` for seeded random batches the fixed ones of test_durable52 do not
cover: upserts of long rows and deletes (SECURE_DELETE zeroes their overflow chains),
access updates, a batch larger than the page cache (pages spilled to the WAL before the
``COMMIT``, some written again by it: counted twice, appended once), with another
connection checkpointing between commits (the WAL starts over) and a reader pinning
frames.
"""

from __future__ import annotations

import random
import sqlite3
import struct
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from actormem._storage import sqlite as sqlite_store
from actormem._storage.sqlite import Batch

from .test_durable12 import _entry, _open, _rows_of

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="durable memories need fcntl.flock"),
    pytest.mark.skipif(
        not sqlite_store._c_writer_usable(), reason="the compiled writer is not built here"
    ),
]

T0 = datetime(2026, 12, 8, tzinfo=UTC)


def _wal_state(path: Path) -> tuple[int, bytes]:
    """(``mxFrame`` of the ``-shm`` header, the WAL header's salt-1): a new salt means the
    WAL started over from its first frame."""
    with open(f"{path}-shm", "rb") as f:
        f.seek(16)
        (frames,) = struct.unpack("=I", f.read(4))
    with open(f"{path}-wal", "rb") as f:
        f.seek(16)
        salt = f.read(4)
    return int(frames), salt


def _batch(rng: random.Random, live: set[int], next_seq: list[int]) -> Batch:
    entries = {}
    for _ in range(rng.choice([1, 1, 2, 8, 30])):
        if live and rng.random() < 0.3:
            seq = rng.choice(sorted(live))  # an upsert, maybe of a long row
        else:
            next_seq[0] += 1
            seq = next_seq[0]
        size = rng.choice([1, 1, 200, 2000, 19000])
        entries[seq] = _entry(seq, rng.choice(["long ", "ünï ", "x"]) * size)
    rest = sorted(live - set(entries))
    deletes = [(s,) for s in rng.sample(rest, min(len(rest), rng.choice([0, 0, 1, 5])))]
    accesses = [
        (rng.randrange(5), (T0 + timedelta(seconds=s)).isoformat(), None, s)
        for s in rng.sample(rest, min(len(rest), rng.choice([0, 3, 20])))
        if (s,) not in deletes
    ]
    live |= set(entries)
    live -= {s for (s,) in deletes}
    return Batch(deletes, _rows_of(sorted(entries.items())), accesses)


@pytest.mark.parametrize("seed", [0, 1])
def test_the_writer_never_counts_fewer_frames_than_the_wal_grew(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    path = tmp_path / "m.db"
    store = _open(path)
    other = sqlite3.connect(str(path), isolation_level=None)
    try:
        writer = store._cwriter
        assert writer is not None
        live: set[int] = set()
        next_seq = [0]
        told_sum = restarts = spilled = 0
        for n in range(80):
            if n == 40:  # one batch above the page cache's 2 MB: pages spill mid-way
                batch = Batch(
                    [], _rows_of([(s, _entry(s, "日本語x" * 24000)) for s in range(1, 61)]), []
                )
                live |= set(range(1, 61))
                next_seq[0] = max(next_seq[0], 60)
            else:
                batch = _batch(rng, live, next_seq)
            if n % 20 == 10:  # a reader pins the frames committed so far
                other.execute("BEGIN")
                other.execute("SELECT count(*) FROM entries").fetchone()
            elif n % 20 == 15:
                other.execute("COMMIT")
            before, salt = _wal_state(path)
            assert store.inline_ok(batch, 64)
            assert store.write_inline(batch) is True
            after, salt_after = _wal_state(path)
            grown = after if salt_after != salt else after - before
            restarts += salt_after != salt
            told = writer.frames
            assert told >= grown >= 1, (n, told, grown)
            spilled += told > grown
            told_sum += told
            assert store.wal_frames == told_sum
            if n % 7 == 6 and not other.in_transaction:
                other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        assert restarts >= 1  # the WAL started over at least once
    finally:
        other.close()
        store.close()
