"""A fair share of the event loop for the owner: readers wait between slices while
writes are pending.

Theory of operation
-------------------
A retrieve scores its snapshot in the caller's task, in slices of about
:data:`~actormem._index.scoring.RETRIEVE_SLICE` (0.1 ms) with a checkpoint between them.
trio's scheduler is fair round-robin: each runnable task gets one step per round. With 64
readers looping, one round holds 64 reader slices (~6.4 ms), and a store needs two rounds
(the owner applies it, then the writer wakes with its answer): writers' p99 with 64
readers was 5.2x their p99 alone (docs/benchmarks.md).

The :class:`ReadGate` lets the owner claim a share of the loop that readers cannot take.
*Demand* counts the writes in flight: every awaited call from queueing its request
(or waiting for room to) to taking its answer (:meth:`enter` / :meth:`leave`). Requests
nobody awaits (``store_nowait``, readers' access bookkeeping) claim nothing: with no
caller waiting, the owner needs no priority.
While there is demand the gate alternates two phases:

* **closed**: readers that reach a slice boundary park (``ParkingLot``) instead of taking
  a round; the owner and the writers have the loop to themselves. A closed phase ends when
  demand falls to zero or after :data:`CLOSED_MAX` seconds (:data:`COMMIT_PARK` while a
  durable group commit is in its worker thread: the commit thread needs the GIL, which
  a running reader holds for up to the interpreter's switch interval at a time).
* **open**: readers run as without a gate. A closed phase of ``d`` seconds earns readers
  ``d * (1 - SHARE) / SHARE`` seconds of open phase before the gate may close again, so
  with writes pending all the time the owner's side gets :data:`SHARE` of the loop and
  readers the rest. A group commit starting cuts an open phase short once it has lasted
  :data:`OPEN_MIN` (what a closed phase of :data:`CLOSED_MAX` earns).

Invariants: no reader stays parked longer than the closed phase's limit (the first reader
to park holds a timeout, the *watch*, and opens the gate when it fires; if it is cancelled
it hands the watch to another parked reader), so readers are never starved whatever the
writers do. An opening wakes every parked reader, but with many readers a scheduling
round (one slice of each) outlasts the open phase, so the last of them to run find the
gate closed again: such a reader parks once more only if it has waited less than
:data:`STARVE_MAX` at this slice boundary, else it passes. Without that rule the readers
that run late in a round could re-park phase after phase (the main job's retrieve p99
was 3-4x its value without the gate; docs/benchmarks.md); with it a reader waits at
most about two closed phases and a round. With no demand the gate costs a reader one
attribute test per slice. Phase changes happen lazily, at readers' slice boundaries, on
trio's clock (``trio.current_time()``, read only while there is demand), so tests drive
the gate with :class:`trio.testing.MockClock`. No trio import is needed by the state
(this gate lives beside the owner, not in ``state.py``).
"""

from __future__ import annotations

import trio

__all__ = ["CLOSED_MAX", "COMMIT_PARK", "OPEN_MIN", "SHARE", "STARVE_MAX", "ReadGate"]

#: The owner's share of the loop while writes are pending (readers get ``1 - SHARE``).
SHARE = 0.6
#: Longest closed phase, in seconds: no reader parks longer while no commit runs.
CLOSED_MAX = 0.006
#: Longest closed phase, in seconds, while a durable group commit is in its thread.
COMMIT_PARK = 0.25
#: A reader that has waited this long at one slice boundary passes when an opening
#: wakes it, even if the gate closed again before it ran (see :meth:`ReadGate.checkpoint`).
STARVE_MAX = CLOSED_MAX
#: Shortest open phase a commit starting cuts short: what a closed phase of
#: :data:`CLOSED_MAX` earns readers.
OPEN_MIN = CLOSED_MAX * (1 - SHARE) / SHARE


