"""Child process of the replication tests: one node of a replicated memory.

Usage::

    python tests/replica_child.py DSN NAME PATH SEED START COUNT WRITERS

Opens the node (checkpoint PATH, capacity :data:`CAPACITY`) and runs step ``i`` for ``i``
in ``[START, START + COUNT)`` from WRITERS concurrent tasks (:func:`step`: mostly a store
of ``make_entry(SEED, i)``, printed ``acked i`` (flushed) once it returned; else an
upsert, a delete, a consolidation or a retrieve); then a no-op write (it carries the
last access hits) and ``stored``. Then reads a line ``check SEQ`` from stdin, waits
until the node applied SEQ, and prints one JSON line ``{"applied": ..., "digest": ...}``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
import uuid
from pathlib import Path
from typing import Any

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from actormem import open_memory  # noqa: E402
from actormem._engine.replica import ReplicaOptions, encode_snapshot  # noqa: E402
from tests.crash_child import make_entry  # noqa: E402


def state_digest(state: Any) -> str:
    """A digest of every field of every entry, with insertion numbers."""
    body = json.loads(encode_snapshot(state, 0))
    return hashlib.sha256(json.dumps(body["entries"]).encode()).hexdigest()


#: Every node's capacity: small enough that the stores evict.
CAPACITY = 40


async def step(memory: Any, seed: int, start: int, i: int) -> None:
    """Step ``i`` of a node (see the module docs); prints ``acked ID`` per store."""
    r = random.Random(f"step:{seed}:{i}").random()
    if r < 0.75 or i < start + 3:
        await memory.store(make_entry(seed, i))
        print(f"acked {i}", flush=True)
    elif r < 0.83:
        await memory.store(make_entry(seed, i - 1))  # an upsert (or a store again)
        print(f"acked {i - 1}", flush=True)
    elif r < 0.9:
        await memory.delete(make_entry(seed, i - 2).id)
    elif r < 0.95:
        await memory.consolidate()
    else:
        await memory.retrieve(make_entry(seed, i - 3).memory, 3)


async def main(
    dsn: str, name: str, path: str, seed: int, start: int, count: int, writers: int
) -> None:
    options = ReplicaOptions(poll_interval=0.2, heartbeat_interval=0.2)
    async with open_memory(
        log=dsn, name=name, path=path, capacity=CAPACITY, log_options=options
    ) as memory:
        send, receive = trio.open_memory_channel[int](0)

        async def writer() -> None:
            async for i in receive:
                await step(memory, seed, start, i)

        async with trio.open_nursery() as nursery:
            for _ in range(writers):
                nursery.start_soon(writer)
            async with send:
                for i in range(start, start + count):
                    await send.send(i)
        await memory.delete(uuid.uuid4())  # appends the access hits still buffered
        print("stored", flush=True)
        line = await trio.to_thread.run_sync(sys.stdin.readline)
        seq = int(line.split()[1])
        await memory.wait_applied(seq)
        print(
            json.dumps(
                {
                    "applied": memory.statistics().log_applied_seq,
                    "digest": state_digest(memory._state),
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    a = sys.argv[1:]
    trio.run(main, a[0], a[1], a[2], int(a[3]), int(a[4]), int(a[5]), int(a[6]))
