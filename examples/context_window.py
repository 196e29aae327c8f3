"""A conversation window: dropping old rounds, then summarizing them instead.

The summarizer below is a stand-in for an LLM call so the output is reproducible: it
lists the user requests it was shown.

Run: python examples/context_window.py
"""

from __future__ import annotations

import trio

from actormem.context import (
    Budget,
    CharTokenCounter,
    Message,
    SummarizeStrategy,
    ToolCall,
    WindowContext,
)


def conversation() -> list[Message]:
    calls = [
        ToolCall(id="c1", name="calc", arguments="1+1"),
        ToolCall(id="c2", name="calc", arguments="2+2"),
    ]
    return [
        Message.user("calculate"),
        Message.assistant(tool_calls=calls),
        Message.tool("2", tool_call_id="c1"),
        Message.tool("4", tool_call_id="c2"),
        Message.user("continue"),
        Message.assistant("okay"),
    ]


def show(label: str, messages: list[Message]) -> None:
    print(f"{label}:")
    for m in messages:
        calls = "".join(f" +call {c.name}({c.arguments})" for c in m.tool_calls)
        print(f"  {m.role.value:9} {m.content!r}{calls}")


async def toy_summarizer(request: list[Message]) -> Message:
    await trio.lowlevel.checkpoint()
    lines = request[-1].content.splitlines()
    asked = [line.removeprefix("user: ") for line in lines if line.startswith("user: ")]
    return Message.assistant("the user asked to " + ", ".join(asked))


async def main() -> None:
    counter = CharTokenCounter()
    print("tokens:", [counter.count_text(t) for t in ["hello", "abcd", "你好世界", "你好 ab"]])

    window = WindowContext(Budget(max_tokens=8))
    for message in conversation():
        await window.record(message)
    show("budget 8", await window.context())
    window.budget = Budget(max_tokens=10)
    show("budget 10", await window.context())

    summarizing = WindowContext(
        Budget(max_tokens=12), strategy=SummarizeStrategy(toy_summarizer, summary_max_tokens=8)
    )
    await summarizing.record_protected(Message.system("Answer in one word."))
    for message in conversation():
        await summarizing.record(message)
    show("summarized", await summarizing.context())
    show("stored", summarizing.stored())


if __name__ == "__main__":
    trio.run(main)
