"""Branch durable12: SIGKILL amid commits with access updates (each store followed by a
retrieve), with the compiled writer (``sqlite._C_COMMIT``) and without: every
acknowledged store is there after each kill, field by field but for the access
bookkeeping, and ``PRAGMA integrity_check`` says ok.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs
import pytest
import trio

from actormem._storage import sqlite as sqlite_store

from . import crash_child

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
        with tempfile.TemporaryFile("w+") as err:
            child = subprocess.Popen(
                [sys.executable, crash_child.__file__, "store", path, str(seed),
                 str(round_ * 10**6), "4"],
                stdout=subprocess.PIPE, stderr=err, text=True, env=env,
            )  # fmt: skip
            assert child.stdout is not None
            kill_after = rng.randint(1, 80)
            got: list[tuple[int, str]] = []
            for line in child.stdout:
                got.extend(crash_child._parse(line))
                if len(got) >= kill_after:
                    break
            time.sleep(rng.random() * 0.005)
            child.send_signal(signal.SIGKILL)
            got.extend(crash_child._parse(child.stdout.read()))
            child.stdout.close()
            code = child.wait()
            err.seek(0)
            assert code == -signal.SIGKILL, err.read()
        acked.extend(got)
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
        found = trio.run(crash_child._read_back, path)
        lost = []
        for i, id in acked:
            want = crash_child.make_entry(seed, i)
            assert str(want.id) == id
            have = found.get(want.id)
            if (
                have is None
                or attrs.evolve(
                    have, access_count=want.access_count, last_accessed=want.last_accessed
                )
                != want
            ):
                lost.append(i)
        if lost:
            return len(acked), lost
    return len(acked), []


@pytest.mark.parametrize("on", [True, False], ids=["c-writer", "python-path"])
def test_sigkill_amid_commits_with_access_updates_loses_nothing(tmp_path: Path, on: bool) -> None:
    acked, lost = _kill_trial(str(tmp_path / "k.db"), seed=12 + on, on=on)
    assert lost == []
    assert acked > 0
