"""The summarizing trim strategy: old rounds become one stored summary message.

Theory of operation
-------------------
When the conversation is over budget, :class:`SummarizeStrategy` reserves
``summary_max_tokens`` tokens (and one round) for a summary, applies the window rule
(:func:`~actormem.agent._context_window.keep_rounds`) to the rest, and asks the provider to
summarize the unprotected rounds that did not fit. The reply is stored as one system
message, ``Summary of prior context:\\n<reply>``, in place of those rounds, so the work is
not redone on the next call. A summary from an earlier call is among the rounds being
replaced: its text is given to the provider as the previous summary, so summaries merge
instead of piling up.

When the provider raises, replies blank, or the summary cannot be counted, the strategy
falls back to :class:`~actormem.agent._context_window.WindowDrop`'s decision for this call and
leaves storage unchanged, so the next call tries again.

Source: molo_agent's ``SummarizeStrategy``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import trio

from .._util import Final
from ._context_message import Message, Role
from ._context_window import Budget, Round, TokenCounter, TrimResult, drop, keep_rounds
from ._text import escape_line

__all__ = ["SUMMARY_PREFIX", "Provider", "SummarizeStrategy"]

logger = logging.getLogger("actormem.context")

#: A model: takes the request's messages, returns the assistant's reply message.
Provider = Callable[[list[Message]], Awaitable[Message]]

#: First line of every stored summary message.
SUMMARY_PREFIX = "Summary of prior context:\n"

_INSTRUCTION = (
    "You condense the earlier part of a conversation into a summary that replaces it. "
    "Keep the facts, decisions, names, numbers, tool results and open tasks that the rest "
    "of the conversation may still need; drop small talk and repetition. If a previous "
    "summary is given, merge it into the new one. Reply with the summary only, in at most "
    "{limit} tokens."
)


def _render(message: Message) -> list[str]:
    lines: list[str] = []
    if message.role is Role.TOOL:
        lines.append(f"tool result [{message.tool_call_id}]: {escape_line(message.content)}")
        return lines
    if message.reasoning:
        lines.append(f"{message.role.value} (reasoning): {escape_line(message.reasoning)}")
    if message.content or not message.tool_calls:
        lines.append(f"{message.role.value}: {escape_line(message.content)}")
    for call in message.tool_calls:
        lines.append(
            f"{message.role.value} calls {call.name} [{call.id}]: {escape_line(call.arguments)}"
        )
    return lines


def summary_request(
    previous: Sequence[str], messages: Sequence[Message], limit: int
) -> list[Message]:
    """The messages sent to the provider: an instruction and the transcript to condense.

    Each transcript line is one message piece with its line breaks escaped
    (:func:`~actormem.agent._text.escape_line`), so a message cannot fake a second one.
    """
    parts: list[str] = []
    if previous:
        parts.append("Previous summary:\n" + "\n".join(previous))
    lines = [line for m in messages for line in _render(m)]
    parts.append("Conversation to summarize:\n" + "\n".join(lines))
    return [
        Message.system(_INSTRUCTION.format(limit=limit)),
        Message.user("\n\n".join(parts)),
    ]


def _summary_text(message: Message) -> str:
    if message.content.startswith(SUMMARY_PREFIX):
        return message.content[len(SUMMARY_PREFIX) :]
    return message.content


class SummarizeStrategy(metaclass=Final):
    """Replace rounds that do not fit with one stored summary (molo_agent's
    ``SummarizeStrategy``).

    When over budget: the newest rounds that fit in ``max_tokens - summary_max_tokens``
    tokens (and ``max_rounds - 1`` rounds) stay verbatim, along with every protected
    round; the other rounds are replaced in storage by one system message
    ``Summary of prior context:\\n<reply>`` at the place of the oldest of them. The reply
    is stored as the provider gave it; the instruction asks for at most
    ``summary_max_tokens`` tokens. With nothing to summarize the provider is not called.

    Args:
        provider: Async callable taking a ``list[Message]`` and returning the reply
            :class:`Message` (only its ``content`` is used).
        summary_max_tokens: Tokens reserved for the summary, an int >= 0.

    Raises:
        TypeError: ``provider`` is not callable or ``summary_max_tokens`` is not an int.
        ValueError: ``summary_max_tokens`` is negative.
    """

    def __init__(self, provider: Provider, summary_max_tokens: int = 1024) -> None:
        if not callable(provider):
            raise TypeError(f"provider must be an async callable, not {type(provider).__name__}")
        if isinstance(summary_max_tokens, bool) or not isinstance(summary_max_tokens, int):
            raise TypeError(
                f"summary_max_tokens must be an int, not {type(summary_max_tokens).__name__}"
            )
        if summary_max_tokens < 0:
            raise ValueError(f"summary_max_tokens must be >= 0, got {summary_max_tokens}")
        self._provider = provider
        self._summary_max_tokens = summary_max_tokens

    @property
    def summary_max_tokens(self) -> int:
        """Tokens reserved for the summary."""
        return self._summary_max_tokens

    async def trim(
        self, rounds: Sequence[Round], budget: Budget, counter: TokenCounter
    ) -> TrimResult:
        """Decide the window; summarize the rounds that fall out of it.

        Runtime complexity: O(r + n) for r rounds of n messages, plus one provider call
        when there is something new to summarize.
        """
        await trio.lowlevel.checkpoint()
        total = sum(r.tokens for r in rounds)
        if not budget.exceeded(total, len(rounds)):
            return TrimResult(context=tuple(m for r in rounds for m in r.messages))
        max_tokens = (
            None if budget.max_tokens is None else budget.max_tokens - self._summary_max_tokens
        )
        max_rounds = None if budget.max_rounds is None else budget.max_rounds - 1
        kept = set(keep_rounds(rounds, max_tokens, max_rounds))
        older = [i for i in range(len(rounds)) if i not in kept]
        fresh = [i for i in older if not rounds[i].inserted]
        if not fresh:
            # Nothing new to summarize: show the kept rounds and any stored summary.
            return TrimResult(context=tuple(m for r in rounds for m in r.messages))
        previous = [
            _summary_text(m) for i in older if rounds[i].inserted for m in rounds[i].messages
        ]
        request = summary_request(
            previous, [m for i in fresh for m in rounds[i].messages], self._summary_max_tokens
        )
        try:
            reply = await self._provider(request)
            if not isinstance(reply, Message):
                raise TypeError(f"the provider returned {type(reply).__name__}, not Message")
            if not reply.content.strip():
                raise ValueError("the provider returned a blank summary")
            summary = Message.system(SUMMARY_PREFIX + reply.content)
            counter.count(summary)
        except Exception:
            logger.warning(
                "summarizing %d rounds failed; dropping them for this call instead",
                len(fresh),
                exc_info=True,
            )
            return drop(rounds, budget)
        first = older[0]
        context: list[Message] = []
        for i, r in enumerate(rounds):
            if i == first:
                context.append(summary)
            if i in kept:
                context.extend(r.messages)
        return TrimResult(context=tuple(context), replaced=tuple(older), replacement=(summary,))
