"""Storing many entries into a memory file in one transaction: all of them or none.

Theory of operation
-------------------
:func:`store_all_or_nothing` is what ``actormem import`` runs. It does what a durable
memory would do with a run of ``store`` calls, without the owner task and its group
commits of at most a few hundred requests:

1. :meth:`~actormem._storage.sqlite.SqliteStore.open` locks, validates (or creates) and
   reads the file, exactly as :func:`~actormem.open_memory` does;
2. a :class:`~actormem._engine.state.MemoryState` is loaded from its rows and every
   entry is stored into it in order (same upsert rule: a stored id keeps its
   ``created_at``), which fills the state's journal;
3. the whole journal is written as **one** SQLite transaction, in a worker thread;
4. the file's statistics counters grow by the stores made (after the commit, best
   effort, as a memory saves them when it closes).

Entries may come with dense vectors (from an export): those of the model the file's
vectors are of (its ``meta`` rows ``dense_model``/``dense_dim``; a file without one takes
the model most of the vectors have) are written into the ``vectors`` table in the same
transaction, keyed by the hash of the text they were made from, so a memory opened on
the file with that model embeds nothing for them. Vectors of another model are left
out (counted): the engine computes its own when the file is next opened with a dense or
hybrid scorer.

SQLite commits a transaction entirely or not at all, so an interrupt (Ctrl-C: the
connection is interrupted and the transaction rolled back), a full disk or an I/O error
leaves the file as it was; a killed process leaves an uncommitted transaction in the
write-ahead log, which SQLite discards on the next open. The state is thrown away
afterwards: nobody reads it, so nothing needs publishing.
"""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import attrs
import numpy as np
import outcome

from .._entry import MemoryEntry
from .._index.dense import document_text, text_hash
from .._index.wordoverlap import WordOverlapScorer
from .._record import Record
from .._storage.jsonl import JsonVector
from .._storage.sqlite import Batch, Durability, SqliteStore
from .._util import replace_stop_handlers
from .memory import _STATE_COUNTERS
from .state import DEFAULT_HALF_LIFE, MemoryState

__all__ = ["BulkResult", "store_all_or_nothing"]


@attrs.frozen(kw_only=True, slots=True)
class BulkResult:
    """What :func:`store_all_or_nothing` committed.

    Attributes:
        before: Unexpired entries in the file before (as ``len`` of a memory opened on
            it then).
        after: Unexpired entries in the file after (what a memory opened on it holds).
        expired: Entries in the file after whose expiry had passed at the import's time
            (lines with a past ``expires_at``, or older entries): kept in the file, not
            in ``after``; a memory opened on the file removes them.
        added: Stores of a new id.
        replaced: Stores that replaced an entry with the same id (upserts).
        vectors: Dense vectors written with the entries (those of ``model``).
        model: The model the file's vectors are of, or None (no vectors).
        dim: Their dimension (0 without a model).
        other_models: Vectors left out because another model made them:
            ``{(model, dim): count}``.
    """

    before: int
    after: int
    expired: int = 0
    added: int
    replaced: int
    vectors: int = 0
    model: str | None = None
    dim: int = 0
    other_models: dict[tuple[str, int], int] = attrs.field(factory=dict)


def _write_interruptibly(store: SqliteStore, batch: Batch) -> dict[int, Any]:
    """``store.write(batch)`` in a worker thread, with SIGINT and SIGTERM caught meanwhile
    (main thread only): a signal makes the transaction abort at its next statement step
    (:meth:`SqliteStore.abort_when`); once it is rolled back, the signal's previous
    handler runs (Ctrl-C: ``KeyboardInterrupt``). A signal that came after the last
    step lets the commit complete (everything is in the file) and is then dropped.

    No ``KeyboardInterrupt`` can strike between starting the thread and waiting for it
    (which would leave the thread writing on a connection being closed): the handlers
    only note the signal. After a commit they are left in place, so that none can strike
    before the caller knows it committed either: it gets the handlers they replaced,
    and restores them (:func:`_restore`) once the import is reported.
    """
    if threading.current_thread() is not threading.main_thread():
        store.write(batch)  # signal handlers can only be set in the main thread
        return {}
    caught: list[int] = []
    store.abort_when(lambda: bool(caught))
    previous = _hold_signals(caught)
    try:
        result: list[outcome.Outcome[None]] = []
        worker = threading.Thread(
            target=lambda: result.append(outcome.capture(store.write, batch)),
            name="actormem bulk commit",
        )
        worker.start()
        worker.join()
    except BaseException:
        _restore(previous)
        raise
    finally:
        store.abort_when(None)
    if isinstance(result[0], outcome.Value):
        return previous  # committed: signals stay noted and dropped
    _restore(previous)
    if caught:
        _act_on(caught[0], previous)
    result[0].unwrap()
    raise AssertionError("unreachable: an Error outcome raises")


