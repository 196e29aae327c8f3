"""Profile memory for agents: identity facts in the system prompt, other facts by recall.

Source: the structured knowledge ``Memory`` trait of the seed documents (``get``,
``entries``, ``set``, ``remove``, ``compile``, ``store``, ``recall``,
``compile_relevant``). See ``docs/agent.md`` for the recall score's scale.
"""

from __future__ import annotations

from .agent._profile import PROFILE_PREFIXES as PROFILE_PREFIXES
from .agent._profile import ProfileEntry as ProfileEntry
from .agent._profile import ProfileMemory as ProfileMemory
from .agent._profile import RecallOptions as RecallOptions

__all__ = ["PROFILE_PREFIXES", "ProfileEntry", "ProfileMemory", "RecallOptions"]
