"""Child process of the replication tests: one node of a replicated memory.

Usage::

    python tests/replica_child.py DSN NAME PATH SEED START COUNT WRITERS

Opens the node (checkpoint PATH), stores ``make_entry(SEED, i)`` for ``i`` in
``[START, START + COUNT)`` from WRITERS concurrent tasks, with an upsert of an earlier
entry after every 7th store; prints ``acked i`` (flushed) as each store returns, then
``stored``. Then reads a line ``check SEQ`` from stdin, waits until the node applied SEQ,
and prints one JSON line ``{"applied": ..., "digest": ..., "ids": [...]}`` and exits.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actormem import open_memory  # noqa: E402
from actormem._engine.replica import ReplicaOptions, encode_snapshot  # noqa: E402
from tests.crash_child import make_entry  # noqa: E402


def state_digest(memory: object) -> tuple[str, list[str]]:
    """A digest of every field of every entry (and insertion numbers), and the ids."""
    state = memory._state  # type: ignore[attr-defined]
    body = json.loads(encode_snapshot(state, 0))
    ids = sorted(e["id"] for _, e in body["entries"])
    return hashlib.sha256(json.dumps(body["entries"]).encode()).hexdigest(), ids


async def main(
    dsn: str, name: str, path: str, seed: int, start: int, count: int, writers: int
) -> None:
    options = ReplicaOptions(poll_interval=0.2, heartbeat_interval=0.2)
    async with open_memory(log=dsn, name=name, path=path, log_options=options) as memory:
        send, receive = trio.open_memory_channel[int](0)

        async def writer() -> None:
            async for i in receive:
                await memory.store(make_entry(seed, i))
                print(f"acked {i}", flush=True)
                if i % 7 == 0 and i > start:
                    await memory.store(make_entry(seed, i - 1))  # an upsert
                    print(f"acked {i - 1}", flush=True)

        async with trio.open_nursery() as nursery:
            for _ in range(writers):
                nursery.start_soon(writer)
            async with send:
                for i in range(start, start + count):
                    await send.send(i)
        print("stored", flush=True)
        line = await trio.to_thread.run_sync(sys.stdin.readline)
        seq = int(line.split()[1])
        await memory.wait_applied(seq)
        digest, ids = state_digest(memory)
        applied = memory.statistics().log_applied_seq
        print(json.dumps({"applied": applied, "digest": digest, "ids": ids}), flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    trio.run(main, a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]))
