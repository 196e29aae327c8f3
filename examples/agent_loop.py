"""An agent loop with long-term memory: trajectories stored, recalled, consolidated.

A scripted model stands in for an LLM so the run is reproducible; swap in a real model
callable (messages in, assistant Message out) to use it for real.

Run: python examples/agent_loop.py
"""

from __future__ import annotations

import json
from typing import Any

import trio

import actormem
from actormem.agent import MemoryHooks, run_agent
from actormem.context import Budget, Message, ToolCall, WindowContext

FILES = {"deploy.md": "Deploys go to the blue cluster.\nRollback: deploy --undo"}


async def read_file(args: dict[str, Any]) -> str:
    """A tool: the text of a file."""
    await trio.lowlevel.checkpoint()
    return FILES[args["path"]]


class ScriptedModel:
    """Replies from a script and shows the memory message of each turn."""

    def __init__(self, name: str, replies: list[Message]) -> None:
        self.name = name
        self.replies = replies
        self.turn = 0

    async def __call__(self, messages: list[Message]) -> Message:
        await trio.lowlevel.checkpoint()
        self.turn += 1
        last = messages[-1]
        if last.content.startswith("Relevant memory"):
            print(f"{self.name}, turn {self.turn} sees:")
            for line in last.content.splitlines():
                print(f"  {line}")
        else:
            print(f"{self.name}, turn {self.turn} sees no memory")
        return self.replies.pop(0)


def read_call(path: str) -> Message:
    arguments = json.dumps({"path": path})
    return Message.assistant(tool_calls=[ToolCall(id="c1", name="read_file", arguments=arguments)])


async def main() -> None:
    async with actormem.open_memory(capacity=1000) as memory:
        hooks = MemoryHooks(memory, top_k=3)
        tools = {"read_file": read_file}

        first = ScriptedModel("run 1", [read_call("deploy.md"), Message.assistant("Blue.")])
        result = await run_agent(
            first,
            tools,
            "Where do deploys go?",
            hooks=hooks,
            context=WindowContext(Budget(max_tokens=4000)),
        )
        print(f"run 1: success={result.success} output={result.output!r} turns={result.turns}")
        stats = result.consolidation
        assert stats is not None
        print(f"run 1: consolidated {stats.entries_before} -> {stats.entries_after} entries")

        second = ScriptedModel("run 2", [Message.assistant("Run deploy --undo.")])
        result = await run_agent(second, tools, "How do I roll back a deploy?", hooks=hooks)
        print(f"run 2: success={result.success} output={result.output!r} turns={result.turns}")
        print(f"entries in memory: {len(memory)}")


if __name__ == "__main__":
    trio.run(main)
