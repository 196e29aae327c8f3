"""Review 26a: a replicated node whose way to PostgreSQL stalls (rather than breaks),
and log records that a foreign or corrupt writer put in the log.

* A server that stops answering (a paused server, a stalled path: the TCP connection
  stays open, nothing comes back) blocked a node's append for good: ``store`` hung past
  ``log_timeout`` (docs/replication.md promises ``StorageError`` after it), and so did
  the node's close. A node frozen in the middle of its append holds the memory's row lock
  and blocked every other node's stores the same way.
* A log record whose operation is malformed in some ways (a delete's id that is a
  number, an access count of 1e400, a payload nested past Python's recursion limit)
  raised a raw AttributeError / OverflowError / RecursionError out of the owner, which
  crashed the whole trio run (``actormem serve`` exited with a traceback) instead of
  breaking the memory with a ``LogContentError`` naming the record, as documented. An
  access record with a negative count was applied: an entry with ``access_count`` -4,
  which every other way in refuses; one with a naive time broke the node or not
  depending on the state.
"""

from __future__ import annotations

import json
import uuid

import pytest
import trio

from actormem import Memory, MemoryCategory, MemoryEntry, StorageError, open_memory
from actormem._storage.log import LogContentError
from actormem._storage.pglog import PgLog
from tests.pg import FAST_FAIL, Proxy, sql
from tests.setups import fact


@pytest.mark.timeout(90)  # before the fix the store hung in its thread (no cancel reaches it)
async def test_a_stalled_log_fails_the_store_instead_of_hanging(pg_dsn: str) -> None:
    """The proxy stalls after a first store: the next store fails with StorageError
    (bounded: a few log_timeouts), reads go on; once it thaws the node stores again."""
    proxy = Proxy(pg_dsn)
    async with trio.open_nursery() as nursery:
        await proxy.up(nursery)
        via = proxy.via()
        with trio.fail_after(60):  # the bug: the store below never returned
            async with open_memory(log=via, name="m", log_options=FAST_FAIL) as a:
                kept = fact("kept before the stall")
                await a.store(kept)
                proxy.stall()
                with pytest.raises(StorageError):
                    await a.store(fact("lost in the stall"))
                assert await a.get(kept.id) is not None  # reads go on
                proxy.thaw()
                after = fact("stored after the thaw")
                seq = await a.store(after)
                assert isinstance(seq, int)
                assert await a.get(after.id) is not None
        nursery.cancel_scope.cancel()


@pytest.mark.timeout(90)  # before the fix the store hung in its thread, blocked on the lock
async def test_a_node_frozen_holding_the_row_lock_does_not_block_the_others(
    pg_dsn: str,
) -> None:
    """A session of the log (as a node's append makes it) takes the memory's row lock
    and then goes silent, as a node paused between its append's statements would: the
    server ends that transaction, so another node's store goes through."""
    async with open_memory(log=pg_dsn, name="m", log_options=FAST_FAIL) as a:
        await a.store(fact("first"))
        frozen = await trio.to_thread.run_sync(
            lambda: PgLog.open(pg_dsn, "m", {}, connect_timeout=1.0)
        )
        try:
            conn = frozen._connection()
            conn.execute("BEGIN")
            conn.execute("SELECT head FROM actormem_memories WHERE memory = 'm' FOR UPDATE")
            second = fact("second")
            with trio.fail_after(30):  # the bug: blocked on the lock for good
                seq = None
                while seq is None:  # the first tries may time out while the lock is held
                    try:
                        seq = await a.store(second)
                    except StorageError:
                        pass  # in doubt (docs/replication.md): repeated, an upsert by id
            # A try that timed out on a loaded machine may still have committed (its
            # answer lost): then the repeat is a second record of the same entry.
            assert seq >= 2
            assert sorted(e.memory for e in a.snapshot()) == ["first", "second"]
        finally:
            frozen.close()


def _append_raw(dsn: str, payload: bytes) -> None:
    sql(dsn, "UPDATE actormem_memories SET head = head + 1 WHERE memory = 'm'")
    sql(
        dsn,
        "INSERT INTO actormem_log (memory, seq, batch_id, appended_at, payload) "
        "SELECT 'm', head, gen_random_uuid(), now(), %s FROM actormem_memories "
        "WHERE memory = 'm'",
        payload,
    )


