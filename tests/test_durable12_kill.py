"""Branch durable12: SIGKILL amid commits with access updates (each store followed by a
retrieve), with the compiled writer (``sqlite._C_COMMIT``) and without: every
acknowledged store is there after each kill, field by field but for the access
bookkeeping, and ``PRAGMA integrity_check`` says ok.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import trio

from actormem._storage import sqlite as sqlite_store

from . import crash_child
from .setups import killed_round, read_back_as_acked

pytestmark = pytest.mark.skipif(
    not sqlite_store._c_writer_usable(), reason="the compiled writer is not built here"
)


def _kill_trial(path: str, seed: int, on: bool) -> tuple[int, list[int]]:
    """SIGKILL a child that stores and retrieves (access updates in its commits) at a
    random moment, twice; every acknowledged store must read back, field by field but
    for the access bookkeeping, and the file must pass ``integrity_check``."""
    rng = random.Random(seed)
    env = dict(os.environ, ACTORMEM_TEST_C_COMMIT="1" if on else "0", ACTORMEM_TEST_RETRIEVE="1")
    acked: list[tuple[int, str]] = []
    for round_ in range(2):
        kill_after = rng.randint(1, 80)
        acked.extend(killed_round(path, seed, round_, env, kill_after, rng.random() * 0.005))
        found = trio.run(crash_child._read_back, path)
        lost = [i for i, id in acked if read_back_as_acked(found, seed, i, id)[0] is None]
        if lost:
            return len(acked), lost
    return len(acked), []


@pytest.mark.parametrize("on", [True, False], ids=["c-writer", "python-path"])
def test_sigkill_amid_commits_with_access_updates_loses_nothing(tmp_path: Path, on: bool) -> None:
    acked, lost = _kill_trial(str(tmp_path / "k.db"), seed=12 + on, on=on)
    assert lost == []
    assert acked > 0
