"""The message values of a conversation: :class:`Role`, :class:`ToolCall`, :class:`Message`.

The shape follows molo_agent's ``Message``: system, user, assistant (with optional
reasoning and tool calls) and tool-result messages. Messages are immutable values; the
constructors check that each role carries only the fields that belong to it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any

import attrs

from .._util import Final, sequence_of

__all__ = ["Message", "Role", "ToolCall"]


class Role(enum.Enum):
    """Who wrote a :class:`Message`."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    #: The result of one tool call, answering an assistant's :class:`ToolCall` by id.
    TOOL = "tool"


def _check_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if type(value) is not str:
        raise TypeError(f"{attribute.name} must be str, not {type(value).__name__}")


def _check_nonempty_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _check_str(instance, attribute, value)
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


@attrs.frozen(kw_only=True, slots=True)
class ToolCall(metaclass=Final):
    """One tool invocation requested by an assistant message.

    Attributes:
        id: Non-empty id that the answering tool message repeats as ``tool_call_id``.
        name: Non-empty tool name.
        arguments: The arguments as the model wrote them, normally a JSON object text
            (``'{"path":"a"}'``). Counted by :class:`~actormem.context.CharTokenCounter`.

    Raises:
        TypeError: A field is not a str.
        ValueError: ``id`` or ``name`` is empty.
    """

    id: str = attrs.field(validator=_check_nonempty_str)
    name: str = attrs.field(validator=_check_nonempty_str)
    arguments: str = attrs.field(default="{}", validator=_check_str)


def _convert_role(value: object) -> Role:
    if isinstance(value, Role):
        return value
    if isinstance(value, str):
        try:
            return Role(value)
        except ValueError:
            pass
        raise ValueError(f"unknown role {value!r}; expected one of {[r.value for r in Role]}")
    raise TypeError(f"role must be a Role or str, not {type(value).__name__}")


def _convert_calls(value: Iterable[ToolCall]) -> tuple[ToolCall, ...]:
    calls = sequence_of(value, "tool_calls", "ToolCall")
    for call in calls:
        if not isinstance(call, ToolCall):
            raise TypeError(f"tool_calls must hold ToolCall, not {type(call).__name__}")
    return calls


def _check_optional_str(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None:
        _check_str(instance, attribute, value)


@attrs.frozen(kw_only=True, slots=True)
class Message(metaclass=Final):
    """One message of a conversation (molo_agent's ``Message``). Immutable.

    Build one with the role constructors :meth:`system`, :meth:`user`, :meth:`assistant`
    and :meth:`tool`, or with the keyword constructor.

    Attributes:
        role: A :class:`Role` (a role name such as ``"user"`` is converted).
        content: The text, possibly empty.
        reasoning: Assistant only: the model's reasoning text, or ``None``.
        tool_calls: Assistant only: a tuple of :class:`ToolCall`, ``()`` for none.
        tool_call_id: Tool only, and required there: the id of the answered call.

    Raises:
        TypeError: A field has the wrong type.
        ValueError: An unknown role name; ``reasoning`` or ``tool_calls`` on a
            non-assistant message; a tool message without a non-empty ``tool_call_id``;
            ``tool_call_id`` on a non-tool message; two tool calls sharing an id.
    """

    role: Role = attrs.field(converter=_convert_role)
    content: str = attrs.field(default="", validator=_check_str)
    reasoning: str | None = attrs.field(default=None, validator=_check_optional_str)
    tool_calls: tuple[ToolCall, ...] = attrs.field(default=(), converter=_convert_calls)
    tool_call_id: str | None = attrs.field(default=None, validator=_check_optional_str)

    def __attrs_post_init__(self) -> None:
        if self.role is not Role.ASSISTANT:
            if self.reasoning is not None:
                raise ValueError(f"only assistant messages carry reasoning, not {self.role.value}")
            if self.tool_calls:
                raise ValueError(f"only assistant messages carry tool calls, not {self.role.value}")
        ids = [call.id for call in self.tool_calls]
        if len(set(ids)) != len(ids):
            raise ValueError(f"tool call ids must be distinct, got {ids}")
        if self.role is Role.TOOL:
            if not self.tool_call_id:
                raise ValueError("a tool message needs a non-empty tool_call_id")
        elif self.tool_call_id is not None:
            raise ValueError(f"only tool messages carry tool_call_id, not {self.role.value}")

    @classmethod
    def system(cls, content: str) -> Message:
        """A system message."""
        return cls(role=Role.SYSTEM, content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        """A user message; it opens a new round."""
        return cls(role=Role.USER, content=content)

    @classmethod
    def assistant(
        cls,
        content: str = "",
        *,
        reasoning: str | None = None,
        tool_calls: Iterable[ToolCall] = (),
    ) -> Message:
        """An assistant message, optionally with reasoning and tool calls."""
        return cls(role=Role.ASSISTANT, content=content, reasoning=reasoning, tool_calls=tool_calls)

    @classmethod
    def tool(cls, content: str, *, tool_call_id: str) -> Message:
        """The result of the tool call whose id is ``tool_call_id``."""
        return cls(role=Role.TOOL, content=content, tool_call_id=tool_call_id)
