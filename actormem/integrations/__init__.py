"""Adapters that let agent frameworks use an actormem memory (docs/integrations.md).

Each lives in its own module and needs its framework's package (an optional extra):
``actormem.integrations.mcp`` (``actormem[mcp]``), ``actormem.integrations.langchain``
(``actormem[langchain]``), ``actormem.integrations.langgraph`` (``actormem[langgraph]``).
"""
