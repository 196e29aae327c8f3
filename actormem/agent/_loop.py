"""A small agent loop with the memory hooks inside: model turns and tool calls.

Theory of operation
-------------------
:func:`run_agent` records the task as a user message, then repeats a *turn*:

1. fetch the conversation from the :class:`~actormem.context.ContextMemory`;
2. ask :meth:`MemoryHooks.before_turn` for a memory message (the query is the task) and
   append it to this turn's request only (it is never recorded);
3. call the model; record its assistant reply;
4. if the reply has no tool calls, the run succeeded: :meth:`MemoryHooks.end_run` is
   called with ``True`` and the reply's content is the output;
5. otherwise run each tool call in order, record one tool message per call, and call
   :meth:`MemoryHooks.after_tool_call` with ``ok`` telling whether the tool succeeded.

A run that reaches ``max_turns`` model turns without a final answer has failed:
``end_run(False)`` skips consolidation. The loop is sequential: one model call or tool
call at a time.

Source: loopctl's engine loop (memory moments) and molo_agent's inference loop (the
context memory).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from .._util import Final
from ._context_message import Message, Role, ToolCall
from ._context_window import ContextMemory, InMemoryContext
from ._hooks import MemoryHooks, _check_namespace, _result_text

if TYPE_CHECKING:
    from .._stats import ConsolidationStats

__all__ = ["Model", "RunResult", "Tool", "run_agent"]

#: A model: takes the request's messages, returns the assistant's reply message.
Model = Callable[[list[Message]], Awaitable[Message]]

#: A tool: takes the call's arguments (the decoded JSON object) and returns its text,
#: or a sequence of text parts (joined by ``"\n"``).
Tool = Callable[[dict[str, Any]], Awaitable[str | Iterable[str]]]


@attrs.frozen(kw_only=True, slots=True)
class RunResult(metaclass=Final):
    """How a :func:`run_agent` run ended.

    Attributes:
        success: Whether the model gave a final answer (a reply without tool calls)
            within ``max_turns`` turns.
        output: The content of the model's last reply.
        turns: Model calls made (>= 1).
        tool_calls: Tool calls executed, successful or not.
        consolidation: The memory's consolidation report when the run succeeded and
            hooks were given, else ``None``.
    """

    success: bool
    output: str
    turns: int
    tool_calls: int
    consolidation: ConsolidationStats | None


async def _call_tool(tools: Mapping[str, Tool], call: ToolCall) -> tuple[object, str, bool]:
    """Run one tool call: (decoded input, result text, ok). Tool failures become text."""
    try:
        arguments = json.loads(call.arguments)
    except ValueError as exc:
        return call.arguments, f"error: arguments are not valid JSON: {exc}", False
    except RecursionError:  # a model's "[[[[...": valid JSON, deeper than Python's stack
        return call.arguments, "error: arguments are JSON nested too deep", False
    if not isinstance(arguments, dict):
        return arguments, "error: arguments must be a JSON object", False
    tool = tools.get(call.name)
    if tool is None:
        return arguments, f"error: unknown tool {call.name!r}", False
    try:
        result = _result_text(await tool(arguments))
    except Exception as exc:
        return arguments, f"error: {type(exc).__name__}: {exc}", False
    return arguments, result, True


async def run_agent(
    model: Model,
    tools: Mapping[str, Tool],
    task: str,
    *,
    hooks: MemoryHooks | None = None,
    context: ContextMemory | None = None,
    system: str | None = None,
    max_turns: int = 10,
    namespace: Sequence[str] | None = None,
) -> RunResult:
    """Run an agent on ``task`` until the model answers without calling a tool.

    Args:
        model: Async callable: the request's messages in, the assistant
            :class:`~actormem.context.Message` out.
        tools: Tool name to async callable (:data:`Tool`). A tool that raises an
            :class:`Exception` gives the model an ``error: <Type>: <message>`` result and
            counts as a failed call; so do unknown tools and arguments that are not a
            JSON object.
        task: The user's request; also the memory query of every turn.
        hooks: :class:`MemoryHooks`, or ``None`` for a run without long-term memory.
        context: Where the conversation is recorded; a fresh
            :class:`~actormem.context.InMemoryContext` by default. Pass a
            :class:`~actormem.context.WindowContext` to trim long runs.
        system: A system prompt, recorded protected before the task (e.g.
            :meth:`ProfileMemory.compile() <actormem.profile.ProfileMemory.compile>`).
        max_turns: Most model calls, an int >= 1.
        namespace: The namespace of this run (an agent, a user, a thread: a tuple or list
            of non-empty str): every hook call stores into it and retrieves from it,
            overriding the hooks' own namespace. ``None``: the hooks' namespace.

    Returns:
        A :class:`RunResult`.

    Raises:
        TypeError: A bad argument type, or the model returned something other than an
            assistant :class:`~actormem.context.Message`.
        ValueError: ``max_turns`` < 1.
        Exception: Whatever the model or the context memory raised (consolidation is
            then skipped).
    """
    if not callable(model):
        raise TypeError(f"model must be an async callable, not {type(model).__name__}")
    if not isinstance(tools, Mapping):
        raise TypeError(f"tools must be a mapping of name to tool, not {type(tools).__name__}")
    if not isinstance(task, str):
        raise TypeError(f"task must be str, not {type(task).__name__}")
    if system is not None and not isinstance(system, str):
        raise TypeError(f"system must be str or None, not {type(system).__name__}")
    if hooks is not None and not isinstance(hooks, MemoryHooks):
        raise TypeError(f"hooks must be MemoryHooks or None, not {type(hooks).__name__}")
    if isinstance(max_turns, bool) or not isinstance(max_turns, int):
        raise TypeError(f"max_turns must be an int, not {type(max_turns).__name__}")
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    if namespace is not None:
        namespace = _check_namespace(namespace)
    conversation: ContextMemory = InMemoryContext() if context is None else context

    tool_calls = 0
    reply: Message | None = None
    try:
        if system is not None:
            await conversation.record_protected(Message.system(system))
        await conversation.record(Message.user(task))
        for turn in range(1, max_turns + 1):
            request = await conversation.context()
            if hooks is not None:
                block = await hooks.before_turn(task, namespace=namespace)
                if block is not None:
                    request.append(Message.user(block))
            reply = await model(request)
            if not isinstance(reply, Message) or reply.role is not Role.ASSISTANT:
                raise TypeError(f"the model must return an assistant Message, got {reply!r}")
            await conversation.record(reply)
            if not reply.tool_calls:
                stats = await hooks.end_run(True) if hooks is not None else None
                return RunResult(
                    success=True,
                    output=reply.content,
                    turns=turn,
                    tool_calls=tool_calls,
                    consolidation=stats,
                )
            for call in reply.tool_calls:
                arguments, text, ok = await _call_tool(tools, call)
                tool_calls += 1
                await conversation.record(Message.tool(text, tool_call_id=call.id))
                if hooks is not None:
                    await hooks.after_tool_call(
                        call.name, arguments, text, ok=ok, namespace=namespace
                    )
    except Exception:
        if hooks is not None:
            await hooks.end_run(False)
        raise
    if hooks is not None:
        await hooks.end_run(False)
    assert reply is not None
    return RunResult(
        success=False,
        output=reply.content,
        turns=max_turns,
        tool_calls=tool_calls,
        consolidation=None,
    )
