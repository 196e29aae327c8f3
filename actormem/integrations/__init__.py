"""Adapters of actormem to agent frameworks (LangGraph, LangChain); each needs its extra."""
