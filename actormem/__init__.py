"""actormem: a concurrent memory engine for LLM agents, built on trio.

One owner task applies every write in order; reads score an O(1) copy-on-write snapshot
in the caller's task. See ``docs/design.md``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    # What ``import actormem`` exposes; loaded on first access (module ``__getattr__``,
    # :data:`_EAGER`), so that type checkers see every name while the import stays light.
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
    from ._entry import MAX_NAMESPACE_DEPTH as MAX_NAMESPACE_DEPTH
    from ._entry import MAX_SEGMENT_CHARS as MAX_SEGMENT_CHARS
    from ._entry import MAX_TAG_CHARS as MAX_TAG_CHARS
    from ._entry import MAX_TAGS as MAX_TAGS
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
    from ._index.bm25 import BM25Scorer as BM25Scorer
    from ._index.dense import DenseScorer as DenseScorer
    from ._index.dense import Embedder as Embedder
    from ._index.dense import FunctionEmbedder as FunctionEmbedder
    from ._index.dense import wordllama_embedder as wordllama_embedder
    from ._index.hybrid import HybridScorer as HybridScorer
    from ._index.tokenize import Tokenizer as Tokenizer
    from ._index.tokenize import stop_words as stop_words
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
    from .agent import RunResult as RunResult
    from .agent import format_trajectory as format_trajectory
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

#: Public names ``import actormem`` used to load at once: loaded together, in this order,
#: on the first access of any of them (or of any other attribute the package had after
#: those imports, e.g. the submodule ``actormem.agent``), with the collector paused
#: (:func:`~actormem._util.import_pause`). ``import actormem`` itself imports nothing
#: heavy, so the command line (:func:`actormem.cli.run_command`) can set its environment
#: before numpy is first imported; ``from actormem import X`` and ``actormem.X`` give the
#: same objects as before.
_EAGER = {
    "open_memory": "._engine.lifecycle",
    "serve_memory": "._engine.lifecycle",
    "DEFAULT_QUEUE_SIZE": "._engine.memory",
    "Memory": "._engine.memory",
    "ReplicaOptions": "._engine.replica",
    "MAX_QUERY_CHARS": "._engine.snapshot",
    "Snapshot": "._engine.snapshot",
    "DEFAULT_HALF_LIFE": "._engine.state",
    "MAX_KEY_CHARS": "._entry",
    "MAX_MEMORY_CHARS": "._entry",
    "MAX_NAMESPACE_DEPTH": "._entry",
    "MAX_SEGMENT_CHARS": "._entry",
    "MAX_TAG_CHARS": "._entry",
    "MAX_TAGS": "._entry",
    "MAX_TTL": "._entry",
    "MemoryCategory": "._entry",
    "MemoryEntry": "._entry",
    "ScoredEntry": "._entry",
    "ActorMemError": "._errors",
    "EmbeddingError": "._errors",
    "InvalidEntryError": "._errors",
    "InvalidQueryError": "._errors",
    "RemoteError": "._errors",
    "StorageError": "._errors",
    "TransportError": "._errors",
    "DenseScorer": "._index.dense",
    "Embedder": "._index.dense",
    "FunctionEmbedder": "._index.dense",
    "wordllama_embedder": "._index.dense",
    "WordOverlapScorer": "._index.wordoverlap",
    "MAX_VALUE_BYTES": "._json",
    "JsonObject": "._json",
    "ConsolidationStats": "._stats",
    "MemoryStatistics": "._stats",
    "entry_from_json": "._storage.jsonl",
    "entry_to_json": "._storage.jsonl",
    "Durability": "._storage.sqlite",
    "MEMORY_HEADER": ".agent",
    "LoopMemory": ".agent",
    "MemoryHooks": ".agent",
    "format_trajectory": ".agent",
}
_eager_loaded = False

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
    """A name of :data:`_EAGER`, :data:`_LAZY` or :data:`_LAZY_MODULES`, or an attribute
    the eager imports set (a submodule): imported on first access, then kept in the
    module. O(1) after the first access."""
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f".{name}", __name__)  # the import sets the attribute
    where = _LAZY.get(name)
    if where is not None:
        value = getattr(importlib.import_module(where, __name__), name)
        globals()[name] = value
        return value
    if not _eager_loaded and not (name.startswith("__") and name.endswith("__")):
        _load_eager()
        if name in globals():
            return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load_eager() -> None:
    """Import every module of :data:`_EAGER` (in its order, the collector paused) and
    set its names in the package. Once per process; O(the imports)."""
    global _eager_loaded
    import importlib

    from ._util import import_pause

    with import_pause():
        values = {
            name: getattr(importlib.import_module(where, __name__), name)
            for name, where in _EAGER.items()
        }
    globals().update(values)
    _eager_loaded = True


def __dir__() -> list[str]:
    return sorted({*globals(), *_EAGER, *_LAZY})


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
    "MAX_NAMESPACE_DEPTH",
    "MAX_QUERY_CHARS",
    "MAX_SEGMENT_CHARS",
    "MAX_TAG_CHARS",
    "MAX_TAGS",
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
