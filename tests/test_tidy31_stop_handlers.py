"""tidy31: the signal juggling of the CLI's ``import`` (``_stop_once``, and SIGTERM's
``_on_sigterm``) and of the bulk commit (``_hold_signals``) was written out in each:
put a handler on SIGINT and SIGTERM, leave one ignored by the parent ignored, do
nothing off the main thread, return what was replaced. It is one function now,
``actormem._util.replace_stop_handlers`` (the lowest layer both may import)."""

from __future__ import annotations

import inspect
import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from actormem._engine import bulk
from actormem._util import STOP_SIGNALS, replace_stop_handlers
from actormem.cli import _main


@pytest.fixture
def saved_handlers() -> Iterator[None]:
    before = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def _note(signum: int, frame: Any) -> None:
    raise AssertionError("not called")


@pytest.mark.usefixtures("saved_handlers")
def test_it_replaces_both_and_returns_the_replaced() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    previous = replace_stop_handlers(_note)
    assert previous == {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    assert all(signal.getsignal(number) is _note for number in STOP_SIGNALS)


@pytest.mark.usefixtures("saved_handlers")
def test_an_ignored_signal_stays_ignored_and_is_left_out() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    assert replace_stop_handlers(_note) == {signal.SIGTERM: signal.SIG_DFL}
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    assert signal.getsignal(signal.SIGTERM) is _note


@pytest.mark.usefixtures("saved_handlers")
def test_only_the_signals_asked_for() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    before = signal.getsignal(signal.SIGINT)
    assert replace_stop_handlers(_note, (signal.SIGTERM,)) == {signal.SIGTERM: signal.SIG_DFL}
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.usefixtures("saved_handlers")
def test_off_the_main_thread_nothing_changes() -> None:
    before = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    got: list[dict[int, Any]] = []
    worker = threading.Thread(target=lambda: got.append(replace_stop_handlers(_note)))
    worker.start()
    worker.join()
    assert got == [{}]
    assert {number: signal.getsignal(number) for number in STOP_SIGNALS} == before


@pytest.mark.usefixtures("saved_handlers")
def test_the_callers_use_it() -> None:
    """The CLI's ``import`` and SIGTERM handlers and the bulk commit's noting ones are
    put in place by the one function (none sets a handler itself)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stops = _main._install_stop_once()
    assert set(stops) == set(STOP_SIGNALS)
    _main._restore_stop_once(stops)
    assert _main._install_sigterm() is signal.SIG_DFL
    _main._restore_sigterm(signal.SIG_DFL)
    caught: list[int] = []
    held = bulk._hold_signals(caught)
    signal.raise_signal(signal.SIGTERM)
    assert caught == [signal.SIGTERM]
    bulk._restore(held)
    for function in (
        _main._install_stop_once,
        _main._install_sigterm,
        bulk._hold_signals,
    ):
        source = inspect.getsource(function)
        assert "replace_stop_handlers(" in source
        assert "signal.signal(" not in source
