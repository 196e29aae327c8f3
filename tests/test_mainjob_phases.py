"""stress/mainjob_phases.py: the main job's stores, commits and CPU by agents running."""

from __future__ import annotations

from pathlib import Path

import pytest

from stress import mainjob_phases


@pytest.mark.parametrize(
    ("live", "group"),
    [(100, "64"), (64, "64"), (63, "16-63"), (16, "16-63"), (15, "5-15"), (5, "5-15"),
     (4, "4"), (2, "2"), (1, "1"), (0, "1")],
)  # fmt: skip
def test_bucket(live: int, group: str) -> None:
    assert mainjob_phases.bucket(live) == group


def test_a_durable_run_counts_every_store_and_commit_once(tmp_path: Path) -> None:
    """A small synthetic durable swarm: every step's retrieve and store is counted in
    some group, no commit holds less than one awaited store on average, and the wrapped
    methods are restored afterwards."""
    import actormem._engine.memory as memory_module
    import actormem.cli._swarm as swarm
    from actormem._storage import sqlite

    before = (swarm._agent, memory_module.Memory._apply_batch, memory_module.Memory.retrieve,
              sqlite.SqliteStore._committed)  # fmt: skip
    figures = mainjob_phases.run(
        ["--synthetic", "--agents", "8", "--steps", "60", "--json", str(tmp_path / "o.json"),
         "--interval", "600", "--path", str(tmp_path / "m.sqlite")]  # fmt: skip
    )
    after = (swarm._agent, memory_module.Memory._apply_batch, memory_module.Memory.retrieve,
             sqlite.SqliteStore._committed)  # fmt: skip
    assert after == before
    retrieves = sum(group.get("retrieves", 0) for group in figures.values())
    awaited = sum(group.get("awaited", 0) for group in figures.values())
    commits = sum(group.get("commits", 0) for group in figures.values())
    assert retrieves == 60
    assert awaited >= 60  # the stores, and any end-of-episode consolidations
    assert 0 < commits <= awaited
    table = mainjob_phases.table(figures)
    assert table.splitlines()[-1].startswith(f"| all | {awaited:,} | {retrieves:,} | {commits:,} |")
