"""Soak the engine: many writers, readers, snapshots and consolidations at once.

Checks, while it runs: every held snapshot keeps answering exactly as when it was taken;
every `_check()` of the owner's state passes (between owner batches). At the end: the
accounting identity (entries = stores - upserts - deletes - evictions - pruned - merged).

    python -m stress.soak --seed 1 --seconds 60 --writers 32 --readers 32 --capacity 1000

Prints one JSON line with the figures; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import uuid

import trio

from actormem import BM25Scorer, Memory, MemoryCategory, MemoryEntry, WordOverlapScorer, open_memory

WORDS = (
    "deploy deploys blue green cluster file search glob edit read write the a of to rust go "
    "error timeout retry cache user order flight reservation payment refund İstanbul café ß"
).split()


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12)))


def entry(rng: random.Random, id: uuid.UUID | None = None) -> MemoryEntry:
    e = MemoryEntry(
        id=id or uuid.UUID(int=rng.getrandbits(128), version=4),
        category=rng.choice(list(MemoryCategory)),
        memory=text(rng),
        tags=rng.sample(["infra", "deploy", "x", "y"], rng.randint(0, 2)),
        relevance=rng.choice([0.01, 0.04, 0.05, 0.3, 0.8, 1.0, rng.random()]),
        validated=rng.random() < 0.1,
        namespace=rng.choice([(), ("t",), ("t", "acme"), ("t", "acme-corp")]),
    )
    return e


async def soak(args: argparse.Namespace) -> dict[str, object]:
    rng = random.Random(args.seed)
    deadline = trio.current_time() + args.seconds
    failures: list[str] = []
    ops = {"store": 0, "upsert": 0, "delete": 0, "retrieve": 0, "snapshot_checks": 0, "checks": 0}

    scorer = BM25Scorer() if args.scorer == "bm25" else WordOverlapScorer()
    async with open_memory(capacity=args.capacity, queue_size=256, scorer=scorer) as memory:

        async def writer(n: int) -> None:
            wrng = random.Random(rng.getrandbits(64))
            mine: list[uuid.UUID] = []
            while trio.current_time() < deadline:
                roll = wrng.random()
                if roll < 0.7 or not mine:
                    e = entry(wrng)
                    await memory.store(e)
                    mine.append(e.id)
                    ops["store"] += 1
                elif roll < 0.85:
                    await memory.store(entry(wrng, wrng.choice(mine)))
                    ops["upsert"] += 1
                else:
                    await memory.delete(mine.pop(wrng.randrange(len(mine))))
                    ops["delete"] += 1

        async def reader(n: int) -> None:
            rrng = random.Random(rng.getrandbits(64))
            while trio.current_time() < deadline:
                if rrng.random() < 0.1:
                    await check_snapshot(memory, rrng)
                    continue
                ns = rrng.choice([None, ("t",), ("t", "acme")])
                got = await memory.retrieve(text(rrng), rrng.randint(0, 10), namespace=ns)
                if ns is not None and any(e.namespace[: len(ns)] != ns for e in got):
                    failures.append(f"namespace filter leaked for {ns}")
                ops["retrieve"] += 1

        async def check_snapshot(memory: Memory, rrng: random.Random) -> None:
            snap = memory.snapshot()
            query = text(rrng)
            before = [(e.id, e) for e in snap]
            ranked = [(s.entry.id, s.score) for s in snap.retrieve_scored(query, 5)]
            await trio.sleep(rrng.random() * 0.01)  # let writers move on
            if [(e.id, e) for e in snap] != before or len(snap) != len(before):
                failures.append("a snapshot changed after writes")
            if [(s.entry.id, s.score) for s in snap.retrieve_scored(query, 5)] != ranked:
                failures.append("a snapshot's ranking changed after writes")
            ops["snapshot_checks"] += 1

        async def housekeeper() -> None:
            while trio.current_time() < deadline:
                await trio.sleep(0.2)
                await memory.consolidate()
                try:
                    memory._state._check()  # between owner batches: must hold
                    ops["checks"] += 1
                except AssertionError as exc:
                    failures.append(f"_check failed: {exc!r}")

        async with trio.open_nursery() as nursery:
            for n in range(args.writers):
                nursery.start_soon(writer, n)
            for n in range(args.readers):
                nursery.start_soon(reader, n)
            nursery.start_soon(housekeeper)

        stats = memory.statistics()
        accounted = (
            stats.stores
            - stats.upserts
            - stats.deletes
            - stats.evictions
            - stats.pruned
            - stats.merged
        )
        if accounted != stats.entries:
            failures.append(f"accounting: {accounted} expected, {stats.entries} present")
        memory._state._check()
    return {
        "seed": args.seed,
        "seconds": args.seconds,
        "ops": ops,
        "entries": stats.entries,
        "evictions": stats.evictions,
        "pruned": stats.pruned,
        "merged": stats.merged,
        "failures": failures,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--readers", type=int, default=32)
    parser.add_argument("--capacity", type=int, default=1000)
    parser.add_argument("--scorer", choices=["word-overlap", "bm25"], default="word-overlap")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = trio.run(soak, args)
    result["wall_seconds"] = round(time.perf_counter() - started, 2)
    print(json.dumps(result))
    return 1 if result["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
