"""``stress/commit_replay.py``'s measuring tools (branch ``durable13``): ``--merge``
groups recorded batches in order, and the ``accesslog`` prototype (access updates
appended to a table of their own, folded into ``entries``) ends with the rows that
updating them in place gives, upserts of logged seqs included."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from stress import commit_replay

from .realdata import real_file


def _row(seq: int, memory: str, count: int = 0) -> tuple[Any, ...]:
    """An ``entries`` row (sqlite_format.COLUMNS) for the prototype's table."""
    return (
        seq, f"id-{seq}", "fact", memory, "[]", "[]", "2026-12-06T00:00:00.000000+00:00",
        1.0, count, None, 0, None, None, "2026-12-06T00:00:00.000000+00:00", None, None,
    )  # fmt: skip


def _access(seq: int, count: int) -> tuple[Any, ...]:
    return (count, f"2026-12-06T00:00:{count:02d}.000000+00:00", None, seq)


#: Puts, access updates, an upsert of a seq whose hits are in the log (its count back to
#: 0, not hit again), a delete of a logged seq, and hits after the delete's batch.
BATCHES: list[Any] = [
    ([], [_row(1, "a"), _row(2, "b")], []),
    ([], [_row(3, "c")], [_access(1, 1), _access(2, 1)]),
    ([], [], [_access(1, 2), _access(3, 1)]),
    ([], [_row(1, "a again")], [_access(2, 2)]),  # seq 1 upserted: count 0
    ([(3,)], [_row(4, "d")], [_access(4, 1)]),
    ([], [], [_access(2, 3), _access(4, 2)]),
]


@pytest.mark.parametrize("fold", [1, 2, 4, 100])
def test_access_log_variants_end_with_the_rows_of_updates_in_place(
    tmp_path: Path, fold: int
) -> None:
    rows = {}
    for variant in ("update", "log", "lognofold"):
        scratch = tmp_path / variant
        scratch.mkdir()
        user, system, rows[variant] = commit_replay.access_log_once(
            BATCHES, variant, fold, str(scratch)
        )
        assert user >= 0
        assert system >= 0
    assert rows["update"] == [
        (1, 0, None, None),
        (2, 3, "2026-12-06T00:00:03.000000+00:00", None),
        (4, 2, "2026-12-06T00:00:02.000000+00:00", None),
    ]
    assert rows["log"] == rows["update"]
    assert rows["lognofold"] == rows["update"]


def test_merge_groups_consecutive_batches_in_order() -> None:
    got = commit_replay.merged(BATCHES, 4)
    assert len(got) == 2
    deletes, puts, accesses = got[0]
    assert deletes == []
    assert [row[0] for row in puts] == [1, 2, 3, 1]
    assert accesses == [_access(1, 1), _access(2, 1), _access(1, 2), _access(3, 1), _access(2, 2)]
    assert got[1] == ([(3,)], [_row(4, "d")], [_access(4, 1), _access(2, 3), _access(4, 2)])
    assert commit_replay.merged(BATCHES, 1) is BATCHES


def test_replay_merged_commits_fewer_batches(tmp_path: Path) -> None:
    recorded = tmp_path / "batches.pickle"
    recorded.write_bytes(pickle.dumps([([], [_row(n, f"t{n}")], []) for n in range(1, 9)]))
    for merge, commits in ((1, 8), (3, 3)):
        batches = commit_replay.merged(pickle.loads(recorded.read_bytes()), merge)
        got = commit_replay.replay_once(batches, 8192, 1000, str(tmp_path))
        assert got["commits"] == commits


def test_record_keeps_every_commit_the_close_flush_included(tmp_path: Path) -> None:
    # durable27: the close's flush of held-back access updates calls ``_write`` with a
    # third argument (``checkpoint``), which the recording wrapper refused (TypeError
    # at the close: nothing recorded).
    data = real_file("tool_calls.jsonl")
    out = tmp_path / "batches.pickle"
    commit_replay.record(
        str(out),
        ["--tool-calls", str(data), "--steps", "80", "--path", str(tmp_path / "m.db")],
    )
    batches = pickle.loads(out.read_bytes())
    assert sum(len(puts) for _, puts, _ in batches) >= 80
    assert any(accesses for _, _, accesses in batches)  # the close's flush
