"""A profile memory shared by many tasks: identity in the prompt, the rest by recall.

Run: python examples/profile_memory.py
"""

from __future__ import annotations

import trio

from actormem.profile import ProfileMemory, RecallOptions


class Clock:
    """A fixed, steppable clock (seconds) so the output is reproducible."""

    now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


async def main() -> None:
    clock = Clock()
    profile = ProfileMemory(clock=clock)
    profile.set("user.name", "Ada")
    profile.set("soul.tone", "dry and brief")
    clock.now += 60
    profile.set("infra.deploy", "deploys go to the blue cluster")
    profile.set("infra.db", "the database is postgres 16")

    print(profile.compile())
    print("---")

    # Many agent tasks write to the one profile at once; nothing is lost.
    async def learn(i: int) -> None:
        await profile.store(f"note.{i}", f"observation number {i}")

    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(learn, i)
    print(f"{len(profile)} keys after 100 concurrent stores")

    for entry in await profile.recall("which cluster do deploys use"):
        print(f"recall: {entry.key} = {entry.value!r} (score {entry.score:.2f})")
    recent = await profile.recall(
        "database deploys", RecallOptions(limit=5, time_range=(clock.now - 30, clock.now))
    )
    print("set in the last 30 s:", [e.key for e in recent])
    strict = await profile.recall(
        "postgres database version", RecallOptions(relevance_threshold=0.5)
    )
    print("score >= 0.5:", [(e.key, round(e.score, 2)) for e in strict])
    print("---")
    print(await profile.compile_relevant("what database do we run?"))


if __name__ == "__main__":
    trio.run(main)
