"""actormem: a concurrent memory engine for LLM agents, built on trio.

One owner task applies every write in order; reads score an O(1) copy-on-write snapshot
in the caller's task. See ``docs/design.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._util import import_pause

# The collector paused while the package's modules load (_util._PAUSE_GC_ON_IMPORT).
with import_pause():
    from ._engine.lifecycle import open_memory as open_memory
    from ._engine.lifecycle import serve_memory as serve_memory
    from ._engine.memory import DEFAULT_QUEUE_SIZE as DEFAULT_QUEUE_SIZE
    from ._engine.memory import Memory as Memory
    from ._engine.replica import ReplicaOptions as ReplicaOptions
    from ._engine.snapshot import MAX_QUERY_CHARS as MAX_QUERY_CHARS
    from ._engine.snapshot import Snapshot as Snapshot
    from ._engine.state import DEFAULT_HALF_LIFE as DEFAULT_HALF_LIFE
    from ._entry import MAX_KEY_CHARS as MAX_KEY_CHARS
    from ._entry import MAX_MEMORY_CHARS as MAX_MEMORY_CHARS
    from ._entry import MAX_TTL as MAX_TTL
    from ._entry import MemoryCategory as MemoryCategory
    from ._entry import MemoryEntry as MemoryEntry
    from ._entry import ScoredEntry as ScoredEntry
    from ._errors import ActorMemError as ActorMemError
    from ._errors import EmbeddingError as EmbeddingError
    from ._errors import InvalidEntryError as InvalidEntryError
    from ._errors import InvalidQueryError as InvalidQueryError
    from ._errors import RemoteError as RemoteError
    from ._errors import StorageError as StorageError
    from ._errors import TransportError as TransportError
    from ._index.dense import DenseScorer as DenseScorer
    from ._index.dense import Embedder as Embedder
    from ._index.dense import FunctionEmbedder as FunctionEmbedder
    from ._index.dense import wordllama_embedder as wordllama_embedder
    from ._index.wordoverlap import WordOverlapScorer as WordOverlapScorer
    from ._json import MAX_VALUE_BYTES as MAX_VALUE_BYTES
    from ._json import JsonObject as JsonObject
    from ._stats import ConsolidationStats as ConsolidationStats
    from ._stats import MemoryStatistics as MemoryStatistics
    from ._storage.jsonl import entry_from_json as entry_from_json
    from ._storage.jsonl import entry_to_json as entry_to_json
    from ._storage.sqlite import Durability as Durability
    from .agent import MEMORY_HEADER as MEMORY_HEADER
    from .agent import LoopMemory as LoopMemory
    from .agent import MemoryHooks as MemoryHooks
    from .agent import format_trajectory as format_trajectory

del import_pause

if TYPE_CHECKING:
    from ._index.bm25 import BM25Scorer as BM25Scorer
    from ._index.hybrid import HybridScorer as HybridScorer
    from ._index.tokenize import Tokenizer as Tokenizer
    from ._index.tokenize import stop_words as stop_words
    from .agent import RunResult as RunResult
    from .agent import run_agent as run_agent
    from .client import HostedMemory as HostedMemory
    from .context import Budget as Budget
    from .context import CharTokenCounter as CharTokenCounter
    from .context import ContextMemory as ContextMemory
    from .context import InMemoryContext as InMemoryContext
    from .context import Message as Message
    from .context import Role as Role
    from .context import Round as Round
    from .context import SummarizeStrategy as SummarizeStrategy
    from .context import TokenCounter as TokenCounter
    from .context import ToolCall as ToolCall
    from .context import TrimResult as TrimResult
    from .context import TrimStrategy as TrimStrategy
    from .context import WindowContext as WindowContext
    from .context import WindowDrop as WindowDrop
    from .profile import ProfileEntry as ProfileEntry
    from .profile import ProfileMemory as ProfileMemory
    from .profile import RecallOptions as RecallOptions

__version__ = "0.1.0"

#: Public names imported on first access (module ``__getattr__``), not by ``import
#: actormem``: the hosted client (anyio's thread layer), the context window and profile
#: memory and the agent loop (their attrs classes: each class made compiles its methods)
#: are what a process that only opens memories (``actormem swarm``, the engine's users)
#: never needs; so are BM25, the hybrid scorer and the tokenizer (the BM25 index and its
#: search, the date parser), which a word-overlap memory never loads.
#: ``from actormem import X`` and ``actormem.X`` work as before.
_LAZY = {
    "HostedMemory": ".client",
    "Budget": ".context",
    "CharTokenCounter": ".context",
    "ContextMemory": ".context",
    "InMemoryContext": ".context",
    "Message": ".context",
    "Role": ".context",
    "Round": ".context",
    "SummarizeStrategy": ".context",
    "TokenCounter": ".context",
    "ToolCall": ".context",
    "TrimResult": ".context",
    "TrimStrategy": ".context",
    "WindowContext": ".context",
    "WindowDrop": ".context",
    "ProfileEntry": ".profile",
    "ProfileMemory": ".profile",
    "RecallOptions": ".profile",
    "RunResult": ".agent",
    "run_agent": ".agent",
    "BM25Scorer": "._index.bm25",
    "HybridScorer": "._index.hybrid",
    "Tokenizer": "._index.tokenize",
    "stop_words": "._index.tokenize",
}


#: The public submodules the names of :data:`_LAZY` come from: attributes of the package
#: after ``import actormem`` before those names were lazy (``actormem.client.Client``),
#: so imported on first access too.
_LAZY_MODULES = frozenset({"client", "context", "profile"})


def __getattr__(name: str) -> Any:
    """A name of :data:`_LAZY` or :data:`_LAZY_MODULES`: imported on first access, then
    kept in the module."""
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)  # the import sets the attribute
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "MEMORY_HEADER",
    "Budget",
    "CharTokenCounter",
    "ContextMemory",
    "InMemoryContext",
    "LoopMemory",
    "MemoryHooks",
    "Message",
    "ProfileEntry",
    "ProfileMemory",
    "RecallOptions",
    "Role",
    "Round",
    "RunResult",
    "SummarizeStrategy",
    "TokenCounter",
    "ToolCall",
    "TrimResult",
    "TrimStrategy",
    "WindowContext",
    "WindowDrop",
    "format_trajectory",
    "run_agent",
    "DEFAULT_HALF_LIFE",
    "DEFAULT_QUEUE_SIZE",
    "MAX_KEY_CHARS",
    "MAX_TTL",
    "MAX_MEMORY_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_VALUE_BYTES",
    "ActorMemError",
    "BM25Scorer",
    "DenseScorer",
    "Embedder",
    "FunctionEmbedder",
    "HybridScorer",
    "Tokenizer",
    "stop_words",
    "wordllama_embedder",
    "ConsolidationStats",
    "Durability",
    "EmbeddingError",
    "HostedMemory",
    "InvalidEntryError",
    "InvalidQueryError",
    "JsonObject",
    "Memory",
    "MemoryCategory",
    "MemoryEntry",
    "MemoryStatistics",
    "RemoteError",
    "ReplicaOptions",
    "ScoredEntry",
    "Snapshot",
    "StorageError",
    "TransportError",
    "WordOverlapScorer",
    "entry_from_json",
    "entry_to_json",
    "open_memory",
    "serve_memory",
]
