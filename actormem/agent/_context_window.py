"""Conversation windows: what the model sees of a conversation on each turn.

Theory of operation
-------------------
A :class:`WindowContext` stores every recorded message with its token count (counted
once, at :meth:`~WindowContext.record`) and whether it is protected. Storage only grows by
appending, except when a trim strategy *replaces* whole rounds (the summarizer stores one
summary message in place of the rounds it summarized).

A *round* is a user message and everything after it up to the next user message, so an
assistant message and the tool results answering it always share a round. Messages
before the first user message form a leading round of their own, and so does each block
of messages a strategy stored as a replacement. A round is *protected* when it holds a
protected message.

:meth:`~WindowContext.context` cuts storage into rounds and hands them to the strategy,
which returns the messages the model sees and, optionally, rounds to replace in storage.
The window rule (:func:`keep_rounds`) is the same for every built-in strategy: when the
whole conversation is within the :class:`Budget`, everything is kept; otherwise the
protected rounds and the newest round are kept, then older rounds from newest to oldest
while they fit, stopping at the first that does not. Kept rounds stay in chronological
order.

Invariants (checked by ``_check``): token counts are ints >= 0; the messages of one
replacement block are contiguous.

Sources: molo_agent's ``WindowMemory``, ``WindowDrop``, ``CharTokenCounter`` and
``Budget``. Unlike molo, protected rounds keep their chronological place instead of
moving to the front.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs
import trio

from .._util import Final
from ._context_message import Message, Role

__all__ = [
    "Budget",
    "CharTokenCounter",
    "ContextMemory",
    "InMemoryContext",
    "Round",
    "TokenCounter",
    "TrimResult",
    "TrimStrategy",
    "WindowContext",
    "WindowDrop",
    "keep_rounds",
]


@runtime_checkable
class ContextMemory(Protocol):
    """Manages an agent's context: which messages the model sees each turn.

    The inference loop hands every new message (user input, assistant reply, tool
    result) to :meth:`record` or :meth:`record_protected` and fetches the context with
    :meth:`context` before each model request. How messages are stored and trimmed is
    up to the implementation, but no implementation separates an assistant message
    from the tool results that answer it. Source: molo_agent's ``Memory`` trait.
    """

    async def record(self, message: Message) -> None:
        """Append ``message`` to the end of the conversation."""
        ...

    async def record_protected(self, message: Message) -> None:
        """Append ``message``; trimming never removes it (e.g. a skill's instructions)."""
        ...

    async def context(self) -> list[Message]:
        """The messages to send, in order of occurrence, as a new list the caller owns."""
        ...


class TokenCounter(Protocol):
    """Counts the tokens of one message. Must be synchronous and return an int >= 0."""

    def count(self, message: Message) -> int: ...


def _check_message(message: object) -> Message:
    if not isinstance(message, Message):
        raise TypeError(f"expected a Message, not {type(message).__name__}")
    return message


async def _record_atomically() -> None:
    # Either the call is cancelled before it changes anything, or it completes.
    await trio.lowlevel.checkpoint_if_cancelled()


@attrs.define(slots=True, eq=False)
class _Stored:
    message: Message
    tokens: int
    protected: bool
    #: ``None`` for a recorded message; a shared object for messages a strategy stored as
    #: one replacement block, which forms a round of its own.
    block: object | None = None


class InMemoryContext(metaclass=Final):
    """Keeps every message verbatim and never trims (molo_agent's ``InMemoryMemory``).

    Protected and ordinary messages are treated alike, since nothing is ever removed.
    Storage grows without bound: use :class:`WindowContext` for long conversations.
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []

    async def record(self, message: Message) -> None:
        """Append ``message``. O(1) amortized.

        Raises:
            TypeError: ``message`` is not a :class:`Message`.
        """
        _check_message(message)
        await _record_atomically()
        self._messages.append(message)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def record_protected(self, message: Message) -> None:
        """Same as :meth:`record`: this context never removes anything."""
        await self.record(message)

    async def context(self) -> list[Message]:
        """Every recorded message, oldest first, as a new list. O(n)."""
        await trio.lowlevel.checkpoint()
        return list(self._messages)


def _check_limit(instance: object, attribute: attrs.Attribute[int | None], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{attribute.name} must be an int or None, not {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen(kw_only=True, slots=True)
class Budget(metaclass=Final):
    """How much conversation a :class:`WindowContext` shows (molo_agent's ``Budget``).

    The conversation is over budget when its total token count exceeds ``max_tokens``
    or its number of rounds exceeds ``max_rounds``. ``None`` means no limit of that
    kind; ``Budget()`` never trims.

    Attributes:
        max_tokens: Token limit (int >= 0) or ``None``.
        max_rounds: Round limit (int >= 0) or ``None``.

    Raises:
        TypeError: A limit is neither an int nor ``None`` (``bool`` is refused).
        ValueError: A limit is negative.
    """

    max_tokens: int | None = attrs.field(default=None, validator=_check_limit)
    max_rounds: int | None = attrs.field(default=None, validator=_check_limit)

    def exceeded(self, tokens: int, rounds: int) -> bool:
        """Whether ``tokens`` tokens in ``rounds`` rounds are over this budget."""
        return (self.max_tokens is not None and tokens > self.max_tokens) or (
            self.max_rounds is not None and rounds > self.max_rounds
        )


# CJK ideographs: the CJK Unified Ideographs block and its extensions A to I, and the two
# CJK Compatibility Ideographs blocks (Unicode 15.1 block ranges).
_CJK_IDEOGRAPH = re.compile(
    "[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002a6df\U0002a700-\U0002ee5f\U0002f800-\U0002fa1f\U00030000-\U000323af]"
)


@attrs.frozen(slots=True)
class CharTokenCounter(metaclass=Final):
    """A local token estimate that needs no tokenizer (molo_agent's ``CharTokenCounter``).

    Rule, per text piece: each CJK ideograph counts 1 token; the other code points of
    the piece count ``ceil(n / 4)`` together. "hello" is 2, "abcd" 1, "你好世界" 4,
    "你好 ab" 3 (2 ideographs plus ``ceil(3 / 4)`` for " ab"), "" 0.

    CJK ideographs are the code points of the CJK Unified Ideographs block (U+4E00 to
    U+9FFF), its extensions A to I (U+3400 to U+4DBF, U+20000 to U+2A6DF, U+2A700 to
    U+2EE5F, U+30000 to U+323AF) and the CJK Compatibility Ideographs blocks (U+F900 to
    U+FAFF, U+2F800 to U+2FA1F). Kana, Hangul and CJK punctuation count as other
    characters.

    A message's pieces are its content; for an assistant message also its reasoning and
    the arguments of each tool call (tool names and ids are not counted). Role overhead
    is not counted.
    """

    def count_text(self, text: str) -> int:
        """Tokens of one text piece. O(n) for n code points."""
        ideographs = len(_CJK_IDEOGRAPH.findall(text))
        return ideographs + math.ceil((len(text) - ideographs) / 4)

    def count(self, message: Message) -> int:
        """Tokens of ``message``: the sum over its pieces. O(total length)."""
        total = self.count_text(message.content)
        if message.reasoning is not None:
            total += self.count_text(message.reasoning)
        for call in message.tool_calls:
            total += self.count_text(call.arguments)
        return total


@attrs.frozen(kw_only=True, slots=True)
class Round(metaclass=Final):
    """One round of a stored conversation, as a trim strategy sees it.

    Attributes:
        messages: The round's messages, oldest first (never empty).
        tokens: Sum of the messages' token counts.
        protected: Whether any message was recorded with ``record_protected``.
        inserted: Whether a strategy stored these messages as a replacement (such as a
            summary) rather than the conversation recording them.
    """

    messages: tuple[Message, ...]
    tokens: int
    protected: bool
    inserted: bool


def _check_replacement(instance: TrimResult, attribute: object, value: tuple[int, ...]) -> None:
    if len(set(value)) != len(value) or any(
        isinstance(i, bool) or not isinstance(i, int) or i < 0 for i in value
    ):
        raise ValueError(f"replaced must hold distinct round indices >= 0, got {value!r}")


def _messages(value: Iterable[Message]) -> tuple[Message, ...]:
    messages = tuple(value)
    for message in messages:
        _check_message(message)
    return messages


def _indices(value: Iterable[int]) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen(kw_only=True, slots=True)
class TrimResult(metaclass=Final):
    """What a trim strategy decided (molo_agent's ``TrimResult``).

    Attributes:
        context: The messages the model sees this time, in order.
        replaced: Indices (into the rounds given to the strategy) of unprotected rounds
            to remove from storage; ``()`` leaves storage unchanged.
        replacement: Messages stored, as one round of their own, where the first
            replaced round was. Must be empty when ``replaced`` is.
    """

    context: tuple[Message, ...] = attrs.field(converter=_messages)
    replaced: tuple[int, ...] = attrs.field(
        default=(), converter=_indices, validator=_check_replacement
    )
    replacement: tuple[Message, ...] = attrs.field(default=(), converter=_messages)

    def __attrs_post_init__(self) -> None:
        if self.replacement and not self.replaced:
            raise ValueError("a replacement needs at least one replaced round")


class TrimStrategy(Protocol):
    """Decides what a :class:`WindowContext` shows, given the stored rounds.

    ``trim`` may await (the summarizer calls a model). The window holds its lock while
    a strategy runs, so two ``context()`` calls never trim at the same time; messages
    recorded meanwhile are appended after the rounds the strategy saw.
    """

    async def trim(
        self, rounds: Sequence[Round], budget: Budget, counter: TokenCounter
    ) -> TrimResult: ...


def keep_rounds(
    rounds: Sequence[Round], max_tokens: int | None, max_rounds: int | None
) -> list[int]:
    """The window rule: indices of the rounds to keep, ascending.

    Keeps every protected round and the newest round whatever their size, then walks the
    other rounds from newest to oldest, keeping each while the kept total stays within
    ``max_tokens`` and the kept count within ``max_rounds`` (``None``: no limit), and
    stops at the first round that does not fit. The caller decides beforehand whether
    the conversation is over budget at all.

    Runtime complexity: O(r) for r rounds.
    """
    if not rounds:
        return []
    newest = len(rounds) - 1
    kept = {i for i, r in enumerate(rounds) if r.protected}
    kept.add(newest)
    tokens = sum(rounds[i].tokens for i in kept)
    for i in range(newest - 1, -1, -1):
        if i in kept:
            continue
        if max_tokens is not None and tokens + rounds[i].tokens > max_tokens:
            break
        if max_rounds is not None and len(kept) + 1 > max_rounds:
            break
        kept.add(i)
        tokens += rounds[i].tokens
    return sorted(kept)


def _flatten(rounds: Sequence[Round], indices: Iterable[int]) -> tuple[Message, ...]:
    return tuple(m for i in indices for m in rounds[i].messages)


@attrs.frozen(slots=True)
class WindowDrop(metaclass=Final):
    """Trim by leaving old rounds out (molo_agent's ``WindowDrop``).

    A pure projection: storage is never changed, so raising the budget later brings the
    dropped history back. Storage therefore keeps growing; pair it with a round or
    token limit for what the model sees, not for what the process holds.
    """

    async def trim(
        self, rounds: Sequence[Round], budget: Budget, counter: TokenCounter
    ) -> TrimResult:
        """Apply :func:`keep_rounds` with the full budget when over it. O(r) for r rounds."""
        await trio.lowlevel.checkpoint()
        return drop(rounds, budget)


def drop(rounds: Sequence[Round], budget: Budget) -> TrimResult:
    """:class:`WindowDrop`'s decision, synchronously (also the summarizer's fallback)."""
    total = sum(r.tokens for r in rounds)
    if not budget.exceeded(total, len(rounds)):
        return TrimResult(context=_flatten(rounds, range(len(rounds))))
    kept = keep_rounds(rounds, budget.max_tokens, budget.max_rounds)
    return TrimResult(context=_flatten(rounds, kept))


class WindowContext(metaclass=Final):
    """A conversation trimmed to a budget on every :meth:`context` call.

    Source: molo_agent's ``WindowMemory``; see the module's theory of operation for the
    round and window rules.

    Args:
        budget: The :class:`Budget`.
        counter: A :class:`TokenCounter`; :class:`CharTokenCounter` by default.
        strategy: A :class:`TrimStrategy`; :class:`WindowDrop` by default.

    Raises:
        TypeError: ``budget`` is not a :class:`Budget`, or ``counter`` / ``strategy``
            lacks a ``count`` / ``trim`` method.
    """

    def __init__(
        self,
        budget: Budget,
        counter: TokenCounter | None = None,
        strategy: TrimStrategy | None = None,
    ) -> None:
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget, not {type(budget).__name__}")
        counter = CharTokenCounter() if counter is None else counter
        strategy = WindowDrop() if strategy is None else strategy
        if not callable(getattr(counter, "count", None)):
            raise TypeError("counter must have a count(message) -> int method")
        if not callable(getattr(strategy, "trim", None)):
            raise TypeError("strategy must have an async trim(rounds, budget, counter) method")
        self._budget = budget
        self._counter = counter
        self._strategy = strategy
        self._items: list[_Stored] = []
        self._lock = trio.Lock()

    @property
    def budget(self) -> Budget:
        """The :class:`Budget` this window trims to; assign a new one to change it.

        With :class:`WindowDrop`, raising the budget brings dropped history back, since
        dropping never touched storage.

        Raises:
            TypeError: On assignment of something that is not a :class:`Budget`.
        """
        return self._budget

    @budget.setter
    def budget(self, budget: Budget) -> None:
        if not isinstance(budget, Budget):
            raise TypeError(f"budget must be a Budget, not {type(budget).__name__}")
        self._budget = budget

    def _count(self, message: Message) -> int:
        tokens = self._counter.count(message)
        if isinstance(tokens, bool) or not isinstance(tokens, int):
            raise TypeError(f"the token counter returned {type(tokens).__name__}, not int")
        if tokens < 0:
            raise ValueError(f"the token counter returned a negative count, {tokens}")
        return tokens

    async def _append(self, message: Message, *, protected: bool) -> None:
        _check_message(message)
        await _record_atomically()
        # Count before appending: a failing counter raises and records nothing.
        tokens = self._count(message)
        self._items.append(_Stored(message, tokens, protected))
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def record(self, message: Message) -> None:
        """Count ``message`` and append it. O(length of the message).

        Raises:
            TypeError: ``message`` is not a :class:`Message`, or the counter returned a
                non-int.
            ValueError: The counter returned a negative count.
            Exception: Whatever the token counter raised, unchanged.

            In every case nothing is recorded.
        """
        await self._append(message, protected=False)

    async def record_protected(self, message: Message) -> None:
        """As :meth:`record`, and the round that holds ``message`` is never trimmed."""
        await self._append(message, protected=True)

    def stored(self) -> list[Message]:
        """Every stored message (including stored summaries), oldest first, as a new list.

        Unlike :meth:`context` this is not trimmed. O(n).
        """
        return [item.message for item in self._items]

    async def context(self) -> list[Message]:
        """The messages the model sees now, as decided by the strategy, as a new list.

        If the strategy asks to replace rounds, storage is changed before returning.

        Raises:
            Exception: Whatever the strategy raised (the built-in strategies raise
                nothing but cancellation), or the counter while counting a replacement;
                storage is then unchanged.
            ValueError: The strategy asked for an impossible replacement (an index out
                of range, or a protected round).
        """
        async with self._lock:
            groups = self._rounds(list(self._items))
            rounds = [
                Round(
                    messages=tuple(item.message for item in group),
                    tokens=sum(item.tokens for item in group),
                    protected=any(item.protected for item in group),
                    inserted=group[0].block is not None,
                )
                for group in groups
            ]
            result = await self._strategy.trim(rounds, self._budget, self._counter)
            if not isinstance(result, TrimResult):
                raise TypeError(f"trim() must return a TrimResult, not {type(result).__name__}")
            if result.replaced:
                self._replace(groups, rounds, result)
            return list(result.context)

    @staticmethod
    def _rounds(items: list[_Stored]) -> list[list[_Stored]]:
        groups: list[list[_Stored]] = []
        previous: _Stored | None = None
        for item in items:
            if (
                previous is None
                or item.message.role is Role.USER
                or item.block is not previous.block
            ):
                groups.append([item])
            else:
                groups[-1].append(item)
            previous = item
        return groups

    def _replace(
        self, groups: list[list[_Stored]], rounds: list[Round], result: TrimResult
    ) -> None:
        for i in result.replaced:
            if i >= len(rounds):
                raise ValueError(f"replaced round {i} does not exist ({len(rounds)} rounds)")
            if rounds[i].protected:
                raise ValueError(f"round {i} is protected and cannot be replaced")
        block = object()
        # Count first: a failing counter leaves storage unchanged.
        replacement = [
            _Stored(message, self._count(_check_message(message)), False, block)
            for message in result.replacement
        ]
        doomed = {id(item) for i in result.replaced for item in groups[i]}
        first = groups[min(result.replaced)][0]
        items: list[_Stored] = []
        for item in self._items:
            if item is first:
                items.extend(replacement)
            if id(item) not in doomed:
                items.append(item)
        self._items = items

    def _check(self) -> None:
        """Assert every invariant of the storage."""
        seen_blocks: set[int] = set()
        previous: object | None = None
        for item in self._items:
            assert isinstance(item.message, Message)
            assert type(item.tokens) is int
            assert item.tokens >= 0
            if item.block is not None and item.block is not previous:
                assert id(item.block) not in seen_blocks, "replacement block split"
                seen_blocks.add(id(item.block))
            previous = item.block
