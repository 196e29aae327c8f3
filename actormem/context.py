"""Conversation windows for agent loops: which messages the model sees each turn.

Source: molo_agent's ``memory`` module (``Memory``, ``InMemoryMemory``, ``WindowMemory``,
``Budget``, ``CharTokenCounter``, ``WindowDrop``, ``SummarizeStrategy``). See
``docs/agent.md`` for the token counting rule and the round rule.
"""

from __future__ import annotations

from .agent._context_message import Message as Message
from .agent._context_message import Role as Role
from .agent._context_message import ToolCall as ToolCall
from .agent._context_summarize import SUMMARY_PREFIX as SUMMARY_PREFIX
from .agent._context_summarize import Provider as Provider
from .agent._context_summarize import SummarizeStrategy as SummarizeStrategy
from .agent._context_window import Budget as Budget
from .agent._context_window import CharTokenCounter as CharTokenCounter
from .agent._context_window import ContextMemory as ContextMemory
from .agent._context_window import InMemoryContext as InMemoryContext
from .agent._context_window import Round as Round
from .agent._context_window import TokenCounter as TokenCounter
from .agent._context_window import TrimResult as TrimResult
from .agent._context_window import TrimStrategy as TrimStrategy
from .agent._context_window import WindowContext as WindowContext
from .agent._context_window import WindowDrop as WindowDrop
from .agent._context_window import keep_rounds as keep_rounds

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
