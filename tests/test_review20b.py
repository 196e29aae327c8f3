"""review20b: re-entrancy in the C kernels' new code (DupTable.join's group, ...)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

_cwordoverlap = pytest.importorskip("actormem._index._cwordoverlap")


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )


def test_join_survives_a_record_whose_hash_drops_the_group() -> None:
    """join(key, rec) into a dict group: rec's __hash__ runs Python code that may delete
    the key (the group's last reference); the dict must stay alive while rec goes in
    (a segfault / use after free before the fix)."""
    done = _run(
        """
        from actormem._index._cwordoverlap import DupTable
        t = DupTable()
        armed = False
        class R:
            def __hash__(self):
                global armed
                if armed:
                    armed = False
                    del t[5]
                return id(self) >> 4
        for _ in range(40):
            t.join(5, R())
        armed = True
        assert t.join(5, R()) is False
        assert 5 not in t and len(t) == 0
        t._check()
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_read_entries_holds_its_categories_while_idle_runs(tmp_path: Path) -> None:
    """read_entries' idle (and tags_of) run Python code while the reader thread compares
    the category texts and the decoder hands out the members: a caller's categories
    dict emptied there must not free them (a use after free before the fix)."""
    from actormem._storage import sqlite_format

    from .test_open13_split import _file, _texts

    if sqlite_format._crows is None or not sqlite_format._SAME_SQLITE:
        pytest.skip("no compiled reader over Python's SQLite")
    uri = _file(tmp_path / "c.db", _texts(3000))
    done = _run(
        f"""
        import gc
        from actormem._storage import sqlite_format as f
        plain = f._read_rows_c({uri!r})
        for attempt in range(20):
            cats = {{"".join(list(k)): type(v)(v.value) for k, v in f._CATEGORY_VALUES.items()}}
            calls = []
            def idle():
                calls.append(1)
                cats.clear()
                gc.collect()
                return False
            read = f._crows.read_entries(
                {uri!r}, f.SELECT_ENTRIES, f.MemoryEntry, f._ENTRY_FIELDS, cats, f._tags_of,
                f._namespace_of, f._json_object, 1.0, f.MAX_MEMORY_CHARS, f.MAX_KEY_CHARS,
                f.MAX_TTL, f.MAX_SEQ, f._HASH_TEXTS, True, None, None, idle,
            )
            assert read is not None and len(read) == len(plain)
            assert [e.category.value for _, e in read] == [e.category.value for _, e in plain]
            if calls:
                break
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def _flat_args(k: int) -> tuple[Any, ...]:
    import numpy as np

    rng = np.random.default_rng(7)
    n = 300
    counts = rng.integers(0, 5, n).astype(np.uint8)
    maxrel = rng.random(n)
    minseq = rng.integers(0, 1000, n).astype(np.int64)
    return counts, n, 1, 40, maxrel, minseq, None, k


@pytest.mark.parametrize("k", [2**40, 2**58, 2**62])
def test_flat_first_takes_a_limit_beyond_the_groups(k: int) -> None:
    """flat_first's k is the ranking's batch, max(limit, _VISIT_BATCH): a large limit
    (a valid retrieve argument) sized its heap (MemoryError before the fix; 2**59 + 1
    wrapped the size to 32 bytes: a heap overflow, below)."""
    from actormem._index.wordoverlap import ccore

    args = _flat_args(k)
    picked, more = ccore.flat_first(*args)
    expected, rest = ccore.flat_first(*args[:-1], 300)
    assert (picked, more) == (expected, rest)
    assert more == 0
    assert len(picked) == int((args[0] >= 1).sum())


def test_flat_first_k_whose_heap_size_wraps() -> None:
    done = _run(
        """
        import numpy as np
        from actormem._index.wordoverlap import ccore
        rng = np.random.default_rng(7)
        counts = rng.integers(1, 5, 300).astype(np.uint8)
        args = (counts, 300, 1, 40, rng.random(300), rng.integers(0, 9, 300).astype(np.int64), None)
        assert ccore.flat_first(*args, 2**59 + 1) == ccore.flat_first(*args, 300)
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"


def test_a_long_query_with_a_huge_limit_ranks() -> None:
    """Through the index: a query long enough for the flat ranking, limit 2**58."""
    from actormem._index.scoring import drain

    from .test_mainjob14_flat import _seeded_memory

    state, vocab, _rng = _seeded_memory(1, 300)
    view = state.view()
    query = " ".join(vocab[:40])
    small = list(drain(state.index.top_k_steps(view, query, 1000, None)))
    huge = list(drain(state.index.top_k_steps(view, query, 2**58, None)))
    assert [(s, r.seq) for s, r in huge] == [(s, r.seq) for s, r in small]


def test_cwrite_commit_error_survives_a_close_by_the_collector(tmp_path: Path) -> None:
    """A failing statement's exception is made after the error: the collector it may run
    can close the writer (a callback, a finalizer); the commit then neither reads the
    closed connection (a NULL db before the fix: a segfault) nor loses the error."""
    from actormem._storage import sqlite as store_sqlite

    if not store_sqlite._c_writer_usable():
        pytest.skip("no compiled writer over Python's SQLite")
    path = str(tmp_path / "w.db")
    done = _run(
        f"""
        import gc, os, sqlite3
        from actormem._storage import _cwrite, sqlite as s
        assert s._c_writer_usable()
        p = {path!r}
        c = sqlite3.connect(p, isolation_level=None)
        c.execute("PRAGMA journal_mode=wal")
        c.execute("CREATE TABLE t (x INTEGER CHECK (x > 0))")
        st = os.stat(p)
        stmts = ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK", "DELETE FROM t WHERE x = ?",
                 "DELETE FROM t WHERE x = ?", "DELETE FROM t WHERE x = ?",
                 "INSERT INTO t (x) VALUES (?)", "UPDATE t SET x = ? WHERE x = ?",
                 "INSERT INTO t (x) VALUES (?)")
        w = _cwrite.Writer("file:" + p + "?mode=rw", os.fsencode(p), st.st_dev, st.st_ino,
                           "PRAGMA busy_timeout = 0", stmts)
        def cb(phase, info):
            if phase == "start":
                w.close()
        gc.callbacks.append(cb)
        gc.set_threshold(1)
        try:
            w.commit(None, [], [(5,), (-1,)], [], [])
        except sqlite3.IntegrityError as e:
            assert "CHECK constraint failed" in str(e), e
            assert e.sqlite_errorname.startswith("SQLITE_CONSTRAINT"), e.sqlite_errorname
        else:
            raise AssertionError("no error")
        finally:
            gc.callbacks.remove(cb)
            gc.set_threshold(700)
        assert w.closed
        assert c.execute("SELECT count(*) FROM t").fetchone() == (0,)
        print("ok")
        """
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
