"""CPU per call of the agent hooks' own work in the main job, on real tool calls.

Usage (from the project root)::

    python -m stress.bench_hooks [--tool-calls FILE] [--repeats 5] [--limit N]

Two figures, each the best of ``--repeats`` passes over the file's calls, in
microseconds of ``time.thread_time`` per call:

* ``memory_block_us``: :func:`~actormem.agent._hooks.memory_block` of three trajectory
  texts (what ``before_turn`` renders after a retrieve with ``top_k`` 3);
* ``after_tool_call_us``: :meth:`~actormem.MemoryHooks.after_tool_call` with a namespace,
  storing into a memory that does nothing (the hook's formatting and entry building).

No memory, no index: the hooks alone, which the swarm's profile cannot separate from the
rest. Run it with ``PYTHONPATH`` naming another checkout (from a scratch directory) to
compare two versions. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import trio

from actormem import MemoryEntry, MemoryHooks
from actormem.agent._hooks import format_trajectory, memory_block
from actormem.agent._toolcalls import read_tool_calls

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from stress._bench_args import existing_file, positive_int  # noqa: E402

DEFAULT_FILE = ROOT.parent / "shared" / "data" / "tool_calls.jsonl"


class _NoMemory:
    """A LoopMemory that does nothing."""

    async def store(self, entry: MemoryEntry) -> None:
        pass

    async def retrieve(
        self, query: str, limit: int, *, namespace: Sequence[str] | None = None
    ) -> list[MemoryEntry]:
        return []

    async def consolidate(self) -> Any:
        return None


def _best(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        run()
        times.append(time.thread_time() - start)
    return min(times)


def run(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse ``argv``, measure, print and return the figures (see the module docs)."""
    p = argparse.ArgumentParser(prog="python -m stress.bench_hooks")
    p.add_argument("--tool-calls", type=existing_file, default=DEFAULT_FILE)
    p.add_argument("--repeats", type=positive_int, default=5)
    p.add_argument("--limit", type=positive_int, default=None, help="use the first N calls")
    args = p.parse_args(argv)
    calls, _ = read_tool_calls(args.tool_calls)
    calls = calls[: args.limit]
    texts = [format_trajectory(c.tool, c.input, c.result) for c in calls]
    groups = [texts[i : i + 3] for i in range(0, len(texts), 3)]
    hooks = MemoryHooks(_NoMemory())

    async def stores() -> None:
        for c in calls:
            await hooks.after_tool_call(c.tool, c.input, c.result, namespace=(c.source, c.episode))

    block = _best(lambda: [memory_block(g) for g in groups], args.repeats)
    store = _best(lambda: trio.run(stores), args.repeats)
    import actormem

    result = {
        "actormem": str(Path(actormem.__file__).parent.parent),
        "calls": len(calls),
        "mean_text_chars": sum(map(len, texts)) / max(1, len(texts)),
        "memory_block_us": block / max(1, len(groups)) * 1e6,
        "after_tool_call_us": store / max(1, len(calls)) * 1e6,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    run()
