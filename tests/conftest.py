"""The suite's temporary files on a RAM-backed folder where the machine has one.

Hundreds of tests open durable SQLite files in ``tmp_path`` (the Hypothesis tests of the
durable paths one or more per example), and every commit waits for ``fsync``. On the
2-core CI machines a disk's ``fsync`` went from a fraction of a millisecond to tens of
milliseconds from one machine to the next, and the suite's wall time with it (472 s and
881 s for nearly the same tests, with a few hundred seconds of CPU): the suite measured
the disk, not the code. On ``/dev/shm`` (tmpfs) an ``fsync`` returns at once; what the
tests check does not change, since a file written there survives a killed process (the
kill -9 tests) exactly as on a disk. What tmpfs cannot show, a machine losing power, no
test here shows either: ``stress/crash_loop.py`` and the durable benchmarks run on the
real disk.

``ACTORMEM_TEST_TMP=DIR`` puts the files in ``DIR`` instead (a folder on a disk, to run
the suite with its ``fsync``s); ``ACTORMEM_TEST_TMP=`` (empty) keeps the system's
temporary folder. Subprocesses (servers, swarms, killed writers) inherit ``TMPDIR``.
"""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import settings

from .strategies import PROFILE, examples

# The suite tests what Ctrl-C does, in this process and in the commands it starts: run
# in the background by a shell without job control (``pytest &`` in a script, nohup-like
# runners), it inherits SIGINT ignored, and the commands honour an ignored SIGINT (a
# background job must not be stopped by a Ctrl-C meant for the foreground). Restore
# Python's default handler here, as in a terminal; the commands the tests start then
# get SIGINT's default disposition.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Hypothesis profiles, one per ``ACTORMEM_TEST_PROFILE`` (tests/strategies.py): the tests
# that name no example count get Hypothesis's 100 scaled like the others, and no test has
# a deadline (a slow example on a loaded machine is not a failure: tests assert results,
# never timing).
settings.register_profile(f"actormem-{PROFILE}", max_examples=examples(100), deadline=None)
settings.load_profile(f"actormem-{PROFILE}")

_RAM = "/dev/shm"
#: The free space ``/dev/shm`` needs to be chosen by itself: one run of the suite leaves
#: ~65 MB there (pytest keeps the last three runs' folders), and containers often make
#: ``/dev/shm`` 64 MB, where durable tests would fail with "database or disk is full".
_RAM_MIN_FREE = 1 << 30


def _free_bytes(path: str) -> int:
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return st.f_bavail * st.f_frsize


def _test_tmp() -> str | None:
    chosen = os.environ.get("ACTORMEM_TEST_TMP")
    if chosen is not None:
        if chosen and not os.path.isdir(chosen):
            raise pytest.UsageError(f"ACTORMEM_TEST_TMP={chosen!r} is not a folder")
        # Absolute: TMPDIR is inherited by subprocesses that may run elsewhere.
        return os.path.abspath(chosen) if chosen else None
    if (
        os.path.isdir(_RAM)
        and os.access(_RAM, os.W_OK | os.X_OK)
        and _free_bytes(_RAM) >= _RAM_MIN_FREE
    ):
        return _RAM
    return None


def pytest_configure(config: pytest.Config) -> None:
    root = _test_tmp()
    if root is not None:
        # pytest's tmp_path_factory reads tempfile.gettempdir() when a test first asks
        # for a temporary folder, after this hook.
        os.environ["TMPDIR"] = root
        tempfile.tempdir = root


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A connection string to a new, empty PostgreSQL database, dropped after the test
    (``tests/pg.py``: skips without a server, fails under ``CI=true``)."""
    from .pg import fresh_database

    yield from fresh_database()


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """SIGINT's and SIGTERM's handlers as they were before each test. A test that runs
    the CLI in this process (``run_command``, ``main``) can leave them changed on
    purpose: the CLI's SIGTERM handler stays installed for the process that runs it,
    and a committed ``import`` ignores both signals until that process ends
    (docs/cli.md). A later test would then see them, and the test process would no
    longer end on a SIGTERM (a reviewer's ``kill`` of the suite did nothing)."""
    before = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in before.items():
        if handler is not None and signal.getsignal(number) is not handler:
            signal.signal(number, handler)