#: An access record for the entry ``_store_until_broken`` stores first (FIRST_ID).
FIRST_ID = "00000000-0000-4000-8000-000000000001"
ACCESS = b'{"v":1,"ops":[["a",[["' + FIRST_ID.encode() + b'",%s]]]]}'


async def _store_until_broken(memory: Memory) -> None:
    while True:  # the node reads the bad record at its next append or poll
        await memory.store(fact("next"))
        await trio.sleep(0.05)


@pytest.mark.parametrize(
    "payload",
    [
        json.dumps({"v": 1, "ops": [["d", 5]]}).encode(),
        b'{"v":1,"ops":[["a",[["00000000-0000-4000-8000-000000000000",1e400,'
        b'"2026-01-01T00:00:00+00:00"]]]]}',
        b'{"v":1,"ops":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ACCESS % b'-5,"2026-01-01T00:00:00+00:00"',
        ACCESS % b'1,"2026-01-01T00:00:00"',
    ],
    ids=[
        "delete-id-a-number",
        "access-count-infinite",
        "nested-too-deep",
        "access-count-negative",
        "access-time-naive",
    ],
)
async def test_a_bad_record_breaks_the_node_with_log_content_error(
    pg_dsn: str, payload: bytes
) -> None:
    """The node stops with LogContentError (its memory broken, the run alive), as for
    any other record it cannot apply."""
    async with open_memory(log=pg_dsn, name="m", log_options=FAST_FAIL) as a:
        first = MemoryEntry(category=MemoryCategory.FACT, memory="first", id=uuid.UUID(FIRST_ID))
        await a.store(first)
        _append_raw(pg_dsn, payload)
        with trio.fail_after(30):
            with pytest.raises(trio.BrokenResourceError) as caught:
                await _store_until_broken(a)
        assert isinstance(caught.value.__cause__, LogContentError)
        assert "log record 2" in str(caught.value.__cause__)


async def test_an_empty_store_many_appends_nothing(pg_dsn: str) -> None:
    """``store_many([])`` (what ``GET /readyz`` sends to check the owner answers) is
    answered without a log record: before, each one appended an empty record to the
    shared log, so every readiness probe of every node grew the log and woke every node."""
    async with open_memory(log=pg_dsn, name="m", log_options=FAST_FAIL) as a:
        seq = await a.store(fact("first"))
        for _ in range(3):
            await a.store_many([])
        assert sql(pg_dsn, "SELECT head FROM actormem_memories WHERE memory = 'm'") == [(seq,)]
        assert await a.store(fact("second")) == seq + 1


async def test_a_hole_in_the_middle_of_the_log_breaks_the_node(pg_dsn: str) -> None:
    """Records 2 and 4 are in the log, 3 is not (a row deleted by hand): the node stops
    with LogContentError naming record 3. Before, each poll applied record 2 to the
    state, met the hole, took it for the log being unreachable, and applied record 2
    again at the next poll (never published, never breaking: wait_applied hung)."""
    async with open_memory(log=pg_dsn, name="m", log_options=FAST_FAIL) as a:
        first = MemoryEntry(category=MemoryCategory.FACT, memory="first", id=uuid.UUID(FIRST_ID))
        await a.store(first)
        hit = ACCESS % b'1,"2026-01-01T00:00:00+00:00"'
        sql(  # records 2 and 4, head 4, in one statement: the node never sees 3
            pg_dsn,
            "WITH h AS (UPDATE actormem_memories SET head = head + 3 WHERE memory = 'm' "
            "RETURNING head) "
            "INSERT INTO actormem_log (memory, seq, batch_id, appended_at, payload) "
            "SELECT 'm', v.s, gen_random_uuid(), now(), %s "
            "FROM h, LATERAL (VALUES (h.head - 2), (h.head)) AS v(s)",
            hit,
        )
        with trio.fail_after(20):
            with pytest.raises(trio.BrokenResourceError) as caught:
                await a.wait_applied(4)
        assert isinstance(caught.value.__cause__, LogContentError)
        assert "log record 3 is missing" in str(caught.value.__cause__)