def _hold_signals(caught: list[int]) -> dict[int, Any]:
    """Make SIGINT and SIGTERM only note their number in ``caught`` (main thread only;
    one ignored stays ignored) and return the handlers replaced, for :func:`_restore`
    and :func:`_act_on` (:func:`~actormem._util.replace_stop_handlers`). O(1)."""
    return replace_stop_handlers(lambda signum, frame: caught.append(signum))


class _DefaultAction(BaseException):
    """A noted signal whose handler was the default action (end the process): raised
    by :func:`_act_on` so that the cleanup runs first (a new file removed), then acted
    on by :func:`store_all_or_nothing` on its way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _act_on(signum: int, previous: dict[int, Any]) -> None:
    """Do what the handler ``previous[signum]`` (put back already) would have done with
    a signal :func:`_hold_signals` noted: call it (Ctrl-C: ``KeyboardInterrupt``, the
    CLI's SIGTERM exception), or, for the default action, raise :class:`_DefaultAction`
    (the process then ends once the cleanup has run). Raises ``KeyboardInterrupt`` if
    the handler returns. O(1)."""
    handler = previous[signum]
    if callable(handler):
        handler(signum, None)  # KeyboardInterrupt, or the CLI's SIGTERM exception
    elif handler == signal.SIG_DFL:
        raise _DefaultAction(signum)
    raise KeyboardInterrupt


def _restore(previous: dict[int, Any], *, stay: bool = False) -> None:
    """Put back the signal handlers ``previous`` (signal number -> handler) names, or
    with ``stay`` ignore those signals from now on (``SIG_IGN``). O(1)."""
    for number, handler in previous.items():
        signal.signal(number, signal.SIG_IGN if stay else handler)


def store_all_or_nothing(
    path: str | os.PathLike[str],
    entries: list[MemoryEntry],
    *,
    durability: Durability = Durability.NORMAL,
    vectors: Mapping[uuid.UUID, JsonVector] | None = None,
    report: Callable[[BulkResult], None] | None = None,
    remove_if_created: bool = False,
    signals_stay_dropped: bool = False,
) -> BulkResult:
    """Store ``entries`` in order into the memory file at ``path`` in one transaction.

    The file is created if absent (as :func:`~actormem.open_memory` would), locked while
    this runs (a running memory holding it makes this fail), and either holds every
    entry afterwards or is unchanged. Blocking; call it outside trio (it uses one worker
    thread for the commit so that Ctrl-C can interrupt it).

    Args:
        path: The memory file.
        entries: What to store, in order; a later entry with an id already stored (in
            the file or earlier in the list) replaces it, keeping ``created_at``.
        durability: As :func:`~actormem.open_memory`.
        vectors: Dense vectors of some of the entries, by id, each made from that
            entry's text (see the module docs for which are written).
        report: Called with the result once the import has committed and the file is
            closed, with SIGINT and SIGTERM still dropped (the CLI prints its report
            there, so a signal after the commit cannot cut it off or deny the import).
        remove_if_created: A file this call created (absent when it took the lock) is
            removed again, with its ``-wal`` and ``-shm``, if the import fails before its
            commit; before the lock is released, so never a file that another writer
            (another import, a memory) created: one that held the lock first makes this
            fail with the file left alone.
        signals_stay_dropped: After the commit, SIGINT and SIGTERM stay ignored when this
            returns (main thread only; else they are restored as before): for a process
            that ends once the import is reported (``actormem import``), which a signal
            must not then end with 130 or 143 after a complete import.

    Returns:
        A :class:`BulkResult`.

    Raises:
        StorageError: The file cannot be opened (see :func:`~actormem.open_memory`), or
            the transaction failed (disk full, I/O error): the file is unchanged.
        KeyboardInterrupt: Interrupted before the commit completed; the file is unchanged.

    Runtime complexity: O(file size + n (T + log n)) for n entries in all, plus the
    transaction (O(bytes written)).
    """
    try:
        return _store_all_or_nothing(
            path, entries, durability, vectors, report, remove_if_created, signals_stay_dropped
        )
    except _DefaultAction as exc:
        # A signal whose action was the default one came before the commit: the file is
        # unchanged (a new one removed); end the process as the signal would have.
        signal.raise_signal(exc.signum)
        raise KeyboardInterrupt from None  # (where the default action did not end it)


def _store_all_or_nothing(
    path: str | os.PathLike[str],
    entries: list[MemoryEntry],
    durability: Durability,
    vectors: Mapping[uuid.UUID, JsonVector] | None,
    report: Callable[[BulkResult], None] | None,
    remove_if_created: bool,
    signals_stay_dropped: bool,
) -> BulkResult:
    """:func:`store_all_or_nothing`'s work, which raises :class:`_DefaultAction` for a
    signal to act on once its cleanup has run."""
    # Creating a new file and recording that this call created it (``store.created``,
    # what lets the cleanup remove it) happen with SIGINT and SIGTERM only noted: a
    # signal in between (the directory's fsync can take a while) left an empty file
    # that nothing removed. The noted signal is acted on inside the ``try`` below, so
    # its cleanup removes the file. (An existing file's read stays interruptible.)
    noted: list[int] = []
    held = _hold_signals(noted) if remove_if_created and not os.path.lexists(path) else {}
    try:
        store, rows = SqliteStore.open(os.fspath(path), durability)
    except BaseException:
        _restore(held)  # (a signal noted meanwhile is dropped: the open failed anyway)
        raise
    closed = False
    committed = False
    try:
        _restore(held)
        if noted:
            _act_on(noted[0], held)
        state = MemoryState(capacity=None, half_life=DEFAULT_HALF_LIFE, scorer=WordOverlapScorer())
        state.load(rows)  # capacity None: nothing evicted, nothing to delete
        del rows
        now = datetime.now(UTC)  # the time of every write (a ttl counts from it)
        before = _unexpired(state, now)
        for entry in entries:
            state.store(entry, now)
        meta = store.read_meta()
        model, dim, kept, others = _vectors_to_keep(
            meta.get("dense_model"), meta.get("dense_dim"), vectors or {}
        )
        batch = store.prepare(state.take_journal(), _vector_lookup(kept))
        if batch.vectors and "dense_model" not in meta:
            assert model is not None
            batch.meta.extend([("dense_model", model), ("dense_dim", str(dim))])
        previous = _write_interruptibly(store, batch)
        committed = True
        # Committed: the file holds every entry, and a signal from here on no longer
        # stops the import (docs/cli.md). Noted and dropped (since the commit's last
        # step) until the store is closed and ``report`` has said what was imported:
        # raised here, it made the caller report "nothing imported" of a complete import
        # (and remove a new file). With ``signals_stay_dropped``, for good.
        try:
            saved = store.saved_counters  # the stores count, as a memory's would
            store.save_counters(
                {
                    **saved,
                    **{name: saved.get(name, 0) + getattr(state, name) for name in _STATE_COUNTERS},
                }
            )
            after = _unexpired(state, now)
            result = BulkResult(
                before=before,
                after=after,
                expired=len(state) - after,
                added=state.stores - state.upserts,
                replaced=state.upserts,
                vectors=len(batch.vectors),
                model=model if batch.vectors or "dense_model" in meta else None,
                dim=dim if batch.vectors or "dense_model" in meta else 0,
                other_models=others,
            )
            closed = True  # (a close that fails is not tried again)
            store.close()
            if report is not None:
                report(result)
        finally:
            _restore(previous, stay=signals_stay_dropped)
        return result
    finally:
        if not closed:
            # Already failing (an error, or the first signal): a second signal while the
            # file is closed and removed is dropped, so that it cannot leave the file
            # behind or the lock held.
            held = _hold_signals([])
            try:
                store.close(remove=remove_if_created and store.created and not committed)
            finally:
                _restore(held)


def _unexpired(state: MemoryState, now: datetime) -> int:
    """Entries of ``state`` (all it has applied) that have not expired at ``now``. O(n)
    at worst (see :meth:`View.live_count`)."""
    state.publish()
    return state.view().live_count(now)


def _vectors_to_keep(
    model: str | None, dim_text: str | None, vectors: Mapping[uuid.UUID, JsonVector]
) -> tuple[str | None, int, dict[bytes, bytes], dict[tuple[str, int], int]]:
    """The model to keep vectors of (the file's, else the most common among
    ``vectors``), its dimension, the kept vectors as unit float32 bytes by text hash,
    and how many of each other model are left out. O(total size of the vectors)."""
    counts = Counter((v.model, v.dim) for v in vectors.values())
    if model is None or dim_text is None or not dim_text.isdigit():
        if not counts:
            return None, 0, {}, {}
        model, dim = counts.most_common(1)[0][0]
    else:
        dim = int(dim_text)
    kept: dict[bytes, bytes] = {}
    for v in vectors.values():
        if (v.model, v.dim) == (model, dim):
            vec = np.frombuffer(v.data, "<f4").astype(np.float32)
            norm = float(np.linalg.norm(vec))
            if norm > 0:
                vec /= norm
            kept[v.text_hash] = vec.astype("<f4").tobytes()
    others = {key: n for key, n in counts.items() if key != (model, dim)}
    return model, dim, kept, others


def _vector_lookup(
    kept: dict[bytes, bytes],
) -> Callable[[Record], tuple[bytes, bytes] | None] | None:
    """``vector_of`` for :meth:`SqliteStore.prepare`: a record's kept vector, by the hash
    of its text."""
    if not kept:
        return None

    def vector_of(rec: Record) -> tuple[bytes, bytes] | None:
        digest = text_hash(document_text(rec))
        data = kept.get(digest)
        return None if data is None else (digest, data)

    return vector_of
