"""A fair share of the event loop for the owner: readers wait between slices while
writes are pending.

Theory of operation
-------------------
A retrieve scores its snapshot in the caller's task, in slices of about
:data:`~actormem._index.scoring.RETRIEVE_SLICE` (0.1 ms) with a checkpoint between them.
trio's scheduler runs every runnable task once per *batch* (in an order it picks at
random, forward or reversed). With 64 readers looping, one batch holds 64 reader slices
(~6.4 ms), and a store needs two batches (the owner applies it, then the writer wakes
with its answer): writers' p99 with 64 readers was 5.2x their p99 alone
(docs/benchmarks.md).

The :class:`ReadGate` lets the owner claim a share of the loop that readers cannot take.
*Demand* counts the writes in flight: every awaited call from queueing its request
(or waiting for room to) to taking its answer (:meth:`enter` / :meth:`leave`). Requests
nobody awaits (``store_nowait``, readers' access bookkeeping) claim nothing: with no
caller waiting, the owner needs no priority.
While there is demand the gate alternates two phases:

* **closed**: readers that reach a slice boundary park instead of taking a turn; the
  owner and the writers have the loop to themselves. A closed phase ends when demand
  falls to zero or after :data:`CLOSED_MAX` seconds (:data:`COMMIT_PARK` while a durable
  group commit is in its worker thread: the commit thread needs the GIL, which a running
  reader holds for up to the interpreter's switch interval at a time).
* **open**: a closed phase of ``d`` seconds earns readers ``d * (1 - SHARE) / SHARE``
  seconds of open phase before the gate may close again, so with writes pending all the
  time the owner's side gets :data:`SHARE` of the loop and readers the rest. A closed
  phase that ends because demand fell to zero (every write answered: the owner took what
  it needed) earns at least :data:`OPEN_DONE`: else, with writes coming one by one, the
  gate would close again after a fraction of a batch, and readers would park at most
  slice boundaries. A group commit starting cuts an open phase short once it has lasted
  :data:`OPEN_MIN` (what a closed phase of :data:`CLOSED_MAX` earns).

The hand-off is FIFO. Parked readers wait in one queue, in the order they parked. An
opening of ``t`` seconds *admits* the first ``t / ADMIT_SLICE`` of them (every one when
demand fell to zero): each runs one slice, then meets the gate again. The rest stay
parked, first in line for the next opening, and no reader passes one that is parked
(while some are, a reader reaching a boundary parks behind them, even in an open phase).
A reader that passed an open gate checks it again after its schedule point (trio may run
it after the open phase ended) and, if it closed meanwhile, parks at the front of the
line; an admitted reader whose turn comes after the open phase ended does the same, and
the next opening lets either through whatever the gate then says. So no reader starts a
slice in a closed phase: the owner's phase is the owner's from its start, not after a
batch of readers let through just before it closed. A reader parked behind ``q`` others
is through by the ``ceil((q + 1) / admitted)``-th opening (64 readers and a 2.6 ms open
phase, 26 admitted: by the third); it never re-parks phase after phase.

The gate before this one (still there, ``ReadGate.fifo = False``, so that benchmarks
compare both in one process) woke every parked reader at each opening. With 64 readers a
batch outlasts the open phase, so the readers late in it found the gate closed again and
re-parked, at random, phase after phase (the main job's retrieve p99 was 3-4x its value
without the gate); a rule then let a reader that had waited :data:`STARVE_MAX` pass
anyway, which cured that but let whole batches run, and every reader that had passed an
open gate ran its next slice whatever the phase: the owner's phases were mostly
readers' (writers' p99 beside 64 readers 3.6-5.1x alone; docs/benchmarks.md, "The fair
share, FIFO").

Invariants: every parked reader is admitted after a bounded number of openings (FIFO,
at least one admitted per opening), and an opening comes at most a closed phase's limit
after the gate closed, whether or not any reader reaches a boundary: one parked reader
holds a timeout (the *watch*) for the end of the closed phase (while open with readers
parked: of the closed phase that follows the open one) and, when it fires, opens the
gate and goes through (if a reader at a boundary opened it first, after the timeout
fired and before the watch's holder ran, that opening lets the holder through first). A
watch that is admitted or cancelled is handed to the reader first in line, woken to park
again at the front with the timeout. With no demand the gate costs a reader one
attribute test per slice. Phase changes happen lazily, at
readers' slice boundaries and at the watch's timeout, on trio's clock
(``trio.current_time()``, read only while there is demand), so tests drive the gate with
:class:`trio.testing.MockClock`. No trio import is needed by the state (this gate lives
beside the owner, not in ``state.py``).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import outcome
import trio
from trio import current_time as _current_time
from trio import lowlevel as _lowlevel

# (`_current_time`, `_lowlevel`: trio's module defines a __getattr__, so CPython 3.11
# cannot specialize a `trio.X` read and each is a generic lookup; the hot paths read
# these names instead: the same objects, trio.lowlevel's attributes still patchable.)

__all__ = [
    "ADMIT_SLICE",
    "CLOSED_MAX",
    "COMMIT_PARK",
    "OPEN_DONE",
    "OPEN_MIN",
    "SHARE",
    "STARVE_MAX",
    "ReadGate",
    "ScoringSlots",
]

#: The owner's share of the loop while writes are pending (readers get ``1 - SHARE``).
#: 0.7: beside 64 looping readers, 64 writers' p99 1.65-2.1x their p99 alone, against
#: 1.7-3.3x with 0.6 in the same sitting (docs/benchmarks.md, "The fair share, FIFO").
SHARE = 0.7
#: Longest closed phase, in seconds, while no commit runs.
CLOSED_MAX = 0.006
#: Longest closed phase, in seconds, while a durable group commit is in its thread.
COMMIT_PARK = 0.25
#: Seconds of loop one admitted reader is counted for: a retrieve's slice
#: (:data:`~actormem._index.scoring.RETRIEVE_SLICE`). An opening of ``t`` seconds admits
#: ``t / ADMIT_SLICE`` parked readers (at least one).
ADMIT_SLICE = 1e-4
#: Only with ``fifo`` off (the gate before the FIFO hand-off): a reader that has waited
#: this long at one slice boundary passes when an opening wakes it, even if the gate
#: closed again before it ran.
STARVE_MAX = CLOSED_MAX
#: Shortest open phase a commit starting cuts short: what a closed phase of
#: :data:`CLOSED_MAX` earns readers.
OPEN_MIN = CLOSED_MAX * (1 - SHARE) / SHARE
#: Shortest open phase, in seconds, after a closed phase that ended because every write
#: was answered (4 ms: what a full closed phase earned readers with ``SHARE`` 0.6; with
#: the 2.6 ms of 0.7 the main job's retrieve p99 was 1.38x the old gate's, with 4 ms
#: 1.25x, in two sittings).
OPEN_DONE = 0.004

#: Switch between the FIFO hand-off (True) and the gate before it (False: every opening
#: wakes every parked reader, readers re-check only after a park, STARVE_MAX): read when
#: a gate is made; benchmarks flip ``ReadGate.fifo`` to compare in one process.
_FIFO = True

# What a parked reader is woken with.
_ADMITTED = 0  # an opening let it through
_RELAY = 1  # it is to hold the watch for the readers still parked (re-parks at the head)


class ReadGate:
    """Where readers wait between slices while the owner takes its share of the loop.

    Used by one trio run (the memory's); not thread-safe. See the module docs.

    Attributes:
        enabled: False turns the gate off (readers never park): for benchmarks that
            compare, and as an escape hatch.
        fifo: True (the default, :data:`_FIFO`): an opening admits parked readers in
            the order they parked, as many as its length pays for, and no reader passes
            one that is parked. False: the gate before that (every opening wakes every
            parked reader; :data:`STARVE_MAX`); for benchmarks that compare.
        parks: How many times a reader parked (statistics for tests and benchmarks).
    """

    __slots__ = (
        "_closed",
        "_committing",
        "_demand",
        "_open_until",
        "_opened_at",
        "_first",
        "_let_through",
        "_queue",
        "_relay",
        "_since",
        "_watch",
        "_watcher",
        "enabled",
        "fifo",
        "parks",
    )

    def __init__(self) -> None:
        self.enabled = True
        self.fifo = _FIFO
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
        #: The parked readers, in the order they will be admitted: ``_first`` (readers
        #: back from an admission or a pass the gate's closing cut short, and the watch
        #: taking over), then ``_queue`` (first parked first).
        self._first: OrderedDict[trio.lowlevel.Task, None] = OrderedDict()
        self._queue: OrderedDict[trio.lowlevel.Task, None] = OrderedDict()
        #: The timeout of the parked reader that holds the watch, and that reader.
        self._watch: trio.CancelScope | None = None
        self._watcher: trio.lowlevel.Task | None = None
        #: A parked reader woken to take over the watch, until it has re-parked.
        self._relay: trio.lowlevel.Task | None = None
        #: The watch's holder when an opening came after its timeout fired and before it
        #: ran (the timeout took it off the line): that opening let it through first.
        self._let_through: trio.lowlevel.Task | None = None
        self.parks = 0

    # ------------------------------------------------------------ the write side

    def enter(self) -> None:
        """A write is in flight (a caller is queueing, or waiting for the answer to, an
        awaited request). O(1)."""
        self._demand += 1

    def leave(self) -> None:
        """A write is no longer in flight; with none left, the gate opens and every parked
        reader goes through. O(1), plus O(parked) when it opens."""
        self._demand -= 1
        if not self._demand and (self._closed or self._first or self._queue):
            self._open(_current_time())

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

    def _deadline(self) -> float:
        """When the watch fires: the end of the closed phase, or, while open (readers
        still parked), the end of the closed phase that would start when it closes."""
        if self._closed:
            return self._since + self._limit()
        return self._open_until + self._limit()

    def _rewatch(self) -> None:
        if self._watch is not None:
            self._watch.deadline = self._deadline()

    # ------------------------------------------------------------ the read side

    @property
    def closed(self) -> bool:
        """Whether the gate is in a closed phase (the phase as last decided)."""
        return self._closed

    def would_park(self) -> bool:
        """Whether a reader reaching a slice boundary now would park (deciding the phase
        now, as :meth:`checkpoint` does). O(1)."""
        return bool(self._demand) and self.enabled and self._must_park(_current_time())

    async def checkpoint(self) -> None:
        """A reader's slice boundary: a trio checkpoint, or, while writes are pending and
        the gate is closed (or, with ``fifo``, other readers are parked), a park until an
        opening admits this reader. A schedule point and a cancel point either way.

        With ``fifo`` parked readers are admitted in the order they parked, as many per
        opening as its open phase pays for (:data:`ADMIT_SLICE`); a reader that passed
        an open gate checks it again after its schedule point and parks if it closed
        meanwhile (it runs no slice in the owner's phase).

        Runtime complexity: O(1) (admitting parked readers is O(admitted), per opening).
        """
        if not self._demand or not self.enabled:
            await _lowlevel.checkpoint()
            return
        head = admitted = False
        if not self._must_park(_current_time()):
            await _lowlevel.checkpoint()
            if not self.fifo or not self._demand or not self.enabled:
                return
            if not self._closed_now(_current_time()):
                return
            # The gate closed while this reader waited for its turn (readers parked
            # meanwhile stay behind it: it was let through): it goes first, and through
            # at the next opening.
            head = admitted = True
        since = _current_time()
        while True:
            self.parks += 1
            how = await self._park(head)
            head = False
            now = _current_time()
            if how == _RELAY:
                self._relay = None
            if not self._demand or not self.enabled:
                self._hand_over()  # readers still parked (gate disabled) need a watch
                return
            if how == _ADMITTED:
                if not self.fifo:  # the gate before the FIFO hand-off
                    if now - since >= STARVE_MAX or not self._closed_now(now):
                        return
                    continue  # woken, but it closed again: re-park
                if admitted or not self._closed_now(now):
                    return
                # Admitted, but the open phase ended before this reader ran (the batch
                # ran late, or in reverse): back first in line, and through at the next
                # opening whatever the gate then says.
                admitted = head = True
                continue
            if how == _RELAY or now < self._deadline():
                head = True  # hold the watch for the others, first in line
                continue
            # The watch fired: the phase limit passed; this reader goes first.
            self._open(now, running=1)
            return

    def _must_park(self, now: float) -> bool:
        """Whether a reader at a boundary now parks (there is demand): the gate is closed
        (deciding the phase now), or with ``fifo`` readers parked before it still wait
        for their turn. A reader whose check ends a closed phase passes."""
        if self._closed:
            if now < self._since + self._limit():  # the watch's deadline, bit for bit
                return True
            self._open(now, running=1)
            return False
        if now >= self._open_until:
            self._close(now)
            return True
        return self.fifo and bool(self._first or self._queue)

    def _limit(self) -> float:
        return COMMIT_PARK if self._committing else CLOSED_MAX

    def _closed_now(self, now: float) -> bool:
        """Decide the phase at ``now`` (there is demand): close when the readers' open
        phase is used up, open when the closed phase reached its limit."""
        if self._closed:
            if now < self._since + self._limit():
                return True
            self._open(now, running=1)
            return False
        if now < self._open_until:
            return False
        self._close(now)
        return True

    def _close(self, now: float) -> None:
        self._closed = True
        self._since = now
        self._rewatch()

    def _open(self, now: float, running: int = 0) -> None:
        """Open the gate at ``now``; admit parked readers (``running`` of them already
        run: the watch that fired)."""
        if not self._closed:  # the watch fired while open: as if it closed on time
            self._since = self._open_until
        self._closed = False
        self._opened_at = now
        # Earned by the closed time up to the limit: a phase stretched by a long batch
        # or by the OS not running us does not buy readers a long open phase.
        closed_for = min(now - self._since, self._limit())
        earned = closed_for * ((1 - SHARE) / SHARE)
        if not self._demand and self.fifo:
            # Every write answered: the owner took what it needed, readers get a whole
            # open phase before the next write may close the gate again.
            earned = max(earned, OPEN_DONE)
        self._open_until = now + earned
        if self._let_through is None and self._watch is not None and self._watch.cancel_called:
            # The watch's timeout fired and its holder, off the line, has not run yet:
            # it is the first this opening lets through (else whoever opened the gate
            # first, and the readers admitted now, would overtake it, and it would wait
            # for the next opening).
            self._let_through = self._watcher
            running += 1
        if not self._demand or not self.fifo:
            self._admit(len(self._first) + len(self._queue))
        else:
            self._admit(max(1, math.ceil(earned / ADMIT_SLICE)) - running)

    def _admit(self, count: int) -> None:
        """Wake the first ``count`` parked readers; if some stay parked without a watch,
        wake the next one to take it over."""
        first, queue = self._first, self._queue
        while count > 0 and (first or queue):
            task, _ = (first or queue).popitem(last=False)
            if task is self._watcher:
                self._watch = self._watcher = None
            _lowlevel.reschedule(task, outcome.Value(_ADMITTED))
            count -= 1
        self._hand_over()

    def _hand_over(self) -> None:
        """Readers parked, no watch among them, none on its way to take it: wake the
        first to come back first in line with the watch."""
        if (self._first or self._queue) and self._watch is None and self._relay is None:
            task, _ = (self._first or self._queue).popitem(last=False)
            self._relay = task
            _lowlevel.reschedule(task, outcome.Value(_RELAY))

    async def _park(self, head: bool) -> int:
        """Park until admitted (``_ADMITTED``), asked to hold the watch (``_RELAY``), or,
        holding the watch, until its deadline (``-1``). ``head``: first in line."""
        task = _lowlevel.current_task()
        (self._first if head else self._queue)[task] = None

        def abort(_: object) -> trio.lowlevel.Abort:
            self._first.pop(task, None)
            self._queue.pop(task, None)
            return _lowlevel.Abort.SUCCEEDED

        if self._watch is not None:
            how: int = await _lowlevel.wait_task_rescheduled(abort)
            return how
        try:
            with trio.move_on_at(self._deadline()) as watch:
                self._watch, self._watcher = watch, task
                how = await _lowlevel.wait_task_rescheduled(abort)
                return how
            if self._let_through is task:  # an opening came before this reader ran
                self._watch = self._watcher = None
                self._hand_over()
                return _ADMITTED
            return -1  # the deadline came
        except BaseException:
            if self._watcher is task:
                self._watch = self._watcher = None
            self._hand_over()  # to another parked reader, if any
            raise
        finally:
            if self._watcher is task:
                self._watch = self._watcher = None
            if self._let_through is task:
                self._let_through = None

    def _check(self) -> None:
        """Assert the gate's invariants."""
        assert self._demand >= 0, self._demand
        parked = self._first or self._queue
        assert self._closed or not self._demand or not parked or self.fifo, "parked while open"
        assert not self._closed or self._demand, "closed with no demand"
        assert not parked or self._watch is not None or self._relay is not None, (
            "readers parked with no watch"
        )
        assert not (self._first.keys() & self._queue.keys()), "parked twice"
        assert self._let_through is None or self._let_through is self._watcher, (
            "let through without holding the watch"
        )


class _SlotStatistics:
    """What :meth:`ScoringSlots.statistics` returns (the fields of trio's
    ``CapacityLimiterStatistics`` that callers read)."""

    __slots__ = ("borrowed_tokens", "tasks_waiting", "total_tokens")

    def __init__(self, borrowed: int, total: int, waiting: int) -> None:
        self.borrowed_tokens = borrowed
        self.total_tokens = total
        self.tasks_waiting = waiting


class ScoringSlots:
    """A memory's scoring slots (``memory.SCORING_SLOTS``): at most ``total`` retrieves
    hold one at once, the others wait first come first served, and a slot given back
    goes straight to the first waiter. What trio's :class:`trio.CapacityLimiter` does
    for the memory, less its cost: a retrieve that waits parks with one
    :func:`trio.lowlevel.wait_task_rescheduled` (no :class:`trio.CancelScope` of the
    memory's own, no ``WouldBlock`` raised, no parking lot), a slot is taken and given
    back with a set operation, and :meth:`stop_waiters` wakes every waiter with no slot
    when the memory closes or breaks. Cancelled while waiting, a retrieve leaves the
    queue and takes no slot. The limiter's methods that the memory's tests and tools
    call (``acquire_on_behalf_of_nowait``, ``acquire_on_behalf_of``,
    ``release_on_behalf_of``, ``borrowed_tokens``, ``statistics``, ``async with``)
    behave as the limiter's. No lock: one trio thread.

    Args:
        total: Slots (>= 1).
    """

    __slots__ = ("_held", "_total", "_waiters")

    def __init__(self, total: int) -> None:
        if type(total) is not int or total < 1:
            raise ValueError("total must be an int >= 1")
        self._total = total
        #: The borrowers holding a slot.
        self._held: set[object] = set()
        #: The waiting tasks, first come first: task -> its borrower.
        self._waiters: dict[trio.lowlevel.Task, object] = {}

    @property
    def total_tokens(self) -> int:
        """Slots in all. O(1)."""
        return self._total

    @property
    def borrowed_tokens(self) -> int:
        """Slots held now. O(1)."""
        return len(self._held)

    def statistics(self) -> _SlotStatistics:
        """Slots held and in all, tasks waiting. O(1)."""
        return _SlotStatistics(len(self._held), self._total, len(self._waiters))

    @trio.lowlevel.enable_ki_protection
    def take(self, borrower: object) -> bool:
        """Take a slot for ``borrower`` if one is free and nobody waits: True; else
        False (nothing taken). Never blocks. O(1)."""
        held = self._held
        if len(held) < self._total and not self._waiters:
            held.add(borrower)
            return True
        return False

    @trio.lowlevel.enable_ki_protection
    async def wait(self, borrower: object) -> bool:
        """Wait, last in line, until a slot is handed to ``borrower`` (True) or
        :meth:`stop_waiters` is called (False: nothing taken). Only after :meth:`take`
        said False with no schedule point since. A cancel while waiting leaves the line
        and raises :class:`trio.Cancelled` (nothing taken). O(1)."""
        task = _lowlevel.current_task()
        waiters = self._waiters
        waiters[task] = borrower

        def abort(raise_cancel: object) -> trio.lowlevel.Abort:
            del waiters[task]
            return _lowlevel.Abort.SUCCEEDED

        got: bool = await _lowlevel.wait_task_rescheduled(abort)
        return got

    @trio.lowlevel.enable_ki_protection
    def give_back(self, borrower: object) -> None:
        """Give ``borrower``'s slot back, to the first waiter if any (a borrower holding
        none: nothing happens). O(1)."""
        held = self._held
        if borrower not in held:
            return
        held.remove(borrower)
        waiters = self._waiters
        while waiters and len(held) < self._total:
            task = next(iter(waiters))
            held.add(waiters.pop(task))
            _lowlevel.reschedule(task, outcome.Value(True))

    @trio.lowlevel.enable_ki_protection
    def stop_waiters(self) -> None:
        """Wake every waiting task with no slot (their :meth:`wait` returns False).
        O(waiters)."""
        waiters, self._waiters = self._waiters, {}
        for task in waiters:
            _lowlevel.reschedule(task, outcome.Value(False))

    # The limiter's names, for callers written against trio.CapacityLimiter.

    @trio.lowlevel.enable_ki_protection
    def acquire_on_behalf_of_nowait(self, borrower: object) -> None:
        """Take a slot for ``borrower`` now (:meth:`take`).

        Raises:
            RuntimeError: ``borrower`` holds one already.
            trio.WouldBlock: None is free, or tasks wait.
        """
        if borrower in self._held:
            raise RuntimeError("this borrower holds a slot already")
        if not self.take(borrower):
            raise trio.WouldBlock

    @trio.lowlevel.enable_ki_protection
    async def acquire_on_behalf_of(self, borrower: object) -> None:
        """Take a slot for ``borrower``, waiting in line if need be (a checkpoint).

        Raises:
            RuntimeError: ``borrower`` holds one already.
            trio.ClosedResourceError: :meth:`stop_waiters` was called while waiting.
        """
        await _lowlevel.checkpoint_if_cancelled()
        if borrower in self._held:
            raise RuntimeError("this borrower holds a slot already")
        if self.take(borrower):
            await trio.lowlevel.cancel_shielded_checkpoint()
        elif not await self.wait(borrower):
            raise trio.ClosedResourceError("the slots were stopped")

    @trio.lowlevel.enable_ki_protection
    def release_on_behalf_of(self, borrower: object) -> None:
        """Give ``borrower``'s slot back (:meth:`give_back`).

        Raises:
            RuntimeError: ``borrower`` holds none.
        """
        if borrower not in self._held:
            raise RuntimeError("this borrower holds no slot")
        self.give_back(borrower)

    async def __aenter__(self) -> None:
        await self.acquire_on_behalf_of(_lowlevel.current_task())

    async def __aexit__(self, *exc: object) -> None:
        self.release_on_behalf_of(_lowlevel.current_task())
