"""Tests of actormem.context: messages, token counting, windows and summaries."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import hypothesis.strategies as st
import pytest
import trio
import trio.testing
from hypothesis import given, settings

from actormem.context import (
    Budget,
    CharTokenCounter,
    ContextMemory,
    InMemoryContext,
    Message,
    Role,
    Round,
    SummarizeStrategy,
    TokenCounter,
    ToolCall,
    TrimResult,
    WindowContext,
    WindowDrop,
    keep_rounds,
)

from .strategies import examples

COUNTER = CharTokenCounter()


def u(text: str) -> Message:
    return Message.user(text)


def a(text: str) -> Message:
    return Message.assistant(text)


def contents(messages: Sequence[Message]) -> list[str]:
    return [m.content for m in messages]


async def record_all(ctx: ContextMemory, messages: Sequence[Message]) -> None:
    for message in messages:
        await ctx.record(message)


# ---------------------------------------------------------------------------
# Messages


def test_message_roles_and_fields() -> None:
    call = ToolCall(id="c1", name="calc", arguments='{"x":1}')
    m = Message.assistant("hi", reasoning="think", tool_calls=[call])
    assert (m.role, m.content, m.reasoning, m.tool_calls) == (
        Role.ASSISTANT,
        "hi",
        "think",
        (call,),
    )
    t = Message.tool("2", tool_call_id="c1")
    assert (t.role, t.tool_call_id) == (Role.TOOL, "c1")
    assert Message(role="user", content="x") == Message.user("x")
    assert Message.system("s").role is Role.SYSTEM


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"role": "user", "reasoning": "r"}, ValueError),
        ({"role": "system", "tool_calls": [ToolCall(id="c", name="n")]}, ValueError),
        ({"role": "tool", "content": "x"}, ValueError),
        ({"role": "tool", "content": "x", "tool_call_id": ""}, ValueError),
        ({"role": "user", "tool_call_id": "c"}, ValueError),
        ({"role": "robot"}, ValueError),
        ({"role": 1}, TypeError),
        ({"role": "user", "content": None}, TypeError),
        ({"role": "assistant", "tool_calls": ["c"]}, TypeError),
        ({"role": "assistant", "tool_calls": "c"}, TypeError),
        (
            {
                "role": "assistant",
                "tool_calls": [ToolCall(id="c", name="n"), ToolCall(id="c", name="m")],
            },
            ValueError,
        ),
    ],
)
def test_message_rejects_bad_fields(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Message(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"id": "", "name": "n"}, ValueError),
        ({"id": "c", "name": ""}, ValueError),
        ({"id": "c", "name": "n", "arguments": {}}, TypeError),
        ({"id": 1, "name": "n"}, TypeError),
    ],
)
def test_tool_call_rejects_bad_fields(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        ToolCall(**kwargs)


def test_public_classes_are_final() -> None:
    for cls in (
        Message,
        ToolCall,
        Budget,
        CharTokenCounter,
        WindowContext,
        InMemoryContext,
        WindowDrop,
        SummarizeStrategy,
        Round,
        TrimResult,
    ):
        with pytest.raises(TypeError, match="subclassing"):
            type("Sub", (cls,), {})


# ---------------------------------------------------------------------------
# Token counting


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello", 2),
        ("abcd", 1),
        ("abcde", 2),
        ("你好世界", 4),
        ("你好 ab", 3),
        ("", 0),
        ("a", 1),
        ("𠀀𪜀", 2),  # extension B ideographs
        ("豈", 1),  # compatibility ideograph U+F900
        ("ああああ", 1),  # kana are not ideographs
        ("。。。。。", 2),  # neither is CJK punctuation
    ],
)
def test_char_token_counter_text(text: str, tokens: int) -> None:
    assert COUNTER.count_text(text) == tokens


def test_char_token_counter_assistant_counts_content_reasoning_arguments() -> None:
    calls = [
        ToolCall(id="x" * 40, name="y" * 40, arguments="1+1"),
        ToolCall(id="z", name="w", arguments="你好"),
    ]
    m = Message.assistant("abcd", reasoning="hello", tool_calls=calls)
    assert COUNTER.count(m) == 1 + 2 + 1 + 2
    assert COUNTER.count(Message.assistant()) == 0


def test_char_token_counter_tool_message_counts_content_only() -> None:
    assert COUNTER.count(Message.tool("abcdefgh", tool_call_id="a-very-long-id")) == 2


# ---------------------------------------------------------------------------
# InMemoryContext


async def test_in_memory_context_never_trims_and_returns_copies() -> None:
    ctx = InMemoryContext()
    messages = [u(f"u{i}") if i % 2 == 0 else a(f"a{i}") for i in range(1000)]
    await record_all(ctx, messages)
    await ctx.record_protected(Message.system("s"))
    got = await ctx.context()
    assert got == [*messages, Message.system("s")]
    got.clear()
    assert len(await ctx.context()) == 1001


async def test_in_memory_context_rejects_non_messages() -> None:
    ctx = InMemoryContext()
    with pytest.raises(TypeError):
        await ctx.record("hello")  # type: ignore[arg-type]
    assert await ctx.context() == []


def test_contexts_satisfy_the_protocol() -> None:
    assert isinstance(InMemoryContext(), ContextMemory)
    assert isinstance(WindowContext(Budget()), ContextMemory)


# ---------------------------------------------------------------------------
# Budget


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_tokens": -1}, ValueError),
        ({"max_rounds": -1}, ValueError),
        ({"max_tokens": 1.5}, TypeError),
        ({"max_rounds": True}, TypeError),
    ],
)
def test_budget_rejects_bad_limits(kwargs: dict[str, Any], error: type) -> None:
    with pytest.raises(error):
        Budget(**kwargs)


def test_budget_exceeded() -> None:
    assert not Budget().exceeded(10**9, 10**9)
    assert not Budget(max_tokens=5).exceeded(5, 100)
    assert Budget(max_tokens=5).exceeded(6, 1)
    assert not Budget(max_rounds=2).exceeded(100, 2)
    assert Budget(max_rounds=2).exceeded(0, 3)


# ---------------------------------------------------------------------------
# WindowContext with WindowDrop


async def test_window_budget_3_keeps_newest_round() -> None:
    ctx = WindowContext(Budget(max_tokens=3))
    await record_all(ctx, [u("u1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3")])
    assert contents(await ctx.context()) == ["u3", "a3"]


def calculate_conversation() -> list[Message]:
    return [
        u("calculate"),
        Message.assistant(
            tool_calls=[
                ToolCall(id="c1", name="calc", arguments="1+1"),
                ToolCall(id="c2", name="calc", arguments="2+2"),
            ]
        ),
        Message.tool("2", tool_call_id="c1"),
        Message.tool("4", tool_call_id="c2"),
        u("continue"),
        a("okay"),
    ]


async def test_window_budget_8_keeps_tool_results_with_their_call() -> None:
    ctx = WindowContext(Budget(max_tokens=8))
    await record_all(ctx, calculate_conversation())
    assert contents(await ctx.context()) == ["continue", "okay"]
    # With room for the whole first round, the call and both results come back together.
    ctx.budget = Budget(max_tokens=10)
    assert await ctx.context() == calculate_conversation()


async def test_window_under_budget_returns_everything() -> None:
    ctx = WindowContext(Budget(max_tokens=6))
    await record_all(ctx, [u("u1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3")])
    assert contents(await ctx.context()) == ["u1", "a1", "u2", "a2", "u3", "a3"]


async def test_window_max_rounds() -> None:
    ctx = WindowContext(Budget(max_rounds=2))
    await record_all(ctx, [u("u1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3")])
    assert contents(await ctx.context()) == ["u2", "a2", "u3", "a3"]


async def test_window_newest_round_always_kept() -> None:
    ctx = WindowContext(Budget(max_tokens=1))
    await record_all(ctx, [u("u1"), u("x" * 400)])
    assert contents(await ctx.context()) == ["x" * 400]


async def test_window_stops_at_first_round_that_does_not_fit() -> None:
    # Rounds of 1, 10 and 1 tokens with room for 3: the 10-token round stops the walk,
    # and the older 1-token round (which would fit) is not reached.
    ctx = WindowContext(Budget(max_tokens=3))
    await record_all(ctx, [u("u1"), u("x" * 40), u("u3")])
    assert contents(await ctx.context()) == ["u3"]


async def test_window_leading_messages_form_a_round() -> None:
    ctx = WindowContext(Budget(max_tokens=4))
    await record_all(ctx, [Message.system("sys"), u("u1"), a("a1"), u("u2"), a("a2")])
    assert contents(await ctx.context()) == ["u1", "a1", "u2", "a2"]
    ctx.budget = Budget(max_tokens=3)
    assert contents(await ctx.context()) == ["u2", "a2"]


async def test_window_drop_only_projects() -> None:
    ctx = WindowContext(Budget(max_tokens=2))
    history = [u("u1"), a("a1"), u("u2"), a("a2")]
    await record_all(ctx, history)
    assert contents(await ctx.context()) == ["u2", "a2"]
    assert ctx.stored() == history
    ctx.budget = Budget()
    assert await ctx.context() == history


async def test_window_protected_rounds_stay_in_chronological_order() -> None:
    ctx = WindowContext(Budget(max_tokens=6))
    await ctx.record_protected(Message.system("rules"))
    await record_all(ctx, [u("u1"), a("a1"), u("u2")])
    await ctx.record_protected(Message.system("skill"))
    await record_all(ctx, [a("a2"), u("u3"), a("a3"), u("u4"), a("a4")])
    # 12 tokens in 5 rounds. The rules round (2 tokens) and the u2 round (4) are
    # protected and the u4 round (2) is newest: 8 tokens, already over 6, so only they stay.
    assert contents(await ctx.context()) == ["rules", "u2", "skill", "a2", "u4", "a4"]
    ctx.budget = Budget(max_tokens=10)  # room for the u3 round (2), then not for u1 (2)
    assert contents(await ctx.context()) == ["rules", "u2", "skill", "a2", "u3", "a3", "u4", "a4"]


async def test_window_protected_round_is_not_moved_first() -> None:
    ctx = WindowContext(Budget(max_tokens=6))
    await record_all(ctx, [u("x" * 40), u("u1"), a("a1")])
    await ctx.record_protected(u("u2"))
    await record_all(ctx, [u("u3"), a("a3")])
    # The 10-token round is dropped; the protected u2 stays between u1 and u3
    # (molo_agent would put it first).
    assert contents(await ctx.context()) == ["u1", "a1", "u2", "u3", "a3"]


async def test_window_protected_rounds_count_against_budget_rounds() -> None:
    ctx = WindowContext(Budget(max_rounds=3))
    await ctx.record_protected(u("p"))
    await record_all(ctx, [u("u1"), u("u2"), u("u3"), u("u4")])
    assert contents(await ctx.context()) == ["p", "u3", "u4"]


async def test_window_context_returns_copy() -> None:
    ctx = WindowContext(Budget())
    await ctx.record(u("x"))
    got = await ctx.context()
    got.append(u("y"))
    assert contents(await ctx.context()) == ["x"]


class FailingCounter:
    def __init__(self) -> None:
        self.fail = False

    def count(self, message: Message) -> int:
        if self.fail:
            raise ConnectionError("counting API unavailable")
        return 1


async def test_failing_counter_makes_record_raise_and_record_nothing() -> None:
    counter = FailingCounter()
    ctx = WindowContext(Budget(max_tokens=10), counter)
    await ctx.record(u("kept"))
    counter.fail = True
    with pytest.raises(ConnectionError):
        await ctx.record(u("lost"))
    with pytest.raises(ConnectionError):
        await ctx.record_protected(u("lost"))
    counter.fail = False
    assert contents(ctx.stored()) == ["kept"]
    assert contents(await ctx.context()) == ["kept"]
    ctx._check()


class BadCounter:
    def __init__(self, value: object) -> None:
        self.value = value

    def count(self, message: Message) -> Any:
        return self.value


@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), (1.0, TypeError), (True, TypeError)]
)
async def test_counter_returning_bad_value_records_nothing(value: object, error: type) -> None:
    ctx = WindowContext(Budget(), BadCounter(value))
    with pytest.raises(error):
        await ctx.record(u("x"))
    assert ctx.stored() == []


async def test_window_record_rejects_non_message() -> None:
    ctx = WindowContext(Budget())
    with pytest.raises(TypeError):
        await ctx.record({"role": "user"})  # type: ignore[arg-type]
    assert ctx.stored() == []


def test_window_rejects_bad_construction() -> None:
    with pytest.raises(TypeError):
        WindowContext(10)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WindowContext(Budget(), object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        WindowContext(Budget(), COUNTER, object())  # type: ignore[arg-type]
    ctx = WindowContext(Budget())
    with pytest.raises(TypeError):
        ctx.budget = None  # type: ignore[assignment]


async def test_cancelled_record_records_nothing() -> None:
    ctx = WindowContext(Budget())
    with trio.CancelScope() as scope:
        scope.cancel()
        await ctx.record(u("x"))
    assert scope.cancelled_caught
    assert ctx.stored() == []


async def test_concurrent_records_all_land() -> None:
    ctx = WindowContext(Budget(max_rounds=1))
    async with trio.open_nursery() as nursery:
        for i in range(200):
            nursery.start_soon(ctx.record, u(f"m{i}"))
    assert sorted(contents(ctx.stored())) == sorted(f"m{i}" for i in range(200))
    ctx._check()


# Property: the window against a direct model of the rule.

_ROUND = st.tuples(
    st.booleans(),  # protected
    st.integers(0, 12),  # user text length
    st.lists(st.integers(0, 12), max_size=2),  # tool call argument lengths
    st.integers(0, 12),  # assistant text length
)


def _model_window(
    rounds: list[list[Message]], protected: list[bool], budget: Budget
) -> list[Message]:
    tokens = [sum(COUNTER.count(m) for m in r) for r in rounds]
    if not budget.exceeded(sum(tokens), len(rounds)):
        return [m for r in rounds for m in r]
    keep = [p for p in protected]
    keep[-1] = True
    used = sum(t for t, k in zip(tokens, keep, strict=True) if k)
    count = sum(keep)
    for i in reversed(range(len(rounds))):
        if keep[i]:
            continue
        if budget.max_tokens is not None and used + tokens[i] > budget.max_tokens:
            break
        if budget.max_rounds is not None and count + 1 > budget.max_rounds:
            break
        keep[i] = True
        used += tokens[i]
        count += 1
    return [m for r, k in zip(rounds, keep, strict=True) if k for m in r]


@settings(max_examples=examples(200), deadline=None)
@given(
    st.lists(_ROUND, min_size=1, max_size=8),
    st.one_of(st.none(), st.integers(0, 40)),
    st.one_of(st.none(), st.integers(0, 6)),
)
def test_window_matches_model(
    spec: list[tuple[bool, int, list[int], int]], max_tokens: int | None, max_rounds: int | None
) -> None:
    budget = Budget(max_tokens=max_tokens, max_rounds=max_rounds)
    rounds: list[list[Message]] = []
    for r, (_, user_len, args, reply_len) in enumerate(spec):
        calls = [ToolCall(id=f"c{r}.{i}", name="t", arguments="x" * n) for i, n in enumerate(args)]
        messages = [u(f"u{r}" + "x" * user_len)]
        if calls:
            messages.append(Message.assistant(tool_calls=calls))
            messages += [Message.tool("r", tool_call_id=c.id) for c in calls]
        messages.append(a("y" * reply_len))
        rounds.append(messages)
    protected = [p for p, *_ in spec]

    async def main() -> list[Message]:
        ctx = WindowContext(budget)
        for messages, p in zip(rounds, protected, strict=True):
            await ctx.record_protected(messages[0]) if p else await ctx.record(messages[0])
            await record_all(ctx, messages[1:])
        ctx._check()
        return await ctx.context()

    got = trio.run(main)
    assert got == _model_window(rounds, protected, budget)
    # Every tool result in the window follows the assistant message that called it.
    for i, m in enumerate(got):
        if m.role is Role.TOOL:
            callers = [x for x in got[:i] if m.tool_call_id in {c.id for c in x.tool_calls}]
            assert len(callers) == 1


def test_keep_rounds_empty() -> None:
    assert keep_rounds([], 0, 0) == []


# ---------------------------------------------------------------------------
# SummarizeStrategy


class ScriptedProvider:
    """Replies from a script (a str reply, or an exception to raise); keeps the requests."""

    def __init__(self, *replies: str | Exception) -> None:
        self.replies = list(replies)
        self.requests: list[list[Message]] = []

    async def __call__(self, messages: list[Message]) -> Message:
        await trio.lowlevel.checkpoint()
        self.requests.append(list(messages))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Message.assistant(reply)


def summary(text: str) -> Message:
    return Message.system("Summary of prior context:\n" + text)


def five_rounds() -> list[Message]:
    return [m for i in range(1, 6) for m in (u(f"u{i}"), a(f"a{i}"))]


async def test_summarize_replaces_older_rounds_and_stores_the_summary() -> None:
    provider = ScriptedProvider("S1")
    ctx = WindowContext(Budget(max_tokens=8), strategy=SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    # 10 tokens > 8; 4 reserved, so 4 tokens of verbatim rounds: u4 and u5.
    expected = [summary("S1"), u("u4"), a("a4"), u("u5"), a("a5")]
    assert await ctx.context() == expected
    assert ctx.stored() == expected
    assert len(provider.requests) == 1
    system, user = provider.requests[0]
    assert system.role is Role.SYSTEM
    assert "at most 4 tokens" in system.content
    assert user == u(
        "Conversation to summarize:\nuser: u1\nassistant: a1\nuser: u2\nassistant: a2\n"
        "user: u3\nassistant: a3"
    )
    # Stored, so not redone.
    assert await ctx.context() == expected
    assert len(provider.requests) == 1
    ctx._check()


async def test_summarize_feeds_previous_summary_back_and_merges() -> None:
    provider = ScriptedProvider("S1", "S2")
    ctx = WindowContext(Budget(max_tokens=8), strategy=SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    await ctx.context()
    await record_all(ctx, [u("u6"), a("a6")])
    expected = [summary("S2"), u("u5"), a("a5"), u("u6"), a("a6")]
    assert await ctx.context() == expected
    assert ctx.stored() == expected
    assert provider.requests[1][1] == u(
        "Previous summary:\nS1\n\nConversation to summarize:\nuser: u4\nassistant: a4"
    )


async def test_summarize_under_budget_makes_no_call() -> None:
    provider = ScriptedProvider()
    ctx = WindowContext(Budget(max_tokens=10), strategy=SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    assert await ctx.context() == five_rounds()
    assert provider.requests == []


async def test_summarize_nothing_older_makes_no_call() -> None:
    provider = ScriptedProvider()
    ctx = WindowContext(Budget(max_tokens=2), strategy=SummarizeStrategy(provider, 4))
    await ctx.record(u("x" * 100))
    assert contents(await ctx.context()) == ["x" * 100]
    assert provider.requests == []


async def test_summarize_transcript_shows_reasoning_calls_and_results() -> None:
    provider = ScriptedProvider("S")
    ctx = WindowContext(Budget(max_tokens=3), strategy=SummarizeStrategy(provider, 0))
    await record_all(ctx, calculate_conversation()[:4])
    await ctx.record(Message.assistant("two\nand four", reasoning="easy"))
    await record_all(ctx, [u("next"), a("ok")])
    assert await ctx.context() == [summary("S"), u("next"), a("ok")]
    assert provider.requests[0][1].content == (
        "Conversation to summarize:\n"
        "user: calculate\n"
        "assistant calls calc [c1]: 1+1\n"
        "assistant calls calc [c2]: 2+2\n"
        "tool result [c1]: 2\n"
        "tool result [c2]: 4\n"
        "assistant (reasoning): easy\n"
        "assistant: two\\nand four"
    )


@pytest.mark.parametrize("failure", [RuntimeError("provider down"), "   \n"])
async def test_summarize_failure_falls_back_to_drop_and_retries(
    failure: str | Exception, caplog: pytest.LogCaptureFixture
) -> None:
    provider = ScriptedProvider(failure, "S1")
    ctx = WindowContext(Budget(max_tokens=8), strategy=SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    with caplog.at_level(logging.WARNING, logger="actormem.context"):
        got = await ctx.context()
    # Dropping with the full budget of 8: four rounds of 2 tokens.
    assert contents(got) == ["u2", "a2", "u3", "a3", "u4", "a4", "u5", "a5"]
    assert ctx.stored() == five_rounds()
    assert [r.getMessage() for r in caplog.records] == [
        "summarizing 3 rounds failed; dropping them for this call instead"
    ]
    # The next call tries again.
    assert await ctx.context() == [summary("S1"), u("u4"), a("a4"), u("u5"), a("a5")]
    assert len(provider.requests) == 2


async def test_summarize_counter_failure_on_summary_falls_back() -> None:
    class PickyCounter:
        def count(self, message: Message) -> int:
            if message.role is Role.SYSTEM:
                raise ValueError("cannot count summaries")
            return COUNTER.count(message)

    provider = ScriptedProvider("S1")
    ctx = WindowContext(Budget(max_tokens=8), PickyCounter(), SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    assert contents(await ctx.context()) == ["u2", "a2", "u3", "a3", "u4", "a4", "u5", "a5"]
    assert ctx.stored() == five_rounds()


async def test_summarize_keeps_protected_rounds_in_place() -> None:
    provider = ScriptedProvider("S1")
    ctx = WindowContext(Budget(max_tokens=10), strategy=SummarizeStrategy(provider, 4))
    await ctx.record_protected(Message.system("rules"))
    await record_all(ctx, [u("u1"), a("a1")])
    await ctx.record_protected(u("skill"))
    await record_all(ctx, [a("ok"), u("u3"), a("a3"), u("u4"), a("a4"), u("u5"), a("a5")])
    # rules 1 + skill round 3 + u5 round 2 = 6 of 10 - 4 reserved: u4 and u3 do not fit.
    expected = [
        Message.system("rules"),
        summary("S1"),
        u("skill"),
        a("ok"),
        u("u5"),
        a("a5"),
    ]
    assert await ctx.context() == expected
    assert ctx.stored() == expected
    assert provider.requests[0][1].content == (
        "Conversation to summarize:\nuser: u1\nassistant: a1\nuser: u3\nassistant: a3\n"
        "user: u4\nassistant: a4"
    )
    ctx._check()


async def test_summarize_with_round_budget() -> None:
    provider = ScriptedProvider("S1")
    ctx = WindowContext(Budget(max_rounds=3), strategy=SummarizeStrategy(provider))
    await record_all(ctx, five_rounds())
    expected = [summary("S1"), u("u4"), a("a4"), u("u5"), a("a5")]
    assert await ctx.context() == expected
    assert await ctx.context() == expected
    assert len(provider.requests) == 1


async def test_summarize_keeps_messages_recorded_while_it_waits() -> None:
    release = trio.Event()

    async def slow_provider(messages: list[Message]) -> Message:
        await release.wait()
        return Message.assistant("S1")

    ctx = WindowContext(Budget(max_tokens=8), strategy=SummarizeStrategy(slow_provider, 4))
    await record_all(ctx, five_rounds())
    results: list[list[Message]] = []

    async def fetch() -> None:
        results.append(await ctx.context())

    async with trio.open_nursery() as nursery:
        nursery.start_soon(fetch)
        await trio.testing.wait_all_tasks_blocked()
        await ctx.record(u("u6"))
        release.set()
    assert results == [[summary("S1"), u("u4"), a("a4"), u("u5"), a("a5")]]
    assert ctx.stored() == [summary("S1"), u("u4"), a("a4"), u("u5"), a("a5"), u("u6")]
    ctx._check()


async def test_concurrent_context_calls_summarize_once() -> None:
    provider = ScriptedProvider("S1")
    ctx = WindowContext(Budget(max_tokens=8), strategy=SummarizeStrategy(provider, 4))
    await record_all(ctx, five_rounds())
    results: list[list[Message]] = []

    async def fetch() -> None:
        results.append(await ctx.context())

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(fetch)
    expected = [summary("S1"), u("u4"), a("a4"), u("u5"), a("a5")]
    assert results == [expected] * 3
    assert len(provider.requests) == 1


@pytest.mark.parametrize(
    ("args", "error"),
    [
        ((None,), TypeError),
        ((ScriptedProvider(), -1), ValueError),
        ((ScriptedProvider(), 1.0), TypeError),
    ],
)
def test_summarize_rejects_bad_arguments(args: tuple[Any, ...], error: type) -> None:
    with pytest.raises(error):
        SummarizeStrategy(*args)


# ---------------------------------------------------------------------------
# Custom strategies and their guard rails


class ReplaceStrategy:
    def __init__(self, result: TrimResult) -> None:
        self.result = result

    async def trim(
        self, rounds: Sequence[Round], budget: Budget, counter: TokenCounter
    ) -> TrimResult:
        await trio.lowlevel.checkpoint()
        return self.result


async def test_strategy_cannot_replace_protected_or_missing_rounds() -> None:
    for replaced in [(0,), (5,)]:
        ctx = WindowContext(
            Budget(), strategy=ReplaceStrategy(TrimResult(context=(), replaced=replaced))
        )
        await ctx.record_protected(u("p"))
        await ctx.record(u("x"))
        with pytest.raises(ValueError, match="protected|does not exist"):
            await ctx.context()
        assert contents(ctx.stored()) == ["p", "x"]


def test_trim_result_validation() -> None:
    with pytest.raises(ValueError, match="replacement needs"):
        TrimResult(context=(), replacement=(u("x"),))
    with pytest.raises(ValueError, match="distinct round indices"):
        TrimResult(context=(), replaced=(1, 1))
    with pytest.raises(ValueError, match="distinct round indices"):
        TrimResult(context=(), replaced=(-1,))
    with pytest.raises(TypeError):
        TrimResult(context=("x",))  # type: ignore[arg-type]
