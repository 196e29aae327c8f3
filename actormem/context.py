"""Conversation windows for agent loops: which messages the model sees each turn.

Source: molo_agent's ``memory`` module (``Memory``, ``InMemoryMemory``, ``WindowMemory``,
``Budget``, ``CharTokenCounter``, ``WindowDrop``, ``SummarizeStrategy``). See
``docs/agent.md`` for the token counting rule and the round rule.
"""

from __future__ import annotations

from ._context_message import Message as Message
from ._context_message import Role as Role
from ._context_message import ToolCall as ToolCall
from ._context_summarize import SUMMARY_PREFIX as SUMMARY_PREFIX
from ._context_summarize import Provider as Provider
from ._context_summarize import SummarizeStrategy as SummarizeStrategy
from ._context_window import Budget as Budget
from ._context_window import CharTokenCounter as CharTokenCounter
from ._context_window import ContextMemory as ContextMemory
from ._context_window import InMemoryContext as InMemoryContext
from ._context_window import Round as Round
from ._context_window import TokenCounter as TokenCounter
from ._context_window import TrimResult as TrimResult
from ._context_window import TrimStrategy as TrimStrategy
from ._context_window import WindowContext as WindowContext
from ._context_window import WindowDrop as WindowDrop
from ._context_window import keep_rounds as keep_rounds

__all__ = [
    "SUMMARY_PREFIX",
    "Budget",
    "CharTokenCounter",
    "ContextMemory",
    "InMemoryContext",
    "Message",
    "Provider",
    "Role",
    "Round",
    "SummarizeStrategy",
    "TokenCounter",
    "ToolCall",
    "TrimResult",
    "TrimStrategy",
    "WindowContext",
    "WindowDrop",
    "keep_rounds",
]