class ReadGate:
    """Where readers wait between slices while the owner takes its share of the loop.

    Used by one trio run (the memory's); not thread-safe. See the module docs.

    Attributes:
        enabled: False turns the gate off (readers never park): for benchmarks that
            compare, and as an escape hatch.
    """

    __slots__ = (
        "_closed",
        "_committing",
        "_demand",
        "_lot",
        "_open_until",
        "_opened_at",
        "_opens",
        "_since",
        "_watch",
        "enabled",
        "parks",
    )

    def __init__(self) -> None:
        self.enabled = True
        #: Writes in flight: awaited calls queued and not yet answered-and-woken.
        self._demand = 0
        self._closed = False
        #: Start of the current closed phase (trio time); meaningful while closed.
        self._since = 0.0
        #: The gate may not close before this trio time (readers' earned open phase).
        self._open_until = -float("inf")
        #: When the gate last opened (trio time).
        self._opened_at = -float("inf")
        self._committing = False
        #: How many times the gate opened: a parked reader that sees it change was let
        #: through by an opening (not woken to take over the watch).
        self._opens = 0
        #: The timeout of the first parked reader (the watch), while one is parked.
        self._watch: trio.CancelScope | None = None
        self._lot = trio.lowlevel.ParkingLot()
        #: How many times a reader parked (statistics for tests and benchmarks).
        self.parks = 0

    # ------------------------------------------------------------ the write side

    def enter(self) -> None:
        """A write is in flight (a caller is queueing, or waiting for the answer to, an
        awaited request). O(1)."""
        self._demand += 1

    def leave(self) -> None:
        """A write is no longer in flight; with none left, the gate opens. O(1), plus
        waking the parked readers when it opens."""
        self._demand -= 1
        if not self._demand and self._closed:
            self._open(trio.current_time())

    def commit_started(self) -> None:
        """A durable group commit runs in its thread: closed phases may last up to
        :data:`COMMIT_PARK`, and an open phase under way ends once it has lasted
        :data:`OPEN_MIN` (readers running now would take the GIL from the commit's
        thread for a switch interval at a time). O(1)."""
        self._committing = True
        if not self._closed and self._demand:
            self._open_until = min(self._open_until, self._opened_at + OPEN_MIN)
        self._rewatch()

    def commit_ended(self) -> None:
        """The group commit returned: closed phases last up to :data:`CLOSED_MAX` again.
        O(1)."""
        self._committing = False
        self._rewatch()

    def _rewatch(self) -> None:
        if self._watch is not None:
            self._watch.deadline = self._since + self._limit()

    # ------------------------------------------------------------ the read side

    @property
    def closed(self) -> bool:
        """Whether readers arriving now would park (the phase as last decided)."""
        return self._closed

    def would_park(self) -> bool:
        """Whether a reader reaching a slice boundary now would park (deciding the phase
        now, as :meth:`checkpoint` does). O(1)."""
        return bool(self._demand) and self.enabled and self._closed_now(trio.current_time())

    async def checkpoint(self) -> None:
        """A reader's slice boundary: a trio checkpoint, or, while the gate is closed, a
        park until it opens (at most the closed phase's limit; a reader the opening woke
        that finds the gate closed again parks once more only if it has waited less than
        :data:`STARVE_MAX`). A schedule point and a cancel point either way.

        Runtime complexity: O(1) (waking parked readers is O(parked), once per phase).
        """
        if not self._demand or not self.enabled:
            await trio.lowlevel.checkpoint()
            return
        if not self._closed_now(trio.current_time()):
            await trio.lowlevel.checkpoint()
            return
        since = trio.current_time()
        while True:
            self.parks += 1
            opens = self._opens
            await self._park()
            now = trio.current_time()
            if opens != self._opens and now - since >= STARVE_MAX:
                # Let through by an opening after waiting long: pass even if the gate
                # closed again before this task ran (with many readers a round can
                # outlast an open phase, and a reader that re-parked could wait phase
                # after phase).
                return
            if not self._demand or not self._closed_now(now):
                return

    def _limit(self) -> float:
        return COMMIT_PARK if self._committing else CLOSED_MAX

    def _closed_now(self, now: float) -> bool:
        """Decide the phase at ``now`` (there is demand): close when the readers' open
        phase is used up, open when the closed phase reached its limit."""
        if self._closed:
            if now < self._since + self._limit():  # the watch's deadline, bit for bit
                return True
            self._open(now)
            return False
        if now < self._open_until:
            return False
        self._closed = True
        self._since = now
        return True

    def _open(self, now: float) -> None:
        self._closed = False
        self._opens += 1
        self._opened_at = now
        # Earned by the closed time up to the limit: a phase stretched by a long batch
        # or by the OS not running us does not buy readers a long open phase.
        closed_for = min(now - self._since, self._limit())
        self._open_until = now + closed_for * ((1 - SHARE) / SHARE)
        self._lot.unpark_all()

    async def _park(self) -> None:
        """Park until the gate opens; the first parked reader holds the phase's timeout."""
        if self._watch is not None:
            await self._lot.park()
            return
        try:
            with trio.move_on_at(self._since + self._limit()) as self._watch:
                await self._lot.park()
        except BaseException:
            self._watch = None
            self._lot.unpark()  # hand the watch to another parked reader, if any
            raise
        self._watch = None

    def _check(self) -> None:
        """Assert the gate's invariants."""
        assert self._demand >= 0, self._demand
        assert self._closed or not self._demand or not self._lot, "parked while open"
        assert not self._closed or self._demand, "closed with no demand"
